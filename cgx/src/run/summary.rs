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
//! over all dumps of the process. The lines of the cache and branch simulations
//! come with them (issue 5).
//!
//! The header is cgx's own (Valgrind's names the tool, its copyright and the
//! command): `==PID== cgx-0.1.0 callgrind, step backend`, `==PID== Command: …`,
//! then a blank line.

use cgx_formats::Profile;

use super::options::{Backend, Tool};

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
    let backend = match backend {
        Backend::Step => "step",
    };
    format!(
        "=={pid}== cgx-{version} {tool}, {backend} backend\n\
         =={pid}== Command: {command}\n\
         =={pid}== \n",
        version = env!("CARGO_PKG_VERSION"),
        tool = tool.name(),
    )
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

/// The summary of process `pid` at its end. `after_termination`: a termination
/// message was just printed (Callgrind then starts with a blank line, which
/// Cachegrind always does).
pub fn summary(pid: i32, tool: Tool, totals: &Totals, after_termination: bool) -> String {
    let mut out = String::new();
    let mut line = |text: &str| {
        out.push_str(&format!("=={pid}== {text}\n"));
    };
    match tool {
        Tool::Callgrind => {
            if after_termination {
                line("");
            }
            line(&format!("Events    : {}", totals.events.join(" ")));
            let collected: Vec<String> = totals.costs.iter().map(u64::to_string).collect();
            line(&format!("Collected : {}", collected.join(" ")));
            line("");
        }
        Tool::Cachegrind => line(""),
    }
    line(&format!("I   refs:      {}", thousands(totals.get("Ir"))));
    out
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
            summary(6740, Tool::Callgrind, &totals, false),
            "==6740== Events    : Ir\n\
             ==6740== Collected : 126729\n\
             ==6740== \n\
             ==6740== I   refs:      126,729\n"
        );
        assert_eq!(
            summary(6810, Tool::Callgrind, &totals, true),
            "==6810== \n\
             ==6810== Events    : Ir\n\
             ==6810== Collected : 126729\n\
             ==6810== \n\
             ==6810== I   refs:      126,729\n"
        );
        let several = make(&["Ir", "Dr", "Dw"], &[1000, 20, 3]);
        assert!(summary(1, Tool::Callgrind, &several, false)
            .starts_with("==1== Events    : Ir Dr Dw\n==1== Collected : 1000 20 3\n"));
    }

    #[test]
    fn cachegrind_summary_as_valgrind() {
        let totals = make(&["Ir"], &[127_849]);
        let expected = "==6741== \n==6741== I   refs:      127,849\n";
        assert_eq!(summary(6741, Tool::Cachegrind, &totals, false), expected);
        assert_eq!(summary(6741, Tool::Cachegrind, &totals, true), expected);
        assert_eq!(
            summary(5, Tool::Cachegrind, &Totals::default(), false),
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
    fn header_and_termination() {
        let version = env!("CARGO_PKG_VERSION");
        assert_eq!(
            header(42, Tool::Callgrind, Backend::Step, "./prog a b"),
            format!(
                "==42== cgx-{version} callgrind, step backend\n==42== Command: ./prog a b\n==42== \n"
            )
        );
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
