//! Whole runs whose events are what every run counts (a [`Profile`]) plus
//! misses that come apart (`Options::filtered` with Callgrind's
//! attribution): each run pending as [`ThreadState::whole_block_simulated`]
//! makes it, or instruction by instruction; repeats added to it as the
//! runs of `Ir` alone are (`ThreadState::whole_block_ir_again`,
//! `ThreadState::runs_in_context`); misses counted at their instructions
//! ([`ThreadState::count_at`]).

use std::sync::Arc;

use cgx_engine::Block;

use super::{Listed, Shared, ThreadState};
use crate::costs::{Costs, Profile};
use crate::functions::BlockInfo;

/// Runs of a block that repeat one, and what each costs.
pub(crate) struct ProfiledRuns<'a> {
    /// How many.
    pub times: u64,
    /// The block's instructions.
    pub run: Listed<'a>,
    /// What every run counts.
    pub profile: &'a Arc<Profile>,
}

impl ThreadState {
    /// A whole run of `block` that costs `profile`: pending as one run of
    /// its cost table when it can be (`cached` as for
    /// [`ThreadState::whole_block_simulated`]), else its instructions one
    /// by one, each with its row of the profile.
    pub fn whole_block_profiled(
        &mut self,
        shared: &mut Shared<'_>,
        block: &Block,
        info: BlockInfo,
        runs: &ProfiledRuns<'_>,
        cached: &mut Option<super::RunTable>,
    ) {
        let (run, profile) = (runs.run, runs.profile);
        if !self.whole_block_simulated(shared, block, info, run, Some(profile), cached) {
            self.listed_run(shared.costs, run.all, profile);
        }
    }

    /// `runs.times` more runs of the block that has just run whole, each
    /// starting at `again` (`Repeat::Again`): added to the pending run
    /// once one continues it (the others then do the same), else one by
    /// one.
    pub fn profiled_again(
        &mut self,
        shared: &mut Shared<'_>,
        again: &Block,
        info: BlockInfo,
        runs: &ProfiledRuns<'_>,
        cached: &mut Option<super::RunTable>,
    ) {
        let (run, profile) = (runs.run, runs.profile);
        let mut left = runs.times;
        while left > 0 {
            left -= 1;
            if self.continue_run(shared, again, info, run, Some(profile), cached) {
                if self.add_runs(shared.costs, run.all.len(), left) {
                    return;
                }
            } else {
                self.enter_block(shared, again.addr, again.sp, again.arrival, info);
                if !self.simulated_run(shared, run, profile, cached) {
                    self.listed_run(shared.costs, run.all, profile);
                }
            }
        }
    }

    /// `runs.times` more runs of the block that has just run whole, in its
    /// context (`Repeat::InContext`); with `calls`, each followed by the
    /// same call, whole (`Repeat::Calls`), as
    /// `ThreadState::runs_in_context` counts runs of `Ir` alone.
    pub fn profiled_in_context(
        &mut self,
        shared: &mut Shared<'_>,
        runs: &ProfiledRuns<'_>,
        calls: bool,
    ) {
        if calls {
            self.repeated_calls = runs.times;
        }
        let count = runs.run.all.len();
        if self.add_runs(shared.costs, count, runs.times) {
            return;
        }
        // Run by run (skipped code, collection off), each charged before
        // the next.
        for _ in 0..runs.times {
            self.charge_pending(shared);
            self.listed_run(shared.costs, runs.run.all, runs.profile);
        }
    }

    /// `times` more runs pending with the current block's pending whole
    /// run of `count` instructions, when it is one of a table with a
    /// profile and the thread collects; `false`, having done nothing,
    /// otherwise.
    fn add_runs(&mut self, costs: &Costs, count: usize, times: u64) -> bool {
        let state = self.state();
        let collect = state.collect;
        let Some(block) = state.block.as_mut() else {
            return false;
        };
        match block.pending.run() {
            Some((table, pending, _))
                if collect && pending == count && costs.profile(table).is_some() =>
            {
                block.pending.repeat(times);
                true
            }
            _ => false,
        }
    }

    /// The current block's `instructions`, each pending with its row of
    /// `profile`.
    fn listed_run(&mut self, costs: &Costs, instructions: &[(u64, u8)], profile: &Profile) {
        for (position, &(addr, len)) in instructions.iter().enumerate() {
            self.instruction(costs, addr, len);
            if let Some(cost) = self.last_cost(costs) {
                for (cell, count) in cost.iter_mut().zip(profile.row_times(position, 1)) {
                    *cell += count;
                }
            }
        }
    }

    /// `count` more events in `column` of the current block's pending
    /// instruction at `addr`.
    pub fn count_at(&mut self, costs: &Costs, addr: u64, column: usize, count: u64) {
        if let Some(block) = self.state().block.as_mut() {
            block.pending.count_at(costs, addr, column, count);
        }
    }
}
