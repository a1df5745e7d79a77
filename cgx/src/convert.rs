//! `cgx convert`: read a profile, write it in another format.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use cgx_formats::{CallgrindOptions, Format};

use crate::YesNo;

/// The formats `cgx convert` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Target {
    /// Callgrind's format (KCachegrind, callgrind_annotate).
    Callgrind,
    /// Cachegrind's format (cg_annotate); keeps self costs, drops the call graph.
    Cachegrind,
}

/// Arguments of `cgx convert`.
#[derive(clap::Args)]
pub struct ConvertArgs {
    /// The profile to read (Cachegrind or Callgrind, plain or gzip-compressed).
    input: PathBuf,
    /// Where to write (written whole or not at all; a name ending in .gz is compressed).
    #[arg(short, long)]
    output: PathBuf,
    /// The format to write; by default taken from the output's name
    /// (callgrind.out.* or cachegrind.out.*).
    #[arg(long)]
    to: Option<Target>,
    /// Callgrind output: compress names (`fn=(3) main`, then `fn=(3)`).
    #[arg(long, value_enum, default_value = "yes", value_name = "yes|no")]
    compress_strings: YesNo,
    /// Callgrind output: write positions relative to the previous line.
    #[arg(long, value_enum, default_value = "yes", value_name = "yes|no")]
    compress_pos: YesNo,
}

/// Runs `cgx convert`.
pub fn run(args: &ConvertArgs) -> Result<()> {
    let target = match args.to {
        Some(target) => target,
        None => target_from_name(&args.output)?,
    };
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
    }
    Ok(())
}

fn target_from_name(output: &Path) -> Result<Target> {
    let name = output
        .file_name()
        .map(|name| name.to_string_lossy())
        .unwrap_or_default();
    if name.starts_with("callgrind.out") {
        Ok(Target::Callgrind)
    } else if name.starts_with("cachegrind.out") {
        Ok(Target::Cachegrind)
    } else {
        bail!(
            "{}: cannot tell the format from the name; give --to callgrind or --to cachegrind",
            output.display()
        )
    }
}
