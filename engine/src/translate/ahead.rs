//! Replaying a drain's records twice, on two threads: a sink made for it
//! ([`EventSink::ahead`]) replays each chunk first, on a helper thread,
//! and hands it back to the tracer's sink, which replays it after. The two
//! see the same events in the same order; the one ahead runs what needs
//! no other state (a cache simulation) beside the one behind (the call
//! graph), on the other processor. The chunks are handed to the helper a
//! few ahead of it; the tracer reads a chunk's records itself only while
//! it has none to replay (when it waits for the helper), else the helper
//! reads them: whichever thread has the time.

use std::ops::Range;
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};

use crate::error::{Error, Result};
use crate::event::{Ahead, EventSink};

use super::buffer::{replay_chunk, Replaying, CHUNK_BYTES};
use super::cache::Cache;
use super::layout::MAX_RECORD;
use super::memory::Memory;

/// Chunks read ahead of the helper.
const CHUNKS_AHEAD: usize = 4;

/// Words before a chunk's own, for the start of a record the previous
/// chunk left (shorter than a record).
const GAP: usize = (MAX_RECORD / 8) as usize;

/// A chunk of records: its own words at `GAP..end` of `words` (read from
/// the tracee's bytes at `from` unless `read` says they are), and whether
/// more follow; once replayed ahead, from `start` (the start of a record
/// the previous chunk left is put before its own words).
struct Chunk {
    words: Vec<u64>,
    from: u64,
    read: bool,
    start: usize,
    end: usize,
    more: bool,
}

impl Chunk {
    /// The records to replay.
    fn records(&self) -> &[u64] {
        self.words.get(self.start..self.end).unwrap_or_default()
    }

    /// Reads its own words from `memory`, if not read yet.
    fn read(&mut self, memory: &Memory) -> Result<()> {
        if !self.read {
            let own = self.words.get_mut(GAP..self.end).unwrap_or_default();
            memory.read_bulk(self.from, bytemuck::cast_slice_mut(own))?;
            self.read = true;
        }
        Ok(())
    }
}

/// Replays the records in the tracee's bytes `records` into `ahead` on a
/// helper thread and into `to`'s sink after it (see the module doc); gives
/// `ahead` back to that sink at the end. Returns how many records there
/// were.
pub(super) fn replay_ahead<S: EventSink + ?Sized>(
    memory: &Memory,
    cache: &Cache,
    records: Range<u64>,
    mut to: Replaying<'_, S>,
    ahead: S::Ahead,
) -> Result<u64> {
    let thread = to.thread;
    let helper_replay = to.replay.clone();
    let (to_helper, read_chunks) = sync_channel(CHUNKS_AHEAD + 1);
    let (from_helper, replayed_chunks) = channel();
    let tracer_cpu = crate::launch::current_cpu();
    let (replayed, ahead) = std::thread::scope(|scope| {
        let helper = std::thread::Builder::new().name("cgx-ahead".into());
        let helper = helper.spawn_scoped(scope, move || {
            crate::launch::run_beside(tracer_cpu);
            let mut ahead = ahead;
            let mut replay = helper_replay;
            let to = Replaying {
                replay: &mut replay,
                sink: &mut ahead,
                thread,
            };
            replay_first(memory, cache, to, read_chunks, from_helper);
            ahead.chunk_done(true);
            ahead
        });
        let helper = match helper {
            Ok(helper) => helper,
            Err(source) => {
                let operation = "start the replay thread";
                return (Err(Error::Os { operation, source }), None);
            }
        };
        let mut buffers = std::mem::take(&mut to.replay.chunk_buffers.0);
        let replayed = read_and_replay(
            memory,
            cache,
            records,
            to.reborrow(),
            to_helper,
            replayed_chunks,
            &mut buffers,
        );
        to.replay.chunk_buffers.0 = buffers;
        match helper.join() {
            Ok(ahead) => (replayed, Some(ahead)),
            Err(_) => {
                let error = Error::Unexpected("translate: the replay thread panicked".into());
                (Err(error), None)
            }
        }
    });
    if let Some(ahead) = ahead {
        to.sink.ahead_done(thread, ahead);
    }
    replayed
}

/// The helper: replays each chunk it gets into `to`'s sink, the one ahead
/// (reading the chunk first if the tracer did not), and sends it back (an
/// error ends the chunks).
fn replay_first<A: Ahead>(
    memory: &Memory,
    cache: &Cache,
    mut to: Replaying<'_, A>,
    chunks: Receiver<Chunk>,
    replayed_chunks: Sender<Result<Chunk>>,
) {
    let mut left: Vec<u64> = Vec::new();
    for mut chunk in chunks {
        if let Err(error) = chunk.read(memory) {
            let _ = replayed_chunks.send(Err(error));
            return;
        }
        let replayed = match GAP.checked_sub(left.len()) {
            Some(start) => {
                chunk.start = start;
                chunk.words[start..GAP].copy_from_slice(&left);
                replay_chunk(
                    cache,
                    chunk.records(),
                    &[],
                    chunk.more,
                    to.reborrow(),
                    &mut None,
                )
            }
            None => Err(Error::Unexpected(
                "translate: a record longer than the longest".into(),
            )),
        };
        to.sink.chunk_done(false);
        let sent = match replayed {
            Ok((at, _, _)) => {
                left.clear();
                left.extend_from_slice(chunk.records().get(at..).unwrap_or_default());
                replayed_chunks.send(Ok(chunk))
            }
            Err(error) => replayed_chunks.send(Err(error)),
        };
        if sent.is_err() {
            return;
        }
    }
}

/// The tracer's side: hands the chunks of `records` to the helper a few
/// ahead of it (`to_helper`, read here while there is nothing to replay),
/// and replays into `to`'s sink each the helper sends back
/// (`replayed_chunks`); how many records there were. The chunks' words
/// are taken from `spares`, and those of the chunks replayed go back
/// there (overwritten by the next ones: zeroing a chunk takes as long as
/// reading it).
fn read_and_replay<S: EventSink + ?Sized>(
    memory: &Memory,
    cache: &Cache,
    records: Range<u64>,
    mut to: Replaying<'_, S>,
    to_helper: SyncSender<Chunk>,
    replayed_chunks: Receiver<Result<Chunk>>,
    spares: &mut Vec<Vec<u64>>,
) -> Result<u64> {
    let (mut next, end) = (records.start, records.end.max(records.start));
    let (mut in_flight, mut records) = (0, 0);
    // A chunk back from the helper, taken while handing out others.
    let mut ready = None;
    loop {
        while in_flight < CHUNKS_AHEAD && next < end {
            let bytes = (end - next).min(CHUNK_BYTES);
            let own_end = GAP + (bytes / 8) as usize;
            let mut words = spares.pop().unwrap_or_default();
            if words.len() < own_end {
                words.resize(own_end, 0);
            }
            let mut chunk = Chunk {
                words,
                from: next,
                read: false,
                start: GAP,
                end: own_end,
                more: next + bytes < end,
            };
            next += bytes;
            ready = ready.or_else(|| replayed_chunks.try_recv().ok());
            if ready.is_none() {
                chunk.read(memory)?;
            }
            if to_helper.send(chunk).is_err() {
                break;
            }
            in_flight += 1;
        }
        let chunk = match ready.take() {
            Some(chunk) => chunk,
            // No records (or the helper is gone).
            None if in_flight == 0 => return Ok(records),
            None => match replayed_chunks.recv() {
                Ok(chunk) => chunk,
                Err(_) => return Ok(records),
            },
        };
        let chunk = chunk?;
        in_flight -= 1;
        let (_, replayed, _) = replay_chunk(
            cache,
            chunk.records(),
            &[],
            chunk.more,
            to.reborrow(),
            &mut None,
        )?;
        records += replayed;
        spares.push(chunk.words);
        if !chunk.more {
            return Ok(records);
        }
    }
}
