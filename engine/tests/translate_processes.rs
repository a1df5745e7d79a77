//! The translate backend on threads, forked and vforked processes and
//! `execve`, against the step backend (the same events per thread) and
//! Valgrind (the same instruction counts).

mod common;

use std::collections::HashMap;

use cgx_engine::{step, translate, Arrival, Command, Exit, RunOptions};
use common::{assert_same_events_per_thread, build, valgrind_total, Event, Recorder};

/// Runs `command` under both backends with `options`; returns the
/// translate run's outcome and the events of both.
fn both(
    command: &Command,
    options: &RunOptions,
) -> (translate::Outcome, Recorder, step::Outcome, Recorder) {
    let mut fast = Recorder::default();
    let outcome = translate::run(command, options, &mut fast).expect("the translate run succeeds");
    eprintln!("translate: {outcome:?}");
    let mut reference = Recorder::default();
    let step_outcome = step::run(command, options, &mut reference).expect("the step run succeeds");
    (outcome, fast, step_outcome, reference)
}

/// Asserts that the translate run (`outcome`, its events `fast`) ended with
/// `exit` and agrees with the step run (`step_outcome`, its events
/// `reference`): instruction count, and each thread's events.
fn assert_same_as_step(
    exit: Exit,
    outcome: &translate::Outcome,
    fast: &Recorder,
    step_outcome: &step::Outcome,
    reference: &Recorder,
) {
    assert_eq!(outcome.exit, exit);
    assert_eq!(outcome.instructions, step_outcome.instructions);
    assert_same_events_per_thread(&fast.events, &reference.events);
}

#[test]
fn two_threads_give_the_step_backends_events_per_thread() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(dir.path(), "threads", 0);
    let (outcome, fast, step_outcome, reference) =
        both(&Command::new(&program), &RunOptions::default());
    assert_eq!(outcome.exit, Exit::Code(0));
    assert_eq!(outcome.instructions, step_outcome.instructions);
    let per_thread = fast.instructions_per_thread();
    assert_eq!(per_thread.len(), 2, "{per_thread:?}");
    assert_same_events_per_thread(&fast.events, &reference.events);
    // thread_started before the new thread's first block, which starts.
    let other = *per_thread
        .keys()
        .find(|thread| thread.tid != thread.pid)
        .expect("a second thread");
    let started = fast
        .events
        .iter()
        .position(|event| *event == Event::ThreadStarted(other))
        .expect("thread_started");
    let first = fast
        .events
        .iter()
        .position(|event| matches!(event, Event::Block(thread, _) if *thread == other))
        .expect("blocks of the new thread");
    assert!(started < first);
    assert!(matches!(
        fast.events[first],
        Event::Block(_, block) if block.arrival == Arrival::Start
    ));
    assert_eq!(
        outcome.instructions,
        valgrind_total(dir.path(), "cachegrind", &program)
    );
}

#[test]
fn two_threads_with_simulations_give_the_step_backends_events_per_thread() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(dir.path(), "threads", 0);
    let options = RunOptions {
        simulations: true,
        branches: true,
        ..RunOptions::default()
    };
    let mut fast = Recorder {
        simulations: true,
        ..Recorder::default()
    };
    translate::run(&Command::new(&program), &options, &mut fast).expect("a translate run");
    let mut reference = Recorder {
        simulations: true,
        ..Recorder::default()
    };
    step::run(&Command::new(&program), &options, &mut reference).expect("a step run");
    assert_same_events_per_thread(&fast.events, &reference.events);
}

#[test]
fn a_forked_process_is_profiled_on_its_own() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(dir.path(), "fork", 0);
    let (outcome, fast, step_outcome, reference) =
        both(&Command::new(&program), &RunOptions::default());
    assert_same_as_step(Exit::Code(0), &outcome, &fast, &step_outcome, &reference);
    // `forked` comes where the step backend reports it in the parent's
    // sequence: before the fork system call's instruction.
    let forked_at = fast
        .events
        .iter()
        .position(|event| matches!(event, Event::Forked(..)))
        .expect("forked");
    assert!(matches!(
        fast.events.get(forked_at + 1),
        Some(Event::Instruction(_, _, 2))
    ));
    let mut per_process: HashMap<i32, u64> = HashMap::new();
    for (thread, count) in fast.instructions_per_thread() {
        *per_process.entry(thread.pid).or_default() += count;
    }
    assert_eq!(per_process.len(), 2);
    let before_fork = fast.instructions_until(forked_at) + 1;
    let (parent_cg, child_cg) = common::cachegrind_per_process(dir.path(), &program);
    let parent = fast.blocks()[0].0.pid;
    let child = *per_process
        .keys()
        .find(|&&pid| pid != parent)
        .expect("a child");
    assert_eq!(per_process[&parent], parent_cg);
    assert_eq!(per_process[&child] + before_fork, child_cg);
}

/// The vfork+exec program running `tiny` (exit 3), with `trace_children`.
fn vfork_exec(trace_children: bool) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(dir.path(), "vfork_exec", 0);
    let tiny = build(dir.path(), "tiny", 3);
    let command = Command::new(&program).args([&tiny]);
    let options = RunOptions {
        trace_children,
        ..RunOptions::default()
    };
    let (outcome, fast, step_outcome, reference) = both(&command, &options);
    assert_same_as_step(Exit::Code(3), &outcome, &fast, &step_outcome, &reference);
    assert!(fast
        .events
        .iter()
        .any(|event| matches!(event, Event::Exec(_, traced) if *traced == trace_children)));
    if trace_children {
        let tiny_alone = valgrind_total(dir.path(), "cachegrind", &tiny);
        let after_exec: u64 = fast
            .instructions_per_thread()
            .iter()
            .filter(|(thread, _)| thread.pid != fast.blocks()[0].0.pid)
            .map(|(_, count)| count)
            .sum();
        // The child's: the vfork system call's completion and the execve
        // block, then tiny's.
        assert!(after_exec > tiny_alone, "{after_exec} {tiny_alone}");
    }
}

#[test]
fn vfork_and_exec_traced_on_give_the_step_backends_events() {
    vfork_exec(true);
}

#[test]
fn vfork_and_exec_detached_give_the_step_backends_events() {
    vfork_exec(false);
}

#[test]
fn exec_of_the_initial_process_traced_on_and_detached() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let exec = build(dir.path(), "exec", 0);
    let tiny = build(dir.path(), "tiny", 3);
    let command = Command::new(&exec).args([&tiny]);
    for trace_children in [true, false] {
        let options = RunOptions {
            trace_children,
            ..RunOptions::default()
        };
        let (outcome, fast, step_outcome, reference) = both(&command, &options);
        assert_same_as_step(Exit::Code(3), &outcome, &fast, &step_outcome, &reference);
    }
}

#[test]
fn threads_still_running_at_exit_group_have_their_records_replayed() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(dir.path(), "threads_exit", 0);
    let mut fast = Recorder::default();
    let outcome = translate::run(&Command::new(&program), &RunOptions::default(), &mut fast)
        .expect("the translate run succeeds");
    assert_eq!(outcome.exit, Exit::Code(0));
    let pid = fast.blocks()[0].0.pid;
    let per_thread = fast.instructions_per_thread();
    let (&other, &count) = per_thread
        .iter()
        .find(|(thread, _)| thread.tid != pid)
        .expect("a second thread");
    // The main thread saw 2000 calls of work(1) (a few instructions each)
    // before it exited the group.
    let blocks = fast
        .blocks()
        .iter()
        .filter(|(thread, _)| *thread == other)
        .count();
    assert!(
        blocks >= 2000 * 3 && count >= 2000 * 8,
        "{blocks} blocks, {count} instructions"
    );
    assert!(fast.events.contains(&Event::ThreadExited(other)));
}

#[test]
fn a_program_that_uses_gs_is_refused_only_when_it_does() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let unused = build(dir.path(), "gs", 0);
    let (outcome, fast, step_outcome, reference) =
        both(&Command::new(&unused), &RunOptions::default());
    assert_same_as_step(Exit::Code(0), &outcome, &fast, &step_outcome, &reference);
    let used = build(dir.path(), "gs", 1);
    let error = translate::run(
        &Command::new(&used),
        &RunOptions::default(),
        &mut Recorder::default(),
    )
    .expect_err("the gs segment is the backend's");
    assert!(error.to_string().contains("gs segment"), "{error}");
}

#[test]
fn a_failed_exec_goes_on_after_the_call() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let exec = build(dir.path(), "exec", 0);
    let command = Command::new(&exec).args(["/nonexistent/cgx-no-such-program"]);
    let (outcome, fast, step_outcome, reference) = both(&command, &RunOptions::default());
    assert_same_as_step(Exit::Code(127), &outcome, &fast, &step_outcome, &reference);
}

#[test]
fn threads_one_after_the_other_reuse_one_data_area() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build(dir.path(), "threads_serial", 0);
    let (outcome, fast, step_outcome, reference) =
        both(&Command::new(&program), &RunOptions::default());
    assert_same_as_step(Exit::Code(0), &outcome, &fast, &step_outcome, &reference);
    assert_eq!(fast.instructions_per_thread().len(), 4);
    // The main thread's and one for the three others, each gone (reaped by
    // the tracer during the main thread's sleep) before the next starts.
    assert_eq!(outcome.areas, 2, "{outcome:?}");
}

/// With `counts_only` (most blocks count their runs in the tracee instead
/// of appending records), the threads of a program with two threads, and
/// the two processes of one that forks, run the instructions they run
/// with records, and the runs counted are reported as executed blocks.
#[test]
fn runs_counted_in_the_tracee_give_each_thread_its_instructions() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    for name in ["threads", "fork"] {
        let program = build(dir.path(), name, 0);
        let per_thread = |options: &RunOptions| {
            let mut recorder = Recorder::default();
            let outcome = translate::run(&Command::new(&program), options, &mut recorder)
                .expect("a translate run");
            let mut counts: Vec<u64> = recorder.instructions_per_thread().into_values().collect();
            counts.sort_unstable();
            (outcome, counts)
        };
        let counted = RunOptions {
            counts_only: true,
            ..RunOptions::default()
        };
        let (outcome, counts) = per_thread(&counted);
        let (recorded_outcome, recorded) = per_thread(&RunOptions::default());
        assert_eq!(counts, recorded, "{name}: instructions per thread");
        assert_eq!(
            outcome.instructions, recorded_outcome.instructions,
            "{name}"
        );
        assert!(
            outcome.records * 2 > recorded_outcome.records,
            "{name}: {outcome:?}"
        );
        assert!(outcome.drains > 0, "{name}: {outcome:?}");
    }
}
