//! The first-level caches simulated in the program's own threads
//! ([`L1Filter`], `RunOptions::filter`): with Cachegrind's cache
//! simulation and no branch simulation, runs are counted (`area`), which
//! gives `Ir`, `Dr` and `Dw`; with Callgrind's (quiet runs,
//! `RunOptions::quiet_runs`) they are counted in segments (`quiet`), and
//! each record also names the record its run is counted in (the `RECORD`
//! slot, [`RECORD_WORDS`]), in a buffer of its own (`area`), so that the
//! collector charges its misses to that run's context. The process keeps
//! I1 and D1 itself ([`FirstLevel`]: each set's tags, Cachegrind's LRU
//! order, after the tables), and the tracer simulates LL alone, with the
//! fetches and accesses that missed them. A translation checks each fetch
//! the I1 simulation sees ([`fetch_points`]) and each data access against
//! the process's tables (after the first code region's system call
//! filter, `Layout::filter_tables`; each thread's area holds their
//! address). A fetch or access whose lines are each the most recently
//! used of their set changes nothing in an LRU cache and hits: nothing is
//! done. Any other goes to its cache's routine ([`routine`]), which takes
//! its lines to the front of their sets, writes a record of two words (a
//! tag saying all it is, [`tag`], and the address; three with the run's
//! record) when one missed, and teaches the table its lines; the tracer
//! simulates the recorded ones in LL, in order, and counts their misses.
//!
//! A table has [`ENTRIES`] entries, one per value of a line number's low
//! byte; entry `line & 0xff` holds `-line` (adding the line's number then
//! gives 0, which `jrcxz` tests without touching the flags) only while
//! `line` is the most recently used line of its set, else some other
//! line's or [`INVALID`]. A line becoming the most recent of its set
//! first invalidates the entries of the set's other lines
//! ([`Table::learn`]). So a table never claims a line the caches do not
//! have first in its set; an entry left invalid only sends an access that
//! then hits to the routine (new tables claim no line). A computed address
//! is checked once: the entry of its last line plus its first line is 0
//! only when they are one line, named (an entry holds only lines of its
//! index).
//!
//! The tables and caches are the process's. Valgrind runs one thread at
//! a time, long stretches each; two threads running at once would change
//! the same sets in their own order, from two processors. So from a
//! process's second thread on, the tracer keeps the caches
//! ([`SharedLevel::share`]): the routines then keep every record, marked
//! for the tracer ([`in_tracer`]), which takes each thread's records
//! through the caches in turn, as it drains them, and simulates their
//! misses in LL; the tables still decide the hits on the most recently
//! used lines (a line one thread finds claimed, no access of any thread
//! displaced since that thread's own last access to it, up to two
//! threads teaching one set at the same instant). A forked child goes on
//! with its copy. A stepped block (`stepper`) goes through the caches in
//! the tracer ([`SharedLevel::take`], given back after it), and the
//! tables forget all ([`forget`]); so do Callgrind's switches of
//! instrumentation, which empty them (`EventSink::caches_emptied`).
//!
//! The checks use `rax`, `rcx` and `rdx` through the area's slots and
//! change no flag (`lea`, `mov`, `movzx`, BMI2's `shrx`, `jrcxz`); a check
//! that does not hit goes through a short path of its translation (out of
//! line) to the region's routine, which keeps the flags in a slot
//! (`lahf`/`seto`) and `rsi` and `rdi` in theirs. Its record is written
//! first, kept only by moving the cursor on: a store in the buffer's
//! guard page faults before anything changed, and the tracer restarts the
//! routine with the other half (of the blocks' buffer, or of the filter
//! records' own).

use std::sync::{Mutex, MutexGuard, PoisonError};

use iced_x86::{Code, Instruction, MemoryOperand, Register, UsedMemory};

use crate::event::{AccessKind, DataAccess, FilteredAccess};

use super::area::{
    slot, CURSOR, FILTER_ADDR, FILTER_BACK, FILTER_CURSOR, FILTER_FLAGS, FILTER_MISSED, FILTER_RAX,
    FILTER_RCX, FILTER_RDI, FILTER_RDX, FILTER_RSI, FILTER_TABLES, FILTER_TAG, RECORD,
};
use super::capture::{operand_address, OperandAddress};
use super::dead::Scratch;
use super::emit::Emit;
use super::memory::Memory;
use super::pending::{restore_flags, save_flags};
use super::translator::Refusal;
use crate::error::{Error, Result};

/// Entries of a thread's table for one cache.
pub(super) const ENTRIES: u64 = 256;
/// A cache's sets share the table's entries: at most this many entries
/// per set (sets of at least 32).
const MOST_ALIASES: u64 = 8;
/// What an entry naming no line holds (no line's negated number: line
/// numbers are below 2^58).
pub(super) const INVALID: u64 = 1;
/// Bytes of a thread's two tables, I1's then D1's.
pub(super) const TABLES_BYTES: u64 = 2 * ENTRIES * 8;
/// Most lines of a set the filter keeps.
const MOST_WAYS: u32 = 16;
/// Bytes kept for the tags of one first-level cache ([`FirstLevel`]).
const CACHE_BYTES: u64 = ENTRIES * MOST_WAYS as u64 * 8;
/// Where the word saying that the tracer keeps the caches
/// ([`SharedLevel::share`]) is, from the tables' address: after the two
/// caches' tags.
const SHARED: u64 = TABLES_BYTES + 2 * CACHE_BYTES;
/// Bytes of the process's I1 and D1 after the tables, with that word's
/// page.
pub(super) const CACHES_BYTES: u64 = 2 * CACHE_BYTES + super::layout::PAGE;
/// A filter record's first word has this bit (a translation's id never).
const RECORD_BIT: u64 = 1 << 63;
/// ... and this one for a fetch.
const FETCH_BIT: u64 = 1 << 62;
/// Where a data access's kind is in a tag (2 bits).
const KIND_SHIFT: u32 = 60;
/// Where the access's size (as the simulation clamps it) or the fetched
/// instruction's length is (8 bits).
const SIZE_SHIFT: u32 = 52;
/// A record has this bit when the tracer takes its lines through I1 or
/// D1 ([`SharedLevel::share`]).
const TRACER_SHIFT: u32 = 51;
/// Instructions at addresses below this have filter records (user space
/// with 4-level page tables is below 2^47).
const ADDRESS_END: u64 = 1 << TRACER_SHIFT;
/// Words of a filter record that also names the record of its run (the
/// `RECORD` slot then: the record of the block running, written by its
/// prologue, or the spare record right after the tracer emptied the
/// buffer, before the next block's prologue).
pub(super) const RECORD_WORDS: usize = 3;
/// The labels the checks give their instructions (below `encode`'s
/// limit, above the translator's and `quiet`'s).
const FIRST_LABEL: u64 = 0x100;
const LABELS_END: u64 = 0x800;

/// One first-level cache as the filter sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FilterGeometry {
    /// Bytes of a line.
    pub line_size: u32,
    /// Sets.
    pub sets: u32,
    /// Lines of a set.
    pub ways: u32,
}

impl FilterGeometry {
    /// Whether a table can stand for the cache's sets.
    fn fits(&self) -> bool {
        let sets = u64::from(self.sets);
        self.sets.is_power_of_two()
            && sets <= ENTRIES
            && ENTRIES / sets <= MOST_ALIASES
            && (1..=MOST_WAYS).contains(&self.ways)
            && self.line_size.is_power_of_two()
            && self.line_size >= 8
    }

    fn line_bits(&self) -> u32 {
        self.line_size.trailing_zeros()
    }

    /// Cachegrind's cache of this geometry.
    fn config(&self) -> cgx_sim::CacheConfig {
        let size = self.line_size * self.sets * self.ways;
        cgx_sim::CacheConfig::new(size, self.ways, self.line_size)
    }

    /// Bytes of its lines' tags (`sets × ways` words).
    fn tags_bytes(&self) -> u64 {
        u64::from(self.sets) * u64::from(self.ways) * 8
    }
}

/// Cachegrind's I1 and D1 filtered in the program's threads (see the
/// module): their geometry, and the size data accesses are clamped to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct L1Filter {
    i1: FilterGeometry,
    d1: FilterGeometry,
    min_line: u32,
    /// Each record also names the record of the run it belongs to
    /// ([`RECORD_WORDS`]): with quiet runs (Callgrind's attribution).
    pub(super) attributed: bool,
}

impl L1Filter {
    /// The filter of `i1` and `d1` for a simulation that clamps data
    /// accesses to `min_line` bytes (its smallest line), on this host:
    /// `None` when a cache's sets do not fit a table (fewer than 32 or
    /// more than 256) or the processor lacks BMI2.
    pub fn for_host(i1: FilterGeometry, d1: FilterGeometry, min_line: u32) -> Option<L1Filter> {
        L1Filter::new(
            i1,
            d1,
            min_line,
            std::arch::is_x86_feature_detected!("bmi2"),
        )
    }

    /// [`L1Filter::for_host`] on a host with BMI2 or without.
    pub fn new(
        i1: FilterGeometry,
        d1: FilterGeometry,
        min_line: u32,
        bmi2: bool,
    ) -> Option<L1Filter> {
        let filter = L1Filter {
            i1,
            d1,
            min_line,
            attributed: false,
        };
        (bmi2 && i1.fits() && d1.fits() && min_line >= 1).then_some(filter)
    }

    /// This filter, its records naming the record of their run when
    /// `attributed` (see [`RECORD_WORDS`]).
    pub(super) fn attributed(self, attributed: bool) -> L1Filter {
        L1Filter { attributed, ..self }
    }

    /// Which of `instructions` (address, length) the I1 simulation sees
    /// fetched in a run of their block: the first, and each not wholly in
    /// the line its predecessor ended in (the others hit that line, the
    /// most recently used of its set).
    pub fn fetch_points(&self, instructions: &[(u64, u8)]) -> Vec<bool> {
        fetch_points(instructions, self.i1.line_size)
    }
}

/// Which of `instructions` (address, length) the I1 simulation sees
/// fetched in a run of their block, for lines of `line_size` bytes: the
/// first, and each not wholly in the line its predecessor ended in (the
/// others hit that line, the most recently used of its set). The rule of
/// the filter's checks and of the simulation's steps.
pub fn fetch_points(instructions: &[(u64, u8)], line_size: u32) -> Vec<bool> {
    let bits = line_size.trailing_zeros();
    let mut ended_in = None;
    instructions
        .iter()
        .map(|&(addr, len)| {
            let last = addr.wrapping_add(u64::from(len.max(1)) - 1) >> bits;
            let point = ended_in != Some(addr >> bits) || addr >> bits != last;
            ended_in = Some(last);
            point
        })
        .collect()
}

/// What a filter record stands for: the fetch of an instruction or one
/// of its data accesses (its address in the record's second word).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Check {
    /// The fetch of the instruction (address, length).
    Fetch(u64, u8),
    /// A data access of the instruction at this address, of `size` bytes
    /// and of this kind.
    Access(u64, u32, AccessKind),
}

/// The first word of a filter record of `check`: all the record means
/// but the address, so that its replay reads nothing else; `None` for an
/// instruction beyond the addresses a tag holds, or an access larger than
/// a line can be.
pub(super) fn tag(check: Check) -> Option<u64> {
    let (bits, addr, size) = match check {
        Check::Fetch(addr, len) => (FETCH_BIT, addr, u32::from(len)),
        Check::Access(addr, size, kind) => {
            // A size of 0 touches its first byte's line, as a size of 1.
            let size = size.max(1);
            let kind = match kind {
                AccessKind::Read => 0,
                AccessKind::Write => 1,
                AccessKind::Modify => 2,
            };
            (kind << KIND_SHIFT, addr, size)
        }
    };
    (addr < ADDRESS_END && size < 1 << (KIND_SHIFT - SIZE_SHIFT))
        .then_some(RECORD_BIT | bits | (u64::from(size) << SIZE_SHIFT) | addr)
}

/// Whether a filter record's fetch or access has still to go through I1
/// or D1 (in the tracer, [`SharedLevel::share`]); else it missed there.
#[inline(always)]
pub(super) fn in_tracer(tag: u64) -> bool {
    tag & (1 << TRACER_SHIFT) != 0
}

/// Whether a record's first word is a filter record's.
#[inline(always)]
pub(super) fn is_record(word: u64) -> bool {
    word & RECORD_BIT != 0
}

/// The fetch or access of a filter record: its `tag` ([`tag`]), its
/// `addr`, and the `record` of its run ([`FilteredAccess::record`]).
#[inline]
pub(super) fn of_record(tag: u64, addr: u64, record: u64) -> FilteredAccess {
    let instruction = tag & (ADDRESS_END - 1);
    let size = ((tag >> SIZE_SHIFT) & 0xff) as u32;
    if tag & FETCH_BIT != 0 {
        return FilteredAccess {
            instruction: (instruction, size as u8),
            access: None,
            record,
        };
    }
    let kind = match (tag >> KIND_SHIFT) & 3 {
        0 => AccessKind::Read,
        1 => AccessKind::Write,
        _ => AccessKind::Modify,
    };
    FilteredAccess {
        // The instruction's length is not needed for its accesses.
        instruction: (instruction, 0),
        access: Some(DataAccess { addr, size, kind }),
        record,
    }
}

/// Bytes that make both tables name no line.
pub(super) fn invalid_tables() -> Vec<u8> {
    (0..TABLES_BYTES / 8)
        .flat_map(|_| INVALID.to_le_bytes())
        .collect()
}

/// Makes the tables at `tables` in the tracee name no line: once the
/// tracer changed the caches ([`SharedLevel::give_back`]).
fn forget(memory: &Memory, tables: u64) -> Result<()> {
    memory.write(tables, &invalid_tables())
}

/// Offset of I1's (`fetches`) or D1's tags from the tables' address
/// ([`FirstLevel`]).
fn tags_offset(fetches: bool) -> u64 {
    match fetches {
        true => TABLES_BYTES,
        false => TABLES_BYTES + CACHE_BYTES,
    }
}

/// The process's I1 and D1 as the filter routines keep them: after the
/// tables (`Layout::filter_tables`), each cache's lines' tags (block
/// numbers, `sets × ways` words, each set's most recently used first,
/// as [`cgx_sim::Cache::tags`]; zeros at the start, as Valgrind's). The
/// tracer reads them to go on with them where the program's threads do
/// not (a stepped block's fetches and accesses), and writes them back.
#[derive(Clone, Debug)]
pub(super) struct FirstLevel {
    i1: cgx_sim::Cache,
    d1: cgx_sim::Cache,
    min_line: u32,
}

impl FirstLevel {
    /// The caches of `filter` in the tracee, whose tables are at `tables`.
    fn read(memory: &Memory, tables: u64, filter: &L1Filter) -> Result<FirstLevel> {
        let cache = |geometry: FilterGeometry, fetches: bool| -> Result<cgx_sim::Cache> {
            let at = tables + tags_offset(fetches);
            let mut tags = vec![0u64; (geometry.tags_bytes() / 8) as usize];
            memory.read_bulk(at, bytemuck::cast_slice_mut(&mut tags))?;
            cgx_sim::Cache::of_tags(geometry.config(), tags)
                .ok()
                .flatten()
                .ok_or_else(|| Error::Unexpected("translate: a filter cache's geometry".into()))
        };
        Ok(FirstLevel {
            i1: cache(filter.i1, true)?,
            d1: cache(filter.d1, false)?,
            min_line: filter.min_line,
        })
    }

    /// Writes the caches back to the tracee (tables at `tables`).
    fn write(&self, memory: &Memory, tables: u64) -> Result<()> {
        for (cache, fetches) in [(&self.i1, true), (&self.d1, false)] {
            let at = tables + tags_offset(fetches);
            memory.write(at, bytemuck::cast_slice(cache.tags()))?;
        }
        Ok(())
    }

    /// Empties both caches (the simulation emptied its own).
    pub fn empty(&mut self) {
        self.i1.clear();
        self.d1.clear();
    }

    /// Fetches the `len` bytes at `addr`: whether I1 missed.
    pub fn fetch_misses(&mut self, addr: u64, len: u8) -> bool {
        self.i1.access(addr, u32::from(len))
    }

    /// A data access of `size` bytes at `addr`, clamped as the
    /// simulation clamps it: whether D1 missed.
    pub fn access_misses(&mut self, addr: u64, size: u32) -> bool {
        self.d1.access(addr, size.min(self.min_line))
    }

    /// Whether `access` (a fetch, or a data access) misses its cache, which
    /// then holds its lines.
    pub fn misses(&mut self, access: &FilteredAccess) -> bool {
        match access.access {
            None => self.fetch_misses(access.instruction.0, access.instruction.1),
            Some(data) => self.access_misses(data.addr, data.size),
        }
    }
}

/// Where the tracer finds a process's first-level caches: in the tracee
/// while the process has one thread, else here. Two threads running at
/// once would change the same sets from two processors, which Valgrind,
/// running one thread at a time, never does; from a process's second
/// thread on, the tracer keeps the caches and takes each thread's records
/// through them in turn ([`SharedLevel::share`]).
#[derive(Debug, Default)]
pub(super) struct SharedLevel(Mutex<Kept>);

/// What [`SharedLevel`] holds.
#[derive(Clone, Debug, Default)]
pub(super) struct Kept {
    /// The tracer keeps the caches.
    shared: bool,
    /// The caches, while it does (and no stepped block has them).
    caches: Option<FirstLevel>,
}

impl Clone for SharedLevel {
    fn clone(&self) -> SharedLevel {
        SharedLevel(Mutex::new(self.lock().clone()))
    }
}

impl SharedLevel {
    fn lock(&self) -> MutexGuard<'_, Kept> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// From now on the tracer keeps the caches of `filter` (read from the
    /// tracee, whose tables are at `tables`): the program's threads record
    /// each fetch and access their tables do not decide, for the tracer to
    /// take through them ([`in_tracer`]).
    pub fn share(&self, memory: &Memory, tables: u64, filter: &L1Filter) -> Result<()> {
        let mut kept = self.lock();
        if kept.shared {
            return Ok(());
        }
        kept.caches = Some(FirstLevel::read(memory, tables, filter)?);
        kept.shared = true;
        memory.write(tables + SHARED, &1u64.to_le_bytes())
    }

    /// The caches for the tracer to go on with (a stepped block's): taken
    /// from here, or read from the tracee. Give them back after
    /// ([`SharedLevel::give_back`]).
    pub fn take(&self, memory: &Memory, tables: u64, filter: &L1Filter) -> Result<FirstLevel> {
        match self.lock().caches.take() {
            Some(caches) => Ok(caches),
            None => FirstLevel::read(memory, tables, filter),
        }
    }

    /// Caches taken back: kept here, or written to the tracee; its
    /// tables then name no line (they may name a line no longer first in
    /// its set).
    pub fn give_back(&self, caches: FirstLevel, memory: &Memory, tables: u64) -> Result<()> {
        let mut kept = self.lock();
        match kept.shared {
            true => kept.caches = Some(caches),
            false => caches.write(memory, tables)?,
        }
        forget(memory, tables)
    }

    /// Empties the caches (the simulation emptied its own).
    pub fn empty(&self, memory: &Memory, tables: u64, filter: &L1Filter) -> Result<()> {
        let mut caches = self.take(memory, tables, filter)?;
        caches.empty();
        self.give_back(caches, memory, tables)
    }

    /// The caches, while the tracer keeps them; the lock held while the
    /// records of a drain go through them ([`FilteredAccesses`]).
    pub fn kept(&self) -> MutexGuard<'_, Kept> {
        self.lock()
    }
}

impl Kept {
    /// The caches, while the tracer keeps them.
    pub fn caches(&mut self) -> Option<&mut FirstLevel> {
        self.caches.as_mut()
    }
}

/// A thread's table for one cache, as the checks and the record paths
/// keep it: the rule their code follows, for its tests.
#[cfg(test)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Table {
    entries: Vec<u64>,
    geometry: FilterGeometry,
}

#[cfg(test)]
impl Table {
    /// A new table (zeros).
    pub fn new(geometry: FilterGeometry) -> Table {
        Table {
            entries: vec![0; ENTRIES as usize],
            geometry,
        }
    }

    /// The first and last lines of `size` bytes at `addr`.
    fn lines(&self, addr: u64, size: u32) -> (u64, u64) {
        let bits = self.geometry.line_bits();
        let last = addr.wrapping_add(u64::from(size.max(1)) - 1);
        (addr >> bits, last >> bits)
    }

    /// Whether `line` is in its entry.
    fn names(&self, line: u64) -> bool {
        self.entries[(line & 0xff) as usize] == line.wrapping_neg()
    }

    /// Whether each line of `size` bytes at `addr` is the most recently
    /// used of its set, as a check of known lines finds it; with
    /// `one_line`, as a check of a computed address does (the last line's
    /// entry plus the first line is 0: one line, named).
    pub fn hits(&self, addr: u64, size: u32, one_line: bool) -> bool {
        let (first, last) = self.lines(addr, size);
        match one_line {
            true => self.entries[(last & 0xff) as usize].wrapping_add(first) == 0,
            false => self.names(first) && self.names(last),
        }
    }

    /// The lines of `size` bytes at `addr` were used, in order.
    pub fn learn(&mut self, addr: u64, size: u32) {
        let (first, last) = self.lines(addr, size);
        self.first_in_set(first);
        if last != first {
            self.first_in_set(last);
        }
    }

    /// `line` is now the most recently used of its set.
    fn first_in_set(&mut self, line: u64) {
        let sets = u64::from(self.geometry.sets);
        for alias in ((line & (sets - 1))..ENTRIES).step_by(sets as usize) {
            self.entries[alias as usize] = INVALID;
        }
        self.entries[(line & 0xff) as usize] = line.wrapping_neg();
    }
}

/// A cache's table, and the rule for its lines.
#[derive(Clone, Copy, Debug)]
struct TableAt {
    /// I1's (else D1's).
    fetches: bool,
    geometry: FilterGeometry,
}

impl TableAt {
    /// The table of `filter`'s I1 (`fetches`) or D1.
    fn of(filter: &L1Filter, fetches: bool) -> TableAt {
        let geometry = match fetches {
            true => filter.i1,
            false => filter.d1,
        };
        TableAt { fetches, geometry }
    }

    /// Offset of its entries from the tables' address (I1's first).
    fn base(&self) -> u64 {
        match self.fetches {
            true => 0,
            false => ENTRIES * 8,
        }
    }

    /// Offset of its cache's tags from the tables' address.
    fn tags(&self) -> u64 {
        tags_offset(self.fetches)
    }

    /// `[tables + index * scale + base + extra]`, `tables` holding the
    /// tables' address.
    fn entry(&self, tables: Register, index: Register, scale: u32, extra: u64) -> MemoryOperand {
        let displacement = (self.base() + extra) as i64;
        MemoryOperand::new(tables, index, scale, displacement, 8, false, Register::None)
    }
}

/// The checks of one translation being emitted (see the module), and
/// their out-of-line record paths.
pub(super) struct Checks {
    filter: L1Filter,
    fsgsbase: bool,
    /// Data accesses checked so far: the next one's number.
    accesses: usize,
    /// The next free label.
    label: u64,
    /// The record paths, appended after the block's code.
    paths: Emit,
    /// The labels of code in the body that writes a record
    /// ([`Checks::restart_label`]).
    starts: Vec<u64>,
    /// Where the record paths go on.
    routines: Routines,
    /// The checks the code ends with, whose registers are not restored
    /// yet.
    group: Option<Group>,
    /// The scratch registers the program no longer needs before the
    /// instruction checked next.
    dead: Scratch,
}

/// Checks one after the other in a translation (an instruction's fetch
/// and data accesses): they save the program's registers once (those it
/// still needs, [`Checks::before`]), and [`Checks::close`] restores them
/// after the last.
#[derive(Clone, Copy, Debug)]
struct Group {
    /// Instructions of the translation's code up to the group's end: a
    /// check that starts there goes on with it.
    end: usize,
    /// The registers saved, restored at its end.
    saved: Saved,
    /// Whether the checks may use rdx (saved, or not needed).
    rdx_free: bool,
    /// The label of what follows the last check (its hit).
    next: u64,
}

/// Which of rax, rcx and rdx a group of checks saved in their slots.
#[derive(Clone, Copy, Debug, Default)]
struct Saved {
    rax: bool,
    rcx: bool,
    rdx: bool,
}

impl Saved {
    /// Each register saved, with its slot.
    fn each(self) -> impl Iterator<Item = (Register, u64)> {
        [
            (self.rdx, Register::RDX, FILTER_RDX),
            (self.rcx, Register::RCX, FILTER_RCX),
            (self.rax, Register::RAX, FILTER_RAX),
        ]
        .into_iter()
        .filter(|&(saved, ..)| saved)
        .map(|(_, register, slot)| (register, slot))
    }
}

/// The entries of the region's routines that keep the caches and write
/// a filter record ([`routine`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Routines {
    /// I1's.
    pub i1: u64,
    /// D1's.
    pub d1: u64,
}

/// Where an access's address is: known when translating, or computed.
enum Address<'a> {
    Known(u64),
    Operand(&'a UsedMemory, u64),
}

impl Checks {
    /// The checks of a translation whose record paths go on in
    /// `routines` (`fsgsbase`: `rdfsbase` may be used).
    pub fn new(filter: L1Filter, fsgsbase: bool, routines: Routines) -> Checks {
        Checks {
            routines,
            filter,
            fsgsbase,
            accesses: 0,
            label: FIRST_LABEL,
            paths: Emit::default(),
            starts: Vec::new(),
            group: None,
            dead: Scratch::NONE,
        }
    }

    /// Data accesses checked so far.
    pub fn accesses(&self) -> usize {
        self.accesses
    }

    /// A label for the translation's code (the checks take theirs from
    /// the same ones).
    pub fn label(&mut self) -> Result<u64, Refusal> {
        let label = self.label;
        if label >= LABELS_END {
            return Err("too many filtered accesses".into());
        }
        self.label += 1;
        Ok(label)
    }

    /// Checks the fetch of the instruction of `len` bytes at `addr`, at
    /// `position` in the block.
    pub fn fetch(
        &mut self,
        code: &mut Vec<Instruction>,
        (addr, len): (u64, u8),
    ) -> Result<(), Refusal> {
        let check = Check::Fetch(addr, len);
        let table = TableAt::of(&self.filter, true);
        self.check(code, table, Address::Known(addr), u32::from(len), check)
    }

    /// Checks the data access of the instruction at `instruction` at
    /// `offset` bytes from `memory`'s address, of `size` bytes (checked
    /// clamped as the simulation clamps it) and of `kind`.
    pub fn access(
        &mut self,
        code: &mut Vec<Instruction>,
        instruction: u64,
        memory: &UsedMemory,
        offset: u64,
        size: u32,
        kind: AccessKind,
    ) -> Result<(), Refusal> {
        let size = size.min(self.filter.min_line);
        let check = Check::Access(instruction, size, kind);
        self.accesses += 1;
        let address = match operand_address(memory, self.fsgsbase)? {
            OperandAddress::Known(addr) => Address::Known(addr.wrapping_add(offset)),
            OperandAddress::Computed => Address::Operand(memory, offset),
        };
        let table = TableAt::of(&self.filter, false);
        self.check(code, table, address, size, check)
    }

    /// The check of `size` bytes at `address` against `table`, whose
    /// record path writes `check`: in the group of checks the code ends
    /// with ([`Group`]), else in a new one.
    fn check(
        &mut self,
        code: &mut Vec<Instruction>,
        table: TableAt,
        address: Address<'_>,
        size: u32,
        check: Check,
    ) -> Result<(), Refusal> {
        let (rax, rcx, rdx) = (Register::RAX, Register::RCX, Register::RDX);
        let (hit, path) = (self.label()?, self.label()?);
        let mut emit = Emit::default();
        let (group, continued) = match self.group.take() {
            Some(group) if group.end == code.len() => {
                // The last check's hit goes on here.
                emit.label(group.next);
                (group, true)
            }
            Some(_) => return Err("filter checks left open".into()),
            None => {
                let saved = Saved {
                    rax: !self.dead.has(rax),
                    rcx: !self.dead.has(rcx),
                    rdx: false,
                };
                for (register, slot) in saved.each() {
                    emit.save(slot, register)?;
                }
                let group = Group {
                    end: 0,
                    saved,
                    rdx_free: false,
                    next: 0,
                };
                (group, false)
            }
        };
        let (mut saved, mut rdx_free) = (group.saved, group.rdx_free);
        let bits = table.geometry.line_bits();
        match address {
            Address::Known(addr) => {
                let last = addr.wrapping_add(u64::from(size.max(1)) - 1);
                let (first, last) = (addr >> bits, last >> bits);
                let lines: &[u64] = if first == last {
                    &[first]
                } else {
                    &[first, last]
                };
                for (index, &line) in lines.iter().enumerate() {
                    emit.load(rcx, FILTER_TABLES)?;
                    emit.push(Instruction::with2(
                        Code::Mov_r64_rm64,
                        rcx,
                        table.entry(rcx, Register::None, 1, (line & 0xff) * 8),
                    ))?;
                    emit.push(Instruction::with2(Code::Mov_r64_imm64, rax, line))?;
                    emit.push(Instruction::with2(
                        Code::Lea_r64_m,
                        rcx,
                        MemoryOperand::with_base_index(rcx, rax),
                    ))?;
                    let next = match index + 1 == lines.len() {
                        true => hit,
                        false => self.label()?,
                    };
                    emit.jump(Code::Jrcxz_rel8_64, next)?;
                    emit.jump(Code::Jmp_rel32_64, path)?;
                    if next != hit {
                        emit.label(next);
                    }
                }
            }
            Address::Operand(memory, offset) => {
                if continued {
                    // An earlier check of the group used them (those not
                    // saved the address does not read).
                    for (register, slot) in saved.each() {
                        emit.load(register, slot)?;
                    }
                }
                if !rdx_free {
                    if !self.dead.has(rdx) {
                        emit.save(FILTER_RDX, rdx)?;
                        saved.rdx = true;
                    }
                    rdx_free = true;
                }
                address_to_rax(&mut emit, memory, offset)?;
                emit.push(Instruction::with2(Code::Mov_r32_imm32, Register::EDX, bits))?;
                // The entry of the last line, plus the first line: 0 only
                // when both are that line (an entry holds only lines of its
                // index, and a second line's index differs).
                let index = match size > 1 {
                    true => {
                        emit.lea(rcx, rax, i64::from(size) - 1)?;
                        emit.push(Instruction::with3(
                            Code::VEX_Shrx_r64_rm64_r64,
                            rcx,
                            rcx,
                            rdx,
                        ))?;
                        Register::CL
                    }
                    false => Register::AL,
                };
                emit.push(Instruction::with3(
                    Code::VEX_Shrx_r64_rm64_r64,
                    rax,
                    rax,
                    rdx,
                ))?;
                emit.push(Instruction::with2(
                    Code::Movzx_r32_rm8,
                    Register::ECX,
                    index,
                ))?;
                emit.load(rdx, FILTER_TABLES)?;
                emit.push(Instruction::with2(
                    Code::Mov_r64_rm64,
                    rcx,
                    table.entry(rdx, rcx, 8, 0),
                ))?;
                emit.push(Instruction::with2(
                    Code::Lea_r64_m,
                    rcx,
                    MemoryOperand::with_base_index(rcx, rax),
                ))?;
                emit.jump(Code::Jrcxz_rel8_64, hit)?;
                emit.jump(Code::Jmp_rel32_64, path)?;
            }
        }
        code.append(&mut emit.list);
        self.group = Some(Group {
            end: code.len(),
            saved,
            rdx_free,
            next: hit,
        });
        let routine = match table.fetches {
            true => self.routines.i1,
            false => self.routines.d1,
        };
        self.record_path(routine, address, check, path, hit, rdx_free)
    }

    /// The checks that follow are of an instruction before which the
    /// program no longer needs the registers of `dead` (`dead`).
    pub fn before(&mut self, dead: Scratch) {
        self.dead = dead;
    }

    /// Ends the group of checks the code ends with, if any: what follows
    /// the last check's hit restores the program's registers.
    pub fn close(&mut self, code: &mut Vec<Instruction>) -> Result<(), Refusal> {
        let Some(group) = self.group.take() else {
            return Ok(());
        };
        if group.end != code.len() {
            return Err("filter checks left open".into());
        }
        let mut emit = Emit::default();
        emit.label(group.next);
        for (register, slot) in group.saved.each() {
            emit.load(register, slot)?;
        }
        if group.saved.each().next().is_none() {
            // Nothing to restore: the hit goes on at a `nop`.
            emit.push(Ok::<_, iced_x86::IcedError>(Instruction::with(Code::Nopd)))?;
        }
        code.append(&mut emit.list);
        Ok(())
    }

    /// The out-of-line path of a check: puts the address, the record's
    /// tag and `back` (where the check's group goes on) in the slots and
    /// goes to its table's `routine` ([`routine`]), which restores rdx from
    /// its slot: the path saves it there unless the group may use it
    /// (`rdx_free`: saved there already, or not needed).
    fn record_path(
        &mut self,
        routine: u64,
        address: Address<'_>,
        check: Check,
        start: u64,
        back: u64,
        rdx_free: bool,
    ) -> Result<(), Refusal> {
        let (rax, rcx, rdx) = (Register::RAX, Register::RCX, Register::RDX);
        let code = &mut self.paths;
        code.label(start);
        match address {
            Address::Known(addr) => {
                if !rdx_free {
                    code.save(FILTER_RDX, rdx)?;
                }
                code.push(Instruction::with2(Code::Mov_r64_imm64, rax, addr))?;
            }
            Address::Operand(memory, offset) => {
                code.load(rax, FILTER_RAX)?;
                code.load(rcx, FILTER_RCX)?;
                code.load(rdx, FILTER_RDX)?;
                address_to_rax(code, memory, offset)?;
            }
        }
        code.save(FILTER_ADDR, rax)?;
        let tag = tag(check).ok_or_else(|| "an instruction beyond filter records".to_string())?;
        code.push(Instruction::with2(Code::Mov_r64_imm64, rax, tag))?;
        code.save(FILTER_TAG, rax)?;
        code.push(Instruction::with2(
            Code::Lea_r64_m,
            rax,
            MemoryOperand::with_base_displ(Register::RIP, back as i64),
        ))?;
        code.save(FILTER_BACK, rax)?;
        code.jump(Code::Jmp_rel32_64, routine)
    }

    /// A label for code that writes a record in the body (a block's own
    /// record written late, before its `syscall`): a store there that
    /// faults restarts there, with the program's rax back from the slot
    /// the record's code saved it in.
    pub fn restart_label(&mut self) -> Result<u64, Refusal> {
        let label = self.label()?;
        self.starts.push(label);
        Ok(label)
    }

    /// Appends the record paths to `code`; the labels of the code in the
    /// body that writes a record (a store that faults there restarts
    /// there). Every group of checks must be closed.
    pub fn finish(mut self, code: &mut Vec<Instruction>) -> Result<Vec<u64>, Refusal> {
        if self.group.is_some() {
            return Err("filter checks left open".into());
        }
        code.append(&mut self.paths.list);
        Ok(self.starts)
    }
}

/// The routine of `filter`'s I1 (`fetches`) or D1, encoded at `at`: the
/// program's rax, rcx and rdx in their slots, the address and the
/// record's tag in theirs, it writes the record (naming the run's record
/// too, in the filter records' buffer, when `filter` says so; a store
/// into the guard page faults before anything changed: the tracer
/// restarts the routine), moves the lines to the front of their sets in
/// the process's cache ([`FirstLevel`], as Cachegrind's LRU step does),
/// keeps the record only when a line missed (while the tracer keeps the
/// caches, [`SharedLevel`], it keeps every record, marked for the tracer,
/// and leaves the caches alone), teaches the table the lines
/// (as [`Table::learn`], the size from the tag), and goes back to the
/// slot's address with rdx restored (the rest there). The flags are kept
/// (`lahf`/`seto`).
pub(super) fn routine(at: u64, filter: &L1Filter, fetches: bool) -> Result<Vec<u8>, Refusal> {
    const ONE_LINE: u64 = 1;
    const HIT: u64 = 2;
    const DONE: u64 = 3;
    const FOUND: u64 = 4;
    const SHARED_CACHES: u64 = 5;
    const KEEP: u64 = 6;
    let (rax, rcx, rdx) = (Register::RAX, Register::RCX, Register::RDX);
    let table = TableAt::of(filter, fetches);
    let mut code = Emit::default();
    save_flags(&mut code, FILTER_FLAGS)?;
    // Records that name their run have a buffer of their own (`area`).
    let cursor = match filter.attributed {
        true => FILTER_CURSOR,
        false => CURSOR,
    };
    code.load(rcx, cursor)?;
    code.load(rdx, FILTER_TAG)?;
    code.push(Instruction::with2(
        Code::Mov_rm64_r64,
        MemoryOperand::with_base(rcx),
        rdx,
    ))?;
    code.load(rax, FILTER_ADDR)?;
    code.push(Instruction::with2(
        Code::Mov_rm64_r64,
        MemoryOperand::with_base_displ(rcx, 8),
        rax,
    ))?;
    let bytes = match filter.attributed {
        true => {
            // The record of the run, then the tag again in rdx.
            code.load(rdx, RECORD)?;
            code.push(Instruction::with2(
                Code::Mov_rm64_r64,
                MemoryOperand::with_base_displ(rcx, 16),
                rdx,
            ))?;
            code.load(rdx, FILTER_TAG)?;
            8 * RECORD_WORDS as i64
        }
        false => 16,
    };
    // The last byte: the address plus the size (at least 1) less one.
    code.push(Instruction::with2(Code::Shr_rm64_imm8, rdx, SIZE_SHIFT))?;
    code.push(Instruction::with2(
        Code::And_rm32_imm32,
        Register::EDX,
        0xff,
    ))?;
    code.push(Instruction::with2(
        Code::Lea_r64_m,
        rcx,
        MemoryOperand::new(rax, rdx, 1, -1, 8, false, Register::None),
    ))?;
    let bits = table.geometry.line_bits();
    code.push(Instruction::with2(Code::Shr_rm64_imm8, rax, bits))?;
    code.push(Instruction::with2(Code::Shr_rm64_imm8, rcx, bits))?;
    code.save(FILTER_RSI, Register::RSI)?;
    code.save(FILTER_RDI, Register::RDI)?;
    code.push(Instruction::with2(
        Code::Mov_rm64_imm32,
        slot(FILTER_MISSED),
        0,
    ))?;
    // While the tracer keeps the caches, it takes every record through
    // them.
    code.load(rdx, FILTER_TABLES)?;
    code.push(Instruction::with2(
        Code::Cmp_rm64_imm8,
        MemoryOperand::with_base_displ(rdx, SHARED as i64),
        0,
    ))?;
    code.jump(Code::Jne_rel32_64, SHARED_CACHES)?;
    to_front(&mut code, table, rax, FOUND)?;
    code.label(FOUND);
    code.push(Instruction::with2(Code::Cmp_r64_rm64, rcx, rax))?;
    code.jump(Code::Je_rel32_64, ONE_LINE)?;
    to_front(&mut code, table, rcx, ONE_LINE)?;
    code.label(ONE_LINE);
    code.push(Instruction::with2(
        Code::Cmp_rm64_imm8,
        slot(FILTER_MISSED),
        0,
    ))?;
    code.jump(Code::Je_rel32_64, HIT)?;
    code.jump(Code::Jmp_rel32_64, KEEP)?;
    code.label(SHARED_CACHES);
    code.load(rdx, cursor)?;
    code.push(Instruction::with2(
        Code::Bts_rm64_imm8,
        MemoryOperand::with_base(rdx),
        TRACER_SHIFT,
    ))?;
    // Missed, or the tracer's to take: the record stays.
    code.label(KEEP);
    code.load(rdx, cursor)?;
    code.lea(rdx, rdx, bytes)?;
    code.save(cursor, rdx)?;
    code.label(HIT);
    code.load(Register::RSI, FILTER_RSI)?;
    code.load(Register::RDI, FILTER_RDI)?;
    first_in_set(&mut code, table, rax)?;
    code.push(Instruction::with2(Code::Cmp_r64_rm64, rcx, rax))?;
    code.jump(Code::Je_rel32_64, DONE)?;
    first_in_set(&mut code, table, rcx)?;
    code.label(DONE);
    restore_flags(&mut code, FILTER_FLAGS)?;
    code.load(rdx, FILTER_RDX)?;
    code.push(Instruction::with1(Code::Jmp_rm64, slot(FILTER_BACK)))?;
    let (bytes, _) = super::encode::encode(&code.list, at)?;
    Ok(bytes)
}

/// `line` (in `reg`, rax or rcx) goes to the front of its set in the
/// process's cache of `table` (Cachegrind's LRU step: the lines before it
/// move back one way; when it is in none, the last way's line leaves),
/// and [`FILTER_MISSED`] is set when it was in none (rdx, rsi and rdi
/// lost, flags changed); then goes on at `found`, the label of the next
/// instruction.
fn to_front(code: &mut Emit, table: TableAt, reg: Register, found: u64) -> Result<(), Refusal> {
    let (rdx, edx, rsi, rdi) = (Register::RDX, Register::EDX, Register::RSI, Register::RDI);
    let low32 = match reg {
        Register::RAX => Register::EAX,
        _ => Register::ECX,
    };
    let geometry = table.geometry;
    let ways = geometry.ways;
    // rdx: the tables' address plus the set's offset among the tags.
    code.push(Instruction::with2(Code::Mov_r32_rm32, edx, low32))?;
    code.push(Instruction::with2(
        Code::And_rm32_imm32,
        edx,
        geometry.sets - 1,
    ))?;
    code.push(Instruction::with3(
        Code::Imul_r32_rm32_imm32,
        edx,
        edx,
        ways * 8,
    ))?;
    code.push(Instruction::with2(
        Code::Add_r64_rm64,
        rdx,
        slot(FILTER_TABLES),
    ))?;
    // Each way takes the line before it (rsi and rdi in turn hold it),
    // up to the way that held `line`.
    code.push(Instruction::with2(Code::Mov_r64_rm64, rsi, reg))?;
    for way in 0..u64::from(ways) {
        let (held, moved) = match way % 2 {
            0 => (rdi, rsi),
            _ => (rsi, rdi),
        };
        let at = MemoryOperand::with_base_displ(rdx, (table.tags() + 8 * way) as i64);
        code.push(Instruction::with2(Code::Mov_r64_rm64, held, at))?;
        code.push(Instruction::with2(Code::Mov_rm64_r64, at, moved))?;
        code.push(Instruction::with2(Code::Cmp_r64_rm64, held, reg))?;
        code.jump(Code::Je_rel32_64, found)?;
    }
    code.push(Instruction::with2(
        Code::Mov_rm64_imm32,
        slot(FILTER_MISSED),
        1,
    ))
}

/// `lea rax, [memory] (+ fs base) (+ offset)`: rax and rcx hold the
/// program's values before (rcx is lost with an `fs` operand).
fn address_to_rax(code: &mut Emit, memory: &UsedMemory, offset: u64) -> Result<(), Refusal> {
    super::capture::lea_operand(&mut code.list, memory, Register::RAX, Register::RCX)?;
    if offset != 0 {
        let offset = offset as i64;
        if i32::try_from(offset).is_err() {
            return Err("an access offset out of range".into());
        }
        code.lea(Register::RAX, Register::RAX, offset)?;
    }
    Ok(())
}

/// `line` (in `reg`, rax or rcx) is the most recent of its set in
/// `table` (rdx lost, flags changed), as [`Table::learn`].
fn first_in_set(code: &mut Emit, table: TableAt, reg: Register) -> Result<(), Refusal> {
    let (rdx, edx) = (Register::RDX, Register::EDX);
    let (low32, low8) = match reg {
        Register::RAX => (Register::EAX, Register::AL),
        _ => (Register::ECX, Register::CL),
    };
    let sets = u64::from(table.geometry.sets);
    // rdx: the tables' address plus 8 times the set (then the entry).
    let entry = |code: &mut Emit| -> std::result::Result<(), Refusal> {
        code.push(Instruction::with2(Code::Shl_rm32_imm8, edx, 3))?;
        code.push(Instruction::with2(
            Code::Add_r64_rm64,
            rdx,
            slot(FILTER_TABLES),
        ))
    };
    code.push(Instruction::with2(Code::Mov_r32_rm32, edx, low32))?;
    code.push(Instruction::with2(
        Code::And_rm32_imm32,
        edx,
        (sets - 1) as u32,
    ))?;
    entry(code)?;
    for alias in 0..ENTRIES / sets {
        code.push(Instruction::with2(
            Code::Mov_rm64_imm32,
            table.entry(rdx, Register::None, 1, alias * sets * 8),
            INVALID as i32,
        ))?;
    }
    code.push(Instruction::with2(Code::Movzx_r32_rm8, edx, low8))?;
    entry(code)?;
    code.push(Instruction::with1(Code::Neg_rm64, reg))?;
    code.push(Instruction::with2(
        Code::Mov_rm64_r64,
        table.entry(rdx, Register::None, 1, 0),
        reg,
    ))?;
    code.push(Instruction::with1(Code::Neg_rm64, reg))
}

#[cfg(test)]
mod tests {
    use super::super::running::Running;
    use super::*;

    const I1: FilterGeometry = FilterGeometry {
        line_size: 64,
        sets: 64,
        ways: 8,
    };

    #[test]
    fn a_filter_needs_bmi2_and_sets_a_table_can_stand_for() {
        assert!(L1Filter::new(I1, I1, 64, true).is_some());
        assert!(L1Filter::new(I1, I1, 64, false).is_none());
        let few = FilterGeometry { sets: 16, ..I1 };
        let many = FilterGeometry { sets: 512, ..I1 };
        let odd = FilterGeometry { sets: 48, ..I1 };
        let wide = FilterGeometry { ways: 17, ..I1 };
        let none = FilterGeometry { ways: 0, ..I1 };
        assert!(L1Filter::new(FilterGeometry { ways: 16, ..I1 }, I1, 64, true).is_some());
        for geometry in [few, many, odd, wide, none] {
            assert!(L1Filter::new(geometry, I1, 64, true).is_none());
            assert!(L1Filter::new(I1, geometry, 64, true).is_none());
        }
    }

    #[test]
    fn a_record_says_all_its_fetch_or_access_is() {
        let at = 0x7fff_ffff_f000;
        let fetch = tag(Check::Fetch(at, 15)).unwrap();
        assert!(is_record(fetch));
        let expected = FilteredAccess {
            instruction: (at, 15),
            access: None,
            record: 0x7f00_0000_1000,
        };
        assert_eq!(of_record(fetch, 0, 0x7f00_0000_1000), expected);
        for (size, kind) in [
            (1, AccessKind::Read),
            (64, AccessKind::Write),
            (255, AccessKind::Modify),
        ] {
            let word = tag(Check::Access(0x40_1000, size, kind)).unwrap();
            assert!(is_record(word));
            let access = DataAccess {
                addr: 0x1234,
                size,
                kind,
            };
            let expected = FilteredAccess {
                instruction: (0x40_1000, 0),
                access: Some(access),
                record: 0,
            };
            assert_eq!(of_record(word, 0x1234, 0), expected);
        }
        // A translation's id is no filter record; an instruction beyond
        // the addresses, or an access of more than 255 bytes, has none.
        assert!(!is_record(u64::from(u32::MAX)));
        assert_eq!(tag(Check::Fetch(ADDRESS_END, 1)), None);
        assert_eq!(tag(Check::Access(0, 256, AccessKind::Read)), None);
    }

    #[test]
    fn fetch_points_are_the_first_and_those_leaving_the_last_line() {
        let instructions = [
            (0x1000, 4),
            (0x1004, 8),
            (0x103e, 4),
            (0x1042, 2),
            (0x1080, 1),
        ];
        assert_eq!(
            fetch_points(&instructions, 64),
            [true, false, true, false, true]
        );
    }

    #[test]
    fn a_new_table_claims_line_zero_alone() {
        let table = Table::new(I1);
        assert!(table.hits(0, 8, true));
        assert!(!table.hits(64 * 64, 8, true));
        assert!(!table.hits(256 * 64, 8, true));
    }

    #[test]
    fn an_access_from_line_zero_into_line_one_needs_tables_that_forgot() {
        // Zeros name line 0 in every entry: the check of a computed
        // address would take the two lines for one; the tracer writes
        // invalid tables into every code region first.
        let zeros = Table::new(I1);
        assert!(zeros.hits(60, 8, true));
        let forgot = Table {
            entries: vec![INVALID; ENTRIES as usize],
            geometry: I1,
        };
        assert!(!forgot.hits(60, 8, true) && !forgot.hits(0, 8, true));
    }

    #[test]
    fn a_line_learnt_is_claimed_until_another_of_its_set() {
        let mut table = Table::new(I1);
        let a = 0x7000_0040;
        table.learn(a, 8);
        assert!(table.hits(a + 8, 4, true));
        // Another line of the same set (64 lines on) and of the same entry
        // (256 lines on).
        for other in [a + 64 * 64, a + 256 * 64] {
            let mut table = table.clone();
            table.learn(other, 8);
            assert!(!table.hits(a, 8, true));
            assert!(table.hits(other, 8, true));
        }
        // A line of another set leaves it.
        table.learn(a + 64, 8);
        assert!(table.hits(a, 8, true));
    }

    #[test]
    fn an_access_across_two_lines_teaches_both_and_hits_only_when_allowed() {
        let mut table = Table::new(I1);
        table.learn(0x1000 + 60, 8);
        assert!(table.hits(0x1000, 4, true));
        assert!(table.hits(0x1040, 4, true));
        assert!(table.hits(0x1000 + 60, 8, false));
        assert!(!table.hits(0x1000 + 60, 8, true));
    }

    /// A table kept as the checks and record paths keep it beside
    /// Cachegrind's cache it filters for (`geometry`), over
    /// accesses spread on a few lines per set: it never claims a line
    /// that is not the most recently used of its set, and what it lets
    /// through leaves the cache as the whole sequence would.
    fn claims_only_the_most_recent_lines(geometry: FilterGeometry) {
        let size = geometry.line_size * geometry.sets * geometry.ways;
        let mut filtered = cgx_sim::Cache::new(geometry.config()).unwrap();
        let mut whole = filtered.clone();
        let mut table = Table {
            entries: vec![INVALID; ENTRIES as usize],
            geometry,
        };
        let span = u64::from(size) * 3;
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let (mut hits, mut through) = (0, 0);
        let mut last = 0x5555_0000_0000u64;
        for step in 0..200_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            // Mostly near the last access, as programs go.
            let addr = match seed % 4 {
                0 => 0x5555_0000_0000 + (seed >> 8) % span,
                _ => last.wrapping_add((seed >> 8) % 96).wrapping_sub(32),
            };
            last = addr;
            let bytes = [1, 2, 4, 8, 16, 32][(seed >> 40) as usize % 6];
            let known = step % 3 == 0;
            let whole_miss = whole.access(addr, bytes);
            if table.hits(addr, bytes, !known) {
                assert!(!whole_miss, "a claimed line missed at {addr:#x}");
                assert!(!filtered.access(addr, bytes));
                hits += 1;
            } else {
                assert_eq!(filtered.access(addr, bytes), whole_miss);
                table.learn(addr, bytes);
                through += 1;
            }
        }
        assert!(hits > 10_000 && through > 10_000, "{hits} {through}");
    }

    #[test]
    fn a_table_claims_only_the_most_recent_lines_of_its_cache() {
        claims_only_the_most_recent_lines(I1);
        let small = FilterGeometry {
            line_size: 32,
            sets: 32,
            ways: 2,
        };
        claims_only_the_most_recent_lines(small);
        let wide = FilterGeometry {
            line_size: 64,
            sets: 256,
            ways: 4,
        };
        claims_only_the_most_recent_lines(wide);
    }

    /// The routine of each cache run in this process over fetches and
    /// accesses spread on a few lines per set (some across two lines),
    /// beside Cachegrind's caches: it keeps the record of exactly those
    /// that miss (naming their run's record when attributed), leaves the
    /// process's caches as Cachegrind's would be, and its table claims
    /// only the most recently used line of a set.
    fn routine_keeps_the_caches(attributed: bool) {
        let running = Running::new();
        let d1 = FilterGeometry {
            line_size: 64,
            sets: 32,
            ways: 3,
        };
        let filter = L1Filter::new(I1, d1, 64, true)
            .unwrap()
            .attributed(attributed);
        let (cursor, words) = match attributed {
            true => (FILTER_CURSOR, RECORD_WORDS),
            false => (CURSOR, 2),
        };
        let mut memory = vec![0u64; ((TABLES_BYTES + CACHES_BYTES) / 8) as usize];
        memory[..(TABLES_BYTES / 8) as usize].fill(INVALID);
        running.set(FILTER_TABLES, memory.as_mut_ptr() as u64);
        let mut buffer = vec![0u64; 4];
        // Runs the routine of I1 (`fetches`) or D1 on the record `tag` of
        // `addr` in the run `record`: the words it kept in `buffer`.
        let run = |buffer: &mut Vec<u64>, fetches: bool, tag: u64, addr: u64, record: u64| {
            running.set(cursor, buffer.as_mut_ptr() as u64);
            running.set(FILTER_ADDR, addr);
            running.set(FILTER_TAG, tag);
            running.set(RECORD, record);
            running.set(FILTER_RDX, 0x1234);
            running.call(|at, back| {
                running.set(FILTER_BACK, back);
                routine(at, &filter, fetches).unwrap()
            });
            (running.get(cursor) - buffer.as_ptr() as u64) / 8
        };
        let mut caches = [
            cgx_sim::Cache::new(I1.config()).unwrap(),
            cgx_sim::Cache::new(d1.config()).unwrap(),
        ];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let (mut misses, mut hits) = (0, 0);
        for step in 0..20_000u64 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let fetches = seed.is_multiple_of(3);
            let geometry = [d1, I1][usize::from(fetches)];
            let span = u64::from(geometry.line_size * geometry.sets * (geometry.ways + 1));
            let addr = 0x5555_0000_0000 + (seed >> 8) % span;
            let size = [1, 2, 4, 8, 15][(seed >> 40) as usize % 5];
            let check = match fetches {
                true => Check::Fetch(addr, size as u8),
                false => Check::Access(0x40_1000 + step, size, AccessKind::Read),
            };
            let tag = tag(check).unwrap();
            let kept = run(&mut buffer, fetches, tag, addr, step);
            let missed = caches[usize::from(!fetches)].access(addr, size);
            assert_eq!(kept, if missed { words as u64 } else { 0 }, "{step}");
            let record = [tag, addr, step];
            assert_eq!(buffer[..words], record[..words], "{step}");
            match missed {
                true => misses += 1,
                false => hits += 1,
            }
        }
        assert!(misses > 1_000 && hits > 1_000, "{misses} {hits}");
        for (cache, fetches) in caches.iter().zip([true, false]) {
            let at = (tags_offset(fetches) / 8) as usize;
            assert_eq!(&memory[at..at + cache.tags().len()], cache.tags());
            let geometry = [d1, I1][usize::from(fetches)];
            let table = (TableAt { fetches, geometry }.base() / 8) as usize;
            for &entry in &memory[table..table + ENTRIES as usize] {
                let line = entry.wrapping_neg();
                if entry != INVALID {
                    let set = (line % u64::from(geometry.sets)) as usize;
                    assert_eq!(cache.tags()[set * geometry.ways as usize], line);
                }
            }
        }
        let tags = memory.clone();
        // Once the tracer keeps the caches, every record is kept, for it
        // to take through them; the process's caches stay as they were.
        memory[(SHARED / 8) as usize] = 1;
        for (step, addr) in [(0, 0x5555_0000_0040u64), (1, 0x5555_0000_1234)] {
            let check = Check::Access(0x40_2000, 8, AccessKind::Write);
            let kept = run(&mut buffer, false, tag(check).unwrap(), addr, step);
            assert_eq!(kept, words as u64, "{step}");
            assert!(in_tracer(buffer[0]) && is_record(buffer[0]), "{step}");
            let access = of_record(buffer[0], buffer[1], 0);
            assert_eq!(access.access.map(|access| access.addr), Some(addr));
        }
        let caches_at = (TABLES_BYTES / 8) as usize..(SHARED / 8) as usize;
        assert_eq!(memory[caches_at.clone()], tags[caches_at]);
    }

    #[test]
    fn the_routines_keep_the_process_s_caches_and_record_their_misses() {
        std::thread::spawn(|| {
            routine_keeps_the_caches(false);
            routine_keeps_the_caches(true);
        })
        .join()
        .unwrap();
    }

    /// An instruction's fetch and its computed access are checked in one
    /// group: the program's registers saved once and restored after both
    /// (the access's address computed from the program's rax and rcx,
    /// reloaded), but for those the program no longer needs; nothing may
    /// come between checks of one group.
    #[test]
    fn an_instruction_s_checks_save_its_registers_once() {
        let filter = L1Filter::new(I1, I1, 64, true).unwrap();
        let routines = Routines {
            i1: 0x7f00_0000_1000,
            d1: 0x7f00_0000_2000,
        };
        // mov [rax+rcx*8], rdx
        let bytes = [0x48, 0x89, 0x14, 0xc8];
        let mut decoder =
            iced_x86::Decoder::with_ip(64, &bytes, 0x40_1000, iced_x86::DecoderOptions::NONE);
        let instruction = decoder.decode();
        let mut factory = iced_x86::InstructionInfoFactory::new();
        let memory = factory.info(&instruction).used_memory()[0];
        let mut checks = Checks::new(filter, false, routines);
        let mut code = Vec::new();
        checks.fetch(&mut code, (0x40_1000, 4)).unwrap();
        let write = AccessKind::Write;
        checks
            .access(&mut code, 0x40_1000, &memory, 0, 8, write)
            .unwrap();
        checks.close(&mut code).unwrap();
        let slot_uses = |code: &[Instruction], form: Code, at: u64| {
            let uses = |i: &&Instruction| {
                i.code() == form
                    && i.memory_segment() == Register::GS
                    && i.memory_displacement64() == at
            };
            code.iter().filter(uses).count()
        };
        for (at, reads) in [(FILTER_RAX, 2), (FILTER_RCX, 2), (FILTER_RDX, 1)] {
            assert_eq!(slot_uses(&code, Code::Mov_rm64_r64, at), 1, "{at}");
            assert_eq!(slot_uses(&code, Code::Mov_r64_rm64, at), reads, "{at}");
        }
        assert_eq!(code.last().map(Instruction::code), Some(Code::Mov_r64_rm64));
        // mov ecx, [rax]; ret: rcx is not needed before the load, which
        // writes it whole.
        let block: Vec<Option<Instruction>> = iced_x86::Decoder::with_ip(
            64,
            &[0x8b, 0x08, 0xc3],
            0x40_2000,
            iced_x86::DecoderOptions::NONE,
        )
        .into_iter()
        .map(Some)
        .collect();
        let load = block[0].unwrap();
        let memory = factory.info(&load).used_memory()[0];
        let mut dead_rcx = Vec::new();
        checks.before(super::super::dead::dead_before(&block)[0]);
        checks.fetch(&mut dead_rcx, (0x40_2000, 2)).unwrap();
        let read = AccessKind::Read;
        checks
            .access(&mut dead_rcx, 0x40_2000, &memory, 0, 4, read)
            .unwrap();
        checks.close(&mut dead_rcx).unwrap();
        for (at, saved) in [(FILTER_RAX, 1), (FILTER_RCX, 0), (FILTER_RDX, 1)] {
            assert_eq!(slot_uses(&dead_rcx, Code::Mov_rm64_r64, at), saved, "{at}");
        }
        assert_eq!(slot_uses(&dead_rcx, Code::Mov_r64_rm64, FILTER_RCX), 0);
        code.append(&mut dead_rcx);
        let paths = checks.finish(&mut code).unwrap();
        assert!(paths.is_empty());
        let mut checks = Checks::new(filter, false, routines);
        checks.fetch(&mut code, (0x40_1000, 4)).unwrap();
        code.push(Instruction::with(Code::Nopd));
        assert!(checks.fetch(&mut code, (0x40_2000, 4)).is_err());
        let mut checks = Checks::new(filter, false, routines);
        checks.fetch(&mut code, (0x40_1000, 4)).unwrap();
        assert!(checks.finish(&mut code).is_err());
    }

    #[test]
    fn invalid_tables_claim_nothing() {
        let bytes = invalid_tables();
        assert_eq!(bytes.len() as u64, TABLES_BYTES);
        let words: Vec<u64> = bytes
            .chunks_exact(8)
            .map(|word| u64::from_le_bytes(word.try_into().unwrap()))
            .collect();
        assert!(words.iter().all(|&word| word == INVALID));
        // No line below 2^58 has INVALID as its negation.
        assert_ne!(((1u64 << 58) - 1).wrapping_neg(), INVALID);
        assert_ne!(0u64.wrapping_neg(), INVALID);
    }
}
