//! The events of a translation's runs, planned once: for a block without
//! REP string instructions, which data accesses and branches each run
//! reports, and in which recorded word each one's dynamic part is, follow
//! from the block's instructions alone (Callgrind's rules: the registers
//! holding constants start empty at the block's start). The replay then
//! reads each event straight from a record ([`crate::SimulatedBlock`])
//! instead of applying the rules per run.

use crate::event::{AccessKind, BlockEvent, DataAccess};
use crate::semantics::{Branch, Decoded};

use super::capture::{Source, Sources};

/// One event of every run of a translation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PlannedEvent {
    /// The number of the instruction in its block it follows.
    pub instruction: u32,
    what: Planned,
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
}

impl PlannedEvent {
    /// Whether it is a data access (not a branch).
    #[inline]
    pub fn is_access(&self) -> bool {
        matches!(self.what, Planned::Access { .. })
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
        }
    }
}

/// The events of every run of a block of `decoded` instructions whose
/// records hold what `sources` says, in the order the replay reports them
/// with Callgrind's rules; `None` for a block a plan cannot describe (a
/// REP string instruction: its events depend on the pass).
pub(super) fn plan(decoded: &[Decoded], sources: &[Sources]) -> Option<Vec<PlannedEvent>> {
    let mut events = Vec::new();
    let mut known = 0;
    for (index, (decoded, sources)) in decoded.iter().zip(sources).enumerate() {
        if decoded.rep.is_some() {
            return None;
        }
        let instruction = u32::try_from(index).ok()?;
        let mut push = |what| events.push(PlannedEvent { instruction, what });
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
