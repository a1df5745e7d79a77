//! Shared helpers of the cgx integration tests.
//!
//! - [`programs`]: the small C programs in `tests/programs/`, built with gcc.
//! - [`valgrind`]: the profiles Valgrind 3.19 writes for them, one [`valgrind::Case`]
//!   per combination of options the tests cover.
//! - [`clients`]: the programs that read profiles (callgrind_annotate, cg_annotate,
//!   gprof2dot), run and their per-function tables parsed.
//! - [`tables`]: the same tables computed from a [`cgx_formats::Profile`].
//! - [`compare`]: profile equality with a readable first difference.
//! - [`cli`]: the `cgx` binary.
//! - [`pictures`]: readers of the stack formats (folded, pprof, speedscope).
//! - [`annotate`]: `cgx annotate` and Valgrind's annotate tools, run and parsed.
//! - [`run`]: `cgx run` and `valgrind --tool=callgrind` on the programs in
//!   `tests/programs/run/`, and the tables by function, call arc and instruction
//!   they are compared by.

pub mod annotate;
pub mod cli;
pub mod clients;
pub mod compare;
pub mod pictures;
pub mod programs;
pub mod run;
pub mod tables;
pub mod valgrind;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `tests/` folder of the workspace.
pub fn tests_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The root of the workspace.
pub fn workspace_root() -> &'static Path {
    tests_dir()
        .parent()
        .expect("tests/ is a folder of the workspace")
}

/// The path of a file in `tests/fixtures/`.
pub fn fixture(name: &str) -> PathBuf {
    tests_dir().join("fixtures").join(name)
}

/// Runs `command` to completion, panicking if it cannot be started.
pub fn output_of(command: &mut Command) -> Output {
    command
        .output()
        .unwrap_or_else(|error| panic!("cannot run {command:?}: {error}"))
}

/// Runs `command` and returns its output, panicking unless it exits with 0.
pub fn successful_output_of(command: &mut Command) -> Output {
    let output = output_of(command);
    assert!(
        output.status.success(),
        "{command:?} failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    output
}
