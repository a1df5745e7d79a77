//! Callgrind's attribution of runs whose fetches and data accesses the
//! backend filtered (`Options::filtered`, with quiet runs): a drain's
//! unfiltered fetches and accesses come first, simulated in the order
//! they ran, their misses kept by the record of their run (or counted at
//! once where the thread is, for one that names none); then its blocks,
//! each run costing what every run of its block counts (its profile, made
//! from its instructions and planned accesses) plus the misses its record
//! kept, through the thread's call/return rules.

use std::sync::Arc;

use cgx_engine::{FilteredAccess, FilteredAccesses, Repeat, WholeBlock, WholeBlocks};

use super::{costs_key, Process};
use crate::costs::{Costs, Profile};
use crate::events::MAX_EVENTS;
use crate::keys::{EveryRun, KnownBlock};
use crate::run_misses::RunMiss;
use crate::simulation::{Simulation, Step};
use crate::thread::{ProfiledRuns, Shared, ThreadState};

impl Process {
    /// The fetches and data accesses of thread `tid` that missed I1 or D1
    /// (the backend keeps them), in the order they ran: each simulated in
    /// LL, its misses kept for the run of the record it names, or counted
    /// where the thread is (see [`cgx_engine::FilteredAccess::record`]).
    pub(super) fn accesses_attributed(&mut self, tid: i32, accesses: &mut FilteredAccesses<'_>) {
        // Creates the thread and its tables when they are new.
        self.with_thread_state(tid, |_, _| ());
        let Process {
            threads,
            costs: tables,
            options,
            simulation,
            ..
        } = self;
        let Some(thread) = threads.get_mut(&tid) else {
            return;
        };
        let Some(costs) = tables.get_mut(&costs_key(options, thread.number)) else {
            return;
        };
        // What the runs reported since left counts where the thread is.
        if accesses.after_blocks() && !thread.run_misses.is_empty() {
            let left = thread.run_misses.take_left();
            count_here(thread, costs, &left);
        }
        for FilteredAccess {
            instruction: (addr, len),
            access,
            record,
        } in accesses
        {
            let step = match access {
                Some(access) => Step::Data(access),
                None => Step::Fetch(addr, len),
            };
            let (_, misses) = simulation.beyond_first_level(step).split_first();
            misses.for_each(|column| match record {
                0 => thread.count_at(costs, addr, column, 1),
                record => thread.run_misses.push(RunMiss {
                    record,
                    addr,
                    column: column as u32,
                    count: 1,
                }),
            });
        }
        thread.run_misses.compact();
    }

    /// Whole blocks run on thread `tid` whose fetches and accesses the
    /// backend filtered: each run through the call/return rules, costing
    /// its profile, its repeats added, then the misses of its record.
    pub(super) fn blocks_attributed(&mut self, tid: i32, blocks: &mut WholeBlocks<'_>) {
        // Creates the thread and its tables when they are new.
        self.with_thread_state(tid, |_, _| ());
        let width = self.events.len().min(MAX_EVENTS);
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
            blocks: blocks_run,
            ..
        } = self;
        let Some(thread) = threads.get_mut(&tid) else {
            return;
        };
        let costs_key = costs_key(options, thread.number);
        let Some(costs) = tables.get_mut(&costs_key) else {
            return;
        };
        for whole in blocks {
            *blocks_run += 1 + whole.repeats;
            let (key, addr, instructions) = (whole.key, whole.block.addr, whole.instructions);
            let known = keys.get(key, addr, instructions, || {
                functions.block(addr, symbols, *pid, options)
            });
            let run = known.run(instructions);
            let KnownBlock {
                info,
                table,
                every_run,
                ..
            } = known;
            let every_run = match every_run {
                Some(every_run) => every_run,
                None => every_run.insert(Box::new(every_run_of(simulation, &whole, width))),
            };
            let mut misses = std::mem::take(&mut thread.run_misses);
            let (before, own) = match (whole.record, misses.is_empty()) {
                (0, _) | (_, true) => (&[][..], &[][..]),
                (record, false) => misses.up_to(record),
            };
            count_here(thread, costs, before);
            let mut shared = Shared {
                functions,
                contexts,
                costs,
                costs_key,
                options,
                events,
                forest: forest.as_mut(),
            };
            let runs = ProfiledRuns {
                times: whole.repeats,
                run,
                profile: &every_run.profile,
            };
            thread.whole_block_profiled(&mut shared, &whole.block, *info, &runs, table);
            if whole.repeats > 0 {
                match whole.repeat {
                    Repeat::Again => {
                        thread.profiled_again(&mut shared, &whole.again, *info, &runs, table)
                    }
                    Repeat::InContext => thread.profiled_in_context(&mut shared, &runs, false),
                    Repeat::Calls => thread.profiled_in_context(&mut shared, &runs, true),
                }
            }
            count_here(thread, shared.costs, own);
            thread.run_misses = misses;
        }
    }
}

/// Counts `misses` at their instructions in `thread`'s current block.
fn count_here(thread: &mut ThreadState, costs: &Costs, misses: &[RunMiss]) {
    for miss in misses {
        thread.count_at(costs, miss.addr, miss.column as usize, miss.count);
    }
}

/// What every run of `whole` counts (`Simulation::every_run_events`),
/// with no fetch points (the backend filtered the fetches).
fn every_run_of(simulation: &Simulation, whole: &WholeBlock<'_>, width: usize) -> EveryRun {
    let instructions = whole.instructions;
    let mut profile = Profile::new(whole.key, instructions.len(), width);
    for (position, column) in simulation.every_run_events(instructions, whole.accesses()) {
        profile.count(position as usize, column as usize);
    }
    EveryRun {
        profile: Arc::new(profile),
        fetches: Box::default(),
    }
}
