//! The wiring of the engine and the collector: runs the program with a
//! [`Collector`] as the event sink and hands every dump to a [`Listener`] as
//! soon as it is complete (a dump the program asked for, a process that ended),
//! so files appear while the program runs, as with Valgrind. This is the one
//! place that knows the engine's and the collector's APIs: both backends,
//! `step` and `translate`, report to the same collector through the same
//! [`EventSink`].

use cgx_callstack::{Collector, Dump, SimulationAhead};
use cgx_engine::{
    Block, BlockEvent, Command, EventSink, Exit, FilteredAccesses, Lifecycle, Place, RunOptions,
    SimulatedBlocks, SystemCall, Thread, WholeBlocks,
};

use super::options::Backend;
use crate::control::server::{Requests, Server};

/// What the translate backend did, for `-v`: the counts of its
/// [`cgx_engine::translate::Outcome`] that cgx prints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Translated {
    /// Blocks translated.
    pub translations: u64,
    /// Executions of translated blocks (records replayed).
    pub records: u64,
    /// Times the record buffer was handed over (drained).
    pub drains: u64,
    /// ptrace stops of the tracee while it ran translated code.
    pub stops: u64,
    /// Executions of blocks the translator refused (single-stepped).
    pub stepped_blocks: u64,
    /// Single-steps taken for them.
    pub steps: u64,
    /// Instructions reported.
    pub instructions: u64,
}

impl Translated {
    /// The counts of `outcome`.
    fn of(outcome: &cgx_engine::translate::Outcome) -> Translated {
        Translated {
            translations: outcome.translations,
            records: outcome.records,
            drains: outcome.drains,
            stops: outcome.stops,
            stepped_blocks: outcome.stepped_blocks,
            steps: outcome.steps,
            instructions: outcome.instructions,
        }
    }
}

/// Who receives what happens during the run.
pub trait Listener {
    /// Process `pid` starts: the run's program before its first
    /// instruction, another process at its first block (told once per
    /// process, and not for forked copies of a running process).
    fn process_started(&mut self, pid: i32);
    /// Dumps completed (in the order the collector made them).
    fn dumps(&mut self, dumps: Vec<Dump>);
    /// Process `pid` ended; its last dumps came just before.
    fn process_exited(&mut self, pid: i32, exit: Exit);
    /// Process `pid` ran `execve` of `program`, which is not traced; its
    /// dumps came just before.
    fn exec_untraced(&mut self, pid: i32, program: &std::path::Path);
    /// Process `pid` ran `execve` of a program that is traced, given as
    /// `name` with `args` after its first.
    fn exec_traced(&mut self, pid: i32, name: &str, args: &[String]);
    /// The collector could not make a profile (reported, the run goes on).
    fn collector_failed(&mut self, error: cgx_callstack::Error);
    /// The sizes of process `pid`'s back-dating tree over the run (told at
    /// the end, with `--cacheuse=yes`).
    fn statistics(&mut self, pid: i32, statistics: &cgx_backdate::Statistics);
    /// What the translate backend did in process `pid` (the program's): its
    /// translations, stops and buffer hand-offs (told at the end of a run
    /// with `--backend=translate` that ended without an error).
    fn translated(&mut self, pid: i32, translated: &Translated);
}

/// Runs `command` under `backend`, collecting with `collector`, and tells
/// `listener`; with `control` (the command line to list it under), the run
/// serves live control requests once its program runs (`callgrind_control`,
/// see [`crate::control`]). The dumps of the processes still known when the engine stops
/// (also after an engine error) are handed over before returning, then the
/// back-dating statistics and the translate backend's. Returns how the
/// program (the first process) ended.
pub fn trace(
    command: &Command,
    run_options: &RunOptions,
    backend: Backend,
    collector: Collector,
    listener: &mut dyn Listener,
    control: Option<String>,
) -> Result<Exit, cgx_engine::Error> {
    let mut tap = Tap {
        collector,
        listener,
        last_pid: None,
        started: Vec::new(),
        control: control.map(|command_line| LiveControl {
            command_line,
            requests: Requests::default(),
            server: None,
            tried: false,
        }),
    };
    let (result, translated) = match backend {
        Backend::Step => (
            cgx_engine::step::run(command, run_options, &mut tap).map(|outcome| outcome.exit),
            None,
        ),
        Backend::Translate => match cgx_engine::translate::run(command, run_options, &mut tap) {
            Ok(outcome) => (Ok(outcome.exit), Some(Translated::of(&outcome))),
            Err(error) => (Err(error), None),
        },
    };
    match tap.collector.finish() {
        Ok(dumps) => tap.deliver(dumps),
        Err(error) => tap.listener.collector_failed(error),
    }
    for (pid, statistics) in forest_statistics(&tap.collector) {
        tap.listener.statistics(pid, &statistics);
    }
    if let (Some(translated), Some(&pid)) = (translated, tap.started.first()) {
        tap.listener.translated(pid, &translated);
    }
    result
}

/// The back-dating forest sizes of every process, for `-v`. LEAD: the one
/// place that names the collector's statistics API (coded against
/// `Collector::statistics(&self) -> Vec<(i32, cgx_backdate::Statistics)>`).
fn forest_statistics(collector: &Collector) -> Vec<(i32, cgx_backdate::Statistics)> {
    collector.statistics()
}

/// Forwards the events to the collector and takes its dumps when an event may
/// have completed some.
struct Tap<'a> {
    collector: Collector,
    listener: &'a mut dyn Listener,
    /// The process of the last block, to notice new processes cheaply.
    last_pid: Option<i32>,
    /// The processes seen running.
    started: Vec<i32>,
    /// Live control of the run, when it is served.
    control: Option<LiveControl>,
}

/// Live control of a run (`callgrind_control`): the server of its
/// program, started when the program runs its first block.
struct LiveControl {
    /// The command line the run is listed under.
    command_line: String,
    /// The requests the server received.
    requests: Requests,
    server: Option<Server>,
    /// Whether the server was started (or failed to).
    tried: bool,
}

impl Tap<'_> {
    fn deliver(&mut self, dumps: Vec<Dump>) {
        if !dumps.is_empty() {
            self.listener.dumps(dumps);
        }
    }

    /// Tells the listener when a process starts or runs its first block,
    /// whichever comes first.
    fn notice(&mut self, pid: i32) {
        if self.last_pid != Some(pid) {
            self.last_pid = Some(pid);
            if !self.started.contains(&pid) {
                self.started.push(pid);
                self.listener.process_started(pid);
            }
        }
    }

    /// Starts serving live control requests for the program `pid`, when
    /// the run is served and not yet; a run that cannot goes on without
    /// (said once, on standard error).
    fn serve_control(&mut self, pid: i32) {
        let Some(control) = self.control.as_mut().filter(|control| !control.tried) else {
            return;
        };
        control.tried = true;
        let requests = control.requests.clone();
        match Server::start(pid, &control.command_line, requests) {
            Ok(server) => control.server = Some(server),
            Err(error) => eprintln!("cgx: no live control for this run: {error:#}"),
        }
    }

    /// Serves the live control requests waiting, stopped at `thread`.
    fn serve_requests(&mut self, thread: Thread) {
        let Some(control) = self.control.as_ref() else {
            return;
        };
        for request in control.requests.take() {
            let reply = match crate::control::parse(&request.line) {
                Some(command) => self.collector.control(thread, &command),
                None => format!("command '{}' not recognised\n", request.line),
            };
            self.take_dumps();
            request.answer(reply);
        }
    }

    fn take_dumps(&mut self) {
        let dumps = self.collector.take_dumps();
        self.deliver(dumps);
    }
}

impl EventSink for Tap<'_> {
    type Ahead = SimulationAhead;

    #[inline]
    fn block(&mut self, thread: Thread, block: Block) {
        self.notice(thread.pid);
        self.collector.block(thread, block);
    }

    fn block_executed(&mut self, thread: Thread, block: Block, instructions: &[(u64, u8)]) {
        self.notice(thread.pid);
        self.collector.block_executed(thread, block, instructions);
    }

    fn blocks_executed(&mut self, thread: Thread, blocks: &mut WholeBlocks<'_>) {
        self.notice(thread.pid);
        self.collector.blocks_executed(thread, blocks);
    }

    fn blocks_simulated(&mut self, thread: Thread, blocks: &mut SimulatedBlocks<'_>) {
        self.notice(thread.pid);
        self.collector.blocks_simulated(thread, blocks);
    }

    #[inline]
    fn instruction(&mut self, thread: Thread, addr: u64, len: u8) {
        self.collector.instruction(thread, addr, len);
    }

    fn place(&mut self, thread: Thread, addr: u64) -> Option<Place> {
        self.collector.place(thread, addr)
    }

    fn ahead(&mut self, thread: Thread) -> Option<SimulationAhead> {
        self.notice(thread.pid);
        self.collector.ahead(thread)
    }

    fn ahead_done(&mut self, thread: Thread, ahead: SimulationAhead) {
        self.collector.ahead_done(thread, ahead);
    }

    #[inline]
    fn instruction_event(&mut self, thread: Thread, addr: u64, event: BlockEvent) {
        self.collector.instruction_event(thread, addr, event);
    }

    fn accesses_filtered(&mut self, thread: Thread, accesses: &mut FilteredAccesses<'_>) {
        self.collector.accesses_filtered(thread, accesses);
    }

    fn system_call(&mut self, thread: Thread, call: SystemCall) {
        self.collector.system_call(thread, call);
    }

    fn caches_emptied(&mut self, thread: Thread) -> bool {
        self.collector.caches_emptied(thread)
    }

    fn client_request(&mut self, thread: Thread, args: [u64; 6], default: u64) -> u64 {
        let result = self.collector.client_request(thread, args, default);
        self.take_dumps();
        result
    }

    fn lifecycle(&mut self, thread: Thread, event: Lifecycle<'_>) {
        if let Lifecycle::Forked(child_pid) = event {
            // A copy of a running process, not a new start (Valgrind prints
            // no header for it either).
            self.started.push(child_pid);
        }
        self.collector.lifecycle(thread, event);
        match event {
            Lifecycle::ThreadExited => self.take_dumps(),
            Lifecycle::Exec {
                program,
                name,
                args,
                traced,
            } => {
                self.take_dumps();
                match traced {
                    true => self.listener.exec_traced(thread.pid, name, args),
                    false => self.listener.exec_untraced(thread.pid, program),
                }
            }
            Lifecycle::ProcessExited(exit) => {
                self.take_dumps();
                self.listener.process_exited(thread.pid, exit);
            }
            Lifecycle::Control => self.serve_requests(thread),
            // The run's program starts (its header first, before anything
            // it prints): its live control with it.
            Lifecycle::ThreadStarted if thread.tid == thread.pid => {
                self.notice(thread.pid);
                self.serve_control(thread.pid);
            }
            _ => {}
        }
    }
}
