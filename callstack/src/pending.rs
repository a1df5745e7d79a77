//! The instructions of a thread's current block that executed and are not
//! charged yet (Callgrind charges a block when the next one starts, and
//! never a thread's last block).
//!
//! A whole block whose instructions cost only their `Ir` is held as one run
//! of its cost table, as Callgrind's execution counters hold it: nothing is
//! copied per instruction, and charging it counts the run. So is a whole
//! block whose cost table has a profile ([`crate::costs::Profile`]): the
//! run costs the profile plus the few events beyond it (the simulators'
//! misses), kept as a list. Any event that needs an instruction's own
//! cost vector turns the run into a list first.

use crate::context::Centre;
use crate::costs::{add, Costs, Profile};
use crate::events::{CostArray, MAX_EVENTS};

/// The cost of an instruction that costs its `Ir` only.
const IR_ONLY: CostArray = {
    let mut cost = [0; MAX_EVENTS];
    cost[0] = 1;
    cost
};

/// How the pending instructions are held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    /// Their addresses, and their costs.
    Listed,
    /// Their addresses; each costs its `Ir` only (no cost vectors).
    Ir,
    /// `runs` runs of all `count` instructions of cost table `table`, each
    /// at its `Ir` only or, if the table has a profile, at the profile's
    /// counts plus `extras` (no addresses). Only a table with a profile
    /// has more than one run pending ([`Pending::repeat`]).
    Run {
        table: usize,
        count: usize,
        runs: u64,
    },
}

/// Events beyond a profile: `count` in `column` of the instruction at
/// `position`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Extra {
    position: u32,
    column: u32,
    count: u64,
}

/// Executed instructions not charged yet.
#[derive(Clone, Debug)]
pub(crate) struct Pending {
    form: Form,
    addrs: Vec<u64>,
    costs: Vec<CostArray>,
    /// With a run of a table with a profile: the events beyond it
    /// (instruction position, event column).
    extras: Vec<Extra>,
}

impl Default for Pending {
    fn default() -> Pending {
        Pending {
            form: Form::Listed,
            addrs: Vec::new(),
            costs: Vec::new(),
            extras: Vec::new(),
        }
    }
}

impl Pending {
    /// How many instructions are pending.
    #[inline]
    pub fn count(&self) -> usize {
        match self.form {
            Form::Run { count, runs, .. } => count * runs as usize,
            Form::Listed | Form::Ir => self.addrs.len(),
        }
    }

    /// Whether no instruction is pending.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.count() == 0
    }

    /// Forgets the pending instructions (charged, or never to be).
    #[inline]
    pub fn clear(&mut self) {
        self.form = Form::Listed;
        self.addrs.clear();
        self.costs.clear();
        self.extras.clear();
    }

    /// Turns a run into addresses: before the tables of `costs` are
    /// cleared, or when an instruction needs its own cost vector.
    pub fn detach(&mut self, costs: &Costs) {
        if let Form::Run { table, count, runs } = self.form {
            self.addrs.clear();
            let addrs = costs.block_addrs(table);
            self.addrs
                .extend_from_slice(&addrs[..count.min(addrs.len())]);
            self.form = Form::Ir;
            if let Some(profile) = costs.profile(table) {
                self.list_profile(profile, runs);
            }
        }
    }

    /// Lists the instructions of `runs` detached runs of a table with
    /// `profile`: each costs its row `runs` times, plus the extras.
    #[cold]
    fn list_profile(&mut self, profile: &Profile, runs: u64) {
        self.costs.clear();
        for position in 0..self.addrs.len() {
            let mut cost = [0; MAX_EVENTS];
            for (cell, count) in cost.iter_mut().zip(profile.row_times(position, runs)) {
                *cell = count;
            }
            self.costs.push(cost);
        }
        for extra in &self.extras {
            if let Some(cell) = self
                .costs
                .get_mut(extra.position as usize)
                .and_then(|cost| cost.get_mut(extra.column as usize))
            {
                *cell += extra.count;
            }
        }
        self.extras.clear();
        self.form = Form::Listed;
    }

    /// Gives every pending instruction its costs.
    #[inline]
    fn list(&mut self, costs: &Costs) {
        if self.form != Form::Listed {
            self.make_list(costs);
        }
    }

    /// [`Pending::list`] when they are not listed yet.
    #[cold]
    fn make_list(&mut self, costs: &Costs) {
        self.detach(costs);
        if self.form == Form::Ir {
            self.costs.clear();
            self.costs.resize(self.addrs.len(), IR_ONLY);
            self.form = Form::Listed;
        }
    }

    /// One more instruction, at `addr`, with zero costs.
    #[inline]
    pub fn push(&mut self, addr: u64, costs: &Costs) {
        self.list(costs);
        self.addrs.push(addr);
        self.costs.push([0; MAX_EVENTS]);
    }

    /// More instructions that cost their `Ir` only.
    pub fn push_ir(&mut self, instructions: &[(u64, u8)], costs: &Costs) {
        self.detach(costs);
        if self.is_empty() {
            self.form = Form::Ir;
        }
        self.addrs
            .extend(instructions.iter().map(|&(addr, _)| addr));
        if self.form == Form::Listed {
            self.costs
                .resize(self.costs.len() + instructions.len(), IR_ONLY);
        }
    }

    /// A whole run, at `Ir` only, of the `count` instructions of cost table
    /// `table`, which holds exactly them ([`Costs::holds_run`]), when
    /// nothing is pending.
    #[inline]
    pub fn push_run(&mut self, table: usize, count: usize) {
        debug_assert!(self.is_empty() && count > 0);
        self.form = Form::Run {
            table,
            count,
            runs: 1,
        };
    }

    /// Counts one more event in `column` of the instruction at `position`
    /// of a pending whole run of a table with a profile (see
    /// [`Pending::push_run`]).
    #[inline]
    pub fn count_extra(&mut self, position: usize, column: usize) {
        self.count_extras(position, column, 1);
    }

    /// `count` more events in `column` of the instruction at `position`
    /// of a pending whole run of a table with a profile.
    #[inline]
    fn count_extras(&mut self, position: usize, column: usize, count: u64) {
        self.extras.push(Extra {
            position: position as u32,
            column: column as u32,
            count,
        });
    }

    /// `count` more events in `column` of the pending instruction at
    /// `addr` (the last one there): extras of a run of a table with a
    /// profile, else in its listed cost (the last instruction's when none
    /// is at `addr`).
    pub fn count_at(&mut self, costs: &Costs, addr: u64, column: usize, count: u64) {
        if let Form::Run {
            table,
            count: instructions,
            ..
        } = self.form
        {
            let addrs = costs.block_addrs(table);
            let position = addrs[..instructions.min(addrs.len())]
                .iter()
                .position(|&at| at == addr);
            if let (Some(_), Some(position)) = (costs.profile(table), position) {
                self.count_extras(position, column, count);
                return;
            }
        }
        self.list(costs);
        let index = self.addrs.iter().rposition(|&at| at == addr);
        let cost = match index {
            Some(index) => self.costs.get_mut(index),
            None => self.costs.last_mut(),
        };
        if let Some(cell) = cost.and_then(|cost| cost.get_mut(column)) {
            *cell += count;
        }
    }

    /// The cost table, instruction count and number of runs of a pending
    /// whole run.
    #[inline]
    pub fn run(&self) -> Option<(usize, usize, u64)> {
        match self.form {
            Form::Run { table, count, runs } => Some((table, count, runs)),
            Form::Listed | Form::Ir => None,
        }
    }

    /// Replaces what is pending by a whole run of the `count` instructions
    /// of cost table `table` (which holds them, see [`Costs::holds_run`]).
    #[inline]
    pub fn replace_by_run(&mut self, table: usize, count: usize) {
        self.clear();
        self.form = Form::Run {
            table,
            count,
            runs: 1,
        };
    }

    /// `times` more runs of a pending whole run of a table with a
    /// profile: they are charged with the others, and their misses join
    /// theirs.
    #[inline]
    pub fn repeat(&mut self, times: u64) {
        if let Form::Run { runs, .. } = &mut self.form {
            *runs += times;
        }
    }

    /// The cost vector of `events` counts of the last pending instruction.
    #[inline]
    pub fn last_cost(&mut self, events: usize, costs: &Costs) -> Option<&mut [u64]> {
        self.list(costs);
        self.costs.last_mut()?.get_mut(..events)
    }

    /// Adds the pending costs to `total` (a thread's counter), from column
    /// `from` on; `costs` are the tables.
    #[inline]
    pub fn add_to(&self, costs: &Costs, total: &mut [u64], from: usize) {
        if let Form::Run { table, runs, .. } = self.form {
            if let Some(profile) = costs.profile(table) {
                if let (Some(total), Some(counts)) =
                    (total.get_mut(from..), profile.total.get(from..))
                {
                    if runs == 1 {
                        add(total, counts);
                    } else {
                        for (sum, count) in total.iter_mut().zip(counts) {
                            *sum = sum.wrapping_add(count.wrapping_mul(runs));
                        }
                    }
                }
                for extra in &self.extras {
                    let column = extra.column as usize;
                    match total.get_mut(column) {
                        Some(sum) if column >= from => *sum = sum.wrapping_add(extra.count),
                        _ => {}
                    }
                }
                return;
            }
        }
        match self.form {
            Form::Listed => {
                let Some(total) = total.get_mut(from..) else {
                    return;
                };
                for cost in &self.costs {
                    add(total, &cost[from..]);
                }
            }
            Form::Ir | Form::Run { .. } => {
                if from == 0 {
                    total[0] = total[0].wrapping_add(self.count() as u64);
                }
            }
        }
    }

    /// Charges every pending instruction to the instruction at `addr` in
    /// `centre` (the call into skipped code).
    pub fn charge_to(&mut self, costs: &mut Costs, centre: Centre, addr: u64, events: usize) {
        if matches!(self.form, Form::Run { table, .. } if costs.profile(table).is_some()) {
            self.list(costs);
        }
        match self.form {
            Form::Listed => {
                let width = events.min(MAX_EVENTS);
                for cost in &self.costs {
                    costs.charge(centre, addr, &cost[..width]);
                }
            }
            Form::Ir | Form::Run { .. } => {
                costs.charge_ir(centre, addr, self.count() as u64, events);
            }
        }
    }

    /// Charges the pending instructions to cost table `table`.
    pub fn charge_block(&mut self, costs: &mut Costs, table: usize, events: usize) {
        if let Form::Run {
            table: run,
            count,
            runs,
        } = self.form
        {
            if run == table && costs.count_runs(table, count, runs) {
                for extra in &self.extras {
                    let (position, column) = (extra.position as usize, extra.column as usize);
                    costs.count_in_block(table, position, column, extra.count);
                }
                return;
            }
        }
        self.list(costs);
        costs.charge_block(table, &self.addrs, &self.costs, events);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::Centre;

    /// Two events (`Ir`, `Dr`), a cost table of the two instructions of a
    /// block, and a profile of their runs: `Ir` each, one `Dr` for the
    /// first.
    fn table_with_profile() -> (Costs, usize, [(u64, u8); 2]) {
        let mut costs = Costs::default();
        let instructions = [(0x1000, 4), (0x1004, 2)];
        let table = costs.block(Centre { cxt: 0, rec: 0 }, 0x1000, 0);
        costs.charge_block(table, &[0x1000, 0x1004], &[[0; MAX_EVENTS]; 2], 2);
        let profile = std::sync::Arc::new(Profile {
            key: 7,
            rows: vec![1, 1, 1, 0],
            total: vec![2, 1],
        });
        assert!(costs.use_profile(table, &profile));
        // The table shares the block's profile, it has no copy of its own.
        assert_eq!(std::sync::Arc::strong_count(&profile), 2);
        (costs, table, instructions)
    }

    #[test]
    fn repeated_runs_cost_their_profile_each_plus_every_run_s_extras() {
        let (costs, table, instructions) = table_with_profile();
        let mut pending = Pending::default();
        assert!(costs.holds_run(table, &instructions));
        pending.push_run(table, instructions.len());
        pending.count_extra(1, 1);
        pending.repeat(2);
        pending.count_extra(0, 1);
        assert_eq!(pending.run(), Some((table, 2, 3)));
        assert_eq!(pending.count(), 6);
        let mut total = vec![0; 2];
        pending.add_to(&costs, &mut total, 0);
        assert_eq!(total, [6, 5]);
        // Listed (as before a dump), each instruction costs its row three
        // times plus its extras, and the sum is the same.
        pending.detach(&costs);
        let mut listed = vec![0; 2];
        pending.add_to(&costs, &mut listed, 0);
        assert_eq!(listed, total);
        assert_eq!(
            pending.last_cost(2, &costs).map(|cost| cost.to_vec()),
            Some(vec![3, 1])
        );
    }

    #[test]
    fn events_counted_at_an_address_go_to_that_instruction_in_either_form() {
        let (costs, table, instructions) = table_with_profile();
        // A run: extras of the instruction at that address.
        let mut run = Pending::default();
        assert!(costs.holds_run(table, &instructions));
        run.push_run(table, instructions.len());
        run.count_at(&costs, 0x1004, 1, 3);
        run.count_at(&costs, 0x1000, 1, 1);
        assert_eq!(run.run(), Some((table, 2, 1)));
        let mut total = vec![0; 2];
        run.add_to(&costs, &mut total, 0);
        assert_eq!(total, [2, 5]);
        run.detach(&costs);
        assert_eq!(
            run.last_cost(2, &costs).map(|cost| cost.to_vec()),
            Some(vec![1, 3])
        );
        // Listed: in the cost of the last instruction at that address, or
        // of the last one when none is there.
        let mut listed = Pending::default();
        listed.push(0x1000, &costs);
        listed.push(0x1004, &costs);
        listed.count_at(&costs, 0x1000, 1, 2);
        listed.count_at(&costs, 0x2000, 0, 1);
        let mut total = vec![0; 2];
        listed.add_to(&costs, &mut total, 0);
        assert_eq!(total, [1, 2]);
        assert_eq!(
            listed.last_cost(2, &costs).map(|cost| cost.to_vec()),
            Some(vec![1, 0])
        );
    }
}
