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

#[test]
fn a_directory_exits_126() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let folder = dir.path().join("a-folder");
    fs::create_dir(&folder).expect("a folder");
    let cgx = run(Profiler::Cgx, &["-q"], &folder, &[], dir.path());
    assert_error(&cgx, Some(126), "is a directory");
}

/// Writes an executable file `name` in `dir` with `bytes`; returns its path.
fn executable(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let path = dir.join(name);
    fs::write(&path, bytes).expect("a file is written");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).expect("chmod 755");
    path
}

#[test]
fn programs_cgx_cannot_trace_are_refused_before_they_run() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    // A 32-bit x86 program that would exit 0 at once.
    let source = dir.path().join("exit32.S");
    fs::write(
        &source,
        ".globl _start\n_start:\n mov $1, %eax\n xor %ebx, %ebx\n int $0x80\n",
    )
    .expect("a source file");
    let program32 = dir.path().join("exit32");
    cgx_tests::successful_output_of(
        std::process::Command::new("gcc")
            .args(["-m32", "-nostdlib", "-static", "-o"])
            .arg(&program32)
            .arg(&source),
    );
    assert_status(&native(&program32, &[], dir.path()), 0);
    let cgx = run(Profiler::Cgx, &["-q"], &program32, &[], dir.path());
    assert_error(&cgx, Some(1), "a 32-bit x86 program");
    assert!(cgx.files.is_empty(), "{:?}", cgx.files);
    // An AArch64 ELF header.
    let mut header = vec![0u8; 64];
    header[..8].copy_from_slice(b"\x7fELF\x02\x01\x01\x00");
    header[16] = 2;
    header[18] = 0xb7;
    let arm = executable(dir.path(), "arm-program", &header);
    let cgx = run(Profiler::Cgx, &["-q"], &arm, &[], dir.path());
    assert_error(&cgx, Some(1), "a program for AArch64");
    // A script whose interpreter is the 32-bit program.
    let script = executable(
        dir.path(),
        "script32",
        format!("#!{}\n", program32.display()).as_bytes(),
    );
    let cgx = run(Profiler::Cgx, &["-q"], &script, &[], dir.path());
    assert_error(&cgx, Some(1), "its interpreter");
    assert!(cgx.stderr.contains("32-bit"), "{}", cgx.stderr);
    assert_eq!(cgx.stderr.lines().count(), 1, "{}", cgx.stderr);
}
