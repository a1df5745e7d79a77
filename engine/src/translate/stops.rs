//! Serving one stop of one thread running in the code cache: an exit stub
//! or a lookup miss (translate the target and ahead of it, link the exit
//! or fill the table, go on), a watched system call (`invalidate`; an
//! `execve`, run after a drain), a full record buffer half (go on in the
//! other half, restart the block's prologue, replay the full half while
//! the thread runs), an escape to original code, a refused block (drain,
//! step it), a signal for the program. Only the stopped thread is touched:
//! the others run on.

use crate::control;
use crate::cpuid::{self, ValgrindCpu};
use crate::error::{Error, Result};
use crate::event::{EventSink, Lifecycle, SystemCall, Thread};
use crate::ptrace::{self, Regs};
use crate::refusals;

use super::area::{
    Area, BACK, FILTER_BACK, RECORD, RESUME_FLAGS, SAVE_RAX, SAVE_RDX, TARGET, TEMP, WRITE_RDX,
    WRITING,
};
use super::buffer::{
    drain, drain_interrupted, hand_off, hand_off_filter_records, replay_filter_records,
    replay_records, HandedOff, Replay, Replaying, Saved,
};
use super::cache::{Cache, Stub};
use super::deferred::Deferred;
use super::inject;
use super::invalidate::{
    self, SYS_ARCH_PRCTL, SYS_EXECVE, SYS_EXECVEAT, SYS_SCHED_GETAFFINITY, SYS_SCHED_SETAFFINITY,
};
use super::memory::Memory;
use super::placement::{names_itself, Placement};
use super::protect::Injector;
use super::quiet;
use super::signals::{self, Frame};
use super::space::Space;
use super::stepper::{step_block, Stepped};
use super::timing::SystemCallWords;
use super::Outcome;
use crate::system_time::Reading;

/// Most blocks translated ahead per stop. Fewer translations cost more
/// stops, and a stop costs about two or three translations: on `ls` a
/// third of the blocks translated ahead at depth 3 from the stop never
/// run, two thirds at depth 7; 16 costs the least there (32: 7,807
/// translations and 667 stops; 16: 6,576 and 798; 8: 5,712 and 1,054).
const AHEAD: usize = 16;

/// Most single steps from where a signal stopped a thread to a safe point
/// (the longest stretch of instrumentation is a few dozen instructions).
const MAX_STEPS_TO_SAFE_POINT: usize = 1000;

/// `arch_prctl` code that sets the GS base.
const ARCH_SET_GS: u64 = 0x1001;

/// The tracer's state of one thread.
pub(super) struct ThreadState {
    /// Who it is.
    pub thread: Thread,
    /// Its address space (a key of the tracer's spaces).
    pub space: u32,
    /// Its data area (GS base).
    pub area: Area,
    /// Its block sequence.
    pub replay: Replay,
    /// Signal handler frames it is in, innermost last.
    pub frames: Vec<Frame<Saved>>,
    /// Created, not yet stopped for its start.
    pub awaiting_start: bool,
    /// `area` is its own (a new thread's, a vforked process's, is its
    /// creator's until its start).
    pub own_area: bool,
    /// An `execve` is in flight: where the thread goes on if it fails (the
    /// exit slot after the `syscall` and the original address after it).
    pub exec_resume: Option<(u64, u64)>,
    /// The program name the thread's pending `execve` was given.
    pub exec_name: Option<String>,
    /// With timed system calls, the pending `execve`'s number and the
    /// clocks when it started: reported if it fails.
    pub exec_timing: Option<(u64, Reading)>,
    /// Its end was reported (at its exit stop: a thread other than the
    /// leader runs nothing after it).
    pub exit_reported: bool,
    /// The processors it runs on.
    pub placement: Placement,
    /// A half it handed off whose records are not all replayed yet.
    pub deferred: Option<Deferred>,
}

/// Where stepping to a safe point ended.
enum Reached {
    /// At a safe point; the signals that arrived on the way are `later`.
    Safe { later: Vec<i32> },
    /// At another stop, with this status.
    Stopped(i32),
}

/// What to do after a stop.
pub(super) enum Next {
    /// Resume the thread with this signal.
    Resume(i32),
    /// The thread is resumed already.
    Resumed,
    /// The thread stopped again with this wait status, to be served.
    Again(i32),
}

/// A stopped thread and what serving its stop needs.
pub(super) struct Stopped<'a, S: EventSink + ?Sized> {
    /// Where events go.
    pub sink: &'a mut S,
    /// The thread's address space.
    pub space: &'a mut Space,
    /// The thread.
    pub state: &'a mut ThreadState,
    /// The run's counters.
    pub outcome: &'a mut Outcome,
    /// The processor `cpuid` describes, when not the host's.
    pub cpu: Option<&'a ValgrindCpu>,
    /// The other threads in its address space.
    pub others: Vec<Other>,
}

/// Another thread in the address space of a stopped one.
pub(super) struct Other {
    /// Its id.
    pub tid: i32,
    /// Whether it runs a signal handler (which returns into the code
    /// cache).
    pub in_handler: bool,
}

impl<S: EventSink + ?Sized> Stopped<'_, S> {
    /// Serves a signal-delivery-stop (or group-stop) with `signal`.
    pub fn signal_stop(&mut self, signal: i32) -> Result<Next> {
        let tid = self.state.thread.tid;
        // The faulting address of a SIGSEGV. A SIGTRAP stop (most stops)
        // needs no signal information and is never a group-stop (those
        // stop with SIGSTOP, SIGTSTP, SIGTTIN or SIGTTOU): one ptrace call
        // fewer.
        let fault = if signal == libc::SIGTRAP {
            None
        } else {
            match ptrace::signal_info(tid)? {
                Some(info) if control::is_control(signal, &info) => {
                    self.drain()?;
                    self.sink.lifecycle(self.state.thread, Lifecycle::Control);
                    if self.sink.caches_emptied(self.state.thread) {
                        self.empty_first_level()?;
                    }
                    if let Some(regs) = control::restarted(&ptrace::regs(tid)?) {
                        ptrace::set_regs(tid, &regs)?;
                    }
                    return Ok(Next::Resume(0));
                }
                Some(info) => Some(info.addr),
                // A group-stop.
                None => return Ok(Next::Resume(0)),
            }
        };
        let mut regs = ptrace::regs(tid)?;
        let resumes = self.state.frames.iter().map(|frame| frame.resume);
        let at = std::iter::once(regs.rip).chain(resumes);
        self.space.cache.seen(tid, at);
        let gadget = self.space.cache.layout().gadget();
        let area = self.state.area;
        if signal == libc::SIGTRAP {
            if let Some((slot, next)) = self.state.exec_resume {
                if regs.rip == gadget + 3 {
                    // The `execve` failed (its `int3` after the gadget's
                    // `syscall`): go on after it.
                    self.state.exec_resume = None;
                    if let Some((number, start)) = self.state.exec_timing.take() {
                        let thread = self.state.thread;
                        let end = Reading::now(start.clocks, thread.pid, tid);
                        let call = SystemCall::between(number, start, end);
                        self.sink.system_call(thread, call);
                    }
                    regs.rcx = next;
                    regs.rip = slot;
                    ptrace::set_regs(tid, &regs)?;
                    return Ok(Next::Resume(0));
                }
            }
            let stub = regs.rip.wrapping_sub(1);
            match self.space.cache.stub(stub) {
                Some(Stub::Miss) => {
                    super::pending::jumper_in_order(&self.space.memory, &area)?;
                    regs.rip = self.space.memory.read_u64(area.at(TARGET))?;
                    return self.enter(&mut regs);
                }
                Some(Stub::Exit { id, exit }) => {
                    // Translated ahead in protected code only (code a
                    // thread can only reach through the cache).
                    let space = &mut *self.space;
                    let (sink, thread) = (&mut *self.sink, self.state.thread);
                    regs.rip = space.cache.follow_exit(
                        &space.memory,
                        id,
                        exit,
                        AHEAD,
                        &space.protection,
                        &mut |addr| sink.place(thread, addr),
                    )?;
                    return self.enter(&mut regs);
                }
                Some(Stub::Stale { id }) => return self.stale(id, &mut regs),
                Some(Stub::Syscall { id }) => return self.watched_syscall(id, regs),
                Some(Stub::Cpuid) => {
                    let cpu = self.cpu.ok_or_else(|| {
                        Error::Unexpected("translate: a cpuid trap without a processor".into())
                    })?;
                    // As if the `int3` were the `cpuid` (one byte).
                    regs.rip = stub;
                    cpuid::execute(cpu, &mut regs, 1);
                    ptrace::set_regs(tid, &regs)?;
                    return Ok(Next::Resume(0));
                }
                None if stub == self.space.cache.layout().landing_pad() => {
                    return self.handler_returned(&mut regs)
                }
                None => {}
            }
        }
        if signal == libc::SIGSEGV
            && fault == Some(regs.rip)
            && self.space.protection.covers(regs.rip)
        {
            // An escape to original code: go to its translation.
            self.outcome.faults += 1;
            return self.enter(&mut regs);
        }
        if signal == libc::SIGSEGV
            && fault.is_some_and(|addr| area.filter_half_guarded_by(addr).is_some())
        {
            // A half of the thread's filter records that name their run
            // is full: the filter routine starts again with the other half
            // (nothing changed yet), and the full one is replayed while
            // the thread runs.
            let restart = self
                .space
                .cache
                .filter_routine_holding(regs.rip)
                .ok_or_else(|| {
                    Error::Unexpected(
                        "translate: a filter record stored outside a filter routine".into(),
                    )
                })?;
            regs.rip = restart;
            let filtered = hand_off_filter_records(&self.space.memory, &area)?;
            let handed = HandedOff {
                records: 0..0,
                filtered,
                filling: None,
            };
            self.replay_handed_off(&regs, handed)?;
            return Ok(Next::Resumed);
        }
        if signal == libc::SIGSEGV && fault.is_some_and(|addr| area.half_guarded_by(addr).is_some())
        {
            // A half of the thread's record buffer is full: the thread
            // restarts the prologue with the other half and runs while the
            // full one is replayed.
            let memory = &self.space.memory;
            let entry = if self.space.cache.writes_pending(regs.rip) {
                // In the routine writing the pending calls' records, for
                // the translation whose fresh entry it goes back to: rcx,
                // rdx and the flags are in their slots too.
                regs.rcx = memory.read_u64(area.at(TEMP))?;
                regs.rdx = memory.read_u64(area.at(WRITE_RDX))?;
                let flags = memory.read_u64(area.at(RESUME_FLAGS))?;
                regs.eflags = super::pending::flags_kept(regs.eflags, flags);
                let back = memory.read_u64(area.at(BACK))?;
                Some(back + quiet::FRESH_ENTRY)
                    .filter(|&entry| self.space.cache.entry_holding(entry) == Some(entry))
            } else if let Some(restart) = self.space.cache.filter_routine_holding(regs.rip) {
                // In a filter routine: it starts again (nothing changed
                // yet; it reloads what it needs from the slots).
                regs.rip = restart;
                let records = hand_off(&self.space.memory, &area)?;
                let back = memory.read_u64(area.at(FILTER_BACK))?;
                if let Some(id) = self.space.cache.repeating_holding(back) {
                    // Inside a block that counts its runs: in a new record.
                    area.open_record(memory, id, regs.rsp)?;
                }
                self.replay_handed_off(&regs, records)?;
                return Ok(Next::Resumed);
            } else if let Some(restart) = self.space.cache.filter_path_holding(regs.rip) {
                // In a block's own record written late (`filter`): it
                // starts again with the program's rax, which it saved
                // before it took the cursor there.
                regs.rax = memory.read_u64(area.at(SAVE_RAX))?;
                regs.rip = restart;
                let records = hand_off(&self.space.memory, &area)?;
                self.replay_handed_off(&regs, records)?;
                return Ok(Next::Resumed);
            } else if self.space.cache.writes_record(regs.rip) {
                // In the routine writing a translation's record: rcx and
                // rdx are in their slots too.
                regs.rcx = memory.read_u64(area.at(TEMP))?;
                regs.rdx = memory.read_u64(area.at(SAVE_RDX))?;
                let entry = memory.read_u64(area.at(WRITING))?;
                Some(entry).filter(|&entry| self.space.cache.entry_holding(entry) == Some(entry))
            } else {
                self.space.cache.entry_holding(regs.rip)
            };
            let entry = entry.ok_or_else(|| {
                Error::Unexpected("translate: a buffer fault outside the code cache".into())
            })?;
            let records = hand_off(&self.space.memory, &area)?;
            regs.rax = self.space.memory.read_u64(area.at(SAVE_RAX))?;
            regs.rip = entry;
            self.replay_handed_off(&regs, records)?;
            return Ok(Next::Resumed);
        }
        // A signal for the program.
        if signals::caught(self.state.thread.pid, signal) {
            return self.deliver(signal);
        }
        Ok(Next::Resume(signal))
    }

    /// Translation `id` is about to make a system call the tracer watches
    /// (`invalidate`) or refuses (`refusals`: it fails at once, the
    /// program resumed after the `syscall`): for one that may change code
    /// mappings, runs it from the gadget with a single step, drops the
    /// translations of what it changed, protects the executable mappings
    /// it made, and resumes after the `syscall`. An `execve` runs after a
    /// drain (its records would go with the old program), the thread
    /// resumed at the gadget.
    fn watched_syscall(&mut self, id: u32, call: Regs) -> Result<Next> {
        let tid = self.state.thread.tid;
        let (slot, next) = self.space.cache.after_syscall(id).ok_or_else(|| {
            Error::Unexpected("translate: a system call trap without a continuation".into())
        })?;
        let gadget = self.space.cache.layout().gadget();
        let mut regs = call;
        regs.rip = gadget;
        let timed = self
            .space
            .cache
            .replay_info(u64::from(id))
            .and_then(|info| info.system_call);
        if self.space.cache.refusals().refuses(call.rax) {
            let mut regs = call;
            refusals::refuse(&mut regs, slot, next);
            ptrace::set_regs(tid, &regs)?;
            if let Some(words) = timed {
                let Thread { pid, .. } = self.state.thread;
                let now = Reading::now(words.clocks(), pid, tid);
                self.write_system_call(&words, call.rax, now, now)?;
            }
            return Ok(Next::Resume(0));
        }
        match call.rax {
            SYS_EXECVE | SYS_EXECVEAT => {
                if let Some(words) = timed {
                    // Reported only if it fails, below (`system_time::reported`).
                    let none = Reading::default();
                    self.write_system_call(&words, call.rax, none, none)?;
                }
                self.state.exec_name = self.space.memory.exec_name(&call);
                self.drain()?;
                ptrace::set_regs(tid, &regs)?;
                let pid = self.state.thread.pid;
                self.state.exec_timing = timed.map(|words| {
                    let start = Reading::now(words.clocks(), pid, tid);
                    (call.rax, start)
                });
                ptrace::cont(tid, 0)?;
                self.state.exec_resume = Some((slot, next));
                return Ok(Next::Resumed);
            }
            SYS_ARCH_PRCTL if call.rdi == ARCH_SET_GS => {
                return Err(Error::Unexpected(
                    "translate: the program sets its GS base, which the backend takes for \
                     its per-thread data"
                        .into(),
                ));
            }
            // The thread's own processors, for the program to read or
            // change (`placement`; the other threads are on their own
            // sets while this one is stopped).
            SYS_SCHED_GETAFFINITY | SYS_SCHED_SETAFFINITY if names_itself(&call, tid) => {
                self.state.placement.own(tid);
            }
            _ => {}
        }
        ptrace::set_regs(tid, &regs)?;
        let Thread { pid, .. } = self.state.thread;
        let clocks = timed.map(|words| words.clocks());
        let start = clocks.map(|clocks| Reading::now(clocks, pid, tid));
        let status = crate::resume::until_trap(tid, true)?;
        let end = clocks.map(|clocks| Reading::now(clocks, pid, tid));
        self.outcome.stops += 1;
        if !(libc::WIFSTOPPED(status)
            && libc::WSTOPSIG(status) == libc::SIGTRAP
            && status >> 16 == 0)
        {
            return Err(Error::Unexpected(format!(
                "translate: a watched system call stopped with status {status:#x}"
            )));
        }
        if let (Some(words), Some(start), Some(end)) = (timed, start, end) {
            self.write_system_call(&words, call.rax, start, end)?;
        }
        let mut regs = ptrace::regs(tid)?;
        regs.rcx = next;
        regs.rip = slot;
        ptrace::set_regs(tid, &regs)?;
        let mut remapped = false;
        for range in invalidate::affected(&call, regs.rax) {
            self.outcome.invalidated +=
                self.space
                    .cache
                    .invalidate(&self.space.memory, range.start, range.end)? as u64;
            if range.remapped {
                self.space.protection.forget(range.start, range.end);
                remapped = true;
            }
        }
        if remapped {
            self.protect(&regs)?;
        }
        Ok(Next::Resume(0))
    }

    /// Writes the number and times of a system call the tracer ran (between
    /// the readings `start` and `end`) into the thread's open record, where
    /// `words` says (see `timing`).
    fn write_system_call(
        &self,
        words: &SystemCallWords,
        number: u64,
        start: Reading,
        end: Reading,
    ) -> Result<()> {
        let memory = &self.space.memory;
        let record = memory.read_u64(self.state.area.at(RECORD))?;
        for (word, value) in words.write(number, start, end) {
            memory.write_u64(record + 8 * (1 + word as u64), value)?;
        }
        Ok(())
    }

    /// Takes PROT_EXEC from the executable mappings not protected yet,
    /// through the stopped thread (`regs`: its registers).
    fn protect(&mut self, regs: &Regs) -> Result<()> {
        let injector = Injector {
            tid: self.state.thread.tid,
            memory: &self.space.memory,
            regs,
            gadget: self.space.cache.layout().gadget(),
        };
        let protected = self.space.protection.scan(
            self.state.thread.tid,
            injector,
            self.space.cache.regions(),
        )?;
        self.outcome.protected += protected as u64;
        Ok(())
    }

    /// Delivers `signal`, which the program catches, stopping at its
    /// handler's entry (see `signals`). A block the signal interrupts
    /// is reported up to where it was (`Cache::interrupted`), and its
    /// rest runs after the handler as a block of its own, as the step
    /// backend reports it.
    fn deliver(&mut self, signal: i32) -> Result<Next> {
        let tid = self.state.thread.tid;
        let later = match self.step_to_safe_point(signal)? {
            Reached::Safe { later } => later,
            Reached::Stopped(status) => return Ok(Next::Again(status)),
        };
        let at = ptrace::regs(tid)?.rip;
        let scratch = self.state.area.save_scratch(&self.space.memory)?;
        ptrace::single_step(tid, signal)?;
        let status = ptrace::wait(tid)?;
        self.outcome.stops += 1;
        self.queue_again(&later);
        if !(libc::WIFSTOPPED(status)
            && libc::WSTOPSIG(status) == libc::SIGTRAP
            && status >> 16 == 0)
        {
            return Ok(Next::Again(status));
        }
        let mut regs = ptrace::regs(tid)?;
        if self.space.cache.region_holding(regs.rip).is_some() {
            // No handler frame (the step ran code of the cache).
            return Ok(Next::Resume(0));
        }
        let interrupted = self.space.cache.interrupted(at);
        match interrupted {
            Some(interruption) => self.replay_buffer(|memory, cache, area, to| {
                drain_interrupted(memory, cache, area, to, interruption)
            })?,
            None => self.drain()?,
        }
        self.sink
            .lifecycle(self.state.thread, Lifecycle::SignalEntered(signal));
        let pad = self.space.cache.layout().landing_pad();
        let interrupted_at = signals::redirect_frame(&self.space.memory, regs.rsp, pad)?;
        // The rest of an interrupted block runs from its original code.
        let resume = interrupted.map_or(interrupted_at, |interruption| interruption.next);
        let saved = self.state.replay.suspend();
        self.state.frames.push(Frame {
            resume,
            saved,
            scratch,
        });
        self.enter(&mut regs)
    }

    /// Single-steps the thread, stopped for `signal`, to a safe point
    /// (`Cache::safe_point`). Signals that arrive on the way are held back
    /// and returned, to be queued again once `signal` is delivered; at
    /// another stop on the way all of them are queued again and its status
    /// is returned.
    fn step_to_safe_point(&mut self, signal: i32) -> Result<Reached> {
        let tid = self.state.thread.tid;
        let mut later = Vec::new();
        let mut rip = ptrace::regs(tid)?.rip;
        for _ in 0..MAX_STEPS_TO_SAFE_POINT {
            if self.space.cache.safe_point(rip) {
                return Ok(Reached::Safe { later });
            }
            ptrace::single_step(tid, 0)?;
            let status = ptrace::wait(tid)?;
            self.outcome.stops += 1;
            let stopped = libc::WIFSTOPPED(status) && status >> 16 == 0;
            match libc::WSTOPSIG(status) {
                libc::SIGTRAP if stopped => {}
                arrived if stopped => later.push(arrived),
                _ => {
                    later.push(signal);
                    self.queue_again(&later);
                    return Ok(Reached::Stopped(status));
                }
            }
            rip = ptrace::regs(tid)?.rip;
        }
        Err(Error::Unexpected(format!(
            "translate: no safe point to deliver signal {signal} at (from {rip:#x})"
        )))
    }

    /// Queues `signals` to the thread again (they come back at a later
    /// stop).
    fn queue_again(&self, signals: &[i32]) {
        let Thread { pid, tid } = self.state.thread;
        for &signal in signals {
            // SAFETY: tgkill takes no pointers; a thread gone since makes
            // it fail, and the signal goes with it.
            unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, signal) };
        }
    }

    /// The thread returned from a signal handler to the landing pad
    /// (`rt_sigreturn`): report it and resume where the signal interrupted.
    fn handler_returned(&mut self, regs: &mut Regs) -> Result<Next> {
        let frame = self.state.frames.pop().ok_or_else(|| {
            Error::Unexpected("translate: a handler return without a handler frame".into())
        })?;
        self.drain()?;
        let memory = &self.space.memory;
        self.state.area.restore_scratch(memory, &frame.scratch)?;
        self.sink
            .lifecycle(self.state.thread, Lifecycle::SignalReturned);
        self.state.replay.resume(frame.saved);
        regs.rip = frame.resume;
        if let Some(id) = self.space.cache.repeating_holding(frame.resume) {
            // Back inside a block that counts its runs: in a new record.
            self.state.area.open_record(memory, id, regs.rsp)?;
        }
        if self.space.cache.region_holding(frame.resume).is_none() {
            return self.enter(regs);
        }
        ptrace::set_regs(self.state.thread.tid, regs)?;
        Ok(Next::Resume(0))
    }

    /// Continues the thread, stopped with `regs`, at the original address
    /// `regs.rip`: in its translation, or stepping refused blocks until one
    /// that has one.
    pub fn enter(&mut self, regs: &mut Regs) -> Result<Next> {
        let tid = self.state.thread.tid;
        loop {
            let target = regs.rip;
            self.ensure_region(target, regs)?;
            if !self.space.cache.known(target) && !self.space.protection.covers(target) {
                self.protect(regs)?;
            }
            // Ahead in protected code only (code a thread can only reach
            // through the cache).
            let space = &mut *self.space;
            let (sink, thread) = (&mut *self.sink, self.state.thread);
            if let Some(entry) = space.cache.enter(
                &space.memory,
                target,
                AHEAD,
                &space.protection,
                &mut |addr| sink.place(thread, addr),
            )? {
                regs.rip = entry;
                ptrace::set_regs(tid, regs)?;
                return Ok(Next::Resume(0));
            }
            // Refused: step it from its original code, after the records
            // of the blocks before it (unless its code changed since).
            let space = &mut *self.space;
            if !space
                .cache
                .refusal_holds(&space.memory, target, &space.protection)
            {
                continue;
            }
            self.space.cache.check_runnable(target)?;
            self.drain()?;
            ptrace::set_regs(tid, regs)?;
            let block = self.space.cache.refused(target).cloned().flatten();
            self.outcome.stepped_blocks += 1;
            let span = block.as_ref().map_or((target, target + 1), |block| {
                (block.addr, block.last().next())
            });
            self.set_executable(regs, span, true)?;
            let tables = self.space.cache.layout().filter_tables();
            if let Some(filter) = self.space.cache.filter() {
                let shared = &self.space.cache.first_level;
                let caches = shared.take(&self.space.memory, tables, &filter)?;
                self.state.replay.first_level = Some(caches);
            }
            let replaying = Replaying {
                replay: &mut self.state.replay,
                sink: &mut *self.sink,
                thread: self.state.thread,
            };
            let stepped = step_block(
                replaying,
                &self.space.memory,
                block.as_ref(),
                regs,
                &mut self.outcome.steps,
                self.cpu,
                self.space.cache.refusals(),
            )?;
            if let Some(caches) = self.state.replay.first_level.take() {
                // The stepped block's fetches and accesses went through
                // them (`filter`).
                let shared = &self.space.cache.first_level;
                shared.give_back(caches, &self.space.memory, tables)?;
            }
            match stepped {
                Stepped::Left => self.set_executable(regs, span, false)?,
                Stepped::Stopped(status) => return Ok(Next::Again(status)),
                Stepped::Signalled(status) => {
                    self.set_executable(regs, span, false)?;
                    return Ok(Next::Again(status));
                }
            }
        }
    }

    /// Empties the process's first-level caches, when the run has them
    /// (in the tracee or in the tracer, `filter::SharedLevel`).
    fn empty_first_level(&mut self) -> Result<()> {
        let tables = self.space.cache.layout().filter_tables();
        if let Some(filter) = self.space.cache.filter() {
            let shared = &self.space.cache.first_level;
            shared.empty(&self.space.memory, tables, &filter)?;
        }
        Ok(())
    }

    /// Translation `id` found its original code changed at its entry
    /// (`regs`: the thread there, its registers as the program left
    /// them): its translation and those of the blocks sharing its bytes
    /// are dropped (unless another thread found it first), to be reused
    /// once the other threads left it (`Cache::retire`), and the thread
    /// enters the code as it is now.
    fn stale(&mut self, id: u32, regs: &mut Regs) -> Result<Next> {
        let (start, end) = self.space.cache.span(id).ok_or_else(|| {
            Error::Unexpected("translate: a stale trap without a translation".into())
        })?;
        if self.space.cache.alive(id) {
            let memory = &self.space.memory;
            self.outcome.invalidated += self.space.cache.invalidate(memory, start, end)? as u64;
            let cache = &mut self.space.cache;
            let others = std::mem::take(&mut self.others);
            let mut threads: Vec<i32> = others.iter().map(|other| other.tid).collect();
            let tid = self.state.thread.tid;
            if self
                .state
                .frames
                .iter()
                .any(|frame| cache.holds(id, frame.resume))
            {
                // One of its handlers returns there.
                threads.push(tid);
            }
            cache.retire(id, threads);
            // Where a thread blocks tells where it is, unless a handler
            // of it returns elsewhere.
            cache.seen_blocked(|thread| {
                let in_handler = thread == tid
                    || others
                        .iter()
                        .any(|other| other.tid == thread && other.in_handler);
                (!in_handler).then(|| ptrace::blocked_at(thread)).flatten()
            });
        }
        regs.rip = start;
        self.enter(regs)
    }

    /// Makes the protected original code in `span` executable (or not)
    /// through the stopped thread (`regs`: its registers).
    fn set_executable(&self, regs: &Regs, span: (u64, u64), executable: bool) -> Result<()> {
        let injector = Injector {
            tid: self.state.thread.tid,
            memory: &self.space.memory,
            regs,
            gadget: self.space.cache.layout().gadget(),
        };
        self.space
            .protection
            .set_executable(injector, span.0, span.1, executable)
    }

    /// Maps a region near `addr` when none can take its translations
    /// (`regs`: the stopped thread's registers, left as they are).
    fn ensure_region(&mut self, addr: u64, regs: &Regs) -> Result<()> {
        if self.space.cache.has_region_near(addr) {
            return Ok(());
        }
        let gadget = self.space.cache.layout().gadget();
        let tid = self.state.thread.tid;
        let layout = inject::map_region(tid, &self.space.memory, regs, Some(gadget), addr)?;
        self.space.cache.add_region(layout, &self.space.memory)?;
        self.outcome.regions += 1;
        Ok(())
    }

    /// Resumes the thread with `regs`, on its own CPUs (`placement`: beside
    /// the tracer), and replays the records `handed` of a full buffer half
    /// ([`hand_off`]) while it runs (the half it fills now grown first when
    /// its time has come, `Area::handed_off`): its filter records at once, its
    /// blocks' records, unless they go to a simulation ahead, a chunk at a
    /// time from the tracer's loop ([`Deferred`]).
    fn replay_handed_off(&mut self, regs: &Regs, handed: HandedOff) -> Result<()> {
        let tid = self.state.thread.tid;
        if let Some(half) = handed.filling {
            let gadget = self.space.cache.layout().gadget();
            let memory = &self.space.memory;
            self.state
                .area
                .handed_off(tid, memory, regs, gadget, half)?;
        }
        ptrace::set_regs(tid, regs)?;
        self.state.placement.own(tid);
        ptrace::cont(tid, 0)?;
        let to = Replaying {
            replay: &mut self.state.replay,
            sink: &mut *self.sink,
            thread: self.state.thread,
        };
        let area = self.state.area;
        let (memory, cache) = (&self.space.memory, &self.space.cache);
        replay_filter_records(memory, cache, &area, handed.filtered, to, None)?;
        // None is left here: the tracer replays a thread's deferred half
        // before it serves any stop of the thread.
        let deferrable = !self.state.replay.replays_ahead() && self.state.deferred.is_none();
        if deferrable && !handed.records.is_empty() {
            self.state.deferred = Some(Deferred::new(handed.records));
            self.outcome.drains += 1;
            return Ok(());
        }
        let to = Replaying {
            replay: &mut self.state.replay,
            sink: self.sink,
            thread: self.state.thread,
        };
        let (records, _) = replay_records(
            &self.space.memory,
            &self.space.cache,
            handed.records,
            &[],
            to,
            None,
        )?;
        self.outcome.drains += 1;
        self.outcome.records += records;
        Ok(())
    }

    /// Replays the thread's buffer into the sink.
    pub fn drain(&mut self) -> Result<()> {
        self.drain_split(None)
    }

    /// Replays the thread's buffer into the sink, calling `split` before
    /// the last instruction (see [`drain`]).
    pub fn drain_split(&mut self, split: Option<&mut dyn FnMut(&mut S)>) -> Result<()> {
        self.replay_buffer(|memory, cache, area, to| drain(memory, cache, area, to, split))
    }

    /// Replays the thread's buffer with `how` (`drain` or one of its
    /// kind), counting the drain and its records.
    fn replay_buffer(
        &mut self,
        how: impl FnOnce(&Memory, &Cache, &Area, Replaying<'_, S>) -> Result<u64>,
    ) -> Result<()> {
        let to = Replaying {
            replay: &mut self.state.replay,
            sink: &mut *self.sink,
            thread: self.state.thread,
        };
        let records = how(&self.space.memory, &self.space.cache, &self.state.area, to)?;
        self.outcome.drains += 1;
        self.outcome.records += records;
        Ok(())
    }
}
