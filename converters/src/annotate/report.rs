//! The report, section by section: metadata, program totals, the File:function
//! and Function:file summaries, the call graph (Callgrind), annotated source files
//! and the annotation summary.

use std::io::Write;

use super::calltree::{call_section, CallView};
use super::error::AnnotateError;
use super::events::EventColumns;
use super::format::ColumnsBuilder;
use super::model::{aggregate, has_calls, Input, Model, Wanted};
use super::names::Rewrites;
use super::options::{threshold_text, Options, Tree};
use super::source::{annotate_files, title, SourceContext, SUMMARY_LABELS};
use super::style::{Paint, Style};
use super::summary::{summary, Entry, Grouping, Threshold};

/// Writes the report on `inputs` to `out`.
pub fn annotate(
    inputs: &[Input],
    options: &Options,
    out: &mut dyn Write,
) -> Result<(), AnnotateError> {
    let first = inputs.first().ok_or(AnnotateError::NoInput)?;
    if options.diff && inputs.len() != 2 {
        return Err(AnnotateError::DiffNeedsTwo(inputs.len()));
    }
    let first_part = first
        .profile
        .parts
        .first()
        .ok_or_else(|| AnnotateError::Empty {
            path: first.path.display().to_string(),
        })?;
    let events = EventColumns::new(
        first_part.events.names.clone(),
        options.show.as_deref(),
        options.sort.as_deref(),
    )?;
    let wants_calls = options.inclusive || options.tree != Tree::None;
    if wants_calls && !has_calls(inputs) {
        let paths: Vec<String> = inputs
            .iter()
            .map(|i| i.path.display().to_string())
            .collect();
        return Err(AnnotateError::NoCalls {
            option: if options.inclusive {
                "--inclusive=yes"
            } else {
                "--tree"
            },
            paths: paths.join(", "),
            verb: if paths.len() == 1 { "has" } else { "have" },
        });
    }
    let model = aggregate(
        inputs,
        options.diff,
        Rewrites {
            file: options.mod_filename.as_ref(),
            function: options.mod_funcname.as_ref(),
        },
        Wanted {
            lines: options.annotate,
            inclusive: options.inclusive,
            arcs: options.tree != Tree::None,
        },
    )?;
    let report = Report {
        model: &model,
        events: &events,
        options,
        style: Style::new(options.color),
    };
    let mut text = String::new();
    report.metadata(&mut text);
    report.program_totals(&mut text);
    out.write_all(text.as_bytes())?;
    text.clear();

    let threshold = Threshold::new(&events, &model.totals, options.threshold);
    let by_file = summary(&model, &events, Grouping::FileFunction, &threshold);
    report.summary(&mut text, Grouping::FileFunction, &by_file);
    let by_function = summary(&model, &events, Grouping::FunctionFile, &threshold);
    report.summary(&mut text, Grouping::FunctionFile, &by_function);
    out.write_all(text.as_bytes())?;
    text.clear();

    if let Some(graph) = &model.calls {
        let view = CallView {
            events: &events,
            inclusive: options.inclusive,
            tree: options.tree,
            show_percs: options.show_percs,
            threshold: &threshold,
            style: report.style,
        };
        call_section(&mut text, &model, graph, &view);
        out.write_all(text.as_bytes())?;
        text.clear();
    }

    if options.annotate {
        let significant: Vec<u32> = by_file.iter().map(|entry| entry.outer).collect();
        let context = SourceContext {
            events: &events,
            totals: &model.totals,
            show_percs: options.show_percs,
            context: options.context,
            profiles: inputs.iter().map(|input| input.path.as_path()).collect(),
            style: report.style,
        };
        let sums = annotate_files(&mut text, &model, &significant, &context);
        report.annotation_summary(&mut text, &sums);
        out.write_all(text.as_bytes())?;
    }
    out.flush()?;
    Ok(())
}

/// What every section needs.
struct Report<'a> {
    model: &'a Model,
    events: &'a EventColumns,
    options: &'a Options,
    style: Style,
}

impl Report<'_> {
    fn metadata(&self, out: &mut String) {
        let (model, events, options, style) = (self.model, self.events, self.options, self.style);
        title(out, style, "Metadata");
        out.push_str(&format!("Invocation:       {}\n", options.invocation));
        let same_descs = model.inputs.windows(2).all(|w| w[0].descs == w[1].descs);
        for (index, input) in model.inputs.iter().enumerate() {
            if same_descs && index > 0 {
                break;
            }
            if !same_descs {
                out.push_str(&format!("Description {}:\n", index + 1));
            }
            for desc in &input.descs {
                out.push_str(desc);
                out.push('\n');
            }
        }
        if let [input] = model.inputs.as_slice() {
            out.push_str(&format!("Command:          {}\n", input.cmd));
        } else {
            for (index, input) in model.inputs.iter().enumerate() {
                if index > 0 && model.inputs[index - 1].cmd == input.cmd {
                    out.push_str(&format!(
                        "Command {}:        (same as Command {index})\n",
                        index + 1
                    ));
                } else {
                    out.push_str(&format!("Command {}:        {}\n", index + 1, input.cmd));
                }
            }
        }
        let join = |names: &mut dyn Iterator<Item = &str>| names.collect::<Vec<_>>().join(" ");
        out.push_str(&format!("Events recorded:  {}\n", model.events.join(" ")));
        out.push_str(&format!(
            "Events shown:     {}\n",
            join(&mut events.shown_names())
        ));
        out.push_str(&format!(
            "Event sort order: {}\n",
            join(&mut events.sort_names())
        ));
        out.push_str(&format!(
            "Threshold:        {}%\n",
            threshold_text(options.threshold)
        ));
        if options.inclusive {
            out.push_str("Inclusive:        yes\n");
        }
        let tree = match options.tree {
            Tree::None => None,
            Tree::Caller => Some("caller"),
            Tree::Calling => Some("calling"),
            Tree::Both => Some("both"),
        };
        if let Some(tree) = tree {
            out.push_str(&format!("Call tree:        {tree}\n"));
        }
        let on_off = if options.annotate { "on" } else { "off" };
        out.push_str(&format!("Annotation:       {on_off}\n\n"));
    }

    fn program_totals(&self, out: &mut String) {
        let (model, events, options, style) = (self.model, self.events, self.options, self.style);
        title(out, style, "Summary");
        let mut builder = ColumnsBuilder::new(events, &model.totals, options.show_percs);
        builder.fit(&model.totals);
        let columns = builder.build("");
        columns.header(out, "");
        out.push('\n');
        columns.row(out, &model.totals, None, "PROGRAM TOTALS");
        out.push('\n');
    }

    fn summary(&self, out: &mut String, grouping: Grouping, entries: &[Entry]) {
        let (model, events, options, style) = (self.model, self.events, self.options, self.style);
        let (heading, marker, outer_names, inner_names) = match grouping {
            Grouping::FileFunction => (
                "File:function",
                "< ",
                &model.names.files,
                &model.names.functions,
            ),
            Grouping::FunctionFile => (
                "Function:file",
                "> ",
                &model.names.functions,
                &model.names.files,
            ),
        };
        let mut builder = ColumnsBuilder::new(events, &model.totals, options.show_percs);
        let mut cumulative = vec![0; model.events.len()];
        for entry in entries {
            super::table::add(&mut cumulative, &entry.cost);
            builder.fit_entry(&entry.cost, &cumulative);
            for (_, cc) in &entry.inner {
                builder.fit(cc);
            }
        }
        let columns = builder.build("  ");
        title(out, style, &format!("{heading} summary"));
        columns.header(out, &format!(" {}", heading.to_lowercase()));
        out.push('\n');
        cumulative.iter_mut().for_each(|c| *c = 0);
        let mut line = String::new();
        for entry in entries {
            super::table::add(&mut cumulative, &entry.cost);
            let outer = outer_names.get(entry.outer);
            line.clear();
            line.push_str(marker);
            match entry.inner.as_slice() {
                [(inner, cc)] if *cc == entry.cost => {
                    let name = format!("{outer}:{}", inner_names.get(*inner));
                    columns.row(&mut line, &entry.cost, Some(&cumulative), &name);
                    style.line(out, Paint::Entry, &line);
                }
                inner => {
                    columns.row(
                        &mut line,
                        &entry.cost,
                        Some(&cumulative),
                        &format!("{outer}:"),
                    );
                    style.line(out, Paint::Entry, &line);
                    for (name, cc) in inner {
                        out.push_str("  ");
                        columns.row(out, cc, None, &format!("  {}", inner_names.get(*name)));
                    }
                }
            }
            out.push('\n');
        }
    }

    fn annotation_summary(&self, out: &mut String, sums: &[Vec<i64>]) {
        let (model, events, options, style) = (self.model, self.events, self.options, self.style);
        let mut builder = ColumnsBuilder::new(events, &model.totals, options.show_percs);
        for cc in sums {
            builder.fit(cc);
        }
        let columns = builder.build("");
        title(out, style, "Annotation summary");
        columns.header(out, "");
        out.push('\n');
        for (cc, label) in sums.iter().zip(SUMMARY_LABELS) {
            columns.row(out, cc, None, label);
        }
        out.push('\n');
    }
}
