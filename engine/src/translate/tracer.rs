//! The tracing loop of the translate backend: runs the tracee in its code
//! cache with `PTRACE_CONT` and serves its stops: an exit stub or a lookup
//! miss (translate the target and ahead of it, link the exit or fill the
//! table, go on), a watched system call (`invalidate`), a
//! full record buffer (drain, restart the block's prologue), a refused
//! block (drain, step it), the thread's exit (drain the rest).

use crate::error::{Error, Result};
use crate::event::{EventSink, Exit, Thread};

use super::buffer::{drain, Replay, Saved};
use super::cache::{Cache, Stub};
use super::capture::Capture;
use super::inject;
use super::invalidate;
use super::memory::Memory;
use super::protect::{Injector, Protection};
use super::signals::{self, Frame};
use super::stepper::{step_block, Stepped};
use super::Outcome;
use crate::cpuid::ValgrindCpu;
use crate::ptrace::{self, Regs};
use crate::step::RunOptions;

/// The state of one run.
pub(super) struct Tracer<'s, S: EventSink + ?Sized> {
    sink: &'s mut S,
    thread: Thread,
    memory: Memory,
    cache: Cache,
    replay: Replay,
    /// Signal handler frames the thread is in, innermost last.
    frames: Vec<Frame<Saved>>,
    /// The program's code made non-executable.
    protection: Protection,
    /// The processor `cpuid` describes, when not the host's.
    cpu: Option<ValgrindCpu>,
    outcome: Outcome,
}

/// Most blocks translated ahead per stop.
const AHEAD: usize = 32;

/// What to do after a stop.
enum Next {
    /// Resume the thread with this signal.
    Resume(i32),
    /// The thread is resumed already.
    Resumed,
    /// The process is gone.
    Done(Exit),
}

impl<'s, S: EventSink + ?Sized> Tracer<'s, S> {
    /// Sets up the code cache in process `pid`, stopped before its first
    /// instruction, for a run with `options`.
    pub fn new(sink: &'s mut S, pid: i32, options: &RunOptions) -> Result<Tracer<'s, S>> {
        let tracing = libc::PTRACE_O_EXITKILL
            | libc::PTRACE_O_TRACEEXEC
            | libc::PTRACE_O_TRACECLONE
            | libc::PTRACE_O_TRACEFORK
            | libc::PTRACE_O_TRACEVFORK
            | libc::PTRACE_O_TRACEEXIT;
        ptrace::set_options(pid, tracing)?;
        let memory = Memory::open(pid)?;
        let regs = ptrace::regs(pid)?;
        let layout = inject::map_region(pid, &memory, &regs, None, regs.rip)?;
        let cache = Cache::new(layout, &memory, Capture::new(options.simulations))?;
        Ok(Tracer {
            sink,
            thread: Thread { pid, tid: pid },
            memory,
            cache,
            replay: Replay::new(options),
            frames: Vec::new(),
            protection: Protection::default(),
            cpu: options
                .valgrind_machine
                .then(ValgrindCpu::for_host)
                .flatten(),
            outcome: Outcome {
                exit: Exit::Code(0),
                instructions: 0,
                stops: 1,
                translations: 0,
                stepped_blocks: 0,
                steps: 0,
                drains: 0,
                records: 0,
                regions: 1,
                faults: 0,
                protected: 0,
                invalidated: 0,
            },
        })
    }

    /// Runs the process to its end.
    pub fn run(mut self) -> Result<Outcome> {
        let tid = self.thread.tid;
        let mut regs = ptrace::regs(tid)?;
        if let Next::Resume(signal) = self.enter(&mut regs)? {
            ptrace::cont(tid, signal)?;
        }
        loop {
            let status = ptrace::wait(tid)?;
            self.outcome.stops += 1;
            match self.handle(status)? {
                Next::Resume(signal) => ptrace::cont(tid, signal)?,
                Next::Resumed => {}
                Next::Done(exit) => {
                    self.outcome.exit = exit;
                    self.outcome.instructions = self.replay.instructions;
                    self.outcome.translations = self.cache.translations() as u64;
                    return Ok(self.outcome);
                }
            }
        }
    }

    fn handle(&mut self, status: i32) -> Result<Next> {
        if libc::WIFEXITED(status) {
            return Ok(self.gone(Exit::Code(libc::WEXITSTATUS(status))));
        }
        if libc::WIFSIGNALED(status) {
            return Ok(self.gone(Exit::Signal {
                signal: libc::WTERMSIG(status),
                core_dumped: libc::WCOREDUMP(status),
            }));
        }
        if !libc::WIFSTOPPED(status) {
            return Err(Error::Unexpected(format!("wait status {status:#x}")));
        }
        let signal = libc::WSTOPSIG(status);
        match status >> 16 {
            0 => {}
            libc::PTRACE_EVENT_EXIT => {
                self.drain()?;
                return Ok(Next::Resume(0));
            }
            event => {
                return Err(Error::Unexpected(format!(
                    "translate: ptrace event {event} (threads, fork and exec are not supported yet)"
                )))
            }
        }
        let tid = self.thread.tid;
        let Some(info) = ptrace::signal_info(tid)? else {
            // A group-stop.
            return Ok(Next::Resume(0));
        };
        let mut regs = ptrace::regs(tid)?;
        let layout = *self.cache.layout();
        if signal == libc::SIGTRAP {
            let stub = regs.rip.wrapping_sub(1);
            match self.cache.stub(stub) {
                Some(Stub::Miss { region }) => {
                    let slot = self.cache.region(region).map(|r| r.target());
                    let slot = slot.ok_or_else(|| {
                        Error::Unexpected("translate: a miss of an unknown region".into())
                    })?;
                    let target = self.memory.read_u64(slot)?;
                    regs.rip = target;
                    return self.enter(&mut regs);
                }
                Some(Stub::Exit { id, exit }) => {
                    let target = self.cache.exit_target(id, exit).ok_or_else(|| {
                        Error::Unexpected("translate: an exit stub without a target".into())
                    })?;
                    if let Some(entry) = self.cache.get_or_translate(&self.memory, target)? {
                        self.cache.link(&self.memory, id, exit, entry)?;
                        self.translate_ahead(target)?;
                    }
                    regs.rip = target;
                    return self.enter(&mut regs);
                }
                Some(Stub::Syscall { id }) => return self.watched_syscall(id, regs),
                None if stub == layout.landing_pad() => return self.handler_returned(&mut regs),
                None => {}
            }
        }
        if signal == libc::SIGSEGV && info.addr == regs.rip && self.protection.covers(regs.rip) {
            // An escape to original code: go to its translation.
            self.outcome.faults += 1;
            return self.enter(&mut regs);
        }
        if signal == libc::SIGSEGV
            && (layout.guard()..layout.guard() + super::layout::PAGE).contains(&info.addr)
        {
            // The record buffer is full: drain it and restart the prologue.
            let entry = self.cache.entry_holding(regs.rip).ok_or_else(|| {
                Error::Unexpected("translate: a buffer fault outside the code cache".into())
            })?;
            self.drain()?;
            let save_rax = self
                .cache
                .region_holding(regs.rip)
                .map_or(layout.save_rax(), |region| region.save_rax());
            regs.rax = self.memory.read_u64(save_rax)?;
            regs.rip = entry;
            ptrace::set_regs(tid, &regs)?;
            return Ok(Next::Resume(0));
        }
        // A signal for the program.
        if signals::caught(self.thread.pid, signal) {
            return self.deliver(signal);
        }
        Ok(Next::Resume(signal))
    }

    /// Translation `id` is about to make a system call that may change
    /// code mappings (`invalidate`): runs it from the gadget with a single
    /// step, drops the translations of what it changed, protects the
    /// executable mappings it made, and resumes after the `syscall`.
    fn watched_syscall(&mut self, id: u32, call: Regs) -> Result<Next> {
        let tid = self.thread.tid;
        let (slot, next) = self.cache.after_syscall(id).ok_or_else(|| {
            Error::Unexpected("translate: a system call trap without a continuation".into())
        })?;
        let mut regs = call;
        regs.rip = self.cache.layout().gadget();
        ptrace::set_regs(tid, &regs)?;
        ptrace::single_step(tid, 0)?;
        let status = ptrace::wait(tid)?;
        self.outcome.stops += 1;
        if !(libc::WIFSTOPPED(status)
            && libc::WSTOPSIG(status) == libc::SIGTRAP
            && status >> 16 == 0)
        {
            return Err(Error::Unexpected(format!(
                "translate: a watched system call stopped with status {status:#x}"
            )));
        }
        let mut regs = ptrace::regs(tid)?;
        regs.rcx = next;
        regs.rip = slot;
        ptrace::set_regs(tid, &regs)?;
        let mut remapped = false;
        for range in invalidate::affected(&call, regs.rax) {
            self.outcome.invalidated +=
                self.cache
                    .invalidate(&self.memory, range.start, range.end)? as u64;
            if range.remapped {
                self.protection.forget(range.start, range.end);
                remapped = true;
            }
        }
        if remapped {
            let injector = Injector {
                tid,
                memory: &self.memory,
                regs: &regs,
                gadget: self.cache.layout().gadget(),
            };
            let protected =
                self.protection
                    .scan(self.thread.pid, injector, self.cache.regions())?;
            self.outcome.protected += protected as u64;
        }
        Ok(Next::Resume(0))
    }

    /// Delivers `signal`, which the program catches, stopping at its
    /// handler's entry (see `signals`).
    fn deliver(&mut self, signal: i32) -> Result<Next> {
        let tid = self.thread.tid;
        self.drain()?;
        ptrace::single_step(tid, signal)?;
        let status = ptrace::wait(tid)?;
        self.outcome.stops += 1;
        if !(libc::WIFSTOPPED(status)
            && libc::WSTOPSIG(status) == libc::SIGTRAP
            && status >> 16 == 0)
        {
            return self.handle(status);
        }
        let mut regs = ptrace::regs(tid)?;
        if self.cache.region_holding(regs.rip).is_some() {
            // No handler frame (the step ran code of the cache).
            return Ok(Next::Resume(0));
        }
        self.sink.signal_handler_entered(self.thread, signal);
        let pad = self.cache.layout().landing_pad();
        let resume = signals::redirect_frame(&self.memory, regs.rsp, pad)?;
        let saved = self.replay.suspend();
        self.frames.push(Frame { resume, saved });
        self.enter(&mut regs)
    }

    /// The thread returned from a signal handler to the landing pad
    /// (`rt_sigreturn`): report it and resume where the signal interrupted.
    fn handler_returned(&mut self, regs: &mut Regs) -> Result<Next> {
        let frame = self.frames.pop().ok_or_else(|| {
            Error::Unexpected("translate: a handler return without a handler frame".into())
        })?;
        self.drain()?;
        self.sink.signal_handler_returned(self.thread);
        self.replay.resume(frame.saved);
        regs.rip = frame.resume;
        if self.cache.region_holding(frame.resume).is_none() {
            return self.enter(regs);
        }
        ptrace::set_regs(self.thread.tid, regs)?;
        Ok(Next::Resume(0))
    }

    /// Continues the thread, stopped with `regs`, at the original address
    /// `regs.rip`: in its translation, or stepping refused blocks until one
    /// that has one.
    fn enter(&mut self, regs: &mut Regs) -> Result<Next> {
        let tid = self.thread.tid;
        loop {
            let target = regs.rip;
            self.ensure_region(target, regs)?;
            if !self.cache.known(target) && !self.protection.covers(target) {
                let injector = Injector {
                    tid,
                    memory: &self.memory,
                    regs,
                    gadget: self.cache.layout().gadget(),
                };
                let protected =
                    self.protection
                        .scan(self.thread.pid, injector, self.cache.regions())?;
                self.outcome.protected += protected as u64;
            }
            if let Some(entry) = self.cache.get_or_translate(&self.memory, target)? {
                self.cache.enter_indirect(&self.memory, target, entry)?;
                self.translate_ahead(target)?;
                regs.rip = entry;
                ptrace::set_regs(tid, regs)?;
                return Ok(Next::Resume(0));
            }
            // Refused: step it from its original code, after the records
            // of the blocks before it.
            self.drain()?;
            ptrace::set_regs(tid, regs)?;
            let block = self.cache.refused(target).cloned().flatten();
            self.outcome.stepped_blocks += 1;
            let span = block.as_ref().map_or((target, target + 1), |block| {
                (block.addr, block.last().next())
            });
            self.set_executable(regs, span, true)?;
            let stepped = step_block(
                self.sink,
                self.thread,
                &self.memory,
                &mut self.replay,
                block.as_ref(),
                regs,
                &mut self.outcome.steps,
                self.cpu,
            )?;
            if let Stepped::Left = stepped {
                self.set_executable(regs, span, false)?;
            }
            match stepped {
                Stepped::Left => {}
                Stepped::Exiting => {
                    ptrace::cont(tid, 0)?;
                    return Ok(Next::Resumed);
                }
            }
        }
    }

    /// Makes the protected original code in `span` executable (or not)
    /// through the stopped thread (`regs`: its registers).
    fn set_executable(&self, regs: &Regs, span: (u64, u64), executable: bool) -> Result<()> {
        let injector = Injector {
            tid: self.thread.tid,
            memory: &self.memory,
            regs,
            gadget: self.cache.layout().gadget(),
        };
        self.protection
            .set_executable(injector, span.0, span.1, executable)
    }

    /// Translates ahead of the translation of `from` along its direct
    /// edges ([`Cache::translate_ahead`]), in protected code only (code
    /// the thread can only reach through the cache).
    fn translate_ahead(&mut self, from: u64) -> Result<()> {
        let protection = &self.protection;
        let allowed = |addr: u64| protection.covers(addr);
        self.cache
            .translate_ahead(&self.memory, from, AHEAD, &allowed)?;
        Ok(())
    }

    /// Maps a region near `addr` when none can take its translations
    /// (`regs`: the stopped thread's registers, left as they are).
    fn ensure_region(&mut self, addr: u64, regs: &Regs) -> Result<()> {
        if self.cache.has_region_near(addr) {
            return Ok(());
        }
        let gadget = self.cache.layout().gadget();
        let layout = inject::map_region(self.thread.tid, &self.memory, regs, Some(gadget), addr)?;
        self.cache.add_region(layout, &self.memory)?;
        self.outcome.regions += 1;
        Ok(())
    }

    /// Replays the buffer into the sink.
    fn drain(&mut self) -> Result<()> {
        let records = drain(
            &self.memory,
            &self.cache,
            &mut self.replay,
            self.sink,
            self.thread,
        )?;
        self.outcome.drains += 1;
        self.outcome.records += records;
        Ok(())
    }

    /// The process ended with `exit`.
    fn gone(&mut self, exit: Exit) -> Next {
        self.sink.thread_exited(self.thread);
        self.sink.process_exited(self.thread.pid, exit);
        Next::Done(exit)
    }
}
