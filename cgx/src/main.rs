//! cgx — a Callgrind/Cachegrind-compatible tracing profiler.
//!
//! This binary only parses the command line and wires the library crates together.

mod annotate;
mod cgtools;
mod control;
mod convert;
mod run;
mod shims;

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
    /// Run a program and write its profile, as Valgrind does.
    ///
    /// `cgx run [OPTIONS] PROGRAM [ARGS...]` takes Valgrind's options
    /// (--tool=callgrind|cachegrind, --callgrind-out-file=NAME, --dump-instr=yes ...)
    /// and writes callgrind.out.PID (or cachegrind.out.PID), as `valgrind
    /// [OPTIONS] PROGRAM [ARGS...]` would: swap `valgrind` for `cgx run`.
    Run(run::RunArgs),
    /// Print a cg_annotate / callgrind_annotate style report on profiles: totals,
    /// File:function and Function:file summaries, annotated source files.
    Annotate(annotate::AnnotateArgs),
    /// Convert a Cachegrind or Callgrind profile (plain or .gz) to another format.
    Convert(convert::ConvertArgs),
    /// Make links to cgx named valgrind, cg_annotate, callgrind_annotate,
    /// cg_merge, cg_diff and callgrind_control in DIR: with DIR first on PATH,
    /// scripts and tools that run Valgrind run cgx.
    Shims(shims::ShimsArgs),
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
    configure_allocator();
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_default();
    if let Some(personality) = shims::Personality::of(&argv0) {
        // Under a Valgrind command's name, its errors carry that name.
        return match shims::run_as(personality, args.collect()) {
            Ok(code) => code,
            Err(error) => {
                let text = format!("{error:#}");
                let name = personality.name();
                match text.starts_with(&format!("{name}:")) {
                    true => eprintln!("{text}"),
                    false => eprintln!("{name} (cgx): {text}"),
                }
                ExitCode::FAILURE
            }
        };
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run::run(&args),
        Command::Annotate(args) => annotate::run(&args).map(|()| ExitCode::SUCCESS),
        Command::Convert(args) => convert::run(&args).map(|()| ExitCode::SUCCESS),
        Command::Shims(args) => shims::make(&args).map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("cgx: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Allocations of 128 KiB and more get pages of their own from the kernel,
/// given back when they are freed. glibc otherwise raises that threshold to
/// the size of each such block freed (a hash table's old array once it has
/// grown), after which large tables come from the heap, which keeps what is
/// freed: sqlite3 under Callgrind peaked 3 MB higher. The helper threads
/// keep glibc's arenas of their own: symbol loading beside the tracer
/// allocates tens of thousands of times, and with one arena for all the
/// tracer waits on its lock. Only cgx's own allocator is set; the program's
/// environment is untouched.
fn configure_allocator() {
    // SAFETY: mallopt only sets parameters of this process's allocator.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}
