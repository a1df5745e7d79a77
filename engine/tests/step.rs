//! The step backend against Valgrind: same program, same instruction count.

use std::path::{Path, PathBuf};
use std::process::Command as Process;
use std::time::Instant;

use cgx_engine::{step, Command, Error, Exit, InstructionCounter};

/// Builds `programs/tiny.c` (`-static -nostdlib`) with `EXIT_CODE` into `dir`.
fn build_tiny(dir: &Path, exit_code: i32) -> PathBuf {
    build(dir, "tiny", exit_code)
}

/// Builds `programs/NAME.c` (`-static -nostdlib`) with `EXIT_CODE` into `dir`.
fn build(dir: &Path, name: &str, exit_code: i32) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/programs/{name}.c"));
    let executable = dir.join(format!("{name}{exit_code}"));
    let output = Process::new("gcc")
        .args(["-O1", "-g", "-static", "-nostdlib", "-fno-stack-protector"])
        .arg(format!("-DEXIT_CODE={exit_code}"))
        .arg("-o")
        .arg(&executable)
        .arg(&source)
        .output()
        .expect("gcc runs");
    assert!(
        output.status.success(),
        "gcc failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    executable
}

/// Instructions a Valgrind tool (`cachegrind` or `callgrind`) counts for `program`,
/// read with cgx-formats from the file it writes.
fn valgrind_total(dir: &Path, tool: &str, program: &Path) -> u64 {
    let out = dir.join(format!("{tool}.out"));
    let output = Process::new("valgrind")
        .arg(format!("--tool={tool}"))
        .arg(format!("--{tool}-out-file={}", out.display()))
        .arg("--cache-sim=no")
        .arg(program)
        .output()
        .expect("valgrind runs");
    assert!(
        output.status.success(),
        "valgrind failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let profile = cgx_formats::read_path(&out).expect("cgx-formats reads Valgrind's file");
    profile
        .parts
        .iter()
        .map(|part| part.self_totals().first().copied().unwrap_or(0))
        .sum()
}

/// Instructions of the program's last basic block, `cgx_exit`: `mov $60, %eax;
/// syscall`.
const LAST_BLOCK: u64 = 2;

#[test]
fn counts_equal_valgrind() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build_tiny(dir.path(), 0);
    let mut counter = InstructionCounter::default();
    let started = Instant::now();
    let outcome = step::run(&Command::new(&program), &mut counter).expect("the run succeeds");
    let seconds = started.elapsed().as_secs_f64();
    eprintln!(
        "step backend: {} instructions, {} steps in {seconds:.3} s ({:.0} instructions/s)",
        outcome.instructions,
        outcome.steps,
        outcome.instructions as f64 / seconds
    );
    assert_eq!(outcome.exit, Exit::Code(0));
    assert_eq!(outcome.instructions, counter.instructions);
    // Thousands of instructions, a good part of them REP iterations (each one a
    // step of its own, plus the final count check that is not a step).
    assert!(outcome.instructions > 1000, "{outcome:?}");
    assert!(outcome.steps < outcome.instructions, "{outcome:?}");

    let cachegrind = valgrind_total(dir.path(), "cachegrind", &program);
    let callgrind = valgrind_total(dir.path(), "callgrind", &program);
    eprintln!("cachegrind: {cachegrind} instructions, callgrind: {callgrind}");
    // The engine reports every executed instruction, as Cachegrind counts them.
    assert_eq!(outcome.instructions, cachegrind);
    // Callgrind charges a block when the block is left, so the block that ends
    // the process (here `cgx_exit`) is never charged: its collector-level rule,
    // which cgx's collector must reproduce, not the engine.
    assert_eq!(outcome.instructions - LAST_BLOCK, callgrind);
}

#[test]
fn reports_the_exit_code() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build_tiny(dir.path(), 3);
    let outcome = step::run(&Command::new(&program), &mut InstructionCounter::default())
        .expect("the run succeeds");
    assert_eq!(outcome.exit, Exit::Code(3));
}

#[test]
fn delivers_signals_to_the_tracee() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(dir.path(), "signal", 0);
    let outcome = step::run(&Command::new(&program), &mut InstructionCounter::default())
        .expect("the run succeeds");
    assert_eq!(
        outcome.exit,
        Exit::Signal {
            signal: 15,
            core_dumped: false
        }
    );
}

#[test]
fn missing_program_is_127() {
    let error = step::run(
        &Command::new("/nonexistent/cgx-no-such-program"),
        &mut InstructionCounter::default(),
    )
    .expect_err("no such program");
    assert!(matches!(error, Error::NotFound { .. }), "{error:?}");
    assert_eq!(error.shell_exit_code(), Some(127));

    let error = step::run(
        &Command::new("cgx-no-such-program-on-path"),
        &mut InstructionCounter::default(),
    )
    .expect_err("no such program on PATH");
    assert_eq!(error.shell_exit_code(), Some(127));
}

#[test]
fn non_executable_program_is_126() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let file = dir.path().join("data.txt");
    std::fs::write(&file, "not a program").expect("a file");
    let error = step::run(&Command::new(&file), &mut InstructionCounter::default())
        .expect_err("not executable");
    assert!(matches!(error, Error::NotExecutable { .. }), "{error:?}");
    assert_eq!(error.shell_exit_code(), Some(126));
    let error = step::run(
        &Command::new(dir.path()),
        &mut InstructionCounter::default(),
    )
    .expect_err("a directory");
    assert_eq!(error.shell_exit_code(), Some(126));
}
