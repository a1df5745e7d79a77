//! Errors of the engine: values, never panics.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong while starting or tracing a program.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The program does not exist (or, for a bare name, is not on `PATH`).
    #[error("{}: command not found", program.display())]
    NotFound {
        /// The program as the user named it.
        program: PathBuf,
    },
    /// The program exists but cannot be executed (no execute permission, or a
    /// directory).
    #[error("{}: cannot execute: {reason}", path.display())]
    NotExecutable {
        /// The file that was found.
        path: PathBuf,
        /// Why it cannot be executed.
        reason: &'static str,
    },
    /// `execve` of the program failed in the child (e.g. not a valid executable).
    #[error("{}: cannot execute: {source}", path.display())]
    Exec {
        /// The file that was executed.
        path: PathBuf,
        /// The error `execve` returned.
        source: io::Error,
    },
    /// The program is one cgx cannot trace as it runs natively (another
    /// processor's, 32-bit, a set-user-ID program that would lose its
    /// privileges, ptrace forbidden); nothing ran.
    #[error("{}: cannot be traced: {reason}", path.display())]
    Untraceable {
        /// The program.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The program was killed by `signal` before its first instruction
    /// (during `execve`); nothing ran, nothing is profiled.
    #[error("{}: killed by signal {signal} before it started", path.display())]
    KilledAtStart {
        /// The program.
        path: PathBuf,
        /// The signal.
        signal: i32,
    },
    /// A system call of the tracer failed.
    #[error("{operation} failed: {source}")]
    Os {
        /// What the tracer was doing.
        operation: &'static str,
        /// The error of the system call.
        source: io::Error,
    },
    /// The tracee did something the engine does not handle (yet).
    #[error("unexpected tracee state: {0}")]
    Unexpected(String),
}

impl Error {
    /// The exit status for this error when it starts a program: as a shell
    /// gives it, 127 for a missing program, 126 for one that cannot be
    /// executed; 1 for one that cannot be traced (as Valgrind for a program
    /// it cannot run); 128 + N for one signal N killed as it started;
    /// `None` for errors that are not about starting the program.
    pub fn shell_exit_code(&self) -> Option<i32> {
        match self {
            Error::NotFound { .. } => Some(127),
            Error::NotExecutable { .. } => Some(126),
            Error::Exec { source, .. } => Some(if source.kind() == io::ErrorKind::NotFound {
                127
            } else {
                126
            }),
            Error::Untraceable { .. } => Some(1),
            // As a shell reports a process a signal killed.
            Error::KilledAtStart { signal, .. } => Some(128 + signal),
            Error::Os { .. } | Error::Unexpected(_) => None,
        }
    }

    /// An [`Error::Os`] from the last OS error (`errno`).
    pub(crate) fn last_os(operation: &'static str) -> Error {
        Error::Os {
            operation,
            source: io::Error::last_os_error(),
        }
    }
}

/// The engine's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_killed_as_it_starts_exits_as_a_shell_says() {
        let killed = Error::KilledAtStart {
            path: PathBuf::from("./prog"),
            signal: libc::SIGKILL,
        };
        assert_eq!(killed.shell_exit_code(), Some(137));
        assert_eq!(
            killed.to_string(),
            "./prog: killed by signal 9 before it started"
        );
    }
}
