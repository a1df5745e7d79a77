//! Job control of the program, which cgx seizes (`PTRACE_SEIZE`, see
//! `launch`): a thread that enters a group-stop (SIGSTOP, SIGTSTP, SIGTTIN
//! or SIGTTOU delivered) reports `PTRACE_EVENT_STOP` with the stop signal
//! and is left stopped with `PTRACE_LISTEN`; SIGCONT ends the stop, the
//! thread reports `PTRACE_EVENT_STOP` with SIGTRAP, and goes on. A new
//! thread or process starts with `PTRACE_EVENT_STOP` and SIGTRAP too (the
//! backends take that stop as its start).
//!
//! With [`RunOptions::job_control`] the tracer also stops itself when the
//! program's initial process stops after the tracer was asked to stop
//! (SIGTSTP: Ctrl-Z at a terminal, which also stops the program, or `kill
//! -TSTP`, which `relay` passes on): the shell that started cgx then sees
//! its job stopped, as it would see the program; continued (`fg`, `kill
//! -CONT`), cgx passes SIGCONT on to the program (see `relay`). A program
//! that stops by itself (SIGSTOP from itself or another process) stops
//! alone: the tracer stays awake to see the SIGCONT that continues it.

use crate::error::{Error, Result};
use crate::step::RunOptions;

/// What a `PTRACE_EVENT_STOP` with a signal is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EventStop {
    /// The thread entered a group-stop.
    GroupStop,
    /// Anything else: a group-stop ended, a new thread's first stop.
    Go,
}

impl EventStop {
    /// The meaning of a `PTRACE_EVENT_STOP` with `signal`.
    fn of(signal: i32) -> EventStop {
        match signal {
            libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU => EventStop::GroupStop,
            _ => EventStop::Go,
        }
    }
}

/// The stop signal of wait status `status` if it is a group-stop of a
/// seized thread (`PTRACE_EVENT_STOP` with a stop signal).
pub(crate) fn group_stop_signal(status: i32) -> Option<i32> {
    let signal = libc::WSTOPSIG(status);
    let group_stop = libc::WIFSTOPPED(status)
        && status >> 16 == libc::PTRACE_EVENT_STOP
        && EventStop::of(signal) == EventStop::GroupStop;
    group_stop.then_some(signal)
}

/// The job-control state of a run.
#[derive(Debug)]
pub(crate) struct Jobs {
    /// Stop the tracer with the initial process.
    with_program: bool,
    /// The initial process.
    initial: i32,
    /// The tracer stopped for the initial process's current group-stop.
    stopped: bool,
}

impl Jobs {
    /// The state of a run with `options` of the program `initial`.
    pub(crate) fn new(options: &RunOptions, initial: i32) -> Jobs {
        Jobs {
            with_program: options.job_control,
            initial,
            stopped: false,
        }
    }

    /// Serves a `PTRACE_EVENT_STOP` with `signal` of thread `tid` of process
    /// `pid`: whether the caller resumes the thread (else it stays stopped,
    /// listening for SIGCONT).
    pub(crate) fn event_stop(&mut self, tid: i32, pid: i32, signal: i32) -> Result<bool> {
        match EventStop::of(signal) {
            EventStop::GroupStop => {
                listen(tid)?;
                if self.stops_tracer(pid, crate::relay::take_stop_request()) {
                    stop_this_process();
                }
                Ok(false)
            }
            EventStop::Go => {
                if pid == self.initial {
                    self.stopped = false;
                }
                Ok(true)
            }
        }
    }

    /// Whether a group-stop of process `pid` stops the tracer now: the
    /// initial process's, once per stop, with `with_program`, when the
    /// tracer was asked to stop (`requested`).
    fn stops_tracer(&mut self, pid: i32, requested: bool) -> bool {
        let stops = self.with_program && requested && pid == self.initial && !self.stopped;
        if pid == self.initial {
            self.stopped = true;
        }
        stops
    }
}

/// Leaves `tid`, in a group-stop, stopped until SIGCONT (or another event).
fn listen(tid: i32) -> Result<()> {
    // SAFETY: ptrace on a seized tracee in a group-stop; no pointers.
    if unsafe { libc::ptrace(libc::PTRACE_LISTEN, tid, 0, 0) } != 0 {
        let error = std::io::Error::last_os_error();
        // The thread is gone already (killed meanwhile): its exit follows.
        if error.raw_os_error() != Some(libc::ESRCH) {
            return Err(Error::Os {
                operation: "ptrace(PTRACE_LISTEN)",
                source: error,
            });
        }
    }
    Ok(())
}

/// Stops this process (all its threads) until SIGCONT.
fn stop_this_process() {
    // SAFETY: a signal to this process; SIGSTOP cannot be caught.
    unsafe { libc::kill(libc::getpid(), libc::SIGSTOP) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_signals_are_group_stops_and_sigtrap_goes_on() {
        for signal in [libc::SIGSTOP, libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU] {
            assert_eq!(EventStop::of(signal), EventStop::GroupStop);
        }
        assert_eq!(EventStop::of(libc::SIGTRAP), EventStop::Go);
        assert_eq!(EventStop::of(libc::SIGCONT), EventStop::Go);
    }

    #[test]
    fn group_stops_are_told_from_wait_statuses() {
        let event_stop = |signal: i32| (libc::PTRACE_EVENT_STOP << 16) | (signal << 8) | 0x7f;
        assert_eq!(
            group_stop_signal(event_stop(libc::SIGSTOP)),
            Some(libc::SIGSTOP)
        );
        assert_eq!(
            group_stop_signal(event_stop(libc::SIGTSTP)),
            Some(libc::SIGTSTP)
        );
        // The end of a group-stop, a signal-delivery-stop, an exit.
        assert_eq!(group_stop_signal(event_stop(libc::SIGTRAP)), None);
        assert_eq!(group_stop_signal((libc::SIGSTOP << 8) | 0x7f), None);
        assert_eq!(group_stop_signal(0), None);
    }

    #[test]
    fn the_tracer_stops_once_per_stop_of_the_initial_process() {
        let options = RunOptions {
            job_control: true,
            ..RunOptions::default()
        };
        let mut jobs = Jobs::new(&options, 100);
        // Another process's stop, then the initial one's two threads.
        assert!(!jobs.stops_tracer(200, true));
        assert!(jobs.stops_tracer(100, true));
        assert!(!jobs.stops_tracer(100, true));
        // SIGCONT ended the stop; the next one stops the tracer again.
        jobs.stopped = false;
        assert!(jobs.stops_tracer(100, true));
        // A program that stops by itself stops alone.
        jobs.stopped = false;
        assert!(!jobs.stops_tracer(100, false));
        // Without job control the tracer never stops.
        let mut quiet = Jobs::new(&RunOptions::default(), 100);
        assert!(!quiet.stops_tracer(100, true));
    }
}
