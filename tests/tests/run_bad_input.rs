//! Acceptance 4 of `cgx run`: bad input, with `crash.c` (a `-static -nostdlib`
//! program of a few hundred instructions).
//!
//! - A missing program: exit status 127 and a message naming it; a file that is
//!   not executable: 126 and a message naming it.
//! - A program killed by SIGSEGV (a write to address 0) or SIGINT (sent to itself):
//!   exit status 139 or 130, as a shell reports it, and the profile written, with
//!   Valgrind's figures (Valgrind counts no cost for the faulting instruction); it
//!   loads in callgrind_annotate and KCachegrind.
//! - An output file in a folder that does not exist, or an unknown option: an error
//!   naming it, a non-zero exit status, and the program never started (it would
//!   have created a marker file).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use cgx_tests::run::{
    assert_clients_load, assert_same_figures, assert_status, build, native, run, self_ir, Kind,
    Profiler, Run,
};

/// Asserts that `run` failed with `status` (any non-zero status if `None`) and a
/// message on stderr that contains `name`.
fn assert_error(run: &Run, status: Option<i32>, name: &str) {
    match status {
        Some(status) => assert_status(run, status),
        None => assert_ne!(run.status, 0, "{}: exit status", run.command),
    }
    assert!(
        run.stderr.contains(name),
        "{}: the message does not name {name}:\n{}",
        run.command,
        run.stderr
    );
    println!(
        "{}: exit status {}, message: {}",
        run.command,
        run.status,
        run.stderr.trim()
    );
}

#[test]
fn missing_program_exits_127() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let missing = dir.path().join("no-such-program");
    let cgx = run(Profiler::Cgx, &["-q"], &missing, &[], dir.path());
    assert_error(&cgx, Some(127), &missing.to_string_lossy());
}

#[test]
fn non_executable_program_exits_126() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let script = dir.path().join("not-executable");
    fs::write(&script, "#!/bin/sh\necho ran\n").expect("a file is written");
    fs::set_permissions(&script, fs::Permissions::from_mode(0o644)).expect("chmod 644");
    let cgx = run(Profiler::Cgx, &["-q"], &script, &[], dir.path());
    assert_error(&cgx, Some(126), &script.to_string_lossy());
    assert!(!cgx.stdout.contains("ran"), "the file ran");
}

/// Runs `crash MODE` alone, under Valgrind and cgx; checks that both profilers
/// exit with `status` and write the profile with equal figures; returns cgx's
/// profile files.
fn killed(mode: &str, status: i32, function: &str, dir: &Path) -> Vec<std::path::PathBuf> {
    let dir = dir.join(mode);
    fs::create_dir(&dir).expect("a folder");
    let program = build("crash.c", Kind::NoLibc, &dir);
    assert_status(&native(&program, &[mode], &dir), status);
    let valgrind = run(Profiler::Valgrind, &["-q"], &program, &[mode], &dir);
    assert_status(&valgrind, status);
    let cgx = run(Profiler::Cgx, &["-q"], &program, &[mode], &dir);
    assert_status(&cgx, status);
    let profile = cgx.profile();
    assert!(
        self_ir(&profile).contains_key(function),
        "crash {mode}: cgx's profile has no cost in {function}"
    );
    println!("crash {mode}: cgx exits with {status} and writes the profile");
    assert_same_figures(
        &valgrind.profile(),
        &profile,
        false,
        &format!("crash {mode}"),
    );
    cgx.files
}

#[test]
fn programs_killed_by_a_signal_have_their_profile_written() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let mut files = killed("segv", 139, "crash", dir.path());
    files.extend(killed("sigint", 130, "interrupt", dir.path()));
    assert_clients_load(&files, "crash.c");
}

#[test]
fn unwritable_output_is_an_error_before_the_program_starts() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("crash.c", Kind::NoLibc, dir.path());
    let marker = dir.path().join("marker");
    let marker_arg = marker.to_string_lossy().into_owned();
    let output = "/nonexistent/dir/x";
    let option = format!("--callgrind-out-file={output}");
    let cgx = run(
        Profiler::Cgx,
        &["-q", &option],
        &program,
        &["marker", &marker_arg],
        dir.path(),
    );
    assert_error(&cgx, None, output);
    assert!(
        !marker.exists(),
        "the program ran: {} exists",
        marker.display()
    );
    // The control: without the bad option the marker is made.
    native(&program, &["marker", &marker_arg], dir.path());
    assert!(marker.exists(), "the program makes no marker");
}

#[test]
fn unknown_option_is_an_error_naming_it() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("crash.c", Kind::NoLibc, dir.path());
    let marker = dir.path().join("marker");
    let marker_arg = marker.to_string_lossy().into_owned();
    let cgx = run(
        Profiler::Cgx,
        &["-q", "--frobnicate=yes"],
        &program,
        &["marker", &marker_arg],
        dir.path(),
    );
    assert_error(&cgx, None, "--frobnicate");
    assert!(
        !marker.exists(),
        "the program ran: {} exists",
        marker.display()
    );
}
