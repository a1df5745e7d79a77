//! The translate backend with `RunOptions::simulations`: the same event
//! sequence as the step backend, data accesses and conditional and
//! indirect branches included, for Callgrind's and Cachegrind's
//! (`superblocks`) rules, on programs with every kind of access (stack,
//! REP strings, read-modify-write, SSE/AVX, fs-relative, fxsave), jcc
//! loops, indirect calls and jump tables, refused (stepped) blocks, and a
//! dynamically linked program (ld.so, libc, the vDSO).

mod common;

use std::path::Path;
use std::time::Instant;

use cgx_engine::{step, translate, Command, Exit, RunOptions};
use common::{assert_same_events, build, Event, Recorder};

/// Runs `command` under both backends with `options` and compares the
/// event sequences; returns the translate outcome.
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
    assert_same_events(&fast.events, &reference.events, 6);
    assert_eq!(outcome.exit, step_outcome.exit);
    outcome
}

/// Callgrind's and Cachegrind's rules.
fn both_rules() -> [RunOptions; 2] {
    let callgrind = RunOptions {
        simulations: true,
        ..RunOptions::default()
    };
    let cachegrind = RunOptions {
        superblocks: true,
        ..callgrind
    };
    [callgrind, cachegrind]
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
    for options in both_rules() {
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
        for options in both_rules() {
            same_events_as_step(&Command::new(&program), &options);
        }
    }
}

#[test]
fn dynamic_program_gives_the_step_backends_events() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/dynamic.c");
    let program = dir.path().join("dynamic");
    let output = std::process::Command::new("gcc")
        .args(["-O1", "-g", "-o"])
        .arg(&program)
        .arg(&source)
        .output()
        .expect("gcc runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let [callgrind, _] = both_rules();
    same_events_as_step(&Command::new(&program), &callgrind);
}
