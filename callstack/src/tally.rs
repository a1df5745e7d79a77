//! Cachegrind's attribution counted on the simulation's thread: while the
//! simulation runs ahead of the collector ([`crate::ahead`]), the runs of
//! a block whose charges the collector already keeps as a list
//! ([`OwnRun`]) need nothing of the collector but that list. The thread
//! ahead counts such runs by block key and notes each of their misses by
//! key, instruction and column ([`Tally`]); the collector passes over
//! their records and charges each chunk's tally in one go
//! ([`Tally::charge`]), as Callgrind charges a block's execution counter
//! times its instructions' costs. Both sides decide which runs are
//! tallied from the same list ([`Tallied`]), made when the drain starts.

use crate::attribution::OwnRun;
use crate::costs::Costs;

/// The blocks whose runs are tallied during one drain: those whose
/// [`OwnRun`] fits the drained thread's cost table when the drain starts,
/// by key, with their address and instruction count (a key is checked
/// against the block it names, as [`OwnRun::fits`] checks it).
#[derive(Clone, Debug, Default)]
pub(crate) struct Tallied {
    blocks: Vec<Option<(u64, usize)>>,
}

impl Tallied {
    /// The blocks of `own_runs` (by key) that fit `table`, numbered `key`.
    pub fn new(own_runs: &[Option<Box<OwnRun>>], key: u32, table: &Costs) -> Tallied {
        let blocks = own_runs
            .iter()
            .map(|own| {
                let own = own.as_deref()?;
                let block = own.block();
                own.fits(block, key, table).then_some(block)
            })
            .collect();
        Tallied { blocks }
    }

    /// Whether the runs of the block of `key` at `addr` with `count`
    /// instructions are tallied.
    #[inline]
    pub fn covers(&self, key: u32, addr: u64, count: usize) -> bool {
        self.blocks.get(key as usize) == Some(&Some((addr, count)))
    }
}

/// What the tallied runs of one chunk of records did: how many runs each
/// block key had, and each miss (key, instruction position, column).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    runs: Vec<(u32, u64)>,
    misses: Vec<u64>,
}

/// A miss of the instruction at `position` of the block of `key`, in
/// event `column`, as one word.
fn miss_tag(key: u32, position: usize, column: usize) -> u64 {
    let position = position.min(0xffff) as u64;
    (u64::from(key) << 24) | (position << 8) | (column as u64 & 0xff)
}

/// The key, position and column of a [`miss_tag`].
fn of_miss_tag(tag: u64) -> (u32, usize, usize) {
    let key = (tag >> 24) as u32;
    (key, ((tag >> 8) & 0xffff) as usize, (tag & 0xff) as usize)
}

/// The thread ahead's side: counts runs by key between the ends of
/// chunks.
#[derive(Debug)]
pub(crate) struct Tallying {
    tallied: Tallied,
    /// Runs by key since the last chunk's end, and the keys counted.
    runs: Vec<u64>,
    touched: Vec<u32>,
    /// The misses since the last chunk's end ([`miss_tag`]).
    misses: Vec<u64>,
}

impl Tallying {
    /// Counts the runs of the blocks `tallied` covers.
    pub fn new(tallied: Tallied) -> Tallying {
        Tallying {
            runs: vec![0; tallied.blocks.len()],
            tallied,
            touched: Vec::new(),
            misses: Vec::new(),
        }
    }

    /// Whether the runs of the block of `key` at `addr` with `count`
    /// instructions are tallied ([`Tallied::covers`]).
    #[inline]
    pub fn covers(&self, key: u32, addr: u64, count: usize) -> bool {
        self.tallied.covers(key, addr, count)
    }

    /// `runs` more runs of the block of `key` (one it covers).
    #[inline]
    pub fn ran(&mut self, key: u32, runs: u64) {
        if let Some(count) = self.runs.get_mut(key as usize) {
            if *count == 0 {
                self.touched.push(key);
            }
            *count += runs;
        }
    }

    /// A miss in `column` of the instruction at `position` of a run of the
    /// block of `key`.
    #[inline]
    pub fn missed(&mut self, key: u32, position: usize, column: usize) {
        self.misses.push(miss_tag(key, position, column));
    }

    /// What was counted since the last chunk's end; counting starts
    /// again from nothing.
    pub fn take(&mut self) -> Tally {
        let runs = self
            .touched
            .drain(..)
            .map(|key| {
                let count = self.runs.get_mut(key as usize).map(std::mem::take);
                (key, count.unwrap_or_default())
            })
            .collect();
        Tally {
            runs,
            misses: std::mem::take(&mut self.misses),
        }
    }
}

/// Where a tally's events go: the drained thread's cost table and its own
/// counter.
pub(crate) trait TallySink {
    /// `runs` runs of a block whose charges are `own`.
    fn runs(&mut self, own: &OwnRun, runs: u64);
    /// One event in `column` of the instruction at `position` of a block
    /// whose charges are `own`.
    fn extra(&mut self, own: &OwnRun, position: usize, column: usize);
}

impl Tally {
    /// Whether it counted nothing.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty() && self.misses.is_empty()
    }

    /// Charges its runs and misses to `sink` with the lists of `own_runs`
    /// (by key); whether every key it counted has one.
    pub fn charge(&self, own_runs: &[Option<Box<OwnRun>>], sink: &mut impl TallySink) -> bool {
        let own = |key: u32| own_runs.get(key as usize).and_then(Option::as_deref);
        let mut complete = true;
        for &(key, runs) in &self.runs {
            match own(key) {
                Some(own) => sink.runs(own, runs),
                None => complete = false,
            }
        }
        for &tag in &self.misses {
            let (key, position, column) = of_miss_tag(tag);
            match own(key) {
                Some(own) => sink.extra(own, position, column),
                None => complete = false,
            }
        }
        complete
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::Charged;
    use crate::context::Centre;

    /// The list of a block at `addr` of `count` instructions, each charged
    /// to a slot of its own in `table` (numbered 0), every run counting
    /// `Ir` of each.
    fn own_run(table: &mut Costs, addr: u64, count: usize) -> OwnRun {
        let centre = Centre { cxt: 0, rec: 0 };
        let charged: Vec<Charged> = (0..count as u64)
            .map(|at| Charged {
                key: 0,
                centre,
                addr: addr + at,
                slot: Some((table.generation, table.slot(centre, addr + at, 4))),
            })
            .collect();
        let every: Vec<(u32, u32)> = (0..count as u32).map(|at| (at, 0)).collect();
        OwnRun::new(addr, &charged, &every, table, Box::new([])).expect("every slot known")
    }

    /// What [`Tally::charge`] hands on: (block address, runs) and (block
    /// address, position, column).
    #[derive(Default)]
    struct Seen {
        runs: Vec<(u64, u64)>,
        extras: Vec<(u64, usize, usize)>,
    }

    impl TallySink for Seen {
        fn runs(&mut self, own: &OwnRun, runs: u64) {
            self.runs.push((own.block().0, runs));
        }
        fn extra(&mut self, own: &OwnRun, position: usize, column: usize) {
            self.extras.push((own.block().0, position, column));
        }
    }

    #[test]
    fn a_tally_charges_each_block_its_runs_and_each_miss_its_instruction() {
        let mut table = Costs::default();
        let own_runs = vec![
            Some(Box::new(own_run(&mut table, 0x1000, 3))),
            None,
            Some(Box::new(own_run(&mut table, 0x2000, 2))),
        ];
        let tallied = Tallied::new(&own_runs, 0, &table);
        assert!(tallied.covers(0, 0x1000, 3) && tallied.covers(2, 0x2000, 2));
        assert!(!tallied.covers(1, 0x1000, 3));
        assert!(
            !Tallied::new(&own_runs, 1, &table).covers(0, 0x1000, 3),
            "the lists are another table's"
        );
        let mut tallying = Tallying::new(tallied);
        tallying.ran(2, 5);
        tallying.ran(0, 1);
        tallying.missed(2, 1, 3);
        tallying.missed(0, 2, 1);
        let mut seen = Seen::default();
        assert!(tallying.take().charge(&own_runs, &mut seen));
        assert_eq!(seen.runs, [(0x2000, 5), (0x1000, 1)]);
        assert_eq!(seen.extras, [(0x2000, 1, 3), (0x1000, 2, 1)]);
        // A key whose list is gone is reported, the others still charged.
        let orphan = Tally {
            runs: vec![(1, 2), (0, 1)],
            misses: vec![miss_tag(1, 0, 1)],
        };
        let mut seen = Seen::default();
        assert!(!orphan.charge(&own_runs, &mut seen));
        assert_eq!(seen.runs, [(0x1000, 1)]);
        assert!(seen.extras.is_empty());
    }

    #[test]
    fn a_miss_tag_keeps_key_position_and_column() {
        assert_eq!(of_miss_tag(miss_tag(70_001, 12, 5)), (70_001, 12, 5));
        assert_eq!(
            of_miss_tag(miss_tag(u32::MAX, 0xffff, 17)),
            (u32::MAX, 0xffff, 17)
        );
        // Positions beyond the tag's field share its last value.
        assert_eq!(of_miss_tag(miss_tag(3, 0x1_0000, 1)).1, 0xffff);
    }

    #[test]
    fn a_chunk_counts_runs_per_key_once_each_and_starts_again() {
        let tallied = Tallied {
            blocks: vec![Some((0x1000, 3)), None, Some((0x2000, 1))],
        };
        let mut tallying = Tallying::new(tallied);
        assert!(tallying.covers(0, 0x1000, 3));
        assert!(
            !tallying.covers(0, 0x1000, 4),
            "another block under the key"
        );
        assert!(!tallying.covers(1, 0x1000, 3));
        assert!(!tallying.covers(7, 0x1000, 3), "a key beyond the list");
        tallying.ran(2, 1);
        tallying.ran(0, 4);
        tallying.ran(2, 2);
        tallying.missed(0, 1, 4);
        let tally = tallying.take();
        assert_eq!(tally.runs, [(2, 3), (0, 4)]);
        assert_eq!(tally.misses, [miss_tag(0, 1, 4)]);
        let next = tallying.take();
        assert!(next.is_empty(), "{next:?}");
        tallying.ran(0, 1);
        assert_eq!(tallying.take().runs, [(0, 1)]);
    }
}
