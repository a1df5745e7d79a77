//! One object file (executable or shared library): its loadable segments, its
//! function symbols and its DWARF line and inline information.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use object::elf::{PF_X, PT_LOAD};
use object::read::elf::{FileHeader, ProgramHeader};
use object::{Object, ObjectSection, ObjectSymbol, SectionKind, SymbolKind};

use super::demangle::demangle;
use super::SymbolsError;

type Reader = gimli::EndianArcSlice<gimli::RunTimeEndian>;

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
    name: Arc<str>,
}

/// What an address resolved to inside one object (file addresses).
#[derive(Debug, Default)]
pub(super) struct Resolved {
    pub function: Option<(Arc<str>, u64)>,
    pub file: Option<Arc<str>>,
    pub line: u32,
    /// (inlined function, call file, call line), innermost first.
    pub inlined: Vec<(Arc<str>, Option<Arc<str>>, u32)>,
}

/// A parsed object file.
pub(super) struct ElfObject {
    segments: Vec<Segment>,
    symbols: Vec<Sym>,
    dwarf: Option<addr2line::Context<Reader>>,
}

impl ElfObject {
    /// Reads and parses `path`. A broken DWARF section is reported in the second
    /// value and leaves the symbols usable.
    pub fn load(path: &Path) -> Result<(ElfObject, Option<SymbolsError>), SymbolsError> {
        let shown = path.display().to_string();
        let data = std::fs::read(path).map_err(|source| SymbolsError::Io {
            path: shown.clone(),
            source,
        })?;
        let elf_err = |source| SymbolsError::Elf {
            path: shown.clone(),
            source,
        };
        let file = object::File::parse(&*data).map_err(elf_err)?;
        let segments = segments(&data).map_err(elf_err)?;
        let symbols = symbols(&file);
        let mut problem = None;
        let mut dwarf = None;
        // Prefer the file's own DWARF; else a separate debug file found by build id.
        let debug_data;
        let debug_file;
        let (dfile, dpath) = if has_dwarf(&file) {
            (Some(&file), shown.clone())
        } else if let Some(p) = separate_debug_file(&file) {
            match std::fs::read(&p) {
                Ok(d) => {
                    debug_data = d;
                    debug_file = object::File::parse(&*debug_data).ok();
                    (debug_file.as_ref(), p.display().to_string())
                }
                Err(_) => (None, shown.clone()),
            }
        } else {
            (None, shown.clone())
        };
        if let Some(f) = dfile {
            match load_dwarf(f) {
                Ok(ctx) => dwarf = Some(ctx),
                Err(source) => {
                    problem = Some(SymbolsError::Dwarf {
                        path: dpath,
                        source,
                    })
                }
            }
        }
        Ok((
            ElfObject {
                segments,
                symbols,
                dwarf,
            },
            problem,
        ))
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

    /// The function symbol containing the file address `addr`: (name, start).
    pub fn symbol(&self, addr: u64) -> Option<(Arc<str>, u64)> {
        let i = self.symbols.partition_point(|s| s.start <= addr);
        let s = &self.symbols[i.checked_sub(1)?];
        (addr < s.end).then(|| (s.name.clone(), s.start))
    }

    /// Resolves the file address `addr`.
    pub fn resolve(&self, addr: u64) -> Resolved {
        let mut r = Resolved {
            function: self.symbol(addr),
            ..Resolved::default()
        };
        let Some(ctx) = &self.dwarf else { return r };
        let Ok(mut frames) = ctx.find_frames(addr).skip_all_loads() else {
            return r;
        };
        // Frames come innermost first; each frame's location is the position in
        // that function, so an inlined frame's call site is the next frame's location.
        let mut list = Vec::new();
        while let Ok(Some(frame)) = frames.next() {
            let name = frame.function.as_ref().and_then(|f| {
                let raw = f.raw_name().ok()?;
                Some(Arc::<str>::from(demangle(&raw)))
            });
            let (file, line) = match &frame.location {
                Some(loc) => (loc.file.map(Arc::<str>::from), loc.line.unwrap_or(0)),
                None => (None, 0),
            };
            list.push((name, file, line));
        }
        if let Some((_, file, line)) = list.first() {
            r.file = file.clone();
            r.line = *line;
        }
        for w in list.windows(2) {
            if let Some(name) = &w[0].0 {
                r.inlined.push((name.clone(), w[1].1.clone(), w[1].2));
            }
        }
        r
    }
}

fn segments(data: &[u8]) -> Result<Vec<Segment>, object::Error> {
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

/// Function symbols from `.symtab` and `.dynsym`, sorted, one per start address.
fn symbols(file: &object::File) -> Vec<Sym> {
    // (start, size, rank, name, end of section)
    let mut all: Vec<(u64, u64, u8, String, u64)> = Vec::new();
    for s in file.symbols().chain(file.dynamic_symbols()) {
        if s.is_undefined() || s.address() == 0 {
            continue;
        }
        let Some(section) = s
            .section_index()
            .and_then(|i| file.section_by_index(i).ok())
        else {
            continue;
        };
        let text = section.kind() == SectionKind::Text;
        let ok = match s.kind() {
            SymbolKind::Text => true,
            SymbolKind::Unknown => text,
            _ => false,
        };
        let Ok(name) = s.name() else { continue };
        if !ok || name.is_empty() {
            continue;
        }
        // Prefer sized, global, fewer leading underscores, shorter names.
        let underscores = name.bytes().take_while(|&b| b == b'_').count().min(15) as u8;
        let rank =
            (u8::from(s.size() == 0) << 6) | (u8::from(!s.is_global()) << 5) | (underscores << 1);
        let section_end = section.address() + section.size();
        all.push((s.address(), s.size(), rank, name.to_owned(), section_end));
    }
    all.sort_by(|a, b| (a.0, a.2, a.3.len(), &a.3).cmp(&(b.0, b.2, b.3.len(), &b.3)));
    all.dedup_by_key(|s| s.0);
    let mut out: Vec<Sym> = Vec::with_capacity(all.len());
    for (i, (start, size, _, name, section_end)) in all.iter().enumerate() {
        let end = if *size > 0 {
            start + size
        } else {
            // Unsized: up to the next symbol, within the section.
            let next = all.get(i + 1).map_or(u64::MAX, |n| n.0);
            next.min(*section_end).max(start + 1)
        };
        out.push(Sym {
            start: *start,
            end,
            name: Arc::from(demangle(name)),
        });
    }
    out
}

fn has_dwarf(file: &object::File) -> bool {
    file.section_by_name(".debug_info")
        .is_some_and(|s| s.size() > 0)
}

/// `/usr/lib/debug/.build-id/xx/yyyy.debug` when it exists.
fn separate_debug_file(file: &object::File) -> Option<PathBuf> {
    let id = file.build_id().ok()??;
    let (first, rest) = id.split_first()?;
    let hex: String = rest.iter().map(|b| format!("{b:02x}")).collect();
    let p = PathBuf::from(format!("/usr/lib/debug/.build-id/{first:02x}/{hex}.debug"));
    p.is_file().then_some(p)
}

fn load_dwarf(file: &object::File) -> Result<addr2line::Context<Reader>, gimli::Error> {
    let endian = if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let load = |id: gimli::SectionId| -> Result<Reader, gimli::Error> {
        let data = file
            .section_by_name(id.name())
            .and_then(|s| s.uncompressed_data().ok())
            .unwrap_or(Cow::Borrowed(&[]));
        Ok(Reader::new(Arc::from(&*data), endian))
    };
    let dwarf = gimli::Dwarf::load(load)?;
    addr2line::Context::from_dwarf(dwarf)
}
