//! Child programs, as Valgrind follows them: a shell (`/bin/sh -c`) that
//! runs `ls` and `/bin/true` in forked children. Without
//! `--trace-children=yes` only the shell is profiled (a forked copy that runs
//! another program leaves no profile); with it, every program but those
//! `--trace-children-skip` names (by the name given to `execve`) or
//! `--trace-children-skip-by-arg` matches (by an argument). cgx and Valgrind
//! write as many files, with the same command lines (`cmd:`, an exec'd
//! program's own: the name given to `execve` and its arguments), and print
//! the same.

use std::fs;
use std::path::Path;

use cgx_tests::run::{run, Profiler};

/// The shell's script.
/// Three lines, one with a backslash: the shell's `cmd:` has them escaped.
const SCRIPT: &str = "ls / > /dev/null\n/bin/true # a \\ in cmd:\necho done";

/// The files each profiler writes for the script with `options`, and what
/// it printed (they must agree).
fn files(options: &[&str], dir: &Path) -> usize {
    files_with(options, &[], dir)
}

/// [`files`], cgx given `cgx_options` too.
fn files_with(options: &[&str], cgx_options: &[&str], dir: &Path) -> usize {
    let mut counts: Vec<Vec<String>> = Vec::new();
    for profiler in [Profiler::Valgrind, Profiler::Cgx] {
        let out = dir.join(format!("{profiler:?}"));
        fs::create_dir_all(&out).expect("a folder per profiler");
        let out_file = format!("--callgrind-out-file={}/callgrind.out.%p", out.display());
        let mut all: Vec<&str> = vec!["-q", &out_file];
        all.extend(options);
        if profiler == Profiler::Cgx {
            all.extend(cgx_options);
        }
        let ran = run(profiler, &all, Path::new("/bin/sh"), &["-c", SCRIPT], dir);
        assert_eq!(ran.stdout, "done\n", "{}", ran.command);
        let mut commands: Vec<String> = fs::read_dir(&out)
            .expect("the folder")
            .flatten()
            .map(|file| {
                let text = fs::read_to_string(file.path()).expect("a profile");
                // As Valgrind writes it: two spaces after `cmd:`, the
                // script's newlines and backslash escaped.
                let cmd = text.lines().find(|line| line.starts_with("cmd:"));
                cmd.unwrap_or("(none)").to_string()
            })
            .collect();
        commands.sort();
        counts.push(commands);
    }
    assert_eq!(
        counts[0], counts[1],
        "the command lines of Valgrind's and cgx's files with {options:?}"
    );
    counts[1].len()
}

#[test]
fn forked_copies_that_run_other_programs_leave_no_profile() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    assert_eq!(files(&[], dir.path()), 1);
}

#[test]
fn trace_children_follows_every_program() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    assert_eq!(files(&["--trace-children=yes"], dir.path()), 3);
}

#[test]
fn the_step_backend_names_exec_d_programs_as_execve_was_given_them() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let options = ["--trace-children=yes"];
    assert_eq!(files_with(&options, &["--backend=step"], dir.path()), 3);
}

#[test]
fn trace_children_skip_leaves_out_the_programs_it_names() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let options = [
        "--trace-children=yes",
        "--trace-children-skip=*ls,*/nothing",
    ];
    assert_eq!(files(&options, dir.path()), 2);
}

#[test]
fn trace_children_skip_by_arg_leaves_out_the_programs_with_such_an_argument() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let options = ["--trace-children=yes", "--trace-children-skip-by-arg=/"];
    assert_eq!(files(&options, dir.path()), 2);
}
