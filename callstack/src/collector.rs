//! The collector: routes the engine's events to the traced processes and
//! hands back their dumps.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::ahead::SimulationAhead;
use crate::control::Control;
use cgx_engine::{
    Block, BlockEvent, EventSink, FilteredAccesses, Lifecycle, Place, SimulatedBlocks, SystemCall,
    Thread, WholeBlocks,
};
use cgx_formats::{Part, Profile, TooManyNames};

use crate::events::EventSet;
use crate::process::{FinishedPart, Process};
use crate::simulation::Simulation;
use crate::{Dump, Error, Options};

/// Collects the costs of every traced process (an [`EventSink`]) and makes
/// their dumps: when a process ends, and when a program asks for one.
pub struct Collector {
    options: Arc<Options>,
    events: Arc<EventSet>,
    /// The simulators as a new process starts with them, made (and so
    /// checked) with the collector, until the first process takes them;
    /// a later new process gets them made anew (its caches are large:
    /// a copy would cost as much again).
    fresh: Option<Simulation>,
    processes: BTreeMap<i32, Process>,
    /// Parts kept for one file per process, with `--combine-dumps=yes`.
    combined: BTreeMap<i32, Vec<Part>>,
    /// Dumps made and not yet taken.
    ready: Vec<Dump>,
    /// The first error met (profiles that cannot be represented).
    error: Option<Error>,
    /// The forest sizes of processes that ended.
    ended_statistics: Vec<(i32, cgx_backdate::Statistics)>,
}

impl Collector {
    /// Its options.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// A collector with these options; fails if the caches cannot be
    /// simulated.
    pub fn new(options: Options) -> Result<Collector, Error> {
        let events = EventSet::new(&options);
        let simulation = Simulation::new(&events, &options)?;
        Ok(Collector {
            options: Arc::new(options),
            events: Arc::new(events),
            fresh: Some(simulation),
            processes: BTreeMap::new(),
            combined: BTreeMap::new(),
            ready: Vec::new(),
            error: None,
            ended_statistics: Vec::new(),
        })
    }

    /// The back-dating forest's sizes of each process still running or
    /// ended, with `--cacheuse=yes` (for `-v`).
    pub fn statistics(&self) -> Vec<(i32, cgx_backdate::Statistics)> {
        let mut all = self.ended_statistics.clone();
        all.extend(
            self.processes
                .iter()
                .filter_map(|(pid, process)| Some((*pid, process.statistics()?))),
        );
        all
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
        let Collector {
            options,
            events,
            fresh,
            processes,
            error,
            ..
        } = self;
        processes
            .entry(pid)
            .or_insert_with(|| new_process(pid, options.clone(), events, fresh, error))
    }

    /// Runs `f` on process `pid`, made if new (a known one without the
    /// entry API: the common case, per event).
    #[inline]
    fn on_process<R>(&mut self, pid: i32, f: impl FnOnce(&mut Process) -> R) -> R {
        let result = match self.processes.get_mut(&pid) {
            Some(process) => f(process),
            None => f(self.process(pid)),
        };
        if self.options.has_block_triggers() {
            // The dumps blocks asked for (functions entered or left, a
            // number of blocks run).
            let finished = self.processes.get_mut(&pid).map(Process::take_finished);
            for parts in finished.into_iter().flatten() {
                self.deliver(pid, parts, false);
            }
        }
        result
    }

    /// Serves `request` from outside the run at a stop of `thread` (see
    /// [`cgx_engine::control_signal`]); the reply Callgrind's monitor prints.
    /// A dump it makes is among the next [`Collector::take_dumps`].
    pub fn control(&mut self, thread: Thread, request: &Control) -> String {
        let (reply, parts) = self.process(thread.pid).control(thread.tid, request);
        self.deliver(thread.pid, parts, false);
        reply
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
        if let Some(statistics) = process.statistics() {
            self.ended_statistics.push((pid, statistics));
        }
        self.deliver(pid, parts, true);
        self.processes.remove(&pid);
    }
}

impl EventSink for Collector {
    type Ahead = SimulationAhead;

    fn block(&mut self, thread: Thread, block: Block) {
        self.on_process(thread.pid, |process| process.block(thread.tid, block));
    }

    fn instruction(&mut self, thread: Thread, addr: u64, len: u8) {
        self.on_process(thread.pid, |process| {
            process.instruction(thread.tid, addr, len)
        });
    }

    fn block_executed(&mut self, thread: Thread, block: Block, instructions: &[(u64, u8)]) {
        self.on_process(thread.pid, |process| {
            process.block_executed(thread.tid, block, instructions)
        });
    }

    fn blocks_executed(&mut self, thread: Thread, blocks: &mut WholeBlocks<'_>) {
        self.on_process(thread.pid, |process| {
            process.blocks_executed(thread.tid, blocks)
        });
    }

    fn blocks_simulated(&mut self, thread: Thread, blocks: &mut SimulatedBlocks<'_>) {
        if self.options.has_block_triggers() {
            // One event at a time: each block's triggers are served before
            // the next block.
            cgx_engine::event::report_simulated(self, thread, blocks);
            return;
        }
        self.on_process(thread.pid, |process| {
            process.blocks_simulated(thread.tid, blocks)
        });
    }

    fn place(&mut self, thread: Thread, addr: u64) -> Option<Place> {
        self.on_process(thread.pid, |process| process.place(addr))
    }

    fn ahead(&mut self, thread: Thread) -> Option<SimulationAhead> {
        self.on_process(thread.pid, Process::ahead)
    }

    fn ahead_done(&mut self, thread: Thread, ahead: SimulationAhead) {
        if !self.on_process(thread.pid, |process| process.ahead_done(ahead)) {
            let pid = thread.pid;
            self.error.get_or_insert(Error::OutOfStep { pid });
        }
    }

    fn instruction_event(&mut self, thread: Thread, addr: u64, event: BlockEvent) {
        self.on_process(thread.pid, |process| match event {
            BlockEvent::Access(access) => process.data_access(thread.tid, access),
            BlockEvent::Conditional(taken) => process.conditional_branch(thread.tid, addr, taken),
            BlockEvent::Indirect(target) => process.indirect_branch(thread.tid, addr, target),
            BlockEvent::Bus => process.bus_locked(thread.tid),
        });
    }

    fn accesses_filtered(&mut self, thread: Thread, accesses: &mut FilteredAccesses<'_>) {
        self.on_process(thread.pid, |process| {
            process.accesses_filtered(thread.tid, accesses)
        });
    }

    fn system_call(&mut self, thread: Thread, call: SystemCall) {
        self.on_process(thread.pid, |process| process.system_call(thread.tid, &call));
    }

    fn caches_emptied(&mut self, thread: Thread) -> bool {
        self.process(thread.pid).take_caches_emptied()
    }

    fn client_request(&mut self, thread: Thread, args: [u64; 6], default: u64) -> u64 {
        let (result, parts) = self
            .process(thread.pid)
            .client_request(thread.tid, args, default);
        self.deliver(thread.pid, parts, false);
        result
    }

    fn lifecycle(&mut self, thread: Thread, event: Lifecycle<'_>) {
        let (pid, tid) = (thread.pid, thread.tid);
        match event {
            Lifecycle::SignalEntered(signal) => {
                self.process(pid).signal_handler_entered(tid, signal);
            }
            Lifecycle::SignalReturned => self.process(pid).signal_handler_returned(tid),
            // A process is profiled from its first thread's start, so a
            // program killed before its first block still leaves a profile.
            Lifecycle::ThreadStarted => {
                self.process(pid);
            }
            Lifecycle::ThreadExited => {
                if let Some(process) = self.processes.get_mut(&pid) {
                    process.thread_exited(tid);
                }
            }
            Lifecycle::Forked(child_pid) => {
                let child = self.process(pid).fork(tid, child_pid);
                self.processes.insert(child_pid, child);
            }
            Lifecycle::Exec { traced: false, .. } => {
                // The process leaves the run. A forked copy leaves no
                // profile, as under Valgrind (whose process becomes the
                // program); the program itself leaves what it collected.
                match self
                    .processes
                    .get(&pid)
                    .is_some_and(|process| process.forked)
                {
                    true => {
                        self.processes.remove(&pid);
                        self.combined.remove(&pid);
                    }
                    false => self.end_process(pid),
                }
            }
            Lifecycle::Exec {
                traced: true,
                name,
                args,
                ..
            } => {
                // Valgrind loses what the old program collected; the new
                // program's files show its command line.
                self.processes.remove(&pid);
                self.combined.remove(&pid);
                let options = Options {
                    command: crate::command_line(name, args),
                    ..(*self.options).clone()
                };
                let (events, fresh, error) = (&self.events, &mut self.fresh, &mut self.error);
                let process = new_process(pid, Arc::new(options), events, fresh, error);
                self.processes.insert(pid, process);
            }
            Lifecycle::ProcessExited(_) => self.end_process(pid),
            Lifecycle::Control => {}
        }
    }
}

/// A new process `pid` profiled with `options`: its simulation is `fresh`
/// (made at the start, once) or a new one; an error making it goes to
/// `error`.
fn new_process(
    pid: i32,
    options: Arc<Options>,
    events: &Arc<EventSet>,
    fresh: &mut Option<Simulation>,
    error: &mut Option<Error>,
) -> Process {
    let simulation = fresh.take().unwrap_or_else(|| {
        // Made once already with the same options: it cannot fail.
        Simulation::new(events, &options).unwrap_or_else(|source| {
            error.get_or_insert(source.into());
            Simulation::without_caches(events, &options)
        })
    });
    Process::new(pid, options, events.clone(), simulation)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cgx_engine::{Arrival, Exit};
    use std::path::Path;

    /// A process id no process has (its symbols are unknown).
    const PID: i32 = i32::MAX - 11;

    /// Runs a block of three instructions of `PID`, twice.
    fn run_a_little(collector: &mut Collector) {
        let thread = Thread { pid: PID, tid: PID };
        for arrival in [Arrival::Start, Arrival::Jump { conditional: true }] {
            let block = Block {
                addr: 0x1000,
                sp: 0x8000,
                arrival,
            };
            collector.block_executed(thread, block, &[(0x1000, 2), (0x1002, 3), (0x1005, 2)]);
        }
    }

    fn collector() -> Collector {
        let Ok(collector) = Collector::new(Options::default()) else {
            panic!("the default options are valid");
        };
        collector
    }

    /// The `sysCount` of the summary and of the totals after two blocks,
    /// three system calls (getpid, write, exit_group) and two more blocks
    /// (the block of the calls is charged when the next one starts), with
    /// `collect_atstart`.
    fn system_call_counts(collect_atstart: bool) -> (u64, u64) {
        let options = Options {
            collect_systime: crate::SystemTime::Msec,
            collect_atstart,
            ..Options::default()
        };
        let mut collector = match Collector::new(options) {
            Ok(collector) => collector,
            Err(error) => panic!("valid options: {error}"),
        };
        run_a_little(&mut collector);
        let thread = Thread { pid: PID, tid: PID };
        for number in [39, 1, 231] {
            let call = SystemCall {
                number,
                wall_start_ns: 1_000_000,
                wall_end_ns: 3_000_000,
                cpu_ns: 0,
            };
            collector.system_call(thread, call);
        }
        run_a_little(&mut collector);
        let dumps = match collector.finish() {
            Ok(dumps) => dumps,
            Err(error) => panic!("no error: {error}"),
        };
        let part = &dumps[0].profile.parts[0];
        let count = |costs: &Option<Vec<u64>>| costs.as_ref().map_or(0, |costs| costs[1]);
        (count(&part.summary), count(&part.totals))
    }

    #[test]
    fn a_system_call_counts_where_collected_and_always_in_the_summary() {
        // getpid and write at the last instruction; exit_group in the
        // summary alone.
        assert_eq!(system_call_counts(true), (3, 2));
        // Not collecting: all three in the summary alone.
        assert_eq!(system_call_counts(false), (3, 0));
    }

    #[test]
    fn dump_every_bb_dumps_once_more_than_n_blocks_ran_since_the_last() {
        let mut collector = match Collector::new(Options {
            dump_every_bb: 2,
            ..Options::default()
        }) {
            Ok(collector) => collector,
            Err(error) => panic!("valid options: {error}"),
        };
        let triggers = |collector: &mut Collector| -> Vec<(Option<u32>, Vec<String>)> {
            collector
                .take_dumps()
                .into_iter()
                .map(|dump| (dump.sequence, dump.profile.parts[0].header.desc.clone()))
                .collect()
        };
        // Two blocks: not more than two.
        run_a_little(&mut collector);
        assert_eq!(triggers(&mut collector), []);
        // After the third (of four): a dump of blocks 0 - 3.
        run_a_little(&mut collector);
        let dumps = triggers(&mut collector);
        assert_eq!(dumps.len(), 1, "{dumps:?}");
        assert_eq!(dumps[0].0, Some(1));
        assert!(dumps[0]
            .1
            .contains(&"Trigger: --dump-every-bb=2".to_string()));
        assert!(dumps[0]
            .1
            .contains(&"Timerange: Basic block 0 - 3".to_string()));
        // Blocks 4 to 6: the next one, after the sixth.
        run_a_little(&mut collector);
        let dumps = triggers(&mut collector);
        assert_eq!(dumps.len(), 1, "{dumps:?}");
        assert_eq!(dumps[0].0, Some(2));
        assert!(dumps[0]
            .1
            .contains(&"Timerange: Basic block 3 - 6".to_string()));
    }

    #[test]
    fn an_untraced_exec_ends_the_profile_and_a_traced_one_loses_it() {
        let mut untraced = collector();
        run_a_little(&mut untraced);
        let program = Path::new("/bin/other");
        let process = Thread::of_process(PID);
        let args = ["-x".to_string(), "file".to_string()];
        untraced.lifecycle(
            process,
            Lifecycle::Exec {
                program,
                name: "other",
                args: &args,
                traced: false,
            },
        );
        let dumps = untraced.take_dumps();
        assert_eq!(dumps.len(), 1);
        assert_eq!(dumps[0].pid, PID);
        assert!(dumps[0]
            .profile
            .parts
            .iter()
            .any(|part| part.self_totals()[0] > 0));
        // The exit that follows adds nothing.
        untraced.lifecycle(process, Lifecycle::ProcessExited(Exit::Code(0)));
        assert!(untraced.take_dumps().is_empty());

        // As Valgrind: what ran before a traced exec is lost.
        let mut traced = collector();
        run_a_little(&mut traced);
        traced.lifecycle(
            process,
            Lifecycle::Exec {
                program,
                name: "other",
                args: &args,
                traced: true,
            },
        );
        assert!(traced.take_dumps().is_empty());
        traced.lifecycle(process, Lifecycle::ProcessExited(Exit::Code(0)));
        let dumps = traced.take_dumps();
        assert_eq!(dumps.len(), 1);
        assert!(dumps[0]
            .profile
            .parts
            .iter()
            .all(|part| part.self_totals().iter().all(|&cost| cost == 0)));
        // The new program's command line, as execve was given it.
        let cmd = dumps[0].profile.parts[0].header.cmd.as_deref();
        assert_eq!(cmd, Some("other -x file"));
    }
}
