//! The walk from each function up through its callers that shares its self cost
//! among the paths reaching it (the rules are in the documentation of
//! [`crate::stacks`]).

use std::collections::VecDeque;

use super::graph::{Arc, Graph};
use super::tree::{CallerTree, Path};
use super::MAX_DEPTH;

/// Shares below the total divided by this follow only the heaviest caller.
const FINE_SPLIT_DIVISOR: u64 = 100_000;

/// How many steps the walk takes before it stops splitting shares.
const STEP_BUDGET: u64 = 20_000_000;

/// Charges the self cost of every function of `graph` to the paths that reach it.
pub(super) fn walk(graph: &Graph) -> CallerTree {
    let mut walker = Walker {
        graph,
        escapes: escapes(graph),
        path: Path::default(),
        on_path: vec![false; graph.nodes.len()],
        fine_split: (graph.total / FINE_SPLIT_DIVISOR).max(1),
        budget: STEP_BUDGET,
        tree: CallerTree::default(),
    };
    for (node, function) in graph.nodes.iter().enumerate() {
        if function.self_cost > 0 {
            walker.enter(node);
            walker.climb(node, function.self_cost);
            walker.leave(node);
        }
    }
    walker.tree
}

/// Walks up from each function through its callers, charging shares to paths.
struct Walker<'g> {
    graph: &'g Graph,
    /// Each function's first caller on a shortest way up to a function without
    /// callers; `None` for those and for functions no such function reaches.
    escapes: Vec<Option<usize>>,
    /// The path being built, innermost function first.
    path: Path,
    on_path: Vec<bool>,
    fine_split: u64,
    /// Steps left before the walk stops splitting shares.
    budget: u64,
    tree: CallerTree,
}

impl Walker<'_> {
    fn enter(&mut self, node: usize) {
        self.path.push(node);
        self.on_path[node] = true;
    }

    fn leave(&mut self, node: usize) {
        self.path.pop();
        self.on_path[node] = false;
    }

    /// `node` is the outermost function of the path so far: shares `amount` among
    /// its callers that are not on the path; charges it to the path if `node` has
    /// no callers, or to the path extended by the shortest way up if all of its
    /// callers are on the path.
    fn climb(&mut self, node: usize, amount: u64) {
        self.budget = self.budget.saturating_sub(1);
        let graph = self.graph;
        let callers = &graph.nodes[node].callers;
        if callers.is_empty() || self.path.len() >= MAX_DEPTH {
            self.tree.charge(&mut self.path, amount);
            return;
        }
        let candidates: Vec<(usize, Arc)> = callers
            .iter()
            .filter(|(caller, _)| !self.on_path[**caller])
            .map(|(&caller, &arc)| (caller, arc))
            .collect();
        match candidates[..] {
            [] => self.escape(node, amount),
            [(caller, _)] => {
                self.enter(caller);
                self.climb(caller, amount);
                self.leave(caller);
            }
            _ => {
                let weights = weights_of(&candidates);
                let shares = if amount < self.fine_split || self.budget == 0 {
                    heaviest(amount, &weights)
                } else {
                    apportion(amount, &weights)
                };
                for ((caller, _), share) in candidates.into_iter().zip(shares) {
                    if share > 0 {
                        self.enter(caller);
                        self.climb(caller, share);
                        self.leave(caller);
                    }
                }
            }
        }
    }

    /// Charges `amount` to the path extended from `node` by the shortest way up,
    /// which may pass functions on the path again (as recursion does); to the
    /// path as it is if no way up exists.
    fn escape(&mut self, node: usize, amount: u64) {
        let depth = self.path.len();
        let mut at = node;
        while let Some(caller) = self.escapes[at] {
            if self.path.len() >= MAX_DEPTH {
                break;
            }
            self.path.push(caller);
            at = caller;
        }
        self.tree.charge(&mut self.path, amount);
        while self.path.len() > depth {
            self.path.pop();
        }
    }
}

/// Each function's first caller on a shortest way up to a function without
/// callers (the heaviest arc among the callers that are that close), found by a
/// breadth-first search down from the functions without callers.
fn escapes(graph: &Graph) -> Vec<Option<usize>> {
    let count = graph.nodes.len();
    let mut callees: Vec<Vec<usize>> = vec![Vec::new(); count];
    for (callee, node) in graph.nodes.iter().enumerate() {
        for &caller in node.callers.keys() {
            callees[caller].push(callee);
        }
    }
    let mut distance: Vec<Option<usize>> = vec![None; count];
    let mut queue: VecDeque<usize> = VecDeque::new();
    for (index, node) in graph.nodes.iter().enumerate() {
        if node.callers.is_empty() {
            distance[index] = Some(0);
            queue.push_back(index);
        }
    }
    while let Some(node) = queue.pop_front() {
        let next = distance[node].map(|d| d + 1);
        for &callee in &callees[node] {
            if distance[callee].is_none() {
                distance[callee] = next;
                queue.push_back(callee);
            }
        }
    }
    graph
        .nodes
        .iter()
        .enumerate()
        .map(|(index, node)| {
            let closer = distance[index]?.checked_sub(1)?;
            node.callers
                .iter()
                .filter(|(caller, _)| distance[**caller] == Some(closer))
                .fold(
                    None,
                    |best: Option<(usize, u64)>, (&caller, arc)| match best {
                        Some((_, weight)) if weight >= arc.inclusive => best,
                        _ => Some((caller, arc.inclusive)),
                    },
                )
                .map(|(caller, _)| caller)
        })
        .collect()
}

/// The weights of the callers: the inclusive costs of their arcs, or where all
/// are zero the call counts, or where those are zero too, equal weights.
fn weights_of(candidates: &[(usize, Arc)]) -> Vec<u64> {
    let inclusive: Vec<u64> = candidates.iter().map(|(_, arc)| arc.inclusive).collect();
    if inclusive.iter().any(|&w| w > 0) {
        return inclusive;
    }
    let counts: Vec<u64> = candidates.iter().map(|(_, arc)| arc.count).collect();
    if counts.iter().any(|&w| w > 0) {
        return counts;
    }
    vec![1; candidates.len()]
}

/// Splits `amount` into whole shares proportional to `weights` (not all zero),
/// adding up exactly to `amount`: each gets the floor of its exact share, and the
/// remainder goes one each to the largest fractional parts (the first on ties).
pub(super) fn apportion(amount: u64, weights: &[u64]) -> Vec<u64> {
    let sum: u128 = weights.iter().map(|&w| u128::from(w)).sum();
    if sum == 0 {
        return vec![0; weights.len()];
    }
    let mut shares = Vec::with_capacity(weights.len());
    let mut remainders = Vec::with_capacity(weights.len());
    let mut given: u128 = 0;
    for (index, &weight) in weights.iter().enumerate() {
        let exact = u128::from(amount) * u128::from(weight);
        let share = exact / sum;
        given += share;
        // share <= amount, so it fits.
        shares.push(u64::try_from(share).unwrap_or(u64::MAX));
        remainders.push((exact % sum, index));
    }
    // The floors lose less than one per share, so the rest is below their number.
    let rest = (u128::from(amount) - given) as usize;
    remainders.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for &(_, index) in remainders.iter().take(rest) {
        shares[index] += 1;
    }
    shares
}

/// All of `amount` to the largest weight (the first on ties).
fn heaviest(amount: u64, weights: &[u64]) -> Vec<u64> {
    let mut best = 0;
    for (index, &weight) in weights.iter().enumerate() {
        if weight > weights[best] {
            best = index;
        }
    }
    let mut shares = vec![0; weights.len()];
    if let Some(share) = shares.get_mut(best) {
        *share = amount;
    }
    shares
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apportion_is_exact_and_proportional() {
        assert_eq!(apportion(10, &[1, 1, 1]), vec![4, 3, 3]);
        assert_eq!(apportion(10, &[0, 5, 5]), vec![0, 5, 5]);
        assert_eq!(apportion(7, &[1, 2, 4]), vec![1, 2, 4]);
        assert_eq!(apportion(1, &[3, 1]), vec![1, 0]);
        let big = apportion(u64::MAX, &[u64::MAX, 1, u64::MAX]);
        assert_eq!(
            big.iter().map(|&s| u128::from(s)).sum::<u128>(),
            u128::from(u64::MAX)
        );
    }
}
