//! Bookkeeping of the traced threads and processes: what the backend knows of
//! each thread between two stops, and each process's decoded code (shared by
//! its threads).

use std::collections::{HashMap, HashSet};
use std::fs::File;

use crate::error::Result;
use crate::event::{Arrival, Thread};

use super::blocks::BlockCursor;
use super::code::CodeCache;
use crate::ptrace::Regs;
use crate::semantics::Decoded;

/// A single-step in flight: what the thread was about to execute.
#[derive(Clone, Copy, Debug)]
pub(super) struct Step {
    /// Address of the instruction.
    pub at: u64,
    /// The instruction, `None` when it does not decode.
    pub decoded: Option<Decoded>,
    /// The registers before it.
    pub before: Regs,
    /// The signal delivered with the step (0: none).
    pub injected: i32,
    /// The step resumes from an exec event stop: its first trap may be the
    /// report of the end of `execve`, with nothing executed.
    pub after_exec: bool,
    /// For a `syscall` the run times (`RunOptions::system_calls`): the
    /// clocks read right before the step.
    pub timing: Option<crate::system_time::Reading>,
}

/// A traced thread.
pub(super) struct ThreadState {
    /// Its identity.
    pub thread: Thread,
    /// `/proc/TID/mem`, for decoding and client requests.
    pub memory: File,
    /// Its registers at the last stop.
    pub regs: Regs,
    /// The step in flight, if any.
    pub step: Option<Step>,
    /// A signal to deliver with the next step.
    pub inject: i32,
    /// Where it is in block terms.
    pub cursor: BlockCursor,
    /// For each signal handler being run (innermost last), how the
    /// interrupted code's next block would have been arrived at.
    pub signal_frames: Vec<Arrival>,
    /// A new thread whose initial SIGSTOP has not been seen yet.
    pub awaiting_start: bool,
    /// The program name given to the `execve` it is making.
    pub exec_name: Option<String>,
}

impl ThreadState {
    /// A thread about to run its first instruction (registers still to read).
    pub fn new(thread: Thread) -> Result<ThreadState> {
        Ok(ThreadState {
            thread,
            memory: open_memory(thread.tid)?,
            // SAFETY: user_regs_struct is plain data; all zeros is valid.
            regs: unsafe { std::mem::zeroed() },
            step: None,
            inject: 0,
            cursor: BlockCursor::start(),
            signal_frames: Vec::new(),
            awaiting_start: false,
            exec_name: None,
        })
    }
}

/// A traced process.
#[derive(Default)]
pub(super) struct Process {
    /// Its decoded instructions, shared by its threads (one address space).
    pub code: CodeCache,
}

/// All traced threads and processes of a run.
#[derive(Default)]
pub(super) struct Tracees {
    /// Threads by thread id.
    pub threads: HashMap<i32, ThreadState>,
    /// Processes by process id.
    pub processes: HashMap<i32, Process>,
    /// New threads that stopped before their creator's event stop.
    pub early_stops: HashSet<i32>,
}

impl Drop for Tracees {
    /// Kills what is still traced (after an error), so no tracee stays stopped.
    fn drop(&mut self) {
        let pids: HashSet<i32> = self
            .threads
            .values()
            .map(|state| state.thread.pid)
            .chain(self.early_stops.iter().copied())
            .collect();
        for pid in pids {
            // SAFETY: plain system call on a traced process.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        for &tid in self.threads.keys().chain(self.early_stops.iter()) {
            let mut status = 0;
            // SAFETY: `status` is a valid out-pointer.
            unsafe {
                libc::waitpid(tid, &mut status, libc::__WALL | libc::__WNOTHREAD);
            }
        }
    }
}

/// Opens `/proc/TID/mem` to read.
pub(super) fn open_memory(tid: i32) -> Result<File> {
    crate::ptrace::open_memory(tid, false)
}
