//! Benchmark harnesses that run Valgrind, run unchanged with cgx's shims
//! first on PATH: an iai-callgrind 0.16 and a gungraun 0.20 benchmark
//! (their runners are installed by tests/setup.sh) report the same
//! instruction counts as with Valgrind, and cache figures within a few
//! lines (Valgrind places the stack and heap itself).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use cgx_tests::cli::binary;
use cgx_tests::{successful_output_of, workspace_root};

/// A benchmark of `harness` (its crate name, as Rust names it) in a new
/// package in `dir`.
fn bench_package(dir: &Path, package: &str, version: &str, harness: &str) -> PathBuf {
    let root = dir.join(package);
    fs::create_dir_all(root.join("benches")).expect("a package folder");
    fs::create_dir_all(root.join("src")).expect("a source folder");
    fs::write(root.join("src/lib.rs"), "").expect("lib.rs");
    fs::write(
        root.join("Cargo.toml"),
        format!(
            "[package]\nname = \"drive-{package}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [dev-dependencies]\n{package} = \"={version}\"\n\n\
             [[bench]]\nname = \"fib\"\nharness = false\n\n[workspace]\n"
        ),
    )
    .expect("Cargo.toml");
    fs::write(
        root.join("benches/fib.rs"),
        format!(
            "use {harness}::{{library_benchmark, library_benchmark_group, main}};\n\
             use std::hint::black_box;\n\
             fn fibonacci(n: u64) -> u64 {{ if n < 2 {{ 1 }} else {{ fibonacci(n - 1) + fibonacci(n - 2) }} }}\n\
             #[library_benchmark]\n#[bench::short(10)]\n#[bench::long(20)]\n\
             fn bench_fibonacci(value: u64) -> u64 {{ black_box(fibonacci(value)) }}\n\
             library_benchmark_group!(name = group; benchmarks = bench_fibonacci);\n\
             main!(library_benchmark_groups = group);\n"
        ),
    )
    .expect("the benchmark");
    root
}

/// The figures a harness printed: (benchmark, figure, value) for every
/// `  Name:   VALUE|...` line under a benchmark's name line.
fn figures(output: &str) -> Vec<(String, String, u64)> {
    let mut bench = String::new();
    let mut found = Vec::new();
    for line in output.lines() {
        if !line.starts_with(' ') && line.contains("::") {
            bench = line.trim().to_string();
            continue;
        }
        let Some((name, rest)) = line.trim().split_once(':') else {
            continue;
        };
        let value = rest.trim().split('|').next().unwrap_or("").trim();
        if let Ok(value) = value.parse() {
            found.push((bench.clone(), name.to_string(), value));
        }
    }
    found
}

/// `cargo bench` of `package` with `path` as PATH; the harness's output.
fn bench(package: &Path, path: &str, target: &Path) -> String {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = successful_output_of(
        Command::new(cargo)
            .args(["bench", "--quiet"])
            .current_dir(package)
            .env("PATH", path)
            .env("CARGO_TARGET_DIR", target),
    );
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    text
}

/// Whether a `*.log` under `dir` (the harness's copy of the log) is cgx's.
fn logs_name_cgx(dir: &Path) -> bool {
    let Ok(entries) = fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|entry| {
        let path = entry.path();
        if path.is_dir() {
            return logs_name_cgx(&path);
        }
        path.extension().is_some_and(|extension| extension == "log")
            && fs::read_to_string(&path).is_ok_and(|text| text.contains("== Using cgx-"))
    })
}

/// Runs the benchmark of `package` (`harness` its crate) with Valgrind,
/// then with cgx's shims first on PATH, and compares their figures.
fn same_figures(package: &str, version: &str, harness: &str) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let root = bench_package(dir.path(), package, version, harness);
    let shims = dir.path().join("shims");
    successful_output_of(Command::new(binary()).arg("shims").arg(&shims));
    // The test's own PATH has the runners (tests/setup.sh installs them
    // with cargo) and Valgrind.
    let system = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
    // Built once, in the workspace's target folder.
    let target = workspace_root().join("target").join("tool-drivers");
    let valgrind = figures(&bench(&root, &system, &target));
    let results = target.join(if package == "gungraun" {
        "gungraun"
    } else {
        "iai"
    });
    assert!(!logs_name_cgx(&results), "{package}: Valgrind's run");
    fs::remove_dir_all(&results)
        .expect("the harness's results go, so cgx's are not compared with them");
    let cgx = figures(&bench(
        &root,
        &format!("{}:{system}", shims.display()),
        &target,
    ));
    assert!(
        logs_name_cgx(&results),
        "{package}: no log in {} says cgx ran",
        results.display()
    );
    println!("{package} with Valgrind: {valgrind:?}\nwith cgx: {cgx:?}");
    assert!(valgrind.len() >= 4, "{package}: no figures: {valgrind:?}");
    assert_eq!(valgrind.len(), cgx.len(), "{package}");
    for ((bench, name, expected), (_, _, actual)) in valgrind.iter().zip(&cgx) {
        if name == "Instructions" {
            assert_eq!(actual, expected, "{package} {bench} {name}");
        } else {
            assert!(
                actual.abs_diff(*expected) <= 8,
                "{package} {bench} {name}: cgx {actual}, valgrind {expected}"
            );
        }
    }
}

#[test]
fn an_iai_callgrind_benchmark_reports_valgrinds_figures() {
    same_figures("iai-callgrind", "0.16.1", "iai_callgrind");
}

#[test]
fn a_gungraun_benchmark_reports_valgrinds_figures() {
    same_figures("gungraun", "0.20.0", "gungraun");
}
