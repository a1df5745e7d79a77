//! Callgrind → Cachegrind: keep self costs by file, function and line.

use cgx_formats::{add_costs, Events, FunctionId, Part, Position, PositionKinds, Profile, Record};

/// Why a profile cannot be converted.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// Parts with different events cannot be added up.
    #[error("part {index} has events '{found}' where the first part has '{expected}'")]
    EventsDiffer {
        /// The 1-based number of the part.
        index: usize,
        /// The events of the first part.
        expected: String,
        /// The events of this part.
        found: String,
    },
    /// There is nothing to convert.
    #[error("the profile has no parts")]
    Empty,
}

/// Converts `profile` to what the Cachegrind format holds: one part (all parts
/// added up; their events must be the same), self costs only, by (source file,
/// function, line). A cost in an inlined file (`fi=`) belongs to the function as
/// named in that file, as cg_annotate and callgrind_annotate count it. The object
/// names and instruction addresses are dropped; without line positions every cost
/// is at line 0. `summary:` is the totals of the result.
pub fn to_cachegrind(profile: &Profile) -> Result<Profile, ConvertError> {
    let first = profile.parts.first().ok_or(ConvertError::Empty)?;
    // The format has no `event:` definitions.
    let events = Events::new(first.events.names.iter().cloned());
    let mut names = profile.names.clone();
    let no_object = names
        .intern("")
        .unwrap_or_else(|_| unreachable!("names.intern"));
    let mut part = Part::new(events.clone(), PositionKinds::default());
    part.header.cmd = first.header.cmd.clone();
    part.header.desc = first.header.desc.clone();
    let mut sums: indexmap::IndexMap<(FunctionId, u64), Vec<u64>> = indexmap::IndexMap::new();
    for (index, source) in profile.parts.iter().enumerate() {
        if source.events.names != events.names {
            return Err(ConvertError::EventsDiffer {
                index: index + 1,
                expected: events.names.join(" "),
                found: source.events.names.join(" "),
            });
        }
        for (function, records) in source.functions() {
            records.for_each(events.len(), |record| {
                if let Record::Cost { file, at, costs } = record {
                    let key = FunctionId {
                        object: no_object,
                        file,
                        name: function.name,
                    };
                    let sum = sums
                        .entry((key, at.line))
                        .or_insert_with(|| vec![0; events.len()]);
                    add_costs(sum, costs);
                }
            });
        }
    }
    let mut totals = vec![0; events.len()];
    for ((function, line), costs) in sums {
        add_costs(&mut totals, &costs);
        let at = Position { instr: 0, line };
        part.push(
            function,
            &Record::Cost {
                file: function.file,
                at,
                costs: &costs,
            },
        );
    }
    part.summary = Some(totals);
    Ok(Profile {
        creator: None,
        names,
        parts: vec![part],
    })
}
