//! The call graph section of Callgrind reports: inclusive costs (`--inclusive=yes`)
//! and the callers and callees of each function (`--tree`), as callgrind_annotate
//! offers them, in the layout of the other summaries.

use rustc_hash::FxHashMap;

use super::callgraph::{CallGraph, Row};
use super::events::EventColumns;
use super::format::{commify, Columns, ColumnsBuilder};
use super::model::Model;
use super::options::Tree;
use super::source::title;
use super::style::{Paint, Style};
use super::summary::{by_cost_then_name, Threshold};
use super::table::CostTable;

/// What the section shows.
pub(crate) struct CallView<'a> {
    /// The columns.
    pub events: &'a EventColumns,
    /// Inclusive costs (or self costs) for the functions.
    pub inclusive: bool,
    /// Callers and callees.
    pub tree: Tree,
    /// Percentages.
    pub show_percs: bool,
    /// Which functions are listed.
    pub threshold: &'a Threshold,
    /// Colours.
    pub style: Style,
}

/// Prints the section.
pub(crate) fn call_section(
    out: &mut String,
    model: &Model,
    graph: &CallGraph,
    view: &CallView<'_>,
) {
    let inclusive;
    let costs: &CostTable<Row> = if view.inclusive {
        inclusive = graph.inclusive();
        &inclusive
    } else {
        &model.by_row
    };
    let name = |row: Row| {
        format!(
            "{}:{}",
            model.names.files.get(row.0),
            model.names.functions.get(row.1)
        )
    };
    let mut entries: Vec<(Row, String, &[i64])> = costs
        .iter()
        .filter(|(_, cc)| view.threshold.met_by(cc))
        .map(|(row, cc)| (row, name(row), cc))
        .collect();
    entries.sort_by(|a, b| by_cost_then_name(view.events, &a.1, a.2, &b.1, b.2));

    // Callers and callees of every function, by arc slot.
    let mut callers: FxHashMap<Row, Vec<(Row, u32)>> = FxHashMap::default();
    let mut callees: FxHashMap<Row, Vec<(Row, u32)>> = FxHashMap::default();
    if view.tree != Tree::None {
        for ((caller, callee), slot) in graph.arcs.slots() {
            callers.entry(callee).or_default().push((caller, slot));
            callees.entry(caller).or_default().push((callee, slot));
        }
    }
    let object = |row: Row| match graph.objects.get(&row).map(|&o| model.names.objects.get(o)) {
        Some(object) if !object.is_empty() => format!(" [{object}]"),
        _ => String::new(),
    };
    // The arcs to list, sorted, each with the other function's name and object.
    let sorted_arcs = |arcs: Option<&Vec<(Row, u32)>>| -> Vec<(String, String, u32)> {
        let mut arcs: Vec<(String, String, u32)> = arcs
            .map(|arcs| {
                arcs.iter()
                    .map(|&(row, slot)| (name(row), object(row), slot))
                    .collect()
            })
            .unwrap_or_default();
        arcs.sort_by(|a, b| {
            by_cost_then_name(
                view.events,
                &a.0,
                graph.arcs.get(a.2),
                &b.0,
                graph.arcs.get(b.2),
            )
        });
        arcs
    };

    let mut listed = Vec::with_capacity(entries.len());
    let mut builder = ColumnsBuilder::new(view.events, &model.totals, view.show_percs);
    for (row, name, cc) in &entries {
        builder.fit(cc);
        let up = if view.tree.callers() {
            sorted_arcs(callers.get(row))
        } else {
            Vec::new()
        };
        let down = if view.tree.callees() {
            sorted_arcs(callees.get(row))
        } else {
            Vec::new()
        };
        for (_, _, slot) in up.iter().chain(&down) {
            builder.fit(graph.arcs.get(*slot));
        }
        listed.push((*row, name.as_str(), *cc, up, down));
    }
    let columns = builder.build("  ");
    let heading = match (view.tree, view.inclusive) {
        (Tree::None, _) => "Inclusive file:function summary",
        (_, true) => "Call tree, inclusive costs",
        (_, false) => "Call tree, self costs",
    };
    title(out, view.style, heading);
    columns.header(out, " file:function");
    out.push('\n');
    for (row, name, cc, up, down) in listed {
        for (caller, object, slot) in &up {
            arc_line(out, &columns, graph, *slot, "<", caller, object);
        }
        let mut line = String::from("* ");
        columns.row(&mut line, cc, None, &format!("{name}{}", object(row)));
        view.style.line(out, Paint::Entry, &line);
        for (callee, object, slot) in &down {
            arc_line(out, &columns, graph, *slot, ">", callee, object);
        }
        if view.tree != Tree::None {
            out.push('\n');
        }
    }
    if view.tree == Tree::None {
        out.push('\n');
    }
}

/// A caller (`<`) or callee (`>`) line: the cost and count of the calls.
fn arc_line(
    out: &mut String,
    columns: &Columns<'_>,
    graph: &CallGraph,
    slot: u32,
    marker: &str,
    name: &str,
    object: &str,
) {
    out.push_str("  ");
    let count = commify(graph.count(slot));
    let suffix = format!("{marker} {name} ({count}x){object}");
    columns.row(out, graph.arcs.get(slot), None, &suffix);
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;
    use std::path::PathBuf;

    use crate::annotate::{annotate, Input, Options, Tree};

    /// main (a.c, with code inlined from b.h) calls f twice and g once; f calls
    /// f'2, which calls itself.
    const PROFILE: &str = "# callgrind format
events: Ir
ob=prog
fl=a.c
fn=main
1 10
cfn=f
calls=2 5
2 100
cfi=b.h
cfn=g
calls=1 1
3 7
fi=b.h
4 3
fe=a.c
fn=f
5 40
cfn=f'2
calls=3 5
6 60
fn=f'2
5 60
cfn=f'2
calls=2 5
6 30
fl=b.h
fn=g
1 7
";

    fn report(tree: Tree, inclusive: bool) -> String {
        let profile = cgx_formats::read(Cursor::new(PROFILE.as_bytes().to_vec()), "test")
            .expect("the profile reads");
        let inputs = [Input {
            path: PathBuf::from("test"),
            profile,
        }];
        let options = Options {
            show_percs: false,
            annotate: false,
            threshold: 0.0,
            inclusive,
            tree,
            ..Options::default()
        };
        let mut out = Vec::new();
        annotate(&inputs, &options, &mut out).expect("a report");
        let text = String::from_utf8(out).expect("UTF-8");
        let start = text
            .find("-- Call tree")
            .or_else(|| text.find("-- Inclusive"));
        text[start.expect("a call section")..].to_string()
    }

    #[test]
    fn inclusive_costs() {
        let section = report(Tree::None, true);
        let rows: Vec<&str> = section.lines().skip(4).collect();
        assert_eq!(
            rows,
            [
                // main is called by nobody: itself (13, 3 of it inlined from
                // b.h) and its calls (100 + 7).
                "* 120  a.c:main [prog]",
                "* 100  a.c:f [prog]",
                // f'2: the calls from f (60) and from itself (30).
                "*  90  a.c:f'2 [prog]",
                "*   7  b.h:g [prog]",
                // The code of main inlined from b.h.
                "*   3  b.h:main [prog]",
                "",
            ]
        );
    }

    #[test]
    fn call_tree_with_self_costs() {
        let section = report(Tree::Both, false);
        let entry: Vec<&str> = section
            .lines()
            .skip_while(|line| !line.starts_with("  100  < a.c:main"))
            .take_while(|line| !line.is_empty())
            .collect();
        assert_eq!(
            entry,
            [
                "  100  < a.c:main (2x) [prog]",
                "*  40  a.c:f [prog]",
                "   60  > a.c:f'2 (3x) [prog]",
            ]
        );
        assert!(
            section.starts_with("-- Call tree, self costs\n"),
            "{section}"
        );
        let callers_of_f2: Vec<&str> = section
            .lines()
            .skip_while(|line| !line.ends_with("a.c:f (3x) [prog]"))
            .take(3)
            .collect();
        assert_eq!(
            callers_of_f2,
            [
                "   60  < a.c:f (3x) [prog]",
                "   30  < a.c:f'2 (2x) [prog]",
                "*  60  a.c:f'2 [prog]",
            ]
        );
    }
}
