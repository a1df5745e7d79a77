//! One traced process: its symbols, functions, threads and cost tables.
//! What happens to them is in the files under `process/`: whole blocks
//! with Callgrind's attribution (`run`), with the simulations (`simulated`),
//! with the simulations' fetches and accesses filtered (`filtered`),
//! Cachegrind's attribution (`own`), client requests and live control
//! (`requests`), and dumps (`dumps`).

mod dumps;
mod filtered;
mod own;
mod requests;
mod run;
mod simulated;
mod system_calls;

use dumps::Dumped;
pub(crate) use dumps::FinishedPart;
use std::collections::BTreeMap;
use std::sync::Arc;

use cgx_backdate::{Forest, Statistics};
use cgx_engine::symbols::Symbols;
use cgx_formats::{Names, TooManyNames};
use rustc_hash::FxHashMap;

use crate::ahead::{Behind, Spares};
use crate::attribution::{Charged, OwnRun, RecentSlots};
use crate::cacheuse::Owners;
use crate::context::{Contexts, CxtId};
use crate::costs::{ArcKey, Costs};
use crate::events::EventSet;
use crate::functions::{FnId, Functions};
use crate::keys::Keys;
use crate::sequences::Sequences;
use crate::simulation::{FetchPoint, Simulation};
use crate::thread::{add_into, Shared, ThreadState};
use crate::Options;

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
    /// Step reports to fill again in the next drain.
    ahead_spares: Spares,
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
    /// Whether the simulation emptied its caches since the backend last
    /// asked ([`Process::take_caches_emptied`]).
    caches_emptied: bool,
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

/// A process's symbols, its functions' names as `options` ask.
fn symbols_for(options: &Options) -> Symbols {
    let mut symbols = Symbols::new();
    symbols.keep_mangled_names(!options.demangle);
    symbols
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
        let symbols = symbols_for(&options);
        let functions = Functions::new(options.show_below_main);
        Process {
            pid,
            options,
            events,
            simulation,
            behind: None,
            ahead_fetch_points: Vec::new(),
            ahead_spares: Spares::default(),
            forest,
            owners: Owners::default(),
            last_charged: None,
            recent_slots: RecentSlots::default(),
            own_runs: Vec::new(),
            own_contexts: FxHashMap::default(),
            sequences: Sequences::default(),
            symbols,
            names: Names::default(),
            functions,
            keys: Keys::default(),
            contexts: Contexts::default(),
            costs: BTreeMap::new(),
            threads: BTreeMap::new(),
            ended_threads_cost: BTreeMap::new(),
            next_thread_number: 1,
            instrumenting,
            caches_emptied: false,
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
            ahead_spares: Spares::default(),
            forest: self.forest.clone(),
            owners: self.owners.clone(),
            last_charged: None,
            recent_slots: RecentSlots::default(),
            own_runs: Vec::new(),
            own_contexts: self.own_contexts.clone(),
            sequences: self.sequences.clone(),
            symbols: symbols_for(&self.options),
            names: self.names.clone(),
            functions: self.functions.clone(),
            keys: self.keys.clone(),
            contexts: self.contexts.clone(),
            costs: self.costs.clone(),
            threads,
            ended_threads_cost: self.ended_threads_cost.clone(),
            next_thread_number: self.next_thread_number,
            instrumenting: self.instrumenting,
            caches_emptied: false,
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

    /// The names the parts of this process refer to.
    pub fn names(&self) -> &Names {
        &self.names
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

/// The key of the cost tables thread number `thread` charges: its number
/// with `--separate-threads=yes`, else 0 (one table for all).
fn costs_key(options: &Options, thread: u32) -> u32 {
    if options.separate_threads {
        thread
    } else {
        0
    }
}
