//! The profile model: what the Cachegrind and Callgrind formats express.

use indexmap::IndexMap;
use rustc_hash::FxBuildHasher;

use crate::names::{NameId, Names};
use crate::records::{Cursor, Record, RecordStore, Records};

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
    /// `cmd:` — the profiled command line, as the file holds it: one line
    /// (see [`PartHeader::command_line`]).
    pub cmd: Option<String>,
    /// `desc:` lines, the text after `desc:`.
    pub desc: Vec<String>,
    /// Other `key: value` header lines, kept for writing back.
    pub extra: Vec<(String, String)>,
}

impl PartHeader {
    /// `cmd:`'s text for the command line `program args...` (`command`,
    /// joined by spaces): as Callgrind writes it, each newline in it as
    /// `\n` and each backslash doubled, so that it stays one line.
    pub fn command_line(command: &str) -> String {
        let mut text = String::with_capacity(command.len());
        for c in command.chars() {
            match c {
                '\n' => text.push_str("\\n"),
                '\\' => text.push_str("\\\\"),
                c => text.push(c),
            }
        }
        text
    }

    /// `cmd:`'s text to write: [`PartHeader::cmd`], any newline in it
    /// (from a header built in memory) as `\n`, as in
    /// [`PartHeader::command_line`].
    pub fn cmd_line(&self) -> Option<std::borrow::Cow<'_, str>> {
        let cmd = self.cmd.as_deref()?;
        Some(match cmd.contains('\n') {
            true => cmd.replace('\n', "\\n").into(),
            false => cmd.into(),
        })
    }
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
    functions: IndexMap<FunctionId, Records, FxBuildHasher>,
    store: RecordStore,
}

/// The records of one function of a part, to read back.
#[derive(Clone, Copy)]
pub struct FunctionRecords<'a> {
    store: &'a RecordStore,
    records: &'a Records,
}

impl<'a> FunctionRecords<'a> {
    /// How many records the function has.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether the function has no records.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Reads the records in the order they were added; cost slices are padded with
    /// zeros to at least `events` entries.
    pub fn cursor(&self, events: usize) -> Cursor<'a> {
        self.store.cursor(self.records, events)
    }

    /// Calls `f` for every record, in order.
    pub fn for_each(&self, events: usize, f: impl FnMut(Record<'_>)) {
        self.cursor(events).for_each(f);
    }
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
        let index = self.function_index(function);
        self.push_at(index, record);
    }

    /// The number of `function` in this part (see [`Part::push_at`]), adding it
    /// without records if it is new.
    pub fn function_index(&mut self, function: FunctionId) -> usize {
        let entry = self.functions.entry(function);
        let index = entry.index();
        entry.or_default();
        index
    }

    /// Appends a record to the records of the function numbered `index` by
    /// [`Part::function_index`]; does nothing for another number.
    pub fn push_at(&mut self, index: usize, record: &Record<'_>) {
        if let Some((_, records)) = self.functions.get_index_mut(index) {
            self.store.push(index, records, record);
        }
    }

    /// The functions and their records, in first-seen order.
    pub fn functions(&self) -> impl ExactSizeIterator<Item = (FunctionId, FunctionRecords<'_>)> {
        self.functions.iter().map(|(&function, records)| {
            (
                function,
                FunctionRecords {
                    store: &self.store,
                    records,
                },
            )
        })
    }

    /// How many functions the part has.
    pub fn function_count(&self) -> usize {
        self.functions.len()
    }

    /// How many bytes the encoded records of the part take.
    pub fn record_bytes(&self) -> usize {
        self.store.encoded_len()
    }

    /// The sum of all self costs, one count per event.
    pub fn self_totals(&self) -> Vec<u64> {
        let mut totals = vec![0u64; self.events.len()];
        for (_, records) in self.functions() {
            records.for_each(self.events.len(), |record| {
                if let Record::Cost { costs, .. } = record {
                    add_costs(&mut totals, costs);
                }
            });
        }
        totals
    }

    /// Whether any function has call or jump records.
    pub fn has_call_graph(&self) -> bool {
        self.functions().any(|(_, records)| {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_line_is_one_line_as_callgrind_writes_it() {
        let command = "python3 -c n = 0\nprint(\"a\\\\b\")";
        let text = PartHeader::command_line(command);
        assert_eq!(text, "python3 -c n = 0\\nprint(\"a\\\\\\\\b\")");
        let header = PartHeader {
            cmd: Some(text.clone()),
            ..PartHeader::default()
        };
        assert_eq!(header.cmd_line().as_deref(), Some(text.as_str()));
    }

    #[test]
    fn a_newline_in_a_header_built_in_memory_is_written_as_an_escape() {
        let header = PartHeader {
            cmd: Some("a\nb".into()),
            ..PartHeader::default()
        };
        assert_eq!(header.cmd_line().as_deref(), Some("a\\nb"));
        assert_eq!(PartHeader::default().cmd_line(), None);
    }
}
