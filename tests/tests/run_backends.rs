//! The translate backend against the step backend: on the `-static
//! -nostdlib` programs of `tests/programs/run/` that are single-threaded
//! and use no client requests and no signals (`exact.c`,
//! `streams.c`, and `crash.c` without arguments and with `marker PATH`),
//! `cgx run --backend=translate` and `cgx run --backend=step` give identical
//! profiles: every part of every file equal in its canonical view
//! (`cgx_formats::canonical`: events, summary and totals, the self cost of
//! every place, every call's count and inclusive costs, every jump), the
//! `pid:` lines aside, with default options, `--dump-instr=yes`,
//! `--collect-jumps=yes` (with and without `--dump-instr=yes`), the
//! simulations with `--dump-instr=yes` (`--cache-sim=yes`,
//! `--branch-sim=yes`, `--cacheuse=yes`), and for Cachegrind with
//! `--cache-sim=no`, with its default cache simulation, and with
//! `--branch-sim=yes` too. The same exit status and stdout as the program
//! alone. Both backends' figures also equal Valgrind's without simulations
//! (total Ir, self Ir per function, calls and inclusive Ir per arc, Ir per
//! instruction with `--dump-instr=yes`, and the `jump=`/`jcnd=` lines as
//! `run_exact.rs` checks them; the simulations' figures against Valgrind
//! are `run_simulation.rs`'s, `run_cacheuse.rs`'s and
//! `run_cachegrind.rs`'s). The same holds for a small dynamically linked
//! program (`hello.c`) with the cache and branch simulations, and for one
//! whose calls repeat (`calls_again.c`: direct, indirect, nested and PLT
//! calls in a loop), for one whose calls nest deep in a loop
//! (`deep_calls.c`: a chain of 30 calls, recursions 40 and 70 deep, two
//! functions calling each other, a recursion with two call sites) and for
//! one that writes code into writable memory and
//! rewrites it in place between calls (`jit_loops.c`: a loop of blocks in
//! no object, with an indirect jump and a call out) with the option sets
//! of quiet runs, and for one made
//! for Cachegrind's and Callgrind's cache simulations filtered in the
//! program (`filtered.c`: sweeps, accesses across lines, REP passes,
//! stepped blocks between loads of one set, a signal handler, a fork)
//! with three cache geometries, and Callgrind's on `calls_again.c`. On the
//! two-thread program (`threads.c`) the same holds for the option sets
//! without simulations (`--separate-threads=yes` too). On a dynamically
//! linked program with two threads, a signal handler, `longjmp` and a fork
//! (`mixed.c`, two profiles, `--dump-instr=yes`) the profiles are the same
//! but where the threads' scheduling decides (`pthread_join` waits or not):
//! the self Ir of every other function and the figures of the program's own
//! functions are equal. The wall times of both
//! backends are printed (`cargo test --test run_backends -- --nocapture`).
//!
//! An unknown backend is an error naming it. And on the programs it does
//! not promise to handle yet (client requests with dumps, a program killed
//! by a signal) it either gives the step backend's profiles or stops with exit
//! status 1 and a message saying that the profile cannot be trusted: never a
//! silently different profile.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use cgx_tests::run::{
    assert_same_canonical_outputs, assert_same_figures, assert_same_own_figures, assert_status,
    assert_valgrinds_jumps, build, conditional_rep_addresses, native, own_functions, run,
    run_backend, self_ir, with_function, Kind, Profiler, Run, TimedRun,
};

/// The prefix of the Callgrind files' names: the process id follows.
const CALLGRIND: &str = "callgrind.out.";

/// The prefix of the Cachegrind files' names.
const CACHEGRIND: &str = "cachegrind.out.";

/// One program run: its source in `tests/programs/run/` and how it is
/// built, its arguments (the word `{marker}` stands for a marker file's
/// path), and its exit status.
struct Case {
    source: &'static str,
    kind: Kind,
    args: &'static [&'static str],
    status: i32,
}

/// A command line compared, after `-q` and the output file option: the
/// options, the output file option (`{out}` the run's folder), and whether
/// Valgrind's figures are compared too (with the Ir of every instruction when
/// the options have `--dump-instr=yes`).
type OptionSet = (&'static [&'static str], &'static str, bool);

/// The command lines compared on the programs without libc.
const OPTION_SETS: &[OptionSet] = &[
    (&[], "--callgrind-out-file={out}/callgrind.out.%p", true),
    (
        &["--dump-instr=yes"],
        "--callgrind-out-file={out}/callgrind.out.%p",
        true,
    ),
    (
        &["--collect-jumps=yes"],
        "--callgrind-out-file={out}/callgrind.out.%p",
        true,
    ),
    (
        &["--dump-instr=yes", "--collect-jumps=yes"],
        "--callgrind-out-file={out}/callgrind.out.%p",
        true,
    ),
    (
        &["--tool=cachegrind", "--cache-sim=no"],
        "--cachegrind-out-file={out}/cachegrind.out.%p",
        false,
    ),
    (
        &["--dump-instr=yes", "--cache-sim=yes"],
        "--callgrind-out-file={out}/callgrind.out.%p",
        false,
    ),
    (
        &["--dump-instr=yes", "--branch-sim=yes"],
        "--callgrind-out-file={out}/callgrind.out.%p",
        false,
    ),
    (
        &["--dump-instr=yes", "--cacheuse=yes"],
        "--callgrind-out-file={out}/callgrind.out.%p",
        false,
    ),
    (
        &["--tool=cachegrind"],
        "--cachegrind-out-file={out}/cachegrind.out.%p",
        false,
    ),
    (
        &["--tool=cachegrind", "--branch-sim=yes"],
        "--cachegrind-out-file={out}/cachegrind.out.%p",
        false,
    ),
];

/// The arguments of `case`, `{marker}` replaced by `marker`.
fn arguments(case: &Case, marker: &Path) -> Vec<String> {
    case.args
        .iter()
        .map(|arg| arg.replace("{marker}", &marker.to_string_lossy()))
        .collect()
}

/// The command lines compared on the two-thread program: those without
/// simulations (a cache or predictor shared by the threads sees their
/// accesses in the order the backend interleaves them, which differs).
const THREAD_OPTION_SETS: &[OptionSet] = &[
    (&[], "--callgrind-out-file={out}/callgrind.out.%p", true),
    (
        &["--dump-instr=yes"],
        "--callgrind-out-file={out}/callgrind.out.%p",
        true,
    ),
    (
        &["--dump-instr=yes", "--collect-jumps=yes"],
        "--callgrind-out-file={out}/callgrind.out.%p",
        true,
    ),
    (
        &["--dump-instr=yes", "--separate-threads=yes"],
        "--callgrind-out-file={out}/callgrind.out.%p",
        false,
    ),
    (
        &["--tool=cachegrind", "--cache-sim=no"],
        "--cachegrind-out-file={out}/cachegrind.out.%p",
        false,
    ),
];

/// The command lines compared on the dynamically linked program (the step
/// backend takes seconds on it): the simulations (the cache models alone
/// run other code than with branches; the loader's REP string
/// instructions and loops of one block feed them).
const DYNAMIC_OPTION_SETS: &[OptionSet] = &[
    (
        &["--dump-instr=yes", "--cacheuse=yes"],
        "--callgrind-out-file={out}/callgrind.out.%p",
        false,
    ),
    (
        &["--dump-instr=yes", "--cache-sim=yes"],
        "--callgrind-out-file={out}/callgrind.out.%p",
        false,
    ),
    (
        &["--dump-instr=yes", "--cache-sim=yes", "--branch-sim=yes"],
        "--callgrind-out-file={out}/callgrind.out.%p",
        false,
    ),
    (
        &["--tool=cachegrind", "--branch-sim=yes"],
        "--cachegrind-out-file={out}/cachegrind.out.%p",
        false,
    ),
];

/// Builds `case`'s program, runs it alone, then for each of `option_sets`
/// under both backends (and Valgrind), and asserts what the module
/// documentation says. Prints the wall times.
fn differential(case: &Case, option_sets: &[OptionSet]) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(case.source, case.kind, dir.path());
    let marker = dir.path().join("marker");
    let args = arguments(case, &marker);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let alone = native(&program, &args, dir.path());
    assert_status(&alone, case.status);
    let conditional_rep = conditional_rep_addresses(&program);
    let name = format!("{} {}", case.source, args.join(" "));
    let name = name.trim_end();
    let mut times = Vec::new();
    for (index, (options, out_file, against_valgrind)) in option_sets.iter().enumerate() {
        let folder = dir.path().join(index.to_string());
        let options: Vec<&str> = ["-q", out_file]
            .iter()
            .chain(options.iter())
            .copied()
            .collect();
        let context = format!("{name}, options {options:?}");
        let backend = |backend: &str| {
            let _ = fs::remove_file(&marker);
            let timed = run_backend(backend, &options, &program, &args, &folder);
            assert_status(&timed.run, case.status);
            assert_eq!(
                timed.run.stdout, alone.stdout,
                "{}: stdout",
                timed.run.command
            );
            if case.args.contains(&"{marker}") {
                assert!(marker.exists(), "{}: no marker made", timed.run.command);
            }
            timed
        };
        let step = backend("step");
        let translate = backend("translate");
        let prefix = if out_file.contains(CACHEGRIND) {
            CACHEGRIND
        } else {
            CALLGRIND
        };
        assert_same_canonical_outputs(
            &step.run,
            &translate.run,
            prefix,
            &format!("{context}: step and translate"),
        );
        let mut line = format!(
            "{context}: step {:.3} s, translate {:.3} s",
            step.wall.as_secs_f64(),
            translate.wall.as_secs_f64()
        );
        if *against_valgrind {
            let start = std::time::Instant::now();
            let valgrind = run(Profiler::Valgrind, &options, &program, &args, &folder);
            let wall = start.elapsed();
            assert_status(&valgrind, case.status);
            compare_with_valgrind(&valgrind, &[&step, &translate], &options, &conditional_rep);
            line += &format!(", valgrind {:.3} s", wall.as_secs_f64());
        }
        times.push(line);
    }
    println!("wall times:\n  {}", times.join("\n  "));
}

/// Asserts that the profiles of `runs` (one file each) have Valgrind's
/// figures; with `--dump-instr=yes`, per instruction, and with
/// `--collect-jumps=yes` too, Valgrind's jumps (see [`assert_valgrinds_jumps`]).
fn compare_with_valgrind(
    valgrind: &Run,
    runs: &[&TimedRun],
    options: &[&str],
    conditional_rep: &[u64],
) {
    let instructions = options.contains(&"--dump-instr=yes");
    let jumps = instructions && options.contains(&"--collect-jumps=yes");
    let expected = valgrind.profile();
    for timed in runs {
        let context = format!("{}, against valgrind", timed.run.command);
        let actual = timed.run.profile();
        assert_same_figures(&expected, &actual, instructions, &context);
        if jumps {
            assert_valgrinds_jumps(&expected, &actual, conditional_rep, &context);
        }
    }
}

#[test]
fn exact_gives_the_same_profiles_under_both_backends() {
    differential(
        &Case {
            source: "exact.c",
            kind: Kind::NoLibc,
            args: &[],
            status: 3,
        },
        OPTION_SETS,
    );
}

#[test]
fn streams_gives_the_same_profiles_under_both_backends() {
    differential(
        &Case {
            source: "streams.c",
            kind: Kind::NoLibc,
            args: &[],
            status: 0,
        },
        OPTION_SETS,
    );
}

#[test]
fn a_dynamically_linked_program_gives_the_same_profiles_with_simulations() {
    differential(
        &Case {
            source: "hello.c",
            kind: Kind::C,
            args: &[],
            status: 0,
        },
        DYNAMIC_OPTION_SETS,
    );
}

/// The command lines compared on `filtered.c`: Cachegrind's cache
/// simulation, which the translate backend filters in the program's
/// threads on a host with BMI2 (see `cgx_engine::L1Filter`), with D1 as
/// the program's sets need it, with other line sizes and sets, and with a
/// D1 of more sets than the filter takes (records, as everywhere else).
const FILTER_OPTION_SETS: &[OptionSet] = &[
    (
        &["--tool=cachegrind", "--D1=32768,8,64"],
        "--cachegrind-out-file={out}/cachegrind.out.%p",
        false,
    ),
    (
        &["--tool=cachegrind", "--I1=16384,4,32", "--D1=16384,2,128"],
        "--cachegrind-out-file={out}/cachegrind.out.%p",
        false,
    ),
    (
        &["--tool=cachegrind", "--D1=65536,2,64"],
        "--cachegrind-out-file={out}/cachegrind.out.%p",
        false,
    ),
    // Callgrind's, whose filtered runs are counted in segments and whose
    // filter records name their run (`cgx_engine::FilteredAccess::record`).
    (
        &["--cache-sim=yes", "--D1=32768,8,64", "--dump-instr=yes"],
        "--callgrind-out-file={out}/callgrind.out.%p",
        false,
    ),
    (
        &["--cache-sim=yes", "--I1=16384,4,32", "--D1=16384,2,128"],
        "--callgrind-out-file={out}/callgrind.out.%p",
        false,
    ),
    (
        &["--cache-sim=yes", "--D1=65536,2,64"],
        "--callgrind-out-file={out}/callgrind.out.%p",
        false,
    ),
];

#[test]
fn cache_simulations_filtered_in_the_program_give_the_same_profiles() {
    differential(
        &Case {
            source: "filtered.c",
            kind: Kind::C,
            args: &[],
            status: 0,
        },
        FILTER_OPTION_SETS,
    );
}

/// The command lines compared on `calls_again.c` and `jit_loops.c`: those
/// whose runs the translate backend counts in the tracee, calls repeated whole among
/// them (quiet runs: no jumps collected, no simulation). Valgrind's
/// figures for a dynamically linked program are `run_exact.rs`'s.
const QUIET_OPTION_SETS: &[OptionSet] = &[
    (&[], "--callgrind-out-file={out}/callgrind.out.%p", false),
    (
        &["--dump-instr=yes"],
        "--callgrind-out-file={out}/callgrind.out.%p",
        false,
    ),
    (
        &["--separate-recs=3", "--separate-callers=2"],
        "--callgrind-out-file={out}/callgrind.out.%p",
        false,
    ),
    (
        &["--fn-skip=branchy", "--skip-plt=no"],
        "--callgrind-out-file={out}/callgrind.out.%p",
        false,
    ),
    // With the cache simulation, filtered in the program (the misses of
    // runs counted in an earlier call's records).
    (
        &["--cache-sim=yes", "--dump-instr=yes"],
        "--callgrind-out-file={out}/callgrind.out.%p",
        false,
    ),
    (
        &[
            "--cache-sim=yes",
            "--separate-recs=3",
            "--separate-callers=2",
        ],
        "--callgrind-out-file={out}/callgrind.out.%p",
        false,
    ),
];

#[test]
fn calls_repeated_whole_give_the_same_profiles_under_both_backends() {
    differential(
        &Case {
            source: "calls_again.c",
            kind: Kind::C,
            args: &[],
            status: 0,
        },
        QUIET_OPTION_SETS,
    );
}

#[test]
fn calls_through_a_table_whose_target_changes_give_the_same_profiles_under_both_backends() {
    differential(
        &Case {
            source: "dispatch_calls.c",
            kind: Kind::C,
            args: &[],
            status: 0,
        },
        QUIET_OPTION_SETS,
    );
}

#[test]
fn calls_nested_deep_and_recursions_give_the_same_profiles_under_both_backends() {
    differential(
        &Case {
            source: "deep_calls.c",
            kind: Kind::C,
            args: &["20"],
            status: 0,
        },
        QUIET_OPTION_SETS,
    );
}

#[test]
fn code_a_program_writes_and_rewrites_gives_the_same_profiles_under_both_backends() {
    differential(
        &Case {
            source: "jit_loops.c",
            kind: Kind::C,
            args: &[],
            status: 0,
        },
        QUIET_OPTION_SETS,
    );
}

#[test]
fn two_threads_give_the_same_profiles_under_both_backends() {
    differential(
        &Case {
            source: "threads.c",
            kind: Kind::NoLibc,
            args: &[],
            status: 0,
        },
        THREAD_OPTION_SETS,
    );
}

/// Functions whose costs depend on how the threads are scheduled:
/// `pthread_join` waits on a futex (cancellation enabled around the wait)
/// only when the thread has not ended yet.
fn scheduling_dependent(name: &str) -> bool {
    ["join", "futex", "asynccancel"]
        .iter()
        .any(|part| name.contains(part))
}

/// `mixed.c` (two threads, a signal handler, `longjmp`, a fork) with
/// `--dump-instr=yes` under both backends: per process, the self Ir of
/// every function equal but where the threads' scheduling decides
/// ([`scheduling_dependent`]), and the program's own functions' figures
/// (self Ir, calls from and to them) equal.
#[test]
fn threads_a_signal_and_a_fork_give_the_same_profiles_under_both_backends() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("mixed.c", Kind::C, dir.path());
    let alone = native(&program, &[], dir.path());
    assert_status(&alone, 3);
    let options = [
        "-q",
        "--callgrind-out-file={out}/callgrind.out.%p",
        "--dump-instr=yes",
    ];
    let backend = |backend: &str| {
        let timed = run_backend(backend, &options, &program, &[], dir.path());
        assert_status(&timed.run, 3);
        assert_eq!(timed.run.stdout, alone.stdout, "{}", timed.run.command);
        assert_eq!(timed.run.files.len(), 2, "{}", timed.run.command);
        timed
    };
    let (step, translate) = (backend("step"), backend("translate"));
    let (step_profiles, translate_profiles) = (step.run.profiles(), translate.run.profiles());
    let mut own = BTreeSet::new();
    for profile in &step_profiles {
        own.extend(own_functions(profile, "mixed.c"));
    }
    for (process, landmark) in [("parent", "parent_work"), ("child", "child_work")] {
        let context = format!("mixed.c, {process} process, step and translate");
        let expected = with_function(&step_profiles, landmark, "step");
        let actual = with_function(&translate_profiles, landmark, "translate");
        let (expected_self, actual_self) = (self_ir(expected), self_ir(actual));
        let names: BTreeSet<&String> = expected_self.keys().chain(actual_self.keys()).collect();
        let differing: Vec<&&String> = names
            .iter()
            .filter(|name| expected_self.get(**name) != actual_self.get(**name))
            .collect();
        assert!(
            differing.iter().all(|name| scheduling_dependent(name)),
            "{context}: self Ir differs in {differing:?}"
        );
        assert_same_own_figures(expected, actual, &own, &context);
        println!("{context}: self Ir differs only in {differing:?}");
    }
    println!(
        "mixed.c: step {:.3} s, translate {:.3} s",
        step.wall.as_secs_f64(),
        translate.wall.as_secs_f64()
    );
}

#[test]
fn crash_without_a_crash_gives_the_same_profiles_under_both_backends() {
    differential(
        &Case {
            source: "crash.c",
            kind: Kind::NoLibc,
            args: &[],
            status: 0,
        },
        OPTION_SETS,
    );
    differential(
        &Case {
            source: "crash.c",
            kind: Kind::NoLibc,
            args: &["marker", "{marker}"],
            status: 0,
        },
        OPTION_SETS,
    );
}

/// Runs `crash marker PATH` under `cgx run OPTIONS` and returns the run and
/// whether the program ran (made its marker).
fn crash_marker(options: &[&str], backend: &str) -> (Run, bool) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("crash.c", Kind::NoLibc, dir.path());
    let marker = dir.path().join("marker");
    let marker_arg = marker.to_string_lossy().into_owned();
    let timed = run_backend(
        backend,
        options,
        &program,
        &["marker", &marker_arg],
        dir.path(),
    );
    (timed.run, marker.exists())
}

/// `--backend=fast`: an error naming it and the backends there are, exit
/// status 1, and the program not started.
#[test]
fn an_unknown_backend_is_an_error_naming_it() {
    let (cgx, ran) = crash_marker(&["-q"], "fast");
    assert_status(&cgx, 1);
    assert_eq!(
        cgx.stderr,
        "cgx: bad option: --backend=fast: unknown backend 'fast' (the backends are 'step' \
         and 'translate')\n",
        "{}",
        cgx.command
    );
    assert!(!ran, "{}: the program ran", cgx.command);
    assert!(cgx.files.is_empty(), "{}: files written", cgx.command);
    println!("{}: {}", cgx.command, cgx.stderr.trim());
}

/// On what the translate backend does not promise to handle yet (client
/// requests with dumps on request, a program killed by SIGSEGV or SIGINT), `--backend=translate --dump-instr=yes` gives the step
/// backend's exit status, stdout and profiles, or exit status 1 and a
/// message that says the profile is incomplete and cannot be trusted (or
/// that none was written); also with the cache simulation alone (the
/// program's threads keep I1 and D1, which instrumentation switched off
/// and on empties) and with the cache and branch simulations (a dump
/// then finds runs of blocks pending with their misses). Prints which.
#[test]
fn the_translate_backend_is_right_or_says_it_is_not() {
    let simulations = ["--cache-sim=yes", "--branch-sim=yes"];
    for ((source, args, status), simulations) in [
        ("requests.c", &[][..], 0),
        ("crash.c", &["segv"], 139),
        ("crash.c", &["sigint"], 130),
    ]
    .into_iter()
    .flat_map(|case| {
        [
            (case, &[][..]),
            (case, &simulations[..1]),
            (case, &simulations[..]),
        ]
    }) {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let program: PathBuf = build(source, Kind::NoLibc, dir.path());
        let mut options = vec![
            "-q",
            "--callgrind-out-file={out}/callgrind.out.%p",
            "--dump-instr=yes",
        ];
        options.extend_from_slice(simulations);
        let step = run_backend("step", &options, &program, args, dir.path());
        assert_status(&step.run, status);
        let translate = run_backend("translate", &options, &program, args, dir.path());
        let context = format!("{source} {} {}", args.join(" "), simulations.join(" "));
        let context = context.trim_end();
        let times = format!(
            "step {:.3} s, translate {:.3} s",
            step.wall.as_secs_f64(),
            translate.wall.as_secs_f64()
        );
        let translate = translate.run;
        if translate.status == status {
            assert_eq!(translate.stdout, step.run.stdout, "{context}: stdout");
            assert_same_canonical_outputs(
                &step.run,
                &translate,
                CALLGRIND,
                &format!("{context}: step and translate"),
            );
            println!(
                "{context}: the translate backend gives the step backend's profiles ({times})"
            );
        } else {
            assert_status(&translate, 1);
            let message = translate.stderr.trim_end();
            assert!(
                message.starts_with(&format!(
                    "cgx: {}: --backend=translate cannot trace this program: ",
                    program.display()
                )) && (message.ends_with(
                    "; the profile written is incomplete and cannot be trusted \
                         (--backend=step can)"
                ) && !translate.files.is_empty()
                    || message.ends_with("; no profile was written (--backend=step can)")
                        && translate.files.is_empty()),
                "{context}: exit status 1 without saying that the profile cannot be trusted \
                 (files {:?}):\n{}",
                translate.files,
                translate.stderr
            );
            println!("{context}: the translate backend refuses: {message}");
        }
    }
}
