//! The Cachegrind writer.
//!
//! It writes the format of cg_annotate 3.21+, which older versions read too: `desc:`
//! lines, `cmd:`, `events:`, then `fl=` and `fn=` (always as a pair) followed by
//! `LINE COUNTS…` lines, and a `summary:` equal to the totals.

use std::io::{self, Write};

use crate::model::{add_costs, Part, Profile};
use crate::records::Record;

/// Why a profile cannot be written as Cachegrind.
#[derive(Debug, thiserror::Error)]
pub enum CachegrindError {
    /// The format holds exactly one part.
    #[error("the Cachegrind format holds one part, this profile has {0}")]
    Parts(usize),
    /// The format has no calls or jumps.
    #[error("the Cachegrind format holds no calls or jumps (convert to Cachegrind first)")]
    CallGraph,
    /// The format positions costs by source line.
    #[error(
        "the Cachegrind format needs line positions, this profile has instruction addresses only"
    )]
    NoLines,
    /// Writing failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// The one part of `profile` if the Cachegrind format can hold the profile: one
/// part, line positions, no calls or jumps.
pub fn cachegrind_part(profile: &Profile) -> Result<&Part, CachegrindError> {
    let part = match profile.parts.as_slice() {
        [part] => part,
        parts => return Err(CachegrindError::Parts(parts.len())),
    };
    if !part.positions.line {
        return Err(CachegrindError::NoLines);
    }
    if part.has_call_graph() {
        return Err(CachegrindError::CallGraph);
    }
    Ok(part)
}

/// Writes a one-part, line-positioned profile without call graph as Cachegrind.
/// Instruction addresses are dropped; costs at the same line stay separate lines,
/// which readers add up.
pub fn write_cachegrind(profile: &Profile, out: &mut impl Write) -> Result<(), CachegrindError> {
    let part = cachegrind_part(profile)?;
    for desc in &part.header.desc {
        writeln!(out, "desc: {desc}")?;
    }
    writeln!(out, "cmd: {}", part.header.cmd_line().unwrap_or_default())?;
    writeln!(out, "events: {}", part.events.names.join(" "))?;
    let events = part.events.len();
    let mut totals = vec![0u64; events];
    let mut written_file = None;
    for (function, records) in part.functions() {
        let mut cursor = records.cursor(events);
        let mut named = false;
        while let Some(record) = cursor.next_record() {
            let Record::Cost { file, at, costs } = record else {
                continue;
            };
            if !named || written_file != Some(file) {
                writeln!(out, "fl={}", profile.names.get(file))?;
                writeln!(out, "fn={}", profile.names.get(function.name))?;
                written_file = Some(file);
                named = true;
            }
            write!(out, "{}", at.line)?;
            // Every count, as Valgrind writes them: cg_annotate 3.19 warns about
            // missing ones.
            for cost in costs {
                write!(out, " {cost}")?;
            }
            writeln!(out)?;
            add_costs(&mut totals, costs);
        }
    }
    write!(out, "summary:")?;
    for total in totals {
        write!(out, " {total}")?;
    }
    writeln!(out)?;
    Ok(())
}
