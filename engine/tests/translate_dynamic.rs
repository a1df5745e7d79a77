//! The translate backend on dynamically linked programs (ld.so, libc, the
//! vDSO): the same event sequence as the step backend, with the stops,
//! translations and wall time of each.

mod common;

use std::time::Instant;

use cgx_engine::{step, translate, Command, Exit};
use common::{assert_same_events, Recorder};

/// Runs `command` under both backends, compares the event sequences and
/// prints the figures of each.
fn same_events_as_step(command: &Command) -> Exit {
    let mut fast = Recorder::default();
    let started = Instant::now();
    let outcome = translate::run(command, &step::RunOptions::default(), &mut fast)
        .expect("the translate run succeeds");
    let fast_seconds = started.elapsed().as_secs_f64();
    let mut reference = Recorder::default();
    let started = Instant::now();
    let step_outcome = step::run(command, &step::RunOptions::default(), &mut reference)
        .expect("the step run succeeds");
    let step_seconds = started.elapsed().as_secs_f64();
    eprintln!(
        "{:?}: translate {} instructions in {fast_seconds:.3} s: {} stops, {} translations, \
         {} faults, {} mappings protected, {} regions, {} stepped blocks ({} steps), {} drains; \
         step {} instructions in {step_seconds:.3} s ({} steps)",
        command.program(),
        outcome.instructions,
        outcome.stops,
        outcome.translations,
        outcome.faults,
        outcome.protected,
        outcome.regions,
        outcome.stepped_blocks,
        outcome.steps,
        outcome.drains,
        step_outcome.instructions,
        step_outcome.steps,
    );
    assert_same_events(&fast.events, &reference.events, 6);
    assert_eq!(outcome.instructions, step_outcome.instructions);
    assert_eq!(outcome.exit, step_outcome.exit);
    // ld.so, the vDSO, the program and libc lose PROT_EXEC.
    assert!(outcome.protected >= 3, "{outcome:?}");
    outcome.exit
}

#[test]
fn bin_true_gives_the_step_backends_events() {
    assert_eq!(
        same_events_as_step(&Command::new("/bin/true")),
        Exit::Code(0)
    );
}

#[test]
fn ls_gives_the_step_backends_events() {
    let ls = Command::new("/bin/ls").args(["/"]);
    assert_eq!(same_events_as_step(&ls), Exit::Code(0));
}

#[test]
fn signal_handler_and_callback_give_the_step_backends_events() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = common::build_dynamic(dir.path(), "dynamic");
    assert_eq!(same_events_as_step(&Command::new(&program)), Exit::Code(0));
}
