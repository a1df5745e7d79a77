//! Function contexts: a function and, with `--separate-callers=N`, up to N of
//! its callers. Each distinct context is a function of its own in the profile
//! (`fn'caller'caller2`), and with recursion levels `fn'2'caller`.

use indexmap::IndexSet;
use rustc_hash::FxBuildHasher;

use crate::functions::{FnId, Functions};

/// The number of a context (its index in [`Contexts`]).
pub(crate) type CxtId = u32;

/// Where costs are charged: a context at a recursion level (Callgrind's BBCC
/// without the block).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Centre {
    /// The context.
    pub cxt: CxtId,
    /// The recursion level minus one (`fn'2` is 1).
    pub rec: u32,
}

/// The contexts of a process, interned.
#[derive(Clone, Debug, Default)]
pub(crate) struct Contexts {
    contexts: IndexSet<Vec<FnId>, FxBuildHasher>,
    /// The chain being looked up (kept, so a known one allocates nothing).
    chain: Vec<FnId>,
    /// The context of each function alone, by function number, once
    /// known ([`NO_CONTEXT`] before): most contexts are (without
    /// `--separate-callers`, all).
    alone: Vec<CxtId>,
}

/// No context yet, in [`Contexts`]'s `alone`.
const NO_CONTEXT: CxtId = CxtId::MAX;

impl Contexts {
    /// How many contexts are known.
    pub fn len(&self) -> usize {
        self.contexts.len()
    }

    /// The context of the function stack `stack` (innermost last; `None`
    /// separates a signal handler's functions from the interrupted ones):
    /// the innermost function and up to `callers` of its callers.
    pub fn of_stack(&mut self, stack: &[Option<FnId>], callers: u32) -> CxtId {
        let alone = callers == 0 || matches!(stack.iter().rev().nth(1), None | Some(None));
        if let (true, Some(&Some(function))) = (alone, stack.last()) {
            return self.of_function(function);
        }
        self.chain.clear();
        self.chain.extend(
            stack
                .iter()
                .rev()
                .take(callers as usize + 1)
                .map_while(|function| *function),
        );
        if let Some(index) = self.contexts.get_index_of(self.chain.as_slice()) {
            return index as CxtId;
        }
        self.contexts.insert_full(self.chain.clone()).0 as CxtId
    }

    /// The context of `function` alone.
    fn of_function(&mut self, function: FnId) -> CxtId {
        let index = function as usize;
        if let Some(&cxt) = self.alone.get(index).filter(|&&cxt| cxt != NO_CONTEXT) {
            return cxt;
        }
        let cxt = match self.contexts.get_index_of([function].as_slice()) {
            Some(cxt) => cxt as CxtId,
            None => self.contexts.insert_full(vec![function]).0 as CxtId,
        };
        if self.alone.len() <= index {
            self.alone.resize(index + 1, NO_CONTEXT);
        }
        self.alone[index] = cxt;
        cxt
    }

    /// The innermost function of context `cxt`.
    pub fn function(&self, cxt: CxtId) -> FnId {
        self.contexts
            .get_index(cxt as usize)
            .and_then(|chain| chain.first().copied())
            .unwrap_or_default()
    }

    /// The name Callgrind writes for `centre`: the function's name, `'N` for
    /// recursion level N > 1, then `'caller` for each caller in the context.
    pub fn name(&self, centre: Centre, functions: &Functions) -> String {
        let Some(chain) = self.contexts.get_index(centre.cxt as usize) else {
            return String::new();
        };
        let mut name = String::new();
        for (i, &function) in chain.iter().enumerate() {
            if i > 0 {
                name.push('\'');
            }
            name.push_str(&functions.get(function).name);
            if i == 0 && centre.rec > 0 {
                name.push_str(&format!("'{}", centre.rec + 1));
            }
        }
        name
    }
}
