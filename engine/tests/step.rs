//! The step backend against Valgrind: same program, same instruction count; and
//! its event stream (blocks, threads, forks, execs, signals, client requests).

mod common;

use std::collections::HashMap;
use std::time::Instant;

use cgx_engine::{step, Arrival, Command, Error, Exit, InstructionCounter, RunOptions};
use common::{build, lackey_counts, valgrind_total, Event, Recorder};

/// Instructions of the program's last basic block, `cgx_exit`: `mov $60, %eax;
/// syscall`.
const LAST_BLOCK: u64 = 2;

fn run(program: &std::path::Path, sink: &mut impl cgx_engine::EventSink) -> step::Outcome {
    step::run(&Command::new(program), &RunOptions::default(), sink).expect("the run succeeds")
}

#[test]
fn counts_equal_valgrind() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(dir.path(), "tiny", 0);
    let mut counter = InstructionCounter::default();
    let started = Instant::now();
    let outcome = run(&program, &mut counter);
    let seconds = started.elapsed().as_secs_f64();
    eprintln!(
        "step backend: {} instructions, {} steps in {seconds:.3} s ({:.0} instructions/s)",
        outcome.instructions,
        outcome.steps,
        outcome.instructions as f64 / seconds
    );
    assert_eq!(outcome.exit, Exit::Code(0));
    assert_eq!(outcome.instructions, counter.instructions);
    // Thousands of instructions, a good part of them REP iterations (each one a
    // step of its own, plus the final count check that is not a step).
    assert!(outcome.instructions > 1000, "{outcome:?}");
    assert!(outcome.steps < outcome.instructions, "{outcome:?}");

    let cachegrind = valgrind_total(dir.path(), "cachegrind", &program);
    let callgrind = valgrind_total(dir.path(), "callgrind", &program);
    eprintln!("cachegrind: {cachegrind} instructions, callgrind: {callgrind}");
    // The engine reports every executed instruction, as Cachegrind counts them.
    assert_eq!(outcome.instructions, cachegrind);
    // Callgrind charges a block when the block is left, so the block that ends
    // the process (here `cgx_exit`) is never charged: its collector-level rule,
    // which cgx's collector must reproduce, not the engine.
    assert_eq!(outcome.instructions - LAST_BLOCK, callgrind);
}

#[test]
fn blocks_are_valgrinds() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(dir.path(), "tiny", 0);
    let mut recorder = Recorder::default();
    run(&program, &mut recorder);
    let blocks = recorder.blocks();
    // Lackey without chasing counts the blocks Callgrind sees.
    let (lackey_instructions, lackey_blocks) = lackey_counts(&program);
    assert_eq!(blocks.len() as u64, lackey_blocks);
    assert_eq!(
        recorder.instructions_until(recorder.events.len()),
        lackey_instructions
    );
    assert_eq!(blocks[0].1.arrival, Arrival::Start);
    let count = |want: Arrival| blocks.iter().filter(|(_, b)| b.arrival == want).count();
    // sum_squares calls square 100 times; _start makes 8 calls (sum_squares,
    // fill ×2, copy ×3, find, cgx_exit); all but cgx_exit return.
    assert_eq!(count(Arrival::Call), 108);
    assert_eq!(count(Arrival::Return), 107);
    // Every REP iteration after the first is a block arrived at by a
    // conditional jump to itself: fill 200 + copy 150 + copy 1 + find 41
    // iterations, each followed by one more block (the next iteration or the
    // final count check), except where repne scasb stops on the match.
    let rep_blocks = count(Arrival::Jump { conditional: true });
    assert!(rep_blocks >= 200 + 150 + 1 + 40, "{rep_blocks}");
    // Instructions come after their block, in the block's thread.
    let mut last_block = None;
    for event in &recorder.events {
        match event {
            Event::Block(thread, _) => last_block = Some(*thread),
            Event::Instruction(thread, _, _) => assert_eq!(last_block, Some(*thread)),
            _ => {}
        }
    }
}

#[test]
fn reports_the_exit_code() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(dir.path(), "tiny", 3);
    let outcome = run(&program, &mut InstructionCounter::default());
    assert_eq!(outcome.exit, Exit::Code(3));
}

#[test]
fn delivers_signals_to_the_tracee() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(dir.path(), "signal", 0);
    let outcome = run(&program, &mut InstructionCounter::default());
    assert_eq!(
        outcome.exit,
        Exit::Signal {
            signal: 15,
            core_dumped: false
        }
    );
}

#[test]
fn a_crash_is_an_exit_by_signal() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(dir.path(), "segv", 0);
    let mut recorder = Recorder::default();
    let outcome = run(&program, &mut recorder);
    assert!(
        matches!(outcome.exit, Exit::Signal { signal: 11, .. }),
        "{outcome:?}"
    );
    let pid = recorder.blocks()[0].0.pid;
    assert!(recorder
        .events
        .contains(&Event::ProcessExited(pid, outcome.exit)));
    // Lackey counts the faulting store, which does not complete. (Cachegrind
    // says one less than cgx: it loses the `mov` before the store, whose count
    // it had not flushed yet when the store faulted.)
    let (lackey_instructions, lackey_blocks) = lackey_counts(&program);
    assert_eq!(outcome.instructions, lackey_instructions - 1);
    assert_eq!(recorder.blocks().len() as u64, lackey_blocks);
}

#[test]
fn signal_handlers_are_reported() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(dir.path(), "handler", 0);
    let mut recorder = Recorder::default();
    let outcome = run(&program, &mut recorder);
    assert_eq!(outcome.exit, Exit::Code(2));
    let entered: Vec<usize> = (0..recorder.events.len())
        .filter(|&i| matches!(recorder.events[i], Event::HandlerEntered(_, 10)))
        .collect();
    let returned = recorder
        .events
        .iter()
        .filter(|event| matches!(event, Event::HandlerReturned(_)))
        .count();
    assert_eq!(entered.len(), 2);
    assert_eq!(returned, 2);
    for &i in &entered {
        // The handler's first block starts a new root.
        let next_block = recorder.events[i..]
            .iter()
            .find_map(|event| match event {
                Event::Block(_, block) => Some(*block),
                _ => None,
            })
            .expect("a block after the handler entry");
        assert_eq!(next_block.arrival, Arrival::Start);
    }
    // Valgrind counts the same instructions and blocks.
    assert_eq!(
        outcome.instructions,
        valgrind_total(dir.path(), "cachegrind", &program)
    );
    assert_eq!(recorder.blocks().len() as u64, lackey_counts(&program).1);
}

#[test]
fn client_requests_are_answered_by_the_sink() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(dir.path(), "client", 0);
    // Natively (a sink answering the default), RUNNING_ON_VALGRIND is 0.
    let outcome = run(&program, &mut InstructionCounter::default());
    assert_eq!(outcome.exit, Exit::Code(0));
    // A sink that says "running on Valgrind".
    let mut recorder = Recorder {
        answer: Some(1),
        ..Recorder::default()
    };
    let outcome = run(&program, &mut recorder);
    assert_eq!(outcome.exit, Exit::Code(1));
    let requests: Vec<&Event> = recorder
        .events
        .iter()
        .filter(|event| matches!(event, Event::ClientRequest(..)))
        .collect();
    assert_eq!(requests.len(), 1);
    assert!(matches!(requests[0], Event::ClientRequest(_, args, 0) if args[0] == 0x1001));
    // The marker (four `rol rdi` and `xchg rbx,rbx`) is one 19-byte
    // instruction for Valgrind too.
    assert!(recorder
        .events
        .iter()
        .any(|event| matches!(event, Event::Instruction(_, _, 19))));
    assert_eq!(
        outcome.instructions,
        valgrind_total(dir.path(), "cachegrind", &program)
    );
    assert_eq!(recorder.blocks().len() as u64, lackey_counts(&program).1);
}

#[test]
fn threads_are_traced() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(dir.path(), "threads", 0);
    let mut recorder = Recorder::default();
    let outcome = run(&program, &mut recorder);
    assert_eq!(outcome.exit, Exit::Code(0));
    let per_thread = recorder.instructions_per_thread();
    assert_eq!(per_thread.len(), 2, "{per_thread:?}");
    let pid = recorder.blocks()[0].0.pid;
    let other = per_thread
        .keys()
        .copied()
        .find(|thread| thread.tid != pid)
        .expect("a second thread");
    assert_eq!(other.pid, pid);
    // thread_started before its first block, thread_exited after its last.
    let position = |want: &Event| recorder.events.iter().position(|e| e == want);
    let started = position(&Event::ThreadStarted(other)).expect("thread_started");
    let exited = position(&Event::ThreadExited(other)).expect("thread_exited");
    let first_block = recorder
        .events
        .iter()
        .position(|event| matches!(event, Event::Block(thread, _) if *thread == other))
        .expect("blocks of the new thread");
    assert!(started < first_block && first_block < exited);
    assert!(matches!(
        recorder.events[first_block],
        Event::Block(_, block) if block.arrival == Arrival::Start
    ));
    assert!(per_thread[&other] > 300 * 4, "{per_thread:?}");
    assert_eq!(
        outcome.instructions,
        valgrind_total(dir.path(), "cachegrind", &program)
    );
    assert_eq!(recorder.blocks().len() as u64, lackey_counts(&program).1);
}

#[test]
fn forked_processes_are_traced() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(dir.path(), "fork", 0);
    let mut recorder = Recorder::default();
    let outcome = run(&program, &mut recorder);
    assert_eq!(outcome.exit, Exit::Code(0));
    let parent = recorder.blocks()[0].0.pid;
    let forked: Vec<(i32, i32)> = recorder
        .events
        .iter()
        .filter_map(|event| match event {
            Event::Forked(from, child) => Some((from.pid, *child)),
            _ => None,
        })
        .collect();
    assert_eq!(forked.len(), 1);
    let (from, child) = forked[0];
    assert_eq!(from, parent);
    let mut per_process: HashMap<i32, u64> = HashMap::new();
    for (thread, count) in recorder.instructions_per_thread() {
        *per_process.entry(thread.pid).or_default() += count;
    }
    assert!(recorder
        .events
        .contains(&Event::ProcessExited(child, Exit::Code(7))));
    assert!(recorder
        .events
        .contains(&Event::ProcessExited(parent, Exit::Code(0))));
    // The child's events come after `forked`.
    let forked_at = recorder
        .events
        .iter()
        .position(|event| matches!(event, Event::Forked(..)))
        .expect("forked");
    assert!(recorder.events[..forked_at]
        .iter()
        .all(|event| !matches!(event, Event::Block(thread, _) if thread.pid == child)));
    // Valgrind writes one file per process; the child's counts include what
    // the parent executed before the fork, the fork system call included (the
    // child inherits the counters); cgx reports that system call after
    // `forked`, when it completes in the parent.
    let before_fork = recorder.instructions_until(forked_at) + 1;
    let (parent_cg, child_cg) = common::cachegrind_per_process(dir.path(), &program);
    assert_eq!(per_process[&parent], parent_cg);
    assert_eq!(per_process[&child] + before_fork, child_cg);
}

#[test]
fn exec_without_trace_children_detaches() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let exec = build(dir.path(), "exec", 0);
    let tiny = build(dir.path(), "tiny", 3);
    let command = Command::new(&exec).args([&tiny]);
    let mut recorder = Recorder::default();
    let outcome = step::run(&command, &RunOptions::default(), &mut recorder).expect("a run");
    assert_eq!(outcome.exit, Exit::Code(3));
    let pid = recorder.blocks()[0].0.pid;
    assert!(recorder.events.contains(&Event::Exec(pid, false)));
    assert_eq!(recorder.exec_programs, std::slice::from_ref(&tiny));
    let exec_at = recorder
        .events
        .iter()
        .position(|event| matches!(event, Event::Exec(..)))
        .expect("exec");
    // Nothing after the exec but the exit of the process.
    assert!(recorder.events[exec_at + 1..]
        .iter()
        .all(|event| matches!(event, Event::ProcessExited(..))));
    assert!(outcome.instructions < 1000, "{outcome:?}");
}

#[test]
fn exec_with_trace_children_traces_on() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let exec = build(dir.path(), "exec", 0);
    let tiny = build(dir.path(), "tiny", 3);
    let command = Command::new(&exec).args([&tiny]);
    let mut recorder = Recorder::default();
    let options = RunOptions {
        trace_children: true,
        ..RunOptions::default()
    };
    let outcome = step::run(&command, &options, &mut recorder).expect("a run");
    assert_eq!(outcome.exit, Exit::Code(3));
    let pid = recorder.blocks()[0].0.pid;
    let exec_at = recorder
        .events
        .iter()
        .position(|event| *event == Event::Exec(pid, true))
        .expect("exec");
    let first_after = recorder.events[exec_at..]
        .iter()
        .find_map(|event| match event {
            Event::Block(_, block) => Some(*block),
            _ => None,
        })
        .expect("blocks after exec");
    assert_eq!(first_after.arrival, Arrival::Start);
    let after_exec = outcome.instructions - recorder.instructions_until(exec_at);
    let mut tiny_count = InstructionCounter::default();
    let tiny_alone = run(&tiny, &mut tiny_count);
    assert_eq!(after_exec, tiny_alone.instructions);
}

/// Whether this process ignores SIGINT (started in the background by a
/// shell without job control, or by `nohup`-like launchers).
fn sigint_ignored() -> bool {
    // SAFETY: querying a disposition into a local.
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGINT, std::ptr::null(), &mut current);
        current.sa_sigaction == libc::SIG_IGN
    }
}

/// The program's SIGINT to itself kills it, unless this process ignored
/// SIGINT when the run started: then the program inherits that, as it
/// would natively, and exits 0.
#[test]
fn interrupts_reach_the_tracee_not_the_tracer() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(dir.path(), "interrupt", 0);
    let ignored = sigint_ignored();
    let outcome = run(&program, &mut InstructionCounter::default());
    let expected = match ignored {
        true => Exit::Code(0),
        false => Exit::Signal {
            signal: 2,
            core_dumped: false,
        },
    };
    assert_eq!(outcome.exit, expected, "SIGINT ignored here: {ignored}");
}

#[test]
fn missing_program_is_127() {
    let options = RunOptions::default();
    let error = step::run(
        &Command::new("/nonexistent/cgx-no-such-program"),
        &options,
        &mut InstructionCounter::default(),
    )
    .expect_err("no such program");
    assert!(matches!(error, Error::NotFound { .. }), "{error:?}");
    assert_eq!(error.shell_exit_code(), Some(127));

    let error = step::run(
        &Command::new("cgx-no-such-program-on-path"),
        &options,
        &mut InstructionCounter::default(),
    )
    .expect_err("no such program on PATH");
    assert_eq!(error.shell_exit_code(), Some(127));
}

#[test]
fn non_executable_program_is_126() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let file = dir.path().join("data.txt");
    std::fs::write(&file, "not a program").expect("a file");
    let options = RunOptions::default();
    let error = step::run(
        &Command::new(&file),
        &options,
        &mut InstructionCounter::default(),
    )
    .expect_err("not executable");
    assert!(matches!(error, Error::NotExecutable { .. }), "{error:?}");
    assert_eq!(error.shell_exit_code(), Some(126));
    let error = step::run(
        &Command::new(dir.path()),
        &options,
        &mut InstructionCounter::default(),
    )
    .expect_err("a directory");
    assert_eq!(error.shell_exit_code(), Some(126));
}
