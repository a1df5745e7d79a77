//! What `cgx run` prints on stderr, in Valgrind's `==PID==` style: a short
//! header when a process starts, the termination message of a process killed by
//! a signal, and the summary of its costs when it ends.
//!
//! Valgrind 3.19 ends a Callgrind run with
//!
//! ```text
//! ==6740== Events    : Ir
//! ==6740== Collected : 126729
//! ==6740==
//! ==6740== I   refs:      126,729
//! ```
//!
//! and a Cachegrind run (`--cache-sim=no`) with
//!
//! ```text
//! ==6741==
//! ==6741== I   refs:      127,849
//! ```
//!
//! (blank lines are `==PID== ` with a trailing space). The figures are the sums
//! over all dumps of the process. With `--cache-sim=yes` and `--branch-sim=yes`
//! the miss and misprediction lines follow, as [`summary`] shows.
//!
//! The header has the lines of Valgrind's in their places, in cgx's words:
//! the tool, who made the profiler, what it is in place of, then
//! `==PID== Command: …` and a blank line:
//!
//! ```text
//! ==6741== Callgrind, a call-graph and cache profiler (cgx 0.1.0, translate backend)
//! ==6741== cgx: Valgrind's profiles without Valgrind; MIT OR Apache-2.0
//! ==6741== Using cgx-0.1.0 in place of Valgrind-3.19.0; rerun with -h for help
//! ==6741== Command: ./prog
//! ==6741==
//! ```

use cgx_formats::Profile;

use super::options::{Backend, Tool};
use crate::shims::VALGRIND_VERSION;

/// The summed costs of the dumps of one process, by event name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// The events, in the order first seen.
    pub events: Vec<String>,
    /// The sum of each event.
    pub costs: Vec<u64>,
}

impl Totals {
    /// Adds the totals of every part of `profile` (`totals:` when known, else
    /// the sum of the self costs).
    pub fn add(&mut self, profile: &Profile) {
        for part in &profile.parts {
            let totals = part.totals.clone().unwrap_or_else(|| part.self_totals());
            for (name, cost) in part.events.names.iter().zip(totals) {
                let index = match self.events.iter().position(|event| event == name) {
                    Some(index) => index,
                    None => {
                        self.events.push(name.clone());
                        self.costs.push(0);
                        self.events.len() - 1
                    }
                };
                self.costs[index] = self.costs[index].wrapping_add(cost);
            }
        }
    }

    /// The total of `event`, 0 when no dump had it.
    pub fn get(&self, event: &str) -> u64 {
        self.events
            .iter()
            .position(|name| name == event)
            .map_or(0, |index| self.costs[index])
    }
}

/// The lines cgx prints when process `pid` starts.
pub fn header(pid: i32, tool: Tool, backend: Backend, command: &str) -> String {
    let tool = match tool {
        Tool::Callgrind => "Callgrind, a call-graph and cache profiler",
        Tool::Cachegrind => "Cachegrind, a cache and branch profiler",
    };
    format!(
        "=={pid}== {tool} (cgx {version}, {backend} backend)\n\
         =={pid}== cgx: Valgrind's profiles without Valgrind; {license}\n\
         =={pid}== Using cgx-{version} in place of Valgrind-{VALGRIND_VERSION}; \
         rerun with -h for help\n\
         =={pid}== Command: {command}\n\
         =={pid}== \n",
        version = env!("CARGO_PKG_VERSION"),
        license = env!("CARGO_PKG_LICENSE"),
        backend = backend.name(),
    )
}

/// The command line as Valgrind's `Command:` line shows it: the program
/// and each argument with a backslash before each space, backslash, `<`
/// and `>` in it, separated by spaces.
pub fn shown_command<A: AsRef<str>>(program: &str, args: &[A]) -> String {
    let escaped = |word: &str| {
        let mut out = String::with_capacity(word.len());
        for c in word.chars() {
            if matches!(c, ' ' | '\\' | '<' | '>') {
                out.push('\\');
            }
            out.push(c);
        }
        out
    };
    std::iter::once(program)
        .chain(args.iter().map(AsRef::as_ref))
        .map(escaped)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Valgrind's first line about a process killed by `signal`.
pub fn termination(pid: i32, signal: i32) -> String {
    match signal_name(signal) {
        Some(name) => format!(
            "=={pid}== Process terminating with default action of signal {signal} ({name})\n"
        ),
        None => format!("=={pid}== Process terminating with default action of signal {signal}\n"),
    }
}

/// The simulations of a run, which decide the lines of the summary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Simulations {
    /// `--cache-sim=yes`: the I1, D1, LL lines.
    pub cache: bool,
    /// `--branch-sim=yes`: the branch lines.
    pub branch: bool,
}

/// The summary of process `pid` at its end, after the blank line Valgrind's
/// core prints at the end of every run (and after a termination message).
///
/// Callgrind's `Collected` is its total cost (the `totals:` of the dumps, not
/// their `summary:`, which also holds the last block), trailing zeros left
/// out; the lines after it are those of Valgrind 3.19's `callgrind/main.c`
/// (`finish`) and `sim.c` (`cachesim_printstat`), or `cg_main.c` (`cg_fini`)
/// for Cachegrind, with their column widths and their odd ways: a zero
/// denominator counts as 1, also in the `Branches` line.
pub fn summary(pid: i32, tool: Tool, simulations: Simulations, totals: &Totals) -> String {
    let mut out = String::new();
    let mut line = |text: &str| {
        out.push_str(&format!("=={pid}== {text}\n"));
    };
    match tool {
        Tool::Callgrind => {
            line("");
            line(&format!("Events    : {}", totals.events.join(" ")));
            line(&format!("Collected : {}", collected(&totals.costs)));
            line("");
        }
        Tool::Cachegrind => line(""),
    }
    let get = |event| totals.get(event);
    let l1 = width(get("Ir"));
    let (l2, l3) = match tool {
        Tool::Callgrind => {
            let (mut l2, mut l3) = (0, 0);
            if simulations.cache {
                (l2, l3) = (width(get("Dr")), width(get("Dw")));
            }
            if simulations.branch {
                l2 = l2.max(width(get("Bc")));
                l3 = l3.max(width(get("Bi")));
            }
            (l2, l3)
        }
        Tool::Cachegrind => (
            width(get("Dr").max(get("Bc"))),
            width(get("Dw").max(get("Bi"))),
        ),
    };
    line(&format!("I   refs:      {}", count(get("Ir"), l1)));
    if simulations.cache {
        // Callgrind: `(%s rd + %s wr)`, `(%s%%   + %s%%  )`; Cachegrind has
        // two more blanks before each `+`.
        let (rd, rate) = match tool {
            Tool::Callgrind => ("rd +", "%   +"),
            Tool::Cachegrind => ("rd   +", "%     +"),
        };
        let counts = |label: &str, all: u64, read: u64, write: u64| {
            format!(
                "{label}{}  ({} {rd} {} wr)",
                count(all, l1),
                count(read, l2),
                count(write, l3)
            )
        };
        let rates = |label: &str, all: f64, read: f64, write: f64| {
            format!(
                "{label}{}% ({}{rate} {}%  )",
                fixed(all, 1, l1),
                fixed(read, 1, l2),
                fixed(write, 1, l3)
            )
        };
        let mut ir = get("Ir");
        let (i1mr, ilmr) = (get("I1mr"), get("ILmr"));
        let (mut dr, d1mr, dlmr) = (get("Dr"), get("D1mr"), get("DLmr"));
        let (mut dw, d1mw, dlmw) = (get("Dw"), get("D1mw"), get("DLmw"));
        line(&format!("I1  misses:    {}", count(i1mr, l1)));
        line(&format!("LLi misses:    {}", count(ilmr, l1)));
        if ir == 0 {
            ir = 1;
        }
        line(&format!(
            "I1  miss rate: {}%",
            fixed(percent(i1mr, ir), 2, l1)
        ));
        line(&format!(
            "LLi miss rate: {}%",
            fixed(percent(ilmr, ir), 2, l1)
        ));
        line("");
        let mut d = dr.wrapping_add(dw);
        line(&counts("D   refs:      ", d, dr, dw));
        line(&counts(
            "D1  misses:    ",
            d1mr.wrapping_add(d1mw),
            d1mr,
            d1mw,
        ));
        line(&counts(
            "LLd misses:    ",
            dlmr.wrapping_add(dlmw),
            dlmr,
            dlmw,
        ));
        for total in [&mut d, &mut dr, &mut dw] {
            if *total == 0 {
                *total = 1;
            }
        }
        line(&rates(
            "D1  miss rate: ",
            percent(d1mr.wrapping_add(d1mw), d),
            percent(d1mr, dr),
            percent(d1mw, dw),
        ));
        line(&rates(
            "LLd miss rate: ",
            percent(dlmr.wrapping_add(dlmw), d),
            percent(dlmr, dr),
            percent(dlmw, dw),
        ));
        line("");
        let ll_read = d1mr.wrapping_add(i1mr);
        line(&counts(
            "LL refs:       ",
            ll_read.wrapping_add(d1mw),
            ll_read,
            d1mw,
        ));
        let ll_miss_read = dlmr.wrapping_add(ilmr);
        let ll_misses = ll_miss_read.wrapping_add(dlmw);
        line(&counts("LL misses:     ", ll_misses, ll_miss_read, dlmw));
        line(&rates(
            "LL miss rate:  ",
            percent(ll_misses, ir.wrapping_add(d)),
            percent(ll_miss_read, ir.wrapping_add(dr)),
            percent(dlmw, dw),
        ));
    }
    if simulations.branch {
        let (mut bc, bcm, mut bi, bim) = (get("Bc"), get("Bcm"), get("Bi"), get("Bim"));
        // As Valgrind: before the counts are printed.
        if bc == 0 {
            bc = 1;
        }
        if bi == 0 {
            bi = 1;
        }
        let (b, bm) = (bc.wrapping_add(bi), bcm.wrapping_add(bim));
        let counts = |label: &str, all: u64, cond: u64, ind: u64| {
            format!(
                "{label}{}  ({} cond + {} ind)",
                count(all, l1),
                count(cond, l2),
                count(ind, l3)
            )
        };
        line("");
        line(&counts("Branches:      ", b, bc, bi));
        line(&counts("Mispredicts:   ", bm, bcm, bim));
        line(&format!(
            "Mispred rate:  {}% ({}%     + {}%   )",
            fixed(percent(bm, b), 1, l1),
            fixed(percent(bcm, bc), 1, l2),
            fixed(percent(bim, bi), 1, l3)
        ));
    }
    out
}

/// The `-v` line on the back-dating tree of process `pid` (cgx's own; the
/// tree gives the inclusive cache-use costs of `--cacheuse=yes`).
pub fn statistics(pid: i32, statistics: &cgx_backdate::Statistics) -> String {
    format!(
        "--{pid}-- back-dating tree: {} nodes created, at most {} alive, {:.1} on average, {} left at the end\n",
        thousands(statistics.created),
        thousands(statistics.max_nodes as u64),
        statistics.average_nodes,
        thousands(statistics.nodes as u64),
    )
}

/// What `-v` prints about a run of the translate backend in process `pid`:
/// its translations, the executions of translated blocks (records) and the
/// buffer hand-offs they came in, the ptrace stops of the tracee while it ran
/// translated code (per thousand blocks executed), and the blocks it could not translate and single-stepped.
pub fn translated(pid: i32, outcome: &super::trace::Translated) -> String {
    let blocks = outcome.records + outcome.stepped_blocks;
    let per_thousand = if blocks == 0 {
        0.0
    } else {
        outcome.stops as f64 * 1000.0 / blocks as f64
    };
    format!(
        "--{pid}-- translate backend: {} blocks translated, {} executed in translation \
         ({} buffer hand-offs), {} stopped the tracee ({per_thousand:.2} per thousand \
         blocks), {} blocks single-stepped ({} steps), {} instructions\n",
        thousands(outcome.translations),
        thousands(outcome.records),
        thousands(outcome.drains),
        thousands(outcome.stops),
        thousands(outcome.stepped_blocks),
        thousands(outcome.steps),
        thousands(outcome.instructions),
    )
}

/// Callgrind's `Collected :` values: every count up to the last non-zero one
/// (at least one).
fn collected(costs: &[u64]) -> String {
    let used = costs
        .iter()
        .rposition(|&cost| cost != 0)
        .map_or(1, |i| i + 1);
    costs
        .iter()
        .take(used)
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The characters of `n` with its commas (Valgrind's `ULong_width`).
fn width(n: u64) -> usize {
    let digits = n.to_string().len();
    digits + (digits - 1) / 3
}

/// `n` with commas, right-aligned in `width` characters (`%'*llu`).
fn count(n: u64, width: usize) -> String {
    format!("{:>width$}", thousands(n))
}

/// `part` in percent of `whole`, computed as Valgrind does (`n * 100.0 / d`).
fn percent(part: u64, whole: u64) -> f64 {
    part as f64 * 100.0 / whole as f64
}

/// `value` (not negative) with `precision` decimals, right-aligned in `width`
/// characters, exactly as Valgrind's own printf does `%*.Nf`: the fraction is
/// truncated and rounded up only when the rest is above one half (so a tie
/// rounds down, unlike C's printf).
fn fixed(value: f64, precision: u32, width: usize) -> String {
    if value > u64::MAX as f64 {
        // Valgrind prints stars for what does not fit.
        return "*".repeat(if width == 0 { 6 } else { width });
    }
    let mut integral = value as u64;
    let fraction = value - integral as f64;
    let factor = 10u64.pow(precision);
    let scaled = fraction * factor as f64;
    let mut decimals = scaled as u64;
    if scaled - decimals as f64 > 0.5 {
        decimals += 1;
    }
    if decimals == factor {
        integral += 1;
    }
    decimals %= factor;
    let text = if precision == 0 {
        integral.to_string()
    } else {
        format!("{integral}.{decimals:0p$}", p = precision as usize)
    };
    format!("{text:>width$}")
}

/// `n` with a comma every three digits, as Valgrind's `%'llu`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let head = match digits.len() % 3 {
        0 => 3,
        rest => rest,
    };
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    out.push_str(&digits[..head]);
    for group in digits.as_bytes()[head..].chunks(3) {
        out.push(',');
        out.extend(group.iter().map(|&digit| char::from(digit)));
    }
    out
}

/// The name of a Linux signal (x86-64 numbers).
fn signal_name(signal: i32) -> Option<&'static str> {
    const NAMES: [&str; 31] = [
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    usize::try_from(signal)
        .ok()
        .and_then(|n| n.checked_sub(1))
        .and_then(|n| NAMES.get(n).copied())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::summary_fixtures::{Fixture, FIXTURES};
    use cgx_formats::{Events, Part, PositionKinds};

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(7), "7");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(126_729), "126,729");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(u64::MAX), "18,446,744,073,709,551,615");
    }

    const NONE: Simulations = Simulations {
        cache: false,
        branch: false,
    };

    fn make(events: &[&str], costs: &[u64]) -> Totals {
        Totals {
            events: events.iter().map(|e| e.to_string()).collect(),
            costs: costs.to_vec(),
        }
    }

    #[test]
    fn callgrind_summary_as_valgrind() {
        let totals = make(&["Ir"], &[126_729]);
        assert_eq!(
            summary(6810, Tool::Callgrind, NONE, &totals),
            "==6810== \n\
             ==6810== Events    : Ir\n\
             ==6810== Collected : 126729\n\
             ==6810== \n\
             ==6810== I   refs:      126,729\n"
        );
        let several = make(&["Ir", "Dr", "Dw"], &[1000, 20, 3]);
        assert!(summary(1, Tool::Callgrind, NONE, &several)
            .starts_with("==1== \n==1== Events    : Ir Dr Dw\n==1== Collected : 1000 20 3\n"));
    }

    /// Valgrind's summary for totals read from its own `Events` and
    /// `Collected` lines (trailing zeros left out) or given.
    fn fixture_totals(fixture: &Fixture) -> Totals {
        match fixture.tool {
            Tool::Callgrind => {
                let value = |label: &str| {
                    fixture
                        .lines
                        .iter()
                        .find_map(|line| line.split_once(label).map(|(_, rest)| rest))
                        .unwrap_or_else(|| panic!("{}: no {label}", fixture.command))
                };
                let events: Vec<&str> = value("Events    : ").split(' ').collect();
                let mut costs: Vec<u64> = value("Collected : ")
                    .split(' ')
                    .map(|n| n.parse().unwrap())
                    .collect();
                costs.resize(events.len(), 0);
                make(&events, &costs)
            }
            Tool::Cachegrind => {
                let events: Vec<&str> = fixture.events.split(' ').collect();
                make(&events, fixture.costs)
            }
        }
    }

    #[test]
    fn valgrind_3_19_summaries_byte_for_byte() {
        for fixture in FIXTURES {
            let pid: i32 = fixture.lines[0]
                .trim_start_matches("==")
                .split("==")
                .next()
                .and_then(|pid| pid.parse().ok())
                .unwrap();
            // The fixtures of Callgrind start at its `Events` line, after
            // the core's blank line.
            let blank = match fixture.tool {
                Tool::Callgrind => format!("=={pid}== \n"),
                Tool::Cachegrind => String::new(),
            };
            let lines = fixture.lines.iter().map(|line| format!("{line}\n"));
            let expected: String = std::iter::once(blank).chain(lines).collect();
            let totals = fixture_totals(fixture);
            assert_eq!(
                summary(pid, fixture.tool, fixture.simulations, &totals),
                expected,
                "{}",
                fixture.command
            );
        }
    }

    #[test]
    fn collected_leaves_out_trailing_zeros() {
        assert_eq!(collected(&[0, 0, 0]), "0");
        assert_eq!(collected(&[5, 0, 3, 0]), "5 0 3");
        assert_eq!(collected(&[]), "");
        let totals = make(&["Ir", "Dr", "Dw"], &[7, 0, 0]);
        assert!(summary(1, Tool::Callgrind, NONE, &totals)
            .starts_with("==1== \n==1== Events    : Ir Dr Dw\n==1== Collected : 7\n"));
    }

    #[test]
    fn valgrinds_fixed_point_rounding() {
        // Ties round down, what is above a half rounds up, carries carry.
        assert_eq!(fixed(0.25, 1, 0), "0.2");
        assert_eq!(fixed(0.26, 1, 0), "0.3");
        assert_eq!(fixed(0.96, 1, 5), "  1.0");
        assert_eq!(fixed(100.0, 1, 3), "100.0");
        assert_eq!(fixed(1.0 / 3.0 * 100.0, 2, 7), "  33.33");
        assert_eq!(fixed(2.5, 0, 2), " 2");
        assert_eq!(fixed(1e30, 1, 4), "****");
        assert_eq!(width(0), 1);
        assert_eq!(width(999), 3);
        assert_eq!(width(1000), 5);
        assert_eq!(width(126_743), 7);
        assert_eq!(count(1082, 7), "  1,082");
        assert_eq!(count(1_234_567, 3), "1,234,567");
    }

    #[test]
    fn cachegrind_summary_as_valgrind() {
        let totals = make(&["Ir"], &[127_849]);
        let expected = "==6741== \n==6741== I   refs:      127,849\n";
        assert_eq!(summary(6741, Tool::Cachegrind, NONE, &totals), expected);
        assert_eq!(
            summary(5, Tool::Cachegrind, NONE, &Totals::default()),
            "==5== \n==5== I   refs:      0\n"
        );
    }

    #[test]
    fn totals_add_up_the_dumps() {
        let mut part = Part::new(Events::new(["Ir", "Dr"]), PositionKinds::default());
        part.totals = Some(vec![10, 2]);
        let mut other = Part::new(Events::new(["Dr", "Dw"]), PositionKinds::default());
        other.totals = Some(vec![5, 1]);
        let profile = Profile {
            parts: vec![part, other],
            ..Profile::default()
        };
        let mut sum = Totals::default();
        sum.add(&profile);
        sum.add(&profile);
        assert_eq!(sum, make(&["Ir", "Dr", "Dw"], &[20, 14, 2]));
        assert_eq!(sum.get("Ir"), 20);
        assert_eq!(sum.get("Bc"), 0);
        // Without totals: the self costs.
        let empty = Profile {
            parts: vec![Part::new(Events::new(["Ir"]), PositionKinds::default())],
            ..Profile::default()
        };
        let mut sum = Totals::default();
        sum.add(&empty);
        assert_eq!(sum, make(&["Ir"], &[0]));
    }

    #[test]
    fn back_dating_statistics() {
        let statistics = cgx_backdate::Statistics {
            nodes: 3,
            max_nodes: 1500,
            average_nodes: 12.345,
            created: 123_456,
        };
        assert_eq!(
            super::statistics(42, &statistics),
            "--42-- back-dating tree: 123,456 nodes created, at most 1,500 alive, \
             12.3 on average, 3 left at the end\n"
        );
    }

    #[test]
    fn translate_statistics() {
        let outcome = super::super::trace::Translated {
            instructions: 1_234_567,
            stops: 12,
            translations: 345,
            stepped_blocks: 6,
            steps: 20,
            drains: 3,
            records: 23_994,
        };
        assert_eq!(
            super::translated(42, &outcome),
            "--42-- translate backend: 345 blocks translated, 23,994 executed in translation \
             (3 buffer hand-offs), 12 stopped the tracee (0.50 per thousand blocks), 6 blocks \
             single-stepped (20 steps), 1,234,567 instructions\n"
        );
    }

    #[test]
    fn the_command_line_is_shown_as_valgrind_shows_it() {
        let args = ["-c", "echo a b >&2; cat <x", "c:\\d", ""];
        assert_eq!(
            shown_command("./my prog", &args),
            "./my\\ prog -c echo\\ a\\ b\\ \\>&2;\\ cat\\ \\<x c:\\\\d "
        );
        assert_eq!(shown_command::<&str>("p", &[]), "p");
    }

    #[test]
    fn header_and_termination() {
        let version = env!("CARGO_PKG_VERSION");
        assert_eq!(
            header(7, Tool::Cachegrind, Backend::Translate, "p"),
            format!(
                "==7== Cachegrind, a cache and branch profiler (cgx {version}, translate backend)\n\
                 ==7== cgx: Valgrind's profiles without Valgrind; MIT OR Apache-2.0\n\
                 ==7== Using cgx-{version} in place of Valgrind-3.19.0; rerun with -h for help\n\
                 ==7== Command: p\n==7== \n"
            )
        );
        let callgrind = header(42, Tool::Callgrind, Backend::Step, "./prog a b");
        let lines: Vec<&str> = callgrind.lines().collect();
        assert_eq!(
            lines[0],
            format!(
                "==42== Callgrind, a call-graph and cache profiler (cgx {version}, step backend)"
            )
        );
        assert_eq!(lines[3..], ["==42== Command: ./prog a b", "==42== "]);
        assert_eq!(
            termination(6810, 11),
            "==6810== Process terminating with default action of signal 11 (SIGSEGV)\n"
        );
        assert_eq!(
            termination(1, 31),
            "==1== Process terminating with default action of signal 31 (SIGSYS)\n"
        );
        assert_eq!(
            termination(1, 40),
            "==1== Process terminating with default action of signal 40\n"
        );
        assert_eq!(signal_name(0), None);
        assert_eq!(signal_name(-3), None);
    }
}
