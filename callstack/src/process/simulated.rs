//! Blocks and instructions with their data accesses, branches and atomic
//! read-modify-writes: the simulations' steps (run here or ahead of the
//! collector on another thread), and their events charged where
//! Callgrind charges them.

use std::collections::BTreeMap;
use std::sync::Arc;

use cgx_backdate::Forest;
use cgx_engine::{Arrival, BlockEvent, DataAccess, Repeats, SimulatedBlocks};

use super::{costs_key, Process};
use crate::ahead;
use crate::ahead::{Behind, SimulationAhead, StepReport};
use crate::cacheuse::Owners;
use crate::costs::{ArcKey, Costs, Profile};
use crate::events::{EventSet, MAX_EVENTS};
use crate::keys::EveryRun;
use crate::simulation::{Counts, RunSink, Simulation, Step};
use crate::thread::{Shared, ThreadState};

impl Process {
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
        let spares = std::mem::take(&mut self.ahead_spares);
        let (ahead, behind) = ahead::split(simulation, fetch_points, spares);
        self.behind = Some(behind);
        Some(ahead)
    }

    /// The simulation [`Process::ahead`] made, back after the drain;
    /// whether the collector took exactly the steps it ran.
    pub fn ahead_done(&mut self, ahead: SimulationAhead) -> bool {
        let in_step = self.behind.take().is_some_and(Behind::all_taken);
        (self.simulation, self.ahead_fetch_points, self.ahead_spares) = ahead.into_parts();
        in_step
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
        while let Some(ref simulated) = blocks.next() {
            *blocks_run += 1;
            // Field by field, by reference (see `blocks_executed`).
            let (addr, instructions) = (simulated.block.addr, simulated.instructions);
            let known = keys.get(simulated.key, addr, instructions, || {
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
                let listed = known.run(instructions);
                let cached = &mut known.table;
                let profile = known
                    .every_run
                    .as_deref()
                    .map(|every_run| &every_run.profile);
                thread.whole_block_simulated(&mut shared, block, info, listed, profile, cached)
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
                load_all(&report, owners, costs_key, thread, instructions);
                let mut misses = report
                    .misses
                    .iter()
                    .map(|&miss| ahead::position_and_column(miss))
                    .peekable();
                let mut step = |simulation: &mut Simulation, thread: &ThreadState, step| {
                    if ahead {
                        return simulation.every_run(step);
                    }
                    simulate(
                        simulation,
                        owners,
                        costs_key,
                        thread,
                        cacheuse,
                        |sim, owner| sim.step(step, owner),
                    )
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
                    known.every_run = Some(Box::new(EveryRun {
                        profile: Arc::new(profile),
                        fetches,
                    }));
                }
                // The block's cache-use charges, booked before the next
                // block can change the call stack.
                let report = ahead.then_some(&report);
                if has_cache_use(report, simulation) {
                    book_cache_use(false, report, simulation, owners, events, tables, forest);
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
                .then(|| blocks.repeats(simulated))
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
                .copied()
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
                load_all(&report, owners, costs_key, thread, instructions);
                for &miss in report.misses {
                    let (position, column) = ahead::position_and_column(miss);
                    thread.count_extra(position, column);
                }
                // Each run's cache-use charges, booked before the next
                // block can change the call stack.
                let report = ahead.then_some(&report);
                if has_cache_use(report, simulation) {
                    book_cache_use(false, report, simulation, owners, events, tables, forest);
                    let Some(table) = tables.get_mut(&costs_key) else {
                        return;
                    };
                    costs = table;
                }
            }
        }
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
    pub(super) fn add_to_last(&mut self, tid: i32, executed: Option<(u64, u8)>, step: Step) {
        if self.options.cachegrind {
            self.add_to_charged(tid, step);
        } else {
            self.add_to_pending(tid, executed, step);
        }
        self.settle_cache_use();
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
            book_cache_use(
                false,
                Some(&report),
                simulation,
                owners,
                events,
                tables,
                forest,
            );
            return;
        }
        if cacheuse {
            simulation.set_collect(thread.collecting());
        }
        if thread.last_cost(costs).is_some() {
            // With a filter, what it lets through is simulated apart
            // (`Process::accesses_attributed`).
            let filtered = options.filtered;
            let counts =
                simulate(
                    simulation,
                    owners,
                    key,
                    thread,
                    cacheuse,
                    |sim, owner| match filtered {
                        true => sim.every_run(step),
                        false => sim.step(step, owner),
                    },
                );
            if let Some(last) = thread.last_cost(costs) {
                counts.add_to(last);
            }
        }
    }

    /// Books the cache-use model's charges and line changes (see
    /// [`Owners::settle`] for `only_executed`).
    #[inline]
    pub(super) fn settle_cache_use(&mut self) {
        if self.simulation.has_cache_use() {
            self.settle_cache_use_of(false);
        }
    }

    pub(super) fn settle_cache_use_of(&mut self, only_executed: bool) {
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
            None,
            simulation,
            owners,
            events,
            costs,
            forest,
        );
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
    report: Option<&StepReport<'_>>,
    simulation: &mut Simulation,
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
    owners: &mut Owners,
    key: u32,
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
    owners: &mut Owners,
    key: u32,
    thread: &ThreadState,
    instructions: &[(u64, u8)],
) {
    for &(at, ticket) in report.loads {
        let (position, _) = ahead::position_and_column(at);
        let addr = instructions.get(position).map_or(0, |&(addr, _)| addr);
        owners.load(ticket, key, thread.load_site_at(addr));
    }
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
