//! Loading an object's DWARF for line lookups: only the sections the
//! line tables (`lines`) read, compressed ones inflated straight into their final
//! buffers, `.debug_info` (the largest) on a second thread.

use std::borrow::Cow;
use std::sync::Arc;

use gimli::SectionId;
use object::{CompressionFormat, Object, ObjectSection, ReadRef};

/// The reader of the DWARF sections.
pub(super) type Reader = gimli::EndianArcSlice<gimli::RunTimeEndian>;

/// The sections the line tables read (units, their abbreviations and
/// ranges, line programs, strings). Location lists, macros and type units are
/// left out: nothing looks at them.
const NEEDED: [SectionId; 10] = [
    SectionId::DebugAbbrev,
    SectionId::DebugAddr,
    SectionId::DebugAranges,
    SectionId::DebugInfo,
    SectionId::DebugLine,
    SectionId::DebugLineStr,
    SectionId::DebugRanges,
    SectionId::DebugRngLists,
    SectionId::DebugStr,
    SectionId::DebugStrOffsets,
];

/// The bytes of one section as the file holds them.
enum Raw<'data> {
    /// Stored as they are.
    Plain(&'data [u8]),
    /// A zlib stream that inflates to this many bytes.
    Zlib(&'data [u8], usize),
    /// Another compression: `object` inflates it.
    Other(object::read::CompressedData<'data>),
}

/// The DWARF sections of `file` the line tables read.
pub(super) fn sections<'data, R: ReadRef<'data>>(
    file: &object::File<'data, R>,
) -> Result<gimli::Dwarf<Reader>, gimli::Error> {
    let endian = if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let raw: Vec<(SectionId, Raw)> = NEEDED
        .iter()
        .filter_map(|&id| Some((id, raw_section(file, id)?)))
        .collect();
    let (info, rest): (Vec<_>, Vec<_>) = raw
        .into_iter()
        .partition(|(id, _)| *id == SectionId::DebugInfo);
    let inflate_all = |sections: Vec<(SectionId, Raw)>| -> Vec<(SectionId, Arc<[u8]>)> {
        sections
            .into_iter()
            .map(|(id, raw)| (id, inflate(raw)))
            .collect()
    };
    let loaded = std::thread::scope(|scope| {
        let info = scope.spawn(|| {
            // Beside the tracer, not on its CPU.
            crate::launch::unpin_current_thread();
            inflate_all(info)
        });
        let mut loaded = inflate_all(rest);
        // The thread only inflates: it does not panic but on a failed
        // allocation, which aborts anyway.
        loaded.extend(info.join().unwrap_or_default());
        loaded
    });
    gimli::Dwarf::load(|id| -> Result<Reader, gimli::Error> {
        let bytes = loaded
            .iter()
            .find(|(loaded, _)| *loaded == id)
            .map_or_else(|| Arc::from(&[][..]), |(_, bytes)| bytes.clone());
        Ok(Reader::new(bytes, endian))
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
            let (inflated, code) =
                zlib_rs::decompress_slice(out, data, zlib_rs::InflateConfig::default());
            if code == zlib_rs::ReturnCode::Ok && inflated.len() == size {
                bytes
            } else {
                Arc::from(&[][..])
            }
        }
        Raw::Other(compressed) => compressed
            .decompress()
            .map_or_else(|_| Arc::from(&[][..]), |data: Cow<[u8]>| Arc::from(&*data)),
    }
}
