//! Acceptance 1: cgx reads every profile Valgrind 3.19 writes correctly.
//!
//! For each [`Case`] (tool and options), the profiles are generated on the fly and
//! read with `cgx_formats::read_path`; then
//! - the self totals of every part equal the file's `totals:` and `summary:` lines
//!   (but see [`Case::summary_is_sum`]);
//! - the self cost of every function, for every event, equals what
//!   callgrind_annotate (Callgrind files) or cg_annotate (Cachegrind files) prints
//!   for the same file;
//! - the functions the program is written to show are there.

use std::fs;
use std::path::Path;

use cgx_formats::{read_path, Profile};
use cgx_tests::clients::{callgrind_annotate, cg_annotate};
use cgx_tests::compare::assert_same_functions;
use cgx_tests::tables::{count_lines, has_landmark, self_costs, sum, zero_count_calls, Functions};
use cgx_tests::valgrind::{self, Case, Tool};

cgx_tests::test_each_valgrind_case!(check);

/// `--dump-bb=yes`, `--dump-bbs=yes` and `--mangle-names=no` are debugging options
/// of Callgrind (in neither `--help` nor `--help-debug`) whose files are not in the
/// format KCachegrind and callgrind_annotate read: `positions: bb line`, `bb=ADDR
/// N M` lines, `rec=N` lines. cgx does not read them either; it must say where and
/// why rather than misread them.
#[test]
fn callgrind_debug_dumps_are_rejected_clearly() {
    let cases: [(&Case, &[&str]); 3] = [
        (
            &valgrind::CALLGRIND_DUMP_BB,
            &["unknown position kind 'bb'"],
        ),
        (&valgrind::CALLGRIND_DUMP_BBS, &["unknown line 'bb=0x"]),
        // Valgrind's file is also inconsistent here: from run to run it may refer
        // to compressed ids it never defined (KCachegrind reports the same lines)
        // before the first rec= line.
        (
            &valgrind::CALLGRIND_UNMANGLED,
            &["unknown line 'rec=", "is used before it is defined"],
        ),
    ];
    for (case, reasons) in cases {
        let dir = tempfile::tempdir().expect("a temporary folder");
        for file in case.run(dir.path()) {
            let error = match read_path(&file) {
                Ok(_) => panic!(
                    "{} was read, but cgx cannot know what it means",
                    file.display()
                ),
                Err(error) => error.to_string(),
            };
            let place = format!("{}:", file.display());
            let line_number = error[place.len()..].split(':').next().unwrap_or("");
            assert!(
                error.starts_with(&place)
                    && line_number.parse::<u64>().is_ok()
                    && reasons.iter().any(|reason| error.contains(reason)),
                "{case:?}: {error}"
            );
        }
    }
}

fn check(case: &Case) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let mut all_functions = Functions::new();
    for file in case.run(dir.path()) {
        let profile =
            read_path(&file).unwrap_or_else(|error| panic!("cgx cannot read it: {error}"));
        assert_eq!(profile.parts.len(), case.parts, "{}", file.display());
        check_totals(&profile, &file, case);
        let functions = match case.tool {
            Tool::Callgrind => check_against_callgrind_annotate(&profile, &file),
            Tool::Cachegrind => check_against_cg_annotate(&profile, &file),
        };
        all_functions = sum(&all_functions, &functions);
    }
    for landmark in case.program.landmarks() {
        assert!(
            has_landmark(&all_functions, landmark),
            "no {landmark} in {:?}",
            all_functions.keys()
        );
    }
}

/// Checks that each part's self totals equal its `totals:` line (Callgrind) and
/// its `summary:` line (where that is the sum, see [`Case::summary_is_sum`]), and
/// that the reader keeps both lines as written.
fn check_totals(profile: &Profile, file: &Path, case: &Case) {
    let text = fs::read_to_string(file).expect("a readable profile");
    let summaries = count_lines(&text, "summary:");
    let totals = count_lines(&text, "totals:");
    assert_eq!(summaries.len(), profile.parts.len(), "summary: lines");
    let expected_totals_lines = match case.tool {
        Tool::Callgrind => profile.parts.len(),
        Tool::Cachegrind => 0,
    };
    assert_eq!(totals.len(), expected_totals_lines, "totals: lines");
    let summary_is_sum = case.summary_is_sum();
    for (index, part) in profile.parts.iter().enumerate() {
        let context = format!("part {} of {}", index + 1, file.display());
        let events = part.events.len();
        let self_totals = part.self_totals();
        assert_eq!(self_totals.len(), events, "{context}");
        assert_eq!(
            part.summary,
            Some(padded(&summaries[index], events)),
            "{context}: summary: as read"
        );
        if summary_is_sum {
            assert_eq!(self_totals, summaries[index], "{context}: summary:");
        }
        if let Some(totals) = totals.get(index) {
            assert_eq!(
                part.totals,
                Some(totals.clone()),
                "{context}: totals: as read"
            );
            assert_eq!(&self_totals, totals, "{context}: totals:");
        }
    }
}

/// `counts` with zeros added up to `events` counts.
fn padded(counts: &[u64], events: usize) -> Vec<u64> {
    let mut counts = counts.to_vec();
    counts.resize(events.max(counts.len()), 0);
    counts
}

/// Compares per-function self costs with callgrind_annotate's table and returns
/// the table.
///
/// Two quirks of callgrind_annotate 3.19 (checked on Callgrind's files with
/// `CALLGRIND_DUMP_STATS`) shape what it prints:
/// - it reads a file of several parts (`--combine-dumps=yes`) as one: it warns
///   "line malformed" on `part:`, `pid:`, `desc:` … lines after the first part,
///   adds the functions of all parts together and prints the last `summary:` as
///   PROGRAM TOTALS;
/// - it takes the line after `calls=0` for a cost line, so the inclusive cost of
///   zero-count calls (in dumps after the first: calls made before a dump that
///   return after it) counts as self cost of the caller.
///
/// So its table must equal cgx's self costs summed over all parts plus the
/// inclusive costs of zero-count calls.
fn check_against_callgrind_annotate(profile: &Profile, file: &Path) -> Functions {
    let report = callgrind_annotate(file, &[]);
    let last = profile.parts.last().expect("a profile has parts");
    assert_eq!(report.events, last.events.names);
    // It prints the (last) summary: line as PROGRAM TOTALS.
    assert_eq!(Some(report.totals), last.summary, "PROGRAM TOTALS");
    let expected = sum(&self_costs(profile), &zero_count_calls(profile));
    assert_same_functions(
        &expected,
        &report.functions,
        &format!("cgx vs callgrind_annotate {}", file.display()),
    );
    report.functions
}

/// Compares per-function self costs with cg_annotate's table and returns the
/// table.
fn check_against_cg_annotate(profile: &Profile, file: &Path) -> Functions {
    let report = cg_annotate(file);
    let [part] = profile.parts.as_slice() else {
        panic!("a Cachegrind file has one part");
    };
    assert_eq!(report.events, part.events.names);
    assert_eq!(report.totals, part.self_totals(), "PROGRAM TOTALS");
    assert_same_functions(
        &self_costs(profile),
        &report.functions,
        &format!("cgx vs cg_annotate {}", file.display()),
    );
    report.functions
}
