//! Blocks that loop on themselves count their runs in one record (see the
//! translator): the counts stay exact when signals interrupt the loops
//! many times, each handler run drained and the loop's record reopened.

mod common;

use std::ops::Range;
use std::path::Path;
use std::process::Command as Process;

use cgx_engine::{translate, Block, Command, EventSink, Exit, Lifecycle, RunOptions, Thread};
use common::build;

/// Iterations of each loop of `repeats.c`.
const ITERATIONS: u64 = 30_000_000;

/// Counts the instructions executed in two address ranges, and the
/// signal handlers entered.
struct Counts {
    spin: Range<u64>,
    fill: Range<u64>,
    in_spin: u64,
    in_fill: u64,
    handlers: u64,
}

impl EventSink for Counts {
    type Ahead = cgx_engine::NoAhead;

    fn block(&mut self, _thread: Thread, _block: Block) {}

    fn instruction(&mut self, _thread: Thread, addr: u64, _len: u8) {
        if self.spin.contains(&addr) {
            self.in_spin += 1;
        } else if self.fill.contains(&addr) {
            self.in_fill += 1;
        }
    }

    fn lifecycle(&mut self, thread: Thread, event: Lifecycle<'_>) {
        if let Lifecycle::SignalEntered(signal) = event {
            self.signal_handler_entered(thread, signal);
        }
    }
}

impl Counts {
    fn signal_handler_entered(&mut self, _thread: Thread, _signal: i32) {
        self.handlers += 1;
    }
}

/// The address of symbol `name` in `program` (by `nm`).
fn symbol(program: &Path, name: &str) -> u64 {
    let output = Process::new("nm").arg(program).output().expect("nm runs");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| {
            let mut fields = line.split_whitespace();
            let addr = fields.next()?;
            (fields.nth(1)? == name).then(|| u64::from_str_radix(addr, 16).ok())?
        })
        .unwrap_or_else(|| panic!("no symbol {name} in {}", program.display()))
}

#[test]
fn loops_of_one_block_interrupted_by_signals_keep_their_counts() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(dir.path(), "repeats", 0);
    let mut counts = Counts {
        spin: symbol(&program, "spin")..symbol(&program, "spin_end"),
        fill: symbol(&program, "fill")..symbol(&program, "fill_end"),
        in_spin: 0,
        in_fill: 0,
        handlers: 0,
    };
    let outcome = translate::run(&Command::new(&program), &RunOptions::default(), &mut counts)
        .expect("the translate run succeeds");
    eprintln!("{outcome:?}, {} handlers", counts.handlers);
    let Exit::Code(handled) = outcome.exit else {
        panic!("the program ended with {:?}", outcome.exit);
    };
    // The exit status holds at most 255.
    assert_eq!(counts.handlers.min(255), handled as u64);
    // The loops ran long enough to be interrupted (a run takes about
    // 100 ms here; the timer fires every millisecond).
    assert!(handled >= 5, "only {handled} signals handled");
    assert_eq!(counts.in_spin, 2 * ITERATIONS + 2);
    assert_eq!(counts.in_fill, ITERATIONS + 4);
    // One record per loop, not one per iteration.
    assert!(
        outcome.records < ITERATIONS / 10,
        "{} records",
        outcome.records
    );
}
