//! Readers of the stack formats `cgx convert` writes: folded lines parsed here,
//! pprof files read by `go tool pprof`, speedscope files checked against the
//! schema the speedscope npm package ships (with Python's jsonschema), and the
//! totals Valgrind wrote, to compare with.
//!
//! A reader that is not installed makes [`available`] print why the check is
//! skipped, or fail when the environment variable CI is set (tests/setup.sh
//! installs them all).

use std::env;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::tables::count_lines;
use crate::{output_of, successful_output_of, workspace_root};

/// The speedscope release whose schema the tests check against.
pub const SPEEDSCOPE_VERSION: &str = "1.25.0";

/// One folded line: the frames, outermost first, and the weight.
pub type FoldedStack = (Vec<String>, u64);

/// Parses folded stacks (`a;b;c 123` per line); panics on a malformed line.
pub fn parse_folded(text: &str) -> Vec<FoldedStack> {
    text.lines()
        .map(|line| {
            let (stack, weight) = line
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("no weight in the folded line {line:?}"));
            let weight = weight
                .parse()
                .unwrap_or_else(|_| panic!("a bad weight in the folded line {line:?}"));
            (stack.split(';').map(String::from).collect(), weight)
        })
        .collect()
}

/// The events and their totals in a profile Valgrind wrote: the `events:` line and
/// the sum of the `totals:` lines of all parts (a Cachegrind file, which has
/// none, gives its `summary:`). Read from the text, independently of cgx.
pub fn valgrind_totals(file: &Path) -> Vec<(String, u64)> {
    let text = fs::read_to_string(file).expect("a readable profile");
    let events: Vec<String> = text
        .lines()
        .find_map(|line| line.strip_prefix("events:"))
        .expect("an events: line")
        .split_whitespace()
        .map(String::from)
        .collect();
    let mut lines = count_lines(&text, "totals:");
    if lines.is_empty() {
        lines = count_lines(&text, "summary:");
    }
    assert!(!lines.is_empty(), "{}: no totals", file.display());
    let mut totals = vec![0u64; events.len()];
    for line in lines {
        for (total, count) in totals.iter_mut().zip(line) {
            *total += count;
        }
    }
    events.into_iter().zip(totals).collect()
}

/// The `cmd:` line of a profile.
pub fn command_of(file: &Path) -> String {
    let text = fs::read_to_string(file).expect("a readable profile");
    text.lines()
        .find_map(|line| line.strip_prefix("cmd:"))
        .expect("a cmd: line")
        .trim()
        .to_string()
}

/// Whether a reader is there; if not, prints that the check of `what` is skipped,
/// or panics when the environment variable CI is set.
pub fn available(present: bool, what: &str, install: &str) -> bool {
    if !present {
        assert!(
            env::var_os("CI").is_none(),
            "{what}: not installed ({install}), and CI is set"
        );
        eprintln!("skipping the {what} check: not installed ({install})");
    }
    present
}

/// Whether `program` runs (is on the PATH).
pub fn installed(program: &str) -> bool {
    match Command::new(program).arg("--version").output() {
        Ok(_) => true,
        Err(error) => error.kind() != ErrorKind::NotFound,
    }
}

/// What `go tool pprof -top FILE` prints; `None` (after [`available`]) without Go.
pub fn pprof_top(file: &Path) -> Option<String> {
    if !available(
        installed("go"),
        "go tool pprof",
        "apt-get install golang-go",
    ) {
        return None;
    }
    let output = successful_output_of(Command::new("go").args(["tool", "pprof", "-top"]).arg(file));
    Some(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The total in pprof's `Showing nodes accounting for X, P% of TOTAL total`.
pub fn pprof_total(top: &str) -> Option<u64> {
    let line = top.lines().find(|line| line.ends_with(" total"))?;
    let (_, rest) = line.rsplit_once(" of ")?;
    rest.strip_suffix(" total")?.parse().ok()
}

/// The flat count of `function` in pprof's `-top` table.
pub fn pprof_flat(top: &str, function: &str) -> Option<u64> {
    top.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields[..] {
            [flat, _, _, _, _, name] if name == function => flat.parse().ok(),
            _ => None,
        }
    })
}

/// The `file-format-schema.json` of the speedscope npm package, fetched with
/// `npm pack` into `target/speedscope-VERSION/` the first time; `None` (after
/// [`available`]) without npm.
pub fn speedscope_schema() -> Option<PathBuf> {
    let dir = workspace_root()
        .join("target")
        .join(format!("speedscope-{SPEEDSCOPE_VERSION}"));
    let schema = dir.join("package/dist/release/file-format-schema.json");
    if schema.is_file() {
        return Some(schema);
    }
    if !available(installed("npm"), "speedscope schema", "npm, from Node.js") {
        return None;
    }
    fs::create_dir_all(&dir).expect("a folder for the speedscope package");
    let package = format!("speedscope@{SPEEDSCOPE_VERSION}");
    let packed = successful_output_of(
        Command::new("npm")
            .args(["pack", "--silent", &package, "--pack-destination"])
            .arg(&dir),
    );
    let tarball = String::from_utf8_lossy(&packed.stdout).trim().to_string();
    successful_output_of(
        Command::new("tar")
            .arg("xzf")
            .arg(dir.join(&tarball))
            .arg("-C")
            .arg(&dir)
            .arg("package/dist/release/file-format-schema.json"),
    );
    assert!(schema.is_file(), "npm pack {package} has no schema");
    Some(schema)
}

/// Checks `file` against the JSON schema `schema` with Python's jsonschema:
/// `Some(Err(message))` if it does not validate, `None` (after [`available`])
/// without jsonschema.
pub fn validate_json(schema: &Path, file: &Path) -> Option<Result<(), String>> {
    let has_jsonschema = Command::new("python3")
        .args(["-c", "import jsonschema"])
        .output()
        .is_ok_and(|output| output.status.success());
    if !available(has_jsonschema, "JSON schema", "pip install jsonschema") {
        return None;
    }
    let script = "import json, sys, jsonschema\n\
        schema = json.load(open(sys.argv[1]))\n\
        jsonschema.validators.validator_for(schema).check_schema(schema)\n\
        jsonschema.validate(json.load(open(sys.argv[2])), schema)\n";
    let output = output_of(
        Command::new("python3")
            .args(["-c", script])
            .arg(schema)
            .arg(file),
    );
    Some(if output.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    })
}
