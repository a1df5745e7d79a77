//! Loading an object's DWARF for line lookups: only the sections the line
//! tables (`lines`) read, compressed ones inflated straight into their
//! final buffers, and `.debug_info` (the largest, of which only each
//! unit's root entry is read) one unit at a time from the file
//! ([`Units`]), so that only one unit is in memory at once.

use std::borrow::Cow;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use flate2::{Decompress, FlushDecompress, Status};
use gimli::SectionId;
use object::{CompressionFormat, Object, ObjectSection, ReadRef};

/// The reader of the DWARF sections.
pub(super) type Reader = gimli::EndianArcSlice<gimli::RunTimeEndian>;

/// The sections the line tables read besides `.debug_info` (the units'
/// abbreviations and ranges, line programs, strings). Location lists,
/// macros and type units are left out: nothing looks at them.
const NEEDED: [SectionId; 9] = [
    SectionId::DebugAbbrev,
    SectionId::DebugAddr,
    SectionId::DebugAranges,
    SectionId::DebugLine,
    SectionId::DebugLineStr,
    SectionId::DebugRanges,
    SectionId::DebugRngLists,
    SectionId::DebugStr,
    SectionId::DebugStrOffsets,
];

/// The bytes read from the file at a time for [`Units`]: above the
/// allocator's mmap threshold (see `cgx`'s main), so that the buffer goes
/// back to the system once the units are read.
const CHUNK: usize = 256 << 10;

/// An object's DWARF as the line tables load it.
pub(super) struct Sections {
    /// Every section the line tables read but `.debug_info`, which is
    /// empty here.
    pub dwarf: gimli::Dwarf<Reader>,
    /// `.debug_info`, one unit at a time.
    pub units: Units,
}

/// The bytes of one section as the file holds them.
enum Raw<'data> {
    /// Stored as they are.
    Plain(&'data [u8]),
    /// A zlib stream that inflates to this many bytes.
    Zlib(&'data [u8], usize),
    /// Another compression: `object` inflates it.
    Other(object::read::CompressedData<'data>),
}

/// The DWARF sections of `file` (read from `path`) the line tables read.
pub(super) fn sections<'data, R: ReadRef<'data>>(
    file: &object::File<'data, R>,
    path: &Path,
) -> Result<Sections, gimli::Error> {
    let endian = if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let loaded: Vec<(SectionId, Arc<[u8]>)> = NEEDED
        .iter()
        .filter_map(|&id| Some((id, inflate(raw_section(file, id)?))))
        .collect();
    let dwarf = gimli::Dwarf::load(|id| -> Result<Reader, gimli::Error> {
        let bytes = loaded
            .iter()
            .find(|(loaded, _)| *loaded == id)
            .map_or_else(|| Arc::from(&[][..]), |(_, bytes)| bytes.clone());
        Ok(Reader::new(bytes, endian))
    })?;
    Ok(Sections {
        dwarf,
        units: Units::of(file, path, endian)?,
    })
}

/// The section `id` of `file`, if it has one.
fn raw_section<'data, R: ReadRef<'data>>(
    file: &object::File<'data, R>,
    id: SectionId,
) -> Option<Raw<'data>> {
    let section = file.section_by_name(id.name())?;
    let compressed = section.compressed_data().ok()?;
    Some(match compressed.format {
        CompressionFormat::None => Raw::Plain(compressed.data),
        CompressionFormat::Zlib => Raw::Zlib(
            compressed.data,
            usize::try_from(compressed.uncompressed_size).ok()?,
        ),
        _ => Raw::Other(compressed),
    })
}

/// The bytes of a section, empty when it does not inflate.
fn inflate(raw: Raw) -> Arc<[u8]> {
    match raw {
        Raw::Plain(data) => Arc::from(data),
        Raw::Zlib(data, size) => {
            let mut bytes: Arc<[u8]> = std::iter::repeat_n(0, size).collect();
            let Some(out) = Arc::get_mut(&mut bytes) else {
                return Arc::from(&[][..]);
            };
            let mut zlib = Decompress::new(true);
            match zlib.decompress(data, out, FlushDecompress::Finish) {
                Ok(Status::StreamEnd) if zlib.total_out() == size as u64 => bytes,
                _ => Arc::from(&[][..]),
            }
        }
        Raw::Other(compressed) => compressed
            .decompress()
            .map_or_else(|_| Arc::from(&[][..]), |data: Cow<[u8]>| Arc::from(&*data)),
    }
}

/// `.debug_info`, read one unit at a time ([`Units::next_unit`]).
pub(super) struct Units {
    source: Source,
    /// The section's size.
    size: u64,
    /// The section offset of the next unit.
    offset: u64,
    /// The section offset of the next byte [`Units::read`] gives.
    position: u64,
    endian: gimli::RunTimeEndian,
}

/// Where [`Units`] reads the section's bytes.
enum Source {
    /// All of them, in memory (an object without the section, or with a
    /// compression other than zlib).
    Whole(Arc<[u8]>),
    /// The file, from file offset `at` on, up to `end`, as they are.
    Stored { file: File, at: u64, end: u64 },
    /// A zlib stream of them in the file.
    Deflated(Box<Deflated>),
}

/// A section's zlib stream in a file, inflated [`CHUNK`] bytes at a time
/// (not unit by unit): those inflated but not yet given are
/// `inflated[given..filled]`.
struct Deflated {
    stream: Stream,
    zlib: Decompress,
    inflated: Box<[u8]>,
    given: usize,
    filled: usize,
}

/// A zlib stream in a file: read from `at` up to `end`, [`CHUNK`] bytes at
/// a time into `input`, of which those from `used` on are not inflated yet.
struct Stream {
    file: File,
    at: u64,
    end: u64,
    input: Box<[u8]>,
    used: usize,
}

impl Units {
    /// The `.debug_info` of `file`, read again from `path` as it is needed.
    fn of<'data, R: ReadRef<'data>>(
        file: &object::File<'data, R>,
        path: &Path,
        endian: gimli::RunTimeEndian,
    ) -> Result<Units, gimli::Error> {
        let whole = |bytes: Arc<[u8]>| Units {
            size: bytes.len() as u64,
            source: Source::Whole(bytes),
            offset: 0,
            position: 0,
            endian,
        };
        let Some(section) = file.section_by_name(SectionId::DebugInfo.name()) else {
            return Ok(whole(Arc::from(&[][..])));
        };
        if section.file_range().is_none() {
            return Ok(whole(Arc::from(&[][..])));
        }
        let range = section
            .compressed_file_range()
            .map_err(|_| gimli::Error::Io)?;
        let zlib = match range.format {
            CompressionFormat::None => None,
            CompressionFormat::Zlib => Some(Decompress::new(true)),
            _ => {
                let raw = section.compressed_data().map_err(|_| gimli::Error::Io)?;
                return Ok(whole(inflate(Raw::Other(raw))));
            }
        };
        let file = File::open(path).map_err(|_| gimli::Error::Io)?;
        let end = range.offset.saturating_add(range.compressed_size);
        Ok(Units::in_file(
            file,
            range.offset..end,
            zlib,
            range.uncompressed_size,
            endian,
        ))
    }

    /// The section of `size` bytes stored at `stored` in `file`, deflated
    /// by `zlib` or as it is.
    fn in_file(
        file: File,
        stored: std::ops::Range<u64>,
        zlib: Option<Decompress>,
        size: u64,
        endian: gimli::RunTimeEndian,
    ) -> Units {
        let (at, end) = (stored.start, stored.end);
        let source = match zlib {
            None => Source::Stored { file, at, end },
            Some(zlib) => Source::Deflated(Box::new(Deflated {
                stream: Stream {
                    file,
                    at,
                    end,
                    input: Box::default(),
                    used: 0,
                },
                zlib,
                inflated: Box::default(),
                given: 0,
                filled: 0,
            })),
        };
        Units {
            source,
            size,
            offset: 0,
            position: 0,
            endian,
        }
    }

    /// The next unit: its offset in the section and its bytes (from its
    /// length field on), `None` after the last. Fails when the section
    /// ends inside a unit, or cannot be read or inflated.
    pub(super) fn next_unit(
        &mut self,
    ) -> Result<Option<(gimli::DebugInfoOffset, Reader)>, gimli::Error> {
        if self.offset >= self.size {
            return Ok(None);
        }
        // The unit's length field: 4 bytes, or 12 in 64-bit DWARF.
        let mut length = [0u8; 12];
        self.read(&mut length[..4])?;
        let field = match length[..4] == [0xff; 4] {
            true => 12,
            false => 4,
        };
        self.read(&mut length[4..field])?;
        let (rest, _) = gimli::Reader::read_initial_length(&mut gimli::EndianSlice::new(
            &length[..field],
            self.endian,
        ))?;
        let total = (rest as u64)
            .checked_add(field as u64)
            .filter(|&total| total <= self.size - self.offset)
            .ok_or(gimli::Error::UnexpectedEof(gimli::ReaderOffsetId(
                self.offset,
            )))?;
        let total = usize::try_from(total).map_err(|_| gimli::Error::UnsupportedOffset)?;
        let mut bytes = vec![0u8; total];
        bytes[..field].copy_from_slice(&length[..field]);
        self.read(&mut bytes[field..])?;
        let offset = gimli::DebugInfoOffset(self.offset as usize);
        self.offset += total as u64;
        Ok(Some((offset, Reader::new(Arc::from(bytes), self.endian))))
    }

    /// Fills `out` with the section's next bytes.
    fn read(&mut self, out: &mut [u8]) -> Result<(), gimli::Error> {
        let position = self.position;
        let eof = || gimli::Error::UnexpectedEof(gimli::ReaderOffsetId(position));
        match &mut self.source {
            Source::Whole(bytes) => {
                let start = usize::try_from(position).map_err(|_| eof())?;
                let from = bytes.get(start..start + out.len()).ok_or_else(eof)?;
                out.copy_from_slice(from);
            }
            Source::Stored { file, at, end } => {
                if *end - *at < out.len() as u64 {
                    return Err(eof());
                }
                file.read_exact_at(out, *at).map_err(|_| gimli::Error::Io)?;
                *at += out.len() as u64;
            }
            Source::Deflated(deflated) => {
                if !deflated.read(out)? {
                    return Err(eof());
                }
            }
        }
        self.position += out.len() as u64;
        Ok(())
    }
}

impl Deflated {
    /// Fills `out` with the next inflated bytes; false when the stream
    /// ends first.
    fn read(&mut self, out: &mut [u8]) -> Result<bool, gimli::Error> {
        let mut copied = 0;
        while copied < out.len() {
            if self.given == self.filled {
                if self.inflated.is_empty() {
                    self.inflated = vec![0; CHUNK].into_boxed_slice();
                }
                let more = self.stream.inflate(&mut self.zlib, &mut self.inflated)?;
                if more == 0 {
                    return Ok(false);
                }
                (self.given, self.filled) = (0, more);
            }
            let take = (self.filled - self.given).min(out.len() - copied);
            out[copied..copied + take]
                .copy_from_slice(&self.inflated[self.given..self.given + take]);
            self.given += take;
            copied += take;
        }
        Ok(true)
    }
}

impl Stream {
    /// Inflates the next bytes of the stream into `out` with `zlib`: how
    /// many, 0 at its end.
    fn inflate(&mut self, zlib: &mut Decompress, out: &mut [u8]) -> Result<usize, gimli::Error> {
        loop {
            if self.used == self.input.len() {
                let left = usize::try_from(self.end - self.at).unwrap_or(usize::MAX);
                if left == 0 {
                    return Ok(0);
                }
                let mut chunk = std::mem::take(&mut self.input).into_vec();
                chunk.resize(left.min(CHUNK), 0);
                self.file
                    .read_exact_at(&mut chunk, self.at)
                    .map_err(|_| gimli::Error::Io)?;
                self.at += chunk.len() as u64;
                self.input = chunk.into_boxed_slice();
                self.used = 0;
            }
            let (before_in, before_out) = (zlib.total_in(), zlib.total_out());
            let status = zlib
                .decompress(&self.input[self.used..], out, FlushDecompress::None)
                .map_err(|_| gimli::Error::Io)?;
            let taken = (zlib.total_in() - before_in) as usize;
            let given = (zlib.total_out() - before_out) as usize;
            self.used += taken;
            let stuck = taken == 0 && self.used < self.input.len();
            if given > 0 || status == Status::StreamEnd || stuck {
                return Ok(given);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    /// Three units (a 32-bit length, one longer than a read from the file,
    /// a 64-bit length), as a section's bytes.
    fn section() -> (Vec<u8>, Vec<usize>) {
        let mut bytes = Vec::new();
        let mut starts = Vec::new();
        for (long, body) in [(false, 100), (false, CHUNK * 2 + 3), (true, 10)] {
            starts.push(bytes.len());
            if long {
                bytes.extend(0xffff_ffffu32.to_le_bytes());
                bytes.extend((body as u64).to_le_bytes());
            } else {
                bytes.extend((body as u32).to_le_bytes());
            }
            bytes.extend((0..body).map(|i| (i * 7 + starts.len()) as u8));
        }
        (bytes, starts)
    }

    /// `stored` in a file after a few bytes of something else: the file
    /// and where `stored` is.
    fn file_with(stored: &[u8]) -> (File, std::ops::Range<u64>) {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"ELF?...").unwrap();
        file.write_all(stored).unwrap();
        (file, 7..7 + stored.len() as u64)
    }

    fn deflated(bytes: &[u8]) -> Vec<u8> {
        let mut encoder =
            flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }

    fn all_units(units: &mut Units) -> Result<Vec<(usize, Vec<u8>)>, gimli::Error> {
        let mut found = Vec::new();
        while let Some((offset, bytes)) = units.next_unit()? {
            found.push((offset.0, gimli::Reader::to_slice(&bytes)?.into_owned()));
        }
        Ok(found)
    }

    #[test]
    fn units_come_one_at_a_time_whole_from_a_stored_or_deflated_section() {
        let (bytes, starts) = section();
        let little = gimli::RunTimeEndian::Little;
        let expected: Vec<(usize, Vec<u8>)> = starts
            .iter()
            .zip(starts.iter().skip(1).chain([&bytes.len()]))
            .map(|(&start, &end)| (start, bytes[start..end].to_vec()))
            .collect();
        let (plain, at) = file_with(&bytes);
        let size = bytes.len() as u64;
        let mut units = Units::in_file(plain, at, None, size, little);
        assert_eq!(all_units(&mut units).unwrap(), expected, "stored");
        let (zlib, at) = file_with(&deflated(&bytes));
        let mut units = Units::in_file(zlib, at, Some(Decompress::new(true)), size, little);
        assert_eq!(all_units(&mut units).unwrap(), expected, "deflated");
        let mut units = Units {
            source: Source::Whole(Arc::from(&bytes[..])),
            size,
            offset: 0,
            position: 0,
            endian: little,
        };
        assert_eq!(all_units(&mut units).unwrap(), expected, "in memory");
    }

    #[test]
    fn a_section_that_ends_inside_a_unit_is_an_error() {
        let (bytes, starts) = section();
        let little = gimli::RunTimeEndian::Little;
        let cut = &bytes[..starts[2] + 5];
        // The section says it is whole, the stream ends early.
        let (zlib, at) = file_with(&deflated(cut));
        let size = bytes.len() as u64;
        let mut units = Units::in_file(zlib, at, Some(Decompress::new(true)), size, little);
        assert!(all_units(&mut units).is_err(), "deflated stream cut short");
        let (plain, at) = file_with(cut);
        let mut units = Units::in_file(plain, at, None, size, little);
        assert!(all_units(&mut units).is_err(), "stored bytes cut short");
        // A unit's length beyond the section's size.
        let (plain, at) = file_with(cut);
        let mut units = Units::in_file(plain, at, None, cut.len() as u64, little);
        assert!(matches!(
            units.next_unit().map(|unit| unit.map(|u| u.0)),
            Ok(Some(gimli::DebugInfoOffset(0)))
        ));
        assert!(units.next_unit().is_ok());
        assert!(matches!(
            units.next_unit(),
            Err(gimli::Error::UnexpectedEof(_))
        ));
        // A stream that is not zlib.
        let (zlib, at) = file_with(&bytes);
        let mut units = Units::in_file(zlib, at, Some(Decompress::new(true)), size, little);
        assert!(all_units(&mut units).is_err(), "not zlib");
    }
}
