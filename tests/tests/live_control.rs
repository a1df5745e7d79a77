//! Live control of running profiles through the shims' `callgrind_control`
//! (`served.c`, a server that waits for one-byte commands): a run blocked
//! in `epoll_wait` is listed, dumped (a `.1` file that callgrind_annotate
//! and KCachegrind read), zeroed, switched off and on, and still computes
//! what it computes natively, its final profile written; `-k` kills a run,
//! whose profile is written too. Against Valgrind's own callgrind_control
//! on a Valgrind run of the same program (busy: Valgrind's vgdb reaches a
//! program blocked in a system call only through ptrace), the outputs have
//! the same lines.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use cgx_tests::cli::binary;
use cgx_tests::clients::kcachegrind_complaints;
use cgx_tests::run::{build, Kind};
use cgx_tests::successful_output_of;

/// The shims made in `dir/shims` by `cgx shims`.
fn shims(dir: &Path) -> PathBuf {
    let folder = dir.join("shims");
    successful_output_of(Command::new(binary()).arg("shims").arg(&folder));
    folder
}

/// `control` (a `callgrind_control`) with `args`: what it prints, after
/// checking that it exits with 0 as Valgrind's script does, errors
/// included.
fn control(control: &Path, args: &[&str]) -> String {
    let output = successful_output_of(Command::new(control).args(args));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A program started under a profiler, answering on its standard input.
struct Served {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
}

impl Served {
    /// Starts `command` in `dir` and waits for its "ready".
    fn start(command: &mut Command, dir: &Path) -> Served {
        let mut child = command
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot run {command:?}: {error}"));
        let stdin = child.stdin.take().expect("a piped stdin");
        let mut stdout = BufReader::new(child.stdout.take().expect("a piped stdout"));
        let mut line = String::new();
        stdout.read_line(&mut line).expect("the program's output");
        assert_eq!(line, "ready\n", "{command:?} started");
        Served {
            child,
            stdin,
            stdout,
        }
    }

    /// Sends the program `commands`.
    fn send(&mut self, commands: &str) {
        self.stdin
            .write_all(commands.as_bytes())
            .expect("the program reads");
        self.stdin.flush().expect("the program reads");
    }

    /// Quits the program: its last line and whether it exited with 0.
    fn quit(mut self) -> (String, bool) {
        self.send("q");
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .expect("the program's output");
        let status = self.child.wait().expect("the program ends");
        (line, status.success())
    }
}

/// The process id `callgrind_control` (`control`) lists for the run of
/// `command_line`, waiting up to a minute for it to appear.
fn listed_pid(control_command: &Path, command_line: &str) -> u32 {
    let started = Instant::now();
    loop {
        let listing = control(control_command, &[]);
        let pid = listing.lines().find_map(|line| {
            let (pid, command) = line.strip_prefix("PID ")?.split_once(": ")?;
            (command == command_line)
                .then(|| pid.parse().ok())
                .flatten()
        });
        if let Some(pid) = pid {
            return pid;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{command_line} is not listed:\n{listing}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// What `callgrind_control -s -b PID` (`control`) prints once the program
/// of `pid` waits in `epoll_wait`, which it goes on to do after its "ready"
/// (asked again until it does, for up to 30 seconds).
fn waiting_status(control_command: &Path, pid: &str) -> String {
    let waiting = "Backtrace for Thread 1\n   [ 0]  epoll_wait (1 x)\n";
    let started = Instant::now();
    loop {
        let status = control(control_command, &["-s", "-b", pid]);
        if status.contains(waiting) {
            return status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the program does not wait in epoll_wait:\n{status}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Valgrind's callgrind_annotate on `file`: what it prints (it must read
/// the file).
fn annotate(file: &Path) -> String {
    assert!(file.exists(), "{} was written", file.display());
    let output = successful_output_of(Command::new("/usr/bin/callgrind_annotate").arg(file));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The native output of `program` sent "wwq".
fn native(program: &Path, dir: &Path) -> String {
    let mut served = Served::start(&mut Command::new(program), dir);
    served.send("ww");
    let (line, success) = served.quit();
    assert!(success, "{} ran natively", program.display());
    line
}

#[test]
fn a_run_blocked_in_a_system_call_is_listed_dumped_zeroed_and_switched() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let dir = dir.path();
    let program = build("served.c", Kind::C, dir);
    let shims = shims(dir);
    let callgrind_control = shims.join("callgrind_control");
    let expected = native(&program, dir);

    let mut valgrind = Command::new(shims.join("valgrind"));
    valgrind.arg("--tool=callgrind").arg(&program);
    let mut served = Served::start(&mut valgrind, dir);
    let command_line = program.display().to_string();
    let pid = listed_pid(&callgrind_control, &command_line);
    let name = format!("PID {pid}: {command_line}\n");
    let by_pid = pid.to_string();

    // The program waits in epoll_wait: the status shows it there.
    let status = waiting_status(&callgrind_control, &by_pid);
    assert!(
        status.starts_with(&format!(
            "{name}  Number of running threads: 1, thread IDs: 1\n"
        )),
        "{status}"
    );
    assert!(status.contains("  Events collected: Ir\n"), "{status}");

    // A dump now: the first numbered file, Callgrind's trigger.
    let ok = format!("{name}  OK.\n");
    assert_eq!(control(&callgrind_control, &["-d", &by_pid]), ok);
    let first = dir.join(format!("callgrind.out.{pid}.1"));
    let report = annotate(&first);
    assert!(report.contains("Trigger: dump\n"), "{report}");
    assert!(report.contains(":work ["), "{report}");
    if let Some(complaints) = kcachegrind_complaints(std::slice::from_ref(&first), 10) {
        assert!(complaints.is_empty(), "KCachegrind: {complaints:?}");
    }

    // By the program's name: work, zero, switch off and on.
    let program_name = program
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or("");
    served.send("w");
    assert_eq!(control(&callgrind_control, &["-z", program_name]), ok);
    assert_eq!(
        control(&callgrind_control, &["--instr=off", program_name]),
        ok
    );
    assert_eq!(
        control(&callgrind_control, &["-s", &by_pid]),
        format!("{name}  No information available as instrumentation is switched off.\n\n")
    );
    assert_eq!(control(&callgrind_control, &["-i", "on", &by_pid]), ok);
    assert_eq!(
        control(&callgrind_control, &["--dump=after the switch", &by_pid]),
        ok
    );
    let second = dir.join(format!("callgrind.out.{pid}.2"));
    assert!(annotate(&second).contains("Trigger: dump after the switch\n"));

    served.send("w");
    let (last, success) = served.quit();
    assert!(success, "the run ended with 0");
    assert_eq!(
        last, expected,
        "the program computed what it computes natively"
    );
    let report = annotate(&dir.join(format!("callgrind.out.{pid}")));
    assert!(
        report.contains("Trigger: Program termination\n"),
        "{report}"
    );
    assert!(
        !control(&callgrind_control, &[]).contains(&name),
        "the ended run is not listed"
    );
}

#[test]
fn kill_ends_the_run_with_its_profile() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let dir = dir.path();
    let program = build("served.c", Kind::C, dir);
    let shims = shims(dir);
    let callgrind_control = shims.join("callgrind_control");
    let mut valgrind = Command::new(shims.join("valgrind"));
    valgrind.arg("--tool=callgrind").arg(&program);
    let mut served = Served::start(&mut valgrind, dir);
    let command_line = program.display().to_string();
    let pid = listed_pid(&callgrind_control, &command_line);
    // A server waiting for requests is killed.
    waiting_status(&callgrind_control, &pid.to_string());
    let killed = control(&callgrind_control, &["-k", &pid.to_string()]);
    assert_eq!(killed, format!("PID {pid}: {command_line}\n  OK.\n"));
    let status = served.child.wait().expect("the run ends");
    // As a program killed by SIGKILL: 128 + 9.
    assert_eq!(status.code(), Some(137), "{status:?}");
    annotate(&dir.join(format!("callgrind.out.{pid}")));
}

/// `text` with every number (digits and commas) as `N`.
fn shape(text: &str) -> String {
    let mut out = String::new();
    let mut in_number = false;
    for c in text.chars() {
        let digit = c.is_ascii_digit() || (in_number && c == ',');
        if digit && !in_number {
            out.push('N');
        }
        if !digit {
            out.push(c);
        }
        in_number = digit;
    }
    out
}

/// The outputs of `callgrind_control` (`control`) for the run of
/// `command_line`, numbers as `N`: the listing, the status, the commands
/// (two dumps), the status when switched off, and two errors; and the
/// run's process id.
fn session(control_command: &Path, command_line: &str) -> (u32, Vec<String>) {
    let pid_number = listed_pid(control_command, command_line);
    let pid = pid_number.to_string();
    let listing = control(control_command, &[])
        .lines()
        .filter(|line| line.ends_with(&format!(": {command_line}")))
        .collect::<Vec<_>>()
        .join("\n");
    let mut outputs = vec![shape(&listing)];
    for args in [
        &["-s"][..],
        &["-d"],
        &["-d", "hint"],
        &["-z"],
        &["-i", "off"],
        &["-s"],
        &["-i", "on"],
    ] {
        let mut args = args.to_vec();
        args.push(&pid);
        outputs.push(shape(&control(control_command, &args)));
    }
    for args in [["-x"], ["nosuch"]] {
        let name = control_command.display().to_string();
        outputs.push(control(control_command, &args).replace(&name, "callgrind_control"));
    }
    (pid_number, outputs)
}

/// The `desc: Trigger:` lines of the two numbered dumps of `pid` in `dir`.
fn triggers(dir: &Path, pid: u32) -> Vec<String> {
    (1..=2)
        .map(|n| {
            let file = dir.join(format!("callgrind.out.{pid}.{n}"));
            let text = std::fs::read_to_string(&file)
                .unwrap_or_else(|error| panic!("{}: {error}", file.display()));
            text.lines()
                .find(|line| line.starts_with("desc: Trigger:"))
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

#[test]
fn the_outputs_are_valgrinds() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let dir = dir.path();
    let program = build("served.c", Kind::C, dir);
    let shims = shims(dir);
    let command_line = format!("{} busy", program.display());

    let mut cgx = Command::new(shims.join("valgrind"));
    cgx.arg("--tool=callgrind").arg(&program).arg("busy");
    let served = Served::start(&mut cgx, dir);
    let (our_pid, ours) = session(&shims.join("callgrind_control"), &command_line);
    served.quit();

    let mut valgrind = Command::new("/usr/bin/valgrind");
    valgrind.arg("--tool=callgrind").arg(&program).arg("busy");
    let served = Served::start(&mut valgrind, dir);
    let (their_pid, theirs) = session(Path::new("/usr/bin/callgrind_control"), &command_line);
    served.quit();
    assert_eq!(ours, theirs);
    assert_eq!(triggers(dir, our_pid), triggers(dir, their_pid));
    assert_eq!(
        triggers(dir, our_pid),
        ["desc: Trigger: dump", "desc: Trigger: dump hint"]
    );
}
