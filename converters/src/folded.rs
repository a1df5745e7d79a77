//! Folded stacks: one line per stack, `main;f;g 123`, the frames outermost first
//! and the weight after the last space — the input of flame graph tools
//! (flamegraph.pl, inferno).
//!
//! Frames are named as [`Frame::name`](crate::stacks::Frame::name) says. A `;` in
//! a name would split the frame, so it is written as `:`; line breaks and tabs
//! become spaces. Lines are sorted by their frames' names; their weights add up
//! to [`Stacks::total`](crate::stacks::Stacks::total).

use std::io::{self, Write};

use crate::stacks::{Stack, Stacks};

/// The folded lines of `stacks`, in the order of [`Stacks::stacks`], without line
/// ends.
pub fn folded_lines(stacks: &Stacks) -> Vec<String> {
    let names = frame_names(stacks);
    stacks
        .stacks
        .iter()
        .map(|stack| {
            let mut line = Vec::new();
            // Writing into memory cannot fail.
            let _ = write_line(&names, stack, &mut line);
            String::from_utf8_lossy(&line).into_owned()
        })
        .collect()
}

/// Writes the folded lines of `stacks` to `out`, in the order of
/// [`Stacks::stacks`], each ended by a newline.
pub fn write_folded(stacks: &Stacks, out: &mut impl Write) -> io::Result<()> {
    let names = frame_names(stacks);
    for stack in &stacks.stacks {
        write_line(&names, stack, out)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// The names of the frames of `stacks` as folded lines can carry them.
fn frame_names(stacks: &Stacks) -> Vec<String> {
    stacks
        .frames
        .iter()
        .map(|frame| frame_name(&frame.name))
        .collect()
}

/// Writes one line without its end.
fn write_line(names: &[String], stack: &Stack, out: &mut impl Write) -> io::Result<()> {
    for (index, &frame) in stack.frames.iter().enumerate() {
        if index > 0 {
            out.write_all(b";")?;
        }
        out.write_all(names[frame].as_bytes())?;
    }
    write!(out, " {}", stack.weight)
}

/// A frame's name as a folded line can carry it.
fn frame_name(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            ';' => ':',
            '\n' | '\r' | '\t' => ' ',
            c => c,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stacks::Frame;

    fn frame(name: &str) -> Frame {
        Frame {
            name: name.to_string(),
            function: name.to_string(),
            file: String::new(),
            object: String::new(),
        }
    }

    #[test]
    fn names_cannot_break_lines_or_frames() {
        let stacks = Stacks {
            event: "Ir".into(),
            command: None,
            frames: vec![frame("main"), frame("f<int; 3>\nx")],
            stacks: vec![
                Stack {
                    frames: vec![0],
                    weight: 2,
                },
                Stack {
                    frames: vec![0, 1],
                    weight: 7,
                },
            ],
            total: 9,
        };
        let mut out = Vec::new();
        write_folded(&stacks, &mut out).expect("writing to memory");
        assert_eq!(
            String::from_utf8_lossy(&out),
            "main 2\nmain;f<int: 3> x 7\n"
        );
    }
}
