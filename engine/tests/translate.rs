//! The translate backend against the step backend (the same event sequence:
//! blocks with address, stack pointer and arrival, and instructions) and
//! against Valgrind (the same instruction count), with the ptrace stops and
//! wall time of each.

mod common;

use std::path::{Path, PathBuf};
use std::time::Instant;

use cgx_engine::{step, translate, Command, Exit, InstructionCounter, RunOptions};
use common::{assert_same_events, build, valgrind_total, Recorder};

fn translated(program: &Path, sink: &mut impl cgx_engine::EventSink) -> (translate::Outcome, f64) {
    let started = Instant::now();
    let outcome = translate::run(&Command::new(program), &RunOptions::default(), sink)
        .expect("the translate run succeeds");
    let seconds = started.elapsed().as_secs_f64();
    eprintln!(
        "translate: {} instructions in {seconds:.3} s ({:.0}/s), {} stops, {} translations, \
         {} stepped blocks ({} steps), {} drains, {} records",
        outcome.instructions,
        outcome.instructions as f64 / seconds,
        outcome.stops,
        outcome.translations,
        outcome.stepped_blocks,
        outcome.steps,
        outcome.drains,
        outcome.records,
    );
    (outcome, seconds)
}

fn stepped(program: &Path, sink: &mut impl cgx_engine::EventSink) -> (step::Outcome, f64) {
    let started = Instant::now();
    let outcome = step::run(&Command::new(program), &RunOptions::default(), sink)
        .expect("the step run succeeds");
    let seconds = started.elapsed().as_secs_f64();
    eprintln!(
        "step: {} instructions in {seconds:.3} s ({:.0}/s), {} steps",
        outcome.instructions,
        outcome.instructions as f64 / seconds,
        outcome.steps,
    );
    (outcome, seconds)
}

/// Runs `program` under both backends and compares the event sequences.
fn same_events_as_step(name: &str, exit_code: i32) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(dir.path(), name, exit_code);
    let mut fast = Recorder::default();
    let (outcome, _) = translated(&program, &mut fast);
    let mut reference = Recorder::default();
    let (step_outcome, _) = stepped(&program, &mut reference);
    assert_eq!(outcome.exit, Exit::Code(exit_code));
    assert_eq!(outcome.exit, step_outcome.exit);
    assert_eq!(outcome.instructions, step_outcome.instructions);
    assert_same_events(&fast.events, &reference.events, 3);
}

#[test]
fn tiny_gives_the_step_backends_events() {
    same_events_as_step("tiny", 0);
    same_events_as_step("tiny", 3);
}

#[test]
fn tiny_counts_equal_cachegrind() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(dir.path(), "tiny", 0);
    let mut counter = InstructionCounter::default();
    let (outcome, _) = translated(&program, &mut counter);
    assert_eq!(outcome.instructions, counter.instructions);
    assert_eq!(
        outcome.instructions,
        valgrind_total(dir.path(), "cachegrind", &program)
    );
    // No instruction is stepped in tiny: every block is translated.
    assert_eq!(outcome.stepped_blocks, 0, "{outcome:?}");
}

/// Builds `translate_loop` in `dir` and runs it translated: the outcome
/// (its exit and count checked against the events) and the wall time.
fn translated_loop(dir: &Path) -> (PathBuf, translate::Outcome, f64) {
    let program = build(dir, "translate_loop", 0);
    let mut counter = InstructionCounter::default();
    let (outcome, seconds) = translated(&program, &mut counter);
    assert_eq!(outcome.exit, Exit::Code(0));
    assert_eq!(outcome.instructions, counter.instructions);
    (program, outcome, seconds)
}

#[test]
fn loop_program_counts_equal_cachegrind_with_few_stops() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let (program, outcome, seconds) = translated_loop(dir.path());

    let started = Instant::now();
    let cachegrind = valgrind_total(dir.path(), "cachegrind", &program);
    let valgrind_seconds = started.elapsed().as_secs_f64();
    eprintln!(
        "valgrind --tool=cachegrind --cache-sim=no: {cachegrind} instructions in \
         {valgrind_seconds:.3} s ({:.0}/s); translate/valgrind wall time {:.2}",
        cachegrind as f64 / valgrind_seconds,
        seconds / valgrind_seconds
    );
    assert_eq!(outcome.instructions, cachegrind);
    assert!(outcome.instructions > 9_000_000, "{outcome:?}");
    // Traps only to translate, on lookup misses and buffer hand-offs: far
    // fewer than one per thousand blocks executed.
    assert!(outcome.stops * 1000 < outcome.records, "{outcome:?}");
}

#[test]
fn a_long_run_hands_off_fewer_and_larger_buffer_halves() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let (_, outcome, _) = translated_loop(dir.path());
    // Every record takes 16 bytes at least: halves that stayed at their
    // first 512 KiB would have been handed off once per 32,768 records.
    let first_half = 512 * 1024;
    assert!(
        outcome.drains > 16 && outcome.drains * first_half < outcome.records * 16,
        "{outcome:?}"
    );
}

#[test]
fn loop_program_gives_the_step_backends_events() {
    // The step backend runs ~10M instructions in minutes; compare a short
    // run of the same program (its round count is a volatile the test
    // cannot change, so build a smaller variant).
    let dir = tempfile::tempdir().expect("a temporary folder");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/translate_loop.c");
    let small = dir.path().join("translate_small.c");
    let text = std::fs::read_to_string(&source).expect("the program's source");
    std::fs::write(&small, text.replace("rounds = 37000", "rounds = 300"))
        .expect("a smaller variant");
    let include = source.parent().expect("the programs folder").to_path_buf();
    let executable = dir.path().join("translate_small");
    let output = std::process::Command::new("gcc")
        .args(["-O1", "-g", "-static", "-nostdlib", "-fno-stack-protector"])
        .arg("-I")
        .arg(&include)
        .arg("-o")
        .arg(&executable)
        .arg(&small)
        .output()
        .expect("gcc runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut fast = Recorder::default();
    let (outcome, fast_seconds) = translated(&executable, &mut fast);
    let mut reference = Recorder::default();
    let (step_outcome, step_seconds) = stepped(&executable, &mut reference);
    eprintln!(
        "stops: translate {} vs step {}; wall time: translate {fast_seconds:.3} s vs step {step_seconds:.3} s",
        outcome.stops, step_outcome.steps
    );
    assert_eq!(outcome.instructions, step_outcome.instructions);
    assert_same_events(&fast.events, &reference.events, 3);
}

#[test]
fn refused_blocks_are_stepped_with_the_same_events() {
    // A `loop` side exit and a client request: stepped from the original
    // code, between translated blocks.
    same_events_as_step("translate_fallback", 0);
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(dir.path(), "translate_fallback", 0);
    let mut counter = InstructionCounter::default();
    let (outcome, _) = translated(&program, &mut counter);
    assert!(outcome.stepped_blocks > 0, "{outcome:?}");
    assert_eq!(
        outcome.instructions,
        valgrind_total(dir.path(), "cachegrind", &program)
    );
}

#[test]
fn cpuid_is_answered_in_translated_blocks_as_by_the_step_backend() {
    // Valgrind's processor (when this host can show it): the tracer
    // answers each `cpuid` at a trap, nothing is stepped.
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(dir.path(), "cpuid", 0);
    let options = RunOptions {
        valgrind_machine: true,
        ..RunOptions::default()
    };
    let mut fast = Recorder::default();
    let outcome = translate::run(&Command::new(&program), &options, &mut fast)
        .expect("the translate run succeeds");
    let mut reference = Recorder::default();
    let step_outcome = step::run(&Command::new(&program), &options, &mut reference)
        .expect("the step run succeeds");
    assert_eq!(outcome.exit, step_outcome.exit);
    assert_eq!(outcome.stepped_blocks, 0, "{outcome:?}");
    assert_same_events(&fast.events, &reference.events, 3);
    if let Some(cpu) = cgx_engine::cpuid::ValgrindCpu::for_host() {
        // "Genu" (0x47 = 'G') and Valgrind's leaf count.
        let [leaves, ebx, _, _] = cpu.cpuid(0, 0);
        let code = ((ebx & 0xff) + leaves) & 0xff;
        assert_eq!(outcome.exit, Exit::Code(code as i32));
    }
}
