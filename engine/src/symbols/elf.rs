//! One object file (executable or shared library): its loadable segments, its
//! function symbols and its DWARF line and inline information.

use std::cell::{Cell, OnceCell, RefCell};
use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;

use object::elf::{PF_X, PT_LOAD};
use object::read::elf::{FileHeader, ProgramHeader};
use object::read::ReadCache;
use object::{Object, ObjectSection, ObjectSymbol, ReadRef, SymbolKind};

use super::debug_file::{debug_places, separate_debug_file};
use super::demangle::demangle;
use super::dwarf;
use super::lines::LineTables;
use super::window::{read_cache, Window};
use super::{SectionKind as CodeSection, SymbolsError};

/// A `PT_LOAD` program header.
#[derive(Debug, Clone, Copy)]
struct Segment {
    vaddr: u64,
    offset: u64,
    filesz: u64,
    executable: bool,
}

/// A function symbol, addresses as in the file (before relocation by the bias).
#[derive(Debug, Clone)]
struct Sym {
    start: u64,
    end: u64,
    /// As the file has it (mangled).
    name: Arc<str>,
}

/// What an address resolved to inside one object (file addresses).
#[derive(Debug, Default)]
pub(super) struct Resolved {
    pub function: Option<(Arc<str>, u64)>,
    pub file: Option<Arc<str>>,
    pub line: u32,
}

/// A parsed object file.
pub(super) struct ElfObject {
    segments: Vec<Segment>,
    /// File address ranges of `.text` and `.plt`: (start, end, kind).
    sections: Vec<(u64, u64, CodeSection)>,
    symbols: Vec<Sym>,
    /// The demangled names of the symbols asked for so far, by start: a
    /// large C++ program has a hundred thousand names, a run asks for a
    /// few thousand.
    demangled: RefCell<HashMap<u64, Arc<str>>>,
    lines: LineSlot,
}

/// An object's line tables (none without DWARF): read with its symbols,
/// or still being read on the thread that read those
/// ([`ElfObject::load_symbols_first`]), when the first question about a
/// source line waits for them.
#[derive(Default)]
struct LineSlot {
    tables: OnceCell<Option<LineTables>>,
    coming: Cell<Option<Receiver<Option<LineTables>>>>,
}

impl LineSlot {
    /// The tables, waiting for them when they are still being read (none
    /// when their reader stopped without sending them).
    fn get(&self) -> Option<&LineTables> {
        self.tables
            .get_or_init(|| {
                self.coming
                    .take()
                    .and_then(|coming| coming.recv().ok())
                    .flatten()
            })
            .as_ref()
    }
}

/// The file holding an object's DWARF (the object or its separate debug
/// file), open, for its line tables to be read once its symbols are.
struct DwarfFile {
    file: File,
    path: PathBuf,
}

impl DwarfFile {
    /// Reads its line tables. A broken DWARF section is the second value
    /// (then there are none).
    fn line_tables(self) -> (Option<LineTables>, Option<SymbolsError>) {
        let shown = self.path.display().to_string();
        let data = ReadCache::new(Window::new(self.file));
        let sections = match object::File::parse(&data) {
            Ok(file) => dwarf::sections(&file, &self.path),
            Err(source) => {
                return (
                    None,
                    Some(SymbolsError::Elf {
                        path: shown,
                        source,
                    }),
                )
            }
        };
        // The file's bytes go here, before the units are read.
        drop(data);
        let read = match sections.and_then(LineTables::load) {
            Ok(lines) => (Some(lines), None),
            Err(source) => (
                None,
                Some(SymbolsError::Dwarf {
                    path: shown,
                    source,
                }),
            ),
        };
        release_free_memory();
        read
    }
}

/// The line tables of an object taken before they were read
/// ([`ElfObject::load_symbols_first`]), to be read and sent to it.
pub(super) struct LinesToRead {
    dwarf: Option<DwarfFile>,
    to: SyncSender<Option<LineTables>>,
}

impl LinesToRead {
    /// Reads the line tables and sends them to their object. A broken
    /// DWARF section is returned (the object then has none).
    pub fn read(self) -> Option<SymbolsError> {
        let (tables, problem) = self.dwarf.map_or((None, None), DwarfFile::line_tables);
        // The object may be gone: nothing waits then.
        let _ = self.to.send(tables);
        problem
    }
}

impl ElfObject {
    /// Reads and parses `path`. A broken DWARF section is reported in the second
    /// value and leaves the symbols usable.
    pub fn load(path: &Path) -> Result<(ElfObject, Option<SymbolsError>), SymbolsError> {
        let (object, lines) = Self::load_symbols_first(path)?;
        let problem = lines.read();
        Ok((object, problem))
    }

    /// [`ElfObject::load`] in two steps: the object with its segments,
    /// sections and symbols, whose line tables come once the second value
    /// is read ([`LinesToRead::read`]); until then its first question
    /// about a source line waits. Translating needs the symbols at the
    /// first block of an object, the call graph its lines only when it
    /// replays the block, later.
    pub fn load_symbols_first(path: &Path) -> Result<(ElfObject, LinesToRead), SymbolsError> {
        let (object, dwarf) = Self::read_symbols(path)?;
        let (to, coming) = sync_channel(1);
        object.lines.coming.set(Some(coming));
        Ok((object, LinesToRead { dwarf, to }))
    }

    /// Reads `path`'s segments, sections and symbols (with those of its
    /// separate debug file); the object has no line tables yet, the file
    /// with its DWARF is the second value.
    fn read_symbols(path: &Path) -> Result<(ElfObject, Option<DwarfFile>), SymbolsError> {
        let shown = path.display().to_string();
        let elf_err = |source| SymbolsError::Elf {
            path: shown.clone(),
            source,
        };
        // The parts of the files nothing looks at (code, data, location
        // lists) are not read.
        let data = read_cache(path).map_err(|source| SymbolsError::Io {
            path: shown.clone(),
            source,
        })?;
        let (segments, sections, symbols, own_dwarf, debug_path, debug_data) = {
            let file = object::File::parse(&data).map_err(elf_err)?;
            let segments = segments(&data).map_err(elf_err)?;
            let sections = code_sections(&file);
            // A separate debug file adds its symbols (local functions of
            // stripped libraries) and, if the file has none, DWARF.
            let debug_path = separate_debug_file(&file, path, &debug_places());
            let debug_data = debug_path.as_ref().and_then(|p| read_cache(p).ok());
            let debug_file = debug_data
                .as_ref()
                .and_then(|data| object::File::parse(data).ok());
            let mut symbol_files = vec![&file];
            symbol_files.extend(debug_file.as_ref());
            let symbols = symbols(&symbol_files);
            let debug_parsed = debug_file.is_some();
            drop(symbol_files);
            drop(debug_file);
            // Only a debug file that parses gives DWARF.
            let debug_data = debug_data.filter(|_| debug_parsed);
            (
                segments,
                sections,
                symbols,
                has_dwarf(&file),
                debug_path,
                debug_data,
            )
        };
        let dwarf = if own_dwarf {
            Some(DwarfFile {
                file: data.into_inner().into_file(),
                path: path.to_path_buf(),
            })
        } else {
            debug_data.zip(debug_path).map(|(data, path)| DwarfFile {
                file: data.into_inner().into_file(),
                path,
            })
        };
        let object = ElfObject {
            segments,
            sections,
            symbols,
            demangled: RefCell::default(),
            lines: LineSlot::default(),
        };
        Ok((object, dwarf))
    }

    /// Whether the file bytes `offset..offset + len` overlap an executable
    /// segment (the code of a mapping whose protection no longer says so,
    /// e.g. when the translate backend took PROT_EXEC away and the kernel
    /// merged the mapping with its read-only neighbour).
    pub fn maps_code(&self, offset: u64, len: u64) -> bool {
        self.segments.iter().any(|s| {
            s.executable && s.offset < offset.saturating_add(len) && offset < s.offset + s.filesz
        })
    }

    /// The load bias of a mapping of this object that maps file offset `offset`
    /// at address `start`: runtime address = file address + bias.
    pub fn bias(&self, start: u64, offset: u64) -> Option<u64> {
        let seg = self
            .segments
            .iter()
            .filter(|s| s.executable)
            .chain(self.segments.iter().filter(|s| !s.executable))
            .find(|s| (s.offset & !0xfff) <= offset && offset < s.offset + s.filesz.max(1))?;
        // The segment maps file offset s.offset at s.vaddr + bias.
        Some(
            start
                .wrapping_add(seg.offset)
                .wrapping_sub(offset)
                .wrapping_sub(seg.vaddr),
        )
    }

    /// The kind of section the file address `addr` is in.
    pub fn section_kind(&self, addr: u64) -> CodeSection {
        self.sections
            .iter()
            .find(|(start, end, _)| (*start..*end).contains(&addr))
            .map_or(CodeSection::Other, |(_, _, kind)| *kind)
    }

    /// The function symbol containing the file address `addr`: (name,
    /// start), the name demangled unless `mangled` (as the symbol table has
    /// it).
    pub fn symbol(&self, addr: u64, mangled: bool) -> Option<(Arc<str>, u64)> {
        let i = self.symbols.partition_point(|s| s.start <= addr);
        let s = &self.symbols[i.checked_sub(1)?];
        if addr >= s.end {
            return None;
        }
        let name = match mangled {
            true => s.name.clone(),
            false => self.demangled_name(s),
        };
        Some((name, s.start))
    }

    /// The name of `symbol`, demangled (once).
    fn demangled_name(&self, symbol: &Sym) -> Arc<str> {
        if let Some(name) = self.demangled.borrow().get(&symbol.start) {
            return name.clone();
        }
        let shown = demangle(&symbol.name);
        let name = match *shown == *symbol.name {
            true => symbol.name.clone(),
            false => Arc::from(shown),
        };
        self.demangled
            .borrow_mut()
            .insert(symbol.start, name.clone());
        name
    }

    /// Resolves the file address `addr`: its function symbol (its name
    /// `mangled` or demangled) and the source position of its instruction
    /// (the line table's, innermost).
    pub fn resolve(&self, addr: u64, mangled: bool) -> Resolved {
        let mut r = Resolved {
            function: self.symbol(addr, mangled),
            ..Resolved::default()
        };
        (r.file, r.line) = self.source_line(addr);
        r
    }

    /// The source file and line of the file address `addr` (`None` and 0
    /// when unknown).
    pub fn source_line(&self, addr: u64) -> (Option<Arc<str>>, u32) {
        self.lines
            .get()
            .and_then(|lines| lines.find(addr))
            .unwrap_or((None, 0))
    }
}

/// Gives the memory the allocator holds free back to the system: loading
/// an object's DWARF allocates and frees tens of megabytes on the thread
/// that parses it, whose allocator arena would otherwise keep them.
fn release_free_memory() {
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The `.text` and `.plt` sections, as Valgrind 3.19's `readelf.c` records them
/// (one of each per object; `.plt.sec` and `.plt.got` are neither).
fn code_sections<'data, R: ReadRef<'data>>(
    file: &object::File<'data, R>,
) -> Vec<(u64, u64, CodeSection)> {
    [(".text", CodeSection::Text), (".plt", CodeSection::Plt)]
        .into_iter()
        .filter_map(|(name, kind)| {
            let section = file.section_by_name(name)?;
            let start = section.address();
            (section.size() > 0).then(|| (start, start + section.size(), kind))
        })
        .collect()
}

fn segments<'data, R: ReadRef<'data>>(data: R) -> Result<Vec<Segment>, object::Error> {
    let header = object::elf::FileHeader64::<object::Endianness>::parse(data)?;
    let endian = header.endian()?;
    Ok(header
        .program_headers(endian, data)?
        .iter()
        .filter(|p| p.p_type(endian) == PT_LOAD)
        .map(|p| Segment {
            vaddr: p.p_vaddr(endian),
            offset: p.p_offset(endian),
            filesz: p.p_filesz(endian),
            executable: p.p_flags(endian) & PF_X != 0,
        })
        .collect())
}

/// Function symbols from `.symtab` and `.dynsym` of `files` (an object and
/// its separate debug file), sorted, one per start address.
///
/// As Valgrind's reader, a symbol of size 0 names nothing (gcc's
/// `frame_dummy` and `deregister_tm_clones` in every program, an assembly
/// function without `.size`): its code is named by address. Of several
/// names at one address the one Valgrind prefers wins: the shortest name
/// without its `@version`, then the versioned one, then the first in byte
/// order.
fn symbols<'data, R: ReadRef<'data>>(files: &[&object::File<'data, R>]) -> Vec<Sym> {
    // (start, size, unversioned length, unversioned, name): the names
    // borrowed from the files' string tables until the choice is made.
    type Candidate<'a> = (u64, u64, usize, bool, &'a str);
    let mut all: Vec<Candidate<'data>> = Vec::new();
    let every_symbol = files.iter().flat_map(|file| {
        file.symbols()
            .chain(file.dynamic_symbols())
            .map(move |s| (file, s))
    });
    for (file, s) in every_symbol {
        // Function symbols only (FUNC and GNU_IFUNC), as Valgrind: an untyped
        // label in assembly names no function. Checked before the name is
        // read: a name is a read of the string table.
        if s.is_undefined() || s.address() == 0 || s.size() == 0 || s.kind() != SymbolKind::Text {
            continue;
        }
        if s.section_index()
            .and_then(|i| file.section_by_index(i).ok())
            .is_none()
        {
            continue;
        }
        let Ok(name) = s.name() else { continue };
        if name.is_empty() {
            continue;
        }
        let unversioned = name.find('@').unwrap_or(name.len());
        all.push((
            s.address(),
            s.size(),
            unversioned,
            unversioned == name.len(),
            name,
        ));
    }
    all.sort_by(|a, b| (a.0, a.2, a.3, a.4).cmp(&(b.0, b.2, b.3, b.4)));
    all.dedup_by_key(|s| s.0);
    // A vector of its own, as long as the symbols kept: collected from
    // `all` in place it would keep all of `all`'s memory (a large C++
    // program has hundreds of thousands of candidates).
    let mut kept = Vec::with_capacity(all.len());
    kept.extend(all.iter().map(|&(start, size, _, _, name)| Sym {
        start,
        end: start + size,
        name: Arc::from(name),
    }));
    kept
}

pub(super) fn has_dwarf<'data, R: ReadRef<'data>>(file: &object::File<'data, R>) -> bool {
    file.section_by_name(".debug_info")
        .is_some_and(|s| s.size() > 0)
}

#[cfg(test)]
mod tests {
    use super::super::lines::SourceLine;
    use super::*;

    #[test]
    fn the_kept_symbols_hold_no_more_memory_than_they_need() {
        // The test program itself: thousands of function symbols in
        // `.symtab` and `.dynsym`, more candidates than symbols kept.
        let data = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let kept = symbols(&[&file]);
        assert!(kept.len() > 1000, "only {} symbols", kept.len());
        assert_eq!(kept.capacity(), kept.len());
        assert!(kept.windows(2).all(|pair| pair[0].start < pair[1].start));
        assert!(kept
            .iter()
            .all(|sym| sym.end > sym.start && !sym.name.is_empty()));
    }

    /// Some function starts of `object` (the test program) and their
    /// source lines, at least one of them known.
    fn some_lines(object: &ElfObject) -> Vec<(u64, SourceLine)> {
        let starts = object.symbols.iter().step_by(50).take(40);
        let lines: Vec<_> = starts
            .map(|sym| (sym.start, object.source_line(sym.start)))
            .collect();
        assert!(
            lines
                .iter()
                .any(|(_, (file, line))| file.is_some() && *line > 0),
            "no source line known: the test program has no DWARF"
        );
        lines
    }

    #[test]
    fn an_object_taken_before_its_line_tables_answers_with_them_once_read() {
        let exe = std::env::current_exe().unwrap();
        let (whole, problem) = ElfObject::load(&exe).unwrap();
        assert!(problem.is_none());
        let expected = some_lines(&whole);
        let (first, lines) = ElfObject::load_symbols_first(&exe).unwrap();
        for &(start, _) in &expected {
            assert_eq!(first.symbol(start, true), whole.symbol(start, true));
        }
        let reader = std::thread::spawn(move || lines.read());
        let found: Vec<_> = expected
            .iter()
            .map(|&(start, _)| (start, first.source_line(start)))
            .collect();
        assert_eq!(found, expected);
        assert!(reader.join().unwrap().is_none());
    }

    #[test]
    fn an_object_whose_line_tables_never_come_has_no_lines_and_does_not_wait() {
        let exe = std::env::current_exe().unwrap();
        let (first, lines) = ElfObject::load_symbols_first(&exe).unwrap();
        // Its reader stopped before reading them.
        drop(lines);
        let start = first.symbols[0].start;
        assert!(first.symbol(start, true).is_some());
        assert_eq!(first.source_line(start), (None, 0));
    }
}
