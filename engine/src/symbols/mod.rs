//! Symbolization: maps a tracee's code addresses to object, function, source file
//! and line.
//!
//! [`Symbols`] holds the executable mappings of one process (from
//! `/proc/PID/maps`, re-read with [`Symbols::refresh`] whenever the address space
//! may have changed, e.g. after `dlopen`; a mapping the last read had keeps
//! what it was found to map) and a cache of parsed object files keyed
//! by path, device, inode and modification time, so each library is parsed once
//! even across processes. Function names come from the ELF `.symtab` and
//! `.dynsym` (demangled when first asked for); file and line from DWARF
//! line tables (read with `gimli`, a unit's table when an address first
//! falls in it). What is unknown is written `???`, as Valgrind does.
//! [`prefetch`] parses an object on a thread of its own as soon as it is
//! mapped, and [`prefetch_needed`] the libraries a program will map, from
//! its start, for the `Symbols` that needs them later.

#![warn(missing_docs)]

mod debug_file;
mod demangle;
mod dwarf;
mod elf;
mod error;
mod lines;
mod maps;
mod needed;
mod prefetch;
mod window;

use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;
use std::time::SystemTime;

pub use debug_file::{look_for_debug_files, DebugPlaces};
pub use demangle::demangle;
pub use error::SymbolsError;
use maps::read_maps_text;
pub use maps::{parse_maps, read_maps, Mapping};
pub use needed::{needed_libraries, started_with};
pub use prefetch::{prefetch, prefetch_needed};

use elf::ElfObject;

/// The name Valgrind writes for an unknown object, function or file.
pub const UNKNOWN: &str = "???";

/// A function as the symbol table names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// The demangled name.
    pub name: Arc<str>,
    /// The runtime address of its first instruction.
    pub start: u64,
}

/// The kind of section an address is in, as Valgrind tells them apart (its
/// `VgSectKind`, reduced to what code can execute in). Callgrind treats a jump
/// between sections of different kinds as a call, and skips functions whose
/// first block is in the PLT (`--skip-plt=yes`).
///
/// As in Valgrind 3.19, only the `.text` section is [`SectionKind::Text`] and
/// only `.plt` is [`SectionKind::Plt`]: the `.plt.sec` (IBT) and `.plt.got`
/// stubs, `.init` and `.fini` are [`SectionKind::Other`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SectionKind {
    /// The object's `.text` section.
    Text,
    /// The object's `.plt` section (lazy-binding stubs).
    Plt,
    /// Anything else: other sections, anonymous memory, unknown objects.
    Other,
}

/// Where an address is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// Path of the object the address belongs to, or `???` (anonymous memory).
    pub object: Arc<str>,
    /// The function (symbol) containing the address, if any.
    pub function: Option<Function>,
    /// Source file of the instruction (its innermost position), if known.
    pub file: Option<Arc<str>>,
    /// Source line of the instruction, 0 if unknown.
    pub line: u32,
}

impl Location {
    /// The function name, or `???`.
    pub fn function_name(&self) -> &str {
        self.function.as_ref().map_or(UNKNOWN, |f| &f.name)
    }

    /// The source file, or `???`.
    pub fn file_name(&self) -> &str {
        self.file.as_deref().unwrap_or(UNKNOWN)
    }
}

/// Identity of an object file on disk, so a changed file is parsed again.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct FileKey {
    path: String,
    dev: u64,
    inode: u64,
    mtime: Option<SystemTime>,
}

impl FileKey {
    /// The identity of the file at `path` now.
    fn of(path: &str) -> std::io::Result<FileKey> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path)?;
        Ok(FileKey {
            path: path.to_owned(),
            dev: meta.dev(),
            inode: meta.ino(),
            mtime: meta.modified().ok(),
        })
    }
}

/// An executable range of the address space and what it maps.
#[derive(Clone)]
struct Region {
    start: u64,
    end: u64,
    object: Arc<str>,
    /// The parsed object and its load bias; `None` when unreadable.
    elf: Option<(Rc<ElfObject>, u64)>,
}

/// Address-to-source lookups for one process, with a cache of parsed objects.
#[derive(Default)]
pub struct Symbols {
    regions: Vec<Region>,
    /// The text of the maps last read by [`Symbols::refresh`], while
    /// the mappings are those it gave.
    maps_text: String,
    /// Each mapping of the last [`Symbols::set_mappings`] and its region
    /// (`None`: not code), so a mapping seen before costs no look at its
    /// file.
    mapped: HashMap<Mapping, Option<Region>>,
    /// Parsed objects; `None` records a file that failed, so it is reported once.
    cache: HashMap<FileKey, Option<Rc<ElfObject>>>,
    /// Function names as the symbol tables have them, not demangled
    /// (Valgrind's `--demangle=no`).
    mangled: bool,
}

impl std::fmt::Debug for Symbols {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Symbols")
            .field("regions", &self.regions.len())
            .field("cached_objects", &self.cache.len())
            .finish()
    }
}

impl Symbols {
    /// An empty symbolizer: every address is `???` until mappings are loaded.
    pub fn new() -> Symbols {
        Symbols::default()
    }

    /// Whether function names stay as the symbol tables have them
    /// (mangled) rather than demangled.
    pub fn keep_mangled_names(&mut self, mangled: bool) {
        self.mangled = mangled;
    }

    /// Re-reads `/proc/<pid>/maps` and, when it changed since the last
    /// time, replaces the mappings (see [`Symbols::set_mappings`]). Fails
    /// only when the map cannot be read; the problems with individual
    /// objects come back as values.
    pub fn refresh(&mut self, pid: u32) -> Result<Vec<SymbolsError>, SymbolsError> {
        let text = read_maps_text(pid)?;
        if text == self.maps_text {
            return Ok(Vec::new());
        }
        let maps = parse_maps(&text)?;
        let problems = self.set_mappings(&maps);
        self.maps_text = text;
        Ok(problems)
    }

    /// Replaces the mappings with the executable ones of `maps`, parsing objects
    /// not yet cached. Returns the problems met with objects parsed now (an object
    /// that failed is not reported again); their addresses resolve to `???`.
    /// A mapping the last call had too keeps what it was found to map.
    pub fn set_mappings(&mut self, maps: &[Mapping]) -> Vec<SymbolsError> {
        self.maps_text.clear();
        let mut problems = Vec::new();
        let mut known = std::mem::take(&mut self.mapped);
        let mut mapped = HashMap::with_capacity(maps.len());
        for m in maps {
            let region = match known.remove(m) {
                Some(region) => region,
                None => self.region_of(m, &mut problems),
            };
            mapped.insert(m.clone(), region);
        }
        let mut regions: Vec<Region> = mapped.values().flatten().cloned().collect();
        regions.sort_by_key(|r| r.start);
        self.regions = regions;
        self.mapped = mapped;
        problems
    }

    /// The region of mapping `m` when it maps code, its object parsed
    /// unless cached (its problems go to `problems`).
    fn region_of(&mut self, m: &Mapping, problems: &mut Vec<SymbolsError>) -> Option<Region> {
        // Code whose execute permission was taken away (the translate
        // backend does) still counts: a read-only mapping of an ELF
        // file's executable segment.
        let code = m.is_executable() || (m.is_file() && m.is_read_only() && self.maps_code(m));
        if !code {
            return None;
        }
        let object: Arc<str> = if m.path.is_empty() {
            Arc::from(UNKNOWN)
        } else {
            Arc::from(m.path.as_str())
        };
        let elf = if m.is_file() {
            self.load_object(&m.path, problems)
                .and_then(|obj| match obj.bias(m.start, m.offset) {
                    Some(bias) => Some((obj, bias)),
                    None => {
                        problems.push(SymbolsError::NoSegment {
                            path: m.path.clone(),
                            offset: m.offset,
                        });
                        None
                    }
                })
        } else {
            None
        };
        Some(Region {
            start: m.start,
            end: m.end,
            object,
            elf,
        })
    }

    /// Whether the file mapping `m` maps an executable segment of an ELF
    /// file (other files are not read beyond their first bytes).
    fn maps_code(&mut self, m: &Mapping) -> bool {
        if !is_elf_file(&m.path) {
            return false;
        }
        let mut ignored = Vec::new();
        self.load_object(&m.path, &mut ignored)
            .is_some_and(|obj| obj.maps_code(m.offset, m.end - m.start))
    }

    /// The cached or freshly parsed object at `path`.
    fn load_object(
        &mut self,
        path: &str,
        problems: &mut Vec<SymbolsError>,
    ) -> Option<Rc<ElfObject>> {
        let key = match FileKey::of(path) {
            Ok(key) => key,
            Err(source) => {
                let key = FileKey {
                    path: path.to_owned(),
                    dev: 0,
                    inode: 0,
                    mtime: None,
                };
                if self.cache.insert(key, None).is_none() {
                    problems.push(SymbolsError::Io {
                        path: path.to_owned(),
                        source,
                    });
                }
                return None;
            }
        };
        if let Some(entry) = self.cache.get(&key) {
            return entry.clone();
        }
        let parsed = prefetch::take(&key).unwrap_or_else(|| ElfObject::load(Path::new(path)));
        let entry = match parsed {
            Ok((obj, problem)) => {
                problems.extend(problem);
                Some(Rc::new(obj))
            }
            Err(e) => {
                problems.push(e);
                None
            }
        };
        self.cache.insert(key, entry.clone());
        entry
    }

    fn region(&self, addr: u64) -> Option<&Region> {
        let i = self.regions.partition_point(|r| r.start <= addr);
        let r = &self.regions[i.checked_sub(1)?];
        (addr < r.end).then_some(r)
    }

    /// The source file (if known) and line (0 if unknown) of `addr`, as
    /// [`Symbols::lookup`] gives them, without the function.
    pub fn source_line(&self, addr: u64) -> (Option<Arc<str>>, u32) {
        let Some((obj, bias)) = self.region(addr).and_then(|region| region.elf.as_ref()) else {
            return (None, 0);
        };
        obj.source_line(addr.wrapping_sub(*bias))
    }

    /// The function (symbol) containing `addr`, without the DWARF lookup: cheap
    /// enough to ask for every jump target.
    pub fn function(&self, addr: u64) -> Option<Function> {
        let (obj, bias) = self.region(addr)?.elf.as_ref()?;
        let (name, start) = obj.symbol(addr.wrapping_sub(*bias), self.mangled)?;
        Some(Function {
            name,
            start: start.wrapping_add(*bias),
        })
    }

    /// The kind of section `addr` is in: cheap enough to ask for every block.
    /// A PLT stub has no function symbol ([`Symbols::function`] gives `None`,
    /// as Valgrind finds no name): Callgrind then names it after its address,
    /// `format!("{addr:#018x} [PLT]")`, e.g. `0x0000000000109030 [PLT]`.
    pub fn section_kind(&self, addr: u64) -> SectionKind {
        match self.region(addr).and_then(|region| region.elf.as_ref()) {
            Some((obj, bias)) => obj.section_kind(addr.wrapping_sub(*bias)),
            None => SectionKind::Other,
        }
    }

    /// Whether `addr` is the first instruction of a known function.
    pub fn is_function_start(&self, addr: u64) -> bool {
        self.function(addr).is_some_and(|f| f.start == addr)
    }

    /// The load bias of the object containing `addr` (its runtime address
    /// minus its link-time address), if the object could be read.
    pub fn bias(&self, addr: u64) -> Option<u64> {
        self.region(addr)?.elf.as_ref().map(|(_, bias)| *bias)
    }

    /// Whether `addr` is in an executable mapping of the last maps read.
    pub fn knows(&self, addr: u64) -> bool {
        self.region(addr).is_some()
    }

    /// The object path of `addr`, `???` outside every executable mapping.
    pub fn object(&self, addr: u64) -> Arc<str> {
        self.region(addr)
            .map_or_else(|| Arc::from(UNKNOWN), |r| r.object.clone())
    }

    /// The object, function and source position of `addr`.
    pub fn lookup(&self, addr: u64) -> Location {
        let Some(region) = self.region(addr) else {
            return Location {
                object: Arc::from(UNKNOWN),
                function: None,
                file: None,
                line: 0,
            };
        };
        let mut loc = Location {
            object: region.object.clone(),
            function: None,
            file: None,
            line: 0,
        };
        if let Some((obj, bias)) = &region.elf {
            let r = obj.resolve(addr.wrapping_sub(*bias), self.mangled);
            loc.function = r.function.map(|(name, start)| Function {
                name,
                start: start.wrapping_add(*bias),
            });
            loc.file = r.file;
            loc.line = r.line;
        }
        loc
    }
}

impl Drop for Symbols {
    /// Frees the parsed objects no other `Symbols` holds on a thread of
    /// their own, beside the tracer: libc's symbols and DWARF units are
    /// tens of thousands of allocations, freed when its process ends, on
    /// the way to its profile.
    fn drop(&mut self) {
        self.regions.clear();
        self.mapped.clear();
        let objects: Vec<ElfObject> = self
            .cache
            .drain()
            .filter_map(|(_, object)| Rc::try_unwrap(object?).ok())
            .collect();
        if !objects.is_empty() {
            // Freed here when no thread can be started.
            let _ = std::thread::Builder::new()
                .name("cgx-release".into())
                .spawn(move || {
                    crate::launch::unpin_current_thread();
                    drop(objects);
                });
        }
    }
}

/// Whether `path` starts with the ELF magic.
fn is_elf_file(path: &str) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut file| file.read_exact(&mut magic))
        .is_ok()
        && magic == *b"\x7fELF"
}
