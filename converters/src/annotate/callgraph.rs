//! Inclusive costs and call arcs, from the `calls=` lines of Callgrind profiles.
//!
//! Functions are keyed like the rest of the report: (file, function name), where
//! the file is that of the cost line (`fl=`, or `fi=`/`fe=` for code inlined from
//! another file); a call goes to the callee's (`cfi=`/`cfl=` file, `cfn=` name).
//!
//! The inclusive cost of a function is the summed cost of the calls to it, when
//! there are any: that is what it cost while it ran, as Callgrind measured it. A
//! function nobody calls (the root of a thread, `(below main)`, code inlined from
//! another file) has no such calls; its inclusive cost is its self cost plus the
//! cost of the calls it makes — for a function's own file, of the whole function
//! (its inlined code included); for an inlined file, of the lines in that file.
//! Both are how callgrind_annotate computes it, and they agree where Callgrind's
//! counts add up; they differ where they do not (Callgrind gives calls no
//! cache-use costs, system time is counted on calls only, a thread's first
//! function is called in one thread and runs in another), and there the cost of
//! the calls is the better measure.
//!
//! Recursion: the calls to a function include its calls to itself, so the
//! inclusive cost of a recursive function counts the nested activations again.
//! Callgrind names the second and deeper activations `fn'2` (`--separate-recs`),
//! so the outermost `fn` has the exact figure and `fn'2` the sum over its
//! activations (as callgrind_annotate and KCachegrind show them). Calls with a
//! count of 0 (calls in progress when a dump was made) add their cost and no
//! count.

use rustc_hash::FxHashMap;

use super::table::{add_unsigned, CostTable};

/// A function as the report keys it: (file id, function id).
pub(crate) type Row = (u32, u32);

/// The inclusive costs and call arcs of the profiles.
#[derive(Debug)]
pub(crate) struct CallGraph {
    /// Self cost plus the cost of the calls made, by row.
    own: CostTable<Row>,
    /// The cost of the calls to each row.
    incoming: CostTable<Row>,
    /// Calls: the summed inclusive cost of the calls by (caller, callee).
    pub arcs: CostTable<(Row, Row)>,
    /// The summed call counts, by slot of `arcs`.
    pub arc_counts: Vec<i64>,
    /// The object (executable or library) of each row, where known.
    pub objects: FxHashMap<Row, u32>,
    keep_arcs: bool,
    current: Current,
}

/// The function whose records are being read.
#[derive(Debug, Default)]
struct Current {
    home: Row,
    object: u32,
    whole: Vec<i64>,
    /// Files of inlined code and their costs (`width` counts each).
    fragment_files: Vec<u32>,
    fragment_costs: Vec<i64>,
}

impl CallGraph {
    /// An empty graph of `width` events; arcs are kept only if `keep_arcs`.
    pub fn new(width: usize, keep_arcs: bool) -> CallGraph {
        CallGraph {
            own: CostTable::new(width),
            incoming: CostTable::new(width),
            arcs: CostTable::new(width),
            arc_counts: Vec::new(),
            objects: FxHashMap::default(),
            keep_arcs,
            current: Current {
                whole: vec![0; width],
                ..Current::default()
            },
        }
    }

    /// Starts the records of the function `home` (its own file and name) in `object`.
    pub fn begin(&mut self, home: Row, object: u32) {
        let current = &mut self.current;
        current.home = home;
        current.object = object;
        current.whole.iter_mut().for_each(|c| *c = 0);
        current.fragment_files.clear();
        current.fragment_costs.clear();
    }

    /// Self cost on a line in `file`.
    pub fn cost(&mut self, file: u32, costs: &[u64], sign: i64) {
        self.account(file, costs, sign);
    }

    /// Calls from a line in `file` to `callee`, `count` times, costing `inclusive`.
    pub fn call(
        &mut self,
        file: u32,
        callee: Row,
        callee_object: u32,
        count: u64,
        inclusive: &[u64],
        sign: i64,
    ) {
        self.account(file, inclusive, sign);
        let slot = self.incoming.slot(callee);
        self.incoming.add_unsigned(slot, inclusive, sign);
        self.objects.entry(callee).or_insert(callee_object);
        if self.keep_arcs {
            let caller = (file, self.current.home.1);
            let slot = self.arcs.slot((caller, callee));
            self.arcs.add_unsigned(slot, inclusive, sign);
            let slot = slot as usize;
            if slot >= self.arc_counts.len() {
                self.arc_counts.resize(slot + 1, 0);
            }
            self.arc_counts[slot] =
                self.arc_counts[slot].wrapping_add((count as i64).wrapping_mul(sign));
        }
    }

    fn account(&mut self, file: u32, costs: &[u64], sign: i64) {
        let current = &mut self.current;
        add_unsigned(&mut current.whole, costs, sign);
        if file == current.home.0 {
            return;
        }
        let width = current.whole.len();
        let index = match current.fragment_files.iter().position(|&f| f == file) {
            Some(index) => index,
            None => {
                current.fragment_files.push(file);
                current
                    .fragment_costs
                    .resize(current.fragment_costs.len() + width, 0);
                current.fragment_files.len() - 1
            }
        };
        add_unsigned(
            &mut current.fragment_costs[index * width..(index + 1) * width],
            costs,
            sign,
        );
    }

    /// Ends the records of the current function.
    pub fn end(&mut self) {
        let current = &self.current;
        let name = current.home.1;
        let slot = self.own.slot(current.home);
        self.own.add(slot, &current.whole);
        self.objects.entry(current.home).or_insert(current.object);
        let width = current.whole.len();
        for (index, &file) in current.fragment_files.iter().enumerate() {
            let row = (file, name);
            let slot = self.own.slot(row);
            self.own.add(
                slot,
                &current.fragment_costs[index * width..(index + 1) * width],
            );
            self.objects.entry(row).or_insert(current.object);
        }
    }

    /// The inclusive cost of every function: the cost of the calls to it, or
    /// where there are none, its own cost and that of the calls it makes.
    pub fn inclusive(&self) -> CostTable<Row> {
        let mut inclusive = CostTable::new(self.own.width());
        for (row, cc) in self.own.iter() {
            let slot = inclusive.slot(row);
            inclusive.add(slot, self.incoming.lookup(&row).unwrap_or(cc));
        }
        for (row, cc) in self.incoming.iter() {
            if self.own.lookup(&row).is_none() {
                let slot = inclusive.slot(row);
                inclusive.add(slot, cc);
            }
        }
        inclusive
    }

    /// The summed call count of the arc in `slot`.
    pub fn count(&self, slot: u32) -> i64 {
        self.arc_counts.get(slot as usize).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_functions_and_inlined_fragments() {
        // main (file 0, fn 10) with inlined code from file 1, calling f (0, 11).
        let mut graph = CallGraph::new(1, true);
        graph.begin((0, 10), 7);
        graph.cost(0, &[5], 1);
        graph.cost(1, &[3], 1);
        graph.call(0, (0, 11), 7, 2, &[40], 1);
        graph.call(1, (0, 11), 7, 1, &[20], 1);
        graph.end();
        graph.begin((0, 11), 7);
        graph.cost(0, &[60], 1);
        graph.end();
        let inclusive = graph.inclusive();
        // main is called by nobody: the whole function, and its inlined fragment.
        assert_eq!(inclusive.lookup(&(0, 10)), Some(&[68][..]));
        assert_eq!(inclusive.lookup(&(1, 10)), Some(&[23][..]));
        // f: the cost of the calls to it, which the profile says was 60.
        assert_eq!(inclusive.lookup(&(0, 11)), Some(&[60][..]));
        let arcs: Vec<_> = graph
            .arcs
            .slots()
            .map(|(key, slot)| (key, graph.arcs.get(slot)[0], graph.count(slot)))
            .collect();
        assert_eq!(
            arcs,
            [(((0, 10), (0, 11)), 40, 2), (((1, 10), (0, 11)), 20, 1)]
        );
    }

    #[test]
    fn signs_subtract() {
        let mut graph = CallGraph::new(1, true);
        graph.begin((0, 1), 0);
        graph.call(0, (0, 2), 0, 3, &[9], -1);
        graph.end();
        let inclusive = graph.inclusive();
        assert_eq!(inclusive.lookup(&(0, 1)), Some(&[-9][..]));
        assert_eq!(inclusive.lookup(&(0, 2)), Some(&[-9][..]));
        assert_eq!(graph.count(0), -3);
    }

    #[test]
    fn calls_to_a_function_give_its_inclusive_cost() {
        // g's own lines say 5, but the calls to it cost 7 (e.g. system time,
        // which Callgrind counts on calls only).
        let mut graph = CallGraph::new(1, false);
        graph.begin((0, 1), 0);
        graph.call(0, (0, 2), 0, 1, &[7], 1);
        graph.end();
        graph.begin((0, 2), 0);
        graph.cost(0, &[5], 1);
        graph.end();
        let inclusive = graph.inclusive();
        assert_eq!(inclusive.lookup(&(0, 2)), Some(&[7][..]));
        assert_eq!(inclusive.lookup(&(0, 1)), Some(&[7][..]));
    }
}
