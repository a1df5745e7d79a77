//! Acceptance 3 of `cgx run`: Valgrind's client requests (callgrind.h) in a
//! `-static -nostdlib` program (`requests.c`, about 8,000 instructions):
//! RUNNING_ON_VALGRIND is non-zero under cgx as under Valgrind (0 without a
//! profiler), and START/STOP_INSTRUMENTATION, ZERO_STATS, TOGGLE_COLLECT,
//! DUMP_STATS and DUMP_STATS_AT give the files Valgrind gives (same names, part
//! numbers and triggers), each with Valgrind's figures: total Ir, self Ir of each
//! function, count and inclusive Ir of each call arc, Ir of each instruction.
//! cgx's files load in callgrind_annotate and KCachegrind.

use cgx_tests::run::{
    assert_clients_load, assert_same_figures, assert_status, build, native, part_headers, run,
    Kind, Profiler, Run,
};

/// The number the program prints after `running on valgrind: `.
fn running_on_valgrind(run: &Run) -> u64 {
    run.stdout
        .lines()
        .find_map(|line| line.strip_prefix("running on valgrind: "))
        .and_then(|number| number.trim().parse().ok())
        .unwrap_or_else(|| panic!("{}: no number in stdout:\n{}", run.command, run.stdout))
}

/// The output after the first line.
fn rest(run: &Run) -> &str {
    run.stdout.split_once('\n').map_or("", |(_, rest)| rest)
}

/// The file names of a run's profiles.
fn names(run: &Run) -> Vec<String> {
    run.files
        .iter()
        .map(|file| {
            file.file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

#[test]
fn client_requests_give_valgrinds_dumps() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("requests.c", Kind::NoLibc, dir.path());
    let alone = native(&program, &[], dir.path());
    assert_status(&alone, 0);
    assert_eq!(running_on_valgrind(&alone), 0);
    let options = ["-q", "--dump-instr=yes"];
    let valgrind = run(Profiler::Valgrind, &options, &program, &[], dir.path());
    assert_status(&valgrind, 0);
    assert_ne!(running_on_valgrind(&valgrind), 0);
    assert_eq!(
        names(&valgrind),
        ["callgrind.out", "callgrind.out.1", "callgrind.out.2"],
        "Valgrind's files"
    );

    let cgx = run(Profiler::Cgx, &options, &program, &[], dir.path());
    assert_status(&cgx, 0);
    let running = running_on_valgrind(&cgx);
    assert_ne!(running, 0, "RUNNING_ON_VALGRIND under cgx");
    assert_eq!(rest(&cgx), rest(&alone), "{}: stdout", cgx.command);
    println!("RUNNING_ON_VALGRIND is {running} under cgx; the rest of stdout as without it");
    assert_eq!(
        names(&cgx),
        names(&valgrind),
        "cgx's files (one per dump, as Valgrind)\nstderr:\n{}",
        cgx.stderr
    );
    for (expected_file, actual_file) in valgrind.files.iter().zip(&cgx.files) {
        let (expected, actual) = (
            cgx_tests::run::read(expected_file),
            cgx_tests::run::read(actual_file),
        );
        let context = format!(
            "requests.c, {}",
            actual_file
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
        );
        let headers = part_headers;
        assert_eq!(
            headers(&actual),
            headers(&expected),
            "{context}: part numbers and triggers"
        );
        println!(
            "{context}: part numbers and triggers {:?}",
            headers(&actual)
        );
        assert_same_figures(&expected, &actual, true, &context);
    }
    assert_clients_load(&cgx.files, "requests.c");
}
