//! The tracing loop: waits for any traced thread to stop, turns what its step
//! did into events, and resumes it for its next instruction. Each thread is
//! resumed on its own, so one blocked in a system call (a futex wait, a join)
//! does not hold up the others.

use crate::auxv;
use crate::control;
use crate::cpuid::{self, ValgrindCpu};
use crate::error::{Error, Result};
use crate::event::{Arrival, Block, EventSink, Exit, Lifecycle, SystemCall, Thread};
use crate::flow::{self, Flow, CLIENT_REQUEST_LEN};
use crate::jobs::Jobs;
use crate::refusals::{self, Refusals};
use crate::system_time::Reading;

use super::blocks::BlockCursor;
use super::code::CodeCache;
use super::decode::read_available;
use super::report::Execution;
use super::tracees::{open_memory, Process, Step, ThreadState, Tracees};
use super::{Outcome, RunOptions};
use crate::ptrace::{self, Regs};
use crate::semantics::Decoded;
use crate::semantics::Superblock;

/// `si_code` of a single-step trap, and of the step report after a system call.
const TRAP_TRACE: i32 = 2;
const TRAP_BRKPT: i32 = 1;
/// `si_code` of the stop the kernel reports when a stepped thread enters a
/// signal handler (`ptrace_notify(SIGTRAP)`).
const HANDLER_ENTERED: i32 = libc::SIGTRAP;

/// System call numbers the backend must recognize.
const SYS_RT_SIGRETURN: u64 = 15;
const SYS_EXIT: u64 = 60;
const SYS_EXIT_GROUP: u64 = 231;

/// What a stop says about the step in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StepEnd {
    /// A single-step trap: the instruction (or one REP iteration) completed.
    Trap,
    /// A signal stopped the thread; the instruction completed if the thread
    /// left its address. `fault`: a synchronous fault of the instruction.
    Signal { fault: bool },
    /// Nothing was executed (a group-stop, a signal handler entry).
    Nothing,
}

/// The state of one run of the step backend.
pub(super) struct Tracer<'s, S: EventSink + ?Sized> {
    sink: &'s mut S,
    options: RunOptions,
    /// The processor `cpuid` describes, when not the host's.
    cpu: Option<ValgrindCpu>,
    /// The system calls refused.
    refusals: Refusals,
    tracees: Tracees,
    initial: i32,
    initial_exit: Option<Exit>,
    /// Job control (group-stops).
    jobs: Jobs,
    instructions: u64,
    steps: u64,
    /// Decoded instructions dropped by processes no longer traced.
    code_dropped: u64,
}

impl<'s, S: EventSink + ?Sized> Tracer<'s, S> {
    /// A tracer for the process `initial`, stopped before its first
    /// instruction.
    pub fn new(sink: &'s mut S, options: RunOptions, initial: i32) -> Tracer<'s, S> {
        Tracer {
            sink,
            cpu: options
                .valgrind_machine
                .then(ValgrindCpu::for_host)
                .flatten(),
            refusals: Refusals::new(options.valgrind_machine),
            jobs: Jobs::new(&options, initial),
            options,
            tracees: Tracees::default(),
            initial,
            initial_exit: None,
            instructions: 0,
            steps: 0,
            code_dropped: 0,
        }
    }

    /// Traces until the initial process has exited and no traced process is
    /// left.
    pub fn run(mut self) -> Result<Outcome> {
        let thread = Thread {
            pid: self.initial,
            tid: self.initial,
        };
        let mut state = ThreadState::new(thread)?;
        self.sink.lifecycle(thread, Lifecycle::ThreadStarted);
        state.regs = ptrace::regs(thread.tid)?;
        if self.options.valgrind_machine {
            auxv::hide_vdso(thread.pid, state.regs.rsp)?;
        }
        self.tracees.threads.insert(thread.tid, state);
        self.tracees
            .processes
            .insert(thread.pid, Process::default());
        self.advance(thread.tid, false)?;
        let mut killed = false;
        loop {
            if let Some(exit) = self.initial_exit {
                if self.tracees.threads.is_empty() {
                    return Ok(self.outcome(exit));
                }
            }
            let Some((tid, status)) = ptrace::wait_any()? else {
                return Ok(self.outcome(ptrace::vanished(killed)?));
            };
            let served = self.handle(tid, status);
            killed |= ptrace::unless_killed(tid, served)?;
        }
    }

    /// The outcome of the run, which ended with the initial process's
    /// `exit`.
    fn outcome(&self, exit: Exit) -> Outcome {
        let alive: u64 = self
            .tracees
            .processes
            .values()
            .map(|process| process.code.dropped())
            .sum();
        Outcome {
            exit,
            instructions: self.instructions,
            steps: self.steps,
            code_dropped: self.code_dropped + alive,
        }
    }

    fn handle(&mut self, tid: i32, status: i32) -> Result<()> {
        if libc::WIFEXITED(status) {
            return self.thread_gone(tid, Exit::Code(libc::WEXITSTATUS(status)));
        }
        if libc::WIFSIGNALED(status) {
            let exit = Exit::Signal {
                signal: libc::WTERMSIG(status),
                core_dumped: libc::WCOREDUMP(status),
            };
            return self.thread_gone(tid, exit);
        }
        if !libc::WIFSTOPPED(status) {
            return Err(Error::Unexpected(format!("wait status {status:#x}")));
        }
        let signal = libc::WSTOPSIG(status);
        let event = status >> 16;
        let Some(state) = self.tracees.threads.get_mut(&tid) else {
            // A new thread or process stopped before its creator's event stop.
            self.tracees.early_stops.insert(tid);
            return Ok(());
        };
        if state.awaiting_start && event == libc::PTRACE_EVENT_STOP {
            state.awaiting_start = false;
            state.regs = ptrace::regs(tid)?;
            return self.advance(tid, false);
        }
        match event {
            0 => {
                let info = ptrace::signal_info(tid)?;
                self.signal_stop(tid, signal, info)
            }
            libc::PTRACE_EVENT_STOP => {
                let pid = state.thread.pid;
                if self.jobs.event_stop(tid, pid, signal)? {
                    // The group-stop ended: the step in flight goes on.
                    self.signal_stop(tid, signal, None)
                } else {
                    Ok(())
                }
            }
            libc::PTRACE_EVENT_CLONE | libc::PTRACE_EVENT_FORK | libc::PTRACE_EVENT_VFORK => {
                self.created(tid, event)
            }
            libc::PTRACE_EVENT_EXEC => self.executed(tid),
            // Other events: the step in flight goes on.
            _ => ptrace::single_step(tid, 0),
        }
    }

    /// A signal-delivery-stop or a single-step trap of `tid`, with `info`;
    /// without `info`, a stop in which nothing ran (the end of a group-stop).
    fn signal_stop(
        &mut self,
        tid: i32,
        signal: i32,
        info: Option<ptrace::SignalInfo>,
    ) -> Result<()> {
        if info.is_some_and(|info| control::is_control(signal, &info)) {
            if let Some(state) = self.tracees.threads.get(&tid) {
                self.sink.lifecycle(state.thread, Lifecycle::Control);
            }
            // The step in flight goes on.
            return ptrace::single_step(tid, 0);
        }
        let after = ptrace::regs(tid)?;
        let Some(state) = self.tracees.threads.get_mut(&tid) else {
            return Ok(());
        };
        let code = self
            .tracees
            .processes
            .get_mut(&state.thread.pid)
            .map(|process| &mut process.code);
        let step = state.step.take();
        let injected = step.map_or(0, |step| step.injected);
        let end = match info {
            // Nothing ran: resume without a signal.
            None => StepEnd::Nothing,
            Some(info)
                if signal == libc::SIGTRAP
                    && (info.code == TRAP_TRACE || info.code == TRAP_BRKPT) =>
            {
                StepEnd::Trap
            }
            Some(info)
                if signal == libc::SIGTRAP && injected != 0 && info.code == HANDLER_ENTERED =>
            {
                // The kernel set up a handler frame; nothing was executed.
                let resumption = state.cursor.resumption();
                state.signal_frames.push(resumption);
                state.cursor = BlockCursor::start();
                self.sink
                    .lifecycle(state.thread, Lifecycle::SignalEntered(injected));
                StepEnd::Nothing
            }
            Some(info) => {
                // A signal for the tracee: deliver it with the next step.
                state.inject = signal;
                let fault = info.code > 0
                    && matches!(
                        signal,
                        libc::SIGSEGV | libc::SIGBUS | libc::SIGILL | libc::SIGFPE | libc::SIGTRAP
                    );
                StepEnd::Signal { fault }
            }
        };
        if let Some(step) = step {
            complete(
                self.sink,
                &mut self.instructions,
                state,
                code,
                StepDone {
                    step: &step,
                    after: &after,
                    end,
                },
                self.options.superblocks,
            );
        }
        state.regs = after;
        self.advance(tid, false)
    }

    /// `tid` created a thread or process (a clone, fork or vfork event stop).
    fn created(&mut self, tid: i32, event: i32) -> Result<()> {
        let child = i32::try_from(ptrace::event_message(tid)?)
            .map_err(|_| Error::Unexpected("a new thread id out of range".into()))?;
        let Some(parent) = self.tracees.threads.get(&tid) else {
            return Ok(());
        };
        let parent_thread = parent.thread;
        let is_thread = event == libc::PTRACE_EVENT_CLONE
            && ptrace::thread_group(child).unwrap_or(parent_thread.pid) == parent_thread.pid;
        let thread = Thread {
            pid: if is_thread { parent_thread.pid } else { child },
            tid: child,
        };
        let mut state = ThreadState::new(thread)?;
        if is_thread {
            self.sink.lifecycle(thread, Lifecycle::ThreadStarted);
        } else {
            state.signal_frames = parent.signal_frames.clone();
            // The child's memory is a copy of the parent's.
            let code = self
                .tracees
                .processes
                .get(&parent_thread.pid)
                .map(|process| process.code.fork())
                .unwrap_or_default();
            self.tracees.processes.insert(child, Process { code });
            self.sink.lifecycle(parent_thread, Lifecycle::Forked(child));
        }
        let stopped_already = self.tracees.early_stops.remove(&child);
        state.awaiting_start = !stopped_already;
        if stopped_already {
            state.regs = ptrace::regs(child)?;
        }
        self.tracees.threads.insert(child, state);
        if stopped_already {
            self.advance(child, false)?;
        }
        // The creator's system call goes on; its step completes with a trap.
        ptrace::single_step(tid, 0)
    }

    /// `tid` completed an `execve` (an exec event stop).
    fn executed(&mut self, tid: i32) -> Result<()> {
        let former = i32::try_from(ptrace::event_message(tid)?).unwrap_or(tid);
        if former != tid {
            // A non-leader thread exec'd: it takes over the leader's id.
            if let Some(leader) = self.tracees.threads.remove(&tid) {
                self.sink.lifecycle(leader.thread, Lifecycle::ThreadExited);
            }
            if let Some(mut state) = self.tracees.threads.remove(&former) {
                state.thread.tid = tid;
                self.tracees.threads.insert(tid, state);
            }
        }
        let after = ptrace::regs(tid)?;
        let Some(state) = self.tracees.threads.get_mut(&tid) else {
            return Ok(());
        };
        let pid = state.thread.pid;
        // The `execve` itself completed (and is not reported: Callgrind
        // counts a failed one, see `crate::system_time::reported`).
        if let Some(mut step) = state.step.take() {
            step.timing = None;
            let before = step.before;
            let mut executed = before;
            executed.rip = step
                .at
                .wrapping_add(step.decoded.map_or(2, |d| u64::from(d.len)));
            complete(
                self.sink,
                &mut self.instructions,
                state,
                None,
                StepDone {
                    step: &step,
                    after: &executed,
                    end: StepEnd::Trap,
                },
                self.options.superblocks,
            );
        }
        if let Some(process) = self.tracees.processes.get_mut(&pid) {
            process.code.clear();
        }
        let program = crate::launch::program_of(tid);
        let name = state.exec_name.take();
        let name = name.unwrap_or_else(|| program.display().to_string());
        let args = crate::launch::arguments_of(tid);
        if self.options.traces_child(&name, &args) {
            self.sink.lifecycle(
                Thread::of_process(pid),
                Lifecycle::Exec {
                    program: &program,
                    name: &name,
                    args: &args,
                    traced: true,
                },
            );
            state.memory = open_memory(tid)?;
            if self.options.valgrind_machine {
                auxv::hide_vdso(pid, after.rsp)?;
            }
            state.regs = after;
            state.cursor = BlockCursor::start();
            state.signal_frames.clear();
            state.inject = 0;
            return self.advance(tid, true);
        }
        self.sink.lifecycle(
            Thread::of_process(pid),
            Lifecycle::Exec {
                program: &program,
                name: &name,
                args: &args,
                traced: false,
            },
        );
        ptrace::detach(tid)?;
        self.tracees
            .threads
            .retain(|_, state| state.thread.pid != pid);
        self.forget(pid);
        Ok(())
    }

    /// Thread `tid` ended with `exit`.
    fn thread_gone(&mut self, tid: i32, exit: Exit) -> Result<()> {
        self.tracees.early_stops.remove(&tid);
        let Some(mut state) = self.tracees.threads.remove(&tid) else {
            // The initial process after it was detached (untraced exec).
            if tid == self.initial && self.initial_exit.is_none() {
                self.initial_exit = Some(exit);
                self.sink
                    .lifecycle(Thread::of_process(tid), Lifecycle::ProcessExited(exit));
            }
            return Ok(());
        };
        if let (Some(step), Exit::Code(_)) = (state.step.take(), exit) {
            let exits = matches!(
                step.decoded,
                Some(Decoded {
                    flow: Flow::SystemCall,
                    ..
                })
            ) && matches!(step.before.rax, SYS_EXIT | SYS_EXIT_GROUP);
            if exits {
                let mut executed = step.before;
                executed.rip = step.at.wrapping_add(2);
                complete(
                    self.sink,
                    &mut self.instructions,
                    &mut state,
                    None,
                    StepDone {
                        step: &step,
                        after: &executed,
                        end: StepEnd::Trap,
                    },
                    self.options.superblocks,
                );
            }
        }
        self.sink.lifecycle(state.thread, Lifecycle::ThreadExited);
        let pid = state.thread.pid;
        if tid == pid {
            self.forget(pid);
            self.sink
                .lifecycle(Thread::of_process(pid), Lifecycle::ProcessExited(exit));
            if pid == self.initial {
                self.initial_exit = Some(exit);
            }
        }
        Ok(())
    }

    /// Forgets process `pid`, no longer traced.
    fn forget(&mut self, pid: i32) {
        if let Some(process) = self.tracees.processes.remove(&pid) {
            self.code_dropped += process.code.dropped();
        }
    }

    /// Resumes stopped `tid` for its next instruction. Client requests are
    /// served here without a step.
    fn advance(&mut self, tid: i32, after_exec: bool) -> Result<()> {
        let Some(state) = self.tracees.threads.get_mut(&tid) else {
            return Ok(());
        };
        let process = self.tracees.processes.entry(state.thread.pid).or_default();
        loop {
            let at = state.regs.rip;
            let decoded = process.code.get(at, &state.memory);
            if let (Some(decoded), 0) = (decoded, state.inject) {
                if decoded.flow == Flow::ClientRequest {
                    self.instructions += 1;
                    client_request(self.sink, state, at)?;
                    continue;
                }
                // A `cpuid` or a refused system call: answered without a
                // step.
                let cpu = self.cpu.as_ref().filter(|_| decoded.cpuid);
                let refused = decoded.syscall && self.refusals.refuses(state.regs.rax);
                if cpu.is_some() || refused {
                    let clocks = self.options.system_calls;
                    let step = Step {
                        at,
                        decoded: Some(decoded),
                        before: state.regs,
                        injected: 0,
                        after_exec,
                        timing: (refused && clocks.on())
                            .then(|| Reading::now(clocks, state.thread.pid, tid)),
                    };
                    let next = at.wrapping_add(u64::from(decoded.len));
                    match cpu {
                        Some(cpu) => cpuid::execute(cpu, &mut state.regs, decoded.len),
                        None => refusals::refuse(&mut state.regs, next, next),
                    }
                    ptrace::set_regs(tid, &state.regs)?;
                    let after = state.regs;
                    complete(
                        self.sink,
                        &mut self.instructions,
                        state,
                        Some(&mut process.code),
                        StepDone {
                            step: &step,
                            after: &after,
                            end: StepEnd::Trap,
                        },
                        self.options.superblocks,
                    );
                    continue;
                }
            }
            if decoded.is_some_and(|decoded| decoded.flow == Flow::SystemCall) {
                state.exec_name = ptrace::exec_name(&state.memory, &state.regs);
            }
            let clocks = self.options.system_calls;
            // An `execve` too: reported if it fails (see `executed`).
            let timing = (clocks.on() && decoded.is_some_and(|decoded| decoded.syscall))
                .then(|| Reading::now(clocks, state.thread.pid, tid));
            ptrace::single_step(tid, state.inject)?;
            self.steps += 1;
            state.step = Some(Step {
                at,
                decoded,
                before: state.regs,
                injected: state.inject,
                after_exec,
                timing,
            });
            state.inject = 0;
            return Ok(());
        }
    }
}

/// Reports the block start of `state` at `at` unless a block is open.
fn open_block<S: EventSink + ?Sized>(sink: &mut S, state: &mut ThreadState, at: u64, sp: u64) {
    if !state.cursor.open {
        sink.block(
            state.thread,
            Block {
                addr: at,
                sp,
                arrival: state.cursor.arrival,
            },
        );
        state.cursor.open = true;
        state.cursor.count = 0;
        state.cursor.known = 0;
    }
}

/// A step of a thread and how it ended.
struct StepDone<'a> {
    /// The step.
    step: &'a Step,
    /// The registers after it.
    after: &'a Regs,
    /// How it ended.
    end: StepEnd,
}

/// Turns the step of `state` that is done into events, and drops from
/// `code` (the process's decoded instructions) what the step's stores or
/// system call may have changed.
/// `superblocks`: report the conditional branches Cachegrind sees
/// ([`RunOptions::superblocks`]).
fn complete<S: EventSink + ?Sized>(
    sink: &mut S,
    instructions: &mut u64,
    state: &mut ThreadState,
    code: Option<&mut CodeCache>,
    StepDone { step, after, end }: StepDone<'_>,
    superblocks: bool,
) {
    let at = step.at;
    let completed = end == StepEnd::Trap && !(step.after_exec && after.rip == at);
    let executions = match (end, step.decoded) {
        (StepEnd::Nothing, _) => 0,
        (_, Some(decoded)) => decoded.executions(at, &step.before, after, completed),
        (_, None) => u64::from(completed || after.rip != at),
    };
    let fault = matches!(end, StepEnd::Signal { fault: true });
    if executions == 0 {
        if fault {
            // The faulting instruction's block was entered.
            open_block(sink, state, at, step.before.rsp);
        }
        return;
    }
    open_block(sink, state, at, step.before.rsp);
    let len = step.decoded.map_or(0, |decoded| decoded.len);
    let execution = step.decoded.as_ref().map(|decoded| Execution {
        thread: state.thread,
        at,
        decoded,
        before: &step.before,
        after,
        repetitions: decoded.repetitions(at, &step.before, after),
    });
    for index in 0..executions {
        if index > 0 {
            // A further REP iteration is a block of its own (see `blocks`).
            sink.block(
                state.thread,
                Block {
                    addr: at,
                    sp: after.rsp,
                    arrival: Arrival::Jump { conditional: true },
                },
            );
            state.cursor.known = 0;
            state.cursor.superblock.known = 0;
        }
        sink.instruction(state.thread, at, len);
        if let Some(execution) = &execution {
            if superblocks {
                execution.report(sink, index, state.cursor.superblock.known, true);
            } else {
                execution.report(sink, index, state.cursor.known, false);
            }
        }
    }
    if let Some(start) = step.timing {
        let end = Reading::now(start.clocks, state.thread.pid, state.thread.tid);
        let call = SystemCall::between(step.before.rax, start, end);
        sink.system_call(state.thread, call);
    }
    *instructions += executions;
    state.cursor.count += 1;
    if let (Some(code), Some(execution)) = (code, &execution) {
        execution.for_each_store(executions, |addr, size| code.stored(addr, size));
        if execution.decoded.flow == Flow::SystemCall {
            code.system_call(state.thread.pid, &step.before, after);
        }
    }
    let Some(decoded) = step.decoded else {
        return;
    };
    state.cursor.known = decoded.effect.apply(state.cursor.known);
    let superblock_known = decoded.effect.apply(state.cursor.superblock.known);
    state
        .cursor
        .superblock
        .executed(&decoded, at, after.rip, superblock_known);
    if decoded.flow == Flow::SystemCall && step.before.rax == SYS_RT_SIGRETURN {
        sink.lifecycle(state.thread, Lifecycle::SignalReturned);
        let arrival = state.signal_frames.pop().unwrap_or(Arrival::FallThrough);
        state.cursor.leave(arrival);
        return;
    }
    if let Some(arrival) = flow::exit(decoded.end(at), after.rip, state.cursor.count) {
        state.cursor.leave(arrival);
    }
}

/// Serves the client request at `at` (the marker, one instruction for
/// Valgrind): reads `[request, arg1..arg5]` at rax, asks the sink, writes the
/// answer to rdx and moves past the marker.
fn client_request<S: EventSink + ?Sized>(
    sink: &mut S,
    state: &mut ThreadState,
    at: u64,
) -> Result<()> {
    open_block(sink, state, at, state.regs.rsp);
    sink.instruction(state.thread, at, CLIENT_REQUEST_LEN);
    let mut bytes = [0u8; 48];
    if read_available(&state.memory, state.regs.rax, &mut bytes) == bytes.len() {
        let mut args = [0u64; 6];
        for (arg, word) in args.iter_mut().zip(bytes.chunks_exact(8)) {
            let mut raw = [0u8; 8];
            raw.copy_from_slice(word);
            *arg = u64::from_ne_bytes(raw);
        }
        state.regs.rdx = sink.client_request(state.thread, args, state.regs.rdx);
    }
    state.regs.rip = at.wrapping_add(u64::from(CLIENT_REQUEST_LEN));
    ptrace::set_regs(state.thread.tid, &state.regs)?;
    state.cursor.leave(Arrival::FallThrough);
    state.cursor.superblock = Superblock::start();
    Ok(())
}
