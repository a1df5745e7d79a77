//! Signals sent to cgx, relayed to the program it runs.
//!
//! Under Valgrind the program and the profiler are one process: `kill PID`,
//! `timeout` and service managers signal the program itself. Under cgx they
//! signal the tracer. So while a run lasts cgx catches the signals that end
//! or poke a program ([`RELAYED`]: hangup, interrupt, quit, alarm,
//! termination, the two user signals, and job control's stop and continue)
//! and sends each on to the program it started, which then handles it, dies
//! of it or stops as natively; the profile is written as at any end.
//! SIGTSTP (Ctrl-Z) does not stop cgx at once: cgx stops when the program
//! does (see `jobs`).
//!
//! A signal the kernel generated (the terminal's Ctrl-C, Ctrl-\ and hangup,
//! `si_code` > 0) went to the whole foreground process group, the program
//! included, and is not sent again. Nor is one the program itself sent to
//! cgx, its parent under cgx: natively it would have reached whoever started
//! the program. A signal that was ignored when the run
//! started (`nohup`) stays ignored, by cgx and by the program. A signal that
//! arrives before the program is named is kept and sent once it is; one that
//! arrives after the program ended is dropped (cgx finishes writing).

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::Mutex;

/// The signals relayed.
pub(crate) const RELAYED: [libc::c_int; 9] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGALRM,
    libc::SIGTERM,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGTSTP,
    libc::SIGCONT,
];

/// How many programs can be targets at once (runs may overlap on several
/// threads of one process, as in the tests).
const SLOTS: usize = 8;

/// The targets: a process file descriptor (pidfd) for each program of a
/// run in progress, -1 for none; signals reach exactly that process, even
/// after its id is reused.
static PIDFDS: [AtomicI32; SLOTS] = [const { AtomicI32::new(-1) }; SLOTS];

/// The targets' process ids, for a kernel without pidfds (before Linux 5.3),
/// 0 for none; used only where the slot has no pidfd.
static PIDS: [AtomicI32; SLOTS] = [const { AtomicI32::new(0) }; SLOTS];

/// Signals caught while a run had no target yet, as a bit mask by number.
static PENDING: AtomicU64 = AtomicU64::new(0);

/// Whether cgx was asked to stop (SIGTSTP: Ctrl-Z, or `kill -TSTP`) since
/// the last [`take_stop_request`].
static STOP_REQUESTED: AtomicBool = AtomicBool::new(false);

/// Whether cgx was asked to stop since the last call: then, when the program
/// stops, cgx stops with it (see `jobs`).
pub(crate) fn take_stop_request() -> bool {
    STOP_REQUESTED.swap(false, Ordering::SeqCst)
}

/// The dispositions of [`RELAYED`] before the first live [`Relay`], and how
/// many relays are alive.
struct Installed {
    relays: usize,
    previous: [libc::sigaction; RELAYED.len()],
}

// SAFETY: `sigaction` is plain data (a handler address, a mask, flags).
unsafe impl Send for Installed {}

static INSTALLED: Mutex<Option<Installed>> = Mutex::new(None);

/// While alive, signals of [`RELAYED`] sent to this process go to the
/// program named by [`Relay::target`]. The last relay dropped restores the
/// previous dispositions.
pub(crate) struct Relay {
    slot: Option<usize>,
}

impl Relay {
    /// Catches the signals (if no other relay does already); signals caught
    /// before [`Relay::target`] wait for it.
    pub(crate) fn install() -> Relay {
        let mut installed = lock();
        match installed.as_mut() {
            Some(installed) => installed.relays += 1,
            None => {
                // SAFETY: sigaction is plain data; the calls get valid
                // pointers; the handler only makes async-signal-safe calls.
                unsafe {
                    let mut previous: [libc::sigaction; RELAYED.len()] = std::mem::zeroed();
                    let mut relay: libc::sigaction = std::mem::zeroed();
                    relay.sa_sigaction = relay_signal as *const () as libc::sighandler_t;
                    relay.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
                    libc::sigemptyset(&mut relay.sa_mask);
                    for (signal, previous) in RELAYED.iter().zip(previous.iter_mut()) {
                        libc::sigaction(*signal, std::ptr::null(), previous);
                        // Ignored before (nohup): ignored still.
                        if previous.sa_sigaction != libc::SIG_IGN {
                            libc::sigaction(*signal, &relay, std::ptr::null_mut());
                        }
                    }
                    *installed = Some(Installed {
                        relays: 1,
                        previous,
                    });
                }
            }
        }
        Relay { slot: None }
    }

    /// Sends the signals caught from now on, and those waiting, to process
    /// `pid`, a child of this process.
    pub(crate) fn target(&mut self, pid: libc::pid_t) {
        // SAFETY: a system call with plain arguments.
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        let pidfd = i32::try_from(pidfd).unwrap_or(-1);
        for (slot, (fds, pids)) in PIDFDS.iter().zip(&PIDS).enumerate() {
            if pids
                .compare_exchange(0, pid, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                fds.store(pidfd, Ordering::SeqCst);
                self.slot = Some(slot);
                break;
            }
        }
        if self.slot.is_none() && pidfd >= 0 {
            // SAFETY: closing the descriptor just opened.
            unsafe { libc::close(pidfd) };
        }
        let pending = PENDING.swap(0, Ordering::SeqCst);
        for signal in RELAYED {
            if pending & 1 << signal != 0 {
                send(signal);
            }
        }
    }

    /// The dispositions a new program gets for [`RELAYED`], in that order:
    /// ignored where they were ignored before the run (e.g. `nohup`), else
    /// the default.
    pub(crate) fn dispositions_for_child() -> [libc::sighandler_t; RELAYED.len()] {
        let installed = lock();
        let mut dispositions = [libc::SIG_DFL; RELAYED.len()];
        for (index, signal) in RELAYED.iter().enumerate() {
            let handler = match installed.as_ref() {
                Some(state) => state.previous[index].sa_sigaction,
                // SAFETY: querying a disposition into a local.
                None => unsafe {
                    let mut current: libc::sigaction = std::mem::zeroed();
                    libc::sigaction(*signal, std::ptr::null(), &mut current);
                    current.sa_sigaction
                },
            };
            if handler == libc::SIG_IGN {
                dispositions[index] = libc::SIG_IGN;
            }
        }
        dispositions
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        if let Some(slot) = self.slot {
            let pidfd = PIDFDS[slot].swap(-1, Ordering::SeqCst);
            PIDS[slot].store(0, Ordering::SeqCst);
            if pidfd >= 0 {
                // SAFETY: closing the descriptor `target` opened.
                unsafe { libc::close(pidfd) };
            }
        }
        let mut installed = lock();
        if let Some(state) = installed.as_mut() {
            state.relays -= 1;
            if state.relays == 0 {
                // SAFETY: restoring dispositions sigaction returned.
                unsafe {
                    for (signal, previous) in RELAYED.iter().zip(state.previous.iter()) {
                        libc::sigaction(*signal, previous, std::ptr::null_mut());
                    }
                }
                *installed = None;
                PENDING.store(0, Ordering::SeqCst);
            }
        }
    }
}

/// The installed state, whatever a panicking holder left.
fn lock() -> std::sync::MutexGuard<'static, Option<Installed>> {
    INSTALLED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Whether a signal with `si_code` `code` was sent by a process (`kill`,
/// `sigqueue`, `tgkill`, a timer of its own: `si_code` ≤ 0) rather than
/// generated by the kernel for a process group (a terminal's keys, a
/// hangup).
fn sent_by_a_process(code: libc::c_int) -> bool {
    code <= 0
}

/// The handler of [`RELAYED`]: sends a signal a process sent to cgx on to
/// the targets, or keeps it until there is one.
extern "C" fn relay_signal(signal: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    if signal == libc::SIGTSTP {
        STOP_REQUESTED.store(true, Ordering::SeqCst);
    }
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler;
    // a signal a process sent has the sender's id.
    let Some((code, sender)) =
        (unsafe { info.as_ref() }).map(|info| (info.si_code, unsafe { info.si_pid() }))
    else {
        return;
    };
    let from_a_target = sender != 0 && PIDS.iter().any(|pid| pid.load(Ordering::SeqCst) == sender);
    if !sent_by_a_process(code) || from_a_target {
        return;
    }
    if !send(signal) && (0..64).contains(&signal) {
        PENDING.fetch_or(1 << signal, Ordering::SeqCst);
    }
}

/// Sends `signal` to every target; whether there was one. Async-signal-safe.
fn send(signal: libc::c_int) -> bool {
    let mut sent = false;
    for (fds, pids) in PIDFDS.iter().zip(&PIDS) {
        let pid = pids.load(Ordering::SeqCst);
        if pid == 0 {
            continue;
        }
        sent = true;
        let pidfd = fds.load(Ordering::SeqCst);
        // SAFETY: plain system calls; a target that has ended makes them
        // fail, harmlessly.
        unsafe {
            if pidfd >= 0 {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    pidfd,
                    signal,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                );
            } else {
                libc::kill(pid, signal);
            }
        }
    }
    sent
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_signals_a_process_sent_are_relayed() {
        // SI_USER (kill), SI_QUEUE (sigqueue), SI_TKILL (tgkill).
        for code in [0, -1, -6] {
            assert!(sent_by_a_process(code), "{code}");
        }
        // SI_KERNEL: a terminal's Ctrl-C reached the program's group too.
        assert!(!sent_by_a_process(0x80));
    }

    #[test]
    fn signals_sent_to_this_process_reach_the_target_and_wait_for_one() {
        use std::os::unix::process::ExitStatusExt;
        let mut relay = Relay::install();
        // Before there is a target, a signal is kept.
        // SAFETY: a signal to this thread, caught by the relay.
        unsafe { libc::raise(libc::SIGUSR2) };
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep starts");
        let pid = i32::try_from(child.id()).expect("a process id");
        relay.target(pid);
        let status = child.wait().expect("sleep ends");
        assert_eq!(status.signal(), Some(libc::SIGUSR2));
        drop(relay);
        // SIGTSTP asks the tracer to stop with the program. (Whether the
        // program stops depends on its process group: the kernel drops
        // SIGTSTP in an orphaned one, natively too.)
        let relay = Relay::install();
        assert!(!take_stop_request());
        // SAFETY: as above.
        unsafe { libc::raise(libc::SIGTSTP) };
        assert!(take_stop_request());
        assert!(!take_stop_request());
        drop(relay);
    }

    #[test]
    fn relayed_signals_fit_the_pending_mask() {
        assert!(RELAYED.iter().all(|&signal| (1..64).contains(&signal)));
        assert!(RELAYED.contains(&libc::SIGTERM) && RELAYED.contains(&libc::SIGHUP));
        assert!(!RELAYED.contains(&libc::SIGKILL) && !RELAYED.contains(&libc::SIGSTOP));
    }
}
