//! What the collector remembers of each block key of a block-based backend
//! (`cgx_engine::WholeBlock::key`): the block's facts and where its whole
//! runs were last counted, found by indexing instead of hashing.

use std::sync::Arc;

use crate::costs::Profile;
use crate::functions::BlockInfo;
use crate::simulation::FetchPoint;
use crate::thread::{Listed, RunTable};

/// A block known by its key.
#[derive(Clone, Debug)]
pub(crate) struct KnownBlock {
    /// Its address and instruction count (a check: a key always means the
    /// same block).
    addr: u64,
    count: usize,
    /// Its last instruction (read on every run; kept here, where the
    /// run's lookup has just loaded the block).
    last: Option<(u64, u8)>,
    /// What Callgrind remembers of it.
    pub info: BlockInfo,
    /// Where its whole runs were last counted.
    pub table: Option<RunTable>,
    /// What every run of it does, once known (simulated blocks).
    pub every_run: Option<Box<EveryRun>>,
}

/// What every run of a simulated block does.
#[derive(Clone, Debug)]
pub(crate) struct EveryRun {
    /// What it costs besides the simulators' misses.
    pub profile: Arc<Profile>,
    /// The instructions whose fetches the I1 simulation sees.
    pub fetches: Box<[FetchPoint]>,
}

/// The blocks known by key, in one process.
#[derive(Clone, Debug, Default)]
pub(crate) struct Keys {
    /// By key: 0 for a key not seen, else one more than its block's place
    /// in `blocks` (keys are dense, the blocks seen a part of them: four
    /// bytes for each key not seen rather than a whole block).
    places: Vec<u32>,
    blocks: Vec<KnownBlock>,
}

impl KnownBlock {
    /// A whole run of it: its `instructions` (those it was known by) and
    /// its last instruction.
    #[inline]
    pub fn run<'a>(&self, instructions: &'a [(u64, u8)]) -> Listed<'a> {
        Listed {
            all: instructions,
            last: self.last,
        }
    }
}

impl Keys {
    /// The block of `key` at `addr` with `instructions`, with `info`
    /// giving its facts the first time.
    #[inline]
    pub fn get(
        &mut self,
        key: u32,
        addr: u64,
        instructions: &[(u64, u8)],
        info: impl FnOnce() -> BlockInfo,
    ) -> &mut KnownBlock {
        let count = instructions.len();
        let index = key as usize;
        if self.places.len() <= index {
            self.places.resize(index + 1, 0);
        }
        let place = self.places[index] as usize;
        if let Some(known) = place.checked_sub(1).and_then(|at| self.blocks.get(at)) {
            if known.addr == addr && known.count == count {
                return &mut self.blocks[place - 1];
            }
        }
        let fresh = KnownBlock {
            addr,
            count,
            last: instructions.last().copied(),
            info: info(),
            table: None,
            every_run: None,
        };
        match place.checked_sub(1) {
            // The key now means another block (its translation was made
            // again): the block takes the old one's place.
            Some(at) if at < self.blocks.len() => {
                self.blocks[at] = fresh;
                &mut self.blocks[at]
            }
            _ => {
                self.blocks.push(fresh);
                self.places[index] = u32::try_from(self.blocks.len()).unwrap_or(u32::MAX);
                let last = self.blocks.len() - 1;
                &mut self.blocks[last]
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cgx_engine::symbols::SectionKind;

    fn info(number: u32) -> BlockInfo {
        BlockInfo {
            function: 0,
            is_entry: false,
            object: 0,
            section: SectionKind::Text,
            region: 0,
            number,
        }
    }

    /// `count` instructions of 4 bytes from `addr`.
    fn listed(addr: u64, count: u64) -> Vec<(u64, u8)> {
        (0..count).map(|at| (addr + 4 * at, 4)).collect()
    }

    /// The number of the block `keys` has for `key` at `addr` with `count`
    /// instructions (numbered `number` when new).
    fn number_of(keys: &mut Keys, key: u32, addr: u64, count: u64, number: u32) -> u32 {
        keys.get(key, addr, &listed(addr, count), || info(number))
            .info
            .number
    }

    #[test]
    fn a_run_s_last_instruction_is_its_block_s() {
        let mut keys = Keys::default();
        let first = listed(0x1000, 3);
        let known = keys.get(7, 0x1000, &first, || info(1));
        assert_eq!(known.run(&first).last, Some((0x1008, 4)));
        // Known again, the last instruction is the one it was known by.
        let known = keys.get(7, 0x1000, &first, || unreachable!("known"));
        assert_eq!(known.run(&first).last, Some((0x1008, 4)));
        // Another block under the key: its own.
        let other = listed(0x1000, 4);
        let known = keys.get(7, 0x1000, &other, || info(2));
        assert_eq!(known.run(&other).last, Some((0x100c, 4)));
        assert_eq!(keys.get(8, 0x2000, &[], || info(3)).run(&[]).last, None);
    }

    #[test]
    fn a_key_keeps_its_block_until_it_means_another() {
        let mut keys = Keys::default();
        assert_eq!(number_of(&mut keys, 7, 0x1000, 3, 1), 1);
        // Far apart keys, each its own block.
        assert_eq!(number_of(&mut keys, 70_000, 0x2000, 1, 2), 2);
        // Seen again: the same block, what was remembered kept.
        let known = keys.get(7, 0x1000, &listed(0x1000, 3), || unreachable!("known"));
        assert_eq!(known.info.number, 1);
        known.info.number = 10;
        assert_eq!(number_of(&mut keys, 7, 0x1000, 3, 0), 10);
        // Another address or length under the same key: a new block.
        assert_eq!(number_of(&mut keys, 7, 0x1000, 4, 3), 3);
        assert_eq!(number_of(&mut keys, 7, 0x3000, 4, 4), 4);
        assert_eq!(number_of(&mut keys, 70_000, 0x2000, 1, 0), 2);
        assert_eq!(
            keys.blocks.len(),
            2,
            "a new block under a key takes its place"
        );
    }
}
