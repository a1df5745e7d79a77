//! Requests that control collection: the program's client requests
//! (Callgrind's, Cachegrind's, the core's `RUNNING_ON_VALGRIND`) and
//! live control from outside the run (`callgrind_control`).

use std::fs::File;
use std::os::unix::fs::FileExt;

use cgx_formats::TooManyNames;

use super::{costs_key, Dumped, FinishedPart, Process};
use crate::control::{Control, Status, ThreadStatus};

impl Process {
    /// A client request from thread `tid`; returns the value for rdx and the
    /// parts it dumped.
    pub fn client_request(
        &mut self,
        tid: i32,
        args: [u64; 6],
        default: u64,
    ) -> (u64, Result<Vec<FinishedPart>, TooManyNames>) {
        let none = || Ok(Vec::new());
        if self.options.cachegrind {
            // Cachegrind handles no Callgrind request (and Valgrind 3.19's
            // none at all); its own start/stop came with later versions.
            return match args[0] {
                request::RUNNING_ON_VALGRIND => (1, none()),
                request::CACHEGRIND_START_INSTRUMENTATION => {
                    self.set_instrumenting(true);
                    (0, none())
                }
                request::CACHEGRIND_STOP_INSTRUMENTATION => {
                    self.set_instrumenting(false);
                    (0, none())
                }
                _ => (default, none()),
            };
        }
        match args[0] {
            request::RUNNING_ON_VALGRIND => (1, none()),
            request::DUMP_STATS => (0, self.dump("Client Request", Dumped::Requested(tid))),
            request::DUMP_STATS_AT => {
                let text = self.read_string(args[1]);
                let trigger = format!("Client Request: {text}");
                (0, self.dump(&trigger, Dumped::Requested(tid)))
            }
            request::ZERO_STATS => {
                self.zero();
                (0, none())
            }
            request::TOGGLE_COLLECT => {
                self.collect_toggled = true;
                self.thread(tid).toggle_collect();
                (0, none())
            }
            request::START_INSTRUMENTATION => {
                self.set_instrumenting(true);
                (0, none())
            }
            request::STOP_INSTRUMENTATION => {
                self.set_instrumenting(false);
                (0, none())
            }
            _ => (default, none()),
        }
    }

    /// Serves `request` from outside the run, stopped at thread `tid`
    /// (Callgrind's monitor commands): the reply Callgrind's monitor
    /// prints, and the parts of a dump it made.
    pub fn control(
        &mut self,
        tid: i32,
        request: &Control,
    ) -> (String, Result<Vec<FinishedPart>, TooManyNames>) {
        let none = || Ok(Vec::new());
        match request {
            // Every thread, as Callgrind's monitor dumps.
            Control::Dump { trigger } => (String::new(), self.dump(trigger, Dumped::AllThreads)),
            Control::Zero => {
                self.zero();
                (String::new(), none())
            }
            Control::Instrumentation(Some(on)) => {
                self.set_instrumenting(*on);
                (String::new(), none())
            }
            Control::Instrumentation(None) => {
                let state = if self.instrumenting { "on" } else { "off" };
                (format!("instrumentation: {state}\n"), none())
            }
            Control::Status { .. } if !self.instrumenting => {
                let internal = matches!(request, Control::Status { internal: true });
                let text = match internal {
                    true => "instrumentation: off\n",
                    false => "No status available as instrumentation is switched off\n",
                };
                (text.to_string(), none())
            }
            Control::Status { internal: true } => (self.status(tid).text(), none()),
            Control::Status { internal: false } => (
                format!("{} thread(s) running.\n", self.threads.len()),
                none(),
            ),
        }
    }

    /// What the process is doing, for `callgrind_control` (stopped at
    /// thread `tid`).
    fn status(&self, tid: i32) -> Status {
        let (distinct_functions, distinct_blocks) = self.functions.counts();
        let arcs = self.costs.values().flat_map(|costs| costs.arcs.values());
        let name = |centre: crate::context::Centre| {
            let function = self.contexts.function(centre.cxt);
            self.functions.get(function).name.to_string()
        };
        let threads = self
            .threads
            .values()
            .map(|thread| {
                let key = costs_key(&self.options, thread.number);
                let calls = thread.active_calls();
                let frames = calls
                    .iter()
                    .map(|(arc, running)| {
                        let known = self.costs.get(&key).and_then(|costs| costs.arcs.get(arc));
                        let mut cost = known.map_or_else(Vec::new, |known| known.inclusive.clone());
                        cost.resize(running.len().max(cost.len()), 0);
                        for (sum, add) in cost.iter_mut().zip(running) {
                            *sum = sum.wrapping_add(*add);
                        }
                        (name(arc.from), known.map_or(0, |known| known.count), cost)
                    })
                    .collect();
                ThreadStatus {
                    number: thread.number,
                    cost: thread.cost_since_dump(),
                    frames,
                    innermost: calls.last().map(|(arc, _)| name(arc.to)),
                }
            })
            .collect();
        Status {
            executed_blocks: self.blocks,
            executed_calls: arcs.clone().map(|arc| arc.count).sum(),
            distinct_blocks,
            distinct_calls: arcs.count(),
            distinct_functions,
            distinct_contexts: self.contexts.len(),
            events: self.events.names.clone(),
            part: self.parts_dumped,
            threads,
            current: self.threads.get(&tid).map_or(1, |thread| thread.number),
        }
    }

    /// Switches instrumentation: every thread's calls are popped and its
    /// counter restarts (Callgrind's `set_instrument_state`).
    fn set_instrumenting(&mut self, on: bool) {
        if self.instrumenting == on {
            return;
        }
        self.instrumenting = on;
        let tids: Vec<i32> = self.threads.keys().copied().collect();
        for tid in tids {
            self.with_thread(tid, |thread, shared| thread.reset(shared));
        }
        self.simulation.clear();
        self.caches_emptied = true;
        self.settle_cache_use();
    }

    /// Whether the simulation emptied its caches (instrumentation
    /// switched) since the last call.
    pub fn take_caches_emptied(&mut self) -> bool {
        std::mem::take(&mut self.caches_emptied)
    }

    /// `CALLGRIND_ZERO_STATS`: all costs so far are forgotten.
    pub(super) fn zero(&mut self) {
        self.detach_pending(|_| true);
        for costs in self.costs.values_mut() {
            costs.clear();
        }
        for thread in self.threads.values_mut() {
            thread.mark_dumped();
        }
        self.ended_threads_cost.clear();
    }

    /// Before the tables of the threads numbered as `included` says are
    /// cleared: their pending runs become lists of instructions.
    pub(super) fn detach_pending(&mut self, included: impl Fn(u32) -> bool) {
        let separate = self.options.separate_threads;
        for thread in self.threads.values_mut() {
            let key = if separate { thread.number } else { 0 };
            if included(thread.number) {
                if let Some(costs) = self.costs.get(&key) {
                    thread.detach_pending(costs);
                }
            }
        }
    }

    /// A NUL-terminated string of the tracee (at most 4 KiB), lossily.
    fn read_string(&self, addr: u64) -> String {
        let mut bytes = vec![0u8; 4096];
        let read = File::open(format!("/proc/{}/mem", self.pid))
            .and_then(|memory| memory.read_at(&mut bytes, addr))
            .unwrap_or(0);
        bytes.truncate(read);
        if let Some(end) = bytes.iter().position(|&b| b == 0) {
            bytes.truncate(end);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// Callgrind's client requests (`callgrind.h`), Cachegrind's, and the core's
/// `RUNNING_ON_VALGRIND`.
mod request {
    pub const DUMP_STATS: u64 = 0x4354_0000;
    pub const ZERO_STATS: u64 = 0x4354_0001;
    pub const TOGGLE_COLLECT: u64 = 0x4354_0002;
    pub const DUMP_STATS_AT: u64 = 0x4354_0003;
    pub const START_INSTRUMENTATION: u64 = 0x4354_0004;
    pub const STOP_INSTRUMENTATION: u64 = 0x4354_0005;
    pub const CACHEGRIND_START_INSTRUMENTATION: u64 = 0x4347_0000;
    pub const CACHEGRIND_STOP_INSTRUMENTATION: u64 = 0x4347_0001;
    pub const RUNNING_ON_VALGRIND: u64 = 0x1001;
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::events::EventSet;
    use crate::simulation::Simulation;
    use crate::Options;

    /// The backend learns once that instrumentation switched on or off
    /// emptied the caches (not when a request leaves it as it is).
    #[test]
    fn switching_instrumentation_empties_the_caches_once() {
        let options = Arc::new(Options::default());
        let events = Arc::new(EventSet::new(&options));
        let simulation = Simulation::new(&events, &options).expect("the default caches");
        let mut process = Process::new(7, options, events, simulation);
        let request = |process: &mut Process, code: u64| {
            let (_, dumped) = process.client_request(7, [code, 0, 0, 0, 0, 0], 0);
            assert!(dumped.is_ok());
            process.take_caches_emptied()
        };
        assert!(!process.take_caches_emptied());
        assert!(!request(&mut process, request::START_INSTRUMENTATION));
        assert!(request(&mut process, request::STOP_INSTRUMENTATION));
        assert!(!process.take_caches_emptied());
        assert!(!request(&mut process, request::STOP_INSTRUMENTATION));
        assert!(!request(&mut process, request::DUMP_STATS));
        assert!(request(&mut process, request::START_INSTRUMENTATION));
    }
}
