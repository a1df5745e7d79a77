//! `cgx annotate` and the annotate tools of Valgrind 3.19 (cg_annotate,
//! callgrind_annotate, and cg_merge / cg_diff to prepare their input), run and
//! their reports parsed into tables of numbers, so that tests compare figures,
//! not layouts.
//!
//! All reports are made without percentages (`--no-show-percs`,
//! `--show-percs=no`): then every row is a fixed number of count columns (a count
//! with thousands separators, or `.` for none) followed by text.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output};

use cgx_formats::{Profile, Record};

use crate::cli::cgx;
use crate::successful_output_of;

/// Signed counts (one per event) by name: `file:function`, or a file name.
pub type Table = BTreeMap<String, Vec<i64>>;

/// Signed counts by source file and line (0: unknown line).
pub type Lines = BTreeMap<(String, u64), Vec<i64>>;

/// Calls by (caller, callee), both `file:function`: their summed cost and count.
pub type Arcs = BTreeMap<(String, String), (Vec<i64>, i64)>;

/// What `cgx annotate` printed, section by section.
#[derive(Clone, Debug, Default)]
pub struct CgxReport {
    /// The whole output.
    pub text: String,
    /// `Events shown:`.
    pub events: Vec<String>,
    /// `PROGRAM TOTALS`.
    pub totals: Vec<i64>,
    /// The File:function summary: the total of each file.
    pub files: Table,
    /// The File:function summary: each function, as `file:function`.
    pub functions: Table,
    /// The Function:file summary: each function, as `file:function`.
    pub functions_by_name: Table,
    /// The functions of the call graph section (inclusive or self costs).
    pub call_functions: Table,
    /// The callers and callees of the call tree.
    pub arcs: Arcs,
    /// The counts of annotated source lines, including `<unknown (line 0)>` (line
    /// 0) and `<bogus line N>`.
    pub lines: Lines,
    /// The files annotated.
    pub annotated: std::collections::BTreeSet<String>,
    /// Files left unannotated, with the first line of the reason.
    pub unannotated: BTreeMap<String, String>,
    /// The rows of the annotation summary, in order.
    pub annotation_summary: Vec<Vec<i64>>,
    /// Lines of warning boxes (`@ ...`).
    pub warnings: Vec<String>,
}

/// Runs `cgx annotate --no-show-percs OPTIONS FILES` in `/`; panics unless it
/// succeeds with nothing on stderr.
pub fn cgx_annotate(files: &[&Path], options: &[&str]) -> CgxReport {
    let output = run_cgx_annotate(files, options);
    assert!(
        output.status.success() && output.stderr.is_empty(),
        "cgx annotate {options:?} {files:?} failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    parse_cgx(&text)
        .unwrap_or_else(|error| panic!("cannot parse cgx annotate's output ({error}):\n{text}"))
}

/// Runs `cgx annotate --no-show-percs OPTIONS FILES` and returns what it did.
pub fn run_cgx_annotate(files: &[&Path], options: &[&str]) -> Output {
    let args = [OsStr::new("annotate"), OsStr::new("--no-show-percs")]
        .into_iter()
        .chain(options.iter().map(OsStr::new))
        .chain(files.iter().map(|file| file.as_os_str()));
    cgx(args)
}

/// Parses `n` counts (`1,234`, `-5`, or `.` for none, which gives `None`) at the
/// start of `line`; returns them and the rest of the line after the separating
/// space.
pub fn parse_counts(line: &str, n: usize) -> Option<(Vec<Option<i64>>, &str)> {
    let mut rest = line;
    let mut counts = Vec::with_capacity(n);
    for _ in 0..n {
        rest = rest.trim_start_matches(' ');
        let end = rest.find(' ').unwrap_or(rest.len());
        let count = match &rest[..end] {
            "." => None,
            text => Some(text.replace(',', "").parse().ok()?),
        };
        counts.push(count);
        rest = &rest[end..];
    }
    Some((counts, rest.strip_prefix(' ').unwrap_or(rest)))
}

/// Counts with `.` as 0.
fn zeros(counts: Vec<Option<i64>>) -> Vec<i64> {
    counts.into_iter().map(|c| c.unwrap_or(0)).collect()
}

fn is_dashes(line: &str) -> bool {
    line.len() == 80 && line.bytes().all(|b| b == b'-')
}

/// `name [object]` without the object.
fn without_object(name: &str) -> &str {
    match name.rfind(" [") {
        Some(start) if name.ends_with(']') => &name[..start],
        _ => name,
    }
}

/// `name (1,234x)`: the name and the count.
fn call_count(text: &str) -> Option<(&str, i64)> {
    let text = without_object(text);
    let open = text.rfind(" (")?;
    let count = text[open + 2..]
        .strip_suffix("x)")?
        .replace(',', "")
        .parse()
        .ok()?;
    Some((&text[..open], count))
}

/// Parses the report of `cgx annotate --no-show-percs`.
pub fn parse_cgx(text: &str) -> Result<CgxReport, String> {
    let mut report = CgxReport {
        text: text.to_string(),
        ..CgxReport::default()
    };
    let lines: Vec<&str> = text.lines().collect();
    let mut index = 0;
    // Sections: a line of dashes, "-- TITLE", a line of dashes.
    while index < lines.len() {
        if !(is_dashes(lines[index]) && index + 2 < lines.len() && is_dashes(lines[index + 2])) {
            index += 1;
            continue;
        }
        let title = lines[index + 1]
            .strip_prefix("-- ")
            .ok_or_else(|| format!("no title at line {}", index + 2))?;
        let start = index + 3;
        let end = (start..lines.len())
            .find(|&i| is_dashes(lines[i]) && i + 2 < lines.len() && is_dashes(lines[i + 2]))
            .unwrap_or(lines.len());
        let body = &lines[start..end];
        let n = report.events.len();
        match title {
            "Metadata" => {
                report.events = body
                    .iter()
                    .find_map(|line| line.strip_prefix("Events shown:"))
                    .ok_or("no Events shown: line")?
                    .split_whitespace()
                    .map(String::from)
                    .collect();
            }
            "Summary" => {
                let line = body
                    .iter()
                    .find(|line| line.ends_with("PROGRAM TOTALS"))
                    .ok_or("no PROGRAM TOTALS")?;
                report.totals = zeros(parse_counts(line, n).ok_or("bad totals")?.0);
            }
            "File:function summary" | "Function:file summary" => {
                parse_summary(body, n, title.starts_with("File"), &mut report)?;
            }
            "Annotation summary" => {
                for line in body.iter().skip(2).filter(|line| !line.is_empty()) {
                    report
                        .annotation_summary
                        .push(zeros(parse_counts(line, n).ok_or("bad summary row")?.0));
                }
            }
            _ if title.starts_with("Annotated source file: ") => {
                let file = &title["Annotated source file: ".len()..];
                parse_source(file, body, n, &mut report)?;
            }
            _ if title.starts_with("Call tree") || title.starts_with("Inclusive") => {
                parse_call_section(body, n, &mut report)?;
            }
            _ => return Err(format!("unknown section '{title}'")),
        }
        index = end;
    }
    Ok(report)
}

fn parse_summary(
    body: &[&str],
    n: usize,
    by_file: bool,
    report: &mut CgxReport,
) -> Result<(), String> {
    let marker = if by_file { "< " } else { "> " };
    let key = |outer: &str, inner: &str| {
        if by_file {
            format!("{outer}:{inner}")
        } else {
            format!("{inner}:{outer}")
        }
    };
    let mut outer = String::new();
    for line in body.iter().skip(2).filter(|line| !line.is_empty()) {
        if let Some(entry) = line.strip_prefix(marker) {
            let (counts, name) = parse_counts(entry, n).ok_or("bad entry")?;
            let name = name.trim_start();
            let counts = zeros(counts);
            if let Some(file_or_function) = name.strip_suffix(':') {
                outer = file_or_function.to_string();
            } else {
                // A single inner row on the same line: `file:function` (or
                // `function:file`, where the file may not contain ':').
                let split = if by_file {
                    name.find(':')
                } else {
                    name.rfind(':')
                };
                let split = split.ok_or_else(|| format!("no ':' in '{name}'"))?;
                outer = name[..split].to_string();
                let table = if by_file {
                    &mut report.functions
                } else {
                    &mut report.functions_by_name
                };
                table.insert(key(&outer, &name[split + 1..]), counts.clone());
            }
            if by_file {
                report.files.insert(outer.clone(), counts);
            }
        } else {
            let inner = line
                .strip_prefix("  ")
                .ok_or_else(|| format!("bad row '{line}'"))?;
            let (counts, name) = parse_counts(inner, n).ok_or("bad inner row")?;
            let table = if by_file {
                &mut report.functions
            } else {
                &mut report.functions_by_name
            };
            table.insert(key(&outer, name.trim_start()), zeros(counts));
        }
    }
    Ok(())
}

fn parse_source(file: &str, body: &[&str], n: usize, report: &mut CgxReport) -> Result<(), String> {
    let mut rows = body.iter().peekable();
    let mut warning = false;
    // Warning boxes, then either a reason for not annotating or the header.
    while let Some(line) = rows.peek() {
        if line.starts_with('@') {
            if line.starts_with("@ ") {
                report.warnings.push(line.to_string());
            }
            warning = true;
            rows.next();
        } else if warning && line.is_empty() {
            rows.next();
        } else {
            break;
        }
    }
    match rows.next() {
        Some(line) if line.starts_with("Unannotated") => {
            report
                .unannotated
                .insert(file.to_string(), line.to_string());
            return Ok(());
        }
        Some(_header) => {
            report.annotated.insert(file.to_string());
        }
        None => return Err(format!("{file}: empty section")),
    }
    let mut numbers = SourceLines::new();
    for line in rows {
        if line.is_empty() {
            continue;
        }
        if line.starts_with('@') {
            if line.starts_with("@ ") {
                report.warnings.push(line.to_string());
            }
            continue;
        }
        if numbers.gap(line)? {
            continue;
        }
        let (counts, text) = parse_counts(line, n).ok_or_else(|| format!("bad row '{line}'"))?;
        let text = text.trim_start();
        let line_number = numbers.number(text, text == "<unknown (line 0)>", line)?;
        if counts.iter().any(Option::is_some) {
            report
                .lines
                .insert((file.to_string(), line_number), zeros(counts));
        }
    }
    Ok(())
}

fn parse_call_section(body: &[&str], n: usize, report: &mut CgxReport) -> Result<(), String> {
    let mut tree = TreeRows::default();
    for line in body.iter().skip(2).filter(|line| !line.is_empty()) {
        let (marker, rest) = line.split_at(2.min(line.len()));
        let (counts, text) = parse_counts(rest, n).ok_or_else(|| format!("bad row '{line}'"))?;
        let counts = zeros(counts);
        let text = text.trim_start();
        if marker == "* " {
            let function = tree.function(text, &mut report.arcs);
            report.call_functions.insert(function, counts);
        } else if let Some(caller) = text.strip_prefix("< ") {
            tree.caller(caller, counts, line)?;
        } else if let Some(callee) = text.strip_prefix("> ") {
            tree.callee(callee, counts, line, &mut report.arcs)?;
        } else {
            return Err(format!("bad call tree row '{line}'"));
        }
    }
    Ok(())
}

/// The rows of a call tree listing, where the callers of a function come before
/// it and its callees after it (cgx's call section and callgrind_annotate's
/// `--tree` output): turns them into arcs.
#[derive(Default)]
struct TreeRows {
    current: String,
    pending_callers: Vec<(String, Vec<i64>, i64)>,
}

impl TreeRows {
    /// A function row: the callers seen since the last one call it. Returns its
    /// name without the object.
    fn function(&mut self, text: &str, arcs: &mut Arcs) -> String {
        self.current = without_object(text.trim_start()).to_string();
        for (caller, cost, count) in self.pending_callers.drain(..) {
            arcs.insert((caller, self.current.clone()), (cost, count));
        }
        self.current.clone()
    }

    /// A caller row (`name (Nx)`) of the function that follows.
    fn caller(&mut self, text: &str, counts: Vec<i64>, line: &str) -> Result<(), String> {
        let (caller, count) = call_count(text).ok_or_else(|| format!("bad caller '{line}'"))?;
        self.pending_callers
            .push((caller.to_string(), counts, count));
        Ok(())
    }

    /// A callee row (`name (Nx)`) of the function before.
    fn callee(
        &self,
        text: &str,
        counts: Vec<i64>,
        line: &str,
        arcs: &mut Arcs,
    ) -> Result<(), String> {
        let (callee, count) = call_count(text).ok_or_else(|| format!("bad callee '{line}'"))?;
        arcs.insert((self.current.clone(), callee.to_string()), (counts, count));
        Ok(())
    }
}

/// What cg_annotate or callgrind_annotate (3.19) printed.
#[derive(Clone, Debug, Default)]
pub struct OldReport {
    /// `Events shown:`.
    pub events: Vec<String>,
    /// `PROGRAM TOTALS`.
    pub totals: Vec<i64>,
    /// The function table (`file:function`; with `--tree`, the `*` rows).
    pub functions: Table,
    /// callgrind_annotate `--tree`: callers (`<`) and callees (`>`).
    pub arcs: Arcs,
    /// Annotated lines (line 0: "counts for unidentified lines").
    pub lines: Lines,
    /// The files that "could not be found".
    pub not_found: Vec<String>,
}

/// Runs Valgrind's `tool` (`cg_annotate` or `callgrind_annotate`) in `/` on
/// `file` with `--show-percs=no` and `options`, and parses what it prints.
pub fn old_annotate(tool: &str, file: &Path, options: &[&str]) -> OldReport {
    assert!(file.is_absolute(), "{} must be absolute", file.display());
    let output = successful_output_of(
        Command::new(tool)
            .arg("--show-percs=no")
            .args(options)
            .arg(file)
            .current_dir("/"),
    );
    let text = String::from_utf8_lossy(&output.stdout);
    parse_old(&text).unwrap_or_else(|error| {
        panic!(
            "cannot parse {tool} {options:?} {} ({error}):\n{text}",
            file.display()
        )
    })
}

/// Parses cg_annotate's or callgrind_annotate's (3.19) output.
pub fn parse_old(text: &str) -> Result<OldReport, String> {
    let mut report = OldReport {
        events: text
            .lines()
            .find_map(|line| line.strip_prefix("Events shown:"))
            .ok_or("no Events shown: line")?
            .split_whitespace()
            .map(String::from)
            .collect(),
        ..OldReport::default()
    };
    let n = report.events.len();
    let lines: Vec<&str> = text.lines().collect();
    let totals = lines
        .iter()
        .find(|line| line.contains(" PROGRAM TOTALS"))
        .ok_or("no PROGRAM TOTALS")?;
    report.totals = zeros(parse_counts(totals, n).ok_or("bad totals")?.0);
    let table = lines
        .iter()
        .position(|line| line.ends_with(" file:function"))
        .ok_or("no function table")?;
    let mut index = table + 2;
    let mut tree = TreeRows::default();
    while index < lines.len() && !is_dashes(lines[index]) {
        let line = lines[index];
        index += 1;
        if line.trim().is_empty() {
            continue;
        }
        let (counts, text) = parse_counts(line, n).ok_or_else(|| format!("bad row '{line}'"))?;
        let counts = zeros(counts);
        let text = text.trim_start();
        if let Some(function) = text.strip_prefix("* ") {
            let function = tree.function(function, &mut report.arcs);
            report.functions.insert(function, counts);
        } else if let Some(caller) = text.strip_prefix("< ") {
            tree.caller(caller, counts, line)?;
        } else if let Some(callee) = text.strip_prefix(">   ") {
            tree.callee(callee, counts, line, &mut report.arcs)?;
        } else {
            report
                .functions
                .insert(without_object(text).to_string(), counts);
        }
    }
    // Annotated files.
    while index < lines.len() {
        let line = lines[index];
        index += 1;
        let Some(file) = line
            .strip_prefix("-- Auto-annotated source: ")
            .or_else(|| line.strip_prefix("-- User-annotated source: "))
        else {
            if line.starts_with("The following files chosen for auto-annotation could not be found")
            {
                index += 1;
                while index < lines.len() && lines[index].starts_with("  ") {
                    report.not_found.push(lines[index].trim().to_string());
                    index += 1;
                }
            }
            continue;
        };
        index += 1; // dashes
        let mut numbers = SourceLines::new();
        let mut header_seen = false;
        while index < lines.len() && !is_dashes(lines[index]) {
            let line = lines[index];
            index += 1;
            if line.trim().is_empty() || line.starts_with('@') {
                continue;
            }
            if !header_seen {
                // The events header.
                header_seen = true;
                continue;
            }
            if numbers.gap(line)? {
                continue;
            }
            let Some((counts, text)) = parse_counts(line, n) else {
                return Err(format!("{file}: bad row '{line}'"));
            };
            let text = text.trim_start();
            if text.starts_with("=> ") {
                continue;
            }
            let unknown = text.starts_with("<counts for unidentified lines in ");
            let line_number = numbers.number(text, unknown, line)?;
            if counts.iter().any(Option::is_some) {
                report
                    .lines
                    .insert((file.to_string(), line_number), zeros(counts));
            }
        }
    }
    Ok(report)
}

/// Builds the C program `source` with `gcc -g FLAGS` into `dir` and runs it under
/// `valgrind -q --tool=TOOL OPTIONS`; returns the profile, `dir/TOOL.out`.
pub fn profile_program(
    source: &Path,
    dir: &Path,
    flags: &[&str],
    tool: &str,
    options: &[&str],
) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).expect("the folder is created");
    let executable = dir.join("program");
    successful_output_of(
        Command::new("gcc")
            .arg("-g")
            .args(flags)
            .arg("-o")
            .arg(&executable)
            .arg(source),
    );
    let profile = dir.join(format!("{tool}.out"));
    successful_output_of(
        Command::new("valgrind")
            .arg("-q")
            .arg(format!("--tool={tool}"))
            .arg(format!("--{tool}-out-file={}", profile.display()))
            .args(options)
            .arg(&executable)
            .current_dir(dir)
            .stdout(std::process::Stdio::null()),
    );
    profile
}

/// Runs `cg_merge -o OUTPUT FILES`.
pub fn cg_merge(files: &[&Path], output: &Path) {
    successful_output_of(Command::new("cg_merge").arg("-o").arg(output).args(files));
}

/// Runs `cg_diff OPTIONS FIRST SECOND > OUTPUT`.
pub fn cg_diff(first: &Path, second: &Path, options: &[&str], output: &Path) {
    let result = successful_output_of(Command::new("cg_diff").args(options).arg(first).arg(second));
    std::fs::write(output, result.stdout).expect("the diff is written");
}

/// Adds `counts` to the row `key` of `table`.
pub fn add_row<K: Ord>(table: &mut BTreeMap<K, Vec<i64>>, key: K, counts: &[i64]) {
    let row = table.entry(key).or_default();
    if row.len() < counts.len() {
        row.resize(counts.len(), 0);
    }
    for (sum, count) in row.iter_mut().zip(counts) {
        *sum += count;
    }
}

/// `table` without the rows whose counts are all zero.
pub fn nonzero<K: Ord>(mut table: BTreeMap<K, Vec<i64>>) -> BTreeMap<K, Vec<i64>> {
    table.retain(|_, counts| counts.iter().any(|&c| c != 0));
    table
}

/// The file totals of a function table (`file:function` rows; the file is what
/// comes before the first ':').
pub fn file_totals(functions: &Table) -> Table {
    let mut files = Table::new();
    for (name, counts) in functions {
        let file = name.split_once(':').map_or(name.as_str(), |(file, _)| file);
        add_row(&mut files, file.to_string(), counts);
    }
    files
}

/// The inclusive costs of the calls with a count of 0, by the file and line of the
/// call: callgrind_annotate 3.19 takes the line after `calls=0` for a cost line.
pub fn zero_count_call_lines(profile: &Profile) -> Lines {
    let mut lines = Lines::new();
    for part in &profile.parts {
        for (_, records) in part.functions() {
            records.for_each(part.events.len(), |record| {
                if let Record::Call {
                    file,
                    at,
                    count: 0,
                    inclusive,
                    ..
                } = record
                {
                    let counts: Vec<i64> = inclusive.iter().map(|&c| c as i64).collect();
                    add_row(
                        &mut lines,
                        (profile.names.get(file).to_string(), at.line),
                        &counts,
                    );
                }
            });
        }
    }
    lines
}

/// The calls in `profile`, by (caller, callee) as `file:function` (the caller's
/// file is that of the call's line): summed costs, and whether any has a count
/// above 0. Only calls with a count of 0 are summed if `zero_count_only`.
fn calls(profile: &Profile, zero_count_only: bool) -> BTreeMap<(String, String), (Vec<i64>, bool)> {
    let mut calls: BTreeMap<(String, String), (Vec<i64>, bool)> = BTreeMap::new();
    for part in &profile.parts {
        for (function, records) in part.functions() {
            let name = profile.names.get(function.name);
            records.for_each(part.events.len(), |record| {
                if let Record::Call {
                    file,
                    callee,
                    count,
                    inclusive,
                    ..
                } = record
                {
                    let caller = format!("{}:{name}", profile.names.get(file));
                    let callee = format!(
                        "{}:{}",
                        profile.names.get(callee.file),
                        profile.names.get(callee.name)
                    );
                    let entry = calls
                        .entry((caller, callee))
                        .or_insert_with(|| (vec![0; part.events.len()], false));
                    entry.1 |= count > 0;
                    if count == 0 || !zero_count_only {
                        for (sum, &cost) in entry.0.iter_mut().zip(inclusive) {
                            *sum += cost as i64;
                        }
                    }
                }
            });
        }
    }
    calls
}

/// The costs of calls with a count of 0, by (caller, callee): callgrind_annotate
/// 3.19 leaves them out of its call tree (and out of the call entirely when no
/// call between the two has a count above 0).
pub fn zero_count_arcs(profile: &Profile) -> BTreeMap<(String, String), Vec<i64>> {
    calls(profile, true)
        .into_iter()
        .map(|(key, (costs, _))| (key, costs))
        .collect()
}

/// The costs of the calls with a count of 0 to each function that also has calls
/// with a count above 0: callgrind_annotate 3.19 leaves them out of its
/// inclusive cost (which is the sum of the calls to a function, those with a count
/// above 0, when there are any).
pub fn zero_count_calls_to_called(profile: &Profile) -> Table {
    let mut callees: BTreeMap<String, (Vec<i64>, bool)> = BTreeMap::new();
    for ((_, callee), (costs, counted)) in calls(profile, true) {
        let entry = callees
            .entry(callee)
            .or_insert_with(|| (vec![0; costs.len()], false));
        entry.1 |= counted;
        for (sum, cost) in entry.0.iter_mut().zip(&costs) {
            *sum += cost;
        }
    }
    callees
        .into_iter()
        .filter(|(_, (_, counted))| *counted)
        .map(|(callee, (costs, _))| (callee, costs))
        .collect()
}

/// Numbers the rows of an annotated source listing, as cg_annotate and
/// callgrind_annotate print them: rows count up from line 1; a `-- line N ---`
/// marker before a range of rows says where the range starts (the one after it
/// only closes it); the rows of line 0 and `<bogus line N>` rows say their own.
struct SourceLines {
    next: u64,
    in_range: bool,
}

impl SourceLines {
    fn new() -> SourceLines {
        SourceLines {
            next: 1,
            in_range: false,
        }
    }

    /// Takes `line` if it is a `-- line N ---` marker.
    fn gap(&mut self, line: &str) -> Result<bool, String> {
        let Some(rest) = line.strip_prefix("-- line ") else {
            return Ok(false);
        };
        let number: u64 = rest
            .split(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| format!("bad gap line '{line}'"))?;
        if self.in_range {
            self.in_range = false;
        } else {
            self.next = number;
        }
        Ok(true)
    }

    /// The line number of a row whose text (after the counts) is `text`;
    /// `unknown` says it is the row of line 0. `line` is the whole row, for errors.
    fn number(&mut self, text: &str, unknown: bool, line: &str) -> Result<u64, String> {
        if unknown {
            return Ok(0);
        }
        if let Some(bogus) = text.strip_prefix("<bogus line ") {
            return bogus
                .strip_suffix('>')
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| format!("bad bogus line '{line}'"));
        }
        self.in_range = true;
        self.next += 1;
        Ok(self.next - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_text() {
        let (counts, rest) = parse_counts("1,234     .  -5  text  x", 3).unwrap();
        assert_eq!(counts, [Some(1234), None, Some(-5)]);
        assert_eq!(rest, " text  x");
        assert_eq!(call_count("a.c:f (1,234x) [obj]"), Some(("a.c:f", 1234)));
    }

    #[test]
    fn source_rows_are_numbered_across_gaps() {
        let text = "\
--------------------------------------------------------------------------------
-- Metadata
--------------------------------------------------------------------------------
Events shown:     A

--------------------------------------------------------------------------------
-- Annotated source file: f.c
--------------------------------------------------------------------------------
A 

3  <unknown (line 0)>

-- line 4 ----------------------------------------
. four
5 five
-- line 5 ----------------------------------------
-- line 6 ----------------------------------------
7 six

2  <bogus line 99>
";
        let report = parse_cgx(text).unwrap();
        let lines: Vec<_> = report.lines.iter().map(|((_, l), c)| (*l, c[0])).collect();
        assert_eq!(lines, [(0, 3), (5, 5), (6, 7), (99, 2)]);
    }
}
