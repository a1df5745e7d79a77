//! The paths the walk charges, kept as a tree of parent links: a path is a node,
//! its function and the node of the path one call further in. Nodes are made only
//! for paths that are charged, sharing what they have in common with the path
//! charged before, so a charge costs what is new in its path.

/// A node's parent when it has none.
const TOP: usize = usize::MAX;

/// The charged paths.
#[derive(Default)]
pub(super) struct CallerTree {
    /// Each node's function and parent (the path without its outermost function).
    nodes: Vec<(usize, usize)>,
    /// Charged nodes and the cost charged; a path may be charged more than once.
    charges: Vec<(usize, u64)>,
}

/// The walk's current path: its functions, innermost first, and the node of each
/// prefix that has one.
#[derive(Default)]
pub(super) struct Path {
    functions: Vec<usize>,
    nodes: Vec<usize>,
}

impl Path {
    /// Adds `function` as the outermost caller.
    pub fn push(&mut self, function: usize) {
        self.functions.push(function);
        self.nodes.push(TOP);
    }

    /// Removes the outermost caller.
    pub fn pop(&mut self) {
        self.functions.pop();
        self.nodes.pop();
    }

    /// How many functions the path has.
    pub fn len(&self) -> usize {
        self.functions.len()
    }
}

impl CallerTree {
    /// Charges `amount` to `path`, adding nodes for the prefixes without one.
    pub fn charge(&mut self, path: &mut Path, amount: u64) {
        // Prefixes with nodes come first: find where they end.
        let known = path.nodes.iter().rposition(|&node| node != TOP);
        let mut parent = known.map_or(TOP, |index| path.nodes[index]);
        let start = known.map_or(0, |index| index + 1);
        for index in start..path.functions.len() {
            self.nodes.push((path.functions[index], parent));
            parent = self.nodes.len() - 1;
            path.nodes[index] = parent;
        }
        if parent != TOP {
            self.charges.push((parent, amount));
        }
    }

    /// The charged paths: their functions, outermost caller first, and the cost
    /// (the same path may come more than once).
    pub fn stacks(&self) -> impl Iterator<Item = (Vec<usize>, u64)> + '_ {
        self.charges.iter().map(|&(mut node, amount)| {
            let mut functions = Vec::new();
            while let Some(&(function, parent)) = self.nodes.get(node) {
                functions.push(function);
                node = parent;
            }
            (functions, amount)
        })
    }
}
