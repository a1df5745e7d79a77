//! Interned names: every object, file and function name is stored once per profile.

use indexmap::IndexSet;
use rustc_hash::FxBuildHasher;

/// The id of a name in one [`Names`] table. Ids of different tables do not mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NameId(u32);

impl NameId {
    /// The position of the name in its table, in first-seen order.
    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// Rebuilds an id from [`NameId::index`]; only for indices that came from it.
    pub(crate) fn from_index(index: usize) -> NameId {
        NameId(index as u32)
    }
}

/// The table holds `u32::MAX` names; a profile with more cannot be represented.
#[derive(Clone, Copy, Debug, thiserror::Error)]
#[error("more than 4294967295 distinct names")]
pub struct TooManyNames;

/// A table of interned names, kept in first-seen order.
#[derive(Clone, Debug, Default)]
pub struct Names {
    set: IndexSet<Box<str>, FxBuildHasher>,
}

impl Names {
    /// Returns the id of `name`, adding it to the table if it is new.
    pub fn intern(&mut self, name: &str) -> Result<NameId, TooManyNames> {
        let index = match self.set.get_index_of(name) {
            Some(index) => index,
            None => self.set.insert_full(name.into()).0,
        };
        u32::try_from(index).map(NameId).map_err(|_| TooManyNames)
    }

    /// The id of `name` if the table has it.
    pub fn find(&self, name: &str) -> Option<NameId> {
        self.set
            .get_index_of(name)
            .and_then(|index| u32::try_from(index).ok())
            .map(NameId)
    }

    /// The name behind `id`. Panics if `id` comes from another table.
    pub fn get(&self, id: NameId) -> &str {
        &self.set[id.index()]
    }

    /// How many distinct names the table holds.
    pub fn len(&self) -> usize {
        self.set.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }
}
