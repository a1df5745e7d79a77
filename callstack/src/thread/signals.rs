//! Signal handlers: each runs in an execution state of its own, a new root
//! whose costs are not the interrupted function's.

use super::*;

impl ThreadState {
    /// The kernel runs a signal handler on this thread: a new execution state
    /// with its own counter and an empty context.
    pub fn enter_signal_handler(&mut self, shared: &mut Shared<'_>, signal: i32) {
        let bottom = self.call_stack.len();
        let root = shared.forest.as_deref_mut().map(Forest::root);
        self.states.push(ExecState::new(
            shared.options,
            self.events,
            signal,
            bottom,
            root,
        ));
        self.push_cxt(shared, None);
    }

    /// The innermost signal handler returned (or was left by longjmp): its
    /// calls are popped and the interrupted state continues.
    pub fn leave_signal_handler(&mut self, shared: &mut Shared<'_>) {
        if self.states.len() < 2 {
            return;
        }
        let bottom = self.state_ref().call_stack_bottom;
        while self.call_stack.len() > bottom {
            // Not through `pop` at the bottom: that would recurse.
            let before = self.call_stack.len();
            self.pop_above_bottom(shared);
            if self.call_stack.len() == before {
                break;
            }
        }
        if let Some(cxt) = self.state_ref().cxt {
            let function = shared.contexts.function(cxt);
            let active = level_of(&mut self.active, function);
            *active = active.saturating_sub(1);
        }
        if self.fn_stack.len() > 1 {
            if self.fn_stack.last().copied().flatten().is_some() {
                self.fn_stack.pop();
            }
            if self.fn_stack.len() > 1 {
                self.fn_stack.pop();
            }
        }
        if let Some(state) = self.states.pop() {
            if let (Some(root), Some(forest)) = (state.root, shared.forest.as_deref_mut()) {
                forest.end(root, &mut Shared::sink(shared.costs, shared.events));
            }
        }
    }

    /// [`ThreadState::pop`] for a frame above the handler's bottom.
    fn pop_above_bottom(&mut self, shared: &mut Shared<'_>) {
        let bottom = self.state_ref().call_stack_bottom;
        if self.call_stack.len() > bottom {
            self.pop(shared);
        }
    }
}
