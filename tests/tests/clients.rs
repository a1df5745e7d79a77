//! Acceptance 3: the programs that read Valgrind's profiles read what `cgx convert`
//! writes, and find the same figures in it.
//!
//! For every profile Valgrind writes (and the specification's examples):
//! - Callgrind → Callgrind (`cgx convert --to callgrind`, all four combinations of
//!   `--compress-strings` and `--compress-pos`): callgrind_annotate prints the same
//!   events, totals and per-function figures for the converted file as for the
//!   original, self (default) and inclusive (`--inclusive=yes`, from the `calls=`
//!   lines), and warns only if it warns about the original; gprof2dot
//!   (`-f callgrind`) exits with 0, warns about nothing and draws the same graph
//!   (see [`same_graph`]: the same nodes, edges, names and counts, each
//!   decimal within one unit of its last digit; the object in the label of a
//!   name several objects define is left out, see [`without_shared_objects`]).
//! - Callgrind → Cachegrind: cg_annotate prints the per-function figures
//!   callgrind_annotate prints for the original.
//! - Cachegrind → Callgrind: callgrind_annotate prints cg_annotate's figures for the
//!   original; Cachegrind → Cachegrind: cg_annotate prints the same.
//!
//! Without gprof2dot installed (`pip install gprof2dot`) its checks are skipped
//! with a message, unless the environment variable CI is set: then they fail.

use std::collections::{BTreeMap, BTreeSet};
use std::env;
use std::path::{Path, PathBuf};

use cgx_formats::{add_costs, read_path};
use cgx_tests::cli::convert;
use cgx_tests::clients::{callgrind_annotate, cg_annotate, gprof2dot, Report};
use cgx_tests::compare::assert_same_functions;
use cgx_tests::fixture;
use cgx_tests::tables::{sum, zero_count_calls};
use cgx_tests::valgrind::{Case, Tool};

cgx_tests::test_each_valgrind_case!(check);

fn check(case: &Case) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    for file in case.run(dir.path()) {
        match case.tool {
            Tool::Callgrind => check_callgrind_file(&file, dir.path()),
            Tool::Cachegrind => check_cachegrind_file(&file, dir.path()),
        }
    }
}

/// The specification's examples with calls (sections 1.4 and 1.5; those of 1.6
/// have no `fl=`, which callgrind_annotate cannot handle).
#[test]
fn seed_examples() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    for name in [
        "seed-1.4-extended.out",
        "seed-1.5-compressed.out",
        "seed-1.5-compressed-upfront.out",
    ] {
        check_callgrind_file(&fixture(name), dir.path());
    }
}

/// The `--compress-strings` and `--compress-pos` options of `cgx convert`.
const COMPRESSION_OPTIONS: [[&str; 2]; 4] = [
    ["--compress-strings=yes", "--compress-pos=yes"],
    ["--compress-strings=yes", "--compress-pos=no"],
    ["--compress-strings=no", "--compress-pos=yes"],
    ["--compress-strings=no", "--compress-pos=no"],
];

/// A path in `dir` for the conversion of `file` called `what`.
fn converted_path(dir: &Path, file: &Path, what: &str) -> PathBuf {
    let name = file.file_name().expect("a file name").to_string_lossy();
    dir.join(format!("{name}.{what}"))
}

/// Converts a Callgrind file to Callgrind (four ways) and to Cachegrind in `dir`,
/// and compares what the readers make of the original and of the conversions.
fn check_callgrind_file(file: &Path, dir: &Path) {
    let original = callgrind_annotate(file, &[]);
    let original_inclusive = callgrind_annotate(file, &["--inclusive=yes"]);
    let shared = names_in_several_objects(file);
    let original_graph = gprof2dot_graph(file).map(|graph| without_shared_objects(&graph, &shared));
    for (index, compression) in COMPRESSION_OPTIONS.iter().enumerate() {
        let converted = converted_path(dir, file, &format!("callgrind-{index}"));
        let mut options = vec!["--to", "callgrind"];
        options.extend(compression);
        convert(file, &converted, &options);
        let context = format!("{} converted with {compression:?}", file.display());
        assert_same_report(&original, &callgrind_annotate(&converted, &[]), &context);
        assert_same_report(
            &original_inclusive,
            &callgrind_annotate(&converted, &["--inclusive=yes"]),
            &format!("{context}, --inclusive=yes"),
        );
        if let Some(graph) = &original_graph {
            let converted_graph = without_shared_objects(
                &gprof2dot_graph(&converted).expect("gprof2dot is installed"),
                &shared,
            );
            assert!(
                same_graph(graph, &converted_graph),
                "{context}: gprof2dot draws another graph:\n{}\n---\n{}",
                String::from_utf8_lossy(graph),
                String::from_utf8_lossy(&converted_graph)
            );
        }
    }
    check_callgrind_to_cachegrind(file, dir, &original);
}

/// Checks cg_annotate on `cgx convert --to cachegrind` of a Callgrind file against
/// callgrind_annotate on the file (`original`). callgrind_annotate counts the
/// inclusive cost of `calls=0` calls as self cost (see `read_valgrind.rs`); the
/// Cachegrind file has the self costs of all parts, and their sum as totals.
fn check_callgrind_to_cachegrind(file: &Path, dir: &Path, original: &Report) {
    let converted = converted_path(dir, file, "cachegrind");
    convert(file, &converted, &["--to", "cachegrind"]);
    let report = cg_annotate(&converted);
    let context = format!("{} converted to Cachegrind", file.display());
    assert_eq!(report.events, original.events, "{context}");
    let profile = read_path(file).expect("cgx reads the original");
    let mut sum_of_parts = vec![0; report.events.len()];
    for part in &profile.parts {
        add_costs(&mut sum_of_parts, &part.self_totals());
    }
    assert_eq!(report.totals, sum_of_parts, "{context}: totals");
    assert_same_functions(
        &original.functions,
        &sum(&report.functions, &zero_count_calls(&profile)),
        &format!("{context}: callgrind_annotate of the original vs cg_annotate"),
    );
    assert_no_warnings(&report, &context);
}

/// Converts a Cachegrind file to Callgrind and to Cachegrind in `dir`, and
/// compares what the readers make of the original and of the conversions.
fn check_cachegrind_file(file: &Path, dir: &Path) {
    let original = cg_annotate(file);
    let to_callgrind = converted_path(dir, file, "callgrind");
    convert(file, &to_callgrind, &["--to", "callgrind"]);
    let report = callgrind_annotate(&to_callgrind, &[]);
    let context = format!("{} converted to Callgrind", file.display());
    assert_eq!(report.events, original.events, "{context}");
    assert_eq!(report.totals, original.totals, "{context}");
    assert_same_functions(&original.functions, &report.functions, &context);
    assert_no_warnings(&report, &context);
    let to_cachegrind = converted_path(dir, file, "cachegrind");
    convert(file, &to_cachegrind, &["--to", "cachegrind"]);
    assert_same_report(
        &original,
        &cg_annotate(&to_cachegrind),
        &format!("{} converted to Cachegrind", file.display()),
    );
}

/// Checks that two reports have the same events, totals and functions, and that
/// the second has no warnings unless the first has.
fn assert_same_report(original: &Report, converted: &Report, context: &str) {
    assert_eq!(converted.events, original.events, "{context}: events");
    assert_eq!(converted.totals, original.totals, "{context}: totals");
    assert_same_functions(&original.functions, &converted.functions, context);
    if original.stderr.is_empty() {
        assert_no_warnings(converted, context);
    }
}

/// Panics with the first warnings unless the tool printed none.
fn assert_no_warnings(report: &Report, context: &str) {
    let warnings: Vec<&str> = report.stderr.lines().collect();
    assert!(
        warnings.is_empty(),
        "{context}: {} lines of warnings, first:\n{}",
        warnings.len(),
        warnings[..warnings.len().min(4)].join("\n")
    );
}

/// The graph gprof2dot draws of `file`, after checking it exits with 0 and no
/// warnings; `None` (with a message) if gprof2dot is not installed, which fails
/// when the environment variable CI is set.
fn gprof2dot_graph(file: &Path) -> Option<Vec<u8>> {
    let Some(output) = gprof2dot(file) else {
        assert!(
            env::var_os("CI").is_none(),
            "gprof2dot is not installed (pip install gprof2dot), and CI is set"
        );
        eprintln!(
            "skipping the gprof2dot checks: gprof2dot is not installed (pip install gprof2dot)"
        );
        return None;
    };
    assert!(
        output.status.success() && output.stderr.is_empty(),
        "gprof2dot -f callgrind {} ({}):\n{}",
        file.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!output.stdout.is_empty(), "gprof2dot drew nothing");
    Some(output.stdout)
}

/// The functions of `file` whose name is defined in more than one object, as
/// gprof2dot labels them: (object's base name, function's name).
fn names_in_several_objects(file: &Path) -> Vec<(String, String)> {
    let profile = read_path(file).expect("cgx reads the original");
    let mut objects: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for part in &profile.parts {
        for (function, _) in part.functions() {
            let object = profile.names.get(function.object);
            let base = object.rsplit_once('/').map_or(object, |(_, base)| base);
            objects
                .entry(profile.names.get(function.name))
                .or_default()
                .insert(base);
        }
    }
    objects
        .into_iter()
        .filter(|(_, objects)| objects.len() > 1)
        .flat_map(|(name, objects)| {
            objects
                .into_iter()
                .map(move |object| (object.to_owned(), name.to_owned()))
        })
        .collect()
}

/// `graph` with the object in the labels of `shared`'s functions replaced by
/// `*`. gprof2dot draws one node per function name, labelled with the object
/// the name comes with first in the file; a conversion, which gathers each
/// function's records in one place, can put another object's first.
fn without_shared_objects(graph: &[u8], shared: &[(String, String)]) -> Vec<u8> {
    let escaped = |text: &str| text.replace('\\', "\\\\").replace('"', "\\\"");
    let mut text = String::from_utf8_lossy(graph).into_owned();
    for (object, name) in shared {
        let label = format!("label=\"{}\\n{}\\n", escaped(object), escaped(name));
        let anonymous = format!("label=\"*\\n{}\\n", escaped(name));
        text = text.replace(&label, &anonymous);
    }
    text.into_bytes()
}

/// Whether two graphs gprof2dot drew are the same: line by line the same
/// text, integers and names, and decimals (percentages, sizes) within one
/// unit of their last printed digit; colours, which follow the
/// percentages, are not compared. gprof2dot adds up a cycle's members in
/// the order of a set of objects, which follows their addresses in memory,
/// so the same profile read twice can give a percentage that differs in its
/// last digit.
fn same_graph(expected: &[u8], actual: &[u8]) -> bool {
    let (expected, actual) = (
        String::from_utf8_lossy(expected),
        String::from_utf8_lossy(actual),
    );
    let (expected, actual): (Vec<&str>, Vec<&str>) =
        (expected.lines().collect(), actual.lines().collect());
    expected.len() == actual.len()
        && expected
            .iter()
            .zip(&actual)
            .all(|(expected, actual)| same_graph_line(expected, actual))
}

/// One line of [`same_graph`].
fn same_graph_line(expected: &str, actual: &str) -> bool {
    let (expected, actual) = (graph_tokens(expected), graph_tokens(actual));
    expected.len() == actual.len()
        && expected.iter().zip(&actual).all(|pair| match pair {
            (GraphToken::Decimal(a, digits), GraphToken::Decimal(b, _)) => {
                (a - b).abs() <= 1.01 * 10f64.powi(-(*digits as i32))
            }
            (a, b) => a == b,
        })
}

/// A piece of a line of a graph gprof2dot drew.
#[derive(Debug, PartialEq)]
enum GraphToken {
    /// Text, integers and names.
    Text(String),
    /// A decimal, with its number of digits after the point.
    Decimal(f64, usize),
    /// A colour (`#rrggbb`).
    Colour,
}

/// The pieces of `line`.
fn graph_tokens(line: &str) -> Vec<GraphToken> {
    let bytes = line.as_bytes();
    let mut tokens = Vec::new();
    let mut text = String::new();
    let mut at = 0;
    while at < bytes.len() {
        let hex_run = bytes[at + 1..]
            .iter()
            .take_while(|byte| byte.is_ascii_hexdigit())
            .count();
        if bytes[at] == b'#' && hex_run == 6 {
            tokens.push(GraphToken::Text(std::mem::take(&mut text)));
            tokens.push(GraphToken::Colour);
            at += 7;
            continue;
        }
        let digits = bytes[at..]
            .iter()
            .take_while(|byte| byte.is_ascii_digit())
            .count();
        let fraction = if digits > 0 && bytes.get(at + digits) == Some(&b'.') {
            bytes[at + digits + 1..]
                .iter()
                .take_while(|byte| byte.is_ascii_digit())
                .count()
        } else {
            0
        };
        let at_word_start = at == 0 || !bytes[at - 1].is_ascii_alphanumeric();
        if fraction > 0 && at_word_start {
            let end = at + digits + 1 + fraction;
            let value = line[at..end].parse().unwrap_or(f64::NAN);
            tokens.push(GraphToken::Text(std::mem::take(&mut text)));
            tokens.push(GraphToken::Decimal(value, fraction));
            at = end;
            continue;
        }
        text.push(char::from(bytes[at]));
        at += 1;
    }
    tokens.push(GraphToken::Text(text));
    tokens
}

#[test]
fn graphs_differing_in_a_last_digit_are_the_same() {
    let line = |percent: &str, colour: &str, count: &str| {
        format!(
            "\t\"main\" -> f [color=\"{colour}\", label=\"{percent}%\\n{count}\u{d7}\", penwidth=\"0.50\"];"
        )
    };
    let graph = |lines: &[String]| lines.join("\n").into_bytes();
    let expected = graph(&[line("16.92", "#0c6189", "1")]);
    assert!(same_graph(
        &expected,
        &graph(&[line("16.93", "#0c618a", "1")])
    ));
    assert!(same_graph(
        &expected,
        &graph(&[line("16.91", "#0c6189", "1")])
    ));
    assert!(!same_graph(
        &expected,
        &graph(&[line("16.95", "#0c6189", "1")])
    ));
    assert!(!same_graph(
        &expected,
        &graph(&[line("16.92", "#0c6189", "2")])
    ));
    assert!(!same_graph(
        &expected,
        &graph(&[line("16.92", "#0c6189", "1"), line("1.00", "#000000", "1")])
    ));
    // Names with digits and dots are text.
    let named = |name: &str| graph(&[format!("\t\"{name}\" [label=\"{name}\"];")]);
    assert!(!same_graph(&named("f1.5"), &named("f1.6")));
    assert!(!same_graph(&named("libc.so.6"), &named("libc.so.7")));
}

#[test]
fn a_shared_name_s_object_is_left_out_of_its_label() {
    let node = |object: &str, name: &str| {
        format!("\t\"{name}\" [color=\"#0d0d73\", label=\"{object}\\n{name}\\n0.50%\\n3\u{d7}\"];")
            .into_bytes()
    };
    let shared = [
        ("ld-linux-x86-64.so.2".to_owned(), "strcmp".to_owned()),
        ("libc.so.6".to_owned(), "strcmp".to_owned()),
    ];
    let in_libc = without_shared_objects(&node("libc.so.6", "strcmp"), &shared);
    assert_eq!(
        in_libc,
        without_shared_objects(&node("ld-linux-x86-64.so.2", "strcmp"), &shared)
    );
    assert_ne!(in_libc, node("libc.so.6", "strcmp"));
    let unshared = node("libc.so.6", "malloc");
    assert_eq!(without_shared_objects(&unshared, &shared), unshared);
    assert_ne!(
        without_shared_objects(&node("libc.so.6", "strcmp"), &shared),
        without_shared_objects(&node("libc.so.6", "strcmpx"), &shared)
    );
}

#[test]
fn names_several_objects_define_are_listed_with_each_object_s_base_name() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let file = dir.path().join("callgrind.out");
    std::fs::write(
        &file,
        "events: Ir\nob=/lib/a.so\nfn=f\n1 5\nfn=g\n2 1\nob=/usr/lib/b.so\nfn=f\n1 3\n",
    )
    .expect("the file is written");
    assert_eq!(
        names_in_several_objects(&file),
        [
            ("a.so".to_owned(), "f".to_owned()),
            ("b.so".to_owned(), "f".to_owned())
        ]
    );
}
