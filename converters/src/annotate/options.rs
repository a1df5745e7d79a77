//! What the report shows: the options of `cgx annotate`.

use super::rewrite::Rewrite;

/// Which callers and callees the call tree lists for each function (`--tree`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Tree {
    /// No call tree.
    #[default]
    None,
    /// The callers of each function.
    Caller,
    /// The functions each function calls.
    Calling,
    /// Both.
    Both,
}

impl Tree {
    /// The tree of `--tree=VALUE` (`none`, `caller`, `calling`, `both`), if
    /// VALUE is one.
    pub fn parse(value: &str) -> Option<Tree> {
        match value {
            "none" => Some(Tree::None),
            "caller" => Some(Tree::Caller),
            "calling" => Some(Tree::Calling),
            "both" => Some(Tree::Both),
            _ => None,
        }
    }

    /// Whether callers are listed.
    pub fn callers(self) -> bool {
        matches!(self, Tree::Caller | Tree::Both)
    }

    /// Whether callees are listed.
    pub fn callees(self) -> bool {
        matches!(self, Tree::Calling | Tree::Both)
    }
}

/// The options of a report; [`Options::default`] is what cg_annotate does without
/// options.
#[derive(Clone, Debug)]
pub struct Options {
    /// The events to show, in this column order (`--show`); all by default.
    pub show: Option<Vec<String>>,
    /// The events to sort by (`--sort`); the file's order by default.
    pub sort: Option<Vec<String>>,
    /// Files and functions below this percentage of the primary sort event are
    /// left out (`--threshold`).
    pub threshold: f64,
    /// A percentage beside every non-zero count (`--show-percs`).
    pub show_percs: bool,
    /// Annotate the source files of the functions shown (`--annotate`).
    pub annotate: bool,
    /// Lines of context around annotated lines (`--context`).
    pub context: u64,
    /// Report the second profile minus the first (`--diff`).
    pub diff: bool,
    /// Rewrite of every file name (`--mod-filename`).
    pub mod_filename: Option<Rewrite>,
    /// Rewrite of every function name (`--mod-funcname`).
    pub mod_funcname: Option<Rewrite>,
    /// A summary of inclusive costs, from the `calls=` lines (`--inclusive=yes`).
    pub inclusive: bool,
    /// Callers and callees of each function (`--tree`).
    pub tree: Tree,
    /// ANSI colours in the output.
    pub color: bool,
    /// The command line, printed as `Invocation:`.
    pub invocation: String,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            show: None,
            sort: None,
            threshold: 0.1,
            show_percs: true,
            annotate: true,
            context: 8,
            diff: false,
            mod_filename: None,
            mod_funcname: None,
            inclusive: false,
            tree: Tree::None,
            color: false,
            invocation: String::new(),
        }
    }
}

/// A threshold as the metadata shows it: `0.1`, `1.0`, `0.25` (a float with at
/// least one decimal).
pub(crate) fn threshold_text(threshold: f64) -> String {
    let text = format!("{threshold}");
    if text.contains(['.', 'e', 'i', 'N']) {
        text
    } else {
        format!("{text}.0")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_print_with_a_decimal() {
        assert_eq!(threshold_text(0.1), "0.1");
        assert_eq!(threshold_text(1.0), "1.0");
        assert_eq!(threshold_text(0.0), "0.0");
        assert_eq!(threshold_text(12.5), "12.5");
    }
}
