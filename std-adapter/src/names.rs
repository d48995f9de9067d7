//! Names of metadata keys and tensors: lookup by hash without a second copy of each name
//! ([`NameIndex`]).
//!
//! A `HashMap<String, usize>` would store every name twice (once in the entry, once in the map),
//! which dominates memory for headers made of many small keys. Here a [`hashbrown::HashTable`]
//! holds only positions of entries; the names it hashes and compares are read from the entries
//! themselves. Names are hashed with std's SipHash under a random key, so a hostile file cannot
//! choose names that all land in one bucket.

use hashbrown::hash_table::Entry;
use hashbrown::HashTable;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

/// Whether an inserted name was new.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Inserted {
    New,
    Duplicate,
}

/// Positions of the first entry of each name; `S` hashes the names.
#[derive(Default, Clone, Debug)]
pub(crate) struct NameIndex<S = RandomState> {
    state: S,
    first: HashTable<usize>,
}

impl<S: BuildHasher> NameIndex<S> {
    /// Records `name`, found at position `pos`; `name_at` gives the name at an earlier position.
    pub(crate) fn insert<'a>(
        &mut self,
        name: &str,
        pos: usize,
        name_at: impl Fn(usize) -> Option<&'a str>,
    ) -> Inserted {
        let state = &self.state;
        // Every stored position has a name: `name_at` answers for all earlier positions.
        let rehash = |&p: &usize| state.hash_one(name_at(p).unwrap_or_default());
        match self
            .first
            .entry(state.hash_one(name), |&p| name_at(p) == Some(name), rehash)
        {
            Entry::Occupied(_) => Inserted::Duplicate,
            Entry::Vacant(v) => {
                v.insert(pos);
                Inserted::New
            }
        }
    }

    /// Position of the first entry called `name`.
    pub(crate) fn find<'a>(
        &self,
        name: &str,
        name_at: impl Fn(usize) -> Option<&'a str>,
    ) -> Option<usize> {
        self.first
            .find(self.state.hash_one(name), |&p| name_at(p) == Some(name))
            .copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasherDefault, Hasher};

    fn first_occurrences_and_duplicates<S: BuildHasher + Default>() {
        let names = ["a", "b", "a", "c", "b"];
        let at = |i: usize| names.get(i).copied();
        let mut index = NameIndex::<S>::default();
        let inserted: Vec<_> = names
            .iter()
            .enumerate()
            .map(|(i, n)| index.insert(n, i, at))
            .collect();
        use Inserted::*;
        assert_eq!(inserted, [New, New, Duplicate, New, Duplicate]);
        assert_eq!(index.find("a", at), Some(0));
        assert_eq!(index.find("b", at), Some(1));
        assert_eq!(index.find("c", at), Some(3));
        assert_eq!(index.find("d", at), None);
    }

    #[test]
    fn finds_first_occurrences_and_flags_duplicates() {
        first_occurrences_and_duplicates::<RandomState>();
    }

    /// Hashes every name to 0: every name collides with every other.
    #[derive(Default)]
    struct Constant;

    impl Hasher for Constant {
        fn finish(&self) -> u64 {
            0
        }
        fn write(&mut self, _: &[u8]) {}
    }

    #[test]
    fn names_sharing_a_hash_are_told_apart() {
        first_occurrences_and_duplicates::<BuildHasherDefault<Constant>>();
    }

    #[test]
    fn many_names_survive_the_table_growing() {
        let names: Vec<String> = (0..1000).map(|i| format!("blk.{i}.weight")).collect();
        let at = |i: usize| names.get(i).map(String::as_str);
        let mut index = NameIndex::<RandomState>::default();
        for (i, n) in names.iter().enumerate() {
            assert_eq!(index.insert(n, i, at), Inserted::New);
        }
        for (i, n) in names.iter().enumerate() {
            assert_eq!(index.find(n, at), Some(i));
            assert_eq!(index.insert(n, i + 1000, at), Inserted::Duplicate);
        }
    }
}
