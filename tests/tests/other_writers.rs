//! Callgrind files written by other profilers, made here by the real tools:
//! Xdebug's PHP profiles (`calls=N 0 0`, `php:internal` files, events with
//! units, `summary:` at the end), pyprof2calltree's Python profiles (a
//! summary that is the profile's total time, not the sum of its lines) and
//! `go tool pprof -callgrind` (`calls=0`, relative instruction positions, no
//! summary). `cgx annotate` reads each with the totals callgrind_annotate
//! prints (for pprof's, the total pprof itself reports: callgrind_annotate
//! counts the cost after a `calls=0` line as the caller's own, KCachegrind
//! and cgx as the call's), and `cgx convert` makes every format of them.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use cgx_tests::cli::cgx;
use cgx_tests::clients::kcachegrind_complaints;
use cgx_tests::successful_output_of;

/// The PROGRAM TOTALS counts of a report.
fn program_totals(report: &str) -> Vec<u64> {
    let line = report
        .lines()
        .find(|line| line.contains("PROGRAM TOTALS"))
        .unwrap_or_else(|| panic!("no PROGRAM TOTALS in:\n{report}"));
    line.split_whitespace()
        .filter(|word| word.starts_with(|c: char| c.is_ascii_digit()))
        .filter_map(|word| word.replace(',', "").parse().ok())
        .collect()
}

/// `cgx annotate FILE`'s totals.
fn cgx_totals(file: &Path) -> Vec<u64> {
    let output = cgx([Path::new("annotate"), file]);
    assert!(
        output.status.success(),
        "cgx annotate {}: {}",
        file.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    program_totals(&String::from_utf8_lossy(&output.stdout))
}

/// Valgrind's callgrind_annotate's totals of `file`.
fn callgrind_annotate_totals(file: &Path) -> Vec<u64> {
    let output = successful_output_of(Command::new("/usr/bin/callgrind_annotate").arg(file));
    program_totals(&String::from_utf8_lossy(&output.stdout))
}

/// `cgx convert` of `file` to every format: each is written, the folded
/// stacks add up to `self_total` (the first event's self costs), and the
/// Callgrind file it writes is read by callgrind_annotate and KCachegrind.
fn converts(file: &Path, self_total: u64, dir: &Path) {
    for name in [
        "out.folded",
        "out.svg",
        "out.pb.gz",
        "out.speedscope.json",
        "callgrind.out.converted",
        "cachegrind.out.converted",
    ] {
        let output = dir.join(name);
        let converted = cgx([Path::new("convert"), file, Path::new("-o"), &output]);
        assert!(
            converted.status.success() && output.exists(),
            "cgx convert {} -o {name}: {}",
            file.display(),
            String::from_utf8_lossy(&converted.stderr)
        );
    }
    let folded = fs::read_to_string(dir.join("out.folded")).expect("the folded stacks");
    let sum: u64 = folded
        .lines()
        .filter_map(|line| line.rsplit_once(' '))
        .filter_map(|(_, count)| count.parse::<u64>().ok())
        .sum();
    assert_eq!(sum, self_total, "the folded stacks of {}", file.display());
    let converted = dir.join("callgrind.out.converted");
    successful_output_of(Command::new("/usr/bin/callgrind_annotate").arg(&converted));
    if let Some(complaints) = kcachegrind_complaints(&[converted], 10) {
        assert!(complaints.is_empty(), "KCachegrind: {complaints:?}");
    }
}

/// The sum of the self costs of the first event of a callgrind file (the
/// cost lines not after `calls=`), as `cgx annotate --inclusive=no` counts
/// them.
fn self_total(file: &Path) -> u64 {
    let text = fs::read_to_string(file).expect("the profile");
    let mut after_calls = false;
    let mut total = 0;
    let positions = text
        .lines()
        .find_map(|line| line.strip_prefix("positions:"))
        .map_or(1, |positions| positions.split_whitespace().count());
    for line in text.lines() {
        if line.starts_with("calls=") {
            after_calls = true;
            continue;
        }
        let cost_line = line.starts_with(|c: char| c.is_ascii_digit() || "+-*".contains(c));
        if !cost_line {
            continue;
        }
        if after_calls {
            after_calls = false;
            continue;
        }
        let first_event = line.split_whitespace().nth(positions);
        total += first_event
            .and_then(|count| count.parse::<u64>().ok())
            .unwrap_or(0);
    }
    total
}

/// Writes `text` to `dir/name`; returns the path.
fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    fs::write(&path, text).expect("the source is written");
    path
}

#[test]
fn xdebug_profiles_of_php() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let dir = dir.path();
    let script = write(
        dir,
        "work.php",
        "<?php\n\
         function fib($n) { return $n < 2 ? $n : fib($n - 1) + fib($n - 2); }\n\
         function words($n) { $s = []; for ($i = 0; $i < $n; $i++) { $s[] = str_repeat('ab', $i % 7); }\n\
         return implode(',', $s); }\n\
         echo fib(15), ' ', strlen(words(2000)), \"\\n\";\n",
    );
    successful_output_of(
        Command::new("php")
            .arg("-d")
            .arg("xdebug.mode=profile")
            .arg("-d")
            .arg(format!("xdebug.output_dir={}", dir.display()))
            .arg("-d")
            .arg("xdebug.profiler_output_name=cachegrind.out.php")
            .arg(&script),
    );
    let profile = dir.join("cachegrind.out.php");
    let text = fs::read_to_string(&profile).expect("Xdebug wrote its profile");
    assert!(text.contains("creator: xdebug"), "{profile:?} is Xdebug's");
    assert!(text.contains("calls=1 0 0"), "Xdebug's calls= lines");
    assert!(text.contains("php:internal"), "Xdebug's internal functions");
    let totals = cgx_totals(&profile);
    assert_eq!(totals, callgrind_annotate_totals(&profile));
    assert_eq!(
        totals.len(),
        2,
        "two events, Time_(10ns) and Memory_(bytes)"
    );
    converts(&profile, self_total(&profile), dir);
}

#[test]
fn pyprof2calltree_profiles_of_python() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let dir = dir.path();
    let script = write(
        dir,
        "work.py",
        "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n\n\
         def words(n):\n    return ','.join('ab' * (i % 7) for i in range(n))\n\n\
         print(fib(18), len(words(5000)))\n",
    );
    let stats = dir.join("work.pstats");
    successful_output_of(
        Command::new("python3")
            .args(["-m", "cProfile", "-o"])
            .arg(&stats)
            .arg(&script),
    );
    let profile = dir.join("callgrind.out.py");
    successful_output_of(
        Command::new("pyprof2calltree")
            .arg("-i")
            .arg(&stats)
            .arg("-o")
            .arg(&profile),
    );
    let totals = cgx_totals(&profile);
    assert_eq!(totals, callgrind_annotate_totals(&profile));
    converts(&profile, self_total(&profile), dir);
}

/// pprof's total of a CPU profile in milliseconds, from `go tool pprof
/// -top`'s `Total samples = 220ms` (or `1.43s`).
fn pprof_total_ms(binary: &Path, profile: &Path) -> u64 {
    let output = successful_output_of(
        Command::new("go")
            .args(["tool", "pprof", "-top"])
            .arg(binary)
            .arg(profile),
    );
    let text = String::from_utf8_lossy(&output.stdout);
    let total = text
        .split("Total samples = ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no total in:\n{text}"));
    let (number, scale) = match total.strip_suffix("ms") {
        Some(ms) => (ms, 1.0),
        None => (total.trim_end_matches('s'), 1000.0),
    };
    let value: f64 = number
        .parse()
        .unwrap_or_else(|_| panic!("a total: {total}"));
    (value * scale).round() as u64
}

#[test]
fn pprof_callgrind_profiles_of_go() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let dir = dir.path();
    let source = write(
        dir,
        "work.go",
        "package main\n\n\
         import (\n\t\"fmt\"\n\t\"os\"\n\t\"runtime/pprof\"\n\t\"strings\"\n)\n\n\
         func fib(n int) int {\n\tif n < 2 {\n\t\treturn n\n\t}\n\treturn fib(n-1) + fib(n-2)\n}\n\n\
         func words(n int) int {\n\tvar b strings.Builder\n\tfor i := 0; i < n; i++ {\n\
         \t\tb.WriteString(strings.Repeat(\"ab\", i%7))\n\t}\n\treturn b.Len()\n}\n\n\
         func main() {\n\tf, _ := os.Create(os.Args[1])\n\tpprof.StartCPUProfile(f)\n\
         \ttotal := 0\n\tfor i := 0; i < 20; i++ {\n\t\ttotal += fib(30) + words(200000)\n\t}\n\
         \tpprof.StopCPUProfile()\n\tf.Close()\n\tfmt.Println(total)\n}\n",
    );
    let binary = dir.join("work");
    successful_output_of(
        Command::new("go")
            .arg("build")
            .arg("-o")
            .arg(&binary)
            .arg(&source)
            .current_dir(dir),
    );
    let samples = dir.join("cpu.prof");
    successful_output_of(Command::new(&binary).arg(&samples));
    let profile = dir.join("callgrind.out.go");
    successful_output_of(
        Command::new("go")
            .args(["tool", "pprof", "-callgrind", "-output"])
            .arg(&profile)
            .arg(&binary)
            .arg(&samples),
    );
    let text = fs::read_to_string(&profile).expect("pprof wrote its profile");
    assert!(text.contains("positions: instr line"), "pprof's positions");
    assert_eq!(cgx_totals(&profile), [pprof_total_ms(&binary, &samples)]);
    converts(&profile, self_total(&profile), dir);
}
