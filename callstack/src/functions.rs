//! Functions as Callgrind knows them, and what it remembers of each block.
//!
//! Callgrind names a block's function once, from the block's first address:
//! the symbol containing it (or the address, for code without symbols), the
//! object it is in, and the source file of that first instruction. A function
//! is the triple (object, file, name), so one whose blocks start in an inlined
//! header's code appears once per file, as in Valgrind.

use std::sync::Arc;

use cgx_engine::symbols::{SectionKind, Symbols, UNKNOWN};
use cgx_engine::Place;
use indexmap::IndexMap;
use rustc_hash::{FxBuildHasher, FxHashMap};

use crate::Options;
use cgx_engine::pattern::matches;

/// The number of a function of a process (its index in [`Functions`]).
pub(crate) type FnId = u32;

/// The names Valgrind shows as `(below main)`.
fn is_below_main(name: &str) -> bool {
    matches!(
        name,
        "__libc_start_main" | "__libc_start_call_main" | "generic_start_main" | "_start"
    ) || name.starts_with("__libc_start_main.")
        || name.starts_with("generic_start_main.")
}

/// A function and the options that apply to it.
#[derive(Clone, Debug)]
pub(crate) struct Function {
    /// The object's path.
    pub object: Arc<str>,
    /// The source file of the function's first block seen, or `???`.
    pub file: Arc<str>,
    /// The (demangled) name.
    pub name: Arc<str>,
    /// Calls to it are not tracked: its cost goes to its caller (PLT stubs,
    /// `--fn-skip`).
    pub skip: bool,
    /// A jump out of it replaces its own call (`_dl_runtime_resolve`).
    pub pop_on_jump: bool,
    /// Entering and leaving it toggles collection (`--toggle-collect`).
    pub toggle_collect: bool,
    /// Entering it dumps (`--dump-before`).
    pub dump_before: bool,
    /// Leaving it dumps (`--dump-after`).
    pub dump_after: bool,
    /// Entering it zeroes the costs (`--zero-before`).
    pub zero_before: bool,
    /// Its recursion levels shown apart (`--separate-recs`, or
    /// `--separate-recsN=` naming it).
    pub separate_recursions: u32,
    /// Its callers in its names (`--separate-callers`, or
    /// `--separate-callersN=` naming it).
    pub separate_callers: u32,
}

/// The slots of [`Functions`]'s cache of recent blocks (a power of two).
const RECENT: usize = 4096;

/// The slot of the block at `addr` in the cache of recent blocks.
fn recent_slot(addr: u64) -> usize {
    (addr ^ (addr >> 12)) as usize & (RECENT - 1)
}

/// A function's identity: object, file and name.
type FunctionKey = (Arc<str>, Arc<str>, Arc<str>);

/// What Callgrind remembers of a block (by its first address).
#[derive(Clone, Copy, Debug)]
pub(crate) struct BlockInfo {
    /// The block's function.
    pub function: FnId,
    /// Whether the block starts at its function's first instruction.
    pub is_entry: bool,
    /// The number of the object it is in.
    pub object: u32,
    /// The kind of section it is in.
    pub section: SectionKind,
    /// The number of its object and section kind ([`BlockInfo::place`]).
    pub region: u32,
    /// The block's number in its process (blocks are numbered as first
    /// seen), to index per-block tables without hashing.
    pub number: u32,
}

impl BlockInfo {
    /// Where the block is for the rules of contexts: a fall-through or a
    /// jump to it from a block of its region (object and section kind)
    /// may keep the context unless it starts a function.
    pub fn place(&self) -> Place {
        Place {
            region: self.region,
            starts_function: self.is_entry,
            skipped: false,
        }
    }
}

/// The functions of a process and the blocks seen so far.
#[derive(Clone, Debug, Default)]
pub(crate) struct Functions {
    functions: IndexMap<FunctionKey, Function, FxBuildHasher>,
    /// Each function's `separate_recursions`, by number: asked at every
    /// block run, so kept apart from the functions' other facts.
    recursions: Vec<u32>,
    objects: IndexMap<Arc<str>, (), FxBuildHasher>,
    /// The objects and section kinds of blocks, numbered ([`Place`]).
    regions: IndexMap<(Arc<str>, SectionKind), (), FxBuildHasher>,
    blocks: FxHashMap<u64, BlockInfo>,
    /// A direct-mapped cache of `blocks` ([`RECENT`] slots, empty until the
    /// first block): most blocks run again soon.
    recent: Vec<(u64, BlockInfo)>,
    /// Cachegrind's function of each instruction.
    instructions: FxHashMap<u64, FnId>,
    /// `--show-below-main=yes`: the functions below `main` keep their own
    /// names rather than `(below main)`.
    show_below_main: bool,
}

impl Functions {
    /// No functions yet; those below `main` named by their own names with
    /// `show_below_main`, else `(below main)`.
    pub fn new(show_below_main: bool) -> Functions {
        Functions {
            show_below_main,
            ..Functions::default()
        }
    }

    /// Whether the function called `name` is shown as `(below main)`.
    fn is_shown_below_main(&self, name: &str) -> bool {
        !self.show_below_main && is_below_main(name)
    }

    /// How many functions and blocks are known.
    pub fn counts(&self) -> (usize, usize) {
        (self.functions.len(), self.blocks.len())
    }

    /// The recursion levels shown apart for the function numbered `id`
    /// ([`Function::separate_recursions`]).
    #[inline]
    pub fn separate_recursions(&self, id: FnId) -> u32 {
        self.recursions.get(id as usize).copied().unwrap_or(0)
    }

    /// Keeps [`Functions::separate_recursions`] of the function numbered
    /// `index`, just added.
    fn added(&mut self, index: usize) {
        if let Some((_, function)) = self.functions.get_index(index) {
            let levels = function.separate_recursions;
            if self.recursions.len() <= index {
                self.recursions.resize(index + 1, 0);
            }
            self.recursions[index] = levels;
        }
    }

    /// The function numbered `id`.
    pub fn get(&self, id: FnId) -> &Function {
        &self.functions[id as usize]
    }

    /// The function Cachegrind charges the instruction at `addr` to: the
    /// symbol containing it, `???` for none, with the instruction's own file.
    pub fn of_instruction(&mut self, addr: u64, symbols: &mut Symbols, pid: i32) -> FnId {
        if let Some(function) = self.instructions.get(&addr) {
            return *function;
        }
        refresh_if_unknown(addr, symbols, pid);
        let location = symbols.lookup(addr);
        let name: Arc<str> = match &location.function {
            Some(function) if self.is_shown_below_main(&function.name) => Arc::from("(below main)"),
            Some(function) => function.name.clone(),
            None => Arc::from(UNKNOWN),
        };
        let file = location.file.clone().unwrap_or_else(|| Arc::from(UNKNOWN));
        let key = (location.object.clone(), file.clone(), name.clone());
        let entry = self.functions.entry(key);
        let function = entry.index() as FnId;
        entry.or_insert_with(|| Function {
            object: location.object,
            file,
            name,
            skip: false,
            pop_on_jump: false,
            toggle_collect: false,
            dump_before: false,
            dump_after: false,
            zero_before: false,
            separate_recursions: 0,
            separate_callers: 0,
        });
        self.added(function as usize);
        self.instructions.insert(addr, function);
        function
    }

    /// What is known of the block starting at `addr`, looked up once.
    /// `symbols` is refreshed from the process's maps when `addr` is outside
    /// every known object (new code, e.g. after `dlopen`).
    #[inline]
    pub fn block(
        &mut self,
        addr: u64,
        symbols: &mut Symbols,
        pid: i32,
        options: &Options,
    ) -> BlockInfo {
        if let Some((at, info)) = self.recent.get(recent_slot(addr)) {
            if *at == addr {
                return *info;
            }
        }
        self.block_not_recent(addr, symbols, pid, options)
    }

    /// Where the block at `addr` is for the rules of contexts
    /// ([`BlockInfo::place`]), for a block that may not have run (the block
    /// is not numbered by the question), as the maps last read place it
    /// (the caller reads them again for an address in none).
    pub fn place(&mut self, addr: u64, symbols: &Symbols) -> Place {
        if let Some(info) = self.blocks.get(&addr) {
            return info.place();
        }
        let object = symbols.object(addr);
        let section = symbols.section_kind(addr);
        // As `new_block` places code outside text sections, code in no
        // object among them (a JIT's: Valgrind's `???`, where every block
        // is a function of its own, which no jump from that code enters
        // as a call).
        let (object, starts_function) = match section {
            SectionKind::Text => (object, symbols.is_function_start(addr)),
            _ => (Arc::from(UNKNOWN), false),
        };
        Place {
            region: self.region(object, section),
            starts_function,
            // PLT stubs, which Callgrind skips unless told not to
            // (`Process::place` says, and looks up the others).
            skipped: section == SectionKind::Plt,
        }
    }

    /// The number of the region of code in `object`'s sections of kind
    /// `section` ([`Place`]).
    fn region(&mut self, object: Arc<str>, section: SectionKind) -> u32 {
        self.regions.insert_full((object, section), ()).0 as u32
    }

    /// [`Functions::block`] for a block not in the cache of recent ones.
    #[cold]
    fn block_not_recent(
        &mut self,
        addr: u64,
        symbols: &mut Symbols,
        pid: i32,
        options: &Options,
    ) -> BlockInfo {
        let slot = recent_slot(addr);
        let info = match self.blocks.get(&addr) {
            Some(info) => *info,
            None => self.new_block(addr, symbols, pid, options),
        };
        if self.recent.is_empty() {
            // No block starts at the last address of the address space.
            self.recent = vec![(u64::MAX, info); RECENT];
        }
        self.recent[slot] = (addr, info);
        info
    }

    /// Looks up the block at `addr`, seen for the first time.
    fn new_block(
        &mut self,
        addr: u64,
        symbols: &mut Symbols,
        pid: i32,
        options: &Options,
    ) -> BlockInfo {
        refresh_if_unknown(addr, symbols, pid);
        let section = symbols.section_kind(addr);
        let mut location = symbols.lookup(addr);
        if section != SectionKind::Text {
            // Valgrind knows objects by their text: other code (PLT, .init)
            // is in no object and has no name.
            location.object = Arc::from(UNKNOWN);
            location.function = None;
            location.file = None;
        }
        let (name, is_entry): (Arc<str>, bool) = match &location.function {
            Some(function) if self.is_shown_below_main(&function.name) => {
                (Arc::from("(below main)"), function.start == addr)
            }
            Some(function) => (function.name.clone(), function.start == addr),
            None => {
                let offset = object_address(symbols, addr);
                (Arc::from(unknown_name(offset, section)), false)
            }
        };
        let file: Arc<str> = location.file.clone().unwrap_or_else(|| Arc::from(UNKNOWN));
        let object = location.object.clone();
        let (object_number, _) = self.objects.insert_full(object.clone(), ());
        let region = self.region(object.clone(), section);
        let key = (object.clone(), file.clone(), name.clone());
        let function = match self.functions.get_index_of(&key) {
            Some(index) => index,
            None => {
                let named = |patterns: &[String]| patterns.iter().any(|p| matches(p, &name));
                // The last `(pattern, N)` naming the function sets N (as
                // Callgrind applies its function configurations in order).
                let per_function = |default: u32, patterns: &[(String, u32)]| {
                    let named = patterns.iter().rev().find(|(p, _)| matches(p, &name));
                    named.map_or(default, |&(_, n)| n)
                };
                let skip = (options.skip_plt && section == SectionKind::Plt)
                    || named(&options.fn_skip)
                    || skips_object(&options.obj_skip, &object);
                let function = Function {
                    object,
                    file,
                    pop_on_jump: options.pop_on_jump
                        || name.starts_with("_dl_runtime_resolve")
                        || named(&options.pop_on_jump_of),
                    toggle_collect: named(&options.toggle_collect),
                    dump_before: named(&options.dump_before),
                    dump_after: named(&options.dump_after),
                    zero_before: named(&options.zero_before),
                    separate_recursions: per_function(
                        options.separate_recursions,
                        &options.separate_recursions_of,
                    ),
                    separate_callers: per_function(
                        options.separate_callers,
                        &options.separate_callers_of,
                    ),
                    name,
                    skip,
                };
                let index = self.functions.insert_full(key, function).0;
                self.added(index);
                index
            }
        };
        let info = BlockInfo {
            function: function as FnId,
            is_entry,
            object: object_number as u32,
            section,
            region,
            number: self.blocks.len() as u32,
        };
        self.blocks.insert(addr, info);
        info
    }
}

/// Re-reads the process's maps when `addr` is outside every known object
/// (new code, e.g. after `dlopen`). Unreadable objects resolve to `???`, as
/// in Valgrind; their problems are not fatal.
fn refresh_if_unknown(addr: u64, symbols: &mut Symbols, pid: i32) {
    if symbols.object(addr).as_ref() == UNKNOWN {
        let _ = symbols.refresh(pid as u32);
    }
}

/// The address Callgrind gives `addr` in names and positions: in an
/// object's text, relative to the object's load bias (the address the
/// object's file gives the instruction); elsewhere (PLT stubs, code in no
/// file, which Valgrind puts in no object) as it is.
pub(crate) fn object_address(symbols: &Symbols, addr: u64) -> u64 {
    let bias = match symbols.section_kind(addr) {
        SectionKind::Text => symbols.bias(addr).unwrap_or(0),
        _ => 0,
    };
    addr.wrapping_sub(bias)
}

/// Valgrind's name for code without a symbol: its address in the object
/// (absolute outside objects), and the section kind for PLT code.
fn unknown_name(addr: u64, section: SectionKind) -> String {
    let kind = if section == SectionKind::Plt {
        " [PLT]"
    } else {
        ""
    };
    format!("0x{addr:016x}{kind}")
}

/// Whether `--obj-skip` `patterns` name `object` (a path): by the whole
/// path or by its file name.
fn skips_object(patterns: &[String], object: &str) -> bool {
    let file_name = object.rsplit('/').next().unwrap_or(object);
    patterns
        .iter()
        .any(|pattern| matches(pattern, object) || matches(pattern, file_name))
}

#[cfg(test)]
impl Functions {
    /// Adds `function`, known without symbols (for tests of the rules that
    /// use functions); returns its number.
    pub fn insert(&mut self, function: Function) -> FnId {
        let key = (
            function.object.clone(),
            function.file.clone(),
            function.name.clone(),
        );
        let index = self.functions.insert_full(key, function).0;
        self.added(index);
        index as FnId
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_are_numbered_by_object_and_section_kind() {
        let mut functions = Functions::default();
        let libc: Arc<str> = Arc::from("/usr/lib/libc.so.6");
        let text = functions.region(libc.clone(), SectionKind::Text);
        assert_eq!(functions.region(libc.clone(), SectionKind::Text), text);
        assert_ne!(functions.region(libc, SectionKind::Plt), text);
        assert_ne!(
            functions.region(Arc::from("/bin/ls"), SectionKind::Text),
            text
        );
    }

    #[test]
    fn an_address_in_an_object_s_text_is_its_file_s_address_else_as_it_is() {
        let mut symbols = Symbols::new();
        symbols
            .refresh(std::process::id())
            .expect("this process's maps");
        // This test program's load bias: where its first page (file offset
        // 0) is when it is position-independent, else 0.
        let exe = std::fs::read_link("/proc/self/exe").expect("this program's path");
        let exe = exe.to_string_lossy().into_owned();
        let header = std::fs::read(&exe).expect("this program's file");
        let position_independent = header.get(16..18) == Some(&[3, 0][..]);
        let maps = std::fs::read_to_string("/proc/self/maps").expect("this process's maps");
        let first_page = maps
            .lines()
            .find(|line| line.ends_with(&exe) && line.split_whitespace().nth(2) == Some("00000000"))
            .and_then(|line| line.split('-').next())
            .and_then(|start| u64::from_str_radix(start, 16).ok())
            .expect("the mapping of the program's first page");
        let bias = if position_independent { first_page } else { 0 };
        let code = object_address as fn(&Symbols, u64) -> u64 as usize as u64;
        assert_eq!(symbols.section_kind(code), SectionKind::Text);
        assert_eq!(object_address(&symbols, code), code - bias);
        // Memory of no object: as it is.
        let heap = Box::new(0u64);
        let data = &*heap as *const u64 as u64;
        assert_eq!(object_address(&symbols, data), data);
    }

    #[test]
    fn the_functions_below_main_are_one_unless_shown() {
        let hidden = Functions::default();
        let shown = Functions::new(true);
        for name in ["__libc_start_call_main", "_start"] {
            assert!(hidden.is_shown_below_main(name), "{name}");
            assert!(!shown.is_shown_below_main(name), "{name}");
        }
        assert!(!hidden.is_shown_below_main("main"));
    }

    #[test]
    fn code_in_no_object_is_one_region_whose_blocks_start_no_function() {
        let mut functions = Functions::default();
        let mut symbols = Symbols::new();
        // Unmapped in this test process, as a JIT's code is in no object.
        let (first, second) = (0x1000, 0x2_0000);
        let place = functions.place(first, &symbols);
        assert_eq!(functions.place(second, &symbols), place);
        assert!(!place.starts_function && !place.skipped);
        // A block run there is placed as it was asked about before.
        let pid = std::process::id() as i32;
        let info = functions.block(first, &mut symbols, pid, &Options::default());
        assert_eq!(info.place(), place);
        assert!(!info.is_entry);
        // An object's text (the maps were read for the block) is another
        // region.
        let code = object_address as fn(&Symbols, u64) -> u64 as usize as u64;
        assert_ne!(functions.place(code, &symbols).region, place.region);
    }

    #[test]
    fn obj_skip_names_an_object_by_its_path_or_its_file_name() {
        let libc = "/usr/lib/x86_64-linux-gnu/libc.so.6";
        let patterns =
            |patterns: &[&str]| patterns.iter().map(|p| p.to_string()).collect::<Vec<_>>();
        assert!(skips_object(&patterns(&["libc.so.6"]), libc));
        assert!(skips_object(&patterns(&[libc]), libc));
        assert!(skips_object(&patterns(&["libc.so*"]), libc));
        assert!(skips_object(&patterns(&["*/x86_64-linux-gnu/*"]), libc));
        assert!(!skips_object(&patterns(&["libm.so.6"]), libc));
        assert!(!skips_object(&patterns(&["x86_64-linux-gnu"]), libc));
        assert!(!skips_object(&[], libc));
    }
}
