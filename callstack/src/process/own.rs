//! Cachegrind's attribution: every instruction charged to its own
//! function, with no call graph; with the simulations, or as counted
//! sequences of blocks (`Ir` alone).

use cgx_engine::symbols::Symbols;
use cgx_engine::{
    BlockEvent, FilteredAccess, FilteredAccesses, Repeats, SimulatedBlocks, WholeBlocks,
};
use rustc_hash::FxHashMap;

use super::{costs_key, Process};
use crate::ahead;
use crate::ahead::Behind;
use crate::attribution::{Charged, OwnRun, RecentSlots};
use crate::context::{Centre, Contexts, CxtId};
use crate::costs::Costs;
use crate::events::MAX_EVENTS;
use crate::functions::{FnId, Functions};
use crate::simulation::{Counts, RunSink, Simulation, Step};
use crate::thread::ThreadState;

impl Process {
    /// [`Process::blocks_simulated`] with Cachegrind's attribution: each
    /// instruction is charged with its fetch to its own function, and its
    /// data accesses and branches where it was charged.
    pub(super) fn blocks_simulated_own(&mut self, tid: i32, blocks: &mut SimulatedBlocks<'_>) {
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
                let charged = own_charge(recent_slots, table, key, &mut own, events.len(), addr);
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
            if let Some(own) = OwnRun::new(block.0, &charged_steps, &every, table, fetches) {
                keep(own_runs, slot, own);
            }
        }
    }

    /// [`Process::add_to_last`] with Cachegrind's attribution: the events
    /// go where the last instruction was charged (Cachegrind has no
    /// cache-use model to tell whether the thread collects).
    pub(super) fn add_to_charged(&mut self, tid: i32, step: Step) {
        let width = self.events.len().min(MAX_EVENTS);
        let filtered = self.options.filtered;
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
            // As the fetch's (`Process::charge_to_own_function`).
            None if filtered => simulation.every_run(step),
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

    /// Cachegrind's attribution: the instruction of `len` bytes at `addr` is
    /// charged at once, with its fetch, to the function that contains it
    /// (its events follow through [`Process::add_to_last`]); one look-up of
    /// the thread and of its table.
    pub(super) fn charge_to_own_function(&mut self, tid: i32, addr: u64, len: u8) {
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
        let charged = own_charge(recent_slots, table, key, &mut own, events.len(), addr);
        *last_charged = Some(charged);
        let counts = match behind {
            Some(behind) if simulation.simulates_fetches() => {
                let misses = behind.next_step().misses;
                ahead::with_misses(simulation.every_run(Step::Fetch(addr, len)), misses)
            }
            // The fetch reaches the simulation apart, when the filter lets
            // it through (`Process::accesses_filtered`).
            _ if options.filtered => simulation.every_run(Step::Fetch(addr, len)),
            _ => simulation.fetch(addr, len, &mut |_| {}),
        };
        charge_own(thread, table, charged, counts);
    }

    /// Whole blocks run on thread `tid` whose fetches and accesses the
    /// backend filtered (`Options::filtered`): each block's runs are
    /// counted, as a sequence that counts what every run counts (`Ir`,
    /// `Dr`, `Dw`), charged to its instructions as the dump reads the
    /// costs ([`crate::costs::Costs::self_costs_by_instruction`]); their
    /// misses come apart ([`Process::accesses_filtered`]).
    pub(super) fn blocks_filtered(&mut self, tid: i32, blocks: &mut WholeBlocks<'_>) {
        // Creates the thread when it is new.
        self.thread(tid);
        let Process {
            threads,
            costs,
            simulation,
            sequences,
            last_charged,
            functions,
            symbols,
            pid,
            own_contexts,
            contexts,
            options,
            blocks: blocks_run,
            ..
        } = self;
        let Some(thread) = threads.get_mut(&tid) else {
            return;
        };
        let key = costs_key(options, thread.number);
        let table = costs.entry(key).or_default();
        let mut own = OwnFunctions::new(functions, symbols, *pid, own_contexts, contexts);
        let mut last = None;
        for whole in blocks {
            let runs = 1 + whole.repeats;
            *blocks_run += runs;
            let every = || simulation.every_run_events(whole.instructions, whole.accesses());
            let number = sequences.of_key_every(whole.key, whole.instructions, every, |addr| {
                own.centre(addr)
            });
            table.count_sequence(number, runs);
            for column in sequences.every_run_columns(number) {
                thread.count_each(&[(column, 1)], runs);
            }
            last = whole.instructions.last().map(|&(addr, _)| (number, addr));
        }
        if let Some((number, addr)) = last {
            if let Some(centre) = sequences.last_centre(number) {
                *last_charged = Some(Charged {
                    key,
                    centre,
                    addr,
                    slot: None,
                });
            }
        }
    }

    /// The fetches and data accesses of thread `tid` that missed I1 or D1
    /// (the backend keeps them), in the order they ran: each is simulated
    /// in LL, its misses charged to its instruction (what every run counts
    /// comes with the runs, [`Process::blocks_filtered`]).
    pub fn accesses_filtered(&mut self, tid: i32, accesses: &mut FilteredAccesses<'_>) {
        if !self.instrumenting {
            return;
        }
        if !self.options.cachegrind {
            self.accesses_attributed(tid, accesses);
            return;
        }
        // Creates the thread when it is new.
        self.thread(tid);
        let Process {
            threads,
            costs,
            simulation,
            recent_slots,
            functions,
            symbols,
            pid,
            own_contexts,
            contexts,
            options,
            events,
            ..
        } = self;
        let Some(thread) = threads.get_mut(&tid) else {
            return;
        };
        let key = costs_key(options, thread.number);
        let table = costs.entry(key).or_default();
        for FilteredAccess {
            instruction: (addr, len),
            access,
            ..
        } in accesses
        {
            let step = match access {
                Some(access) => Step::Data(access),
                None => Step::Fetch(addr, len),
            };
            let (_, misses) = simulation.beyond_first_level(step).split_first();
            if misses.is_empty() {
                continue;
            }
            let mut own = OwnFunctions::new(functions, symbols, *pid, own_contexts, contexts);
            let charged = own_charge(recent_slots, table, key, &mut own, events.len(), addr);
            charge_own(thread, table, charged, misses);
        }
    }

    /// Cachegrind's attribution of a whole block without simulation: its
    /// run is counted (each instruction costs its `Ir` only); the events
    /// that follow go to its last instruction.
    pub(super) fn count_sequence(&mut self, tid: i32, instructions: &[(u64, u8)]) {
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
    pub(super) fn count_sequences(&mut self, tid: i32, blocks: &mut WholeBlocks<'_>) {
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
}

/// Keeps `own` as what every run of the block with key `slot` charges.
fn keep(own_runs: &mut Vec<Option<Box<OwnRun>>>, slot: usize, own: OwnRun) {
    if own_runs.len() <= slot {
        own_runs.resize(slot + 1, None);
    }
    own_runs[slot] = Some(Box::new(own));
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

/// Where Cachegrind charges the instruction at `addr` in the cost table
/// `table` (numbered `key`): the slot of its own function's context, found
/// among the recent ones or made with `code` (cost vectors of `width`
/// events).
#[inline]
fn own_charge(
    recent_slots: &mut RecentSlots,
    table: &mut Costs,
    key: u32,
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
pub(super) fn count(thread: &mut ThreadState, counts: Counts) {
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
