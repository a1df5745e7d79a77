//! The programs that read profiles: callgrind_annotate, cg_annotate (both 3.19)
//! and gprof2dot. They run in `/`, so that callgrind_annotate, which strips the
//! current folder from file names, prints every file name as the profile has it.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::successful_output_of;
use crate::tables::{without_zeros, Functions};

/// What callgrind_annotate or cg_annotate printed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// `Events recorded:`.
    pub events: Vec<String>,
    /// The `PROGRAM TOTALS` line.
    pub totals: Vec<u64>,
    /// The function table, `file:function` (object names removed) to counts.
    pub functions: Functions,
    /// What the tool printed on stderr (warnings).
    pub stderr: String,
}

/// Runs `callgrind_annotate` on `file` with `options` added, every function listed.
pub fn callgrind_annotate(file: &Path, options: &[&str]) -> Report {
    annotate("callgrind_annotate", "--threshold=100", file, options)
}

/// Runs `cg_annotate` on `file`, every function listed (its threshold is at most
/// 20%; 0 lists everything).
pub fn cg_annotate(file: &Path) -> Report {
    annotate("cg_annotate", "--threshold=0", file, &[])
}

fn annotate(tool: &str, threshold: &str, file: &Path, options: &[&str]) -> Report {
    assert!(file.is_absolute(), "{} must be absolute", file.display());
    let output = successful_output_of(
        Command::new(tool)
            .args([threshold, "--auto=no", "--show-percs=no"])
            .args(options)
            .arg(file)
            .current_dir("/"),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    parse_report(&stdout, stderr).unwrap_or_else(|| {
        panic!(
            "cannot parse the output of {tool} {}:\n{stdout}",
            file.display()
        )
    })
}

/// Parses the events, totals and function table of an annotate tool's output.
fn parse_report(stdout: &str, stderr: String) -> Option<Report> {
    let events: Vec<String> = stdout
        .lines()
        .find_map(|line| line.strip_prefix("Events recorded:"))?
        .split_whitespace()
        .map(String::from)
        .collect();
    let mut lines = stdout.lines();
    let totals_line = lines.find(|line| line.contains(" PROGRAM TOTALS"))?;
    let (totals, _) = parse_counts(totals_line, events.len())?;
    lines.find(|line| line.ends_with(" file:function"))?;
    lines.next()?; // the line of dashes
    let mut functions = Functions::new();
    for line in lines.take_while(|line| !line.trim().is_empty()) {
        let (counts, name) = parse_counts(line, events.len())?;
        let name = name.trim();
        // callgrind_annotate appends " [OBJECT]".
        let name = match name.rfind(" [") {
            Some(start) if name.ends_with(']') => &name[..start],
            _ => name,
        };
        let previous = functions.insert(name.to_string(), counts);
        assert!(previous.is_none(), "{name} is listed twice");
    }
    Some(Report {
        events,
        totals,
        functions: without_zeros(functions),
        stderr,
    })
}

/// Parses `n` counts (`1,234`, or `.` for none) at the start of `line`; returns
/// them and the rest of the line.
fn parse_counts(line: &str, n: usize) -> Option<(Vec<u64>, &str)> {
    let mut rest = line;
    let mut counts = Vec::with_capacity(n);
    for _ in 0..n {
        rest = rest.trim_start();
        let end = rest.find(' ').unwrap_or(rest.len());
        let count = match &rest[..end] {
            "." => 0,
            text => text.replace(',', "").parse().ok()?,
        };
        counts.push(count);
        rest = &rest[end..];
    }
    Some((counts, rest))
}

/// Runs `gprof2dot -f callgrind` on `file`; `None` when gprof2dot is not installed.
pub fn gprof2dot(file: &Path) -> Option<Output> {
    let mut command = Command::new("gprof2dot");
    command.args(["-f", "callgrind"]).arg(file);
    match command.output() {
        Ok(output) => Some(output),
        Err(error) if error.kind() == ErrorKind::NotFound => None,
        Err(error) => panic!("cannot run {command:?}: {error}"),
    }
}

/// Loads `files` in one headless KCachegrind (`QT_QPA_PLATFORM=offscreen`, in its
/// own D-Bus session) for `seconds`, then returns the loader's complaints: the
/// stderr lines `Loading "FILE" : LINE : "message"`. `None` when KCachegrind or
/// dbus-run-session is not installed. KCachegrind never exits by itself, so this
/// always takes `seconds`.
pub fn kcachegrind_complaints(files: &[PathBuf], seconds: u32) -> Option<Vec<String>> {
    let mut command = Command::new("timeout");
    command
        .arg(seconds.to_string())
        .args(["dbus-run-session", "--", "kcachegrind"])
        .args(files)
        .env("QT_QPA_PLATFORM", "offscreen");
    let installed = ["kcachegrind", "dbus-run-session"].iter().all(|tool| {
        Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|output| output.status.success())
    });
    if !installed {
        return None;
    }
    let output = crate::output_of(&mut command);
    Some(
        String::from_utf8_lossy(&output.stderr)
            .lines()
            .filter(|line| line.starts_with("Loading "))
            .map(str::to_string)
            .collect(),
    )
}
