//! Records the metadata keys and tensors a program asks for by name, from any driver's events,
//! without a heap: capacities are const generics ([`heapless::Vec`]).

use super::event::{Event, TensorInfo};
use super::limits::MAX_DIMS_CAPACITY;
use super::value::{Scalar, ValueType};
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

/// Watches a stream of events for up to `K` keys and `T` tensors named in advance.
///
/// ```
/// use miniquant::gguf::{Catalog, SliceParser};
/// # let file = miniquant::gguf::example_header();
/// let mut catalog = Catalog::<1, 1>::new(&["general.architecture"], &["w"]);
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
    /// Watches for `keys` and `tensors`; names beyond the capacities `K` and `T` are ignored.
    pub fn new(keys: &[&'n str], tensors: &[&'n str]) -> Self {
        let mut c = Self {
            key_names: heapless::Vec::new(),
            keys: heapless::Vec::new(),
            tensor_names: heapless::Vec::new(),
            tensors: heapless::Vec::new(),
            current: None,
            depth: 0,
            data_offset: None,
        };
        for &k in keys.iter().take(K) {
            // Capacity is checked by `take`.
            let _ = c.key_names.push(k);
            let _ = c.keys.push(None);
        }
        for &t in tensors.iter().take(T) {
            let _ = c.tensor_names.push(t);
            let _ = c.tensors.push(None);
        }
        c
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
