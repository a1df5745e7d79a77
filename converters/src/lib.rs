//! Conversions between the profile formats cgx handles.
//!
//! Callgrind files carry everything Cachegrind files do, so Cachegrind → Callgrind is
//! writing the same model in the other format. Callgrind → Cachegrind is
//! [`to_cachegrind`]: self costs per source line, call graph and instruction
//! addresses dropped.
//!
//! The stack formats — [`folded`] stacks, a [`flamegraph`] SVG, [`pprof`] and
//! [`speedscope`] files — are written from the weighted call stacks of one event
//! that [`stacks`] rebuilds from a profile.

mod cachegrind;

pub use cachegrind::{to_cachegrind, ConvertError};

pub mod flamegraph;
pub mod folded;
pub mod pprof;
pub mod speedscope;
pub mod stacks;

pub mod annotate;
pub mod callgrind_annotate;
pub mod cg_annotate;
mod script_report;
mod script_source;
pub use script_report::ScriptError;
pub use script_source::SourceOptions;
