//! Threads that reach new code at the same moment: `race.c` releases 16
//! threads at once into a chain of functions none has run, whose exits
//! the tracer links while the other threads run through them (each link
//! one aligned 4-byte write). A hundred runs, half of them with the cache
//! and branch simulations: each prints what the program prints alone.

use cgx_tests::run::{assert_status, build, native, run, Kind, Profiler};

/// Runs of the program under cgx.
const RUNS: usize = 100;

#[test]
fn threads_reaching_new_code_at_once_compute_as_natively() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("race.c", Kind::C, dir.path());
    let alone = native(&program, &[], dir.path());
    assert_status(&alone, 0);
    let options: [&[&str]; 2] = [&["-q"], &["-q", "--cache-sim=yes", "--branch-sim=yes"]];
    for round in 0..RUNS {
        let options = options[round % 2];
        let cgx = run(Profiler::Cgx, options, &program, &[], dir.path());
        assert_status(&cgx, 0);
        assert_eq!(cgx.stdout, alone.stdout, "run {round}: {}", cgx.command);
    }
}
