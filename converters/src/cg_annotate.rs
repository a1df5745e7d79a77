//! The report of Valgrind 3.19's `cg_annotate` (its header and its summary
//! of functions) on a Cachegrind file, `cg_diff`'s with negative counts
//! included (which the profile model, unsigned, does not hold: this module
//! reads the file itself, as the script does).
//!
//! The script's rules: a function is `FILE:FUNCTION` (`fl=` and `fn=` as
//! written), its counts the sum of its lines'; functions are sorted by the
//! size (absolute value) of the sort events, descending (ties by name here;
//! the script leaves them in hash order), and each is listed while it alone reaches the threshold
//! share of an event (`--threshold`, 0.1% by default, for the primary sort
//! event; 100% for the others). Source files are not annotated (as with
//! `--auto=no`).

use std::collections::HashMap;
use std::io::{self, BufRead, Write};

use crate::script_columns::Columns;

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
}

/// Why the report cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A line the format does not allow where it is.
    #[error("{file}:{line}: {reason}")]
    Malformed {
        /// The file.
        file: String,
        /// The line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// `--show` or `--sort` names an event the file does not have.
    #[error("--{option} event `{event}' did not appear in input")]
    NoEvent {
        /// `show` or `sort`.
        option: &'static str,
        /// The event.
        event: String,
    },
    /// `--threshold` is not a number from 0 to 100.
    #[error("--threshold={0}: not a percentage from 0 to 100")]
    Threshold(String),
    /// Reading or writing failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// A Cachegrind file as the script reads it.
struct File {
    desc: Vec<String>,
    cmd: String,
    events: Vec<String>,
    functions: HashMap<String, Vec<i128>>,
    summary: Vec<i128>,
}

/// Reads the Cachegrind file `input`, named `name` in errors.
fn read(input: impl BufRead, name: &str) -> Result<File, Error> {
    let malformed = |line: usize, reason: &str| Error::Malformed {
        file: name.to_string(),
        line,
        reason: reason.to_string(),
    };
    let numbers = |text: &str, line: usize| -> Result<Vec<i128>, Error> {
        text.split_whitespace()
            .map(|count| {
                count
                    .parse::<i128>()
                    .map_err(|_| malformed(line, &format!("bad count '{count}'")))
            })
            .collect()
    };
    let mut file = File {
        desc: Vec::new(),
        cmd: String::new(),
        events: Vec::new(),
        functions: HashMap::new(),
        summary: Vec::new(),
    };
    let (mut current_file, mut current) = (None::<String>, None::<String>);
    let mut summary = None;
    for (index, line) in input.lines().enumerate() {
        let (line, number) = (line?, index + 1);
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
            fields.next();
            let counts = numbers(fields.next().unwrap_or(""), number)?;
            let sums = file.functions.entry(function.clone()).or_default();
            if sums.len() < counts.len() {
                sums.resize(counts.len(), 0);
            }
            for (sum, count) in sums.iter_mut().zip(counts) {
                *sum += count;
            }
        } else {
            return Err(malformed(number, "not a line of the Cachegrind format"));
        }
    }
    if file.events.is_empty() {
        return Err(malformed(0, "no events: line"));
    }
    file.summary = summary.ok_or_else(|| malformed(0, "missing final summary line"))?;
    Ok(file)
}

/// The positions of `wanted` (all when empty) in `events`.
fn positions(
    events: &[String],
    wanted: &[String],
    option: &'static str,
) -> Result<Vec<usize>, Error> {
    if wanted.is_empty() {
        return Ok((0..events.len()).collect());
    }
    wanted
        .iter()
        .map(|event| {
            events
                .iter()
                .position(|known| known == event)
                .ok_or_else(|| Error::NoEvent {
                    option,
                    event: event.clone(),
                })
        })
        .collect()
}

/// Writes the report of the Cachegrind file `input`.
pub fn cg_annotate(
    input: impl BufRead,
    options: &Options,
    out: &mut dyn Write,
) -> Result<(), Error> {
    let threshold: f64 = options
        .threshold
        .trim_end_matches('%')
        .parse()
        .ok()
        .filter(|value| (0.0..=100.0).contains(value))
        .ok_or_else(|| Error::Threshold(options.threshold.clone()))?;
    let file = read(input, &options.file_name)?;
    let events = &file.events;
    let show = positions(events, &options.show, "show")?;
    let sort = positions(events, &options.sort, "sort")?;
    let fancy = "-".repeat(80);
    let names = |positions: &[usize]| -> String {
        let listed: Vec<&str> = positions.iter().map(|&i| events[i].as_str()).collect();
        listed.join(" ")
    };
    let thresholds: Vec<String> = (0..sort.len())
        .map(|i| match i {
            0 => options.threshold.trim_end_matches('%').to_string(),
            _ => "100".into(),
        })
        .collect();
    writeln!(out, "{fancy}")?;
    for desc in &file.desc {
        writeln!(out, "{desc}")?;
    }
    writeln!(out, "Command:          {}", file.cmd)?;
    writeln!(out, "Data file:        {}", options.file_name)?;
    writeln!(out, "Events recorded:  {}", events.join(" "))?;
    writeln!(out, "Events shown:     {}", names(&show))?;
    writeln!(out, "Event sort order: {}", names(&sort))?;
    writeln!(out, "Thresholds:       {}", thresholds.join(" "))?;
    writeln!(out, "Include dirs:     ")?;
    writeln!(out, "User annotated:   ")?;
    writeln!(out, "Auto-annotation:  off")?;
    writeln!(out)?;

    let columns = Columns {
        events,
        show: &show,
        show_percs: options.show_percs,
        summary: &file.summary,
    };
    let summary_widths = columns.widths(std::iter::once(file.summary.as_slice()));
    let function_widths = columns.widths(file.functions.values().map(Vec::as_slice));
    writeln!(out, "{fancy}")?;
    columns.print_events(out, &summary_widths)?;
    writeln!(out)?;
    writeln!(out, "{fancy}")?;
    columns.print_costs(out, &file.summary, &summary_widths)?;
    writeln!(out, " PROGRAM TOTALS\n")?;
    writeln!(out, "{fancy}")?;
    columns.print_events(out, &function_widths)?;
    writeln!(out, " file:function")?;
    writeln!(out, "{fancy}")?;
    let mut listed: Vec<(&String, &Vec<i128>)> = file.functions.iter().collect();
    // By size: a difference's negative counts sort as large ones.
    let key = |costs: &Vec<i128>, i: usize| costs.get(i).copied().unwrap_or(-1).unsigned_abs();
    listed.sort_by(|(a_name, a), (b_name, b)| {
        sort.iter()
            .map(|&i| key(b, i).cmp(&key(a, i)))
            .find(|order| order.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a_name.cmp(b_name))
    });
    for (name, costs) in listed {
        let shown = sort.iter().enumerate().any(|(k, &i)| {
            let count = costs.get(i).copied().unwrap_or(0).unsigned_abs() as f64;
            let total = file.summary.get(i).copied().unwrap_or(0).unsigned_abs() as f64;
            let share = if total == 0.0 {
                0.0
            } else {
                count * 100.0 / total
            };
            let wanted = if k == 0 { threshold } else { 100.0 };
            share >= wanted
        });
        if !shown {
            break;
        }
        columns.print_costs(out, costs, &function_widths)?;
        writeln!(out, " {name}")?;
    }
    writeln!(out)?;
    Ok(())
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
        let bad = read(
            "events: Ir\nfl=x\nfn=f\n1 x\nsummary: 1\n".as_bytes(),
            "b.out",
        );
        assert_eq!(
            bad.err().map(|e| e.to_string()),
            Some("b.out:4: bad count 'x'".into())
        );
    }
}
