//! Requests from outside the run (live control, `callgrind_control`):
//! Callgrind's monitor commands, and the status the collector gives for
//! them.

use std::fmt::Write;

/// A request from outside the run: one of Callgrind's monitor commands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Control {
    /// `dump [HINT]`: a dump of every thread now, whose `desc: Trigger:`
    /// line says `trigger` (Callgrind's: the command itself).
    Dump {
        /// The dump's trigger.
        trigger: String,
    },
    /// `zero`: all costs so far are forgotten.
    Zero,
    /// `instrumentation [on|off]`: switches instrumentation, or with `None`
    /// tells whether it is on.
    Instrumentation(Option<bool>),
    /// `status`; with `internal`, the facts `callgrind_control` prints
    /// ([`Status::text`]).
    Status {
        /// Callgrind's internal interface to `callgrind_control`.
        internal: bool,
    },
}

/// What a process is doing, as Callgrind's monitor tells it to
/// `callgrind_control`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Status {
    /// Blocks executed.
    pub executed_blocks: u64,
    /// Calls executed.
    pub executed_calls: u64,
    /// Blocks seen.
    pub distinct_blocks: usize,
    /// Call arcs seen.
    pub distinct_calls: usize,
    /// Functions seen.
    pub distinct_functions: usize,
    /// Contexts seen.
    pub distinct_contexts: usize,
    /// The events collected.
    pub events: Vec<&'static str>,
    /// Dumps made so far.
    pub part: u32,
    /// The threads, by Valgrind's number.
    pub threads: Vec<ThreadStatus>,
    /// The number of the thread the request stopped.
    pub current: u32,
}

/// A thread in a [`Status`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ThreadStatus {
    /// Valgrind's number of the thread.
    pub number: u32,
    /// Its cost since the last dump.
    pub cost: Vec<u64>,
    /// Its active calls, outermost first: the caller's function, the
    /// calls of the arc, the arc's cost with this call's so far.
    pub frames: Vec<(String, u64, Vec<u64>)>,
    /// The function of the innermost call.
    pub innermost: Option<String>,
}

impl Status {
    /// The lines of Callgrind's `status internal`.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let costs = |cost: &[u64]| {
            cost.iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(" ")
        };
        let _ = writeln!(out, "instrumentation: on");
        let _ = writeln!(out, "executed-bbs: {}", self.executed_blocks);
        let _ = writeln!(out, "executed-calls: {}", self.executed_calls);
        let _ = writeln!(out, "distinct-bbs: {}", self.distinct_blocks);
        let _ = writeln!(out, "distinct-calls: {}", self.distinct_calls);
        let _ = writeln!(out, "distinct-functions: {}", self.distinct_functions);
        let _ = writeln!(out, "distinct-contexts: {}", self.distinct_contexts);
        let _ = writeln!(out, "events: {}", self.events.join(" "));
        let _ = writeln!(out, "part: {}", self.part);
        let numbers: String = self
            .threads
            .iter()
            .map(|t| format!(" {}", t.number))
            .collect();
        let _ = writeln!(out, "threads:{numbers}");
        let _ = writeln!(out, "current-tid: {}", self.current);
        for thread in &self.threads {
            let t = thread.number;
            let _ = writeln!(out, "events-{t}: {}", costs(&thread.cost));
            let _ = writeln!(out, "frames-{t}: {}", thread.frames.len());
            for (i, (function, calls, cost)) in thread.frames.iter().enumerate() {
                let _ = writeln!(out, "function-{t}-{i}: {function}");
                let _ = writeln!(out, "calls-{t}-{i}: {calls}");
                let _ = writeln!(out, "events-{t}-{i}: {}", costs(cost));
            }
            if let Some(innermost) = &thread.innermost {
                let _ = writeln!(out, "function-{t}-{}: {innermost}", thread.frames.len());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_has_callgrinds_lines() {
        let status = Status {
            executed_blocks: 1200,
            executed_calls: 30,
            distinct_blocks: 90,
            distinct_calls: 12,
            distinct_functions: 10,
            distinct_contexts: 11,
            events: vec!["Ir"],
            part: 1,
            threads: vec![ThreadStatus {
                number: 1,
                cost: vec![5000],
                frames: vec![("main".into(), 1, vec![4000])],
                innermost: Some("wait_for_work".into()),
            }],
            current: 1,
        };
        assert_eq!(
            status.text(),
            "instrumentation: on\nexecuted-bbs: 1200\nexecuted-calls: 30\n\
             distinct-bbs: 90\ndistinct-calls: 12\ndistinct-functions: 10\n\
             distinct-contexts: 11\nevents: Ir\npart: 1\nthreads: 1\ncurrent-tid: 1\n\
             events-1: 5000\nframes-1: 1\nfunction-1-0: main\ncalls-1-0: 1\n\
             events-1-0: 4000\nfunction-1-1: wait_for_work\n"
        );
    }
}
