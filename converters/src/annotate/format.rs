//! Cost columns as cg_annotate (3.21+) prints them: counts with thousands
//! separators, percentages of the totals, and columns as wide as their widest
//! entry, headed by the event name padded with underscores.

use std::fmt::Write;

use super::events::EventColumns;

/// `value` with a comma every three digits: `-1,234,567`.
pub fn commify(value: i64) -> String {
    let digits = value.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if value < 0 {
        out.push('-');
    }
    // The first group has one to three digits, the others three.
    let head = match digits.len() % 3 {
        0 => 3.min(digits.len()),
        short => short,
    };
    out.push_str(&digits[..head]);
    for group in digits.as_bytes()[head..].chunks(3) {
        out.push(',');
        out.extend(group.iter().map(|&digit| digit as char));
    }
    out
}

/// `count` as a percentage of `total`, with one decimal.
fn percent(count: i64, total: i64) -> String {
    format!("{:.1}", count as f64 * 100.0 / total as f64)
}

/// The percentage after a plain count: ` (12.3%)`; none for 0; ` (n/a)` when the
/// total is 0.
fn single(count: i64, total: i64) -> String {
    if count == 0 {
        String::new()
    } else if total == 0 {
        " (n/a)".to_string()
    } else {
        format!(" ({}%)", percent(count, total))
    }
}

/// The two percentages after a summary entry's count, of the count and of the
/// cumulative count: ` (12.3%,` and ` 45.6%)`.
fn double(count: i64, cumulative: i64, total: i64) -> (String, String) {
    if total == 0 {
        (" (n/a,".to_string(), " n/a)".to_string())
    } else {
        (
            format!(" ({}%,", percent(count, total)),
            format!(" {}%)", percent(cumulative, total)),
        )
    }
}

/// The widths of one column: count, first and second percentage.
#[derive(Clone, Copy, Debug, Default)]
struct Width {
    count: usize,
    perc1: usize,
    perc2: usize,
}

impl Width {
    fn total(self) -> usize {
        self.count + self.perc1 + self.perc2
    }
}

/// Collects the entries a set of columns must fit, then makes the [`Columns`].
pub(crate) struct ColumnsBuilder<'a> {
    events: &'a EventColumns,
    totals: &'a [i64],
    show_percs: bool,
    widths: Vec<Width>,
    nested: bool,
}

impl<'a> ColumnsBuilder<'a> {
    /// Columns for `events`, with percentages of `totals` if `show_percs`.
    pub fn new(events: &'a EventColumns, totals: &'a [i64], show_percs: bool) -> Self {
        let mut builder = ColumnsBuilder {
            events,
            totals,
            show_percs,
            widths: vec![Width::default(); events.names.len()],
            nested: false,
        };
        // A zero always fits, as cg_annotate's minimum starts at zero.
        let zero = vec![0; events.names.len()];
        builder.fit(&zero);
        builder
    }

    /// Makes room for a plain row (or an inner row of a summary entry).
    pub fn fit(&mut self, cc: &[i64]) {
        for &i in &self.events.show {
            let count = cc.get(i).copied().unwrap_or(0);
            let width = &mut self.widths[i];
            width.count = width.count.max(commify(count).len());
            if self.show_percs {
                let perc1 = if self.nested {
                    double(count, 0, self.totals[i]).0.len()
                } else {
                    single(count, self.totals[i]).len()
                };
                width.perc1 = width.perc1.max(perc1);
            }
        }
    }

    /// Switches to summary entries (two percentages) and makes room for an entry
    /// with `cc` and the running total `cumulative`.
    pub fn fit_entry(&mut self, cc: &[i64], cumulative: &[i64]) {
        if !self.nested {
            self.nested = true;
            let zero = vec![0; self.events.names.len()];
            self.fit_entry(&zero, &zero);
        }
        self.fit(cc);
        if self.show_percs {
            for &i in &self.events.show {
                let (_, perc2) = double(0, cumulative[i], self.totals[i]);
                let width = &mut self.widths[i];
                width.perc2 = width.perc2.max(perc2.len());
            }
        }
    }

    /// The columns; `prefix` goes before the event names of the header.
    pub fn build(self, prefix: &'static str) -> Columns<'a> {
        let mut columns = Columns {
            events: self.events,
            totals: self.totals,
            show_percs: self.show_percs,
            widths: self.widths,
            prefix,
            missing: String::new(),
        };
        let mut missing = String::new();
        for &i in &columns.events.show {
            columns.cell(&mut missing, i, ".", "", "");
        }
        columns.missing = missing;
        columns
    }
}

/// Fixed-width cost columns.
pub(crate) struct Columns<'a> {
    events: &'a EventColumns,
    totals: &'a [i64],
    show_percs: bool,
    widths: Vec<Width>,
    prefix: &'static str,
    missing: String,
}

impl Columns<'_> {
    /// The header: event names padded with underscores to the column widths,
    /// then `suffix`.
    pub fn header(&self, out: &mut String, suffix: &str) {
        out.push_str(self.prefix);
        for &i in &self.events.show {
            let name = &self.events.names[i];
            let width = self.widths[i].total().max(name.len());
            let _ = write!(out, "{name:_<width$} ");
        }
        out.push_str(suffix);
        out.push('\n');
    }

    /// A row of counts then `suffix`. With `cumulative`, a summary entry: each
    /// count has its percentage and the cumulative percentage.
    pub fn row(&self, out: &mut String, cc: &[i64], cumulative: Option<&[i64]>, suffix: &str) {
        for &i in &self.events.show {
            let count = cc.get(i).copied().unwrap_or(0);
            let (perc1, perc2) = match (self.show_percs, cumulative) {
                (false, _) => (String::new(), String::new()),
                (true, None) => (single(count, self.totals[i]), String::new()),
                (true, Some(cumulative)) => double(count, cumulative[i], self.totals[i]),
            };
            self.cell(out, i, &commify(count), &perc1, &perc2);
        }
        out.push(' ');
        out.push_str(suffix);
        out.push('\n');
    }

    /// A row of dots (no counts) then `suffix`.
    pub fn missing(&self, out: &mut String, suffix: &str) {
        out.push_str(&self.missing);
        out.push(' ');
        out.push_str(suffix);
        out.push('\n');
    }

    fn cell(&self, out: &mut String, i: usize, count: &str, perc1: &str, perc2: &str) {
        let width = self.widths[i];
        let pad = self.events.names[i].len().saturating_sub(width.total());
        let _ = write!(
            out,
            "{:pad$}{count:>c$}{perc1:>p1$}{perc2:>p2$} ",
            "",
            c = width.count,
            p1 = width.perc1,
            p2 = width.perc2
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(names: &[&str]) -> EventColumns {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        EventColumns::new(names, None, None).unwrap()
    }

    #[test]
    fn commas_every_three_digits() {
        assert_eq!(commify(0), "0");
        assert_eq!(commify(999), "999");
        assert_eq!(commify(1000), "1,000");
        assert_eq!(commify(8195070), "8,195,070");
        assert_eq!(commify(-1000000), "-1,000,000");
        assert_eq!(commify(i64::MIN), "-9,223,372,036,854,775,808");
    }

    #[test]
    fn percentages() {
        assert_eq!(single(0, 10), "");
        assert_eq!(single(5, 0), " (n/a)");
        assert_eq!(single(1, 3), " (33.3%)");
        assert_eq!(single(-1, 1000), " (-0.1%)");
        assert_eq!(single(-1, 100000), " (-0.0%)");
        assert_eq!(double(0, 5, 10), (" (0.0%,".into(), " 50.0%)".into()));
    }

    #[test]
    fn a_plain_table() {
        let events = events(&["A", "SomeCount"]);
        let totals = [100_000, 100_000];
        let mut builder = ColumnsBuilder::new(&events, &totals, true);
        builder.fit(&totals);
        let columns = builder.build("");
        let mut out = String::new();
        columns.header(&mut out, "");
        columns.row(&mut out, &totals, None, "PROGRAM TOTALS");
        columns.row(&mut out, &[5, 0], None, "x");
        columns.missing(&mut out, "y");
        assert_eq!(
            out,
            "A_______________ SomeCount_______ \n\
             100,000 (100.0%) 100,000 (100.0%)  PROGRAM TOTALS\n      \
             5   (0.0%)       0           x\n      \
             .                .           y\n"
        );
    }

    #[test]
    fn summary_entries_have_cumulative_percentages() {
        let events = events(&["A"]);
        let totals = [86];
        let mut builder = ColumnsBuilder::new(&events, &totals, true);
        builder.fit_entry(&[70], &[70]);
        builder.fit(&[40]);
        builder.fit_entry(&[16], &[86]);
        let columns = builder.build("  ");
        let mut out = String::new();
        columns.header(&mut out, " file:function");
        columns.row(&mut out, &[70], Some(&[70]), "x.rs:");
        columns.row(&mut out, &[40], None, "  x1");
        columns.row(&mut out, &[16], Some(&[86]), "y.rs:y1");
        assert_eq!(
            out,
            "  A_________________  file:function\n\
             70 (81.4%,  81.4%)  x.rs:\n\
             40 (46.5%)            x1\n\
             16 (18.6%, 100.0%)  y.rs:y1\n"
        );
    }
}
