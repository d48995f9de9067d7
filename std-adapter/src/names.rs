//! Lookup of names (metadata keys, tensor names) by hash, without a second copy of each name.
//!
//! A `HashMap<String, usize>` would store every name twice (once in the entry, once in the map),
//! which dominates memory for headers made of many small keys. Here the map holds only the name's
//! 64-bit hash and the position of the first entry with that hash; names are compared against the
//! entries themselves. A different name with an already used hash (rare: SipHash with a random key)
//! goes to a short overflow list that is searched linearly.

use std::collections::hash_map::{Entry, RandomState};
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};

/// Passes an already computed 64-bit hash through.
#[derive(Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used; fold anything else in so the hasher stays correct.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// Whether an inserted name was new.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Inserted {
    New,
    Duplicate,
}

#[derive(Default, Clone, Debug)]
pub(crate) struct NameIndex {
    state: RandomState,
    first: HashMap<u64, usize, BuildHasherDefault<PassThrough>>,
    /// Positions of names whose hash was already taken by another name, in file order.
    collided: Vec<usize>,
}

impl NameIndex {
    /// Records `name`, found at position `pos`; `name_at` gives the name at an earlier position.
    pub(crate) fn insert<'a>(
        &mut self,
        name: &str,
        pos: usize,
        name_at: impl Fn(usize) -> Option<&'a str>,
    ) -> Inserted {
        let hash = self.state.hash_one(name);
        match self.first.entry(hash) {
            Entry::Vacant(v) => {
                v.insert(pos);
                Inserted::New
            }
            Entry::Occupied(o) => {
                let same = |p: usize| name_at(p) == Some(name);
                if same(*o.get()) || self.collided.iter().any(|&p| same(p)) {
                    Inserted::Duplicate
                } else {
                    self.collided.push(pos);
                    Inserted::New
                }
            }
        }
    }

    /// Position of the first entry called `name`.
    pub(crate) fn find<'a>(
        &self,
        name: &str,
        name_at: impl Fn(usize) -> Option<&'a str>,
    ) -> Option<usize> {
        let &pos = self.first.get(&self.state.hash_one(name))?;
        if name_at(pos) == Some(name) {
            return Some(pos);
        }
        self.collided
            .iter()
            .copied()
            .find(|&p| name_at(p) == Some(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_first_occurrences_and_flags_duplicates() {
        let names = ["a", "b", "a", "c", "b"];
        let at = |i: usize| names.get(i).copied();
        let mut index = NameIndex::default();
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
    fn names_sharing_a_hash_are_told_apart() {
        // Force every name onto one hash by comparing through a map whose hash slot is preset.
        let names = ["x", "y", "x", "z", "y"];
        let at = |i: usize| names.get(i).copied();
        let mut index = NameIndex::default();
        let shared = index.state.hash_one("x");
        // Occupy "y"'s and "z"'s hashes with position 0 ("x"), as a collision would.
        index.first.insert(index.state.hash_one("y"), 0);
        index.first.insert(index.state.hash_one("z"), 0);
        index.first.insert(shared, 0);
        let inserted: Vec<_> = names
            .iter()
            .enumerate()
            .skip(1)
            .map(|(i, n)| index.insert(n, i, at))
            .collect();
        use Inserted::*;
        assert_eq!(inserted, [New, Duplicate, New, Duplicate]);
        assert_eq!(index.collided, [1, 3]);
        assert_eq!(index.find("y", at), Some(1));
        assert_eq!(index.find("z", at), Some(3));
        assert_eq!(index.find("x", at), Some(0));
    }
}
