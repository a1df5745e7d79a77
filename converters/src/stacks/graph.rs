//! The call graph of one event: self costs and caller arcs of every function,
//! all parts added up.

use cgx_formats::{FunctionId, Profile, Record};
use indexmap::IndexMap;

use super::StacksError;

/// Self costs and caller arcs of every function, for one event.
pub(super) struct Graph {
    /// The functions, numbered by their index (the node number).
    pub functions: IndexMap<FunctionId, ()>,
    /// The nodes, one per function.
    pub nodes: Vec<Node>,
    /// The sum of the self costs.
    pub total: u64,
}

/// One function.
#[derive(Default)]
pub(super) struct Node {
    /// Its self cost.
    pub self_cost: u64,
    /// Callers (node numbers) and the arcs from them, in first-seen order.
    pub callers: IndexMap<usize, Arc>,
}

/// The calls from one caller to one callee, added up.
#[derive(Clone, Copy, Default)]
pub(super) struct Arc {
    /// Their inclusive cost.
    pub inclusive: u64,
    /// How many calls.
    pub count: u64,
}

impl Graph {
    /// The graph of `event`, which every part must have.
    pub fn of(profile: &Profile, event: &str) -> Result<Graph, StacksError> {
        let mut graph = Graph {
            functions: IndexMap::new(),
            nodes: Vec::new(),
            total: 0,
        };
        for (index, part) in profile.parts.iter().enumerate() {
            let column = part
                .events
                .index_of(event)
                .ok_or_else(|| StacksError::MissingInPart {
                    part: index + 1,
                    event: event.to_string(),
                    available: part.events.names.clone(),
                })?;
            let events = part.events.len();
            for (function, records) in part.functions() {
                let node = graph.node(function);
                records.for_each(events, |record| match record {
                    Record::Cost { costs, .. } => {
                        let cost = costs.get(column).copied().unwrap_or(0);
                        let entry = &mut graph.nodes[node].self_cost;
                        *entry = entry.saturating_add(cost);
                        graph.total = graph.total.saturating_add(cost);
                    }
                    Record::Call {
                        callee,
                        count,
                        inclusive,
                        ..
                    } => {
                        let callee = graph.node(callee);
                        // A function calling itself adds nothing to its stacks.
                        if callee != node {
                            let arc = graph.nodes[callee].callers.entry(node).or_default();
                            let cost = inclusive.get(column).copied().unwrap_or(0);
                            arc.inclusive = arc.inclusive.saturating_add(cost);
                            arc.count = arc.count.saturating_add(count);
                        }
                    }
                    Record::Jump { .. } => {}
                });
            }
        }
        Ok(graph)
    }

    fn node(&mut self, function: FunctionId) -> usize {
        let (index, added) = self.functions.insert_full(function, ());
        if added.is_none() && index == self.nodes.len() {
            self.nodes.push(Node::default());
        }
        index
    }
}
