//! `cgx run` with Callgrind's `--simulate-wb=yes` and `--simulate-hwpref=yes`
//! (with `--cache-sim=yes`) against Valgrind with the same options, on
//! `exact.c` and `long.c` (`-static -nostdlib`: every data address is the
//! same under Valgrind and natively), with fixed caches:
//!
//! - every figure of every event equals Valgrind's: the sums, the `summary:`
//!   and `totals:` lines, each function's self cost, each call arc's count
//!   and inclusive cost, each instruction's cost;
//! - the options matter on these programs: Valgrind counts dirty misses with
//!   write-back, and other LL misses with prefetch than without;
//! - the write-back LL's tags keep no address bits above bit 31, as
//!   Valgrind's (`far_alias.c`, its own function's figures);
//! - with `--cacheuse=yes` Valgrind turns both off, with a warning each: cgx
//!   writes the profile of `--cacheuse=yes` alone and the same warnings.
//!
//! With `--branch-sim=yes` the simulation takes the general path of a block
//! run; without it the path of cache simulation alone: both are covered.

use std::path::Path;

use cgx_formats::Profile;
use cgx_tests::run::{
    assert_same_costs, assert_status, build, event_totals, run, run_alone_and_profiled,
    self_costs_of, Kind, Profiler, Run,
};

/// The exit status of `exact` without arguments.
const EXACT_STATUS: i32 = 3;

/// The exit status of `long`.
const LONG_STATUS: i32 = 5;

/// Small caches with an LL of a few sets: `exact.c` evicts dirty LL lines.
const SMALL: [&str; 3] = ["--I1=256,2,64", "--D1=256,2,64", "--LL=1024,2,64"];

/// Small L1s and an LL large enough to keep prefetched lines a while.
const PREFETCHING: [&str; 3] = ["--I1=256,2,64", "--D1=256,2,64", "--LL=16384,4,64"];

/// Callgrind's events with `--simulate-wb=yes`, in its order.
const WB_EVENTS: [&str; 12] = [
    "Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw", "ILdmr", "DLdmr", "DLdmw",
];

/// The same with `--branch-sim=yes`.
const WB_BRANCH_EVENTS: [&str; 16] = [
    "Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw", "ILdmr", "DLdmr", "DLdmw",
    "Bc", "Bcm", "Bi", "Bim",
];

/// Callgrind's events with the cache simulation alone (and prefetch).
const CACHE_EVENTS: [&str; 9] = [
    "Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw",
];

/// The events of `--cacheuse=yes`.
const CACHEUSE_EVENTS: [&str; 13] = [
    "Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw", "AcCost1", "SpLoss1",
    "AcCost2", "SpLoss2",
];

/// The dirty misses.
const DIRTY_EVENTS: [&str; 3] = ["ILdmr", "DLdmr", "DLdmw"];

/// The LL misses.
const LL_EVENTS: [&str; 3] = ["ILmr", "DLmr", "DLmw"];

/// `options` followed by `more`.
fn with<'a>(options: &[&'a str], more: &[&'a str]) -> Vec<&'a str> {
    options.iter().chain(more).copied().collect()
}

/// Runs `source` (built without libc into `dir`, exiting with `status`)
/// under Valgrind and cgx, both with `-q` and `options`; checks the exit
/// statuses and that cgx's stdout is the program's. Returns both runs.
fn run_both(source: &str, status: i32, options: &[&str], dir: &Path) -> (Run, Run) {
    let program = build(source, Kind::NoLibc, dir);
    let options = with(&["-q"], options);
    let (_, valgrind, cgx) = run_alone_and_profiled(&program, &options, status, 0, dir);
    (valgrind, cgx)
}

/// `source` under both with `options`: the events are `events`, and every
/// figure of them equals Valgrind's. Returns Valgrind's profile.
fn equals_valgrind(source: &str, status: i32, options: &[&str], events: &[&str]) -> Profile {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let (valgrind, cgx) = run_both(source, status, options, dir.path());
    let (expected, actual) = (valgrind.profile(), cgx.profile());
    let context = format!("{source}, callgrind {options:?}");
    assert_eq!(
        expected.parts[0].events.names, events,
        "{context}: Valgrind's events"
    );
    assert_eq!(
        actual.parts[0].events.names, events,
        "{context}: cgx's events"
    );
    assert_same_costs(&expected, &actual, events, true, true, &context);
    println!(
        "{context}: totals {events:?} {:?}",
        event_totals(&expected, events)
    );
    expected
}

/// Asserts that Valgrind counted dirty misses in `profile`.
fn assert_dirty_misses(profile: &Profile, context: &str) {
    let dirty = event_totals(profile, &DIRTY_EVENTS);
    assert!(
        dirty[1] > 0 && dirty[2] > 0,
        "{context}: Valgrind counts too few dirty misses to check them: {dirty:?}"
    );
}

#[test]
fn write_back_equals_valgrind() {
    let options = with(
        &["--cache-sim=yes", "--simulate-wb=yes", "--dump-instr=yes"],
        &SMALL,
    );
    let valgrind = equals_valgrind("exact.c", EXACT_STATUS, &options, &WB_EVENTS);
    assert_dirty_misses(&valgrind, "exact.c, write-back");
}

#[test]
fn write_back_with_branch_simulation_equals_valgrind() {
    let options = with(
        &[
            "--cache-sim=yes",
            "--simulate-wb=yes",
            "--branch-sim=yes",
            "--dump-instr=yes",
        ],
        &SMALL,
    );
    let valgrind = equals_valgrind("exact.c", EXACT_STATUS, &options, &WB_BRANCH_EVENTS);
    assert_dirty_misses(&valgrind, "exact.c, write-back and branches");
}

/// Valgrind's totals of the LL misses of `exact.c` with `options`.
fn valgrind_ll_misses(options: &[&str]) -> Vec<u64> {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("exact.c", Kind::NoLibc, dir.path());
    let options = with(&["-q"], options);
    let valgrind = run(Profiler::Valgrind, &options, &program, &[], dir.path());
    assert_status(&valgrind, EXACT_STATUS);
    event_totals(&valgrind.profile(), &LL_EVENTS)
}

#[test]
fn prefetch_equals_valgrind() {
    let options = with(
        &[
            "--cache-sim=yes",
            "--simulate-hwpref=yes",
            "--dump-instr=yes",
        ],
        &PREFETCHING,
    );
    let valgrind = equals_valgrind("exact.c", EXACT_STATUS, &options, &CACHE_EVENTS);
    let without = valgrind_ll_misses(&with(&["--cache-sim=yes"], &PREFETCHING));
    let prefetched = event_totals(&valgrind, &LL_EVENTS);
    println!("exact.c, LL misses {LL_EVENTS:?}: prefetch {prefetched:?}, without {without:?}");
    assert_ne!(
        prefetched, without,
        "the prefetch changes no LL miss of exact.c under Valgrind"
    );
}

#[test]
fn prefetch_with_branch_simulation_equals_valgrind() {
    let options = with(
        &[
            "--cache-sim=yes",
            "--simulate-hwpref=yes",
            "--branch-sim=yes",
            "--dump-instr=yes",
        ],
        &PREFETCHING,
    );
    let events = with(&CACHE_EVENTS, &["Bc", "Bcm", "Bi", "Bim"]);
    equals_valgrind("exact.c", EXACT_STATUS, &options, &events);
}

#[test]
fn write_back_and_prefetch_equal_valgrind() {
    // The prefetch references the write-back LL as Valgrind does (block
    // numbers against its tags): the LL misses are Valgrind's only so.
    for caches in [SMALL, PREFETCHING] {
        let options = with(
            &[
                "--cache-sim=yes",
                "--simulate-wb=yes",
                "--simulate-hwpref=yes",
                "--dump-instr=yes",
            ],
            &caches,
        );
        let valgrind = equals_valgrind("exact.c", EXACT_STATUS, &options, &WB_EVENTS);
        let without = valgrind_ll_misses(&with(&["--cache-sim=yes", "--simulate-wb=yes"], &caches));
        println!(
            "exact.c {caches:?}, LL misses {LL_EVENTS:?} with write-back: prefetch {:?}, \
             without {without:?}",
            event_totals(&valgrind, &LL_EVENTS)
        );
    }
}

#[test]
fn a_long_run_with_write_back_and_prefetch_equals_valgrind() {
    // long.c's drains have many chunks: the simulation runs ahead of the
    // collector, and loops of one block take their own path.
    let options = with(
        &[
            "--cache-sim=yes",
            "--simulate-wb=yes",
            "--simulate-hwpref=yes",
            "--dump-instr=yes",
        ],
        &SMALL,
    );
    let valgrind = equals_valgrind("long.c", LONG_STATUS, &options, &WB_EVENTS);
    assert_dirty_misses(&valgrind, "long.c, write-back and prefetch");
}

#[test]
fn cache_use_turns_write_back_and_prefetch_off() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let options = with(
        &[
            "--cacheuse=yes",
            "--simulate-wb=yes",
            "--simulate-hwpref=yes",
        ],
        &SMALL,
    );
    let (valgrind, _) = run_both("exact.c", EXACT_STATUS, &options, dir.path());
    // Valgrind's inclusive cache-use costs are zero: cgx's with
    // --cacheuse-inclusive=no.
    let program = build("exact.c", Kind::NoLibc, dir.path());
    let cgx_options = with(&["-q", "--cacheuse-inclusive=no"], &options);
    let cgx = run(Profiler::Cgx, &cgx_options, &program, &[], dir.path());
    assert_status(&cgx, EXACT_STATUS);
    let (expected, actual) = (valgrind.profile(), cgx.profile());
    let context = format!("exact.c, callgrind {cgx_options:?}");
    assert_eq!(expected.parts[0].events.names, CACHEUSE_EVENTS, "{context}");
    assert_eq!(actual.parts[0].events.names, CACHEUSE_EVENTS, "{context}");
    assert_same_costs(&expected, &actual, &CACHEUSE_EVENTS, true, true, &context);
    for warning in [
        "warning: prefetch simulation can not be used with cache usage",
        "warning: write-back simulation can not be used with cache usage",
    ] {
        assert!(valgrind.stderr.contains(warning), "{}", valgrind.stderr);
        assert!(cgx.stderr.contains(warning), "{context}: {}", cgx.stderr);
    }
}

#[test]
fn write_back_tags_drop_the_high_32_bits_as_valgrinds() {
    // far_alias.c reads 16384 lines at 0x30000000, then 16384 lines 4 GiB
    // higher (fixed mappings: the same addresses under both): D1 misses
    // all 32768, the write-back LL only the first 16384.
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("far_alias.c", Kind::C, dir.path());
    let options = ["-q", "--simulate-wb=yes", "--LL=4194304,16,64"];
    let valgrind = run(Profiler::Valgrind, &options, &program, &[], dir.path());
    let cgx = run(Profiler::Cgx, &options, &program, &[], dir.path());
    assert_status(&valgrind, 0);
    assert_status(&cgx, 0);
    let touch = |run: &Run| {
        let costs = self_costs_of(&run.profile(), &WB_EVENTS);
        costs.get("touch").cloned().unwrap_or_default()
    };
    let expected = touch(&valgrind);
    assert_eq!(
        expected.get(4..8),
        Some(&[32770, 0, 0, 16384][..]),
        "Valgrind's D1mr D1mw ILmr DLmr of touch: {expected:?}"
    );
    assert_eq!(touch(&cgx), expected, "far_alias.c: touch's {WB_EVENTS:?}");
}

#[test]
fn cache_use_tags_drop_the_high_32_bits_as_valgrinds() {
    // far_alias.c under --cacheuse=yes: the cache-use model's tags are
    // Valgrind's 32-bit ones too, so the second 16384 lines hit in LL.
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("far_alias.c", Kind::C, dir.path());
    let options = ["-q", "--cacheuse=yes", "--LL=4194304,16,64"];
    // The misses (the cache-use charges of this libc program depend on
    // what its exit code evicts; they are compared exactly on exact.c).
    let events = CACHE_EVENTS;
    let valgrind = run(Profiler::Valgrind, &options, &program, &[], dir.path());
    let cgx = run(Profiler::Cgx, &options, &program, &[], dir.path());
    assert_status(&valgrind, 0);
    assert_status(&cgx, 0);
    let touch = |run: &Run| {
        let costs = self_costs_of(&run.profile(), &events);
        costs.get("touch").cloned().unwrap_or_default()
    };
    let expected = touch(&valgrind);
    assert_eq!(
        expected.get(7),
        Some(&16384),
        "Valgrind's DLmr of touch: {expected:?}"
    );
    assert_eq!(touch(&cgx), expected, "far_alias.c: touch's {events:?}");
}
