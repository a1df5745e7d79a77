//! A full buffer half handed off by a thread and replayed a chunk at a
//! time by the tracer's loop, which serves other threads' stops between
//! chunks (`tracer`). A thread that needs a block translated then waits
//! for one chunk of another thread's records, not for a whole half: a
//! program's compiler thread, say, that runs new code while the thread
//! that asked for the compilation fills its buffer as fast as the tracer
//! replays it (waiting for whole halves, node's optimizing compiler runs
//! a few dozen microseconds per two milliseconds, and the program
//! interprets its loop for longer).
//!
//! What is replayed later keeps its order: every stop of the thread that
//! handed the half off waits for the half's last chunk, and so does any
//! stop of another thread but a translation's (the only stops served in
//! between need no record of any thread). Halves that go to a simulation
//! ahead (`ahead`) are replayed whole, as are a half's filter records
//! (`filter`), before its blocks' records are deferred.

use std::ops::Range;

use crate::error::Result;
use crate::event::EventSink;

use super::buffer::{replay_next_chunk, Replaying};
use super::cache::Cache;
use super::memory::Memory;

/// The records of a handed-off half not replayed yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Deferred {
    /// The tracee's bytes left to replay.
    left: Range<u64>,
    /// Whether it had bytes at all.
    any: bool,
    /// Whether the first chunk was replayed.
    started: bool,
    /// Records (and counted runs) replayed so far.
    replayed: u64,
}

impl Deferred {
    /// The records in the tracee's bytes `records`, none replayed.
    pub fn new(records: Range<u64>) -> Deferred {
        let left = records.start..records.end.max(records.start);
        Deferred {
            any: !left.is_empty(),
            left,
            started: false,
            replayed: 0,
        }
    }

    /// Whether every record was replayed.
    pub fn done(&self) -> bool {
        self.started && self.left.is_empty()
    }

    /// How many records (and counted runs) were replayed.
    pub fn replayed(&self) -> u64 {
        self.replayed
    }

    /// Replays the next chunk as `to`'s thread's (the first after nothing
    /// its replay held; see [`replay_next_chunk`]).
    pub fn replay_chunk<S: EventSink + ?Sized>(
        &mut self,
        memory: &Memory,
        cache: &Cache,
        to: Replaying<'_, S>,
    ) -> Result<()> {
        if self.done() {
            return Ok(());
        }
        let Replaying {
            replay,
            sink,
            thread,
        } = to;
        if !self.started {
            replay.begin_records();
            self.started = true;
        }
        let to = Replaying {
            replay: &mut *replay,
            sink,
            thread,
        };
        let (records, _) = replay_next_chunk(memory, cache, &mut self.left, &[], to, &mut None)?;
        self.replayed += records;
        if self.left.is_empty() {
            replay.end_records(self.any);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_half_is_done_once_its_first_chunk_was_replayed_and_nothing_is_left() {
        let empty = Deferred::new(0x1000..0x1000);
        assert!(!empty.done(), "not before its first chunk, even empty");
        let started = Deferred {
            started: true,
            ..empty.clone()
        };
        assert!(started.done());
        let start = 0x2000;
        let reversed = Deferred::new(start..start - 0x1000);
        assert_eq!(
            reversed.left,
            0x2000..0x2000,
            "an end before the start is empty"
        );
        let half = Deferred {
            started: true,
            ..Deferred::new(0x1000..0x3000)
        };
        assert!(!half.done(), "bytes left");
    }
}
