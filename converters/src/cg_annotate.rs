//! The report of Valgrind 3.19's `cg_annotate` (its header, its summary of
//! functions and its annotated source files) on a Cachegrind file, `cg_diff`'s with negative counts
//! included (which the profile model, unsigned, does not hold: this module
//! reads the file itself, as the script does).
//!
//! The script's rules: a function is `FILE:FUNCTION` (`fl=` and `fn=` as
//! written), its counts the sum of its lines'; functions are sorted by the
//! size (absolute value) of the sort events, descending (ties by name here;
//! the script leaves them in hash order), and each is listed while it alone reaches the threshold
//! share of an event (`--threshold`, 0.1% by default, for the primary sort
//! event; 100% for the others). The files of the functions listed (with
//! `--auto=yes`, the default) and those named are then annotated
//! (`script_source`), with the counts of the file's `fl=` lines by line.

use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, Write};

use crate::script_report::{Choice, Report, ScriptError, FANCY};
use crate::script_source::{file_of, write_sources, FileLines, SourceOptions, Sources};

/// What the report shows.
#[derive(Clone, Debug)]
pub struct Options {
    /// `--threshold`, as given (printed as it is).
    pub threshold: String,
    /// `--show-percs`.
    pub show_percs: bool,
    /// `--show`: the events shown (all when empty).
    pub show: Vec<String>,
    /// `--sort`: the sort events (all, in the file's order, when empty).
    pub sort: Vec<String>,
    /// The file's name as given on the command line.
    pub file_name: String,
    /// The source files annotated and where they are looked for.
    pub sources: SourceOptions,
}

/// A Cachegrind file as the script reads it.
struct File {
    desc: Vec<String>,
    cmd: String,
    events: Vec<String>,
    functions: HashMap<String, Vec<i64>>,
    /// The counts by `fl=` file and line.
    lines: FileLines,
    summary: Vec<i64>,
}

/// Adds `counts` to `sums`, which grows to fit.
fn add(sums: &mut Vec<i64>, counts: &[i64]) {
    if sums.len() < counts.len() {
        sums.resize(counts.len(), 0);
    }
    for (sum, count) in sums.iter_mut().zip(counts) {
        *sum += count;
    }
}

/// Reads the Cachegrind file `input`, named `name` in errors.
fn read(input: impl BufRead, name: &str) -> Result<File, ScriptError> {
    let malformed = |line: usize, reason: &str| ScriptError::Malformed {
        file: name.to_string(),
        line,
        reason: reason.to_string(),
    };
    let numbers = |text: &str, line: usize| -> Result<Vec<i64>, ScriptError> {
        text.split_whitespace()
            .map(|count| {
                count
                    .parse::<i64>()
                    .map_err(|_| malformed(line, &format!("bad count '{count}'")))
            })
            .collect()
    };
    let mut file = File {
        desc: Vec::new(),
        cmd: String::new(),
        events: Vec::new(),
        functions: HashMap::new(),
        lines: FileLines::new(),
        summary: Vec::new(),
    };
    let (mut current_file, mut current) = (None::<String>, None::<String>);
    let mut summary = None;
    let mut last = 0;
    for (index, line) in input.lines().enumerate() {
        let (line, number) = (line?, index + 1);
        last = number;
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(desc) = line.strip_prefix("desc:") {
            file.desc.push(desc.trim_start().to_string());
        } else if let Some(cmd) = line.strip_prefix("cmd:") {
            file.cmd = cmd.trim_start().to_string();
        } else if let Some(events) = line.strip_prefix("events:") {
            file.events = events.split_whitespace().map(str::to_owned).collect();
        } else if let Some(name) = line.strip_prefix("fl=") {
            file.lines.entry(name.to_string()).or_default();
            current_file = Some(name.to_string());
            current = None;
        } else if let Some(function) = line.strip_prefix("fn=") {
            let fl = current_file
                .as_deref()
                .ok_or_else(|| malformed(number, "fn= before fl="))?;
            let name = format!("{fl}:{function}");
            file.functions.entry(name.clone()).or_default();
            current = Some(name);
        } else if let Some(counts) = line.strip_prefix("summary:") {
            summary = Some(numbers(counts, number)?);
        } else if line.starts_with(|c: char| c.is_ascii_digit() || c == '-') {
            let function = current
                .as_ref()
                .ok_or_else(|| malformed(number, "a cost line before fn="))?;
            let mut fields = line.splitn(2, char::is_whitespace);
            let line_number = fields.next().and_then(|at| at.parse::<u64>().ok());
            let counts = numbers(fields.next().unwrap_or(""), number)?;
            add(file.functions.entry(function.clone()).or_default(), &counts);
            // A negative line (never written) is left out of the sources.
            if let (Some(at), Some(fl)) = (line_number, current_file.as_ref()) {
                let lines = file.lines.entry(fl.clone()).or_default();
                add(lines.entry(at).or_default(), &counts);
            }
        } else {
            return Err(malformed(number, "not a line of the Cachegrind format"));
        }
    }
    if file.events.is_empty() {
        return Err(malformed(last, "no events: line"));
    }
    file.summary = summary.ok_or_else(|| malformed(last, "missing final summary line"))?;
    Ok(file)
}

/// Writes the report of the Cachegrind file `input`.
pub fn cg_annotate(
    input: impl BufRead,
    options: &Options,
    out: &mut dyn Write,
) -> Result<(), ScriptError> {
    let file = read(input, &options.file_name)?;
    let choice = Choice {
        show: &options.show,
        sort: &options.sort,
        threshold: &options.threshold,
        show_percs: options.show_percs,
    };
    let report = Report::new(&file.events, &file.summary, &choice)?;
    writeln!(out, "{FANCY}")?;
    for desc in &file.desc {
        writeln!(out, "{desc}")?;
    }
    writeln!(out, "Command:          {}", file.cmd)?;
    writeln!(out, "Data file:        {}", options.file_name)?;
    report.write_header_events(out, "100", &options.sources)?;
    let functions = file.functions.values().map(Vec::as_slice);
    let widths = report.write_totals(out, false, functions)?;
    // By size: a difference's negative counts sort as large ones.
    let functions = file
        .functions
        .iter()
        .map(|(name, costs)| (name, costs.as_slice()));
    let mut listed = BTreeSet::new();
    for (name, costs) in report.sorted(functions, i64::abs) {
        // Shown while it alone reaches a threshold of an event.
        let shown = report.sort.iter().enumerate().any(|(k, &i)| {
            let count = costs.get(i).copied().unwrap_or(0).unsigned_abs() as f64;
            let total = file.summary.get(i).copied().unwrap_or(0).unsigned_abs() as f64;
            let share = if total == 0.0 {
                0.0
            } else {
                count * 100.0 / total
            };
            let wanted = if k == 0 { report.threshold } else { 100.0 };
            share >= wanted
        });
        if !shown {
            break;
        }
        report.write_costs(out, costs, &widths)?;
        writeln!(out, " {name}")?;
        listed.insert(file_of(name).to_string());
    }
    writeln!(out)?;
    let calls = HashMap::new();
    let sources = Sources {
        lines: &file.lines,
        calls: &calls,
        listed,
        options: &options.sources,
        input_file: &options.file_name,
        total_at_least_printed: false,
    };
    write_sources(out, &report, &sources)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_difference_file_with_negative_counts_is_read() {
        let text = "desc: Files compared:   a; b\ncmd:  ./a; ./b\nevents:  Ir Dr\n\
                    fl=x.c\nfn=f\n0 -12 3\nfl=y.c\nfn=g\n0 5\n7 1 1\nsummary: -6 4\n";
        let file = read(text.as_bytes(), "d.out").unwrap();
        assert_eq!(file.desc, vec!["Files compared:   a; b".to_string()]);
        assert_eq!(file.functions["x.c:f"], vec![-12, 3]);
        assert_eq!(file.functions["y.c:g"], vec![6, 1]);
        assert_eq!(file.summary, vec![-6, 4]);
        assert_eq!(file.lines["y.c"][&0], vec![5]);
        assert_eq!(file.lines["y.c"][&7], vec![1, 1]);
        let bad = read(
            "events: Ir\nfl=x\nfn=f\n1 x\nsummary: 1\n".as_bytes(),
            "b.out",
        );
        assert_eq!(
            bad.err().map(|e| e.to_string()),
            Some("b.out:4: bad count 'x'".into())
        );
    }

    #[test]
    fn the_files_of_functions_over_the_threshold_are_annotated() {
        let text = "cmd: ./p\nevents: Ir\nfl=/absent/x.c\nfn=a\n3 9000\n\
                    fl=/absent/y.c\nfn=b\n4 995\nfl=/absent/z.c\nfn=c\n5 5\n\
                    fl=???\nfn=d\n0 1000\nsummary: 11000\n";
        let options = Options {
            threshold: "0.1".into(),
            show_percs: false,
            show: Vec::new(),
            sort: Vec::new(),
            file_name: "p.out".into(),
            sources: SourceOptions::default(),
        };
        let mut out = Vec::new();
        cg_annotate(text.as_bytes(), &options, &mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        // z.c's 0.05% is under the threshold; ??? is never annotated.
        let missing = format!(
            "{FANCY}\nThe following files chosen for auto-annotation could not be found:\n\
             {FANCY}\n  /absent/x.c\n  /absent/y.c\n\n"
        );
        assert!(out.ends_with(&missing), "{out}");
        assert!(out.contains(" ???:d\n") && !out.contains("z.c:c"), "{out}");
    }
}
