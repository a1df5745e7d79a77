//! `--collect-systime` against `valgrind --tool=callgrind` with the same option,
//! on `-static -nostdlib` programs (`systime.c`, `syscall_registers.c` in
//! `tests/programs/run/`).
//!
//! For `nsec`, `usec`, `msec` and `yes`, with the translate backend (and for
//! `nsec` the step backend): the `events:` line and the `event:` lines are
//! Valgrind's; the `sysCount` of every function (self) and of every call arc
//! (inclusive) equals Valgrind's, except `start`'s self count: its wait for
//! the thread (a futex call) runs under Valgrind while the other thread holds
//! Valgrind's lock, and Valgrind charges it to no function (only to its
//! `summary:`), while cgx runs both threads at once and charges it to
//! `start`; a failed `execve` counts (`no_program`), as Valgrind counts it
//! (a successful one does not); the `summary:` line counts `exit` and
//! `exit_group` besides the totals, as Valgrind's does; the times are
//! plausible: the function that sleeps 20 ms has a `sysTime` of at least
//! 20 ms in the unit (less than a second), the others less, and its
//! `sysCpuTime` (`nsec`) is small. With `no` the events are Valgrind's
//! default ones. With collection only in `sleepy`, the cost lines have its
//! calls alone, as Valgrind's, and the `summary:` line every call.
//!
//! `syscall_registers.c` checks that the program computes what it computes
//! natively around a timed `syscall`: rax, rcx (the address after it), r11
//! (the flags), every other register, the flags and the red zone.

use std::collections::BTreeMap;

use cgx_formats::Profile;
use cgx_tests::run::{arc_costs, assert_status, build, run, self_costs_of, Kind, Profiler};

/// Functions of `systime.c` whose system calls both profilers charge alike
/// (see the module's comment for `start`).
const COMPARED: [&str; 5] = ["quick", "sleepy", "no_program", "in_thread", "spawn_thread"];

/// The `sysCount` of each function of [`COMPARED`] (self).
fn counts(profile: &Profile) -> BTreeMap<String, u64> {
    self_costs_of(profile, &["sysCount"])
        .into_iter()
        .filter(|(name, _)| COMPARED.contains(&name.as_str()))
        .map(|(name, costs)| (name, costs[0]))
        .collect()
}

/// The calls' inclusive `sysCount` by (caller, callee), `start` as a caller
/// left out but for its calls of [`COMPARED`] functions.
fn arc_counts(profile: &Profile) -> BTreeMap<(String, String), u64> {
    arc_costs(profile, &["sysCount"])
        .into_iter()
        .filter(|((_, callee), _)| COMPARED.contains(&callee.as_str()))
        .map(|(key, (_, costs))| (key, costs[0]))
        .collect()
}

/// The events and their long names (`event:` lines) of the profile's part.
fn events(profile: &Profile) -> (Vec<String>, Vec<(String, Option<String>)>) {
    let events = &profile.parts[0].events;
    let defs = events
        .defs
        .iter()
        .map(|def| (def.name.clone(), def.long_name.clone()))
        .collect();
    (events.names.clone(), defs)
}

/// The self cost of `event` of `function`.
fn self_cost(profile: &Profile, function: &str, event: &str) -> u64 {
    self_costs_of(profile, &[event])
        .get(function)
        .map_or(0, |costs| costs[0])
}

/// The column of `event` in the summary and the totals.
fn summary_and_total(profile: &Profile, event: &str) -> (u64, u64) {
    let part = &profile.parts[0];
    let column = part
        .events
        .names
        .iter()
        .position(|name| name == event)
        .expect("the event");
    let at = |costs: &Option<Vec<u64>>| {
        costs
            .as_ref()
            .and_then(|costs| costs.get(column).copied())
            .unwrap_or(0)
    };
    (at(&part.summary), at(&part.totals))
}

#[test]
fn system_calls_are_counted_where_valgrind_counts_them() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("systime.c", Kind::NoLibc, dir.path());
    for (unit, units_per_second) in [
        ("nsec", 1_000_000_000u64),
        ("usec", 1_000_000),
        ("msec", 1_000),
        ("yes", 1_000),
    ] {
        let option = format!("--collect-systime={unit}");
        let options = ["-q", "--dump-instr=yes", option.as_str()];
        let run_dir = dir.path().join(unit);
        let valgrind = run(Profiler::Valgrind, &options, &program, &[], &run_dir);
        assert_status(&valgrind, 0);
        let expected = valgrind.profile();
        let backends: &[&str] = match unit {
            "nsec" => &["--backend=translate", "--backend=step"],
            _ => &["--backend=translate"],
        };
        for backend in backends {
            let cgx_options: Vec<&str> = options.iter().copied().chain([*backend]).collect();
            let cgx_dir = run_dir.join(backend.trim_start_matches("--backend="));
            let cgx = run(Profiler::Cgx, &cgx_options, &program, &[], &cgx_dir);
            assert_status(&cgx, 0);
            let actual = cgx.profile();
            let context = format!("systime.c, {cgx_options:?}");
            assert_eq!(events(&actual), events(&expected), "{context}: events");
            assert_eq!(counts(&actual), counts(&expected), "{context}: sysCount");
            let failed = self_cost(&actual, "no_program", "sysCount");
            assert_eq!(failed, 2, "{context}: the failed execve calls");
            assert_eq!(
                arc_counts(&actual),
                arc_counts(&expected),
                "{context}: inclusive sysCount"
            );
            // The summary has exit and exit_group besides the totals.
            let (summary, total) = summary_and_total(&actual, "sysCount");
            assert_eq!(summary, total + 2, "{context}: summary");
            let unit_ms = units_per_second / 1_000;
            let sleeping = self_cost(&actual, "sleepy", "sysTime");
            assert!(
                (20 * unit_ms..units_per_second).contains(&sleeping),
                "{context}: sleepy's sysTime {sleeping}"
            );
            let quick = self_cost(&actual, "quick", "sysTime");
            assert!(quick < 20 * unit_ms, "{context}: quick's sysTime {quick}");
            if unit == "nsec" {
                let cpu = self_cost(&actual, "sleepy", "sysCpuTime");
                assert!(cpu < 10_000_000, "{context}: sleepy's sysCpuTime {cpu}");
            }
        }
    }
    // Without it, no system call events.
    let options = ["-q", "--collect-systime=no"];
    let run_dir = dir.path().join("no");
    let valgrind = run(Profiler::Valgrind, &options, &program, &[], &run_dir);
    let cgx = run(Profiler::Cgx, &options, &program, &[], &run_dir.join("cgx"));
    assert_status(&cgx, 0);
    assert_eq!(events(&cgx.profile()), events(&valgrind.profile()));
    assert_eq!(events(&cgx.profile()).0, ["Ir"]);
}

/// With collection on only in `sleepy` (`--toggle-collect=sleepy`), the cost
/// lines have `sleepy`'s system calls alone, as Valgrind's; the `summary:` line
/// still counts every call, collected or not, as Valgrind's does (the same
/// count as with collection all along).
#[test]
fn system_calls_outside_collection_count_in_the_summary_alone() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("systime.c", Kind::NoLibc, dir.path());
    let all = ["-q", "--collect-systime=msec"];
    let toggled = ["-q", "--collect-systime=msec", "--toggle-collect=sleepy"];
    let valgrind = run(Profiler::Valgrind, &toggled, &program, &[], dir.path());
    assert_status(&valgrind, 0);
    let cgx = run(
        Profiler::Cgx,
        &toggled,
        &program,
        &[],
        &dir.path().join("cgx"),
    );
    assert_status(&cgx, 0);
    let (expected, actual) = (valgrind.profile(), cgx.profile());
    assert_eq!(counts(&actual), counts(&expected), "sysCount");
    assert_eq!(self_cost(&actual, "sleepy", "sysCount"), 3);
    let (summary, total) = summary_and_total(&actual, "sysCount");
    assert_eq!(total, 3, "only sleepy's calls are collected");
    let everything = run(Profiler::Cgx, &all, &program, &[], &dir.path().join("all"));
    assert_status(&everything, 0);
    let (summary_of_all, _) = summary_and_total(&everything.profile(), "sysCount");
    assert_eq!(summary, summary_of_all, "the summary counts every call");
}

#[test]
fn a_timed_system_call_keeps_the_program_s_registers_flags_and_red_zone() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let program = build("syscall_registers.c", Kind::NoLibc, dir.path());
    for backend in ["--backend=translate", "--backend=step"] {
        for unit in ["--collect-systime=nsec", "--collect-systime=msec"] {
            let options = ["-q", backend, unit];
            let cgx = run(
                Profiler::Cgx,
                &options,
                &program,
                &[],
                &dir.path().join(format!("{backend}{unit}")),
            );
            assert_status(&cgx, 0);
            assert_eq!(cgx.stdout, "registers kept\n", "{options:?}");
        }
    }
    // The checks hold natively (Valgrind does not give r11 the flags).
    let native = std::process::Command::new(&program)
        .output()
        .expect("the program runs");
    assert_eq!(native.status.code(), Some(0));
}
