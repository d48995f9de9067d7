//! GGUF scalar metadata values.

pub use super::format::ValueType;

use super::event::ByteOrder;

/// A scalar metadata value (floats keep their exact bits).
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[allow(missing_docs)]
pub enum Scalar {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    U64(u64),
    I64(i64),
    F64(f64),
}

impl Scalar {
    /// Decodes one value of scalar type `t` from the first bytes of `bytes` in byte order `order`;
    /// `None` if `t` is a string or array, or `bytes` is too short. A bool byte other than 0 is
    /// `true` here: the parser rejects such bytes before decoding.
    #[inline]
    pub fn decode(t: ValueType, bytes: &[u8], order: ByteOrder) -> Option<Self> {
        fn array<const N: usize>(bytes: &[u8], order: ByteOrder) -> Option<[u8; N]> {
            let mut a: [u8; N] = bytes.get(..N)?.try_into().ok()?;
            if order == ByteOrder::Big {
                a.reverse();
            }
            Some(a)
        }
        Some(match t {
            ValueType::U8 => Self::U8(*bytes.first()?),
            ValueType::I8 => Self::I8(*bytes.first()? as i8),
            ValueType::Bool => Self::Bool(*bytes.first()? != 0),
            ValueType::U16 => Self::U16(u16::from_le_bytes(array(bytes, order)?)),
            ValueType::I16 => Self::I16(i16::from_le_bytes(array(bytes, order)?)),
            ValueType::U32 => Self::U32(u32::from_le_bytes(array(bytes, order)?)),
            ValueType::I32 => Self::I32(i32::from_le_bytes(array(bytes, order)?)),
            ValueType::F32 => Self::F32(f32::from_le_bytes(array(bytes, order)?)),
            ValueType::U64 => Self::U64(u64::from_le_bytes(array(bytes, order)?)),
            ValueType::I64 => Self::I64(i64::from_le_bytes(array(bytes, order)?)),
            ValueType::F64 => Self::F64(f64::from_le_bytes(array(bytes, order)?)),
            ValueType::String | ValueType::Array => return None,
        })
    }

    /// The value's type.
    pub const fn value_type(&self) -> ValueType {
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
        }
    }

    /// Bit-exact equality (floats compared by bits, so NaN equals the same NaN).
    pub fn bits_eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::F32(a), Self::F32(b)) => a.to_bits() == b.to_bits(),
            (Self::F64(a), Self::F64(b)) => a.to_bits() == b.to_bits(),
            (a, b) => a == b,
        }
    }

    /// The value as a u64 if it is a non-negative integer.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Self::U8(v) => Some(v.into()),
            Self::U16(v) => Some(v.into()),
            Self::U32(v) => Some(v.into()),
            Self::U64(v) => Some(v),
            Self::I8(v) => u64::try_from(v).ok(),
            Self::I16(v) => u64::try_from(v).ok(),
            Self::I32(v) => u64::try_from(v).ok(),
            Self::I64(v) => u64::try_from(v).ok(),
            Self::F32(_) | Self::F64(_) | Self::Bool(_) => None,
        }
    }
}

/// A run of consecutive elements of a numeric or bool array, as the raw bytes of the file (zero
/// copy: on firmware they stay in flash). A whole array arrives as one run from the `&[u8]` driver,
/// and as one or more runs of whole elements from the streaming drivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ScalarRun<'a> {
    element_type: ValueType,
    order: ByteOrder,
    raw: &'a [u8],
}

impl<'a> ScalarRun<'a> {
    pub(crate) fn new(element_type: ValueType, order: ByteOrder, raw: &'a [u8]) -> Self {
        Self {
            element_type,
            order,
            raw,
        }
    }

    /// The elements' type (never `String` or `Array`).
    pub fn element_type(&self) -> ValueType {
        self.element_type
    }

    /// The file's byte order, which `raw` is in.
    pub fn byte_order(&self) -> ByteOrder {
        self.order
    }

    /// The elements' bytes as stored in the file.
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }

    /// Number of elements in this run.
    pub fn len(&self) -> usize {
        self.raw
            .len()
            .checked_div(self.element_type.scalar_size().unwrap_or(1))
            .unwrap_or(0)
    }

    /// Whether the run has no elements.
    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }

    /// Element `i` of the run.
    pub fn get(&self, i: usize) -> Option<Scalar> {
        let size = self.element_type.scalar_size()?;
        Scalar::decode(
            self.element_type,
            self.raw.get(i.checked_mul(size)?..)?,
            self.order,
        )
    }

    /// The elements in order.
    pub fn iter(&self) -> impl Iterator<Item = Scalar> + 'a {
        let (t, order) = (self.element_type, self.order);
        let size = t.scalar_size().unwrap_or(1);
        self.raw
            .chunks_exact(size)
            .filter_map(move |b| Scalar::decode(t, b, order))
    }
}
