//! `cgx run` against `valgrind --tool=callgrind` on the programs in
//! `tests/programs/run/`: building them, running them natively, under Valgrind and
//! under cgx, and the tables (by function name, by call arc, by instruction) the
//! tests compare.
//!
//! Functions are keyed by name only: Valgrind and cgx may name the object and
//! source files differently (absolute or relative paths), but a function's name
//! (`fib`, `fib'2`, `(below main)`) must be the same.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

use cgx_formats::{add_costs, read_path, Part, Profile, Record};

use crate::clients::{callgrind_annotate, kcachegrind_complaints};
use crate::compare::assert_same_rows;
use crate::tables::{self, zero_count_calls};
use crate::{cli, output_of, successful_output_of, tests_dir};

/// How a test program is compiled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// C without libc: `gcc -static -nostdlib`, with its own `_start`
    /// (`nolibc.h`). Non-PIE, so Valgrind and cgx see the same addresses.
    NoLibc,
    /// C linked dynamically with glibc and libpthread. Symbols are bound at
    /// start-up (`-z now`), so the program's functions call no resolver (its
    /// name depends on the processor `cpuid` describes: `--machine=host` would
    /// give `_dl_runtime_resolve_xsavec` here, Valgrind `_xsave`).
    C,
    /// C++ linked dynamically with glibc (`-z now` as [`Kind::C`]); libstdc++ and
    /// libgcc are linked in statically, since relocating the shared libstdc++ alone takes 1.6 million
    /// instructions (over a minute of single-stepping).
    Cxx,
}

/// Compiles `tests/programs/run/SOURCE` (`-O2 -g`, with the flags of `kind`) into
/// `dir` and returns the executable, named after the source without extension.
pub fn build(source: &str, kind: Kind, dir: &Path) -> PathBuf {
    build_file(
        &tests_dir().join("programs").join("run").join(source),
        kind,
        dir,
    )
}

/// Compiles the C or C++ source at `path` (anywhere, e.g. in
/// `engine/tests/programs/`) as [`build`] does, into `dir`; returns the
/// executable, named after the source without extension.
pub fn build_file(path: &Path, kind: Kind, dir: &Path) -> PathBuf {
    let stem = path
        .file_stem()
        .expect("a source file name")
        .to_string_lossy()
        .into_owned();
    let executable = dir.join(stem);
    let (compiler, flags): (&str, &[&str]) = match kind {
        Kind::NoLibc => (
            "gcc",
            &[
                "-static",
                "-nostdlib",
                "-fno-stack-protector",
                "-fno-builtin",
                "-fno-tree-loop-distribute-patterns",
            ],
        ),
        Kind::C => ("gcc", &["-pthread", "-Wl,-z,now"]),
        Kind::Cxx => (
            "g++",
            &["-static-libstdc++", "-static-libgcc", "-Wl,-z,now"],
        ),
    };
    successful_output_of(
        Command::new(compiler)
            .args(["-O2", "-g"])
            .args(flags)
            .arg("-o")
            .arg(&executable)
            .arg(path),
    );
    executable
}

/// A tracing profiler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profiler {
    /// `valgrind --tool=callgrind` (unless the options pick another tool).
    Valgrind,
    /// `cgx run`.
    Cgx,
}

impl Profiler {
    /// `valgrind` or `cgx`.
    pub fn name(self) -> &'static str {
        match self {
            Profiler::Valgrind => "valgrind",
            Profiler::Cgx => "cgx",
        }
    }

    /// The command that runs a program under the profiler, before its options.
    fn command(self) -> Command {
        match self {
            Profiler::Valgrind => Command::new("valgrind"),
            Profiler::Cgx => {
                let mut command = Command::new(cli::binary());
                command.arg("run");
                command
            }
        }
    }
}

/// A finished run of a program, under a profiler or natively.
#[derive(Clone, Debug)]
pub struct Run {
    /// What ran, for messages.
    pub command: String,
    /// The exit status as a shell gives it: the exit code, or 128 + N when signal
    /// N killed the process.
    pub status: i32,
    /// What the program (and profiler) wrote on stdout.
    pub stdout: String,
    /// What was written on stderr.
    pub stderr: String,
    /// The folder the program ran in, where its profiles go.
    pub folder: PathBuf,
    /// The non-empty files in `folder` after the run, sorted by name: the profiles.
    pub files: Vec<PathBuf>,
}

impl Run {
    /// The profiles, read by `cgx_formats::read_path`; panics if one is unreadable.
    pub fn profiles(&self) -> Vec<Profile> {
        self.files.iter().map(|file| read(file)).collect()
    }

    /// The one profile written; panics unless there is exactly one.
    pub fn profile(&self) -> Profile {
        assert_eq!(
            self.files.len(),
            1,
            "{}: expected one profile, found {:?}\nstderr:\n{}",
            self.command,
            self.files,
            self.stderr
        );
        read(&self.files[0])
    }
}

/// Reads a profile with `cgx_formats::read_path`, panicking with the error.
pub fn read(file: &Path) -> Profile {
    read_path(file).unwrap_or_else(|error| panic!("cannot read {}: {error}", file.display()))
}

/// The exit status as a shell reports it: the code, or 128 + the signal.
pub fn shell_status(status: ExitStatus) -> i32 {
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(signal)) => 128 + signal,
        (None, None) => panic!("{status} has neither a code nor a signal"),
    }
}

/// The environment variable that, set to `valgrind`, makes [`run`] run Valgrind
/// where the tests ask for `cgx run`: a check of the tests themselves (they must
/// then pass, except those of cgx's own messages and exit codes).
pub const SELF_CHECK: &str = "CGX_TESTS_RUN_WITH";

/// Runs `program ARGS` under `profiler` with `options`, in the folder
/// `dir/PROFILER` (created), stdin empty. `{out}` in an option stands for that
/// folder; unless an option names an output file (`-out-file=`),
/// `--callgrind-out-file={out}/callgrind.out` is added. `valgrind` gets
/// `--tool=callgrind` unless an option gives a tool. Does not check the status.
/// See [`SELF_CHECK`].
pub fn run(profiler: Profiler, options: &[&str], program: &Path, args: &[&str], dir: &Path) -> Run {
    run_with_env(profiler, options, &[], program, args, dir)
}

/// [`run`] with the environment variables `env` set (besides `PATH`), for the
/// profiler and the program.
pub fn run_with_env(
    profiler: Profiler,
    options: &[&str],
    env: &[(&str, &str)],
    program: &Path,
    args: &[&str],
    dir: &Path,
) -> Run {
    let folder = dir.join(profiler.name());
    fs::create_dir_all(&folder).expect("a folder for the run");
    let profiler = match std::env::var(SELF_CHECK) {
        Ok(value) if value == "valgrind" => Profiler::Valgrind,
        _ => profiler,
    };
    let out = folder.to_string_lossy().into_owned();
    let mut options: Vec<String> = options
        .iter()
        .map(|option| option.replace("{out}", &out))
        .collect();
    if profiler == Profiler::Valgrind && !options.iter().any(|o| o.starts_with("--tool=")) {
        options.insert(0, "--tool=callgrind".into());
    }
    if !options.iter().any(|o| o.contains("-out-file=")) {
        options.push(format!("--callgrind-out-file={out}/callgrind.out"));
    }
    let mut command = profiler.command();
    command.args(&options).arg(program).args(args);
    finish_with_env(command, folder, env)
}

/// Runs `program` alone, under Valgrind and under cgx with `options`; asserts
/// that all three exit with `status` and that cgx prints what the program
/// prints alone, after the first `skip_lines` lines (which may differ under a
/// profiler). Returns the runs alone, under Valgrind and under cgx.
pub fn run_alone_and_profiled(
    program: &Path,
    options: &[&str],
    status: i32,
    skip_lines: usize,
    dir: &Path,
) -> (Run, Run, Run) {
    let alone = native(program, &[], dir);
    assert_status(&alone, status);
    let valgrind = run(Profiler::Valgrind, options, program, &[], dir);
    assert_status(&valgrind, status);
    let cgx = run(Profiler::Cgx, options, program, &[], dir);
    assert_status(&cgx, status);
    let rest = |run: &Run| {
        run.stdout
            .lines()
            .skip(skip_lines)
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(rest(&cgx), rest(&alone), "{}: stdout", cgx.command);
    (alone, valgrind, cgx)
}

/// The profile among `profiles` in which `function` has a self cost.
pub fn with_function<'a>(profiles: &'a [Profile], function: &str, who: &str) -> &'a Profile {
    let mut found = profiles
        .iter()
        .filter(|profile| self_ir(profile).contains_key(function));
    let profile = found
        .next()
        .unwrap_or_else(|| panic!("no profile of {who} has {function}"));
    assert!(
        found.next().is_none(),
        "several profiles of {who} have {function}"
    );
    profile
}

/// Runs `program ARGS` without a profiler, in the folder `dir/native` (created).
pub fn native(program: &Path, args: &[&str], dir: &Path) -> Run {
    let folder = dir.join("native");
    fs::create_dir_all(&folder).expect("a folder for the run");
    let mut command = Command::new(program);
    command.args(args);
    finish(command, folder)
}

/// Runs `command` in `folder` with stdin empty and a small environment (the
/// dynamic loader's start-up reads every variable: with cargo's environment it
/// runs 15% more instructions, seconds of single-stepping).
fn finish(command: Command, folder: PathBuf) -> Run {
    finish_with_env(command, folder, &[])
}

/// [`finish`] with the environment variables `env` added.
fn finish_with_env(mut command: Command, folder: PathBuf, env: &[(&str, &str)]) -> Run {
    command
        .current_dir(&folder)
        .stdin(Stdio::null())
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .envs(env.iter().copied());
    let description = format!("{command:?}");
    let output = output_of(&mut command);
    let mut files: Vec<PathBuf> = fs::read_dir(&folder)
        .expect("the run's folder is readable")
        .map(|entry| entry.expect("a readable folder entry").path())
        .filter(|path| fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() > 0))
        .collect();
    sort_in_number_order(&mut files);
    Run {
        command: description,
        status: shell_status(output.status),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        folder,
        files,
    }
}

/// The column of `Ir` in every part of `profile`; panics if a part has no `Ir`.
fn ir_columns(profile: &Profile) -> Vec<usize> {
    profile
        .parts
        .iter()
        .map(|part| {
            part.events
                .index_of("Ir")
                .unwrap_or_else(|| panic!("a part without Ir: {:?}", part.events.names))
        })
        .collect()
}

/// The name of a function without Callgrind's suffixes: `fib'2` → `fib`.
pub fn base_name(name: &str) -> &str {
    name.split('\'').next().unwrap_or(name)
}

/// Calls `f(caller, record, ir)` for every record of every part, `ir` being the
/// record's Ir column.
fn for_each_record(profile: &Profile, mut f: impl FnMut(&str, &Record<'_>, usize)) {
    for (part, ir) in profile.parts.iter().zip(ir_columns(profile)) {
        for (function, records) in part.functions() {
            let name = profile.names.get(function.name);
            records.for_each(part.events.len(), |record| f(name, &record, ir));
        }
    }
}

/// The self Ir of every function by name (`fib'2` apart from `fib`), added over
/// all parts, objects and files; functions with no Ir are left out.
pub fn self_ir(profile: &Profile) -> BTreeMap<String, u64> {
    let mut table = BTreeMap::new();
    for_each_record(profile, |name, record, ir| {
        if let Record::Cost { costs, .. } = record {
            *table.entry(name.to_string()).or_insert(0) += costs[ir];
        }
    });
    table.retain(|_, ir| *ir != 0);
    table
}

/// The sum of all self Ir of `profile` (all parts).
pub fn total_ir(profile: &Profile) -> u64 {
    self_ir(profile).values().sum()
}

/// The calls of one caller to one callee, added over call sites and parts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Arc {
    /// The `calls=` counts.
    pub calls: u64,
    /// The inclusive Ir of the calls (the line after `calls=`).
    pub inclusive: u64,
}

/// The call arcs by (caller, callee) name, with their counts and inclusive Ir
/// added over call sites and parts.
pub fn arcs(profile: &Profile) -> BTreeMap<(String, String), Arc> {
    arc_costs(profile, &["Ir"])
        .into_iter()
        .map(|(key, (calls, inclusive))| {
            let inclusive = inclusive.first().copied().unwrap_or(0);
            (key, Arc { calls, inclusive })
        })
        .collect()
}

/// The self Ir of every instruction address (`positions: instr`), added over
/// functions and parts. Panics unless every part has instruction positions.
pub fn instr_ir(profile: &Profile) -> BTreeMap<u64, u64> {
    for part in &profile.parts {
        assert!(
            part.positions.instr,
            "a part without instruction addresses (positions: instr)"
        );
    }
    let mut table = BTreeMap::new();
    for_each_record(profile, |_, record, ir| {
        if let Record::Cost { at, costs, .. } = record {
            *table.entry(at.instr).or_insert(0) += costs[ir];
        }
    });
    table.retain(|_, ir| *ir != 0);
    table
}

/// The names (without `'N` suffixes) of the functions of `profile` whose source
/// file (`fl=`) is called `source` (the file name without folders): the test
/// program's own functions.
pub fn own_functions(profile: &Profile, source: &str) -> BTreeSet<String> {
    let mut own = BTreeSet::new();
    for part in &profile.parts {
        for (function, _) in part.functions() {
            let file = profile.names.get(function.file);
            if file.rsplit('/').next() == Some(source) {
                own.insert(base_name(profile.names.get(function.name)).to_string());
            }
        }
    }
    own
}

/// Asserts that two profiles of a program without libc have the same figures:
/// total Ir, each function's self Ir, each call arc's count and inclusive Ir;
/// with `instructions`, also the Ir of every instruction address. Prints what it
/// compared.
pub fn assert_same_figures(
    expected: &Profile,
    actual: &Profile,
    instructions: bool,
    context: &str,
) {
    assert_eq!(
        expected.parts.len(),
        actual.parts.len(),
        "{context}: number of parts"
    );
    let (expected_total, actual_total) = (total_ir(expected), total_ir(actual));
    assert_eq!(expected_total, actual_total, "{context}: total Ir");
    let (expected_self, actual_self) = (self_ir(expected), self_ir(actual));
    assert_same_rows(&expected_self, &actual_self, &format!("{context}: self Ir"));
    let (expected_arcs, actual_arcs) = (arcs(expected), arcs(actual));
    assert_same_rows(
        &expected_arcs,
        &actual_arcs,
        &format!("{context}: calls (count, inclusive Ir) by caller and callee"),
    );
    let mut compared = format!(
        "{context}: equal: total Ir {actual_total}, self Ir of {} functions, {} call arcs",
        actual_self.len(),
        actual_arcs.len()
    );
    if instructions {
        let (expected_instr, actual_instr) = (instr_ir(expected), instr_ir(actual));
        assert_same_rows(
            &expected_instr,
            &actual_instr,
            &format!("{context}: Ir by instruction address"),
        );
        compared += &format!(", Ir of {} instructions", actual_instr.len());
    }
    println!("{compared}");
}

/// Asserts what a profile of a program with libc must share with Valgrind's: the
/// self Ir of each of the program's own functions (`own`, names without `'N`),
/// the counts of every call arc from or to one of them, and the total Ir within
/// 2%. Also that no call arc of `actual` but a recursive one has an inclusive
/// Ir above its part's total (a negative cost wrapped around) and that every
/// arc to an own function
/// has at least one instruction per call. Prints what it compared.
pub fn assert_same_own_figures(
    expected: &Profile,
    actual: &Profile,
    own: &BTreeSet<String>,
    context: &str,
) {
    assert!(!own.is_empty(), "{context}: no own functions to compare");
    let is_own = |name: &str| own.contains(base_name(name));
    let own_self = |profile: &Profile| -> BTreeMap<String, u64> {
        self_ir(profile)
            .into_iter()
            .filter(|(name, _)| is_own(name))
            .collect()
    };
    let own_calls = |profile: &Profile| -> BTreeMap<(String, String), u64> {
        arcs(profile)
            .into_iter()
            .filter(|((caller, callee), _)| is_own(caller) || is_own(callee))
            .map(|(key, arc)| (key, arc.calls))
            .collect()
    };
    let (expected_self, actual_self) = (own_self(expected), own_self(actual));
    assert_same_rows(
        &expected_self,
        &actual_self,
        &format!("{context}: self Ir of the program's own functions"),
    );
    let (expected_calls, actual_calls) = (own_calls(expected), own_calls(actual));
    assert_same_rows(
        &expected_calls,
        &actual_calls,
        &format!("{context}: calls= counts of arcs from or to own functions"),
    );
    let (expected_total, actual_total) = (total_ir(expected), total_ir(actual));
    let difference = expected_total.abs_diff(actual_total) as f64 / expected_total as f64;
    assert!(
        difference <= 0.02,
        "{context}: total Ir {actual_total} is {:.2}% off Valgrind's {expected_total}",
        difference * 100.0
    );
    assert_sane_inclusive(actual, own, context);
    println!(
        "{context}: equal: self Ir of {} own functions, counts of {} arcs from or to \
         them; total Ir {actual_total} vs Valgrind's {expected_total} ({:.3}% off)",
        actual_self.len(),
        actual_calls.len(),
        difference * 100.0
    );
}

/// Asserts that every call arc's inclusive Ir but a recursive one's is at most
/// its part's total (a negative cost would wrap around) and that every arc to
/// one of the `own`
/// functions has at least one instruction per call.
fn assert_sane_inclusive(profile: &Profile, own: &BTreeSet<String>, context: &str) {
    for (part, ir) in profile.parts.iter().zip(ir_columns(profile)) {
        let total = part.self_totals()[ir];
        for (function, records) in part.functions() {
            let caller = profile.names.get(function.name);
            records.for_each(part.events.len(), |record| {
                if let Record::Call {
                    callee,
                    count,
                    inclusive,
                    ..
                } = record
                {
                    let callee = profile.names.get(callee.name);
                    let inclusive = inclusive[ir];
                    // A recursive arc counts the nested calls again, as in
                    // Valgrind: only other arcs are bounded by the total.
                    let recursive = base_name(caller) == base_name(callee);
                    assert!(
                        recursive || inclusive <= total,
                        "{context}: {caller} -> {callee}: inclusive Ir {inclusive} > \
                         the part's total {total}"
                    );
                    if own.contains(base_name(callee)) {
                        assert!(
                            inclusive >= count && inclusive > 0,
                            "{context}: {caller} -> {callee}: {count} calls, inclusive \
                             Ir {inclusive}"
                        );
                    }
                }
            });
        }
    }
}

/// Asserts that callgrind_annotate reads each of `files`: its `PROGRAM TOTALS` are
/// the file's `summary:` (or `totals:`) as cgx's reader finds it, and its function
/// table adds up to the self costs cgx's reader finds (with the inclusive costs of
/// `calls=0` lines, which it counts as self costs). Then that headless KCachegrind
/// loads them all without a loader complaint (skipped with a message when
/// KCachegrind is not installed, unless the environment variable CI is set);
/// KCachegrind takes 10 seconds. Prints what it checked.
pub fn assert_clients_load(files: &[PathBuf], context: &str) {
    assert!(!files.is_empty(), "{context}: no files to load");
    for file in files {
        let profile = read(file);
        let events = profile.parts[0].events.len();
        let (mut stated, mut costs) = (vec![0u64; events], vec![0u64; events]);
        for part in &profile.parts {
            let line = part.summary.as_ref().or(part.totals.as_ref());
            add_costs(&mut stated, line.map_or(&[][..], Vec::as_slice));
        }
        for row in tables::sum(&tables::self_costs(&profile), &zero_count_calls(&profile)).values()
        {
            add_costs(&mut costs, row);
        }
        let report = callgrind_annotate(file, &[]);
        assert_eq!(
            report.totals,
            stated,
            "{context}: callgrind_annotate's PROGRAM TOTALS of {} are not its summary:",
            file.display()
        );
        let mut listed = vec![0u64; events];
        for row in report.functions.values() {
            add_costs(&mut listed, row);
        }
        assert_eq!(
            listed,
            costs,
            "{context}: callgrind_annotate's functions of {} do not add up to the costs \
             cgx reads",
            file.display()
        );
        println!(
            "{context}: callgrind_annotate reads {}: totals {stated:?}, functions adding \
             up to {costs:?}",
            file.display()
        );
    }
    // A malformed file goes last: complaints about it show that KCachegrind did
    // load and report within the time, so that silence about the others means
    // something.
    let control_dir = tempfile::tempdir().expect("a temporary folder");
    let control = control_dir.path().join("control.callgrind");
    fs::write(&control, "# callgrind format\nevents: Ir\nfn=(3)\n1 2\n")
        .expect("the control file is written");
    let mut loaded = files.to_vec();
    loaded.push(control);
    let Some(complaints) = kcachegrind_complaints(&loaded, 10) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "KCachegrind is not installed (apt-get install kcachegrind dbus), and CI is set"
        );
        println!("{context}: KCachegrind check skipped: KCachegrind is not installed");
        return;
    };
    // Several files load into one profile; different cmd: lines are no error.
    let (control, others): (Vec<&String>, Vec<&String>) = complaints
        .iter()
        .filter(|line| !line.contains("Redefined command"))
        .partition(|line| line.contains("control.callgrind"));
    assert!(
        !control.is_empty(),
        "{context}: KCachegrind said nothing about the malformed control file; did it \
         load anything?"
    );
    assert!(
        others.is_empty(),
        "{context}: KCachegrind complains:\n{}",
        others
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    println!(
        "{context}: KCachegrind loads {} files without complaint (and complains about a \
         malformed control file)",
        files.len()
    );
}

/// Asserts that a run exited with `status`, showing its stderr otherwise.
pub fn assert_status(run: &Run, status: i32) {
    assert_eq!(
        run.status, status,
        "{}: exit status\nstderr:\n{}",
        run.command, run.stderr
    );
}

/// Sorts file names with their numbers compared as numbers: a process's
/// profile before its child's (`callgrind.out.9999` before
/// `callgrind.out.10000`), whatever digits their process ids have.
fn sort_in_number_order(files: &mut [PathBuf]) {
    alphanumeric_sort::sort_path_slice(files);
}

/// The name of `file` with its process id replaced by `%p`, and that id: the
/// digits right after `prefix`, which the name must start with
/// (`callgrind.out.1234-02` → `callgrind.out.%p-02` and 1234 for the prefix
/// `callgrind.out.`). Panics if the name does not have that shape.
pub fn pid_pattern(file: &Path, prefix: &str) -> (String, u64) {
    let name = file
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let rest = name
        .strip_prefix(prefix)
        .unwrap_or_else(|| panic!("{name} does not start with {prefix}"));
    let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let pid = rest[..digits]
        .parse()
        .unwrap_or_else(|_| panic!("no process id after {prefix} in {name}"));
    (format!("{prefix}%p{}", &rest[digits..]), pid)
}

/// The names of `files` with their process ids replaced by `%p`, as
/// [`pid_pattern`] gives them.
pub fn name_patterns(files: &[PathBuf], prefix: &str) -> Vec<String> {
    files
        .iter()
        .map(|file| pid_pattern(file, prefix).0)
        .collect()
}

/// One profile per part of `profile` (each with all of `profile`'s names), to
/// compare a file of several dumps (`--combine-dumps=yes`) part by part.
pub fn split_parts(profile: &Profile) -> Vec<Profile> {
    profile
        .parts
        .iter()
        .map(|part| Profile {
            creator: profile.creator.clone(),
            names: profile.names.clone(),
            parts: vec![part.clone()],
        })
        .collect()
}

/// What identifies each part of `profile`: its `part:` number, its `thread:`, and
/// its `desc: Trigger:` lines.
pub fn part_headers(profile: &Profile) -> Vec<(Option<u64>, Option<u64>, Vec<String>)> {
    profile
        .parts
        .iter()
        .map(|part| {
            let triggers = part
                .header
                .desc
                .iter()
                .filter(|desc| desc.trim_start().starts_with("Trigger:"))
                .map(|desc| desc.trim().to_string())
                .collect();
            (part.header.part, part.header.thread, triggers)
        })
        .collect()
}

/// Asserts that two runs wrote the same Callgrind profiles: non-empty files with
/// the same names once the process id after `prefix` is replaced by `%p` (see
/// [`pid_pattern`]), each file naming that process (`pid:`), the same
/// part numbers, threads and triggers, and, part by part, the figures
/// [`assert_same_figures`] compares (with `instructions`, the Ir of every
/// instruction too). Prints what it compared.
pub fn assert_same_outputs(
    expected: &Run,
    actual: &Run,
    prefix: &str,
    instructions: bool,
    context: &str,
) {
    let (expected_names, actual_names) = (
        name_patterns(&expected.files, prefix),
        name_patterns(&actual.files, prefix),
    );
    assert_eq!(
        actual_names, expected_names,
        "{context}: the files written (non-empty, %p for the process id)\nstderr:\n{}",
        actual.stderr
    );
    println!("{context}: the same files: {actual_names:?}");
    for (name, (expected_file, actual_file)) in actual_names
        .iter()
        .zip(expected.files.iter().zip(&actual.files))
    {
        let context = format!("{context}, {name}");
        let (expected, actual) = (read(expected_file), read(actual_file));
        for (profile, file) in [(&expected, expected_file), (&actual, actual_file)] {
            // A file of several parts (--combine-dumps=yes) says `pid:` once, at
            // the top.
            let pid = pid_pattern(file, prefix).1;
            for (index, part) in profile.parts.iter().enumerate() {
                assert!(
                    part.header.pid == Some(pid) || index > 0 && part.header.pid.is_none(),
                    "{context}: pid: {:?} in part {} of {}",
                    part.header.pid,
                    index + 1,
                    file.display()
                );
            }
        }
        let (expected_headers, actual_headers) = (part_headers(&expected), part_headers(&actual));
        assert_eq!(
            actual_headers, expected_headers,
            "{context}: (part, thread, triggers) of each part"
        );
        println!("{context}: (part, thread, triggers) of each part: {actual_headers:?}");
        let parts = split_parts(&expected).into_iter().zip(split_parts(&actual));
        for (index, (expected, actual)) in parts.enumerate() {
            let context = format!("{context}, part {} of {}", index + 1, actual_headers.len());
            assert_same_figures(&expected, &actual, instructions, &context);
        }
    }
}

/// The self Ir of every source line by (function, source file name without
/// folders, line), added over all parts; lines with no Ir are left out. For
/// Cachegrind files, whose cost lines are source lines.
pub fn line_ir(profile: &Profile) -> BTreeMap<(String, String, u64), u64> {
    let mut table = BTreeMap::new();
    for_each_record(profile, |name, record, ir| {
        if let Record::Cost { file, at, costs } = record {
            let file = profile.names.get(*file);
            let file = file.rsplit('/').next().unwrap_or(file).to_string();
            *table.entry((name.to_string(), file, at.line)).or_insert(0) += costs[ir];
        }
    });
    table.retain(|_, ir| *ir != 0);
    table
}

/// The lines `==PID== TEXT` of `stderr` whose TEXT starts with one of `starts`,
/// as (PID, TEXT), in order: Valgrind's closing summary (`Events    : Ir`,
/// `Collected : 26250`, `I   refs:      26,250`).
pub fn summary_lines(stderr: &str, starts: &[&str]) -> Vec<(u64, String)> {
    stderr
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("==")?;
            let (pid, text) = rest.split_once("== ")?;
            let pid = pid.parse().ok()?;
            starts
                .iter()
                .any(|start| text.starts_with(start))
                .then(|| (pid, text.to_string()))
        })
        .collect()
}

/// The columns of `events` (by name) in `part`, in the order of `events`;
/// panics if the part lacks one of them, so that no comparison is vacuous.
fn event_columns(part: &Part, events: &[&str]) -> Vec<usize> {
    events
        .iter()
        .map(|event| {
            part.events
                .index_of(event)
                .unwrap_or_else(|| panic!("a part without {event}: events {:?}", part.events.names))
        })
        .collect()
}

/// The counts of `costs` at `columns` (a column past the end counts 0, as a
/// cost line without its trailing zeros).
fn pick(costs: &[u64], columns: &[usize]) -> Vec<u64> {
    columns
        .iter()
        .map(|&column| costs.get(column).copied().unwrap_or(0))
        .collect()
}

/// Adds `costs` to the row `key` of `table`, creating it with zeros.
fn add_row<K: Ord>(table: &mut BTreeMap<K, Vec<u64>>, key: K, costs: &[u64]) {
    let row = table.entry(key).or_insert_with(|| vec![0; costs.len()]);
    add_costs(row, costs);
}

/// Calls `f(caller, record, columns)` for every record of every part,
/// `columns` being the columns of `events` in the record's part.
fn for_each_record_of(
    profile: &Profile,
    events: &[&str],
    mut f: impl FnMut(&str, &Record<'_>, &[usize]),
) {
    for part in &profile.parts {
        let columns = event_columns(part, events);
        for (function, records) in part.functions() {
            let name = profile.names.get(function.name);
            records.for_each(part.events.len(), |record| f(name, &record, &columns));
        }
    }
}

/// The self costs of `events` (by name, in that order) of every function by
/// name (`fib'2` apart from `fib`), added over all parts, objects and files;
/// functions whose counts are all zero are left out.
pub fn self_costs_of(profile: &Profile, events: &[&str]) -> BTreeMap<String, Vec<u64>> {
    let mut table = BTreeMap::new();
    for_each_record_of(profile, events, |name, record, columns| {
        if let Record::Cost { costs, .. } = record {
            add_row(&mut table, name.to_string(), &pick(costs, columns));
        }
    });
    table.retain(|_, costs| costs.iter().any(|&c| c != 0));
    table
}

/// The sum of all self costs of `events` (all parts).
pub fn event_totals(profile: &Profile, events: &[&str]) -> Vec<u64> {
    let mut totals = vec![0; events.len()];
    for costs in self_costs_of(profile, events).values() {
        add_costs(&mut totals, costs);
    }
    totals
}

/// The `summary:` and the `totals:` lines of every part, restricted to
/// `events` (a missing line is empty; a short one is padded with zeros).
pub fn stated_totals(profile: &Profile, events: &[&str]) -> Vec<(Vec<u64>, Vec<u64>)> {
    profile
        .parts
        .iter()
        .map(|part| {
            let columns = event_columns(part, events);
            let line = |line: &Option<Vec<u64>>| {
                line.as_ref()
                    .map_or_else(Vec::new, |line| pick(line, &columns))
            };
            (line(&part.summary), line(&part.totals))
        })
        .collect()
}

/// The call arcs by (caller, callee) name: the `calls=` count and the
/// inclusive costs of `events`, added over call sites and parts.
pub fn arc_costs(
    profile: &Profile,
    events: &[&str],
) -> BTreeMap<(String, String), (u64, Vec<u64>)> {
    let mut table: BTreeMap<(String, String), (u64, Vec<u64>)> = BTreeMap::new();
    for_each_record_of(profile, events, |caller, record, columns| {
        if let Record::Call {
            callee,
            count,
            inclusive,
            ..
        } = record
        {
            let key = (
                caller.to_string(),
                profile.names.get(callee.name).to_string(),
            );
            let arc = table
                .entry(key)
                .or_insert_with(|| (0, vec![0; columns.len()]));
            arc.0 += count;
            add_costs(&mut arc.1, &pick(inclusive, columns));
        }
    });
    table
}

/// The self costs of `events` of every instruction address (`positions:
/// instr`), added over functions and parts; addresses whose counts are all
/// zero are left out. Panics unless every part has instruction positions.
pub fn instr_costs(profile: &Profile, events: &[&str]) -> BTreeMap<u64, Vec<u64>> {
    for part in &profile.parts {
        assert!(
            part.positions.instr,
            "a part without instruction addresses (positions: instr)"
        );
    }
    let mut table = BTreeMap::new();
    for_each_record_of(profile, events, |_, record, columns| {
        if let Record::Cost { at, costs, .. } = record {
            add_row(&mut table, at.instr, &pick(costs, columns));
        }
    });
    table.retain(|_, costs| costs.iter().any(|&c| c != 0));
    table
}

/// The self costs of `events` of every source line by (function, source file
/// name without folders, line), added over all parts; lines whose counts are
/// all zero are left out. For Cachegrind files, whose cost lines are lines.
pub fn line_costs(profile: &Profile, events: &[&str]) -> BTreeMap<(String, String, u64), Vec<u64>> {
    let mut table = BTreeMap::new();
    for_each_record_of(profile, events, |name, record, columns| {
        if let Record::Cost { file, at, costs } = record {
            let file = profile.names.get(*file);
            let file = file.rsplit('/').next().unwrap_or(file).to_string();
            add_row(
                &mut table,
                (name.to_string(), file, at.line),
                &pick(costs, columns),
            );
        }
    });
    table.retain(|_, costs| costs.iter().any(|&c| c != 0));
    table
}

/// Asserts that two profiles have the same figures for `events` (by name, so
/// that the event order of the files does not matter): the number of parts,
/// the sum of all self costs, the `summary:` and `totals:` lines, the self
/// costs of every function, the count and inclusive costs of every call arc
/// (unless `arcs` is false: Cachegrind files have none), and with
/// `instructions` the costs of every instruction address. Prints what it
/// compared.
pub fn assert_same_costs(
    expected: &Profile,
    actual: &Profile,
    events: &[&str],
    arcs: bool,
    instructions: bool,
    context: &str,
) {
    let context = format!("{context}, events {events:?}");
    assert_eq!(
        expected.parts.len(),
        actual.parts.len(),
        "{context}: number of parts"
    );
    // Rows first, from the finest: they show where a difference is.
    let mut compared = Vec::new();
    if instructions {
        let (expected_instr, actual_instr) =
            (instr_costs(expected, events), instr_costs(actual, events));
        assert_same_rows(
            &expected_instr,
            &actual_instr,
            &format!("{context}: costs by instruction address"),
        );
        compared.push(format!("costs of {} instructions", actual_instr.len()));
    }
    let (expected_self, actual_self) = (
        self_costs_of(expected, events),
        self_costs_of(actual, events),
    );
    assert_same_rows(
        &expected_self,
        &actual_self,
        &format!("{context}: self costs"),
    );
    compared.push(format!("self costs of {} functions", actual_self.len()));
    if arcs {
        let (expected_arcs, actual_arcs) = (arc_costs(expected, events), arc_costs(actual, events));
        assert_same_rows(
            &expected_arcs,
            &actual_arcs,
            &format!("{context}: calls (count, inclusive costs) by caller and callee"),
        );
        compared.push(format!(
            "counts and inclusive costs of {} call arcs",
            actual_arcs.len()
        ));
    }
    let totals = event_totals(actual, events);
    assert_eq!(
        event_totals(expected, events),
        totals,
        "{context}: the sums of all self costs"
    );
    assert_eq!(
        stated_totals(expected, events),
        stated_totals(actual, events),
        "{context}: the (summary:, totals:) lines of each part"
    );
    println!(
        "{context}: equal: {}, totals {totals:?}, summary: and totals: lines",
        compared.join(", ")
    );
}

/// The base names (without `'N`) that lie on a cycle of the call graph of
/// `part` by base name: `fib` (`fib` → `fib'2`), `is_even` and `is_odd`
/// (`is_even` → `is_odd` → `is_even'2`). The inclusive cost of an arc into
/// such a function counts the nested activations again, as in Valgrind.
fn recursive_names(profile: &Profile, part: &Part) -> BTreeSet<String> {
    let mut callees: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (function, records) in part.functions() {
        let caller = base_name(profile.names.get(function.name)).to_string();
        records.for_each(0, |record| {
            if let Record::Call { callee, .. } = record {
                let callee = base_name(profile.names.get(callee.name)).to_string();
                callees.entry(caller.clone()).or_default().insert(callee);
            }
        });
    }
    // A name is on a cycle when it is reachable from its own callees.
    callees
        .keys()
        .filter(|&start| {
            let mut seen = BTreeSet::new();
            let mut todo: Vec<&String> = callees[start].iter().collect();
            while let Some(name) = todo.pop() {
                if name == start {
                    return true;
                }
                if seen.insert(name) {
                    todo.extend(callees.get(name).into_iter().flatten());
                }
            }
            false
        })
        .cloned()
        .collect()
}

/// The functions in which a new thread starts (glibc's `clone3` and `clone`:
/// the thread's first instructions are those after the system call): one
/// thread calls them, and they are a root of the other.
const THREAD_ENTRIES: [&str; 4] = ["clone3", "clone", "__clone3", "__clone"];

/// Asserts, part by part, that the inclusive costs of `events` are the self
/// costs plus the callees' inclusive costs: for every function F (by name,
/// `fib'2` apart from `fib`) that is not recursive (its base name is on no
/// cycle of the call graph by base name, see [`recursive_names`]) and that
/// something calls, the inclusive costs of the arcs into F add up to F's self
/// cost plus the inclusive costs of the arcs out of F; and the functions
/// nobody calls (the roots: `(below main)`, a thread's start, a signal
/// handler) have self costs and outgoing inclusive costs that add up to the
/// part's totals (the sum of all self costs), with the part of the functions
/// where threads start ([`THREAD_ENTRIES`]) that is not called: their self
/// cost plus their arcs out less their arcs in. Returns how many functions it
/// checked; prints what it checked.
pub fn assert_inclusive_is_self_plus_callees(
    profile: &Profile,
    events: &[&str],
    context: &str,
) -> usize {
    let context = format!("{context}, events {events:?}");
    let mut checked = 0;
    for (index, part) in profile.parts.iter().enumerate() {
        let context = format!("{context}, part {} of {}", index + 1, profile.parts.len());
        let columns = event_columns(part, events);
        let recursive = recursive_names(profile, part);
        let zeros = || vec![0u64; events.len()];
        // By function name: self, the arcs in, the arcs out.
        let mut own: BTreeMap<String, [Vec<u64>; 3]> = BTreeMap::new();
        let mut totals = zeros();
        let mut called: BTreeSet<String> = BTreeSet::new();
        for (function, records) in part.functions() {
            let name = profile.names.get(function.name).to_string();
            records.for_each(part.events.len(), |record| match record {
                Record::Cost { costs, .. } => {
                    let costs = pick(costs, &columns);
                    add_costs(&mut totals, &costs);
                    let row = own
                        .entry(name.clone())
                        .or_insert_with(|| [zeros(), zeros(), zeros()]);
                    add_costs(&mut row[0], &costs);
                }
                Record::Call {
                    callee, inclusive, ..
                } => {
                    let inclusive = pick(inclusive, &columns);
                    let callee = profile.names.get(callee.name).to_string();
                    called.insert(callee.clone());
                    let row = own
                        .entry(callee)
                        .or_insert_with(|| [zeros(), zeros(), zeros()]);
                    add_costs(&mut row[1], &inclusive);
                    let row = own
                        .entry(name.clone())
                        .or_insert_with(|| [zeros(), zeros(), zeros()]);
                    add_costs(&mut row[2], &inclusive);
                }
                Record::Jump { .. } => {}
            });
        }
        let mut differences = Vec::new();
        let mut roots = zeros();
        let mut root_names = Vec::new();
        for (name, [self_cost, into, out]) in &own {
            let mut expected = self_cost.clone();
            add_costs(&mut expected, out);
            if THREAD_ENTRIES.contains(&name.as_str()) {
                // Called by one thread, a root of the thread it creates: the
                // part that is not called is a root's.
                let mut root = expected.clone();
                for (cost, called) in root.iter_mut().zip(into) {
                    *cost = cost.wrapping_sub(*called);
                }
                add_costs(&mut roots, &root);
                root_names.push(format!("{name} (less its arcs in)"));
            } else if !called.contains(name) {
                add_costs(&mut roots, &expected);
                root_names.push(name.clone());
            } else if !recursive.contains(base_name(name)) {
                checked += 1;
                if *into != expected {
                    differences.push(format!(
                        "  {name}: arcs in {into:?} != self {self_cost:?} + arcs out {out:?} \
                         = {expected:?}"
                    ));
                }
            }
        }
        assert!(
            differences.is_empty(),
            "{context}: {} of the {checked} non-recursive called functions have inclusive \
             costs in that are not self + inclusive costs out:\n{}",
            differences.len(),
            differences.join("\n")
        );
        assert_eq!(
            roots, totals,
            "{context}: self + inclusive costs out of the roots {root_names:?} are not the \
             part's totals"
        );
        println!(
            "{context}: arcs in = self + arcs out for {checked} non-recursive functions \
             (recursive: {recursive:?}); roots {root_names:?} add up to the totals {totals:?}"
        );
    }
    checked
}

/// Valgrind's preloaded library (Debian's valgrind package).
pub const VALGRIND_PRELOAD: &str = "/usr/libexec/valgrind/vgpreload_core-amd64-linux.so";

/// The variables a program gets under valgrind besides its own: Debian's
/// `valgrind` script sets `LD_LIBRARY_PATH` and the `*_FORCE_NEW` pair, and
/// Valgrind preloads `vgpreload_core`. Given to a cgx run, the program does
/// the same work as under Valgrind (the dynamic linker resolves against the
/// same objects, environment-sized work is the same).
pub const VALGRINDS_ENVIRONMENT: &[(&str, &str)] = &[
    ("LD_LIBRARY_PATH", "/usr/lib/debug"),
    ("LD_PRELOAD", VALGRIND_PRELOAD),
    ("GLIBCXX_FORCE_NEW", "1"),
    ("GLIBCPP_FORCE_NEW", "1"),
];

/// A run of `cgx run --backend=NAME` and how long it took (wall time, from
/// starting cgx to its exit).
#[derive(Clone, Debug)]
pub struct TimedRun {
    /// The run.
    pub run: Run,
    /// Its wall time.
    pub wall: std::time::Duration,
}

/// Runs `program ARGS` under `cgx run --backend=BACKEND OPTIONS` in the folder
/// `dir/cgx-BACKEND` (created), as [`run`] runs cgx (`{out}` stands for that
/// folder; `--callgrind-out-file={out}/callgrind.out` unless an option names
/// an output file), and times it. With [`SELF_CHECK`] set to `valgrind`,
/// Valgrind runs instead (`--tool=callgrind` unless an option gives a tool),
/// without the `--backend=` option it does not have. Does not check the status.
pub fn run_backend(
    backend: &str,
    options: &[&str],
    program: &Path,
    args: &[&str],
    dir: &Path,
) -> TimedRun {
    run_backend_with_env(backend, options, &[], program, args, dir)
}

/// [`run_backend`] with the environment variables `env` set for cgx and the
/// program.
pub fn run_backend_with_env(
    backend: &str,
    options: &[&str],
    env: &[(&str, &str)],
    program: &Path,
    args: &[&str],
    dir: &Path,
) -> TimedRun {
    let folder = dir.join(format!("cgx-{backend}"));
    fs::create_dir_all(&folder).expect("a folder for the run");
    let self_check = std::env::var(SELF_CHECK).is_ok_and(|value| value == "valgrind");
    let out = folder.to_string_lossy().into_owned();
    let mut options: Vec<String> = options
        .iter()
        .map(|option| option.replace("{out}", &out))
        .collect();
    if !options.iter().any(|o| o.contains("-out-file=")) {
        options.push(format!("--callgrind-out-file={out}/callgrind.out"));
    }
    let profiler = if self_check {
        if !options.iter().any(|o| o.starts_with("--tool=")) {
            options.insert(0, "--tool=callgrind".into());
        }
        Profiler::Valgrind
    } else {
        options.insert(0, format!("--backend={backend}"));
        Profiler::Cgx
    };
    let mut command = profiler.command();
    command.args(&options).arg(program).args(args);
    let start = std::time::Instant::now();
    let run = finish_with_env(command, folder, env);
    TimedRun {
        run,
        wall: start.elapsed(),
    }
}

/// `profile` without its `pid:` lines, which differ from run to run.
pub fn without_pids(profile: &Profile) -> Profile {
    let mut profile = profile.clone();
    for part in &mut profile.parts {
        part.header.pid = None;
    }
    profile
}

/// Asserts that two runs wrote the same profiles, every part of every file
/// equal in its canonical view (`cgx_formats::canonical`: header, events,
/// positions, summary, totals, the self cost of every place, every call's
/// count and inclusive costs, every jump), but for the `pid:` lines: the
/// same non-empty files, named alike once the process id after `prefix` is
/// replaced by `%p` (see [`pid_pattern`]; names without `prefix` are
/// compared as they are). Prints what it compared.
pub fn assert_same_canonical_outputs(expected: &Run, actual: &Run, prefix: &str, context: &str) {
    let pattern = |file: &PathBuf| {
        let name = file
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        if name.starts_with(prefix) {
            pid_pattern(file, prefix).0
        } else {
            name
        }
    };
    let expected_names: Vec<String> = expected.files.iter().map(pattern).collect();
    let actual_names: Vec<String> = actual.files.iter().map(pattern).collect();
    assert_eq!(
        actual_names, expected_names,
        "{context}: the files written (non-empty, %p for the process id)\nstderr:\n{}",
        actual.stderr
    );
    assert!(!actual_names.is_empty(), "{context}: no profile written");
    let mut compared = Vec::new();
    for (name, (expected_file, actual_file)) in actual_names
        .iter()
        .zip(expected.files.iter().zip(&actual.files))
    {
        let (expected, actual) = (
            without_pids(&read(expected_file)),
            without_pids(&read(actual_file)),
        );
        crate::compare::assert_same_profile(&expected, &actual, &format!("{context}, {name}"));
        let canonical = cgx_formats::canonical(&actual);
        let count = |what: fn(&cgx_formats::CanonicalPart) -> usize| -> usize {
            canonical.parts.iter().map(what).sum()
        };
        compared.push(format!(
            "{name}: {} parts, {} cost places, {} calls, {} jumps",
            canonical.parts.len(),
            count(|part| part.costs.len()),
            count(|part| part.calls.len()),
            count(|part| part.jumps.len()),
        ));
    }
    println!("{context}: equal: {}", compared.join("; "));
}

/// Asserts that every `jump=` and `jcnd=` line of `actual` (a run with
/// `--collect-jumps=yes --dump-instr=yes` on a program without libc) equals
/// Valgrind's (`expected`), but one known difference: for a conditional REP
/// instruction (`repz cmps`, `repnz scas`, at the addresses
/// `conditional_rep`) Valgrind's `jcnd=` execution count leaves out the
/// executions that ended at the `rcx == 0` check, which cgx does not tell
/// apart from the others; there the taken count must be equal and the
/// execution count at least Valgrind's. One part each. Prints what it
/// compared.
pub fn assert_valgrinds_jumps(
    expected: &Profile,
    actual: &Profile,
    conditional_rep: &[u64],
    context: &str,
) {
    let jumps = |profile: &Profile| {
        assert_eq!(profile.parts.len(), 1, "{context}: one part");
        cgx_formats::canonical(profile).parts[0].jumps.clone()
    };
    let (expected, actual) = (jumps(expected), jumps(actual));
    assert!(
        !expected.is_empty(),
        "{context}: Valgrind's profile has no jumps"
    );
    let is_conditional_rep = |key: &cgx_formats::JumpKey| {
        let ((_, _, at), _, _, target, conditional) = key;
        *conditional && at.instr == target.instr && conditional_rep.contains(&at.instr)
    };
    let (rep_expected, rest_expected): (BTreeMap<_, _>, BTreeMap<_, _>) = expected
        .into_iter()
        .partition(|(key, _)| is_conditional_rep(key));
    let (rep_actual, rest_actual): (BTreeMap<_, _>, BTreeMap<_, _>) = actual
        .into_iter()
        .partition(|(key, _)| is_conditional_rep(key));
    assert_same_rows(
        &rest_expected,
        &rest_actual,
        &format!("{context}: jump= and jcnd= lines"),
    );
    assert_eq!(
        rep_expected.keys().collect::<Vec<_>>(),
        rep_actual.keys().collect::<Vec<_>>(),
        "{context}: conditional REP self-loops"
    );
    for (key, (executed, taken)) in &rep_expected {
        let (actual_executed, actual_taken) = rep_actual[key];
        assert_eq!(actual_taken, *taken, "{context}: {key:?}: taken");
        assert!(actual_executed >= *executed, "{context}: {key:?}: executed");
    }
    println!(
        "{context}: {} jumps equal to Valgrind's, {} conditional REP self-loops with equal \
         taken counts",
        rest_expected.len(),
        rep_expected.len()
    );
}

/// Addresses of the conditional REP string instructions (`repz cmps`, `repnz
/// scas`) of `program`, by objdump.
pub fn conditional_rep_addresses(program: &Path) -> Vec<u64> {
    let code = crate::successful_output_of(
        Command::new("objdump")
            .args(["-d", "--no-show-raw-insn"])
            .arg(program),
    );
    String::from_utf8_lossy(&code.stdout)
        .lines()
        .filter(|line| line.contains("repz cmps") || line.contains("repnz scas"))
        .filter_map(|line| {
            let address = line.trim().split(':').next()?;
            u64::from_str_radix(address, 16).ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_come_in_the_order_of_their_numbers() {
        let mut files: Vec<PathBuf> = [
            "out/callgrind.out.10000",
            "out/callgrind.out.9999",
            "out/callgrind.out.10000.1",
            "out/callgrind.out.99999999999999999999",
            "out/cachegrind.out.12",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        sort_in_number_order(&mut files);
        let names: Vec<&str> = files.iter().filter_map(|path| path.to_str()).collect();
        assert_eq!(
            names,
            [
                "out/cachegrind.out.12",
                "out/callgrind.out.9999",
                "out/callgrind.out.10000",
                "out/callgrind.out.10000.1",
                "out/callgrind.out.99999999999999999999",
            ]
        );
    }
}
