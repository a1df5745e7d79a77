//! The containers aggregation uses: interned names and tables of cost vectors.

use std::hash::Hash;

use indexmap::IndexSet;
use rustc_hash::{FxBuildHasher, FxHashMap};

/// Names interned across all profiles of a report; ids are `u32`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Interner {
    set: IndexSet<Box<str>, FxBuildHasher>,
}

impl Interner {
    /// The id of `name`, added if new.
    pub fn intern(&mut self, name: &str) -> u32 {
        let index = match self.set.get_index_of(name) {
            Some(index) => index,
            None => self.set.insert_full(name.into()).0,
        };
        // A report never holds more than u32::MAX names: the profiles' own name
        // tables are limited to that, per profile.
        index as u32
    }

    /// The name with id `id`.
    pub fn get(&self, id: u32) -> &str {
        self.set.get_index(id as usize).map_or("", |name| name)
    }

    /// The id of `name`, if interned.
    pub fn find(&self, name: &str) -> Option<u32> {
        self.set.get_index_of(name).map(|index| index as u32)
    }

    /// How many names there are.
    pub fn len(&self) -> usize {
        self.set.len()
    }
}

/// Cost vectors (one signed count per event) by key, stored in one flat buffer.
#[derive(Clone, Debug)]
pub(crate) struct CostTable<K> {
    index: FxHashMap<K, u32>,
    keys: Vec<K>,
    costs: Vec<i64>,
    width: usize,
}

impl<K: Copy + Eq + Hash> CostTable<K> {
    /// An empty table of vectors of `width` counts.
    pub fn new(width: usize) -> CostTable<K> {
        CostTable {
            index: FxHashMap::default(),
            keys: Vec::new(),
            costs: Vec::new(),
            width,
        }
    }

    /// The slot of `key`, added with zero costs if new.
    pub fn slot(&mut self, key: K) -> u32 {
        let next = self.keys.len() as u32;
        let slot = *self.index.entry(key).or_insert(next);
        if slot == next {
            self.keys.push(key);
            self.costs.resize(self.costs.len() + self.width, 0);
        }
        slot
    }

    /// Adds `sign` × `costs` (unsigned, as profiles hold them) to the vector in `slot`.
    pub fn add_unsigned(&mut self, slot: u32, costs: &[u64], sign: i64) {
        add_unsigned(self.get_mut(slot), costs, sign);
    }

    /// Adds `costs` to the vector in `slot`.
    pub fn add(&mut self, slot: u32, costs: &[i64]) {
        add(self.get_mut(slot), costs);
    }

    /// The vector in `slot`.
    pub fn get(&self, slot: u32) -> &[i64] {
        let start = slot as usize * self.width;
        &self.costs[start..start + self.width]
    }

    fn get_mut(&mut self, slot: u32) -> &mut [i64] {
        let start = slot as usize * self.width;
        &mut self.costs[start..start + self.width]
    }

    /// The vector of `key`, if the table has it.
    pub fn lookup(&self, key: &K) -> Option<&[i64]> {
        self.index.get(key).map(|&slot| self.get(slot))
    }

    /// How many counts each vector has.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Every key with its slot, in the order keys were added.
    pub fn slots(&self) -> impl Iterator<Item = (K, u32)> + '_ {
        self.keys
            .iter()
            .enumerate()
            .map(|(slot, &key)| (key, slot as u32))
    }

    /// Every key with its vector, in the order keys were added.
    pub fn iter(&self) -> impl Iterator<Item = (K, &[i64])> + '_ {
        self.keys
            .iter()
            .zip(self.costs.chunks_exact(self.width.max(1)))
            .map(|(&key, costs)| (key, &costs[..self.width]))
    }
}

/// Adds `costs` to `sum`, column by column (wrapping, as counters do).
pub(crate) fn add(sum: &mut [i64], costs: &[i64]) {
    for (total, cost) in sum.iter_mut().zip(costs) {
        *total = total.wrapping_add(*cost);
    }
}

/// Adds `sign` × `costs` to `sum`; counts above `i64::MAX` wrap.
pub(crate) fn add_unsigned(sum: &mut [i64], costs: &[u64], sign: i64) {
    for (total, &cost) in sum.iter_mut().zip(costs) {
        *total = total.wrapping_add((cost as i64).wrapping_mul(sign));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_accumulate() {
        let mut table = CostTable::new(2);
        let a = table.slot("a");
        let b = table.slot("b");
        assert_eq!(table.slot("a"), a);
        table.add_unsigned(a, &[1, 2], 1);
        table.add_unsigned(a, &[10, 20], -1);
        table.add(b, &[5, 5]);
        assert_eq!(table.get(a), [-9, -18]);
        assert_eq!(table.lookup(&"b"), Some(&[5, 5][..]));
        assert_eq!(table.lookup(&"c"), None);
        let all: Vec<_> = table.iter().map(|(k, c)| (k, c.to_vec())).collect();
        assert_eq!(all, [("a", vec![-9, -18]), ("b", vec![5, 5])]);
    }

    #[test]
    fn interned_names_keep_their_ids() {
        let mut names = Interner::default();
        let x = names.intern("x");
        let y = names.intern("y");
        assert_eq!(names.intern("x"), x);
        assert_eq!((names.get(x), names.get(y), names.len()), ("x", "y", 2));
        assert_eq!(names.find("y"), Some(y));
    }
}
