//! The machine cgx shows a program is one the host can run. A dynamically
//! linked program whose calls into a shared library and libm are bound
//! lazily (`lazy_vectors.c`, `-z lazy`), passing floating-point and vector
//! arguments, so that each first call runs glibc's lazy-binding trampoline,
//! which saves the vector registers in a frame sized by `cpuid` leaf 0xd:
//! under `cgx run` with the default machine (Valgrind's) and every backend,
//! with the simulations, under `--tool=cachegrind` and with
//! `--machine=host`, it prints what it prints alone and exits 0. On a host
//! with AVX-512 state enabled, Valgrind's leaf 0xd (0x340 bytes) against the
//! processor's `xsave` (0xa80 bytes on Intel, 0x980 on AMD) corrupts the
//! stack here. With Valgrind beside it, the program's own functions have
//! Valgrind's figures.
//!
//! Valgrind 3.19 implements neither `rseq` nor `clone3`: glibc runs
//! without its restartable-sequence area and starts threads with `clone`.
//! cgx refuses both as Valgrind does (`rseq` also with `--machine=host`),
//! so a threaded program (`refused_calls.c`) prints what it prints under
//! Valgrind, and glibc's thread start has Valgrind's figures.

use std::path::{Path, PathBuf};
use std::process::Command;

use cgx_tests::run::{
    assert_same_own_figures, assert_status, native, own_functions, run, self_ir, Profiler,
};
use cgx_tests::{successful_output_of, tests_dir};

/// Builds `lazy_vectors.c` and its shared library into `dir`, bound lazily;
/// returns the executable.
fn build_lazy_vectors(dir: &Path) -> PathBuf {
    let sources = tests_dir().join("programs").join("run");
    let library = dir.join("liblazyvec.so");
    successful_output_of(
        Command::new("gcc")
            .args(["-O2", "-g", "-fPIC", "-shared", "-o"])
            .arg(&library)
            .arg(sources.join("lazy_vectors_lib.c")),
    );
    let executable = dir.join("lazy_vectors");
    successful_output_of(
        Command::new("gcc")
            .args(["-O2", "-g", "-o"])
            .arg(&executable)
            .arg(sources.join("lazy_vectors.c"))
            .arg(format!("-L{}", dir.display()))
            .args(["-llazyvec", "-lm", "-Wl,-z,lazy"])
            .arg(format!("-Wl,-rpath,{}", dir.display())),
    );
    // The calls are bound lazily: no BIND_NOW, no NOW flag.
    let dynamic = successful_output_of(Command::new("readelf").arg("-d").arg(&executable));
    let dynamic = String::from_utf8_lossy(&dynamic.stdout);
    assert!(
        dynamic
            .lines()
            .all(|line| !line.contains("BIND_NOW") && !line.contains(" NOW")),
        "lazy_vectors is bound at start-up:\n{dynamic}"
    );
    executable
}

#[test]
fn lazily_bound_vector_calls_run_as_natively_on_every_backend() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build_lazy_vectors(dir.path());
    let alone = native(&program, &[], dir.path());
    assert_status(&alone, 0);
    assert_eq!(alone.stdout.lines().count(), 4, "{}", alone.stdout);
    let cases: [&[&str]; 6] = [
        &[],
        &["--backend=step"],
        &["--cache-sim=yes", "--branch-sim=yes"],
        &["--backend=step", "--cache-sim=yes", "--branch-sim=yes"],
        &[
            "--tool=cachegrind",
            "--cachegrind-out-file={out}/cachegrind.out",
        ],
        &["--machine=host"],
    ];
    for (index, options) in cases.iter().enumerate() {
        let case_dir = dir.path().join(format!("case-{index}"));
        let cgx = run(Profiler::Cgx, options, &program, &[], &case_dir);
        assert_status(&cgx, 0);
        assert_eq!(cgx.stdout, alone.stdout, "{}: stdout", cgx.command);
        assert_eq!(cgx.files.len(), 1, "{}: {:?}", cgx.command, cgx.files);
        println!("{}: prints what the program prints alone", cgx.command);
    }
}

#[test]
fn lazily_bound_vector_calls_have_valgrinds_figures() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build_lazy_vectors(dir.path());
    // Enough rounds that start-up, which differs under Valgrind, is under 2%.
    let args = ["20000"];
    let alone = native(&program, &args, dir.path());
    assert_status(&alone, 0);
    let valgrind = run(Profiler::Valgrind, &[], &program, &args, dir.path());
    assert_status(&valgrind, 0);
    let cgx = run(Profiler::Cgx, &[], &program, &args, dir.path());
    assert_status(&cgx, 0);
    assert_eq!(cgx.stdout, alone.stdout, "{}: stdout", cgx.command);
    let (expected, actual) = (valgrind.profile(), cgx.profile());
    let mut own = own_functions(&expected, "lazy_vectors.c");
    own.extend(own_functions(&expected, "lazy_vectors_lib.c"));
    assert_same_own_figures(&expected, &actual, &own, "lazy_vectors 20000");
}

/// Builds `refused_calls.c` into `dir`; returns the executable.
fn build_refused_calls(dir: &Path) -> PathBuf {
    let executable = dir.join("refused_calls");
    successful_output_of(
        Command::new("gcc")
            .args(["-O2", "-g", "-pthread", "-o"])
            .arg(&executable)
            .arg(tests_dir().join("programs/run/refused_calls.c")),
    );
    executable
}

/// The line of `stdout` that starts with `start`.
fn line_starting<'a>(stdout: &'a str, start: &str) -> &'a str {
    (stdout.lines())
        .find(|line| line.starts_with(start))
        .unwrap_or_else(|| panic!("no line '{start}...' in:\n{stdout}"))
}

#[test]
fn rseq_and_clone3_are_refused_as_under_valgrind() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build_refused_calls(dir.path());
    let valgrind = run(Profiler::Valgrind, &[], &program, &[], dir.path());
    assert_status(&valgrind, 0);
    // What cgx copies: Valgrind refuses both.
    assert_eq!(
        valgrind.stdout,
        "rseq area 0 bytes\nclone3: -1, errno 38\n3 threads knew their processor: yes\n",
        "{}",
        valgrind.command
    );
    for (index, options) in [&[][..], &["--backend=step"]].iter().enumerate() {
        let cgx = run(
            Profiler::Cgx,
            options,
            &program,
            &[],
            &dir.path().join(format!("cgx-{index}")),
        );
        assert_status(&cgx, 0);
        assert_eq!(cgx.stdout, valgrind.stdout, "{}", cgx.command);
        // glibc started its threads as under Valgrind (`start_thread`'s
        // own figures depend on the threads' timing: a join that waits).
        let (expected, actual) = (self_ir(&valgrind.profile()), self_ir(&cgx.profile()));
        for function in ["clone", "__clone_internal", "__tls_init_tp"] {
            assert!(
                expected.contains_key(function),
                "Valgrind ran no {function}"
            );
            assert_eq!(
                actual.get(function),
                expected.get(function),
                "{}: self Ir of {function}",
                cgx.command
            );
        }
        println!("{}: as under Valgrind", cgx.command);
    }
    // The host's machine: clone3 as natively, rseq still refused.
    let alone = native(&program, &[], dir.path());
    assert_status(&alone, 0);
    let host = run(
        Profiler::Cgx,
        &["--machine=host"],
        &program,
        &[],
        &dir.path().join("host"),
    );
    assert_status(&host, 0);
    assert_eq!(line_starting(&host.stdout, "rseq"), "rseq area 0 bytes");
    assert_eq!(
        line_starting(&host.stdout, "clone3"),
        line_starting(&alone.stdout, "clone3"),
        "{}",
        host.command
    );
    assert!(host.stdout.ends_with("processor: yes\n"), "{}", host.stdout);
}
