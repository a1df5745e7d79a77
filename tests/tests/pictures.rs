//! Acceptance 3 and 4 for the stack formats of `cgx convert` (folded stacks,
//! flame graph SVG, pprof, speedscope), on the profiles Valgrind writes of the
//! test programs:
//!
//! - folded: the weights add up exactly to Valgrind's `totals:` for every event of
//!   Callgrind and Cachegrind files (cache, branch and cache-use events too), of
//!   files with several parts and of per-thread files; the stacks follow the call
//!   chains of `calls.c` (`main;fib;fib'2`, the mutual recursion through
//!   `is_even'2`/`is_odd'2`), and the stacks ending in each of its functions add
//!   up to the self cost callgrind_annotate prints for it;
//! - flame graph: well-formed XML, titled `COMMAND — EVENT`, the root frame
//!   carrying the total and the hottest functions named with their counts;
//! - pprof: `go tool pprof -top` prints the same total, event and flat counts;
//! - speedscope: validates against the schema the speedscope npm package ships,
//!   and its weights add up to the total;
//! - errors: an unknown `--event`, an unreadable or malformed input, `--event`
//!   with a format it does not apply to, a name that tells no format, a flame
//!   graph of an event that is zero throughout: exit code 1, one line naming the
//!   cause, no output file.
//!
//! Without Go (`go tool pprof`), npm (to fetch speedscope's schema) or Python's
//! jsonschema, those checks are skipped with a message, unless the environment
//! variable CI is set: then they fail.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use cgx_tests::cli::{cgx, convert};
use cgx_tests::clients::callgrind_annotate;
use cgx_tests::pictures::{
    command_of, parse_folded, pprof_flat, pprof_top, pprof_total, speedscope_schema,
    valgrind_totals, validate_json, FoldedStack,
};
use cgx_tests::valgrind::{
    Case, CACHEGRIND_DEFAULT, CACHEGRIND_SIMULATORS, CALLGRIND_COMBINED_DUMPS, CALLGRIND_DEFAULT,
    CALLGRIND_SEPARATE_CALLERS, CALLGRIND_SIMULATORS, CALLGRIND_THREADS,
};

/// The functions of `calls.c` whose stacks the tests know.
const CALLS_FUNCTIONS: [&str; 9] = [
    "main",
    "fib",
    "fib'2",
    "is_even",
    "is_odd",
    "is_even'2",
    "is_odd'2",
    "square",
    "twice",
];

/// Converts `file` to the folded stacks of `event` and parses them.
fn folded(file: &Path, dir: &Path, event: &str) -> Vec<FoldedStack> {
    let out = dir.join(format!("{}.{event}.folded", file_name(file)));
    convert(file, &out, &["--event", event]);
    parse_folded(&fs::read_to_string(&out).expect("the folded file"))
}

fn file_name(file: &Path) -> String {
    file.file_name()
        .expect("a file name")
        .to_string_lossy()
        .into_owned()
}

/// Checks that the folded stacks of every event of every file of `case` add up
/// to Valgrind's totals, with distinct stacks of non-zero weight.
fn check_folded_totals(case: &Case) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    for file in case.run(dir.path()) {
        for (event, total) in valgrind_totals(&file) {
            let stacks = folded(&file, dir.path(), &event);
            let sum: u64 = stacks.iter().map(|(_, weight)| weight).sum();
            assert_eq!(sum, total, "{}: event {event}", file.display());
            assert!(stacks.iter().all(|(_, weight)| *weight > 0));
            let mut frames: Vec<&Vec<String>> = stacks.iter().map(|(frames, _)| frames).collect();
            frames.sort();
            frames.dedup();
            assert_eq!(
                frames.len(),
                stacks.len(),
                "{}: a stack twice",
                file.display()
            );
        }
    }
}

/// All 17 events of Callgrind's simulators, cache use included (whose arcs
/// carry no inclusive cost).
#[test]
fn folded_totals_callgrind_simulators() {
    check_folded_totals(&CALLGRIND_SIMULATORS);
}

/// Three parts in one file, added up.
#[test]
fn folded_totals_combined_dumps() {
    check_folded_totals(&CALLGRIND_COMBINED_DUMPS);
}

/// One file per thread; the workers' stacks start at their thread start.
#[test]
fn folded_totals_threads() {
    check_folded_totals(&CALLGRIND_THREADS);
}

/// Functions named after their callers (`fib'fib'main`).
#[test]
fn folded_totals_separate_callers() {
    check_folded_totals(&CALLGRIND_SEPARATE_CALLERS);
}

/// Cachegrind's 13 events.
#[test]
fn folded_totals_cachegrind_simulators() {
    check_folded_totals(&CACHEGRIND_SIMULATORS);
}

/// The self cost of each function of `calls.c` (all its files: `mix.h` is
/// inlined), as callgrind_annotate prints it, for the first event.
fn annotate_self_costs(file: &Path) -> BTreeMap<String, u64> {
    let report = callgrind_annotate(file, &[]);
    let mut costs = BTreeMap::new();
    for (key, counts) in &report.functions {
        let (_, function) = key.rsplit_once(':').expect("file:function");
        if CALLS_FUNCTIONS.contains(&function) {
            *costs.entry(function.to_string()).or_insert(0) += counts[0];
        }
    }
    costs
}

/// Whether `frames` ends with `tail`.
fn ends_with(frames: &[String], tail: &[&str]) -> bool {
    frames.len() >= tail.len()
        && frames[frames.len() - tail.len()..]
            .iter()
            .zip(tail)
            .all(|(frame, name)| frame == name)
}

#[test]
fn stacks_follow_the_call_chains() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let file = &CALLGRIND_DEFAULT.run(dir.path())[0];
    let stacks = folded(file, dir.path(), "Ir");
    // The stacks ending in each function add up to its self cost.
    let mut by_leaf: BTreeMap<String, u64> = BTreeMap::new();
    for (frames, weight) in &stacks {
        let leaf = frames.last().expect("a frame");
        if CALLS_FUNCTIONS.contains(&leaf.as_str()) {
            *by_leaf.entry(leaf.clone()).or_insert(0) += weight;
        }
    }
    assert_eq!(by_leaf, annotate_self_costs(file));
    // main is called from "(below main)", in every stack.
    for (frames, _) in &stacks {
        if let Some(at) = frames.iter().position(|frame| frame == "main") {
            assert!(
                at > 0 && frames[at - 1].starts_with("(below main)"),
                "main not called from (below main): {frames:?}"
            );
        }
    }
    // The call chains of calls.c, recursion folded into its named levels.
    let has = |tail: &[&str]| stacks.iter().any(|(frames, _)| ends_with(frames, tail));
    for tail in [
        &["main", "fib", "fib'2"][..],
        &["main", "is_even", "is_odd", "is_even'2", "is_odd'2"],
        &["main", "square"],
        &["main", "twice"],
    ] {
        assert!(has(tail), "no stack ends with {tail:?}");
    }
    for (frames, _) in &stacks {
        if frames.last().is_some_and(|leaf| leaf == "fib'2") {
            assert!(ends_with(frames, &["main", "fib", "fib'2"]), "{frames:?}");
        }
    }
}

/// A Cachegrind file has no calls: one frame per stack, one stack per function.
#[test]
fn cachegrind_functions_are_one_frame_stacks() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let file = &CACHEGRIND_DEFAULT.run(dir.path())[0];
    let totals = valgrind_totals(file);
    let stacks = folded(file, dir.path(), &totals[0].0);
    assert!(stacks.iter().all(|(frames, _)| frames.len() == 1));
    assert!(stacks.iter().any(|(frames, _)| frames[0] == "fib"));
    let sum: u64 = stacks.iter().map(|(_, weight)| weight).sum();
    assert_eq!(sum, totals[0].1);
}

/// The texts of the `<title>` elements of an SVG, after checking that it parses.
fn svg_titles(svg: &str) -> (String, Vec<String>) {
    // Flame graphs start with the SVG 1.1 DOCTYPE.
    let options = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..roxmltree::ParsingOptions::default()
    };
    let document = roxmltree::Document::parse_with_options(svg, options).expect("well-formed XML");
    let root = document.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    let heading = root
        .descendants()
        .find(|node| node.attribute("id") == Some("title"))
        .and_then(|node| node.text())
        .expect("a title text")
        .to_string();
    let titles = root
        .descendants()
        .filter(|node| node.tag_name().name() == "title")
        .filter_map(|node| node.text())
        .map(String::from)
        .collect();
    (heading, titles)
}

/// `1234567` as `1,234,567`, as the flame graph writes counts.
fn with_commas(count: u64) -> String {
    let digits: Vec<char> = count.to_string().chars().collect();
    let groups: Vec<String> = digits
        .rchunks(3)
        .rev()
        .map(|group| group.iter().collect())
        .collect();
    groups.join(",")
}

/// Checks the flame graph of `event` of `file`: well-formed, titled, the total
/// on the root frame, and the three functions with the most self cost named with
/// their counts (each is the leaf of one stack in these programs' profiles, or
/// its frames add up).
fn check_flame_graph(file: &Path, dir: &Path, event: &str, total: u64) {
    let svg_path = dir.join(format!("{}.{event}.svg", file_name(file)));
    convert(file, &svg_path, &["--event", event]);
    let svg = fs::read_to_string(&svg_path).expect("the SVG");
    let (heading, titles) = svg_titles(&svg);
    assert_eq!(heading, format!("{} — {event}", command_of(file)));
    let all = format!("all ({} {event}, 100%)", with_commas(total));
    assert!(titles.contains(&all), "no {all:?} in {:?}", &titles[..3]);
    // Self costs by function from the folded stacks.
    let mut self_costs: BTreeMap<String, u64> = BTreeMap::new();
    for (frames, weight) in folded(file, dir, event) {
        *self_costs
            .entry(frames.last().cloned().unwrap_or_default())
            .or_insert(0) += weight;
    }
    let mut hottest: Vec<(u64, String)> = self_costs.into_iter().map(|(f, c)| (c, f)).collect();
    hottest.sort_by(|a, b| b.cmp(a));
    for (_, function) in hottest.iter().take(3) {
        let prefix = format!("{function} (");
        assert!(
            titles.iter().any(|title| title.starts_with(&prefix)),
            "the flame graph does not name {function}"
        );
    }
}

#[test]
fn flame_graph_is_well_formed_and_names_the_hottest() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let file = &CALLGRIND_DEFAULT.run(dir.path())[0];
    let total = valgrind_totals(file)[0].1;
    check_flame_graph(file, dir.path(), "Ir", total);
    // fib'2 is the leaf of one stack: its frame carries its self cost.
    let fib = annotate_self_costs(file)["fib'2"];
    let svg = fs::read_to_string(dir.path().join(format!("{}.Ir.svg", file_name(file))))
        .expect("the SVG");
    let (_, titles) = svg_titles(&svg);
    let expected = format!("fib'2 ({} Ir, ", with_commas(fib));
    assert!(titles.iter().any(|title| title.starts_with(&expected)));
}

#[test]
fn flame_graph_of_a_cache_event() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let file = &CALLGRIND_SIMULATORS.run(dir.path())[0];
    let totals = valgrind_totals(file);
    let (event, total) = totals
        .iter()
        .find(|(event, _)| event == "D1mr")
        .expect("a D1mr event");
    check_flame_graph(file, dir.path(), event, *total);
}

/// Converts `file` to pprof (named by `extension`, with `options`) and checks
/// what `go tool pprof -top` prints: the event, the total and `flat` counts.
fn check_pprof(file: &Path, dir: &Path, extension: &str, options: &[&str]) -> Option<String> {
    let out = dir.join(format!("{}.{extension}", file_name(file)));
    convert(file, &out, options);
    let bytes = fs::read(&out).expect("the pprof file");
    assert_eq!(bytes[..2], [0x1f, 0x8b], "gzip-compressed");
    let top = pprof_top(&out)?;
    let event = match options {
        ["--event", event, ..] => event.to_string(),
        _ => valgrind_totals(file)[0].0.clone(),
    };
    let total = valgrind_totals(file)
        .into_iter()
        .find(|(name, _)| *name == event)
        .expect("the event")
        .1;
    assert!(
        top.lines().any(|line| line == format!("Type: {event}")),
        "{top}"
    );
    assert_eq!(pprof_total(&top), Some(total), "{top}");
    Some(top)
}

#[test]
fn pprof_is_read_back_with_the_same_total() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let file = &CALLGRIND_DEFAULT.run(dir.path())[0];
    let Some(top) = check_pprof(file, dir.path(), "pb.gz", &[]) else {
        return;
    };
    let fib = annotate_self_costs(file)["fib'2"];
    assert_eq!(pprof_flat(&top, "fib'2"), Some(fib), "{top}");
    assert!(top
        .lines()
        .any(|line| line == format!("cmd: {}", command_of(file))));
}

#[test]
fn pprof_of_cache_events_and_cachegrind_files() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let file = &CALLGRIND_SIMULATORS.run(dir.path())[0];
    check_pprof(file, dir.path(), "pprof", &["--event", "D1mr"]);
    check_pprof(file, dir.path(), "pprof", &["--event", "Bcm"]);
    let dir = tempfile::tempdir().expect("a temporary folder");
    let file = &CACHEGRIND_DEFAULT.run(dir.path())[0];
    check_pprof(file, dir.path(), "pb.gz", &[]);
}

#[test]
fn speedscope_validates_against_its_schema() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let file = &CALLGRIND_SIMULATORS.run(dir.path())[0];
    let out = dir.path().join("calls.speedscope.json");
    convert(file, &out, &["--event", "Dr"]);
    let json: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&out).expect("the JSON")).expect("JSON");
    let total = valgrind_totals(file)
        .into_iter()
        .find(|(name, _)| name == "Dr")
        .expect("a Dr event")
        .1;
    let profile = &json["profiles"][0];
    assert_eq!(profile["type"], "sampled");
    assert_eq!(profile["endValue"].as_u64(), Some(total));
    let weights: u64 = profile["weights"]
        .as_array()
        .expect("weights")
        .iter()
        .map(|weight| weight.as_u64().expect("a whole weight"))
        .sum();
    assert_eq!(weights, total);
    assert_eq!(
        profile["samples"].as_array().map(Vec::len),
        profile["weights"].as_array().map(Vec::len)
    );
    let frames = json["shared"]["frames"].as_array().expect("frames");
    assert!(frames.iter().any(|frame| frame["name"] == "fib'2"));
    assert_eq!(profile["name"], format!("{} — Dr", command_of(file)));
    let Some(schema) = speedscope_schema() else {
        return;
    };
    if let Some(result) = validate_json(&schema, &out) {
        result.unwrap_or_else(|error| panic!("{} does not validate:\n{error}", out.display()));
    }
    // The check can fail: a file without its samples does not validate.
    let mut broken = json.clone();
    if let Some(profile) = broken["profiles"][0].as_object_mut() {
        profile.remove("samples");
    }
    let broken_path = dir.path().join("broken.speedscope.json");
    fs::write(&broken_path, broken.to_string()).expect("writing the broken file");
    if let Some(result) = validate_json(&schema, &broken_path) {
        assert!(result.is_err(), "a file without samples validates");
    }
}

/// A small Callgrind profile: main calls f; Dr is zero throughout.
const SMALL: &str = "# callgrind format\nevents: Ir Dr\ncmd: ./small\nfl=a.c\nfn=main\n1 3 0\n\
    cfn=f\ncalls=1 5\n2 4 0\nfn=f\n5 4 0\n";

fn small_profile(dir: &Path) -> PathBuf {
    let path = dir.join("callgrind.out.small");
    fs::write(&path, SMALL).expect("writing the profile");
    path
}

/// The output format comes from the output's name.
#[test]
fn formats_from_names() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let input = small_profile(dir.path());
    let starts = |name: &str| {
        let out = dir.path().join(name);
        convert(&input, &out, &[]);
        fs::read(&out).expect("the output")
    };
    assert_eq!(starts("out.folded"), b"main 3\nmain;f 4\n");
    assert!(starts("out.svg").starts_with(b"<?xml"));
    assert!(starts("out.pb.gz").starts_with(&[0x1f, 0x8b]));
    assert!(starts("out.pprof").starts_with(&[0x1f, 0x8b]));
    assert!(starts("out.speedscope.json").starts_with(b"{\"$schema\""));
    assert!(starts("out.json").starts_with(b"{\"$schema\""));
    assert!(starts("callgrind.out.copy").starts_with(b"# callgrind format"));
    // --to wins over the name.
    let out = dir.path().join("stacks.txt");
    convert(&input, &out, &["--to", "folded"]);
    assert_eq!(fs::read(&out).expect("the output"), b"main 3\nmain;f 4\n");
}

/// Runs `cgx convert` with `args` and checks that it fails with exit code 1 and
/// one line on stderr containing every one of `mentions`, writing nothing to
/// `output`.
fn check_error(args: &[&str], output: &Path, mentions: &[&str]) {
    let result = cgx(args);
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert_eq!(result.status.code(), Some(1), "{args:?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    for mention in mentions {
        assert!(
            stderr.contains(mention),
            "{args:?}: {mention:?} not in {stderr}"
        );
    }
    assert!(!output.exists(), "{args:?} wrote {}", output.display());
    let folder = output.parent().expect("a folder");
    let leftovers: Vec<_> = fs::read_dir(folder)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{args:?} left {leftovers:?}");
}

#[test]
fn errors_name_their_cause() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let input = small_profile(dir.path());
    let input = input.to_str().expect("a UTF-8 path");
    let out = dir.path().join("out.svg");
    let out_str = out.to_str().expect("a UTF-8 path");
    // An unknown event: named, with the events there are.
    check_error(
        &["convert", input, "-o", out_str, "--event", "D1mr"],
        &out,
        &["D1mr", "Ir Dr", input],
    );
    // A missing input.
    let missing = dir.path().join("missing.out");
    let missing = missing.to_str().expect("a UTF-8 path");
    check_error(
        &["convert", missing, "-o", out_str],
        &out,
        &[missing, "No such file"],
    );
    // A folder as input.
    let folder = dir.path().to_str().expect("a UTF-8 path");
    check_error(&["convert", folder, "-o", out_str], &out, &[folder]);
    // A malformed input: the file and line.
    let bad = dir.path().join("bad.out");
    fs::write(
        &bad,
        "# callgrind format\nevents: Ir\nfl=a.c\nfn=main\n16 12x\n",
    )
    .expect("write");
    let bad = bad.to_str().expect("a UTF-8 path");
    check_error(
        &["convert", bad, "-o", out_str],
        &out,
        &[&format!("{bad}:5:")],
    );
    // --event where it does not apply.
    let copy = dir.path().join("callgrind.out.copy");
    check_error(
        &[
            "convert",
            input,
            "-o",
            copy.to_str().expect("UTF-8"),
            "--event",
            "Ir",
        ],
        &copy,
        &["--event", "callgrind"],
    );
    // A name that tells no format.
    let unknown = dir.path().join("out.picture");
    check_error(
        &["convert", input, "-o", unknown.to_str().expect("UTF-8")],
        &unknown,
        &["out.picture", "--to"],
    );
    // A flame graph of an event that is zero throughout.
    check_error(
        &["convert", input, "-o", out_str, "--event", "Dr"],
        &out,
        &["'Dr'", "0"],
    );
    // An output folder that does not exist.
    let nowhere = dir.path().join("no/such/folder/out.folded");
    check_error(
        &["convert", input, "-o", nowhere.to_str().expect("UTF-8")],
        &nowhere,
        &["no/such/folder", "No such file"],
    );
}
