//! The report of Valgrind 3.19's `callgrind_annotate` (its header and its
//! summary of functions), for scripts that parse that text (PyTorch's
//! `Timer.collect_callgrind`, for one).
//!
//! Its rules, as that script applies them: a function is named
//! `FILE:FUNCTION` with the file of the cost line (an inlined file gives a
//! name of its own; a file under the current folder loses that prefix);
//! calls add their inclusive cost to the callee's name (the call's file
//! where the callee is in the caller's file) and, with `--inclusive=yes`,
//! to the caller, and then every called function's total is the sum of the
//! calls to it. Functions are sorted by the sort events, descending, then by
//! name, and listed until the threshold share of the primary event is
//! reached (all at 100). Counts print with commas, `.` for an event a
//! function never had; percentages with `--show-percs=yes`. Source files
//! are not annotated (as with `--auto=no`), and there is no `--tree`.

use std::collections::HashMap;
use std::io::Write;

use cgx_formats::{Profile, Record};

use crate::script_report::{Choice, Report, ScriptError, FANCY};

/// What the report shows.
#[derive(Clone, Debug)]
pub struct Options {
    /// `--inclusive=yes`.
    pub inclusive: bool,
    /// `--threshold`, as given (printed as it is).
    pub threshold: String,
    /// `--show-percs`.
    pub show_percs: bool,
    /// `--show`: the events shown (all when empty).
    pub show: Vec<String>,
    /// `--sort`: the sort events (all, in the file's order, when empty).
    pub sort: Vec<String>,
    /// The profile's name as given on the command line.
    pub file_name: String,
    /// The current folder, with a trailing `/`: stripped from file names.
    pub cwd: String,
}

/// A cost vector as the script keeps it: as long as the longest added.
type Counts = Vec<u64>;

fn add(to: &mut Counts, costs: &[u64]) {
    if to.len() < costs.len() {
        to.resize(costs.len(), 0);
    }
    for (sum, cost) in to.iter_mut().zip(costs) {
        *sum = sum.wrapping_add(*cost);
    }
}

/// The totals by function name, the objects of the names, and the summary.
struct Totals {
    functions: HashMap<String, Counts>,
    objects: HashMap<String, String>,
    summary: Counts,
    calculated: bool,
}

/// Reads `profile` as the script does.
fn totals(profile: &Profile, options: &Options) -> Totals {
    let strip = |file: &str| -> String {
        file.strip_prefix(options.cwd.as_str())
            .filter(|_| !options.cwd.is_empty())
            .unwrap_or(file)
            .to_string()
    };
    let names = &profile.names;
    let mut functions: HashMap<String, Counts> = HashMap::new();
    let mut called: HashMap<String, Counts> = HashMap::new();
    let mut objects = HashMap::new();
    let mut summary = None;
    for part in &profile.parts {
        let events = part.events.len();
        for (function, records) in part.functions() {
            let name = names.get(function.name);
            let own = format!("{}:{name}", strip(names.get(function.file)));
            objects.insert(own.clone(), names.get(function.object).to_string());
            functions.entry(own).or_default();
            let mut cursor = records.cursor(events);
            while let Some(record) = cursor.next_record() {
                match record {
                    Record::Cost { file, costs, .. } => {
                        let key = format!("{}:{name}", strip(names.get(file)));
                        add(functions.entry(key).or_default(), costs);
                    }
                    Record::Call {
                        file,
                        callee,
                        inclusive,
                        ..
                    } => {
                        let caller = format!("{}:{name}", strip(names.get(file)));
                        // The callee's file, as the call names it: the
                        // caller's (stripped) when it is the same.
                        let callee_file = match callee.file == file {
                            true => strip(names.get(callee.file)),
                            false => names.get(callee.file).to_string(),
                        };
                        let callee_name = format!("{callee_file}:{}", names.get(callee.name));
                        add(called.entry(callee_name).or_default(), inclusive);
                        let caller_costs = functions.entry(caller).or_default();
                        if options.inclusive {
                            add(caller_costs, inclusive);
                        }
                    }
                    Record::Jump { .. } => {}
                }
            }
        }
        let given = [&part.summary, &part.totals]
            .into_iter()
            .flatten()
            .find(|costs| costs.iter().any(|&cost| cost != 0));
        if let Some(given) = given {
            summary = Some(given.clone());
        }
    }
    if options.inclusive {
        for (name, costs) in called {
            functions.insert(name, costs);
        }
    }
    let calculated = summary.is_none();
    let summary = summary.unwrap_or_else(|| {
        let mut sum = Counts::new();
        for costs in functions.values() {
            add(&mut sum, costs);
        }
        sum
    });
    Totals {
        functions,
        objects,
        summary,
        calculated,
    }
}

/// Writes the report of `profile`.
pub fn callgrind_annotate(
    profile: &Profile,
    options: &Options,
    out: &mut dyn Write,
) -> Result<(), ScriptError> {
    let first = profile.parts.first().ok_or(ScriptError::Empty)?;
    let totals = totals(profile, options);
    // Counts past i64 (no run reaches them) are shown at its maximum.
    let signed = |costs: &Counts| -> Vec<i64> {
        costs
            .iter()
            .map(|&c| i64::try_from(c).unwrap_or(i64::MAX))
            .collect()
    };
    let summary = signed(&totals.summary);
    let choice = Choice {
        show: &options.show,
        sort: &options.sort,
        threshold: &options.threshold,
        show_percs: options.show_percs,
    };
    let report = Report::new(&first.events.names, &summary, &choice)?;

    writeln!(out, "{FANCY}")?;
    write!(out, "Profile data file '{}'", options.file_name)?;
    if let Some(creator) = &profile.creator {
        write!(out, " (creator: {creator})")?;
    }
    writeln!(out)?;
    writeln!(out, "{FANCY}")?;
    let header = &first.header;
    for desc in header
        .desc
        .iter()
        .filter(|desc| !desc.starts_with("Option:"))
    {
        writeln!(out, "{desc}")?;
    }
    let mut target = header.cmd.clone().unwrap_or_default();
    if target.is_empty() {
        target = "(unknown)".into();
    }
    if let Some(pid) = header.pid {
        target.push_str(&format!(" (PID {pid}"));
        if let Some(part) = header.part {
            target.push_str(&format!(", part {part}"));
        }
        if let Some(thread) = header.thread {
            target.push_str(&format!(", thread {thread}"));
        }
        target.push(')');
    }
    writeln!(out, "Profiled target:  {target}")?;
    report.write_header_events(out, "0")?;

    let functions: HashMap<&String, Vec<i64>> = totals
        .functions
        .iter()
        .map(|(name, costs)| (name, signed(costs)))
        .collect();
    let widths = report.write_totals(
        out,
        totals.calculated,
        functions.values().map(Vec::as_slice),
    )?;
    let listed = report.sorted(
        functions
            .iter()
            .map(|(&name, costs)| (name, costs.as_slice())),
        |count| count,
    );
    // The share of the primary sort event listed so far (with
    // `--inclusive=yes`, as the script counts it: the total less the
    // last function's).
    let mut reached = vec![0i64; report.sort.len()];
    for (name, costs) in listed {
        if report.threshold < 100.0 {
            let all_reached = report.sort.iter().enumerate().all(|(k, &i)| {
                let total = summary.get(i).copied().unwrap_or(0);
                let mut share = reached[k] as f64 * 100.0;
                if total > 0 {
                    share /= total as f64;
                }
                let wanted = if k == 0 { report.threshold } else { 0.0 };
                share >= wanted
            });
            if all_reached {
                break;
            }
        }
        report.write_costs(out, costs, &widths)?;
        write!(out, " {name}")?;
        if let Some(object) = totals.objects.get(name).filter(|object| !object.is_empty()) {
            write!(out, " [{object}]")?;
        }
        writeln!(out)?;
        for (k, &i) in report.sort.iter().enumerate() {
            if let Some(&cost) = costs.get(i) {
                let total = summary.get(i).copied().unwrap_or(0);
                match options.inclusive {
                    true => reached[k] = total - cost,
                    false => reached[k] += cost,
                }
            }
        }
    }
    writeln!(out)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shorter_costs_grow_and_add() {
        let mut sum = vec![1];
        add(&mut sum, &[2, 3]);
        add(&mut sum, &[4]);
        assert_eq!(sum, vec![7, 3]);
    }
}
