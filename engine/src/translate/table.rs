//! The indirect-branch table: where the lookup routines (`translator`)
//! find the translation of an indirect branch's target without a stop.
//!
//! [`SETS`] sets of [`WAYS`] entries, each entry a pair (original address,
//! translated address) of 16 bytes. A target's set mixes its low address
//! bits with the next ones ([`set_of`]), so that code 64 KB apart (two
//! copies of a function in two libraries, a function and its neighbour's
//! return address) does not fall in one set. A lookup checks way 0, then
//! way 1; a target found in neither stops the thread, and the tracer
//! enters it in way 0, the entry there moving to way 1 ([`Table::enter`]):
//! so two hot targets of one set do not evict each other at every call.
//!
//! Other threads read the table while the tracer writes it: an entry
//! holds no original address (`u64::MAX`, which no code has) while its
//! translated address changes.

use rustc_hash::FxHashMap;

use super::writes::Writes;

/// Sets of the table (a power of two).
pub(super) const SETS: u64 = 1 << 15;
/// Entries per set.
pub(super) const WAYS: usize = 2;
/// Bytes of one entry: the original address, then the translated one.
pub(super) const ENTRY_BYTES: u64 = 16;
/// Where an entry's translated address is, from the entry's start.
pub(super) const TRANSLATED_AT: u64 = 8;
/// Bytes of one set.
pub(super) const SET_BYTES: u64 = ENTRY_BYTES * WAYS as u64;
/// Bytes of the whole table.
pub(super) const BYTES: u64 = SETS * SET_BYTES;
/// How far [`set_of`] shifts the address before mixing it in.
pub(super) const MIX_SHIFT: u32 = 16;

/// The set of original address `target`: its low bits exclusive-or the
/// bits [`MIX_SHIFT`] above them.
pub(super) fn set_of(target: u64) -> u64 {
    (target ^ (target >> MIX_SHIFT)) & (SETS - 1)
}

/// Where way `way` of `target`'s set is, in a table at `base`.
pub(super) fn entry_at(base: u64, target: u64, way: usize) -> u64 {
    base + set_of(target) * SET_BYTES + way as u64 * ENTRY_BYTES
}

/// The tracer's copy of what the table holds: the original addresses in
/// each used set, the most recently entered first (0 for none: no code is
/// at address 0). Their translated addresses are the cache's entries.
#[derive(Clone, Debug, Default)]
pub(super) struct Table {
    sets: FxHashMap<u64, [u64; WAYS]>,
}

impl Table {
    /// Enters `target` → `entry` in the table at `base` (the writes go to
    /// `writes`, in the order other threads may see them). A target the
    /// set holds keeps its way; another one goes to way 0 and what way 0
    /// held moves to way 1 with its entry in `entries` (what way 1 held is
    /// dropped), unless `entries` has none for it (nothing, or a dropped
    /// translation: way 1 stays as it is).
    pub fn enter(
        &mut self,
        writes: &mut Writes,
        base: u64,
        target: u64,
        entry: u64,
        entries: &FxHashMap<u64, u64>,
    ) {
        let set = self.sets.entry(set_of(target)).or_default();
        if let Some(way) = set.iter().position(|&held| held == target) {
            write_entry(writes, entry_at(base, target, way), target, entry);
            return;
        }
        if let Some(&moved) = entries.get(&set[0]) {
            write_entry(writes, entry_at(base, target, 1), set[0], moved);
            set[1] = set[0];
        }
        set[0] = target;
        write_entry(writes, entry_at(base, target, 0), target, entry);
    }

    /// Takes `target` out of the table at `base`: the address of its
    /// entry, to be cleared, when the table holds it.
    pub fn remove(&mut self, base: u64, target: u64) -> Option<u64> {
        let set = self.sets.get_mut(&set_of(target))?;
        let way = set.iter().position(|&held| held == target)?;
        set[way] = 0;
        if set.iter().all(|&held| held == 0) {
            self.sets.remove(&set_of(target));
        }
        Some(entry_at(base, target, way))
    }

    /// Whether the table holds `target`.
    #[cfg(test)]
    fn holds(&self, target: u64) -> bool {
        self.sets
            .get(&set_of(target))
            .is_some_and(|set| set.contains(&target))
    }
}

/// Writes `target` → `entry` at `at`: no original address while the
/// translated one changes, then the translated address, then the original.
fn write_entry(writes: &mut Writes, at: u64, target: u64, entry: u64) {
    writes.patch(at, &u64::MAX.to_le_bytes());
    writes.patch(at + TRANSLATED_AT, &entry.to_le_bytes());
    writes.patch(at, &target.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::memory::Memory;

    /// Targets 64 KB apart (same low 16 bits) fall in different sets.
    #[test]
    fn code_64_kb_apart_falls_in_different_sets() {
        let a = 0x7fff_f7f4_0eb0;
        let b = 0x7fff_f7f5_0eb0;
        assert_ne!(set_of(a), set_of(b));
        assert!(set_of(a) < SETS && set_of(b) < SETS);
        assert_eq!(entry_at(0x1000, a, 1), 0x1000 + set_of(a) * 32 + 16);
    }

    /// Three targets of one set.
    fn same_set() -> [u64; 3] {
        let a = 0x5555_5555_1230;
        let b = a ^ (1 << MIX_SHIFT) ^ 1;
        let c = a ^ (2 << MIX_SHIFT) ^ 2;
        assert_eq!(set_of(a), set_of(b));
        assert_eq!(set_of(a), set_of(c));
        [a, b, c]
    }

    /// A table in this process's memory, its copy, and the cache's
    /// entries, entered and written through one call.
    struct Fixture {
        memory: Memory,
        bytes: Vec<u8>,
        table: Table,
        entries: FxHashMap<u64, u64>,
    }

    impl Fixture {
        fn new() -> Fixture {
            Fixture {
                memory: Memory::open(std::process::id() as i32).unwrap(),
                bytes: vec![0u8; BYTES as usize],
                table: Table::default(),
                entries: FxHashMap::default(),
            }
        }

        /// A fixture whose set of [`same_set`] holds its first two
        /// targets (0xa0 and 0xb0), the second in way 0; and the targets.
        fn with_two_entered() -> (Fixture, [u64; 3]) {
            let targets = same_set();
            let mut fixture = Fixture::new();
            fixture.enter(targets[0], 0xa0);
            fixture.enter(targets[1], 0xb0);
            (fixture, targets)
        }

        fn base(&self) -> u64 {
            self.bytes.as_ptr() as u64
        }

        /// Enters `target` → `entry` (a translation the cache has) and
        /// makes the writes.
        fn enter(&mut self, target: u64, entry: u64) {
            self.entries.insert(target, entry);
            let mut writes = Writes::default();
            let base = self.base();
            self.table
                .enter(&mut writes, base, target, entry, &self.entries);
            writes.flush(&self.memory).unwrap();
        }

        /// What way `way` of `target`'s set holds in memory.
        fn way(&self, target: u64, way: usize) -> (u64, u64) {
            let mut bytes = [0u8; 16];
            let at = entry_at(self.base(), target, way);
            self.memory.read(at, &mut bytes).unwrap();
            let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
            (word(0), word(TRANSLATED_AT as usize))
        }
    }

    /// The newest target of a set is in way 0, the one before in way 1;
    /// a third one drops the oldest.
    #[test]
    fn a_set_keeps_its_two_newest_targets_newest_first() {
        let (mut fixture, [a, b, c]) = Fixture::with_two_entered();
        assert_eq!(fixture.way(a, 0), (b, 0xb0));
        assert_eq!(fixture.way(a, 1), (a, 0xa0));
        fixture.enter(c, 0xc0);
        assert_eq!(fixture.way(a, 0), (c, 0xc0));
        assert_eq!(fixture.way(a, 1), (b, 0xb0));
        let table = &fixture.table;
        assert_eq!(
            (table.holds(a), table.holds(b), table.holds(c)),
            (false, true, true)
        );
    }

    /// A target the set holds is entered again in its own way (a new
    /// translated address), the other way untouched.
    #[test]
    fn a_target_entered_again_keeps_its_way() {
        let (mut fixture, [a, b, _]) = Fixture::with_two_entered();
        fixture.enter(a, 0xa1);
        assert_eq!(fixture.way(a, 0), (b, 0xb0));
        assert_eq!(fixture.way(a, 1), (a, 0xa1));
    }

    /// Removing gives the way that held the target, once; the set's other
    /// target stays.
    #[test]
    fn removing_gives_the_entry_that_held_the_target() {
        let (mut fixture, [a, b, c]) = Fixture::with_two_entered();
        let base = fixture.base();
        let table = &mut fixture.table;
        assert_eq!(table.remove(base, a), Some(entry_at(base, a, 1)));
        assert_eq!(table.remove(base, a), None);
        assert_eq!(table.remove(base, c), None);
        assert!(table.holds(b));
        assert_eq!(table.remove(base, b), Some(entry_at(base, b, 0)));
        assert!(table.sets.is_empty());
    }

    /// After way 0 is emptied, a new target takes it and way 1 keeps its
    /// target (the table and its copy agree on it).
    #[test]
    fn an_emptied_way_0_is_taken_without_moving_way_1() {
        let (mut fixture, [a, b, c]) = Fixture::with_two_entered();
        let base = fixture.base();
        assert_eq!(fixture.table.remove(base, b), Some(entry_at(base, b, 0)));
        fixture.enter(c, 0xc0);
        assert_eq!(fixture.way(a, 0), (c, 0xc0));
        assert_eq!(fixture.way(a, 1), (a, 0xa0));
        assert!(fixture.table.holds(a));
    }

    /// A target in way 0 the cache no longer has an entry for is not
    /// moved to way 1: way 1 keeps what it held.
    #[test]
    fn a_target_without_an_entry_is_not_moved() {
        let [a, b, _] = same_set();
        let mut fixture = Fixture::new();
        fixture.enter(a, 0xa0);
        fixture.entries.remove(&a);
        fixture.enter(b, 0xb0);
        assert_eq!(fixture.way(a, 0), (b, 0xb0));
        assert_eq!(fixture.way(a, 1), (0, 0));
        assert!(!fixture.table.holds(a));
    }
}
