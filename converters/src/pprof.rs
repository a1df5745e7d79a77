//! pprof: a gzip-compressed protocol buffer of `profile.proto` (the format of Go's
//! pprof and the tools built on it).
//!
//! One sample per stack, its value the stack's weight (saturated at `i64::MAX`);
//! the sample type is the event's name with unit `count`. Each frame is one
//! function (name as [`Frame::name`](crate::stacks::Frame::name), system name as
//! the profile has it, its source file) at one location without an address, in a
//! mapping per object that declares the functions known, so no tool tries to
//! symbolize them. The command is written as a comment.

use std::collections::HashMap;
use std::io::{self, Write};

use flate2::write::GzEncoder;
use flate2::Compression;
use prost::Message;

use crate::stacks::Stacks;

/// Writes `stacks` as a gzip-compressed pprof profile into `out`.
pub fn write_pprof(stacks: &Stacks, out: &mut impl Write) -> io::Result<()> {
    let profile = profile_of(stacks);
    let mut encoder = GzEncoder::new(out, Compression::default());
    encoder.write_all(&profile.encode_to_vec())?;
    encoder.finish()?;
    Ok(())
}

/// The `profile.proto` message of `stacks`.
fn profile_of(stacks: &Stacks) -> proto::Profile {
    let mut strings = Strings::default();
    let value_type = proto::ValueType {
        r#type: strings.index(&stacks.event),
        unit: strings.index("count"),
    };
    let mut mappings: Vec<proto::Mapping> = Vec::new();
    let mut mapping_of: HashMap<String, u64> = HashMap::new();
    let mut mapping = |object: &str, strings: &mut Strings| {
        let next = mappings.len() as u64 + 1;
        let id = *mapping_of.entry(object.to_string()).or_insert(next);
        if id == next {
            mappings.push(proto::Mapping {
                id,
                filename: strings.index(object),
                has_functions: true,
                has_filenames: true,
                ..proto::Mapping::default()
            });
        }
        id
    };
    // pprof takes the first mapping for the program: the object of `main`.
    if let Some(main) = stacks.frames.iter().find(|frame| frame.function == "main") {
        mapping(&main.object, &mut strings);
    }
    let mut functions = Vec::with_capacity(stacks.frames.len());
    let mut locations = Vec::with_capacity(stacks.frames.len());
    for (index, frame) in stacks.frames.iter().enumerate() {
        let id = index as u64 + 1;
        let mapping_id = mapping(&frame.object, &mut strings);
        functions.push(proto::Function {
            id,
            name: strings.index(&frame.name),
            system_name: strings.index(&frame.function),
            filename: strings.index(&frame.file),
            start_line: 0,
        });
        locations.push(proto::Location {
            id,
            mapping_id,
            address: 0,
            line: vec![proto::Line {
                function_id: id,
                line: 0,
            }],
        });
    }
    let samples = stacks
        .stacks
        .iter()
        .map(|stack| proto::Sample {
            // Innermost frame first.
            location_id: stack.frames.iter().rev().map(|&f| f as u64 + 1).collect(),
            value: vec![i64::try_from(stack.weight).unwrap_or(i64::MAX)],
        })
        .collect();
    let mut comment = Vec::new();
    if let Some(command) = &stacks.command {
        comment.push(strings.index(&format!("cmd: {command}")));
    }
    let default_sample_type = value_type.r#type;
    proto::Profile {
        sample_type: vec![value_type],
        sample: samples,
        mapping: mappings,
        location: locations,
        function: functions,
        period_type: Some(value_type),
        period: 1,
        comment,
        default_sample_type,
        string_table: strings.table,
    }
}

/// The string table: "" first, every string once.
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Default for Strings {
    fn default() -> Self {
        Strings {
            table: vec![String::new()],
            index: HashMap::from([(String::new(), 0)]),
        }
    }
}

impl Strings {
    fn index(&mut self, text: &str) -> i64 {
        if let Some(&index) = self.index.get(text) {
            return index;
        }
        let index = self.table.len() as i64;
        self.table.push(text.to_string());
        self.index.insert(text.to_string(), index);
        index
    }
}

/// The messages of `profile.proto` that cgx writes, with its field numbers.
mod proto {
    /// `Profile`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Profile {
        #[prost(message, repeated, tag = "1")]
        pub sample_type: Vec<ValueType>,
        #[prost(message, repeated, tag = "2")]
        pub sample: Vec<Sample>,
        #[prost(message, repeated, tag = "3")]
        pub mapping: Vec<Mapping>,
        #[prost(message, repeated, tag = "4")]
        pub location: Vec<Location>,
        #[prost(message, repeated, tag = "5")]
        pub function: Vec<Function>,
        #[prost(string, repeated, tag = "6")]
        pub string_table: Vec<String>,
        #[prost(message, optional, tag = "11")]
        pub period_type: Option<ValueType>,
        #[prost(int64, tag = "12")]
        pub period: i64,
        #[prost(int64, repeated, tag = "13")]
        pub comment: Vec<i64>,
        #[prost(int64, tag = "14")]
        pub default_sample_type: i64,
    }

    /// `ValueType`: indices into the string table.
    #[derive(Clone, Copy, PartialEq, prost::Message)]
    pub struct ValueType {
        #[prost(int64, tag = "1")]
        pub r#type: i64,
        #[prost(int64, tag = "2")]
        pub unit: i64,
    }

    /// `Sample`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Sample {
        #[prost(uint64, repeated, tag = "1")]
        pub location_id: Vec<u64>,
        #[prost(int64, repeated, tag = "2")]
        pub value: Vec<i64>,
    }

    /// `Mapping`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Mapping {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        #[prost(uint64, tag = "2")]
        pub memory_start: u64,
        #[prost(uint64, tag = "3")]
        pub memory_limit: u64,
        #[prost(uint64, tag = "4")]
        pub file_offset: u64,
        #[prost(int64, tag = "5")]
        pub filename: i64,
        #[prost(int64, tag = "6")]
        pub build_id: i64,
        #[prost(bool, tag = "7")]
        pub has_functions: bool,
        #[prost(bool, tag = "8")]
        pub has_filenames: bool,
        #[prost(bool, tag = "9")]
        pub has_line_numbers: bool,
        #[prost(bool, tag = "10")]
        pub has_inline_frames: bool,
    }

    /// `Location`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Location {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        #[prost(uint64, tag = "2")]
        pub mapping_id: u64,
        #[prost(uint64, tag = "3")]
        pub address: u64,
        #[prost(message, repeated, tag = "4")]
        pub line: Vec<Line>,
    }

    /// `Line`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Line {
        #[prost(uint64, tag = "1")]
        pub function_id: u64,
        #[prost(int64, tag = "2")]
        pub line: i64,
    }

    /// `Function`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Function {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        #[prost(int64, tag = "2")]
        pub name: i64,
        #[prost(int64, tag = "3")]
        pub system_name: i64,
        #[prost(int64, tag = "4")]
        pub filename: i64,
        #[prost(int64, tag = "5")]
        pub start_line: i64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stacks::{Frame, Stack};

    #[test]
    fn the_message_reads_back() {
        let frame = |name: &str| Frame {
            name: name.to_string(),
            function: name.to_string(),
            file: "a.c".to_string(),
            object: "/bin/a".to_string(),
        };
        let stacks = Stacks {
            event: "Ir".into(),
            command: Some("./a".into()),
            frames: vec![frame("main"), frame("f")],
            stacks: vec![Stack {
                frames: vec![0, 1],
                weight: 7,
            }],
            total: 7,
        };
        let mut out = Vec::new();
        write_pprof(&stacks, &mut out).expect("writing to memory");
        let mut bytes = Vec::new();
        io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&out[..]), &mut bytes)
            .expect("gzip");
        let profile = proto::Profile::decode(&bytes[..]).expect("a profile");
        let table = &profile.string_table;
        assert_eq!(table[0], "");
        assert_eq!(table[profile.sample_type[0].r#type as usize], "Ir");
        assert_eq!(profile.sample[0].location_id, [2, 1]);
        assert_eq!(profile.sample[0].value, [7]);
        assert_eq!(table[profile.function[1].name as usize], "f");
        assert_eq!(table[profile.comment[0] as usize], "cmd: ./a");
        assert_eq!(profile.mapping.len(), 1);
    }
}
