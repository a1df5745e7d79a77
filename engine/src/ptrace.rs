//! Thin wrappers over the ptrace and wait requests both backends make.

use std::io;

use crate::error::{Error, Result};

/// Opens `/proc/TID/mem`, the memory of thread `tid`'s process, to read
/// (and, with `write`, to write: a tracer may write into code).
pub(crate) fn open_memory(tid: i32, write: bool) -> Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(write)
        .open(format!("/proc/{tid}/mem"))
        .map_err(|source| Error::Os {
            operation: "open /proc/PID/mem",
            source,
        })
}

/// The longest string [`read_c_string`] reads (Linux's PATH_MAX).
const MAX_C_STRING: usize = 4096;

/// Reads as many bytes at `addr` of a tracee's `memory` (its
/// [`open_memory`]) as are mapped (code may end at a page before an
/// unmapped one); returns how many were read.
pub(crate) fn read_available(memory: &std::fs::File, addr: u64, buffer: &mut [u8]) -> usize {
    use std::os::unix::fs::FileExt;
    let mut got = 0;
    while got < buffer.len() {
        match memory.read_at(&mut buffer[got..], addr.wrapping_add(got as u64)) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    got
}

/// The NUL-terminated string at `addr` of a tracee's `memory` (up to
/// [`MAX_C_STRING`] bytes, as far as it is readable; not UTF-8 replaced).
pub(crate) fn read_c_string(memory: &std::fs::File, addr: u64) -> String {
    let mut text = Vec::new();
    let mut chunk = [0u8; 256];
    while text.len() < MAX_C_STRING {
        let at = addr.wrapping_add(text.len() as u64);
        let got = read_available(memory, at, &mut chunk);
        let part = &chunk[..got];
        match part.iter().position(|&byte| byte == 0) {
            Some(end) => {
                text.extend_from_slice(&part[..end]);
                break;
            }
            None if got == 0 => break,
            None => text.extend_from_slice(part),
        }
    }
    String::from_utf8_lossy(&text).into_owned()
}

/// The program name a thread about to make the system call of `regs`
/// gives `execve` or `execveat` (read from its `memory`); `None` for any
/// other system call.
pub(crate) fn exec_name(memory: &std::fs::File, regs: &Regs) -> Option<String> {
    let name = match i64::try_from(regs.rax).ok()? {
        libc::SYS_execve => regs.rdi,
        libc::SYS_execveat => regs.rsi,
        _ => return None,
    };
    Some(read_c_string(memory, name))
}

/// Registers of a stopped thread.
pub(crate) type Regs = libc::user_regs_struct;

/// Resumes `tid` until its next stop, delivering `signal` (0: none).
pub(crate) fn cont(tid: i32, signal: i32) -> Result<()> {
    // SAFETY: ptrace on a stopped tracee; no pointers.
    if unsafe { libc::ptrace(libc::PTRACE_CONT, tid, 0, signal) } != 0 {
        return Err(Error::last_os("ptrace(PTRACE_CONT)"));
    }
    Ok(())
}

/// Resumes `tid` for one instruction, delivering `signal` (0: none).
pub(crate) fn single_step(tid: i32, signal: i32) -> Result<()> {
    // SAFETY: ptrace on a stopped tracee; no pointers.
    if unsafe { libc::ptrace(libc::PTRACE_SINGLESTEP, tid, 0, signal) } != 0 {
        return Err(Error::last_os("ptrace(PTRACE_SINGLESTEP)"));
    }
    Ok(())
}

/// Detaches from `tid`, which runs on untraced.
pub(crate) fn detach(tid: i32) -> Result<()> {
    // SAFETY: ptrace on a stopped tracee; no pointers.
    if unsafe { libc::ptrace(libc::PTRACE_DETACH, tid, 0, 0) } != 0 {
        return Err(Error::last_os("ptrace(PTRACE_DETACH)"));
    }
    Ok(())
}

/// The registers of stopped `tid`.
pub(crate) fn regs(tid: i32) -> Result<Regs> {
    // SAFETY: user_regs_struct is plain data; ptrace fills it.
    unsafe {
        let mut regs: Regs = std::mem::zeroed();
        if libc::ptrace(libc::PTRACE_GETREGS, tid, 0, &mut regs as *mut Regs) != 0 {
            return Err(Error::last_os("ptrace(PTRACE_GETREGS)"));
        }
        Ok(regs)
    }
}

/// Sets the registers of stopped `tid`.
pub(crate) fn set_regs(tid: i32, regs: &Regs) -> Result<()> {
    // SAFETY: ptrace reads a valid user_regs_struct.
    if unsafe { libc::ptrace(libc::PTRACE_SETREGS, tid, 0, regs as *const Regs) } != 0 {
        return Err(Error::last_os("ptrace(PTRACE_SETREGS)"));
    }
    Ok(())
}

/// Sets the ptrace options of stopped `tid`.
pub(crate) fn set_options(tid: i32, options: i32) -> Result<()> {
    // SAFETY: ptrace on a stopped tracee; no pointers.
    if unsafe { libc::ptrace(libc::PTRACE_SETOPTIONS, tid, 0, options) } != 0 {
        return Err(Error::last_os("ptrace(PTRACE_SETOPTIONS)"));
    }
    Ok(())
}

/// The message of a ptrace event stop (new thread id, former thread id).
pub(crate) fn event_message(tid: i32) -> Result<u64> {
    let mut message: libc::c_ulong = 0;
    // SAFETY: ptrace writes one unsigned long.
    if unsafe {
        libc::ptrace(
            libc::PTRACE_GETEVENTMSG,
            tid,
            0,
            &mut message as *mut libc::c_ulong,
        )
    } != 0
    {
        return Err(Error::last_os("ptrace(PTRACE_GETEVENTMSG)"));
    }
    Ok(message)
}

/// What `PTRACE_GETSIGINFO` says of a signal stop.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SignalInfo {
    /// `si_code`.
    pub code: i32,
    /// `si_addr` (the faulting address of SIGSEGV/SIGBUS).
    pub addr: u64,
    /// `si_pid`: the process that sent it, for a signal sent by one.
    pub sender: i32,
}

/// The signal information of a signal-delivery-stop; `None` for a group-stop
/// (PTRACE_GETSIGINFO fails with EINVAL).
pub(crate) fn signal_info(tid: i32) -> Result<Option<SignalInfo>> {
    // SAFETY: siginfo_t is plain data; ptrace fills it.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        if libc::ptrace(
            libc::PTRACE_GETSIGINFO,
            tid,
            0,
            &mut info as *mut libc::siginfo_t,
        ) != 0
        {
            let error = io::Error::last_os_error();
            if error.raw_os_error() == Some(libc::EINVAL) {
                return Ok(None);
            }
            return Err(Error::Os {
                operation: "ptrace(PTRACE_GETSIGINFO)",
                source: error,
            });
        }
        Ok(Some(SignalInfo {
            code: info.si_code,
            addr: info.si_addr() as u64,
            sender: info.si_pid(),
        }))
    }
}

/// `waitpid` on `pid`, retried on EINTR.
pub(crate) fn wait(pid: i32) -> Result<i32> {
    crate::launch::wait(pid)
}

/// Waits for any tracee (or child) of the calling thread: `(tid, status)`,
/// `None` when there is none left (ECHILD). Retried on EINTR.
pub(crate) fn wait_any() -> Result<Option<(i32, i32)>> {
    wait_any_with(0)
}

/// A tracee (or child) of the calling thread that has changed state, if
/// one has: `(tid, status)`; `None` when none has yet, or there is none
/// left ([`wait_any`] then tells which). Retried on EINTR.
pub(crate) fn poll_any() -> Result<Option<(i32, i32)>> {
    wait_any_with(libc::WNOHANG)
}

/// `waitpid` for any tracee of the calling thread with `flags` besides
/// `__WALL | __WNOTHREAD`: `None` for no child left, or none changed with
/// `WNOHANG`.
fn wait_any_with(flags: i32) -> Result<Option<(i32, i32)>> {
    loop {
        let mut status = 0;
        // __WNOTHREAD: only this thread's tracees, not those of other
        // tracer threads in the process.
        let flags = libc::__WALL | libc::__WNOTHREAD | flags;
        // SAFETY: `status` is a valid out-pointer.
        let got = unsafe { libc::waitpid(-1, &mut status, flags) };
        if got > 0 {
            return Ok(Some((got, status)));
        }
        if got == 0 {
            return Ok(None);
        }
        let error = io::Error::last_os_error();
        match error.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::ECHILD) => return Ok(None),
            _ => {
                return Err(Error::Os {
                    operation: "waitpid",
                    source: error,
                })
            }
        }
    }
}

/// The thread group (process) of thread `tid`, from `/proc/TID/status`.
pub(crate) fn thread_group(tid: i32) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("Tgid:"))
        .and_then(|value| value.trim().parse().ok())
}

/// `served`, the outcome of serving thread `tid`, unless it failed
/// because `tid` is being killed ([`killed`]): the thread is then let go
/// (a thread left in a ptrace stop may not act on its `SIGKILL`), the run
/// goes on, and `waitpid` reports the thread's end (unless the failed
/// service took that report: [`vanished`]). Whether it was killed.
pub(crate) fn unless_killed(tid: i32, served: Result<()>) -> Result<bool> {
    match served {
        Err(error) if !killed(tid) => Err(error),
        Err(_) => {
            // It may already be on its way out: then there is nothing to
            // resume.
            let _ = cont(tid, 0);
            Ok(true)
        }
        Ok(()) => Ok(false),
    }
}

/// The end of a run whose traced processes are all gone (`waitpid` has no
/// child left) while the initial process's end is unknown: a run in which
/// a thread was killed while served ([`unless_killed`]) ends as killed by
/// `SIGKILL` (the service took the report of the end), any other is an
/// error.
pub(crate) fn vanished(killed: bool) -> Result<crate::Exit> {
    match killed {
        true => Ok(crate::Exit::Signal {
            signal: libc::SIGKILL,
            core_dumped: false,
        }),
        false => Err(Error::Unexpected(
            "the traced processes vanished without an exit status".into(),
        )),
    }
}

/// Whether thread `tid`, whose service just failed, is being killed (a
/// `SIGKILL` from outside, `callgrind_control -k`): it is gone, a zombie,
/// exiting, or has `SIGKILL` pending. Its exit status then comes from
/// `waitpid` like any other exit; an error serving a thread that lives
/// fails the run.
pub(crate) fn killed(tid: i32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status"));
    let stat = std::fs::read_to_string(format!("/proc/{tid}/stat"));
    match (status, stat) {
        (Ok(status), Ok(stat)) => dying(&status) || exiting(&stat),
        _ => true,
    }
}

/// Whether a `/proc/TID/status` text shows a thread that is ending: state
/// zombie or dead, or `SIGKILL` pending for it or its process.
fn dying(status: &str) -> bool {
    const SIGKILL_BIT: u64 = 1 << (libc::SIGKILL - 1);
    status.lines().any(|line| {
        let (name, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.trim();
        match name {
            "State" => value.starts_with('Z') || value.starts_with('X'),
            "SigPnd" | "ShdPnd" => {
                u64::from_str_radix(value, 16).is_ok_and(|mask| mask & SIGKILL_BIT != 0)
            }
            _ => false,
        }
    })
}

/// Whether a `/proc/TID/stat` text shows a thread in its exit (the
/// kernel's `PF_EXITING` in the flags, the ninth field).
fn exiting(stat: &str) -> bool {
    const PF_EXITING: u64 = 0x4;
    // The command name, in parentheses, may hold spaces: fields count
    // from after its closing one.
    let Some((_, after_name)) = stat.rsplit_once(')') else {
        return false;
    };
    after_name
        .split_whitespace()
        .nth(6)
        .and_then(|flags| flags.parse::<u64>().ok())
        .is_some_and(|flags| flags & PF_EXITING != 0)
}

/// Where thread `tid` is while it does not run (blocked in a system call,
/// or stopped), from `/proc/TID/syscall`: its instruction pointer; `None`
/// while it runs or when that cannot be read.
pub(crate) fn blocked_at(tid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{tid}/syscall")).ok()?;
    parse_blocked_at(&text)
}

/// The instruction pointer in a `/proc/TID/syscall` text: the last field
/// of `NR ARG1..ARG6 SP PC` (blocked in a system call) or `-1 SP PC`
/// (blocked otherwise); `None` for `running`.
fn parse_blocked_at(text: &str) -> Option<u64> {
    let fields: Vec<&str> = text.split_whitespace().collect();
    if !matches!(fields.len(), 3 | 9) {
        return None;
    }
    let pc = fields.last()?.strip_prefix("0x")?;
    u64::from_str_radix(pc, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This process's memory, as a tracer reads a tracee's.
    fn own_memory() -> std::fs::File {
        // SAFETY: getpid takes no arguments.
        let pid = unsafe { libc::getpid() };
        match open_memory(pid, false) {
            Ok(memory) => memory,
            Err(error) => panic!("/proc/PID/mem of this process: {error}"),
        }
    }

    #[test]
    fn polling_tells_a_running_child_from_one_that_ended() {
        // A thread of its own: the waits see only its children.
        std::thread::spawn(|| {
            let mut child = std::process::Command::new("cat")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap();
            assert_eq!(poll_any().unwrap(), None, "cat waits for its input");
            drop(child.stdin.take());
            let (pid, status) = wait_any().unwrap().unwrap();
            assert_eq!(pid, child.id() as i32);
            assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
            assert!(child.wait().is_err(), "reaped already");
            assert_eq!(poll_any().unwrap(), None, "no child left");
            assert_eq!(wait_any().unwrap(), None, "no child left");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_c_string_ends_at_its_nul_or_where_memory_ends() {
        let memory = own_memory();
        let text = b"/bin/true\0after";
        assert_eq!(read_c_string(&memory, text.as_ptr() as u64), "/bin/true");
        // Address 0 is never mapped: nothing.
        assert_eq!(read_c_string(&memory, 0), "");
        let mut bytes = [0u8; 4];
        assert_eq!(read_available(&memory, text.as_ptr() as u64, &mut bytes), 4);
        assert_eq!(&bytes, b"/bin");
        assert_eq!(read_available(&memory, 0, &mut bytes), 0);
    }

    #[test]
    fn execve_and_execveat_name_their_program_and_other_calls_none() {
        let memory = own_memory();
        let name = b"./prog\0";
        // SAFETY: user_regs_struct is plain data; all zeros is valid.
        let mut regs: Regs = unsafe { std::mem::zeroed() };
        regs.rax = libc::SYS_execve as u64;
        regs.rdi = name.as_ptr() as u64;
        assert_eq!(exec_name(&memory, &regs).as_deref(), Some("./prog"));
        // execveat(dirfd, pathname, ...): the name is its second argument.
        regs.rax = libc::SYS_execveat as u64;
        regs.rsi = name.as_ptr() as u64;
        regs.rdi = 3;
        assert_eq!(exec_name(&memory, &regs).as_deref(), Some("./prog"));
        regs.rax = libc::SYS_getpid as u64;
        assert_eq!(exec_name(&memory, &regs), None);
    }

    #[test]
    fn a_thread_is_dying_when_killed_or_a_zombie() {
        let live = "Name:\tgzip\nState:\tt (tracing stop)\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000000\n";
        assert!(!dying(live));
        assert!(dying(&live.replace("t (tracing stop)", "Z (zombie)")));
        assert!(dying(&live.replace("t (tracing stop)", "X (dead)")));
        // SIGKILL (9) pending for the process or the thread.
        assert!(dying(&live.replace(
            "ShdPnd:\t0000000000000000",
            "ShdPnd:\t0000000000000100"
        )));
        assert!(dying(&live.replace(
            "SigPnd:\t0000000000000000",
            "SigPnd:\t0000000000000100"
        )));
        // SIGTERM (15) pending is no kill yet.
        assert!(!dying(&live.replace(
            "ShdPnd:\t0000000000000000",
            "ShdPnd:\t0000000000004000"
        )));
    }

    #[test]
    fn an_exiting_thread_shows_in_its_stat_flags() {
        // pid (comm) state ppid pgrp session tty tpgid flags ...
        let running = "123 (a (b) c) R 1 123 123 0 -1 4194560 0 0";
        assert!(!exiting(running));
        assert!(exiting(&running.replace("4194560", "4194564")));
        assert!(!exiting("garbage"));
    }

    #[test]
    fn a_run_whose_processes_vanished_was_killed_only_if_a_kill_was_seen() {
        assert!(matches!(
            vanished(true),
            Ok(crate::Exit::Signal {
                signal: libc::SIGKILL,
                core_dumped: false
            })
        ));
        assert!(vanished(false).is_err());
    }

    #[test]
    fn only_a_thread_that_is_gone_or_ending_counts_as_killed() {
        assert!(!killed(std::process::id() as i32), "this process lives");
        // No such thread: gone.
        assert!(killed(i32::MAX));
    }

    #[test]
    fn a_blocked_thread_shows_where_it_is() {
        let in_call = "202 0x55d0c0a0 0x80 0x2 0x0 0x0 0x0 0x7ffd3a1c8e48 0x7f3f1c2a4e2d\n";
        assert_eq!(parse_blocked_at(in_call), Some(0x7f3f_1c2a_4e2d));
        assert_eq!(
            parse_blocked_at("-1 0x7ffd3a1c8e48 0x401000\n"),
            Some(0x40_1000)
        );
        assert_eq!(parse_blocked_at("running\n"), None);
        assert_eq!(parse_blocked_at(""), None);
    }
}
