//! What the collector remembers of each block key of a block-based backend
//! (`cgx_engine::WholeBlock::key`): the block's facts and where its whole
//! runs were last counted, found by indexing instead of hashing.

use crate::costs::Profile;
use crate::functions::BlockInfo;
use crate::simulation::FetchPoint;
use crate::thread::RunTable;

/// A block known by its key.
#[derive(Clone, Debug)]
pub(crate) struct KnownBlock {
    /// Its address and instruction count (a check: a key always means the
    /// same block).
    addr: u64,
    count: usize,
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
    pub profile: Profile,
    /// The instructions whose fetches the I1 simulation sees.
    pub fetches: Box<[FetchPoint]>,
}

/// The blocks known by key, in one process.
#[derive(Clone, Debug, Default)]
pub(crate) struct Keys {
    blocks: Vec<Option<KnownBlock>>,
}

impl Keys {
    /// The block of `key` at `addr` with `count` instructions, with `info`
    /// giving its facts the first time.
    #[inline]
    pub fn get(
        &mut self,
        key: u32,
        addr: u64,
        count: usize,
        info: impl FnOnce() -> BlockInfo,
    ) -> &mut KnownBlock {
        let index = key as usize;
        if self.blocks.len() <= index {
            self.blocks.resize(index + 1, None);
        }
        let slot = &mut self.blocks[index];
        let fresh = matches!(slot, Some(known) if known.addr == addr && known.count == count);
        match (fresh, slot) {
            (true, Some(known)) => known,
            (_, slot) => slot.insert(KnownBlock {
                addr,
                count,
                info: info(),
                table: None,
                every_run: None,
            }),
        }
    }
}
