//! A translation's lists in one allocation: its exits (with where each
//! enters its target) and which of them are linked, the numbers of its
//! instructions' decodings and sources, its traps besides the exit stubs
//! and its safe points. Programs have tens of thousands of
//! translations; one allocation with 16-bit lengths, instead of a box per
//! list, keeps each about a hundred bytes smaller.

use super::translator::{Entrance, ExitSlot};

/// The lists of one translation (see the module).
#[derive(Clone, Debug, Default)]
pub(super) struct Parts {
    /// The exits (three words each: slot, stub with the entrance's number
    /// above [`ADDRESS_BITS`], target), their linked bits (a word per 64
    /// exits), the decodings' and the sources' numbers (two to a word),
    /// the traps (address, and kind above [`ADDRESS_BITS`]), the safe
    /// points.
    words: Box<[u64]>,
    exits: u16,
    decoded: u16,
    sources: u16,
    traps: u16,
}

/// The lists [`Parts`] hold, as a translation is made.
pub(super) struct Lists<'a> {
    pub exits: &'a [ExitSlot],
    pub decoded: &'a [u32],
    pub sources: &'a [u32],
    pub traps: &'a [(u64, Trap)],
    pub safe: &'a [u64],
}

/// What an `int3` of a translation other than an exit stub is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Trap {
    /// A `cpuid` of the program, for the tracer to answer.
    Cpuid,
    /// A system call the tracer watches.
    Syscall,
    /// The check that the original code is unchanged failed.
    Stale,
}

impl Trap {
    const ALL: [Trap; 3] = [Trap::Cpuid, Trap::Syscall, Trap::Stale];
}

/// The low bits of a trap's or an exit stub's word, its address; the
/// trap's kind's or the exit's entrance's number is above them
/// (addresses in user space are below 2^47).
const ADDRESS_BITS: u32 = 56;

/// Words per exit.
const EXIT: usize = 3;

impl Parts {
    /// `lists` in one allocation, none linked; `None` when a list other
    /// than the safe points is longer than 65535, or a trap's or a stub's
    /// address has bits above [`ADDRESS_BITS`].
    pub fn new(lists: Lists<'_>) -> Option<Parts> {
        let length = |len: usize| u16::try_from(len).ok();
        let mut parts = Parts {
            words: Box::default(),
            exits: length(lists.exits.len())?,
            decoded: length(lists.decoded.len())?,
            sources: length(lists.sources.len())?,
            traps: length(lists.traps.len())?,
        };
        let mut words = vec![0u64; parts.safe_at() + lists.safe.len()];
        for (index, exit) in lists.exits.iter().enumerate() {
            if exit.stub >> ADDRESS_BITS != 0 {
                return None;
            }
            let stub = exit.stub | (exit.entrance as u64) << ADDRESS_BITS;
            words[index * EXIT..][..EXIT].copy_from_slice(&[exit.slot, stub, exit.target]);
        }
        let numbers = |words: &mut [u64], at: usize, values: &[u32]| {
            let packed: &mut [u32] =
                bytemuck::cast_slice_mut(&mut words[at..at + values.len().div_ceil(2)]);
            packed[..values.len()].copy_from_slice(values);
        };
        numbers(&mut words, parts.decoded_at(), lists.decoded);
        numbers(&mut words, parts.sources_at(), lists.sources);
        for (word, &(at, trap)) in words[parts.traps_at()..].iter_mut().zip(lists.traps) {
            if at >> ADDRESS_BITS != 0 {
                return None;
            }
            *word = at | (trap as u64) << ADDRESS_BITS;
        }
        words[parts.safe_at()..].copy_from_slice(lists.safe);
        parts.words = words.into_boxed_slice();
        Some(parts)
    }

    fn linked_at(&self) -> usize {
        usize::from(self.exits) * EXIT
    }

    fn decoded_at(&self) -> usize {
        self.linked_at() + usize::from(self.exits).div_ceil(64)
    }

    fn sources_at(&self) -> usize {
        self.decoded_at() + usize::from(self.decoded).div_ceil(2)
    }

    fn traps_at(&self) -> usize {
        self.sources_at() + usize::from(self.sources).div_ceil(2)
    }

    fn safe_at(&self) -> usize {
        self.traps_at() + usize::from(self.traps)
    }

    /// How many exits there are.
    pub fn exit_count(&self) -> usize {
        usize::from(self.exits)
    }

    /// Exit `index`, if there is one.
    pub fn exit(&self, index: usize) -> Option<ExitSlot> {
        if index >= self.exit_count() {
            return None;
        }
        match self.words.get(index * EXIT..(index + 1) * EXIT)? {
            &[slot, stub, target] => Some(ExitSlot {
                slot,
                stub: stub & ((1 << ADDRESS_BITS) - 1),
                target,
                entrance: *Entrance::ALL.get((stub >> ADDRESS_BITS) as usize)?,
            }),
            _ => None,
        }
    }

    /// The exits, in order.
    pub fn exits(&self) -> impl Iterator<Item = ExitSlot> + '_ {
        (0..self.exit_count()).filter_map(|index| self.exit(index))
    }

    /// Whether exit `index` jumps to a translation (not to its stub).
    pub fn linked(&self, index: usize) -> bool {
        self.bit(self.linked_at(), index)
    }

    /// Bit `index` of the bit list at `at`, for an exit.
    fn bit(&self, at: usize, index: usize) -> bool {
        index < self.exit_count()
            && self
                .words
                .get(at + index / 64)
                .is_some_and(|bits| bits & (1 << (index % 64)) != 0)
    }

    /// Marks exit `index` linked or not (nothing when there is no such exit).
    pub fn set_linked(&mut self, index: usize, linked: bool) {
        if index >= self.exit_count() {
            return;
        }
        let at = self.linked_at() + index / 64;
        if let Some(bits) = self.words.get_mut(at) {
            let bit = 1 << (index % 64);
            *bits = if linked { *bits | bit } else { *bits & !bit };
        }
    }

    /// Marks every exit not linked.
    pub fn unlink_all(&mut self) {
        let (at, end) = (self.linked_at(), self.decoded_at());
        self.words[at..end].fill(0);
    }

    /// The numbers of the instructions' decodings.
    pub fn decoded(&self) -> &[u32] {
        self.numbers(self.decoded_at(), self.decoded)
    }

    /// The numbers of the instructions' sources (empty without recorded
    /// words).
    pub fn sources(&self) -> &[u32] {
        self.numbers(self.sources_at(), self.sources)
    }

    fn numbers(&self, at: usize, len: u16) -> &[u32] {
        let len = usize::from(len);
        let packed: &[u32] = bytemuck::cast_slice(&self.words[at..at + len.div_ceil(2)]);
        &packed[..len]
    }

    /// What the `int3` at `addr` is for, if it is one of the traps
    /// (not an exit stub).
    pub fn trap(&self, addr: u64) -> Option<Trap> {
        let mask = (1 << ADDRESS_BITS) - 1;
        let traps = &self.words[self.traps_at()..self.safe_at()];
        let word = traps.iter().find(|&&word| word & mask == addr)?;
        Trap::ALL.get((word >> ADDRESS_BITS) as usize).copied()
    }

    /// The exit whose stub is at `addr`, if one is.
    pub fn exit_with_stub(&self, addr: u64) -> Option<usize> {
        self.exits().position(|exit| exit.stub == addr)
    }

    /// The safe points besides the entry, ascending.
    pub fn safe(&self) -> &[u64] {
        &self.words[self.safe_at()..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exit(n: u64) -> ExitSlot {
        ExitSlot {
            slot: 0x1000 + n,
            stub: 0x2000 + n,
            target: 0x3000 + n,
            entrance: Entrance::ALL[n as usize % 3],
        }
    }

    #[test]
    fn each_list_comes_back_as_it_went_in() {
        for (exits, decoded, sources, traps, safe) in [
            (0, 0, 0, 0, 0),
            (1, 1, 0, 1, 0),
            (2, 5, 5, 3, 4),
            (3, 6, 6, 0, 7),
            (70, 9, 1, 70, 2),
        ] {
            let exits: Vec<ExitSlot> = (0..exits).map(exit).collect();
            let decoded: Vec<u32> = (0..decoded).map(|n| n * 3 + 1).collect();
            let sources: Vec<u32> = (0..sources).map(|n| u32::MAX - n).collect();
            let traps: Vec<(u64, Trap)> = (0..traps)
                .map(|n| (0x4000 + n, Trap::ALL[n as usize % 3]))
                .collect();
            let safe: Vec<u64> = (0..safe).map(|n| 0x5000 + 2 * n).collect();
            let parts = Parts::new(Lists {
                exits: &exits,
                decoded: &decoded,
                sources: &sources,
                traps: &traps,
                safe: &safe,
            })
            .unwrap();
            let case = (exits.len(), decoded.len(), sources.len());
            assert_eq!(parts.exits().collect::<Vec<_>>(), exits, "{case:?}");
            assert_eq!(parts.exit_count(), exits.len());
            assert_eq!(parts.exit(exits.len()), None);
            assert_eq!(parts.decoded(), decoded, "{case:?}");
            assert_eq!(parts.sources(), sources, "{case:?}");
            for &(at, trap) in &traps {
                assert_eq!(parts.trap(at), Some(trap), "{case:?}");
            }
            assert_eq!(parts.trap(0x4000 + traps.len() as u64), None);
            for (index, exit) in exits.iter().enumerate() {
                assert_eq!(parts.exit_with_stub(exit.stub), Some(index));
                assert_eq!(parts.trap(exit.stub), None);
            }
            assert_eq!(parts.exit_with_stub(0x4000), None);
            assert_eq!(parts.safe(), safe, "{case:?}");
            assert!((0..exits.len()).all(|index| !parts.linked(index)));
        }
    }

    #[test]
    fn linking_one_exit_changes_that_exit_only() {
        let exits: Vec<ExitSlot> = (0..70).map(exit).collect();
        let decoded = [7, 8, 9];
        let mut parts = Parts::new(Lists {
            exits: &exits,
            decoded: &decoded,
            sources: &[],
            traps: &[(1, Trap::Cpuid), (2, Trap::Stale)],
            safe: &[],
        })
        .unwrap();
        for index in [0, 63, 64, 69] {
            parts.set_linked(index, true);
        }
        let linked: Vec<usize> = (0..70).filter(|&index| parts.linked(index)).collect();
        assert_eq!(linked, [0, 63, 64, 69]);
        parts.set_linked(63, false);
        assert!(!parts.linked(63) && parts.linked(64));
        // No such exit: nothing changes, nothing is linked.
        parts.set_linked(70, true);
        assert!(!parts.linked(70));
        assert_eq!(parts.decoded(), decoded);
        assert_eq!(parts.exits().collect::<Vec<_>>(), exits);
        parts.unlink_all();
        assert!((0..70).all(|index| !parts.linked(index)));
        // Linking leaves where exits enter as it was.
        assert_eq!(parts.exits().collect::<Vec<_>>(), exits);
        assert_eq!(parts.trap(2), Some(Trap::Stale));
    }

    #[test]
    fn a_stub_address_too_high_is_refused() {
        let mut high = exit(1);
        high.stub |= 1 << ADDRESS_BITS;
        let lists = Lists {
            exits: &[exit(0), high],
            decoded: &[],
            sources: &[],
            traps: &[],
            safe: &[],
        };
        assert!(Parts::new(lists).is_none());
    }

    #[test]
    fn a_list_longer_than_a_length_holds_is_refused() {
        let traps = vec![(0, Trap::Cpuid); 65_536];
        let lists = Lists {
            exits: &[],
            decoded: &[],
            sources: &[],
            traps: &traps,
            safe: &[],
        };
        assert!(Parts::new(lists).is_none());
    }

    #[test]
    fn a_trap_address_above_the_address_bits_is_refused() {
        let parts = |at| {
            Parts::new(Lists {
                exits: &[],
                decoded: &[],
                sources: &[],
                traps: &[(at, Trap::Syscall)],
                safe: &[],
            })
        };
        assert!(parts(1 << ADDRESS_BITS).is_none());
        let highest = (1 << ADDRESS_BITS) - 1;
        let parts = parts(highest).unwrap();
        assert_eq!(parts.trap(highest), Some(Trap::Syscall));
    }
}
