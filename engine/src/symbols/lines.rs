//! The source line of an address, from an object's DWARF, kept small: the
//! units' address ranges are read once, when the object is loaded, and a
//! unit's line table is decoded the first time an address falls in it.
//! What stays in memory is the line programs, their strings and the tables
//! decoded so far; `.debug_info` (the bulk of a library's DWARF, read one
//! unit at a time) and the units' abbreviations are read for the ranges
//! and dropped.
//!
//! The answers are those of `addr2line::Context::find_location` on the same
//! sections: the same units for an address (their `DW_AT_ranges`, then
//! `.debug_aranges`, then `DW_AT_low_pc`/`DW_AT_high_pc`, then the line
//! program's sequences), tried in the same order, the same row of the
//! same sequence, and file names rendered the same way.

use std::cell::OnceCell;
use std::num::NonZeroU64;
use std::sync::Arc;

use gimli::{
    AttributeValue, DebugLineOffset, DebugStrOffsetsBase, Reader as _, Section, SectionId,
};

use super::dwarf::{Reader, Sections};

/// The line tables of one object.
pub(super) struct LineTables {
    /// The sections a line program reads: `.debug_line` and the string
    /// sections (the rest are empty).
    sections: gimli::Dwarf<Reader>,
    units: Box<[LineUnit]>,
    /// The units' address ranges, sorted by end.
    ranges: Box<[UnitRange]>,
}

/// An address range of a unit.
struct UnitRange {
    begin: u64,
    end: u64,
    /// The lowest `begin` of this range and all later ones in the sorted
    /// list: a probe below it is in none of them.
    min_begin: u64,
    unit: usize,
}

/// What decoding a unit's line program needs, and its table once decoded.
struct LineUnit {
    program: Option<DebugLineOffset>,
    address_size: u8,
    format: gimli::Format,
    str_offsets_base: DebugStrOffsetsBase,
    /// `DW_AT_comp_dir`, in a buffer of its own.
    comp_dir: Option<Reader>,
    /// `DW_AT_name`, in a buffer of its own.
    name: Option<Reader>,
    lines: OnceCell<Result<Lines, gimli::Error>>,
}

/// A unit's decoded line table.
struct Lines {
    /// The rendered file names, by file index.
    files: Box<[Arc<str>]>,
    /// Sorted by start.
    sequences: Box<[Sequence]>,
}

/// The rows of one sequence of a line program, `start..end`.
struct Sequence {
    start: u64,
    end: u64,
    /// Sorted by address, one per address (the last row given for it).
    rows: Box<[Row]>,
}

#[derive(Debug, Clone, Copy)]
struct Row {
    address: u64,
    file: u32,
    line: u32,
}

/// The source position of an address: its file (`None` when the row names
/// no file the table has) and line (0 when unknown).
pub(super) type SourceLine = (Option<Arc<str>>, u32);

/// The root attributes of a unit that give its address ranges.
#[derive(Default)]
struct RangeAttributes {
    low_pc: Option<u64>,
    high_pc: Option<u64>,
    size: Option<u64>,
    ranges: Option<gimli::RangeListsOffset>,
}

impl LineTables {
    /// Reads the units of `sections`, one at a time: their ranges and what
    /// their line programs need. Fails as `addr2line::Context::from_dwarf`
    /// fails (a malformed `.debug_aranges`, unit list or root entry); a
    /// unit that cannot be parsed is left out.
    pub(super) fn load(loaded: Sections) -> Result<LineTables, gimli::Error> {
        let Sections { dwarf, mut units } = loaded;
        let mut aranges = Vec::new();
        let mut headers = dwarf.debug_aranges.headers();
        while let Some(header) = headers.next()? {
            aranges.push((header.debug_info_offset(), header.offset()));
        }
        aranges.sort_by_key(|arange| arange.0);

        let mut line_units = Vec::new();
        let mut ranges = Vec::new();
        // Units with no ranges of their own: their line programs' sequences
        // are, once the units are read.
        let mut unranged = Vec::new();
        while let Some((offset, bytes)) = units.next_unit()? {
            let Some(header) = gimli::DebugInfo::from(bytes.clone()).units().next()? else {
                continue;
            };
            // Type units have no code; partial units no ranges of their own.
            let mut need_ranges = match header.type_() {
                gimli::UnitType::Type { .. } | gimli::UnitType::SplitType { .. } => continue,
                gimli::UnitType::Partial => false,
                _ => true,
            };
            let unit = match root_abbreviation(&dwarf, &header, &bytes) {
                Some(root) => gimli::Unit::new_with_abbreviations(&dwarf, header, root),
                None => dwarf.unit(header),
            };
            let Ok(unit) = unit else {
                continue;
            };
            let id = line_units.len();
            let mut push = |begin: u64, end: u64| {
                ranges.push(UnitRange {
                    begin,
                    end,
                    min_begin: 0,
                    unit: id,
                })
            };
            if need_ranges {
                let unit = unit.unit_ref(&dwarf);
                let Some(attributes) = range_attributes(unit)? else {
                    continue;
                };
                // DW_AT_ranges first, then .debug_aranges, then low/high pc.
                let listed = match attributes.ranges {
                    Some(_) => None,
                    None => aranges.binary_search_by_key(&offset, |a| a.0).ok(),
                };
                if let Some(mut i) = listed {
                    // Several sets for one unit happen (a compiler bug).
                    while i > 0 && aranges[i - 1].0 == offset {
                        i -= 1;
                    }
                    for (_, set) in aranges[i..].iter().take_while(|a| a.0 == offset) {
                        let mut entries = dwarf.debug_aranges.header(*set)?.entries();
                        while let Some(arange) = entries.next()? {
                            if arange.length() != 0 {
                                let range = arange.range();
                                push(range.begin, range.end);
                                need_ranges = false;
                            }
                        }
                    }
                } else {
                    need_ranges &= !attributes.for_each_range(unit, &mut push)?;
                }
            }
            if need_ranges {
                unranged.push(id);
            }
            line_units.push(LineUnit::of(&unit)?);
        }
        // The sections the line programs read, and no others.
        let empty = Reader::new(Arc::from(&[][..]), dwarf.debug_line.reader().endian());
        let mut sections = gimli::Dwarf::load(|id| -> Result<Reader, gimli::Error> {
            Ok(match id {
                SectionId::DebugLine => dwarf.debug_line.reader(),
                SectionId::DebugLineStr => dwarf.debug_line_str.reader(),
                SectionId::DebugStr => dwarf.debug_str.reader(),
                SectionId::DebugStrOffsets => dwarf.debug_str_offsets.reader(),
                _ => &empty,
            }
            .clone())
        })?;
        sections.file_type = dwarf.file_type;
        drop(dwarf);
        for id in unranged {
            if let Ok(lines) = line_units[id].lines(&sections) {
                for sequence in lines.sequences.iter() {
                    ranges.push(UnitRange {
                        begin: sequence.start,
                        end: sequence.end,
                        min_begin: 0,
                        unit: id,
                    });
                }
            }
        }
        // By end, then in the units' order, as they were read.
        ranges.sort_by_key(|range| (range.end, range.unit));
        let mut min = u64::MAX;
        for range in ranges.iter_mut().rev() {
            min = min.min(range.begin);
            range.min_begin = min;
        }
        Ok(LineTables {
            sections,
            units: line_units.into_boxed_slice(),
            ranges: ranges.into_boxed_slice(),
        })
    }

    /// The source position of the file address `probe`: the first unit
    /// covering it whose line table has a row for it. `None` when no unit
    /// has one, or when a table on the way cannot be decoded.
    pub(super) fn find(&self, probe: u64) -> Option<SourceLine> {
        // The first range ending after the probe.
        let first = self.ranges.partition_point(|range| range.end <= probe);
        for range in self.ranges[first..]
            .iter()
            .take_while(|range| probe >= range.min_begin)
        {
            if probe < range.begin || probe >= range.end {
                continue;
            }
            let lines = self.units[range.unit].lines(&self.sections).ok()?;
            if let Some(found) = lines.find(probe) {
                return Some(found);
            }
        }
        None
    }
}

/// The abbreviation of the root entry of the unit of `header` (whose bytes
/// are `unit`, from its length field on), alone: a unit's table holds the
/// abbreviations of all its entries (libc's, a megabyte in all), the root
/// entry is all that is read of it. `None` when it is not found that way:
/// then the whole table is read, as for any other unit.
fn root_abbreviation(
    dwarf: &gimli::Dwarf<Reader>,
    header: &gimli::UnitHeader<Reader>,
    unit: &Reader,
) -> Option<Arc<gimli::Abbreviations>> {
    let mut entries = unit.clone();
    entries.skip(header.header_size()).ok()?;
    let code = entries.read_uleb128().ok()?;
    let section = dwarf.debug_abbrev.reader();
    let mut table = section.clone();
    table.skip(header.debug_abbrev_offset().0).ok()?;
    // Each abbreviation: its code, tag, children flag and attribute
    // specifications (name, form, a constant for an implicit one) up to a
    // (0, 0) pair; the table ends with a code 0.
    loop {
        let start = table.clone();
        let found = table.read_uleb128().ok()?;
        if found == 0 {
            return None;
        }
        table.read_uleb128().ok()?;
        table.read_u8().ok()?;
        loop {
            let name = table.read_uleb128().ok()?;
            let form = table.read_uleb128().ok()?;
            if form == u64::from(gimli::DW_FORM_implicit_const.0) {
                table.read_sleb128().ok()?;
            }
            if name == 0 && form == 0 {
                break;
            }
        }
        if found == code {
            let length = table.offset_from(&start);
            let mut own = start.to_slice().ok()?.get(..length)?.to_vec();
            own.push(0);
            let alone = gimli::DebugAbbrev::new(&own, section.endian());
            return alone
                .abbreviations(gimli::DebugAbbrevOffset(0))
                .ok()
                .map(Arc::new);
        }
    }
}

/// The range attributes of `unit`'s root entry; `None` when the unit has
/// no root entry.
fn range_attributes(unit: gimli::UnitRef<Reader>) -> Result<Option<RangeAttributes>, gimli::Error> {
    let mut entries = unit.entries_raw(None)?;
    let Some(abbreviation) = entries.read_abbreviation()? else {
        return Ok(None);
    };
    let mut found = RangeAttributes::default();
    for spec in abbreviation.attributes() {
        let attribute = entries.read_attribute(*spec)?;
        let address = |value| match value {
            AttributeValue::Addr(address) => Ok(Some(address)),
            AttributeValue::DebugAddrIndex(index) => unit.address(index).map(Some),
            _ => Ok(None),
        };
        match attribute.name() {
            gimli::DW_AT_low_pc => {
                if let Some(low) = address(attribute.value())? {
                    found.low_pc = Some(low);
                }
            }
            gimli::DW_AT_high_pc => match attribute.value() {
                AttributeValue::Udata(size) => found.size = Some(size),
                value => {
                    if let Some(high) = address(value)? {
                        found.high_pc = Some(high);
                    }
                }
            },
            gimli::DW_AT_ranges => found.ranges = unit.attr_ranges_offset(attribute.value())?,
            _ => {}
        }
    }
    Ok(Some(found))
}

impl RangeAttributes {
    /// Gives each non-empty range of the unit to `push`; whether there was one.
    fn for_each_range(
        &self,
        unit: gimli::UnitRef<Reader>,
        push: &mut impl FnMut(u64, u64),
    ) -> Result<bool, gimli::Error> {
        let mut any = false;
        let mut add = |begin: u64, end: u64| {
            if begin < end {
                push(begin, end);
                any = true;
            }
        };
        if let Some(offset) = self.ranges {
            let mut list = unit.ranges(offset)?;
            while let Some(range) = list.next()? {
                add(range.begin, range.end);
            }
        } else if let (Some(begin), Some(end)) = (self.low_pc, self.high_pc) {
            add(begin, end);
        } else if let (Some(begin), Some(size)) = (self.low_pc, self.size) {
            // A -1 tombstone wraps to an empty range.
            add(begin, begin.wrapping_add(size));
        }
        Ok(any)
    }
}

impl LineUnit {
    /// What `unit`'s line program needs, its strings copied out of the
    /// sections that are dropped.
    fn of(unit: &gimli::Unit<Reader>) -> Result<LineUnit, gimli::Error> {
        let own = |reader: &Option<Reader>| -> Result<Option<Reader>, gimli::Error> {
            reader
                .as_ref()
                .map(|r| Ok(Reader::new(Arc::from(&*r.to_slice()?), r.endian())))
                .transpose()
        };
        Ok(LineUnit {
            program: unit.line_program.as_ref().map(|p| p.header().offset()),
            address_size: unit.header.address_size(),
            format: unit.header.format(),
            str_offsets_base: unit.str_offsets_base,
            comp_dir: own(&unit.comp_dir)?,
            name: own(&unit.name)?,
            lines: OnceCell::new(),
        })
    }

    /// The unit's line table, decoded on first use (an empty one when the
    /// unit has no line program).
    fn lines(&self, sections: &gimli::Dwarf<Reader>) -> Result<&Lines, gimli::Error> {
        self.lines
            .get_or_init(|| self.decode(sections))
            .as_ref()
            .map_err(Clone::clone)
    }

    fn decode(&self, sections: &gimli::Dwarf<Reader>) -> Result<Lines, gimli::Error> {
        let Some(offset) = self.program else {
            return Ok(Lines {
                files: Box::new([]),
                sequences: Box::new([]),
            });
        };
        let program = sections.debug_line.program(
            offset,
            self.address_size,
            self.comp_dir.clone(),
            self.name.clone(),
        )?;
        let mut sequences = Vec::new();
        let mut current: Vec<Row> = Vec::new();
        let mut rows = program.rows();
        while let Some((_, row)) = rows.next_row()? {
            if row.end_sequence() {
                if let Some(start) = current.first().map(|r| r.address) {
                    let rows = std::mem::take(&mut current);
                    sequences.push(Sequence {
                        start,
                        end: row.address(),
                        rows: merged_as_valgrind(rows, row.address()).into_boxed_slice(),
                    });
                }
                continue;
            }
            let next = Row {
                address: row.address(),
                file: u32::try_from(row.file_index()).unwrap_or(u32::MAX),
                // As addr2line keeps it: the low 32 bits.
                line: row.line().map_or(0, NonZeroU64::get) as u32,
            };
            match current.last_mut() {
                Some(last) if last.address == next.address => *last = next,
                _ => current.push(next),
            }
        }
        sequences.sort_by_key(|s| s.start);
        let header = rows.header();
        let mut files = vec![match header.file(0) {
            Some(file) => self.render(sections, file, header)?,
            // DWARF 4 and older may have no file 0.
            None => Arc::from(""),
        }];
        let mut index = 1;
        while let Some(file) = header.file(index) {
            files.push(self.render(sections, file, header)?);
            index += 1;
        }
        Ok(Lines {
            files: files.into_boxed_slice(),
            sequences: sequences.into_boxed_slice(),
        })
    }

    /// A file's path: the unit's directory, the file's directory (when
    /// [`names_a_directory`]) and its name, each replacing what came before
    /// when it is absolute.
    fn render(
        &self,
        sections: &gimli::Dwarf<Reader>,
        file: &gimli::FileEntry<Reader>,
        header: &gimli::LineProgramHeader<Reader>,
    ) -> Result<Arc<str>, gimli::Error> {
        let mut path = match &self.comp_dir {
            Some(dir) => dir.to_string_lossy()?.into_owned(),
            None => String::new(),
        };
        if names_a_directory(header.version(), file.directory_index()) {
            if let Some(directory) = file.directory(header) {
                push_path(
                    &mut path,
                    &self.string(sections, directory)?.to_string_lossy()?,
                );
            }
        }
        push_path(
            &mut path,
            &self.string(sections, file.path_name())?.to_string_lossy()?,
        );
        Ok(Arc::from(path))
    }

    /// The string an attribute value of this unit's line program names.
    fn string(
        &self,
        sections: &gimli::Dwarf<Reader>,
        value: AttributeValue<Reader>,
    ) -> Result<Reader, gimli::Error> {
        match value {
            AttributeValue::String(string) => Ok(string),
            AttributeValue::DebugStrRef(offset) => sections.string(offset),
            AttributeValue::DebugLineStrRef(offset) => sections.line_string(offset),
            AttributeValue::DebugStrOffsetsIndex(index) => {
                let offset = sections.debug_str_offsets.get_str_offset(
                    self.format,
                    self.str_offsets_base,
                    index,
                )?;
                sections.string(offset)
            }
            _ => Err(gimli::Error::ExpectedStringAttributeValue),
        }
    }
}

impl Lines {
    /// The row of `probe`: in the sequence holding it, the last row at or
    /// before it.
    fn find(&self, probe: u64) -> Option<SourceLine> {
        let sequence = self
            .sequences
            .binary_search_by(|s| {
                if probe < s.start {
                    std::cmp::Ordering::Greater
                } else if probe >= s.end {
                    std::cmp::Ordering::Less
                } else {
                    std::cmp::Ordering::Equal
                }
            })
            .ok()?;
        let rows = &self.sequences[sequence].rows;
        let row = match rows.binary_search_by_key(&probe, |r| r.address) {
            Ok(i) => rows[i],
            Err(0) => return None,
            Err(i) => rows[i - 1],
        };
        let file = self.files.get(row.file as usize).cloned();
        Some((file, row.line))
    }
}

/// The longest range of addresses Valgrind's table gives one line (its
/// `MAX_LOC_SIZE`).
const MAX_RANGE: u64 = (1 << 12) - 1;

/// The rows of a sequence ending at `end` as Valgrind's table keeps them:
/// a row with the line of the range before it extends that range, whose
/// file it then has (Valgrind's `addLoc` merges adjacent ranges of one
/// line number, whatever their files), while the range stays within
/// [`MAX_RANGE`] bytes.
fn merged_as_valgrind(rows: Vec<Row>, end: u64) -> Vec<Row> {
    let mut kept: Vec<Row> = Vec::with_capacity(rows.len());
    for (index, row) in rows.iter().enumerate() {
        let range_end = rows.get(index + 1).map_or(end, |next| next.address);
        let extends = kept.last().is_some_and(|last| {
            last.line == row.line && range_end.saturating_sub(last.address) <= MAX_RANGE
        });
        if !extends {
            kept.push(*row);
        }
    }
    kept
}

/// Whether entry `index` of the directory table of a line program of
/// DWARF `version` is joined to the unit's directory in a file's path, as
/// Valgrind's reader takes the tables: from DWARF 5 on every entry, entry
/// 0 included (glibc's units, whose directory and entry 0 are both
/// `./elf`, give `./elf/./elf/dl-lookup.c`); before, entry 0 stands for
/// the unit's directory itself.
fn names_a_directory(version: u16, index: u64) -> bool {
    version >= 5 || index != 0
}

/// Appends `part` to `path` with a `/`, or replaces `path` when `part` is
/// absolute (a Unix or Windows root).
fn push_path(path: &mut String, part: &str) {
    let windows_root = |p: &str| p.starts_with('\\') || p.get(1..3) == Some(":\\");
    if part.starts_with('/') || windows_root(part) {
        *path = part.to_owned();
    } else {
        let separator = if windows_root(path) { '\\' } else { '/' };
        if !path.is_empty() && !path.ends_with(separator) {
            path.push(separator);
        }
        path.push_str(part);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_with_the_line_of_the_range_before_extends_it_file_and_all() {
        let row = |address, file, line| Row {
            address,
            file,
            line,
        };
        let rows = vec![
            row(0x100, 1, 10),
            row(0x104, 2, 10),
            row(0x108, 2, 11),
            row(0x110, 3, 12),
            row(0x1000, 4, 12),
        ];
        let kept: Vec<(u64, u32, u32)> = merged_as_valgrind(rows, 0x2000)
            .iter()
            .map(|row| (row.address, row.file, row.line))
            .collect();
        // 0x104 joins 0x100's range (file 1); 0x1000 would make 0x110's
        // range longer than Valgrind's longest, so it starts its own.
        assert_eq!(
            kept,
            [
                (0x100, 1, 10),
                (0x108, 2, 11),
                (0x110, 3, 12),
                (0x1000, 4, 12)
            ]
        );
        let short = vec![row(0x100, 1, 10), row(0x108, 5, 10)];
        let kept = merged_as_valgrind(short, 0x200);
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].file, 1);
    }

    #[test]
    fn directory_0_is_a_directory_of_its_own_from_dwarf_5_on() {
        for (version, index, joined) in [
            (5, 0, true),
            (5, 3, true),
            (4, 0, false),
            (4, 2, true),
            (2, 0, false),
        ] {
            assert_eq!(
                names_a_directory(version, index),
                joined,
                "DWARF {version}, entry {index}"
            );
        }
    }

    /// An abbreviation table: code 1 (a subprogram with an implicit
    /// constant), then code 7 (a compile unit: name, low pc), then the end.
    const ABBREVIATIONS: &[u8] = &[
        1, 0x2e, 0, 0x03, 0x08, 0x1c, 0x21, 0x7b, 0, 0, //
        7, 0x11, 1, 0x03, 0x08, 0x11, 0x01, 0, 0, //
        0,
    ];

    /// A DWARF 4 unit whose root entry has abbreviation `code`: the name
    /// "a.c" and low pc 0x1000.
    fn unit_with_root(code: u8) -> Vec<u8> {
        let mut body = vec![4, 0, 0, 0, 0, 0, 8, code];
        body.extend(b"a.c\0");
        body.extend(0x1000u64.to_le_bytes());
        body.push(0);
        let mut unit = (body.len() as u32).to_le_bytes().to_vec();
        unit.extend(body);
        unit
    }

    fn dwarf_with(abbreviations: &[u8]) -> gimli::Dwarf<Reader> {
        let little = gimli::RunTimeEndian::Little;
        let mut dwarf = gimli::Dwarf::load(|_| -> Result<Reader, gimli::Error> {
            Ok(Reader::new(Arc::from(&[][..]), little))
        })
        .unwrap();
        dwarf.debug_abbrev =
            gimli::DebugAbbrev::from(Reader::new(Arc::from(abbreviations), little));
        dwarf
    }

    fn header_of(unit: &Reader) -> gimli::UnitHeader<Reader> {
        gimli::DebugInfo::from(unit.clone())
            .units()
            .next()
            .unwrap()
            .unwrap()
    }

    #[test]
    fn the_root_abbreviation_alone_gives_the_unit_the_whole_table_gives() {
        let dwarf = dwarf_with(ABBREVIATIONS);
        let bytes = Reader::new(Arc::from(unit_with_root(7)), gimli::RunTimeEndian::Little);
        let root = root_abbreviation(&dwarf, &header_of(&bytes), &bytes).unwrap();
        assert_eq!(
            root.get(7).map(|a| a.tag()),
            Some(gimli::DW_TAG_compile_unit)
        );
        assert!(root.get(1).is_none(), "only the root's");
        let alone = gimli::Unit::new_with_abbreviations(&dwarf, header_of(&bytes), root).unwrap();
        let whole = dwarf.unit(header_of(&bytes)).unwrap();
        let name = |unit: &gimli::Unit<Reader>| {
            unit.name
                .as_ref()
                .map(|n| n.to_slice().unwrap().into_owned())
        };
        assert_eq!(name(&alone), Some(b"a.c".to_vec()));
        assert_eq!(name(&alone), name(&whole));
        assert_eq!(alone.low_pc, 0x1000);
        assert_eq!(alone.low_pc, whole.low_pc);
    }

    #[test]
    fn a_root_abbreviation_not_in_the_table_is_not_found() {
        let bytes = Reader::new(Arc::from(unit_with_root(9)), gimli::RunTimeEndian::Little);
        let dwarf = dwarf_with(ABBREVIATIONS);
        assert!(root_abbreviation(&dwarf, &header_of(&bytes), &bytes).is_none());
        // A table cut short.
        let dwarf = dwarf_with(&ABBREVIATIONS[..14]);
        let bytes = Reader::new(Arc::from(unit_with_root(7)), gimli::RunTimeEndian::Little);
        assert!(root_abbreviation(&dwarf, &header_of(&bytes), &bytes).is_none());
    }

    #[test]
    fn paths_join_with_a_slash_and_restart_at_a_root() {
        let cases = [
            ("", "a.c", "a.c"),
            ("/src", "a.c", "/src/a.c"),
            ("/src/", "a.c", "/src/a.c"),
            ("/src", "/usr/include/stdio.h", "/usr/include/stdio.h"),
            ("C:\\src", "a.c", "C:\\src\\a.c"),
            ("/src", "C:\\a.c", "C:\\a.c"),
        ];
        for (path, part, joined) in cases {
            let mut path = path.to_owned();
            push_path(&mut path, part);
            assert_eq!(path, joined, "{part}");
        }
    }

    #[test]
    fn a_probe_takes_the_last_row_at_or_before_it_within_its_sequence() {
        let row = |address, line| Row {
            address,
            file: 1,
            line,
        };
        let lines = Lines {
            files: vec![Arc::from(""), Arc::from("/a.c")].into_boxed_slice(),
            sequences: vec![
                Sequence {
                    start: 0x100,
                    end: 0x120,
                    rows: vec![row(0x100, 1), row(0x110, 2)].into_boxed_slice(),
                },
                Sequence {
                    start: 0x200,
                    end: 0x210,
                    rows: vec![Row {
                        address: 0x200,
                        file: 7,
                        line: 9,
                    }]
                    .into_boxed_slice(),
                },
            ]
            .into_boxed_slice(),
        };
        let at = |probe| {
            lines
                .find(probe)
                .map(|(file, line)| (file.map(|f| f.to_string()), line))
        };
        assert_eq!(at(0xff), None);
        assert_eq!(at(0x100), Some((Some("/a.c".into()), 1)));
        assert_eq!(at(0x10f), Some((Some("/a.c".into()), 1)));
        assert_eq!(at(0x11f), Some((Some("/a.c".into()), 2)));
        assert_eq!(at(0x120), None, "a sequence's end is outside it");
        // A file index the table does not have names no file.
        assert_eq!(at(0x205), Some((None, 9)));
    }

    /// The DWARF files to compare on: this test's own executable, and the
    /// libc it runs with (its separate debug file when it has one).
    fn objects() -> Vec<std::path::PathBuf> {
        let mut files = Vec::new();
        files.extend(std::env::current_exe().ok());
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
        let libc = maps
            .lines()
            .filter_map(|line| line.split_whitespace().nth(5))
            .find(|path| path.contains("/libc.so"));
        if let Some(libc) = libc {
            let data = std::fs::read(libc).unwrap();
            let file = object::File::parse(&*data).unwrap();
            let places = super::super::debug_file::DebugPlaces::default();
            let debug =
                super::super::debug_file::separate_debug_file(&file, libc.as_ref(), &places);
            files.extend(debug);
            files.push(libc.into());
        }
        files
    }

    #[test]
    fn every_address_finds_what_addr2line_finds() {
        use object::{Object, ObjectSection};
        let mut compared = 0;
        for path in objects() {
            let data = std::fs::read(&path).unwrap();
            let file = object::File::parse(&*data).unwrap();
            if !super::super::elf::has_dwarf(&file) {
                continue;
            }
            let sections = super::super::dwarf::sections(&file, &path).unwrap();
            let ours = LineTables::load(sections).unwrap();
            let endian = gimli::RunTimeEndian::Little;
            let dwarf = gimli::Dwarf::load(|id| -> Result<Reader, gimli::Error> {
                let data = file
                    .section_by_name(id.name())
                    .and_then(|section| section.uncompressed_data().ok())
                    .unwrap_or_default();
                Ok(Reader::new(Arc::from(&*data), endian))
            })
            .unwrap();
            let context = addr2line::Context::from_dwarf(dwarf).unwrap();
            // Every address of the code, and a little either side.
            let (low, high) = ours.ranges.iter().fold((u64::MAX, 0), |(low, high), r| {
                (low.min(r.begin), high.max(r.end))
            });
            let text = file
                .section_by_name(".text")
                .map(|t| (t.address(), t.address() + t.size()));
            let (low, high) =
                text.map_or((low, high), |(start, end)| (low.min(start), high.max(end)));
            // Every address up to a million, evenly spread beyond.
            let step = ((high.saturating_sub(low)) / 1_000_000).max(1) | 1;
            let mut probe = low.saturating_sub(16);
            while probe < high.saturating_add(16) {
                let theirs = context
                    .find_location(probe)
                    .ok()
                    .flatten()
                    .map(|l| (l.file.map(str::to_owned), l.line.unwrap_or(0)));
                let found = ours.find(probe).map(|(f, l)| (f.map(|f| f.to_string()), l));
                // The same line of the same file (its name: the directories
                // are Valgrind's, `names_a_directory`, not addr2line's).
                let file_name = |found: &Option<(Option<String>, u32)>| {
                    found.as_ref().map(|(file, line)| {
                        let name = file.as_deref().map(|file| {
                            std::path::Path::new(file)
                                .file_name()
                                .map(|name| name.to_string_lossy().into_owned())
                        });
                        (name, *line)
                    })
                };
                let (ours_named, theirs_named) = (file_name(&found), file_name(&theirs));
                // Or, as Valgrind merges a line's ranges (`merged_as_valgrind`),
                // the file of an earlier range of the same line.
                let merged = || {
                    let (Some((Some(file), line)), Some((_, their_line))) =
                        (&ours_named, &theirs_named)
                    else {
                        return false;
                    };
                    let at = |address: u64| {
                        file_name(
                            &context
                                .find_location(address)
                                .ok()
                                .flatten()
                                .map(|l| (l.file.map(str::to_owned), l.line.unwrap_or(0))),
                        )
                    };
                    line == their_line
                        && (1..=MAX_RANGE)
                            .map_while(|back| probe.checked_sub(back))
                            .map(at)
                            .take_while(|earlier| earlier.as_ref().is_some_and(|e| e.1 == *line))
                            .any(|earlier| earlier.is_some_and(|e| e.0.as_ref() == Some(file)))
                };
                assert!(
                    ours_named == theirs_named || merged(),
                    "{}: {probe:#x}: {ours_named:?} against addr2line's {theirs_named:?}",
                    path.display()
                );
                compared += usize::from(found.is_some());
                probe += step;
            }
        }
        assert!(compared > 10_000, "only {compared} addresses had a line");
    }
}
