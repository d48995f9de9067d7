//! Records the metadata keys and tensors a program asks for by name, from any driver's events,
//! without a heap: capacities are const generics ([`heapless::Vec`]).
//!
//! A name that does not fit would be silently "absent", so it cannot happen unnoticed: lists known
//! at compile time go through [`Catalog::of`], whose array lengths are the capacities (a mismatch
//! does not compile), and lists built at run time through [`Catalog::new`], which refuses a list
//! longer than its capacity.

use super::event::{Event, TensorInfo};
use super::limits::MAX_DIMS_CAPACITY;
use super::value::{Scalar, ValueType};
use crate::error::Field;
use crate::ggml_type::GgmlType;

/// A wanted key, as found.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FoundKey {
    /// The value's type.
    pub value_type: ValueType,
    /// The value, if it is a scalar.
    pub scalar: Option<Scalar>,
    /// Absolute offset of the value's encoding (for a string: its length prefix), so a program
    /// holding the file in memory can read a string or array in place.
    pub value_offset: u64,
    /// For a string, its length; for an array, its element count.
    pub len: u64,
    /// For an array, its element type.
    pub element_type: Option<ValueType>,
}

/// A wanted tensor, as found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FoundTensor {
    /// Element type.
    pub ggml_type: GgmlType,
    /// Number of dimensions.
    pub n_dims: u32,
    /// Dimensions as stored (fastest-varying first).
    pub ne: [u64; MAX_DIMS_CAPACITY],
    /// Offset relative to the data section.
    pub offset: u64,
    /// Size in bytes.
    pub bytes: u64,
}

impl From<&TensorInfo<'_>> for FoundTensor {
    fn from(t: &TensorInfo<'_>) -> Self {
        Self {
            ggml_type: t.ggml_type,
            n_dims: t.n_dims,
            ne: t.ne,
            offset: t.offset,
            bytes: t.bytes,
        }
    }
}

/// [`Catalog::new`] was given more names than the catalog has room for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CapacityExceeded {
    /// Which list: [`Field::Key`] (the `K` keys) or [`Field::TensorName`] (the `T` tensors).
    pub list: Field,
    /// Names given.
    pub wanted: usize,
    /// Room for this many (`K` or `T`).
    pub capacity: usize,
}

impl core::fmt::Display for CapacityExceeded {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "Catalog asked for {} {}s but has room for {}: raise its capacity",
            self.wanted,
            self.list.as_str(),
            self.capacity
        )
    }
}

impl core::error::Error for CapacityExceeded {}

/// Watches a stream of events for up to `K` keys and `T` tensors named in advance.
///
/// ```
/// use miniquant::gguf::{Catalog, SliceParser};
/// # let file = miniquant::gguf::example_header();
/// let mut catalog = Catalog::of(&["general.architecture"], &["w"]);
/// let mut parser = SliceParser::new(file, Default::default());
/// while let Some(event) = parser.next_event()? {
///     catalog.observe(&event, parser.event_offset());
/// }
/// assert_eq!(catalog.key("general.architecture").map(|k| k.len), Some(5));
/// assert_eq!(catalog.tensor("w").map(|t| t.bytes), Some(16));
/// # Ok::<(), miniquant::Error>(())
/// ```
#[derive(Debug, Clone)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Catalog<'n, const K: usize, const T: usize> {
    key_names: heapless::Vec<&'n str, K>,
    keys: heapless::Vec<Option<FoundKey>, K>,
    tensor_names: heapless::Vec<&'n str, T>,
    tensors: heapless::Vec<Option<FoundTensor>, T>,
    /// Index of the wanted key whose value comes next, and the array depth it started at.
    current: Option<usize>,
    depth: usize,
    data_offset: Option<u64>,
}

impl<'n, const K: usize, const T: usize> Catalog<'n, K, T> {
    /// Watches for exactly these `K` keys and `T` tensors: the lists' lengths are the capacities,
    /// so a list known at compile time always fits.
    ///
    /// ```compile_fail
    /// # use miniquant::gguf::Catalog;
    /// // Two keys do not fit a catalog of one: a type error, not a key silently dropped.
    /// let c = Catalog::<1, 0>::of(&["a", "b"], &[]);
    /// ```
    pub fn of(keys: &[&'n str; K], tensors: &[&'n str; T]) -> Self {
        let mut c = Self::empty();
        // Cannot fail: the lists are exactly as long as the capacities.
        for &k in keys {
            let _ = c.key_names.push(k);
            let _ = c.keys.push(None);
        }
        for &t in tensors {
            let _ = c.tensor_names.push(t);
            let _ = c.tensors.push(None);
        }
        c
    }

    /// Watches for `keys` (at most `K`) and `tensors` (at most `T`), lists built at run time; a
    /// longer list is an error, never a name silently left out.
    pub fn new(keys: &[&'n str], tensors: &[&'n str]) -> Result<Self, CapacityExceeded> {
        let too_many = |list, wanted, capacity| CapacityExceeded {
            list,
            wanted,
            capacity,
        };
        let mut c = Self::empty();
        for &k in keys {
            c.key_names
                .push(k)
                .map_err(|_| too_many(Field::Key, keys.len(), K))?;
            c.keys
                .push(None)
                .map_err(|_| too_many(Field::Key, keys.len(), K))?;
        }
        for &t in tensors {
            c.tensor_names
                .push(t)
                .map_err(|_| too_many(Field::TensorName, tensors.len(), T))?;
            c.tensors
                .push(None)
                .map_err(|_| too_many(Field::TensorName, tensors.len(), T))?;
        }
        Ok(c)
    }

    /// Watches for no names (it still records where the data section starts).
    pub fn empty() -> Self {
        Self {
            key_names: heapless::Vec::new(),
            keys: heapless::Vec::new(),
            tensor_names: heapless::Vec::new(),
            tensors: heapless::Vec::new(),
            current: None,
            depth: 0,
            data_offset: None,
        }
    }

    /// Feeds one event; `offset` is the driver's `event_offset()` for it.
    pub fn observe(&mut self, event: &Event<'_>, offset: u64) {
        match *event {
            Event::Key { key, value_type } if self.depth == 0 => {
                self.current = self.key_names.iter().position(|&k| k == key);
                if let Some(slot) = self.current.and_then(|i| self.keys.get_mut(i)) {
                    *slot = Some(FoundKey {
                        value_type,
                        scalar: None,
                        value_offset: 0,
                        len: 0,
                        element_type: None,
                    });
                }
            }
            Event::Scalar(s) => {
                if self.depth == 0 {
                    if let Some(found) = self.current_key() {
                        found.scalar = Some(s);
                        found.value_offset = offset;
                    }
                }
            }
            Event::String(piece) => {
                if self.depth == 0 && piece.at == 0 {
                    if let Some(found) = self.current_key() {
                        found.len = piece.len;
                        found.value_offset = offset;
                    }
                }
            }
            Event::ArrayStart { element_type, len } => {
                if self.depth == 0 {
                    if let Some(found) = self.current_key() {
                        found.len = len;
                        found.element_type = Some(element_type);
                        found.value_offset = offset;
                    }
                }
                self.depth = self.depth.saturating_add(1);
            }
            Event::ArrayEnd => self.depth = self.depth.saturating_sub(1),
            Event::Tensor(ref info) => {
                if let Some(i) = self.tensor_names.iter().position(|&n| n == info.name) {
                    if let Some(slot) = self.tensors.get_mut(i) {
                        *slot = Some(FoundTensor::from(info));
                    }
                }
            }
            Event::End(d) => self.data_offset = Some(d.data_offset),
            Event::Header(_) | Event::Key { .. } | Event::Scalars(_) => {}
        }
    }

    fn current_key(&mut self) -> Option<&mut FoundKey> {
        self.current
            .and_then(|i| self.keys.get_mut(i))
            .and_then(Option::as_mut)
    }

    /// The wanted key `name`, if it was found.
    pub fn key(&self, name: &str) -> Option<&FoundKey> {
        let i = self.key_names.iter().position(|&k| k == name)?;
        self.keys.get(i)?.as_ref()
    }

    /// The wanted tensor `name`, if it was found.
    pub fn tensor(&self, name: &str) -> Option<&FoundTensor> {
        let i = self.tensor_names.iter().position(|&k| k == name)?;
        self.tensors.get(i)?.as_ref()
    }

    /// Absolute offset of the data section, once [`Event::End`] was seen.
    pub fn data_offset(&self) -> Option<u64> {
        self.data_offset
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::{example_header, SliceParser};

    fn observe_all<const K: usize, const T: usize>(c: &mut Catalog<'_, K, T>) {
        let mut parser = SliceParser::new(example_header(), Default::default());
        while let Some(event) = parser.next_event().unwrap() {
            c.observe(&event, parser.event_offset());
        }
    }

    #[test]
    fn names_beyond_the_capacity_are_an_error_not_absent() {
        let keys = Catalog::<1, 1>::new(&["a", "general.architecture"], &[]);
        assert_eq!(
            keys.unwrap_err(),
            CapacityExceeded {
                list: Field::Key,
                wanted: 2,
                capacity: 1
            }
        );
        let tensors = Catalog::<1, 1>::new(&[], &["v", "w"]).unwrap_err();
        assert_eq!(
            (tensors.list, tensors.wanted, tensors.capacity),
            (Field::TensorName, 2, 1)
        );
        let mut text = heapless::String::<128>::new();
        core::fmt::write(&mut text, format_args!("{tensors}")).unwrap();
        assert_eq!(
            text.as_str(),
            "Catalog asked for 2 tensor names but has room for 1: raise its capacity"
        );
    }

    #[test]
    fn lists_that_fit_find_every_name() {
        let mut exact = Catalog::of(&["general.architecture"], &["w"]);
        let mut roomy = Catalog::<4, 2>::new(&["general.architecture"], &["w"]).unwrap();
        observe_all(&mut exact);
        observe_all(&mut roomy);
        for found in [
            exact.key("general.architecture"),
            roomy.key("general.architecture"),
        ] {
            assert_eq!(found.map(|k| k.len), Some(5));
        }
        assert_eq!(exact.tensor("w").map(|t| t.bytes), Some(16));
        assert_eq!(roomy.tensor("w").map(|t| t.bytes), Some(16));
        assert!(roomy.key("general.name").is_none());
    }
}
