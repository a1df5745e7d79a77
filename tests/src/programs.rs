//! The C programs in `tests/programs/`, built with gcc.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{successful_output_of, tests_dir};

/// A C program of `tests/programs/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Program {
    /// `calls.c`: recursion, mutual recursion, function pointers and a function
    /// inlined from a header.
    Calls,
    /// `threads.c`: two threads beside the main one.
    Threads,
    /// `phases.c`: three phases separated by `CALLGRIND_DUMP_STATS`.
    Phases,
}

impl Program {
    /// The name of the program (its source is `NAME.c`).
    pub fn name(self) -> &'static str {
        match self {
            Program::Calls => "calls",
            Program::Threads => "threads",
            Program::Phases => "phases",
        }
    }

    /// Functions (`file:function`, the file without its folder) that a profile of
    /// the program must show: evidence that it has what the program is for.
    pub fn landmarks(self) -> &'static [&'static str] {
        match self {
            Program::Calls => &[
                "calls.c:main",
                "calls.c:fib",
                "calls.c:is_even",
                "calls.c:is_odd",
                "calls.c:square",
                "calls.c:twice",
                // mix() inlined into its callers: cost lines under fi=/fe=.
                "mix.h:square",
                "mix.h:twice",
            ],
            Program::Threads => &["threads.c:main", "threads.c:worker", "threads.c:work"],
            Program::Phases => &["phases.c:main", "phases.c:phase_one", "phases.c:phase_two"],
        }
    }

    /// Compiles the program with `gcc -O2 -g` into `dir` and returns the executable.
    pub fn build(self, dir: &Path) -> PathBuf {
        let sources = tests_dir().join("programs");
        let executable = dir.join(self.name());
        successful_output_of(
            Command::new("gcc")
                .args(["-O2", "-g", "-pthread", "-o"])
                .arg(&executable)
                .arg(sources.join(format!("{}.c", self.name()))),
        );
        executable
    }
}
