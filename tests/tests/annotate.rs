//! Issue 3, `cgx annotate`, acceptance 1 and 2: its figures against Valgrind
//! 3.19's annotate tools.
//!
//! For every profile Valgrind writes for the test programs (Cachegrind with and
//! without cache and branch simulation, Callgrind with its options), for a merge
//! of two runs and for a diff of two runs, the counts cg_annotate or
//! callgrind_annotate prints for each function, each file and each annotated
//! source line equal those `cgx annotate` prints for the same file(s); so do the
//! inclusive costs, callers and callees of `--inclusive=yes --tree=both`. Reports
//! are compared at threshold 0, every function listed.
//!
//! callgrind_annotate 3.19 misreads calls with a count of 0 (`calls=0`: a call in
//! progress when a dump was made), which cgx counts as calls that cost but add no
//! count; the test adds the difference to one side, computed from the profile:
//!
//! - it takes the line after `calls=0` for a cost line: that cost is self cost of
//!   the caller, of the caller's file and of the line of the call;
//! - it leaves these calls out of the callee's inclusive cost (when the callee
//!   has other calls) and out of the call tree.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cgx_formats::{read_path, Profile};
use cgx_tests::annotate::{
    add_row, cg_diff, cg_merge, cgx_annotate, file_totals, nonzero, old_annotate, profile_program,
    zero_count_arcs, zero_count_call_lines, zero_count_calls_to_called, Arcs, CgxReport, Lines,
    OldReport, Table,
};
use cgx_tests::compare::assert_same_rows;
use cgx_tests::tables::zero_count_calls;
use cgx_tests::tests_dir;
use cgx_tests::valgrind::{Case, Tool, CACHEGRIND_SIMULATORS};

cgx_tests::test_each_valgrind_case!(check);

fn check(case: &Case) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    for file in case.run(dir.path()) {
        let cgx = match case.tool {
            Tool::Cachegrind => compare_with_cg_annotate(&[&file], &file, &[]),
            Tool::Callgrind => compare_with_callgrind_annotate(&file),
        };
        // The comparison covered the program's own source.
        let source = format!("/{}.c", case.program.name());
        assert!(
            cgx.annotated.iter().any(|name| name.ends_with(&source))
                && cgx.lines.keys().any(|(name, _)| name.ends_with(&source)),
            "{}: {source} is not annotated",
            file.display()
        );
    }
}

/// Compares `cgx annotate OPTIONS FILES` with `cg_annotate REFERENCE` (FILES
/// itself, or FILES merged or diffed by cg_merge or cg_diff): totals, every
/// function, file and annotated line.
fn compare_with_cg_annotate(files: &[&Path], reference: &Path, options: &[&str]) -> CgxReport {
    let (cgx, old) = compare_summaries_with_cg_annotate(files, reference, options);
    assert_same_rows(
        &nonzero(old.lines),
        &nonzero(cgx.lines.clone()),
        &format!("{files:?}: annotated lines"),
    );
    cgx
}

/// Like [`compare_with_cg_annotate`] without the annotated lines, and returns
/// both reports.
fn compare_summaries_with_cg_annotate(
    files: &[&Path],
    reference: &Path,
    options: &[&str],
) -> (CgxReport, OldReport) {
    let mut all_options = vec!["--threshold=0", "--context=1"];
    all_options.extend(options);
    let cgx = cgx_annotate(files, &all_options);
    let old = old_annotate(
        "cg_annotate",
        reference,
        &["--threshold=0", "--auto=yes", "--context=1"],
    );
    let context = format!("cgx annotate {options:?} {files:?} vs cg_annotate");
    assert_eq!(cgx.events, old.events, "{context}: events");
    assert_eq!(cgx.totals, old.totals, "{context}: totals");
    check_summaries(&cgx, &nonzero(old.functions.clone()), &context);
    check_annotation_summary(&cgx, &context);
    (cgx, old)
}

/// Checks both summaries of `cgx` against the self cost of each function
/// (`expected`, by `file:function`) and their sums by file.
fn check_summaries(cgx: &CgxReport, expected: &Table, context: &str) {
    assert!(!expected.is_empty(), "{context}: no functions");
    assert_same_rows(
        expected,
        &nonzero(cgx.functions.clone()),
        &format!("{context}: File:function rows"),
    );
    assert_same_rows(
        expected,
        &nonzero(cgx.functions_by_name.clone()),
        &format!("{context}: Function:file rows"),
    );
    assert_same_rows(
        &nonzero(file_totals(expected)),
        &nonzero(cgx.files.clone()),
        &format!("{context}: file totals"),
    );
}

/// The rows of the annotation summary add up to the totals.
fn check_annotation_summary(cgx: &CgxReport, context: &str) {
    assert_eq!(cgx.annotation_summary.len(), 6, "{context}: summary rows");
    let mut sum = Table::new();
    for row in &cgx.annotation_summary {
        add_row(&mut sum, String::new(), row);
    }
    assert_eq!(
        sum.get(""),
        Some(&cgx.totals),
        "{context}: annotation summary"
    );
}

/// The sum of the self costs of all parts of `profile`.
fn self_totals(profile: &Profile) -> Vec<i64> {
    let mut totals = Table::new();
    for part in &profile.parts {
        let part_totals: Vec<i64> = part.self_totals().iter().map(|&c| c as i64).collect();
        add_row(&mut totals, String::new(), &part_totals);
    }
    totals.remove("").unwrap_or_default()
}

/// Compares `cgx annotate --inclusive=yes --tree=both FILE` with callgrind_annotate
/// on FILE: self costs, files and lines, inclusive costs, callers and callees.
fn compare_with_callgrind_annotate(file: &Path) -> CgxReport {
    let profile = read_path(file).expect("cgx reads the profile");
    let cgx = cgx_annotate(
        &[file],
        &[
            "--threshold=0",
            "--context=1",
            "--inclusive=yes",
            "--tree=both",
        ],
    );
    let context = format!("{}", file.display());
    assert_eq!(cgx.totals, self_totals(&profile), "{context}: totals");
    check_summaries(&cgx, &nonzero(cgx.functions.clone()), &context);
    check_annotation_summary(&cgx, &context);

    // Self costs and lines; callgrind_annotate adds the cost of calls=0 lines.
    let old = old_annotate(
        "callgrind_annotate",
        file,
        &["--threshold=100", "--auto=yes", "--context=1"],
    );
    assert_eq!(cgx.events, old.events, "{context}: events");
    let mut functions = cgx.functions.clone();
    for (name, counts) in zero_count_calls(&profile) {
        let counts: Vec<i64> = counts.iter().map(|&c| c as i64).collect();
        add_row(&mut functions, name, &counts);
    }
    assert_same_rows(
        &nonzero(old.functions.clone()),
        &nonzero(functions),
        &format!("{context}: self costs (+ calls=0 costs) vs callgrind_annotate"),
    );
    let mut lines = cgx.lines.clone();
    for (key, counts) in zero_count_call_lines(&profile) {
        if cgx.annotated.contains(&key.0) {
            add_row(&mut lines, key, &counts);
        }
    }
    assert_same_rows(
        &nonzero(old.lines.clone()),
        &nonzero(lines),
        &format!("{context}: annotated lines (+ calls=0 costs) vs callgrind_annotate"),
    );

    // Inclusive costs and the call tree.
    let old = old_annotate(
        "callgrind_annotate",
        file,
        &[
            "--threshold=100",
            "--auto=no",
            "--inclusive=yes",
            "--tree=both",
        ],
    );
    let mut inclusive = old.functions.clone();
    for (name, costs) in zero_count_calls_to_called(&profile) {
        add_row(&mut inclusive, name, &costs);
    }
    assert_same_rows(
        &nonzero(inclusive),
        &nonzero(cgx.call_functions.clone()),
        &format!(
            "{context}: inclusive costs vs callgrind_annotate --inclusive=yes (+ calls=0 costs)"
        ),
    );
    let mut arcs = with_counts(&old.arcs);
    for (key, mut costs) in zero_count_arcs(&profile) {
        costs.push(0);
        add_row(&mut arcs, key, &costs);
    }
    assert_same_rows(
        &arcs,
        &with_counts(&cgx.arcs),
        &format!(
            "{context}: calls (costs, then count) vs callgrind_annotate --tree=both (+ calls=0)"
        ),
    );
    assert!(
        !cgx.arcs.is_empty() && cgx.call_functions.len() >= cgx.functions.len() / 2,
        "{context}: the call graph section is there"
    );
    cgx
}

/// Each arc's costs followed by its count.
fn with_counts(arcs: &Arcs) -> BTreeMap<(String, String), Vec<i64>> {
    arcs.iter()
        .map(|(key, (cost, count))| {
            let mut row = cost.clone();
            row.push(*count);
            (key.clone(), row)
        })
        .collect()
}

/// A merge of two runs: `cgx annotate A B` against cg_annotate on `cg_merge A B`.
#[test]
fn merge_of_two_runs() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let runs: Vec<PathBuf> = ["1", "2"]
        .iter()
        .map(|name| {
            let run_dir = dir.path().join(name);
            std::fs::create_dir(&run_dir).expect("a folder");
            CACHEGRIND_SIMULATORS.run(&run_dir).remove(0)
        })
        .collect();
    let merged = dir.path().join("merged.out");
    cg_merge(&[&runs[0], &runs[1]], &merged);
    compare_with_cg_annotate(&[&runs[0], &runs[1]], &merged, &[]);
}

/// The C source of a test program.
fn source(name: &str) -> PathBuf {
    tests_dir().join("programs").join(name)
}

/// A diff of two runs of `calls.c`, built with -O1 and -O2: `cgx annotate --diff A B`
/// against cg_annotate on `cg_diff A B`.
#[test]
fn diff_of_two_runs() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let options = ["--cache-sim=yes", "--branch-sim=yes"];
    let first = profile_program(
        &source("calls.c"),
        &dir.path().join("O1"),
        &["-O1"],
        "cachegrind",
        &options,
    );
    let second = profile_program(
        &source("calls.c"),
        &dir.path().join("O2"),
        &["-O2"],
        "cachegrind",
        &options,
    );
    let diff = dir.path().join("diff.out");
    cg_diff(&first, &second, &[], &diff);
    let (cgx, _) = compare_summaries_with_cg_annotate(&[&first, &second], &diff, &["--diff"]);
    // cg_diff 3.19 diffs functions, not lines: the lines are cg_annotate's lines
    // of the second run minus those of the first.
    let mut lines = Lines::new();
    for (file, sign) in [(&first, -1), (&second, 1)] {
        let report = old_annotate("cg_annotate", file, &["--threshold=0", "--context=1"]);
        for (key, counts) in report.lines {
            let counts: Vec<i64> = counts.iter().map(|c| c * sign).collect();
            add_row(&mut lines, key, &counts);
        }
    }
    assert_same_rows(
        &nonzero(lines),
        &nonzero(cgx.lines.clone()),
        "--diff: annotated lines vs cg_annotate's of each run",
    );
    assert!(
        cgx.functions.values().any(|counts| counts[0] < 0)
            && cgx.functions.values().any(|counts| counts[0] > 0),
        "the builds differ both ways"
    );
}

/// Callgrind files merged: the three files of `--separate-threads=yes` (one per
/// thread) against the sum of callgrind_annotate's reports on each: self costs by
/// function and by file, and annotated lines.
#[test]
fn merge_of_callgrind_files() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let files = cgx_tests::valgrind::CALLGRIND_THREADS.run(dir.path());
    let paths: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let cgx = cgx_annotate(&paths, &["--threshold=0", "--context=1"]);
    let (mut functions, mut lines) = (Table::new(), Lines::new());
    for file in &files {
        let old = old_annotate(
            "callgrind_annotate",
            file,
            &["--threshold=100", "--auto=yes", "--context=1"],
        );
        for (name, counts) in old.functions {
            add_row(&mut functions, name, &counts);
        }
        for (key, counts) in old.lines {
            add_row(&mut lines, key, &counts);
        }
    }
    let context = format!("cgx annotate {paths:?} vs callgrind_annotate on each");
    check_summaries(&cgx, &nonzero(functions), &context);
    assert_same_rows(
        &nonzero(lines),
        &nonzero(cgx.lines.clone()),
        &format!("{context}: annotated lines"),
    );
    assert!(
        cgx.lines
            .keys()
            .any(|(file, _)| file.ends_with("threads.c")),
        "threads.c is annotated"
    );
    check_annotation_summary(&cgx, &context);
}

/// `--diff` of two copies of a program in different folders, paired by
/// `--mod-filename` (and `--mod-funcname`): the same figures as cg_annotate on
/// `cg_diff` with the same rewrites; the identical copies of the source are
/// annotated, the copies that differ are not.
#[test]
fn diff_with_rewritten_names() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let mut profiles = Vec::new();
    for (copy, flags) in [("a", "-O1"), ("b", "-O2")] {
        let folder = dir.path().join(copy);
        std::fs::create_dir(&folder).expect("a folder");
        for name in ["calls.c", "mix.h"] {
            std::fs::copy(source(name), folder.join(name)).expect("the source is copied");
        }
        if copy == "b" {
            let mix = folder.join("mix.h");
            let text = std::fs::read_to_string(&mix).expect("mix.h");
            std::fs::write(&mix, format!("{text}/* changed */\n")).expect("mix.h");
        }
        profiles.push(profile_program(
            &folder.join("calls.c"),
            &folder,
            &[flags],
            "cachegrind",
            &["--cache-sim=no"],
        ));
    }
    let rewrites = [
        r"--mod-filename=s/\/[ab]\//\/N\//",
        "--mod-funcname=s/^main$/MAIN/",
    ];
    let diff = dir.path().join("diff.out");
    cg_diff(&profiles[0], &profiles[1], &rewrites, &diff);
    let (cgx, _) = compare_summaries_with_cg_annotate(
        &[&profiles[0], &profiles[1]],
        &diff,
        &["--diff", rewrites[0], rewrites[1]],
    );
    let folder = dir.path().join("N").display().to_string();
    let calls = format!("{folder}/calls.c");
    let mix = format!("{folder}/mix.h");
    assert!(
        cgx.functions.contains_key(&format!("{calls}:MAIN")),
        "{:?}",
        cgx.functions.keys()
    );
    assert!(cgx.annotated.contains(&calls), "{:?}", cgx.annotated);
    assert!(
        cgx.unannotated
            .get(&mix)
            .is_some_and(|reason| reason.contains("not identical")),
        "{:?}",
        cgx.unannotated
    );
}
