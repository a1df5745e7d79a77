//! Issue 3, `cgx annotate`: the report itself — its layout (cg_annotate 3.21+),
//! options, warnings, colour, and errors (acceptance 4).
//!
//! The layout tests run `cgx annotate` on the profiles and sources of
//! `tests/fixtures/annotate/` and compare the whole output with the expected
//! report in `tests/fixtures/annotate/expected/` (set `CGX_BLESS=1` to write
//! those instead). The expected reports were checked against the Python
//! cg_annotate of Valgrind 3.22 on the same files: they are identical except for
//! the `Invocation:` line and the wording inside the warning boxes. The fixture
//! covers merging, `--diff`, `--mod-filename`/`--mod-funcname`, `--show`,
//! `--sort`, `--threshold`, `--context`, `--no-show-percs`, a file with counts
//! on line 0, a file with counts past its end, a source newer than the profile,
//! an unreadable file, two different files merged by `--mod-filename`, a file
//! below the threshold and the unknown file `???`.

use std::env;
use std::fs::{self, File};
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

use cgx_tests::annotate::parse_cgx;
use cgx_tests::cli::binary;
use cgx_tests::fixture;

/// Copies `tests/fixtures/annotate` to a temporary folder, with the profiles and
/// sources one day old, except `src/newer.c`, which is newer than the profiles.
fn fixture_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let source = fixture("annotate");
    let day_ago = SystemTime::now() - Duration::from_secs(86_400);
    for sub in ["", "src"] {
        fs::create_dir_all(dir.path().join(sub)).expect("a folder");
        for entry in fs::read_dir(source.join(sub)).expect("the fixture folder") {
            let path = entry.expect("an entry").path();
            if path.is_file() {
                let copy = dir.path().join(sub).join(path.file_name().expect("a name"));
                fs::copy(&path, &copy).expect("the fixture is copied");
                let time = if copy.ends_with("src/newer.c") {
                    SystemTime::now()
                } else {
                    day_ago
                };
                File::options()
                    .write(true)
                    .open(&copy)
                    .and_then(|file| file.set_modified(time))
                    .expect("the time is set");
            }
        }
    }
    dir
}

/// Runs `cgx annotate ARGS` in `dir`.
fn annotate_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(binary())
        .arg("annotate")
        .args(args)
        .current_dir(dir)
        .env_remove("NO_COLOR")
        .output()
        .expect("cgx runs")
}

/// The report without its `Invocation:` line, after checking that line.
fn without_invocation(stdout: &[u8], args: &[&str]) -> String {
    let text = String::from_utf8(stdout.to_vec()).expect("UTF-8 output");
    let invocation = text
        .lines()
        .find(|line| line.starts_with("Invocation:"))
        .expect("an Invocation: line");
    assert!(
        invocation.ends_with(&format!("annotate {}", args.join(" "))),
        "{invocation}"
    );
    text.lines()
        .filter(|line| !line.starts_with("Invocation:"))
        .map(|line| format!("{line}\n"))
        .collect()
}

/// Compares the report of `cgx annotate ARGS` on the fixture with
/// `expected/NAME.txt`.
fn check_layout(name: &str, args: &[&str]) {
    let dir = fixture_copy();
    let output = annotate_in(dir.path(), args);
    assert!(
        output.status.success() && output.stderr.is_empty(),
        "cgx annotate {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report = without_invocation(&output.stdout, args);
    let expected_path = fixture("annotate/expected").join(format!("{name}.txt"));
    if env::var_os("CGX_BLESS").is_some() {
        fs::create_dir_all(expected_path.parent().expect("a folder")).expect("a folder");
        fs::write(&expected_path, &report).expect("the expected report is written");
        return;
    }
    let expected = fs::read_to_string(&expected_path).expect("the expected report");
    if report != expected {
        let first = report
            .lines()
            .zip(expected.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(report.lines().count().min(expected.lines().count()));
        panic!(
            "cgx annotate {args:?} differs from {} at line {} (without the Invocation line):\n\
             expected: {:?}\n  actual: {:?}\n\nwhole report:\n{report}",
            expected_path.display(),
            first + 1,
            expected.lines().nth(first),
            report.lines().nth(first),
        );
    }
}

/// The default report: the line-0 counts, the bogus line past the end of
/// `short.c` and its warning, the warning for `newer.c`, the unreadable
/// `missing.c`, `tiny.c` below the threshold, `???`, `f1` in two files.
#[test]
fn default_report() {
    check_layout("default", &["a.cgout"]);
}

/// Other events shown and sorted, a higher threshold, less context: gaps.
#[test]
fn show_sort_threshold_context() {
    check_layout(
        "show-sort-threshold-context",
        &[
            "--show=Dr,Ir",
            "--sort=Dr",
            "--threshold=2",
            "--context=2",
            "a.cgout",
        ],
    );
}

/// Two profiles added up, without percentages.
#[test]
fn merge_without_percentages() {
    check_layout(
        "merge-no-percs",
        &["--no-show-percs", "--context=0", "a.cgout", "b.cgout"],
    );
}

/// The second profile minus the first: negative counts and percentages.
#[test]
fn diff() {
    check_layout("diff", &["--diff", "a.cgout", "b.cgout"]);
}

/// Names rewritten: two different source files become one (which cannot be
/// annotated), two functions become one (`i`: whatever the case).
#[test]
fn diff_with_rewritten_names() {
    check_layout(
        "diff-mod-names",
        &[
            "--diff",
            "--mod-filename=s/(short|newer)/either/",
            "--mod-funcname=s/^[GH]$/gh/i",
            "a.cgout",
            "b.cgout",
        ],
    );
}

/// What the expected reports say, in numbers: the annotation summary adds up to
/// the totals, the warnings are where they belong, the rewritten names merged.
#[test]
fn expected_reports_add_up() {
    let dir = fixture_copy();
    for args in [
        &["a.cgout"][..],
        &["a.cgout", "b.cgout"],
        &["--diff", "a.cgout", "b.cgout"],
    ] {
        let mut all = vec!["--no-show-percs"];
        all.extend(args);
        let output = annotate_in(dir.path(), &all);
        let report = parse_cgx(&String::from_utf8_lossy(&output.stdout)).expect("a report");
        let mut sum = vec![0; report.totals.len()];
        for row in &report.annotation_summary {
            for (total, count) in sum.iter_mut().zip(row) {
                *total += count;
            }
        }
        assert_eq!(sum, report.totals, "{args:?}");
        assert!(report.unannotated.contains_key("src/missing.c"), "{args:?}");
        assert_eq!(
            report
                .warnings
                .iter()
                .filter(|w| w.contains("newer than"))
                .count(),
            args.iter().filter(|a| a.ends_with(".cgout")).count(),
            "{args:?}: one warning about newer.c per profile: {:?}",
            report.warnings
        );
    }
    let output = annotate_in(
        dir.path(),
        &[
            "--no-show-percs",
            "--mod-filename=s/(short|newer)/either/",
            "--mod-funcname=s/^[GH]$/gh/i",
            "a.cgout",
        ],
    );
    let report = parse_cgx(&String::from_utf8_lossy(&output.stdout)).expect("a report");
    assert_eq!(
        report.functions.get("src/either.c:gh"),
        Some(&vec![27, 1, 0])
    );
    assert!(report.unannotated["src/either.c"].contains("not identical"));
}

/// `--no-annotate`, `--annotate=no` and `--auto=no` leave out the source files and
/// the annotation summary; `--annotate` (after `--no-annotate`) brings them back.
#[test]
fn annotation_off() {
    let dir = fixture_copy();
    for args in [
        &["--no-annotate"][..],
        &["--annotate=no"],
        &["--auto=no"],
        &["--annotate", "--no-annotate"],
    ] {
        let mut all = args.to_vec();
        all.push("a.cgout");
        let output = annotate_in(dir.path(), &all);
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{args:?}");
        assert!(text.contains("Annotation:       off"), "{args:?}");
        assert!(!text.contains("-- Annotated source file"), "{args:?}");
        assert!(!text.contains("-- Annotation summary"), "{args:?}");
        assert!(text.contains("-- Function:file summary"), "{args:?}");
    }
    let output = annotate_in(dir.path(), &["--no-annotate", "--annotate", "a.cgout"]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("-- Annotation summary"));
}

const ESCAPE: char = '\u{1b}';

/// Piped output has no colour (unless asked for); `--color=always` has it.
#[test]
fn colour_only_when_asked_or_on_a_terminal() {
    let dir = fixture_copy();
    let piped = annotate_in(dir.path(), &["a.cgout"]);
    assert!(!String::from_utf8_lossy(&piped.stdout).contains(ESCAPE));
    let always = annotate_in(dir.path(), &["--color=always", "a.cgout"]);
    let text = String::from_utf8_lossy(&always.stdout);
    assert!(text.contains("\u{1b}[1;36m-- Summary\u{1b}[0m"), "{text}");
    assert!(text.contains("\u{1b}[33m@@ WARNING"), "{text}");
    // Without the escapes, the same report.
    let plain = text.replace("\u{1b}[0m", "");
    let plain = ["\u{1b}[1;36m", "\u{1b}[1m", "\u{1b}[33m", "\u{1b}[2m"]
        .iter()
        .fold(plain, |text, code| text.replace(code, ""));
    assert_eq!(
        without_invocation(plain.as_bytes(), &["--color=always", "a.cgout"]),
        without_invocation(&piped.stdout, &["a.cgout"])
    );
}

/// On a terminal (a pseudo-terminal from `script`), colour by default, none with
/// `NO_COLOR` or `--color=never`.
#[test]
fn colour_on_a_terminal_unless_no_color() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipping: `script` (util-linux) is not installed");
        return;
    }
    let dir = fixture_copy();
    let on_terminal = |extra: &str, no_color: bool| -> String {
        let command = format!("{} annotate {extra} a.cgout", binary().display());
        let mut script = Command::new("script");
        script
            .args(["-qec", &command, "/dev/null"])
            .current_dir(dir.path())
            .env_remove("NO_COLOR");
        if no_color {
            script.env("NO_COLOR", "1");
        }
        let output = script.output().expect("script runs");
        assert!(output.status.success(), "{command}");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    assert!(on_terminal("", false).contains(ESCAPE));
    assert!(!on_terminal("", true).contains(ESCAPE));
    assert!(!on_terminal("--color=never", false).contains(ESCAPE));
}

/// Runs `cgx annotate ARGS` in `dir` and checks it fails with exit code 1, nothing
/// on stdout and one line `cgx: ...` on stderr that contains every one of
/// `mentions`.
fn check_error(dir: &Path, args: &[&str], mentions: &[&str]) {
    let output = annotate_in(dir, args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
    assert!(output.stdout.is_empty(), "{args:?}: printed a report");
    assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    assert!(stderr.starts_with("cgx: "), "{args:?}: {stderr}");
    for mention in mentions {
        assert!(
            stderr.contains(mention),
            "{args:?}: {stderr} lacks {mention}"
        );
    }
}

/// Acceptance 4: unknown events in `--show` and `--sort`.
#[test]
fn unknown_events_are_errors() {
    let dir = fixture_copy();
    check_error(
        dir.path(),
        &["--show=Ir,Bogus", "a.cgout"],
        &["--show", "'Bogus'", "Ir Dr VeryLongEventName"],
    );
    check_error(dir.path(), &["--sort=Dw", "a.cgout"], &["--sort", "'Dw'"]);
}

/// Acceptance 4: `--diff` with other than two files.
#[test]
fn diff_needs_two_files() {
    let dir = fixture_copy();
    check_error(
        dir.path(),
        &["--diff", "a.cgout"],
        &["--diff", "two", "not 1"],
    );
    check_error(
        dir.path(),
        &["--diff", "a.cgout", "b.cgout", "a.cgout"],
        &["--diff", "two", "not 3"],
    );
}

/// Acceptance 4: merging profiles whose events differ.
#[test]
fn merging_different_events_is_an_error() {
    let dir = fixture_copy();
    let other = "desc: x\ncmd: y\nevents: Ir Dw\nfl=a.c\nfn=f\n1 1 1\nsummary: 1 1\n";
    fs::write(dir.path().join("other.cgout"), other).expect("written");
    check_error(
        dir.path(),
        &["a.cgout", "other.cgout"],
        &[
            "other.cgout",
            "'Ir Dw'",
            "a.cgout",
            "'Ir Dr VeryLongEventName'",
        ],
    );
    check_error(
        dir.path(),
        &["--diff", "other.cgout", "a.cgout"],
        &["a.cgout", "other.cgout"],
    );
}

/// Acceptance 4: inputs that cannot be read.
#[test]
fn unreadable_inputs_are_errors() {
    let dir = fixture_copy();
    check_error(
        dir.path(),
        &["a.cgout", "no-such.out"],
        &["no-such.out", "No such file"],
    );
    check_error(dir.path(), &["src"], &["src", "directory"]);
    fs::write(
        dir.path().join("bad.out"),
        "events: Ir\nfl=a.c\nfn=f\n1 x\n",
    )
    .expect("written");
    check_error(dir.path(), &["bad.out"], &["bad.out:4:", "'x'"]);
    fs::write(dir.path().join("empty.out"), "").expect("written");
    check_error(dir.path(), &["empty.out"], &["empty.out", "not a profile"]);
}

/// Other bad uses: `--inclusive`/`--tree` without calls, a bad `--mod-filename`.
#[test]
fn other_errors() {
    let dir = fixture_copy();
    check_error(
        dir.path(),
        &["--inclusive=yes", "a.cgout"],
        &["--inclusive=yes", "calls", "a.cgout"],
    );
    check_error(
        dir.path(),
        &["--tree=caller", "a.cgout"],
        &["--tree", "a.cgout"],
    );
    check_error(
        dir.path(),
        &["--mod-filename=s/a/b", "a.cgout"],
        &["--mod-filename", "s/a/b"],
    );
    check_error(
        dir.path(),
        &["--mod-funcname=s/(/x/", "a.cgout"],
        &["--mod-funcname", "s/(/x/"],
    );
    let output = annotate_in(dir.path(), &["--threshold=200", "a.cgout"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("200"));
}
