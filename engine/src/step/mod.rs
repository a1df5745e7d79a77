//! The `step` backend: single-steps every instruction of every traced thread
//! with `PTRACE_SINGLESTEP`. Simple and exact, and slow (10,000–40,000
//! instructions a second): the oracle for faster backends, never the default.
//!
//! It produces the event stream of [`crate::event`]: Valgrind's blocks (see
//! `blocks` for the cutting rules and arrival kinds) and their instructions,
//! tagged by thread, plus threads, forks, execs, signal handlers, client
//! requests and exits.
//!
//! Counting follows Valgrind: an instruction counts when it completes (a
//! faulting instruction that the kernel turns into a signal does not, though
//! its block is reported); the system call that ends a thread or process
//! counts; a REP string instruction counts once per iteration plus once for the
//! final `rcx == 0` check; the client-request marker (`rol rdi` ×4 + `xchg
//! rbx,rbx`) is one 19-byte instruction, served without being stepped.
//!
//! Besides the instructions it reports what Valgrind's cache and branch
//! simulations see of each execution: data accesses and
//! conditional and indirect branches, by the rules shared with the
//! translate backend (`crate::semantics`), computed from the registers
//! around the step (`report`).
//!
//! Signal handlers: when a thread enters one, `signal_handler_entered` is
//! reported and the handler's first block arrives with [`Arrival::Start`].
//! When the thread executes `rt_sigreturn`, `signal_handler_returned` is
//! reported and the next block arrives as the interrupted code's next block
//! would have without the signal: what Callgrind does, which saves the exec
//! state (last block and exit) on signal delivery and restores it afterwards.
//! A signal that interrupted the middle of a block (Valgrind delivers signals
//! between blocks only) resumes with [`Arrival::FallThrough`].
//!
//! Decoded code: each process (thread group: its threads share it) keeps its
//! instructions decoded once per address, and drops an instruction when its
//! bytes may have changed (`code`): when a store of the tracee overlaps them
//! (self-modifying code; every store is checked, cheaply: only stores into a
//! page holding cached code are looked at), when a system call that changes
//! mappings or contents completes (`mmap`, `munmap`, `mprotect`, `mremap`,
//! content-discarding `madvise`, `brk`, `shmat`/`shmdt`, `read`/`pread64`
//! into code), and on `execve`. Not seen: other stores by the kernel
//! (`readv`, `process_vm_writev`, ...), by other processes or through
//! another mapping of the same memory (shared memory, a double-mapped JIT),
//! and by a `vfork` child into its parent's code.
//!
//! Limits: job-control stops are not kept (the tracee is resumed); a
//! signal delivered exactly at a client-request marker makes the marker run
//! natively (the request is lost).
//!
//! [`Arrival::Start`]: crate::event::Arrival::Start
//! [`Arrival::FallThrough`]: crate::event::Arrival::FallThrough

mod blocks;
mod code;
mod decode;
mod report;
mod tracees;
mod tracer;

use crate::error::Result;
use crate::event::{EventSink, Exit};
use crate::launch::{self, Command, CpuPin};
use crate::pattern;
use crate::relay::Relay;

/// Options of a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// Trace processes on across `execve` (Valgrind's `--trace-children`).
    /// When false, a process that calls `execve` is detached and runs the new
    /// program untraced. Forked processes are always traced.
    pub trace_children: bool,
    /// With `trace_children`, the programs not traced into, by wildcard
    /// patterns of the name `execve` is given (`--trace-children-skip`).
    pub trace_children_skip: Vec<String>,
    /// With `trace_children`, the programs not traced into, by wildcard
    /// patterns of any of their arguments after the first
    /// (`--trace-children-skip-by-arg`).
    pub trace_children_skip_by_arg: Vec<String>,
    /// Report the conditional branches Cachegrind sees instead of
    /// Callgrind's: Cachegrind's VEX settings, where blocks chase direct
    /// jumps and calls, so constants flow further (a `rep stos` whose count
    /// was set before a `call` or `jmp` loses its first count check), and
    /// Cachegrind's rule for which outcomes are inverted (REPE/REPNE count
    /// checks). Only conditional-branch events change; the blocks reported
    /// stay Callgrind's. See `crate::semantics` for the rules and what
    /// is not modelled.
    pub superblocks: bool,
    /// Show the program Valgrind's machine: answer its `cpuid` as Valgrind
    /// does, as far as this host can run it (see [`crate::cpuid`]: leaf
    /// 0xd is the host's; not on a host that lacks an instruction set
    /// Valgrind's processor announces), hide the vDSO from it and refuse
    /// `clone3` (as Valgrind does, see `refusals`), so libc takes the
    /// paths it takes under Valgrind.
    pub valgrind_machine: bool,
    /// The run feeds cache or branch simulations: report data accesses and
    /// conditional and indirect branches. The step backend always reports
    /// them; the translate backend records what they need only when asked
    /// (its records grow, see `crate::translate`).
    pub simulations: bool,
    /// With `simulations`, the run feeds a branch simulation: without it
    /// the translate backend may leave the conditional and indirect branch
    /// events out (the step backend always reports them).
    pub branches: bool,
    /// The sink needs only how often each block ran (Cachegrind's `Ir`
    /// without simulations): the translate backend then counts the runs
    /// of most blocks in the tracee and reports them in batches
    /// ([`crate::EventSink::blocks_executed`]) in no particular order, with
    /// no stack pointer (0) and as arriving by falling through.
    pub counts_only: bool,
    /// With Cachegrind's cache simulation and no branch simulation, the
    /// translate backend may keep I1 and D1 itself (see
    /// `translate::L1Filter`): runs are then counted as with
    /// `counts_only` ([`crate::EventSink::blocks_executed`], with their
    /// accesses), the fetches and accesses that miss I1 or D1 reported
    /// apart ([`crate::EventSink::accesses_filtered`]) and the events of
    /// instructions reported one by one only counted. The step backend
    /// ignores it.
    pub filter: Option<crate::translate::L1Filter>,
    /// The translate backend may report a run of a block that keeps its
    /// thread's context by the sink's rules ([`crate::EventSink::place`])
    /// as a repeat of its block's run reported earlier in that context
    /// ([`crate::WholeBlock::repeats`]), counted in the tracee, instead of
    /// in the order it ran.
    pub quiet_runs: bool,
    /// Stop the tracer too when the program's initial process stops
    /// (SIGSTOP, Ctrl-Z), so that the shell that started it sees its job
    /// stopped (see `jobs`); the program stays stopped until SIGCONT either
    /// way.
    pub job_control: bool,
    /// Report each system call the program makes with `syscall`, timed
    /// with these clocks ([`crate::EventSink::system_call`], Callgrind's
    /// `--collect-systime`).
    pub system_calls: crate::SystemCallClocks,
}

impl RunOptions {
    /// Whether a process that calls `execve` with the program name `name`
    /// and the arguments `args` (without the first) is traced on: with
    /// `trace_children`, unless `name` matches a pattern of
    /// `trace_children_skip` or an argument one of
    /// `trace_children_skip_by_arg` (Valgrind's
    /// `should_we_trace_this_child`; an empty name is traced as the others).
    pub fn traces_child(&self, name: &str, args: &[String]) -> bool {
        if !self.trace_children || name.is_empty() {
            return self.trace_children;
        }
        let skipped_name = self
            .trace_children_skip
            .iter()
            .any(|p| pattern::matches(p, name));
        let skipped_arg = |arg: &String| {
            let patterns = &self.trace_children_skip_by_arg;
            patterns.iter().any(|p| pattern::matches(p, arg))
        };
        !skipped_name && !args.iter().any(skipped_arg)
    }
}

/// What a run of the step backend reports besides the events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// How the initial process ended.
    pub exit: Exit,
    /// Instructions reported to the sink, all threads and processes
    /// (Valgrind's `Ir`).
    pub instructions: u64,
    /// ptrace single-steps taken (one stop each).
    pub steps: u64,
    /// Decoded instructions dropped because their bytes may have changed
    /// (self-modifying code, `munmap`, `mmap` over code, ...; see "Decoded
    /// code" above), all processes; `execve` not counted.
    pub code_dropped: u64,
}

/// Runs `command` to completion under the step backend, reporting the
/// execution of every traced thread and process to `sink`. The run ends when
/// the initial process has exited and no traced process is left.
///
/// Signals the tracee receives are delivered to it as they would be without
/// the tracer; while the run lasts the signals that end or poke a program
/// (SIGTERM, SIGHUP, SIGINT, ...) sent to the calling process are relayed to
/// the tracee (see `relay`; a terminal's Ctrl-C reaches the tracee
/// directly), whose death is reported as [`Exit::Signal`]. The calling thread is pinned
/// to its current CPU while the run lasts (the tracees stay on that CPU). All
/// ptrace requests come from the calling thread; concurrent runs on other
/// threads do not see each other's tracees.
pub fn run<S: EventSink + ?Sized>(
    command: &Command,
    options: &RunOptions,
    sink: &mut S,
) -> Result<Outcome> {
    let _pin = CpuPin::pin_current_thread();
    let mut relay = Relay::install();
    let mut tracee = launch::spawn(command)?;
    relay.target(tracee.pid);
    let result = tracer::Tracer::new(sink, options.clone(), tracee.pid).run();
    if result.is_ok() {
        tracee.finished();
    }
    result
}

#[cfg(test)]
mod tests {
    use super::RunOptions;

    #[test]
    fn children_are_traced_unless_a_pattern_names_them() {
        let args = |list: &[&str]| list.iter().map(|arg| arg.to_string()).collect::<Vec<_>>();
        let options = RunOptions {
            trace_children: true,
            trace_children_skip: vec!["*/sh".into(), "ls".into()],
            trace_children_skip_by_arg: vec!["--no-*".into()],
            ..RunOptions::default()
        };
        assert!(options.traces_child("/usr/bin/env", &args(&["x"])));
        assert!(!options.traces_child("/bin/sh", &args(&["-c", "x"])));
        assert!(!options.traces_child("ls", &[]));
        assert!(options.traces_child("/bin/ls", &[]));
        assert!(!options.traces_child("/bin/env", &args(&["a", "--no-trace"])));
        assert!(options.traces_child("", &[]));
        let off = RunOptions::default();
        assert!(!off.traces_child("/usr/bin/env", &[]));
        assert!(!off.traces_child("", &[]));
    }
}
