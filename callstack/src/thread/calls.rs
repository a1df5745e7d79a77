//! The call stack proper: calls pushed and popped, each with its arc and
//! the thread's counter when it started (the global-counter method), the
//! return with no frame (Callgrind's underflow), and `--toggle-collect`.

use super::*;

/// The count of active instances of `function` in `active`.
#[inline]
pub(super) fn level_of(active: &mut Vec<u32>, function: FnId) -> &mut u32 {
    let index = function as usize;
    if active.len() <= index {
        active.resize(index + 1, 0);
    }
    &mut active[index]
}

/// Whether a call from a context of function `from` (looked up only when
/// needed) to function `to` is one more active instance of `to`, a
/// recursion level (Callgrind's rule: with `--skip-direct-rec=yes`,
/// `skip_direct`, a function's calls of itself are not).
#[inline]
pub(super) fn counts_a_level(skip_direct: bool, from: impl FnOnce() -> FnId, to: FnId) -> bool {
    !skip_direct || from() != to
}

#[cfg(test)]
mod level_tests {
    use super::counts_a_level;

    #[test]
    fn a_call_of_itself_counts_a_level_unless_direct_recursion_is_skipped() {
        // (skip direct recursion, caller, callee, counts a level)
        let table = [
            (false, 3, 3, true),
            (false, 3, 4, true),
            (true, 3, 3, false),
            (true, 3, 4, true),
        ];
        for (skip_direct, from, to, counts) in table {
            assert_eq!(
                counts_a_level(skip_direct, || from, to),
                counts,
                "{from} -> {to}"
            );
        }
    }
}

/// The counter when call `index` of a stack started, in `enter_costs`
/// (`events` words per call).
fn enter_cost_mut(enter_costs: &mut [u64], events: usize, index: usize) -> &mut [u64] {
    let at = index * events;
    enter_costs.get_mut(at..at + events).unwrap_or_default()
}

/// Copies the counter `from` into `to` (as far as both go).
fn set(to: &mut [u64], from: &[u64]) {
    to.iter_mut().zip(from).for_each(|(to, from)| *to = *from);
}

/// What entering or leaving a function asks of the process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Trigger {
    /// A dump with this trigger (`--dump-before=f`, `--dump-after=f`).
    Dump(String),
    /// Zeroing (`--zero-before=f`).
    Zero,
}

impl ThreadState {
    /// Pushes a call from `from` to the block `target` in centre `to`.
    pub(super) fn push_call(
        &mut self,
        shared: &mut Shared<'_>,
        from: Site,
        to: Centre,
        target: u64,
        sp: u64,
        skip: bool,
    ) {
        let (saved_cxt, saved_fn_height) = self.saved_slot;
        let at = self.enter_costs.len();
        self.enter_costs.resize(at + self.events, 0);
        set(
            &mut self.enter_costs[at..],
            &self.states[self.states.len() - 1].cost,
        );
        let arc = (!skip).then(|| {
            let arc = CallArc {
                from: from.centre,
                site: from.addr,
                to,
                target,
            };
            let index = shared.costs.count_call(arc);
            let function = shared.contexts.function(to.cxt);
            let caller = || shared.contexts.function(from.centre.cxt);
            let skip_direct = shared.options.skip_direct_recursion;
            let depth = level_of(&mut self.active, function);
            if counts_a_level(skip_direct, caller, function) {
                *depth += 1;
            }
            if *depth == 1 {
                self.function_entered(shared, function);
            }
            (arc, index)
        });
        let nonskipped = self.state_ref().nonskipped;
        let node = match (arc, shared.forest.as_deref_mut()) {
            (Some((arc, _)), Some(forest)) => {
                let key = (shared.costs_key, arc);
                Some(match self.current_node() {
                    Some(parent) => forest.call(parent, key),
                    None => forest.root(),
                })
            }
            _ => None,
        };
        self.call_stack.push(CallEntry {
            arc,
            sp,
            return_addr: from.return_addr,
            nonskipped,
            saved_cxt,
            saved_fn_height,
            node,
        });
        let state = self.state();
        if !skip {
            state.nonskipped = None;
        } else if state.nonskipped.is_none() {
            state.nonskipped = Some(from);
        }
    }

    /// `times` more calls of the arc of the call just pushed: the calls
    /// the repeats of the calling block made ([`ThreadState::runs_in_context`]).
    pub(super) fn count_repeated_calls(&mut self, shared: &mut Shared<'_>, times: u64) {
        let arc = self.call_stack.last().and_then(|entry| entry.arc);
        if let (Some((_, index)), true) = (arc, times > 0) {
            shared.costs.count_calls(index, times);
        }
    }

    /// Pops the top call, adding its inclusive cost to its arc.
    pub(super) fn pop(&mut self, shared: &mut Shared<'_>) {
        let at_handler_bottom = {
            let state = self.state_ref();
            state.sig > 0 && self.call_stack.len() == state.call_stack_bottom
        };
        if at_handler_bottom {
            self.leave_signal_handler(shared);
        }
        let Some(entry) = self.call_stack.pop() else {
            return;
        };
        if let (Some(node), Some(forest)) = (entry.node, shared.forest.as_deref_mut()) {
            forest.ret(node, &mut Shared::sink(shared.costs, shared.events));
        }
        self.state().nonskipped = entry.nonskipped;
        if let Some(arc) = entry.arc {
            let function = shared.contexts.function(arc.0.to.cxt);
            let caller = || shared.contexts.function(arc.0.from.cxt);
            let skip_direct = shared.options.skip_direct_recursion;
            let depth = level_of(&mut self.active, function);
            if counts_a_level(skip_direct, caller, function) {
                *depth = depth.saturating_sub(1);
            }
            let left = *depth == 0;
            let now = &self.state_ref().cost;
            shared.costs.add_inclusive(arc, self.top_enter_cost(), now);
            self.state().cxt = entry.saved_cxt;
            self.fn_stack.truncate(entry.saved_fn_height + 1);
            if left {
                self.function_left(shared, function);
            }
        }
        self.drop_top_enter_cost();
    }

    /// The counter when call `index` of the stack started.
    fn enter_cost(&self, index: usize) -> &[u64] {
        let at = index * self.events;
        self.enter_costs
            .get(at..at + self.events)
            .unwrap_or_default()
    }

    /// The counter when the top call started.
    fn top_enter_cost(&self) -> &[u64] {
        self.enter_cost(self.call_stack.len())
    }

    /// Forgets the counter of the call just popped (the stack is one
    /// shorter than its counters).
    fn drop_top_enter_cost(&mut self) {
        self.enter_costs
            .truncate(self.call_stack.len() * self.events);
    }

    /// Whether the stack at `sp` has left the top frame (its stack pointer
    /// is below `sp`): [`ThreadState::unwind`] pops it.
    #[inline]
    pub(super) fn leaves_top_frame(&self, sp: u64) -> bool {
        self.call_stack.last().is_some_and(|top| top.sp < sp)
    }

    /// Pops frames whose stack pointer is below `sp` (and `minpops` frames at
    /// `sp`); returns how many were popped.
    pub(super) fn unwind(&mut self, shared: &mut Shared<'_>, sp: u64, minpops: i32) -> u32 {
        let mut minpops = minpops;
        let mut popped = 0;
        while let Some(top) = self.call_stack.last() {
            if top.sp < sp || (top.sp == sp && minpops > 0) {
                minpops -= 1;
                popped += 1;
                self.pop(shared);
            } else {
                break;
            }
        }
        popped
    }

    /// A return with nothing to return to (Callgrind's `handleUnderflow`): an
    /// arc from the function returned into (at the address before the return
    /// target) to the returning block, so the returning code's cost is
    /// accounted inclusively; the caller pops it right away.
    pub(super) fn underflow(&mut self, shared: &mut Shared<'_>, addr: u64, info: BlockInfo) {
        let Some(current) = self.state_ref().block.clone() else {
            return;
        };
        if self.fn_stack.len() > 1 {
            self.fn_stack.pop();
        }
        self.state().cxt = None;
        self.push_cxt(shared, Some(info.function));
        let source = Site {
            centre: Centre {
                cxt: self.state_ref().cxt.unwrap_or_default(),
                rec: 0,
            },
            addr: addr.wrapping_sub(1),
            return_addr: 0,
        };
        let returning = shared.contexts.function(current.centre.cxt);
        let active = level_of(&mut self.active, returning);
        *active = active.saturating_sub(1);
        self.state().nonskipped = None;
        self.push_cxt(shared, Some(returning));
        self.push_call(
            shared,
            source,
            current.centre,
            current.addr,
            u64::MAX,
            false,
        );
        let top = self.call_stack.len().saturating_sub(1);
        let top = enter_cost_mut(&mut self.enter_costs, self.events, top);
        match self.states[self.states.len() - 1].sig {
            0 => set(top, &self.last_dump_cost),
            _ => top.fill(0),
        }
    }

    /// `function` is entered, with no other instance active (Callgrind's
    /// `function_entered`): `--dump-before` asks for a dump, else
    /// `--zero-before` for zeroing ([`ThreadState::take_triggers`]);
    /// `--toggle-collect` flips collection.
    pub(super) fn function_entered(&mut self, shared: &Shared<'_>, function: FnId) {
        let marked = shared.functions.get(function);
        if marked.dump_before {
            let trigger = format!("--dump-before={}", marked.name);
            self.triggers.push(Trigger::Dump(trigger));
        } else if marked.zero_before {
            self.triggers.push(Trigger::Zero);
        }
        self.toggle_if_marked(shared, function);
    }

    /// `function` is left, no instance of it active any more (Callgrind's
    /// `function_left`): `--dump-after` asks for a dump; `--toggle-collect`
    /// flips collection.
    pub(super) fn function_left(&mut self, shared: &Shared<'_>, function: FnId) {
        let marked = shared.functions.get(function);
        if marked.dump_after {
            let trigger = format!("--dump-after={}", marked.name);
            self.triggers.push(Trigger::Dump(trigger));
        }
        self.toggle_if_marked(shared, function);
    }

    /// `--toggle-collect`: entering or leaving a marked function flips
    /// collection.
    fn toggle_if_marked(&mut self, shared: &Shared<'_>, function: FnId) {
        if shared.functions.get(function).toggle_collect {
            let state = self.state();
            state.collect = !state.collect;
        }
    }

    /// The dumps and zeroings entering and leaving functions asked for
    /// since the last call, in order: the process makes them before the
    /// thread goes on.
    pub fn take_triggers(&mut self) -> Vec<Trigger> {
        std::mem::take(&mut self.triggers)
    }

    /// Whether entering or leaving functions asked for dumps or zeroings
    /// ([`ThreadState::take_triggers`]).
    #[inline]
    pub fn has_triggers(&self) -> bool {
        !self.triggers.is_empty()
    }

    /// Before a dump: adds the cost so far of every active call to its arc.
    pub fn add_active_calls(&mut self, costs: &mut Costs) {
        let now = self.state_ref().cost.clone();
        for (index, entry) in self.call_stack.iter().enumerate() {
            if let Some(arc) = entry.arc {
                let enter_cost = enter_cost_mut(&mut self.enter_costs, self.events, index);
                costs.add_inclusive(arc, enter_cost, &now);
                set(enter_cost, &now);
            }
        }
    }

    /// The arcs of the active calls, outermost first, each with the cost
    /// of its call so far.
    pub fn active_calls(&self) -> Vec<(CallArc, Vec<u64>)> {
        let now = &self.state_ref().cost;
        self.call_stack
            .iter()
            .enumerate()
            .filter_map(|(index, entry)| {
                let (arc, _) = entry.arc?;
                let cost = now
                    .iter()
                    .zip(self.enter_cost(index))
                    .map(|(now, then)| now.wrapping_sub(*then))
                    .collect();
                Some((arc, cost))
            })
            .collect()
    }

    /// After a dump or a zeroing: costs restart from here.
    pub fn mark_dumped(&mut self) {
        let now = self.state_ref().cost.clone();
        for index in 0..self.call_stack.len() {
            set(
                enter_cost_mut(&mut self.enter_costs, self.events, index),
                &now,
            );
        }
        self.last_dump_cost = now;
    }
}
