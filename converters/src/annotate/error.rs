//! What can go wrong making a report.

use std::io;

/// Why `cgx annotate` cannot make its report.
#[derive(Debug, thiserror::Error)]
pub enum AnnotateError {
    /// No profile was given.
    #[error("no profile to annotate")]
    NoInput,
    /// `--diff` needs exactly two profiles.
    #[error("--diff needs exactly two profiles, not {0}")]
    DiffNeedsTwo(usize),
    /// A profile has no parts (no `events:` line).
    #[error("{path}: the profile has no events")]
    Empty {
        /// The profile.
        path: String,
    },
    /// `--show` or `--sort` names an event the profiles do not have.
    #[error("{option}: unknown event '{event}' (the profiles have: {available})")]
    UnknownEvent {
        /// `--show` or `--sort`.
        option: &'static str,
        /// The event asked for.
        event: String,
        /// The events the profiles have, space-separated.
        available: String,
    },
    /// A profile (or a part of one) has other events than the first profile.
    #[error("{path}: events '{found}' differ from the events '{expected}' of {first}; only profiles with the same events can be merged")]
    EventsDiffer {
        /// The profile with other events.
        path: String,
        /// Its events, space-separated.
        found: String,
        /// The profile the events are compared with.
        first: String,
        /// Its events, space-separated.
        expected: String,
    },
    /// `--inclusive` or `--tree` on profiles without calls.
    #[error("{option} needs a Callgrind profile with calls (calls= lines); {paths} {verb} none")]
    NoCalls {
        /// The option asked for.
        option: &'static str,
        /// The profiles, comma-separated.
        paths: String,
        /// "has" or "have".
        verb: &'static str,
    },
    /// Writing the report failed.
    #[error("writing the report: {0}")]
    Output(#[from] io::Error),
}
