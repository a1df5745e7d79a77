//! `cgx run --tool=cachegrind --cache-sim=no` against `valgrind --tool=cachegrind
//! --cache-sim=no` (Valgrind 3.19's Cachegrind simulates caches unless told not
//! to), both with `--cachegrind-out-file=DIR/cg.%p`, on `-static -nostdlib`
//! programs in `tests/programs/run/`.
//!
//! Compared: exit status and stdout; the files written, by name with the process
//! id as `%p`; the Ir of every function (Cachegrind charges each instruction to
//! the function it is in, and counts the program's final block) and of every
//! source line (by function, file name and line); the closing `I   refs:` line,
//! after `==PID==` with the file's process id; and cg_annotate's report of cgx's
//! file (events, `PROGRAM TOTALS`, function table), which must equal its report of
//! Valgrind's. With `-q` cgx prints nothing on stderr.

use cgx_tests::clients::cg_annotate;
use cgx_tests::compare::assert_same_rows;
use cgx_tests::run::{
    assert_status, build, line_ir, name_patterns, pid_pattern, read, run, run_alone_and_profiled,
    self_ir, summary_lines, total_ir, Kind, Profiler, Run,
};

/// The prefix of the output files' names: the process id follows.
const PREFIX: &str = "cg.";

/// The options of both profilers.
const OPTIONS: [&str; 3] = [
    "--tool=cachegrind",
    "--cache-sim=no",
    "--cachegrind-out-file={out}/cg.%p",
];

/// The `I   refs:` line of a run (without `==PID== `), after checking that its
/// process id is the one of the run's file.
fn i_refs(run: &Run) -> String {
    let lines = summary_lines(&run.stderr, &["I   refs:"]);
    assert_eq!(
        lines.len(),
        1,
        "{}: one I refs line in\n{}",
        run.command,
        run.stderr
    );
    let (pid, text) = lines.into_iter().next().expect("one line");
    assert_eq!(
        pid,
        pid_pattern(&run.files[0], PREFIX).1,
        "{}: ==PID== of {text:?} is not the file's process id",
        run.command
    );
    text
}

/// Builds `source`, runs it natively, under Valgrind's Cachegrind and under cgx
/// with [`OPTIONS`], and asserts that they exit with `status`, print the same on
/// stdout (after the first `skip_lines` lines, which may differ under a
/// profiler), write one file each, named alike, with the same Ir per function and
/// per line, the same `I   refs:` line, and the same cg_annotate report.
fn compare(source: &str, status: i32, skip_lines: usize) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(source, Kind::NoLibc, dir.path());
    let (_, valgrind, cgx) =
        run_alone_and_profiled(&program, &OPTIONS, status, skip_lines, dir.path());
    let context = format!("{source}, options {OPTIONS:?}");

    let names = name_patterns(&cgx.files, PREFIX);
    assert_eq!(
        names,
        name_patterns(&valgrind.files, PREFIX),
        "{context}: the files written\nstderr:\n{}",
        cgx.stderr
    );
    assert_eq!(names, ["cg.%p"], "{context}: one file");
    let (expected, actual) = (read(&valgrind.files[0]), read(&cgx.files[0]));
    let (expected_functions, actual_functions) = (self_ir(&expected), self_ir(&actual));
    assert_same_rows(
        &expected_functions,
        &actual_functions,
        &format!("{context}: Ir by function"),
    );
    assert_eq!(
        total_ir(&actual),
        total_ir(&expected),
        "{context}: total Ir"
    );
    let (expected_lines, actual_lines) = (line_ir(&expected), line_ir(&actual));
    assert_same_rows(
        &expected_lines,
        &actual_lines,
        &format!("{context}: Ir by (function, file, line)"),
    );
    println!(
        "{context}: equal: total Ir {}, Ir of {} functions and {} lines",
        total_ir(&actual),
        actual_functions.len(),
        actual_lines.len()
    );

    let (expected_refs, actual_refs) = (i_refs(&valgrind), i_refs(&cgx));
    assert_eq!(actual_refs, expected_refs, "{context}: the I refs line");
    println!("{context}: the I refs line is Valgrind's: {actual_refs:?}");

    let (expected_report, actual_report) =
        (cg_annotate(&valgrind.files[0]), cg_annotate(&cgx.files[0]));
    assert_eq!(
        actual_report.totals,
        actual.parts[0].summary.clone().unwrap_or_default(),
        "{context}: cg_annotate's PROGRAM TOTALS of cgx's file are not its summary:"
    );
    assert_eq!(
        (&actual_report.events, &actual_report.totals),
        (&expected_report.events, &expected_report.totals),
        "{context}: cg_annotate's events and totals of cgx's file"
    );
    assert_same_rows(
        &expected_report.functions,
        &actual_report.functions,
        &format!("{context}: cg_annotate's functions (cgx's file against Valgrind's)"),
    );
    println!(
        "{context}: cg_annotate reads cgx's file as Valgrind's: totals {:?}, {} functions",
        actual_report.totals,
        actual_report.functions.len()
    );
}

/// Recursion, jumps between functions, function pointers, a jump table and REP
/// instructions.
#[test]
fn exact_gives_valgrinds_cachegrind_figures() {
    compare("exact.c", 3, 0);
}

/// Both threads' instructions in the one file.
#[test]
fn threads_give_valgrinds_cachegrind_figures() {
    compare("threads.c", 0, 0);
}

/// Cachegrind 3.19 has no client requests: Callgrind's (START/STOP_INSTRUMENTATION,
/// ZERO_STATS, TOGGLE_COLLECT, DUMP_STATS) change nothing, every instruction
/// counts, and there is one file. RUNNING_ON_VALGRIND is still non-zero (its
/// first line of output is not compared).
#[test]
fn callgrinds_client_requests_change_nothing_under_cachegrind() {
    compare("requests.c", 0, 1);
}

/// With `-q` cgx writes nothing on stderr. (Valgrind, checked too, writes no
/// `==PID==` line, but still warns `--PID-- warning:` about the host's caches
/// it would simulate.)
#[test]
fn quiet_prints_nothing() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("exact.c", Kind::NoLibc, dir.path());
    let options: Vec<&str> = ["-q"].iter().chain(&OPTIONS).copied().collect();
    for profiler in [Profiler::Valgrind, Profiler::Cgx] {
        let quiet = run(profiler, &options, &program, &[], dir.path());
        assert_status(&quiet, 3);
        assert_eq!(quiet.files.len(), 1, "{}: files", quiet.command);
        // Both print the warnings about the detected caches (`--PID--
        // warning: ...`) even with -q, and nothing else.
        assert!(
            quiet
                .stderr
                .lines()
                .all(|line| line.starts_with("--") && line.contains("warning:")),
            "{}: stderr:\n{}",
            quiet.command,
            quiet.stderr
        );
    }
}

/// Cachegrind 3.22's `--instr-at-start=no`: nothing is counted until the
/// program's CACHEGRIND_START_INSTRUMENTATION, and nothing after its
/// CACHEGRIND_STOP_INSTRUMENTATION; by default, all but what follows the stop.
#[test]
fn instr_at_start_no_counts_between_the_requests() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("cg_requests.c", Kind::NoLibc, dir.path());
    let functions = |extra: &[&str]| {
        let options: Vec<&str> = ["-q"]
            .iter()
            .chain(&OPTIONS)
            .chain(extra)
            .copied()
            .collect();
        let cgx = run(Profiler::Cgx, &options, &program, &[], dir.path());
        assert_status(&cgx, 0);
        assert_eq!(cgx.files.len(), 1, "{}: files", cgx.command);
        let counted: Vec<String> = self_ir(&read(&cgx.files[0]))
            .into_iter()
            .filter(|(_, ir)| *ir > 0)
            .map(|(name, _)| name)
            .filter(|name| ["before", "counted", "after"].contains(&name.as_str()))
            .collect();
        std::fs::remove_file(&cgx.files[0]).expect("the file removed");
        counted
    };
    assert_eq!(functions(&["--instr-at-start=no"]), ["counted"]);
    assert_eq!(functions(&[]), ["before", "counted"]);
}
