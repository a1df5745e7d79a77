//! The misses of a thread's filtered fetches and accesses kept by the
//! record of their run until that run is reported
//! (`cgx_engine::FilteredAccess::record`): a drain's accesses are all
//! reported before its blocks, and its blocks come in the order of their
//! records' addresses (their misses are kept summed per record,
//! instruction and event, [`RunMisses::compact`]). A run counts the
//! misses of its record; the misses
//! of records passed without a run reported (a record with no run left)
//! go where the thread is when they are passed, as do those left at the
//! end of a drain.

/// Misses of one run's instruction: the record of the run, the
/// instruction, the event's column, how many.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RunMiss {
    /// The record (the tracee's address).
    pub record: u64,
    /// The instruction's address.
    pub addr: u64,
    /// The event's column.
    pub column: u32,
    /// How many.
    pub count: u64,
}

/// A thread's misses not counted yet.
#[derive(Clone, Debug, Default)]
pub(crate) struct RunMisses {
    /// Those of the last drain, from `next` on not counted yet.
    misses: Vec<RunMiss>,
    next: usize,
    /// Whether `misses[next..]` are in the order of their records, each
    /// record's, instruction's and event's summed in one.
    sorted: bool,
}

impl RunMisses {
    /// Whether none is left.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.next == self.misses.len()
    }

    /// Keeps `miss` for its record's run.
    pub fn push(&mut self, miss: RunMiss) {
        self.misses.push(miss);
        self.sorted = false;
    }

    /// Those left (of records not reported), in order; none is then left.
    pub fn take_left(&mut self) -> Vec<RunMiss> {
        let left = self.misses.split_off(self.next);
        self.misses.clear();
        self.next = 0;
        left
    }

    /// Sorts those left by record and sums each record's, instruction's
    /// and event's in one (the memory they take is then bounded by the
    /// records and instructions, not by the misses).
    pub fn compact(&mut self) {
        if self.sorted {
            return;
        }
        let mut left = self.take_left();
        left.sort_unstable_by_key(|miss| (miss.record, miss.addr, miss.column));
        for miss in left {
            match self.misses.last_mut() {
                Some(last)
                    if (last.record, last.addr, last.column)
                        == (miss.record, miss.addr, miss.column) =>
                {
                    last.count += miss.count;
                }
                _ => self.misses.push(miss),
            }
        }
        self.sorted = true;
    }

    /// The run of `record` is reported (records come in the order of
    /// their addresses): those of the records before it, and then its
    /// own.
    pub fn up_to(&mut self, record: u64) -> (&[RunMiss], &[RunMiss]) {
        self.compact();
        let start = self.next;
        let left = &self.misses[start..];
        let before = start + left.partition_point(|miss| miss.record < record);
        let own = before + self.misses[before..].partition_point(|miss| miss.record == record);
        self.next = own;
        (&self.misses[start..before], &self.misses[before..own])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn miss(record: u64, addr: u64) -> RunMiss {
        RunMiss {
            record,
            addr,
            column: 3,
            count: 1,
        }
    }

    #[test]
    fn a_run_counts_its_records_misses_and_passes_those_before() {
        let mut misses = RunMisses::default();
        // As they ran: the run of record 0x300 returns to that of 0x100.
        for (record, addr) in [(0x100, 1), (0x300, 2), (0x100, 3), (0x200, 4), (0x500, 5)] {
            misses.push(miss(record, addr));
        }
        assert!(!misses.is_empty());
        let (before, own) = misses.up_to(0x100);
        assert!(before.is_empty());
        assert_eq!(own, [miss(0x100, 1), miss(0x100, 3)]);
        // Record 0x200 had no run reported: its misses come before 0x300's.
        let (before, own) = misses.up_to(0x300);
        assert_eq!(before, [miss(0x200, 4)]);
        assert_eq!(own, [miss(0x300, 2)]);
        let (before, own) = misses.up_to(0x400);
        assert!(before.is_empty() && own.is_empty());
        // 0x500's run is in no drain reported: left.
        assert_eq!(misses.take_left(), [miss(0x500, 5)]);
        assert!(misses.is_empty());
        // Those of one record, instruction and event are summed.
        for addr in [7, 8, 7] {
            misses.push(miss(0x600, addr));
        }
        misses.compact();
        let twice = RunMiss {
            count: 2,
            ..miss(0x600, 7)
        };
        assert_eq!(misses.up_to(0x600).1, [twice, miss(0x600, 8)]);
        // A new drain starts with none left.
        misses.push(miss(0x100, 6));
        assert_eq!(misses.up_to(0x100).1, [miss(0x100, 6)]);
        assert!(misses.is_empty());
    }
}
