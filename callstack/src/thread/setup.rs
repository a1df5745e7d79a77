//! Callgrind's `setup_bbcc`: what the start of a block means for the call
//! stack (a call, a return, a jump, unwinding), and the context and
//! recursion level its costs go to. The rules are listed in the parent
//! module's documentation, in the order they apply.

use super::*;

/// The kind of a block's exit, as Callgrind classifies it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// No transfer known (first block, fall-through).
    None,
    /// A jump.
    Jump,
    /// A call.
    Call,
    /// A return.
    Return,
}

impl ThreadState {
    /// A new block starts: Callgrind's `setup_bbcc`.
    pub fn enter_block(
        &mut self,
        shared: &mut Shared<'_>,
        addr: u64,
        sp: u64,
        arrival: Arrival,
        info: BlockInfo,
    ) {
        self.charge_pending(shared);
        let repeated_calls = std::mem::take(&mut self.repeated_calls);
        if self.continue_in_context(shared, addr, sp, arrival, info) {
            return;
        }
        let last = self.state_ref().block.as_ref().map(CurrentBlock::summary);
        let arrived_by_call = arrival == Arrival::Call;
        let conditional = matches!(arrival, Arrival::Jump { conditional: true });
        let mut kind = match arrival {
            Arrival::Start | Arrival::FallThrough => Kind::None,
            Arrival::Jump { .. } => Kind::Jump,
            Arrival::Call => Kind::Call,
            Arrival::Return => Kind::Return,
        };
        let last = last.filter(|_| arrival != Arrival::Start);
        let last_site = last.as_ref().map(|block| Site {
            centre: block.centre,
            addr: block.last.map_or(block.addr, |(at, _)| at),
            return_addr: match (arrived_by_call, block.last) {
                (true, Some((at, len))) => at + u64::from(len),
                _ => 0,
            },
        });

        // A return that matches no frame is a jump.
        let mut popcount_on_return = 1;
        let mut return_without_call = false;
        if kind == Kind::Return && !self.call_stack.is_empty() {
            let mut up = self.call_stack.len() - 1;
            if sp < self.call_stack[up].sp {
                popcount_on_return = 0;
            } else if self.call_stack[up].sp == sp {
                loop {
                    if self.call_stack[up].return_addr == addr {
                        break;
                    }
                    if up > 0 {
                        up -= 1;
                        if self.call_stack[up].sp == sp {
                            popcount_on_return += 1;
                            continue;
                        }
                    }
                    popcount_on_return = 0;
                    break;
                }
            }
            if popcount_on_return == 0 {
                kind = Kind::Jump;
                return_without_call = true;
            }
        }

        // A jump to a function's start or into another object is a call.
        let mut sp = sp;
        let mut from = last_site;
        let mut call_emulation = false;
        if kind != Kind::Return && kind != Kind::Call {
            if let Some(last) = &last {
                if return_without_call
                    || info.is_entry
                    || last.info.section != info.section
                    || last.info.object != info.object
                {
                    let pops = shared.functions.get(last.info.function).pop_on_jump;
                    if pops {
                        if let Some(top) = self.call_stack.last() {
                            if let Some((arc, _)) = top.arc {
                                from = Some(Site {
                                    centre: arc.from,
                                    addr: arc.site,
                                    return_addr: top.return_addr,
                                });
                                sp = top.sp;
                                self.pop(shared);
                            }
                        }
                    }
                    kind = Kind::Call;
                    call_emulation = true;
                }
            }
        }

        let skip = kind == Kind::Call && shared.functions.get(info.function).skip;
        let mut delayed_push = false;
        if kind == Kind::Return {
            let below_top_is_separator =
                self.fn_stack.len() > 1 && self.fn_stack[self.fn_stack.len() - 2].is_none();
            if self.call_stack.is_empty() || below_top_is_separator {
                self.underflow(shared, addr, info);
                self.pop(shared);
            } else {
                self.unwind(shared, sp, popcount_on_return);
            }
        } else {
            if self.unwind(shared, sp, 0) > 0 {
                kind = Kind::Return;
            }
            if kind == Kind::Call {
                delayed_push = true;
                if call_emulation {
                    if let Some(top) = self.call_stack.last() {
                        sp = top.sp;
                    }
                }
            }
        }

        if (delayed_push && !skip) || self.state_ref().cxt.is_none() {
            self.push_cxt(shared, Some(info.function));
        }
        // The block's recursion level counts the call (see
        // `counts_a_level`; Callgrind compares the calling block's function).
        let skip_direct = shared.options.skip_direct_recursion;
        let counted = last.as_ref().is_none_or(|last| {
            let calling = || shared.contexts.function(last.centre.cxt);
            super::calls::counts_a_level(skip_direct, calling, info.function)
        });
        let centre = self.centre(shared, delayed_push && !skip && counted);

        if delayed_push {
            let nonskipped = self.state_ref().nonskipped;
            let from = match nonskipped {
                Some(site) if !skip => Some(site),
                _ => from,
            };
            if let Some(from) = from {
                self.push_call(shared, from, centre, addr, sp, skip);
                match skip {
                    // Calls into a function that costs its caller (a PLT
                    // stub) go on through it: they count on the arc of
                    // the call its jump makes.
                    true => self.repeated_calls = repeated_calls,
                    false => self.count_repeated_calls(shared, repeated_calls),
                }
            }
        }

        if shared.options.collect_jumps && kind == Kind::Jump {
            if let (Some(last), Some(site)) = (&last, last_site) {
                let jump = JumpArc {
                    from: last.centre,
                    from_block: last.addr,
                    site: site.addr,
                    to: centre,
                    target: addr,
                };
                shared.costs.count_jump(jump, conditional);
            }
        }

        self.start_block(addr, info, centre);
    }

    /// Whether a block starting with the stack at `sp`, arriving so,
    /// leaves the call stack and the context as they are: none of
    /// [`ThreadState::enter_block`]'s rules apply to a fall-through or a
    /// jump, not to a function's first instruction, within the object and
    /// section kind of the previous block, with no frame left (the stack
    /// pointer is not above the top frame's), in a context.
    #[inline]
    pub(super) fn keeps_context(&self, arrival: Arrival, sp: u64, info: BlockInfo) -> bool {
        let continues = matches!(arrival, Arrival::FallThrough | Arrival::Jump { .. });
        if !continues || self.leaves_top_frame(sp) {
            return false;
        }
        let state = self.state_ref();
        let from_last = |last: &CurrentBlock| last.info.place().continues_to(&info.place());
        state.cxt.is_some() && state.block.as_ref().is_some_and(from_last)
    }

    /// [`ThreadState::enter_block`] when the block keeps the context
    /// ([`ThreadState::keeps_context`]): only the recursion level can change
    /// the centre then. Returns `false`, having done nothing, in any other
    /// case.
    #[inline]
    fn continue_in_context(
        &mut self,
        shared: &mut Shared<'_>,
        addr: u64,
        sp: u64,
        arrival: Arrival,
        info: BlockInfo,
    ) -> bool {
        if !self.keeps_context(arrival, sp, info) {
            return false;
        }
        let Some(last) = self.state_ref().block.as_ref().map(CurrentBlock::summary) else {
            return false;
        };
        let conditional = match arrival {
            Arrival::Jump { conditional } => Some(conditional),
            _ => None,
        };
        let centre = self.centre(shared, false);
        if let (Some(conditional), true) = (conditional, shared.options.collect_jumps) {
            let jump = JumpArc {
                from: last.centre,
                from_block: last.addr,
                site: last.last.map_or(last.addr, |(at, _)| at),
                to: centre,
                target: addr,
            };
            shared.costs.count_jump(jump, conditional);
        }
        self.start_block(addr, info, centre);
        true
    }

    /// The centre of the current context at its function's recursion level.
    #[inline]
    pub(super) fn centre(&mut self, shared: &Shared<'_>, entering: bool) -> Centre {
        let cxt = self.state_ref().cxt.unwrap_or_default();
        let top = self.fn_stack.last().copied().flatten();
        let rec = match top {
            Some(function) => {
                let separate = shared.functions.separate_recursions(function);
                let active = level_of(&mut self.active, function);
                if *active == 0 && !entering && separate > 1 {
                    *active = 1;
                }
                rec_index(*active + u32::from(entering), separate)
            }
            None => 0,
        };
        Centre { cxt, rec }
    }

    /// Makes `function` the current context's function (Callgrind's
    /// `push_cxt`); `None` pushes a signal-handler separator.
    pub(super) fn push_cxt(&mut self, shared: &mut Shared<'_>, function: Option<FnId>) {
        let height = self.fn_stack.len() - 1;
        self.saved_slot = (self.state_ref().cxt, height);
        let top = self.fn_stack.last().copied().flatten();
        if let (Some(function), Some(top)) = (function, top) {
            if function == top {
                return;
            }
        }
        if let (Some(function), None) = (function, top) {
            *level_of(&mut self.active, function) += 1;
        }
        self.fn_stack.push(function);
        let cxt = function.map(|function| {
            let callers = shared.functions.get(function).separate_callers;
            shared.contexts.of_stack(&self.fn_stack, callers)
        });
        self.state().cxt = cxt;
    }
}

/// The recursion index of a function `level` deep (its active instances,
/// counting this one) when `separate` levels are shown apart: `fn'2` is 1;
/// the deeper ones share the last; with `separate` of 1 or less, 0.
pub(super) fn rec_index(level: u32, separate: u32) -> u32 {
    match separate > 1 {
        true => level.clamp(1, separate) - 1,
        false => 0,
    }
}

#[cfg(test)]
mod rec_tests {
    use super::rec_index;

    #[test]
    fn recursion_levels_up_to_separate() {
        let levels = |separate| {
            (0..=4)
                .map(|level| rec_index(level, separate))
                .collect::<Vec<_>>()
        };
        assert_eq!(levels(2), [0, 0, 1, 1, 1]);
        assert_eq!(levels(3), [0, 0, 1, 2, 2]);
        assert_eq!(levels(1), [0, 0, 0, 0, 0]);
        assert_eq!(levels(0), [0, 0, 0, 0, 0]);
    }
}
