//! Where a thread is in block terms ([`BlockCursor`]), following the
//! shared cutting and arrival rules of [`crate::flow`] as the instructions
//! are stepped.
//!
//! Cachegrind's superblocks ([`Superblock`], shared with the translate
//! backend) are followed alongside.

use crate::event::Arrival;
use crate::semantics::Superblock;

/// Where a thread is in block terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct BlockCursor {
    /// A block has been reported and not yet left.
    pub open: bool,
    /// Instructions executed in the open block.
    pub count: u32,
    /// How the next block will be arrived at (when no block is open).
    pub arrival: Arrival,
    /// The general-purpose registers that hold constants of the open block
    /// (see `branches`): set by its instructions, unknown at its start.
    pub known: u16,
    /// Where the thread is in Cachegrind's superblocks.
    pub superblock: Superblock,
}

impl BlockCursor {
    /// A thread that has executed nothing yet.
    pub fn start() -> BlockCursor {
        BlockCursor {
            open: false,
            count: 0,
            arrival: Arrival::Start,
            known: 0,
            superblock: Superblock::start(),
        }
    }

    /// Reports the open block's end; the next block arrives by `arrival`.
    pub fn leave(&mut self, arrival: Arrival) {
        self.open = false;
        self.count = 0;
        self.arrival = arrival;
        self.known = 0;
    }

    /// The arrival a block would have if the thread went on from here: a
    /// fall-through inside a block, else the pending arrival.
    pub fn resumption(&self) -> Arrival {
        if self.open {
            Arrival::FallThrough
        } else {
            self.arrival
        }
    }
}
