//! `cg_merge` and `cg_diff` as Valgrind 3.19's (cgx under those names, see
//! `shims`): Cachegrind files in, a Cachegrind file out that Valgrind's own
//! cg_annotate reads.
//!
//! - `cg_merge [-o OUTFILE] FILE...`: the costs of every file added, line by
//!   line; the `desc:` and `cmd:` of the first. The events must be the same.
//!   Without `-o`, the result goes to standard output.
//! - `callgrind_annotate [OPTIONS] [FILE [SOURCE...]]` and `cg_annotate
//!   [OPTIONS] [FILE [SOURCE...]]`: Valgrind 3.19's reports, header,
//!   function summary (with `--tree`) and annotated sources
//!   (`cgx_converters::callgrind_annotate`, `cgx_converters::cg_annotate`);
//!   without a file, the first `callgrind.out*` (`cachegrind.out*`) here.
//!   A source named must be readable here or under an `--include` folder
//!   given before it.
//! - `cg_diff [--mod-filename=s/A/B/] [--mod-funcname=s/A/B/] FILE1 FILE2`:
//!   per function (after the renames), the second file's costs minus the
//!   first's, at line 0, on standard output, with `desc: Files compared:` and
//!   both commands, as Valgrind's writes them.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use cgx_converters::annotate::Rewrite;
use cgx_converters::callgrind_annotate::Tree;
use cgx_converters::SourceOptions;
use cgx_formats::{cachegrind_part, Part, Profile, Record};

use crate::shims::VALGRIND_VERSION;

/// Costs by (file, function), then by line (signed: `cg_diff`'s may be
/// negative).
type Costs = BTreeMap<(String, String), BTreeMap<u64, Vec<i128>>>;

/// Adds `costs` to the line `line` of `function` in `file`.
fn add(sums: &mut Costs, (file, function): (String, String), line: u64, costs: &[i128]) {
    let line = sums
        .entry((file, function))
        .or_default()
        .entry(line)
        .or_insert_with(|| vec![0; costs.len()]);
    for (sum, cost) in line.iter_mut().zip(costs) {
        *sum += cost;
    }
}

/// Writes `costs` as the body of a Cachegrind file (`fl=`, `fn=`, the cost
/// lines), then `summary:`, their totals over `width` events.
fn write_costs(out: &mut dyn Write, costs: &Costs, width: usize) -> io::Result<()> {
    let mut totals = vec![0i128; width];
    for ((file, function), lines) in costs {
        writeln!(out, "fl={file}")?;
        writeln!(out, "fn={function}")?;
        for (line, line_costs) in lines {
            write!(out, "{line}")?;
            for (total, cost) in totals.iter_mut().zip(line_costs) {
                write!(out, " {cost}")?;
                *total += cost;
            }
            writeln!(out)?;
        }
    }
    let totals: Vec<String> = totals.iter().map(i128::to_string).collect();
    writeln!(out, "summary: {}", totals.join(" "))?;
    out.flush()
}

/// `costs` as signed numbers.
fn signed(costs: &[u64], sign: i128) -> Vec<i128> {
    costs.iter().map(|&cost| sign * i128::from(cost)).collect()
}

/// A Cachegrind file read, with its one part.
struct Cachegrind {
    path: PathBuf,
    profile: Profile,
}

impl Cachegrind {
    fn read(path: &Path) -> Result<Cachegrind> {
        let profile = cgx_formats::read_path(path)?;
        cachegrind_part(&profile)
            .with_context(|| format!("{}: not a Cachegrind file", path.display()))?;
        Ok(Cachegrind {
            path: path.to_path_buf(),
            profile,
        })
    }

    fn part(&self) -> &Part {
        // `read` checked there is exactly one.
        &self.profile.parts[0]
    }

    fn events(&self) -> &[String] {
        &self.part().events.names
    }

    /// Calls `each(file, function, line, costs)` for every cost line.
    fn for_each_cost(&self, mut each: impl FnMut(&str, &str, u64, &[u64])) {
        let part = self.part();
        let events = part.events.len();
        let names = &self.profile.names;
        for (function, records) in part.functions() {
            let name = names.get(function.name);
            let mut cursor = records.cursor(events);
            while let Some(record) = cursor.next_record() {
                if let Record::Cost { file, at, costs } = record {
                    each(names.get(file), name, at.line, costs);
                }
            }
        }
    }
}

/// The value of `--NAME=VALUE` in `arg`, if it is that option.
fn value<'a>(arg: &'a str, name: &str) -> Option<&'a str> {
    arg.strip_prefix("--")?
        .strip_prefix(name)?
        .strip_prefix('=')
}

/// The arguments as text (file names that are not UTF-8 are refused).
fn texts(args: &[OsString], command: &str) -> Result<Vec<String>> {
    args.iter()
        .map(|arg| {
            arg.to_str()
                .map(str::to_owned)
                .with_context(|| format!("{command}: an argument is not UTF-8: {arg:?}"))
        })
        .collect()
}

/// Runs `cg_merge ARGS`.
pub fn merge(args: &[OsString]) -> Result<()> {
    let args = texts(args, "cg_merge")?;
    let mut out = None;
    let mut files = Vec::new();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-o" => out = Some(args.next().context("cg_merge: -o needs a file name")?),
            "-h" | "--help" => {
                println!("usage: cg_merge [-o outfile] cachegrind-out-file...");
                return Ok(());
            }
            "-v" | "--version" => {
                println!(
                    "cg_merge-{VALGRIND_VERSION} (cgx {})",
                    env!("CARGO_PKG_VERSION")
                );
                return Ok(());
            }
            _ if arg.starts_with('-') && arg.len() > 1 => bail!("cg_merge: unknown option {arg}"),
            _ => files.push(PathBuf::from(arg)),
        }
    }
    if files.is_empty() {
        bail!("cg_merge: no input files (usage: cg_merge [-o outfile] cachegrind-out-file...)");
    }
    let inputs = files
        .iter()
        .map(|path| Cachegrind::read(path))
        .collect::<Result<Vec<_>>>()?;
    let first = &inputs[0];
    let events = first.events();
    let mut costs = Costs::new();
    for input in &inputs {
        if input.events() != events {
            bail!(
                "cg_merge: {}: events {} differ from {}'s ({})",
                input.path.display(),
                input.events().join(" "),
                first.path.display(),
                events.join(" ")
            );
        }
        input.for_each_cost(|file, function, line, line_costs| {
            let name = (file.to_string(), function.to_string());
            add(&mut costs, name, line, &signed(line_costs, 1));
        });
    }
    let header = &first.part().header;
    let write = |out: &mut dyn Write| -> io::Result<()> {
        let mut out = BufWriter::new(out);
        for desc in &header.desc {
            writeln!(out, "desc: {desc}")?;
        }
        writeln!(out, "cmd: {}", header.cmd_line().unwrap_or_default())?;
        writeln!(out, "events: {}", events.join(" "))?;
        write_costs(&mut out, &costs, events.len())
    };
    match out {
        Some(path) => cgx_formats::write_atomically(Path::new(&path), write)
            .with_context(|| format!("cg_merge: {path}: cannot be written"))?,
        None => write(&mut io::stdout().lock())?,
    }
    Ok(())
}

/// The options Valgrind 3.19's annotate scripts share, as given.
struct ScriptArgs {
    inclusive: bool,
    threshold: Option<String>,
    show_percs: bool,
    show: Vec<String>,
    sort: Vec<String>,
    file: Option<String>,
    tree: Tree,
    sources: SourceOptions,
}

/// The value of the script's include option in `arg`: `--include=DIR` and
/// `-I=DIR` for both scripts, `-IDIR` for `cg_annotate` too.
fn include_value(arg: &str, callgrind: bool) -> Option<&str> {
    if let Some(dir) = value(arg, "include") {
        return Some(dir);
    }
    let rest = arg.strip_prefix("-I")?;
    match rest.strip_prefix('=') {
        Some(dir) => Some(dir),
        None if !callgrind => Some(rest),
        None => None,
    }
}

/// Parses the arguments of `command` (`callgrind_annotate` or
/// `cg_annotate`); `None` when it only printed its version.
fn script_args(args: &[OsString], command: &str) -> Result<Option<ScriptArgs>> {
    let args = texts(args, command)?;
    let callgrind = command == "callgrind_annotate";
    let mut parsed = ScriptArgs {
        inclusive: false,
        threshold: None,
        show_percs: true,
        show: Vec::new(),
        sort: Vec::new(),
        file: None,
        tree: Tree::None,
        sources: SourceOptions::default(),
    };
    let list = |value: &str| value.split(',').map(str::to_owned).collect::<Vec<_>>();
    let yes_no = |arg: &str, value: &str| match value {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => bail!("{command}: {arg}: yes or no"),
    };
    for arg in &args {
        if let Some(value) = value(arg, "inclusive").filter(|_| callgrind) {
            parsed.inclusive = yes_no(arg, value)?;
        } else if let Some(value) = value(arg, "threshold") {
            // cg_annotate takes at most 20%.
            let most = if callgrind { 100.0 } else { 20.0 };
            let percent = value.strip_suffix('%').unwrap_or(value).parse::<f64>();
            if percent.is_ok_and(|percent| percent > most) {
                bail!("{command}: {arg}: a percentage from 0 to {most}");
            }
            parsed.threshold = Some(value.to_string());
        } else if let Some(value) = value(arg, "show-percs") {
            parsed.show_percs = yes_no(arg, value)?;
        } else if let Some(value) = value(arg, "show") {
            parsed.show = list(value);
        } else if let Some(value) = value(arg, "sort") {
            parsed.sort = list(value);
        } else if let Some(value) = value(arg, "auto") {
            parsed.sources.auto = yes_no(arg, value)?;
        } else if let Some(value) = value(arg, "context") {
            parsed.sources.context = value
                .parse()
                .with_context(|| format!("{command}: {arg}: a number of lines"))?;
        } else if let Some(value) = value(arg, "tree").filter(|_| callgrind) {
            parsed.tree = Tree::parse(value)
                .with_context(|| format!("{command}: {arg}: none, caller, calling or both"))?;
        } else if arg == "-I" && !callgrind {
            bail!("{command}: no space is allowed after a -I flag");
        } else if let Some(dir) = include_value(arg, callgrind) {
            parsed.sources.add_include(dir);
        } else if arg == "--version" {
            println!(
                "{command}-{VALGRIND_VERSION} (cgx {})",
                env!("CARGO_PKG_VERSION")
            );
            return Ok(None);
        } else if arg.starts_with('-') {
            bail!("{command}: unknown option {arg}");
        } else if parsed.file.is_none() {
            parsed.file = Some(arg.clone());
        } else if parsed.sources.is_readable(arg) {
            parsed.sources.user_files.push(arg.clone());
        } else {
            bail!(
                "{command}: File {arg} not found in any of: {}",
                parsed.sources.searched()
            );
        }
    }
    Ok(Some(parsed))
}

/// The profile named, or the first file here whose name starts with
/// `prefix` (as the scripts look for one), said on standard output.
fn profile_name(named: Option<String>, prefix: &str, command: &str) -> Result<String> {
    if let Some(name) = named {
        return Ok(name);
    }
    let mut found: Vec<String> = std::fs::read_dir(".")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| name.starts_with(prefix))
        .collect();
    found.sort();
    let name = found
        .into_iter()
        .next()
        .with_context(|| format!("{command}: no {prefix}* file here, and none named"))?;
    println!("Reading data from '{name}'...");
    Ok(name)
}

/// Runs `callgrind_annotate ARGS`.
pub fn callgrind_annotate(args: &[OsString]) -> Result<()> {
    use cgx_converters::callgrind_annotate::{callgrind_annotate, Options};
    let Some(parsed) = script_args(args, "callgrind_annotate")? else {
        return Ok(());
    };
    let file_name = profile_name(parsed.file, "callgrind.out", "callgrind_annotate")?;
    let options = Options {
        inclusive: parsed.inclusive,
        threshold: parsed.threshold.unwrap_or_else(|| "99".into()),
        show_percs: parsed.show_percs,
        show: parsed.show,
        sort: parsed.sort,
        file_name,
        cwd: std::env::current_dir()
            .map(|dir| format!("{}/", dir.display()))
            .unwrap_or_default(),
        tree: parsed.tree,
        sources: parsed.sources,
    };
    let profile = cgx_formats::read_path(Path::new(&options.file_name))?;
    let mut out = BufWriter::new(io::stdout().lock());
    callgrind_annotate(&profile, &options, &mut out)?;
    out.flush()?;
    Ok(())
}

/// Runs `cg_annotate ARGS`.
pub fn cg_annotate(args: &[OsString]) -> Result<()> {
    use cgx_converters::cg_annotate::{cg_annotate, Options};
    let Some(parsed) = script_args(args, "cg_annotate")? else {
        return Ok(());
    };
    let file_name = profile_name(parsed.file, "cachegrind.out", "cg_annotate")?;
    let options = Options {
        threshold: parsed.threshold.unwrap_or_else(|| "0.1".into()),
        show_percs: parsed.show_percs,
        show: parsed.show,
        sort: parsed.sort,
        file_name,
        sources: parsed.sources,
    };
    let input = std::fs::File::open(&options.file_name)
        .with_context(|| format!("cg_annotate: {}: cannot be read", options.file_name))?;
    let mut out = BufWriter::new(io::stdout().lock());
    cg_annotate(io::BufReader::new(input), &options, &mut out)?;
    out.flush()?;
    Ok(())
}

/// Runs `cg_diff ARGS`.
pub fn diff(args: &[OsString]) -> Result<()> {
    let args = texts(args, "cg_diff")?;
    let (mut mod_filename, mut mod_funcname) = (None, None);
    let mut files = Vec::new();
    for arg in &args {
        let parse = |option: &str, expression: &str| {
            Rewrite::parse(expression)
                .map_err(|reason| anyhow::anyhow!("cg_diff: --{option}={expression}: {reason}"))
        };
        if let Some(expression) = value(arg, "mod-filename") {
            mod_filename = Some(parse("mod-filename", expression)?);
        } else if let Some(expression) = value(arg, "mod-funcname") {
            mod_funcname = Some(parse("mod-funcname", expression)?);
        } else if arg == "-h" || arg == "--help" {
            println!("usage: cg_diff [options] <cachegrind-out-file1> <cachegrind-out-file2>");
            return Ok(());
        } else if arg == "-v" || arg == "--version" {
            println!(
                "cg_diff-{VALGRIND_VERSION} (cgx {})",
                env!("CARGO_PKG_VERSION")
            );
            return Ok(());
        } else if arg.starts_with('-') && arg.len() > 1 {
            bail!("cg_diff: unknown option {arg}");
        } else {
            files.push(PathBuf::from(arg));
        }
    }
    let [before, after] = files.as_slice() else {
        bail!(
            "cg_diff: two files are needed, {} given (usage: cg_diff [options] FILE1 FILE2)",
            files.len()
        );
    };
    let (before, after) = (Cachegrind::read(before)?, Cachegrind::read(after)?);
    if before.events() != after.events() {
        bail!(
            "cg_diff: the events differ: {} in {}, {} in {}",
            before.events().join(" "),
            before.path.display(),
            after.events().join(" "),
            after.path.display()
        );
    }
    let rename = |file: &str, function: &str| {
        let file = mod_filename
            .as_ref()
            .map_or(file.to_string(), |rewrite| rewrite.apply(file).into_owned());
        let function = mod_funcname
            .as_ref()
            .map_or(function.to_string(), |rewrite| {
                rewrite.apply(function).into_owned()
            });
        (file, function)
    };
    let mut differences = Costs::new();
    for (input, sign) in [(&before, -1), (&after, 1)] {
        input.for_each_cost(|file, function, _, costs| {
            add(
                &mut differences,
                rename(file, function),
                0,
                &signed(costs, sign),
            );
        });
    }
    let command = |input: &Cachegrind| {
        input
            .part()
            .header
            .cmd_line()
            .unwrap_or_default()
            .into_owned()
    };
    let mut out = BufWriter::new(io::stdout().lock());
    writeln!(
        out,
        "desc: Files compared:   {}; {}",
        before.path.display(),
        after.path.display()
    )?;
    writeln!(out, "cmd:  {}; {}", command(&before), command(&after))?;
    writeln!(out, "events:  {}", before.events().join(" "))?;
    write_costs(&mut out, &differences, before.events().len())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_add_up_by_line_and_the_summary_is_their_total() {
        let mut costs = Costs::new();
        let name = || ("a.c".to_string(), "f".to_string());
        add(&mut costs, name(), 3, &signed(&[5, 1], 1));
        add(&mut costs, name(), 3, &signed(&[7, 0], -1));
        add(&mut costs, name(), 9, &[2, 2]);
        add(&mut costs, ("b.c".into(), "g".into()), 0, &[1, 0]);
        let mut text = Vec::new();
        write_costs(&mut text, &costs, 2).unwrap();
        assert_eq!(
            String::from_utf8(text).unwrap(),
            "fl=a.c\nfn=f\n3 -2 1\n9 2 2\nfl=b.c\nfn=g\n0 1 0\nsummary: 1 3\n"
        );
    }

    #[test]
    fn an_option_value_is_found_by_its_name() {
        assert_eq!(
            value("--mod-filename=s/a/b/", "mod-filename"),
            Some("s/a/b/")
        );
        assert_eq!(value("--mod-filename", "mod-filename"), None);
        assert_eq!(value("--mod-funcname=x", "mod-filename"), None);
    }
}
