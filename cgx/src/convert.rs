//! `cgx convert`: read a profile, write it in another format.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use cgx_converters::stacks::{self, Stacks};
use cgx_converters::{flamegraph, folded, pprof, speedscope};
use cgx_formats::{CallgrindOptions, Format};

use crate::YesNo;

/// The formats `cgx convert` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Target {
    /// Callgrind's format (KCachegrind, callgrind_annotate).
    Callgrind,
    /// Cachegrind's format (cg_annotate); keeps self costs, drops the call graph.
    Cachegrind,
    /// Folded stacks, `main;f;g 123` per line (flame graph tools).
    Folded,
    /// A flame graph, SVG.
    #[value(alias = "svg")]
    Flamegraph,
    /// pprof's gzip-compressed protocol buffer (go tool pprof).
    Pprof,
    /// speedscope's JSON file format.
    Speedscope,
}

impl Target {
    /// The name `--to` takes.
    fn name(self) -> String {
        use clap::ValueEnum;
        self.to_possible_value()
            .map(|value| value.get_name().to_string())
            .unwrap_or_default()
    }

    /// Whether the format carries stacks of one event.
    fn is_stacks(self) -> bool {
        !matches!(self, Target::Callgrind | Target::Cachegrind)
    }
}

/// Arguments of `cgx convert`.
#[derive(clap::Args)]
#[command(after_long_help = STACKS_HELP)]
pub struct ConvertArgs {
    /// The profile to read (Cachegrind or Callgrind, plain or gzip-compressed).
    input: PathBuf,
    /// Where to write (written whole or not at all; for callgrind and cachegrind, a
    /// name ending in .gz is compressed).
    #[arg(short, long)]
    output: PathBuf,
    /// The format to write; by default taken from the output's name: *.folded,
    /// *.svg, *.pb.gz or *.pprof, *.json (e.g. *.speedscope.json), callgrind.out.*,
    /// cachegrind.out.*.
    #[arg(long)]
    to: Option<Target>,
    /// Folded, flamegraph, pprof and speedscope: the event the stacks carry
    /// (default: the profile's first event).
    #[arg(long, value_name = "NAME")]
    event: Option<String>,
    /// Callgrind output: compress names (`fn=(3) main`, then `fn=(3)`).
    #[arg(long, value_enum, default_value = "yes", value_name = "yes|no")]
    compress_strings: YesNo,
    /// Callgrind output: write positions relative to the previous line.
    #[arg(long, value_enum, default_value = "yes", value_name = "yes|no")]
    compress_pos: YesNo,
}

/// How the stack formats get their stacks, for `cgx convert --help`.
const STACKS_HELP: &str = "\
Stacks (folded, flamegraph, pprof, speedscope): a Cachegrind file has no calls, so
each function is a one-frame stack with its self cost. A Callgrind file has call
arcs per caller, not whole stacks, so the stacks are an approximation, rebuilt:
each function's self cost is shared among its callers in proportion to the
inclusive cost of the event on their arcs to it, and so on up to functions nobody
calls ('(below main)', thread starts). A caller already on the stack (recursion,
cycles) is skipped, so recursion shows as one level per name (main;fib;fib'2);
where every caller is on the stack, the stack goes on along the shortest way up.
The stacks ending in a function add up exactly to its self cost, and all stacks to
the total of the event. Parts are added up. Frames are function names, with
[OBJECT] or [OBJECT:FILE] added where several functions share a name; in folded
stacks a ';' in a name is written as ':'.";

/// Runs `cgx convert`.
pub fn run(args: &ConvertArgs) -> Result<()> {
    let target = match args.to {
        Some(target) => target,
        None => target_from_name(&args.output)?,
    };
    if args.event.is_some() && !target.is_stacks() {
        bail!(
            "--event applies to folded, flamegraph, pprof and speedscope output, not to {}",
            target.name()
        );
    }
    let profile = cgx_formats::read_path(&args.input)?;
    match target {
        Target::Callgrind => {
            let options = CallgrindOptions {
                compress_strings: args.compress_strings.is_yes(),
                compress_positions: args.compress_pos.is_yes(),
            };
            cgx_formats::write_path(&profile, Format::Callgrind(options), &args.output)?;
        }
        Target::Cachegrind => {
            let converted = cgx_converters::to_cachegrind(&profile)
                .with_context(|| format!("{}", args.input.display()))?;
            cgx_formats::write_path(&converted, Format::Cachegrind, &args.output)?;
        }
        Target::Folded | Target::Flamegraph | Target::Pprof | Target::Speedscope => {
            let mut stacks = stacks::build(&profile, args.event.as_deref())
                .with_context(|| format!("{}", args.input.display()))?;
            if stacks.command.is_none() {
                stacks.command = Some(args.input.display().to_string());
            }
            cgx_formats::write_atomically(&args.output, |out| write_stacks(target, &stacks, out))?;
        }
    }
    Ok(())
}

/// Writes `stacks` in one of the stack formats.
fn write_stacks(target: Target, stacks: &Stacks, mut out: &mut dyn Write) -> io::Result<()> {
    match target {
        Target::Folded => folded::write_folded(stacks, &mut out),
        Target::Flamegraph => flamegraph::write_flamegraph(stacks, &mut out),
        Target::Pprof => pprof::write_pprof(stacks, &mut out),
        Target::Speedscope => speedscope::write_speedscope(stacks, &mut out),
        Target::Callgrind | Target::Cachegrind => Ok(()),
    }
}

fn target_from_name(output: &Path) -> Result<Target> {
    let name = output
        .file_name()
        .map(|name| name.to_string_lossy())
        .unwrap_or_default();
    let by_suffix = [
        (".folded", Target::Folded),
        (".svg", Target::Flamegraph),
        (".pb.gz", Target::Pprof),
        (".pprof", Target::Pprof),
        (".json", Target::Speedscope),
    ];
    if let Some(&(_, target)) = by_suffix.iter().find(|(suffix, _)| name.ends_with(suffix)) {
        Ok(target)
    } else if name.starts_with("callgrind.out") {
        Ok(Target::Callgrind)
    } else if name.starts_with("cachegrind.out") {
        Ok(Target::Cachegrind)
    } else {
        bail!(
            "{}: cannot tell the format from the name (*.folded, *.svg, *.pb.gz, *.pprof, \
             *.json, callgrind.out.*, cachegrind.out.*); give --to FORMAT",
            output.display()
        )
    }
}
