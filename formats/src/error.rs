//! Errors of the readers and writers.

use std::io;

/// What went wrong reading or writing a profile. Displayed as `FILE:LINE: what`,
/// or `FILE: what` where no line applies.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file does not follow the format.
    #[error("{path}:{line}: {message}")]
    Syntax {
        /// The file, as the user named it.
        path: String,
        /// The 1-based line number.
        line: u64,
        /// What is wrong.
        message: String,
    },
    /// Reading or writing failed.
    #[error("{path}: {error}")]
    Io {
        /// The file, as the user named it.
        path: String,
        /// What the system said (part of the message, so not a separate source).
        error: io::Error,
    },
    /// The file as a whole is not a profile, or the profile holds something the
    /// target format cannot express.
    #[error("{path}: {message}")]
    Invalid {
        /// The file, as the user named it.
        path: String,
        /// What is wrong.
        message: String,
    },
}

impl Error {
    /// An [`Error::Io`] about `path`.
    pub fn io(path: impl Into<String>, error: io::Error) -> Error {
        Error::Io {
            path: path.into(),
            error,
        }
    }
}
