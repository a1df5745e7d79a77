//! The `cgx` binary, built on first use.

use std::env;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use crate::{output_of, successful_output_of, workspace_root};

/// The path of the `cgx` binary, built by `cargo build -p cgx` the first time it is
/// asked for (a binary cannot be a dependency of another package's tests). It is
/// built with the profile and into the target folder of the running test.
pub fn binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        // The test runs as TARGET/PROFILE/deps/NAME-HASH.
        let test = env::current_exe().expect("the test knows its executable");
        let profile_dir = test
            .parent()
            .and_then(Path::parent)
            .expect("the test executable is in TARGET/PROFILE/deps");
        let target_dir = profile_dir.parent().expect("a target folder");
        let mut cargo = Command::new(env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
        cargo
            .args(["build", "--quiet", "-p", "cgx", "--target-dir"])
            .arg(target_dir)
            .current_dir(workspace_root());
        if profile_dir.file_name() == Some(OsStr::new("release")) {
            cargo.arg("--release");
        }
        successful_output_of(&mut cargo);
        profile_dir.join("cgx")
    })
}

/// Runs `cgx` with `args`.
pub fn cgx<S: AsRef<OsStr>>(args: impl IntoIterator<Item = S>) -> Output {
    output_of(Command::new(binary()).args(args))
}

/// Runs `cgx convert INPUT -o OUTPUT` with `options`; panics unless it succeeds
/// silently.
pub fn convert(input: &Path, output: &Path, options: &[&str]) {
    let result = cgx([
        OsStr::new("convert"),
        input.as_os_str(),
        OsStr::new("-o"),
        output.as_os_str(),
    ]
    .into_iter()
    .chain(options.iter().map(OsStr::new)));
    assert!(
        result.status.success() && result.stderr.is_empty(),
        "cgx convert {} -o {} {options:?} failed ({}):\n{}",
        input.display(),
        output.display(),
        result.status,
        String::from_utf8_lossy(&result.stderr)
    );
}
