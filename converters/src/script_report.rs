//! What Valgrind 3.19's annotate scripts (`callgrind_annotate`,
//! `cg_annotate`) print alike: the event lines of the header, PROGRAM
//! TOTALS, the function list's header and order, and the cost columns.
//!
//! Columns: each shown event a column as wide as its widest count (commas
//! included, and ` (12.34%)` with percentages), right-aligned, `.` for an
//! event a line never had, each followed by a space. Counts are signed:
//! `cg_diff`'s files have negative ones.

use std::cmp::Ordering;
use std::io::{self, Write};

use crate::annotate::commify;
use crate::script_source::SourceOptions;

/// The line between the report's sections.
pub const FANCY: &str =
    "--------------------------------------------------------------------------------";

/// Why a script's report cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// `--show` or `--sort` names an event the profile does not have.
    #[error("--{option} event `{event}' did not appear in input")]
    NoEvent {
        /// `show` or `sort`.
        option: &'static str,
        /// The event.
        event: String,
    },
    /// `--threshold` is not a number from 0 to 100.
    #[error("--threshold={0}: not a percentage from 0 to 100")]
    Threshold(String),
    /// The profile has no part.
    #[error("the profile has no events")]
    Empty,
    /// A line the format does not allow where it is.
    #[error("{file}:{line}: {reason}")]
    Malformed {
        /// The file.
        file: String,
        /// The line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A source file named on the command line is in none of the folders
    /// searched.
    #[error("File {file} not found in any of: {searched}")]
    SourceNotFound {
        /// The file.
        file: String,
        /// The folders, as the scripts list them.
        searched: String,
    },
    /// Reading or writing failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// The positions of `wanted` (all when empty) in `events`.
fn positions(
    events: &[String],
    wanted: &[String],
    option: &'static str,
) -> Result<Vec<usize>, ScriptError> {
    if wanted.is_empty() {
        return Ok((0..events.len()).collect());
    }
    wanted
        .iter()
        .map(|event| {
            events
                .iter()
                .position(|known| known == event)
                .ok_or_else(|| ScriptError::NoEvent {
                    option,
                    event: event.clone(),
                })
        })
        .collect()
}

/// What a script's options choose, as given on its command line.
#[derive(Clone, Debug)]
pub struct Choice<'a> {
    /// `--show`: the events shown (all when empty).
    pub show: &'a [String],
    /// `--sort`: the sort events (all, in the file's order, when empty).
    pub sort: &'a [String],
    /// `--threshold`, as given (printed as it is, without a `%`).
    pub threshold: &'a str,
    /// `--show-percs`.
    pub show_percs: bool,
}

/// The events of a report and how they are shown and sorted.
pub struct Report<'a> {
    /// The profile's events.
    pub events: &'a [String],
    /// The positions of the shown ones, in order.
    pub show: Vec<usize>,
    /// The positions of the sort events, primary first.
    pub sort: Vec<usize>,
    /// The threshold, a percentage of the primary sort event.
    pub threshold: f64,
    threshold_text: String,
    /// Whether percentages of `summary` follow the counts.
    show_percs: bool,
    /// The totals percentages are of.
    summary: &'a [i64],
}

impl<'a> Report<'a> {
    /// The report of a profile with `events` and totals `summary`, as
    /// `choice` asks.
    pub fn new(
        events: &'a [String],
        summary: &'a [i64],
        choice: &Choice<'_>,
    ) -> Result<Report<'a>, ScriptError> {
        let threshold_text = choice.threshold.trim_end_matches('%').to_string();
        let threshold = threshold_text
            .parse()
            .ok()
            .filter(|value| (0.0..=100.0).contains(value))
            .ok_or_else(|| ScriptError::Threshold(choice.threshold.to_string()))?;
        Ok(Report {
            events,
            show: positions(events, choice.show, "show")?,
            sort: positions(events, choice.sort, "sort")?,
            threshold,
            threshold_text,
            show_percs: choice.show_percs,
            summary,
        })
    }

    fn names(&self, positions: &[usize]) -> String {
        let listed: Vec<&str> = positions.iter().map(|&i| self.events[i].as_str()).collect();
        listed.join(" ")
    }

    /// The totals percentages are of.
    pub(crate) fn summary(&self) -> &[i64] {
        self.summary
    }

    /// The same report with percentages of `summary`.
    pub(crate) fn with_summary<'b>(&self, summary: &'b [i64]) -> Report<'b>
    where
        'a: 'b,
    {
        Report {
            events: self.events,
            show: self.show.clone(),
            sort: self.sort.clone(),
            threshold: self.threshold,
            threshold_text: self.threshold_text.clone(),
            show_percs: self.show_percs,
            summary,
        }
    }

    /// The header's lines from `Events recorded:` on, and the blank line
    /// after them; sort events after the primary one get the threshold
    /// `others` (each script has its own); `sources` says which files are
    /// annotated.
    pub fn write_header_events(
        &self,
        out: &mut dyn Write,
        others: &str,
        sources: &SourceOptions,
    ) -> io::Result<()> {
        let thresholds: Vec<&str> = (0..self.sort.len())
            .map(|i| match i {
                0 => self.threshold_text.as_str(),
                _ => others,
            })
            .collect();
        writeln!(out, "Events recorded:  {}", self.events.join(" "))?;
        writeln!(out, "Events shown:     {}", self.names(&self.show))?;
        writeln!(out, "Event sort order: {}", self.names(&self.sort))?;
        writeln!(out, "Thresholds:       {}", thresholds.join(" "))?;
        sources.write_header(out)?;
        writeln!(out)
    }

    /// The PROGRAM TOTALS section (` (calculated)` when the profile gave
    /// no totals), then the function list's header with the columns of
    /// `functions`; returns those columns' widths.
    pub fn write_totals<'c>(
        &self,
        out: &mut dyn Write,
        calculated: bool,
        functions: impl Iterator<Item = &'c [i64]>,
    ) -> io::Result<Vec<usize>> {
        let summary_widths = self.widths(std::iter::once(self.summary));
        writeln!(out, "{FANCY}")?;
        self.write_events(out, &summary_widths)?;
        writeln!(out)?;
        writeln!(out, "{FANCY}")?;
        self.write_costs(out, self.summary, &summary_widths)?;
        write!(out, " PROGRAM TOTALS")?;
        if calculated {
            write!(out, " (calculated)")?;
        }
        writeln!(out, "\n")?;
        let widths = self.widths(functions);
        writeln!(out, "{FANCY}")?;
        self.write_events(out, &widths)?;
        writeln!(out, " file:function")?;
        writeln!(out, "{FANCY}")?;
        Ok(widths)
    }

    /// `functions` in the scripts' order: by the sort events, the larger
    /// `key` of a count first (a missing count is -1), then by name.
    pub fn sorted<'f>(
        &self,
        functions: impl Iterator<Item = (&'f String, &'f [i64])>,
        key: impl Fn(i64) -> i64,
    ) -> Vec<(&'f String, &'f [i64])> {
        let mut listed: Vec<_> = functions.collect();
        let key = |costs: &[i64], i: usize| key(costs.get(i).copied().unwrap_or(-1));
        listed.sort_by(|(a_name, a), (b_name, b)| {
            self.sort
                .iter()
                .map(|&i| key(b, i).cmp(&key(a, i)))
                .find(|order| order.is_ne())
                .unwrap_or(Ordering::Equal)
                .then_with(|| a_name.cmp(b_name))
        });
        listed
    }

    /// The width of each event's column for the cost lines `all`.
    pub(crate) fn widths<'c>(&self, all: impl Iterator<Item = &'c [i64]>) -> Vec<usize> {
        let mut widths: Vec<usize> = self.events.iter().map(String::len).collect();
        for costs in all {
            for (width, cost) in widths.iter_mut().zip(costs) {
                let length = cost.to_string().len();
                let mut wide = length + (length - 1) / 3;
                if self.show_percs {
                    wide += 9;
                }
                *width = (*width).max(wide);
            }
        }
        widths
    }

    /// The events' names, each padded to its column.
    pub(crate) fn write_events(&self, out: &mut dyn Write, widths: &[usize]) -> io::Result<()> {
        for &i in &self.show {
            write!(out, "{:<width$} ", self.events[i], width = widths[i])?;
        }
        Ok(())
    }

    /// A line's `costs` in the columns.
    pub fn write_costs(
        &self,
        out: &mut dyn Write,
        costs: &[i64],
        widths: &[usize],
    ) -> io::Result<()> {
        for &i in &self.show {
            let count = costs.get(i).copied();
            let mut text = count.map_or(".".to_string(), commify);
            if self.show_percs {
                match (count, self.summary.get(i).copied()) {
                    (Some(count), Some(total)) if count != 0 => {
                        let percent = match total {
                            0 => 0.0,
                            _ => count as f64 * 100.0 / total as f64,
                        };
                        if -9.995 < percent && percent < 99.995 {
                            text.push_str(&format!(" ({percent:5.2}%)"));
                        } else {
                            text.push_str(&format!(" ({percent:5.1}%)"));
                        }
                    }
                    _ => text.push_str("         "),
                }
            }
            write!(out, "{text:>width$} ", width = widths[i])?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events() -> Vec<String> {
        vec!["Ir".to_string(), "Dr".to_string()]
    }

    #[test]
    fn columns_fit_the_widest_count() {
        let (events, summary) = (events(), [200, 10]);
        let choice = Choice {
            show: &[],
            sort: &[],
            threshold: "1",
            show_percs: true,
        };
        let report = Report::new(&events, &summary, &choice).unwrap();
        let lines: [&[i64]; 2] = [&[200, 10], &[1500]];
        let widths = report.widths(lines.into_iter());
        assert_eq!(widths, vec![5 + 9, 2 + 9]);
        let mut out = Vec::new();
        report.write_costs(&mut out, &[50], &widths).unwrap();
        // A dot has nine spaces where a percentage would be.
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "   50 (25.00%)  .          "
        );
    }

    #[test]
    fn choices_are_checked_and_functions_sorted_by_the_sort_events() {
        let (events, summary) = (events(), [10, 10]);
        let sort = ["Dr".to_string()];
        let choice = Choice {
            show: &[],
            sort: &sort,
            threshold: "5%",
            show_percs: false,
        };
        let report = Report::new(&events, &summary, &choice).unwrap();
        assert_eq!((report.sort.clone(), report.threshold), (vec![1], 5.0));
        let names = ["a".to_string(), "b".to_string(), "c".to_string()];
        let costs: [&[i64]; 3] = [&[9, 1], &[1, -7], &[5, 1]];
        let listed = report.sorted(names.iter().zip(costs), |count| count.abs());
        let order: Vec<&str> = listed.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(order, vec!["b", "a", "c"]);
        let bad = Choice {
            threshold: "101",
            ..choice.clone()
        };
        assert!(matches!(
            Report::new(&events, &summary, &bad),
            Err(ScriptError::Threshold(_))
        ));
        let unknown = ["Bc".to_string()];
        let bad = Choice {
            show: &unknown,
            ..choice
        };
        assert_eq!(
            Report::new(&events, &summary, &bad)
                .err()
                .map(|e| e.to_string()),
            Some("--show event `Bc' did not appear in input".into())
        );
    }
}
