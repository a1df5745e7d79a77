//! Draining the record buffer: each record (translation id, the words the
//! translation records when the run feeds simulations, stack pointer) is
//! one executed block, replayed into the sink as a `block` event (its
//! arrival computed from the previous block's last instruction and this
//! block's address, as the step backend computes it) and the block's
//! instructions, each followed, when the run feeds simulations, by its
//! data accesses and branches (by the rules shared with the step backend,
//! [`crate::semantics`], from the recorded words, see `capture`).
//!
//! Without simulations the records reach the sink in one call
//! ([`EventSink::blocks_executed`]), and a record of a block that loops on
//! itself counts its runs (`translator`), as does, with quiet runs, the
//! record of a block's first run in a segment (`quiet`): one
//! [`WholeBlock`] with its repeats. When a record of a block that loops
//! on itself is the last one drained, the thread may be inside that
//! block, so the emptied buffer starts with a new record of it with no
//! run yet (`Area::open_record`), where its next runs are counted.
//!
//! With a filter and quiet runs, the filter records (each naming the
//! record of its run, in a buffer of their own) are replayed first
//! ([`replay_filter_records`]), then the blocks, each [`WholeBlock`] with
//! its record's address.

use std::ops::Range;
use std::sync::MutexGuard;

use crate::error::{Error, Result};
use crate::event::{
    Arrival, Block, BlockEvent, DataAccess, EventSink, FilteredAccess, NoAhead, Repeat,
    SimulatedBlock, Thread, WholeBlock,
};
use crate::flow::{End, ExitRule};
use crate::ptrace::Regs;
use crate::semantics::{self, BranchRules, Dynamic, InstructionAt, Pass, Registers, Superblock};
use crate::step::RunOptions;

use super::area::{Area, CURSOR, RECORD};
use super::cache::{Cache, Interruption, RecordInfo, ReplayInfo};
use super::capture::Recorded;
use super::filter::{self, FirstLevel, Kept};
use super::layout::RECORD_HEADER;
use super::memory::Memory;
use super::pending;

/// The thread's position in the block sequence, shared by the replay of
/// records and the stepping of blocks that are not translated.
#[derive(Clone, Debug)]
pub(super) struct Replay {
    /// How the previous block was left; `None` before the first block.
    previous: Option<ExitRule>,
    /// Instructions reported.
    pub instructions: u64,
    /// Blocks reported.
    pub blocks: u64,
    /// Report data accesses and branches.
    simulations: bool,
    /// Report conditional branches as Cachegrind does
    /// (`RunOptions::superblocks`).
    cachegrind: bool,
    /// Report branches (`RunOptions::branches`).
    branches: bool,
    /// The registers holding constants of the current block.
    known: u16,
    /// Where the thread is in Cachegrind's superblocks.
    superblock: Superblock,
    /// The words of the records being replayed (kept between drains, so
    /// a drain allocates nothing).
    words: Vec<u64>,
    /// Translations count their runs in the thread's area (`area`).
    counts_only: bool,
    /// The program's threads filter fetches and data accesses (`filter`):
    /// the records are counted runs and filter records.
    pub filtered: bool,
    /// ... with quiet runs: each filter record names the record of its run
    /// (`filter::RECORD_WORDS`), in a buffer of their own, and a drain's
    /// are reported before its blocks ([`replay_filter_records`]).
    attributed: bool,
    /// The fetch and accesses of a stepped instruction on their way to the
    /// sink (kept between steps).
    unfiltered: Vec<FilteredAccess>,
    /// The process's first-level caches, read while a block is stepped
    /// (`filter::FirstLevel`): its fetches and accesses go through them,
    /// and only their misses to the sink.
    pub(super) first_level: Option<FirstLevel>,
    /// The run counts being replayed (kept between drains).
    counts: Vec<u64>,
    /// The filter records being replayed, when they have a buffer of
    /// their own (kept between drains).
    filter_words: Vec<u64>,
    /// Whether blocks were replayed since filter records that name their
    /// run last were ([`FilteredAccesses::after_blocks`]).
    pub(super) blocks_since_filtered: bool,
    /// The word buffers of chunks replayed on a helper thread (`ahead`),
    /// kept between drains.
    pub chunk_buffers: ChunkBuffers,
}

/// Word buffers of record chunks, kept between drains so that a drain
/// allocates none (each is larger than the allocator's threshold for
/// memory of its own, which a new one would map and fault in again). A
/// copy of a [`Replay`] starts without them.
#[derive(Debug, Default)]
pub(super) struct ChunkBuffers(pub Vec<Vec<u64>>);

impl Clone for ChunkBuffers {
    fn clone(&self) -> ChunkBuffers {
        ChunkBuffers::default()
    }
}

/// A recorded run of a translated block, as the replay reads it.
#[derive(Clone, Copy)]
pub(super) struct RecordedRun<'a> {
    /// The block's address.
    pub addr: u64,
    /// The stack pointer at its start.
    pub sp: u64,
    /// The translation.
    pub info: &'a ReplayInfo<'a>,
    /// Its instructions' decodings and where their words are.
    pub record: RecordInfo<'a>,
    /// The words the run recorded.
    pub words: &'a [u64],
}

/// A thread whose records are replayed, with what the replay needs of it.
pub(super) struct Replaying<'a, S: ?Sized> {
    /// The thread's position in the block sequence.
    pub replay: &'a mut Replay,
    /// Where its events go.
    pub sink: &'a mut S,
    /// The thread.
    pub thread: Thread,
}

impl<S: ?Sized> Replaying<'_, S> {
    /// The same thread, replaying into the same sink, for a call after
    /// which this one is used again.
    #[inline]
    pub fn reborrow(&mut self) -> Replaying<'_, S> {
        Replaying {
            replay: &mut *self.replay,
            sink: &mut *self.sink,
            thread: self.thread,
        }
    }
}

/// The block sequence of a thread, saved while it runs a signal handler.
pub(super) type Saved = Option<ExitRule>;

impl Replay {
    /// Whether its records of more than one chunk are replayed by the
    /// sink's simulation ahead, when the sink has one ([`replay_records`]):
    /// records that feed simulations, and not filtered.
    pub fn replays_ahead(&self) -> bool {
        self.simulations && !self.filtered
    }

    /// Before the first chunk of a buffer's records
    /// ([`replay_next_chunk`]): nothing held of an earlier buffer.
    pub fn begin_records(&mut self) {
        self.words.clear();
    }

    /// After the last chunk of a buffer's records, `any` when it had
    /// bytes.
    pub fn end_records(&mut self, any: bool) {
        self.blocks_since_filtered |= self.attributed && any;
    }

    /// A thread that has executed nothing yet, reporting what `options`
    /// ask for.
    pub fn new(options: &RunOptions) -> Replay {
        Replay {
            previous: None,
            instructions: 0,
            blocks: 0,
            simulations: options.simulations,
            cachegrind: options.superblocks,
            branches: options.branches,
            known: 0,
            superblock: Superblock::start(),
            words: Vec::new(),
            counts_only: options.counts_only || (options.filter.is_some() && !options.quiet_runs),
            filtered: options.filter.is_some(),
            attributed: options.filter.is_some() && options.quiet_runs,
            unfiltered: Vec::new(),
            first_level: None,
            counts: Vec::new(),
            filter_words: Vec::new(),
            blocks_since_filtered: false,
            chunk_buffers: ChunkBuffers::default(),
        }
    }

    /// Saves the block sequence and starts a new one (a signal handler's
    /// first block arrives with `Arrival::Start`, and starts a superblock).
    pub fn suspend(&mut self) -> Saved {
        self.superblock = Superblock::start();
        self.previous.take()
    }

    /// Restores a block sequence saved by [`Replay::suspend`].
    pub fn resume(&mut self, saved: Saved) {
        self.previous = saved;
    }

    /// The arrival of a block at `addr` after the previous one.
    #[inline]
    pub fn arrival(&self, addr: u64) -> Arrival {
        match &self.previous {
            None => Arrival::Start,
            Some(rule) => rule.arrival(addr),
        }
    }

    /// Reports the start of a block at `addr` with stack pointer `sp`.
    pub fn block<S: EventSink + ?Sized>(
        &mut self,
        sink: &mut S,
        thread: Thread,
        addr: u64,
        sp: u64,
    ) {
        let arrival = self.arrival(addr);
        sink.block(thread, Block { addr, sp, arrival });
        self.blocks += 1;
        self.known = 0;
    }

    /// Reports one execution of the instruction `end`, the `count`th of
    /// its block, which may be the block's last.
    pub fn instruction<S: EventSink + ?Sized>(
        &mut self,
        sink: &mut S,
        thread: Thread,
        end: End,
        count: u32,
    ) {
        sink.instruction(thread, end.addr, end.len);
        self.instructions += 1;
        self.previous = Some(ExitRule::of(end, count));
        if let Some(caches) = self.first_level.as_mut() {
            // Stepped: its fetch goes through the process's I1 (read for
            // the stepped block), a miss to the simulation.
            if caches.fetch_misses(end.addr, end.len) {
                let fetch = FilteredAccess {
                    instruction: (end.addr, end.len),
                    access: None,
                    record: 0,
                };
                sink.accesses_filtered(thread, &mut FilteredAccesses::listed(&[fetch]));
            }
        }
    }

    /// After [`Replay::instruction`] for a single step of `instruction`
    /// from `before` to `after`: reports its data accesses and branches
    /// when the run feeds simulations.
    pub fn stepped<S: EventSink + ?Sized>(
        &mut self,
        sink: &mut S,
        thread: Thread,
        instruction: InstructionAt<'_>,
        before: &Regs,
        after: &Regs,
    ) {
        let registers = Registers {
            before,
            after,
            offset: 0,
        };
        if !self.filtered {
            self.executed(sink, thread, instruction, None, after.rip, &registers);
            return;
        }
        // Its accesses were not filtered: they go through the process's
        // D1 (read for the stepped block), their misses to the simulation
        // (its fetch went with the instruction, `Replay::instruction`).
        let mut accesses = Vec::new();
        let mut noting = Noting {
            sink: &mut *sink,
            accesses: &mut accesses,
        };
        self.executed(
            &mut noting,
            thread,
            instruction,
            None,
            after.rip,
            &registers,
        );
        let at = (instruction.at, instruction.decoded.len);
        let mut unfiltered = std::mem::take(&mut self.unfiltered);
        unfiltered.clear();
        let mut caches = self.first_level.as_mut();
        for access in accesses {
            let missed = caches
                .as_deref_mut()
                .is_none_or(|caches| caches.access_misses(access.addr, access.size));
            if missed {
                unfiltered.push(FilteredAccess {
                    instruction: at,
                    access: Some(access),
                    record: 0,
                });
            }
        }
        sink.accesses_filtered(thread, &mut FilteredAccesses::listed(&unfiltered));
        self.unfiltered = unfiltered;
    }

    /// A client request was served: Cachegrind's superblock ends there.
    pub fn client_request(&mut self) {
        self.superblock = Superblock::start();
    }

    /// Reports the data accesses and branches of an execution of
    /// `instruction` (a REP `pass`) that went to `now`, as `dynamic` says,
    /// and follows the block's constants and the superblocks.
    fn executed<S: EventSink + ?Sized>(
        &mut self,
        sink: &mut S,
        thread: Thread,
        instruction: InstructionAt<'_>,
        pass: Option<Pass>,
        now: u64,
        dynamic: &impl Dynamic,
    ) {
        if !self.simulations {
            return;
        }
        // Callgrind's rules need the block's constants, Cachegrind's the
        // superblock's.
        let known = if self.cachegrind {
            self.superblock.known
        } else {
            self.known
        };
        let rules = BranchRules {
            cachegrind: self.cachegrind,
            with_branches: self.branches,
        };
        semantics::report(sink, thread, instruction, pass, known, rules, dynamic);
        let InstructionAt { at, decoded } = instruction;
        if self.cachegrind {
            let superblock_known = decoded.effect.apply(self.superblock.known);
            self.superblock.executed(decoded, at, now, superblock_known);
        } else {
            self.known = decoded.effect.apply(self.known);
        }
    }

    /// Reports a whole run of the translation `info` with stack pointer
    /// `sp`: its instructions (left as its exit says), in one call; with
    /// `split`, calls it before the last instruction.
    fn whole_block<S: EventSink + ?Sized>(
        &mut self,
        sink: &mut S,
        thread: Thread,
        info: &ReplayInfo<'_>,
        sp: u64,
        split: Option<&mut dyn FnMut(&mut S)>,
    ) {
        let (addr, block, exit) = (info.addr, info.instructions, info.exit);
        let arrival = self.arrival(addr);
        let block_start = Block { addr, sp, arrival };
        match (split, block.split_last()) {
            (Some(split), Some((&(at, len), before))) => {
                sink.block_executed(thread, block_start, before);
                split(sink);
                sink.instruction(thread, at, len);
            }
            (split, _) => {
                sink.block_executed(thread, block_start, block);
                if let Some(split) = split {
                    split(sink);
                }
            }
        }
        self.ran(exit, block.len());
    }

    /// A whole block of `count` instructions left by `exit` ran.
    #[inline]
    fn ran(&mut self, exit: ExitRule, count: usize) {
        self.blocks += 1;
        self.instructions += count as u64;
        self.previous = Some(exit);
    }

    /// The block that ran last, of `count` instructions, ran `times` more.
    #[inline]
    fn ran_again(&mut self, times: u64, count: usize) {
        self.blocks += times;
        self.instructions += times * count as u64;
    }

    /// Reports the block `run`: each instruction, then its data accesses
    /// and branches; with `split`, calls it before the last instruction.
    fn recorded_block<S: EventSink + ?Sized>(
        &mut self,
        sink: &mut S,
        thread: Thread,
        run: RecordedRun<'_>,
        split: Option<&mut dyn FnMut(&mut S)>,
    ) {
        let count = run.info.instructions.len();
        self.recorded_part(sink, thread, run, count, split);
    }

    /// Reports the first `executed` instructions of `run` (what ran before
    /// a signal interrupted it), as [`Replay::recorded_block`] reports a
    /// whole one; none when `executed` is 0 (and the previous block stays
    /// the last).
    pub fn interrupted_block<S: EventSink + ?Sized>(
        &mut self,
        sink: &mut S,
        thread: Thread,
        run: RecordedRun<'_>,
        executed: usize,
    ) {
        if executed > 0 {
            let count = executed.min(run.info.instructions.len());
            self.recorded_part(sink, thread, run, count, None);
        }
    }

    /// [`Replay::recorded_block`] for the first `count` instructions of
    /// `run` (all, or those that ran before a signal); the block is left
    /// as its last one reported says.
    fn recorded_part<S: EventSink + ?Sized>(
        &mut self,
        sink: &mut S,
        thread: Thread,
        run: RecordedRun<'_>,
        count: usize,
        mut split: Option<&mut dyn FnMut(&mut S)>,
    ) {
        let RecordedRun {
            addr,
            sp,
            info,
            record,
            words,
        } = run;
        self.block(sink, thread, addr, sp);
        let decoded = info.instructions.iter().zip(record.decoded()).take(count);
        for (index, (&(at, len), decoded)) in decoded.enumerate() {
            if index + 1 == count {
                if let Some(split) = split.take() {
                    split(sink);
                }
            }
            sink.instruction(thread, at, len);
            let Some(sources) = record.sources_at(index) else {
                continue;
            };
            let recorded = Recorded { words, sources };
            let pass = decoded.rep.map(|rep| Pass {
                iteration: recorded.iteration(),
                condition_held: rep.while_zero_flag == Some(recorded.zero_flag()),
            });
            let next = at.wrapping_add(u64::from(len));
            let instruction = InstructionAt { at, decoded };
            self.executed(sink, thread, instruction, pass, next, &recorded);
        }
        self.instructions += count as u64;
        self.previous = match (count == info.instructions.len(), count.checked_sub(1)) {
            (false, Some(last)) => {
                let at = info.instructions[last].0;
                record
                    .decoded_at(last)
                    .map(|decoded| ExitRule::of(decoded.end(at), count as u32))
            }
            _ => Some(info.exit),
        };
    }
}

/// The run counts of a thread's area and the records of its buffer in a
/// run without simulations, as the whole blocks they stand for
/// ([`EventSink::blocks_executed`]): first each counted translation once
/// with its runs as repeats (no stack pointer, arriving by falling
/// through: `RunOptions::counts_only`), then the records, up to a record
/// kept for the backend; the first error ends them.
pub struct WholeBlocks<'a> {
    /// The runs of each translation, by id.
    counts: &'a [u64],
    /// The next translation whose runs to report.
    counted: usize,
    words: &'a [u64],
    /// The next record's first word.
    at: usize,
    /// The end of a record left for the caller.
    kept: Option<usize>,
    /// Whether more records follow `words` (a record cut at its end is
    /// left for the next chunk).
    more: bool,
    cache: &'a Cache,
    replay: &'a mut Replay,
    error: Option<Error>,
    /// Records replayed and counted runs reported.
    records: u64,
    /// The last record, when it counts its runs (translation, stack
    /// pointer).
    open: Option<(u32, u64)>,
    /// The tracee's address of `words[0]` when the records name theirs
    /// ([`WholeBlock::record`]), else 0.
    base: u64,
}

impl<'a> WholeBlocks<'a> {
    /// Stops the blocks with `error`.
    #[cold]
    fn fail(&mut self, error: String) -> Option<WholeBlock<'static>> {
        self.error = Some(Error::Unexpected(error));
        None
    }

    /// Translation `id`, counted to have run `runs` times.
    fn counted_block(&mut self, id: usize, runs: u64) -> Option<WholeBlock<'a>> {
        let (Some(info), Ok(key)) = (self.cache.replay_info(id as u64), u32::try_from(id)) else {
            return self.fail(format!(
                "translate: a run count of unknown translation {id}"
            ));
        };
        let block = Block {
            addr: info.addr,
            sp: 0,
            arrival: Arrival::FallThrough,
        };
        self.replay.ran_again(runs, info.instructions.len());
        self.records += runs;
        let (key, accesses) = match self.replay.filtered {
            true => match filtered_key(id as u64, &info, &[]) {
                Some(filtered) => filtered,
                None => return self.fail(format!("translate: translation {id} beyond the keys")),
            },
            false => (key, &[][..]),
        };
        Some(WholeBlock {
            key,
            block,
            instructions: info.instructions,
            repeats: runs - 1,
            again: block,
            repeat: Repeat::Again,
            accesses,
            record: 0,
        })
    }
}

impl<'a> Iterator for WholeBlocks<'a> {
    type Item = WholeBlock<'a>;

    #[inline(always)]
    fn next(&mut self) -> Option<WholeBlock<'a>> {
        while let Some(&runs) = self.counts.get(self.counted) {
            let id = self.counted;
            self.counted += 1;
            if runs > 0 {
                return self.counted_block(id, runs);
            }
        }
        loop {
            let &id = self.words.get(self.at)?;
            if filter::is_record(id) {
                // Filter records go to the sink apart (`replay_chunk`).
                return None;
            }
            let (Some(info), Ok(key)) = (self.cache.replay_info(id), u32::try_from(id)) else {
                return self.fail(format!("translate: a record of unknown translation {id}"));
            };
            let end = self.at + (RECORD_HEADER / 8) as usize + info.words;
            // A timed system call is reported after its block, by the
            // caller.
            if self.kept == Some(end) || info.system_call.is_some() {
                return None;
            }
            let (Some(&runs), Some(&sp)) = (self.words.get(self.at + 1), self.words.get(end - 1))
            else {
                if self.more {
                    return None;
                }
                return self.fail("translate: a record past the cursor".into());
            };
            let runs = if info.repeats || info.counts_runs.is_some() {
                runs
            } else {
                1
            };
            let record = match self.base {
                0 => 0,
                base => base + 8 * self.at as u64,
            };
            self.at = end;
            if let Some(&next) = self.words.get(end) {
                self.cache.prefetch_replay(next);
            }
            self.records += 1;
            self.open = info.repeats.then_some((key, sp));
            if runs == 0 {
                continue;
            }
            let addr = info.addr;
            let count = info.instructions.len();
            let block = Block {
                addr,
                sp,
                arrival: self.replay.arrival(addr),
            };
            let again = Block {
                addr,
                sp,
                arrival: info.exit.arrival(addr),
            };
            self.replay.ran(info.exit, count);
            self.replay.ran_again(runs - 1, count);
            let (key, accesses) = match self.replay.filtered {
                true => {
                    let start = end - (RECORD_HEADER / 8) as usize - info.words + 1;
                    let words = self.words.get(start..end - 1).unwrap_or_default();
                    match filtered_key(id, &info, words) {
                        Some(filtered) => filtered,
                        None => {
                            return self
                                .fail(format!("translate: translation {id} beyond the keys"))
                        }
                    }
                }
                false => (key, &[][..]),
            };
            return Some(WholeBlock {
                key,
                block,
                instructions: info.instructions,
                repeats: runs - 1,
                again,
                repeat: info.counts_runs.unwrap_or(Repeat::Again),
                accesses,
                record,
            });
        }
    }
}

/// The records of a thread's buffer in a run that feeds simulations with
/// Callgrind's rules, as the whole blocks they stand for with their events
/// ([`EventSink::blocks_simulated`]), up to the first record of a block
/// without a plan (`plan`) or a record kept for the backend; the first
/// error ends them.
pub struct SimulatedBlocks<'a> {
    words: &'a [u64],
    /// The next record's first word.
    at: usize,
    /// The end of a record left for the caller.
    kept: Option<usize>,
    /// Whether more records follow `words` (see [`WholeBlocks`]).
    more: bool,
    cache: &'a Cache,
    replay: &'a mut Replay,
    error: Option<Error>,
    /// Records replayed.
    records: u64,
}

/// The runs that repeat a block right after it ran
/// ([`SimulatedBlocks::repeats`]): each arrives by the block's jump back
/// to itself, with the same stack pointer and the same key.
#[derive(Clone, Copy, Debug)]
pub struct Repeats<'a> {
    /// The first of them, with its words.
    first: SimulatedBlock<'a>,
    /// Their records, one after another.
    records: &'a [u64],
    /// Words of one record.
    stride: usize,
    /// Where the record after them starts.
    end: usize,
}

impl<'a> Repeats<'a> {
    /// How many there are (at least one).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.records.len() / self.stride
    }

    /// The instructions of their block.
    pub fn instructions(&self) -> &'a [(u64, u8)] {
        self.first.instructions
    }

    /// How each of them starts (the same for all).
    pub fn start(&self) -> Block {
        self.first.block
    }

    /// Calls `each` with each run, as [`SimulatedBlocks`] would return it:
    /// one block whose words change from call to call (cheaper than a copy
    /// of the whole block per run, see [`Repeats::runs`]).
    #[inline]
    pub fn for_each_run(&self, mut each: impl FnMut(&SimulatedBlock<'a>)) {
        let mut run = self.first;
        for record in self.records.chunks_exact(self.stride) {
            run.words = record_words(record);
            each(&run);
        }
    }

    /// Each run, as [`SimulatedBlocks`] would return it.
    pub fn runs(&self) -> impl Iterator<Item = SimulatedBlock<'a>> + 'a {
        let first = self.first;
        // A record: the id, the words, the stack pointer.
        self.records
            .chunks_exact(self.stride)
            .map(move |record| SimulatedBlock {
                words: record_words(record),
                ..first
            })
    }
}

impl<'a> SimulatedBlocks<'a> {
    /// The runs that repeat `run`, the block [`Iterator::next`] returned
    /// last, right after it, if any (a record kept for the backend is not
    /// one); they stay in the iterator until [`SimulatedBlocks::skip`].
    #[inline(always)]
    pub fn repeats(&self, run: &SimulatedBlock<'a>) -> Option<Repeats<'a>> {
        let (id, _) = of_key(run.key);
        if self.words.get(self.at) != Some(&id) {
            return None;
        }
        self.repeats_of(run, id)
    }

    /// [`SimulatedBlocks::repeats`] once the next record is of the same
    /// translation `id`.
    fn repeats_of(&self, run: &SimulatedBlock<'a>, id: u64) -> Option<Repeats<'a>> {
        let plan = self.cache.replay_info(id)?.plan?;
        let (_, last_pass) = of_key(run.key);
        let stride = run.words.len() + (RECORD_HEADER / 8) as usize;
        let mut end = self.at;
        while let Some(record) = self.words.get(end..end + stride) {
            let words = record_words(record);
            let repeats = record.first() == Some(&id)
                && record.last() == Some(&run.block.sp)
                && self.kept != Some(end + stride)
                && plan.run(words).1 == last_pass;
            if !repeats {
                break;
            }
            end += stride;
        }
        let records = self.words.get(self.at..end).filter(|r| !r.is_empty())?;
        Some(Repeats {
            first: SimulatedBlock {
                block: Block {
                    arrival: self.replay.arrival(run.block.addr),
                    ..run.block
                },
                words: record_words(records.get(..stride)?),
                ..*run
            },
            records,
            stride,
            end,
        })
    }

    /// Passes over `repeats` (from [`SimulatedBlocks::repeats`], with no
    /// [`Iterator::next`] since): the caller took care of them.
    pub fn skip(&mut self, repeats: &Repeats<'_>) {
        let runs = repeats.len();
        self.at = repeats.end;
        self.records += runs as u64;
        self.replay
            .ran_again(runs as u64, repeats.first.instructions.len());
    }
}

/// The words a record holds for its run: all but its first (the
/// translation id) and its last (the stack pointer).
fn record_words(record: &[u64]) -> &[u64] {
    record
        .get(1..record.len().saturating_sub(1))
        .unwrap_or_default()
}

/// The key of a run of translation `id` ([`SimulatedBlock::key`]): twice
/// the translation, plus one for a REP block's last pass, whose events
/// differ; `None` beyond the keys.
fn key_of(id: u64, last_pass: bool) -> Option<u32> {
    id.checked_mul(2)
        .and_then(|key| u32::try_from(key + u64::from(last_pass)).ok())
}

/// The translation and the REP pass of [`key_of`].
fn of_key(key: u32) -> (u64, bool) {
    (u64::from(key >> 1), key & 1 == 1)
}

impl<'a> Iterator for SimulatedBlocks<'a> {
    type Item = SimulatedBlock<'a>;

    #[inline(always)]
    fn next(&mut self) -> Option<SimulatedBlock<'a>> {
        let &id = self.words.get(self.at)?;
        let Some(info) = self.cache.replay_info(id) else {
            self.error = Some(Error::Unexpected(format!(
                "translate: a record of unknown translation {id}"
            )));
            return None;
        };
        // A timed system call is reported after its block, by the caller.
        let plan = info
            .plan
            .filter(|_| !info.repeats && info.system_call.is_none())?;
        let end = self.at + (RECORD_HEADER / 8) as usize + info.words;
        if self.kept == Some(end) {
            return None;
        }
        let (Some(words), Some(&sp)) = (
            self.words.get(self.at + 1..end - 1),
            self.words.get(end - 1),
        ) else {
            if !self.more {
                self.error = Some(Error::Unexpected(
                    "translate: a record past the cursor".into(),
                ));
            }
            return None;
        };
        let (run_plan, last_pass) = plan.run(words);
        let Some(key) = key_of(id, last_pass) else {
            self.error = Some(Error::Unexpected(format!(
                "translate: translation {id} beyond the keys of blocks"
            )));
            return None;
        };
        self.at = end;
        if let Some(&next) = self.words.get(end) {
            self.cache.prefetch_replay(next);
        }
        self.records += 1;
        let addr = info.addr;
        let block = Block {
            addr,
            sp,
            arrival: self.replay.arrival(addr),
        };
        self.replay.ran(info.exit, info.instructions.len());
        Some(SimulatedBlock {
            key,
            block,
            instructions: info.instructions,
            plan: run_plan,
            words,
            branches: self.replay.branches,
        })
    }
}

/// The records of a stopped thread: the buffer half the cursor of
/// `area` is in (its number) and the records' bytes in the tracee.
fn records_in(memory: &Memory, area: &Area) -> Result<(u64, Range<u64>)> {
    let cursor = memory.read_u64(area.at(CURSOR))?;
    let half = area.half_ending_at(cursor).ok_or_else(|| {
        Error::Unexpected(format!(
            "translate: record cursor {cursor:#x} outside the buffer"
        ))
    })?;
    Ok((half, area.buffer(half)..cursor))
}

/// [`drain`] for a thread that a signal interrupted in a run of a
/// translation (whose record is the buffer's last), as `interruption`
/// says: the records before that one are replayed, then
/// what ran of the interrupted block ([`Replay::interrupted_block`]), as
/// the step backend reports it. Returns how many records there were.
pub(super) fn drain_interrupted<S: EventSink + ?Sized>(
    memory: &Memory,
    cache: &Cache,
    area: &Area,
    mut to: Replaying<'_, S>,
    interruption: Interruption,
) -> Result<u64> {
    let settled = settle_pending(memory, cache, area, to.reborrow())?;
    let Interruption { id, executed, .. } = interruption;
    let unknown = || Error::Unexpected(format!("translate: no translation {id}"));
    let info = cache.replay_info(u64::from(id)).ok_or_else(unknown)?;
    let record = cache.record_info(u64::from(id)).ok_or_else(unknown)?;
    let (_, records) = records_in(memory, area)?;
    let size = RECORD_HEADER + 8 * info.words as u64;
    let start = records
        .end
        .checked_sub(size)
        .filter(|&start| start >= records.start);
    let mut words = vec![0u64; (size / 8) as usize];
    let found = match start {
        Some(start) => {
            let mut bytes = vec![0u8; size as usize];
            memory.read(start, &mut bytes)?;
            for (word, chunk) in words.iter_mut().zip(bytes.chunks_exact(8)) {
                let mut le = [0u8; 8];
                le.copy_from_slice(chunk);
                *word = u64::from_le_bytes(le);
            }
            words.first() == Some(&u64::from(id))
        }
        None => false,
    };
    let Some(start) = start.filter(|_| found) else {
        // Not the last record (it went with a full half): the whole block
        // was reported.
        return Ok(settled + drain(memory, cache, area, to, None)?);
    };
    memory.write_u64(area.at(CURSOR), start)?;
    let drained = drain(memory, cache, area, to.reborrow(), None)?;
    let sp = words.last().copied().unwrap_or_default();
    let run = RecordedRun {
        addr: info.addr,
        sp,
        info: &info,
        record,
        words: record_words(&words),
    };
    to.replay
        .interrupted_block(to.sink, to.thread, run, executed);
    Ok(settled + drained + 1)
}

/// Replays the records in `area`'s buffer as `to`'s thread's and empties
/// the buffer; returns how many records there were. With `split`,
/// calls it before the last instruction of the last record (a `fork`
/// system call: the step backend reports the child's creation before the
/// call completes in the parent), or after all records when there is none.
pub(super) fn drain<S: EventSink + ?Sized>(
    memory: &Memory,
    cache: &Cache,
    area: &Area,
    mut to: Replaying<'_, S>,
    split: Option<&mut dyn FnMut(&mut S)>,
) -> Result<u64> {
    let settled = settle_pending(memory, cache, area, to.reborrow())?;
    Ok(settled + drain_records(memory, cache, area, to, split)?)
}

/// Settles the pending call of `area`'s thread (`pending::settle`): its
/// records appended to the buffer, at the cursor when the half has room
/// for them, else after the half's records are replayed (`to`), in the
/// emptied buffer. Returns how many records were replayed.
fn settle_pending<S: EventSink + ?Sized>(
    memory: &Memory,
    cache: &Cache,
    area: &Area,
    to: Replaying<'_, S>,
) -> Result<u64> {
    let words = pending::settle(memory, area)?;
    if words.is_empty() {
        return Ok(0);
    }
    let (half, records) = records_in(memory, area)?;
    let room = records.end + 8 * words.len() as u64 <= area.guard(half);
    let replayed = match room {
        true => 0,
        false => drain_records(memory, cache, area, to, None)?,
    };
    append(memory, area, &words)?;
    Ok(replayed)
}

/// Appends the records `words` at the cursor of `area`'s buffer (which
/// has room for them) and moves the cursor past them.
fn append(memory: &Memory, area: &Area, words: &[u64]) -> Result<()> {
    let cursor = memory.read_u64(area.at(CURSOR))?;
    memory.write(cursor, bytemuck::cast_slice(words))?;
    memory.write_u64(area.at(CURSOR), cursor + 8 * words.len() as u64)
}

/// [`drain`] once the pending call is settled: with filter records that
/// name their run, those first ([`drain_filter_records`]); with `split`,
/// those of the run in the `RECORD` slot (the block making the system
/// call) in order with it, before `split` but for the fetch of its last
/// instruction, after.
fn drain_records<S: EventSink + ?Sized>(
    memory: &Memory,
    cache: &Cache,
    area: &Area,
    mut to: Replaying<'_, S>,
    split: Option<&mut dyn FnMut(&mut S)>,
) -> Result<u64> {
    if !to.replay.attributed {
        return drain_blocks(memory, cache, area, to, split);
    }
    let Some(split) = split else {
        drain_filter_records(memory, cache, area, to.reborrow(), None)?;
        return drain_blocks(memory, cache, area, to, None);
    };
    let running = memory.read_u64(area.at(RECORD))?;
    let kept = drain_filter_records(memory, cache, area, to.reborrow(), Some(running))?;
    // The running block's last instruction (a record's first word is its
    // translation).
    let last = memory
        .read_u64(running)
        .ok()
        .and_then(|id| cache.replay_info(id))
        .and_then(|info| info.instructions.last().copied());
    let fetched_last =
        |access: &FilteredAccess| access.access.is_none() && Some(access.instruction) == last;
    let at = match kept.last() {
        Some(access) if fetched_last(access) => kept.len() - 1,
        _ => kept.len(),
    };
    let (before, after) = kept.split_at(at);
    let thread = to.thread;
    let mut in_order = move |sink: &mut S| {
        sink.accesses_filtered(thread, &mut FilteredAccesses::listed(before));
        split(sink);
    };
    let records = drain_blocks(memory, cache, area, to.reborrow(), Some(&mut in_order))?;
    to.sink
        .accesses_filtered(thread, &mut FilteredAccesses::listed(after));
    Ok(records)
}

/// The filter records of `area`'s thread that name their run (with quiet
/// runs), replayed ([`replay_filter_records`]); their buffer is then
/// empty.
fn drain_filter_records<S: EventSink + ?Sized>(
    memory: &Memory,
    cache: &Cache,
    area: &Area,
    to: Replaying<'_, S>,
    kept: Option<u64>,
) -> Result<Vec<FilteredAccess>> {
    let (_, filtered) = area.filter_records(memory)?;
    area.start_filter_half(memory, 0)?;
    replay_filter_records(memory, cache, area, filtered, to, kept)
}

/// The filter records in the tracee's bytes `filtered`, which name their
/// run, reported to `to`'s sink ([`EventSink::accesses_filtered`]: a run
/// in `area`'s buffer named, else 0) but those of run `kept`, returned in
/// order, naming none (reported with it).
pub(super) fn replay_filter_records<S: EventSink + ?Sized>(
    memory: &Memory,
    cache: &Cache,
    area: &Area,
    filtered: Range<u64>,
    to: Replaying<'_, S>,
    kept: Option<u64>,
) -> Result<Vec<FilteredAccess>> {
    let Replaying {
        replay,
        sink,
        thread,
    } = to;
    if filtered.is_empty() {
        return Ok(Vec::new());
    }
    let mut words = std::mem::take(&mut replay.filter_words);
    words.clear();
    words.resize(
        (filtered.end.saturating_sub(filtered.start) / 8) as usize,
        0,
    );
    memory.read_bulk(filtered.start, bytemuck::cast_slice_mut(&mut words))?;
    let after_blocks = std::mem::take(&mut replay.blocks_since_filtered);
    let mut accesses = FilteredAccesses::named(&words, area.whole_buffer(), after_blocks, cache);
    let mut with_kept = Vec::new();
    match kept {
        None => {
            sink.accesses_filtered(thread, &mut accesses);
            for _ in &mut accesses {}
            // The words are kept for the next drain.
            drop(accesses);
        }
        Some(run) => {
            let (own, others): (Vec<_>, Vec<_>) = accesses.partition(|access| access.record == run);
            let mut others = FilteredAccesses::listed(&others);
            others.after_blocks = after_blocks;
            sink.accesses_filtered(thread, &mut others);
            with_kept = own
                .into_iter()
                .map(|access| FilteredAccess {
                    record: 0,
                    ..access
                })
                .collect();
        }
    }
    replay.filter_words = words;
    Ok(with_kept)
}

/// [`drain_records`] of the blocks' buffer.
fn drain_blocks<S: EventSink + ?Sized>(
    memory: &Memory,
    cache: &Cache,
    area: &Area,
    mut to: Replaying<'_, S>,
    split: Option<&mut dyn FnMut(&mut S)>,
) -> Result<u64> {
    let (_, records) = records_in(memory, area)?;
    let mut counts = std::mem::take(&mut to.replay.counts);
    counts.clear();
    if to.replay.counts_only && !area.take_counts(memory, cache.translations(), &mut counts)? {
        counts.clear();
    }
    let replayed = replay_records(memory, cache, records, &counts, to.reborrow(), split);
    to.replay.counts = counts;
    let (records, open) = replayed?;
    area.reset(memory)?;
    if let Some((id, sp)) = open {
        // The thread may be inside that block: its runs go on being
        // counted in a new record.
        area.open_record(memory, id, sp)?;
    }
    Ok(records)
}

/// What a stopped thread hands off ([`hand_off`]): the tracee's bytes of
/// the full half's records, and of the filter records that name their run
/// (to be replayed first, [`replay_filter_records`]).
#[derive(Clone, Debug)]
pub(super) struct HandedOff {
    pub records: Range<u64>,
    pub filtered: Range<u64>,
    /// The buffer half the thread's records go to now (none: only its
    /// filter records were handed off).
    pub filling: Option<u64>,
}

/// A stopped thread's buffer half is full, and the thread is at the
/// prologue of a block: its records go on in the other half (its filter
/// records that name their run too), and the full half's records are
/// returned, to be replayed with [`replay_records`] while the thread runs
/// (nothing writes them then). The last of them is a finished block's
/// (the thread is entering another), so no record is left open.
pub(super) fn hand_off(memory: &Memory, area: &Area) -> Result<HandedOff> {
    let pending = pending::settle(memory, area)?;
    let (half, records) = records_in(memory, area)?;
    area.start_half(memory, 1 - half)?;
    // The pending call's records come first in the other half.
    append(memory, area, &pending)?;
    let filtered = hand_off_filter_records(memory, area)?;
    Ok(HandedOff {
        records,
        filtered,
        filling: Some(1 - half),
    })
}

/// A stopped thread's half of filter records that name their run is full:
/// they go on in the other half, and the full one's bytes are returned,
/// to be replayed with [`replay_filter_records`] while the thread runs.
pub(super) fn hand_off_filter_records(memory: &Memory, area: &Area) -> Result<Range<u64>> {
    let (half, filtered) = area.filter_records(memory)?;
    area.start_filter_half(memory, 1 - half)?;
    Ok(filtered)
}

/// The last record replayed, when it counts its runs: its translation and
/// stack pointer.
type OpenRecord = Option<(u32, u64)>;

/// The bytes of records read and replayed at a time: a chunk stays in
/// the processor's cache from its read to its replay.
pub(super) const CHUNK_BYTES: u64 = 256 << 10;

/// The run `counts` of translations and the records in the tracee's bytes
/// `records` of a buffer, replayed as `to`'s thread's (see [`drain`] for
/// `split`): how many records and counted runs there were, and the
/// last record if it counts its runs (translation, stack pointer).
pub(super) fn replay_records<S: EventSink + ?Sized>(
    memory: &Memory,
    cache: &Cache,
    records: Range<u64>,
    counts: &[u64],
    to: Replaying<'_, S>,
    mut split: Option<&mut dyn FnMut(&mut S)>,
) -> Result<(u64, OpenRecord)> {
    let Replaying {
        replay,
        sink,
        thread,
    } = to;
    // A split hands the simulation to a child mid-drain: not ahead; nor
    // a drain of one chunk, which the two threads would replay in turn.
    let chunks = records
        .end
        .saturating_sub(records.start)
        .div_ceil(CHUNK_BYTES);
    if split.is_none() && counts.is_empty() && replay.replays_ahead() && chunks > 1 {
        if let Some(ahead) = sink.ahead(thread) {
            let to = Replaying {
                replay: &mut *replay,
                sink: &mut *sink,
                thread,
            };
            let replayed = super::ahead::replay_ahead(memory, cache, records, to, ahead);
            return replayed.map(|records| (records, None));
        }
    }
    replay.begin_records();
    let mut left = records.start..records.end.max(records.start);
    let (mut counts, mut replayed, mut open) = (counts, 0, None);
    loop {
        let to = Replaying {
            replay: &mut *replay,
            sink: &mut *sink,
            thread,
        };
        let (records, last) = replay_next_chunk(memory, cache, &mut left, counts, to, &mut split)?;
        if records > 0 {
            (replayed, open) = (replayed + records, last);
        }
        counts = &[];
        if left.is_empty() {
            break;
        }
    }
    replay.end_records(!records.is_empty());
    if let Some(split) = split {
        split(sink);
    }
    Ok((replayed, open))
}

/// Replays the next chunk of the records in the tracee's bytes `left` (at
/// most [`CHUNK_BYTES`], after what the chunk before left of a record cut
/// short, held in the thread's replay), the run `counts` first, as `to`'s
/// thread's; `left` then starts after it. How many records and counted
/// runs there were, and the last record if it counts its runs. The first
/// chunk of a buffer's records goes after an empty `Replay::words`.
pub(super) fn replay_next_chunk<S: EventSink + ?Sized>(
    memory: &Memory,
    cache: &Cache,
    left: &mut Range<u64>,
    counts: &[u64],
    to: Replaying<'_, S>,
    split: &mut Option<&mut dyn FnMut(&mut S)>,
) -> Result<(u64, OpenRecord)> {
    let Replaying {
        replay,
        sink,
        thread,
    } = to;
    // The words are read in place: the tracee's byte order is the tracer's.
    let mut words = std::mem::take(&mut replay.words);
    let next = left.start;
    let bytes = (left.end.saturating_sub(next)).min(CHUNK_BYTES);
    let held = words.len();
    words.resize(held + (bytes / 8) as usize, 0);
    memory.read_bulk(next, bytemuck::cast_slice_mut(&mut words[held..]))?;
    // Where `words` start in the tracee, when runs are named.
    let base = match replay.attributed {
        true => next - 8 * held as u64,
        false => 0,
    };
    left.start = next + bytes;
    let more = !left.is_empty();
    let to = Replaying {
        replay: &mut *replay,
        sink,
        thread,
    };
    let (at, records, last) = replay_words(cache, &words, base, counts, more, to, split)?;
    words.drain(..at);
    replay.words = words;
    Ok((records, last))
}

/// [`replay_records`] of one chunk, as `to`'s thread's: the records in
/// `words` (the run `counts` first), the last one cut short when `more`
/// follow; where the
/// records left for the next chunk start, how many there were, and the
/// last if it counts its runs.
pub(super) fn replay_chunk<S: EventSink + ?Sized>(
    cache: &Cache,
    words: &[u64],
    counts: &[u64],
    more: bool,
    to: Replaying<'_, S>,
    split: &mut Option<&mut dyn FnMut(&mut S)>,
) -> Result<(usize, u64, OpenRecord)> {
    replay_words(cache, words, 0, counts, more, to, split)
}

/// [`replay_chunk`] of `words` at `base` in the tracee (0: not said, see
/// [`WholeBlock::record`]).
fn replay_words<S: EventSink + ?Sized>(
    cache: &Cache,
    words: &[u64],
    base: u64,
    counts: &[u64],
    more: bool,
    to: Replaying<'_, S>,
    split: &mut Option<&mut dyn FnMut(&mut S)>,
) -> Result<(usize, u64, OpenRecord)> {
    let Replaying {
        replay,
        sink,
        thread,
    } = to;
    let header = (RECORD_HEADER / 8) as usize;
    let mut at = 0;
    let mut records = 0;
    let mut open = None;
    // A record cut at the end of a chunk waits for the next.
    // With a filter, the fetch of the `syscall` may follow its block's
    // record (`translator`).
    let trailing = match replay.filtered && words.len() >= 2 {
        true => 2 * usize::from(filter::is_record(words[words.len() - 2])),
        false => 0,
    };
    let kept = (split.is_some() && !more).then_some(words.len() - trailing);
    let mut counts = counts;
    loop {
        if !replay.simulations || replay.filtered {
            // All records up to one kept for `split` or a timed system
            // call go to the sink in one call.
            let mut blocks = WholeBlocks {
                counts,
                counted: 0,
                words,
                at,
                kept,
                more,
                cache,
                replay: &mut *replay,
                error: None,
                records: 0,
                open: None,
                base,
            };
            sink.blocks_executed(thread, &mut blocks);
            // What the sink did not take goes one block at a time.
            for whole in &mut blocks {
                for block in whole.starts() {
                    sink.block_executed(thread, block, whole.instructions);
                }
            }
            if let Some(error) = blocks.error {
                return Err(error);
            }
            counts = &[];
            if blocks.records > 0 {
                (at, records, open) = (blocks.at, records + blocks.records, blocks.open);
            }
        }
        let Some(&id) = words.get(at) else {
            break;
        };
        if filter::is_record(id) {
            let mut accesses =
                FilteredAccesses::of_records(words.get(at..).unwrap_or_default(), cache);
            sink.accesses_filtered(thread, &mut accesses);
            // What the sink did not take.
            for _ in &mut accesses {}
            let taken = accesses.words_read();
            if taken == 0 {
                // Cut at the chunk's end.
                if more {
                    break;
                }
                return Err(Error::Unexpected(
                    "translate: a filter record past the cursor".into(),
                ));
            }
            at += taken;
            records += (taken / 2) as u64;
            continue;
        }
        // A plan follows Callgrind's rules, which give Cachegrind's data
        // accesses but not its branches.
        if replay.simulations && !replay.filtered && (!replay.cachegrind || !replay.branches) {
            // The records of planned blocks go to the sink in one call;
            // the others, and one kept for `split`, are replayed below.
            let mut blocks = SimulatedBlocks {
                words,
                at,
                kept,
                more,
                cache,
                replay,
                error: None,
                records: 0,
            };
            sink.blocks_simulated(thread, &mut blocks);
            if let Some(error) = blocks.error {
                return Err(error);
            }
            if blocks.records > 0 {
                (at, records, open) = (blocks.at, records + blocks.records, None);
                continue;
            }
        }
        let info = cache.replay_info(id).ok_or_else(|| {
            Error::Unexpected(format!("translate: a record of unknown translation {id}"))
        })?;
        let end = at + header + info.words;
        let (Some(recorded), Some(&sp)) = (words.get(at + 1..end - 1), words.get(end - 1)) else {
            if more {
                break;
            }
            return Err(Error::Unexpected(
                "translate: a record past the cursor".into(),
            ));
        };
        let last = if kept == Some(end) {
            split.take()
        } else {
            None
        };
        if replay.simulations {
            let record = cache.record_info(id).ok_or_else(|| {
                Error::Unexpected(format!("translate: a record of unknown translation {id}"))
            })?;
            let run = RecordedRun {
                addr: info.addr,
                sp,
                info: &info,
                record,
                words: recorded,
            };
            replay.recorded_block(sink, thread, run, last);
        } else {
            let runs = match (info.repeats || info.counts_runs.is_some(), recorded.first()) {
                (true, Some(&runs)) => runs,
                _ => 1,
            };
            let mut last = last;
            for run in 1..=runs {
                let split = if run == runs { last.take() } else { None };
                replay.whole_block(sink, thread, &info, sp, split);
            }
            *split = split.take().or(last);
        }
        if let Some(words) = info.system_call {
            let call = words.read(recorded);
            if crate::system_time::reported(call.number) {
                sink.system_call(thread, call);
            }
        }
        open = u32::try_from(id)
            .ok()
            .filter(|_| info.repeats)
            .map(|id| (id, sp));
        at = end;
        records += 1;
    }
    Ok((at, records, open))
}

/// With a filter, the key of a run of translation `info` whose record
/// holds `words` ([`SimulatedBlock::key`]'s: a REP block's last pass has
/// its own) and the data accesses of such a run; `None` beyond the keys.
fn filtered_key<'a>(
    id: u64,
    info: &ReplayInfo<'a>,
    words: &[u64],
) -> Option<(u32, &'a [crate::translate::PlannedAccess])> {
    let Some(plan) = info.plan else {
        return Some((key_of(id, false)?, &[]));
    };
    let (run, last_pass) = plan.run(words);
    Some((key_of(id, last_pass)?, &run.accesses))
}

/// The fetches and data accesses that missed I1 or D1
/// (`RunOptions::filter`), in the order they ran
/// ([`EventSink::accesses_filtered`]): read from filter records (each
/// says all it stands for, `filter::tag`), or those of a stepped
/// instruction.
pub struct FilteredAccesses<'a> {
    from: Unfiltered<'a>,
    /// See [`FilteredAccesses::after_blocks`].
    after_blocks: bool,
    /// The process's first-level caches, when the tracer keeps them:
    /// the records it is to take through them go, and only their misses
    /// come out (`filter::SharedLevel`).
    first_level: Option<MutexGuard<'a, Kept>>,
}

/// Where [`FilteredAccesses`] come from.
enum Unfiltered<'a> {
    /// The filter records at the start of `words` (two words each: the
    /// tag, the address), up to the first other record or a record cut
    /// at the end.
    Records { words: &'a [u64], at: usize },
    /// The filter records of `words` from `at`, which name their run's
    /// record ([`FilteredAccesses::named`]).
    Named {
        words: &'a [u64],
        at: usize,
        records: Range<u64>,
    },
    /// A stepped instruction's.
    Listed(std::slice::Iter<'a, FilteredAccess>),
}

impl<'a> FilteredAccesses<'a> {
    /// Those of the filter records at the start of `words`, of a process
    /// whose translations `cache` has.
    fn of_records(words: &'a [u64], cache: &'a Cache) -> FilteredAccesses<'a> {
        FilteredAccesses {
            from: Unfiltered::Records { words, at: 0 },
            after_blocks: false,
            first_level: Some(cache.first_level.kept()),
        }
    }

    /// With quiet runs, whether blocks were reported since the last
    /// filtered accesses that named runs: the runs of all those named
    /// before these were reported then (a run named and not met, one of a
    /// record with no run left, goes where the thread was), and these may
    /// name records at the same places again.
    pub fn after_blocks(&self) -> bool {
        self.after_blocks
    }

    /// Those of the filter records `words` that name the record of their
    /// run (`filter::RECORD_WORDS`): the record named when it is in
    /// `records` (the tracee's addresses of the blocks' buffer), else 0.
    fn named(
        words: &'a [u64],
        records: Range<u64>,
        after_blocks: bool,
        cache: &'a Cache,
    ) -> FilteredAccesses<'a> {
        FilteredAccesses {
            from: Unfiltered::Named {
                words,
                at: 0,
                records,
            },
            after_blocks,
            first_level: Some(cache.first_level.kept()),
        }
    }

    /// Those listed.
    fn listed(accesses: &'a [FilteredAccess]) -> FilteredAccesses<'a> {
        FilteredAccesses {
            from: Unfiltered::Listed(accesses.iter()),
            after_blocks: false,
            first_level: None,
        }
    }

    /// Whether the access of a record (its tag `tag`) missed its cache:
    /// in the program's threads, or in the tracer's caches when the
    /// record is for them ([`filter::in_tracer`]).
    #[inline]
    fn missed(&mut self, tag: u64, access: &FilteredAccess) -> bool {
        if !filter::in_tracer(tag) {
            return true;
        }
        let caches = self.first_level.as_mut().and_then(|kept| kept.caches());
        caches.is_none_or(|caches| caches.misses(access))
    }

    /// The words of the records read so far.
    fn words_read(&self) -> usize {
        match &self.from {
            Unfiltered::Records { at, .. } | Unfiltered::Named { at, .. } => *at,
            Unfiltered::Listed(_) => 0,
        }
    }
}

impl Iterator for FilteredAccesses<'_> {
    type Item = FilteredAccess;

    #[inline]
    fn next(&mut self) -> Option<FilteredAccess> {
        loop {
            let (tag, access) = match &mut self.from {
                Unfiltered::Listed(listed) => return listed.next().copied(),
                Unfiltered::Records { words, at } => {
                    let (&tag, &addr) = (words.get(*at)?, words.get(*at + 1)?);
                    if !filter::is_record(tag) {
                        return None;
                    }
                    *at += 2;
                    (tag, filter::of_record(tag, addr, 0))
                }
                Unfiltered::Named { words, at, records } => {
                    let (&tag, &addr, &record) =
                        (words.get(*at)?, words.get(*at + 1)?, words.get(*at + 2)?);
                    *at += filter::RECORD_WORDS;
                    let record = if records.contains(&record) { record } else { 0 };
                    (tag, filter::of_record(tag, addr, record))
                }
            };
            if self.missed(tag, &access) {
                return Some(access);
            }
        }
    }
}

/// A sink that notes the data accesses reported to the one it wraps.
struct Noting<'a, S: ?Sized> {
    sink: &'a mut S,
    accesses: &'a mut Vec<DataAccess>,
}

impl<S: EventSink + ?Sized> EventSink for Noting<'_, S> {
    type Ahead = NoAhead;

    fn block(&mut self, thread: Thread, block: Block) {
        self.sink.block(thread, block);
    }

    fn instruction(&mut self, thread: Thread, addr: u64, len: u8) {
        self.sink.instruction(thread, addr, len);
    }

    fn instruction_event(&mut self, thread: Thread, addr: u64, event: BlockEvent) {
        if let BlockEvent::Access(access) = event {
            self.accesses.push(access);
        }
        self.sink.instruction_event(thread, addr, event);
    }
}

#[cfg(test)]
mod tests {
    use super::ChunkBuffers;

    #[test]
    fn a_copy_of_a_replay_starts_without_chunk_buffers() {
        let buffers = ChunkBuffers(vec![vec![0; 4], vec![0; 4]]);
        assert!(buffers.clone().0.is_empty());
        assert_eq!(buffers.0.len(), 2);
    }
}
