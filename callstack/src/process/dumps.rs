//! Dumps: the triggers that ask for them (functions entered or left,
//! a number of blocks), and a process's profile written as parts of
//! files.

use std::collections::BTreeMap;

use cgx_formats::{Part, TooManyNames};

use super::Process;
use crate::costs::Costs;
use crate::dump::{build_part, Naming, PartInfo};
use crate::thread::{add_into, ThreadState, Trigger};

impl Process {
    /// Makes the dumps and zeroings thread `tid` asked for entering or
    /// leaving functions (`--dump-before`, `--dump-after`,
    /// `--zero-before`), in order, then the dump `--dump-every-bb` asks
    /// for; the dumps' parts wait for [`Process::take_finished`].
    pub(super) fn serve_triggers(&mut self, tid: i32) {
        self.serve_function_triggers(tid);
        let every = self.options.dump_every_bb;
        if every > 0 && self.blocks - self.blocks_at_every_bb_dump > every {
            // Callgrind checks between blocks, for all threads.
            let parts = self.dump(&format!("--dump-every-bb={every}"), Dumped::AllThreads);
            self.finished.push(parts);
            self.blocks_at_every_bb_dump = self.blocks;
        }
    }

    /// The function triggers of [`Process::serve_triggers`].
    fn serve_function_triggers(&mut self, tid: i32) {
        let Some(triggers) = self
            .threads
            .get_mut(&tid)
            .filter(|thread| thread.has_triggers())
            .map(ThreadState::take_triggers)
        else {
            return;
        };
        for trigger in triggers {
            match trigger {
                Trigger::Dump(trigger) => {
                    let parts = self.dump(&trigger, Dumped::Requested(tid));
                    self.finished.push(parts);
                }
                Trigger::Zero => self.zero(),
            }
        }
    }

    /// The dumps the blocks' triggers asked for since the last call
    /// ([`Process::serve_triggers`]).
    pub fn take_finished(&mut self) -> Vec<Result<Vec<FinishedPart>, TooManyNames>> {
        std::mem::take(&mut self.finished)
    }

    /// The process ended: every thread's last block is settled, and the final
    /// parts are made.
    pub fn finish(&mut self) -> Result<Vec<FinishedPart>, TooManyNames> {
        // Resident lines are charged as if evicted; with every thread's calls
        // out of the back-dating forest (at their exits), all cache-use costs
        // reach their arcs.
        if let Some(thread) = self.threads.values().next() {
            let collecting = thread.collecting();
            self.simulation.set_collect(collecting);
        }
        self.simulation.flush();
        self.settle_cache_use_of(true);
        let tids: Vec<i32> = self.threads.keys().copied().collect();
        for tid in tids {
            self.thread_exited(tid);
        }
        self.dump("Program termination", Dumped::Final)
    }

    /// Makes the parts of a dump (one, or one per thread) and restarts the
    /// costs. A dump the program asked for (`requester` is its thread) holds,
    /// with `--separate-threads=yes`, only that thread, as in Callgrind.
    pub(super) fn dump(
        &mut self,
        trigger: &str,
        why: Dumped,
    ) -> Result<Vec<FinishedPart>, TooManyNames> {
        let requested = why != Dumped::Final;
        let only = match why {
            Dumped::Requested(tid) if self.options.separate_threads => {
                self.threads.get(&tid).map(|thread| thread.number)
            }
            _ => None,
        };
        // Active calls contribute their cost so far.
        let separate = self.options.separate_threads;
        let included = |number: u32| only.is_none_or(|only| only == number);
        for thread in self.threads.values_mut() {
            if !included(thread.number) {
                continue;
            }
            let key = if separate { thread.number } else { 0 };
            thread.add_active_calls(self.costs.entry(key).or_default());
        }
        let mut summaries: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        for thread in self.threads.values().filter(|t| included(t.number)) {
            let key = if separate { thread.number } else { 0 };
            add_into(summaries.entry(key).or_default(), &thread.cost_since_dump());
        }
        for (&number, cost) in &self.ended_threads_cost {
            let key = if separate { number } else { 0 };
            add_into(summaries.entry(key).or_default(), cost);
        }
        let mut keys: Vec<u32> = self.costs.keys().copied().collect();
        if let Some(only) = only {
            keys = vec![only];
        }
        if keys.is_empty() {
            keys.push(if separate { 1 } else { 0 });
        }
        self.parts_dumped += 1;
        let mut parts = Vec::new();
        for key in keys {
            let empty = Costs::default();
            let costs = self.costs.get(&key).unwrap_or(&empty);
            let info = PartInfo {
                pid: self.pid,
                part: self.parts_dumped,
                thread: separate.then_some(key),
                trigger,
                blocks: (self.blocks_at_dump, self.blocks),
                summary: summaries.get(&key).cloned(),
            };
            let naming = Naming {
                contexts: &self.contexts,
                functions: &self.functions,
                symbols: &self.symbols,
                sequences: &self.sequences,
            };
            let part = build_part(
                &mut self.names,
                costs,
                &naming,
                &self.options,
                &self.events,
                &info,
            )?;
            parts.push(FinishedPart {
                part,
                thread: info.thread,
                requested,
            });
        }
        self.detach_pending(included);
        for (key, costs) in &mut self.costs {
            if included(*key) {
                costs.clear_dumped();
            }
        }
        for thread in self.threads.values_mut() {
            if included(thread.number) {
                thread.mark_dumped();
            }
        }
        self.ended_threads_cost
            .retain(|number, _| !included(*number));
        self.blocks_at_dump = self.blocks;
        Ok(parts)
    }
}

/// A finished part of a process's profile, before it becomes a file.
pub(crate) struct FinishedPart {
    /// The part; its names are the process's ([`Process::names`]).
    pub part: Part,
    /// The thread number with `--separate-threads=yes`.
    pub thread: Option<u32>,
    /// Whether the program asked for it (a client request), not its end.
    pub requested: bool,
}

/// Why a process's profile is dumped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Dumped {
    /// The program asked, from thread `tid` (a client request): a numbered
    /// dump, with `--separate-threads=yes` of that thread only.
    Requested(i32),
    /// A request from outside the run (live control), or `--dump-every-bb`:
    /// a numbered dump of every thread.
    AllThreads,
    /// The process ends.
    Final,
}
