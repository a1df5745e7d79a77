//! The `step` backend: single-steps every instruction of the tracee with
//! `PTRACE_SINGLESTEP`. Simple and exact, and slow (10,000–40,000 instructions a
//! second): the oracle for faster backends, never the default.
//!
//! Counting follows Valgrind: an instruction counts when it completes (a faulting
//! instruction that the kernel turns into a signal does not); the system call
//! that ends the process counts; a REP string instruction counts once per
//! iteration plus once for the final `rcx == 0` check (see [`EventSink`]).
//!
//! Scope of this first slice: one thread (clones are not followed yet), no
//! invalidation of decoded code on self-modifying code or `munmap` (the cache is
//! dropped on `execve`), job-control stops are not kept (the tracee is resumed).

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use iced_x86::{Decoder, DecoderOptions, Instruction, Mnemonic, OpKind};

use crate::error::{Error, Result};
use crate::event::EventSink;
use crate::launch::{self, Command, CpuPin};

/// How a traced program ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this status (0–255).
    Code(i32),
    /// It was killed by this signal.
    Signal {
        /// The signal number.
        signal: i32,
        /// Whether it dumped core.
        core_dumped: bool,
    },
}

/// What a run of the step backend reports besides the events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// How the program ended.
    pub exit: Exit,
    /// Instructions reported to the sink (Valgrind's `Ir`).
    pub instructions: u64,
    /// ptrace single-steps taken (one stop each).
    pub steps: u64,
}

/// Runs `command` to completion under the step backend, reporting every
/// executed instruction to `sink`. Signals the tracee receives are delivered to
/// it as they would be without the tracer. The calling thread is pinned to its
/// current CPU while the run lasts (the tracee stays on that CPU).
pub fn run<S: EventSink + ?Sized>(command: &Command, sink: &mut S) -> Result<Outcome> {
    let _pin = CpuPin::pin_current_thread();
    let mut tracee = launch::spawn(command)?;
    let result = Stepper::new(tracee.pid)?.run(sink);
    if result.is_ok() {
        tracee.finished();
    }
    result
}

/// The REP behaviour of a decoded string instruction.
#[derive(Clone, Copy, Debug)]
struct Rep {
    /// `Some(true)`: repeat while ZF = 1 (REPE cmps/scas); `Some(false)`: while
    /// ZF = 0 (REPNE); `None`: only the count ends it.
    while_zero_flag: Option<bool>,
    /// The counter is `ecx` (address-size prefix), not `rcx`.
    counter_32: bool,
}

/// What the backend keeps of a decoded instruction.
#[derive(Clone, Copy, Debug)]
struct Decoded {
    len: u8,
    rep: Option<Rep>,
}

impl Decoded {
    fn from_instruction(instruction: &Instruction) -> Decoded {
        let repeated = instruction.has_rep_prefix() || instruction.has_repne_prefix();
        let rep = (repeated && instruction.is_string_instruction()).then(|| {
            let conditional = matches!(
                instruction.mnemonic(),
                Mnemonic::Cmpsb
                    | Mnemonic::Cmpsw
                    | Mnemonic::Cmpsd
                    | Mnemonic::Cmpsq
                    | Mnemonic::Scasb
                    | Mnemonic::Scasw
                    | Mnemonic::Scasd
                    | Mnemonic::Scasq
            );
            let counter_32 = (0..instruction.op_count()).any(|operand| {
                matches!(
                    instruction.op_kind(operand),
                    OpKind::MemorySegESI | OpKind::MemoryESEDI
                )
            });
            Rep {
                while_zero_flag: conditional.then(|| instruction.has_rep_prefix()),
                counter_32,
            }
        });
        Decoded {
            len: instruction.len() as u8,
            rep,
        }
    }

    /// How many times the instruction counts for a step that went from `before`
    /// to `after` (Valgrind's rules, see the module doc).
    fn executions(&self, at: u64, before: &Regs, after: &Regs) -> u64 {
        let left = after.rip != at;
        let Some(rep) = self.rep else {
            return u64::from(left);
        };
        let mask = if rep.counter_32 {
            u64::from(u32::MAX)
        } else {
            u64::MAX
        };
        let (count_before, count_after) = (before.rcx & mask, after.rcx & mask);
        let iterations = count_before.wrapping_sub(count_after) & mask;
        let zero_flag = after.eflags & 0x40 != 0;
        let condition_holds = match rep.while_zero_flag {
            Some(want) => want == zero_flag,
            None => true,
        };
        let ended_by_count_check =
            left && (iterations == 0 || (count_after == 0 && condition_holds));
        iterations + u64::from(ended_by_count_check)
    }
}

/// The registers the backend looks at after each stop.
#[derive(Clone, Copy, Debug)]
struct Regs {
    rip: u64,
    rcx: u64,
    eflags: u64,
}

struct Stepper {
    pid: libc::pid_t,
    memory: File,
    decoded: HashMap<u64, Decoded>,
}

/// `si_code` of a single-step trap, and of the step report after a system call.
const TRAP_TRACE: i32 = 2;
const TRAP_BRKPT: i32 = 1;

impl Stepper {
    fn new(pid: libc::pid_t) -> Result<Stepper> {
        Ok(Stepper {
            pid,
            memory: open_memory(pid)?,
            decoded: HashMap::new(),
        })
    }

    fn run<S: EventSink + ?Sized>(&mut self, sink: &mut S) -> Result<Outcome> {
        let mut instructions = 0u64;
        let mut steps = 0u64;
        let mut regs = self.regs()?;
        let mut signal = 0;
        loop {
            let at = regs.rip;
            let decoded = self.decode(at);
            let injected = signal != 0;
            // SAFETY: ptrace on our stopped tracee.
            if unsafe { libc::ptrace(libc::PTRACE_SINGLESTEP, self.pid, 0, signal) } != 0 {
                return Err(Error::last_os("ptrace(PTRACE_SINGLESTEP)"));
            }
            signal = 0;
            steps += 1;
            let status = launch::wait(self.pid)?;
            let mut emit = |count: u64, instructions: &mut u64| {
                for _ in 0..count {
                    sink.instruction(at, decoded.map_or(0, |decoded| decoded.len));
                }
                *instructions += count;
            };
            if libc::WIFEXITED(status) {
                // The system call that ended the process.
                emit(1, &mut instructions);
                return Ok(Outcome {
                    exit: Exit::Code(libc::WEXITSTATUS(status)),
                    instructions,
                    steps,
                });
            }
            if libc::WIFSIGNALED(status) {
                return Ok(Outcome {
                    exit: Exit::Signal {
                        signal: libc::WTERMSIG(status),
                        core_dumped: libc::WCOREDUMP(status),
                    },
                    instructions,
                    steps,
                });
            }
            if !libc::WIFSTOPPED(status) {
                return Err(Error::Unexpected(format!("wait status {status:#x}")));
            }
            let stop_signal = libc::WSTOPSIG(status);
            let event = status >> 16;
            let after = self.regs()?;
            if event != 0 {
                if event == libc::PTRACE_EVENT_EXEC {
                    // A new program: nothing decoded so far is valid.
                    self.decoded.clear();
                    self.memory = open_memory(self.pid)?;
                }
                regs = after;
                continue;
            }
            let executions = |decoded: Option<Decoded>| match decoded {
                Some(decoded) => decoded.executions(at, &regs, &after),
                None => u64::from(after.rip != at),
            };
            match self.siginfo_code()? {
                // Group-stop (job control): resume without a signal.
                None => {}
                Some(code)
                    if stop_signal == libc::SIGTRAP
                        && (code == TRAP_TRACE || code == TRAP_BRKPT) =>
                {
                    emit(executions(decoded), &mut instructions);
                }
                // Entering a signal handler: the kernel reports a step before
                // its first instruction; nothing was executed.
                Some(code) if stop_signal == libc::SIGTRAP && injected && code == libc::SIGTRAP => {
                }
                // A signal for the tracee: deliver it with the next step.
                Some(_) => {
                    emit(executions(decoded), &mut instructions);
                    signal = stop_signal;
                }
            }
            regs = after;
        }
    }

    /// The decoded instruction at `addr`, from the cache or the tracee's memory.
    fn decode(&mut self, addr: u64) -> Option<Decoded> {
        if let Some(decoded) = self.decoded.get(&addr) {
            return Some(*decoded);
        }
        let mut bytes = [0u8; 15];
        let got = read_available(&self.memory, addr, &mut bytes);
        let mut decoder = Decoder::with_ip(64, &bytes[..got], addr, DecoderOptions::NONE);
        let instruction = decoder.decode();
        if instruction.is_invalid() {
            return None;
        }
        let decoded = Decoded::from_instruction(&instruction);
        self.decoded.insert(addr, decoded);
        Some(decoded)
    }

    fn regs(&self) -> Result<Regs> {
        // SAFETY: user_regs_struct is plain data; ptrace fills it.
        unsafe {
            let mut regs: libc::user_regs_struct = std::mem::zeroed();
            if libc::ptrace(
                libc::PTRACE_GETREGS,
                self.pid,
                0,
                &mut regs as *mut libc::user_regs_struct,
            ) != 0
            {
                return Err(Error::last_os("ptrace(PTRACE_GETREGS)"));
            }
            Ok(Regs {
                rip: regs.rip,
                rcx: regs.rcx,
                eflags: regs.eflags,
            })
        }
    }

    /// `si_code` of the signal of a signal-delivery-stop; `None` for a
    /// group-stop (PTRACE_GETSIGINFO fails with EINVAL).
    fn siginfo_code(&self) -> Result<Option<i32>> {
        // SAFETY: siginfo_t is plain data; ptrace fills it.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            if libc::ptrace(
                libc::PTRACE_GETSIGINFO,
                self.pid,
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
            Ok(Some(info.si_code))
        }
    }
}

fn open_memory(pid: libc::pid_t) -> Result<File> {
    File::open(format!("/proc/{pid}/mem")).map_err(|source| Error::Os {
        operation: "open /proc/PID/mem",
        source,
    })
}

/// Reads as many bytes at `addr` as are mapped (code may end at a page before an
/// unmapped one); returns how many were read.
fn read_available(memory: &File, addr: u64, buffer: &mut [u8]) -> usize {
    let mut got = 0;
    while got < buffer.len() {
        match memory.read_at(&mut buffer[got..], addr.wrapping_add(got as u64)) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    got
}
