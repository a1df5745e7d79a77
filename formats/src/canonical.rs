//! A canonical view of a profile: everything it says, with names resolved and costs
//! at the same place added up. Two profiles are equal when their canonical views
//! are, whatever order their lines came in and however their names are numbered.

use std::collections::BTreeMap;

use crate::model::{
    add_costs, Events, FunctionId, Part, PartHeader, Position, PositionKinds, Profile,
};
use crate::names::Names;
use crate::records::Record;

/// A function by name: object, file, function.
pub type FunctionName = (String, String, String);

/// Where a cost, call or jump is: function, source file, position.
pub type Place = (FunctionName, String, Position);

/// A jump by source, target file, target function, target and whether conditional.
pub type JumpKey = (Place, String, String, Position, bool);

/// A part with names resolved and costs added up per place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CanonicalPart {
    /// The part's header lines.
    pub header: PartHeader,
    /// The part's events.
    pub events: Events,
    /// The part's positions.
    pub positions: PositionKinds,
    /// `summary:`, padded with zeros to one count per event.
    pub summary: Option<Vec<u64>>,
    /// `totals:`, padded with zeros to one count per event.
    pub totals: Option<Vec<u64>>,
    /// Self costs by place; places whose costs are all zero are left out.
    pub costs: BTreeMap<Place, Vec<u64>>,
    /// Calls by call site, callee and target: count and inclusive costs.
    pub calls: BTreeMap<(Place, FunctionName, Position), (u64, Vec<u64>)>,
    /// Jumps: executed and followed counts.
    pub jumps: BTreeMap<JumpKey, (u64, u64)>,
}

/// A profile with names resolved and costs added up per place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CanonicalProfile {
    /// `creator:`.
    pub creator: Option<String>,
    /// The parts, in order.
    pub parts: Vec<CanonicalPart>,
}

impl PartialEq for Profile {
    fn eq(&self, other: &Profile) -> bool {
        canonical(self) == canonical(other)
    }
}

/// The canonical view of `profile`.
pub fn canonical(profile: &Profile) -> CanonicalProfile {
    CanonicalProfile {
        creator: profile.creator.clone(),
        parts: profile
            .parts
            .iter()
            .map(|part| canonical_part(&profile.names, part))
            .collect(),
    }
}

fn canonical_part(names: &Names, part: &Part) -> CanonicalPart {
    let events = part.events.len();
    let padded = |costs: &Option<Vec<u64>>| {
        costs.as_ref().map(|costs| {
            let mut costs = costs.clone();
            costs.resize(events.max(costs.len()), 0);
            costs
        })
    };
    let function_name = |function: FunctionId| -> FunctionName {
        (
            names.get(function.object).to_string(),
            names.get(function.file).to_string(),
            names.get(function.name).to_string(),
        )
    };
    let mut canonical = CanonicalPart {
        header: part.header.clone(),
        events: part.events.clone(),
        positions: part.positions,
        summary: padded(&part.summary),
        totals: padded(&part.totals),
        costs: BTreeMap::new(),
        calls: BTreeMap::new(),
        jumps: BTreeMap::new(),
    };
    for (function, records) in part.functions() {
        let name = function_name(function);
        records.for_each(events, |record| match record {
            // All-zero costs add nothing (and places left at zero are dropped below).
            Record::Cost { costs, .. } if costs.iter().all(|&c| c == 0) => {}
            Record::Cost { file, at, costs } => {
                let place = (name.clone(), names.get(file).to_string(), at);
                let sum = canonical
                    .costs
                    .entry(place)
                    .or_insert_with(|| vec![0; events]);
                add_costs(sum, costs);
            }
            Record::Call {
                file,
                at,
                callee,
                target,
                count,
                inclusive,
            } => {
                let place = (name.clone(), names.get(file).to_string(), at);
                let key = (place, function_name(callee), target);
                let sum = canonical
                    .calls
                    .entry(key)
                    .or_insert_with(|| (0, vec![0; events]));
                sum.0 = sum.0.wrapping_add(count);
                add_costs(&mut sum.1, inclusive);
            }
            Record::Jump {
                file,
                at,
                target_file,
                target_fn,
                target,
                executed,
                followed,
            } => {
                let place = (name.clone(), names.get(file).to_string(), at);
                let key = (
                    place,
                    names.get(target_file).to_string(),
                    names.get(target_fn).to_string(),
                    target,
                    followed.is_some(),
                );
                let sum = canonical.jumps.entry(key).or_insert((0, 0));
                sum.0 = sum.0.wrapping_add(executed);
                sum.1 = sum.1.wrapping_add(followed.unwrap_or(0));
            }
        });
    }
    canonical
        .costs
        .retain(|_, costs| costs.iter().any(|&c| c != 0));
    canonical
}
