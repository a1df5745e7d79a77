//! Inclusive cache use, against figures computed by hand:
//! `streams.c` reads one byte of each of 128 array lines in `stream`, called
//! from `near` (start -> near -> stream) and from `far` (start -> far ->
//! middle -> stream), with a 16-line D1 and a large I1 and LL. The program's
//! comment derives the expected inclusive AcCost/SpLoss of both arcs into
//! `stream`; they are only known when the lines leave the cache, long after
//! the calls returned, so this checks the back-dating tree. Also: every
//! function's self cost equals Valgrind's, and with
//! `--cacheuse-inclusive=no` the whole profile is Valgrind's (zero inclusive
//! cache use).

use std::collections::BTreeMap;

use cgx_formats::{canonical, Profile};
use cgx_tests::run::{build, run, Kind, Profiler};

/// A 32 KiB I1 and an 8 MiB LL hold all code and data; the 1 KiB D1 does
/// not hold the 8 KiB array.
const CACHES: [&str; 4] = [
    "--cacheuse=yes",
    "--I1=32768,8,64",
    "--D1=1024,2,64",
    "--LL=8388608,16,64",
];

/// The inclusive costs of every caller -> callee arc, by event name.
fn arc_costs(profile: &Profile) -> BTreeMap<(String, String), BTreeMap<String, u64>> {
    let mut arcs: BTreeMap<(String, String), BTreeMap<String, u64>> = BTreeMap::new();
    for part in canonical(profile).parts {
        for (((caller, _, _), callee, _), (_, inclusive)) in &part.calls {
            let costs = arcs
                .entry((caller.2.clone(), callee.2.clone()))
                .or_default();
            for (name, value) in part.events.names.iter().zip(inclusive) {
                *costs.entry(name.clone()).or_default() += value;
            }
        }
    }
    arcs
}

/// Self costs of every function, by event name.
fn self_costs(profile: &Profile) -> BTreeMap<String, BTreeMap<String, u64>> {
    let mut functions: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for part in canonical(profile).parts {
        for ((function, _, _), costs) in &part.costs {
            let entry = functions.entry(function.2.clone()).or_default();
            for (name, value) in part.events.names.iter().zip(costs) {
                *entry.entry(name.clone()).or_default() += value;
            }
        }
    }
    functions
}

#[test]
fn back_dating_gives_the_hand_computed_inclusive_cache_use() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("streams.c", Kind::NoLibc, dir.path());
    let mut options = vec!["-q"];
    options.extend(CACHES);
    let cgx = run(Profiler::Cgx, &options, &program, &[], dir.path());
    let arcs = arc_costs(&cgx.profile());
    let arc = |caller: &str, event: &str| {
        arcs.get(&(caller.to_string(), "stream".to_string()))
            .and_then(|costs| costs.get(event))
            .copied()
            .unwrap_or(0)
    };
    // far's pass: 128 lines used once (1,000 and 62 each), plus the line of
    // stream's return address, reloaded by its `ret` after the array pushed
    // it out, used once for 8 bytes (1,000 and 56). Its LL lines belong to the
    // first pass.
    assert_eq!(
        arc("middle", "AcCost1"),
        129_000,
        "middle -> stream AcCost1"
    );
    assert_eq!(arc("middle", "SpLoss1"), 7_992, "middle -> stream SpLoss1");
    assert_eq!(arc("middle", "AcCost2"), 0, "middle -> stream AcCost2");
    assert_eq!(arc("middle", "SpLoss2"), 0, "middle -> stream SpLoss2");
    // near's pass loaded the LL lines: both passes' use (count 2: 500 each,
    // one byte: 62) is charged to it at the end.
    assert_eq!(arc("near", "AcCost2"), 64_000, "near -> stream AcCost2");
    assert_eq!(arc("near", "SpLoss2"), 7_936, "near -> stream SpLoss2");
    assert!(arc("near", "AcCost1") >= 128_000, "near -> stream AcCost1");
    // Up the chains, each caller's arc holds at least its callee's.
    let up = |caller: &str, callee: &str, event: &str| {
        arcs.get(&(caller.to_string(), callee.to_string()))
            .and_then(|costs| costs.get(event))
            .copied()
            .unwrap_or(0)
    };
    for event in ["AcCost1", "SpLoss1"] {
        assert!(
            up("far", "middle", event) >= arc("middle", event),
            "far -> middle {event}"
        );
        assert!(
            up("start", "far", event) >= up("far", "middle", event),
            "start -> far {event}"
        );
    }
    println!(
        "streams.c: middle -> stream AcCost1 {} SpLoss1 {}; near -> stream AcCost2 {} SpLoss2 {}",
        arc("middle", "AcCost1"),
        arc("middle", "SpLoss1"),
        arc("near", "AcCost2"),
        arc("near", "SpLoss2")
    );
}

#[test]
fn self_costs_are_valgrinds_and_without_back_dating_so_is_everything() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("streams.c", Kind::NoLibc, dir.path());
    let mut options = vec!["-q"];
    options.extend(CACHES);
    let valgrind = run(Profiler::Valgrind, &options, &program, &[], dir.path());
    let cgx = run(Profiler::Cgx, &options, &program, &[], dir.path());
    let expected = self_costs(&valgrind.profile());
    assert_eq!(
        self_costs(&cgx.profile()),
        expected,
        "self costs of every event"
    );
    assert!(
        expected
            .get("stream")
            .and_then(|costs| costs.get("AcCost1"))
            > Some(&100_000),
        "the test program streams: {expected:?}"
    );
    let mut plain = options.clone();
    plain.push("--cacheuse-inclusive=no");
    let cgx = run(Profiler::Cgx, &plain, &program, &[], dir.path());
    assert_eq!(
        canonical(&cgx.profile()).parts[0].calls,
        canonical(&valgrind.profile()).parts[0].calls,
        "calls= lines with --cacheuse-inclusive=no"
    );
    println!(
        "streams.c: self costs of {} functions equal Valgrind's; with \
         --cacheuse-inclusive=no the calls= lines too",
        expected.len()
    );
}
