//! The tracing loop of the translate backend: waits for any traced thread
//! to stop and serves the stop (`stops`) or the event: a new thread (its
//! own data area, see `area`), a forked or vforked process (profiled on
//! its own, as the step backend does), an `execve` (a new code cache, or
//! the process detached), a thread's exit (its records replayed). Each
//! thread is resumed on its own: the others run meanwhile.
//!
//! Event order: each thread's records are replayed in the order it
//! executed them, when that thread stops (its buffer full, a block to
//! translate or step, a signal, its exit...), so the threads' events
//! interleave at those stops, not instruction by instruction. A full half
//! whose records do not go to a simulation ahead is replayed a chunk at a
//! time, with other threads' translation stops served between chunks
//! (`deferred`).

use std::collections::{HashMap, HashSet, VecDeque};

use crate::auxv;
use crate::cpuid::ValgrindCpu;
use crate::error::{Error, Result};
use crate::event::{EventSink, Exit, Lifecycle, Thread};
use crate::jobs::Jobs;
use crate::ptrace::{self, Regs};
use crate::refusals::Refusals;
use crate::step::RunOptions;

use super::area::Area;
use super::buffer::{Replay, Replaying};
use super::cache::Stub;
use super::capture::Capture;
use super::placement::{Pinned, Place, Placement};
use super::space::Space;
use super::stops::{Next, Other, Stopped, ThreadState};
use super::Outcome;

/// `clone` and `clone3`, and the flag of a child sharing the memory.
const SYS_CLONE: u64 = 56;
const SYS_CLONE3: u64 = 435;
const CLONE_VM: u64 = 0x100;

/// The state of one run.
pub(super) struct Tracer<'s, S: EventSink + ?Sized> {
    sink: &'s mut S,
    options: RunOptions,
    /// The processor `cpuid` describes, when not the host's.
    cpu: Option<ValgrindCpu>,
    /// What translations record.
    capture: Capture,
    /// Address spaces by key.
    spaces: HashMap<u32, Space>,
    /// The next space key.
    next_space: u32,
    /// Threads by thread id.
    threads: HashMap<i32, ThreadState>,
    /// New threads that stopped before their creator's event stop.
    early_stops: HashSet<i32>,
    /// The process the run started.
    initial: i32,
    /// How it ended, once it has.
    initial_exit: Option<Exit>,
    /// Job control (group-stops).
    jobs: Jobs,
    /// The processor the tracer runs on (`placement`), if known.
    tracer_cpu: Option<usize>,
    /// The thread that runs on it.
    pinned: Pinned,
    /// The threads with a half not all replayed (`deferred`), oldest first.
    deferring: VecDeque<i32>,
    outcome: Outcome,
}

impl<'s, S: EventSink + ?Sized> Tracer<'s, S> {
    /// A tracer for process `pid`, stopped before its first instruction,
    /// for a run with `options`.
    pub fn new(sink: &'s mut S, pid: i32, options: &RunOptions) -> Result<Tracer<'s, S>> {
        let tracing = libc::PTRACE_O_EXITKILL
            | libc::PTRACE_O_TRACEEXEC
            | libc::PTRACE_O_TRACECLONE
            | libc::PTRACE_O_TRACEFORK
            | libc::PTRACE_O_TRACEVFORK
            | libc::PTRACE_O_TRACEEXIT;
        ptrace::set_options(pid, tracing)?;
        Ok(Tracer {
            sink,
            options: options.clone(),
            cpu: options
                .valgrind_machine
                .then(ValgrindCpu::for_host)
                .flatten(),
            capture: Capture::new(
                options.simulations,
                options.counts_only,
                options.quiet_runs,
                options.system_calls,
                options.filter,
            ),
            spaces: HashMap::new(),
            next_space: 0,
            threads: HashMap::new(),
            early_stops: HashSet::new(),
            initial: pid,
            initial_exit: None,
            jobs: Jobs::new(options, pid),
            tracer_cpu: crate::launch::current_cpu(),
            pinned: Pinned::default(),
            deferring: VecDeque::new(),
            outcome: Outcome {
                exit: Exit::Code(0),
                instructions: 0,
                stops: 1,
                translations: 0,
                stepped_blocks: 0,
                steps: 0,
                drains: 0,
                records: 0,
                regions: 0,
                areas: 0,
                faults: 0,
                protected: 0,
                invalidated: 0,
            },
        })
    }

    /// Runs until the initial process has exited and no traced thread is
    /// left.
    pub fn run(mut self) -> Result<Outcome> {
        let pid = self.initial;
        let started = self.start_program(pid);
        let mut killed = ptrace::unless_killed(pid, started)?;
        loop {
            if let Some(exit) = self.initial_exit {
                if self.threads.is_empty() {
                    self.outcome.exit = exit;
                    return Ok(self.outcome);
                }
            }
            let stop = match self.deferring.front() {
                Some(&deferring) => match ptrace::poll_any()? {
                    Some(stop) => Some(stop),
                    None => {
                        // No stop to serve: the next chunk.
                        let replayed = self.replay_deferred(deferring, false);
                        killed |= ptrace::unless_killed(deferring, replayed)?;
                        continue;
                    }
                },
                None => ptrace::wait_any()?,
            };
            let Some((tid, status)) = stop else {
                self.outcome.exit = ptrace::vanished(killed)?;
                return Ok(self.outcome);
            };
            self.outcome.stops += 1;
            killed |= self.before_stop(tid, status)?;
            let served = self
                .handle(tid, status)
                .and_then(|next| self.apply(tid, next));
            killed |= ptrace::unless_killed(tid, served)?;
            if self
                .threads
                .get(&tid)
                .is_some_and(|state| state.deferred.is_some())
                && !self.deferring.contains(&tid)
            {
                self.deferring.push_back(tid);
            }
        }
    }

    /// Replays what comes before serving `tid`'s stop `status`: the half
    /// it deferred, and those of all threads unless the stop is one for a
    /// translation (see `deferred`). Whether a thread was killed meanwhile.
    fn before_stop(&mut self, tid: i32, status: i32) -> Result<bool> {
        let mut killed = false;
        if self.deferring.contains(&tid) {
            killed |= ptrace::unless_killed(tid, self.replay_deferred(tid, true))?;
        }
        if !self.deferring.is_empty() && !self.translation_stop(tid, status) {
            while let Some(&deferring) = self.deferring.front() {
                let replayed = self.replay_deferred(deferring, true);
                killed |= ptrace::unless_killed(deferring, replayed)?;
            }
        }
        Ok(killed)
    }

    /// Whether `status` is a stop of `tid` for a translation
    /// ([`serves_without_records`]).
    fn translation_stop(&self, tid: i32, status: i32) -> bool {
        let Some(state) = self.threads.get(&tid).filter(|_| trapped(status)) else {
            return false;
        };
        let Some(space) = self.spaces.get(&state.space) else {
            return false;
        };
        if state.awaiting_start || state.exec_resume.is_some() {
            return false;
        }
        let Ok(regs) = ptrace::regs(tid) else {
            return false;
        };
        serves_without_records(status, space.cache.stub(regs.rip.wrapping_sub(1)))
    }

    /// Replays the next chunk of the half `tid` deferred, or all of it
    /// (`whole`); forgets the half once replayed, when replaying it
    /// failed, or when the thread is gone.
    fn replay_deferred(&mut self, tid: i32, whole: bool) -> Result<()> {
        let Tracer {
            threads,
            spaces,
            sink,
            deferring,
            outcome,
            ..
        } = self;
        loop {
            let state = threads.get_mut(&tid);
            let space = state.as_ref().and_then(|state| spaces.get(&state.space));
            let (Some(state), Some(space)) = (state, space) else {
                deferring.retain(|&other| other != tid);
                return Ok(());
            };
            let Some(deferred) = state.deferred.as_mut() else {
                deferring.retain(|&other| other != tid);
                return Ok(());
            };
            let to = Replaying {
                replay: &mut state.replay,
                sink: &mut **sink,
                thread: state.thread,
            };
            let replayed = deferred.replay_chunk(&space.memory, &space.cache, to);
            if replayed.is_err() || deferred.done() {
                outcome.records += deferred.replayed();
                state.deferred = None;
                deferring.retain(|&other| other != tid);
                return replayed;
            }
            if !whole {
                return Ok(());
            }
        }
    }

    /// Sets up the initial process `pid`, stopped at its first
    /// instruction, and resumes it in its code cache.
    fn start_program(&mut self, pid: i32) -> Result<()> {
        let thread = Thread { pid, tid: pid };
        // First: killed while its code cache is set up, it still leaves a
        // profile.
        self.sink.lifecycle(thread, Lifecycle::ThreadStarted);
        let mut regs = ptrace::regs(pid)?;
        let (space, area) = self.new_program(pid, &mut regs)?;
        self.threads.insert(
            pid,
            self.thread_state(thread, space, area, Placement::of(pid)),
        );
        let next = self.stopped(pid, |stopped| stopped.enter(&mut regs))?;
        self.apply(pid, next)
    }

    /// Carries out `next` for `tid`, serving the stops it leads to.
    fn apply(&mut self, tid: i32, mut next: Option<Next>) -> Result<()> {
        while let Some(step) = next {
            next = match step {
                Next::Resume(signal) => {
                    self.run_with_tracer(tid);
                    ptrace::cont(tid, signal)?;
                    None
                }
                Next::Resumed => None,
                Next::Again(status) => self.handle(tid, status)?,
            };
        }
        Ok(())
    }

    /// Puts `tid`, about to be resumed for the tracer to wait for it, on
    /// the tracer's processor, and the thread that was there on its own
    /// set (`placement`).
    fn run_with_tracer(&mut self, tid: i32) {
        if let Some(before) = self.pinned.resume(tid) {
            self.run_on_own(before);
        }
        if let Some(state) = self.threads.get_mut(&tid) {
            state.placement.put(tid, Place::WithTracer, self.tracer_cpu);
        }
    }

    /// Puts thread `tid` on its own set.
    fn run_on_own(&mut self, tid: i32) {
        if let Some(state) = self.threads.get_mut(&tid) {
            state.placement.own(tid);
        }
    }

    /// Serves wait status `status` of `tid`; `None` when the thread is
    /// gone or waits for something else.
    fn handle(&mut self, tid: i32, status: i32) -> Result<Option<Next>> {
        if let Some(pinned) = self.pinned.stop(tid) {
            self.run_on_own(pinned);
        }
        if libc::WIFEXITED(status) {
            self.thread_gone(tid, Exit::Code(libc::WEXITSTATUS(status)));
            return Ok(None);
        }
        if libc::WIFSIGNALED(status) {
            let exit = Exit::Signal {
                signal: libc::WTERMSIG(status),
                core_dumped: libc::WCOREDUMP(status),
            };
            self.thread_gone(tid, exit);
            return Ok(None);
        }
        if !libc::WIFSTOPPED(status) {
            return Err(Error::Unexpected(format!("wait status {status:#x}")));
        }
        let signal = libc::WSTOPSIG(status);
        let event = status >> 16;
        let Some(state) = self.threads.get_mut(&tid) else {
            if event == libc::PTRACE_EVENT_EXIT {
                // A thread never set up (killed while it was): it ends.
                return Ok(Some(Next::Resume(0)));
            }
            // A new thread or process stopped before its creator's event
            // stop.
            self.early_stops.insert(tid);
            return Ok(None);
        };
        if state.awaiting_start && event == libc::PTRACE_EVENT_STOP {
            state.awaiting_start = false;
            return self.start(tid).map(Some);
        }
        if event == libc::PTRACE_EVENT_STOP {
            let pid = state.thread.pid;
            let go = self.jobs.event_stop(tid, pid, signal)?;
            return Ok(go.then_some(Next::Resume(0)));
        }
        match event {
            0 => self
                .stopped(tid, |stopped| stopped.signal_stop(signal))
                .map(|next| next.or(Some(Next::Resume(0)))),
            libc::PTRACE_EVENT_EXIT => self.exiting(tid).map(Some),
            libc::PTRACE_EVENT_CLONE | libc::PTRACE_EVENT_FORK | libc::PTRACE_EVENT_VFORK => {
                self.created(tid, event).map(Some)
            }
            libc::PTRACE_EVENT_EXEC => self.executed(tid),
            _ => Ok(Some(Next::Resume(0))),
        }
    }

    /// Serves `tid`'s stop with `serve`; `None` when the thread is not
    /// known.
    fn stopped(
        &mut self,
        tid: i32,
        serve: impl FnOnce(&mut Stopped<'_, S>) -> Result<Next>,
    ) -> Result<Option<Next>> {
        let Some(space_key) = self.threads.get(&tid).map(|state| state.space) else {
            return Ok(None);
        };
        let others = self
            .threads
            .iter()
            .filter(|(&other, state)| other != tid && state.space == space_key)
            .map(|(&other, state)| Other {
                tid: other,
                in_handler: !state.frames.is_empty(),
            })
            .collect();
        let Some(state) = self.threads.get_mut(&tid) else {
            return Ok(None);
        };
        let space = self.spaces.get_mut(&state.space).ok_or_else(|| {
            Error::Unexpected("translate: a thread without an address space".into())
        })?;
        let mut stopped = Stopped {
            sink: &mut *self.sink,
            space,
            state,
            outcome: &mut self.outcome,
            cpu: self.cpu.as_ref(),
            others,
        };
        serve(&mut stopped).map(Some)
    }

    /// The state of a new thread `thread` in space `space` with data area
    /// `area` and processors `placement`, before its first block.
    fn thread_state(
        &self,
        thread: Thread,
        space: u32,
        area: Area,
        placement: Placement,
    ) -> ThreadState {
        ThreadState {
            thread,
            space,
            area,
            replay: Replay::new(&self.options),
            frames: Vec::new(),
            awaiting_start: false,
            own_area: true,
            exec_resume: None,
            exec_name: None,
            exec_timing: None,
            exit_reported: false,
            placement,
            deferred: None,
        }
    }

    /// Sets up a code cache and a data area in the program `tid` runs,
    /// stopped with `regs` at its first instruction; returns the new
    /// space's key and the area.
    fn new_program(&mut self, tid: i32, regs: &mut Regs) -> Result<(u32, Area)> {
        if self.options.valgrind_machine {
            auxv::hide_vdso(tid, regs.rsp)?;
        }
        // A `cpuid` traps when the tracer answers it (see `crate::cpuid`).
        let refusals = Refusals::new(self.options.valgrind_machine);
        let space = Space::new(tid, regs, self.capture, self.cpu.is_some(), refusals)?;
        let layout = *space.cache.layout();
        let area = Area::map(
            tid,
            &space.memory,
            regs,
            &layout,
            self.capture.buffer_half(),
            self.capture.filter_records(),
        )?;
        area.attach(tid, regs)?;
        self.outcome.areas += 1;
        let key = self.next_space;
        self.next_space += 1;
        self.spaces.insert(key, space);
        self.outcome.regions += 1;
        Ok((key, area))
    }

    /// Thread `state` left its space (it ended or called `execve`): counts
    /// what it replayed and gives its data area back to the space, for the
    /// next new thread.
    fn retire(&mut self, state: &ThreadState) {
        self.outcome.instructions += state.replay.instructions;
        if state.own_area {
            if let Some(space) = self.spaces.get_mut(&state.space) {
                space.free_areas.push(state.area);
            }
        }
    }

    /// Drops the spaces no thread uses any more.
    fn drop_unused_spaces(&mut self) {
        let used: HashSet<u32> = self.threads.values().map(|state| state.space).collect();
        let unused: Vec<u32> = self
            .spaces
            .keys()
            .copied()
            .filter(|key| !used.contains(key))
            .collect();
        for key in unused {
            if let Some(space) = self.spaces.remove(&key) {
                self.outcome.translations += space.cache.translations() as u64;
                release(space);
            }
        }
    }

    /// New thread `tid` stopped for its start: a thread (or a vforked
    /// process) gets its data area, one a thread that left the space gave
    /// back or a new one (a forked process has its own already), and runs
    /// (it is in the code cache, after the system call that created it).
    fn start(&mut self, tid: i32) -> Result<Next> {
        let Some(state) = self.threads.get_mut(&tid) else {
            return Ok(Next::Resume(0));
        };
        if !state.own_area {
            let space = self.spaces.get_mut(&state.space).ok_or_else(|| {
                Error::Unexpected("translate: a thread without an address space".into())
            })?;
            let mut regs = ptrace::regs(tid)?;
            state.area = match space.free_areas.pop() {
                Some(area) => {
                    area.reset_all(&space.memory)?;
                    area.clear_counts(&space.memory, space.cache.translations())?;
                    area
                }
                None => {
                    self.outcome.areas += 1;
                    Area::map(
                        tid,
                        &space.memory,
                        &regs,
                        space.cache.layout(),
                        self.capture.buffer_half(),
                        self.capture.filter_records(),
                    )?
                }
            };
            state.area.attach(tid, &mut regs)?;
            state.own_area = true;
        }
        Ok(Next::Resume(0))
    }

    /// Thread `tid` is exiting (an exit event stop, which the kernel makes
    /// also for the threads an `exit_group`, a fatal signal or an `execve`
    /// ends): its records are replayed.
    fn exiting(&mut self, tid: i32) -> Result<Next> {
        let starting = self
            .threads
            .get(&tid)
            .is_none_or(|state| state.awaiting_start);
        if !starting {
            self.stopped(tid, |stopped| stopped.drain().map(|()| Next::Resumed))?;
            // A thread other than the leader ends here: report it now, not
            // when it is reaped, which may come after another thread went
            // on (a fork after the join must not see it alive).
            if let Some(state) = self.threads.get_mut(&tid) {
                if state.thread.tid != state.thread.pid && !state.exit_reported {
                    state.exit_reported = true;
                    self.sink.lifecycle(state.thread, Lifecycle::ThreadExited);
                }
            }
        }
        Ok(Next::Resume(0))
    }

    /// `tid` created a thread or a process (a clone, fork or vfork event
    /// stop; its records are replayed first). A new thread gets its own
    /// data area when it stops for its start. A forked process gets a copy
    /// of the space (its memory is one) and keeps the area its copy holds,
    /// emptied; a vforked one uses its parent's space (the parent waits
    /// meanwhile) until it calls `execve` or exits, with an area of its own
    /// there, as a new thread. `forked` is
    /// reported before the system call completes in the parent, as the step
    /// backend does.
    fn created(&mut self, tid: i32, event: i32) -> Result<Next> {
        let child = i32::try_from(ptrace::event_message(tid)?)
            .map_err(|_| Error::Unexpected("a new thread id out of range".into()))?;
        let Some(parent) = self.threads.get(&tid) else {
            return Ok(Next::Resume(0));
        };
        let (parent_thread, parent_space, parent_area) = (parent.thread, parent.space, parent.area);
        let frames = parent.frames.clone();
        // It inherited the CPUs its creator has now.
        let placement = parent.placement.clone();
        let space = self.spaces.get(&parent_space).ok_or_else(|| {
            Error::Unexpected("translate: a thread without an address space".into())
        })?;
        let is_thread = event == libc::PTRACE_EVENT_CLONE
            && ptrace::thread_group(child).unwrap_or(parent_thread.pid) == parent_thread.pid;
        let mut state = if is_thread {
            let thread = Thread {
                pid: parent_thread.pid,
                tid: child,
            };
            // The creator's events first (a sink numbering threads as they
            // appear numbers them in creation order).
            self.stopped(tid, |stopped| stopped.drain().map(|()| Next::Resumed))?;
            if let Some(space) = self.spaces.get(&parent_space) {
                if let Some(filter) = space.cache.filter() {
                    // From the second thread on, the tracer keeps the
                    // first-level caches (`filter::SharedLevel`).
                    let tables = space.cache.layout().filter_tables();
                    space
                        .cache
                        .first_level
                        .share(&space.memory, tables, &filter)?;
                }
            }
            self.sink.lifecycle(thread, Lifecycle::ThreadStarted);
            // Its own area is mapped when it stops for its start.
            let mut state = self.thread_state(thread, parent_space, parent_area, placement);
            state.own_area = false;
            state
        } else {
            if event == libc::PTRACE_EVENT_CLONE && shares_memory(tid, &space.memory)? {
                return Err(Error::Unexpected(
                    "translate: a process sharing its parent's memory without vfork \
                     (clone with CLONE_VM) is not supported"
                        .into(),
                ));
            }
            let sink_child = |sink: &mut S| sink.lifecycle(parent_thread, Lifecycle::Forked(child));
            let mut report = sink_child;
            self.stopped(tid, |stopped| {
                stopped
                    .drain_split(Some(&mut report))
                    .map(|()| Next::Resumed)
            })?;
            let space_key = if event == libc::PTRACE_EVENT_VFORK {
                parent_space
            } else {
                let space = self.spaces.get(&parent_space).ok_or_else(|| {
                    Error::Unexpected("translate: a thread without an address space".into())
                })?;
                let threads = self
                    .threads
                    .values()
                    .filter(|state| state.space == parent_space)
                    .count();
                let copy = space.fork(child, threads > 1)?;
                // The parent's records and run counts so far are its own.
                parent_area.reset_all(&copy.memory)?;
                parent_area.clear_counts(&copy.memory, copy.cache.translations())?;
                let key = self.next_space;
                self.next_space += 1;
                self.spaces.insert(key, copy);
                key
            };
            let thread = Thread {
                pid: child,
                tid: child,
            };
            let mut state = self.thread_state(thread, space_key, parent_area, placement);
            // A vforked child gets its own area at its start (its copy of
            // the parent's is the parent's).
            state.own_area = event != libc::PTRACE_EVENT_VFORK;
            state.frames = frames;
            state
        };
        let stopped_already = self.early_stops.remove(&child);
        state.awaiting_start = !stopped_already;
        self.threads.insert(child, state);
        if stopped_already {
            let next = self.start(child)?;
            self.apply(child, Some(next))?;
        }
        Ok(Next::Resume(0))
    }

    /// `tid` completed an `execve` (an exec event stop; its records were
    /// replayed before the call): with `trace_children` the new program
    /// gets a code cache and a data area and is traced on, else the
    /// process is detached.
    fn executed(&mut self, tid: i32) -> Result<Option<Next>> {
        let former = i32::try_from(ptrace::event_message(tid)?).unwrap_or(tid);
        if former != tid {
            // A non-leader thread exec'd: it takes over the leader's id.
            if let Some(leader) = self.threads.remove(&tid) {
                self.retire(&leader);
                self.sink.lifecycle(leader.thread, Lifecycle::ThreadExited);
            }
            if let Some(mut state) = self.threads.remove(&former) {
                state.thread.tid = tid;
                self.threads.insert(tid, state);
            }
        }
        let Some(state) = self.threads.get(&tid) else {
            return Ok(Some(Next::Resume(0)));
        };
        let pid = state.thread.pid;
        let program = crate::launch::program_of(tid);
        let name = self
            .threads
            .get_mut(&tid)
            .and_then(|state| state.exec_name.take());
        let name = name.unwrap_or_else(|| program.display().to_string());
        let args = crate::launch::arguments_of(tid);
        let traced = self.options.traces_child(&name, &args);
        if !traced {
            self.sink.lifecycle(
                Thread::of_process(pid),
                Lifecycle::Exec {
                    program: &program,
                    name: &name,
                    args: &args,
                    traced: false,
                },
            );
            self.run_on_own(tid);
            ptrace::detach(tid)?;
            let gone: Vec<i32> = self
                .threads
                .values()
                .filter(|state| state.thread.pid == pid)
                .map(|state| state.thread.tid)
                .collect();
            for gone in gone {
                if let Some(state) = self.threads.remove(&gone) {
                    self.retire(&state);
                }
            }
            self.drop_unused_spaces();
            return Ok(None);
        }
        self.sink.lifecycle(
            Thread::of_process(pid),
            Lifecycle::Exec {
                program: &program,
                name: &name,
                args: &args,
                traced: true,
            },
        );
        crate::symbols::prefetch_needed(&program);
        let memory = super::memory::Memory::open(tid)?;
        let mut regs = crate::resume::leave_syscall(tid, memory.file())?;
        let (space, area) = self.new_program(tid, &mut regs)?;
        let thread = Thread { pid, tid };
        // The kernel keeps the thread's processors across `execve`.
        let placement = self
            .threads
            .get(&tid)
            .map_or_else(|| Placement::of(tid), |old| old.placement.clone());
        let fresh = self.thread_state(thread, space, area, placement);
        if let Some(old) = self.threads.insert(tid, fresh) {
            self.retire(&old);
        }
        self.drop_unused_spaces();
        self.stopped(tid, |stopped| stopped.enter(&mut regs))
    }

    /// Thread `tid` ended with `exit`.
    fn thread_gone(&mut self, tid: i32, exit: Exit) {
        self.early_stops.remove(&tid);
        let Some(state) = self.threads.remove(&tid) else {
            // The initial process after it was detached (untraced exec).
            if tid == self.initial && self.initial_exit.is_none() {
                self.initial_exit = Some(exit);
                self.sink
                    .lifecycle(Thread::of_process(tid), Lifecycle::ProcessExited(exit));
            }
            return;
        };
        self.retire(&state);
        if let Some(space) = self.spaces.get_mut(&state.space) {
            // It is in no translation any more.
            space.cache.seen(tid, std::iter::empty());
        }
        if !state.exit_reported {
            self.sink.lifecycle(state.thread, Lifecycle::ThreadExited);
        }
        // The code cache is freed before the profile is written, which
        // needs memory of its own.
        self.drop_unused_spaces();
        let pid = state.thread.pid;
        if tid == pid {
            self.sink
                .lifecycle(Thread::of_process(pid), Lifecycle::ProcessExited(exit));
            if pid == self.initial {
                self.initial_exit = Some(exit);
            }
        }
    }
}

/// Whether wait status `status` is a trap stop (`SIGTRAP`, no event).
fn trapped(status: i32) -> bool {
    libc::WIFSTOPPED(status) && status >> 16 == 0 && libc::WSTOPSIG(status) == libc::SIGTRAP
}

/// Whether a stop with wait status `status` at the stub `stub` (the one
/// before the stopped thread's instruction pointer, if any) is served
/// with no record of any thread: a trap at an exit stub or a lookup miss
/// (a translation) or at a `cpuid` (an answer). Every other stop may
/// need records in order: a drain, a system call, a signal, an event.
fn serves_without_records(status: i32, stub: Option<Stub>) -> bool {
    trapped(status) && matches!(stub, Some(Stub::Miss | Stub::Exit { .. } | Stub::Cpuid))
}

/// Whether the `clone` or `clone3` system call stopped `tid` is in (at its
/// clone event stop) shares the memory (`CLONE_VM`); `memory`: its memory.
fn shares_memory(tid: i32, memory: &super::memory::Memory) -> Result<bool> {
    let regs = ptrace::regs(tid)?;
    let flags = match regs.orig_rax {
        SYS_CLONE => regs.rdi,
        SYS_CLONE3 => memory.read_u64(regs.rdi)?,
        _ => return Ok(false),
    };
    Ok(flags & CLONE_VM != 0)
}

/// Frees `space` on a thread of its own, beside the tracer: its tables of
/// thousands of translations take milliseconds to free, often at the end
/// of the run, when the profile waits for the tracer. Freed here when no
/// thread can be started.
fn release(space: Space) {
    let _ = std::thread::Builder::new()
        .name("cgx-release".into())
        .spawn(move || {
            crate::launch::unpin_current_thread();
            drop(space);
        });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wait status of a stop with `signal` and ptrace event `event`.
    fn stopped(signal: i32, event: i32) -> i32 {
        (event << 16) | (signal << 8) | 0x7f
    }

    #[test]
    fn only_traps_for_a_translation_or_cpuid_are_served_between_chunks() {
        let trap = stopped(libc::SIGTRAP, 0);
        let exit = Some(Stub::Exit { id: 3, exit: 1 });
        assert!(serves_without_records(trap, exit));
        assert!(serves_without_records(trap, Some(Stub::Miss)));
        assert!(serves_without_records(trap, Some(Stub::Cpuid)));
        // A watched system call or changed code: records first.
        assert!(!serves_without_records(trap, Some(Stub::Syscall { id: 3 })));
        assert!(!serves_without_records(trap, Some(Stub::Stale { id: 3 })));
        // Not at a stub: a signal for the program, a single step.
        assert!(!serves_without_records(trap, None));
        // The same stub reached with anything but a plain trap stop.
        let event = stopped(libc::SIGTRAP, libc::PTRACE_EVENT_CLONE);
        assert!(!serves_without_records(event, exit));
        assert!(!serves_without_records(stopped(libc::SIGSEGV, 0), exit));
        let exited = 0; // exited with status 0
        assert!(!serves_without_records(exited, exit));
    }
}
