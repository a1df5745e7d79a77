//! The tracer's view of the code cache of one address space: its regions
//! (one near each group of code mappings, the first one also holding the
//! indirect-branch table all regions share), which original
//! addresses have a translation (and where it enters), which blocks are
//! refused (stepped), which `int3` stub belongs to which exit, and where
//! free space starts in each region.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use rustc_hash::FxHashMap;

use crate::error::{Error, Result};

use crate::flow::{End, ExitRule, Flow};
use crate::refusals::Refusals;
use crate::semantics::Decoded;

use super::blocks::{self, CodeWindow, DecodedBlock};
use super::by_code::ByCode;
use super::capture::{Capture, Sources};
use super::filter::{L1Filter, SharedLevel};
use super::interned::Interned;
use super::layout::Layout;
use super::memory::Memory;
use super::parts::{Lists, Parts, Trap};
use super::pending::RuleEntries;
use super::plan::{self, Plan};
use super::protect::Protection;
use super::records::RecordEntries;
use super::retire::Retiring;
use super::table::Table;
use super::timing::SystemCallWords;
use super::translator::{self, Entrance, Lookup, Refusal, Target};
use super::writes::Writes;
use crate::event::{Place, Repeat};

/// How far (bytes) from a region's bounds code may be to be translated
/// into it: rel32 branches and RIP-relative operands reach ±2 GB; the
/// margin keeps an object's own targets in reach.
const REACH: u64 = 0x7000_0000;
/// Bytes a region keeps free for the translations of one stop (a block
/// and those translated ahead of it); with less, another region is
/// mapped.
const ROOM: u64 = 8 << 20;

/// Where the block at an address is for the sink's rules of contexts
/// (`EventSink::place`): which exits are quiet.
pub(super) type Places<'a> = &'a mut dyn FnMut(u64) -> Option<Place>;

/// What translating needs besides the cache: the tracee's memory, a
/// window on its original code, the batch of writes, where the original
/// code is protected or may change unseen, and where blocks are for the
/// sink's rules of contexts.
struct Translating<'a, 'w> {
    memory: &'a Memory,
    code: &'a mut CodeWindow<'w>,
    writes: &'a mut Writes,
    protection: &'a Protection,
    places: Places<'a>,
}

/// One translation.
#[derive(Clone, Debug)]
struct Translation {
    /// Its exits through slots and which of them jump to a translation
    /// (not to their stub); what the backends know of its instructions
    /// and where the replay finds what each did (by their numbers in the
    /// cache's `decodings` and `sources`); its `int3`s (exit stubs, system
    /// call, `cpuid`, stale); its safe points besides its entry.
    parts: Parts,
    /// Whether it is still reachable (not dropped by an invalidation).
    alive: bool,
    /// Whether its record counts its runs (see `translator`).
    repeats: bool,
    /// Whether it counts its runs in the thread's area (no record).
    counted: bool,
    /// Whether quiet runs are counted in its record of the segment
    /// (`quiet`).
    counts_runs: bool,
    /// Whether quiet exits enter it at its quiet entry (`quiet`).
    quiet_entry: bool,
    /// Its code, from its entry on.
    code: Range<u64>,
    /// The space it takes in its region, header and alignment included.
    space: Range<u64>,
}

impl Translation {
    /// Where quiet exits enter it, when it has a quiet entry: at the end
    /// of its header (`quiet`).
    fn quiet_entry(&self) -> Option<u64> {
        self.quiet_entry
            .then(|| self.code.start - super::quiet::QUIET_ENTRY)
    }
}

/// What the replay of a translation's records needs in the common case,
/// kept apart from the rest of the translation so that replaying millions
/// of records reads little memory: one cache line (the one
/// [`Cache::prefetch_replay`] asks for), the plan of simulated runs
/// behind a pointer (runs without simulations have none, and their tens
/// of thousands of translations then take half the memory).
#[derive(Clone, Debug)]
#[repr(C, align(64))]
struct Replayed {
    /// The block's address.
    addr: u64,
    /// How it is left.
    exit: ExitRule,
    /// Words its record holds besides the id and the stack pointer.
    words: u32,
    /// Whether the first of them counts its runs (see `translator`).
    repeats: bool,
    /// Whether that count is of quiet runs (`quiet`), and how they ran.
    counts_runs: Option<Repeat>,
    /// Where its record holds the time of its `syscall` (`timing`).
    system_call: Option<SystemCallWords>,
    /// Its instructions' addresses and lengths.
    instructions: Box<[(u64, u8)]>,
    /// The events of its runs, when recorded words describe them and a
    /// plan can (`plan`).
    plan: Option<Box<Plan>>,
}

/// A translated block as the replay needs it.
#[derive(Clone, Copy, Debug)]
pub(super) struct ReplayInfo<'a> {
    /// Its address.
    pub addr: u64,
    /// Its instructions' addresses and lengths.
    pub instructions: &'a [(u64, u8)],
    /// How it is left.
    pub exit: ExitRule,
    /// The events of its runs, if planned (`plan`).
    pub plan: Option<&'a Plan>,
    /// Words its record holds besides the id and the stack pointer.
    pub words: usize,
    /// Whether the first of them counts its runs, looping on itself.
    pub repeats: bool,
    /// Whether the first of them counts quiet runs (`quiet`), and how
    /// they ran.
    pub counts_runs: Option<Repeat>,
    /// Where its record holds the time of its `syscall` (`timing`).
    pub system_call: Option<SystemCallWords>,
}

/// What the replay of a record needs beyond [`ReplayInfo`] when its events
/// are worked out one instruction at a time.
#[derive(Clone, Copy, Debug)]
pub(super) struct RecordInfo<'a> {
    /// The numbers of its instructions' decodings in `decodings`.
    decoded: &'a [u32],
    decodings: &'a Interned<Decoded>,
    /// The numbers of its instructions' sources in `source_table` (empty
    /// without recorded words).
    sources: &'a [u32],
    source_table: &'a Interned<Sources>,
}

impl<'a> RecordInfo<'a> {
    /// What the backends know of its instructions, in order.
    pub fn decoded(&self) -> impl Iterator<Item = &'a Decoded> + 'a {
        self.decodings.of(self.decoded)
    }

    /// What the backends know of its instruction `index`.
    pub fn decoded_at(&self, index: usize) -> Option<&'a Decoded> {
        self.decodings.get(*self.decoded.get(index)?)
    }

    /// Where the replay finds what its instruction `index` did (`None`
    /// without recorded words).
    pub fn sources_at(&self, index: usize) -> Option<&'a Sources> {
        self.source_table.get(*self.sources.get(index)?)
    }
}

/// Where a signal interrupted a run of a translated block
/// ([`Cache::interrupted`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Interruption {
    /// The translation.
    pub id: u32,
    /// How many of its instructions ran.
    pub executed: usize,
    /// The original address of the next one.
    pub next: u64,
}

/// What an `int3` of the code cache means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stub {
    /// Exit `exit` of translation `id` reached an address without a
    /// translation.
    Exit {
        /// The translation.
        id: u32,
        /// Its exit.
        exit: usize,
    },
    /// Translation `id` (ending in `syscall`) is about to make a system
    /// call the tracer watches (`invalidate`).
    Syscall {
        /// The translation.
        id: u32,
    },
    /// A lookup routine missed; the target is in the thread's `TARGET`
    /// slot (`area`).
    Miss,
    /// A `cpuid` of the program, for the tracer to answer; the
    /// translation goes on after the `int3`.
    Cpuid,
    /// Translation `id` found its original code changed at its entry
    /// (see `Target::original`); the thread's registers are as they were
    /// there.
    Stale {
        /// The translation.
        id: u32,
    },
}

/// One region of the code cache.
#[derive(Clone, Debug)]
struct Region {
    layout: Layout,
    /// Next free byte of the code area.
    free: u64,
    /// The lookup routine.
    lookup: u64,
    /// Its miss `int3`.
    miss: u64,
    /// The lookup routine of returns (`quiet`).
    returns: u64,
    /// Its miss `int3`.
    returns_miss: u64,
    /// The lookup routine of indirect jumps with quiet runs (`quiet`).
    jumps: u64,
    /// Its miss `int3`.
    jumps_miss: u64,
    /// The lookup routine of indirect calls with quiet runs (`quiet`).
    calls: u64,
    /// Its miss `int3`.
    calls_miss: u64,
    /// The routine that writes a pending call's records (`pending`).
    write_pending: Range<u64>,
    /// The record routine (`records`), and its entries.
    records: Range<u64>,
    record_entries: RecordEntries,
    /// The resume routine (`pending`), and its entries for quiet paths.
    resume: Range<u64>,
    rules: RuleEntries,
    /// With a filter, its routines (`filter`): I1's, D1's.
    filter_routines: Option<[Range<u64>; 2]>,
    /// All its routines, from the first lookup routine to the first
    /// translation.
    routines: Range<u64>,
}

impl Region {
    /// Writes the region's gadget, system call filter (the watched calls,
    /// `invalidate`, and the `refusals`) and lookup routine (and with the
    /// filter `l1` its routines).
    fn new(
        layout: Layout,
        memory: &Memory,
        l1: Option<L1Filter>,
        refusals: Refusals,
    ) -> Result<Region> {
        memory.write(layout.gadget(), &super::layout::GADGET)?;
        let mut filter = vec![0u8; super::layout::SYSCALL_FILTER_SIZE as usize];
        for &number in super::invalidate::WATCHED.iter().chain(refusals.numbers()) {
            filter[number as usize] = 1;
        }
        memory.write(layout.syscall_filter(), &filter)?;
        // Zeros would claim line 0 in every entry (`filter`).
        memory.write(layout.filter_tables(), &super::filter::invalid_tables())?;
        let routine = |at: u64, kind: Lookup| -> Result<(u64, u64, u64)> {
            let (bytes, miss) = translator::lookup_routine(at, kind).map_err(Error::Unexpected)?;
            memory.write(at, &bytes)?;
            Ok((at, miss, align(at + bytes.len() as u64)))
        };
        let (lookup, miss, next) = routine(layout.code(), Lookup::Any)?;
        let (returns, returns_miss, next) = routine(next, Lookup::Returns)?;
        let (jumps, jumps_miss, next) = routine(next, Lookup::Jumps)?;
        let (calls, calls_miss, next) = routine(next, Lookup::Calls)?;
        let bytes = super::pending::write_routine(next).map_err(Error::Unexpected)?;
        memory.write(next, &bytes)?;
        let write_pending = next..next + bytes.len() as u64;
        let next = align(write_pending.end);
        let routine =
            super::pending::resume_routine(next, write_pending.start).map_err(Error::Unexpected)?;
        memory.write(next, &routine.bytes)?;
        let resume = next..next + routine.bytes.len() as u64;
        let rules = routine.entries;
        let next = align(resume.end);
        let record =
            super::records::record_routine(next, write_pending.start).map_err(Error::Unexpected)?;
        memory.write(next, &record.bytes)?;
        let records = next..next + record.bytes.len() as u64;
        let mut next = align(records.end);
        let filter_routines = match l1 {
            Some(l1) => {
                let mut routine = |fetches: bool| -> Result<Range<u64>> {
                    let bytes =
                        super::filter::routine(next, &l1, fetches).map_err(Error::Unexpected)?;
                    memory.write(next, &bytes)?;
                    let range = next..next + bytes.len() as u64;
                    next = align(range.end);
                    Ok(range)
                };
                Some([routine(true)?, routine(false)?])
            }
            None => None,
        };
        let free = next;
        Ok(Region {
            layout,
            free,
            routines: layout.code()..free,
            lookup,
            miss,
            returns,
            returns_miss,
            jumps,
            jumps_miss,
            calls,
            calls_miss,
            write_pending,
            records,
            record_entries: record.entries,
            resume,
            rules,
            filter_routines,
        })
    }

    /// Whether code at `addr` can be translated into this region.
    fn near(&self, addr: u64) -> bool {
        addr.abs_diff(self.layout.base) < REACH && addr.abs_diff(self.layout.end()) < REACH
    }

    /// Whether its code cache has room for more translations (a JIT's
    /// code, translated again and again, fills one: another region near
    /// it takes the next).
    fn has_room(&self) -> bool {
        self.layout.end().saturating_sub(self.free) >= ROOM
    }

    /// Whether a thread at `addr` may go on into a translation whose
    /// address only its slots hold (see [`goes_back`]).
    fn goes_back(&self, addr: u64) -> bool {
        let misses = [
            self.miss,
            self.returns_miss,
            self.jumps_miss,
            self.calls_miss,
        ];
        goes_back(&self.routines, &misses, addr)
    }
}

/// Whether a thread at `addr` may go on into a translation whose address
/// only its slots hold: in a region's `routines` (a filter routine goes
/// back to its `FILTER_BACK` slot, the record, resume and pending
/// routines to `JUMP` or `BACK`, a lookup that found its target through
/// `JUMP`), except at a lookup's miss `int3` (one of `misses`), from
/// which the tracer sends it on. Such a thread has not left the
/// translation it came from ([`Cache::seen`]).
fn goes_back(routines: &Range<u64>, misses: &[u64], addr: u64) -> bool {
    routines.contains(&addr) && !misses.contains(&addr)
}

/// The translations of one address space (a forked child's starts as a
/// copy of its parent's, as its memory does).
#[derive(Clone)]
pub(super) struct Cache {
    /// The regions; the first one holds the indirect-branch table.
    regions: Vec<Region>,
    translations: Vec<Translation>,
    /// What the replay needs of each translation, by id.
    replayed: Vec<Replayed>,
    /// The decodings of the translations' instructions.
    decodings: Interned<Decoded>,
    /// Where the replay finds what the translations' instructions did.
    sources: Interned<Sources>,
    /// Entry of each translated original address.
    entries: FxHashMap<u64, u64>,
    /// Translation id by entry (to find the translation holding an address).
    by_entry: BTreeMap<u64, u32>,
    /// The live translations by where their original code is.
    by_code: ByCode,
    /// Dead translations whose space (and number) the next translation
    /// of their original address takes (see [`Cache::retire`]).
    reusable: FxHashMap<u64, u32>,
    /// Dead translations to be released once the threads with them left
    /// them (see [`Cache::retire`]).
    dying: Retiring,
    /// Whether translations make `cpuid` trap (see `Target::cpuid_trap`).
    cpuid_trap: bool,
    /// The system calls refused, which the regions' filters trap before.
    refusals: Refusals,
    /// Blocks that are stepped, with the reason.
    refused: FxHashMap<u64, (Option<DecodedBlock>, Refusal)>,
    /// The exits linked to a translation: (its original address, the
    /// translation linked, the exit's number).
    incoming: BTreeSet<(u64, u32, u32)>,
    /// What the indirect-branch table holds.
    table: Table,
    /// What translations record.
    capture: Capture,
    /// Where the filter's record paths of each translation that has some
    /// restart, ascending (`filter`).
    filter_paths: FxHashMap<u32, Box<[u64]>>,
    /// Where the tracer finds the process's first-level caches (`filter`).
    pub first_level: SharedLevel,
}

impl Cache {
    /// An empty cache in the region `layout` (mapped, writable through
    /// `memory`) whose translations record what `capture` says (and make
    /// `cpuid` trap with `cpuid_trap`, and the system calls of `refusals`);
    /// writes the region's gadget and lookup routine.
    pub fn new(
        layout: Layout,
        memory: &Memory,
        capture: Capture,
        cpuid_trap: bool,
        refusals: Refusals,
    ) -> Result<Cache> {
        Ok(Cache {
            regions: vec![Region::new(layout, memory, capture.filter, refusals)?],
            translations: Vec::new(),
            replayed: Vec::new(),
            decodings: Interned::default(),
            sources: Interned::default(),
            entries: FxHashMap::default(),
            by_entry: BTreeMap::new(),
            by_code: ByCode::default(),
            reusable: FxHashMap::default(),
            dying: Retiring::default(),
            cpuid_trap,
            refusals,
            refused: FxHashMap::default(),
            incoming: BTreeSet::new(),
            table: Table::default(),
            capture,
            filter_paths: FxHashMap::default(),
            first_level: SharedLevel::default(),
        })
    }

    /// The filter of first-level cache hits its translations check with.
    pub fn filter(&self) -> Option<L1Filter> {
        self.capture.filter
    }

    /// The first region (indirect-branch table, gadget).
    pub fn layout(&self) -> &Layout {
        &self.regions[0].layout
    }

    /// Adds the region `layout` (mapped, writable through `memory`).
    pub fn add_region(&mut self, layout: Layout, memory: &Memory) -> Result<()> {
        self.regions.push(Region::new(
            layout,
            memory,
            self.capture.filter,
            self.refusals,
        )?);
        Ok(())
    }

    /// The system calls refused to the program.
    pub fn refusals(&self) -> Refusals {
        self.refusals
    }

    /// Whether some region can take translations of code at `addr` (near
    /// it, with room).
    pub fn has_region_near(&self, addr: u64) -> bool {
        self.region_for(addr).is_some()
    }

    /// The region that takes translations of code at `addr`: the last
    /// mapped near it with room.
    fn region_for(&self, addr: u64) -> Option<usize> {
        self.regions
            .iter()
            .rposition(|region| region.near(addr) && region.has_room())
    }

    /// The region whose mapping holds `addr`.
    pub fn region_holding(&self, addr: u64) -> Option<&Layout> {
        self.regions
            .iter()
            .map(|region| &region.layout)
            .find(|layout| (layout.base..layout.end()).contains(&addr))
    }

    /// The regions' layouts.
    pub fn regions(&self) -> impl Iterator<Item = &Layout> + Clone {
        self.regions.iter().map(|region| &region.layout)
    }

    /// Asks for the replay data of translation `id` to be in the
    /// processor's cache soon ([`Cache::replay_info`] of the next record).
    #[inline(always)]
    pub fn prefetch_replay(&self, id: u64) {
        if let Some(replayed) = usize::try_from(id).ok().and_then(|i| self.replayed.get(i)) {
            crate::prefetch(replayed);
        }
    }

    /// What the replay of a record of translation `id` needs: the block's
    /// address, its instructions, how it is left, its record's layout.
    #[inline]
    pub fn replay_info(&self, id: u64) -> Option<ReplayInfo<'_>> {
        let index = usize::try_from(id).ok()?;
        self.replayed.get(index).map(|t| ReplayInfo {
            addr: t.addr,
            instructions: &t.instructions,
            exit: t.exit,
            plan: t.plan.as_deref(),
            words: t.words as usize,
            repeats: t.repeats,
            counts_runs: t.counts_runs,
            system_call: t.system_call,
        })
    }

    /// What the replay of a record of translation `id` needs to work out
    /// its events one instruction at a time.
    pub fn record_info(&self, id: u64) -> Option<RecordInfo<'_>> {
        let index = usize::try_from(id).ok()?;
        self.translations.get(index).map(|t| RecordInfo {
            decoded: t.parts.decoded(),
            decodings: &self.decodings,
            sources: t.parts.sources(),
            source_table: &self.sources,
        })
    }

    /// Whether `addr` is in the routine that writes a pending call's
    /// records (`pending`), in a region.
    pub fn writes_pending(&self, addr: u64) -> bool {
        self.regions
            .iter()
            .any(|region| region.write_pending.contains(&addr))
    }

    /// Whether `addr` is in the routine that writes translations' records
    /// (`records`), in a region.
    pub fn writes_record(&self, addr: u64) -> bool {
        self.regions
            .iter()
            .any(|region| region.records.contains(&addr))
    }

    /// The start of the filter routine (`filter`) holding `addr`, if any:
    /// where a thread whose record store faulted there restarts.
    pub fn filter_routine_holding(&self, addr: u64) -> Option<u64> {
        self.regions
            .iter()
            .filter_map(|region| region.filter_routines.as_ref())
            .flatten()
            .find(|routine| routine.contains(&addr))
            .map(|routine| routine.start)
    }

    /// Where a thread at `addr`, in a block's own record written late in
    /// its translation whose store faulted, restarts it (`filter`).
    pub fn filter_path_holding(&self, addr: u64) -> Option<u64> {
        let (_, &id) = self.by_entry.range(..=addr).next_back()?;
        let translation = self.translations.get(id as usize)?;
        if !translation.code.contains(&addr) {
            return None;
        }
        let paths = self.filter_paths.get(&id)?;
        let after = paths.partition_point(|&start| start <= addr);
        after
            .checked_sub(1)
            .and_then(|index| paths.get(index))
            .copied()
    }

    /// Whether a thread at `addr` holds no state of the instrumentation,
    /// so a signal handler may run there: outside the code cache, in a
    /// translation's header (exit slots and stubs), at a translation's
    /// entry or safe points, at the lookup routine's miss `int3`; not
    /// elsewhere in a translation, in the lookup routine or in the
    /// routines of pending calls.
    pub fn safe_point(&self, addr: u64) -> bool {
        let Some(region) = self
            .regions
            .iter()
            .find(|region| (region.layout.base..region.layout.end()).contains(&addr))
        else {
            return true;
        };
        if (region.lookup..region.miss).contains(&addr)
            || (region.returns..region.returns_miss).contains(&addr)
            || (region.jumps..region.jumps_miss).contains(&addr)
            || (region.calls..region.calls_miss).contains(&addr)
            || region.write_pending.contains(&addr)
            || region.records.contains(&addr)
            || region.resume.contains(&addr)
            || region
                .filter_routines
                .iter()
                .flatten()
                .any(|routine| routine.contains(&addr))
        {
            return false;
        }
        let Some((&entry, &id)) = self.by_entry.range(..=addr).next_back() else {
            return true;
        };
        match self.translations.get(id as usize) {
            Some(translation) if translation.code.contains(&addr) => {
                addr == entry || translation.parts.safe().binary_search(&addr).is_ok()
            }
            _ => true,
        }
    }

    /// Where a thread at safe point `addr` is in a run of a translated
    /// block whose record is written and whose instructions are not all
    /// run: the translation, how many of its instructions ran, and the
    /// original address of the next one. `None` elsewhere (at an entry,
    /// outside translations), in translations that count their runs
    /// and with a filter, whose records do not end with the block's (a
    /// signal handler then sees the whole run before it).
    pub fn interrupted(&self, addr: u64) -> Option<Interruption> {
        if self.capture.filter.is_some() {
            return None;
        }
        let (&entry, &id) = self.by_entry.range(..=addr).next_back()?;
        let translation = self.translations.get(id as usize)?;
        if addr == entry
            || !translation.code.contains(&addr)
            || translation.repeats
            || translation.counted
            || translation.counts_runs
        {
            return None;
        }
        let executed = translation.parts.safe().binary_search(&addr).ok()?;
        let next = self
            .replayed
            .get(id as usize)?
            .instructions
            .get(executed)?
            .0;
        Some(Interruption { id, executed, next })
    }

    /// The translation counting its runs whose code holds `addr`, if any.
    pub fn repeating_holding(&self, addr: u64) -> Option<u32> {
        let (_, &id) = self.by_entry.range(..=addr).next_back()?;
        let translation = self.translations.get(id as usize)?;
        (translation.repeats && translation.code.contains(&addr)).then_some(id)
    }

    /// Translations made.
    pub fn translations(&self) -> usize {
        self.translations.len()
    }

    /// What the `int3` at `addr` is, if it is one of the cache's.
    pub fn stub(&self, addr: u64) -> Option<Stub> {
        if self.regions.iter().any(|region| {
            [
                region.miss,
                region.returns_miss,
                region.jumps_miss,
                region.calls_miss,
            ]
            .contains(&addr)
        }) {
            return Some(Stub::Miss);
        }
        // An `int3` of a translation: its exit stubs (in its header),
        // then its traps.
        let space = |id: u32| self.translations.get(id as usize).map(|t| t.space.clone());
        let id = space_holding(&self.by_entry, addr, space)?;
        let translation = self.translations.get(id as usize)?;
        if let Some(exit) = translation.parts.exit_with_stub(addr) {
            return Some(Stub::Exit { id, exit });
        }
        translation.parts.trap(addr).map(|trap| match trap {
            Trap::Cpuid => Stub::Cpuid,
            Trap::Syscall => Stub::Syscall { id },
            Trap::Stale => Stub::Stale { id },
        })
    }

    /// The original target of exit `exit` of translation `id`.
    pub fn exit_target(&self, id: u32, exit: usize) -> Option<u64> {
        let translation = self.translations.get(id as usize)?;
        translation.parts.exit(exit).map(|exit| exit.target)
    }

    /// The entry of the translation whose code holds `addr`.
    pub fn entry_holding(&self, addr: u64) -> Option<u64> {
        self.by_entry
            .range(..=addr)
            .next_back()
            .map(|(&entry, _)| entry)
    }

    /// Whether `addr` has a translation or is refused.
    pub fn known(&self, addr: u64) -> bool {
        self.entries.contains_key(&addr) || self.refused.contains_key(&addr)
    }

    /// An error when the refused block at `addr` cannot be stepped either:
    /// it uses the `gs` segment, whose base is the backend's (`area`).
    pub fn check_runnable(&self, addr: u64) -> Result<()> {
        match self.refused.get(&addr) {
            Some((Some(block), _)) if block.uses_gs() => Err(Error::Unexpected(format!(
                "translate: the program uses the gs segment (at {addr:#x}), whose base \
                 the backend takes for its per-thread data"
            ))),
            _ => Ok(()),
        }
    }

    /// Whether the refusal of the block at `addr` still holds for the code
    /// there now (where code may change unseen, `protection`): its
    /// decoding is that of the original code in `memory`. When it does not,
    /// the refusal is dropped, for the code to be translated anew.
    pub fn refusal_holds(&mut self, memory: &Memory, addr: u64, protection: &Protection) -> bool {
        if !protection.changing(addr) {
            return true;
        }
        let Some((refused, _)) = self.refused.get(&addr) else {
            return true;
        };
        let now = blocks::decode(&mut CodeWindow::new(memory), addr);
        let same = match (refused, &now) {
            (None, None) => true,
            (Some(refused), Some(now)) => {
                refused.insns.len() == now.insns.len()
                    && refused
                        .insns
                        .iter()
                        .zip(&now.insns)
                        .all(|(a, b)| a.len == b.len && a.instruction == b.instruction)
            }
            _ => false,
        };
        if !same {
            self.refused.remove(&addr);
        }
        same
    }

    /// The block at `addr` if it is refused (to be stepped): its decoding
    /// (`None` when it does not decode).
    pub fn refused(&self, addr: u64) -> Option<&Option<DecodedBlock>> {
        self.refused.get(&addr).map(|(block, _)| block)
    }

    /// Enters the original address `target`: translates it if needed,
    /// enters it in the indirect-branch table and translates ahead of it
    /// ([`Cache::translate_ahead_into`]), all written in one batch. Returns
    /// its entry, `None` when the block is refused (see [`Cache::refused`]).
    /// `protection` says where the original code is protected and where
    /// it may change unseen.
    pub fn enter(
        &mut self,
        memory: &Memory,
        target: u64,
        budget: usize,
        protection: &Protection,
        places: Places<'_>,
    ) -> Result<Option<u64>> {
        self.batch(memory, protection, places, |cache, at| {
            let Some(entry) = cache.translate_into(at, target)? else {
                return Ok(None);
            };
            cache.enter_indirect_into(at.writes, target, entry);
            cache.translate_ahead_into(at, target, budget)?;
            Ok(Some(entry))
        })
    }

    /// Follows exit `exit` of translation `id` (its stub trapped): translates
    /// its target if needed, links the exit to it and translates ahead of it,
    /// all written in one batch. Returns the target (an original address).
    pub fn follow_exit(
        &mut self,
        memory: &Memory,
        id: u32,
        exit: usize,
        budget: usize,
        protection: &Protection,
        places: Places<'_>,
    ) -> Result<u64> {
        let target = self
            .exit_target(id, exit)
            .ok_or_else(|| Error::Unexpected("translate: an exit stub without a target".into()))?;
        self.batch(memory, protection, places, |cache, at| {
            if let Some(entry) = cache.translate_into(at, target)? {
                cache.link_into(at.writes, id, exit, entry);
                cache.translate_ahead_into(at, target, budget)?;
            }
            Ok(target)
        })
    }

    /// Runs `work` translating with a window on the original code in
    /// `memory`, `protection` and `places`, and a batch of writes, made
    /// after it (also when it fails).
    fn batch<T>(
        &mut self,
        memory: &Memory,
        protection: &Protection,
        places: Places<'_>,
        work: impl FnOnce(&mut Cache, &mut Translating<'_, '_>) -> Result<T>,
    ) -> Result<T> {
        let mut code = CodeWindow::new(memory);
        let mut writes = Writes::default();
        let mut at = Translating {
            memory,
            code: &mut code,
            writes: &mut writes,
            protection,
            places,
        };
        let result = work(self, &mut at);
        writes.flush(memory)?;
        result
    }

    /// The entry of the translation of `addr`, translating it if needed
    /// (the original code read through `code`, the translation written to
    /// `writes`; one that checks its code where `protection` says it may
    /// change unseen); `None` when the block is refused (see
    /// [`Cache::refused`]).
    fn translate_into(&mut self, at: &mut Translating<'_, '_>, addr: u64) -> Result<Option<u64>> {
        if let Some(&entry) = self.entries.get(&addr) {
            return Ok(Some(entry));
        }
        if self.refused.contains_key(&addr) {
            return Ok(None);
        }
        let Some(block) = blocks::decode(at.code, addr) else {
            self.refused.insert(addr, (None, "does not decode".into()));
            return Ok(None);
        };
        if block.uses_gs() {
            // An error if it runs (`Cache::check_runnable`).
            self.refused
                .insert(addr, (Some(block), "uses the gs segment".into()));
            return Ok(None);
        }
        // A released translation of this address gives its space, and its
        // number when its records would mean the same.
        let released = self.reusable.remove(&addr);
        let reused_id = released.filter(|&old| {
            let (translation, replayed) = (
                &self.translations[old as usize],
                &self.replayed[old as usize],
            );
            let addresses = replayed.instructions.iter().map(|&(addr, _)| addr);
            let decoded = translation.parts.decoded();
            block.same_code(addresses.zip(self.decodings.of(decoded)), decoded.len())
        });
        let id = match reused_id {
            Some(id) => id,
            None => u32::try_from(self.translations.len())
                .ok()
                .filter(|&id| id < i32::MAX as u32)
                .ok_or_else(|| Error::Unexpected("translate: too many translations".into()))?,
        };
        let len = block.last().next().wrapping_sub(block.addr) as usize;
        let original = at
            .protection
            .changing(addr)
            .then(|| at.code.read(addr, len))
            .filter(|bytes| bytes.len() == len);
        // Only a translation with the same header takes the space: its
        // entry is then the old one's, where jumps from dead translations
        // still lead.
        let old_space = reused_id.map(|old| self.translations[old as usize].space.clone());
        // With quiet runs: where the block is for the sink's rules of
        // contexts, and which exits keep the thread's context.
        let quiet: Option<(Vec<bool>, Option<Place>, bool)> = self.capture.quiet.then(|| {
            let own = (at.places)(block.addr);
            let quietly = translator::may_leave_quietly(&block);
            let targets = translator::exit_targets(&block);
            let mut exit_quiet = |&to: &u64| {
                let continues =
                    |own: Place| (at.places)(to).is_some_and(|to| own.continues_to(&to));
                quietly && own.is_some_and(continues)
            };
            let exits = targets.iter().map(&mut exit_quiet).collect();
            let memory = at.memory;
            let slot = |addr: u64| memory.read_u64(addr).ok();
            let stub = stub_jumps_away(&block, own, slot, &mut *at.places);
            (exits, own, stub)
        });
        let linked = |target: u64, entrance: Entrance| self.link_target(target, entrance);
        let capture = self.capture;
        let cpuid_trap = self.cpuid_trap;
        // Emits the translation at `at` in `region`.
        let emit = |region: &Region, at: u64| {
            let target = Target {
                layout: &region.layout,
                lookup: region.lookup,
                returns: region.returns,
                jumps: region.jumps,
                calls: region.calls,
                records: region.record_entries,
                resume: region.resume.start,
                rules: region.rules,
                filter_routines: region.filter_routines.as_ref().map(|[i1, d1]| {
                    super::filter::Routines {
                        i1: i1.start,
                        d1: d1.start,
                    }
                }),
                capture,
                cpuid_trap,
                original,
                quiet: quiet
                    .as_ref()
                    .map(|(exits, place, stub)| translator::Quiet {
                        exits,
                        place: *place,
                        stub_jumps_away: *stub,
                    }),
            };
            translator::translate(&block, id, at, target, &linked)
        };
        // Jumps from dead translations may still lead to the old entry, and
        // to the resume and quiet entries before it (a `jmp` to the entry
        // when the translation has no such path).
        let old_entry = reused_id.map(|old| self.translations[old as usize].code.start);
        let in_old_space = old_space.and_then(|space| {
            let region = self
                .regions
                .iter()
                .find(|region| (region.layout.base..region.layout.end()).contains(&space.start))?;
            let emitted = emit(region, space.start).ok()?;
            (old_entry == Some(emitted.entry)
                && emitted.at + emitted.bytes.len() as u64 <= space.end)
                .then_some((emitted, space))
        });
        let (emitted, space) = match in_old_space {
            Some(found) => found,
            None => {
                let near = self
                    .region_for(addr)
                    .or_else(|| self.regions.iter().rposition(|region| region.near(addr)));
                let Some(region) = near.and_then(|index| self.regions.get(index)) else {
                    return Err(Error::Unexpected(format!(
                        "translate: no code cache region near {addr:#x}"
                    )));
                };
                let emitted = match emit(region, region.free) {
                    Ok(emitted) => emitted,
                    Err(reason) => {
                        self.refused.insert(addr, (Some(block), reason));
                        return Ok(None);
                    }
                };
                let end = emitted.at + emitted.bytes.len() as u64;
                if end > region.layout.end() {
                    return Err(Error::Unexpected(
                        "translate: the code cache is full".into(),
                    ));
                }
                let space = emitted.at..align(end);
                if let Some(region) = near.and_then(|index| self.regions.get_mut(index)) {
                    region.free = space.end;
                }
                (emitted, space)
            }
        };
        let end = emitted.at + emitted.bytes.len() as u64;
        at.writes.code(at.memory, emitted.at, &emitted.bytes)?;
        let cpuid = emitted.cpuid_traps.iter().map(|&at| (at, Trap::Cpuid));
        let syscall = emitted.syscall_trap.map(|at| (at, Trap::Syscall));
        let stale = emitted.stale_trap.map(|at| (at, Trap::Stale));
        let traps: Vec<(u64, Trap)> = cpuid.chain(syscall).chain(stale).collect();
        let mut linked = Vec::with_capacity(emitted.exits.len());
        for (index, exit) in emitted.exits.iter().enumerate() {
            let to = self.link_target(exit.target, exit.entrance);
            let is_linked = to.is_some_and(|to| translator::reachable(exit.slot, to));
            if is_linked {
                self.incoming.insert((exit.target, id, index as u32));
            }
            linked.push(is_linked);
        }
        self.entries.insert(addr, emitted.entry);
        self.by_entry.insert(emitted.entry, id);
        self.by_code.insert(block.addr, len as u64, id);
        let code = emitted.entry..end;
        let plan = match emitted.sources.is_empty() {
            true => None,
            false => plan::plan(&emitted.decoded, &emitted.sources).map(Box::new),
        };
        let replayed = Replayed {
            addr: block.addr,
            exit: ExitRule::of(block.last().end(), block.insns.len() as u32),
            words: u32::try_from(emitted.words)
                .map_err(|_| Error::Unexpected("translate: a record too long".into()))?,
            repeats: emitted.repeats,
            counts_runs: emitted.counts_runs,
            instructions: block.insns.iter().map(|i| (i.addr, i.len)).collect(),
            plan,
            system_call: emitted.system_call,
        };
        let too_many = || Error::Unexpected("translate: too many distinct instructions".into());
        let decoded = self
            .decodings
            .intern(&emitted.decoded)
            .ok_or_else(too_many)?;
        let sources = self.sources.intern(&emitted.sources).ok_or_else(too_many)?;
        let mut parts = Parts::new(Lists {
            exits: &emitted.exits,
            decoded: &decoded,
            sources: &sources,
            traps: &traps,
            safe: &emitted.safe,
        })
        .ok_or_else(|| Error::Unexpected("translate: a translation too large".into()))?;
        for (index, is_linked) in linked.into_iter().enumerate() {
            parts.set_linked(index, is_linked);
        }
        let translation = Translation {
            parts,
            alive: true,
            repeats: emitted.repeats,
            counted: emitted.counted,
            counts_runs: emitted.counts_runs.is_some(),
            quiet_entry: emitted.quiet_entry.is_some(),
            code,
            space,
        };
        match emitted.filter_paths.is_empty() {
            true => self.filter_paths.remove(&id),
            false => self.filter_paths.insert(id, emitted.filter_paths.into()),
        };
        match reused_id {
            Some(id) => {
                self.replayed[id as usize] = replayed;
                self.translations[id as usize] = translation;
            }
            None => {
                self.replayed.push(replayed);
                self.translations.push(translation);
            }
        }
        Ok(Some(emitted.entry))
    }

    /// Dead translation `id` (dropped by [`Cache::invalidate`]) gives its
    /// space to the next translation of its original address, and its
    /// number when that translation has the same instructions (see
    /// `Translation::same_code`: records of either mean the same), so that
    /// code rewritten again and again (a JIT patching its code in place)
    /// does not fill the cache. That happens once each thread of
    /// `threads` (those of the address space that may be in its code) has
    /// been seen elsewhere ([`Cache::seen`]); the caller has moved its own
    /// thread out.
    pub fn retire(&mut self, id: u32, threads: Vec<i32>) {
        let Some(translation) = self.translations.get(id as usize) else {
            return;
        };
        if threads.is_empty() {
            self.release(id);
        } else {
            self.dying.wait(id, translation.space.clone(), threads);
        }
    }

    /// Thread `tid` is stopped with its code at the addresses `at` (where
    /// it is and where its signal handlers return; none for a thread that
    /// has ended): dying translations holding none of them are left by it.
    /// A thread in a routine that goes back into a translation through
    /// its slots ([`goes_back`]) has left none.
    pub fn seen(&mut self, tid: i32, at: impl Iterator<Item = u64> + Clone) {
        if self.dying.is_empty() {
            return;
        }
        let in_routine = |addr: u64| self.regions.iter().any(|region| region.goes_back(addr));
        if at.clone().any(in_routine) {
            return;
        }
        for id in self.dying.seen(tid, at) {
            self.release(id);
        }
    }

    /// Threads of dying translations that are not running now: where
    /// `blocked_at` says each is (its instruction pointer while it is
    /// blocked in a system call or stopped), it is seen
    /// ([`Cache::seen`]). A thread blocked for good (waiting for the
    /// others to end) is seen this way.
    pub fn seen_blocked(&mut self, blocked_at: impl Fn(i32) -> Option<u64>) {
        for tid in self.dying.threads() {
            if let Some(pc) = blocked_at(tid) {
                self.seen(tid, std::iter::once(pc));
            }
        }
    }

    /// Dead translation `id` is left by every thread: its space and number
    /// go to the next translation of its address (see [`Cache::retire`]).
    fn release(&mut self, id: u32) {
        let Some(translation) = self.translations.get(id as usize) else {
            return;
        };
        if translation.alive {
            return;
        }
        self.by_entry.remove(&translation.code.start);
        self.reusable.insert(self.replayed[id as usize].addr, id);
    }

    /// Whether the space of translation `id` holds `addr`.
    pub fn holds(&self, id: u32, addr: u64) -> bool {
        self.translations
            .get(id as usize)
            .is_some_and(|translation| translation.space.contains(&addr))
    }

    /// Whether translation `id` is still reachable (not dropped).
    pub fn alive(&self, id: u32) -> bool {
        self.translations
            .get(id as usize)
            .is_some_and(|translation| translation.alive)
    }

    /// Where an exit to original address `target` through `entrance`
    /// leads, when it has a translation ([`Cache::entered_at`]).
    fn link_target(&self, target: u64, entrance: Entrance) -> Option<u64> {
        let &entry = self.entries.get(&target)?;
        Some(self.entered_at(entry, entrance))
    }

    /// Where an exit through `entrance` to the translation whose entry is
    /// `entry` leads: its quiet entry when it has one, its resume entry
    /// (every translation has one when the run counts quiet runs, the
    /// only runs whose exits enter so), else `entry`.
    fn entered_at(&self, entry: u64, entrance: Entrance) -> u64 {
        let quiet_entry = || {
            let &id = self.by_entry.get(&entry)?;
            self.translations.get(id as usize)?.quiet_entry()
        };
        match entrance {
            Entrance::Quiet => quiet_entry().unwrap_or(entry),
            Entrance::Resume => entry - super::quiet::RESUME_ENTRY,
            Entrance::Entry => entry,
        }
    }

    /// Links exit `exit` of translation `id` to the translation whose
    /// entry is `entry` (at its quiet entry for a quiet exit, see
    /// [`Cache::link_target`]; the jump written to `writes`).
    fn link_into(&mut self, writes: &mut Writes, id: u32, exit: usize, entry: u64) {
        let Some(slot) = self
            .translations
            .get(id as usize)
            .and_then(|translation| translation.parts.exit(exit))
        else {
            return;
        };
        let entry = self.entered_at(entry, slot.entrance);
        let Some(translation) = self.translations.get_mut(id as usize) else {
            return;
        };
        if translation.parts.linked(exit) || !translator::reachable(slot.slot, entry) {
            // Linked already, or another region out of rel32 reach: the
            // stub stays (a trap).
            return;
        }
        let (at, displacement) = translator::slot_link(slot.slot, entry);
        writes.patch(at, &displacement);
        translation.parts.set_linked(exit, true);
        self.incoming.insert((slot.target, id, exit as u32));
    }

    /// Translates ahead from the translation of `from` along direct edges
    /// (exits through slots, and the return continuations of calls, which
    /// are also entered in the indirect-branch table) that [`goes_ahead`]
    /// takes, breadth first, up to
    /// `budget` new translations, only in code `protection` covers;
    /// links the exits to them (the original code read through `code`,
    /// the code, links and table entries written to `writes`). Returns how
    /// many it made.
    fn translate_ahead_into(
        &mut self,
        at: &mut Translating<'_, '_>,
        from: u64,
        budget: usize,
    ) -> Result<usize> {
        let mut made = 0;
        let Some(&entry) = self.entries.get(&from) else {
            return Ok(0);
        };
        let Some(&first) = self.by_entry.get(&entry) else {
            return Ok(0);
        };
        let mut queue = std::collections::VecDeque::from([first]);
        while let Some(id) = queue.pop_front() {
            let translation = &self.translations[id as usize];
            let mut next: Vec<(Option<usize>, u64)> = translation
                .parts
                .exits()
                .enumerate()
                .filter(|&(index, _)| !translation.parts.linked(index))
                .map(|(index, exit)| (Some(index), exit.target))
                .collect();
            let last = self.last_end(id);
            if let Some(last) = last.filter(|last| last.flow == Flow::Call) {
                next.push((None, last.next()));
            }
            for (exit, target) in next {
                let known = self.entries.contains_key(&target);
                if !known
                    && (made >= budget
                        || !goes_ahead(last, target)
                        || self.refused.contains_key(&target)
                        || !at.protection.covers(target)
                        || !self.has_region_near(target))
                {
                    continue;
                }
                let Some(to) = self.translate_into(at, target)? else {
                    continue;
                };
                if !known {
                    made += 1;
                    if let Some(&new) = self.by_entry.get(&to) {
                        queue.push_back(new);
                    }
                }
                match exit {
                    Some(exit) => self.link_into(at.writes, id, exit, to),
                    None if !known => self.enter_indirect_into(at.writes, target, to),
                    None => {}
                }
            }
        }
        Ok(made)
    }

    /// The original code translation `id` translates: its first address
    /// and the address after it.
    pub fn span(&self, id: u32) -> Option<(u64, u64)> {
        let replayed = self.replayed.get(id as usize)?;
        let &(last, len) = replayed.instructions.last()?;
        Some((replayed.addr, last.wrapping_add(u64::from(len))))
    }

    /// How translation `id`'s last instruction ends its block.
    fn last_end(&self, id: u32) -> Option<End> {
        let &(at, _) = self.replayed.get(id as usize)?.instructions.last()?;
        let &number = self.translations.get(id as usize)?.parts.decoded().last()?;
        Some(self.decodings.get(number)?.end(at))
    }

    /// Where translation `id`, ending in `syscall`, goes on after it: its
    /// exit slot 0, and the original address after the `syscall`.
    pub fn after_syscall(&self, id: u32) -> Option<(u64, u64)> {
        let translation = self.translations.get(id as usize)?;
        let exit = translation.parts.exit(0)?;
        Some((exit.slot, exit.target))
    }

    /// Drops the translations (and the refusals) of blocks with bytes in
    /// `start..end`: their lookup-table entries are cleared and the exits
    /// linked to them go back to their stubs, so the next execution there
    /// translates the code anew. Returns how many translations it dropped.
    pub fn invalidate(&mut self, memory: &Memory, start: u64, end: u64) -> Result<usize> {
        let overlaps = |(first, after): (u64, u64)| first < end && after > start;
        self.refused.retain(|&addr, (block, _)| match block {
            Some(block) => !overlaps((block.addr, block.last().next())),
            None => !(start..end).contains(&addr),
        });
        let dead: Vec<usize> = (self.by_code.near(start, end).into_iter())
            .filter(|&id| self.alive(id) && self.span(id).is_some_and(overlaps))
            .map(|id| id as usize)
            .collect();
        let table = self.layout().table();
        for &id in &dead {
            self.translations[id].alive = false;
            // Its links are no longer undone when their targets go (its
            // space may hold another translation by then).
            self.translations[id].parts.unlink_all();
            let addr = self.replayed[id].addr;
            self.by_code.remove(addr, id as u32);
            self.entries.remove(&addr);
            if let Some(entry) = self.table.remove(table, addr) {
                memory.write(entry, &[0u8; super::table::ENTRY_BYTES as usize])?;
            }
            let links = self
                .incoming
                .range((addr, 0, 0)..=(addr, u32::MAX, u32::MAX));
            let links: Vec<(u64, u32, u32)> = links.copied().collect();
            for link in links {
                self.incoming.remove(&link);
                let (_, from, exit) = link;
                let exit = exit as usize;
                let translation = &mut self.translations[from as usize];
                let Some(slot) = translation.parts.exit(exit) else {
                    continue;
                };
                if !translation.parts.linked(exit) {
                    continue;
                }
                let (at, displacement) = translator::slot_link(slot.slot, slot.stub);
                memory.write(at, &displacement)?;
                translation.parts.set_linked(exit, false);
            }
        }
        Ok(dead.len())
    }

    /// Enters `target` → `entry` in the indirect-branch table (written to
    /// `writes`). Other threads may look the entry up meanwhile: it holds
    /// no original address while its translated address changes.
    fn enter_indirect_into(&mut self, writes: &mut Writes, target: u64, entry: u64) {
        let table = self.layout().table();
        self.table
            .enter(writes, table, target, entry, &self.entries);
    }

    /// Writes this cache's regions as far as they are used (table, gadget,
    /// lookup routines, translations and their links) from `from` into
    /// `to`: a forked child's copy of the cache then matches this state even
    /// if the parent's other threads had blocks translated after the fork.
    pub fn copy_code(&self, from: &Memory, to: &Memory) -> Result<()> {
        const CHUNK: u64 = 1 << 20;
        let mut bytes = vec![0u8; CHUNK as usize];
        for region in &self.regions {
            let mut at = region.layout.base;
            while at < region.free {
                let len = CHUNK.min(region.free - at) as usize;
                from.read(at, &mut bytes[..len])?;
                to.write(at, &bytes[..len])?;
                at += len as u64;
            }
        }
        Ok(())
    }
}

/// Rounds up to 16 bytes.
fn align(addr: u64) -> u64 {
    (addr + 15) & !15
}

/// The translation whose space holds `addr`, given the translations by
/// entry and each one's space: spaces do not overlap and each holds its
/// entry, with the header (exit slots, stubs) before it, so it is the
/// translation of the nearest entry at or below `addr` or above it.
fn space_holding(
    by_entry: &BTreeMap<u64, u32>,
    addr: u64,
    space: impl Fn(u32) -> Option<Range<u64>>,
) -> Option<u32> {
    let below = by_entry.range(..=addr).next_back();
    let above = by_entry.range(addr..).next();
    below
        .into_iter()
        .chain(above)
        .map(|(_, &id)| id)
        .find(|&id| space(id).is_some_and(|space| space.contains(&addr)))
}

/// Whether translating ahead follows an edge of a block ending in `end` to
/// `target`: every edge but the taken side of a conditional jump. That
/// side is mostly the code of rare cases (compilers lay out the likely
/// case as the fall-through): on python3's start-up two thirds of the
/// taken sides translated ahead never ran, against a third of the
/// fall-throughs, and the blocks ahead of them fewer still. It is
/// translated when first taken.
fn goes_ahead(end: Option<End>, target: u64) -> bool {
    match end {
        Some(end) if end.flow == Flow::ConditionalJump => target == end.next(),
        _ => true,
    }
}

/// Whether `block` (at `own`) is a stub the sink does not skip (in
/// `.plt.got` or `.plt.sec`: one `jmp` through a slot beside the code)
/// whose slot now holds a target the sink enters from the stub as it
/// enters a call's callee (`Place::continues_to`: another region, or a
/// function's start): the jump then chooses its target's segment as a
/// call does (`quiet::relay_entry`; a run to another target than the
/// last run's finds its own).
fn stub_jumps_away(
    block: &DecodedBlock,
    own: Option<Place>,
    slot: impl FnOnce(u64) -> Option<u64>,
    places: Places<'_>,
) -> bool {
    let ([insn], Some(own)) = (&block.insns[..], own) else {
        return false;
    };
    let Some(jump) = insn.instruction.as_ref() else {
        return false;
    };
    let through_slot = jump.code() == iced_x86::Code::Jmp_rm64
        && jump.op0_kind() == iced_x86::OpKind::Memory
        && jump.is_ip_rel_memory_operand();
    if own.skipped || !through_slot {
        return false;
    }
    let Some(target) = slot(jump.ip_rel_memory_address()) else {
        return false;
    };
    target != block.addr && places(target).is_some_and(|to| !own.continues_to(&to))
}

#[cfg(test)]
mod tests {
    /// A thread in a routine may go back into the translation its slots
    /// name (a filter routine stopped at a hand-off): it has not left it;
    /// at a lookup's miss `int3` the tracer sends it on, and outside the
    /// routines (a translation, the program's code) its address says
    /// where it is.
    #[test]
    fn a_thread_in_a_routine_has_not_left_the_translation_it_came_from() {
        let routines = 0x1000..0x3000;
        let misses = [0x1040, 0x1200];
        assert!(super::goes_back(&routines, &misses, 0x1000));
        assert!(super::goes_back(&routines, &misses, 0x2fff));
        assert!(!super::goes_back(&routines, &misses, 0x1040));
        assert!(!super::goes_back(&routines, &misses, 0x1200));
        assert!(!super::goes_back(&routines, &misses, 0x3000));
        assert!(!super::goes_back(&routines, &misses, 0x0fff));
    }

    /// The rule of a stub's jump through a slot, with made-up places: one
    /// `jmp` through a slot beside the code, in a function the sink does
    /// not skip, whose slot's target another region's or a function's
    /// start (a call for the sink); not a PLT stub's (`relay` as it
    /// always was), a jump the sink takes for one within its region, a
    /// block of more instructions, nor a jump through a register.
    #[test]
    fn a_stub_s_jump_to_another_function_through_a_slot_chooses_its_target_s_segment() {
        use crate::event::Place;
        use iced_x86::{Code, Instruction, MemoryOperand, Register};
        let block = |instructions: &[Instruction]| super::DecodedBlock {
            addr: 0x1090,
            insns: instructions
                .iter()
                .map(|&instruction| super::super::blocks::Insn {
                    addr: instruction.ip(),
                    len: 6,
                    flow: crate::flow::Flow::Jump { direct: false },
                    rep: false,
                    instruction: Some(instruction),
                })
                .collect(),
        };
        let mut through_slot = Instruction::with1(
            Code::Jmp_rm64,
            MemoryOperand::with_base_displ(Register::RIP, 0x505e),
        )
        .unwrap();
        through_slot.set_ip(0x1090);
        through_slot.set_next_ip(0x1096);
        let mut through_rax = Instruction::with1(Code::Jmp_rm64, Register::RAX).unwrap();
        through_rax.set_ip(0x1090);
        let mut nop = Instruction::with(Code::Nopd);
        nop.set_ip(0x1090);
        let place = |region, starts_function, skipped| Place {
            region,
            starts_function,
            skipped,
        };
        let stub = place(1, false, false);
        // The slot holds 0x7000 (libc's strndup, a function's start in
        // another region), or 0x2000 (code of the stub's region).
        let mut places = |addr: u64| match addr {
            0x7000 => Some(place(2, true, false)),
            0x2000 => Some(place(1, false, false)),
            _ => None,
        };
        // (iced keeps the slot's address of a RIP-relative operand.)
        let slot = |value: u64| move |addr: u64| (addr == 0x505e).then_some(value);
        let jumps = |instructions: &[Instruction], own, value, places: super::Places<'_>| {
            super::stub_jumps_away(&block(instructions), Some(own), slot(value), places)
        };
        assert!(jumps(&[through_slot], stub, 0x7000, &mut places));
        assert!(!jumps(
            &[through_slot],
            place(1, false, true),
            0x7000,
            &mut places
        ));
        assert!(!jumps(&[through_slot], stub, 0x2000, &mut places));
        assert!(!jumps(&[through_slot], stub, 0x1090, &mut places));
        assert!(!jumps(&[through_slot], stub, 0x9000, &mut places));
        assert!(!jumps(&[nop, through_slot], stub, 0x7000, &mut places));
        assert!(!jumps(&[through_rax], stub, 0x7000, &mut places));
        // A slot that cannot be read.
        let unread = |_: u64| None;
        assert!(!super::stub_jumps_away(
            &block(&[through_slot]),
            Some(stub),
            unread,
            &mut places
        ));
    }

    #[test]
    fn the_replay_data_of_a_translation_is_one_cache_line() {
        // Read for every record replayed.
        let size = std::mem::size_of::<super::Replayed>();
        assert!(size <= 64, "{size} bytes");
    }

    #[test]
    fn the_rest_of_a_translation_is_one_cache_line_and_its_lists() {
        // One per translation, of which programs have tens of thousands.
        let size = std::mem::size_of::<super::Translation>();
        assert!(size <= 64, "{size} bytes");
    }

    #[test]
    fn translating_ahead_leaves_a_conditional_jumps_taken_side() {
        use crate::flow::{End, Flow};
        let end = |flow| End {
            addr: 0x1000,
            len: 2,
            flow,
            rep: false,
        };
        let jcc = Some(end(Flow::ConditionalJump));
        assert!(super::goes_ahead(jcc, 0x1002), "the fall-through");
        assert!(!super::goes_ahead(jcc, 0x1080), "taken forward");
        assert!(!super::goes_ahead(jcc, 0x0f00), "taken backward");
        // Every other edge: a jump's target, a call's and its return's.
        let jmp = Some(end(Flow::Jump { direct: true }));
        assert!(super::goes_ahead(jmp, 0x1080));
        let call = Some(end(Flow::Call));
        assert!(super::goes_ahead(call, 0x5000));
        assert!(super::goes_ahead(call, 0x1002));
        assert!(super::goes_ahead(Some(end(Flow::SideExit)), 0x0f00));
        assert!(super::goes_ahead(None, 0x1080));
    }

    #[test]
    fn an_address_belongs_to_the_space_around_it() {
        // Translation 0 takes 0x1000..0x1100 (entry 0x1020), translation 1
        // 0x1100..0x1180 (entry 0x1130); 0x1180..0x1200 is free.
        let by_entry = std::collections::BTreeMap::from([(0x1020, 0), (0x1130, 1)]);
        let spaces = [0x1000..0x1100, 0x1100..0x1180];
        let space = |id: u32| spaces.get(id as usize).cloned();
        let holder = |addr| super::space_holding(&by_entry, addr, space);
        // Header before an entry, the entry, code after it.
        assert_eq!(holder(0x1000), Some(0));
        assert_eq!(holder(0x1020), Some(0));
        assert_eq!(holder(0x10ff), Some(0));
        // A stub in the next translation's header, below its entry.
        assert_eq!(holder(0x1100), Some(1));
        assert_eq!(holder(0x1130), Some(1));
        assert_eq!(holder(0x117f), Some(1));
        // Outside every space.
        assert_eq!(holder(0x0fff), None);
        assert_eq!(holder(0x1180), None);
    }
}
