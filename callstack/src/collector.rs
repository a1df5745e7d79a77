//! The collector: routes the engine's events to the traced processes and
//! hands back their dumps.

use std::collections::BTreeMap;
use std::sync::Arc;

use cgx_engine::{Block, EventSink, Exit, Thread};
use cgx_formats::{Part, Profile, TooManyNames};

use crate::process::{FinishedPart, Process};
use crate::{Dump, Error, Options};

/// Collects the costs of every traced process (an [`EventSink`]) and makes
/// their dumps: when a process ends, and when a program asks for one.
pub struct Collector {
    options: Arc<Options>,
    processes: BTreeMap<i32, Process>,
    /// Parts kept for one file per process, with `--combine-dumps=yes`.
    combined: BTreeMap<i32, Vec<Part>>,
    /// Dumps made and not yet taken.
    ready: Vec<Dump>,
    /// The first error met (profiles that cannot be represented).
    error: Option<Error>,
}

impl Collector {
    /// A collector with these options.
    pub fn new(options: Options) -> Collector {
        Collector {
            options: Arc::new(options),
            processes: BTreeMap::new(),
            combined: BTreeMap::new(),
            ready: Vec::new(),
            error: None,
        }
    }

    /// The dumps made so far (processes that ended, dumps the programs asked
    /// for), in the order they were made.
    pub fn take_dumps(&mut self) -> Vec<Dump> {
        std::mem::take(&mut self.ready)
    }

    /// Ends every process still known (their last blocks are settled as at
    /// their end) and returns all dumps not taken yet, or the first error.
    pub fn finish(&mut self) -> Result<Vec<Dump>, Error> {
        let pids: Vec<i32> = self.processes.keys().copied().collect();
        for pid in pids {
            self.end_process(pid);
        }
        match self.error.take() {
            Some(error) => Err(error),
            None => Ok(self.take_dumps()),
        }
    }

    fn process(&mut self, pid: i32) -> &mut Process {
        let options = &self.options;
        self.processes
            .entry(pid)
            .or_insert_with(|| Process::new(pid, options.clone()))
    }

    /// Turns finished parts of `pid` into dumps (or keeps them for one
    /// combined file).
    fn deliver(&mut self, pid: i32, parts: Result<Vec<FinishedPart>, TooManyNames>, last: bool) {
        let parts = match parts {
            Ok(parts) => parts,
            Err(source) => {
                self.error
                    .get_or_insert(Error::TooManyNames { pid, source });
                return;
            }
        };
        let Some(process) = self.processes.get(&pid) else {
            return;
        };
        let creator = Some(format!("cgx-{}", env!("CARGO_PKG_VERSION")));
        if self.options.combine_dumps {
            let kept = self.combined.entry(pid).or_default();
            kept.extend(parts.into_iter().map(|finished| finished.part));
            if last {
                let parts = self.combined.remove(&pid).unwrap_or_default();
                self.ready.push(Dump {
                    pid,
                    sequence: None,
                    thread: None,
                    profile: Profile {
                        creator,
                        names: process.names().clone(),
                        parts,
                    },
                });
            }
            return;
        }
        for finished in parts {
            // Valgrind numbers the dumps a program asks for; the final one
            // keeps the plain name.
            let number = finished.part.header.part.unwrap_or(1) as u32;
            let sequence = finished.requested.then_some(number);
            self.ready.push(Dump {
                pid,
                sequence,
                thread: finished.thread,
                profile: Profile {
                    creator: creator.clone(),
                    names: process.names().clone(),
                    parts: vec![finished.part],
                },
            });
        }
    }

    fn end_process(&mut self, pid: i32) {
        let Some(process) = self.processes.get_mut(&pid) else {
            return;
        };
        let parts = process.finish();
        self.deliver(pid, parts, true);
        self.processes.remove(&pid);
    }
}

impl EventSink for Collector {
    fn block(&mut self, thread: Thread, block: Block) {
        self.process(thread.pid).block(thread.tid, block);
    }

    fn instruction(&mut self, thread: Thread, addr: u64, len: u8) {
        self.process(thread.pid).instruction(thread.tid, addr, len);
    }

    fn client_request(&mut self, thread: Thread, args: [u64; 6], default: u64) -> u64 {
        let (result, parts) = self
            .process(thread.pid)
            .client_request(thread.tid, args, default);
        self.deliver(thread.pid, parts, false);
        result
    }

    fn signal_handler_entered(&mut self, thread: Thread, signal: i32) {
        self.process(thread.pid)
            .signal_handler_entered(thread.tid, signal);
    }

    fn signal_handler_returned(&mut self, thread: Thread) {
        self.process(thread.pid).signal_handler_returned(thread.tid);
    }

    fn thread_exited(&mut self, thread: Thread) {
        if let Some(process) = self.processes.get_mut(&thread.pid) {
            process.thread_exited(thread.tid);
        }
    }

    fn forked(&mut self, parent: Thread, child_pid: i32) {
        let child = self.process(parent.pid).fork(parent.tid, child_pid);
        self.processes.insert(child_pid, child);
    }

    fn exec(&mut self, pid: i32, traced: bool) {
        // Valgrind loses what the old program collected.
        self.processes.remove(&pid);
        self.combined.remove(&pid);
        if traced {
            self.process(pid);
        }
    }

    fn process_exited(&mut self, pid: i32, _exit: Exit) {
        self.end_process(pid);
    }
}
