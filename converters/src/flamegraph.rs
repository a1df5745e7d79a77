//! A flame graph (SVG) of the stacks, drawn by the inferno crate from the folded
//! lines: titled `COMMAND — EVENT`, counts labelled with the event's name, colours
//! chosen from the functions' names (the same input gives the same picture).

use std::io::{self, Write};

use inferno::flamegraph::{self, Options};

use crate::folded::folded_lines;
use crate::stacks::Stacks;

/// Draws `stacks` as a flame graph into `out`. Fails if the event's total is zero
/// (there is nothing to draw) or if writing fails.
pub fn write_flamegraph(stacks: &Stacks, out: &mut impl Write) -> io::Result<()> {
    if stacks.total == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "the total of event '{}' is 0: there is nothing to draw",
                stacks.event
            ),
        ));
    }
    let lines = folded_lines(stacks);
    let mut options = Options::default();
    options.title = stacks.title();
    options.count_name = stacks.event.clone();
    options.hash = true;
    flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), out)
}
