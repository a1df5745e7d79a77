//! cgx — a Callgrind/Cachegrind-compatible tracing profiler.
//!
//! This binary only parses the command line and wires the library crates together.

mod annotate;
mod convert;

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

/// A Callgrind/Cachegrind-compatible tracing profiler for x86-64 Linux.
#[derive(Parser)]
#[command(name = "cgx", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a program under cgx and write its profile (not built yet: issue 4).
    Run {
        /// The program and its arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        program: Vec<String>,
    },
    /// Print a cg_annotate / callgrind_annotate style report on profiles: totals,
    /// File:function and Function:file summaries, annotated source files.
    Annotate(annotate::AnnotateArgs),
    /// Convert a Cachegrind or Callgrind profile (plain or .gz) to another format.
    Convert(convert::ConvertArgs),
}

/// Valgrind's spelling of booleans: `--compress-strings=no`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum YesNo {
    Yes,
    No,
}

impl YesNo {
    fn is_yes(self) -> bool {
        self == YesNo::Yes
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run { .. } => Err(anyhow::anyhow!(
            "'cgx run' is not built yet (issue 4); use valgrind --tool=callgrind for now"
        )),
        Command::Annotate(args) => annotate::run(&args),
        Command::Convert(args) => convert::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("cgx: {error:#}");
            ExitCode::FAILURE
        }
    }
}
