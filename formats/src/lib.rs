//! The profile model of cgx and the readers and writers of the Cachegrind and
//! Callgrind file formats.
//!
//! - [`read_path`] reads either format, plain or gzip-compressed, streaming: memory
//!   grows with the profile, not the file.
//! - [`write_path`] writes either format atomically.
//! - [`Profile`] is the model: parts, each with events, positions and the cost
//!   [`Record`]s of every function; names are interned in [`Names`].

mod cachegrind_writer;
mod callgrind_writer;
mod canonical;
mod error;
mod input;
mod model;
mod names;
mod output;
mod reader;
mod records;

pub use cachegrind_writer::{cachegrind_part, write_cachegrind, CachegrindError};
pub use callgrind_writer::{write_callgrind, CallgrindOptions};
pub use canonical::{canonical, CanonicalPart, CanonicalProfile, FunctionName, JumpKey, Place};
pub use error::Error;
pub use model::{
    add_costs, EventDef, Events, FunctionId, FunctionRecords, Part, PartHeader, Position,
    PositionKinds, Profile,
};
pub use names::{NameId, Names, TooManyNames};
pub use output::{write, write_atomically, write_path, Format};
pub use reader::{read, read_path};
pub use records::{Cursor, Record};
