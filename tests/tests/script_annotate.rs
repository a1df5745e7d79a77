//! cgx as `cg_annotate` and `callgrind_annotate` (`cgx shims`) prints what
//! Valgrind 3.19's scripts print with source annotation: the annotated
//! sources of the functions listed, `--context`, `--include`, sources named
//! after the profile, files not found, bogus lines past a file's end and the
//! warnings, `events annotated`; and callgrind_annotate's `--tree`.
//!
//! Each case runs both on the same profile of `calls.c` (with `mix.h`),
//! built with `gcc -g -O2` into a temporary folder, in the same folder with
//! the same options, and compares the whole output line for line, except
//! where the scripts follow Perl's hash order, which changes from run to
//! run: functions (and calls in a tree) of equal counts, and the order of
//! the annotated files. There, the same lines must come with the same
//! counts in the same order, and the same file sections.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

use cgx_tests::annotate::profile_program;
use cgx_tests::cli::binary;
use cgx_tests::{output_of, successful_output_of, tests_dir};

const FANCY: &str =
    "--------------------------------------------------------------------------------";

/// The shims made in `dir/shims` by `cgx shims`.
fn shims(dir: &Path) -> PathBuf {
    let folder = dir.join("shims");
    successful_output_of(Command::new(binary()).arg("shims").arg(&folder));
    folder
}

/// `calls.c` and `mix.h` copied to `dir`, built and profiled there by
/// Valgrind's `tool` with `options`; the profile.
fn profile(dir: &Path, tool: &str, options: &[&str]) -> PathBuf {
    for name in ["calls.c", "mix.h"] {
        let source = tests_dir().join("programs").join(name);
        fs::copy(&source, dir.join(name)).expect("the source is copied");
    }
    profile_program(&dir.join("calls.c"), dir, &["-O2"], tool, options)
}

/// What the script printed, and how it ended.
struct Printed {
    stdout: String,
    code: Option<i32>,
    stderr: String,
}

fn printed(output: Output) -> Printed {
    Printed {
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        code: output.status.code(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Runs `script` (a path) with `args` in `dir`.
fn run(script: &Path, args: &[&str], dir: &Path) -> Printed {
    printed(output_of(
        Command::new(script)
            .args(args)
            .current_dir(dir)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin"),
    ))
}

/// A report cut where the scripts' hash order shows: the header and
/// function list, each annotated file's section, and what follows them
/// (files not found, events annotated).
struct Sections {
    head: Vec<String>,
    files: Vec<String>,
    tail: Vec<String>,
}

fn sections(text: &str) -> Sections {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let starts_section = |i: usize| {
        let next = lines.get(i + 1).copied().unwrap_or("");
        let is_fancy = lines[i].trim_end_matches('\n') == FANCY;
        let file = next.starts_with("-- ") && next.contains("-annotated source: ");
        let missing = next.starts_with("The following files chosen");
        let annotated = lines
            .get(i + 3)
            .is_some_and(|l| l.ends_with(" events annotated\n"))
            && lines.get(i + 2).is_some_and(|l| l.trim_end() == FANCY);
        is_fancy && (file || missing || annotated)
    };
    let mut cuts: Vec<usize> = (0..lines.len()).filter(|&i| starts_section(i)).collect();
    cuts.insert(0, 0);
    cuts.push(lines.len());
    let mut parts = cuts.windows(2).map(|w| lines[w[0]..w[1]].concat());
    let head = parts.next().unwrap_or_default();
    let (mut files, mut tail) = (Vec::new(), Vec::new());
    for part in parts {
        match part.contains("-annotated source: ")
            && part.lines().nth(1).is_some_and(|l| l.starts_with("-- "))
        {
            true => files.push(part),
            false => tail.push(part),
        }
    }
    files.sort();
    Sections {
        head: head.lines().map(str::to_owned).collect(),
        files,
        tail,
    }
}

/// The counts of a function-list line: what comes before its name.
fn counts(line: &str) -> &str {
    line.rsplit_once("  ").map_or(line, |(counts, _)| counts)
}

/// Panics unless `ours` is `theirs` up to the scripts' hash order.
fn assert_same_report(ours: &str, theirs: &str, context: &str) {
    if ours == theirs {
        return;
    }
    let (ours, theirs) = (sections(ours), sections(theirs));
    let mut sorted = [ours.head.clone(), theirs.head.clone()];
    sorted.iter_mut().for_each(|lines| lines.sort());
    assert_eq!(sorted[0], sorted[1], "{context}: the function list");
    let head_counts = |s: &Sections| {
        s.head
            .iter()
            .map(|l| counts(l).to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        head_counts(&ours),
        head_counts(&theirs),
        "{context}: the order of counts"
    );
    assert_eq!(
        ours.files.len(),
        theirs.files.len(),
        "{context}: the files annotated"
    );
    for (mine, valgrinds) in ours.files.iter().zip(&theirs.files) {
        assert_eq!(mine, valgrinds, "{context}: an annotated file");
    }
    assert_eq!(ours.tail, theirs.tail, "{context}: after the files");
}

/// Runs `script` of cgx (in `shims`) and Valgrind's with `args` in `dir`
/// and compares them; returns cgx's output.
fn compare(shims: &Path, script: &str, args: &[&str], dir: &Path) -> String {
    let ours = run(&shims.join(script), args, dir);
    let theirs = run(&Path::new("/usr/bin").join(script), args, dir);
    let context = format!("{script} {}", args.join(" "));
    assert_eq!(ours.code, Some(0), "{context}: {}", ours.stderr);
    assert_eq!(theirs.code, Some(0), "{context}: {}", theirs.stderr);
    assert_same_report(&ours.stdout, &theirs.stdout, &context);
    ours.stdout
}

/// Sets the modification time of `path`.
fn touch(path: &Path, time: SystemTime) {
    File::options()
        .write(true)
        .open(path)
        .and_then(|file| file.set_modified(time))
        .expect("the time is set");
}

#[test]
fn cg_annotate_annotates_sources_as_valgrinds() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let dir = dir.path();
    let shims = shims(dir);
    profile(dir, "cachegrind", &["--cache-sim=no"]);
    let sub = dir.join("sub");
    fs::create_dir(&sub).expect("a folder");
    let profile = "cachegrind.out";
    let default = compare(&shims, "cg_annotate", &[profile], dir);
    assert!(default.contains("-- Auto-annotated source: "), "{default}");
    assert!(default.contains(" events annotated\n"), "{default}");
    for args in [
        &["--context=2", profile][..],
        &["--context=0", "--show-percs=no", "--threshold=1", profile],
        &["--auto=no", profile],
        // Named sources (one a run: the script lists several in hash
        // order): one found here, one under the folder included.
        &["-I..", "--auto=no", "../cachegrind.out", "mix.h"],
        &["-I..", "--auto=no", "../cachegrind.out", "calls.c"],
        &["--include=../", "../cachegrind.out", "calls.c"],
    ] {
        let here = if args.iter().any(|arg| arg.starts_with("../")) {
            &sub
        } else {
            dir
        };
        if args.contains(&"mix.h") {
            fs::copy(dir.join("mix.h"), sub.join("mix.h")).expect("a copy here");
        }
        compare(&shims, "cg_annotate", args, here);
    }
    // The source changed since: newer than the profile, shorter than its
    // counted lines.
    let source = dir.join("calls.c");
    let text = fs::read_to_string(&source).expect("the source");
    let short: String = text
        .lines()
        .take(20)
        .map(|line| format!("{line}\n"))
        .collect();
    fs::write(&source, short).expect("the source is cut");
    touch(&source, SystemTime::now() + Duration::from_secs(3600));
    let changed = compare(&shims, "cg_annotate", &[profile], dir);
    assert!(changed.contains("<bogus line "), "{changed}");
    assert!(
        changed.contains("is more recent than input file"),
        "{changed}"
    );
    // Gone: listed as not found.
    fs::remove_file(&source).expect("the source goes");
    let gone = compare(&shims, "cg_annotate", &["--context=1", profile], dir);
    assert!(gone.contains("could not be found:\n"), "{gone}");
}

#[test]
fn callgrind_annotate_annotates_sources_and_prints_trees_as_valgrinds() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let dir = dir.path();
    let shims = shims(dir);
    profile(dir, "callgrind", &["--dump-instr=yes"]);
    let cgx_profile = dir.join("cgx.out");
    successful_output_of(
        Command::new(binary())
            .args(["run", "-q"])
            .arg(format!("--callgrind-out-file={}", cgx_profile.display()))
            .arg(dir.join("program"))
            .current_dir(dir)
            .stdout(std::process::Stdio::null()),
    );
    for profile in ["callgrind.out", "cgx.out"] {
        let default = compare(&shims, "callgrind_annotate", &[profile], dir);
        assert!(default.contains("Auto-annotation:  on"), "{default}");
        assert!(default.contains(" => "), "{default}");
        for args in [
            &["--tree=both", profile][..],
            &["--tree=caller", "--auto=no", profile],
            &["--tree=calling", "--inclusive=yes", "--context=3", profile],
            &["--tree=none", "--auto=yes", "--threshold=100", profile],
            // As PyTorch runs it: sources annotated too.
            &[
                "--inclusive=yes",
                "--threshold=100",
                "--show-percs=no",
                profile,
            ],
            &["--include=/usr", "--auto=yes", profile, "mix.h"],
        ] {
            let out = compare(&shims, "callgrind_annotate", args, dir);
            if args[0].starts_with("--tree=c") || args[0] == "--tree=both" {
                assert!(out.contains(" *  calls.c:main"), "{out}");
            }
        }
    }
}

#[test]
fn bad_options_fail_with_one_line_as_the_scripts_fail() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let dir = dir.path();
    let shims = shims(dir);
    profile(dir, "cachegrind", &["--cache-sim=no"]);
    for (script, args) in [
        ("callgrind_annotate", &["--tree=up", "cachegrind.out"][..]),
        ("cg_annotate", &["--context=many", "cachegrind.out"]),
        ("cg_annotate", &["--auto=maybe", "cachegrind.out"]),
        ("cg_annotate", &["--threshold=50", "cachegrind.out"]),
        ("cg_annotate", &["-I", "cachegrind.out"]),
        ("cg_annotate", &["cachegrind.out", "absent.c"]),
        ("callgrind_annotate", &["cachegrind.out", "absent.c"]),
    ] {
        let ours = run(&shims.join(script), args, dir);
        let theirs = run(&Path::new("/usr/bin").join(script), args, dir);
        let context = format!("{script} {args:?}: {}", ours.stderr);
        assert_ne!(theirs.code, Some(0), "{context}");
        assert_eq!(ours.code, Some(1), "{context}");
        assert_eq!(ours.stderr.lines().count(), 1, "{context}");
        assert!(ours.stdout.is_empty(), "{context}");
    }
}

#[test]
fn reports_are_cut_where_hash_order_shows() {
    let file = |name: &str| format!("{FANCY}\n-- Auto-annotated source: {name}\n{FANCY}\nIr \n\n");
    let text = format!(
        "head\n 5  a:f\n 5  b:g\n\n{}{}{FANCY}\nIr \n{FANCY}\n10  events annotated\n\n",
        file("x.c"),
        file("y.c")
    );
    let cut = sections(&text);
    assert_eq!(cut.head, ["head", " 5  a:f", " 5  b:g", ""]);
    assert_eq!(cut.files, [file("x.c"), file("y.c")]);
    assert_eq!(cut.tail.len(), 1);
    let swapped = format!(
        "head\n 5  b:g\n 5  a:f\n\n{}{}{FANCY}\nIr \n{FANCY}\n10  events annotated\n\n",
        file("y.c"),
        file("x.c")
    );
    assert_same_report(&text, &swapped, "swapped");
    assert_eq!(counts(" 5 ( 1.00%)  < a:f (1x)"), " 5 ( 1.00%)");
}
