//! `cgx annotate`: a cg_annotate / callgrind_annotate style report on one or more
//! profiles.

use std::env;
use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::PathBuf;
use std::thread;

use anyhow::{bail, Result};
use cgx_converters::annotate::{annotate, AnnotateError, Input, Options, Rewrite, Tree};

use crate::YesNo;

/// `--tree`: which callers and callees to list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum TreeArg {
    /// No call tree.
    None,
    /// The callers of each function.
    Caller,
    /// The functions each function calls.
    Calling,
    /// Callers and callees.
    Both,
}

/// `--color`: when to colour the output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ColorArg {
    /// When the output is a terminal and NO_COLOR is not set.
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

/// Arguments of `cgx annotate`.
#[derive(clap::Args)]
pub struct AnnotateArgs {
    /// The profiles (Cachegrind or Callgrind, plain or gzip-compressed); several
    /// are added up, and must have the same events.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Report the second of two profiles minus the first.
    #[arg(long)]
    diff: bool,
    /// Rewrite every file name with s/old/new/ (flags g: every match, i: ignore
    /// case); e.g. to pair files of two versions of a program in --diff.
    #[arg(long, value_name = "s/old/new/")]
    mod_filename: Option<String>,
    /// Rewrite every function name, like --mod-filename.
    #[arg(long, value_name = "s/old/new/")]
    mod_funcname: Option<String>,
    /// Show only these events, in this order [default: all].
    #[arg(long, value_delimiter = ',', value_name = "A,B,C")]
    show: Vec<String>,
    /// Sort by these events, primary first [default: the profile's order].
    #[arg(long, value_delimiter = ',', value_name = "A,B,C")]
    sort: Vec<String>,
    /// Leave out files and functions below this percentage of the primary sort
    /// event.
    #[arg(long, default_value = "0.1", value_parser = parse_threshold, value_name = "PERCENT")]
    threshold: f64,
    /// Show a percentage beside every non-zero count [default: yes].
    #[arg(long, value_enum, num_args = 0..=1, require_equals = true,
          default_missing_value = "yes", value_name = "yes|no",
          overrides_with = "no_show_percs")]
    show_percs: Option<YesNo>,
    /// Same as --show-percs=no.
    #[arg(long, overrides_with = "show_percs")]
    no_show_percs: bool,
    /// Annotate the source files of the functions shown [default: yes]; --auto is
    /// an alias.
    #[arg(long, alias = "auto", value_enum, num_args = 0..=1, require_equals = true,
          default_missing_value = "yes", value_name = "yes|no",
          overrides_with = "no_annotate")]
    annotate: Option<YesNo>,
    /// Same as --annotate=no.
    #[arg(long, overrides_with = "annotate")]
    no_annotate: bool,
    /// Lines of context around annotated lines.
    #[arg(long, default_value_t = 8, value_name = "N")]
    context: u64,
    /// Callgrind profiles: a summary of inclusive costs (from the calls= lines).
    #[arg(long, value_enum, num_args = 0..=1, require_equals = true,
          default_missing_value = "yes", default_value = "no", value_name = "yes|no")]
    inclusive: YesNo,
    /// Callgrind profiles: list the callers and/or callees of each function, with
    /// call counts and costs.
    #[arg(long, value_enum, default_value = "none")]
    tree: TreeArg,
    /// Colour the output.
    #[arg(long, value_enum, default_value = "auto", value_name = "WHEN")]
    color: ColorArg,
}

fn parse_threshold(text: &str) -> Result<f64, String> {
    let number = text.strip_suffix('%').unwrap_or(text);
    match number.parse::<f64>() {
        Ok(value) if (0.0..=100.0).contains(&value) => Ok(value),
        _ => Err(format!("'{text}' is not a percentage from 0 to 100")),
    }
}

fn rewrite(option: &str, expression: Option<&String>) -> Result<Option<Rewrite>> {
    expression
        .map(|expression| {
            Rewrite::parse(expression)
                .map_err(|reason| anyhow::anyhow!("{option} '{expression}': {reason}"))
        })
        .transpose()
}

/// Runs `cgx annotate`.
pub fn run(args: &AnnotateArgs) -> Result<()> {
    if args.diff && args.files.len() != 2 {
        bail!(AnnotateError::DiffNeedsTwo(args.files.len()));
    }
    let options = Options {
        show: (!args.show.is_empty()).then(|| args.show.clone()),
        sort: (!args.sort.is_empty()).then(|| args.sort.clone()),
        threshold: args.threshold,
        show_percs: !args.no_show_percs && args.show_percs.is_none_or(YesNo::is_yes),
        annotate: !args.no_annotate && args.annotate.is_none_or(YesNo::is_yes),
        context: args.context,
        diff: args.diff,
        mod_filename: rewrite("--mod-filename", args.mod_filename.as_ref())?,
        mod_funcname: rewrite("--mod-funcname", args.mod_funcname.as_ref())?,
        inclusive: args.inclusive.is_yes(),
        tree: match args.tree {
            TreeArg::None => Tree::None,
            TreeArg::Caller => Tree::Caller,
            TreeArg::Calling => Tree::Calling,
            TreeArg::Both => Tree::Both,
        },
        color: match args.color {
            ColorArg::Always => true,
            ColorArg::Never => false,
            ColorArg::Auto => {
                io::stdout().is_terminal()
                    && env::var_os("NO_COLOR").is_none_or(|value| value.is_empty())
            }
        },
        invocation: env::args_os()
            .map(|arg| arg.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" "),
    };
    let inputs = read_all(&args.files)?;
    let stdout = io::stdout();
    let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
    let result = annotate(&inputs, &options, &mut out).and_then(|()| Ok(out.flush()?));
    // The profiles can take hundreds of megabytes in millions of allocations;
    // the process ends now, so leave freeing them to the kernel.
    std::mem::forget(inputs);
    match result {
        Ok(()) => Ok(()),
        // `cgx annotate ... | head`: the reader has all it wants.
        Err(AnnotateError::Output(error)) if error.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(error) => Err(error.into()),
    }
}

/// Reads the profiles, in parallel when there are several.
fn read_all(paths: &[PathBuf]) -> Result<Vec<Input>> {
    let read = |path: &PathBuf| -> Result<Input> {
        let profile = cgx_formats::read_path(path)?;
        Ok(Input {
            path: path.clone(),
            profile,
        })
    };
    if paths.len() == 1 {
        return paths.iter().map(read).collect();
    }
    thread::scope(|scope| {
        let readers: Vec<_> = paths
            .iter()
            .map(|path| scope.spawn(move || read(path)))
            .collect();
        readers
            .into_iter()
            .map(|reader| {
                reader
                    .join()
                    .map_err(|_| anyhow::anyhow!("a reader thread panicked"))
                    .and_then(|result| result)
            })
            .collect::<Result<Vec<_>>>()
    })
}
