//! The profile model: what the Cachegrind and Callgrind formats express.

use indexmap::IndexMap;
use rustc_hash::FxBuildHasher;

use crate::names::{NameId, Names};
use crate::records::{Record, Records};

/// A position in a function: an instruction address and/or a source line. Kinds
/// that a part's `positions:` does not list are zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Position {
    /// The instruction address (`instr`).
    pub instr: u64,
    /// The source line (`line`); 0 means unknown.
    pub line: u64,
}

/// Which subpositions the cost lines of a part carry (`positions:`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PositionKinds {
    /// Lines start with an instruction address.
    pub instr: bool,
    /// Lines carry a source line number (after the address, if any).
    pub line: bool,
}

impl Default for PositionKinds {
    /// `line` only, the default of both formats.
    fn default() -> Self {
        PositionKinds {
            instr: false,
            line: true,
        }
    }
}

/// A function as the formats identify it. The empty name stands for "not given"
/// (a Cachegrind file names no objects).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FunctionId {
    /// The object (executable or shared library) the function is in (`ob=`).
    pub object: NameId,
    /// The source file of the function (`fl=`).
    pub file: NameId,
    /// The function's name (`fn=`).
    pub name: NameId,
}

/// An `event:` line: a long name for an event, or a derived event `A = B + C`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventDef {
    /// The short name.
    pub name: String,
    /// The formula of a derived event, as written after `=`.
    pub formula: Option<String>,
    /// The long name, as written after `:`.
    pub long_name: Option<String>,
}

/// The events of a part: the columns of its cost lines, and their definitions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Events {
    /// The `events:` line, in column order.
    pub names: Vec<String>,
    /// The `event:` lines.
    pub defs: Vec<EventDef>,
}

impl Events {
    /// Events with these names and no definitions.
    pub fn new<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Events {
        Events {
            names: names.into_iter().map(Into::into).collect(),
            defs: Vec::new(),
        }
    }

    /// The column of the event called `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// How many events (cost columns) there are.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether there are no events.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// Descriptive header lines of a part.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartHeader {
    /// `pid:` — the profiled process.
    pub pid: Option<u64>,
    /// `thread:` — the thread, with `--separate-threads=yes`.
    pub thread: Option<u64>,
    /// `part:` — the number of the dump.
    pub part: Option<u64>,
    /// `cmd:` — the profiled command line.
    pub cmd: Option<String>,
    /// `desc:` lines, the text after `desc:`.
    pub desc: Vec<String>,
    /// Other `key: value` header lines, kept for writing back.
    pub extra: Vec<(String, String)>,
}

/// One dump of a profile run: header, events and the cost records of every function.
#[derive(Clone, Debug, Default)]
pub struct Part {
    /// Descriptive header lines.
    pub header: PartHeader,
    /// The cost columns.
    pub events: Events,
    /// The subpositions of cost lines.
    pub positions: PositionKinds,
    /// `summary:` as written in the file.
    pub summary: Option<Vec<u64>>,
    /// `totals:` as written in the file.
    pub totals: Option<Vec<u64>>,
    /// The records of each function, in first-seen order.
    pub functions: IndexMap<FunctionId, Records, FxBuildHasher>,
}

impl Part {
    /// An empty part with these events and positions.
    pub fn new(events: Events, positions: PositionKinds) -> Part {
        Part {
            events,
            positions,
            ..Part::default()
        }
    }

    /// Appends a record to the records of `function`.
    pub fn push(&mut self, function: FunctionId, record: &Record<'_>) {
        self.functions.entry(function).or_default().push(record);
    }

    /// The sum of all self costs, one count per event.
    pub fn self_totals(&self) -> Vec<u64> {
        let mut totals = vec![0u64; self.events.len()];
        for records in self.functions.values() {
            records.for_each(self.events.len(), |record| {
                if let Record::Cost { costs, .. } = record {
                    add_costs(&mut totals, costs);
                }
            });
        }
        totals
    }

    /// The sum of the self costs of each function.
    pub fn function_self_costs(&self) -> IndexMap<FunctionId, Vec<u64>, FxBuildHasher> {
        let events = self.events.len();
        self.functions
            .iter()
            .map(|(&function, records)| {
                let mut sum = vec![0u64; events];
                records.for_each(events, |record| {
                    if let Record::Cost { costs, .. } = record {
                        add_costs(&mut sum, costs);
                    }
                });
                (function, sum)
            })
            .collect()
    }

    /// Whether any function has call or jump records.
    pub fn has_call_graph(&self) -> bool {
        self.functions.values().any(|records| {
            let mut found = false;
            records.for_each(0, |record| found |= !matches!(record, Record::Cost { .. }));
            found
        })
    }
}

/// A whole profile: one or more parts sharing a name table.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    /// `creator:` — the tool that wrote the file.
    pub creator: Option<String>,
    /// The names of objects, files and functions.
    pub names: Names,
    /// The dumps, in file order.
    pub parts: Vec<Part>,
}

/// Adds `costs` to `sum` column by column (wrapping, as counters do); `sum` must be
/// at least as long as `costs`.
pub fn add_costs(sum: &mut [u64], costs: &[u64]) {
    for (total, cost) in sum.iter_mut().zip(costs) {
        *total = total.wrapping_add(*cost);
    }
}
