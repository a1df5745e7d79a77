//! Replaying a drain's records twice, on two threads: a sink made for it
//! ([`EventSink::ahead`]) replays each chunk first, on a helper thread that
//! also reads the chunks from the tracee, and hands the chunk on to the
//! tracer's sink, which replays it after. The two see the same events in
//! the same order; the one ahead runs what needs no other state (a cache
//! simulation) beside the one behind (the call graph), on the other
//! processor.

use std::ops::Range;
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};

use crate::error::{Error, Result};
use crate::event::{Ahead, EventSink, Thread};

use super::buffer::{replay_chunk, Replay, CHUNK_BYTES};
use super::cache::Cache;
use super::memory::Memory;

/// Chunks the helper may be ahead by.
const CHUNKS_AHEAD: usize = 4;

/// A chunk of records the helper replayed: its words (with the start of
/// a record the previous chunk left) in the first `len` of `words`, and
/// whether more follow.
struct Chunk {
    words: Vec<u64>,
    len: usize,
    more: bool,
}

/// Replays the records in the tracee's bytes `records` into `ahead` on a
/// helper thread and then into `sink` (see the module doc); gives `ahead`
/// back to `sink` at the end. Returns how many records there were.
pub(super) fn replay_ahead<S: EventSink + ?Sized>(
    memory: &Memory,
    cache: &Cache,
    records: Range<u64>,
    (replay, sink, thread): (&mut Replay, &mut S, Thread),
    ahead: Box<dyn Ahead>,
) -> Result<u64> {
    let helper_replay = replay.clone();
    let (chunks, replayed_chunks) = sync_channel(CHUNKS_AHEAD);
    let (spare_words, spares) = channel();
    let tracer_cpu = crate::launch::current_cpu();
    let (replayed, ahead) = std::thread::scope(|scope| {
        let helper = std::thread::Builder::new().name("cgx-ahead".into());
        let helper = helper.spawn_scoped(scope, move || {
            crate::launch::run_beside(tracer_cpu);
            let mut ahead = ahead;
            let mut replay = helper_replay;
            let source = (memory, cache, records);
            read_ahead(source, (&mut replay, &mut *ahead, thread), chunks, spares);
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
        let replayed = replay_behind(cache, (replay, sink, thread), replayed_chunks, spare_words);
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

/// The helper: reads the chunks of `records`, replays each into `ahead`
/// and sends it on (an error ends the chunks); reuses the words of
/// `spares`.
fn read_ahead(
    (memory, cache, records): (&Memory, &Cache, Range<u64>),
    (replay, ahead, thread): (&mut Replay, &mut dyn Ahead, Thread),
    chunks: SyncSender<Result<Chunk>>,
    spares: Receiver<Vec<u64>>,
) {
    let (mut next, end) = (records.start, records.end.max(records.start));
    let mut left: Vec<u64> = Vec::new();
    loop {
        // A spare's words are overwritten, not cleared (zeroing a chunk
        // takes as long as reading it).
        let mut words = spares.try_recv().unwrap_or_default();
        let bytes = (end - next).min(CHUNK_BYTES);
        let len = left.len() + (bytes / 8) as usize;
        if words.len() < len {
            words.resize(len, 0);
        }
        let (kept, read) = words[..len].split_at_mut(left.len());
        kept.copy_from_slice(&left);
        let read = memory.read_bulk(next, bytemuck::cast_slice_mut(read));
        next += bytes;
        let more = next < end;
        let replayed = read.and_then(|()| {
            let chunk = (&words[..len], &[][..], more);
            replay_chunk(cache, chunk, (&mut *replay, &mut *ahead, thread), &mut None)
        });
        ahead.chunk_done(false);
        let sent = match replayed {
            Ok((at, _, _)) => {
                left.clear();
                left.extend_from_slice(words.get(at..len).unwrap_or_default());
                chunks.send(Ok(Chunk { words, len, more }))
            }
            Err(error) => chunks.send(Err(error)),
        };
        if sent.is_err() || !more {
            return;
        }
    }
}

/// The tracer's side: replays each chunk the helper sends into `sink`
/// and sends its words back; how many records there were.
fn replay_behind<S: EventSink + ?Sized>(
    cache: &Cache,
    (replay, sink, thread): (&mut Replay, &mut S, Thread),
    chunks: Receiver<Result<Chunk>>,
    spare_words: Sender<Vec<u64>>,
) -> Result<u64> {
    let mut records = 0;
    for chunk in chunks {
        let chunk = chunk?;
        let words = chunk.words.get(..chunk.len).unwrap_or_default();
        let (_, replayed, _) = replay_chunk(
            cache,
            (words, &[], chunk.more),
            (&mut *replay, &mut *sink, thread),
            &mut None,
        )?;
        records += replayed;
        // The helper may be gone at the end.
        let _ = spare_words.send(chunk.words);
    }
    Ok(records)
}
