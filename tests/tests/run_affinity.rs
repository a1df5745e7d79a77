//! The processors a program may run on are its own under cgx. cgx runs the
//! thread it waits for on the tracer's processor (a stop costs less
//! there), but the program reads and sets its own sets as without cgx
//! (`affinity.c`: `sched_getaffinity` through glibc and as a raw system
//! call, `sched_setaffinity` to one processor and back; a thread reads
//! its set, the main thread pins it and the thread reads it again; a
//! forked child reads its set): it prints what it prints alone under
//! Callgrind, with its cache simulation and under Cachegrind, and its own
//! functions have Valgrind's figures.

use cgx_tests::run::{
    assert_same_own_figures, assert_status, build, native, own_functions, run, with_function, Kind,
    Profiler,
};

/// One Callgrind profile per process.
const PER_PROCESS: &str = "--callgrind-out-file={out}/callgrind.out.%p";

#[test]
fn a_program_reads_and_sets_its_own_processors() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("affinity.c", Kind::C, dir.path());
    let alone = native(&program, &[], dir.path());
    assert_status(&alone, 0);
    assert!(
        alone.stdout.contains("pinned: 1 processors")
            && alone.stdout.contains("thread pinned by main: 1 processors")
            && alone.stdout.contains("child:"),
        "{}",
        alone.stdout
    );
    let cases: [&[&str]; 3] = [
        &[PER_PROCESS],
        &[PER_PROCESS, "--cache-sim=yes"],
        &[
            "--tool=cachegrind",
            "--cachegrind-out-file={out}/cachegrind.out.%p",
        ],
    ];
    let mut first = None;
    for (index, options) in cases.iter().enumerate() {
        let case_dir = dir.path().join(format!("case-{index}"));
        let cgx = run(Profiler::Cgx, options, &program, &[], &case_dir);
        assert_status(&cgx, 0);
        assert_eq!(cgx.stdout, alone.stdout, "{}: stdout", cgx.command);
        println!("{}: prints what the program prints alone", cgx.command);
        first.get_or_insert(cgx);
    }
    let cgx = first.expect("a run under cgx");
    let valgrind = run(
        Profiler::Valgrind,
        &[PER_PROCESS],
        &program,
        &[],
        dir.path(),
    );
    assert_status(&valgrind, 0);
    let (expected, actual) = (valgrind.profiles(), cgx.profiles());
    // The parent's profile (the child's starts with the parent's costs).
    let expected = with_function(&expected, "parent_end", "valgrind");
    let actual = with_function(&actual, "parent_end", "cgx");
    let own = own_functions(expected, "affinity.c");
    assert_same_own_figures(expected, actual, &own, "affinity");
}
