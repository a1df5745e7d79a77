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

    /// Forgets all costs (after a dump, or `CALLGRIND_ZERO_STATS`).
    pub fn clear(&mut self) {
        self.self_costs.clear();
        self.arcs.clear();
    }
}

/// Adds `costs` to `sum` column by column.
pub(crate) fn add(sum: &mut [u64], costs: &[u64]) {
    for (total, cost) in sum.iter_mut().zip(costs) {
        *total = total.wrapping_add(*cost);
    }
}
