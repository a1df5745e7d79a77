//! Starting a program under ptrace: resolve it like a shell, pin the tracer to
//! one CPU, fork, seize the child (`PTRACE_SEIZE`) and exec in it (with the
//! dispositions of the signals cgx relays restored, see `relay`).

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::relay::{Relay, RELAYED};

/// A program to run under the tracer, with its arguments. It gets the user's
/// stdin, stdout, stderr, environment and working directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command {
    program: OsString,
    args: Vec<OsString>,
}

impl Command {
    /// A command that runs `program` (a path, or a name looked up on `PATH` when it
    /// has no `/`) without arguments.
    pub fn new(program: impl Into<OsString>) -> Command {
        Command {
            program: program.into(),
            args: Vec::new(),
        }
    }

    /// Adds arguments (`argv[1..]`).
    pub fn args<I, S>(mut self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// The program as given.
    pub fn program(&self) -> &OsStr {
        &self.program
    }
}

/// Finds the file a shell would execute for `program`: the path itself when it
/// contains a `/`, else the first executable regular file of that name in the
/// folders of `PATH`. Errors are [`Error::NotFound`] (exit 127) and
/// [`Error::NotExecutable`] (exit 126).
pub fn resolve(program: &OsStr) -> Result<PathBuf> {
    let not_found = || Error::NotFound {
        program: PathBuf::from(program),
    };
    if program.is_empty() {
        return Err(not_found());
    }
    if program.as_bytes().contains(&b'/') {
        let path = PathBuf::from(program);
        return match check_executable(&path) {
            Candidate::Executable => Ok(path),
            Candidate::Missing => Err(not_found()),
            Candidate::NotExecutable(reason) => Err(Error::NotExecutable { path, reason }),
        };
    }
    let search = std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/usr/bin:/bin"));
    let mut first_denied = None;
    for folder in std::env::split_paths(&search) {
        // An empty PATH entry means the working directory.
        let folder = if folder.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            folder
        };
        let path = folder.join(program);
        match check_executable(&path) {
            Candidate::Executable => return Ok(path),
            Candidate::Missing => {}
            Candidate::NotExecutable(reason) => {
                first_denied.get_or_insert((path, reason));
            }
        }
    }
    match first_denied {
        Some((path, reason)) => Err(Error::NotExecutable { path, reason }),
        None => Err(not_found()),
    }
}

enum Candidate {
    Executable,
    Missing,
    NotExecutable(&'static str),
}

fn check_executable(path: &Path) -> Candidate {
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == io::ErrorKind::PermissionDenied => {
            return Candidate::NotExecutable("permission denied")
        }
        Err(_) => return Candidate::Missing,
    };
    if metadata.is_dir() {
        return Candidate::NotExecutable("is a directory");
    }
    if metadata.permissions().mode() & 0o111 == 0 {
        return Candidate::NotExecutable("permission denied");
    }
    let Ok(c_path) = CString::new(path.as_os_str().as_bytes()) else {
        return Candidate::Missing;
    };
    // SAFETY: `c_path` is a valid NUL-terminated string.
    if unsafe { libc::access(c_path.as_ptr(), libc::X_OK) } != 0 {
        return Candidate::NotExecutable("permission denied");
    }
    Candidate::Executable
}

/// Restricts the calling thread to the CPU it runs on, and gives the previous
/// CPU set back when dropped. A child forked meanwhile keeps the single CPU: a
/// ptrace stop costs ~4x more when tracer and tracee run on different CPUs.
pub(crate) struct CpuPin {
    previous: Option<libc::cpu_set_t>,
}

impl CpuPin {
    /// Pins the calling thread. Failure to pin is not an error (only slower).
    pub(crate) fn pin_current_thread() -> CpuPin {
        // SAFETY: cpu_set_t is plain data; the calls get valid pointers and sizes.
        unsafe {
            let mut previous: libc::cpu_set_t = std::mem::zeroed();
            let size = std::mem::size_of::<libc::cpu_set_t>();
            if libc::sched_getaffinity(0, size, &mut previous) != 0 {
                return CpuPin { previous: None };
            }
            let cpu = libc::sched_getcpu();
            if cpu < 0 || cpu as usize >= libc::CPU_SETSIZE as usize {
                return CpuPin { previous: None };
            }
            let mut one: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu as usize, &mut one);
            if libc::sched_setaffinity(0, size, &one) != 0 {
                return CpuPin { previous: None };
            }
            CpuPin {
                previous: Some(previous),
            }
        }
    }
}

/// Lets the calling thread run on every CPU again: a thread started by a
/// pinned one (see [`CpuPin`]) inherits its single CPU, and work meant to
/// run beside the tracer would share it. Failure is not an error (only
/// slower).
pub(crate) fn unpin_current_thread() {
    // SAFETY: cpu_set_t is plain data; the call gets a valid pointer and
    // size. The kernel keeps the CPUs of the set the thread may use.
    unsafe {
        let mut every: libc::cpu_set_t = std::mem::zeroed();
        for cpu in 0..libc::CPU_SETSIZE as usize {
            libc::CPU_SET(cpu, &mut every);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &every);
    }
}

/// Lets the calling thread run on every CPU but `cpu` (the tracer's,
/// which it is to run beside), or on every CPU when there is no other.
/// Failure is not an error (only slower).
pub(crate) fn run_beside(cpu: Option<usize>) {
    unpin_current_thread();
    let Some(cpu) = cpu else {
        return;
    };
    // SAFETY: cpu_set_t is plain data; the calls get valid pointers and
    // sizes. The kernel keeps the CPUs of the set the thread may use.
    unsafe {
        let size = std::mem::size_of::<libc::cpu_set_t>();
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, size, &mut set) != 0 || cpu >= libc::CPU_SETSIZE as usize {
            return;
        }
        libc::CPU_CLR(cpu, &mut set);
        if libc::CPU_COUNT(&set) > 0 {
            libc::sched_setaffinity(0, size, &set);
        }
    }
}

/// The CPU the calling thread is pinned to, when its CPU set has one.
pub(crate) fn pinned_cpu() -> Option<usize> {
    // SAFETY: cpu_set_t is plain data; the call gets a valid pointer and
    // size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0
            || libc::CPU_COUNT(&set) != 1
        {
            return None;
        }
        (0..libc::CPU_SETSIZE as usize).find(|&cpu| libc::CPU_ISSET(cpu, &set))
    }
}

/// The CPU the calling thread runs on, if known.
pub(crate) fn current_cpu() -> Option<usize> {
    // SAFETY: no arguments; returns -1 on failure.
    usize::try_from(unsafe { libc::sched_getcpu() }).ok()
}

impl Drop for CpuPin {
    fn drop(&mut self) {
        if let Some(previous) = &self.previous {
            // SAFETY: `previous` is the set sched_getaffinity returned.
            unsafe {
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), previous);
            }
        }
    }
}

/// The program process `pid` runs (its `/proc/PID/exe`), empty if unknown.
pub(crate) fn program_of(pid: libc::pid_t) -> PathBuf {
    std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default()
}

/// The arguments of process `pid`'s program after the first (its
/// `/proc/PID/cmdline`); none when it cannot be read.
pub(crate) fn arguments_of(pid: libc::pid_t) -> Vec<String> {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    // Each argument ends with a NUL, the last one too.
    let args = cmdline.strip_suffix(&[0]).unwrap_or(&cmdline);
    args.split(|&byte| byte == 0)
        .skip(1)
        .map(|arg| String::from_utf8_lossy(arg).into_owned())
        .collect()
}

/// A traced child, stopped right after its `execve` (before its first
/// instruction). Killed and reaped when dropped unless [`Tracee::finished`] was
/// called.
pub(crate) struct Tracee {
    pub(crate) pid: libc::pid_t,
    done: bool,
}

impl Tracee {
    /// Marks the tracee as exited and reaped.
    pub(crate) fn finished(&mut self) {
        self.done = true;
    }
}

impl Drop for Tracee {
    fn drop(&mut self) {
        if !self.done {
            // SAFETY: plain system calls on our own child.
            unsafe {
                libc::kill(self.pid, libc::SIGKILL);
                let mut status = 0;
                libc::waitpid(self.pid, &mut status, libc::__WALL);
            }
        }
    }
}

/// Forks and execs `command` as a tracee. Returns once the child is stopped at
/// the first instruction of the new program. Must be called from the thread that
/// then issues all ptrace requests for it.
pub(crate) fn spawn(command: &Command) -> Result<Tracee> {
    let path = resolve(&command.program)?;
    crate::preflight::check(&path)?;
    let to_c = |text: &OsStr| {
        CString::new(text.as_bytes())
            .map_err(|_| Error::Unexpected("an argument contains a NUL byte".into()))
    };
    let c_path = to_c(path.as_os_str())?;
    let mut argv = vec![to_c(&command.program)?];
    for arg in &command.args {
        argv.push(to_c(arg)?);
    }
    let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|arg| arg.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());

    // Close-on-exec pipes: the child writes errno to `failed` when execve
    // fails; it waits on `go` until it is seized.
    let [failed_read, failed_write] = pipe()?;
    let [go_read, go_write] = match pipe() {
        Ok(go) => go,
        Err(error) => {
            close_all(&[failed_read, failed_write]);
            return Err(error);
        }
    };
    let dispositions = Relay::dispositions_for_child();

    // SAFETY: fork; the child only makes async-signal-safe calls before execve
    // or _exit, on data prepared before the fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        let error = Error::last_os("fork");
        close_all(&[failed_read, failed_write, go_read, go_write]);
        return Err(error);
    }
    if pid == 0 {
        // SAFETY: the child; see above.
        unsafe {
            libc::close(failed_read);
            libc::close(go_write);
            for (signal, handler) in RELAYED.iter().zip(dispositions) {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = handler;
                libc::sigaction(*signal, &action, std::ptr::null_mut());
            }
            // SIGPIPE as a shell gives it: Rust's runtime ignores it in cgx,
            // and an ignored signal stays ignored through execve (a program
            // writing into a closed pipe would get EPIPE instead of dying,
            // `yes | head` would end with an error).
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            // Without address-space randomization, as under Valgrind: the
            // same run gives the same addresses, so cache simulation results
            // are reproducible. (If it fails, the run is merely randomized.)
            let current = libc::personality(0xffff_ffff);
            if current != -1 {
                libc::personality((current | libc::ADDR_NO_RANDOMIZE) as libc::c_ulong);
            }
            // Seized (or the tracer gave up: end of file).
            let mut byte = 0u8;
            loop {
                let n = libc::read(go_read, (&mut byte as *mut u8).cast(), 1);
                if n == 1 {
                    break;
                }
                if n < 0 && *libc::__errno_location() == libc::EINTR {
                    continue;
                }
                libc::_exit(127);
            }
            libc::execv(c_path.as_ptr(), argv_ptrs.as_ptr());
            let bytes = (*libc::__errno_location()).to_ne_bytes();
            libc::write(failed_write, bytes.as_ptr().cast(), bytes.len());
            libc::_exit(127);
        }
    }
    let mut tracee = Tracee { pid, done: false };
    close_all(&[failed_write, go_read]);
    // Seized, the child stops at job-control signals with PTRACE_EVENT_STOP
    // and can be left stopped (see `jobs`).
    let options = libc::PTRACE_O_EXITKILL
        | libc::PTRACE_O_TRACEEXEC
        | libc::PTRACE_O_TRACECLONE
        | libc::PTRACE_O_TRACEFORK
        | libc::PTRACE_O_TRACEVFORK;
    // SAFETY: ptrace on our own child, which waits for it; no pointers.
    if unsafe { libc::ptrace(libc::PTRACE_SEIZE, pid, 0, options) } != 0 {
        let error = io::Error::last_os_error();
        close_all(&[failed_read, go_write]);
        return Err(Error::Untraceable {
            path,
            reason: format!(
                "this system forbids tracing it (PTRACE_SEIZE: {error}; a seccomp filter, \
                 Yama's ptrace_scope or a container's policy)"
            ),
        });
    }
    // SAFETY: writing one byte from a local; then closing our descriptor.
    unsafe {
        libc::write(go_write, [1u8].as_ptr().cast(), 1);
        libc::close(go_write);
    }
    // SAFETY: reading into a local buffer, then closing our descriptor.
    let exec_errno = unsafe {
        let mut bytes = [0u8; 4];
        let mut got = 0usize;
        while got < bytes.len() {
            let n = libc::read(
                failed_read,
                bytes[got..].as_mut_ptr().cast(),
                bytes.len() - got,
            );
            if n < 0 && *libc::__errno_location() == libc::EINTR {
                continue;
            }
            if n <= 0 {
                break;
            }
            got += n as usize;
        }
        libc::close(failed_read);
        (got == bytes.len()).then(|| i32::from_ne_bytes(bytes))
    };
    if let Some(errno) = exec_errno {
        return Err(Error::Exec {
            path,
            source: io::Error::from_raw_os_error(errno),
        });
    }

    // The exec event stop (PTRACE_O_TRACEEXEC), before the first
    // instruction of the new program.
    let status = wait(pid)?;
    if libc::WIFSIGNALED(status) {
        tracee.finished();
        return Err(Error::KilledAtStart {
            path,
            signal: libc::WTERMSIG(status),
        });
    }
    if !(libc::WIFSTOPPED(status) && libc::WSTOPSIG(status) == libc::SIGTRAP) {
        if libc::WIFEXITED(status) {
            tracee.finished();
        }
        return Err(Error::Unexpected(format!(
            "the child did not stop after execve (wait status {status:#x})"
        )));
    }
    // The backends start from a stop before the first instruction.
    let left = crate::ptrace::open_memory(pid, true)
        .and_then(|memory| crate::resume::leave_syscall(pid, &memory));
    match left {
        Err(_) if crate::ptrace::killed(pid) => {
            // Let go of it, or it may not act on its SIGKILL; its end may
            // have been reported to the failed request already.
            let _ = crate::ptrace::cont(pid, 0);
            let signal = match wait(pid) {
                Ok(status) if libc::WIFSIGNALED(status) => libc::WTERMSIG(status),
                _ => libc::SIGKILL,
            };
            tracee.finished();
            Err(Error::KilledAtStart { path, signal })
        }
        Err(error) => Err(error),
        Ok(_) => Ok(tracee),
    }
}

/// A close-on-exec pipe: its read and write ends.
fn pipe() -> Result<[libc::c_int; 2]> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(Error::last_os("pipe2"));
    }
    Ok(fds)
}

/// Closes descriptors of this process.
fn close_all(fds: &[libc::c_int]) {
    for &fd in fds {
        // SAFETY: closing descriptors this process opened.
        unsafe { libc::close(fd) };
    }
}

/// `waitpid` on one tracee, retried on EINTR.
pub(crate) fn wait(pid: libc::pid_t) -> Result<libc::c_int> {
    loop {
        let mut status = 0;
        // SAFETY: `status` is a valid out-pointer.
        let got = unsafe { libc::waitpid(pid, &mut status, libc::__WALL) };
        if got == pid {
            return Ok(status);
        }
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(Error::Os {
                operation: "waitpid",
                source: error,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread pinned to its CPU is pinned to that one; a thread with
    /// every CPU is pinned to none (unless the host has only one).
    #[test]
    fn a_pinned_thread_names_its_cpu() {
        std::thread::spawn(|| {
            let pin = CpuPin::pin_current_thread();
            let cpu = current_cpu();
            assert_eq!(pinned_cpu(), cpu, "pinned to the CPU it ran on");
            drop(pin);
            unpin_current_thread();
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            assert_eq!(pinned_cpu().is_none(), cpus > 1);
        })
        .join()
        .unwrap();
    }
}
