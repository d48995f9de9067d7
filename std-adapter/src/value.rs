//! Owned GGUF metadata values: what the [`Index`](crate::Index) keeps for each key, and what the
//! [`GgufWriter`](crate::writer::GgufWriter) encodes.
//!
//! Arrays are stored by element type (`Vec<u32>`, `Vec<f32>`, ...), and string arrays as one text
//! buffer plus end positions, so that a 262144-token vocabulary costs about what it takes in the file
//! rather than one heap allocation per token.

use miniquant::gguf::{Scalar, ValueType};

/// A metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A number or bool.
    Scalar(Scalar),
    /// A string.
    String(String),
    /// An array (its elements may themselves be arrays). Boxed: arrays are rare and large, scalars
    /// common and small, so this keeps every value small.
    Array(Box<Array>),
}

impl Value {
    /// The value's GGUF type.
    pub fn value_type(&self) -> ValueType {
        match self {
            Self::Scalar(s) => s.value_type(),
            Self::String(_) => ValueType::String,
            Self::Array(_) => ValueType::Array,
        }
    }

    /// The scalar, if the value is one.
    pub fn as_scalar(&self) -> Option<Scalar> {
        match self {
            Self::Scalar(s) => Some(*s),
            _ => None,
        }
    }

    /// The string, if the value is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::String(s) => Some(s),
            _ => None,
        }
    }

    /// The array, if the value is one.
    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Self::Array(a) => Some(a),
            _ => None,
        }
    }

    /// Equality that compares floats by their bits (so a NaN equals the same NaN), recursively.
    pub fn bits_eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Scalar(a), Self::Scalar(b)) => a.bits_eq(b),
            (Self::String(a), Self::String(b)) => a == b,
            (Self::Array(a), Self::Array(b)) => a.bits_eq(b),
            _ => false,
        }
    }
}

impl From<Scalar> for Value {
    fn from(s: Scalar) -> Self {
        Self::Scalar(s)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Self::String(s.to_owned())
    }
}

impl From<Array> for Value {
    fn from(a: Array) -> Self {
        Self::Array(Box::new(a))
    }
}

/// Strings stored back to back in one buffer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Strings {
    text: String,
    /// End of each string in `text`.
    ends: Vec<usize>,
}

impl Strings {
    /// No strings.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of strings.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are no strings.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The string at `i`.
    pub fn get(&self, i: usize) -> Option<&str> {
        let end = *self.ends.get(i)?;
        let start = match i.checked_sub(1) {
            Some(prev) => *self.ends.get(prev)?,
            None => 0,
        };
        self.text.get(start..end)
    }

    /// The strings in order.
    pub fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }

    /// Appends a string.
    pub fn push(&mut self, s: &str) {
        self.text.push_str(s);
        self.ends.push(self.text.len());
    }

    /// Appends `piece` to the last string (a string delivered in several pieces).
    pub(crate) fn extend_last(&mut self, piece: &str) {
        self.text.push_str(piece);
        if let Some(end) = self.ends.last_mut() {
            *end = self.text.len();
        }
    }
}

impl<'a> FromIterator<&'a str> for Strings {
    fn from_iter<I: IntoIterator<Item = &'a str>>(iter: I) -> Self {
        let mut strings = Self::new();
        for s in iter {
            strings.push(s);
        }
        strings
    }
}

/// An array's elements, stored by element type.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub enum Array {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    F32(Vec<f32>),
    Bool(Vec<bool>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F64(Vec<f64>),
    /// Strings (boxed: this keeps every array, and so every element of a nested array, small).
    String(Box<Strings>),
    /// Nested arrays; each has its own element type.
    Array(Vec<Array>),
}

impl From<Strings> for Array {
    fn from(s: Strings) -> Self {
        Self::String(Box::new(s))
    }
}

impl<'a> FromIterator<&'a str> for Array {
    /// An array of strings.
    fn from_iter<I: IntoIterator<Item = &'a str>>(iter: I) -> Self {
        Self::from(iter.into_iter().collect::<Strings>())
    }
}

/// One element of an [`Array`], borrowed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Element<'a> {
    /// A number or bool.
    Scalar(Scalar),
    /// A string.
    Str(&'a str),
    /// A nested array.
    Array(&'a Array),
}

impl Array {
    /// An empty array of `element_type`.
    pub fn empty(element_type: ValueType) -> Self {
        match element_type {
            ValueType::U8 => Self::U8(Vec::new()),
            ValueType::I8 => Self::I8(Vec::new()),
            ValueType::U16 => Self::U16(Vec::new()),
            ValueType::I16 => Self::I16(Vec::new()),
            ValueType::U32 => Self::U32(Vec::new()),
            ValueType::I32 => Self::I32(Vec::new()),
            ValueType::F32 => Self::F32(Vec::new()),
            ValueType::Bool => Self::Bool(Vec::new()),
            ValueType::U64 => Self::U64(Vec::new()),
            ValueType::I64 => Self::I64(Vec::new()),
            ValueType::F64 => Self::F64(Vec::new()),
            ValueType::String => Self::String(Box::default()),
            ValueType::Array => Self::Array(Vec::new()),
        }
    }

    /// The elements' type.
    pub fn element_type(&self) -> ValueType {
        match self {
            Self::U8(_) => ValueType::U8,
            Self::I8(_) => ValueType::I8,
            Self::U16(_) => ValueType::U16,
            Self::I16(_) => ValueType::I16,
            Self::U32(_) => ValueType::U32,
            Self::I32(_) => ValueType::I32,
            Self::F32(_) => ValueType::F32,
            Self::Bool(_) => ValueType::Bool,
            Self::U64(_) => ValueType::U64,
            Self::I64(_) => ValueType::I64,
            Self::F64(_) => ValueType::F64,
            Self::String(_) => ValueType::String,
            Self::Array(_) => ValueType::Array,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Self::U8(v) => v.len(),
            Self::I8(v) => v.len(),
            Self::U16(v) => v.len(),
            Self::I16(v) => v.len(),
            Self::U32(v) => v.len(),
            Self::I32(v) => v.len(),
            Self::F32(v) => v.len(),
            Self::Bool(v) => v.len(),
            Self::U64(v) => v.len(),
            Self::I64(v) => v.len(),
            Self::F64(v) => v.len(),
            Self::String(v) => v.len(),
            Self::Array(v) => v.len(),
        }
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The element at `i`.
    pub fn get(&self, i: usize) -> Option<Element<'_>> {
        let scalar = |s: Option<Scalar>| s.map(Element::Scalar);
        match self {
            Self::U8(v) => scalar(v.get(i).map(|&x| Scalar::U8(x))),
            Self::I8(v) => scalar(v.get(i).map(|&x| Scalar::I8(x))),
            Self::U16(v) => scalar(v.get(i).map(|&x| Scalar::U16(x))),
            Self::I16(v) => scalar(v.get(i).map(|&x| Scalar::I16(x))),
            Self::U32(v) => scalar(v.get(i).map(|&x| Scalar::U32(x))),
            Self::I32(v) => scalar(v.get(i).map(|&x| Scalar::I32(x))),
            Self::F32(v) => scalar(v.get(i).map(|&x| Scalar::F32(x))),
            Self::Bool(v) => scalar(v.get(i).map(|&x| Scalar::Bool(x))),
            Self::U64(v) => scalar(v.get(i).map(|&x| Scalar::U64(x))),
            Self::I64(v) => scalar(v.get(i).map(|&x| Scalar::I64(x))),
            Self::F64(v) => scalar(v.get(i).map(|&x| Scalar::F64(x))),
            Self::String(v) => v.get(i).map(Element::Str),
            Self::Array(v) => v.get(i).map(Element::Array),
        }
    }

    /// The elements in order.
    pub fn iter(&self) -> impl Iterator<Item = Element<'_>> + '_ {
        (0..self.len()).map_while(|i| self.get(i))
    }

    /// Appends a scalar; `false` (and nothing appended) if its type is not the element type.
    pub fn push_scalar(&mut self, s: Scalar) -> bool {
        match (self, s) {
            (Self::U8(v), Scalar::U8(x)) => v.push(x),
            (Self::I8(v), Scalar::I8(x)) => v.push(x),
            (Self::U16(v), Scalar::U16(x)) => v.push(x),
            (Self::I16(v), Scalar::I16(x)) => v.push(x),
            (Self::U32(v), Scalar::U32(x)) => v.push(x),
            (Self::I32(v), Scalar::I32(x)) => v.push(x),
            (Self::F32(v), Scalar::F32(x)) => v.push(x),
            (Self::Bool(v), Scalar::Bool(x)) => v.push(x),
            (Self::U64(v), Scalar::U64(x)) => v.push(x),
            (Self::I64(v), Scalar::I64(x)) => v.push(x),
            (Self::F64(v), Scalar::F64(x)) => v.push(x),
            _ => return false,
        }
        true
    }

    /// Equality that compares floats by their bits, recursively.
    pub fn bits_eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::F32(a), Self::F32(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
            }
            (Self::F64(a), Self::F64(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
            }
            (Self::Array(a), Self::Array(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.bits_eq(y))
            }
            (a, b) => a == b,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_keep_order_and_pieces_extend_the_last_one() {
        let mut s: Strings = ["a", "", "héllo"].into_iter().collect();
        s.push("x");
        s.extend_last("yz");
        assert_eq!(s.iter().collect::<Vec<_>>(), ["a", "", "héllo", "xyz"]);
        assert_eq!(s.get(4), None);
    }

    #[test]
    fn push_scalar_rejects_other_types() {
        let mut a = Array::empty(ValueType::U16);
        assert!(a.push_scalar(Scalar::U16(7)));
        assert!(!a.push_scalar(Scalar::U32(7)));
        assert_eq!(a, Array::U16(vec![7]));
        assert_eq!(a.get(0), Some(Element::Scalar(Scalar::U16(7))));
    }

    #[test]
    fn bits_eq_tells_nans_apart_and_matches_equal_ones() {
        let nan = f32::from_bits(0x7fc0_0001);
        assert!(Array::F32(vec![nan]).bits_eq(&Array::F32(vec![nan])));
        assert!(!Array::F32(vec![nan]).bits_eq(&Array::F32(vec![f32::NAN])));
        assert!(!Array::F32(vec![0.0]).bits_eq(&Array::F32(vec![-0.0])));
    }
}
