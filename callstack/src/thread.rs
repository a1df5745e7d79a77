//! The shadow call stack of one thread and Callgrind's rules for calls and
//! returns, applied at the start of every block (Callgrind's `setup_bbcc`).
//!
//! The rules, in the order they apply when a block starts:
//! - the previous block's instructions are charged (Callgrind charges a block
//!   when the next one starts, so a thread's last block is never charged);
//! - a return is real only if the stack pointer left the top frame, or stayed
//!   and the block is a frame's return address; otherwise it is a jump;
//! - a jump (or fall-through) is a call when it reaches a function's first
//!   instruction or another object or section kind; a jump out of
//!   `_dl_runtime_resolve` replaces the resolver's own call;
//! - frames whose stack pointer is below the current one are popped (longjmp,
//!   exceptions); if any were, the transfer counts as a return;
//! - a call pushes the function's context and an arc, unless the callee is
//!   skipped (PLT stubs, `--fn-skip`), whose cost then goes to the call site;
//! - the recursion level of the context's function picks the centre (`fn'2`).
//!
//! Inclusive costs use the global-counter method: each thread state counts
//! its cost; a call remembers the count, a return adds the difference to the
//! arc.
//!
//! The rules at a block's start are in `setup`, the call stack's pushes and
//! pops in `calls`, signal handlers in `signals`; `tests` runs each rule on
//! a made-up program. This file holds the thread's state and the charging
//! of its blocks' costs.

use std::sync::Arc;

use cgx_engine::{Arrival, Block};

use cgx_backdate::{Forest, NodeId};

use crate::context::{Centre, Contexts, CxtId};
use crate::costs::{add, ArcKey, CallArc, Costs, JumpArc, Profile};
use crate::events::EventSet;
use crate::functions::{BlockInfo, FnId, Functions};
use crate::pending::Pending;
use crate::run_misses::RunMisses;
use crate::Options;

mod calls;
mod filtered;
mod setup;
mod signals;

use calls::level_of;
pub(crate) use calls::Trigger;
pub(crate) use filtered::ProfiledRuns;

/// What a thread's events need from the process.
pub(crate) struct Shared<'a> {
    /// The functions and blocks of the process.
    pub functions: &'a Functions,
    /// The contexts of the process.
    pub contexts: &'a mut Contexts,
    /// The cost tables this thread charges.
    pub costs: &'a mut Costs,
    /// The key of those tables (the thread's number with
    /// `--separate-threads=yes`, else 0).
    pub costs_key: u32,
    /// The collection options.
    pub options: &'a Options,
    /// The events and their columns.
    pub events: &'a EventSet,
    /// The back-dating forest, with `--cacheuse=yes`.
    pub forest: Option<&'a mut Forest<ArcKey>>,
}

impl Shared<'_> {
    /// Adds a pruned node's cache-use costs to its arc's inclusive cost.
    fn sink<'a>(costs: &'a mut Costs, events: &'a EventSet) -> impl FnMut(ArcKey, &[u64]) + 'a {
        let columns = events.cacheuse;
        move |(_, arc), cost: &[u64]| {
            if let Some(columns) = columns {
                costs.add_to_inclusive(arc, &columns.columns, cost);
            }
        }
    }
}

/// The exit of a block in a centre: the "from" of a call arc.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Site {
    /// The centre the block ran in.
    centre: Centre,
    /// The address of the block's last instruction.
    addr: u64,
    /// The address after that instruction when it was a call, else 0.
    return_addr: u64,
}

/// Runs of a block right after a run of it (a loop of one block): where
/// each starts, and how many.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RunsAgain {
    /// The start of each run.
    pub start: Block,
    /// How many.
    pub times: u64,
}

/// The instructions of a whole run of a block, with the last of them
/// kept beside the list: every run reads it (the next block's call site),
/// and from the list it is a load from memory the run touches nowhere else.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Listed<'a> {
    /// Address and length of each instruction.
    pub all: &'a [(u64, u8)],
    /// The last of them (`None` for none).
    pub last: Option<(u64, u8)>,
}

impl<'a> Listed<'a> {
    /// `all`, its last instruction read from the list.
    pub fn new(all: &'a [(u64, u8)]) -> Listed<'a> {
        Listed {
            all,
            last: all.last().copied(),
        }
    }
}

/// Where a block's whole runs are counted: its cost table in one centre,
/// while the tables are not cleared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RunTable {
    /// The tables' generation and key, and the centre.
    place: (u64, u32, Centre),
    table: usize,
}

/// The block a thread state is executing.
#[derive(Clone, Debug)]
struct CurrentBlock {
    addr: u64,
    info: BlockInfo,
    centre: Centre,
    /// Instructions executed in it so far, not yet charged.
    pending: Pending,
    /// The last executed instruction (address, length).
    last: Option<(u64, u8)>,
    /// The block's cost table in the thread's costs, and the tables'
    /// generation it belongs to.
    cost_table: Option<(u64, usize)>,
}

/// What the next block needs of the previous one.
#[derive(Clone, Copy, Debug)]
struct LastBlock {
    addr: u64,
    info: BlockInfo,
    centre: Centre,
    last: Option<(u64, u8)>,
}

impl CurrentBlock {
    /// The number of its cost table in `costs` (kept while the tables
    /// are not cleared).
    #[inline]
    fn cost_table(&mut self, costs: &mut Costs) -> usize {
        match self.cost_table {
            Some((generation, table)) if generation == costs.generation => table,
            _ => {
                let table = costs.block(self.centre, self.addr, self.info.number);
                self.cost_table = Some((costs.generation, table));
                table
            }
        }
    }

    /// The cost table where a whole run of `run`'s instructions may be
    /// counted: this block's table in its centre, when it holds exactly
    /// them ([`Costs::holds_run`]). `cached` keeps the answer for the block
    /// in this place: a table only grows, so one that held the
    /// instructions holds exactly them while it has as many.
    #[inline]
    fn whole_run_table(
        &mut self,
        shared: &mut Shared<'_>,
        run: Listed<'_>,
        cached: &mut Option<RunTable>,
    ) -> Option<usize> {
        let costs = &mut *shared.costs;
        let place = (costs.generation, shared.costs_key, self.centre);
        if let Some(known) = cached.filter(|known| known.place == place) {
            if costs.holds_count(known.table, run.all.len()) {
                self.cost_table = Some((costs.generation, known.table));
                return Some(known.table);
            }
        }
        let table = self.cost_table(costs);
        costs.holds_run(table, run.all).then(|| {
            *cached = Some(RunTable { place, table });
            table
        })
    }

    fn summary(&self) -> LastBlock {
        LastBlock {
            addr: self.addr,
            info: self.info,
            centre: self.centre,
            last: self.last,
        }
    }
}

/// The execution state of a thread, or of a signal handler running on it.
#[derive(Clone, Debug)]
struct ExecState {
    cxt: Option<CxtId>,
    block: Option<CurrentBlock>,
    /// Where the cost of skipped code goes: the call into it.
    nonskipped: Option<Site>,
    collect: bool,
    /// The global counter of this state.
    cost: Vec<u64>,
    /// The signal being handled, 0 for the thread's own code.
    sig: i32,
    /// Call stack depth when the handler started.
    call_stack_bottom: usize,
    /// The root of this state's back-dating tree.
    root: Option<NodeId>,
}

impl ExecState {
    fn new(
        options: &Options,
        events: usize,
        sig: i32,
        call_stack_bottom: usize,
        root: Option<NodeId>,
    ) -> ExecState {
        ExecState {
            cxt: None,
            block: None,
            nonskipped: None,
            collect: options.collect_atstart,
            cost: vec![0; events],
            sig,
            call_stack_bottom,
            root,
        }
    }
}

/// An active call.
#[derive(Clone, Debug)]
struct CallEntry {
    /// `None` for a call into skipped code; with the arc's number in the
    /// thread's tables ([`Costs::count_call`]).
    arc: Option<(CallArc, usize)>,
    sp: u64,
    return_addr: u64,
    nonskipped: Option<Site>,
    /// The caller's context and function-stack height, restored on return.
    saved_cxt: Option<CxtId>,
    saved_fn_height: usize,
    /// The call's node in the back-dating tree.
    node: Option<NodeId>,
}

/// The shadow call stack and execution states of one thread.
#[derive(Clone, Debug)]
pub(crate) struct ThreadState {
    /// Valgrind's number of the thread (1 for the first).
    pub number: u32,
    events: usize,
    /// Innermost last: the thread's own state, then nested signal handlers.
    states: Vec<ExecState>,
    call_stack: Vec<CallEntry>,
    /// The thread's counter when each active call started, `events` words
    /// per call in the order of `call_stack` (one vector, so a call
    /// allocates nothing and a deep stack costs a word per event and call).
    enter_costs: Vec<u64>,
    /// Functions of the contexts, innermost last; `None` separates a signal
    /// handler's from the interrupted code's.
    fn_stack: Vec<Option<FnId>>,
    /// Active instances of each function (for recursion levels), by
    /// function number.
    active: Vec<u32>,
    /// Context saved by the last context push, for the next call entry.
    saved_slot: (Option<CxtId>, usize),
    /// The global counter at the last dump.
    last_dump_cost: Vec<u64>,
    /// Dumps and zeroings functions entered or left asked for, not yet
    /// made.
    triggers: Vec<Trigger>,
    /// Calls the last block's repeats made with the call it ends in
    /// ([`ThreadState::runs_in_context`]), counted on the arc of the call
    /// the next block's arrival makes (through a skipped function, the
    /// call its jump makes).
    repeated_calls: u64,
    /// With a filter, the misses of runs not reported yet (`run_misses`).
    pub run_misses: RunMisses,
}

impl ThreadState {
    /// A thread with an empty call stack (and the root of its back-dating
    /// tree, with `--cacheuse=yes`).
    pub fn new(number: u32, options: &Options, events: usize, root: Option<NodeId>) -> ThreadState {
        ThreadState {
            number,
            events,
            states: vec![ExecState::new(options, events, 0, 0, root)],
            call_stack: Vec::new(),
            enter_costs: Vec::new(),
            fn_stack: vec![None],
            active: Vec::new(),
            saved_slot: (None, 0),
            last_dump_cost: vec![0; events],
            triggers: Vec::new(),
            repeated_calls: 0,
            run_misses: RunMisses::default(),
        }
    }

    fn state(&mut self) -> &mut ExecState {
        let last = self.states.len() - 1;
        &mut self.states[last]
    }

    fn state_ref(&self) -> &ExecState {
        &self.states[self.states.len() - 1]
    }

    /// One executed instruction of the current block, with no cost yet (see
    /// [`ThreadState::last_cost`]); `costs` are the thread's tables.
    #[inline]
    pub fn instruction(&mut self, costs: &Costs, addr: u64, len: u8) {
        if let Some(block) = self.state().block.as_mut() {
            block.pending.push(addr, costs);
            block.last = Some((addr, len));
        }
    }

    /// Executed instructions of the current block that only count their
    /// `Ir`: a whole run of its cost table when they are all of its
    /// instructions.
    pub fn instructions_ir(&mut self, shared: &mut Shared<'_>, instructions: &[(u64, u8)]) {
        self.listed_ir(shared, Listed::new(instructions), &mut None);
    }

    /// [`ThreadState::instructions_ir`] for a whole run of the current
    /// block, whose cost table is found through `cached` (see
    /// [`CurrentBlock::whole_run_table`]).
    fn listed_ir(
        &mut self,
        shared: &mut Shared<'_>,
        run: Listed<'_>,
        cached: &mut Option<RunTable>,
    ) {
        let state = self.state();
        let Some(block) = state.block.as_mut() else {
            return;
        };
        let Some(last) = run.last else {
            return;
        };
        block.last = Some(last);
        if state.collect && state.nonskipped.is_none() && block.pending.is_empty() {
            if let Some(table) = block.whole_run_table(shared, run, cached) {
                block.pending.push_run(table, run.all.len());
                return;
            }
        }
        block.pending.push_ir(run.all, shared.costs);
    }

    /// A whole run of the current block, which has just started, whose
    /// runs cost `profile` plus what [`ThreadState::count_extra`] adds:
    /// pending as one run of its cost table when that table holds its
    /// instructions and may take the profile (`false`, having done
    /// nothing, otherwise: the instructions then come one by one). The
    /// table is found through `cached` (see
    /// [`CurrentBlock::whole_run_table`]).
    #[inline]
    pub fn simulated_run(
        &mut self,
        shared: &mut Shared<'_>,
        run: Listed<'_>,
        profile: &Arc<Profile>,
        cached: &mut Option<RunTable>,
    ) -> bool {
        let state = self.state();
        let Some(block) = state.block.as_mut() else {
            return false;
        };
        let Some(last) = run.last else {
            return false;
        };
        if !state.collect || state.nonskipped.is_some() || !block.pending.is_empty() {
            return false;
        }
        let Some(table) = block.whole_run_table(shared, run, cached) else {
            return false;
        };
        if !shared.costs.use_profile(table, profile) {
            return false;
        }
        block.last = Some(last);
        block.pending.push_run(table, run.all.len());
        true
    }

    /// One more event in `column` of the instruction at `position` of a
    /// run made pending by [`ThreadState::simulated_run`].
    #[inline]
    pub fn count_extra(&mut self, position: usize, column: usize) {
        if let Some(block) = self.state().block.as_mut() {
            block.pending.count_extra(position, column);
        }
    }

    /// The cost of the instruction last executed, to add its events to;
    /// `costs` are the thread's tables.
    #[inline]
    pub fn last_cost(&mut self, costs: &Costs) -> Option<&mut [u64]> {
        let events = self.events;
        let block = self.state().block.as_mut()?;
        block.pending.last_cost(events, costs)
    }

    /// Adds `charges` (column, value) to the running cost of the current
    /// state alone, as costs charged after the thread's last block
    /// (counted in the `summary:` line, in no cost line).
    pub fn add_to_running(&mut self, charges: &[(usize, u64)]) {
        let cost = &mut self.state().cost;
        for &(column, value) in charges {
            if let Some(total) = cost.get_mut(column) {
                *total += value;
            }
        }
    }

    /// Before the thread's tables are cleared (a dump, a zeroing): pending
    /// runs of their blocks become lists of instructions.
    pub fn detach_pending(&mut self, costs: &Costs) {
        for state in &mut self.states {
            if let Some(block) = state.block.as_mut() {
                block.pending.detach(costs);
            }
        }
    }

    /// Where a line loaded now is charged when it leaves the cache: the
    /// running instruction in its centre (or, in skipped code, the call into
    /// it), and the running call's node.
    pub fn load_site(&self) -> Option<(Centre, u64, Option<NodeId>)> {
        self.site_running(|block| block.last.map(|(addr, _)| addr))
    }

    /// [`ThreadState::load_site`] while the current block runs its
    /// instruction at `addr`.
    pub fn load_site_at(&self, addr: u64) -> Option<(Centre, u64, Option<NodeId>)> {
        self.site_running(|_| Some(addr))
    }

    /// [`ThreadState::load_site`] with the running instruction of the
    /// current block given by `running`.
    fn site_running(
        &self,
        running: impl FnOnce(&CurrentBlock) -> Option<u64>,
    ) -> Option<(Centre, u64, Option<NodeId>)> {
        let state = self.state_ref();
        let node = self.current_node();
        if let Some(site) = state.nonskipped {
            return Some((site.centre, site.addr, node));
        }
        let block = state.block.as_ref()?;
        Some((block.centre, running(block)?, node))
    }

    /// The running call's node: the innermost call of the current state that
    /// has one, else the state's root.
    fn current_node(&self) -> Option<NodeId> {
        let state = self.state_ref();
        self.call_stack[state.call_stack_bottom.min(self.call_stack.len())..]
            .iter()
            .rev()
            .find_map(|entry| entry.node)
            .or(state.root)
    }

    /// Charges the current block's executed instructions (Callgrind does so
    /// when the next block starts, or never for a thread's last block).
    pub fn charge_pending(&mut self, shared: &mut Shared<'_>) {
        let events = self.events;
        let state = self.state();
        let Some(block) = state.block.as_mut() else {
            return;
        };
        if !state.collect || block.pending.is_empty() {
            block.pending.clear();
            return;
        }
        block.pending.add_to(shared.costs, &mut state.cost, 0);
        match state.nonskipped {
            Some(site) => {
                block
                    .pending
                    .charge_to(shared.costs, site.centre, site.addr, events);
            }
            None => {
                let table = block.cost_table(shared.costs);
                block.pending.charge_block(shared.costs, table, events);
                if shared.options.collect_jumps {
                    shared.costs.count_execution(block.centre, block.addr);
                }
            }
        }
        block.pending.clear();
    }

    /// The thread ends: Callgrind never charges its last block, but with
    /// the cache simulation its events (and with branch simulation its
    /// branches) were already counted in the thread's total.
    pub fn finish(&mut self, shared: &Shared<'_>) {
        // Misses of runs never reported count where the thread ends.
        for miss in self.run_misses.take_left() {
            self.count_at(shared.costs, miss.addr, miss.column as usize, miss.count);
        }
        let from = if shared.events.cache.is_some() { 0 } else { 1 };
        let state = self.state();
        let Some(block) = state.block.as_mut() else {
            return;
        };
        if state.collect {
            block.pending.add_to(shared.costs, &mut state.cost, from);
        }
        block.pending.clear();
    }

    /// A whole block that costs only its `Ir` runs: [`ThreadState::enter_block`]
    /// and [`ThreadState::instructions_ir`] in one, with a fast path for
    /// the common case.
    #[inline]
    pub fn whole_block_ir(
        &mut self,
        shared: &mut Shared<'_>,
        block: &Block,
        info: BlockInfo,
        run: Listed<'_>,
        table: &mut Option<RunTable>,
    ) {
        if !self.continue_run(shared, block, info, run, None, table) {
            self.any_block_ir(shared, block, info, run, table);
        }
    }

    /// The general path of [`ThreadState::whole_block_ir`].
    fn any_block_ir(
        &mut self,
        shared: &mut Shared<'_>,
        block: &Block,
        info: BlockInfo,
        run: Listed<'_>,
        table: &mut Option<RunTable>,
    ) {
        self.enter_block(shared, block.addr, block.sp, block.arrival, info);
        self.listed_ir(shared, run, table);
    }

    /// The `repeats` runs of a block right after its run by
    /// [`ThreadState::whole_block_ir`], each starting at `again`: in one
    /// step when the first of them continues the run (each of the others
    /// then does the same), else one by one.
    pub fn whole_block_ir_again(
        &mut self,
        shared: &mut Shared<'_>,
        RunsAgain {
            start: again,
            times: repeats,
        }: RunsAgain,
        info: BlockInfo,
        run: Listed<'_>,
        table: &mut Option<RunTable>,
    ) {
        let mut left = repeats;
        while left > 0 {
            left -= 1;
            if self.continue_run(shared, &again, info, run, None, table) {
                // The others count the run now pending, and leave it so.
                let state = self.state();
                let run = state.block.as_ref().and_then(|block| block.pending.run());
                if let Some((pending, count, _)) = run {
                    if shared.costs.count_runs(pending, count, left) {
                        state.cost[0] = state.cost[0].wrapping_add(left * count as u64);
                        return;
                    }
                }
            } else {
                self.any_block_ir(shared, &again, info, run, table);
            }
        }
    }

    /// `times` more runs of the block that has just run whole, in its
    /// context, adding its cost and nothing else; with `calls`, each
    /// followed by the same call as that run, whole (`Repeat::Calls`):
    /// the call the next block's arrival makes counts them too.
    pub fn runs_in_context(
        &mut self,
        shared: &mut Shared<'_>,
        times: u64,
        instructions: &[(u64, u8)],
        calls: bool,
    ) {
        if calls {
            self.repeated_calls = times;
        }
        let state = self.state();
        let run = state.block.as_ref().and_then(|block| block.pending.run());
        if let Some((pending, count, _)) = run {
            let whole = count == instructions.len() && state.collect;
            if whole && shared.costs.count_runs(pending, count, times) {
                state.cost[0] = state.cost[0].wrapping_add(times * count as u64);
                return;
            }
        }
        // Run by run (a block in skipped code, collection off): each
        // charged before the next, as the next block's start would.
        for _ in 0..times {
            self.charge_pending(shared);
            self.instructions_ir(shared, instructions);
        }
    }

    /// A whole block starts whose runs cost `profile` (see
    /// [`ThreadState::simulated_run`]): [`ThreadState::enter_block`] with
    /// the fast path of [`ThreadState::continue_run`]; whether its run is
    /// pending as one run of its cost table.
    #[inline]
    pub fn whole_block_simulated(
        &mut self,
        shared: &mut Shared<'_>,
        block: &Block,
        info: BlockInfo,
        run: Listed<'_>,
        profile: Option<&Arc<Profile>>,
        cached: &mut Option<RunTable>,
    ) -> bool {
        if let Some(profile) = profile {
            if self.continue_run(shared, block, info, run, Some(profile), cached) {
                return true;
            }
        }
        self.enter_block(shared, block.addr, block.sp, block.arrival, info);
        profile.is_some_and(|profile| self.simulated_run(shared, run, profile, cached))
    }

    /// Another run of the current block right after a run of it that
    /// [`ThreadState::whole_block_simulated`] made pending as a whole run
    /// with a profile, arriving by a jump with the stack at `sp` (a loop
    /// of one block; the caller checks that the block is no function's
    /// entry and that jumps are not collected): `times` more runs pending,
    /// to be charged with that one, as [`ThreadState::continue_run`] would
    /// charge them one by one. `false`, having done nothing, when the
    /// stack pointer says a call has returned.
    #[inline]
    pub fn repeat_run(&mut self, costs: &Costs, sp: u64, times: u64) -> bool {
        if self.leaves_top_frame(sp) {
            return false;
        }
        let state = self.state();
        let Some(current) = state.block.as_mut() else {
            return false;
        };
        let Some((table, count, _)) = current.pending.run() else {
            return false;
        };
        if costs.profile(table).is_none() || !costs.holds_count(table, count) {
            return false;
        }
        current.pending.repeat(times);
        true
    }

    /// The common case of [`ThreadState::whole_block_ir`] and
    /// [`ThreadState::whole_block_simulated`]: the current block is a
    /// pending whole run and this one continues it (as
    /// [`ThreadState::continue_in_context`] says) in the same centre, with
    /// cost tables ready for both (this block's found through `cached`,
    /// where its table was last, and taking `profile` if any). Charges the
    /// current run and makes this block's run pending, as the general path
    /// would; returns `false`, having done nothing but update `cached`, in
    /// any other case.
    #[inline]
    fn continue_run(
        &mut self,
        shared: &mut Shared<'_>,
        block: &Block,
        info: BlockInfo,
        whole: Listed<'_>,
        profile: Option<&Arc<Profile>>,
        cached: &mut Option<RunTable>,
    ) -> bool {
        if shared.options.collect_jumps || !self.keeps_context(block.arrival, block.sp, info) {
            return false;
        }
        let (Some(centre), Some(last)) = (self.steady_centre(shared), whole.last) else {
            return false;
        };
        let generation = shared.costs.generation;
        let events = self.events;
        let state = self.state();
        if !state.collect || state.nonskipped.is_some() {
            return false;
        }
        let Some(current) = state.block.as_mut() else {
            return false;
        };
        let Some((run, count, runs)) = current.pending.run() else {
            return false;
        };
        if current.cost_table != Some((generation, run)) {
            return false;
        }
        let place = (generation, shared.costs_key, centre);
        let table = match *cached {
            Some(known) if known.place == place => known.table,
            _ => {
                let Some(table) = shared
                    .costs
                    .recent_block(centre, info.number)
                    .filter(|&table| shared.costs.holds_run(table, whole.all))
                else {
                    return false;
                };
                *cached = Some(RunTable { place, table });
                table
            }
        };
        if !shared.costs.holds_count(table, whole.all.len())
            || !shared.costs.holds_count(run, count)
        {
            return false;
        }
        match profile {
            None => {
                shared.costs.count_runs(run, count, runs);
                let instructions = (count as u64).wrapping_mul(runs);
                state.cost[0] = state.cost[0].wrapping_add(instructions);
            }
            Some(profile) => {
                if !shared.costs.use_profile(table, profile) {
                    return false;
                }
                current.pending.add_to(shared.costs, &mut state.cost, 0);
                current.pending.charge_block(shared.costs, run, events);
            }
        }
        current.addr = block.addr;
        current.info = info;
        current.centre = centre;
        current.last = Some(last);
        current.cost_table = Some((generation, table));
        current.pending.replace_by_run(table, whole.all.len());
        true
    }

    /// [`ThreadState::centre`] outside a call, when computing it changes
    /// nothing (the function's recursion level is known).
    #[inline]
    fn steady_centre(&self, shared: &Shared<'_>) -> Option<Centre> {
        let cxt = self.state_ref().cxt?;
        let rec = match self.fn_stack.last().copied().flatten() {
            Some(function) => match shared.functions.separate_recursions(function) {
                separate if separate > 1 => {
                    // `centre` would first count an inactive one active.
                    let level = *self
                        .active
                        .get(function as usize)
                        .filter(|&&level| level > 0)?;
                    setup::rec_index(level, separate)
                }
                _ => 0,
            },
            None => 0,
        };
        Some(Centre { cxt, rec })
    }

    /// Makes the block at `addr` in `centre` the current one (its pending
    /// buffers, empty now, are reused; its cost table is kept when it runs
    /// again in the same centre).
    #[inline]
    fn start_block(&mut self, addr: u64, info: BlockInfo, centre: Centre) {
        let state = self.state();
        match state.block.as_mut() {
            Some(block) => {
                if block.addr != addr || block.centre != centre {
                    block.cost_table = None;
                }
                block.addr = addr;
                block.info = info;
                block.centre = centre;
                block.last = None;
                block.pending.clear();
            }
            None => {
                state.block = Some(CurrentBlock {
                    addr,
                    info,
                    centre,
                    pending: Pending::default(),
                    last: None,
                    cost_table: None,
                });
            }
        }
    }

    /// Whether the thread's current state collects costs.
    pub fn collecting(&self) -> bool {
        self.state_ref().collect
    }

    /// `CALLGRIND_TOGGLE_COLLECT`.
    pub fn toggle_collect(&mut self) {
        let state = self.state();
        state.collect = !state.collect;
    }

    /// The thread's cost since the last dump (its own code, not handlers).
    pub fn cost_since_dump(&self) -> Vec<u64> {
        let mut cost = self.states[0].cost.clone();
        for (total, before) in cost.iter_mut().zip(&self.last_dump_cost) {
            *total = total.wrapping_sub(*before);
        }
        cost
    }

    /// Instrumentation switched on or off: all calls are popped and the
    /// thread starts afresh (Callgrind's `unwind_thread`); the current block
    /// is dropped uncharged.
    pub fn reset(&mut self, shared: &mut Shared<'_>) {
        while self.states.len() > 1 {
            self.leave_signal_handler(shared);
        }
        while !self.call_stack.is_empty() {
            self.pop(shared);
        }
        let events = self.events;
        let mut root = self.states[0].root;
        if let Some(forest) = shared.forest.as_deref_mut() {
            if let Some(old) = root {
                forest.end(old, &mut Shared::sink(shared.costs, shared.events));
            }
            root = Some(forest.root());
        }
        self.states[0] = ExecState::new(shared.options, events, 0, 0, root);
        self.fn_stack.truncate(1);
        self.last_dump_cost = vec![0; events];
    }

    /// The thread ended: its calls and roots leave the back-dating forest, to
    /// be pruned (into their arcs) as soon as their lines leave the cache, at
    /// the latest when it is flushed at the end. The call stack itself stays
    /// (its arcs' other costs are added as active calls).
    pub fn close_forest(&mut self, shared: &mut Shared<'_>) {
        let Some(forest) = shared.forest.as_deref_mut() else {
            return;
        };
        let mut sink = Shared::sink(shared.costs, shared.events);
        for entry in self.call_stack.iter_mut().rev() {
            if let Some(node) = entry.node.take() {
                forest.ret(node, &mut sink);
            }
        }
        for state in self.states.iter_mut().rev() {
            if let Some(root) = state.root.take() {
                forest.end(root, &mut sink);
            }
        }
    }

    /// Counts `costs` in the thread's own counter (Cachegrind's attribution,
    /// which charges instructions directly).
    pub fn count(&mut self, costs: &[u64]) {
        add(&mut self.states[0].cost, costs);
    }

    /// Adds `count` to each `(column, count)` of `counts` in the thread's
    /// own counter, `times` over.
    #[inline]
    pub fn count_each(&mut self, counts: &[(u32, u64)], times: u64) {
        let total = &mut self.states[0].cost;
        for &(column, count) in counts {
            if let Some(sum) = total.get_mut(column as usize) {
                *sum = sum.wrapping_add(count.wrapping_mul(times));
            }
        }
    }

    /// Counts `ir` instructions in the thread's own counter (Cachegrind's
    /// attribution of whole blocks).
    pub fn count_ir(&mut self, ir: u64) {
        let total = &mut self.states[0].cost[0];
        *total = total.wrapping_add(ir);
    }
}

/// Adds `costs` into `sum` (re-exported for the process's summaries).
pub(crate) fn add_into(sum: &mut Vec<u64>, costs: &[u64]) {
    if sum.len() < costs.len() {
        sum.resize(costs.len(), 0);
    }
    add(sum, costs);
}

#[cfg(test)]
mod tests;
