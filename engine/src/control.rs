//! Requests from outside a run (live control, `callgrind_control`): the
//! profiler sends the program's main thread the control signal, the tracer
//! sees it at the signal's delivery stop, reports
//! [`crate::Lifecycle::Control`] with the thread's events all reported,
//! and resumes the thread without the signal. The program never sees it; a
//! system call it interrupts is restarted. Only the translate backend
//! restarts the system calls the kernel does not (the step backend's
//! profiler should not send the signal).

use crate::ptrace::{Regs, SignalInfo};

/// The signal that asks the tracer for a stop to serve a request: the
/// last real-time signal, which neither the C library nor common programs
/// use. Only one sent by this process with `tgkill` counts
/// ([`is_control`]); any other reaches the program as usual.
pub fn control_signal() -> i32 {
    libc::SIGRTMAX()
}

/// `-EINTR`, as a system call returns it in rax.
const EINTR: u64 = (-libc::EINTR) as u64;

/// Bytes of the `syscall` instruction.
const SYSCALL_LEN: u64 = 2;

/// Registers that restart the system call the control signal interrupted
/// (`regs` at its delivery stop), when it would fail with `EINTR` (those
/// the kernel never restarts, as `epoll_wait`, `poll` or `select`): the
/// program waits on as natively. `None` when no system call was
/// interrupted, or the kernel restarts it itself.
pub(crate) fn restarted(regs: &Regs) -> Option<Regs> {
    if regs.orig_rax == u64::MAX || regs.rax != EINTR {
        return None;
    }
    let mut restarted = *regs;
    restarted.rax = regs.orig_rax;
    restarted.rip = regs.rip.wrapping_sub(SYSCALL_LEN);
    Some(restarted)
}

/// `si_code` of a signal sent with `tgkill`.
const SI_TKILL: i32 = -6;

/// Whether a signal-delivery-stop with `signal` and `info` is this
/// process's control signal.
pub(crate) fn is_control(signal: i32, info: &SignalInfo) -> bool {
    is_control_from(signal, info, std::process::id() as i32)
}

/// [`is_control`] for a tracer whose process id is `tracer`.
fn is_control_from(signal: i32, info: &SignalInfo, tracer: i32) -> bool {
    signal == control_signal() && info.code == SI_TKILL && info.sender == tracer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_tracers_tgkill_of_the_control_signal_counts() {
        let ours = SignalInfo {
            code: SI_TKILL,
            addr: 0,
            sender: 100,
        };
        assert!(is_control_from(control_signal(), &ours, 100));
        // From another process (the program itself, a user's kill).
        assert!(!is_control_from(control_signal(), &ours, 101));
        // Sent with kill (SI_USER) or queued (SI_QUEUE).
        let killed = SignalInfo { code: 0, ..ours };
        assert!(!is_control_from(control_signal(), &killed, 100));
        let queued = SignalInfo { code: -1, ..ours };
        assert!(!is_control_from(control_signal(), &queued, 100));
        // Another signal.
        assert!(!is_control_from(libc::SIGUSR1, &ours, 100));
    }

    #[test]
    fn an_interrupted_wait_is_restarted() {
        // SAFETY: user_regs_struct is plain data.
        let mut regs: Regs = unsafe { std::mem::zeroed() };
        regs.orig_rax = 232; // epoll_wait
        regs.rax = EINTR;
        regs.rip = 0x1002;
        let again = restarted(&regs).expect("restarted");
        assert_eq!((again.rax, again.rip), (232, 0x1000));
        // A system call that returned something else.
        regs.rax = 1;
        assert!(restarted(&regs).is_none());
        // No system call (the thread ran code).
        regs.orig_rax = u64::MAX;
        regs.rax = EINTR;
        assert!(restarted(&regs).is_none());
    }
}
