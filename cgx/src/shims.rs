//! cgx under Valgrind's command names, for scripts and tools that run
//! Valgrind: `cgx shims DIR` makes links to cgx named `valgrind`,
//! `cg_annotate`, `callgrind_annotate`, `cg_merge` and `cg_diff`, and cgx
//! started under one of those names behaves as that command.
//!
//! - `valgrind`: `cgx run` with Valgrind's command line; `--version`
//!   prints `valgrind-3.19.0` (the Valgrind whose behaviour cgx follows)
//!   and names cgx; a tool cgx does not provide (Valgrind's default,
//!   memcheck, included) is refused with one line, exit 1.
//! - `cg_annotate`, `callgrind_annotate`: Valgrind 3.19's header and
//!   function summary, without source annotation (see `cgtools`).
//! - `cg_merge`, `cg_diff`: as Valgrind's (see `cgtools`).

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};

use crate::run::defaults;
use crate::{cgtools, control, run};

/// The Valgrind release whose behaviour (options, formats, figures) cgx
/// follows.
pub const VALGRIND_VERSION: &str = "3.19.0";

/// A command of Valgrind's that cgx stands in for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Personality {
    /// `valgrind`.
    Valgrind,
    /// `cg_annotate`.
    CgAnnotate,
    /// `callgrind_annotate`.
    CallgrindAnnotate,
    /// `cg_merge`.
    CgMerge,
    /// `cg_diff`.
    CgDiff,
    /// `callgrind_control`.
    CallgrindControl,
}

impl Personality {
    /// Every command cgx stands in for.
    pub const ALL: [Personality; 6] = [
        Personality::Valgrind,
        Personality::CgAnnotate,
        Personality::CallgrindAnnotate,
        Personality::CgMerge,
        Personality::CgDiff,
        Personality::CallgrindControl,
    ];

    /// The command's name.
    pub fn name(self) -> &'static str {
        match self {
            Personality::Valgrind => "valgrind",
            Personality::CgAnnotate => "cg_annotate",
            Personality::CallgrindAnnotate => "callgrind_annotate",
            Personality::CgMerge => "cg_merge",
            Personality::CgDiff => "cg_diff",
            Personality::CallgrindControl => "callgrind_control",
        }
    }

    /// The command cgx was started as, from its `argv[0]`; `None` for cgx
    /// itself.
    pub fn of(argv0: &OsStr) -> Option<Personality> {
        let name = Path::new(argv0).file_name()?;
        Personality::ALL
            .into_iter()
            .find(|personality| name == personality.name())
    }
}

/// Arguments of `cgx shims`.
#[derive(clap::Args)]
pub struct ShimsArgs {
    /// The folder for the links (made if missing); put it first on PATH.
    #[arg(value_name = "DIR")]
    dir: PathBuf,
}

/// Runs `cgx shims DIR`: links to this cgx under each command's name. A
/// link there is replaced; any other file of that name is left and
/// reported.
pub fn make(args: &ShimsArgs) -> Result<()> {
    let cgx = std::env::current_exe().context("cannot tell where this cgx is")?;
    fs::create_dir_all(&args.dir)
        .with_context(|| format!("{}: cannot make the folder", args.dir.display()))?;
    for personality in Personality::ALL {
        let link = args.dir.join(personality.name());
        match fs::symlink_metadata(&link) {
            Ok(metadata) if metadata.file_type().is_symlink() => fs::remove_file(&link)
                .with_context(|| format!("{}: cannot replace the link", link.display()))?,
            Ok(_) => bail!(
                "{}: exists and is not a link; remove it to make cgx's",
                link.display()
            ),
            Err(error) if error.kind() == ErrorKind::NotFound => {}
            Err(error) => {
                return Err(error).with_context(|| format!("{}: cannot be read", link.display()))
            }
        }
        std::os::unix::fs::symlink(&cgx, &link)
            .with_context(|| format!("{}: cannot make the link", link.display()))?;
    }
    let names: Vec<&str> = Personality::ALL.iter().map(|p| p.name()).collect();
    println!(
        "{}: {} (links to {}); put the folder first on PATH",
        args.dir.display(),
        names.join(" "),
        cgx.display()
    );
    Ok(())
}

/// Runs cgx as `personality`, with the arguments after `argv[0]`.
pub fn run_as(personality: Personality, args: Vec<OsString>) -> Result<ExitCode> {
    match personality {
        Personality::Valgrind => valgrind(args),
        Personality::CallgrindAnnotate => {
            cgtools::callgrind_annotate(&args).map(|()| ExitCode::SUCCESS)
        }
        Personality::CgAnnotate => cgtools::cg_annotate(&args).map(|()| ExitCode::SUCCESS),
        Personality::CgMerge => cgtools::merge(&args).map(|()| ExitCode::SUCCESS),
        Personality::CgDiff => cgtools::diff(&args).map(|()| ExitCode::SUCCESS),
        Personality::CallgrindControl => control::client::run(&args).map(|()| ExitCode::SUCCESS),
    }
}

/// The tools cgx provides.
const TOOLS: [&str; 2] = ["callgrind", "cachegrind"];

/// What `valgrind ARGS` is asked for, from Valgrind's options before the
/// program.
#[derive(Debug, PartialEq, Eq)]
enum ValgrindRequest {
    /// `--version`.
    Version,
    /// `--help`, `-h`.
    Help,
    /// A tool cgx does not provide (`memcheck` when none is named).
    OtherTool(String),
    /// A profile: `cgx run ARGS`.
    Run,
}

/// What `args` ask `valgrind` for.
fn valgrind_request(args: &[OsString]) -> ValgrindRequest {
    let mut tool = String::from("memcheck");
    for arg in args {
        let Some(arg) = arg.to_str() else { break };
        if !arg.starts_with('-') {
            break;
        }
        match arg {
            "--version" => return ValgrindRequest::Version,
            "--help" | "-h" | "--help-debug" => return ValgrindRequest::Help,
            _ => {}
        }
        if let Some(name) = arg.strip_prefix("--tool=") {
            tool = name.to_string();
        }
    }
    match TOOLS.contains(&tool.as_str()) {
        true => ValgrindRequest::Run,
        false => ValgrindRequest::OtherTool(tool),
    }
}

/// `valgrind ARGS` (with Valgrind's default options, see `run::defaults`).
fn valgrind(args: Vec<OsString>) -> Result<ExitCode> {
    let args = defaults::with_defaults(&defaults::Sources::read(), &args, "memcheck");
    match valgrind_request(&args) {
        ValgrindRequest::Version => {
            println!(
                "valgrind-{VALGRIND_VERSION} (cgx {}: Callgrind and Cachegrind)",
                env!("CARGO_PKG_VERSION")
            );
            Ok(ExitCode::SUCCESS)
        }
        ValgrindRequest::Help => {
            println!("usage: valgrind [OPTIONS] PROGRAM [ARGS]...\n");
            println!("This valgrind is cgx, with the tools callgrind and cachegrind.\n");
            println!("{}", run::OPTIONS_HELP);
            Ok(ExitCode::SUCCESS)
        }
        ValgrindRequest::OtherTool(tool) => bail!(
            "valgrind: --tool={tool}: this valgrind is cgx, which provides --tool={} only",
            TOOLS.join(" and --tool=")
        ),
        ValgrindRequest::Run => run::run_with_defaults(&args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(args: &[&str]) -> ValgrindRequest {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        valgrind_request(&args)
    }

    #[test]
    fn the_command_name_picks_the_personality() {
        assert_eq!(
            Personality::of(OsStr::new("/tmp/shims/valgrind")),
            Some(Personality::Valgrind)
        );
        assert_eq!(
            Personality::of(OsStr::new("cg_diff")),
            Some(Personality::CgDiff)
        );
        assert_eq!(Personality::of(OsStr::new("/usr/bin/cgx")), None);
        assert_eq!(Personality::of(OsStr::new("valgrind.bin")), None);
    }

    #[test]
    fn valgrinds_options_before_the_program_say_what_is_asked() {
        assert_eq!(request(&["--version"]), ValgrindRequest::Version);
        assert_eq!(request(&["-q", "--help"]), ValgrindRequest::Help);
        // Valgrind's default tool is memcheck.
        assert_eq!(
            request(&["./prog"]),
            ValgrindRequest::OtherTool("memcheck".into())
        );
        assert_eq!(
            request(&["--tool=helgrind", "./prog"]),
            ValgrindRequest::OtherTool("helgrind".into())
        );
        assert_eq!(
            request(&["--tool=callgrind", "./prog", "--version"]),
            ValgrindRequest::Run
        );
        // The last --tool counts; the program's own options do not.
        assert_eq!(
            request(&["--tool=memcheck", "--tool=cachegrind", "./prog", "--tool=x"]),
            ValgrindRequest::Run
        );
    }
}
