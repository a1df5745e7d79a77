//! The cost of exact inclusive cache use: records the events of one run of a
//! program with the step backend, then replays them into the collector with
//! `--cacheuse=yes`, with and without the back-dating tree, and prints the
//! collector's time for each (medians of several replays), their ratio and
//! the tree's sizes. Replaying leaves out the tracing itself, which with the
//! step backend would hide any difference.
//!
//!     cargo run --release -p cgx-callstack --example cacheuse_overhead -- PROGRAM [ARGS...]

use std::time::{Duration, Instant};

use cgx_callstack::{Collector, Options};
use cgx_engine::{step, Block, BlockEvent, Command, EventSink, Lifecycle, RunOptions, Thread};

/// One event of the run, as the engine reported it (`exec`s left out: the
/// program is assumed to run no other).
#[derive(Clone, Copy)]
enum Event {
    Block(Thread, Block),
    Instruction(Thread, u64, u8),
    Instr(Thread, u64, BlockEvent),
    Life(Thread, Lifecycle<'static>),
}

/// Records every event; answers client requests as Valgrind would not (the
/// program is assumed not to use them).
#[derive(Default)]
struct Recorder {
    events: Vec<Event>,
}

impl EventSink for Recorder {
    type Ahead = cgx_engine::NoAhead;

    fn block(&mut self, thread: Thread, block: Block) {
        self.events.push(Event::Block(thread, block));
    }

    fn instruction(&mut self, thread: Thread, addr: u64, len: u8) {
        self.events.push(Event::Instruction(thread, addr, len));
    }

    fn instruction_event(&mut self, thread: Thread, addr: u64, event: BlockEvent) {
        self.events.push(Event::Instr(thread, addr, event));
    }

    fn lifecycle(&mut self, thread: Thread, event: Lifecycle<'_>) {
        let event = match event {
            Lifecycle::SignalEntered(signal) => Lifecycle::SignalEntered(signal),
            Lifecycle::SignalReturned => Lifecycle::SignalReturned,
            Lifecycle::ThreadStarted => Lifecycle::ThreadStarted,
            Lifecycle::ThreadExited => Lifecycle::ThreadExited,
            Lifecycle::Forked(child) => Lifecycle::Forked(child),
            Lifecycle::ProcessExited(exit) => Lifecycle::ProcessExited(exit),
            Lifecycle::Exec { .. } | Lifecycle::Control => return,
        };
        self.events.push(Event::Life(thread, event));
    }
}

/// Replays `events` into a fresh collector; returns the time it took and the
/// largest tree.
fn replay(events: &[Event], inclusive: bool) -> (Duration, Option<cgx_backdate::Statistics>) {
    let options = Options {
        cacheuse: true,
        cacheuse_inclusive: inclusive,
        caches: cgx_sim::cpuid::detect().config,
        ..Options::default()
    };
    let started = Instant::now();
    let Ok(mut collector) = Collector::new(options) else {
        eprintln!("the detected caches cannot be simulated");
        std::process::exit(1);
    };
    for event in events {
        match *event {
            Event::Block(t, b) => collector.block(t, b),
            Event::Instruction(t, a, l) => collector.instruction(t, a, l),
            Event::Instr(t, a, e) => collector.instruction_event(t, a, e),
            Event::Life(t, e) => collector.lifecycle(t, e),
        }
    }
    let _ = collector.finish();
    let elapsed = started.elapsed();
    let largest = collector
        .statistics()
        .into_iter()
        .map(|(_, statistics)| statistics)
        .max_by_key(|statistics| statistics.max_nodes);
    (elapsed, largest)
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((program, rest)) = args.split_first() else {
        eprintln!("usage: cacheuse_overhead PROGRAM [ARGS...]");
        std::process::exit(2);
    };
    let mut recorder = Recorder::default();
    let command = Command::new(program).args(rest);
    let started = Instant::now();
    let outcome = match step::run(&command, &RunOptions::default(), &mut recorder) {
        Ok(outcome) => outcome,
        Err(error) => {
            eprintln!("cacheuse_overhead: {error}");
            std::process::exit(1);
        }
    };
    println!(
        "recorded {} instructions ({} events) of `{}` in {:.1} s",
        outcome.instructions,
        recorder.events.len(),
        args.join(" "),
        started.elapsed().as_secs_f64()
    );
    let runs = 5;
    let mut without = Vec::new();
    let mut with = Vec::new();
    let mut statistics = None;
    for _ in 0..runs {
        without.push(replay(&recorder.events, false).0);
        let (time, tree) = replay(&recorder.events, true);
        with.push(time);
        statistics = tree;
    }
    let (without, with) = (median(without), median(with));
    println!(
        "collector, --cacheuse=yes: without back-dating {:.3} s, with {:.3} s: {:+.1}% (medians of {runs})",
        without.as_secs_f64(),
        with.as_secs_f64(),
        (with.as_secs_f64() / without.as_secs_f64() - 1.0) * 100.0
    );
    if let Some(statistics) = statistics {
        println!(
            "back-dating tree: {} nodes created, at most {} alive at once, {:.1} on average",
            statistics.created, statistics.max_nodes, statistics.average_nodes
        );
    }
}
