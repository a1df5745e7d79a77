//! The translate backend with `RunOptions::simulations`: the same event
//! sequence as the step backend, data accesses and conditional and
//! indirect branches included, for Callgrind's and Cachegrind's
//! (`superblocks`) rules, on programs with every kind of access (stack,
//! REP strings, read-modify-write, SSE/AVX, fs-relative, fxsave), jcc
//! loops, indirect calls and jump tables, refused (stepped) blocks, and a
//! dynamically linked program (ld.so, libc, the vDSO). On a program long
//! enough to fill the record buffer many times (`translate_loop`, 10
//! million instructions, too long to step), the totals equal Cachegrind's.

mod common;

use std::path::Path;
use std::time::Instant;

use cgx_engine::{
    step, translate, AccessKind, Block, BlockEvent, Command, DataAccess, EventSink, Exit,
    RunOptions, Thread,
};
use common::{assert_same_events, build, valgrind, Event, Recorder};

/// Runs `command` under both backends with `options` and compares the
/// event sequences (without `options.branches`, the step backend's without
/// its branch events); returns the translate outcome.
fn same_events_as_step(command: &Command, options: &RunOptions) -> translate::Outcome {
    let mut fast = Recorder {
        simulations: true,
        ..Recorder::default()
    };
    let started = Instant::now();
    let outcome = translate::run(command, options, &mut fast).expect("the translate run succeeds");
    let fast_seconds = started.elapsed().as_secs_f64();
    let mut reference = Recorder {
        simulations: true,
        ..Recorder::default()
    };
    let step_outcome = step::run(command, options, &mut reference).expect("the step run succeeds");
    let count = |events: &[Event], which: fn(&Event) -> bool| {
        events.iter().filter(|event| which(event)).count()
    };
    let accesses = count(&reference.events, |e| matches!(e, Event::Access(..)));
    let branches = count(&reference.events, |e| matches!(e, Event::Conditional(..)));
    eprintln!(
        "{:?} {options:?}: {} instructions, {accesses} accesses, {branches} conditional \
         branches; translate {fast_seconds:.3} s, {} translations, {} stepped blocks, {} drains",
        command.program(),
        outcome.instructions,
        outcome.translations,
        outcome.stepped_blocks,
        outcome.drains,
    );
    assert!(accesses > 0 && branches > 0);
    if !options.branches {
        reference
            .events
            .retain(|event| !matches!(event, Event::Conditional(..) | Event::Indirect(..)));
    }
    assert_same_events(&fast.events, &reference.events, 6);
    assert_eq!(outcome.exit, step_outcome.exit);
    outcome
}

/// Callgrind's and Cachegrind's rules.
fn both_rules() -> [RunOptions; 2] {
    let callgrind = RunOptions {
        simulations: true,
        branches: true,
        ..RunOptions::default()
    };
    let cachegrind = RunOptions {
        superblocks: true,
        ..callgrind.clone()
    };
    [callgrind, cachegrind]
}

/// Callgrind's and Cachegrind's rules for a cache simulation alone (the
/// translate backend leaves the branch events out).
fn without_branches() -> [RunOptions; 2] {
    both_rules().map(|options| RunOptions {
        branches: false,
        ..options
    })
}

#[test]
fn accesses_program_gives_the_step_backends_events() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(dir.path(), "accesses", 0);
    let plain = translate::run(
        &Command::new(&program),
        &RunOptions::default(),
        &mut cgx_engine::InstructionCounter::default(),
    )
    .expect("the translate run succeeds");
    for options in both_rules().into_iter().chain(without_branches()) {
        let outcome = same_events_as_step(&Command::new(&program), &options);
        assert_eq!(outcome.exit, Exit::Code(0));
        // Recording refuses no block here (fs-relative operands included):
        // only the `loop`/`jrcxz` blocks are stepped, as without it.
        assert_eq!(outcome.stepped_blocks, plain.stepped_blocks);
    }
}

#[test]
fn tiny_and_refused_blocks_give_the_step_backends_events() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    for name in ["tiny", "translate_fallback"] {
        let program = build(dir.path(), name, 0);
        for options in both_rules().into_iter().chain(without_branches()) {
            same_events_as_step(&Command::new(&program), &options);
        }
    }
}

#[test]
fn dynamic_program_gives_the_step_backends_events() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = common::build_dynamic(dir.path(), "dynamic");
    let [callgrind, _] = both_rules();
    same_events_as_step(&Command::new(&program), &callgrind);
}

/// Totals of Cachegrind's `Ir Dr Dw Bc Bi` (a modify is a read for it).
#[derive(Debug, Default, PartialEq, Eq)]
struct Totals([u64; 5]);

impl EventSink for Totals {
    type Ahead = cgx_engine::NoAhead;

    fn block(&mut self, _thread: Thread, _block: Block) {}
    fn instruction(&mut self, _thread: Thread, _addr: u64, _len: u8) {
        self.0[0] += 1;
    }

    fn instruction_event(&mut self, thread: Thread, addr: u64, event: BlockEvent) {
        match event {
            BlockEvent::Access(access) => self.data_access(thread, access),
            BlockEvent::Conditional(taken) => self.conditional_branch(thread, addr, taken),
            BlockEvent::Indirect(target) => self.indirect_branch(thread, addr, target),
            BlockEvent::Bus => {}
        }
    }
}

impl Totals {
    fn data_access(&mut self, _thread: Thread, access: DataAccess) {
        self.0[if access.kind == AccessKind::Write {
            2
        } else {
            1
        }] += 1;
    }

    fn conditional_branch(&mut self, _thread: Thread, _addr: u64, _taken: bool) {
        self.0[3] += 1;
    }

    fn indirect_branch(&mut self, _thread: Thread, _addr: u64, _target: u64) {
        self.0[4] += 1;
    }
}

/// Cachegrind's totals of `Ir Dr Dw Bc Bi` for `program` (Callgrind's
/// leave out the last block).
fn cachegrind_totals(dir: &Path, program: &Path) -> Totals {
    let out = dir.join("cachegrind.out");
    valgrind(
        "cachegrind",
        &[
            format!("--cachegrind-out-file={}", out.display()),
            "--cache-sim=yes".into(),
            "--branch-sim=yes".into(),
        ],
        program,
    );
    let text = std::fs::read_to_string(&out).expect("Cachegrind's file");
    let line = |prefix: &str| -> Vec<String> {
        text.lines()
            .find_map(|line| line.strip_prefix(prefix))
            .expect("the line in Cachegrind's file")
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    let (events, totals) = (line("events:"), line("summary:"));
    let mut found = Totals::default();
    for (slot, name) in found.0.iter_mut().zip(["Ir", "Dr", "Dw", "Bc", "Bi"]) {
        let column = events.iter().position(|event| event == name);
        *slot = column
            .and_then(|column| totals.get(column))
            .map_or(0, |total| total.parse().expect("a count"));
    }
    found
}

#[test]
fn a_long_run_fills_the_buffer_and_equals_cachegrinds_totals() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(dir.path(), "translate_loop", 0);
    let [_, cachegrind] = both_rules();
    let mut totals = Totals::default();
    let outcome = translate::run(&Command::new(&program), &cachegrind, &mut totals)
        .expect("the translate run succeeds");
    eprintln!("translate_loop: {totals:?}, {outcome:?}");
    assert_eq!(outcome.exit, Exit::Code(0));
    // Buffer hand-offs happened (4 MB each).
    assert!(outcome.drains > 10, "{outcome:?}");
    assert_eq!(totals, cachegrind_totals(dir.path(), &program));
}

#[test]
fn a_fault_in_the_middle_of_a_block_gives_the_step_backends_events() {
    // The handler sees the loads before the faulting store, and the rest
    // of the block runs after it as a block of its own, with its own
    // addresses (as the step backend reports it).
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(dir.path(), "fault_midblock", 0);
    for options in both_rules().into_iter().chain(without_branches()) {
        let outcome = same_events_as_step(&Command::new(&program), &options);
        assert_eq!(outcome.exit, Exit::Code(0));
    }
}
