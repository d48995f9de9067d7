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

    /// The value as a u64 if it is an integer of any width that is not negative
    /// (`general.file_type`, `llama.context_length`, ...).
    pub fn as_u64(&self) -> Option<u64> {
        self.as_scalar()?.as_u64()
    }

    /// The value as a u32 if it is an integer that fits.
    pub fn as_u32(&self) -> Option<u32> {
        self.as_u64().and_then(|v| u32::try_from(v).ok())
    }

    /// The value as an i64 if it is an integer that fits (every integer type but the largest u64s).
    pub fn as_i64(&self) -> Option<i64> {
        self.as_scalar().and_then(scalar_as_i64)
    }

    /// The value as an f64 if it is a number: floats exactly, integers rounded to the nearest f64
    /// (exact up to 2^53).
    pub fn as_f64(&self) -> Option<f64> {
        self.as_scalar().and_then(scalar_as_f64)
    }

    /// The value if it is a bool.
    pub fn as_bool(&self) -> Option<bool> {
        match self.as_scalar()? {
            Scalar::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// The strings, if the value is an array of strings (`tokenizer.ggml.tokens`, ...).
    pub fn as_strings(&self) -> Option<&Strings> {
        self.as_array()?.as_strings()
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

impl Element<'_> {
    /// The element as a u64, as [`Value::as_u64`].
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Self::Scalar(s) => s.as_u64(),
            _ => None,
        }
    }

    /// The element as an i64, as [`Value::as_i64`].
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Self::Scalar(s) => scalar_as_i64(s),
            _ => None,
        }
    }

    /// The element as an f64, as [`Value::as_f64`].
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Self::Scalar(s) => scalar_as_f64(s),
            _ => None,
        }
    }

    /// The element if it is a string.
    pub fn as_str(&self) -> Option<&str> {
        match *self {
            Self::Str(s) => Some(s),
            _ => None,
        }
    }
}

fn scalar_as_i64(s: Scalar) -> Option<i64> {
    match s {
        Scalar::U8(v) => Some(v.into()),
        Scalar::I8(v) => Some(v.into()),
        Scalar::U16(v) => Some(v.into()),
        Scalar::I16(v) => Some(v.into()),
        Scalar::U32(v) => Some(v.into()),
        Scalar::I32(v) => Some(v.into()),
        Scalar::I64(v) => Some(v),
        Scalar::U64(v) => i64::try_from(v).ok(),
        Scalar::F32(_) | Scalar::F64(_) | Scalar::Bool(_) => None,
    }
}

/// Integers are rounded to the nearest f64 (`as` rounds to nearest), which is exact up to 2^53.
#[allow(clippy::cast_precision_loss)]
fn scalar_as_f64(s: Scalar) -> Option<f64> {
    Some(match s {
        Scalar::F32(v) => v.into(),
        Scalar::F64(v) => v,
        Scalar::U64(v) => v as f64,
        Scalar::I64(v) => v as f64,
        Scalar::Bool(_) => return None,
        other => scalar_as_i64(other)? as f64,
    })
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

    /// The strings, if the elements are strings.
    pub fn as_strings(&self) -> Option<&Strings> {
        match self {
            Self::String(s) => Some(s),
            _ => None,
        }
    }

    /// The elements, if they are f32 (`tokenizer.ggml.scores`, ...).
    pub fn as_f32_slice(&self) -> Option<&[f32]> {
        match self {
            Self::F32(v) => Some(v),
            _ => None,
        }
    }

    /// The elements, if they are i32 (`tokenizer.ggml.token_type`, ...).
    pub fn as_i32_slice(&self) -> Option<&[i32]> {
        match self {
            Self::I32(v) => Some(v),
            _ => None,
        }
    }

    /// The elements, if they are u32.
    pub fn as_u32_slice(&self) -> Option<&[u32]> {
        match self {
            Self::U32(v) => Some(v),
            _ => None,
        }
    }

    /// Every element as a u64, if the elements are integers none of which is negative.
    pub fn to_u64_vec(&self) -> Option<Vec<u64>> {
        self.iter().map(|e| e.as_u64()).collect()
    }

    /// Every element as an f64, if the elements are numbers (as [`Value::as_f64`]).
    pub fn to_f64_vec(&self) -> Option<Vec<f64>> {
        self.iter().map(|e| e.as_f64()).collect()
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

    #[test]
    fn typed_accessors_convert_only_what_fits() {
        let v = |s: Scalar| Value::Scalar(s);
        assert_eq!(v(Scalar::U32(8192)).as_u64(), Some(8192));
        assert_eq!(v(Scalar::U32(8192)).as_u32(), Some(8192));
        assert_eq!(v(Scalar::U64(u64::MAX)).as_u32(), None);
        assert_eq!(v(Scalar::U64(u64::MAX)).as_i64(), None);
        assert_eq!(v(Scalar::I8(-3)).as_u64(), None);
        assert_eq!(v(Scalar::I8(-3)).as_i64(), Some(-3));
        assert_eq!(v(Scalar::I8(-3)).as_f64(), Some(-3.0));
        assert_eq!(v(Scalar::F32(0.5)).as_f64(), Some(0.5));
        assert_eq!(v(Scalar::F32(0.5)).as_u64(), None);
        assert_eq!(v(Scalar::Bool(true)).as_bool(), Some(true));
        assert_eq!(v(Scalar::Bool(true)).as_u64(), None);
        assert_eq!(v(Scalar::U8(1)).as_bool(), None);
        assert_eq!(Value::from("llama").as_str(), Some("llama"));
        assert_eq!(Value::from("llama").as_u64(), None);

        let tokens: Value = ["a", "bc"].into_iter().collect::<Array>().into();
        let strings = tokens.as_strings().expect("strings");
        assert_eq!(strings.iter().collect::<Vec<_>>(), ["a", "bc"]);
        assert_eq!(
            tokens
                .as_array()
                .and_then(|a| a.get(1))
                .and_then(|e| e.as_str().map(str::to_owned)),
            Some("bc".to_owned())
        );
        let scores = Array::F32(vec![0.0, -1.5]);
        assert_eq!(scores.as_f32_slice(), Some(&[0.0, -1.5][..]));
        assert_eq!(scores.as_i32_slice(), None);
        assert_eq!(scores.to_f64_vec(), Some(vec![0.0, -1.5]));
        assert_eq!(scores.to_u64_vec(), None);
        assert_eq!(Array::I32(vec![1, -1]).to_u64_vec(), None);
        assert_eq!(Array::U16(vec![1, 2]).to_u64_vec(), Some(vec![1, 2]));
        assert_eq!(Array::I32(vec![3]).as_i32_slice(), Some(&[3][..]));
        assert_eq!(Array::U32(vec![3]).as_u32_slice(), Some(&[3][..]));
    }
}
