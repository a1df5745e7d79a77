//! Signals sent to cgx reach the program, as under Valgrind (where the two
//! are one process): SIGTERM, SIGHUP and SIGINT sent with `kill` to cgx
//! end the program (`signals.c`, which waits) by that signal, its profile
//! is written and cgx exits 128 + N; SIGUSR1 reaches its handler, and the
//! program goes on and exits 0. `timeout` ends the run the same way. A
//! program that stops itself (`stopper.c`, alone or with two threads that
//! compute) stays stopped until SIGCONT, sent to it or to cgx; in a real terminal (tmux), Ctrl-Z stops the job
//! (`ticker.c` and cgx: the shell says `Stopped`, no tick comes), `fg`
//! continues it, Ctrl-C ends it with its profile. And a
//! program that hands over to another with `execve` without
//! `--trace-children=yes` (a launcher script) leaves the profile of what
//! ran before, and one line on stderr naming the program that took over and
//! the option. Timer signals that land in the middle of blocks (with the
//! simulations on) leave the interrupted function's costs Valgrind's. A
//! program killed with SIGKILL at any moment of its run under cgx, its
//! start included (as `callgrind_control -k` does), ends the run with
//! status 137 and a readable profile, never an error of cgx (killed at its
//! `execve`, before its first instruction, it leaves no profile and cgx
//! says so). A program writing into a pipe closed by its reader (`yes |
//! head -1`) dies of SIGPIPE as natively, with its profile.

use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use cgx_tests::cli;
use cgx_tests::run::{build, read, shell_status, total_ir, Kind};

/// `cgx`'s arguments for a run whose profile goes to [`out_file`] of `dir`
/// (`-q` with `quiet`), before the program.
fn run_args(dir: &Path, quiet: bool) -> Vec<String> {
    let mut args = vec!["run".to_string()];
    if quiet {
        args.push("-q".into());
    }
    args.push(format!("--callgrind-out-file={}", out_file(dir).display()));
    args
}

/// `cgx run -q --callgrind-out-file=DIR/callgrind.out PROGRAM ARGS`,
/// started with stdout piped.
fn start_cgx(program: &Path, args: &[&str], dir: &Path) -> Child {
    Command::new(cli::binary())
        .args(run_args(dir, true))
        .arg(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cgx starts")
}

/// Where the profile of a run in `dir` goes.
fn out_file(dir: &Path) -> PathBuf {
    dir.join("callgrind.out")
}

/// Reads the first line the program prints.
fn first_line(child: &mut Child) -> String {
    let stdout = child.stdout.as_mut().expect("stdout is piped");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("the program prints");
    line
}

/// Sends `signal` (a name `kill` knows) to process `pid`.
fn kill(signal: &str, pid: u32) {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -{signal} {pid}");
}

/// Waits for `child`; returns its exit status as a shell gives it, the rest
/// of its stdout, and its stderr.
fn finish(mut child: Child) -> (i32, String, String) {
    let mut stdout = String::new();
    if let Some(mut out) = child.stdout.take() {
        out.read_to_string(&mut stdout).expect("stdout is read");
    }
    let mut stderr = String::new();
    if let Some(mut err) = child.stderr.take() {
        err.read_to_string(&mut stderr).expect("stderr is read");
    }
    let status = child.wait().expect("cgx ends");
    (shell_status(status), stdout, stderr)
}

/// Asserts that the run in `dir` wrote a complete profile in which the
/// program's `main` ran.
fn assert_profile_of_main(dir: &Path, context: &str) {
    let file = out_file(dir);
    assert!(file.exists(), "{context}: no profile");
    let profile = read(&file);
    let has_main = profile.parts.iter().any(|part| {
        part.functions()
            .any(|(function, _)| profile.names.get(function.name) == "main")
    });
    assert!(has_main, "{context}: the profile has no main");
}

#[test]
fn signals_sent_to_cgx_end_the_program_and_the_profile_is_written() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("signals.c", Kind::C, dir.path());
    for (signal, number) in [("TERM", 15), ("HUP", 1), ("INT", 2)] {
        let run_dir = dir.path().join(signal);
        fs::create_dir_all(&run_dir).expect("a folder");
        let mut cgx = start_cgx(&program, &[], &run_dir);
        assert_eq!(first_line(&mut cgx), "ready\n");
        kill(signal, cgx.id());
        let (status, stdout, stderr) = finish(cgx);
        let context = format!("SIG{signal} to cgx");
        assert_eq!(status, 128 + number, "{context}: status\nstderr:\n{stderr}");
        assert_eq!(stdout, "", "{context}: the program was ended, not told");
        assert_profile_of_main(&run_dir, &context);
        println!("{context}: exit {status}, profile written");
    }
}

#[test]
fn a_program_writing_into_a_closed_pipe_dies_of_sigpipe_as_natively() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    // `yes | head -1`: the reader goes after one line.
    let ended = |mut child: Child| {
        first_line(&mut child);
        drop(child.stdout.take());
        finish(child)
    };
    let native = Command::new("yes")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("yes starts");
    let (status, _, stderr) = ended(native);
    assert_eq!(
        (status, stderr.as_str()),
        (128 + 13, ""),
        "the test's premise"
    );
    let (status, _, stderr) = ended(start_cgx(Path::new("yes"), &[], dir.path()));
    assert_eq!(status, 128 + 13, "under cgx: status\nstderr:\n{stderr}");
    assert_eq!(stderr, "", "under cgx: the program wrote no error");
    assert!(total_ir(&read(&out_file(dir.path()))) > 0, "a profile");
}

/// The processes cgx started (the children of any of its threads).
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|text| {
            text.split_whitespace()
                .filter_map(|pid| pid.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

#[test]
fn sigkill_to_the_program_at_any_moment_ends_the_run_with_its_profile() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("signals.c", Kind::C, dir.path());
    for delay_ms in (0..=60).step_by(4) {
        let run_dir = dir.path().join(delay_ms.to_string());
        fs::create_dir_all(&run_dir).expect("a folder");
        let cgx = start_cgx(&program, &[], &run_dir);
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        // The program, once cgx's child has become it (before, cgx's own
        // start is killed, which ends the run with a message).
        let program_pid = || {
            children_of(cgx.id()).into_iter().find(|pid| {
                fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|comm| comm == "signals\n")
            })
        };
        let start = std::time::Instant::now();
        let pid = loop {
            if let Some(pid) = program_pid() {
                break pid;
            }
            assert!(start.elapsed().as_secs() < 10, "cgx started its program");
            std::thread::sleep(std::time::Duration::from_micros(200));
        };
        kill("KILL", pid);
        let (status, _, stderr) = finish(cgx);
        let context = format!("SIGKILL to the program after {delay_ms} ms");
        assert_eq!(status, 137, "{context}: status\nstderr:\n{stderr}");
        let file = out_file(&run_dir);
        // Killed at its exec, before its first instruction: nothing ran,
        // and cgx says so.
        let before_start = format!(
            "cgx: {}: killed by signal 9 before it started\n",
            program.display()
        );
        if stderr == before_start {
            assert!(!file.exists(), "{context}: a profile of nothing");
            continue;
        }
        assert!(!stderr.contains("cgx:"), "{context}: no error\n{stderr}");
        assert!(file.exists(), "{context}: no profile");
        read(&file);
    }
}

#[test]
fn a_signal_the_program_handles_reaches_its_handler() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("signals.c", Kind::C, dir.path());
    let mut cgx = start_cgx(&program, &[], dir.path());
    assert_eq!(first_line(&mut cgx), "ready\n");
    kill("USR1", cgx.id());
    let (status, stdout, stderr) = finish(cgx);
    assert_eq!(status, 0, "stderr:\n{stderr}");
    assert_eq!(stdout, "got SIGUSR1\n");
    assert_profile_of_main(dir.path(), "SIGUSR1 to cgx");
}

#[test]
fn timeout_ends_the_program_and_the_profile_is_written() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("signals.c", Kind::C, dir.path());
    let output = Command::new("timeout")
        .arg("2")
        .arg(cli::binary())
        .args(run_args(dir.path(), true))
        .arg(&program)
        .stdin(Stdio::null())
        .output()
        .expect("timeout runs");
    // timeout's own status when the time ran out.
    assert_eq!(
        output.status.code(),
        Some(124),
        "stderr:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout), "ready\n");
    assert_profile_of_main(dir.path(), "timeout 2 cgx run");
}

#[test]
fn an_untraced_exec_leaves_a_profile_and_says_so() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let launcher = dir.path().join("launcher");
    fs::write(&launcher, "#!/bin/sh\nexec /bin/echo launched \"$@\"\n").expect("a script");
    fs::set_permissions(&launcher, fs::Permissions::from_mode(0o755)).expect("chmod 755");
    let output = Command::new(cli::binary())
        .args(run_args(dir.path(), false))
        .arg(&launcher)
        .arg("x")
        .stdin(Stdio::null())
        .output()
        .expect("cgx runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "stderr:\n{stderr}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "launched x\n");
    let hints: Vec<&str> = stderr
        .lines()
        .filter(|line| line.contains("--trace-children=yes"))
        .collect();
    assert_eq!(hints.len(), 1, "stderr:\n{stderr}");
    assert!(hints[0].contains("/echo"), "{}", hints[0]);
    // The profile of the shell that ran the script, up to its execve.
    let total = total_ir(&read(&out_file(dir.path())));
    assert!(total > 10_000, "the profile has {total} instructions");
    // With -q the line is not printed.
    let quiet = Command::new(cli::binary())
        .args(run_args(dir.path(), true))
        .arg(&launcher)
        .stdin(Stdio::null())
        .output()
        .expect("cgx runs");
    assert_eq!(String::from_utf8_lossy(&quiet.stderr), "");
}

/// The state letter of process `pid` (`/proc/PID/stat`'s third field: `T`
/// stopped, `t` stopped by its tracer, `S` sleeping, ...).
fn state_of(pid: u32) -> char {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after_name = stat.rsplit(')').next().unwrap_or("");
    after_name.trim_start().chars().next().unwrap_or('?')
}

/// Waits up to ten seconds for `done`; whether it came.
fn eventually(mut done: impl FnMut() -> bool) -> bool {
    for _ in 0..100 {
        if done() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    false
}

#[test]
fn a_program_that_stops_itself_stays_stopped_until_sigcont() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("stopper.c", Kind::C, dir.path());
    for (continue_whom, threads) in [("program", "0"), ("cgx", "0"), ("program", "2")] {
        let run_dir = dir.path().join(format!("{continue_whom}-{threads}"));
        fs::create_dir_all(&run_dir).expect("a folder");
        let mut cgx = start_cgx(&program, &[threads], &run_dir);
        let line = first_line(&mut cgx);
        let pid: u32 = line
            .trim()
            .strip_prefix("stopping ")
            .and_then(|pid| pid.parse().ok())
            .unwrap_or_else(|| panic!("the program printed {line:?}"));
        // Stopped (its tracer keeps it so), and it stays stopped.
        assert!(
            eventually(|| state_of(pid) == 't'),
            "state {}",
            state_of(pid)
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
        assert_eq!(state_of(pid), 't');
        assert!(cgx.try_wait().expect("cgx is waited for").is_none());
        // cgx stays awake: nobody asked it to stop.
        assert_ne!(state_of(cgx.id()), 'T');
        let target = if continue_whom == "program" {
            pid
        } else {
            cgx.id()
        };
        kill("CONT", target);
        let (status, stdout, stderr) = finish(cgx);
        assert_eq!(
            status, 0,
            "SIGCONT to the {continue_whom}: stderr:\n{stderr}"
        );
        assert_eq!(stdout, "continued\n");
        assert_profile_of_main(&run_dir, "stopper");
        println!("stopper {threads}: stopped until SIGCONT to the {continue_whom}");
    }
}

/// A tmux server of the test's own (its socket), killed when dropped, even
/// when the test fails.
struct TmuxServer {
    socket: String,
}

impl Drop for TmuxServer {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-S", &self.socket, "kill-server"])
            .output();
    }
}

/// Runs tmux with `args`; returns what it printed.
fn tmux(args: &[&str]) -> String {
    let output = Command::new("tmux").args(args).output().expect("tmux runs");
    assert!(output.status.success(), "tmux {args:?}: {output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn ctrl_z_and_fg_in_a_terminal() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("ticker.c", Kind::C, dir.path());
    let session = format!("cgx-test-{}", std::process::id());
    let socket = dir.path().join("tmux.socket");
    let server = TmuxServer {
        socket: socket.to_string_lossy().into_owned(),
    };
    let base = ["-S", server.socket.as_str()];
    let with = |rest: &[&str]| -> String {
        let args: Vec<&str> = base.iter().copied().chain(rest.iter().copied()).collect();
        tmux(&args)
    };
    with(&[
        "new-session",
        "-d",
        "-s",
        &session,
        "-x",
        "120",
        "-y",
        "40",
        "bash --norc",
    ]);
    let screen = || with(&["capture-pane", "-p", "-t", &session]);
    let command = format!(
        "{} {} {}",
        cli::binary().display(),
        run_args(dir.path(), true).join(" "),
        program.display()
    );
    with(&["send-keys", "-t", &session, &command, "Enter"]);
    assert!(eventually(|| screen().contains("tick 5")), "{}", screen());
    with(&["send-keys", "-t", &session, "C-z"]);
    assert!(eventually(|| screen().contains("Stopped")), "{}", screen());
    // No tick while stopped.
    let last_tick = |text: &str| -> Option<u32> {
        text.lines()
            .filter_map(|line| line.trim().strip_prefix("tick ")?.parse().ok())
            .max()
    };
    let stopped_at = last_tick(&screen());
    std::thread::sleep(std::time::Duration::from_millis(800));
    assert_eq!(last_tick(&screen()), stopped_at, "{}", screen());
    with(&["send-keys", "-t", &session, "fg", "Enter"]);
    assert!(
        eventually(|| last_tick(&screen()) > stopped_at.map(|tick| tick + 3)),
        "{}",
        screen()
    );
    with(&["send-keys", "-t", &session, "C-c"]);
    // The shell's status of the job, killed by SIGINT.
    with(&["send-keys", "-t", &session, "echo final=$?", "Enter"]);
    assert!(
        eventually(|| screen().contains("final=130")),
        "{}",
        screen()
    );
    assert_profile_of_main(dir.path(), "ticker under tmux");
}

#[test]
fn timer_signals_in_the_middle_of_blocks_leave_the_interrupted_functions_costs_exact() {
    use cgx_tests::run::{run_alone_and_profiled, self_costs_of};
    // `alarm.c`: a SIGALRM every millisecond while `sweep` runs long
    // straight-line blocks; under cgx with the cache simulation the
    // signals land in the middle of its blocks hundreds of times. What ran
    // before each is reported before the handler, the rest after it: the
    // function's own instructions and accesses are Valgrind's exactly.
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("alarm.c", Kind::C, dir.path());
    let options = ["--cache-sim=yes", "--branch-sim=yes"];
    let (_, valgrind, cgx) = run_alone_and_profiled(&program, &options, 0, 0, dir.path());
    let events = ["Ir", "Dr", "Dw", "Bc", "Bi"];
    // (gcc may name it `sweep.constprop.0`.)
    let sweep = |profile| {
        self_costs_of(&profile, &events)
            .into_iter()
            .find(|(name, _)| name.starts_with("sweep"))
    };
    let (expected, actual) = (sweep(valgrind.profile()), sweep(cgx.profile()));
    assert!(expected.is_some(), "Valgrind's profile has sweep");
    assert_eq!(actual, expected, "sweep's {events:?}");
    assert!(
        cgx.stdout.ends_with(" 1\n"),
        "a signal came: {}",
        cgx.stdout
    );
}
