//! Annotated source files: each line of a significant file with its counts, lines
//! within `--context` of a counted line, gaps marked `-- line N ---`; and the sums
//! behind the annotation summary, whose rows add up to the totals.

use std::fs;
use std::path::Path;
use std::time::SystemTime;

use super::events::EventColumns;
use super::format::ColumnsBuilder;
use super::model::Model;
use super::style::{Paint, Style};
use super::table::add;

/// The rows of the annotation summary, in order.
pub(crate) const SUMMARY_LABELS: [&str; 6] = [
    "  annotated: files known & above threshold & readable, line numbers known",
    "  annotated: files known & above threshold & readable, line numbers unknown",
    "unannotated: files known & above threshold & two or more non-identical",
    "unannotated: files known & above threshold & unreadable ",
    "unannotated: files known & below threshold",
    "unannotated: files unknown",
];

const KNOWN: usize = 0;
const LINE_ZERO: usize = 1;
const NOT_IDENTICAL: usize = 2;
const UNREADABLE: usize = 3;
const BELOW_THRESHOLD: usize = 4;
const FILE_UNKNOWN: usize = 5;

/// The name Valgrind gives code without debug information.
pub(crate) const UNKNOWN_FILE: &str = "???";

/// What source annotation needs besides the model.
pub(crate) struct SourceContext<'a> {
    /// The columns.
    pub events: &'a EventColumns,
    /// The totals percentages refer to.
    pub totals: &'a [i64],
    /// Whether percentages are shown.
    pub show_percs: bool,
    /// Lines of context.
    pub context: u64,
    /// The profiles, whose times source files are compared with.
    pub profiles: Vec<&'a Path>,
    /// Colours.
    pub style: Style,
}

/// Annotates the files `significant` (file ids) into `out` and returns the sums of
/// the annotation summary rows.
pub(crate) fn annotate_files(
    out: &mut String,
    model: &Model,
    significant: &[u32],
    context: &SourceContext<'_>,
) -> Vec<Vec<i64>> {
    let width = model.events.len();
    let mut sums = vec![vec![0; width]; SUMMARY_LABELS.len()];
    let mut by_file: Vec<Vec<(u64, u32)>> = vec![Vec::new(); model.names.files.len()];
    for ((file, line), slot) in model.lines.slots() {
        if let Some(lines) = by_file.get_mut(file as usize) {
            lines.push((line, slot));
        }
    }
    let unknown = model.names.files.find(UNKNOWN_FILE);
    let mut files: Vec<u32> = significant
        .iter()
        .copied()
        .filter(|&file| Some(file) != unknown)
        .collect();
    files.sort_by(|&a, &b| model.names.files.get(a).cmp(model.names.files.get(b)));
    files.dedup();
    for &file in &files {
        let mut lines = std::mem::take(&mut by_file[file as usize]);
        lines.sort_unstable_by_key(|&(line, _)| line);
        let originals: Vec<&str> = model
            .names
            .original_files
            .get(file as usize)
            .map(|names| names.iter().map(String::as_str).collect())
            .unwrap_or_default();
        let name = model.names.files.get(file);
        title(
            out,
            context.style,
            &format!("Annotated source file: {name}"),
        );
        match read_sources(&originals) {
            Sources::Text(text) => {
                warn_if_newer(out, &originals, context);
                let source = Source {
                    text: &text,
                    path: originals.first().copied().unwrap_or(name),
                };
                annotate_file(out, model, &lines, &source, context, &mut sums);
            }
            Sources::Differ => {
                out.push_str("Unannotated because these original files are not identical:\n");
                list(out, &originals);
                add_lines(model, &lines, &mut sums[NOT_IDENTICAL]);
            }
            Sources::Unreadable => {
                out.push_str(
                    "Unannotated because one or more of these original files are unreadable:\n",
                );
                list(out, &originals);
                add_lines(model, &lines, &mut sums[UNREADABLE]);
            }
        }
    }
    for (file, lines) in by_file.iter().enumerate() {
        let row = if Some(file as u32) == unknown {
            FILE_UNKNOWN
        } else {
            BELOW_THRESHOLD
        };
        add_lines(model, lines, &mut sums[row]);
    }
    sums
}

/// A section title between lines of dashes.
pub(crate) fn title(out: &mut String, style: Style, text: &str) {
    let dashes = "-".repeat(80);
    out.push_str(&dashes);
    out.push('\n');
    style.line(out, Paint::Title, &format!("-- {text}\n"));
    out.push_str(&dashes);
    out.push('\n');
}

fn list(out: &mut String, names: &[&str]) {
    for name in names {
        out.push_str("- ");
        out.push_str(name);
        out.push('\n');
    }
    out.push('\n');
}

fn add_lines(model: &Model, lines: &[(u64, u32)], sum: &mut [i64]) {
    for &(_, slot) in lines {
        add(sum, model.lines.get(slot));
    }
}

enum Sources {
    /// The text (of the first; all are identical).
    Text(Vec<u8>),
    Differ,
    Unreadable,
}

/// Reads the original files behind one (rewritten) file name.
fn read_sources(originals: &[&str]) -> Sources {
    let Some((first, others)) = originals.split_first() else {
        return Sources::Unreadable;
    };
    let Ok(text) = fs::read(first) else {
        return Sources::Unreadable;
    };
    let mut identical = true;
    for other in others {
        match fs::read(other) {
            Ok(other) => identical &= other == text,
            Err(_) => return Sources::Unreadable,
        }
    }
    if identical {
        Sources::Text(text)
    } else {
        Sources::Differ
    }
}

fn modified(path: &Path) -> Option<SystemTime> {
    fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Warns if all the source files are newer than one of the profiles: the line
/// numbers may have changed since the profile was made.
fn warn_if_newer(out: &mut String, originals: &[&str], context: &SourceContext<'_>) {
    let Some(oldest) = originals
        .iter()
        .map(|name| modified(Path::new(name)))
        .collect::<Option<Vec<_>>>()
        .and_then(|times| times.into_iter().min())
    else {
        return;
    };
    for profile in &context.profiles {
        if modified(profile).is_some_and(|profile_time| oldest > profile_time) {
            let mut text = format!(
                "@ The source is newer than the profile '{}':\n",
                profile.display()
            );
            for name in originals {
                text.push_str(&format!("@ - {name}\n"));
            }
            text.push_str("@ Its line numbers may have changed: the annotations may be wrong.\n");
            warning(out, context.style, &text);
            out.push('\n');
        }
    }
}

fn warning(out: &mut String, style: Style, text: &str) {
    let banner = "@".repeat(79);
    let mut boxed = String::new();
    boxed.push_str(&banner);
    boxed.push('\n');
    boxed.push_str(
        "@@ WARNING @@ WARNING @@ WARNING @@ WARNING @@ WARNING @@ WARNING @@ WARNING @@\n",
    );
    boxed.push_str(&banner);
    boxed.push('\n');
    boxed.push_str(text);
    boxed.push_str(&banner);
    boxed.push('\n');
    for line in boxed.split_inclusive('\n') {
        style.line(out, Paint::Warning, line);
    }
}

/// A readable source file.
struct Source<'a> {
    text: &'a [u8],
    path: &'a str,
}

/// Prints the lines of `source` that have counts and their context.
fn annotate_file(
    out: &mut String,
    model: &Model,
    lines: &[(u64, u32)],
    source: &Source<'_>,
    context: &SourceContext<'_>,
    sums: &mut [Vec<i64>],
) {
    let mut builder = ColumnsBuilder::new(context.events, context.totals, context.show_percs);
    for &(_, slot) in lines {
        builder.fit(model.lines.get(slot));
    }
    let columns = builder.build("");
    columns.header(out, "");
    out.push('\n');
    let (line_zero, counted) = match lines.split_first() {
        Some((&(0, slot), rest)) => (Some(slot), rest),
        _ => (None, lines),
    };
    if let Some(slot) = line_zero {
        let cc = model.lines.get(slot);
        columns.row(out, cc, None, "<unknown (line 0)>");
        add(&mut sums[LINE_ZERO], cc);
        out.push('\n');
    }
    let ranges = ranges(counted.iter().map(|&(line, _)| line), context.context);
    if ranges.is_empty() {
        return;
    }
    let mut source_lines = source_lines(source.text);
    let mut line_number = 0u64;
    let mut next = 0;
    'ranges: for (low, high) in ranges {
        while line_number + 1 < low {
            if source_lines.next().is_none() {
                break 'ranges;
            }
            line_number += 1;
        }
        if low != 1 {
            gap(out, context.style, low);
        }
        while line_number < high {
            let Some(text) = source_lines.next() else {
                break 'ranges;
            };
            line_number += 1;
            let text = String::from_utf8_lossy(text);
            match counted.get(next) {
                Some(&(line, slot)) if line == line_number => {
                    let cc = model.lines.get(slot);
                    columns.row(out, cc, None, &text);
                    add(&mut sums[KNOWN], cc);
                    next += 1;
                }
                _ => columns.missing(out, &text),
            }
        }
        gap(out, context.style, high);
    }
    let bogus = &counted[next.min(counted.len())..];
    if !bogus.is_empty() {
        out.push('\n');
        for &(line, slot) in bogus {
            let cc = model.lines.get(slot);
            columns.row(out, cc, None, &format!("<bogus line {line}>"));
            add(&mut sums[KNOWN], cc);
        }
        out.push('\n');
        warning(
            out,
            context.style,
            &format!(
                "@ The profile has counts for lines past the end of '{}'.\n",
                source.path
            ),
        );
    }
    out.push('\n');
}

fn gap(out: &mut String, style: Style, line: u64) {
    style.line(
        out,
        Paint::Gap,
        &format!("-- line {line} {}\n", "-".repeat(40)),
    );
}

/// The lines of a text, without their line endings.
fn source_lines(text: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut lines = (!text.is_empty()).then(|| {
        text.strip_suffix(b"\n")
            .unwrap_or(text)
            .split(|&b| b == b'\n')
    });
    std::iter::from_fn(move || {
        let line = lines.as_mut()?.next()?;
        Some(line.strip_suffix(b"\r").unwrap_or(line))
    })
}

/// The ranges of lines to print: each counted line with `context` lines either
/// side, ranges that touch or overlap merged.
pub(crate) fn ranges(counted: impl Iterator<Item = u64>, context: u64) -> Vec<(u64, u64)> {
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for line in counted {
        let low = line.saturating_sub(context).max(1);
        let high = line.saturating_add(context);
        match ranges.last_mut() {
            Some(last) if last.1.saturating_add(context) >= line => last.1 = high,
            _ => ranges.push((low, high)),
        }
    }
    ranges
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_merge_when_context_touches() {
        assert_eq!(ranges([3, 5, 30].into_iter(), 2), [(1, 7), (28, 32)]);
        // 10 + 2×4 >= 18: one range; 18 + 8 < 27: another.
        assert_eq!(ranges([10, 18, 27].into_iter(), 4), [(6, 22), (23, 31)]);
        assert_eq!(ranges([1, 2, 4].into_iter(), 0), [(1, 1), (2, 2), (4, 4)]);
        assert!(ranges(std::iter::empty(), 8).is_empty());
    }

    #[test]
    fn lines_without_endings() {
        let lines: Vec<&[u8]> = source_lines(b"a\r\nb\n\nc").collect();
        assert_eq!(lines, [&b"a"[..], b"b", b"", b"c"]);
        assert_eq!(source_lines(b"x\n").count(), 1);
        assert_eq!(source_lines(b"").count(), 0);
        assert_eq!(source_lines(b"\n").count(), 1);
    }
}
