//! Quiet runs (`RunOptions::quiet_runs`): the runs of a block that keep
//! the thread's context, by the sink's `continues`, are counted in the
//! record of its first run in the segment, which goes on after a call
//! returns, and in a callee's segment of the last call from the same
//! segment of its caller. The counts stay exact when signals interrupt
//! the loops many times, and a loop of several blocks leaves a few
//! records, not one per run, also when it calls a function at each turn
//! (also one that calls another, and one called from two call sites in
//! turn that calls another) or jumps back to its start through a
//! register, and when its code is written by the program and checked at
//! each run.

mod common;

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::path::Path;
use std::process::Command as Process;

use cgx_engine::{
    translate, Block, Command, EventSink, Exit, Lifecycle, Place, RunOptions, Thread, WholeBlocks,
};
use common::build;

/// Iterations of each loop of `quiet.c`.
const ITERATIONS: u64 = 3_000_000;

/// More runs than signals interrupt (a run a signal interrupts is
/// reported in two parts, not as one whole block).
const INTERRUPTED: u64 = 10_000;

/// Counts the instructions executed in two address ranges, the records
/// (whole blocks reported) of the first and of the blocks after the call
/// in the second, and the signal handlers entered;
/// all code is one region, where a jump or fall-through continues the
/// context unless it reaches a function's first instruction.
struct Counts {
    functions: HashSet<u64>,
    branches: Range<u64>,
    calls: Range<u64>,
    tail: Range<u64>,
    dispatch: Range<u64>,
    dispatch_loop: u64,
    repeat: Range<u64>,
    callee_inner: Range<u64>,
    in_repeat: u64,
    records_in_callee: u64,
    in_branches: u64,
    in_dispatch: u64,
    records_of_dispatch_loop: u64,
    in_calls: u64,
    records_in_calls: u64,
    records_in_repeat: u64,
    records_in_branches: u64,
    records_in_tail: u64,
    handlers: u64,
    asked: u64,
}

impl Counts {
    fn count(&mut self, addr: u64, runs: u64) {
        if self.branches.contains(&addr) {
            self.in_branches += runs;
        } else if self.calls.contains(&addr) {
            self.in_calls += runs;
        } else if self.dispatch.contains(&addr) {
            self.in_dispatch += runs;
        } else if self.repeat.contains(&addr) {
            self.in_repeat += runs;
        }
    }
}

impl EventSink for Counts {
    type Ahead = cgx_engine::NoAhead;

    fn block(&mut self, _thread: Thread, _block: Block) {}

    fn instruction(&mut self, _thread: Thread, addr: u64, _len: u8) {
        self.count(addr, 1);
    }

    fn blocks_executed(&mut self, _thread: Thread, blocks: &mut WholeBlocks<'_>) {
        for whole in blocks {
            if self.branches.contains(&whole.block.addr) {
                self.records_in_branches += 1;
            }
            if self.tail.contains(&whole.block.addr) {
                self.records_in_tail += 1;
            }
            if self.callee_inner.contains(&whole.block.addr) {
                self.records_in_callee += 1;
            }
            if whole.block.addr == self.dispatch_loop {
                self.records_of_dispatch_loop += 1;
            }
            if self.calls.contains(&whole.block.addr) {
                self.records_in_calls += 1;
            }
            if self.repeat.contains(&whole.block.addr) {
                self.records_in_repeat += 1;
            }
            for &(addr, _) in whole.instructions {
                self.count(addr, 1 + whole.repeats);
            }
        }
    }

    fn place(&mut self, _thread: Thread, addr: u64) -> Option<Place> {
        self.asked += 1;
        Some(Place {
            region: 0,
            starts_function: self.functions.contains(&addr),
            skipped: false,
        })
    }

    fn lifecycle(&mut self, _thread: Thread, event: Lifecycle<'_>) {
        if let Lifecycle::SignalEntered(_) = event {
            self.handlers += 1;
        }
    }
}

/// The addresses of the text symbols of `program` (by `nm`), by name.
fn symbols(program: &Path) -> Vec<(String, u64)> {
    let output = Process::new("nm").arg(program).output().expect("nm runs");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let addr = u64::from_str_radix(fields.next()?, 16).ok()?;
            let kind = fields.next()?;
            let name = fields.next()?;
            matches!(kind, "T" | "t").then(|| (name.to_string(), addr))
        })
        .collect()
}

/// The address of symbol `name` among `symbols`.
fn address(symbols: &[(String, u64)], name: &str) -> u64 {
    symbols
        .iter()
        .find(|(symbol, _)| symbol == name)
        .map(|&(_, addr)| addr)
        .unwrap_or_else(|| panic!("no symbol {name}"))
}

fn run(quiet_runs: bool) -> (Counts, translate::Outcome, u64) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(dir.path(), "quiet", 0);
    let symbols = symbols(&program);
    let at = |name: &str| address(&symbols, name);
    let mut counts = Counts {
        // The markers of ranges start no function.
        functions: symbols
            .iter()
            .filter(|(name, _)| !["tail", "dispatch_loop", "callee_inner"].contains(&name.as_str()))
            .filter(|(name, _)| !name.ends_with("_end"))
            .map(|&(_, addr)| addr)
            .collect(),
        branches: at("branches")..at("branches_end"),
        calls: at("calls")..at("calls_end"),
        tail: at("tail")..at("tail_end"),
        dispatch: at("dispatch")..at("dispatch_end"),
        dispatch_loop: at("dispatch_loop"),
        repeat: at("repeat")..at("repeat_end"),
        callee_inner: at("callee_inner")..at("callee_inner_end"),
        in_repeat: 0,
        records_in_callee: 0,
        in_branches: 0,
        in_dispatch: 0,
        records_of_dispatch_loop: 0,
        in_calls: 0,
        records_in_calls: 0,
        records_in_repeat: 0,
        records_in_branches: 0,
        records_in_tail: 0,
        handlers: 0,
        asked: 0,
    };
    let options = RunOptions {
        quiet_runs,
        ..RunOptions::default()
    };
    let outcome = translate::run(&Command::new(&program), &options, &mut counts)
        .expect("the translate run succeeds");
    let Exit::Code(handled) = outcome.exit else {
        panic!("the program ended with {:?}", outcome.exit);
    };
    (counts, outcome, handled as u64)
}

#[test]
fn quiet_runs_keep_the_counts_of_loops_interrupted_by_signals() {
    let (counts, outcome, handled) = run(true);
    eprintln!(
        "{outcome:?}, {} handlers, {} records in branches, {} after the calls",
        counts.handlers, counts.records_in_branches, counts.records_in_tail
    );
    // The exit status holds at most 255.
    assert_eq!(counts.handlers.min(255), handled);
    assert!(handled >= 5, "only {handled} signals handled");
    assert!(counts.asked > 0, "the sink was never asked");
    assert_eq!(
        counts.in_branches,
        4 * ITERATIONS + ITERATIONS.div_ceil(2) + 3
    );
    assert_eq!(counts.in_calls, 6 * ITERATIONS + ITERATIONS.div_ceil(2) + 4);
    // A few records per segment (a signal starts a new one), not one
    // per run of the loop's blocks.
    assert!(
        counts.records_in_branches < ITERATIONS / 100,
        "{} records in the loop of three blocks",
        counts.records_in_branches
    );
    assert_eq!(counts.in_dispatch, 3 * ITERATIONS + 2);
    // An indirect jump within the segment's region keeps it.
    assert!(
        counts.records_of_dispatch_loop < ITERATIONS / 100,
        "{} records of the block an indirect jump goes back to",
        counts.records_of_dispatch_loop
    );
    // The segment of the loop goes on after each call returns.
    assert!(
        counts.records_in_tail < ITERATIONS / 100,
        "{} records of the blocks after the call",
        counts.records_in_tail
    );
    assert_eq!(
        counts.in_repeat,
        18 * ITERATIONS + 4 * ITERATIONS.div_ceil(2) + 4
    );
    // A call from the caller's segment of its last run goes on in the
    // callee's segment of then, also when another call of the same
    // callee runs in between, and below the stack pointer the call left.
    assert!(
        counts.records_in_callee < ITERATIONS / 100,
        "{} records of the callee's body",
        counts.records_in_callee
    );
    // A call that repeats the last one of its arc whole is counted with
    // it (`pending`): the calling blocks, the callees and the blocks the
    // returns go on to leave a few records, not one per call, also for
    // two calls in a row.
    assert!(
        counts.records_in_calls < ITERATIONS / 100,
        "{} records of the loop calling a leaf",
        counts.records_in_calls
    );
    assert!(
        counts.records_in_repeat < ITERATIONS / 100,
        "{} records of the loop calling twice",
        counts.records_in_repeat
    );
}

#[test]
fn without_quiet_runs_every_run_of_a_loop_of_several_blocks_has_its_record() {
    let (counts, _, _) = run(false);
    assert_eq!(counts.asked, 0, "the sink was asked");
    assert_eq!(
        counts.in_branches,
        4 * ITERATIONS + ITERATIONS.div_ceil(2) + 3
    );
    assert_eq!(counts.in_calls, 6 * ITERATIONS + ITERATIONS.div_ceil(2) + 4);
    assert!(counts.records_in_branches >= 2 * ITERATIONS - INTERRUPTED);
    assert!(counts.records_in_tail >= ITERATIONS - INTERRUPTED);
    assert_eq!(counts.in_dispatch, 3 * ITERATIONS + 2);
    assert!(counts.records_of_dispatch_loop >= ITERATIONS - INTERRUPTED);
    assert_eq!(
        counts.in_repeat,
        18 * ITERATIONS + 4 * ITERATIONS.div_ceil(2) + 4
    );
    assert!(counts.records_in_callee >= 2 * ITERATIONS - INTERRUPTED);
    assert!(counts.records_in_calls >= 4 * ITERATIONS - INTERRUPTED);
    assert!(counts.records_in_repeat >= 8 * ITERATIONS - INTERRUPTED);
}

/// The records and runs of each block, by address, with every function
/// of a program (by `nm`) starting a function.
struct Records {
    functions: HashSet<u64>,
    blocks: HashMap<u64, (u64, u64)>,
}

impl EventSink for Records {
    type Ahead = cgx_engine::NoAhead;

    fn block(&mut self, _thread: Thread, _block: Block) {}

    fn instruction(&mut self, _thread: Thread, _addr: u64, _len: u8) {}

    fn blocks_executed(&mut self, _thread: Thread, blocks: &mut WholeBlocks<'_>) {
        for whole in blocks {
            let (records, runs) = self.blocks.entry(whole.block.addr).or_default();
            *records += 1;
            *runs += 1 + whole.repeats;
        }
    }

    fn place(&mut self, _thread: Thread, addr: u64) -> Option<Place> {
        Some(Place {
            region: 0,
            starts_function: self.functions.contains(&addr),
            skipped: false,
        })
    }

    fn lifecycle(&mut self, _thread: Thread, _event: Lifecycle<'_>) {}
}

/// A program run with quiet runs ([`looped_blocks`]).
struct Looped {
    /// Its symbols.
    symbols: Vec<(String, u64)>,
    /// Each block between NAME and NAME_end that ran more than once: its
    /// address, records and runs.
    blocks: Vec<(u64, u64, u64)>,
}

/// Runs `programs/NAME.c` with quiet runs.
fn looped_blocks(name: &str) -> Looped {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(dir.path(), name, 0);
    let symbols = symbols(&program);
    let end = format!("{name}_end");
    let mut records = Records {
        functions: symbols
            .iter()
            .filter(|(symbol, _)| *symbol != end)
            .map(|&(_, addr)| addr)
            .collect(),
        blocks: HashMap::new(),
    };
    let options = RunOptions {
        quiet_runs: true,
        ..RunOptions::default()
    };
    translate::run(&Command::new(&program), &options, &mut records)
        .expect("the translate run succeeds");
    let range = address(&symbols, name)..address(&symbols, &end);
    let blocks = records
        .blocks
        .iter()
        .filter(|(addr, (_, runs))| range.contains(addr) && *runs > 1)
        .map(|(&addr, &(records, runs))| (addr, records, runs))
        .collect();
    Looped { symbols, blocks }
}

#[test]
fn a_loop_of_nested_calls_leaves_a_few_records() {
    const NESTED_ITERATIONS: u64 = 1_000_000;
    let Looped {
        symbols,
        blocks: looped,
    } = looped_blocks("nested");
    let at = |name: &str| address(&symbols, name);
    // The loop's two calls and its decrement, the two blocks of middle
    // and of tailing, inner's; a few records each, not one per run.
    assert_eq!(looped.len(), 8, "{looped:x?}");
    let inner = at("inner");
    few_records(&looped, NESTED_ITERATIONS, |addr| {
        if addr == inner {
            3
        } else {
            1
        }
    });
}

/// Each of `looped`'s blocks (address, records, runs) ran `times(address)`
/// times in each of `iterations` (the last perhaps not counted yet), and
/// left a few records, not one per iteration.
fn few_records(looped: &[(u64, u64, u64)], iterations: u64, times: impl Fn(u64) -> u64) {
    for &(addr, records, runs) in looped {
        let times = times(addr);
        let expected = times * (iterations - 1)..=times * iterations;
        assert!(expected.contains(&runs), "{addr:#x}: {runs} runs");
        assert!(records < iterations / 100, "{addr:#x}: {records} records");
    }
}

/// A function called from two call sites in turn calls another from
/// the two segments of its caller's calls in turn: every call of that
/// pair is made pending from one of its call's two cache entries.
#[test]
fn a_call_made_from_two_segments_in_turn_leaves_a_few_records() {
    const ALTERNATING_ITERATIONS: u64 = 1_000_000;
    let Looped {
        symbols,
        blocks: looped,
    } = looped_blocks("alternating");
    let at = |name: &str| address(&symbols, name);
    // The loop's two calls and its decrement, writer's two blocks, copy's.
    assert_eq!(looped.len(), 6, "{looped:x?}");
    let writer = at("writer");
    few_records(&looped, ALTERNATING_ITERATIONS, |addr| {
        if addr >= writer {
            2
        } else {
            1
        }
    });
}

#[test]
fn a_loop_of_written_blocks_rewritten_between_calls_leaves_a_few_records() {
    const WRITTEN: Range<u64> = 0x1000_0000..0x1000_1000;
    const RUNS: u64 = 50 * 20_000;
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(dir.path(), "written", 0);
    let mut records = Records {
        functions: symbols(&program).iter().map(|&(_, addr)| addr).collect(),
        blocks: HashMap::new(),
    };
    let options = RunOptions {
        quiet_runs: true,
        ..RunOptions::default()
    };
    let outcome = translate::run(&Command::new(&program), &options, &mut records)
        .expect("the translate run succeeds");
    // The calls returned what the rewritten code computes.
    assert_eq!(outcome.exit, Exit::Code(0));
    // Each translation checks its code at every run, counted runs too;
    // the loop's blocks (its start, the odd turns' `add`, the decrement)
    // leave a few records each per call, not one per run.
    let looped: Vec<(u64, u64, u64)> = records
        .blocks
        .iter()
        .filter(|(addr, (_, runs))| WRITTEN.contains(addr) && *runs > 1_000)
        .map(|(&addr, &(records, runs))| (addr, records, runs))
        .collect();
    assert_eq!(looped.len(), 3, "{looped:x?}");
    for (addr, records, runs) in looped {
        assert!(runs >= RUNS / 2, "{addr:#x}: {runs} runs");
        assert!(records < RUNS / 100, "{addr:#x}: {records} records");
    }
}

#[test]
fn a_pending_call_finishing_many_calls_leaves_a_few_records() {
    const FINISHED_ITERATIONS: u64 = 20_000;
    let looped = looped_blocks("finished").blocks;
    // The outer loop's call and decrement, many's first block, its
    // loop's three blocks and its last, leaf's: the inner calls' runs
    // leave the chain when each is over, so it never fills.
    assert_eq!(looped.len(), 8, "{looped:x?}");
    for (addr, records, runs) in looped {
        assert!(runs >= FINISHED_ITERATIONS - 1, "{addr:#x}: {runs} runs");
        assert!(
            records < FINISHED_ITERATIONS / 100,
            "{addr:#x}: {records} records of {runs} runs"
        );
    }
}
