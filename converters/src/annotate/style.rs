//! Colour for terminals: ANSI escapes around whole lines, or nothing.

/// What a line is, for its colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Paint {
    /// A section title (`-- Summary`).
    Title,
    /// The first line of a summary entry (`< ...`, `> ...`, `* ...`).
    Entry,
    /// A warning box.
    Warning,
    /// A gap marker (`-- line 12 ----`).
    Gap,
}

/// Paints lines, or leaves them alone when colour is off.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Style {
    on: bool,
}

impl Style {
    /// Colours if `on`.
    pub fn new(on: bool) -> Style {
        Style { on }
    }

    /// Appends `line` (which may end with a newline) to `out`, painted.
    pub fn line(self, out: &mut String, paint: Paint, line: &str) {
        let (text, newline) = match line.strip_suffix('\n') {
            Some(text) => (text, "\n"),
            None => (line, ""),
        };
        if self.on && !text.is_empty() {
            let code = match paint {
                Paint::Title => "1;36",
                Paint::Entry => "1",
                Paint::Warning => "33",
                Paint::Gap => "2",
            };
            out.push_str("\x1b[");
            out.push_str(code);
            out.push('m');
            out.push_str(text);
            out.push_str("\x1b[0m");
        } else {
            out.push_str(text);
        }
        out.push_str(newline);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_only_when_on() {
        let mut out = String::new();
        Style::new(false).line(&mut out, Paint::Title, "-- Summary\n");
        Style::new(true).line(&mut out, Paint::Title, "-- Summary\n");
        assert_eq!(out, "-- Summary\n\x1b[1;36m-- Summary\x1b[0m\n");
    }
}
