//! cgx under Valgrind's command names (`cgx shims DIR`): `valgrind`
//! profiles as `cgx run` does, says its version and refuses the tools cgx
//! does not provide; `cg_merge` and `cg_diff` write what Valgrind's write,
//! read by Valgrind's own cg_annotate with the same totals.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use cgx_tests::cli::binary;
use cgx_tests::run::{build, total_ir, Kind};
use cgx_tests::{output_of, successful_output_of};

/// The shims made in `dir/shims` by `cgx shims`.
fn shims(dir: &Path) -> PathBuf {
    let folder = dir.join("shims");
    successful_output_of(Command::new(binary()).arg("shims").arg(&folder));
    folder
}

/// Runs `command` in `dir` with a small environment.
fn run_in(dir: &Path, command: &mut Command) -> std::process::Output {
    run_in_env(dir, command, &[])
}

/// [`run_in`] with the variables `env` too.
fn run_in_env(dir: &Path, command: &mut Command, env: &[(&str, &str)]) -> std::process::Output {
    output_of(
        command
            .current_dir(dir)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .envs(env.iter().copied()),
    )
}

/// Cachegrind files of `program` (rewrite.c) run for 5 and for 9 rounds,
/// by Valgrind, in `dir`.
fn two_cachegrind_files(dir: &Path, program: &Path) -> [PathBuf; 2] {
    let files = [dir.join("one.out"), dir.join("two.out")];
    for (file, args) in files.iter().zip([["0", "5"], ["0", "9"]]) {
        let mut valgrind = Command::new("valgrind");
        valgrind
            .args(["-q", "--tool=cachegrind", "--cache-sim=no"])
            .arg(format!("--cachegrind-out-file={}", file.display()))
            .arg(program)
            .args(args);
        run_in(dir, &mut valgrind);
        assert!(file.exists(), "valgrind wrote {}", file.display());
    }
    files
}

/// Valgrind's cg_annotate on `file`: its PROGRAM TOTALS line and the
/// file:function lines, as (name, count) (it must read the file).
fn cg_annotate_totals(file: &Path) -> (String, BTreeMap<String, String>) {
    let output = successful_output_of(
        Command::new("/usr/bin/cg_annotate")
            .arg("--threshold=0")
            .arg(file),
    );
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let total = text
        .lines()
        .find(|line| line.contains("PROGRAM TOTALS"))
        .unwrap_or_else(|| panic!("cg_annotate {}: no totals:\n{text}", file.display()))
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string();
    let functions = text
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let count = fields.next()?;
            let name = fields.last()?;
            (name.contains(':') && count.chars().all(|c| c.is_ascii_digit() || c == ','))
                .then(|| (name.to_string(), count.to_string()))
        })
        .collect();
    (total, functions)
}

/// The reports of `script` (`cg_annotate` or `callgrind_annotate`) with
/// `options` on `file`: the shim's in `folder`, and Valgrind's; both run in
/// the file's folder.
fn script_reports(folder: &Path, script: &str, options: &[&str], file: &Path) -> (String, String) {
    let report = |command: &Path| {
        let mut command = Command::new(command);
        command.args(options).arg(file);
        if let Some(dir) = file.parent() {
            command.current_dir(dir);
        }
        let output = successful_output_of(&mut command);
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let valgrinds = Path::new("/usr/bin").join(script);
    (report(&folder.join(script)), report(&valgrinds))
}

#[test]
fn shims_are_links_made_again_and_never_over_a_file() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let folder = shims(dir.path());
    for name in [
        "valgrind",
        "cg_annotate",
        "callgrind_annotate",
        "cg_merge",
        "cg_diff",
    ] {
        let link = folder.join(name);
        let target = fs::read_link(&link).expect("a link");
        assert_eq!(target, binary(), "{name}");
    }
    // Again: the links are replaced.
    shims(dir.path());
    fs::remove_file(folder.join("cg_diff")).expect("the link goes");
    fs::write(folder.join("cg_diff"), "#!/bin/sh\n").expect("a file in the way");
    let again = output_of(Command::new(binary()).arg("shims").arg(&folder));
    assert_eq!(again.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(
        stderr.contains("cg_diff: exists and is not a link"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[test]
fn valgrind_says_its_version_refuses_other_tools_and_profiles() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let valgrind = shims(dir.path()).join("valgrind");
    let version = successful_output_of(Command::new(&valgrind).arg("--version"));
    let version = String::from_utf8_lossy(&version.stdout);
    assert!(version.starts_with("valgrind-3.19.0 "), "{version}");
    assert!(version.contains("cgx"), "{version}");

    let program = build("hello.c", Kind::C, dir.path());
    for (options, tool) in [
        (&[][..], "memcheck"),
        (&["--tool=helgrind"][..], "helgrind"),
    ] {
        let refused = run_in(
            dir.path(),
            Command::new(&valgrind).args(options).arg(&program),
        );
        assert_eq!(refused.status.code(), Some(1), "{tool}");
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(&format!("--tool={tool}")), "{stderr}");
        assert!(
            refused.stdout.is_empty(),
            "{tool}: the program must not run"
        );
    }

    let out = dir.path().join("through-shim.out");
    let profiled = run_in(
        dir.path(),
        Command::new(&valgrind)
            .args(["-q", "--tool=callgrind"])
            .arg(format!("--callgrind-out-file={}", out.display()))
            .arg(&program),
    );
    assert_eq!(profiled.status.code(), Some(0));
    let direct = dir.path().join("direct.out");
    run_in(
        dir.path(),
        Command::new(binary())
            .args(["run", "-q", "--tool=callgrind"])
            .arg(format!("--callgrind-out-file={}", direct.display()))
            .arg(&program),
    );
    let read = |file: &Path| cgx_tests::run::read(file);
    assert_eq!(total_ir(&read(&out)), total_ir(&read(&direct)));
    assert_eq!(
        String::from_utf8_lossy(&profiled.stdout),
        String::from_utf8_lossy(&output_of(&mut Command::new(&program)).stdout)
    );
}

#[test]
fn cg_merge_writes_what_valgrinds_does() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let folder = shims(dir.path());
    let program = build("rewrite.c", Kind::C, dir.path());
    let [one, two] = two_cachegrind_files(dir.path(), &program);
    let ours = dir.path().join("merged-cgx.out");
    let theirs = dir.path().join("merged-valgrind.out");
    successful_output_of(
        Command::new(folder.join("cg_merge"))
            .arg("-o")
            .arg(&ours)
            .args([&one, &two]),
    );
    successful_output_of(
        Command::new("/usr/bin/cg_merge")
            .arg("-o")
            .arg(&theirs)
            .args([&one, &two]),
    );
    let (total, functions) = cg_annotate_totals(&ours);
    assert!(
        functions.keys().any(|name| name.ends_with(":worker")),
        "{functions:?}"
    );
    assert_eq!((total, functions), cg_annotate_totals(&theirs));
}

#[test]
fn cg_diff_writes_what_valgrinds_does() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let folder = shims(dir.path());
    let program = build("rewrite.c", Kind::C, dir.path());
    let [one, two] = two_cachegrind_files(dir.path(), &program);
    for options in [&[][..], &["--mod-funcname=s/worker/WORKER/"][..]] {
        let diff = |command: &Path, name: &str| {
            let output =
                successful_output_of(Command::new(command).args(options).args([&one, &two]));
            let file = dir.path().join(name);
            fs::write(&file, &output.stdout).expect("the difference is kept");
            file
        };
        let ours = diff(&folder.join("cg_diff"), "diff-cgx.out");
        let theirs = diff(Path::new("/usr/bin/cg_diff"), "diff-valgrind.out");
        let (total, functions) = cg_annotate_totals(&ours);
        assert_ne!(total, "0", "the runs differ");
        let renamed = functions.keys().any(|name| name.ends_with(":WORKER"));
        assert_eq!(renamed, !options.is_empty(), "{functions:?}");
        assert_eq!(
            (total, functions),
            cg_annotate_totals(&theirs),
            "{options:?}"
        );
    }
}

#[test]
fn valgrinds_default_options_come_from_its_variable_and_files() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let valgrind = shims(dir.path()).join("valgrind");
    let program = build("hello.c", Kind::C, dir.path());
    // The tool from VALGRIND_OPTS, a tool-prefixed option from
    // ./.valgrindrc: a Cachegrind file without the cache simulation.
    fs::write(
        dir.path().join(".valgrindrc"),
        "--cachegrind:cache-sim=no\n--callgrind:dump-instr=yes\n",
    )
    .expect("the rc file is written");
    let out = dir.path().join("defaults.out");
    let profiled = run_in_env(
        dir.path(),
        Command::new(&valgrind)
            .arg(format!("--cachegrind-out-file={}", out.display()))
            .arg(&program),
        &[("VALGRIND_OPTS", "--tool=cachegrind -q")],
    );
    assert_eq!(profiled.status.code(), Some(0), "{profiled:?}");
    let text = fs::read_to_string(&out).expect("a Cachegrind file");
    assert!(
        text.contains("\nevents: Ir\n"),
        "{}",
        &text[..text.len().min(300)]
    );
    // The command line wins over the defaults.
    let refused = run_in_env(
        dir.path(),
        Command::new(&valgrind).arg("--tool=memcheck").arg(&program),
        &[("VALGRIND_OPTS", "--tool=cachegrind")],
    );
    assert_eq!(refused.status.code(), Some(1));
}

#[test]
fn callgrind_annotate_prints_valgrinds_summary() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let folder = shims(dir.path());
    let program = build("hello.c", Kind::C, dir.path());
    // A profile by cgx and one by Valgrind, each read by both scripts.
    let cgx_file = dir.path().join("callgrind.out.cgx");
    run_in(
        dir.path(),
        Command::new(binary())
            .args(["run", "-q"])
            .arg(format!("--callgrind-out-file={}", cgx_file.display()))
            .arg(&program),
    );
    let valgrind_file = dir.path().join("callgrind.out.valgrind");
    run_in(
        dir.path(),
        Command::new("valgrind")
            .args(["-q", "--tool=callgrind", "--dump-instr=yes"])
            .arg(format!("--callgrind-out-file={}", valgrind_file.display()))
            .arg(&program),
    );
    let option_sets: [&[&str]; 4] = [
        &["--auto=no"],
        &["--auto=no", "--inclusive=yes"],
        // As PyTorch runs it (with source annotation off).
        &[
            "--auto=no",
            "--inclusive=yes",
            "--threshold=100",
            "--show-percs=no",
        ],
        &["--auto=no", "--threshold=50", "--show-percs=yes"],
    ];
    for file in [&cgx_file, &valgrind_file] {
        for options in option_sets {
            let (ours, theirs) = script_reports(&folder, "callgrind_annotate", options, file);
            assert!(
                ours.contains("PROGRAM TOTALS") && ours.lines().count() > 20,
                "{ours}"
            );
            assert_eq!(ours, theirs, "{} {options:?}", file.display());
        }
    }
}

#[test]
fn cg_annotate_prints_valgrinds_summary_of_profiles_and_differences() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let folder = shims(dir.path());
    let program = build("rewrite.c", Kind::C, dir.path());
    let [one, two] = two_cachegrind_files(dir.path(), &program);
    // A difference with negative counts, as rustc-perf's flow makes one.
    let backwards = dir.path().join("backwards.out");
    let diff = successful_output_of(Command::new("/usr/bin/cg_diff").args([&two, &one]));
    fs::write(&backwards, &diff.stdout).expect("the difference is kept");
    let option_sets: [&[&str]; 3] = [
        &["--auto=no"],
        &["--auto=no", "--threshold=0", "--show-percs=no"],
        &["--auto=no", "--threshold=2", "--sort=Ir"],
    ];
    for file in [&one, &backwards] {
        for options in option_sets {
            let (ours, theirs) = script_reports(&folder, "cg_annotate", options, file);
            assert!(
                ours.contains("PROGRAM TOTALS") && ours.lines().count() > 20,
                "{ours}"
            );
            // Valgrind's script lists functions of equal counts in hash
            // order: the same lines, and the same counts in the same order.
            let sorted = |text: &str| {
                let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
                lines.sort();
                lines
            };
            let counts = |text: &str| -> Vec<String> {
                text.lines()
                    .map(|line| {
                        line.rsplit_once("  ")
                            .map_or(line, |(counts, _)| counts)
                            .to_string()
                    })
                    .collect()
            };
            let context = format!("{} {options:?}", file.display());
            assert_eq!(sorted(&ours), sorted(&theirs), "{context}");
            assert_eq!(counts(&ours), counts(&theirs), "{context}");
        }
    }
}
