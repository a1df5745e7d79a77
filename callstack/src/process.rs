//! One traced process: its symbols, functions, threads and cost tables, and
//! the client requests that control collection.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use cgx_backdate::{Forest, Statistics};
use cgx_engine::symbols::Symbols;
use cgx_engine::{Arrival, Block, BlockEvent, DataAccess, Repeats, SimulatedBlocks, WholeBlocks};
use cgx_formats::{Names, Part, TooManyNames};
use rustc_hash::FxHashMap;

use crate::ahead::{self, Behind, SimulationAhead, StepReport};
use crate::attribution::{Charged, OwnRun, RecentSlots};
use crate::cacheuse::Owners;
use crate::context::{Centre, Contexts, CxtId};
use crate::control::{Control, Status, ThreadStatus};
use crate::costs::{ArcKey, Costs, Profile};
use crate::dump::{build_part, Naming, PartInfo};
use crate::events::{EventSet, MAX_EVENTS};
use crate::functions::{FnId, Functions};
use crate::keys::EveryRun;
use crate::keys::Keys;
use crate::sequences::Sequences;
use crate::simulation::{Counts, FetchPoint, RunSink, Simulation, Step};
use crate::thread::{add_into, RunsAgain, Shared, ThreadState, Trigger};
use crate::Options;

/// Callgrind's client requests (`callgrind.h`), Cachegrind's, and the core's
/// `RUNNING_ON_VALGRIND`.
mod request {
    pub const DUMP_STATS: u64 = 0x4354_0000;
    pub const ZERO_STATS: u64 = 0x4354_0001;
    pub const TOGGLE_COLLECT: u64 = 0x4354_0002;
    pub const DUMP_STATS_AT: u64 = 0x4354_0003;
    pub const START_INSTRUMENTATION: u64 = 0x4354_0004;
    pub const STOP_INSTRUMENTATION: u64 = 0x4354_0005;
    pub const CACHEGRIND_START_INSTRUMENTATION: u64 = 0x4347_0000;
    pub const CACHEGRIND_STOP_INSTRUMENTATION: u64 = 0x4347_0001;
    pub const RUNNING_ON_VALGRIND: u64 = 0x1001;
}

/// A finished part of a process's profile, before it becomes a file.
pub(crate) struct FinishedPart {
    /// The part; its names are the process's ([`Process::names`]).
    pub part: Part,
    /// The thread number with `--separate-threads=yes`.
    pub thread: Option<u32>,
    /// Whether the program asked for it (a client request), not its end.
    pub requested: bool,
}

/// Why a process's profile is dumped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dumped {
    /// The program asked, from thread `tid` (a client request): a numbered
    /// dump, with `--separate-threads=yes` of that thread only.
    Requested(i32),
    /// A request from outside the run (live control), or `--dump-every-bb`:
    /// a numbered dump of every thread.
    AllThreads,
    /// The process ends.
    Final,
}

/// The collector's state for one process.
pub(crate) struct Process {
    pid: i32,
    options: Arc<Options>,
    events: Arc<EventSet>,
    simulation: Simulation,
    /// While the simulation runs ahead during a drain (`simulation` is
    /// then [`Simulation::detached`]): the reports of its steps.
    behind: Option<Behind>,
    /// The fetches of each block's runs by key, for the simulation ahead.
    ahead_fetch_points: Vec<Option<Box<[FetchPoint]>>>,
    /// The back-dating forest, with `--cacheuse=yes`.
    forest: Option<Forest<ArcKey>>,
    /// The owners of cache lines, with `--cacheuse=yes`.
    owners: Owners,
    /// With Cachegrind's attribution: where the last instruction was
    /// charged, for the events that follow it.
    last_charged: Option<Charged>,
    /// With Cachegrind's attribution: where recent instructions were
    /// charged.
    recent_slots: RecentSlots,
    /// With Cachegrind's attribution and simulation: what every run of a
    /// block charges, by block key.
    own_runs: Vec<Option<Box<OwnRun>>>,
    /// With Cachegrind's attribution: each function's context.
    own_contexts: FxHashMap<FnId, CxtId>,
    /// With Cachegrind's attribution: the whole blocks run.
    sequences: Sequences,
    symbols: Symbols,
    /// The names of every part made so far.
    names: Names,
    functions: Functions,
    /// The blocks of a block-based backend, by key.
    keys: Keys,
    contexts: Contexts,
    /// All threads' costs, or (with `--separate-threads`) costs per thread
    /// number.
    costs: BTreeMap<u32, Costs>,
    threads: BTreeMap<i32, ThreadState>,
    /// Costs since the last dump of threads that ended.
    ended_threads_cost: BTreeMap<u32, Vec<u64>>,
    next_thread_number: u32,
    instrumenting: bool,
    /// Whether the program asked to toggle collection.
    collect_toggled: bool,
    /// Blocks executed so far, and at the last dump (`desc: Timerange`).
    blocks: u64,
    blocks_at_dump: u64,
    /// The block count at the last dump `--dump-every-bb` made.
    blocks_at_every_bb_dump: u64,
    /// The dumps functions asked for, not yet taken.
    finished: Vec<Result<Vec<FinishedPart>, TooManyNames>>,
    /// Whether it is a copy another process forked.
    pub forked: bool,
    /// Parts dumped so far.
    parts_dumped: u32,
}

impl Process {
    /// A new process (the first one, or one after `execve`).
    pub fn new(
        pid: i32,
        options: Arc<Options>,
        events: Arc<EventSet>,
        simulation: Simulation,
    ) -> Process {
        let instrumenting = options.instr_atstart;
        let forest =
            (events.cacheuse.is_some() && options.cacheuse_inclusive).then(|| Forest::new(4));
        Process {
            pid,
            options,
            events,
            simulation,
            behind: None,
            ahead_fetch_points: Vec::new(),
            forest,
            owners: Owners::default(),
            last_charged: None,
            recent_slots: RecentSlots::default(),
            own_runs: Vec::new(),
            own_contexts: FxHashMap::default(),
            sequences: Sequences::default(),
            symbols: Symbols::new(),
            names: Names::default(),
            functions: Functions::default(),
            keys: Keys::default(),
            contexts: Contexts::default(),
            costs: BTreeMap::new(),
            threads: BTreeMap::new(),
            ended_threads_cost: BTreeMap::new(),
            next_thread_number: 1,
            instrumenting,
            collect_toggled: false,
            blocks: 0,
            blocks_at_dump: 0,
            blocks_at_every_bb_dump: 0,
            finished: Vec::new(),
            forked: false,
            parts_dumped: 0,
        }
    }

    /// The child of a fork: a copy of this process with only the forking
    /// thread, which becomes the child's thread `child_pid`.
    pub fn fork(&self, parent_tid: i32, child_pid: i32) -> Process {
        let mut threads = BTreeMap::new();
        if let Some(thread) = self.threads.get(&parent_tid) {
            threads.insert(child_pid, thread.clone());
        }
        Process {
            pid: child_pid,
            options: self.options.clone(),
            events: self.events.clone(),
            simulation: self.simulation.clone(),
            behind: None,
            ahead_fetch_points: Vec::new(),
            forest: self.forest.clone(),
            owners: self.owners.clone(),
            last_charged: None,
            recent_slots: RecentSlots::default(),
            own_runs: Vec::new(),
            own_contexts: self.own_contexts.clone(),
            sequences: self.sequences.clone(),
            symbols: Symbols::new(),
            names: self.names.clone(),
            functions: self.functions.clone(),
            keys: self.keys.clone(),
            contexts: self.contexts.clone(),
            costs: self.costs.clone(),
            threads,
            ended_threads_cost: self.ended_threads_cost.clone(),
            next_thread_number: self.next_thread_number,
            instrumenting: self.instrumenting,
            collect_toggled: self.collect_toggled,
            blocks: self.blocks,
            blocks_at_dump: self.blocks_at_dump,
            blocks_at_every_bb_dump: self.blocks_at_every_bb_dump,
            finished: Vec::new(),
            forked: true,
            parts_dumped: self.parts_dumped,
        }
    }

    fn thread(&mut self, tid: i32) -> &mut ThreadState {
        let Process {
            threads,
            next_thread_number,
            options,
            events,
            forest,
            ..
        } = self;
        threads
            .entry(tid)
            .or_insert_with(|| new_thread(next_thread_number, options, events, forest))
    }

    /// Runs `f` on thread `tid` with the process state it needs.
    fn with_thread<R>(
        &mut self,
        tid: i32,
        f: impl FnOnce(&mut ThreadState, &mut Shared<'_>) -> R,
    ) -> R {
        let result = self.with_thread_state(tid, f);
        if self.options.has_block_triggers() {
            self.serve_triggers(tid);
        }
        result
    }

    /// Makes the dumps and zeroings thread `tid` asked for entering or
    /// leaving functions (`--dump-before`, `--dump-after`,
    /// `--zero-before`), in order, then the dump `--dump-every-bb` asks
    /// for; the dumps' parts wait for [`Process::take_finished`].
    fn serve_triggers(&mut self, tid: i32) {
        self.serve_function_triggers(tid);
        let every = self.options.dump_every_bb;
        if every > 0 && self.blocks - self.blocks_at_every_bb_dump > every {
            // Callgrind checks between blocks, for all threads.
            let parts = self.dump(&format!("--dump-every-bb={every}"), Dumped::AllThreads);
            self.finished.push(parts);
            self.blocks_at_every_bb_dump = self.blocks;
        }
    }

    /// The function triggers of [`Process::serve_triggers`].
    fn serve_function_triggers(&mut self, tid: i32) {
        let Some(triggers) = self
            .threads
            .get_mut(&tid)
            .filter(|thread| thread.has_triggers())
            .map(ThreadState::take_triggers)
        else {
            return;
        };
        for trigger in triggers {
            match trigger {
                Trigger::Dump(trigger) => {
                    let parts = self.dump(&trigger, Dumped::Requested(tid));
                    self.finished.push(parts);
                }
                Trigger::Zero => self.zero(),
            }
        }
    }

    /// The dumps functions asked for since the last call
    /// ([`Process::serve_triggers`]).
    pub fn take_finished(&mut self) -> Vec<Result<Vec<FinishedPart>, TooManyNames>> {
        std::mem::take(&mut self.finished)
    }

    /// [`Process::with_thread`] without serving what it asks for.
    fn with_thread_state<R>(
        &mut self,
        tid: i32,
        f: impl FnOnce(&mut ThreadState, &mut Shared<'_>) -> R,
    ) -> R {
        let Process {
            threads,
            next_thread_number,
            functions,
            contexts,
            costs,
            options,
            events,
            forest,
            ..
        } = self;
        let key_of = |thread: &ThreadState| costs_key(options, thread.number);
        // The common case first: a known thread whose tables exist.
        if let Some(thread) = threads.get_mut(&tid) {
            let key = key_of(thread);
            if let Some(costs) = costs.get_mut(&key) {
                let mut shared = Shared {
                    functions,
                    contexts,
                    costs,
                    costs_key: key,
                    options,
                    events,
                    forest: forest.as_mut(),
                };
                return f(thread, &mut shared);
            }
        }
        let thread = threads
            .entry(tid)
            .or_insert_with(|| new_thread(next_thread_number, options, events, forest));
        let key = key_of(thread);
        let costs = costs.entry(key).or_default();
        let mut shared = Shared {
            functions,
            contexts,
            costs,
            costs_key: key,
            options,
            events,
            forest: forest.as_mut(),
        };
        f(thread, &mut shared)
    }

    /// The simulation, to run ahead of the collector during a drain (see
    /// [`crate::ahead`]); `None` when it may not: with nothing to simulate,
    /// while not instrumenting, or with the cache-use model when
    /// collection may change (`--toggle-collect`, a toggle requested).
    pub fn ahead(&mut self) -> Option<SimulationAhead> {
        let simulation = &self.simulation;
        let simulates = simulation.simulates_fetches() || simulation.simulates_branches();
        let collection_may_change = !self.options.toggle_collect.is_empty() || self.collect_toggled;
        if self.options.has_block_triggers() {
            // Blocks go one by one (see `Options::has_block_triggers`).
            return None;
        }
        if !self.instrumenting
            || (simulation.uses_cache_use() && collection_may_change)
            || !simulates
            || self.behind.is_some()
        {
            return None;
        }
        let detached = simulation.detached();
        let mut simulation = std::mem::replace(&mut self.simulation, detached);
        simulation.set_collect(self.options.collect_atstart);
        let fetch_points = std::mem::take(&mut self.ahead_fetch_points);
        let (ahead, behind) = ahead::split(simulation, fetch_points);
        self.behind = Some(behind);
        Some(ahead)
    }

    /// The simulation [`Process::ahead`] made, back after the drain;
    /// whether the collector took exactly the steps it ran.
    pub fn ahead_done(&mut self, ahead: SimulationAhead) -> bool {
        let in_step = self
            .behind
            .take()
            .is_some_and(|mut behind| behind.all_taken());
        (self.simulation, self.ahead_fetch_points) = ahead.into_parts();
        in_step
    }

    /// The names the parts of this process refer to.
    pub fn names(&self) -> &Names {
        &self.names
    }

    /// A block starts on thread `tid`.
    pub fn block(&mut self, tid: i32, block: Block) {
        if !self.instrumenting {
            return;
        }
        self.blocks += 1;
        if self.options.cachegrind {
            return;
        }
        let info = self
            .functions
            .block(block.addr, &mut self.symbols, self.pid, &self.options);
        self.with_thread(tid, |thread, shared| {
            thread.enter_block(shared, block.addr, block.sp, block.arrival, info);
        });
    }

    /// A whole block runs on thread `tid`: it starts and all of
    /// `instructions` execute, with no other event between them.
    pub fn block_executed(&mut self, tid: i32, block: Block, instructions: &[(u64, u8)]) {
        if self.options.cachegrind && !self.simulation.simulates_fetches() {
            self.block(tid, block);
            if self.instrumenting {
                self.count_sequence(tid, instructions);
            }
            return;
        }
        if self.options.cachegrind || self.simulation.simulates_fetches() {
            self.block(tid, block);
            self.instructions(tid, instructions);
            return;
        }
        if !self.instrumenting {
            return;
        }
        self.blocks += 1;
        let info = self
            .functions
            .block(block.addr, &mut self.symbols, self.pid, &self.options);
        self.with_thread(tid, |thread, shared| {
            thread.enter_block(shared, block.addr, block.sp, block.arrival, info);
            thread.instructions_ir(shared, instructions);
        });
    }

    /// Whole blocks run on thread `tid`, one after another: without
    /// simulation and Cachegrind's attribution, the thread and its tables
    /// are looked up once for all of them.
    pub fn blocks_executed(&mut self, tid: i32, blocks: &mut WholeBlocks<'_>) {
        if self.options.cachegrind && !self.simulation.simulates_fetches() {
            match self.instrumenting {
                true => self.count_sequences(tid, blocks),
                false => blocks.for_each(drop),
            }
            return;
        }
        let one_by_one = self.options.cachegrind
            || self.simulation.simulates_fetches()
            || !self.instrumenting
            || self.options.has_block_triggers();
        if one_by_one {
            for whole in blocks {
                for block in whole.starts() {
                    self.block_executed(tid, block, whole.instructions);
                }
            }
            return;
        }
        // Creates the thread and its tables when they are new.
        self.with_thread(tid, |_, _| ());
        let Process {
            pid,
            threads,
            functions,
            keys,
            symbols,
            contexts,
            costs,
            options,
            events,
            forest,
            blocks: blocks_run,
            ..
        } = self;
        let Some(thread) = threads.get_mut(&tid) else {
            return;
        };
        let costs_key = costs_key(options, thread.number);
        let Some(costs) = costs.get_mut(&costs_key) else {
            return;
        };
        for whole in blocks {
            *blocks_run += 1;
            // The block's address alone first: a copy of the whole `Block`
            // right away would be one wide load of what the iterator has
            // just stored in parts (a stall: the stores cannot forward).
            let (key, addr, instructions) = (whole.key, whole.block.addr, whole.instructions);
            let known = keys.get(key, addr, instructions.len(), || {
                functions.block(addr, symbols, *pid, options)
            });
            let mut shared = Shared {
                functions,
                contexts,
                costs,
                costs_key,
                options,
                events,
                forest: forest.as_mut(),
            };
            let table = &mut known.table;
            thread.whole_block_ir(&mut shared, whole.block, known.info, instructions, table);
            if whole.repeats > 0 {
                *blocks_run += whole.repeats;
                let runs = RunsAgain {
                    start: whole.again,
                    times: whole.repeats,
                };
                thread.whole_block_ir_again(&mut shared, runs, known.info, instructions, table);
            }
        }
    }

    /// Whole blocks run on thread `tid`, one after another, with their data
    /// accesses and branches: the thread and its tables are looked up once
    /// for all of them.
    pub fn blocks_simulated(&mut self, tid: i32, blocks: &mut SimulatedBlocks<'_>) {
        if !self.instrumenting {
            blocks.for_each(drop);
            return;
        }
        if self.options.cachegrind {
            self.blocks_simulated_own(tid, blocks);
            return;
        }
        // Creates the thread and its tables when they are new.
        self.with_thread(tid, |_, _| ());
        let Process {
            pid,
            threads,
            functions,
            keys,
            symbols,
            contexts,
            costs: tables,
            options,
            events,
            forest,
            simulation,
            behind,
            owners,
            blocks: blocks_run,
            ..
        } = self;
        let Some(thread) = threads.get_mut(&tid) else {
            return;
        };
        let costs_key = costs_key(options, thread.number);
        let Some(mut costs) = tables.get_mut(&costs_key) else {
            return;
        };
        let (data, branches) = (simulation.simulates_data(), simulation.simulates_branches());
        let cacheuse = events.cacheuse.is_some();
        let width = events.len().min(MAX_EVENTS);
        // Whether the simulation runs ahead: each run is then a step of it.
        let ahead = behind.is_some();
        while let Some(simulated) = blocks.next() {
            *blocks_run += 1;
            // The block's address alone first (see `blocks_executed`).
            let (addr, instructions) = (simulated.block.addr, simulated.instructions);
            let known = keys.get(simulated.key, addr, instructions.len(), || {
                functions.block(addr, symbols, *pid, options)
            });
            let run = {
                let mut shared = Shared {
                    functions,
                    contexts,
                    costs,
                    costs_key,
                    options,
                    events,
                    forest: forest.as_mut(),
                };
                // A run costs its block's profile plus its misses; the
                // first run's steps make the profile.
                // The block by reference: a copy would load whole what
                // the iterator has just stored in parts (see
                // `blocks_executed`).
                let (block, info) = (&simulated.block, known.info);
                let cached = &mut known.table;
                let profile = known
                    .every_run
                    .as_deref()
                    .map(|every_run| &every_run.profile);
                thread.whole_block_simulated(
                    &mut shared,
                    block,
                    info,
                    instructions,
                    profile,
                    cached,
                )
            };
            let Some(every_run) = known.every_run.as_deref().filter(|_| run) else {
                if cacheuse {
                    simulation.set_collect(thread.collecting());
                }
                let every_run = known.every_run.as_deref();
                let mut profile = match every_run {
                    Some(_) => None,
                    None => Some(Profile::new(simulated.key, instructions.len(), width)),
                };
                let mut block_events = simulated.events();
                let mut next_event = block_events.next();
                // With the simulation ahead, the run is one step of it.
                let report = behind.as_mut().map(Behind::next_step).unwrap_or_default();
                load_all(&report, (owners, costs_key), thread, instructions);
                let mut misses = report
                    .misses
                    .iter()
                    .map(|&miss| ahead::position_and_column(miss))
                    .peekable();
                let mut step = |simulation: &mut Simulation, thread: &ThreadState, step| {
                    if ahead {
                        return simulation.every_run(step);
                    }
                    let owners = (&mut *owners, costs_key);
                    simulate(simulation, owners, thread, cacheuse, |sim, owner| {
                        sim.step(step, owner)
                    })
                };
                for (index, &(addr, len)) in instructions.iter().enumerate() {
                    thread.instruction(costs, addr, len);
                    let counts = step(simulation, thread, Step::Fetch(addr, len));
                    charge_step(thread, costs, &mut profile, index, counts);
                    while let Some((_, event)) = next_event.filter(|&(of, _)| of == index) {
                        next_event = block_events.next();
                        let event = match event {
                            BlockEvent::Access(access) if data => Step::Data(access),
                            BlockEvent::Conditional(taken) if branches => {
                                Step::Conditional(addr, taken)
                            }
                            BlockEvent::Indirect(target) if branches => {
                                Step::Indirect(addr, target)
                            }
                            BlockEvent::Bus => {
                                // Every run counts it, without a simulation.
                                if let Some(column) = events.bus {
                                    let counts = Counts::one(column);
                                    charge_step(thread, costs, &mut profile, index, counts);
                                }
                                continue;
                            }
                            _ => continue,
                        };
                        let counts = step(simulation, thread, event);
                        charge_step(thread, costs, &mut profile, index, counts);
                    }
                    while let Some((_, column)) = misses.next_if(|&(at, _)| at <= index) {
                        if let Some(cost) = thread.last_cost(costs) {
                            Counts::one(column).add_to(cost);
                        }
                    }
                }
                if let Some(profile) = profile {
                    let fetches = simulation.fetch_points(instructions);
                    known.every_run = Some(Box::new(EveryRun { profile, fetches }));
                }
                // The block's cache-use charges, booked before the next
                // block can change the call stack.
                let report = ahead.then_some(&report);
                if has_cache_use(report, simulation) {
                    let report = (report, &mut *simulation);
                    book_cache_use(false, report, owners, events, tables, forest);
                    let Some(table) = tables.get_mut(&costs_key) else {
                        return;
                    };
                    costs = table;
                }
                continue;
            };
            // Only the misses are left to count, of this run and of the
            // runs that repeat it right away (a loop of one block): those
            // join its pending run.
            let repeats = (!known.info.is_entry && !options.collect_jumps)
                .then(|| blocks.repeats(&simulated))
                .flatten()
                .filter(|repeats| matches!(repeats.start().arrival, Arrival::Jump { .. }));
            let repeated = repeats.filter(|repeats| {
                thread.repeat_run(costs, repeats.start().sp, repeats.len() as u64)
            });
            if let Some(repeats) = &repeated {
                blocks.skip(repeats);
                *blocks_run += repeats.len() as u64;
            }
            let count = 1 + repeated.as_ref().map_or(0, Repeats::len);
            // The runs themselves only for a simulation here: with the
            // simulation ahead, each run is just a step of it.
            let mut runs = std::iter::once(simulated)
                .chain(repeated.iter().flat_map(|repeats| repeats.runs()));
            for again in (0..count).map(|run| run > 0) {
                let report = match behind.as_mut() {
                    Some(behind) => behind.next_step(),
                    None => {
                        let Some(simulated) = runs.next() else {
                            break;
                        };
                        if cacheuse {
                            simulation.set_collect(thread.collecting());
                        }
                        let mut report = RunReport {
                            thread: &mut *thread,
                            owners: &mut *owners,
                            costs_key,
                            instructions,
                        };
                        let fetches = &every_run.fetches;
                        match again {
                            true => simulation.run_block_again(&simulated, fetches, &mut report),
                            false => simulation.run_block(&simulated, fetches, &mut report),
                        }
                        StepReport::default()
                    }
                };
                load_all(&report, (owners, costs_key), thread, instructions);
                for &miss in report.misses {
                    let (position, column) = ahead::position_and_column(miss);
                    thread.count_extra(position, column);
                }
                // Each run's cache-use charges, booked before the next
                // block can change the call stack.
                let report = ahead.then_some(&report);
                if has_cache_use(report, simulation) {
                    let report = (report, &mut *simulation);
                    book_cache_use(false, report, owners, events, tables, forest);
                    let Some(table) = tables.get_mut(&costs_key) else {
                        return;
                    };
                    costs = table;
                }
            }
        }
    }

    /// [`Process::blocks_simulated`] with Cachegrind's attribution: each
    /// instruction is charged with its fetch to its own function, and its
    /// data accesses and branches where it was charged.
    fn blocks_simulated_own(&mut self, tid: i32, blocks: &mut SimulatedBlocks<'_>) {
        // Creates the thread when it is new.
        self.thread(tid);
        let Process {
            threads,
            costs,
            simulation,
            behind,
            recent_slots,
            own_runs,
            last_charged,
            functions,
            symbols,
            pid,
            own_contexts,
            contexts,
            options,
            events,
            blocks: blocks_run,
            ..
        } = self;
        let Some(thread) = threads.get_mut(&tid) else {
            return;
        };
        let key = costs_key(options, thread.number);
        let table = costs.entry(key).or_default();
        let (data, branches) = (simulation.simulates_data(), simulation.simulates_branches());
        let mut charged_steps = Vec::new();
        while let Some(simulated) = blocks.next() {
            *blocks_run += 1;
            let block = (simulated.block.addr, simulated.instructions.len());
            let slot = simulated.key as usize;
            let known = own_runs.get(slot).and_then(Option::as_deref);
            if let Some(own) = known.filter(|own| own.fits(block, key, table)) {
                // This run and those that repeat it right away: every
                // run's events, then the misses.
                let repeats = blocks.repeats(&simulated);
                if let Some(repeats) = &repeats {
                    blocks.skip(repeats);
                    *blocks_run += repeats.len() as u64;
                }
                let runs = 1 + repeats.as_ref().map_or(0, Repeats::len) as u64;
                own.charge(table, runs);
                thread.count_each(&own.total, runs);
                let mut report = OwnReport {
                    thread: &mut *thread,
                    table: &mut *table,
                    slots: &own.slots,
                };
                match behind.as_mut() {
                    // Each run is a step of the simulation ahead.
                    Some(behind) => {
                        for _ in 0..runs {
                            for &miss in behind.next_step().misses {
                                let (position, column) = ahead::position_and_column(miss);
                                report.extra(position, column);
                            }
                        }
                    }
                    None => {
                        simulation.run_block(&simulated, &own.fetches, &mut report);
                        if let Some(repeats) = &repeats {
                            repeats.for_each_run(|run| {
                                simulation.run_block_again(run, &own.fetches, &mut report);
                            });
                        }
                    }
                }
                *last_charged = Some(own.last);
                continue;
            }
            charged_steps.clear();
            let mut every = Vec::new();
            let mut block_events = simulated.events();
            let mut next_event = block_events.next();
            // With the simulation ahead, the run is one step of it.
            let ahead = behind.is_some();
            let report = behind.as_mut().map(Behind::next_step).unwrap_or_default();
            let mut misses = report
                .misses
                .iter()
                .map(|&miss| ahead::position_and_column(miss))
                .peekable();
            let step = |simulation: &mut Simulation, step| match ahead {
                true => simulation.every_run(step),
                false => simulation.step(step, &mut |_| {}),
            };
            for (index, &(addr, len)) in (0u32..).zip(simulated.instructions) {
                let mut own = OwnFunctions::new(functions, symbols, *pid, own_contexts, contexts);
                let charged = own_charge(recent_slots, (table, key), &mut own, events.len(), addr);
                charged_steps.push(charged);
                *last_charged = Some(charged);
                let counts = step(simulation, Step::Fetch(addr, len));
                every.extend(counts.split_first().0.map(|column| (index, column as u32)));
                charge_own(thread, table, charged, counts);
                while let Some((_, event)) = next_event.filter(|&(of, _)| of == index as usize) {
                    next_event = block_events.next();
                    let event = match event {
                        BlockEvent::Access(access) if data => Step::Data(access),
                        BlockEvent::Conditional(taken) if branches => {
                            Step::Conditional(addr, taken)
                        }
                        BlockEvent::Indirect(target) if branches => Step::Indirect(addr, target),
                        _ => continue,
                    };
                    let counts = step(simulation, event);
                    every.extend(counts.split_first().0.map(|column| (index, column as u32)));
                    charge_own(thread, table, charged, counts);
                }
                while let Some((_, column)) = misses.next_if(|&(at, _)| at <= index as usize) {
                    charge_own(thread, table, charged, Counts::one(column));
                }
            }
            let fetches = simulation.fetch_points(simulated.instructions);
            let steps = (charged_steps.as_slice(), every.as_slice());
            if let Some(own) = OwnRun::new(block.0, steps, table, fetches) {
                if own_runs.len() <= slot {
                    own_runs.resize(slot + 1, None);
                }
                own_runs[slot] = Some(Box::new(own));
            }
        }
    }

    /// An instruction executes on thread `tid`.
    #[inline]
    pub fn instruction(&mut self, tid: i32, addr: u64, len: u8) {
        if !self.instrumenting {
            return;
        }
        if self.options.cachegrind {
            self.charge_to_own_function(tid, addr, len);
            self.settle_cache_use();
            return;
        }
        if !self.simulation.simulates_fetches() {
            // Only Ir: no simulator to ask.
            self.with_thread(tid, |thread, shared| {
                thread.instruction(shared.costs, addr, len);
                if let Some(cost) = thread.last_cost(shared.costs) {
                    cost[0] += 1;
                }
            });
            return;
        }
        self.add_to_last(tid, Some((addr, len)), Step::Fetch(addr, len));
    }

    /// The instructions of a whole block executed on thread `tid`, with no
    /// other event between them: without simulation they are pending in
    /// one go.
    pub fn instructions(&mut self, tid: i32, instructions: &[(u64, u8)]) {
        if !self.instrumenting {
            return;
        }
        if self.options.cachegrind || self.simulation.simulates_fetches() {
            for &(addr, len) in instructions {
                self.instruction(tid, addr, len);
            }
            return;
        }
        self.with_thread(tid, |thread, shared| {
            thread.instructions_ir(shared, instructions);
        });
    }

    /// A data access of the instruction last executed on thread `tid`
    /// (without a cache simulation it counts nothing: not looked at).
    #[inline]
    pub fn data_access(&mut self, tid: i32, access: DataAccess) {
        if self.instrumenting && self.simulation.simulates_data() {
            self.add_to_last(tid, None, Step::Data(access));
        }
    }

    /// A conditional branch of the instruction last executed on `tid`
    /// (without a branch simulation it counts nothing: not looked at).
    #[inline]
    pub fn conditional_branch(&mut self, tid: i32, addr: u64, taken: bool) {
        if self.instrumenting && self.simulation.simulates_branches() {
            self.add_to_last(tid, None, Step::Conditional(addr, taken));
        }
    }

    /// An indirect branch of the instruction last executed on `tid`
    /// (without a branch simulation it counts nothing: not looked at).
    #[inline]
    pub fn indirect_branch(&mut self, tid: i32, addr: u64, target: u64) {
        if self.instrumenting && self.simulation.simulates_branches() {
            self.add_to_last(tid, None, Step::Indirect(addr, target));
        }
    }

    /// The instruction last executed on `tid` was an atomic
    /// read-modify-write: one `Ge` where its costs go (counted only with
    /// `--collect-bus=yes`).
    pub fn bus_locked(&mut self, tid: i32) {
        let Some(column) = self.events.bus.filter(|_| self.instrumenting) else {
            return;
        };
        self.with_thread_state(tid, |thread, shared| {
            if let Some(cost) = thread.last_cost(shared.costs) {
                Counts::one(column).add_to(cost);
            }
        });
    }

    /// Runs a simulation step for the instruction last executed on `tid` and
    /// adds its events where that instruction's costs go; books the
    /// cache-use charges it caused. With Callgrind's attribution, the
    /// instruction `executed` (if any) is first pending on the thread, and
    /// `step` gets the owner of the lines it loads.
    #[inline]
    fn add_to_last(&mut self, tid: i32, executed: Option<(u64, u8)>, step: Step) {
        if self.options.cachegrind {
            self.add_to_charged(tid, step);
        } else {
            self.add_to_pending(tid, executed, step);
        }
        self.settle_cache_use();
    }

    /// [`Process::add_to_last`] with Cachegrind's attribution: the events
    /// go where the last instruction was charged (Cachegrind has no
    /// cache-use model to tell whether the thread collects).
    fn add_to_charged(&mut self, tid: i32, step: Step) {
        let width = self.events.len().min(MAX_EVENTS);
        let Process {
            threads,
            simulation,
            behind,
            costs,
            last_charged,
            ..
        } = self;
        let Some(thread) = threads.get_mut(&tid) else {
            // A new thread: made first.
            self.thread(tid);
            self.add_to_charged(tid, step);
            return;
        };
        let counts = match behind {
            Some(behind) => {
                ahead::with_misses(simulation.every_run(step), behind.next_step().misses)
            }
            None => simulation.step(step, &mut |_| {}),
        };
        if let Some(charged) = *last_charged {
            let table = match costs.get_mut(&charged.key) {
                Some(table) => table,
                None => costs.entry(charged.key).or_default(),
            };
            match charged.slot {
                Some((generation, slot)) if generation == table.generation => {
                    counts.for_each(|column| table.count_in_slot(slot, column));
                }
                _ => {
                    let mut cost = [0; MAX_EVENTS];
                    counts.add_to(&mut cost);
                    table.charge(charged.centre, charged.addr, &cost[..width]);
                }
            }
            count(thread, counts);
        }
    }

    /// [`Process::add_to_last`] with Callgrind's attribution: straight into
    /// the instruction's pending costs, with one look-up of the thread and
    /// its tables. With the simulation ahead, the step's misses come from
    /// it.
    #[inline]
    fn add_to_pending(&mut self, tid: i32, executed: Option<(u64, u8)>, step: Step) {
        let cacheuse = self.events.cacheuse.is_some();
        let Process {
            threads,
            simulation,
            behind,
            costs: tables,
            options,
            owners,
            events,
            forest,
            ..
        } = self;
        let Some(thread) = threads.get_mut(&tid) else {
            // A new thread: made (with its tables) as an instruction or a
            // cache-use owner makes it, then the step.
            if executed.is_some() || cacheuse {
                self.with_thread(tid, |_, _| {});
                self.add_to_pending(tid, executed, step);
            } else if let Some(behind) = behind {
                behind.next_step();
            }
            return;
        };
        let key = costs_key(options, thread.number);
        let costs = match tables.get_mut(&key) {
            Some(costs) => costs,
            None => tables.entry(key).or_default(),
        };
        if let Some((addr, len)) = executed {
            thread.instruction(costs, addr, len);
        }
        if let Some(behind) = behind {
            let report = behind.next_step();
            for &(_, ticket) in report.loads {
                owners.load(ticket, key, thread.load_site());
            }
            if let Some(last) = thread.last_cost(costs) {
                ahead::with_misses(simulation.every_run(step), report.misses).add_to(last);
            }
            let report = (Some(&report), simulation);
            book_cache_use(false, report, owners, events, tables, forest);
            return;
        }
        if cacheuse {
            simulation.set_collect(thread.collecting());
        }
        if thread.last_cost(costs).is_some() {
            let counts = simulate(simulation, (owners, key), thread, cacheuse, |sim, owner| {
                sim.step(step, owner)
            });
            if let Some(last) = thread.last_cost(costs) {
                counts.add_to(last);
            }
        }
    }

    /// Books the cache-use model's charges and line changes (see
    /// [`Owners::settle`] for `only_executed`).
    #[inline]
    fn settle_cache_use(&mut self) {
        if self.simulation.has_cache_use() {
            self.settle_cache_use_of(false);
        }
    }

    fn settle_cache_use_of(&mut self, only_executed: bool) {
        if self.events.cacheuse.is_none() {
            return;
        }
        let Process {
            simulation,
            owners,
            events,
            costs,
            forest,
            ..
        } = self;
        book_cache_use(
            only_executed,
            (None, simulation),
            owners,
            events,
            costs,
            forest,
        );
    }

    /// Cachegrind's attribution: the instruction of `len` bytes at `addr` is
    /// charged at once, with its fetch, to the function that contains it
    /// (its events follow through [`Process::add_to_last`]); one look-up of
    /// the thread and of its table.
    fn charge_to_own_function(&mut self, tid: i32, addr: u64, len: u8) {
        let Process {
            threads,
            costs,
            simulation,
            recent_slots,
            last_charged,
            functions,
            symbols,
            pid,
            own_contexts,
            contexts,
            options,
            events,
            behind,
            ..
        } = self;
        let Some(thread) = threads.get_mut(&tid) else {
            // A new thread: made first.
            self.thread(tid);
            self.charge_to_own_function(tid, addr, len);
            return;
        };
        let key = costs_key(options, thread.number);
        let table = match costs.get_mut(&key) {
            Some(table) => table,
            None => costs.entry(key).or_default(),
        };
        let mut own = OwnFunctions::new(functions, symbols, *pid, own_contexts, contexts);
        let charged = own_charge(recent_slots, (table, key), &mut own, events.len(), addr);
        *last_charged = Some(charged);
        let counts = match behind {
            Some(behind) if simulation.simulates_fetches() => {
                let misses = behind.next_step().misses;
                ahead::with_misses(simulation.every_run(Step::Fetch(addr, len)), misses)
            }
            _ => simulation.fetch(addr, len, &mut |_| {}),
        };
        charge_own(thread, table, charged, counts);
    }

    /// Cachegrind's attribution of a whole block without simulation: its
    /// run is counted (each instruction costs its `Ir` only); the events
    /// that follow go to its last instruction.
    fn count_sequence(&mut self, tid: i32, instructions: &[(u64, u8)]) {
        let Some(&(last, _)) = instructions.last() else {
            return;
        };
        let count = instructions.len() as u64;
        // A known thread without the entry API: the common case, per block.
        let thread_number = match self.threads.get_mut(&tid) {
            Some(thread) => {
                thread.count_ir(count);
                thread.number
            }
            None => {
                let thread = self.thread(tid);
                thread.count_ir(count);
                thread.number
            }
        };
        let key = costs_key(&self.options, thread_number);
        let Process {
            sequences,
            functions,
            symbols,
            pid,
            own_contexts,
            contexts,
            costs,
            ..
        } = self;
        let mut own = OwnFunctions::new(functions, symbols, *pid, own_contexts, contexts);
        let (number, centre) = sequences.of(instructions, |addr| own.centre(addr));
        match costs.get_mut(&key) {
            Some(costs) => costs.count_sequence(number, 1),
            None => costs.entry(key).or_default().count_sequence(number, 1),
        }
        if let Some(centre) = centre {
            self.last_charged = Some(Charged {
                key,
                centre,
                addr: last,
                slot: None,
            });
        }
    }

    /// Cachegrind's `Ir` of whole blocks run on thread `tid`: the thread
    /// and its tables looked up once, each block's runs counted in one go.
    fn count_sequences(&mut self, tid: i32, blocks: &mut WholeBlocks<'_>) {
        let thread_number = self.thread(tid).number;
        let key = costs_key(&self.options, thread_number);
        let Process {
            sequences,
            functions,
            symbols,
            pid,
            own_contexts,
            contexts,
            costs,
            threads,
            blocks: blocks_run,
            ..
        } = self;
        let costs = costs.entry(key).or_default();
        let mut own = OwnFunctions::new(functions, symbols, *pid, own_contexts, contexts);
        let mut ir = 0;
        let mut last = None;
        for whole in blocks {
            let runs = 1 + whole.repeats;
            *blocks_run += runs;
            let number = sequences.of_key(whole.key, whole.instructions, |addr| own.centre(addr));
            costs.count_sequence(number, runs);
            ir += whole.instructions.len() as u64 * runs;
            last = whole.instructions.last().map(|&(addr, _)| (number, addr));
        }
        if let Some(thread) = threads.get_mut(&tid) {
            thread.count_ir(ir);
        }
        if let Some((number, addr)) = last {
            if let Some(centre) = sequences.last_centre(number) {
                self.last_charged = Some(Charged {
                    key,
                    centre,
                    addr,
                    slot: None,
                });
            }
        }
    }

    /// The back-dating forest's sizes, with `--cacheuse=yes`.
    pub fn statistics(&self) -> Option<Statistics> {
        self.forest.as_ref().map(Forest::statistics)
    }

    /// A signal handler starts on thread `tid`.
    pub fn signal_handler_entered(&mut self, tid: i32, signal: i32) {
        if self.instrumenting {
            self.with_thread(tid, |thread, shared| {
                thread.enter_signal_handler(shared, signal)
            });
        }
    }

    /// A signal handler returned on thread `tid`.
    pub fn signal_handler_returned(&mut self, tid: i32) {
        if self.instrumenting {
            self.with_thread(tid, |thread, shared| thread.leave_signal_handler(shared));
        }
    }

    /// Thread `tid` ended: its last block is settled and its state dropped.
    pub fn thread_exited(&mut self, tid: i32) {
        if !self.threads.contains_key(&tid) {
            return;
        }
        // Its calls still active count with what they cost so far, as
        // Callgrind adds every thread's active calls at a dump.
        self.with_thread(tid, |thread, shared| {
            thread.finish(shared);
            thread.add_active_calls(shared.costs);
            thread.close_forest(shared);
        });
        if let Some(thread) = self.threads.remove(&tid) {
            let cost = self.ended_threads_cost.entry(thread.number).or_default();
            add_into(cost, &thread.cost_since_dump());
        }
    }

    /// A client request from thread `tid`; returns the value for rdx and the
    /// parts it dumped.
    pub fn client_request(
        &mut self,
        tid: i32,
        args: [u64; 6],
        default: u64,
    ) -> (u64, Result<Vec<FinishedPart>, TooManyNames>) {
        let none = || Ok(Vec::new());
        if self.options.cachegrind {
            // Cachegrind handles no Callgrind request (and Valgrind 3.19's
            // none at all); its own start/stop came with later versions.
            return match args[0] {
                request::RUNNING_ON_VALGRIND => (1, none()),
                request::CACHEGRIND_START_INSTRUMENTATION => {
                    self.set_instrumenting(true);
                    (0, none())
                }
                request::CACHEGRIND_STOP_INSTRUMENTATION => {
                    self.set_instrumenting(false);
                    (0, none())
                }
                _ => (default, none()),
            };
        }
        match args[0] {
            request::RUNNING_ON_VALGRIND => (1, none()),
            request::DUMP_STATS => (0, self.dump("Client Request", Dumped::Requested(tid))),
            request::DUMP_STATS_AT => {
                let text = self.read_string(args[1]);
                let trigger = format!("Client Request: {text}");
                (0, self.dump(&trigger, Dumped::Requested(tid)))
            }
            request::ZERO_STATS => {
                self.zero();
                (0, none())
            }
            request::TOGGLE_COLLECT => {
                self.collect_toggled = true;
                self.thread(tid).toggle_collect();
                (0, none())
            }
            request::START_INSTRUMENTATION => {
                self.set_instrumenting(true);
                (0, none())
            }
            request::STOP_INSTRUMENTATION => {
                self.set_instrumenting(false);
                (0, none())
            }
            _ => (default, none()),
        }
    }

    /// Serves `request` from outside the run, stopped at thread `tid`
    /// (Callgrind's monitor commands): the reply Callgrind's monitor
    /// prints, and the parts of a dump it made.
    pub fn control(
        &mut self,
        tid: i32,
        request: &Control,
    ) -> (String, Result<Vec<FinishedPart>, TooManyNames>) {
        let none = || Ok(Vec::new());
        match request {
            // Every thread, as Callgrind's monitor dumps.
            Control::Dump { trigger } => (String::new(), self.dump(trigger, Dumped::AllThreads)),
            Control::Zero => {
                self.zero();
                (String::new(), none())
            }
            Control::Instrumentation(Some(on)) => {
                self.set_instrumenting(*on);
                (String::new(), none())
            }
            Control::Instrumentation(None) => {
                let state = if self.instrumenting { "on" } else { "off" };
                (format!("instrumentation: {state}\n"), none())
            }
            Control::Status { .. } if !self.instrumenting => {
                let internal = matches!(request, Control::Status { internal: true });
                let text = match internal {
                    true => "instrumentation: off\n",
                    false => "No status available as instrumentation is switched off\n",
                };
                (text.to_string(), none())
            }
            Control::Status { internal: true } => (self.status(tid).text(), none()),
            Control::Status { internal: false } => (
                format!("{} thread(s) running.\n", self.threads.len()),
                none(),
            ),
        }
    }

    /// What the process is doing, for `callgrind_control` (stopped at
    /// thread `tid`).
    fn status(&self, tid: i32) -> Status {
        let (distinct_functions, distinct_blocks) = self.functions.counts();
        let arcs = self.costs.values().flat_map(|costs| costs.arcs.values());
        let name = |centre: crate::context::Centre| {
            let function = self.contexts.function(centre.cxt);
            self.functions.get(function).name.to_string()
        };
        let threads = self
            .threads
            .values()
            .map(|thread| {
                let key = costs_key(&self.options, thread.number);
                let calls = thread.active_calls();
                let frames = calls
                    .iter()
                    .map(|(arc, running)| {
                        let known = self.costs.get(&key).and_then(|costs| costs.arcs.get(arc));
                        let mut cost = known.map_or_else(Vec::new, |known| known.inclusive.clone());
                        cost.resize(running.len().max(cost.len()), 0);
                        for (sum, add) in cost.iter_mut().zip(running) {
                            *sum = sum.wrapping_add(*add);
                        }
                        (name(arc.from), known.map_or(0, |known| known.count), cost)
                    })
                    .collect();
                ThreadStatus {
                    number: thread.number,
                    cost: thread.cost_since_dump(),
                    frames,
                    innermost: calls.last().map(|(arc, _)| name(arc.to)),
                }
            })
            .collect();
        Status {
            executed_blocks: self.blocks,
            executed_calls: arcs.clone().map(|arc| arc.count).sum(),
            distinct_blocks,
            distinct_calls: arcs.count(),
            distinct_functions,
            distinct_contexts: self.contexts.len(),
            events: self.events.names.clone(),
            part: self.parts_dumped,
            threads,
            current: self.threads.get(&tid).map_or(1, |thread| thread.number),
        }
    }

    /// Switches instrumentation: every thread's calls are popped and its
    /// counter restarts (Callgrind's `set_instrument_state`).
    fn set_instrumenting(&mut self, on: bool) {
        if self.instrumenting == on {
            return;
        }
        self.instrumenting = on;
        let tids: Vec<i32> = self.threads.keys().copied().collect();
        for tid in tids {
            self.with_thread(tid, |thread, shared| thread.reset(shared));
        }
        self.simulation.clear();
        self.settle_cache_use();
    }

    /// `CALLGRIND_ZERO_STATS`: all costs so far are forgotten.
    fn zero(&mut self) {
        self.detach_pending(|_| true);
        for costs in self.costs.values_mut() {
            costs.clear();
        }
        for thread in self.threads.values_mut() {
            thread.mark_dumped();
        }
        self.ended_threads_cost.clear();
    }

    /// Before the tables of the threads numbered as `included` says are
    /// cleared: their pending runs become lists of instructions.
    fn detach_pending(&mut self, included: impl Fn(u32) -> bool) {
        let separate = self.options.separate_threads;
        for thread in self.threads.values_mut() {
            let key = if separate { thread.number } else { 0 };
            if included(thread.number) {
                if let Some(costs) = self.costs.get(&key) {
                    thread.detach_pending(costs);
                }
            }
        }
    }

    /// A NUL-terminated string of the tracee (at most 4 KiB), lossily.
    fn read_string(&self, addr: u64) -> String {
        let mut bytes = vec![0u8; 4096];
        let read = File::open(format!("/proc/{}/mem", self.pid))
            .and_then(|memory| memory.read_at(&mut bytes, addr))
            .unwrap_or(0);
        bytes.truncate(read);
        if let Some(end) = bytes.iter().position(|&b| b == 0) {
            bytes.truncate(end);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The process ended: every thread's last block is settled, and the final
    /// parts are made.
    pub fn finish(&mut self) -> Result<Vec<FinishedPart>, TooManyNames> {
        // Resident lines are charged as if evicted; with every thread's calls
        // out of the back-dating forest (at their exits), all cache-use costs
        // reach their arcs.
        if let Some(thread) = self.threads.values().next() {
            let collecting = thread.collecting();
            self.simulation.set_collect(collecting);
        }
        self.simulation.flush();
        self.settle_cache_use_of(true);
        let tids: Vec<i32> = self.threads.keys().copied().collect();
        for tid in tids {
            self.thread_exited(tid);
        }
        self.dump("Program termination", Dumped::Final)
    }

    /// Makes the parts of a dump (one, or one per thread) and restarts the
    /// costs. A dump the program asked for (`requester` is its thread) holds,
    /// with `--separate-threads=yes`, only that thread, as in Callgrind.
    fn dump(&mut self, trigger: &str, why: Dumped) -> Result<Vec<FinishedPart>, TooManyNames> {
        let requested = why != Dumped::Final;
        let only = match why {
            Dumped::Requested(tid) if self.options.separate_threads => {
                self.threads.get(&tid).map(|thread| thread.number)
            }
            _ => None,
        };
        // Active calls contribute their cost so far.
        let separate = self.options.separate_threads;
        let included = |number: u32| only.is_none_or(|only| only == number);
        for thread in self.threads.values_mut() {
            if !included(thread.number) {
                continue;
            }
            let key = if separate { thread.number } else { 0 };
            thread.add_active_calls(self.costs.entry(key).or_default());
        }
        let mut summaries: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        for thread in self.threads.values().filter(|t| included(t.number)) {
            let key = if separate { thread.number } else { 0 };
            add_into(summaries.entry(key).or_default(), &thread.cost_since_dump());
        }
        for (&number, cost) in &self.ended_threads_cost {
            let key = if separate { number } else { 0 };
            add_into(summaries.entry(key).or_default(), cost);
        }
        let mut keys: Vec<u32> = self.costs.keys().copied().collect();
        if let Some(only) = only {
            keys = vec![only];
        }
        if keys.is_empty() {
            keys.push(if separate { 1 } else { 0 });
        }
        let width = self.events.len();
        for costs in self.costs.values_mut() {
            self.sequences.settle(costs, width);
        }
        self.parts_dumped += 1;
        let mut parts = Vec::new();
        for key in keys {
            let empty = Costs::default();
            let costs = self.costs.get(&key).unwrap_or(&empty);
            let info = PartInfo {
                pid: self.pid,
                part: self.parts_dumped,
                thread: separate.then_some(key),
                trigger,
                blocks: (self.blocks_at_dump, self.blocks),
                summary: summaries.get(&key).cloned(),
            };
            let naming = Naming {
                contexts: &self.contexts,
                functions: &self.functions,
                symbols: &self.symbols,
            };
            let part = build_part(
                &mut self.names,
                costs,
                &naming,
                &self.options,
                &self.events,
                &info,
            )?;
            parts.push(FinishedPart {
                part,
                thread: info.thread,
                requested,
            });
        }
        self.detach_pending(included);
        for (key, costs) in &mut self.costs {
            if included(*key) {
                costs.clear_dumped();
            }
        }
        for thread in self.threads.values_mut() {
            if included(thread.number) {
                thread.mark_dumped();
            }
        }
        self.ended_threads_cost
            .retain(|number, _| !included(*number));
        self.blocks_at_dump = self.blocks;
        Ok(parts)
    }
}

/// A new thread, numbered `next` (which counts on), with the root of its
/// back-dating tree when there is a forest.
fn new_thread(
    next: &mut u32,
    options: &Options,
    events: &EventSet,
    forest: &mut Option<Forest<ArcKey>>,
) -> ThreadState {
    let root = forest.as_mut().map(Forest::root);
    let thread = ThreadState::new(*next, options, events.len(), root);
    *next += 1;
    thread
}

/// Where a whole run of a block reports under Cachegrind's attribution:
/// each miss in its instruction's slot (`slots`) of `table` and in the
/// thread's total.
struct OwnReport<'a> {
    thread: &'a mut ThreadState,
    table: &'a mut Costs,
    slots: &'a [usize],
}

impl RunSink for OwnReport<'_> {
    fn loaded(&mut self, _: usize, _: cgx_sim::Owner) {}

    #[inline]
    fn extra(&mut self, position: usize, column: usize) {
        if let Some(&slot) = self.slots.get(position) {
            self.table.count_in_slot(slot, column);
        }
        count_column(self.thread, column);
    }
}

/// Where a whole run of a block reports ([`RunSink`]): the thread running
/// it, and the owners of the lines it loads in cost table `costs_key`.
struct RunReport<'a> {
    thread: &'a mut ThreadState,
    owners: &'a mut Owners,
    costs_key: u32,
    instructions: &'a [(u64, u8)],
}

impl RunSink for RunReport<'_> {
    fn loaded(&mut self, position: usize, ticket: cgx_sim::Owner) {
        let addr = self.instructions.get(position).map_or(0, |&(addr, _)| addr);
        let running = self.thread.load_site_at(addr);
        self.owners.load(ticket, self.costs_key, running);
    }

    #[inline]
    fn extra(&mut self, position: usize, column: usize) {
        self.thread.count_extra(position, column);
    }
}

/// Whether the last simulation step has cache-use charges or line changes
/// to book: those of `report` when the simulation runs ahead, else the
/// simulation's own.
#[inline]
fn has_cache_use(report: Option<&StepReport<'_>>, simulation: &Simulation) -> bool {
    report.map_or_else(
        || simulation.has_cache_use(),
        |report| report.has_cache_use(),
    )
}

/// Books the cache-use charges and line changes of the last simulation
/// steps: those of `report` when the simulation runs ahead, else the
/// simulation's own, which it then forgets (the cost tables may grow; see
/// [`Owners::settle`] for `only_executed`).
fn book_cache_use(
    only_executed: bool,
    (report, simulation): (Option<&StepReport<'_>>, &mut Simulation),
    owners: &Owners,
    events: &EventSet,
    tables: &mut BTreeMap<u32, Costs>,
    forest: &mut Option<Forest<ArcKey>>,
) {
    let reported = match report {
        Some(report) => Some((report.charges, report.changes)),
        None => simulation.cache_use(),
    };
    if let Some((charges, changes)) = reported {
        let forest = forest.as_mut();
        owners.settle(only_executed, charges, changes, events, tables, forest);
    }
    if report.is_none() {
        simulation.clear_cache_use();
    }
}

/// Runs a simulation `step` of the instruction `thread` runs; with cache
/// use, the owner of a line it loads is that instruction's site in the
/// cost table `key` (see [`ThreadState::load_site`]).
#[inline(always)]
fn simulate(
    simulation: &mut Simulation,
    (owners, key): (&mut Owners, u32),
    thread: &ThreadState,
    cacheuse: bool,
    step: impl FnOnce(&mut Simulation, &mut dyn FnMut(cgx_sim::Owner)) -> Counts,
) -> Counts {
    if !cacheuse {
        return step(simulation, &mut |_| {});
    }
    let mut loaded = |ticket| owners.load(ticket, key, thread.load_site());
    step(simulation, &mut loaded)
}

/// Keeps the owners of the lines a run of `instructions` on `thread`
/// loaded (its step `report` of the simulation ahead), in cost table
/// `key`.
#[inline]
fn load_all(
    report: &StepReport<'_>,
    (owners, key): (&mut Owners, u32),
    thread: &ThreadState,
    instructions: &[(u64, u8)],
) {
    for &(at, ticket) in report.loads {
        let (position, _) = ahead::position_and_column(at);
        let addr = instructions.get(position).map_or(0, |&(addr, _)| addr);
        owners.load(ticket, key, thread.load_site_at(addr));
    }
}

/// Where Cachegrind charges the instruction at `addr` in the cost table
/// `table` (numbered `key`): the slot of its own function's context, found
/// among the recent ones or made with `code` (cost vectors of `width`
/// events).
#[inline]
fn own_charge(
    recent_slots: &mut RecentSlots,
    (table, key): (&mut Costs, u32),
    own: &mut OwnFunctions<'_>,
    width: usize,
    addr: u64,
) -> Charged {
    if let Some(charged) = recent_slots.get(addr, key, table.generation) {
        return charged;
    }
    let centre = own.centre(addr);
    let slot = table.slot(centre, addr, width);
    let charged = Charged {
        key,
        centre,
        addr,
        slot: Some((table.generation, slot)),
    };
    recent_slots.put(charged);
    charged
}

/// Adds the events `counts` where Cachegrind charged an instruction
/// (`charged`, in `table`) and to `thread`'s total.
#[inline]
fn charge_own(thread: &mut ThreadState, table: &mut Costs, charged: Charged, counts: Counts) {
    if let Some((_, slot)) = charged.slot {
        counts.for_each(|column| table.count_in_slot(slot, column));
    }
    count(thread, counts);
}

/// Adds the events `counts` of a simulation step of the instruction at
/// `position` of the block `thread` runs to the instruction's pending
/// cost, also counting the step's own event in `profile` (made by this
/// run; dropped if a step has nowhere to go).
#[inline(always)]
fn charge_step(
    thread: &mut ThreadState,
    costs: &Costs,
    profile: &mut Option<Profile>,
    position: usize,
    counts: Counts,
) {
    let Some(last) = thread.last_cost(costs) else {
        *profile = None;
        return;
    };
    counts.add_to(last);
    if let (Some(profile), (Some(column), _)) = (profile, counts.split_first()) {
        profile.count(position, column);
    }
}

/// The key of the cost tables thread number `thread` charges: its number
/// with `--separate-threads=yes`, else 0 (one table for all).
fn costs_key(options: &Options, thread: u32) -> u32 {
    if options.separate_threads {
        thread
    } else {
        0
    }
}

/// What Cachegrind's attribution needs to name an instruction's function:
/// the process's functions, symbols and contexts, and the context of each
/// function alone.
struct OwnFunctions<'a> {
    functions: &'a mut Functions,
    symbols: &'a mut Symbols,
    pid: i32,
    own_contexts: &'a mut FxHashMap<FnId, CxtId>,
    contexts: &'a mut Contexts,
}

impl<'a> OwnFunctions<'a> {
    /// Names functions with the process's `functions`, `symbols` (of
    /// process `pid`) and `contexts`, each alone in `own_contexts`.
    fn new(
        functions: &'a mut Functions,
        symbols: &'a mut Symbols,
        pid: i32,
        own_contexts: &'a mut FxHashMap<FnId, CxtId>,
        contexts: &'a mut Contexts,
    ) -> OwnFunctions<'a> {
        OwnFunctions {
            functions,
            symbols,
            pid,
            own_contexts,
            contexts,
        }
    }

    /// The centre Cachegrind charges the instruction at `addr` to: its
    /// function's, in a context of its own. Asked once per instruction or
    /// block, so out of the way of the paths that run again.
    #[cold]
    fn centre(&mut self, addr: u64) -> Centre {
        let function = self.functions.of_instruction(addr, self.symbols, self.pid);
        let contexts = &mut *self.contexts;
        let cxt = *self
            .own_contexts
            .entry(function)
            .or_insert_with(|| contexts.of_stack(&[None, Some(function)], 0));
        Centre { cxt, rec: 0 }
    }
}

/// Counts the events of `counts` in `thread`'s own counter: `Ir` alone,
/// any other as a vector up to its column that holds 1 there, read from a
/// constant.
#[inline]
fn count(thread: &mut ThreadState, counts: Counts) {
    counts.for_each(|column| count_column(thread, column));
}

/// Counts one event in `column` in `thread`'s own counter (`Ir` alone, any
/// other as a vector up to its column that holds 1 there, read from a
/// constant).
#[inline]
fn count_column(thread: &mut ThreadState, column: usize) {
    /// Zeros and a last 1: its last `n + 1` columns count column `n`.
    const ONE_LAST: [u64; MAX_EVENTS] = {
        let mut cost = [0; MAX_EVENTS];
        cost[MAX_EVENTS - 1] = 1;
        cost
    };
    if column == 0 {
        thread.count_ir(1);
    } else if let Some(one) = ONE_LAST.get(MAX_EVENTS.saturating_sub(column + 1)..) {
        thread.count(one);
    }
}
