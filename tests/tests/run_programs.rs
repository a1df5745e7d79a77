//! Acceptance 2 of `cgx run`: small dynamically linked programs, profiled by
//! Valgrind and by cgx with the same options. For each process, the self Ir of
//! each of the program's own functions (those of its source file) and the counts
//! of the call arcs from or to them equal Valgrind's, the total Ir is within 2%,
//! and inclusive costs are neither missing nor negative; stdout and exit status are
//! those of the program run alone. cgx's files load in callgrind_annotate and
//! KCachegrind.
//!
//! - `mixed.c` (C, 1.3 million instructions, most of them its own work so that
//!   start-up, which differs under Valgrind, stays under 2%): recursion,
//!   mutual recursion, function pointers, setjmp/longjmp, a signal handler, two
//!   threads, and fork: with `--callgrind-out-file=DIR/out.%p` the parent and the
//!   child each write a profile, told apart by the function only each runs. As
//!   with Valgrind, the child's profile includes what the process did before the
//!   fork.
//! - `exceptions.cc` (C++, 1.45 million instructions; libstdc++ linked in
//!   statically, as the shared one takes 1.85 million): exceptions thrown through
//!   frames with cleanups and caught, recursion, virtual calls.

use std::collections::BTreeSet;
use std::path::Path;

use cgx_formats::Profile;
use cgx_tests::run::{
    arcs, assert_clients_load, assert_same_own_figures, assert_status, build, native,
    own_functions, run, self_ir, with_function, Kind, Profiler, Run,
};

/// Runs `program` alone, under Valgrind with `options` and under cgx with
/// `options` and `cgx_options`; checks the exit statuses and stdouts;
/// returns the Valgrind and cgx runs.
fn run_all(
    program: &Path,
    options: &[&str],
    cgx_options: &[&str],
    status: i32,
    dir: &Path,
) -> (Run, Run) {
    let alone = native(program, &[], dir);
    assert_status(&alone, status);
    let valgrind = run(Profiler::Valgrind, options, program, &[], dir);
    assert_status(&valgrind, status);
    let cgx_options: Vec<&str> = cgx_options.iter().chain(options).copied().collect();
    let cgx = run(Profiler::Cgx, &cgx_options, program, &[], dir);
    assert_status(&cgx, status);
    assert_eq!(cgx.stdout, alone.stdout, "{}: stdout", cgx.command);
    assert_eq!(
        valgrind.stdout, alone.stdout,
        "{}: stdout",
        valgrind.command
    );
    println!("stdout and exit status {status} as without a profiler");
    (valgrind, cgx)
}

/// Asserts that Valgrind's profile has `arcs` (caller, callee) and `functions`:
/// the program does what the test is for.
fn assert_has(profile: &Profile, functions: &[&str], calls: &[(&str, &str)], context: &str) {
    let table = self_ir(profile);
    for function in functions {
        assert!(
            table.contains_key(*function),
            "{context}: Valgrind's profile has no {function}: {:?}",
            table.keys().collect::<Vec<_>>()
        );
    }
    let table = arcs(profile);
    for (caller, callee) in calls {
        assert!(
            table.contains_key(&(caller.to_string(), callee.to_string())),
            "{context}: Valgrind's profile has no call {caller} -> {callee}"
        );
    }
}

#[test]
fn c_program_with_longjmp_signal_threads_and_fork() {
    mixed(&[]);
}

/// The same under the translate backend (two threads run at the same time,
/// own functions equal to Valgrind's).
#[test]
fn c_program_with_longjmp_signal_threads_and_fork_under_translate() {
    mixed(&["--backend=translate"]);
}

/// Profiles `mixed.c` with `backend` options and compares with Valgrind.
fn mixed(backend: &[&str]) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("mixed.c", Kind::C, dir.path());
    let options = ["-q", "--callgrind-out-file={out}/out.%p"];
    let (valgrind, cgx) = run_all(&program, &options, backend, 3, dir.path());
    assert_eq!(
        valgrind.files.len(),
        2,
        "Valgrind's files: {:?}",
        valgrind.files
    );
    assert_eq!(
        cgx.files.len(),
        2,
        "cgx must write one file per process (out.%p): {:?}\nstderr:\n{}",
        cgx.files,
        cgx.stderr
    );
    let (valgrind_profiles, cgx_profiles) = (valgrind.profiles(), cgx.profiles());
    let mut own = BTreeSet::new();
    for profile in &valgrind_profiles {
        own.extend(own_functions(profile, "mixed.c"));
    }
    println!("own functions of mixed.c: {own:?}");
    for (process, landmark) in [("parent", "parent_work"), ("child", "child_work")] {
        let expected = with_function(&valgrind_profiles, landmark, "Valgrind");
        let actual = with_function(&cgx_profiles, landmark, "cgx");
        let context = format!("mixed.c, {process} process");
        assert_has(
            expected,
            &[
                "main",
                "fib'2",
                "is_odd'2",
                "square",
                "twice",
                "dive'2",
                "on_signal",
                "worker",
            ],
            &[("main", "dive"), ("dive", "dive'2"), ("worker", "fib")],
            &context,
        );
        assert_same_own_figures(expected, actual, &own, &context);
    }
    assert_clients_load(&cgx.files, "mixed.c");
}

#[test]
fn cxx_program_with_exceptions() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("exceptions.cc", Kind::Cxx, dir.path());
    let (valgrind, cgx) = run_all(&program, &["-q"], &[], 5, dir.path());
    let (expected, actual) = (valgrind.profile(), cgx.profile());
    let own = own_functions(&expected, "exceptions.cc");
    println!("own functions of exceptions.cc: {own:?}");
    let context = "exceptions.cc";
    assert_has(
        &expected,
        &[
            "main",
            "attempt(unsigned long)",
            "check(unsigned long)'2",
            "fib(unsigned long)'2",
            "shapes::Square::area(unsigned long) const",
        ],
        &[
            ("attempt(unsigned long)", "middle(unsigned long)"),
            ("middle(unsigned long)", "check(unsigned long)"),
            ("check(unsigned long) [clone .cold]", "__cxa_throw"),
        ],
        context,
    );
    assert_same_own_figures(&expected, &actual, &own, context);
    assert_clients_load(&cgx.files, context);
}
