//! The annotated source files of Valgrind 3.19's annotate scripts
//! (`cg_annotate`, `callgrind_annotate`), printed after the function list.
//!
//! The files annotated: those named after the profile on the command line
//! (`User-annotated`), and with `--auto=yes` the files of the listed
//! functions except `???` (`Auto-annotated`); each is looked for as named,
//! then under each `--include` folder. The scripts take them in hash order;
//! here the named ones come first, in their order, then the others by name.
//! A file found prints its counted lines with `--context` lines either side
//! (ranges closer than twice the context merged, each gap marked `-- line N
//! ---`), `callgrind_annotate`'s calls under their line (` => callee (Nx)`),
//! counts on lines past its end as `<bogus line N>` with a warning, and its
//! line 0's as `<counts for unidentified lines in FILE>`; a file newer than
//! the profile (in whole seconds) gets a warning first. Files not found are
//! listed at the end, then the sum of the counts printed, `events annotated`.
//!
//! Source text is printed byte for byte (line endings as in the file); as
//! the scripts read it, a last line `0` without an ending stops the file.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use crate::annotate::line_ranges;
use crate::script_report::{Report, ScriptError, FANCY};

/// Which source files a script annotates, and where it looks for them.
#[derive(Clone, Debug)]
pub struct SourceOptions {
    /// `--auto=yes`: the files of the functions listed are annotated.
    pub auto: bool,
    /// `--context=N`: the lines shown either side of a counted line.
    pub context: u64,
    /// `--include` (`-I`): the folders searched after the current one, each
    /// ending in `/`.
    pub include: Vec<String>,
    /// The source files named after the profile, annotated in any case.
    pub user_files: Vec<String>,
}

impl Default for SourceOptions {
    /// The scripts' defaults: `--auto=yes`, `--context=8`, no folders or
    /// files.
    fn default() -> Self {
        SourceOptions {
            auto: true,
            context: 8,
            include: Vec::new(),
            user_files: Vec::new(),
        }
    }
}

impl SourceOptions {
    /// Adds the folder of `--include=DIR`, one trailing `/` replaced by the
    /// script's.
    pub fn add_include(&mut self, dir: &str) {
        let dir = dir.strip_suffix('/').unwrap_or(dir);
        self.include.push(format!("{dir}/"));
    }

    /// The places `name` is looked for, in order: as it is, then under each
    /// folder; each with the name the report gives it.
    fn candidates<'a>(&'a self, name: &'a str) -> impl Iterator<Item = (PathBuf, String)> + 'a {
        std::iter::once((PathBuf::from(name), name.to_string())).chain(self.include.iter().map(
            move |dir| {
                (
                    PathBuf::from(format!("{dir}{name}")),
                    format!("{dir} + {name}"),
                )
            },
        ))
    }

    /// Whether `name` can be opened as it is or under a folder.
    pub fn is_readable(&self, name: &str) -> bool {
        self.candidates(name)
            .any(|(path, _)| File::open(path).is_ok())
    }

    /// The folders searched as the scripts list them in messages: the
    /// current one (empty), then the others, separated by spaces.
    pub fn searched(&self) -> String {
        std::iter::once("")
            .chain(self.include.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The header's `Include dirs:`, `User annotated:` and
    /// `Auto-annotation:` lines.
    pub(crate) fn write_header(&self, out: &mut dyn Write) -> io::Result<()> {
        let labelled = |out: &mut dyn Write, label: &str, items: &[String]| -> io::Result<()> {
            let mut items = items.iter();
            writeln!(out, "{label}{}", items.next().map_or("", String::as_str))?;
            for item in items {
                writeln!(out, "                  {item}")?;
            }
            Ok(())
        };
        labelled(out, "Include dirs:     ", &self.include)?;
        labelled(out, "User annotated:   ", &self.user_files)?;
        let on = if self.auto { "on" } else { "off" };
        writeln!(out, "Auto-annotation:  {on}")
    }
}

/// Counts by line (0: unknown) of each source file, as the profile names it.
pub(crate) type FileLines = HashMap<String, BTreeMap<u64, Vec<i64>>>;

/// A call made from a source line, as `callgrind_annotate` prints it under
/// the line.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct LineCall {
    /// The inclusive counts of the calls from that line.
    pub costs: Vec<i64>,
    /// The function called, `file:function`.
    pub callee: String,
    /// How many calls.
    pub count: u64,
}

/// What the annotation of a report's source files works from.
pub(crate) struct Sources<'a> {
    /// The counts by file and line.
    pub lines: &'a FileLines,
    /// The calls by (file, line), in the order printed.
    pub calls: &'a HashMap<(String, u64), Vec<LineCall>>,
    /// The files of the functions listed.
    pub listed: BTreeSet<String>,
    /// What is annotated and where files are looked for.
    pub options: &'a SourceOptions,
    /// The profile's name as given (its time is compared with the sources').
    pub input_file: &'a str,
    /// `callgrind_annotate`'s rule for the final sum: an event whose total
    /// is 0 or below the sum printed takes the sum as its total.
    pub total_at_least_printed: bool,
}

/// The files annotated, in order, each with whether it was named.
fn chosen(sources: &Sources<'_>) -> Vec<(String, bool)> {
    let named = &sources.options.user_files;
    let mut files: Vec<(String, bool)> = Vec::new();
    for name in named {
        if !files.iter().any(|(known, _)| known == name) {
            files.push((name.clone(), true));
        }
    }
    if sources.options.auto {
        for name in &sources.listed {
            if name != "???" && !named.contains(name) {
                files.push((name.clone(), false));
            }
        }
    }
    files
}

/// The file's modification time in whole seconds (0 when unknown).
fn seconds(path: &Path) -> u64 {
    fs::metadata(path)
        .and_then(|meta| meta.modified())
        .ok()
        .and_then(|time| time.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |age| age.as_secs())
}

const BANNER: &str =
    "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@";
const WARNING: &str =
    "@@ WARNING @@ WARNING @@ WARNING @@ WARNING @@ WARNING @@ WARNING @@ WARNING @@";

/// The warning that a source file is newer than the profile.
fn write_newer(out: &mut dyn Write, file: &str, input_file: &str) -> io::Result<()> {
    writeln!(out, "{BANNER}\n{WARNING}\n{BANNER}")?;
    writeln!(
        out,
        "@ Source file '{file}' is more recent than input file '{input_file}'."
    )?;
    writeln!(out, "@ Annotations may not be correct.")?;
    writeln!(out, "{BANNER}\n")
}

/// The warning that the profile counts lines past the end of `file`.
fn write_past_end(out: &mut dyn Write, file: &str, newer: bool) -> io::Result<()> {
    let cause = if newer {
        format!(
            "@@ cause:    '{file}' has changed since information was gathered.\n\
             @@           If so, a warning will have already been issued about this.\n\
             @@ solution: Recompile program and rerun under \"valgrind --cachesim=yes\" to \n\
             @@           gather new information.\n"
        )
    } else if file.ends_with(".h") {
        "@@ cause:    bug in the Valgrind's debug info reader that screws up with .h\n\
         @@           files sometimes\n\
         @@ solution: none, sorry\n"
            .to_string()
    } else {
        "@@ cause:    not sure, sorry\n".to_string()
    };
    writeln!(out, "{BANNER}\n{WARNING}\n{BANNER}\n@@")?;
    writeln!(
        out,
        "@@ Information recorded about lines past the end of '{file}'."
    )?;
    writeln!(out, "@@\n@@ Probable cause and solution:")?;
    write!(out, "{cause}@@\n{BANNER}\n")
}

fn gap(out: &mut dyn Write, line: u64) -> io::Result<()> {
    writeln!(out, "-- line {line} {}", "-".repeat(40))
}

/// Adds `costs` to `sum`, which grows to fit.
fn add(sum: &mut Vec<i64>, costs: &[i64]) {
    if sum.len() < costs.len() {
        sum.resize(costs.len(), 0);
    }
    for (sum, cost) in sum.iter_mut().zip(costs) {
        *sum += cost;
    }
}

/// One found source file to annotate.
struct Found<'a> {
    /// The name the profile gives it.
    name: &'a str,
    /// Its text.
    text: &'a [u8],
    /// Its counts by line.
    lines: &'a BTreeMap<u64, Vec<i64>>,
    /// Whether it is newer than the profile.
    newer: bool,
}

/// Prints the annotated lines of `file`, adding the counts printed to
/// `printed`.
fn write_file(
    out: &mut dyn Write,
    report: &Report<'_>,
    sources: &Sources<'_>,
    file: &Found<'_>,
    printed: &mut Vec<i64>,
) -> io::Result<()> {
    let widths = report.widths(file.lines.values().map(Vec::as_slice));
    report.write_events(out, &widths)?;
    writeln!(out, "\n")?;
    let mut counted = file.lines.iter().filter(|(&line, _)| line != 0).peekable();
    let ranges = line_ranges(
        file.lines.keys().copied().filter(|&line| line != 0),
        sources.options.context,
    );
    let mut text = file.text.split_inclusive(|&byte| byte == b'\n');
    // The number of lines read so far (the script's `$.`).
    let mut read = 0u64;
    'ranges: for (low, high) in ranges {
        while read + 1 < low {
            if text.next().is_none() {
                break;
            }
            read += 1;
        }
        if low != 1 {
            gap(out, low)?;
        }
        let mut last = None;
        while read < high {
            // A last line `0` reads as false in the script's loop.
            last = text.next().filter(|line| *line != b"0");
            let Some(line) = last else {
                break;
            };
            read += 1;
            match counted.next_if(|(&number, _)| number == read) {
                Some((_, costs)) => {
                    report.write_costs(out, costs, &widths)?;
                    add(printed, costs);
                }
                None => report.write_costs(out, &[], &widths)?,
            }
            out.write_all(b" ")?;
            out.write_all(line)?;
            let calls = sources.calls.get(&(file.name.to_string(), read));
            for call in calls.into_iter().flatten() {
                report.write_costs(out, &call.costs, &widths)?;
                writeln!(
                    out,
                    " => {} ({}x)",
                    call.callee,
                    crate::annotate::commify(call.count as i64)
                )?;
            }
        }
        if last.is_none() {
            break 'ranges;
        }
        gap(out, high)?;
    }
    let bogus: Vec<_> = counted.collect();
    if !bogus.is_empty() {
        for (line, costs) in bogus {
            report.write_costs(out, costs, &widths)?;
            writeln!(out, " <bogus line {line}>")?;
        }
        writeln!(out)?;
        write_past_end(out, file.name, file.newer)?;
    }
    writeln!(out)?;
    if let Some(costs) = file.lines.get(&0) {
        report.write_costs(out, costs, &widths)?;
        writeln!(out, " <counts for unidentified lines in {}>\n", file.name)?;
    }
    Ok(())
}

/// Prints the annotated source files of `sources`, the files not found, and
/// the sum of the counts printed.
pub(crate) fn write_sources(
    out: &mut dyn Write,
    report: &Report<'_>,
    sources: &Sources<'_>,
) -> Result<(), ScriptError> {
    let mut printed = Vec::new();
    let mut not_found = Vec::new();
    let mut annotated = false;
    let input_time = seconds(Path::new(sources.input_file));
    for (name, named) in chosen(sources) {
        let opened = sources
            .options
            .candidates(&name)
            .find_map(|(path, shown)| fs::read(&path).ok().map(|text| (path, shown, text)));
        let Some((path, shown, text)) = opened else {
            if named {
                return Err(ScriptError::SourceNotFound {
                    file: name,
                    searched: sources.options.searched(),
                });
            }
            not_found.push(name);
            continue;
        };
        let kind = if named { "User" } else { "Auto" };
        writeln!(out, "{FANCY}\n-- {kind}-annotated source: {shown}\n{FANCY}")?;
        let Some(lines) = sources.lines.get(&name) else {
            writeln!(out, "  No information has been collected for {name}\n")?;
            continue;
        };
        annotated = true;
        let newer = seconds(&path) > input_time;
        if newer {
            write_newer(out, &name, sources.input_file)?;
        }
        let found = Found {
            name: &name,
            text: &text,
            lines,
            newer,
        };
        write_file(out, report, sources, &found, &mut printed)?;
    }
    if !not_found.is_empty() {
        not_found.sort();
        writeln!(out, "{FANCY}")?;
        writeln!(
            out,
            "The following files chosen for auto-annotation could not be found:"
        )?;
        writeln!(out, "{FANCY}")?;
        for name in &not_found {
            writeln!(out, "  {name}")?;
        }
        writeln!(out)?;
    }
    if annotated {
        let mut totals = report.summary().to_vec();
        if sources.total_at_least_printed {
            for (i, total) in totals.iter_mut().enumerate() {
                let sum = printed.get(i).copied().unwrap_or(0);
                if *total == 0 || sum > *total {
                    *total = sum;
                }
            }
        }
        let report = report.with_summary(&totals);
        let widths = report.widths(std::iter::once(printed.as_slice()));
        writeln!(out, "{FANCY}")?;
        report.write_events(out, &widths)?;
        writeln!(out)?;
        writeln!(out, "{FANCY}")?;
        report.write_costs(out, &printed, &widths)?;
        writeln!(out, " events annotated\n")?;
    }
    Ok(())
}

/// The file of a function listed as `FILE:FUNCTION`: what comes before the
/// first `:` that is not the last character (as the scripts cut it).
pub(crate) fn file_of(function: &str) -> &str {
    function
        .char_indices()
        .find(|&(at, c)| c == ':' && at + 1 < function.len())
        .map_or(function, |(at, _)| &function[..at])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script_report::Choice;

    #[test]
    fn a_function_names_its_file_before_the_first_colon() {
        assert_eq!(file_of("a.c:main"), "a.c");
        assert_eq!(file_of("a.cc:std::vector<int>::push_back"), "a.cc");
        assert_eq!(file_of("???:???"), "???");
        assert_eq!(file_of("odd:"), "odd:");
    }

    #[test]
    fn named_files_come_first_and_unknown_code_is_not_annotated() {
        let options = SourceOptions {
            user_files: vec!["z.c".into()],
            ..SourceOptions::default()
        };
        let (lines, calls) = (FileLines::new(), HashMap::new());
        let sources = Sources {
            lines: &lines,
            calls: &calls,
            listed: ["???", "b.c", "a.c", "z.c"].map(String::from).into(),
            options: &options,
            input_file: "x",
            total_at_least_printed: false,
        };
        let files = chosen(&sources);
        let expected = [("z.c", true), ("a.c", false), ("b.c", false)];
        assert_eq!(
            files,
            expected.map(|(name, named)| (name.to_string(), named))
        );
        let off = SourceOptions {
            auto: false,
            ..options.clone()
        };
        let sources = Sources {
            options: &off,
            ..sources
        };
        assert_eq!(chosen(&sources), vec![("z.c".to_string(), true)]);
    }

    #[test]
    fn include_folders_end_in_one_slash_and_head_the_header() {
        let mut options = SourceOptions::default();
        options.add_include("src/");
        options.add_include("lib");
        assert_eq!(options.include, ["src/", "lib/"]);
        assert_eq!(options.searched(), " src/ lib/");
        let mut out = Vec::new();
        options.write_header(&mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "Include dirs:     src/\n                  lib/\nUser annotated:   \n\
             Auto-annotation:  on\n"
        );
    }

    /// The annotation of `text` with counts on `lines` (one event, `Ir`).
    fn annotated(text: &str, lines: &[(u64, i64)], context: u64) -> String {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("s.c");
        fs::write(&source, text).unwrap();
        let name = source.display().to_string();
        let events = ["Ir".to_string()];
        let summary = [100];
        let choice = Choice {
            show: &[],
            sort: &[],
            threshold: "0.1",
            show_percs: false,
        };
        let report = Report::new(&events, &summary, &choice).unwrap();
        let mut by_line = FileLines::new();
        by_line.insert(
            name.clone(),
            lines
                .iter()
                .map(|&(line, count)| (line, vec![count]))
                .collect(),
        );
        let options = SourceOptions {
            context,
            ..SourceOptions::default()
        };
        let calls = HashMap::new();
        let sources = Sources {
            lines: &by_line,
            calls: &calls,
            listed: [name.clone()].into(),
            options: &options,
            // The profile: the source itself, so it is not newer.
            input_file: &name,
            total_at_least_printed: false,
        };
        let mut out = Vec::new();
        write_sources(&mut out, &report, &sources).unwrap();
        String::from_utf8(out).unwrap().replace(&name, "s.c")
    }

    #[test]
    fn counted_lines_show_with_their_context_and_gaps() {
        let text: String = (1..=12).map(|n| format!("l{n}\n")).collect();
        let out = annotated(&text, &[(0, 4), (2, 5), (10, 7)], 1);
        let expected = format!(
            "{FANCY}\n-- Auto-annotated source: s.c\n{FANCY}\nIr \n\n \
             .  l1\n 5  l2\n .  l3\n-- line 3 {dashes}\n\
             -- line 9 {dashes}\n .  l9\n 7  l10\n .  l11\n-- line 11 {dashes}\n\n \
             4  <counts for unidentified lines in s.c>\n\n\
             {FANCY}\nIr \n{FANCY}\n12  events annotated\n\n",
            dashes = "-".repeat(40)
        );
        assert_eq!(out, expected);
    }

    #[test]
    fn lines_past_the_end_are_bogus_and_the_last_line_keeps_its_ending() {
        let out = annotated("a\nb", &[(2, 3), (9, 1)], 0);
        let expected = format!(
            "-- line 2 {dashes}\n 3  b-- line 2 {dashes}\n-- line 9 {dashes}\n \
             1  <bogus line 9>\n\n",
            dashes = "-".repeat(40)
        );
        assert!(out.contains(&expected), "{out}");
        assert!(out.contains("@@ cause:    not sure, sorry\n@@\n"), "{out}");
    }
}
