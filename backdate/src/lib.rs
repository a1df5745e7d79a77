//! The back-dating tree (seed 004, section 3): exact inclusive costs for
//! metrics that are only known after the fact, such as cache use, which is
//! known when a cache line is evicted, long after the call that loaded it may
//! have returned.
//!
//! A [`Forest`] holds one tree per thread and per running signal handler. A
//! node stands for a call (a call arc in the context of its parent node) and
//! lives as long as something may still charge it: while it is active (the
//! running function), while it has children, or while cache lines it loaded
//! are resident (its reference count). A charge ([`Forest::evict`]) adds to
//! the node's costs. When a node can go, it is pruned: its costs pass to its
//! parent and, through the sink, to the inclusive cost of its call arc. So at
//! the end every arc's inclusive cost holds exactly what was charged to nodes
//! in its subtree, however late the charges came.

use std::hash::Hash;

use rustc_hash::FxHashMap;
use slab::Slab;

/// A node of a [`Forest`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NodeId(usize);

impl NodeId {
    /// The node's number, to store it compactly (e.g. in a cache line's
    /// owner id).
    pub fn index(self) -> usize {
        self.0
    }

    /// The node numbered `index` (from [`NodeId::index`]); operations on a
    /// node that no longer exists do nothing.
    pub fn from_index(index: usize) -> NodeId {
        NodeId(index)
    }
}

/// Receives the costs of pruned nodes: their call arc and what was charged to
/// their subtree.
pub trait ArcSink<A> {
    /// `cost` is to be added to the inclusive cost of `arc`.
    fn add_inclusive(&mut self, arc: A, cost: &[u64]);
}

impl<A, F: FnMut(A, &[u64])> ArcSink<A> for F {
    fn add_inclusive(&mut self, arc: A, cost: &[u64]) {
        self(arc, cost)
    }
}

#[derive(Clone, Debug)]
struct Node<A> {
    parent: Option<usize>,
    /// The call arc the node stands for; `None` for a root.
    arc: Option<A>,
    children: FxHashMap<A, usize>,
    /// Resident cache lines this node loaded.
    references: u64,
    active: bool,
    cost: Vec<u64>,
}

/// Sizes of the forest over its life, for `-v` (the paper reports them).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Statistics {
    /// Nodes alive now.
    pub nodes: usize,
    /// The most nodes alive at once.
    pub max_nodes: usize,
    /// Nodes alive on average, sampled at every call and return.
    pub average_nodes: f64,
    /// Nodes ever created.
    pub created: u64,
}

/// The back-dating trees of one process, each cost a vector of `width`
/// metrics, each node tied to a call arc of type `A`.
#[derive(Clone, Debug)]
pub struct Forest<A> {
    nodes: Slab<Node<A>>,
    width: usize,
    /// Cost vectors of pruned nodes, for new ones (a call makes a node).
    spare_costs: Vec<Vec<u64>>,
    max_nodes: usize,
    samples: u64,
    sampled_nodes: u128,
    created: u64,
}

impl<A: Copy + Eq + Hash> Forest<A> {
    /// An empty forest of costs with `width` metrics.
    pub fn new(width: usize) -> Forest<A> {
        Forest {
            nodes: Slab::new(),
            width,
            spare_costs: Vec::new(),
            max_nodes: 0,
            samples: 0,
            sampled_nodes: 0,
            created: 0,
        }
    }

    /// A new tree (a thread starts, or a signal handler): its root is active.
    pub fn root(&mut self) -> NodeId {
        NodeId(self.insert(None, None))
    }

    fn insert(&mut self, parent: Option<usize>, arc: Option<A>) -> usize {
        self.created += 1;
        let cost = match self.spare_costs.pop() {
            Some(mut cost) => {
                cost.clear();
                cost.resize(self.width, 0);
                cost
            }
            None => vec![0; self.width],
        };
        let index = self.nodes.insert(Node {
            parent,
            arc,
            children: FxHashMap::default(),
            references: 0,
            active: true,
            cost,
        });
        self.max_nodes = self.max_nodes.max(self.nodes.len());
        index
    }

    fn sample(&mut self) {
        self.samples += 1;
        self.sampled_nodes += self.nodes.len() as u128;
    }

    /// The active node `from` calls along `arc`: the child for `arc` (made if
    /// it does not exist) becomes active. A stale `from` starts a new root.
    pub fn call(&mut self, from: NodeId, arc: A) -> NodeId {
        self.sample();
        let Some(parent) = self.nodes.get_mut(from.0) else {
            return self.root();
        };
        parent.active = false;
        if let Some(&child) = parent.children.get(&arc) {
            if let Some(node) = self.nodes.get_mut(child) {
                node.active = true;
                return NodeId(child);
            }
        }
        let child = self.insert(Some(from.0), Some(arc));
        if let Some(parent) = self.nodes.get_mut(from.0) {
            parent.children.insert(arc, child);
        }
        NodeId(child)
    }

    /// The call of `node` returns: its parent (if any) becomes active, and
    /// `node` is pruned if nothing can charge it any more.
    pub fn ret(&mut self, node: NodeId, sink: &mut impl ArcSink<A>) -> Option<NodeId> {
        self.sample();
        let parent = {
            let current = self.nodes.get_mut(node.0)?;
            current.active = false;
            current.parent
        };
        if let Some(parent) = parent.and_then(|p| self.nodes.get_mut(p)) {
            parent.active = true;
        }
        self.prune(node.0, sink);
        parent.map(NodeId)
    }

    /// A tree ends (its thread or signal handler did): its root is no longer
    /// active and goes when nothing can charge it.
    pub fn end(&mut self, root: NodeId, sink: &mut impl ArcSink<A>) {
        if let Some(node) = self.nodes.get_mut(root.0) {
            node.active = false;
        }
        self.prune(root.0, sink);
    }

    /// `node` loaded a cache line: it must live until the line is evicted.
    pub fn load(&mut self, node: NodeId) {
        if let Some(node) = self.nodes.get_mut(node.0) {
            node.references += 1;
        }
    }

    /// Adds `cost` to what `node` collected (a line it loaded was evicted).
    pub fn charge(&mut self, node: NodeId, cost: &[u64]) {
        if let Some(current) = self.nodes.get_mut(node.0) {
            for (total, add) in current.cost.iter_mut().zip(cost) {
                *total += add;
            }
        }
    }

    /// A line `node` loaded left the cache: once nothing else keeps the node,
    /// it is pruned.
    pub fn release(&mut self, node: NodeId, sink: &mut impl ArcSink<A>) {
        let Some(current) = self.nodes.get_mut(node.0) else {
            return;
        };
        current.references = current.references.saturating_sub(1);
        self.prune(node.0, sink);
    }

    /// [`Forest::charge`] then [`Forest::release`]: the usual eviction.
    pub fn evict(&mut self, node: NodeId, cost: &[u64], sink: &mut impl ArcSink<A>) {
        self.charge(node, cost);
        self.release(node, sink);
    }

    /// Removes `index` and then its ancestors while each is an inactive leaf
    /// with no resident lines, passing costs up and to the arcs.
    fn prune(&mut self, mut index: usize, sink: &mut impl ArcSink<A>) {
        loop {
            let prunable = self.nodes.get(index).is_some_and(|node| {
                !node.active && node.references == 0 && node.children.is_empty()
            });
            if !prunable {
                return;
            }
            let node = self.nodes.remove(index);
            if let Some(arc) = node.arc {
                if node.cost.iter().any(|&c| c != 0) {
                    sink.add_inclusive(arc, &node.cost);
                }
            }
            let Some(parent_index) = node.parent else {
                return;
            };
            let Some(parent) = self.nodes.get_mut(parent_index) else {
                return;
            };
            if let Some(arc) = node.arc {
                parent.children.remove(&arc);
            }
            for (total, add) in parent.cost.iter_mut().zip(&node.cost) {
                *total += add;
            }
            self.spare_costs.push(node.cost);
            index = parent_index;
        }
    }

    /// The forest's sizes so far.
    pub fn statistics(&self) -> Statistics {
        Statistics {
            nodes: self.nodes.len(),
            max_nodes: self.max_nodes,
            average_nodes: if self.samples == 0 {
                0.0
            } else {
                self.sampled_nodes as f64 / self.samples as f64
            },
            created: self.created,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Arcs = Vec<(&'static str, Vec<u64>)>;

    fn sink(arcs: &mut Arcs) -> impl FnMut(&'static str, &[u64]) + '_ {
        |arc, cost: &[u64]| arcs.push((arc, cost.to_vec()))
    }

    #[test]
    fn a_late_eviction_reaches_every_arc_on_the_loading_chain() {
        let mut forest = Forest::new(2);
        let mut arcs = Arcs::new();
        let main = forest.root();
        let f = forest.call(main, "main->f");
        let g = forest.call(f, "f->g");
        forest.load(g);
        assert_eq!(forest.ret(g, &mut sink(&mut arcs)), Some(f));
        assert_eq!(forest.ret(f, &mut sink(&mut arcs)), Some(main));
        // g's line is still resident: nothing is pruned yet.
        assert!(arcs.is_empty());
        assert_eq!(forest.statistics().nodes, 3);
        forest.evict(g, &[10, 3], &mut sink(&mut arcs));
        assert_eq!(
            arcs,
            vec![("f->g", vec![10, 3]), ("main->f", vec![10, 3])],
            "g's cost goes to both arcs of the chain that loaded the line"
        );
        assert_eq!(forest.statistics().nodes, 1, "only the active root is left");
    }

    #[test]
    fn charges_add_up_per_subtree_and_repeated_calls_share_a_node() {
        let mut forest = Forest::new(1);
        let mut arcs = Arcs::new();
        let main = forest.root();
        forest.load(main);
        let f = forest.call(main, "main->f");
        forest.load(f);
        forest.load(f);
        let g = forest.call(f, "f->g");
        forest.load(g);
        forest.ret(g, &mut sink(&mut arcs));
        // f calls g again while g's first node still lives: same node.
        let g_again = forest.call(f, "f->g");
        assert_eq!(g_again, g);
        forest.ret(g_again, &mut sink(&mut arcs));
        forest.ret(f, &mut sink(&mut arcs));
        forest.evict(f, &[1], &mut sink(&mut arcs));
        forest.evict(g, &[4], &mut sink(&mut arcs));
        assert_eq!(arcs, vec![("f->g", vec![4])]);
        forest.evict(f, &[2], &mut sink(&mut arcs));
        assert_eq!(arcs, vec![("f->g", vec![4]), ("main->f", vec![7])]);
        // The root is active: it keeps its own charges.
        forest.evict(main, &[100], &mut sink(&mut arcs));
        assert_eq!(arcs.len(), 2);
        forest.end(main, &mut sink(&mut arcs));
        assert_eq!(forest.statistics().nodes, 0);
    }

    #[test]
    fn an_active_node_and_its_ancestors_are_never_pruned() {
        let mut forest = Forest::new(1);
        let mut arcs = Arcs::new();
        let main = forest.root();
        let f = forest.call(main, "main->f");
        forest.load(f);
        let g = forest.call(f, "f->g");
        forest.evict(f, &[5], &mut sink(&mut arcs));
        assert!(arcs.is_empty(), "f has an active child");
        forest.ret(g, &mut sink(&mut arcs));
        assert_eq!(arcs, Vec::<(&str, Vec<u64>)>::new(), "f is active again");
        forest.ret(f, &mut sink(&mut arcs));
        assert_eq!(arcs, vec![("main->f", vec![5])]);
        let statistics = forest.statistics();
        assert_eq!(statistics.max_nodes, 3);
        assert_eq!(statistics.created, 3);
        assert!(statistics.average_nodes > 1.0);
    }

    #[test]
    fn a_signal_handler_tree_is_separate() {
        let mut forest = Forest::new(1);
        let mut arcs = Arcs::new();
        let main = forest.root();
        let handler = forest.root();
        let h = forest.call(handler, "handler->h");
        forest.load(h);
        forest.ret(h, &mut sink(&mut arcs));
        forest.end(handler, &mut sink(&mut arcs));
        forest.evict(h, &[3], &mut sink(&mut arcs));
        assert_eq!(arcs, vec![("handler->h", vec![3])]);
        assert_eq!(forest.statistics().nodes, 1, "main's root is still active");
        forest.end(main, &mut sink(&mut arcs));
        assert_eq!(forest.statistics().nodes, 0);
    }
}
