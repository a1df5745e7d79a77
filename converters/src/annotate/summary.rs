//! The File:function and Function:file summaries: functions grouped by file, or
//! files grouped by function, above the threshold, sorted by the sort events.

use std::cmp::Ordering;

use rustc_hash::FxHashMap;

use super::events::EventColumns;
use super::model::Model;
use super::table::add;

/// Which way a summary groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Grouping {
    /// Files, each with its functions.
    FileFunction,
    /// Functions, each with the files their code is in.
    FunctionFile,
}

/// One entry of a summary: an outer name with its total and the inner names above
/// the threshold.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    /// The file (or function) id.
    pub outer: u32,
    /// The total of all its inner rows, above the threshold or not.
    pub cost: Vec<i64>,
    /// The inner ids and costs above the threshold, sorted.
    pub inner: Vec<(u32, Vec<i64>)>,
}

/// Whether the primary sort count of `cc` reaches `threshold` percent of the
/// total (absolute values, for diffs).
pub(crate) struct Threshold {
    index: usize,
    count: f64,
}

impl Threshold {
    /// The threshold `percent` of the primary sort event.
    pub fn new(events: &EventColumns, totals: &[i64], percent: f64) -> Threshold {
        let index = events.primary();
        let total = totals.get(index).copied().unwrap_or(0);
        Threshold {
            index,
            count: percent * (total.unsigned_abs() as f64) / 100.0,
        }
    }

    /// Whether `cc` is significant.
    pub fn met_by(&self, cc: &[i64]) -> bool {
        cc.get(self.index).map_or(0, |c| c.unsigned_abs()) as f64 >= self.count
    }
}

/// Orders costs `a` (named `a_name`) and `b` (named `b_name`) by the sort
/// events, largest absolute count first, then names in reverse order (as
/// cg_annotate does).
pub(crate) fn by_cost_then_name(
    events: &EventColumns,
    a_name: &str,
    a: &[i64],
    b_name: &str,
    b: &[i64],
) -> Ordering {
    for &i in &events.sort {
        let (x, y) = (a[i].unsigned_abs(), b[i].unsigned_abs());
        match y.cmp(&x) {
            Ordering::Equal => {}
            unequal => return unequal,
        }
    }
    b_name.cmp(a_name)
}

/// The entries of a summary, sorted, with those below the threshold left out.
pub(crate) fn summary(
    model: &Model,
    events: &EventColumns,
    grouping: Grouping,
    threshold: &Threshold,
) -> Vec<Entry> {
    let (outer_names, inner_names) = match grouping {
        Grouping::FileFunction => (&model.names.files, &model.names.functions),
        Grouping::FunctionFile => (&model.names.functions, &model.names.files),
    };
    let width = model.events.len();
    // By outer id: the total, and the inner rows above the threshold.
    type Group = (Vec<i64>, Vec<(u32, Vec<i64>)>);
    let mut groups: FxHashMap<u32, Group> = FxHashMap::default();
    for ((file, function), cc) in model.by_row.iter() {
        let (outer, inner) = match grouping {
            Grouping::FileFunction => (file, function),
            Grouping::FunctionFile => (function, file),
        };
        let group = groups
            .entry(outer)
            .or_insert_with(|| (vec![0; width], Vec::new()));
        add(&mut group.0, cc);
        if threshold.met_by(cc) {
            group.1.push((inner, cc.to_vec()));
        }
    }
    let mut entries: Vec<Entry> = groups
        .into_iter()
        .filter(|(_, (_, inner))| !inner.is_empty())
        .map(|(outer, (cost, mut inner))| {
            inner.sort_by(|(a, a_cc), (b, b_cc)| {
                by_cost_then_name(events, inner_names.get(*a), a_cc, inner_names.get(*b), b_cc)
            });
            Entry { outer, cost, inner }
        })
        .collect();
    entries.sort_by(|a, b| {
        by_cost_then_name(
            events,
            outer_names.get(a.outer),
            &a.cost,
            outer_names.get(b.outer),
            &b.cost,
        )
    });
    entries
}
