//! The names of frames: the function's name, and where the profile has several
//! functions of that name, where each one is (see [`Frame::name`]).

use std::collections::HashMap;

use cgx_formats::{FunctionId, NameId, Profile};

use super::graph::Graph;
use super::Frame;

/// The frames of the functions (node numbers of `graph`) in `used`, in order.
pub(super) fn frames(profile: &Profile, graph: &Graph, used: &[usize]) -> Vec<Frame> {
    let name = |id: NameId| profile.names.get(id).to_string();
    let base = |id: NameId| {
        let object = profile.names.get(id);
        object.rsplit('/').next().unwrap_or(object)
    };
    // The functions of each name, to tell apart those that share one.
    let mut namesakes: HashMap<NameId, Vec<&FunctionId>> = HashMap::new();
    for function in graph.functions.keys() {
        namesakes.entry(function.name).or_default().push(function);
    }
    used.iter()
        .filter_map(|&node| graph.functions.get_index(node))
        .map(|(function, _)| {
            let mut shown = name(function.name);
            let same_name = namesakes.get(&function.name).map_or(&[][..], Vec::as_slice);
            if same_name.len() > 1 {
                let object = base(function.object);
                let object_tells = !object.is_empty()
                    && same_name
                        .iter()
                        .filter(|other| base(other.object) == object)
                        .count()
                        == 1;
                let file = profile.names.get(function.file);
                let place = if object_tells || file.is_empty() {
                    object.to_string()
                } else if object.is_empty() {
                    file.to_string()
                } else {
                    format!("{object}:{file}")
                };
                if !place.is_empty() {
                    shown = format!("{shown} [{place}]");
                }
            }
            Frame {
                name: shown,
                function: name(function.name),
                file: name(function.file),
                object: name(function.object),
            }
        })
        .collect()
}
