//! Timing the program's system calls (Callgrind's `--collect-systime`):
//! which clocks a run reads around each `syscall` instruction, and how
//! the tracer reads them itself.
//!
//! The wall time is `CLOCK_MONOTONIC`, the clock Valgrind reads; the CPU
//! time is the thread's own (`CLOCK_THREAD_CPUTIME_ID` in the thread, the
//! first field of `/proc/PID/task/TID/schedstat` from the tracer: both
//! are the kernel's `sum_exec_runtime`, in nanoseconds).
//!
//! The translate backend reads the clocks in the tracee, with raw
//! `clock_gettime` system calls around the program's `syscall` (see
//! `translate::translator`); the step backend reads them in the tracer
//! around its single step of the `syscall`, so its times include a
//! ptrace stop (tens of microseconds). The system calls the translate
//! backend's tracer runs itself (see `translate::invalidate`) are timed
//! by the tracer, as the step backend times them.

use std::time::Duration;

/// Which clocks a run reads around each system call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SystemCallClocks {
    /// None: system calls are not reported ([`crate::EventSink::system_call`]
    /// is never called).
    #[default]
    Off,
    /// The wall clock (Callgrind's `msec` and `usec`).
    Wall,
    /// The wall clock and the thread's CPU time (Callgrind's `nsec`).
    WallAndCpu,
}

impl SystemCallClocks {
    /// Whether system calls are reported at all.
    pub fn on(self) -> bool {
        self != SystemCallClocks::Off
    }

    /// Whether the thread's CPU time is read too.
    pub fn cpu(self) -> bool {
        self == SystemCallClocks::WallAndCpu
    }
}

/// The clocks read at one end of a system call, by the tracer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Reading {
    /// The clocks read.
    pub clocks: SystemCallClocks,
    /// `CLOCK_MONOTONIC`, nanoseconds.
    pub wall_ns: u64,
    /// The thread's CPU time, nanoseconds (0 when not read or unknown).
    pub cpu_ns: u64,
}

impl Reading {
    /// Reads `clocks` now, the CPU time of thread `tid` of process `pid`.
    pub fn now(clocks: SystemCallClocks, pid: i32, tid: i32) -> Reading {
        Reading {
            clocks,
            wall_ns: monotonic_ns(),
            cpu_ns: match clocks.cpu() {
                true => thread_cpu_ns(pid, tid).unwrap_or(0),
                false => 0,
            },
        }
    }
}

/// `execve`'s number.
const SYS_EXECVE: u64 = 59;
/// `execveat`'s number.
const SYS_EXECVEAT: u64 = 322;

/// Whether system call `number` is reported when its block's record is
/// replayed, or its step completes: all but `execve` and `execveat`,
/// which Callgrind counts only when they fail, and which the backends
/// report then, when the thread goes on in the same program.
pub(crate) fn reported(number: u64) -> bool {
    !matches!(number, SYS_EXECVE | SYS_EXECVEAT)
}

/// `CLOCK_MONOTONIC` now, in nanoseconds.
pub(crate) fn monotonic_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    timespec_ns(now.tv_sec as u64, now.tv_nsec as u64)
}

/// A `timespec` (seconds, nanoseconds) in nanoseconds.
pub(crate) fn timespec_ns(seconds: u64, nanoseconds: u64) -> u64 {
    seconds
        .wrapping_mul(1_000_000_000)
        .wrapping_add(nanoseconds)
}

/// Nanoseconds as a `timespec`'s two words (seconds, nanoseconds).
pub(crate) fn ns_timespec(ns: u64) -> [u64; 2] {
    let duration = Duration::from_nanos(ns);
    [duration.as_secs(), u64::from(duration.subsec_nanos())]
}

/// The CPU time thread `tid` of process `pid` has run, in nanoseconds:
/// the first field of its `schedstat`; `None` when it cannot be read.
pub(crate) fn thread_cpu_ns(pid: i32, tid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat")).ok()?;
    schedstat_runtime(&text)
}

/// The time on the CPU a `schedstat` line gives (its first field).
fn schedstat_runtime(text: &str) -> Option<u64> {
    text.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn execve_is_not_reported() {
        assert!(reported(39));
        assert!(!reported(SYS_EXECVE));
        assert!(!reported(SYS_EXECVEAT));
    }

    #[test]
    fn schedstat_gives_its_first_field() {
        assert_eq!(schedstat_runtime("123456 789 10\n"), Some(123_456));
        assert_eq!(schedstat_runtime(""), None);
        assert_eq!(schedstat_runtime("x 1 2"), None);
    }

    #[test]
    fn timespecs_and_nanoseconds_convert_both_ways() {
        assert_eq!(timespec_ns(2, 5), 2_000_000_005);
        assert_eq!(ns_timespec(2_000_000_005), [2, 5]);
    }

    #[test]
    fn this_thread_s_cpu_time_grows() {
        // SAFETY: getpid and gettid take no arguments.
        let (pid, tid) = unsafe { (libc::getpid(), libc::gettid()) };
        let before = thread_cpu_ns(pid, tid).expect("schedstat");
        // The kernel adds a running thread's time at scheduler ticks and
        // when it is switched out: work for 50 ms, then sleep once.
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < std::time::Duration::from_millis(50) {
            for i in 0..10_000u64 {
                x = std::hint::black_box(x.wrapping_add(i));
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
        let after = thread_cpu_ns(pid, tid).expect("schedstat");
        assert!(after > before, "{before} then {after}");
    }

    #[test]
    fn clocks_say_what_they_read() {
        assert!(!SystemCallClocks::Off.on());
        assert!(SystemCallClocks::Wall.on() && !SystemCallClocks::Wall.cpu());
        assert!(SystemCallClocks::WallAndCpu.cpu());
        let reading = Reading::now(SystemCallClocks::Wall, 0, 0);
        assert!(reading.wall_ns > 0);
        assert_eq!(reading.cpu_ns, 0);
    }
}
