//! The cost tables: self cost per (centre, instruction) and the call arcs
//! (Callgrind's JCCs) with their call counts and inclusive costs.

use rustc_hash::FxHashMap;

use crate::context::Centre;

/// A call arc: from a call site in a centre to a block of a centre.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct CallArc {
    /// The calling centre.
    pub from: Centre,
    /// The address of the calling instruction.
    pub site: u64,
    /// The called centre.
    pub to: Centre,
    /// The address of the first block executed in the callee.
    pub target: u64,
}

/// A jump (`--collect-jumps=yes`): from the exit of a block in a centre to a
/// block of a centre.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct JumpArc {
    /// The centre the jump was made in.
    pub from: Centre,
    /// The block it left.
    pub from_block: u64,
    /// The address of the jump instruction.
    pub site: u64,
    /// The centre of the target.
    pub to: Centre,
    /// The address jumped to.
    pub target: u64,
}

/// What a jump accumulated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct JumpCount {
    /// Times it was taken.
    pub taken: u64,
    /// Whether it is a conditional jump (`jcnd=`) rather than `jump=`.
    pub conditional: bool,
}

/// A call arc with the key of its cost table (the thread's number with
/// `--separate-threads=yes`, else 0): what a back-dating node stands for.
pub(crate) type ArcKey = (u32, CallArc);

/// What an arc accumulated.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ArcCost {
    /// Calls made.
    pub count: u64,
    /// Inclusive cost of those calls (returned or, at a dump, still active).
    pub inclusive: Vec<u64>,
}

/// Self and inclusive costs of one process (or one thread with
/// `--separate-threads=yes`).
#[derive(Clone, Debug, Default)]
pub(crate) struct Costs {
    /// Self cost per centre and instruction address.
    pub self_costs: FxHashMap<(Centre, u64), Vec<u64>>,
    /// The call arcs.
    pub arcs: FxHashMap<CallArc, ArcCost>,
    /// The jumps taken, with `--collect-jumps=yes`.
    pub jumps: FxHashMap<JumpArc, JumpCount>,
    /// Executions of each block in each centre, with `--collect-jumps=yes`
    /// (how often a conditional jump was reached).
    pub block_executions: FxHashMap<(Centre, u64), u64>,
}

impl Costs {
    /// Adds `costs` to the self cost of the instruction at `addr` in `centre`.
    pub fn charge(&mut self, centre: Centre, addr: u64, costs: &[u64]) {
        let entry = self
            .self_costs
            .entry((centre, addr))
            .or_insert_with(|| vec![0; costs.len()]);
        add(entry, costs);
    }

    /// Counts one call along `arc`.
    pub fn count_call(&mut self, arc: CallArc) {
        self.arcs.entry(arc).or_default().count += 1;
    }

    /// Adds `now − before` to the inclusive cost of `arc`.
    pub fn add_inclusive(&mut self, arc: CallArc, before: &[u64], now: &[u64]) {
        let entry = self.arcs.entry(arc).or_default();
        if entry.inclusive.len() < now.len() {
            entry.inclusive.resize(now.len(), 0);
        }
        for ((sum, new), old) in entry.inclusive.iter_mut().zip(now).zip(before) {
            *sum = sum.wrapping_add(new.wrapping_sub(*old));
        }
    }

    /// Adds `values` to the inclusive cost of `arc` in `columns` (cache use,
    /// known only when lines are evicted).
    pub fn add_to_inclusive(&mut self, arc: CallArc, columns: &[usize], values: &[u64]) {
        let entry = self.arcs.entry(arc).or_default();
        for (&column, &value) in columns.iter().zip(values) {
            if entry.inclusive.len() <= column {
                entry.inclusive.resize(column + 1, 0);
            }
            entry.inclusive[column] += value;
        }
    }

    /// Counts one taken jump along `jump`.
    pub fn count_jump(&mut self, jump: JumpArc, conditional: bool) {
        let entry = self.jumps.entry(jump).or_default();
        entry.taken += 1;
        entry.conditional = conditional;
    }

    /// Counts one execution of `block` in `centre`.
    pub fn count_execution(&mut self, centre: Centre, block: u64) {
        *self.block_executions.entry((centre, block)).or_default() += 1;
    }

    /// Forgets all costs (after a dump, or `CALLGRIND_ZERO_STATS`).
    pub fn clear(&mut self) {
        self.self_costs.clear();
        self.arcs.clear();
        self.jumps.clear();
        self.block_executions.clear();
    }
}

/// Adds `costs` to `sum` column by column.
pub(crate) fn add(sum: &mut [u64], costs: &[u64]) {
    for (total, cost) in sum.iter_mut().zip(costs) {
        *total = total.wrapping_add(*cost);
    }
}
