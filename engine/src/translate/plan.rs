//! The events of a translation's runs, planned once: which data accesses
//! and branches each run reports, and in which recorded word each one's
//! dynamic part is, follow from the block's instructions alone (Callgrind's
//! rules: the registers holding constants start empty at the block's
//! start). A block ending in a REP string instruction has two plans: one
//! for the passes that iterate, one for the last pass, which only finds
//! the counter zero. The replay then reads each event straight from a
//! record ([`crate::SimulatedBlock`]) instead of applying the rules per
//! run.

use crate::event::{AccessKind, BlockEvent, DataAccess};
use crate::semantics::{Branch, Decoded, RCX};

use super::capture::{Source, Sources};

/// One event of every run of a translation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PlannedEvent {
    /// The number of the instruction in its block it follows.
    pub instruction: u32,
    what: Planned,
}

/// One data access of every run of a translation, as the simulations that
/// look at nothing else read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PlannedAccess {
    /// The number of the instruction in its block it follows.
    pub instruction: u32,
    /// The recorded word holding the operand's address; [`NO_WORD`] for
    /// a constant operand (its address is in `offset`).
    word: u32,
    /// Bytes from the operand's address (the whole address of a constant
    /// operand).
    offset: u64,
    size: u32,
    kind: AccessKind,
}

/// [`PlannedAccess::word`] of a constant operand.
const NO_WORD: u32 = u32::MAX;

impl PlannedAccess {
    /// The access of a run whose record holds `words`.
    #[inline(always)]
    pub fn access(&self, words: &[u64]) -> DataAccess {
        let base = words.get(self.word as usize).copied().unwrap_or(0);
        DataAccess {
            addr: base.wrapping_add(self.offset),
            size: self.size,
            kind: self.kind,
        }
    }

    /// The number of the instruction it follows, in its block.
    #[inline]
    pub fn position(&self) -> usize {
        self.instruction as usize
    }

    /// Its size and kind, at `addr`.
    #[inline]
    pub fn at(&self, addr: u64) -> DataAccess {
        DataAccess {
            addr,
            size: self.size,
            kind: self.kind,
        }
    }

    /// The access of `event`, if it is one (and its word has a number that
    /// fits).
    fn of(event: &PlannedEvent) -> Option<PlannedAccess> {
        let Planned::Access {
            source,
            offset,
            size,
            kind,
        } = event.what
        else {
            return None;
        };
        let (word, offset) = match source {
            Source::Static(addr) => (NO_WORD, addr.wrapping_add(offset)),
            Source::Word(word) => (u32::try_from(word).ok().filter(|&w| w != NO_WORD)?, offset),
            // Its address is in the filter's record (`filter`).
            Source::Filtered => (NO_WORD, offset),
        };
        Some(PlannedAccess {
            instruction: event.instruction,
            word,
            offset,
            size,
            kind,
        })
    }
}

/// The events of a run, planned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RunPlan {
    /// All of them, in order.
    pub events: Box<[PlannedEvent]>,
    /// Its data accesses alone, in order.
    pub accesses: Box<[PlannedAccess]>,
}

impl RunPlan {
    /// The plan of `events`; `None` if an access cannot be planned alone.
    fn new(events: Vec<PlannedEvent>) -> Option<RunPlan> {
        let accesses = events
            .iter()
            .filter(|event| event.is_access())
            .map(PlannedAccess::of)
            .collect::<Option<Box<[_]>>>()?;
        Some(RunPlan {
            events: events.into(),
            accesses,
        })
    }
}

/// What a [`PlannedEvent`] is, and where its dynamic part is recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Planned {
    /// A data access at `offset` bytes from the operand's address.
    Access {
        source: Source,
        offset: u64,
        size: u32,
        kind: AccessKind,
    },
    /// A conditional branch, taken `when_held` or `when_not` as its guard
    /// (a recorded word's low byte, none when it has no guard) held.
    Conditional {
        guard: Option<usize>,
        when_held: bool,
        when_not: bool,
    },
    /// An indirect jump or call to the recorded target.
    Indirect { target: Option<usize> },
    /// An atomic read-modify-write ([`BlockEvent::Bus`]).
    Bus,
}

impl PlannedEvent {
    /// Whether it is a data access.
    #[inline]
    pub fn is_access(&self) -> bool {
        matches!(self.what, Planned::Access { .. })
    }

    /// Whether it is a branch (reported only to a branch simulation).
    #[inline]
    pub fn is_branch(&self) -> bool {
        matches!(
            self.what,
            Planned::Conditional { .. } | Planned::Indirect { .. }
        )
    }

    /// The event of a run whose record holds `words`.
    #[inline]
    pub fn event(&self, words: &[u64]) -> BlockEvent {
        let word = |index: Option<usize>| {
            index
                .and_then(|index| words.get(index))
                .copied()
                .unwrap_or(0)
        };
        match self.what {
            Planned::Access {
                source,
                offset,
                size,
                kind,
            } => {
                let base = match source {
                    Source::Static(addr) => addr,
                    Source::Word(index) => word(Some(index)),
                    Source::Filtered => 0,
                };
                BlockEvent::Access(DataAccess {
                    addr: base.wrapping_add(offset),
                    size,
                    kind,
                })
            }
            Planned::Conditional {
                guard,
                when_held,
                when_not,
            } => BlockEvent::Conditional(if word(guard) & 0xff != 0 {
                when_held
            } else {
                when_not
            }),
            Planned::Indirect { target } => BlockEvent::Indirect(word(target)),
            Planned::Bus => BlockEvent::Bus,
        }
    }
}

/// The plans of a translation's runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// The events of every run (of a REP block: of a pass that iterates).
    pub every: RunPlan,
    /// For a block ending in a REP string instruction: the word holding
    /// the counter before the pass, and the events of a pass that finds it
    /// zero.
    pub last_pass: Option<(usize, RunPlan)>,
}

impl Plan {
    /// The events of a run whose record holds `words`, and whether they
    /// are those of a REP block's last pass.
    #[inline(always)]
    pub fn run(&self, words: &[u64]) -> (&RunPlan, bool) {
        match &self.last_pass {
            // A pass iterates when the counter is not zero (as
            // `Recorded::iteration` says).
            Some((counter, plan)) if words.get(*counter).is_none_or(|&count| count == 0) => {
                (plan, true)
            }
            _ => (&self.every, false),
        }
    }
}

/// The plans of a block of `decoded` instructions whose records hold what
/// `sources` says, their events in the order the replay reports them with
/// Callgrind's rules; `None` for a block they cannot describe (a REP
/// string instruction before the block's last, or without its counter
/// recorded).
pub(super) fn plan(decoded: &[Decoded], sources: &[Sources]) -> Option<Plan> {
    let ends_in_rep = decoded.last().is_some_and(|last| last.rep.is_some());
    let last_pass = match ends_in_rep {
        true => {
            let counter = sources.get(decoded.len() - 1)?.counter?;
            Some((counter, RunPlan::new(events(decoded, sources, false)?)?))
        }
        false => None,
    };
    Some(Plan {
        every: RunPlan::new(events(decoded, sources, true)?)?,
        last_pass,
    })
}

/// The events of a run of a block of `decoded` instructions (see [`plan`]);
/// `iterates` says whether a REP pass ending the block runs an iteration.
fn events(decoded: &[Decoded], sources: &[Sources], iterates: bool) -> Option<Vec<PlannedEvent>> {
    let mut events = Vec::new();
    let mut known = 0;
    let last = decoded.len().checked_sub(1)?;
    for (index, (decoded, sources)) in decoded.iter().zip(sources).enumerate() {
        let instruction = u32::try_from(index).ok()?;
        let mut push = |what| events.push(PlannedEvent { instruction, what });
        let conditional_rep = match decoded.rep {
            Some(_) if index != last => return None,
            Some(rep) => {
                // The count check (as `semantics::report` reports it with
                // Callgrind's rules): its outcome follows from the pass.
                let conditional = rep.while_zero_flag.is_some();
                if known & RCX == 0 {
                    // Inverted for plain `rep`: taken when it iterates.
                    let taken = iterates != conditional;
                    push(Planned::Conditional {
                        guard: None,
                        when_held: taken,
                        when_not: taken,
                    });
                }
                if !iterates {
                    break;
                }
                Some(rep.while_zero_flag)
            }
            None => None,
        };
        decoded
            .accesses
            .templates(|operand, _, offset, size, kind| {
                if let Some(&source) = sources.operands.get(operand) {
                    push(Planned::Access {
                        source,
                        offset,
                        size,
                        kind,
                    });
                }
            });
        if decoded.bus {
            push(Planned::Bus);
        }
        if let Some(while_zero_flag) = conditional_rep {
            // The continue condition of REPE/REPNE: ZF after the
            // iteration.
            if while_zero_flag.is_some() {
                push(Planned::Conditional {
                    guard: sources.zero_flag,
                    when_held: while_zero_flag == Some(true),
                    when_not: while_zero_flag == Some(false),
                });
            }
            break;
        }
        let when_held = decoded.branch.conditional(|| true, known, false);
        let when_not = decoded.branch.conditional(|| false, known, false);
        if let (Some(when_held), Some(when_not)) = (when_held, when_not) {
            push(Planned::Conditional {
                guard: sources.guard,
                when_held,
                when_not,
            });
        }
        if decoded.branch == Branch::Indirect {
            push(Planned::Indirect {
                target: sources.target,
            });
        }
        known = decoded.effect.apply(known);
    }
    Some(events)
}

#[cfg(test)]
mod tests {
    use iced_x86::{Decoder, DecoderOptions};

    use super::*;

    /// The decoded instructions of `bytes` (64-bit code).
    fn decoded(bytes: &[u8]) -> Vec<Decoded> {
        Decoder::new(64, bytes, DecoderOptions::NONE)
            .into_iter()
            .map(|instruction| Decoded::of(&instruction))
            .collect()
    }

    /// The events of a run whose record holds `words`, as `plan` says.
    fn run(plan: &Plan, words: &[u64]) -> (Vec<BlockEvent>, bool) {
        let (run, last_pass) = plan.run(words);
        let events: Vec<BlockEvent> = run.events.iter().map(|event| event.event(words)).collect();
        // The accesses alone are the events' accesses.
        let accesses: Vec<BlockEvent> = run
            .accesses
            .iter()
            .map(|access| BlockEvent::Access(access.access(words)))
            .collect();
        let from_events: Vec<BlockEvent> = events
            .iter()
            .copied()
            .filter(|event| matches!(event, BlockEvent::Access(_)))
            .collect();
        assert_eq!(accesses, from_events);
        (events, last_pass)
    }

    /// Word 0: `rsi`, word 1: `rdi`, word 2: `rcx` before the pass, word
    /// 3: ZF after it (the sources of a REP string instruction).
    fn string_sources() -> Sources {
        Sources {
            operands: vec![Source::Word(0), Source::Word(1)],
            counter: Some(2),
            zero_flag: Some(3),
            ..Sources::default()
        }
    }

    fn access(addr: u64, kind: AccessKind) -> BlockEvent {
        BlockEvent::Access(DataAccess {
            addr,
            size: 1,
            kind,
        })
    }

    #[test]
    fn a_rep_pass_that_iterates_and_the_last_pass_have_plans_of_their_own() {
        // rep movsb
        let plan = plan(&decoded(&[0xf3, 0xa4]), &[string_sources()]).expect("a plan");
        let (events, last_pass) = run(&plan, &[0x100, 0x200, 5, 0]);
        assert!(!last_pass);
        assert_eq!(
            events,
            [
                BlockEvent::Conditional(true),
                access(0x100, AccessKind::Read),
                access(0x200, AccessKind::Write),
            ]
        );
        let (events, last_pass) = run(&plan, &[0x100, 0x200, 0, 0]);
        assert!(last_pass);
        assert_eq!(events, [BlockEvent::Conditional(false)]);
    }

    #[test]
    fn repe_cmpsb_reports_its_count_check_uninverted_and_its_continue_condition() {
        // repe cmpsb
        let plan = plan(&decoded(&[0xf3, 0xa6]), &[string_sources()]).expect("a plan");
        let (events, _) = run(&plan, &[0x100, 0x200, 5, 1]);
        assert_eq!(
            events,
            [
                BlockEvent::Conditional(false),
                access(0x100, AccessKind::Read),
                access(0x200, AccessKind::Read),
                BlockEvent::Conditional(true),
            ]
        );
        let (events, _) = run(&plan, &[0x100, 0x200, 0, 1]);
        assert_eq!(events, [BlockEvent::Conditional(true)]);
    }

    #[test]
    fn an_atomic_instruction_is_a_bus_event_after_its_access() {
        // lock xadd [rax], rbx; add [rax], rbx
        let sources = [
            Sources {
                operands: vec![Source::Word(0)],
                ..Sources::default()
            },
            Sources {
                operands: vec![Source::Word(1)],
                ..Sources::default()
            },
        ];
        let bytes = [0xf0, 0x48, 0x0f, 0xc1, 0x18, 0x48, 0x01, 0x18];
        let plan = plan(&decoded(&bytes), &sources).expect("a plan");
        let (events, _) = run(&plan, &[0x100, 0x200]);
        // Once, after the first instruction's events (its access, and the
        // compare-and-swap's check VEX adds), before the second's access.
        let at = |wanted: fn(&BlockEvent) -> bool| events.iter().position(wanted);
        let bus = at(|event| *event == BlockEvent::Bus);
        let first = at(|event| matches!(event, BlockEvent::Access(a) if a.addr == 0x100));
        let second = at(|event| matches!(event, BlockEvent::Access(a) if a.addr == 0x200));
        assert_eq!(events.iter().filter(|&&e| e == BlockEvent::Bus).count(), 1);
        assert!(first < bus && bus < second, "{events:?}");
        assert_eq!(second, Some(events.len() - 1), "{events:?}");
    }

    #[test]
    fn a_rep_before_the_block_s_last_instruction_has_no_plan() {
        // rep movsb; nop
        let sources = [string_sources(), Sources::default()];
        assert_eq!(plan(&decoded(&[0xf3, 0xa4, 0x90]), &sources), None);
    }
}
