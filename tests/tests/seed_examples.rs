//! Acceptance 1, continued: the examples of the Callgrind format specification
//! (seed 003, sections 1.4 to 1.6; see `fixtures/README.md`) are read as the
//! specification explains them.

use std::collections::BTreeMap;

use cgx_formats::{canonical, read_path, CanonicalPart, FunctionName, Position, Profile};
use cgx_tests::clients::callgrind_annotate;
use cgx_tests::compare::{assert_same_functions, assert_same_profile};
use cgx_tests::fixture;
use cgx_tests::tables::self_costs;

/// Reads a fixture, panicking with the reader's error if it cannot.
fn read_fixture(name: &str) -> Profile {
    read_path(&fixture(name)).unwrap_or_else(|error| panic!("cgx cannot read {name}: {error}"))
}

/// The only part of a profile, canonical.
fn only_part(profile: &Profile) -> CanonicalPart {
    let mut parts = canonical(profile).parts;
    assert_eq!(parts.len(), 1, "one part");
    parts.remove(0)
}

/// A function of the examples: no object.
fn function(file: &str, name: &str) -> FunctionName {
    (String::new(), file.to_string(), name.to_string())
}

/// A position of a `positions: line` file.
fn line(line: u64) -> Position {
    Position { instr: 0, line }
}

/// 1.4: "main" calls "func1" once and "func2" 3 times; "func1" calls "func2" 2
/// times. Self costs 20, 100, 700; the calls' inclusive costs as written.
#[test]
fn extended_example_1_4() {
    let profile = read_fixture("seed-1.4-extended.out");
    let part = only_part(&profile);
    assert_eq!(part.events.names, ["Instructions"]);
    let main = function("file1.c", "main");
    let func1 = function("file1.c", "func1");
    let func2 = function("file2.c", "func2");
    let costs = BTreeMap::from([
        ((main.clone(), "file1.c".into(), line(16)), vec![20]),
        ((func1.clone(), "file1.c".into(), line(51)), vec![100]),
        ((func2.clone(), "file2.c".into(), line(20)), vec![700]),
    ]);
    assert_eq!(part.costs, costs);
    let calls = BTreeMap::from([
        (
            ((main.clone(), "file1.c".into(), line(16)), func1, line(50)),
            (1, vec![400]),
        ),
        (
            ((main, "file1.c".into(), line(16)), func2.clone(), line(20)),
            (3, vec![400]),
        ),
        (
            (
                (function("file1.c", "func1"), "file1.c".into(), line(51)),
                func2,
                line(20),
            ),
            (2, vec![300]),
        ),
    ]);
    assert_eq!(part.calls, calls);
    assert!(part.jumps.is_empty());
    assert_eq!(profile.parts[0].self_totals(), [820]);
    assert_same_as_callgrind_annotate(&profile, "seed-1.4-extended.out");
}

/// 1.5: the example of 1.4 with compressed names, ids defined where first used.
#[test]
fn name_compression_1_5() {
    let profile = read_fixture("seed-1.5-compressed.out");
    assert_same_profile(
        &read_fixture("seed-1.4-extended.out"),
        &profile,
        "1.5 vs 1.4",
    );
    assert_same_as_callgrind_annotate(&profile, "seed-1.5-compressed.out");
}

/// 1.5: the example of 1.4 with all ids defined after the header, before any cost
/// line ("position specifications … can appear everywhere in the file").
#[test]
fn name_compression_defined_up_front_1_5() {
    let profile = read_fixture("seed-1.5-compressed-upfront.out");
    assert_same_profile(
        &read_fixture("seed-1.4-extended.out"),
        &profile,
        "1.5 (up front) vs 1.4",
    );
    assert_same_as_callgrind_annotate(&profile, "seed-1.5-compressed-upfront.out");
}

/// 1.6: `+3 * 5` and `+1 +1 6` are relative to the previous cost line. (These
/// files have no `fl=`, which callgrind_annotate 3.19 cannot handle: it drops the
/// costs of a function without a file, so there is no comparison with it here.)
#[test]
fn subposition_compression_1_6() {
    let plain = read_fixture("seed-1.6-subpositions.out");
    let part = only_part(&plain);
    let func = function("", "func");
    let at = |instr, line| (func.clone(), String::new(), Position { instr, line });
    let costs = BTreeMap::from([
        (at(0x8000_1234, 90), vec![1]),
        (at(0x8000_1237, 90), vec![5]),
        (at(0x8000_1238, 91), vec![6]),
    ]);
    assert_eq!(part.costs, costs);
    assert!(part.positions.instr && part.positions.line);
    let compressed = read_fixture("seed-1.6-subpositions-compressed.out");
    assert_same_profile(&plain, &compressed, "compressed vs absolute subpositions");
}

/// Checks that callgrind_annotate lists the self costs cgx reads.
fn assert_same_as_callgrind_annotate(profile: &Profile, name: &str) {
    let report = callgrind_annotate(&fixture(name), &[]);
    assert_same_functions(
        &self_costs(profile),
        &report.functions,
        &format!("cgx vs callgrind_annotate {name}"),
    );
}
