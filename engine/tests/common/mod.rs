//! Helpers of the engine's tests: building the test programs, running
//! Valgrind on them, Valgrind's conditional branch predictor, a sink that
//! records every event, and comparing the event sequences of two runs.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command as Process;

use cgx_engine::{Block, BlockEvent, DataAccess, EventSink, Exit, Lifecycle, Thread};

/// Builds `programs/NAME.c` (`-static -nostdlib`) with `EXIT_CODE` into `dir`.
pub fn build(dir: &Path, name: &str, exit_code: i32) -> PathBuf {
    let flags = ["-static", "-nostdlib", "-fno-stack-protector"];
    let exit = format!("-DEXIT_CODE={exit_code}");
    let flags: Vec<&str> = flags.iter().copied().chain([exit.as_str()]).collect();
    compile(name, &flags, &dir.join(format!("{name}{exit_code}")))
}

/// Builds `programs/NAME.c` linked dynamically with libc into `dir`.
pub fn build_dynamic(dir: &Path, name: &str) -> PathBuf {
    compile(name, &[], &dir.join(name))
}

/// Compiles `programs/NAME.c` with `-O1 -g` and `flags` into `executable`.
fn compile(name: &str, flags: &[&str], executable: &Path) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/programs/{name}.c"));
    let output = Process::new("gcc")
        .args(["-O1", "-g"])
        .args(flags)
        .arg("-o")
        .arg(executable)
        .arg(&source)
        .output()
        .expect("gcc runs");
    assert!(
        output.status.success(),
        "gcc failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    executable.to_path_buf()
}

/// Runs `valgrind --tool=TOOL` with `args` on `program`; returns its stderr.
pub fn valgrind(tool: &str, args: &[String], program: &Path) -> String {
    let output = Process::new("valgrind")
        .arg(format!("--tool={tool}"))
        .args(args)
        .arg(program)
        .output()
        .expect("valgrind runs");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Instructions a Valgrind tool (`cachegrind` or `callgrind`) counts for
/// `program`, read with cgx-formats from the file it writes.
pub fn valgrind_total(dir: &Path, tool: &str, program: &Path) -> u64 {
    let out = dir.join(format!("{tool}.out"));
    valgrind(
        tool,
        &[
            format!("--{tool}-out-file={}", out.display()),
            "--cache-sim=no".into(),
        ],
        program,
    );
    total_of(&out)
}

fn total_of(file: &Path) -> u64 {
    let profile = cgx_formats::read_path(file).expect("cgx-formats reads Valgrind's file");
    profile
        .parts
        .iter()
        .map(|part| part.self_totals().first().copied().unwrap_or(0))
        .sum()
}

/// Cachegrind's instruction counts of a program that forks once: (parent,
/// child), from its per-process files.
pub fn cachegrind_per_process(dir: &Path, program: &Path) -> (u64, u64) {
    let pattern = dir.join("cg.%p");
    valgrind(
        "cachegrind",
        &[
            format!("--cachegrind-out-file={}", pattern.display()),
            "--cache-sim=no".into(),
        ],
        program,
    );
    let mut files: Vec<(u32, PathBuf)> = std::fs::read_dir(dir)
        .expect("the folder")
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let pid = path
                .file_name()?
                .to_str()?
                .strip_prefix("cg.")?
                .parse()
                .ok()?;
            Some((pid, path))
        })
        .collect();
    files.sort();
    assert_eq!(files.len(), 2, "{files:?}");
    (total_of(&files[0].1), total_of(&files[1].1))
}

/// Lackey's counts for `program` run as Callgrind runs it (no block chasing,
/// no loop unrolling): (guest instructions, blocks entered). Lackey counts an
/// instruction before executing it, so a faulting one counts too.
pub fn lackey_counts(program: &Path) -> (u64, u64) {
    let stderr = valgrind(
        "lackey",
        &[
            "--basic-counts=yes".into(),
            "--vex-guest-chase=no".into(),
            "--vex-iropt-unroll-thresh=0".into(),
        ],
        program,
    );
    let count = |label: &str| {
        let line = stderr
            .lines()
            .find(|line| line.contains(label))
            .expect("lackey's counts");
        line.rsplit(':')
            .next()
            .and_then(|count| count.trim().replace(',', "").parse().ok())
            .expect("a count")
    };
    (count("guest instrs:"), count("SBs entered:"))
}

/// One event as recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Block(Thread, Block),
    Instruction(Thread, u64, u8),
    ClientRequest(Thread, [u64; 6], u64),
    HandlerEntered(Thread, i32),
    HandlerReturned(Thread),
    ThreadStarted(Thread),
    ThreadExited(Thread),
    Forked(Thread, i32),
    Exec(i32, bool),
    ProcessExited(i32, Exit),
    Access(Thread, DataAccess),
    Conditional(Thread, u64, bool),
    Indirect(Thread, u64, u64),
    Bus(Thread, u64),
}

/// A sink that records every event (data accesses and branches only with
/// `simulations`); answers client requests with `answer` (default: the
/// default value).
#[derive(Default)]
pub struct Recorder {
    pub events: Vec<Event>,
    pub answer: Option<u64>,
    pub simulations: bool,
    /// The programs of the `exec` events, in order.
    pub exec_programs: Vec<std::path::PathBuf>,
}

impl Recorder {
    /// The blocks, with their threads.
    pub fn blocks(&self) -> Vec<(Thread, Block)> {
        self.events
            .iter()
            .filter_map(|event| match event {
                Event::Block(thread, block) => Some((*thread, *block)),
                _ => None,
            })
            .collect()
    }

    /// Instructions per thread.
    pub fn instructions_per_thread(&self) -> HashMap<Thread, u64> {
        let mut counts = HashMap::new();
        for event in &self.events {
            if let Event::Instruction(thread, _, _) = event {
                *counts.entry(*thread).or_default() += 1;
            }
        }
        counts
    }

    /// Instructions among the first `end` events.
    pub fn instructions_until(&self, end: usize) -> u64 {
        self.events[..end]
            .iter()
            .filter(|event| matches!(event, Event::Instruction(..)))
            .count() as u64
    }
}

impl EventSink for Recorder {
    type Ahead = cgx_engine::NoAhead;

    fn block(&mut self, thread: Thread, block: Block) {
        self.events.push(Event::Block(thread, block));
    }
    fn instruction(&mut self, thread: Thread, addr: u64, len: u8) {
        self.events.push(Event::Instruction(thread, addr, len));
    }
    fn client_request(&mut self, thread: Thread, args: [u64; 6], default: u64) -> u64 {
        self.events
            .push(Event::ClientRequest(thread, args, default));
        self.answer.unwrap_or(default)
    }

    fn instruction_event(&mut self, thread: Thread, addr: u64, event: BlockEvent) {
        match event {
            BlockEvent::Access(access) => self.data_access(thread, access),
            BlockEvent::Conditional(taken) => self.conditional_branch(thread, addr, taken),
            BlockEvent::Indirect(target) => self.indirect_branch(thread, addr, target),
            BlockEvent::Bus => {
                if self.simulations {
                    self.events.push(Event::Bus(thread, addr));
                }
            }
        }
    }

    fn lifecycle(&mut self, thread: Thread, event: Lifecycle<'_>) {
        match event {
            Lifecycle::SignalEntered(signal) => self.signal_handler_entered(thread, signal),
            Lifecycle::SignalReturned => self.signal_handler_returned(thread),
            Lifecycle::ThreadStarted => self.thread_started(thread),
            Lifecycle::ThreadExited => self.thread_exited(thread),
            Lifecycle::Forked(child_pid) => self.forked(thread, child_pid),
            Lifecycle::Exec {
                program, traced, ..
            } => self.exec(thread.pid, program, traced),
            Lifecycle::ProcessExited(exit) => self.process_exited(thread.pid, exit),
            Lifecycle::Control => {}
        }
    }
}

impl Recorder {
    fn signal_handler_entered(&mut self, thread: Thread, signal: i32) {
        self.events.push(Event::HandlerEntered(thread, signal));
    }

    fn signal_handler_returned(&mut self, thread: Thread) {
        self.events.push(Event::HandlerReturned(thread));
    }

    fn thread_started(&mut self, thread: Thread) {
        self.events.push(Event::ThreadStarted(thread));
    }

    fn thread_exited(&mut self, thread: Thread) {
        self.events.push(Event::ThreadExited(thread));
    }

    fn forked(&mut self, parent: Thread, child_pid: i32) {
        self.events.push(Event::Forked(parent, child_pid));
    }

    fn exec(&mut self, pid: i32, program: &std::path::Path, traced: bool) {
        self.events.push(Event::Exec(pid, traced));
        self.exec_programs.push(program.to_path_buf());
    }

    fn process_exited(&mut self, pid: i32, exit: Exit) {
        self.events.push(Event::ProcessExited(pid, exit));
    }

    fn data_access(&mut self, thread: Thread, access: DataAccess) {
        if self.simulations {
            self.events.push(Event::Access(thread, access));
        }
    }

    fn conditional_branch(&mut self, thread: Thread, addr: u64, taken: bool) {
        if self.simulations {
            self.events.push(Event::Conditional(thread, addr, taken));
        }
    }

    fn indirect_branch(&mut self, thread: Thread, addr: u64, target: u64) {
        if self.simulations {
            self.events.push(Event::Indirect(thread, addr, target));
        }
    }
}

/// Valgrind's conditional branch predictor (DESIGN.md, "Facts").
pub struct Predictor {
    counters: Vec<u8>,
    history: u64,
}

impl Default for Predictor {
    fn default() -> Predictor {
        Predictor {
            counters: vec![0; 16384],
            history: 0,
        }
    }
}

impl Predictor {
    /// Whether the conditional branch at `addr` was mispredicted.
    pub fn mispredicted(&mut self, addr: u64, taken: bool) -> bool {
        let index = (((self.history & 0x7f) << 7) | (addr & 0x7f)) as usize;
        let counter = &mut self.counters[index];
        let miss = (*counter >= 2) != taken;
        *counter = if taken {
            (*counter + 1).min(3)
        } else {
            counter.saturating_sub(1)
        };
        self.history = (self.history << 1) | u64::from(taken);
        miss
    }
}

/// The events with thread and process ids replaced by 1 (two runs of a
/// program have different pids).
pub fn normalized(events: &[Event]) -> Vec<Event> {
    let one = |thread: Thread| Thread {
        pid: 1,
        tid: 1 + thread.tid - thread.pid,
    };
    events
        .iter()
        .map(|event| match event.clone() {
            Event::Block(thread, block) => Event::Block(one(thread), block),
            Event::Instruction(thread, addr, len) => Event::Instruction(one(thread), addr, len),
            Event::ThreadStarted(thread) => Event::ThreadStarted(one(thread)),
            Event::ThreadExited(thread) => Event::ThreadExited(one(thread)),
            Event::HandlerEntered(thread, signal) => Event::HandlerEntered(one(thread), signal),
            Event::HandlerReturned(thread) => Event::HandlerReturned(one(thread)),
            Event::ClientRequest(thread, args, default) => {
                Event::ClientRequest(one(thread), args, default)
            }
            Event::ProcessExited(_, exit) => Event::ProcessExited(1, exit),
            Event::Access(thread, access) => Event::Access(one(thread), access),
            Event::Conditional(thread, addr, taken) => Event::Conditional(one(thread), addr, taken),
            Event::Indirect(thread, addr, target) => Event::Indirect(one(thread), addr, target),
            Event::Bus(thread, addr) => Event::Bus(one(thread), addr),
            other => other,
        })
        .collect()
}

/// Asserts that translate's events `fast` equal step's `reference` once
/// process and thread ids are normalized; the failure shows the first
/// difference with `before` events before it.
pub fn assert_same_events(fast: &[Event], reference: &[Event], before: usize) {
    let (fast, reference) = (normalized(fast), normalized(reference));
    assert!(
        fast == reference,
        "{}",
        first_difference(&fast, &reference, before)
    );
}

/// The first difference of two event sequences (translate's, step's), for
/// the failure message, with `before` events before it.
pub fn first_difference(left: &[Event], right: &[Event], before: usize) -> String {
    let at = left
        .iter()
        .zip(right)
        .position(|(a, b)| a != b)
        .unwrap_or(left.len().min(right.len()));
    let window = |events: &[Event]| {
        events[at.saturating_sub(before)..(at + 3).min(events.len())]
            .iter()
            .map(|event| format!("{event:x?}"))
            .collect::<Vec<_>>()
            .join("\n  ")
    };
    format!(
        "lengths {} and {}; first difference at event {at}:\ntranslate:\n  {}\nstep:\n  {}",
        left.len(),
        right.len(),
        window(left),
        window(right)
    )
}

/// The thread of an event, if it has one.
fn thread_of(event: &Event) -> Option<Thread> {
    match event {
        Event::Block(thread, _)
        | Event::Instruction(thread, ..)
        | Event::ClientRequest(thread, ..)
        | Event::HandlerEntered(thread, _)
        | Event::HandlerReturned(thread)
        | Event::ThreadStarted(thread)
        | Event::ThreadExited(thread)
        | Event::Access(thread, _)
        | Event::Conditional(thread, ..)
        | Event::Indirect(thread, ..)
        | Event::Bus(thread, _) => Some(*thread),
        Event::Forked(..) | Event::Exec(..) | Event::ProcessExited(..) => None,
    }
}

/// The events of a run split by thread, threads (and processes) numbered
/// in the order of their ids (a process's main thread first): each
/// thread's events in order, then the events of no thread (forks, execs,
/// process exits) sorted. Runs whose threads interleave differently but do
/// the same compare equal.
pub fn per_thread(events: &[Event]) -> (Vec<Vec<Event>>, Vec<Event>) {
    let mut pids: Vec<i32> = Vec::new();
    let mut tids: Vec<(i32, i32)> = Vec::new();
    for event in events {
        let threads = match event {
            Event::Forked(thread, child) => vec![
                *thread,
                Thread {
                    pid: *child,
                    tid: *child,
                },
            ],
            Event::Exec(pid, _) | Event::ProcessExited(pid, _) => vec![Thread {
                pid: *pid,
                tid: *pid,
            }],
            _ => thread_of(event).into_iter().collect(),
        };
        for thread in threads {
            if !pids.contains(&thread.pid) {
                pids.push(thread.pid);
            }
            let key = (i32::from(thread.tid != thread.pid), thread.tid);
            if !tids.contains(&key) {
                tids.push(key);
            }
        }
    }
    pids.sort();
    tids.sort();
    let tids: Vec<i32> = tids.into_iter().map(|(_, tid)| tid).collect();
    let pid = |pid: i32| pids.iter().position(|&p| p == pid).map_or(-1, |i| i as i32);
    let renamed = |thread: Thread| Thread {
        pid: pid(thread.pid),
        tid: tids
            .iter()
            .position(|&t| t == thread.tid)
            .map_or(-1, |i| i as i32),
    };
    let mut threads: Vec<Vec<Event>> = vec![Vec::new(); tids.len()];
    let mut others = Vec::new();
    for event in events {
        let event = match event.clone() {
            Event::Block(t, block) => Event::Block(renamed(t), block),
            Event::Instruction(t, addr, len) => Event::Instruction(renamed(t), addr, len),
            Event::ClientRequest(t, args, default) => {
                Event::ClientRequest(renamed(t), args, default)
            }
            Event::HandlerEntered(t, signal) => Event::HandlerEntered(renamed(t), signal),
            Event::HandlerReturned(t) => Event::HandlerReturned(renamed(t)),
            Event::ThreadStarted(t) => Event::ThreadStarted(renamed(t)),
            Event::ThreadExited(t) => Event::ThreadExited(renamed(t)),
            Event::Access(t, access) => Event::Access(renamed(t), access),
            Event::Conditional(t, addr, taken) => Event::Conditional(renamed(t), addr, taken),
            Event::Indirect(t, addr, target) => Event::Indirect(renamed(t), addr, target),
            Event::Bus(t, addr) => Event::Bus(renamed(t), addr),
            Event::Forked(t, child) => Event::Forked(renamed(t), pid(child)),
            Event::Exec(p, traced) => Event::Exec(pid(p), traced),
            Event::ProcessExited(p, exit) => Event::ProcessExited(pid(p), exit),
        };
        match thread_of(&event) {
            Some(thread) => threads[thread.tid as usize].push(event),
            None => others.push(event),
        }
    }
    others.sort_by_key(|event| format!("{event:?}"));
    (threads, others)
}

/// Asserts that translate's events `fast` and step's `reference` are the
/// same per thread ([`per_thread`]).
pub fn assert_same_events_per_thread(fast: &[Event], reference: &[Event]) {
    let (fast_threads, fast_others) = per_thread(fast);
    let (step_threads, step_others) = per_thread(reference);
    assert_eq!(fast_others, step_others, "forks, execs and exits");
    assert_eq!(fast_threads.len(), step_threads.len(), "threads");
    for (index, (fast, step)) in fast_threads.iter().zip(&step_threads).enumerate() {
        assert!(
            fast == step,
            "thread {index}: {}",
            first_difference(fast, step, 3)
        );
    }
}
