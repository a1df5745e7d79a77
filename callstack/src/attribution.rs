//! Cachegrind's attribution with simulation: each executed instruction is
//! charged to a slot of its own function's self costs, which the events
//! that follow it reach without a lookup; a direct-mapped cache finds the
//! slot of an instruction that ran recently without hashing.

use crate::context::Centre;

/// Where the last instruction was charged, for the events that follow it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Charged {
    /// The key of the cost table.
    pub key: u32,
    /// The centre charged.
    pub centre: Centre,
    /// The instruction's address.
    pub addr: u64,
    /// Its slot in the table, with the table's generation it is valid in.
    pub slot: Option<(u64, usize)>,
}

/// A direct-mapped cache of [`Charged`] by instruction address.
#[derive(Clone, Debug, Default)]
pub(crate) struct RecentSlots {
    /// [`RECENT`] entries, empty until the first one is kept.
    entries: Vec<Option<Charged>>,
}

/// The entries of the cache (a power of two).
const RECENT: usize = 8192;

/// The entry an instruction at `addr` maps to.
#[inline]
fn entry_of(addr: u64) -> usize {
    (addr ^ (addr >> 13)) as usize & (RECENT - 1)
}

impl RecentSlots {
    /// The slot of the instruction at `addr` in the table of `key` at
    /// `generation`, if it is cached.
    #[inline]
    pub fn get(&self, addr: u64, key: u32, generation: u64) -> Option<Charged> {
        let charged = (*self.entries.get(entry_of(addr))?)?;
        let current = charged.addr == addr
            && charged.key == key
            && charged.slot.is_some_and(|(known, _)| known == generation);
        current.then_some(charged)
    }

    /// Keeps `charged` (which has a slot).
    pub fn put(&mut self, charged: Charged) {
        if self.entries.is_empty() {
            self.entries = vec![None; RECENT];
        }
        self.entries[entry_of(charged.addr)] = Some(charged);
    }
}
