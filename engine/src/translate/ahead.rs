//! Replaying a drain's records twice, on two threads: a sink made for it
//! ([`EventSink::ahead`]) replays each chunk first, on a helper thread,
//! and hands it back to the tracer's sink, which replays it after. The two
//! see the same events in the same order; the one ahead runs what needs
//! no other state (a cache simulation) beside the one behind (the call
//! graph), on the other processor. The tracer reads the chunks (it has
//! the time: the one ahead does more per chunk) a few ahead of the helper.

use std::ops::Range;
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};

use crate::error::{Error, Result};
use crate::event::{Ahead, EventSink, Thread};

use super::buffer::{replay_chunk, Replay, CHUNK_BYTES};
use super::cache::Cache;
use super::layout::MAX_RECORD;
use super::memory::Memory;

/// Chunks read ahead of the helper.
const CHUNKS_AHEAD: usize = 4;

/// Words before a chunk's own, for the start of a record the previous
/// chunk left (shorter than a record).
const GAP: usize = (MAX_RECORD / 8) as usize;

/// A chunk of records: its own words at `GAP..end` of `words`, and
/// whether more follow; once replayed ahead, from `start` (the start of a
/// record the previous chunk left is put before its own words).
struct Chunk {
    words: Vec<u64>,
    start: usize,
    end: usize,
    more: bool,
}

impl Chunk {
    /// The records to replay.
    fn records(&self) -> &[u64] {
        self.words.get(self.start..self.end).unwrap_or_default()
    }
}

/// Replays the records in the tracee's bytes `records` into `ahead` on a
/// helper thread and into `sink` after it (see the module doc); gives
/// `ahead` back to `sink` at the end. Returns how many records there were.
pub(super) fn replay_ahead<S: EventSink + ?Sized>(
    memory: &Memory,
    cache: &Cache,
    records: Range<u64>,
    (replay, sink, thread): (&mut Replay, &mut S, Thread),
    ahead: Box<dyn Ahead>,
) -> Result<u64> {
    let helper_replay = replay.clone();
    let (to_helper, read_chunks) = sync_channel(CHUNKS_AHEAD + 1);
    let (from_helper, replayed_chunks) = channel();
    let tracer_cpu = crate::launch::current_cpu();
    let (replayed, ahead) = std::thread::scope(|scope| {
        let helper = std::thread::Builder::new().name("cgx-ahead".into());
        let helper = helper.spawn_scoped(scope, move || {
            crate::launch::run_beside(tracer_cpu);
            let mut ahead = ahead;
            let mut replay = helper_replay;
            replay_first(
                cache,
                (&mut replay, &mut *ahead, thread),
                read_chunks,
                from_helper,
            );
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
        let chunks = (to_helper, replayed_chunks);
        let replayed = read_and_replay(memory, cache, records, (replay, sink, thread), chunks);
        match helper.join() {
            Ok(ahead) => (replayed, Some(ahead)),
            Err(_) => {
                let error = Error::Unexpected("translate: the replay thread panicked".into());
                (Err(error), None)
            }
        }
    });
    if let Some(ahead) = ahead {
        sink.ahead_done(thread, ahead);
    }
    replayed
}

/// The helper: replays each chunk it gets into `ahead` and sends it back
/// (an error ends the chunks).
fn replay_first(
    cache: &Cache,
    (replay, ahead, thread): (&mut Replay, &mut dyn Ahead, Thread),
    read_chunks: Receiver<Chunk>,
    replayed_chunks: Sender<Result<Chunk>>,
) {
    let mut left: Vec<u64> = Vec::new();
    for mut chunk in read_chunks {
        let replayed = match GAP.checked_sub(left.len()) {
            Some(start) => {
                chunk.start = start;
                chunk.words[start..GAP].copy_from_slice(&left);
                let words = (chunk.records(), &[][..], chunk.more);
                replay_chunk(cache, words, (&mut *replay, &mut *ahead, thread), &mut None)
            }
            None => Err(Error::Unexpected(
                "translate: a record longer than the longest".into(),
            )),
        };
        ahead.chunk_done(false);
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

/// The tracer's side: reads the chunks of `records` a few ahead of the
/// helper, and replays into `sink` each the helper sends back; how many
/// records there were.
fn read_and_replay<S: EventSink + ?Sized>(
    memory: &Memory,
    cache: &Cache,
    records: Range<u64>,
    (replay, sink, thread): (&mut Replay, &mut S, Thread),
    (to_helper, replayed_chunks): (SyncSender<Chunk>, Receiver<Result<Chunk>>),
) -> Result<u64> {
    let (mut next, end) = (records.start, records.end.max(records.start));
    // The words of replayed chunks, overwritten by the next ones (zeroing
    // a chunk takes as long as reading it).
    let mut spares: Vec<Vec<u64>> = Vec::new();
    let (mut in_flight, mut records) = (0, 0);
    loop {
        while in_flight < CHUNKS_AHEAD && next < end {
            let bytes = (end - next).min(CHUNK_BYTES);
            let own_end = GAP + (bytes / 8) as usize;
            let mut words = spares.pop().unwrap_or_default();
            if words.len() < own_end {
                words.resize(own_end, 0);
            }
            memory.read_bulk(next, bytemuck::cast_slice_mut(&mut words[GAP..own_end]))?;
            next += bytes;
            let chunk = Chunk {
                words,
                start: GAP,
                end: own_end,
                more: next < end,
            };
            if to_helper.send(chunk).is_err() {
                break;
            }
            in_flight += 1;
        }
        if in_flight == 0 {
            // No records (or the helper is gone).
            return Ok(records);
        }
        let Ok(chunk) = replayed_chunks.recv() else {
            return Ok(records);
        };
        let chunk = chunk?;
        in_flight -= 1;
        let words = (chunk.records(), &[][..], chunk.more);
        let (_, replayed, _) =
            replay_chunk(cache, words, (&mut *replay, &mut *sink, thread), &mut None)?;
        records += replayed;
        if !chunk.more {
            return Ok(records);
        }
        spares.push(chunk.words);
    }
}
