//! The report of Valgrind 3.19's `callgrind_annotate` (its header, its
//! summary of functions with their call trees, and its annotated source
//! files), for scripts that parse that text (PyTorch's
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
//! function never had; percentages with `--show-percs=yes`. A call counted
//! 0 times (`calls=0`) is read as the script reads it: its line is a cost
//! line of the caller, and no call.
//!
//! `--tree=caller` lists before each function the calls to it (` < caller
//! (Nx) [object]`), `--tree=calling` after it the calls it makes (` >
//! callee (Nx) [object]`), `both` both, the function's own line marked ` * `
//! and each function after a blank line; calls are summed by caller and
//! callee and sorted by the sort events (ties by name here; the script
//! leaves them in hash order). `???:???` gets no tree. The files of the
//! functions listed (with `--auto=yes`, the default) and those named are
//! then annotated (`script_source`), each line with the calls made from it
//! by the first function seen calling from there.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{self, Write};

use cgx_formats::{Profile, Record};

pub use crate::annotate::Tree;
use crate::script_report::{Choice, Report, ScriptError, FANCY};
use crate::script_source::{file_of, write_sources, FileLines, LineCall, SourceOptions, Sources};

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
    /// `--tree`.
    pub tree: Tree,
    /// The source files annotated and where they are looked for.
    pub sources: SourceOptions,
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

/// Calls from one function to another: their inclusive counts, and how many.
#[derive(Clone, Debug, Default)]
struct Calls {
    costs: Counts,
    count: u64,
}

impl Calls {
    fn add(&mut self, costs: &[u64], count: u64) {
        add(&mut self.costs, costs);
        self.count = self.count.wrapping_add(count);
    }
}

/// The calls made from one source line.
struct FromLine {
    /// The first function seen calling from the line.
    caller: String,
    /// Every function called from it.
    callees: BTreeSet<String>,
}

/// The profile as the script reads it: the totals by function name, the
/// objects of the names, the summary, the counts by source line and the
/// calls.
struct Totals {
    functions: HashMap<String, Counts>,
    objects: HashMap<String, String>,
    summary: Counts,
    calculated: bool,
    /// Self counts by file and line.
    lines: HashMap<String, BTreeMap<u64, Counts>>,
    /// The calls counted at least once, by (caller, callee).
    arcs: HashMap<(String, String), Calls>,
    /// The calls by (file, line).
    from_lines: HashMap<(String, u64), FromLine>,
    /// The calls by (caller, callee, line).
    line_arcs: HashMap<(String, String, u64), Calls>,
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
    let mut totals = Totals {
        functions: HashMap::new(),
        objects: HashMap::new(),
        summary: Counts::new(),
        calculated: false,
        lines: HashMap::new(),
        arcs: HashMap::new(),
        from_lines: HashMap::new(),
        line_arcs: HashMap::new(),
    };
    let mut called: HashMap<String, Counts> = HashMap::new();
    let mut summary = None;
    for part in &profile.parts {
        let events = part.events.len();
        for (function, records) in part.functions() {
            let name = names.get(function.name);
            let own_file = strip(names.get(function.file));
            let own = format!("{own_file}:{name}");
            totals.lines.entry(own_file).or_default();
            totals
                .objects
                .insert(own.clone(), names.get(function.object).to_string());
            totals.functions.entry(own).or_default();
            let mut cursor = records.cursor(events);
            while let Some(record) = cursor.next_record() {
                match record {
                    // The line after `calls=0` is read as a cost line.
                    Record::Cost { file, at, costs }
                    | Record::Call {
                        file,
                        at,
                        count: 0,
                        inclusive: costs,
                        ..
                    } => {
                        let file = strip(names.get(file));
                        let line = totals.lines.entry(file.clone()).or_default();
                        add(line.entry(at.line).or_default(), costs);
                        let key = format!("{file}:{name}");
                        add(totals.functions.entry(key).or_default(), costs);
                    }
                    Record::Call {
                        file,
                        at,
                        callee,
                        count,
                        inclusive,
                        ..
                    } => {
                        let caller_file = strip(names.get(file));
                        let caller = format!("{caller_file}:{name}");
                        // The callee's file, as the call names it: the
                        // caller's (stripped) when it is the same.
                        let callee_file = match callee.file == file {
                            true => strip(names.get(callee.file)),
                            false => names.get(callee.file).to_string(),
                        };
                        let callee_name = format!("{callee_file}:{}", names.get(callee.name));
                        add(called.entry(callee_name.clone()).or_default(), inclusive);
                        let caller_costs = totals.functions.entry(caller.clone()).or_default();
                        if options.inclusive {
                            add(caller_costs, inclusive);
                        }
                        totals
                            .arcs
                            .entry((caller.clone(), callee_name.clone()))
                            .or_default()
                            .add(inclusive, count);
                        totals
                            .line_arcs
                            .entry((caller.clone(), callee_name.clone(), at.line))
                            .or_default()
                            .add(inclusive, count);
                        totals
                            .from_lines
                            .entry((caller_file, at.line))
                            .or_insert_with(|| FromLine {
                                caller,
                                callees: BTreeSet::new(),
                            })
                            .callees
                            .insert(callee_name);
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
            totals.functions.insert(name, costs);
        }
    }
    totals.calculated = summary.is_none();
    totals.summary = summary.unwrap_or_else(|| {
        let mut sum = Counts::new();
        for costs in totals.functions.values() {
            add(&mut sum, costs);
        }
        sum
    });
    totals
}

/// Counts past i64 (no run reaches them) are shown at its maximum.
fn signed(costs: &Counts) -> Vec<i64> {
    costs
        .iter()
        .map(|&c| i64::try_from(c).unwrap_or(i64::MAX))
        .collect()
}

/// The calls shown under each source line: those of the line's first caller,
/// sorted by that caller's calls to each callee.
fn line_calls(totals: &Totals, report: &Report<'_>) -> HashMap<(String, u64), Vec<LineCall>> {
    let mut by_line = HashMap::new();
    for ((file, line), from) in &totals.from_lines {
        let arcs: Vec<(&String, Vec<i64>)> = from
            .callees
            .iter()
            .map(|callee| {
                let key = (from.caller.clone(), callee.clone());
                let costs = totals
                    .arcs
                    .get(&key)
                    .map_or(Vec::new(), |calls| signed(&calls.costs));
                (callee, costs)
            })
            .collect();
        let sorted = report.sorted(
            arcs.iter()
                .map(|(callee, costs)| (*callee, costs.as_slice())),
            |count| count,
        );
        let calls = sorted
            .into_iter()
            .filter_map(|(callee, _)| {
                let key = (from.caller.clone(), callee.clone(), *line);
                totals.line_arcs.get(&key).map(|calls| LineCall {
                    costs: signed(&calls.costs),
                    callee: callee.clone(),
                    count: calls.count,
                })
            })
            .collect();
        by_line.insert((file.clone(), *line), calls);
    }
    by_line
}

/// The header: the profile's name and creator, its description, target and
/// events, and the options.
fn write_header(
    out: &mut dyn Write,
    profile: &Profile,
    report: &Report<'_>,
    options: &Options,
) -> Result<(), ScriptError> {
    let first = profile.parts.first().ok_or(ScriptError::Empty)?;
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
    report.write_header_events(out, "0", &options.sources)?;
    Ok(())
}

/// One side of a function's call tree: the other function, the calls'
/// counts, and how many.
type Arcs<'t> = Vec<(&'t String, Vec<i64>, u64)>;

/// The calls of the tree by callee and by caller.
struct CallIndex<'t> {
    to: HashMap<&'t str, Arcs<'t>>,
    from: HashMap<&'t str, Arcs<'t>>,
}

impl<'t> CallIndex<'t> {
    fn new(totals: &'t Totals) -> CallIndex<'t> {
        let mut index = CallIndex {
            to: HashMap::new(),
            from: HashMap::new(),
        };
        for ((caller, callee), calls) in &totals.arcs {
            let costs = signed(&calls.costs);
            let to = index.to.entry(callee.as_str()).or_default();
            to.push((caller, costs.clone(), calls.count));
            let from = index.from.entry(caller.as_str()).or_default();
            from.push((callee, costs, calls.count));
        }
        index
    }
}

/// Where the lines of a function's call tree go, and how they look.
struct TreeLines<'r> {
    report: &'r Report<'r>,
    widths: &'r [usize],
    objects: &'r HashMap<String, String>,
}

impl TreeLines<'_> {
    /// Writes `arcs`, sorted by the sort events, each as `marker name (Nx)`
    /// and the function's object when it has one.
    fn write(&self, out: &mut dyn Write, arcs: Option<&Arcs<'_>>, marker: &str) -> io::Result<()> {
        let Some(arcs) = arcs else {
            return Ok(());
        };
        let counts: HashMap<&String, u64> = arcs
            .iter()
            .map(|(name, _, count)| (*name, *count))
            .collect();
        let sorted = self.report.sorted(
            arcs.iter()
                .map(|(name, costs, _)| (*name, costs.as_slice())),
            |count| count,
        );
        for (name, costs) in sorted {
            self.report.write_costs(out, costs, self.widths)?;
            let count = counts.get(name).copied().unwrap_or(0);
            write!(out, "{marker}{name} ({}x)", commify_count(count))?;
            if let Some(object) = self.objects.get(name) {
                write!(out, " [{object}]")?;
            }
            writeln!(out)?;
        }
        Ok(())
    }
}

/// A call count with commas.
fn commify_count(count: u64) -> String {
    crate::annotate::commify(i64::try_from(count).unwrap_or(i64::MAX))
}

/// Writes the report of `profile`.
pub fn callgrind_annotate(
    profile: &Profile,
    options: &Options,
    out: &mut dyn Write,
) -> Result<(), ScriptError> {
    let first = profile.parts.first().ok_or(ScriptError::Empty)?;
    let totals = totals(profile, options);
    let summary = signed(&totals.summary);
    let choice = Choice {
        show: &options.show,
        sort: &options.sort,
        threshold: &options.threshold,
        show_percs: options.show_percs,
    };
    let report = Report::new(&first.events.names, &summary, &choice)?;
    write_header(out, profile, &report, options)?;

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
    let index = CallIndex::new(&totals);
    let tree = TreeLines {
        report: &report,
        widths: &widths,
        objects: &totals.objects,
    };
    let mut listed_files = BTreeSet::new();
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
        let with_tree = options.tree != Tree::None;
        let unknown = name == "???:???";
        if with_tree {
            writeln!(out)?;
        }
        if options.tree.callers() && !unknown {
            tree.write(out, index.to.get(name.as_str()), " < ")?;
        }
        report.write_costs(out, costs, &widths)?;
        if with_tree {
            write!(out, " * ")?;
        }
        write!(out, " {name}")?;
        if let Some(object) = totals.objects.get(name).filter(|object| !object.is_empty()) {
            write!(out, " [{object}]")?;
        }
        writeln!(out)?;
        if options.tree.callees() && !unknown {
            tree.write(out, index.from.get(name.as_str()), " >   ")?;
        }
        listed_files.insert(file_of(name).to_string());
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
    let lines: FileLines = totals
        .lines
        .iter()
        .map(|(file, lines)| {
            let lines = lines
                .iter()
                .map(|(&line, costs)| (line, signed(costs)))
                .collect();
            (file.clone(), lines)
        })
        .collect();
    let calls = line_calls(&totals, &report);
    let sources = Sources {
        lines: &lines,
        calls: &calls,
        listed: listed_files,
        options: &options.sources,
        input_file: &options.file_name,
        total_at_least_printed: true,
    };
    write_sources(out, &report, &sources)
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

    #[test]
    fn trees_list_counted_calls_and_a_call_counted_zero_times_is_a_cost() {
        let text = "events: Ir\nfl=a.c\nfn=main\n1 10\ncfn=f\ncalls=2 5\n2 30\n\
                    cfn=g\ncalls=0 7\n3 4\nfn=f\n5 30\nfn=g\n7 4\n";
        let profile =
            cgx_formats::read(std::io::Cursor::new(text.as_bytes().to_vec()), "t").unwrap();
        let options = Options {
            inclusive: false,
            threshold: "100".into(),
            show_percs: false,
            show: Vec::new(),
            sort: Vec::new(),
            file_name: "t".into(),
            cwd: String::new(),
            tree: Tree::Both,
            sources: SourceOptions {
                auto: false,
                ..SourceOptions::default()
            },
        };
        let mut out = Vec::new();
        callgrind_annotate(&profile, &options, &mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        // main's own 10 and the 4 of its call to g counted 0 times; g has
        // no caller in the tree.
        let expected = "\n30  < a.c:main (2x) []\n30  *  a.c:f\n\
                        \n14  *  a.c:main\n30  >   a.c:f (2x) []\n\n 4  *  a.c:g\n\n";
        assert!(out.ends_with(expected), "{out}");
        assert_eq!(Tree::parse("calling"), Some(Tree::Calling));
        assert_eq!(Tree::parse("up"), None);
    }
}
