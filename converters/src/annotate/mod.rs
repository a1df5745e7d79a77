//! `cgx annotate`: the report of cg_annotate (3.21+) on Cachegrind and Callgrind
//! profiles — metadata, program totals, File:function and Function:file summaries,
//! annotated source files and the annotation summary — plus, for Callgrind
//! profiles, callgrind_annotate's inclusive costs and call trees.
//!
//! Several profiles are added up (their events must be the same); with `--diff`
//! the report is on the second minus the first. All parts of a profile are added
//! up. Costs are aggregated by interned ids, so a report on a profile of hundreds
//! of megabytes takes seconds.

mod callgraph;
mod calltree;
mod error;
mod events;
mod format;
pub use format::commify;
mod model;
mod names;
mod options;
mod report;
mod rewrite;
mod source;
pub(crate) use source::ranges as line_ranges;
mod style;
mod summary;
mod table;

pub use error::AnnotateError;
pub use model::Input;
pub use options::{Options, Tree};
pub use report::annotate;
pub use rewrite::Rewrite;
