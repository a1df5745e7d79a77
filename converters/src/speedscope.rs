//! speedscope's JSON file format (`https://www.speedscope.app/file-format-schema.json`):
//! one "sampled" profile with shared frames, one sample per stack (frame indices,
//! outermost first) weighted with the stack's cost, unit `none`. The profile is
//! named `COMMAND — EVENT`; each frame has the function's name and source file.

use std::io::{self, Write};

use serde::Serialize;

use crate::stacks::Stacks;

/// The schema every speedscope file names.
pub const SCHEMA: &str = "https://www.speedscope.app/file-format-schema.json";

/// Writes `stacks` as a speedscope file into `out`.
pub fn write_speedscope(stacks: &Stacks, out: &mut impl Write) -> io::Result<()> {
    let title = stacks.title();
    let file = File {
        schema: SCHEMA,
        shared: Shared {
            frames: stacks
                .frames
                .iter()
                .map(|frame| Frame {
                    name: &frame.name,
                    file: (!frame.file.is_empty()).then_some(frame.file.as_str()),
                })
                .collect(),
        },
        profiles: vec![SampledProfile {
            kind: "sampled",
            name: &title,
            unit: "none",
            start_value: 0,
            end_value: stacks.total,
            samples: stacks
                .stacks
                .iter()
                .map(|stack| stack.frames.as_slice())
                .collect(),
            weights: stacks.stacks.iter().map(|stack| stack.weight).collect(),
        }],
        name: &title,
        active_profile_index: 0,
        exporter: concat!("cgx ", env!("CARGO_PKG_VERSION")),
    };
    serde_json::to_writer(&mut *out, &file)?;
    out.write_all(b"\n")
}

#[derive(Serialize)]
struct File<'a> {
    #[serde(rename = "$schema")]
    schema: &'static str,
    shared: Shared<'a>,
    profiles: Vec<SampledProfile<'a>>,
    name: &'a str,
    #[serde(rename = "activeProfileIndex")]
    active_profile_index: usize,
    exporter: &'static str,
}

#[derive(Serialize)]
struct Shared<'a> {
    frames: Vec<Frame<'a>>,
}

#[derive(Serialize)]
struct Frame<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<&'a str>,
}

#[derive(Serialize)]
struct SampledProfile<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    name: &'a str,
    unit: &'static str,
    #[serde(rename = "startValue")]
    start_value: u64,
    #[serde(rename = "endValue")]
    end_value: u64,
    samples: Vec<&'a [usize]>,
    weights: Vec<u64>,
}
