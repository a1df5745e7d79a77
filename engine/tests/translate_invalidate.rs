//! The translate backend on code that is unmapped, remapped or made
//! executable again after it was translated: the translations of the
//! changed ranges are dropped (and code rewritten in writable memory is
//! found changed at the entry of its translations), so the events are the
//! step backend's and the count is Cachegrind's.

mod common;

use cgx_engine::{step, translate, Command, Exit, InstructionCounter, RunOptions};
use common::{build, normalized, valgrind_total, Recorder};

/// Runs `name` (exiting with `exit_code`) under both backends and Cachegrind.
fn same_as_step_and_cachegrind(name: &str, exit_code: i32) -> translate::Outcome {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(dir.path(), name, exit_code);
    let mut fast = Recorder::default();
    let outcome = translate::run(&Command::new(&program), &RunOptions::default(), &mut fast)
        .expect("the translate run succeeds");
    eprintln!("{name}: {outcome:?}");
    let mut reference = Recorder::default();
    let step_outcome = step::run(
        &Command::new(&program),
        &RunOptions::default(),
        &mut reference,
    )
    .expect("the step run succeeds");
    assert_eq!(outcome.exit, Exit::Code(exit_code));
    assert_eq!(outcome.exit, step_outcome.exit);
    let (fast, reference) = (normalized(&fast.events), normalized(&reference.events));
    if fast != reference {
        let at = fast
            .iter()
            .zip(&reference)
            .position(|(a, b)| a != b)
            .unwrap_or(fast.len().min(reference.len()));
        panic!(
            "lengths {} and {}; first difference at {at}: {:x?} vs {:x?}",
            fast.len(),
            reference.len(),
            fast.get(at),
            reference.get(at)
        );
    }
    let mut counter = InstructionCounter::default();
    translate::run(
        &Command::new(&program),
        &RunOptions::default(),
        &mut counter,
    )
    .expect("the translate run succeeds");
    assert_eq!(
        counter.instructions,
        valgrind_total(dir.path(), "cachegrind", &program)
    );
    outcome
}

#[test]
fn remapped_code_is_translated_anew() {
    // munmap + mmap, mmap MAP_FIXED over the code, mremap over it: each
    // version of the function at the same address.
    let outcome = same_as_step_and_cachegrind("smc_remap", 28);
    assert!(outcome.invalidated >= 6, "{outcome:?}");
}

#[test]
fn code_written_then_made_executable_is_translated_anew() {
    // mprotect RW, stores, mprotect RX, call: each mprotect drops the
    // translations of the page, and the page loses PROT_EXEC again.
    let outcome = same_as_step_and_cachegrind("translate_jit", 28);
    assert!(outcome.invalidated >= 6, "{outcome:?}");
    // The program's own mprotect(PROT_EXEC) is undone each time.
    assert!(outcome.protected >= 7 + 2, "{outcome:?}");
}

#[test]
fn code_rewritten_by_plain_stores_is_translated_anew() {
    // Stores into an anonymous RWX page, no system call between them and
    // the call: the translations check their code at each entry.
    let outcome = same_as_step_and_cachegrind("smc_store", 28);
    assert!(outcome.invalidated >= 6, "{outcome:?}");
}

#[test]
fn code_rewritten_by_rep_stores_is_translated_anew() {
    let outcome = same_as_step_and_cachegrind("smc_rep", 28);
    assert!(outcome.invalidated >= 6, "{outcome:?}");
}
