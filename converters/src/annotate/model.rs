//! Aggregation: the costs of one or more profiles added up (or, for `--diff`, the
//! second minus the first) by function, by file and line, and by call arc.
//!
//! Functions are keyed as cg_annotate keys them: (file of the cost line, function
//! name), after `--mod-filename` and `--mod-funcname`. Every profile name is
//! rewritten and interned once; records are then aggregated by integer ids.

use std::path::{Path, PathBuf};

use cgx_formats::{FunctionRecords, NameId, Part, Profile, Record};

use super::callgraph::{CallGraph, Row};
use super::error::AnnotateError;
use super::names::{NameMap, ReportNames, Rewrites};
use super::table::{add_unsigned, CostTable};

/// A profile to report on, with the path it was read from.
#[derive(Debug)]
pub struct Input {
    /// The path of the profile (printed, and compared with source files' times).
    pub path: PathBuf,
    /// The profile.
    pub profile: Profile,
}

/// What the report says about each input profile.
#[derive(Clone, Debug)]
pub(crate) struct InputInfo {
    /// `desc:` lines (of all parts, each once).
    pub descs: Vec<String>,
    /// `cmd:` of the first part that has one.
    pub cmd: String,
}

/// What to aggregate.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Wanted {
    /// Costs by file and line (for source annotation).
    pub lines: bool,
    /// Inclusive costs.
    pub inclusive: bool,
    /// Call arcs.
    pub arcs: bool,
}

/// The aggregated costs of all inputs.
#[derive(Debug)]
pub(crate) struct Model {
    /// The events, in file order.
    pub events: Vec<String>,
    /// One per input.
    pub inputs: Vec<InputInfo>,
    /// File, function and object names.
    pub names: ReportNames,
    /// The sum of all self costs.
    pub totals: Vec<i64>,
    /// Self cost by (file, function).
    pub by_row: CostTable<Row>,
    /// Self cost by (file, line), if wanted.
    pub lines: CostTable<(u32, u64)>,
    /// Inclusive costs and arcs, if wanted.
    pub calls: Option<CallGraph>,
}

/// Adds up `inputs`; for `diff`, the first one is subtracted.
pub(crate) fn aggregate(
    inputs: &[Input],
    diff: bool,
    rewrites: Rewrites<'_>,
    wanted: Wanted,
) -> Result<Model, AnnotateError> {
    let first = inputs.first().ok_or(AnnotateError::NoInput)?;
    let events = first
        .profile
        .parts
        .first()
        .ok_or_else(|| AnnotateError::Empty {
            path: first.path.display().to_string(),
        })?
        .events
        .names
        .clone();
    let width = events.len();
    let mut model = Model {
        inputs: Vec::with_capacity(inputs.len()),
        names: ReportNames::default(),
        totals: vec![0; width],
        by_row: CostTable::new(width),
        lines: CostTable::new(width),
        calls: (wanted.inclusive || wanted.arcs).then(|| CallGraph::new(width, wanted.arcs)),
        events,
    };
    for (index, input) in inputs.iter().enumerate() {
        let sign = if diff && index == 0 { -1 } else { 1 };
        add_input(&mut model, input, &first.path, sign, rewrites, wanted)?;
    }
    Ok(model)
}

/// Adds the costs of one profile, times `sign`.
fn add_input(
    model: &mut Model,
    input: &Input,
    first_path: &Path,
    sign: i64,
    rewrites: Rewrites<'_>,
    wanted: Wanted,
) -> Result<(), AnnotateError> {
    let profile = &input.profile;
    if profile.parts.is_empty() {
        return Err(AnnotateError::Empty {
            path: input.path.display().to_string(),
        });
    }
    let mut info = InputInfo {
        descs: Vec::new(),
        cmd: String::new(),
    };
    let mut map = NameMap::new(&profile.names, rewrites);
    for part in &profile.parts {
        if part.events.names != model.events {
            return Err(AnnotateError::EventsDiffer {
                path: input.path.display().to_string(),
                found: part.events.names.join(" "),
                first: first_path.display().to_string(),
                expected: model.events.join(" "),
            });
        }
        describe(&mut info, part);
        let before = model.totals.clone();
        for (function, records) in part.functions() {
            let name = map.function(function.name, &mut model.names);
            if model.calls.is_some() {
                let home = map.file(function.file, &mut model.names);
                let object = map.object(function.object, &mut model.names);
                if let Some(calls) = &mut model.calls {
                    calls.begin((home, name), object);
                }
            }
            add_function(model, &mut map, name, records, sign, wanted);
            if let Some(calls) = &mut model.calls {
                calls.end();
            }
        }
        if let Some(stated) = stated_totals(part, profile.creator.as_deref()) {
            model.totals = before;
            add_unsigned(&mut model.totals, stated, sign);
        }
    }
    model.inputs.push(info);
    Ok(())
}

/// The totals `part` of a profile by `creator` states, when they are not
/// all zero and the profile is another profiler's: its `summary:`, else its
/// `totals:`, as callgrind_annotate takes them; other writers may state a
/// figure of their own there (pyprof2calltree's summary is the profile's
/// total time, Xdebug's memory its peak). Callgrind's and cgx's profiles
/// count what their cost lines add up to: their summary is a running count
/// that may include costs no line shows (`--collect-systime`) or leave
/// events out (`--cacheuse=yes`).
fn stated_totals<'a>(part: &'a Part, creator: Option<&str>) -> Option<&'a [u64]> {
    let ours = ["callgrind", "cgx"];
    if creator.is_some_and(|creator| ours.iter().any(|name| creator.starts_with(name))) {
        return None;
    }
    let not_zero = |costs: &&[u64]| costs.iter().any(|&cost| cost != 0);
    let summary = part.summary.as_deref().filter(not_zero);
    summary.or_else(|| part.totals.as_deref().filter(not_zero))
}

/// Takes the `desc:` lines (each once) and the first `cmd:` of a part.
fn describe(info: &mut InputInfo, part: &Part) {
    for desc in &part.header.desc {
        if !info.descs.contains(desc) {
            info.descs.push(desc.clone());
        }
    }
    if info.cmd.is_empty() {
        if let Some(cmd) = &part.header.cmd {
            info.cmd = cmd.clone();
        }
    }
}

/// Adds the records of the function `name` (a report id), times `sign`.
fn add_function(
    model: &mut Model,
    map: &mut NameMap<'_>,
    name: u32,
    records: FunctionRecords<'_>,
    sign: i64,
    wanted: Wanted,
) {
    // The last file and function slot, and the last line slot: consecutive
    // records mostly share them.
    let mut last_file: Option<(NameId, u32, u32)> = None;
    let mut last_line: Option<(u32, u64, u32)> = None;
    let mut cursor = records.cursor(model.events.len());
    while let Some(record) = cursor.next_record() {
        match record {
            Record::Cost { file, at, costs } => {
                let (file_id, row_slot) = match last_file {
                    Some((id, file_id, slot)) if id == file => (file_id, slot),
                    _ => {
                        let file_id = map.file(file, &mut model.names);
                        let slot = model.by_row.slot((file_id, name));
                        last_file = Some((file, file_id, slot));
                        (file_id, slot)
                    }
                };
                model.by_row.add_unsigned(row_slot, costs, sign);
                add_unsigned(&mut model.totals, costs, sign);
                if wanted.lines {
                    let line_slot = match last_line {
                        Some((f, line, slot)) if f == file_id && line == at.line => slot,
                        _ => {
                            let slot = model.lines.slot((file_id, at.line));
                            last_line = Some((file_id, at.line, slot));
                            slot
                        }
                    };
                    model.lines.add_unsigned(line_slot, costs, sign);
                }
                if let Some(calls) = &mut model.calls {
                    calls.cost(file_id, costs, sign);
                }
            }
            Record::Call {
                file,
                callee,
                count,
                inclusive,
                ..
            } => {
                if model.calls.is_none() {
                    continue;
                }
                let file_id = map.file(file, &mut model.names);
                let callee_row = (
                    map.file(callee.file, &mut model.names),
                    map.function(callee.name, &mut model.names),
                );
                let callee_object = map.object(callee.object, &mut model.names);
                if let Some(calls) = &mut model.calls {
                    calls.call(file_id, callee_row, callee_object, count, inclusive, sign);
                }
            }
            Record::Jump { .. } => {}
        }
    }
}

/// Whether any input has call records (a call graph to show).
pub(crate) fn has_calls(inputs: &[Input]) -> bool {
    inputs
        .iter()
        .any(|input| input.profile.parts.iter().any(|part| part.has_call_graph()))
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;

    /// The totals `aggregate` finds in the callgrind `text`.
    fn totals(text: &str) -> Vec<i64> {
        let profile = cgx_formats::read(Cursor::new(text.as_bytes().to_vec()), "test")
            .expect("the profile reads");
        let inputs = [Input {
            path: PathBuf::from("test"),
            profile,
        }];
        let wanted = Wanted {
            lines: false,
            inclusive: false,
            arcs: false,
        };
        let model = aggregate(&inputs, false, Rewrites::default(), wanted).expect("a model");
        model.totals
    }

    #[test]
    fn the_totals_are_the_stated_ones_as_callgrind_annotate_takes_them() {
        let body = "# callgrind format\nevents: Ir\nfl=a.c\nfn=f\n1 10\n2 5\n";
        // None stated: the sum of the cost lines.
        assert_eq!(totals(body), [15]);
        // The summary, as pyprof2calltree states the profile's time.
        assert_eq!(totals(&format!("{body}summary: 20\n")), [20]);
        // A zero summary counts as none: the totals line then.
        assert_eq!(totals(&format!("{body}summary: 0\ntotals: 17\n")), [17]);
        assert_eq!(totals(&format!("{body}totals: 0\n")), [15]);
        // Callgrind's and cgx's profiles count their lines.
        let ours = body.replace("events:", "creator: callgrind-3.19.0\nevents:");
        assert_eq!(totals(&format!("{ours}summary: 30\n")), [15]);
        let ours = body.replace("events:", "creator: cgx-0.1.0\nevents:");
        assert_eq!(totals(&format!("{ours}summary: 30\n")), [15]);
    }
}
