//! Cachegrind's attribution of whole blocks without simulation: each
//! instruction is charged to its own function, which never changes, so a
//! block's runs are counted and each of its instructions gets the count as
//! its `Ir` when the costs are dumped.

use rustc_hash::FxHashMap;

use crate::context::Centre;
use crate::costs::Costs;

/// The instruction sequences (whole blocks) seen in a process, each
/// instruction with the centre it is charged to.
#[derive(Clone, Debug, Default)]
pub(crate) struct Sequences {
    /// The sequence last seen starting at each address.
    by_start: FxHashMap<u64, usize>,
    /// A direct-mapped cache of `by_start` ([`RECENT`] slots, empty until
    /// the first sequence): most blocks run again soon.
    recent: Vec<(u64, usize)>,
    sequences: Vec<Vec<(Centre, u64)>>,
    /// The sequence of each block key of a block-based backend (start,
    /// length, number), once known.
    keyed: Vec<Option<(u64, usize, usize)>>,
}

/// The slots of the cache of recent sequences (a power of two).
const RECENT: usize = 4096;

/// The slot of a sequence starting at `addr` in the cache.
fn recent_slot(addr: u64) -> usize {
    (addr ^ (addr >> 12)) as usize & (RECENT - 1)
}

impl Sequences {
    /// The number of the sequence of `instructions` (not empty) and the
    /// centre of its last instruction, with `centre_of` giving the centre of
    /// an instruction of a sequence seen for the first time.
    #[inline]
    pub fn of(
        &mut self,
        instructions: &[(u64, u8)],
        mut centre_of: impl FnMut(u64) -> Centre,
    ) -> (usize, Option<Centre>) {
        let start = instructions.first().map_or(0, |&(addr, _)| addr);
        let slot = recent_slot(start);
        let (cached, recent) = match self.recent.get(slot) {
            Some(&(at, number)) if at == start => (Some(number), true),
            _ => (self.by_start.get(&start).copied(), false),
        };
        if let Some(number) = cached {
            let same = self.sequences.get(number).is_some_and(|known| {
                known.len() == instructions.len()
                    && known
                        .iter()
                        .zip(instructions)
                        .all(|(&(_, known), &(addr, _))| known == addr)
            });
            if same {
                if !recent {
                    self.remember(slot, start, number);
                }
                return (number, self.last_centre(number));
            }
        }
        // New code, or other code at a known address: a sequence of its own
        // (the runs of the old one stay counted).
        let sequence = instructions
            .iter()
            .map(|&(addr, _)| (centre_of(addr), addr))
            .collect();
        self.sequences.push(sequence);
        let number = self.sequences.len() - 1;
        self.by_start.insert(start, number);
        self.remember(slot, start, number);
        (number, self.last_centre(number))
    }

    /// [`Sequences::of`] for the block a backend numbers `key` (a key
    /// always stands for the same instructions), found by indexing once
    /// known; returns the sequence's number.
    #[inline]
    pub fn of_key(
        &mut self,
        key: u32,
        instructions: &[(u64, u8)],
        centre_of: impl FnMut(u64) -> Centre,
    ) -> usize {
        let start = instructions.first().map_or(0, |&(addr, _)| addr);
        let index = key as usize;
        if let Some(&Some((at, count, number))) = self.keyed.get(index) {
            if at == start && count == instructions.len() {
                return number;
            }
        }
        let (number, _) = self.of(instructions, centre_of);
        if self.keyed.len() <= index {
            self.keyed.resize(index + 1, None);
        }
        self.keyed[index] = Some((start, instructions.len(), number));
        number
    }

    /// Puts sequence `number`, starting at `start`, in cache slot `slot`.
    fn remember(&mut self, slot: usize, start: u64, number: usize) {
        if self.recent.is_empty() {
            // No block starts at the last address of the address space.
            self.recent = vec![(u64::MAX, 0); RECENT];
        }
        self.recent[slot] = (start, number);
    }

    /// The centre of the last instruction of sequence `number`.
    pub fn last_centre(&self, number: usize) -> Option<Centre> {
        let sequence = self.sequences.get(number)?;
        sequence.last().map(|&(centre, _)| centre)
    }

    /// Charges the counted runs in `costs` to their instructions, in cost
    /// vectors of `width` events (before the costs are dumped).
    pub fn settle(&self, costs: &mut Costs, width: usize) {
        let runs = costs.take_sequence_runs();
        for (number, &runs) in runs.iter().enumerate().filter(|(_, &runs)| runs > 0) {
            if let Some(sequence) = self.sequences.get(number) {
                for &(centre, addr) in sequence {
                    costs.charge_ir(centre, addr, runs, width);
                }
            }
        }
    }
}
