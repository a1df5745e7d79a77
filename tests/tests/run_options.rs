//! `cgx run` with Callgrind's options against `valgrind --tool=callgrind` with the
//! same options, on `-static -nostdlib` programs (`exact.c`, `requests.c`,
//! `threads.c` in `tests/programs/run/`, and `engine/tests/programs/threads.c`).
//!
//! Every comparison runs both profilers with the same options and
//! `--callgrind-out-file=DIR/callgrind.out.%p`, and asserts: the same exit status
//! and stdout; the same non-empty output files by name, the process id written
//! `%p`; in every file, `pid:` equal to the name's process id, and the same part
//! numbers, threads and triggers; and part by part the same figures: total Ir,
//! self Ir of each function (by name, `fib'2` apart from `fib`), count and
//! inclusive Ir of each call arc by caller and callee name, and (the runs use
//! `--dump-instr=yes`, except those of `-q`, the summary lines and half of the
//! compression test) the Ir of every instruction address.
//!
//! Options covered: `--separate-recs=1` and `=3`, `--skip-direct-rec=yes`
//! (alone and with `--separate-recs=3`), `--pop-on-jump` (bare, and
//! `=PATTERN`), `--separate-callers=2`,
//! `--fn-skip` (recursive, leaf and mutually recursive functions),
//! `--obj-skip` (cgx's: every function of an object, as `--fn-skip` of each),
//! `--toggle-collect` alone and with `--collect-atstart`, `--instr-atstart=no`,
//! `--separate-callers2=fib` (and `--separate-recs3=fib`, against cgx's own
//! figures: Valgrind's are wrong there), `--dump-before`,
//! `--dump-after` and `--zero-before` (recursive and leaf
//! functions, a call in progress across a dump), `--dump-every-bb` (a dump
//! each time more than N blocks ran since the last: Valgrind checks only when
//! its scheduler switches, so its dumps come later and the test compares the
//! parts' sums with Valgrind's, and each part's block range with N),
//! `--collect-bus=yes` (`atomics.c`: `Ge` of every instruction, function and
//! call arc equal to Valgrind's, alone, with the cache and branch simulations,
//! and with the step backend),
//! `--separate-threads=yes` (files `-01`, `-02`, and Valgrind's empty base file),
//! `--combine-dumps=yes`, `--compress-strings=no --compress-pos=no` (whose files
//! also read back equal to the compressed ones), `-q` (nothing on stderr), the
//! closing summary lines without `-q`, the order and form of the messages
//! without `-q` (preamble, escaped `Command:` line, the program's output,
//! the blank line before `Events`, a traced `execve`'s preamble), and
//! `%q{VAR}` in the output file name.

use cgx_tests::compare::assert_same_profile;
use cgx_tests::run::{
    assert_same_outputs, assert_status, build, build_file, name_patterns, read, run,
    run_alone_and_profiled, run_with_env, summary_lines, Kind, Profiler, Run,
};
use cgx_tests::workspace_root;

/// The prefix of the output files' names: the process id follows.
const PREFIX: &str = "callgrind.out.";

/// The option that puts the output files in the run's folder, named by process.
const OUT_FILE: &str = "--callgrind-out-file={out}/callgrind.out.%p";

/// The exit status of `exact` without arguments.
const EXACT_STATUS: i32 = 3;

/// Valgrind's run of one comparison (cgx's equals it), and the folder that
/// holds the files.
struct Runs {
    valgrind: Run,
    _dir: tempfile::TempDir,
}

/// Builds `source` (in `tests/programs/run/`, or a path from the workspace root
/// when it has a `/`), runs it natively, under Valgrind and under cgx with `-q`,
/// [`OUT_FILE`], `--dump-instr=yes` and `options`, and asserts that both exit
/// with `status` and print what the program prints alone (after the first
/// `skip_lines` lines, which may differ under a profiler), then that they wrote
/// the same files with the same figures ([`assert_same_outputs`]).
fn compare(source: &str, options: &[&str], status: i32, skip_lines: usize) -> Runs {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = if source.contains('/') {
        build_file(&workspace_root().join(source), Kind::NoLibc, dir.path())
    } else {
        build(source, Kind::NoLibc, dir.path())
    };
    let options: Vec<&str> = ["-q", OUT_FILE, "--dump-instr=yes"]
        .iter()
        .chain(options)
        .copied()
        .collect();
    let (_, valgrind, cgx) =
        run_alone_and_profiled(&program, &options, status, skip_lines, dir.path());
    let context = format!("{source}, options {options:?}");
    assert_same_outputs(&valgrind, &cgx, PREFIX, true, &context);
    Runs {
        valgrind,
        _dir: dir,
    }
}

/// [`compare`] on `exact.c`.
fn compare_exact(options: &[&str]) -> Runs {
    compare("exact.c", options, EXACT_STATUS, 0)
}

/// The Ir Valgrind's one file has, to check that an option did what the test
/// wants of it.
fn valgrind_total(runs: &Runs) -> u64 {
    assert_eq!(runs.valgrind.files.len(), 1, "Valgrind's files");
    cgx_tests::run::total_ir(&read(&runs.valgrind.files[0]))
}

/// The names of the functions in Valgrind's files.
fn valgrind_functions(runs: &Runs) -> Vec<String> {
    let mut names: Vec<String> = runs
        .valgrind
        .files
        .iter()
        .flat_map(|file| cgx_tests::run::self_ir(&read(file)).into_keys())
        .collect();
    names.sort();
    names.dedup();
    names
}

#[test]
fn separate_recs_1_gives_valgrinds_figures() {
    let runs = compare_exact(&["--separate-recs=1"]);
    assert!(!valgrind_functions(&runs).contains(&"fib'2".to_string()));
}

#[test]
fn separate_recs_3_gives_valgrinds_figures() {
    let runs = compare_exact(&["--separate-recs=3"]);
    assert!(valgrind_functions(&runs).contains(&"fib'3".to_string()));
}

#[test]
fn skip_direct_rec_yes_gives_valgrinds_figures() {
    // fib's calls of itself count no recursion level.
    let runs = compare_exact(&["--skip-direct-rec=yes"]);
    let functions = valgrind_functions(&runs);
    assert!(
        functions.contains(&"fib".to_string()) && !functions.contains(&"fib'2".to_string()),
        "{functions:?}"
    );
    let runs = compare_exact(&["--skip-direct-rec=yes", "--separate-recs=3"]);
    let functions = valgrind_functions(&runs);
    assert!(
        !functions.iter().any(|name| name.starts_with("fib'")),
        "{functions:?}"
    );
}

#[test]
fn pop_on_jump_gives_valgrinds_figures() {
    // is_even and is_odd jump into each other (gcc -O2): as returns and
    // calls from their caller, for every function or for those named.
    let default = valgrind_functions(&compare_exact(&[]));
    for options in [&["--pop-on-jump"][..], &["--pop-on-jump=is_*"]] {
        let functions = valgrind_functions(&compare_exact(options));
        assert_ne!(
            functions, default,
            "the test's premise: {options:?} changes the names"
        );
    }
}

#[test]
fn separate_callers_2_gives_valgrinds_figures() {
    let runs = compare_exact(&["--separate-callers=2"]);
    assert!(
        valgrind_functions(&runs)
            .iter()
            .any(|name| name.contains('\'') && name.contains("start")),
        "no caller-separated names: {:?}",
        valgrind_functions(&runs)
    );
}

#[test]
fn fn_skip_of_a_recursive_function_gives_valgrinds_figures() {
    let runs = compare_exact(&["--fn-skip=fib"]);
    assert!(!valgrind_functions(&runs)
        .iter()
        .any(|name| name.starts_with("fib")));
}

#[test]
fn fn_skip_of_a_leaf_function_gives_valgrinds_figures() {
    let runs = compare_exact(&["--fn-skip=square"]);
    assert!(!valgrind_functions(&runs).contains(&"square".to_string()));
}

#[test]
fn fn_skip_of_mutually_recursive_functions_gives_valgrinds_figures() {
    let runs = compare_exact(&["--fn-skip=is_*"]);
    assert!(!valgrind_functions(&runs)
        .iter()
        .any(|name| name.starts_with("is_")));
}

/// `--obj-skip=libc.so.6` (cgx's; Valgrind 3.19 refuses it) skips every
/// function of libc, as `--fn-skip` would each: `libc_work.c`'s calls of
/// `qsort` and `printf` leave no libc function in the profile, their cost
/// goes to `main`, and the total stays the same.
#[test]
fn obj_skip_skips_every_function_of_the_object() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("libc_work.c", Kind::C, dir.path());
    let profile = |skip: &[&str], folder: &str| {
        let options: Vec<&str> = ["-q", OUT_FILE].iter().chain(skip).copied().collect();
        let ran = run(
            Profiler::Cgx,
            &options,
            &program,
            &[],
            &dir.path().join(folder),
        );
        assert_status(&ran, 0);
        assert_eq!(ran.files.len(), 1, "{}: files", ran.command);
        cgx_tests::run::self_ir(&read(&ran.files[0]))
    };
    let plain = profile(&[], "plain");
    let skipped = profile(&["--obj-skip=libc.so.6"], "skipped");
    for libc in ["qsort", "printf"] {
        assert!(
            plain.keys().any(|name| name.contains(libc)),
            "{libc} in {plain:?}"
        );
        assert!(
            !skipped.keys().any(|name| name.contains(libc)),
            "{libc} in {skipped:?}"
        );
    }
    assert!(
        skipped["main"] > plain["main"],
        "main: {} then {}",
        plain["main"],
        skipped["main"]
    );
    let total = |table: &std::collections::BTreeMap<String, u64>| table.values().sum::<u64>();
    assert_eq!(total(&skipped), total(&plain));
    assert_eq!(skipped, profile(&["--obj-skip=*/libc.so.6"], "by-path"));
}

/// Valgrind: `--toggle-collect` sets `--collect-atstart=no` (clo.c), so only the
/// cost inside the function is collected.
#[test]
fn toggle_collect_alone_collects_only_inside_the_function() {
    let runs = compare_exact(&["--toggle-collect=strings"]);
    assert!(
        valgrind_total(&runs) < 2_000,
        "Valgrind collected outside strings"
    );
}

/// A later `--collect-atstart=yes` turns collection at start back on.
#[test]
fn toggle_collect_then_collect_atstart_yes_gives_valgrinds_figures() {
    let runs = compare_exact(&["--toggle-collect=strings", "--collect-atstart=yes"]);
    assert!(
        valgrind_total(&runs) > 20_000,
        "Valgrind collected too little"
    );
}

/// `--separate-callers2=fib` names only `fib` after two of its callers.
#[test]
fn separate_callers_of_one_function_gives_valgrinds_figures() {
    let runs = compare_exact(&["--separate-callers2=fib"]);
    let named = |name: &String| name.starts_with("fib") && name.matches('\'').count() >= 2;
    assert!(valgrind_functions(&runs).iter().any(named));
}

/// `--separate-recs3=fib` shows `fib'3`, where Valgrind 3.19 puts that
/// level's costs into another function (`square`: its recursion array is
/// sized by the default of 2); all else is Valgrind's.
#[test]
fn separate_recs_of_one_function_shows_the_third_level() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("exact.c", Kind::NoLibc, dir.path());
    let out = format!("--callgrind-out-file={}/cgx.out", dir.path().display());
    let options = ["-q", &out, "--separate-recs3=fib"];
    let cgx = run(Profiler::Cgx, &options, &program, &[], dir.path());
    assert_status(&cgx, EXACT_STATUS);
    let costs = cgx_tests::run::self_ir(&read(&dir.path().join("cgx.out")));
    assert!(costs.get("fib'3").is_some_and(|&ir| ir > 0), "{costs:?}");
    assert!(costs.get("fib'2").is_some_and(|&ir| ir > 0), "{costs:?}");
    // Only fib has a third level.
    assert!(!costs
        .keys()
        .any(|name| name.ends_with("'3") && !name.starts_with("fib")));
}

/// A dump each time `fib` is entered from outside (not its recursive
/// calls), after each `step`, and zeroing when `strings` is entered: the
/// numbered files, their triggers (`--dump-before=fib`, `--dump-after=step`)
/// and figures are Valgrind's, calls begun before a dump counted in the
/// next.
#[test]
fn dumps_and_zeroing_around_functions_give_valgrinds_files() {
    let runs = compare_exact(&[
        "--dump-before=fib",
        "--dump-after=step",
        "--zero-before=strings",
    ]);
    assert!(
        runs.valgrind.files.len() > 3,
        "Valgrind's dumps: {:?}",
        runs.valgrind.files
    );
}

/// `--collect-bus=yes` on `atomics.c`: `Ge` (and `Ir`) of every instruction,
/// function and call arc are Valgrind's, alone, with the cache and branch
/// simulations (fixed caches), and with the step backend.
#[test]
fn collect_bus_gives_valgrinds_global_bus_events() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("atomics.c", Kind::NoLibc, dir.path());
    let bus = ["-q", "--dump-instr=yes", "--collect-bus=yes"];
    let simulated = [
        "--cache-sim=yes",
        "--branch-sim=yes",
        "--I1=32768,8,64",
        "--D1=32768,8,64",
        "--LL=8388608,16,64",
    ];
    let with_simulations: Vec<&str> = bus.iter().chain(&simulated).copied().collect();
    let with_step: Vec<&str> = bus.iter().chain(&["--backend=step"]).copied().collect();
    for (valgrind_options, cgx_options, events) in [
        (&bus[..], &bus[..], &["Ir", "Ge"][..]),
        (
            &with_simulations,
            &with_simulations,
            &["Ir", "Dr", "Dw", "Bc", "Ge"],
        ),
        (&bus[..], &with_step, &["Ir", "Ge"]),
    ] {
        let run_dir = dir.path().join(cgx_options.len().to_string());
        let valgrind = run(
            Profiler::Valgrind,
            valgrind_options,
            &program,
            &[],
            &run_dir,
        );
        let cgx = run(Profiler::Cgx, cgx_options, &program, &[], &run_dir);
        assert_status(&valgrind, 0);
        assert_status(&cgx, 0);
        let expected = valgrind.profile();
        let ge = expected.parts[0]
            .events
            .names
            .iter()
            .position(|name| name == "Ge");
        let total = expected.parts[0]
            .totals
            .as_ref()
            .zip(ge)
            .map(|(totals, ge)| totals[ge]);
        // 50 lock add + 50 lock inc + 50 xchg + 17 × (lock cmpxchg, lock xadd).
        assert_eq!(total, Some(184), "Valgrind's Ge");
        let context = format!("atomics.c, {cgx_options:?}");
        cgx_tests::run::assert_same_costs(&expected, &cgx.profile(), events, true, true, &context);
    }
}

/// `--dump-every-bb=N`: numbered dumps, each with `Trigger: --dump-every-bb=N`
/// and a time range of N + 1 blocks, then the final one; the parts together
/// have Valgrind's figures (per function, summed over its own parts).
#[test]
fn dump_every_bb_dumps_after_each_n_blocks() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("exact.c", Kind::NoLibc, dir.path());
    let options = ["-q", OUT_FILE, "--dump-every-bb=1000"];
    let summed = |run: &Run| {
        let mut sums = std::collections::BTreeMap::<String, u64>::new();
        for profile in run.profiles() {
            for (function, ir) in cgx_tests::run::self_ir(&profile) {
                *sums.entry(function).or_default() += ir;
            }
        }
        sums
    };
    let valgrind = run(Profiler::Valgrind, &options, &program, &[], dir.path());
    let cgx = run(Profiler::Cgx, &options, &program, &[], dir.path());
    assert_status(&cgx, EXACT_STATUS);
    assert_eq!(
        summed(&cgx),
        summed(&valgrind),
        "self Ir summed over the parts"
    );
    let numbered: Vec<_> = cgx
        .files
        .iter()
        .filter(|file| {
            // callgrind.out.PID.N
            let name = file.file_name().unwrap_or_default().to_string_lossy();
            name.strip_prefix(PREFIX)
                .is_some_and(|rest| rest.contains('.'))
        })
        .collect();
    assert!(numbered.len() >= 3, "dumps: {:?}", cgx.files);
    for file in numbered {
        let text = std::fs::read_to_string(file).expect("a profile");
        assert!(
            text.contains("desc: Trigger: --dump-every-bb=1000\n"),
            "{}",
            file.display()
        );
        let range = text
            .lines()
            .find_map(|line| line.strip_prefix("desc: Timerange: Basic block "))
            .and_then(|range| range.split_once(" - "))
            .and_then(|(from, to)| Some(to.parse::<u64>().ok()? - from.parse::<u64>().ok()?));
        assert_eq!(range, Some(1001), "{}: blocks in the part", file.display());
    }
}

/// Patterns as `--toggle-collect`'s: `is_*` dumps before both of the mutually
/// recursive functions, each time one is entered with neither active.
#[test]
fn dump_before_a_pattern_gives_valgrinds_files() {
    let runs = compare_exact(&["--dump-before=is_*"]);
    assert!(
        runs.valgrind.files.len() > 1,
        "Valgrind's dumps: {:?}",
        runs.valgrind.files
    );
}

/// An earlier `--collect-atstart=yes` does not: `--toggle-collect` sets it to no.
#[test]
fn collect_atstart_yes_then_toggle_collect_gives_valgrinds_figures() {
    let runs = compare_exact(&["--collect-atstart=yes", "--toggle-collect=strings"]);
    assert!(
        valgrind_total(&runs) < 2_000,
        "Valgrind collected outside strings"
    );
}

#[test]
fn toggle_collect_of_a_recursive_function_gives_valgrinds_figures() {
    let runs = compare_exact(&["--collect-atstart=no", "--toggle-collect=fib"]);
    assert!(valgrind_total(&runs) > 0, "Valgrind collected nothing");
}

/// is_even and is_odd call each other by jumps: toggles on entries that are jumps.
#[test]
fn toggle_collect_of_mutually_recursive_functions_gives_valgrinds_figures() {
    let runs = compare_exact(&["--collect-atstart=no", "--toggle-collect=is_even"]);
    assert!(valgrind_total(&runs) > 0, "Valgrind collected nothing");
}

/// requests.c stops and starts instrumentation (which `--instr-atstart=no` has
/// off from the start), zeroes, toggles and dumps: three files.
#[test]
fn instr_atstart_no_gives_valgrinds_dumps() {
    let runs = compare("requests.c", &["--instr-atstart=no"], 0, 1);
    assert_eq!(runs.valgrind.files.len(), 3, "Valgrind's files");
}

#[test]
fn combine_dumps_gives_valgrinds_parts() {
    let runs = compare("requests.c", &["--combine-dumps=yes"], 0, 1);
    assert_eq!(runs.valgrind.files.len(), 1, "Valgrind's files");
    assert_eq!(
        read(&runs.valgrind.files[0]).parts.len(),
        3,
        "Valgrind's parts"
    );
}

/// One file per thread, `callgrind.out.%p-01` and `-02`, each with that thread's
/// figures.
#[test]
fn separate_threads_gives_valgrinds_files_per_thread() {
    let runs = compare("threads.c", &["--separate-threads=yes"], 0, 0);
    assert_eq!(
        name_patterns(&runs.valgrind.files, PREFIX),
        ["callgrind.out.%p-01", "callgrind.out.%p-02"],
        "Valgrind's files"
    );
}

/// The engine's two-thread program, whose `spawn_thread` (assembly) is an untyped
/// (`NOTYPE`) symbol.
#[test]
fn separate_threads_on_the_engines_program_gives_valgrinds_files() {
    compare(
        "engine/tests/programs/threads.c",
        &["--separate-threads=yes"],
        0,
        0,
    );
}

/// Uncompressed names and positions: the same figures as Valgrind's uncompressed
/// files, the files read back equal to cgx's compressed ones, and they have no
/// `(N)` name references nor relative positions.
#[test]
fn uncompressed_files_give_valgrinds_figures_and_read_as_compressed_ones() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("exact.c", Kind::NoLibc, dir.path());
    for positions in [&["--dump-instr=yes"][..], &[]] {
        let compressed: Vec<&str> = ["-q"].iter().chain(positions).copied().collect();
        let mut uncompressed = compressed.clone();
        uncompressed.extend(["--compress-strings=no", "--compress-pos=no"]);
        let instructions = !positions.is_empty();
        let case = dir.path().join(format!("instructions-{instructions}"));
        let valgrind = run(Profiler::Valgrind, &uncompressed, &program, &[], &case);
        assert_status(&valgrind, EXACT_STATUS);
        let cgx = run(Profiler::Cgx, &uncompressed, &program, &[], &case);
        assert_status(&cgx, EXACT_STATUS);
        let context = format!("exact.c, options {uncompressed:?}");
        cgx_tests::run::assert_same_figures(
            &valgrind.profile(),
            &cgx.profile(),
            instructions,
            &context,
        );
        let text = std::fs::read_to_string(&cgx.files[0]).expect("cgx's file is readable");
        for line in text.lines() {
            let compressed_name = line
                .split_once("=(")
                .is_some_and(|(_, rest)| rest.starts_with(|c: char| c.is_ascii_digit()));
            assert!(
                !compressed_name,
                "{context}: a compressed name in cgx's file: {line}"
            );
            assert!(
                !line.starts_with(['+', '-', '*']),
                "{context}: a relative position in cgx's file: {line}"
            );
        }
        let compressed_case = case.join("compressed");
        let cgx_compressed = run(Profiler::Cgx, &compressed, &program, &[], &compressed_case);
        assert_status(&cgx_compressed, EXACT_STATUS);
        // The runs differ in their process ids only.
        let without_pid = |mut profile: cgx_formats::Profile| {
            for part in &mut profile.parts {
                part.header.pid = None;
            }
            profile
        };
        assert_same_profile(
            &without_pid(cgx_compressed.profile()),
            &without_pid(cgx.profile()),
            &context,
        );
        println!("{context}: cgx's file reads back equal to its compressed one");
    }
}

/// With `-q` cgx writes nothing on stderr (as Valgrind, checked too).
#[test]
fn quiet_prints_nothing() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("exact.c", Kind::NoLibc, dir.path());
    for profiler in [Profiler::Valgrind, Profiler::Cgx] {
        let quiet = run(profiler, &["-q"], &program, &[], dir.path());
        assert_status(&quiet, EXACT_STATUS);
        assert_eq!(quiet.stderr, "", "{}: stderr", quiet.command);
        assert_eq!(quiet.files.len(), 1, "{}: files", quiet.command);
    }
}

/// The messages of a run without `-q` as their kinds, in order: the
/// program's lines as they are, the tool's with `==PID==` dropped and
/// numbers left out, after each preamble's first three lines (the tool
/// and its version, which differ).
fn message_kinds(stderr: &str) -> Vec<String> {
    let mut kinds = Vec::new();
    let mut banner = 0;
    for line in stderr.lines() {
        let Some((_, text)) = line
            .strip_prefix("==")
            .and_then(|rest| rest.split_once("== "))
        else {
            kinds.push(line.to_string());
            continue;
        };
        // A preamble starts with the tool's name, then two more lines.
        if text.starts_with("Callgrind, ") {
            banner = 3;
        }
        if banner > 0 {
            banner -= 1;
            continue;
        }
        let kind = match text.split_once(':') {
            Some((label, _)) if ["Collected ", "I   refs"].contains(&label) => label,
            _ => text,
        };
        kinds.push(kind.to_string());
    }
    kinds
}

/// Without `-q` the messages come as Valgrind's: the preamble (its
/// `Command:` line escaped as Valgrind escapes it) before anything the
/// program prints, the blank line before `Events`, and with
/// `--trace-children=yes` a new preamble for the program an `execve` runs.
#[test]
fn the_messages_come_in_valgrinds_order() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let sh = std::path::Path::new("/bin/sh");
    let cases: [(&[&str], &[&str]); 2] = [
        (&[OUT_FILE], &["-c", "echo to stderr >&2"]),
        (
            &[OUT_FILE, "--trace-children=yes"],
            &["-c", "exec /bin/echo 'a b'"],
        ),
    ];
    for (index, (options, args)) in cases.into_iter().enumerate() {
        let folder = dir.path().join(index.to_string());
        let kinds = |profiler| {
            let run = run(profiler, options, sh, args, &folder);
            assert_status(&run, 0);
            message_kinds(&run.stderr)
        };
        let valgrind = kinds(Profiler::Valgrind);
        assert!(
            valgrind
                .iter()
                .any(|kind| kind.starts_with("Command: /bin/sh -c ")),
            "the test's premise: {valgrind:?}"
        );
        assert_eq!(kinds(Profiler::Cgx), valgrind, "sh {args:?}");
    }
}

/// Without `-q`, Callgrind's hint `For interactive control, run
/// 'callgrind_control -h'.` and the closing summary: `Events    : Ir`,
/// `Collected : N` and `I   refs:      N,NNN` with Valgrind's numbers, after
/// `==PID==` with the
/// process id of the file name. On exact.c and on requests.c (whose collected
/// total is less than its instructions).
#[test]
fn the_summary_lines_are_valgrinds() {
    for (source, status) in [("exact.c", EXACT_STATUS), ("requests.c", 0)] {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let program = build(source, Kind::NoLibc, dir.path());
        let summary = |profiler| {
            let run = run(profiler, &[OUT_FILE], &program, &[], dir.path());
            assert_status(&run, status);
            let starts = ["For interactive", "Events ", "Collected ", "I   refs:"];
            let lines = summary_lines(&run.stderr, &starts);
            assert_eq!(
                lines.len(),
                4,
                "{}: summary lines in\n{}",
                run.command,
                run.stderr
            );
            let pids: Vec<u64> = run
                .files
                .iter()
                .map(|file| cgx_tests::run::pid_pattern(file, PREFIX).1)
                .collect();
            for (pid, line) in &lines {
                assert!(
                    pids.contains(pid),
                    "{}: ==PID== {pid} of {line:?} is not the pid of a file {:?}",
                    run.command,
                    run.files
                );
            }
            lines.into_iter().map(|(_, text)| text).collect::<Vec<_>>()
        };
        let expected = summary(Profiler::Valgrind);
        let actual = summary(Profiler::Cgx);
        assert_eq!(actual, expected, "{source}: the summary lines");
        println!("{source}: the summary lines are Valgrind's: {actual:?}");
    }
}

/// With `--log-file=DIR/log.%p` the messages go to the file of the process,
/// nothing to stderr, and its summary lines are Valgrind's; with
/// `--log-fd=1` they go to stdout.
#[test]
fn the_log_goes_where_the_options_say() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("exact.c", Kind::NoLibc, dir.path());
    let starts = ["Command:", "Events ", "Collected ", "I   refs:"];
    let logged = |profiler| {
        let run = run(
            profiler,
            &[OUT_FILE, "--log-file={out}/log.%p"],
            &program,
            &[],
            dir.path(),
        );
        assert_status(&run, EXACT_STATUS);
        assert_eq!(run.stderr, "", "{}: stderr", run.command);
        let profiles: Vec<_> = run
            .files
            .iter()
            .filter(|file| file.to_string_lossy().contains(PREFIX))
            .collect();
        assert_eq!(profiles.len(), 1, "{}: {:?}", run.command, run.files);
        let pid = cgx_tests::run::pid_pattern(profiles[0], PREFIX).1;
        let log = std::fs::read_to_string(run.folder.join(format!("log.{pid}")))
            .unwrap_or_else(|error| panic!("{}: the log of {pid}: {error}", run.command));
        let lines = summary_lines(&log, &starts);
        assert!(lines.iter().all(|(line_pid, _)| *line_pid == pid), "{log}");
        lines.into_iter().map(|(_, text)| text).collect::<Vec<_>>()
    };
    let expected = logged(Profiler::Valgrind);
    assert_eq!(expected.len(), 4, "{expected:?}");
    assert_eq!(logged(Profiler::Cgx), expected);
    let cgx = run(
        Profiler::Cgx,
        &["--log-fd=1", "--callgrind-out-file={out}/fd.out"],
        &program,
        &[],
        dir.path(),
    );
    assert_status(&cgx, EXACT_STATUS);
    assert_eq!(
        summary_lines(&cgx.stdout, &starts).len(),
        4,
        "{}",
        cgx.stdout
    );
    assert_eq!(
        summary_lines(&cgx.stderr, &starts).len(),
        0,
        "{}",
        cgx.stderr
    );
}

/// `%q{VAR}` in the output file name is the value of the environment variable.
#[test]
fn percent_q_in_the_file_name_is_the_variable() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("exact.c", Kind::NoLibc, dir.path());
    let options = [
        "-q",
        "--dump-instr=yes",
        "--callgrind-out-file={out}/callgrind.%q{CGX_TEST_LABEL}.out.%p",
    ];
    let env = [("CGX_TEST_LABEL", "label")];
    let [valgrind, cgx] = [Profiler::Valgrind, Profiler::Cgx].map(|profiler| {
        let run = run_with_env(profiler, &options, &env, &program, &[], dir.path());
        assert_status(&run, EXACT_STATUS);
        run
    });
    let prefix = "callgrind.label.out.";
    assert_eq!(
        name_patterns(&valgrind.files, prefix),
        ["callgrind.label.out.%p"],
        "Valgrind's files"
    );
    assert_same_outputs(&valgrind, &cgx, prefix, true, "exact.c, %q{CGX_TEST_LABEL}");
}
