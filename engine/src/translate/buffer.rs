//! Draining the record buffer: each record (translation id, stack pointer)
//! is one executed block, replayed into the sink as a `block` event (its
//! arrival computed from the previous block's last instruction and this
//! block's address, as the step backend computes it) and the block's
//! instructions.

use crate::error::{Error, Result};
use crate::event::{Arrival, Block, EventSink, Thread};

use crate::flow::{exit, End};

use super::cache::Cache;
use super::layout::RECORD_SIZE;
use super::memory::Memory;

/// The thread's position in the block sequence, shared by the replay of
/// records and the stepping of blocks that are not translated.
#[derive(Debug, Default)]
pub(super) struct Replay {
    /// The last instruction of the previous block and the block's
    /// instruction count; `None` before the first block.
    previous: Option<(End, u32)>,
    /// Instructions reported.
    pub instructions: u64,
    /// Blocks reported.
    pub blocks: u64,
}

/// The block sequence of a thread, saved while it runs a signal handler.
pub(super) type Saved = Option<(End, u32)>;

impl Replay {
    /// Saves the block sequence and starts a new one (a signal handler's
    /// first block arrives with `Arrival::Start`).
    pub fn suspend(&mut self) -> Saved {
        self.previous.take()
    }

    /// Restores a block sequence saved by [`Replay::suspend`].
    pub fn resume(&mut self, saved: Saved) {
        self.previous = saved;
    }

    /// The arrival of a block at `addr` after the previous one.
    pub fn arrival(&self, addr: u64) -> Arrival {
        match &self.previous {
            None => Arrival::Start,
            Some((end, count)) => exit(*end, addr, *count).unwrap_or(Arrival::FallThrough),
        }
    }

    /// Reports the start of a block at `addr` with stack pointer `sp`.
    pub fn block<S: EventSink + ?Sized>(
        &mut self,
        sink: &mut S,
        thread: Thread,
        addr: u64,
        sp: u64,
    ) {
        let arrival = self.arrival(addr);
        sink.block(thread, Block { addr, sp, arrival });
        self.blocks += 1;
    }

    /// Reports one execution of the instruction `end`, the `count`th of
    /// its block, which may be the block's last.
    pub fn instruction<S: EventSink + ?Sized>(
        &mut self,
        sink: &mut S,
        thread: Thread,
        end: End,
        count: u32,
    ) {
        sink.instruction(thread, end.addr, end.len);
        self.instructions += 1;
        self.previous = Some((end, count));
    }

    /// Reports a whole block executed at `addr` with stack pointer `sp`:
    /// its instructions `block` (the last one `last`), in one call.
    fn whole_block<S: EventSink + ?Sized>(
        &mut self,
        sink: &mut S,
        thread: Thread,
        (addr, sp): (u64, u64),
        block: &[(u64, u8)],
        last: End,
    ) {
        let arrival = self.arrival(addr);
        sink.block_executed(thread, Block { addr, sp, arrival }, block);
        self.blocks += 1;
        self.instructions += block.len() as u64;
        self.previous = Some((last, block.len() as u32));
    }
}

/// Replays the records in the buffer into `sink` and empties the buffer;
/// returns how many records there were.
pub(super) fn drain<S: EventSink + ?Sized>(
    memory: &Memory,
    cache: &Cache,
    replay: &mut Replay,
    sink: &mut S,
    thread: Thread,
) -> Result<u64> {
    let layout = cache.layout();
    let cursor = memory.read_u64(layout.cursor())?;
    if cursor < layout.buffer()
        || cursor > layout.guard()
        || (cursor - layout.buffer()) & (RECORD_SIZE - 1) != 0
    {
        return Err(Error::Unexpected(format!(
            "translate: record cursor {cursor:#x} outside the buffer"
        )));
    }
    let mut bytes = vec![0u8; (cursor - layout.buffer()) as usize];
    memory.read(layout.buffer(), &mut bytes)?;
    for record in bytes.chunks_exact(RECORD_SIZE as usize) {
        let word = |index: usize| {
            let mut raw = [0u8; 8];
            raw.copy_from_slice(&record[index * 8..index * 8 + 8]);
            u64::from_le_bytes(raw)
        };
        let (id, sp) = (word(0), word(1));
        let (addr, instructions, last) = cache.replay_info(id).ok_or_else(|| {
            Error::Unexpected(format!("translate: a record of unknown translation {id}"))
        })?;
        replay.whole_block(sink, thread, (addr, sp), instructions, last);
    }
    memory.write_u64(layout.cursor(), layout.buffer())?;
    Ok(bytes.len() as u64 / RECORD_SIZE)
}
