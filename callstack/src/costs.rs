//! The cost tables: self cost per (centre, instruction) and the call arcs
//! (Callgrind's JCCs) with their call counts and inclusive costs.

use std::sync::Arc;

use indexmap::IndexMap;
use rustc_hash::{FxBuildHasher, FxHashMap, FxHashSet};

use crate::context::Centre;
use crate::events::{CostArray, MAX_EVENTS};
use crate::sequences::Sequences;

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

/// The slots of [`Costs`]'s cache of recent call arcs.
const RECENT_ARCS: usize = 256;

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

impl ArcCost {
    /// Whether a dump writes it (a `calls=` line): when its inclusive cost
    /// is not zero, as Callgrind writes its call arcs.
    pub fn dumped(&self) -> bool {
        self.inclusive.iter().any(|&cost| cost != 0)
    }
}

/// The self costs of one block executed in one centre (Callgrind's BBCC):
/// its instructions in execution order, each with its event counts. A block
/// always runs the same instructions from its start, so the k-th instruction
/// executed is charged at position k without a lookup.
///
/// Like Callgrind's execution counters, whole runs are counted, not added
/// per instruction: each adds 1 to the `Ir` of every instruction in `addrs`
/// (which only grows once they are settled), or, once the block has a
/// [`Profile`], the profile's counts.
#[derive(Clone, Debug)]
pub(crate) struct BlockCosts {
    /// The centre the block ran in.
    pub centre: Centre,
    /// Its instructions' addresses, as far as it has run.
    pub addrs: Vec<u64>,
    /// One vector of event counts per instruction, one after another.
    pub costs: Vec<u64>,
    /// Runs of all of `addrs` not yet in `costs`.
    pub runs: u64,
    /// What each of those runs costs besides `Ir` alone, when simulations
    /// count more (set once: a block's runs always cost the same).
    pub profile: Option<Arc<Profile>>,
}

/// The events every run of a block counts whatever the simulators decide
/// (`Ir`, `Dr`, `Dw`, `Bc`, `Bi`; not their misses), per instruction, for
/// the block-based backend's block of `key`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Profile {
    /// The backend's block key it was made for.
    pub key: u32,
    /// One vector of counts per instruction, one after another (a run of
    /// one instruction counts a few of each event: 32 bits hold them).
    pub rows: Vec<u32>,
    /// Their sum per event.
    pub total: Vec<u64>,
}

impl Profile {
    /// A profile of `count` instructions with `width` events, counting
    /// nothing yet.
    pub fn new(key: u32, count: usize, width: usize) -> Profile {
        Profile {
            key,
            rows: vec![0; count * width],
            total: vec![0; width],
        }
    }

    /// The counts of the instruction at `position` (empty past the last).
    pub fn row(&self, position: usize) -> &[u32] {
        let width = self.total.len();
        self.rows
            .get(position * width..(position + 1) * width)
            .unwrap_or_default()
    }

    /// What `runs` runs of the instruction at `position` count, event by
    /// event (counts of 32 bits, products of 64).
    pub fn row_times(&self, position: usize, runs: u64) -> impl Iterator<Item = u64> + '_ {
        self.row(position)
            .iter()
            .map(move |&count| u64::from(count).wrapping_mul(runs))
    }

    /// Counts `column` for the instruction at `position`.
    pub fn count(&mut self, position: usize, column: usize) {
        let width = self.total.len();
        if let (Some(cell), Some(sum)) = (
            self.rows.get_mut(position * width + column),
            self.total.get_mut(column),
        ) {
            *cell = cell.saturating_add(1);
            *sum += 1;
        }
    }
}

impl BlockCosts {
    /// The width of the cost vectors (0 before the first instruction).
    fn width(&self) -> usize {
        self.costs.len().checked_div(self.addrs.len()).unwrap_or(0)
    }

    /// Adds the counted runs to the instructions' costs.
    fn settle_runs(&mut self) {
        let width = self.width();
        if self.runs == 0 || width == 0 {
            return;
        }
        match &self.profile {
            Some(profile) => {
                let instructions = self.addrs.len();
                let costs = (0..instructions).flat_map(|at| profile.row_times(at, self.runs));
                for (sum, cost) in self.costs.iter_mut().zip(costs) {
                    *sum = sum.wrapping_add(cost);
                }
            }
            None => {
                for ir in self.costs.iter_mut().step_by(width) {
                    *ir = ir.wrapping_add(self.runs);
                }
            }
        }
        self.runs = 0;
    }

    /// What `runs` runs of the instruction at `position` cost, added to
    /// `sum`.
    fn add_runs_of(&self, position: usize, runs: u64, sum: &mut [u64]) {
        match &self.profile {
            Some(profile) => {
                for (sum, cost) in sum.iter_mut().zip(profile.row_times(position, runs)) {
                    *sum = sum.wrapping_add(cost);
                }
            }
            None => {
                if let Some(ir) = sum.first_mut() {
                    *ir = ir.wrapping_add(runs);
                }
            }
        }
    }
}

/// The self costs of a dump by centre and instruction address, in that
/// order: one row of counts (all of one width) per instruction, summed one
/// centre at a time (the rows of all centres at once would be the largest
/// table of a dump).
#[derive(Debug)]
pub(crate) struct SelfCosts<'a> {
    costs: &'a Costs,
    /// The instruction sequences whose runs `costs` counts.
    sequences: &'a Sequences,
    /// The blocks with costs, the slots and the sequences run, by centre.
    order: Vec<(Centre, Charged)>,
    width: usize,
}

/// Where self costs of a centre are kept: a block's cost table or a slot,
/// by its index in [`Costs`], or the runs of an instruction sequence, by
/// its number in [`Sequences`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Charged {
    Block(usize),
    Slot(usize),
    Sequence(usize),
}

impl SelfCosts<'_> {
    /// The counts of each row.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Calls `each` with each centre and instruction address and its
    /// counts, in order, up to the first error.
    pub fn try_for_each<E>(
        &self,
        mut each: impl FnMut((Centre, u64), &[u64]) -> Result<(), E>,
    ) -> Result<(), E> {
        let (costs, sequences, width) = (self.costs, self.sequences, self.width);
        let slot_width = costs.slot_width.max(1);
        let slot = |slot: usize| {
            let cost = costs
                .slot_costs
                .get(slot * slot_width..(slot + 1) * slot_width);
            Some((costs.slot_keys.get(slot)?.1, cost?))
        };
        let mut addrs: Vec<u64> = Vec::new();
        let mut rows: Vec<u64> = Vec::new();
        for group in self.order.chunk_by(|a, b| a.0 == b.0) {
            let centre = group[0].0;
            addrs.clear();
            for &(_, charged) in group {
                match charged {
                    Charged::Block(index) => addrs.extend_from_slice(costs.block_addrs(index)),
                    Charged::Slot(index) => addrs.extend(slot(index).map(|(addr, _)| addr)),
                    Charged::Sequence(number) => addrs.extend(
                        sequences
                            .instructions(number)
                            .iter()
                            .filter(|&&(of, _)| of == centre)
                            .map(|&(_, addr)| addr),
                    ),
                }
            }
            addrs.sort_unstable();
            addrs.dedup();
            rows.clear();
            rows.resize(addrs.len() * width, 0);
            // Every address is in `addrs`.
            let row = |addr: u64| {
                let index = addrs.binary_search(&addr).unwrap_or_default();
                index * width..(index + 1) * width
            };
            for &(_, charged) in group {
                match charged {
                    Charged::Block(index) => {
                        let Some(block) = costs.blocks.get(index) else {
                            continue;
                        };
                        let costs = block.costs.chunks_exact(block.width());
                        for (position, (addr, cost)) in block.addrs.iter().zip(costs).enumerate() {
                            let sum = &mut rows[row(*addr)];
                            add(sum, cost);
                            block.add_runs_of(position, block.runs, sum);
                        }
                    }
                    Charged::Slot(index) => {
                        if let Some((addr, cost)) = slot(index) {
                            add(&mut rows[row(addr)], cost);
                        }
                    }
                    Charged::Sequence(number) => {
                        let runs = costs.sequence_runs.get(number).copied().unwrap_or(0);
                        sequences.for_each_event(number, |(of, addr), column| {
                            if of == centre {
                                if let Some(sum) = rows[row(addr)].get_mut(column) {
                                    *sum = sum.wrapping_add(runs);
                                }
                            }
                        });
                    }
                }
            }
            for (addr, cost) in addrs.iter().zip(rows.chunks_exact(width)) {
                each((centre, *addr), cost)?;
            }
        }
        Ok(())
    }
}

/// Self and inclusive costs of one process (or one thread with
/// `--separate-threads=yes`).
#[derive(Clone, Debug, Default)]
pub(crate) struct Costs {
    /// Self cost charged outside blocks (skipped code's call sites,
    /// cache-use charges, Cachegrind's attribution), per centre and
    /// instruction address: its slot, numbered in order.
    slot_index: FxHashMap<(Centre, u64), usize>,
    /// The centre and instruction of each slot.
    slot_keys: Vec<(Centre, u64)>,
    /// The cost vectors of the slots, one after another, `slot_width`
    /// events each.
    slot_costs: Vec<u64>,
    slot_width: usize,
    /// Self cost of executed blocks.
    pub blocks: Vec<BlockCosts>,
    block_index: FxHashMap<(Centre, u64), usize>,
    /// The table last used for each block number ([`crate::functions::BlockInfo`]),
    /// `u32::MAX` for none: a block usually runs in the same centre again.
    recent: Vec<u32>,
    /// Changes whenever the tables are cleared, so a kept block number can
    /// be checked.
    pub generation: u64,
    /// The call arcs, numbered in order.
    pub arcs: IndexMap<CallArc, ArcCost, FxBuildHasher>,
    /// A direct-mapped cache of `arcs` ([`RECENT_ARCS`] numbers, by call
    /// site and target, empty until the first call): a call site usually
    /// calls along the same arc again.
    recent_arcs: Vec<u32>,
    /// The jumps taken, with `--collect-jumps=yes`.
    pub jumps: FxHashMap<JumpArc, JumpCount>,
    /// Runs of each instruction sequence of the process, by its number
    /// ([`crate::sequences::Sequences`]), charged to its instructions as the
    /// self costs are read.
    sequence_runs: Vec<u64>,
    /// Executions of each block in each centre, with `--collect-jumps=yes`
    /// (how often a conditional jump was reached).
    pub block_executions: FxHashMap<(Centre, u64), u64>,
}

impl Costs {
    /// Adds `costs` to the self cost of the instruction at `addr` in `centre`.
    pub fn charge(&mut self, centre: Centre, addr: u64, costs: &[u64]) {
        let slot = self.slot(centre, addr, costs.len());
        add(self.slot_cost(slot), costs);
    }

    /// Adds `ir` to the `Ir` (column 0) of the instruction at `addr` in
    /// `centre`, in cost vectors of `width` events.
    pub fn charge_ir(&mut self, centre: Centre, addr: u64, ir: u64, width: usize) {
        self.charge_column(centre, addr, 0, ir, width);
    }

    /// Adds `amount` to `column` of the instruction at `addr` in `centre`,
    /// in cost vectors of `width` events.
    pub fn charge_column(
        &mut self,
        centre: Centre,
        addr: u64,
        column: usize,
        amount: u64,
        width: usize,
    ) {
        let slot = self.slot(centre, addr, width);
        if let Some(sum) = self.slot_cost(slot).get_mut(column) {
            *sum = sum.wrapping_add(amount);
        }
    }

    /// The slot of the self cost of the instruction at `addr` in `centre`
    /// (made, zero, when new), valid until the tables are cleared; the
    /// first slot sets the width of all (`width` events).
    pub fn slot(&mut self, centre: Centre, addr: u64, width: usize) -> usize {
        if self.slot_keys.is_empty() {
            self.slot_width = width;
        }
        let Costs {
            slot_index,
            slot_keys,
            slot_costs,
            slot_width,
            ..
        } = self;
        *slot_index.entry((centre, addr)).or_insert_with(|| {
            slot_keys.push((centre, addr));
            slot_costs.resize(slot_costs.len() + *slot_width, 0);
            slot_keys.len() - 1
        })
    }

    /// Adds 1 to event `column` of slot `slot` (nothing if there is no such
    /// slot or event).
    #[inline]
    pub fn count_in_slot(&mut self, slot: usize, column: usize) {
        if column < self.slot_width {
            if let Some(sum) = self.slot_costs.get_mut(slot * self.slot_width + column) {
                *sum += 1;
            }
        }
    }

    /// Where event `column` of slot `slot` is among the slots' counts, for
    /// [`Costs::count_in_cells`] (valid until the tables are cleared).
    pub fn slot_cell(&self, slot: usize, column: usize) -> Option<usize> {
        let cell = slot * self.slot_width + column;
        (column < self.slot_width && cell < self.slot_costs.len()).then_some(cell)
    }

    /// Adds `times` to each of the slots' counts at `cells`
    /// ([`Costs::slot_cell`]).
    #[inline]
    pub fn count_in_cells(&mut self, cells: &[usize], times: u64) {
        for &cell in cells {
            if let Some(sum) = self.slot_costs.get_mut(cell) {
                *sum = sum.wrapping_add(times);
            }
        }
    }

    /// The cost vector of slot `slot` (empty if there is no such slot).
    #[inline]
    fn slot_cost(&mut self, slot: usize) -> &mut [u64] {
        let width = self.slot_width;
        self.slot_costs
            .get_mut(slot * width..(slot + 1) * width)
            .unwrap_or_default()
    }

    /// The number of the cost table of the block at `addr` (numbered
    /// `number` in its process) in `centre`.
    #[inline]
    pub fn block(&mut self, centre: Centre, addr: u64, number: u32) -> usize {
        if let Some(&table) = self.recent.get(number as usize) {
            if let Some(block) = self.blocks.get(table as usize) {
                if block.centre == centre {
                    return table as usize;
                }
            }
        }
        self.find_block(centre, addr, number)
    }

    /// The cost table [`Costs::block`] gives without creating one: that of
    /// the block numbered `number` when it last ran in `centre`.
    #[inline]
    pub fn recent_block(&self, centre: Centre, number: u32) -> Option<usize> {
        let table = *self.recent.get(number as usize)? as usize;
        (self.blocks.get(table)?.centre == centre).then_some(table)
    }

    /// Whether cost table `index` holds exactly `instructions` (a whole run
    /// of them may be counted there).
    #[inline]
    pub fn holds_run(&self, index: usize, instructions: &[(u64, u8)]) -> bool {
        let addrs = self.block_addrs(index);
        addrs.len() == instructions.len()
            && addrs
                .iter()
                .zip(instructions)
                .all(|(&known, &(addr, _))| known == addr)
    }

    /// Whether cost table `index` holds `count` instructions.
    #[inline]
    pub fn holds_count(&self, index: usize, count: usize) -> bool {
        self.block_addrs(index).len() == count
    }

    /// [`Costs::block`] for a block not run in `centre` last.
    #[cold]
    fn find_block(&mut self, centre: Centre, addr: u64, number: u32) -> usize {
        let slot = number as usize;
        let blocks = &mut self.blocks;
        let table = *self.block_index.entry((centre, addr)).or_insert_with(|| {
            blocks.push(BlockCosts {
                centre,
                addrs: Vec::new(),
                costs: Vec::new(),
                runs: 0,
                profile: None,
            });
            blocks.len() - 1
        });
        if self.recent.len() <= slot {
            self.recent.resize(slot + 1, u32::MAX);
        }
        self.recent[slot] = u32::try_from(table).unwrap_or(u32::MAX);
        table
    }

    /// The instructions of cost table `index` (as far as its block has run).
    #[inline]
    pub fn block_addrs(&self, index: usize) -> &[u64] {
        self.blocks
            .get(index)
            .map_or(&[], |block| block.addrs.as_slice())
    }

    /// Counts `times` runs of all instructions of cost table `index` (at
    /// their `Ir` only, or at its profile's counts), if it holds `count` of
    /// them; `false` when it does not (the runs must then be charged with
    /// [`Costs::charge_block`]).
    #[inline]
    pub fn count_runs(&mut self, index: usize, count: usize, times: u64) -> bool {
        match self.blocks.get_mut(index) {
            Some(block) if block.addrs.len() == count => {
                block.runs += times;
                true
            }
            _ => false,
        }
    }

    /// Gives cost table `index` the profile `profile` if it has none (its
    /// runs so far settled); whether its runs now cost that profile, so
    /// a run of `profile`'s block may be counted there.
    #[inline]
    pub fn use_profile(&mut self, index: usize, profile: &Arc<Profile>) -> bool {
        let Some(block) = self.blocks.get_mut(index) else {
            return false;
        };
        match &block.profile {
            Some(known) => known.key == profile.key,
            None => {
                block.settle_runs();
                block.profile = Some(Arc::clone(profile));
                true
            }
        }
    }

    /// The profile of cost table `index`'s runs, if any.
    #[inline]
    pub fn profile(&self, index: usize) -> Option<&Profile> {
        self.blocks.get(index)?.profile.as_deref()
    }

    /// Adds `count` to event `column` of the instruction at `position` of
    /// cost table `index`.
    #[inline]
    pub fn count_in_block(&mut self, index: usize, position: usize, column: usize, count: u64) {
        if let Some(block) = self.blocks.get_mut(index) {
            let width = block.width();
            if column >= width {
                return;
            }
            if let Some(cell) = block.costs.get_mut(position * width + column) {
                *cell = cell.wrapping_add(count);
            }
        }
    }

    /// Adds the costs of one execution of block `index`: `costs` holds the
    /// `width` counts of each instruction of `addrs`.
    pub fn charge_block(&mut self, index: usize, addrs: &[u64], costs: &[CostArray], width: usize) {
        let Some(block) = self.blocks.get_mut(index) else {
            return;
        };
        let width = width.min(MAX_EVENTS);
        if width > 0 && block.addrs.get(..addrs.len()) == Some(addrs) {
            // The common case: instructions known, in their positions.
            add_rows(&mut block.costs, costs, width);
            return;
        }
        let costs = costs.iter().map(|cost| &cost[..width]);
        let centre = block.centre;
        if addrs.len() > block.addrs.len() {
            // The counted runs are of the instructions known so far only.
            block.settle_runs();
            let more = addrs.len() - block.addrs.len();
            // Room for exactly the new instructions: tables are many and
            // rarely grow again.
            block.addrs.reserve_exact(more);
            block.costs.reserve_exact(more * width);
        }
        let mut elsewhere = Vec::new();
        for (position, (&addr, cost)) in addrs.iter().zip(costs).enumerate() {
            if position == block.addrs.len() {
                block.addrs.push(addr);
                block.costs.extend_from_slice(cost);
            } else if block.addrs[position] == addr {
                add(
                    &mut block.costs[position * width..(position + 1) * width],
                    cost,
                );
            } else {
                // The code changed under the same start address.
                elsewhere.push((addr, cost));
            }
        }
        for (addr, cost) in elsewhere {
            self.charge(centre, addr, cost);
        }
    }

    /// The instructions charged in blocks, with their centres: each has
    /// an `Ir` ([`Costs::executed`] reads them). Made when asked, from the
    /// blocks' tables.
    pub fn charged_in_blocks(&self) -> FxHashSet<(Centre, u64)> {
        self.blocks
            .iter()
            .flat_map(|block| block.addrs.iter().map(|&addr| (block.centre, addr)))
            .collect()
    }

    /// Whether the instruction at `addr` in `centre` was charged as
    /// executed, `in_blocks` being [`Costs::charged_in_blocks`].
    pub fn executed(
        &self,
        in_blocks: &FxHashSet<(Centre, u64)>,
        centre: Centre,
        addr: u64,
    ) -> bool {
        in_blocks.contains(&(centre, addr))
            || self.slot_index.get(&(centre, addr)).is_some_and(|&slot| {
                self.slot_costs
                    .get(slot * self.slot_width)
                    .is_some_and(|&ir| ir > 0)
            })
    }

    /// All self costs by centre and instruction, in order, in rows of at
    /// least `width` events; the runs counted of `sequences` charged to
    /// their instructions as they are read.
    pub fn self_costs_by_instruction<'a>(
        &'a self,
        sequences: &'a Sequences,
        width: usize,
    ) -> SelfCosts<'a> {
        let blocks = self
            .blocks
            .iter()
            .enumerate()
            .filter(|(_, block)| block.width() > 0);
        let width = blocks
            .clone()
            .map(|(_, block)| block.width())
            .fold(self.slot_width.max(width), usize::max)
            .max(1);
        let mut order: Vec<(Centre, Charged)> = blocks
            .map(|(index, block)| (block.centre, Charged::Block(index)))
            .collect();
        let slots = self.slot_keys.iter().enumerate();
        order.extend(slots.map(|(slot, key)| (key.0, Charged::Slot(slot))));
        let run = self.sequence_runs.iter().enumerate();
        for (number, _) in run.filter(|&(_, &runs)| runs > 0) {
            let centres = sequences.centres(number);
            order.extend(centres.map(|centre| (centre, Charged::Sequence(number))));
        }
        order.sort_unstable();
        // A sequence whose centres alternate is listed once per centre.
        order.dedup();
        SelfCosts {
            costs: self,
            sequences,
            order,
            width,
        }
    }

    /// `times` more calls along arc number `index` (of
    /// [`Costs::count_call`]).
    pub fn count_calls(&mut self, index: usize, times: u64) {
        if let Some((_, entry)) = self.arcs.get_index_mut(index) {
            entry.count += times;
        }
    }

    /// Counts one call along `arc`; returns the arc's number, for
    /// [`Costs::add_inclusive`].
    pub fn count_call(&mut self, arc: CallArc) -> usize {
        let slot = (arc.site ^ arc.target.rotate_left(7)) as usize % RECENT_ARCS;
        if let Some(&index) = self.recent_arcs.get(slot) {
            if let Some((known, entry)) = self.arcs.get_index_mut(index as usize) {
                if *known == arc {
                    entry.count += 1;
                    return index as usize;
                }
            }
        }
        let entry = self.arcs.entry(arc);
        let index = entry.index();
        entry.or_default().count += 1;
        if self.recent_arcs.is_empty() {
            self.recent_arcs.resize(RECENT_ARCS, u32::MAX);
        }
        if let (Some(recent), Ok(index)) = (self.recent_arcs.get_mut(slot), u32::try_from(index)) {
            *recent = index;
        }
        index
    }

    /// Adds `now − before` to the inclusive cost of `arc`, numbered
    /// `index` by [`Costs::count_call`] (unless the tables were cleared
    /// since: then it is looked up).
    pub fn add_inclusive(&mut self, (arc, index): (CallArc, usize), before: &[u64], now: &[u64]) {
        let entry = match self.arcs.get_index_mut(index) {
            Some((known, entry)) if *known == arc => entry,
            _ => self.arcs.entry(arc).or_default(),
        };
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

    /// Counts `times` runs of the instruction sequence numbered `number`.
    pub fn count_sequence(&mut self, number: usize, times: u64) {
        if self.sequence_runs.len() <= number {
            self.sequence_runs.resize(number + 1, 0);
        }
        self.sequence_runs[number] += times;
    }

    /// Counts one execution of `block` in `centre`.
    pub fn count_execution(&mut self, centre: Centre, block: u64) {
        *self.block_executions.entry((centre, block)).or_default() += 1;
    }

    /// Forgets all costs (after a dump, or `CALLGRIND_ZERO_STATS`).
    /// After a dump: [`Costs::clear`], but the calls of arcs the dump did
    /// not write ([`ArcCost::dumped`]: a call that has just begun) are kept
    /// for the next dump, as Callgrind resets only the call counters it
    /// writes.
    pub fn clear_dumped(&mut self) {
        let kept: Vec<(CallArc, u64)> = self
            .arcs
            .iter()
            .filter(|(_, cost)| cost.count > 0 && !cost.dumped())
            .map(|(arc, cost)| (*arc, cost.count))
            .collect();
        self.clear();
        for (arc, count) in kept {
            self.arcs.entry(arc).or_default().count = count;
        }
    }

    /// Forgets every cost (a zeroing; see [`Costs::clear_dumped`] for a
    /// dump).
    pub fn clear(&mut self) {
        self.slot_index.clear();
        self.slot_keys.clear();
        self.slot_costs.clear();
        self.blocks.clear();
        self.block_index.clear();
        self.recent.clear();
        self.generation += 1;
        self.arcs.clear();
        self.jumps.clear();
        self.block_executions.clear();
        self.sequence_runs.clear();
    }
}

/// Adds the first `width` counts of each of `costs` to the rows of `width`
/// counts of `sums`, with the rows' length known at compile time for the
/// widths the event sets have (Ir with the cache simulation, the branch
/// simulation, both, and with cache use).
fn add_rows(sums: &mut [u64], costs: &[CostArray], width: usize) {
    match width {
        5 => add_rows_of::<5>(sums, costs),
        9 => add_rows_of::<9>(sums, costs),
        13 => add_rows_of::<13>(sums, costs),
        17 => add_rows_of::<17>(sums, costs),
        _ => {
            for (sums, cost) in sums.chunks_exact_mut(width).zip(costs) {
                add(sums, &cost[..width]);
            }
        }
    }
}

/// [`add_rows`] for rows of `N` counts.
#[inline]
fn add_rows_of<const N: usize>(sums: &mut [u64], costs: &[CostArray]) {
    for (sums, cost) in sums.chunks_exact_mut(N).zip(costs) {
        for (total, cost) in sums.iter_mut().zip(&cost[..N]) {
            *total = total.wrapping_add(*cost);
        }
    }
}

/// Adds `costs` to `sum` column by column.
pub(crate) fn add(sum: &mut [u64], costs: &[u64]) {
    for (total, cost) in sum.iter_mut().zip(costs) {
        *total = total.wrapping_add(*cost);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rows of `self_costs`: (context, address, counts).
    fn rows_of(self_costs: &SelfCosts<'_>) -> Vec<(u32, u64, Vec<u64>)> {
        let mut rows = Vec::new();
        let done = self_costs.try_for_each(|(centre, addr), cost| {
            rows.push((centre.cxt, addr, cost.to_vec()));
            Ok::<(), ()>(())
        });
        assert_eq!(done, Ok(()));
        rows
    }

    fn arc(site: u64) -> CallArc {
        let centre = |cxt| Centre { cxt, rec: 0 };
        CallArc {
            from: centre(0),
            site,
            to: centre(1),
            target: 0x100,
        }
    }

    /// A block's table holds its instructions in room made for exactly
    /// them, at its first run and when a later run reaches further.
    #[test]
    fn a_block_s_table_grows_to_exactly_its_instructions() {
        let mut costs = Costs::default();
        let table = costs.block(Centre { cxt: 0, rec: 0 }, 0x1000, 0);
        let rows = [[1; MAX_EVENTS]; 5];
        let addrs = [0x1000, 0x1004, 0x1008, 0x100c, 0x1010];
        costs.charge_block(table, &addrs[..3], &rows[..3], 9);
        let block = &costs.blocks[table];
        assert_eq!((block.addrs.capacity(), block.costs.capacity()), (3, 27));
        costs.charge_block(table, &addrs, &rows, 9);
        let block = &costs.blocks[table];
        assert_eq!((block.addrs.len(), block.addrs.capacity()), (5, 5));
        assert_eq!((block.costs.len(), block.costs.capacity()), (45, 45));
        // The first three instructions ran twice.
        assert_eq!(block.costs[..9], [2; 9]);
        assert_eq!(block.costs[36..], [1; 9]);
    }

    /// A profile's counts are small, its runs many: their product is
    /// counted in 64 bits.
    #[test]
    fn runs_of_a_profile_cost_its_counts_times_the_runs() {
        let mut costs = Costs::default();
        let table = costs.block(Centre { cxt: 0, rec: 0 }, 0x1000, 0);
        costs.charge_block(table, &[0x1000], &[[0; MAX_EVENTS]], 2);
        let mut profile = Profile::new(7, 1, 2);
        profile.count(0, 0);
        profile.count(0, 1);
        profile.count(0, 1);
        assert!(costs.use_profile(table, &Arc::new(profile)));
        let runs = 3 << 32;
        assert!(costs.count_runs(table, 1, runs));
        costs.blocks[table].settle_runs();
        assert_eq!(costs.blocks[table].costs, [runs, 2 * runs]);
    }

    #[test]
    fn a_dump_keeps_the_calls_it_did_not_write_and_a_zeroing_none() {
        let mut costs = Costs::default();
        // A finished call (written by a dump) and one just begun (not).
        let done = (arc(1), costs.count_call(arc(1)));
        costs.add_inclusive(done, &[0], &[50]);
        costs.count_call(arc(2));
        costs.clear_dumped();
        let counts: Vec<(u64, u64)> = costs
            .arcs
            .iter()
            .map(|(arc, cost)| (arc.site, cost.count))
            .collect();
        assert_eq!(counts, [(2, 1)]);
        assert!(!costs.arcs[&arc(2)].dumped());
        costs.clear();
        assert!(costs.arcs.is_empty());
    }

    #[test]
    fn executed_instructions_are_those_charged_in_blocks_or_with_an_ir() {
        let (first, second) = (Centre { cxt: 0, rec: 0 }, Centre { cxt: 1, rec: 0 });
        let mut costs = Costs::default();
        let mut one = [0; MAX_EVENTS];
        one[0] = 1;
        let table = costs.block(first, 0x10, 0);
        costs.charge_block(table, &[0x10, 0x12], &[one, one], 2);
        // A charge with no Ir (a cache-use charge) does not make an
        // instruction executed; one with an Ir does.
        costs.charge(second, 0x20, &[0, 5]);
        costs.charge(second, 0x30, &[1, 0]);
        let in_blocks = costs.charged_in_blocks();
        let executed = |centre, addr| costs.executed(&in_blocks, centre, addr);
        assert!(executed(first, 0x10) && executed(first, 0x12));
        assert!(!executed(second, 0x10) && !executed(first, 0x14));
        assert!(!executed(second, 0x20) && executed(second, 0x30));
        costs.clear();
        assert!(costs.charged_in_blocks().is_empty());
    }

    #[test]
    fn self_costs_come_by_centre_then_address_each_instruction_once() {
        let (first, second) = (Centre { cxt: 0, rec: 0 }, Centre { cxt: 1, rec: 0 });
        let mut costs = Costs::default();
        let cost = |ir: u64, dr: u64| {
            let mut cost = [0; MAX_EVENTS];
            cost[..2].copy_from_slice(&[ir, dr]);
            cost
        };
        // The second centre's block before the first's, a slot in each, one
        // address in two blocks of a centre, a block with counted runs.
        let late = costs.block(second, 0x40, 0);
        costs.charge_block(late, &[0x40, 0x44], &[cost(1, 1), cost(1, 0)], 2);
        let early = costs.block(first, 0x30, 1);
        costs.charge_block(early, &[0x30, 0x34], &[cost(1, 0), cost(1, 1)], 2);
        costs.charge(second, 0x10, &[0, 5]);
        let overlapping = costs.block(first, 0x34, 2);
        costs.charge_block(overlapping, &[0x34], &[cost(1, 0)], 2);
        assert!(costs.count_runs(overlapping, 1, 3));
        costs.charge(first, 0x50, &[2, 0]);
        let sequences = Sequences::default();
        let self_costs = costs.self_costs_by_instruction(&sequences, 1);
        assert_eq!(self_costs.width(), 2);
        let rows = rows_of(&self_costs);
        let expected = [
            (0, 0x30, vec![1, 0]),
            (0, 0x34, vec![5, 1]),
            (0, 0x50, vec![2, 0]),
            (1, 0x10, vec![0, 5]),
            (1, 0x40, vec![1, 1]),
            (1, 0x44, vec![1, 0]),
        ];
        assert_eq!(rows, expected);
        // The first error ends them.
        let mut seen = 0;
        let stopped = self_costs.try_for_each(|_, _| {
            seen += 1;
            if seen == 2 {
                return Err(seen);
            }
            Ok(())
        });
        assert_eq!((stopped, seen), (Err(2), 2));
    }

    #[test]
    fn counted_runs_of_sequences_are_charged_as_the_self_costs_are_read() {
        let (first, second) = (Centre { cxt: 0, rec: 0 }, Centre { cxt: 1, rec: 0 });
        let centre_of = |addr: u64| if addr < 0x100 { first } else { second };
        let mut sequences = Sequences::default();
        let block = [(0xf8, 4), (0x100, 4)];
        // Each run: both instructions' Ir, a read (column 1) by the second.
        let every = || vec![(0, 0), (1, 0), (1, 1)];
        let runs = sequences.of_key_every(1, &block, every, centre_of);
        let mut costs = Costs::default();
        costs.count_sequence(runs, 2);
        costs.count_sequence(runs, 1);
        // A miss charged apart, to an instruction of the sequence.
        costs.charge(second, 0x100, &[0, 0, 1]);
        let ir_only = sequences.of_key(2, &[(0x40, 4)], centre_of);
        costs.count_sequence(ir_only, 4);
        // Not run since the last dump: no row.
        let idle = sequences.of_key(3, &[(0x80, 4)], centre_of);
        costs.count_sequence(idle, 0);
        let self_costs = costs.self_costs_by_instruction(&sequences, 3);
        assert_eq!(self_costs.width(), 3);
        let rows = rows_of(&self_costs);
        let expected = [
            (0, 0x40, vec![4, 0, 0]),
            (0, 0xf8, vec![3, 0, 0]),
            (1, 0x100, vec![3, 3, 1]),
        ];
        assert_eq!(rows, expected);
        // After a dump the runs are forgotten.
        costs.clear_dumped();
        let empty = costs.self_costs_by_instruction(&sequences, 3);
        assert_eq!(empty.try_for_each(|_, _| Err(())), Ok(()));
    }
}
