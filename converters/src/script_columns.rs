//! The cost columns of Valgrind 3.19's annotate scripts (`callgrind_annotate`
//! and `cg_annotate` print them alike): each shown event a column as wide
//! as its widest count (commas included, and ` (12.34%)` with percentages),
//! right-aligned, `.` for an event a line never had, each followed by a
//! space. Counts are signed: `cg_diff`'s files have negative ones.

use std::io::{self, Write};

/// `-1234567` as `-1,234,567`.
pub fn commify(value: i128) -> String {
    let digits = value.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if value < 0 {
        out.push('-');
    }
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// Which events are shown, and how.
pub struct Columns<'a> {
    /// The profile's events.
    pub events: &'a [String],
    /// The positions of the shown ones, in order.
    pub show: &'a [usize],
    /// Whether percentages of `summary` follow the counts.
    pub show_percs: bool,
    /// The totals percentages are of.
    pub summary: &'a [i128],
}

impl Columns<'_> {
    /// The width of each event's column for the cost lines `all`.
    pub fn widths<'c>(&self, all: impl Iterator<Item = &'c [i128]>) -> Vec<usize> {
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
    pub fn print_events(&self, out: &mut dyn Write, widths: &[usize]) -> io::Result<()> {
        for &i in self.show {
            write!(out, "{:<width$} ", self.events[i], width = widths[i])?;
        }
        Ok(())
    }

    /// A line's `costs` in the columns.
    pub fn print_costs(
        &self,
        out: &mut dyn Write,
        costs: &[i128],
        widths: &[usize],
    ) -> io::Result<()> {
        for &i in self.show {
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

    #[test]
    fn counts_print_with_commas_and_signs() {
        assert_eq!(commify(0), "0");
        assert_eq!(commify(999), "999");
        assert_eq!(commify(1000), "1,000");
        assert_eq!(commify(112_797), "112,797");
        assert_eq!(commify(-1_234_567), "-1,234,567");
    }

    #[test]
    fn columns_fit_the_widest_count() {
        let events = ["Ir".to_string(), "Dr".to_string()];
        let summary = [200, 10];
        let columns = Columns {
            events: &events,
            show: &[0, 1],
            show_percs: true,
            summary: &summary,
        };
        let lines: [&[i128]; 2] = [&[200, 10], &[1500]];
        let widths = columns.widths(lines.into_iter());
        assert_eq!(widths, vec![5 + 9, 2 + 9]);
        let mut out = Vec::new();
        columns.print_costs(&mut out, &[50], &widths).unwrap();
        // A dot has nine spaces where a percentage would be.
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "   50 (25.00%)  .          "
        );
    }
}
