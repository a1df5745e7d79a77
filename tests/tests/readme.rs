//! The README's commands, run as a reader would run them: the first set-up
//! command (with this build's cgx for `target/release/cgx`), every line of
//! the five-minute tour (`kcachegrind` loads the profile headless), and the
//! shims block. Each runs in a folder of its own holding what it needs of
//! the repository (`bench/programs/compute.c`), with this build's cgx first
//! on `PATH`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use cgx_tests::cli::binary;
use cgx_tests::clients::kcachegrind_complaints;
use cgx_tests::{output_of, workspace_root};

/// The README.
fn readme() -> String {
    fs::read_to_string(workspace_root().join("README.md")).expect("the README")
}

/// The lines of the first fenced block after the heading `heading`.
fn fenced_block(readme: &str, heading: &str) -> Vec<String> {
    let after = readme
        .split_once(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("no '{heading}' in the README"))
        .1;
    let block = after
        .split_once("```sh\n")
        .and_then(|(_, rest)| rest.split_once("\n```"))
        .unwrap_or_else(|| panic!("no sh block after '{heading}'"))
        .0;
    block.lines().map(str::to_string).collect()
}

/// `line` without its comment (`  # ...`).
fn command(line: &str) -> &str {
    line.split_once("  #")
        .map_or(line, |(command, _)| command)
        .trim()
}

/// A folder with what the README's commands need of the repository.
fn repository_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let programs = dir.path().join("bench/programs");
    fs::create_dir_all(&programs).expect("a bench folder");
    let source = workspace_root().join("bench/programs/compute.c");
    fs::copy(source, programs.join("compute.c")).expect("compute.c copied");
    dir
}

/// `PATH` with this build's cgx first.
fn path_with_cgx() -> String {
    let bin = binary().parent().map(Path::to_path_buf).unwrap_or_default();
    let path = std::env::var("PATH").unwrap_or_default();
    format!("{}:{path}", bin.display())
}

/// Runs `script` with `sh` in `dir` (home `home`); panics unless it
/// succeeds. Returns what it printed.
fn run_script(script: &str, dir: &Path, home: &Path) -> String {
    let output = output_of(
        Command::new("sh")
            .arg("-c")
            .arg(script)
            .current_dir(dir)
            .env("PATH", path_with_cgx())
            .env("HOME", home),
    );
    assert!(
        output.status.success(),
        "{script}: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn the_first_set_up_command_profiles_and_draws() {
    let readme = readme();
    let command = readme
        .lines()
        .map(str::trim)
        .find(|line| line.starts_with("cargo build --release && "))
        .expect("the build-and-run command");
    // This build stands in for `cargo build --release`'s.
    let cgx = binary().display().to_string();
    let script = command
        .trim_start_matches("cargo build --release && ")
        .replace("target/release/cgx", &cgx);
    let dir = repository_copy();
    let report = run_script(&script, dir.path(), dir.path());
    assert!(report.contains("PROGRAM TOTALS"), "{report}");
    assert!(dir.path().join("flame.svg").exists(), "flame.svg");
}

#[test]
fn the_tour_runs_as_written() {
    let dir = repository_copy();
    let dir = dir.path();
    let mut ran = 0;
    for line in fenced_block(&readme(), "## A five-minute tour") {
        let command = command(&line);
        if let Some(file) = command.strip_prefix("kcachegrind ") {
            let profile: PathBuf = dir.join(file.trim());
            assert!(profile.exists(), "{command}: no {}", profile.display());
            if let Some(complaints) = kcachegrind_complaints(&[profile], 10) {
                assert!(complaints.is_empty(), "KCachegrind: {complaints:?}");
            }
            continue;
        }
        let printed = run_script(command, dir, dir);
        if command.starts_with("cgx annotate") {
            assert!(printed.contains("PROGRAM TOTALS"), "{command}: {printed}");
        }
        ran += 1;
    }
    assert!(ran >= 6, "the tour's commands");
    for written in ["callgrind.out.tour", "cachegrind.out.tour", "flame.svg"] {
        assert!(dir.join(written).exists(), "the tour wrote {written}");
    }
}

#[test]
fn the_shims_block_makes_valgrind_cgx() {
    let home = tempfile::tempdir().expect("a temporary home");
    let script = fenced_block(&readme(), "## With tools that run Valgrind")
        .iter()
        .map(|line| command(line).to_string())
        .filter(|command| !command.is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    let printed = run_script(&script, home.path(), home.path());
    let version = printed.lines().last().unwrap_or_default();
    assert!(version.starts_with("valgrind-3.19.0 (cgx"), "{printed}");
    let shim = home.path().join(".cgx-shims/callgrind_control");
    assert!(shim.exists(), "{}", shim.display());
}
