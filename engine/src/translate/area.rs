//! A thread's data area: one mapping per traced thread, anywhere in the
//! address space, which the instrumentation reaches through the GS base
//! (the tracer sets each thread's GS base to its area; x86-64 Linux
//! programs do not use `gs`, and the backend refuses to run one that
//! does, see `Cache::get_or_translate` and `invalidate`). It holds, in this
//! order,
//!
//! - two data pages of slots the instrumentation uses as scratch memory (it
//!   never touches the tracee's stack, so red zones stay intact), the
//!   record cursor, the address of the record being written (for the
//!   recorded words, `capture`), the address of the indirect-branch table,
//!   and a spare record;
//! - the record buffer, in two halves, each followed by a guard page
//!   (`PROT_NONE`). A record is one executed block: its translation id,
//!   the words the translation records when the run feeds simulations
//!   (`capture`; otherwise none, or for a block that loops on itself the
//!   count of its runs, see `translator`), then the stack pointer at its
//!   start. The record store that would overflow a half faults in its
//!   guard page (no bounds check, so no flags changed, in the fast path):
//!   the tracer points the cursor at the other half, restarts the block's
//!   prologue, lets the thread run, and replays the full half meanwhile
//!   (`stops`). At any other stop the tracer replays the half the cursor
//!   is in and starts again at the first half.
//!
//! - when the run needs only counts (`RunOptions::counts_only`), one run
//!   counter per translation ([`COUNTERS`] of them): a translation adds
//!   one to its counter instead of appending a record; the tracer reads
//!   and zeroes the counters at every drain; when the run counts quiet
//!   runs instead, the target of the last run of the translation's
//!   indirect call (`quiet::call_target`);
//! - when the run counts quiet runs (`RunOptions::quiet_runs`), two
//!   entries of four words per translation (for the first half of the
//!   [`COUNTERS`]): for a translation ending in a call, the caller's and
//!   the callee's segments of its last run and the segment and address of
//!   the record its return went on to, then the same of its last run from
//!   another caller's segment (`quiet::call_cache`); then the thread's
//!   table of transfers, 65536 entries of six words (a segment, a
//!   translation, a target, the segment the transfer chose, a record of
//!   the calling block, the record a return went on to), the thread's
//!   stack of calls, a ring of 2048 entries, and its table of records,
//!   65536 entries of a segment and a record's address (`quiet`).
//!   Emptying a half or handing one off starts a new segment and empties
//!   the stack of calls, so no run is counted in a record the tracer
//!   reads.
//!
//! - with a filter whose records name their run (`filter::RECORD_WORDS`,
//!   with quiet runs), the buffer of filter records, in two halves of
//!   [`FILTER_HALF`] bytes, each followed by a guard page: the record
//!   store that would overflow a half faults there, and the tracer points
//!   the filter cursor at the other half, restarts the filter routine,
//!   and replays the full half while the thread runs. Their records come
//!   apart from the blocks' so that a block never stops half-way for its
//!   record buffer: a run and what it names stay in one drain.
//!
//! So threads running at the same time never share a slot or a buffer, and
//! a full buffer stops only its own thread, and only briefly.

use std::ops::Range;

use iced_x86::{MemoryOperand, Register};

use crate::error::{Error, Result};
use crate::ptrace::{self, Regs};

use super::inject;
use super::layout::{Layout, BUFFER_SIZE, COUNTERS, MAX_RECORD, PAGE};

/// Bytes of a thread's stack of calls (`quiet`), a ring of 32-byte
/// entries whose offsets are 16-bit.
const CALLS_BYTES: u64 = 1 << 16;

/// Bytes of each half of a thread's buffer of filter records that name
/// their run.
pub(super) const FILTER_HALF: u64 = BUFFER_SIZE / 2;
/// Bytes of a thread's table of records of quiet runs (`quiet`): two
/// words per entry.
const RUNS_BYTES: u64 = 16 * quiet::RUNS_ENTRIES;
/// Bytes of a thread's table of transfers (`quiet`).
const TRANSFERS_BYTES: u64 = quiet::TRANSFER_BYTES * quiet::TRANSFER_ENTRIES;
use super::memory::Memory;
use super::quiet;

/// Scratch slot for the tracee's rax.
pub(super) const SAVE_RAX: u64 = 0;
/// Scratch slot for the tracee's rbx (lookup routine).
pub(super) const SAVE_RBX: u64 = 8;
/// Scratch slot for the tracee's flags (lookup routine, `lahf`/`seto`).
pub(super) const SAVE_FLAGS: u64 = 16;
/// The original target of the indirect transfer being looked up (read by
/// the tracer on a miss).
pub(super) const TARGET: u64 = 24;
/// The translated target the lookup routine jumps through.
pub(super) const JUMP: u64 = 32;
/// The address of the next free record.
pub(super) const CURSOR: u64 = 40;
/// The address of the indirect-branch table (for the lookup routine).
pub(super) const TABLE_BASE: u64 = 48;
/// One more scratch slot.
pub(super) const TEMP: u64 = 56;
/// Scratch slot for the tracee's rax while a word is recorded.
pub(super) const CAPTURE_RAX: u64 = 64;
/// Scratch slot for the tracee's rbx while a word is recorded.
pub(super) const CAPTURE_RBX: u64 = 72;
/// The address of the record of the block running (set by the prologue
/// of a translation that records words or counts its runs, read when it
/// records a word or counts a run).
pub(super) const RECORD: u64 = 80;
/// The number of the thread's segment of quiet runs (`quiet`).
pub(super) const SEGMENT: u64 = 88;
/// The stack pointer of the thread's segment of quiet runs (`quiet`).
pub(super) const SEGMENT_SP: u64 = 96;
/// How many entries of the thread's stack of calls (`quiet`) are live.
pub(super) const LIVE_CALLS: u64 = 104;
/// The last segment number the thread counted to (`quiet`).
pub(super) const NEXT_SEGMENT: u64 = 112;
/// The offset of the top entry in the thread's stack of calls (`quiet`),
/// from [`Area::CALLS_BASE`].
pub(super) const TOP_CALL: u64 = 120;
/// Scratch slot for the tracee's rdx while a call is entered in the stack
/// of calls (`quiet`).
pub(super) const SAVE_RDX: u64 = 128;
/// How many bytes before a translation's entry a return goes on: 0, or
/// to its resume entry (`quiet`).
pub(super) const RESUME: u64 = 136;
/// The sink's region of the thread's segment of quiet runs (`quiet`).
pub(super) const SEGMENT_REGION: u64 = 144;
/// Scratch slots of the code timing a `syscall` (`timing`): the tracee's
/// rax, rdi, rsi and r11. They are never live at a safe point (no signal
/// handler runs while they hold a value), so they are not kept across a
/// handler.
pub(super) const TIMING_RAX: u64 = 152;
/// See [`TIMING_RAX`].
pub(super) const TIMING_RDI: u64 = 160;
/// See [`TIMING_RAX`].
pub(super) const TIMING_RSI: u64 = 168;
/// See [`TIMING_RAX`].
pub(super) const TIMING_R11: u64 = 176;
/// Bytes of the pending calls' frames in use (`pending`: [`FRAME`] per
/// pending call, innermost last; 0: no call is pending).
pub(super) const PENDING_DEPTH: u64 = 184;
/// The pending calls' frames ([`DEPTH`] of them): for each, the offset of
/// its entry in the stack of calls, the offset in the chain of its
/// calling block's run, and the segment and the address of the record its
/// return is to count its run in (its cache entry's when it was made
/// pending: a call pending at several depths at once, a recursion, keeps
/// one cache entry for all of them).
pub(super) const PENDING_FRAMES: u64 = 192;
/// Bytes of a pending call's frame.
pub(super) const FRAME: u64 = 32;
/// Calls pending at once, at most (nested).
pub(super) const DEPTH: u64 = 64;
/// The cache entry of the pending call that has just returned (0: none).
pub(super) const RETURNED: u64 = PENDING_FRAMES + FRAME * DEPTH;
/// The cache entry of the call a return has just matched (not pending;
/// 0: none).
pub(super) const RETURN_CACHE: u64 = RETURNED + 8;
/// Bytes of the pending calls' chain in use (`PENDING_CHAIN`).
pub(super) const CHAIN_END: u64 = RETURN_CACHE + 8;
/// The pending calls' chain (`pending`): the records the runs kept in
/// order were counted in, each with its stack pointer ([`CHAIN`] pairs of
/// words).
pub(super) const PENDING_CHAIN: u64 = CHAIN_END + 8;
/// Runs the chain holds at most.
pub(super) const CHAIN: u64 = 128;
/// The record a block ending in an indirect jump counted its run in,
/// from its quiet path until the lookup routine of jumps (0: none), and
/// the run's stack pointer (`pending`).
pub(super) const JUMPER: u64 = PENDING_CHAIN + 16 * CHAIN;
/// See [`JUMPER`].
pub(super) const JUMPER_SP: u64 = JUMPER + 8;
/// 1 while a jump into another function goes to its target
/// (`quiet::relay_entry`).
pub(super) const RELAYING: u64 = JUMPER_SP + 8;
/// Where the routine that writes a pending call's records puts the
/// address of the record it writes last, the calling block's run of an
/// indirect call that goes to a new segment (0: nowhere): the offset in
/// the area of the word of the table of transfers that keeps it
/// (`quiet::rehome`).
pub(super) const LEARN: u64 = RELAYING + 8;
/// Where the routine that writes a pending call's records goes back to.
pub(super) const BACK: u64 = LEARN + 8;
/// Scratch slot for the tracee's rdx in that routine.
pub(super) const WRITE_RDX: u64 = BACK + 8;
/// The entry of the translation the resume routine works for
/// (`pending::resume_routine`).
pub(super) const RESUMING: u64 = WRITE_RDX + 8;
/// The tracee's flags in the resume routine (`lahf`/`seto`).
pub(super) const RESUME_FLAGS: u64 = RESUMING + 8;
/// The entry of the translation whose record the record routine writes
/// (`records`).
pub(super) const WRITING: u64 = RESUME_FLAGS + 8;
/// Scratch slots of the filter's checks and record paths (`filter`):
/// the tracee's rax, rcx, rdx and flags. Never live at a safe point.
pub(super) const FILTER_RAX: u64 = WRITING + 8;
/// See [`FILTER_RAX`].
pub(super) const FILTER_RCX: u64 = FILTER_RAX + 8;
/// See [`FILTER_RAX`].
pub(super) const FILTER_RDX: u64 = FILTER_RCX + 8;
/// See [`FILTER_RAX`] (`lahf`/`seto`).
pub(super) const FILTER_FLAGS: u64 = FILTER_RDX + 8;
/// The address of the process's filter tables (`Layout::filter_tables`).
pub(super) const FILTER_TABLES: u64 = FILTER_FLAGS + 8;
/// The address a filter's record path gives its routine (`filter`).
pub(super) const FILTER_ADDR: u64 = FILTER_TABLES + 8;
/// The tag of the record it writes.
pub(super) const FILTER_TAG: u64 = FILTER_ADDR + 8;
/// Where the routine goes back to.
pub(super) const FILTER_BACK: u64 = FILTER_TAG + 8;
/// The next free word of the buffer of filter records that name their
/// run (`filter::RECORD_WORDS`).
pub(super) const FILTER_CURSOR: u64 = FILTER_BACK + 8;
/// The tracee's rbx while the resume routine swaps a call's two cache
/// entries (`pending`). Never live at a safe point.
pub(super) const SWAP_RBX: u64 = FILTER_CURSOR + 8;
/// The tracee's rsi and rdi while a filter routine moves a line to the
/// front of its set (`filter`). Never live at a safe point.
pub(super) const FILTER_RSI: u64 = SWAP_RBX + 8;
/// See [`FILTER_RSI`].
pub(super) const FILTER_RDI: u64 = FILTER_RSI + 8;
/// Whether the access a filter routine serves missed (1) or hit (0).
pub(super) const FILTER_MISSED: u64 = FILTER_RDI + 8;
/// The record a pending call's calling run moves to when its indirect
/// call goes to another target than the last run's (first the index of
/// the entry of the table of transfers that keeps it; `quiet::rehome`).
/// Never live at a safe point.
pub(super) const REHOMED: u64 = FILTER_MISSED + 8;
/// The tracee's rsi while the resume routine fills a call's cache entry
/// from the table of transfers (`pending`). Never live at a safe point.
pub(super) const SWAP_RSI: u64 = REHOMED + 8;
// The slots end before the spare record.
const _: () = assert!(SWAP_RSI + 8 <= SPARE_RECORD);
/// The slots of pending calls, from [`PENDING_DEPTH`], all zeroed when
/// the tracer settles it (`pending`).
pub(super) const PENDING_SLOTS: usize = ((LEARN - PENDING_DEPTH) / 8 + 1) as usize;
// `Area::start_half` writes these four slots at once.
const _: () =
    assert!(SEGMENT == RECORD + 8 && SEGMENT_SP == SEGMENT + 8 && LIVE_CALLS == SEGMENT_SP + 8);

/// Bytes of the scratch slots, from the start of the area to `RECORD`.
const SCRATCH: usize = (RECORD + 8) as usize;

/// A thread's scratch slots, kept while a signal handler runs (its
/// translations use the same slots).
pub(super) type Scratch = [u8; SCRATCH];

/// Bytes of the area's data pages: the slots, then the spare record.
const DATA_PAGES: u64 = 2 * PAGE;

/// Where recorded words go when no record is open: the rest of the data
/// pages, [`MAX_RECORD`] bytes.
const SPARE_RECORD: u64 = DATA_PAGES - MAX_RECORD;

/// The slot at `offset` of the running thread's area: `gs:[offset]`, with
/// 64-bit addressing (a sign-extended 32-bit displacement, no
/// address-size prefix: the area is smaller than 2 GiB).
pub(super) fn slot(offset: u64) -> MemoryOperand {
    MemoryOperand::new(
        Register::None,
        Register::None,
        1,
        offset as i64,
        8,
        false,
        Register::GS,
    )
}

/// Hand-offs an area makes with halves of one size before they double.
const HAND_OFFS_PER_SIZE: u64 = 16;

/// Bytes of a buffer half after `hand_offs` hand-offs of an area whose
/// halves had `first` bytes: doubled after every [`HAND_OFFS_PER_SIZE`],
/// up to [`BUFFER_SIZE`] (never below `first`). A short run keeps small
/// halves, whose last one the tracer replays after the program's end; a
/// long one gets halves that start its segments of quiet runs anew less
/// often.
fn half_after(first: u64, hand_offs: u64) -> u64 {
    let doublings = (hand_offs / HAND_OFFS_PER_SIZE).min(63);
    first
        .saturating_mul(1 << doublings)
        .min(BUFFER_SIZE)
        .max(first)
}

/// Where one thread's area is in the tracee.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Area {
    /// First address of the area (the thread's GS base).
    pub base: u64,
    /// Bytes of each buffer half in use (at most [`BUFFER_SIZE`], a
    /// multiple of [`PAGE`]); the rest of a half's space is never touched.
    halves: [u64; 2],
    /// Bytes of the halves when the area was mapped.
    first_half: u64,
    /// Halves the area's threads have handed off.
    hand_offs: u64,
    /// Whether its buffer of filter records is in use (guarded).
    filter_records: bool,
}

impl Area {
    /// Bytes of the whole area.
    pub const SIZE: u64 = DATA_PAGES
        + 2 * (BUFFER_SIZE + PAGE)
        + 8 * COUNTERS
        + quiet::CALL_CACHE_BYTES * quiet::CALL_CACHES
        + TRANSFERS_BYTES
        + CALLS_BYTES
        + RUNS_BYTES
        + 2 * (FILTER_HALF + PAGE);
    /// Offset of the run counters (translation `id`'s at `8 * id` after).
    pub const COUNTER_BASE: u64 = DATA_PAGES + 2 * (BUFFER_SIZE + PAGE);
    /// Offset of the translations' entries for quiet runs (`quiet::call_cache`).
    pub const QUIET_BASE: u64 = Area::COUNTER_BASE + 8 * COUNTERS;
    /// Offset of the thread's table of transfers (`quiet`).
    pub const TRANSFERS_BASE: u64 = Area::QUIET_BASE + quiet::CALL_CACHE_BYTES * quiet::CALL_CACHES;
    /// Offset of the thread's stack of calls (`quiet`).
    pub const CALLS_BASE: u64 = Area::TRANSFERS_BASE + TRANSFERS_BYTES;
    /// Offset of the thread's table of records of quiet runs (`quiet`).
    pub const RUNS_BASE: u64 = Area::CALLS_BASE + CALLS_BYTES;
    /// Offset of the buffer of filter records that name their run.
    pub const FILTER_BASE: u64 = Area::RUNS_BASE + RUNS_BYTES;

    /// An area at `base` whose slots are ordinary memory, for tests.
    #[cfg(test)]
    pub fn for_test(base: u64) -> Area {
        Area {
            base,
            halves: [PAGE; 2],
            first_half: PAGE,
            hand_offs: 0,
            filter_records: false,
        }
    }

    /// The address of the slot at `offset`.
    pub fn at(&self, offset: u64) -> u64 {
        self.base + offset
    }
    /// A record-sized area the tracer points the `RECORD` slot at after a
    /// drain: a block interrupted mid-way then records its remaining words
    /// there, not into the emptied buffer.
    pub fn spare_record(&self) -> u64 {
        self.base + SPARE_RECORD
    }
    /// The first record of buffer half `half` (0 or 1).
    pub fn buffer(&self, half: u64) -> u64 {
        self.base + DATA_PAGES + half * (BUFFER_SIZE + PAGE)
    }
    /// The guard page after buffer half `half`.
    pub fn guard(&self, half: u64) -> u64 {
        self.buffer(half) + self.halves[(half & 1) as usize]
    }

    /// Counts a hand-off of stopped `tid` (registers `regs`), whose
    /// records now go to the empty half `half`, and grows that half to
    /// [`half_after`] the hand-offs so far when it is smaller: its guard
    /// page moves (system calls run at `gadget`). A guard page that cannot
    /// move leaves the half as it was. Larger halves keep the segments of
    /// quiet runs (`quiet`), which every hand-off starts anew, for longer.
    pub fn handed_off(
        &mut self,
        tid: i32,
        memory: &Memory,
        regs: &Regs,
        gadget: u64,
        half: u64,
    ) -> Result<()> {
        self.hand_offs += 1;
        let size = half_after(self.first_half, self.hand_offs);
        let index = (half & 1) as usize;
        if size <= self.halves[index] {
            return Ok(());
        }
        let (old, new) = (self.guard(half), self.buffer(half) + size);
        if inject::protect(tid, memory, regs, gadget, new, PAGE, libc::PROT_NONE)? != 0 {
            return Ok(());
        }
        let read_write = libc::PROT_READ | libc::PROT_WRITE;
        if inject::protect(tid, memory, regs, gadget, old, PAGE, read_write)? != 0 {
            return Ok(());
        }
        self.halves[index] = size;
        Ok(())
    }

    /// The buffer half whose records end at `cursor`, if it is a record
    /// boundary in one.
    pub fn half_ending_at(&self, cursor: u64) -> Option<u64> {
        (0..2).find(|&half| {
            (self.buffer(half)..=self.guard(half)).contains(&cursor)
                && (cursor - self.buffer(half)).is_multiple_of(8)
        })
    }

    /// The buffer half whose guard page holds `addr`.
    pub fn half_guarded_by(&self, addr: u64) -> Option<u64> {
        (0..2).find(|&half| (self.guard(half)..self.guard(half) + PAGE).contains(&addr))
    }

    /// The first record of half `half` of the buffer of filter records.
    pub fn filter_buffer(&self, half: u64) -> u64 {
        self.base + Area::FILTER_BASE + half * (FILTER_HALF + PAGE)
    }

    /// The guard page after half `half` of the buffer of filter records.
    fn filter_guard(&self, half: u64) -> u64 {
        self.filter_buffer(half) + FILTER_HALF
    }

    /// The half of the buffer of filter records whose guard page holds
    /// `addr` (none when that buffer is not in use).
    pub fn filter_half_guarded_by(&self, addr: u64) -> Option<u64> {
        let guarded = |half| self.filter_guard(half)..self.filter_guard(half) + PAGE;
        (0..2).find(|&half| self.filter_records && guarded(half).contains(&addr))
    }

    /// All the blocks' buffer, for a filter record's run
    /// ([`crate::event::FilteredAccess::record`]).
    pub fn whole_buffer(&self) -> Range<u64> {
        self.buffer(0)..self.guard(1)
    }

    /// The filter records of a stopped thread that name their run: the
    /// half of their buffer the filter cursor is in, and their bytes
    /// (none when that buffer is not in use).
    pub fn filter_records(&self, memory: &Memory) -> Result<(u64, Range<u64>)> {
        if !self.filter_records {
            return Ok((0, 0..0));
        }
        let cursor = memory.read_u64(self.at(FILTER_CURSOR))?;
        let half = (0..2)
            .find(|&half| (self.filter_buffer(half)..=self.filter_guard(half)).contains(&cursor))
            .ok_or_else(|| {
                Error::Unexpected(format!(
                    "translate: filter cursor {cursor:#x} outside its buffer"
                ))
            })?;
        Ok((half, self.filter_buffer(half)..cursor))
    }

    /// Makes the empty half `half` of the buffer of filter records the one
    /// they go to.
    pub fn start_filter_half(&self, memory: &Memory, half: u64) -> Result<()> {
        match self.filter_records {
            true => memory.write_u64(self.at(FILTER_CURSOR), self.filter_buffer(half)),
            false => Ok(()),
        }
    }

    /// Maps an area into stopped `tid` (registers `regs`) after the
    /// region `layout` (or as near as it can), with buffer halves of
    /// `half` bytes (rounded down to whole pages, at most [`BUFFER_SIZE`]),
    /// with a buffer of filter records that name their run when
    /// `filter_records`, empty buffers and the region's
    /// indirect-branch table; the thread's GS base stays as it is (see
    /// [`Area::attach`]).
    pub fn map(
        tid: i32,
        memory: &Memory,
        regs: &Regs,
        layout: &Layout,
        half: u64,
        filter_records: bool,
    ) -> Result<Area> {
        let gadget = layout.gadget();
        let base = inject::map_data(tid, memory, regs, gadget, layout.end(), Area::SIZE)?;
        let half = (half.min(BUFFER_SIZE) & !(PAGE - 1)).max(PAGE);
        let area = Area {
            base,
            halves: [half; 2],
            first_half: half,
            hand_offs: 0,
            filter_records,
        };
        let filter_guards = match filter_records {
            true => vec![area.filter_guard(0), area.filter_guard(1)],
            false => Vec::new(),
        };
        for guard in [area.guard(0), area.guard(1)]
            .into_iter()
            .chain(filter_guards)
        {
            if inject::protect(tid, memory, regs, gadget, guard, PAGE, libc::PROT_NONE)? != 0 {
                return Err(Error::Unexpected(
                    "translate: cannot protect a record buffer's guard page".into(),
                ));
            }
        }
        memory.write_u64(area.at(TABLE_BASE), layout.table())?;
        memory.write_u64(area.at(FILTER_TABLES), layout.filter_tables())?;
        area.reset_all(memory)?;
        Ok(area)
    }

    /// Empties the buffer (the cursor at the start of its first half, the
    /// record slot at the spare record).
    pub fn reset(&self, memory: &Memory) -> Result<()> {
        self.start_half(memory, 0)
    }

    /// Empties the buffers: the blocks' ([`Area::reset`]) and the filter
    /// records'.
    pub fn reset_all(&self, memory: &Memory) -> Result<()> {
        self.reset(memory)?;
        self.start_filter_half(memory, 0)
    }

    /// Makes the empty buffer half `half` the one records go to (the
    /// cursor at its start, the record slot at the spare record), in a new
    /// segment of quiet runs (`quiet`) with no stack pointer, no call and
    /// no pending call (`pending`: settled before).
    pub fn start_half(&self, memory: &Memory, half: u64) -> Result<()> {
        memory.write_u64(self.at(CURSOR), self.buffer(half))?;
        let slots = [self.spare_record(), quiet::new_epoch(), 0, 0];
        memory.write(self.at(RECORD), bytemuck::cast_slice(&slots))?;
        let pending = [0u64; PENDING_SLOTS];
        memory.write(self.at(PENDING_DEPTH), bytemuck::cast_slice(&pending))
    }

    /// The scratch slots now.
    pub fn save_scratch(&self, memory: &Memory) -> Result<Scratch> {
        let mut scratch = [0; SCRATCH];
        memory.read(self.base, &mut scratch)?;
        Ok(scratch)
    }

    /// Puts back the slots of `scratch` but the cursor and the open
    /// record, which are the buffer's.
    pub fn restore_scratch(&self, memory: &Memory, scratch: &Scratch) -> Result<()> {
        let (cursor, record) = (CURSOR as usize, RECORD as usize);
        memory.write(self.base, &scratch[..cursor])?;
        memory.write(self.at(CURSOR + 8), &scratch[cursor + 8..record])
    }

    /// Appends a record of translation `id`, one that counts its runs, with
    /// no run yet and stack pointer `sp`, and makes it the open record:
    /// the runs of that block from here on are counted there (see
    /// `translator`).
    pub fn open_record(&self, memory: &Memory, id: u32, sp: u64) -> Result<()> {
        let cursor = memory.read_u64(self.at(CURSOR))?;
        let mut record = [0u8; 24];
        record[..8].copy_from_slice(&u64::from(id).to_le_bytes());
        record[16..].copy_from_slice(&sp.to_le_bytes());
        memory.write(cursor, &record)?;
        memory.write_u64(self.at(RECORD), cursor)?;
        memory.write_u64(self.at(CURSOR), cursor + 24)
    }

    /// Reads the run counters of the first `count` translations into
    /// `counts` and zeroes those that were not zero; whether any was not.
    pub fn take_counts(
        &self,
        memory: &Memory,
        count: usize,
        counts: &mut Vec<u64>,
    ) -> Result<bool> {
        let count = count.min(COUNTERS as usize);
        counts.clear();
        counts.resize(count, 0);
        let base = self.at(Area::COUNTER_BASE);
        memory.read(base, bytemuck::cast_slice_mut(counts.as_mut_slice()))?;
        let Some(first) = counts.iter().position(|&runs| runs != 0) else {
            return Ok(false);
        };
        let last = counts.iter().rposition(|&runs| runs != 0).unwrap_or(first);
        let zeros = vec![0u8; (last + 1 - first) * 8];
        memory.write(base + 8 * first as u64, &zeros)?;
        Ok(true)
    }

    /// Zeroes the run counters of the first `count` translations (an area
    /// copied by `fork`, or taken over by a new thread).
    pub fn clear_counts(&self, memory: &Memory, count: usize) -> Result<()> {
        let count = count.min(COUNTERS as usize);
        if count > 0 {
            memory.write(self.at(Area::COUNTER_BASE), &vec![0u8; count * 8])?;
        }
        Ok(())
    }

    /// Makes this area the GS base of stopped `tid` (registers `regs`,
    /// updated).
    pub fn attach(&self, tid: i32, regs: &mut Regs) -> Result<()> {
        regs.gs_base = self.base;
        ptrace::set_regs(tid, regs)?;
        if ptrace::regs(tid)?.gs_base != self.base {
            return Err(Error::Unexpected(
                "translate: the kernel did not take the thread's GS base".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use iced_x86::{Code, Encoder, Instruction, Register};

    use super::{half_after, slot, Area, BUFFER_SIZE, HAND_OFFS_PER_SIZE, PAGE};

    /// The bytes of `mov gs:[offset], rax`.
    fn store_rax(offset: u64) -> Vec<u8> {
        let instruction = Instruction::with2(Code::Mov_rm64_r64, slot(offset), Register::RAX)
            .expect("a valid instruction");
        let mut encoder = Encoder::new(64);
        encoder.encode(&instruction, 0).expect("it encodes");
        encoder.take_buffer()
    }

    #[test]
    fn slots_are_absolute_displacements_without_prefix() {
        assert_eq!(
            store_rax(0x70),
            [0x65, 0x48, 0x89, 0x04, 0x25, 0x70, 0, 0, 0]
        );
        let last = Area::SIZE - 8;
        assert!(last < 1 << 31, "a displacement is sign-extended");
        let bytes = store_rax(last);
        assert_eq!(bytes[..5], [0x65, 0x48, 0x89, 0x04, 0x25]);
        assert_eq!(bytes[5..], (last as u32).to_le_bytes());
    }

    #[test]
    fn halves_double_after_a_number_of_hand_offs_at_each_size_up_to_the_buffer() {
        let first = BUFFER_SIZE / 8;
        let per = HAND_OFFS_PER_SIZE;
        assert_eq!(half_after(first, 0), first);
        assert_eq!(half_after(first, per - 1), first);
        assert_eq!(half_after(first, per), 2 * first);
        assert_eq!(half_after(first, 2 * per - 1), 2 * first);
        assert_eq!(half_after(first, 2 * per), 4 * first);
        assert_eq!(half_after(first, 3 * per), BUFFER_SIZE);
        assert_eq!(half_after(first, 100 * per), BUFFER_SIZE);
        assert_eq!(half_after(first, u64::MAX), BUFFER_SIZE);
        // Halves mapped whole (a simulation's) or of one page stay whole
        // or grow from there.
        assert_eq!(half_after(BUFFER_SIZE, 5 * per), BUFFER_SIZE);
        assert_eq!(half_after(PAGE, per), 2 * PAGE);
    }
}
