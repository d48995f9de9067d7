//! The events a GGUF parser yields, in file order.

use super::{Scalar, ScalarRun, ValueType};
use crate::ggml_type::GgmlType;
use crate::gguf::limits::MAX_DIMS_CAPACITY;

/// Byte order of a GGUF file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ByteOrder {
    /// Little-endian (every file llama.cpp writes on common hosts).
    Little,
    /// Big-endian (files converted for s390x and similar hosts).
    Big,
}

impl ByteOrder {
    /// `"little"` or `"big"`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Little => "little",
            Self::Big => "big",
        }
    }
}

/// The fixed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Header {
    /// 1, 2 or 3.
    pub version: u32,
    /// Byte order of every number in the file.
    pub byte_order: ByteOrder,
    /// Number of tensor infos.
    pub tensor_count: u64,
    /// Number of metadata key/value pairs.
    pub metadata_count: u64,
}

/// A piece of a string value. A string that fits the driver's buffer comes as one piece with
/// `at == 0` and `text.len() == len`; a longer one comes as several consecutive pieces, each cut
/// at a UTF-8 character boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct StrPiece<'a> {
    /// The text of this piece.
    pub text: &'a str,
    /// Byte position of this piece within the whole string.
    pub at: u64,
    /// Length of the whole string in bytes.
    pub len: u64,
}

impl StrPiece<'_> {
    /// Whether this piece is the whole string.
    pub fn is_whole(&self) -> bool {
        self.at == 0 && self.text.len() as u64 == self.len
    }

    /// Whether this piece ends the string.
    pub fn is_last(&self) -> bool {
        self.at.checked_add(self.text.len() as u64) == Some(self.len)
    }
}

/// One tensor info of the tensor directory, checked: known type, whole blocks, sizes that fit in
/// `u64`, offset a multiple of the alignment.
///
/// The tensor's `bytes` bytes of data are in the file's byte order ([`Header::byte_order`]). The
/// [`quant`](crate::quant) kernels read little-endian blocks: convert a big-endian file's data with
/// [`quant::byte_order`](crate::quant::byte_order) first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TensorInfo<'a> {
    /// The tensor's name.
    pub name: &'a str,
    /// Number of dimensions (0 for a scalar).
    pub n_dims: u32,
    /// Dimensions as stored (ggml's `ne`, fastest-varying first); only `..n_dims` are meaningful.
    pub ne: [u64; MAX_DIMS_CAPACITY],
    /// Element type.
    pub ggml_type: GgmlType,
    /// Offset of the data, relative to the data section.
    pub offset: u64,
    /// Number of elements.
    pub elements: u64,
    /// Size of the data in bytes.
    pub bytes: u64,
}

impl TensorInfo<'_> {
    /// The dimensions as stored in the file, fastest-varying first (ggml's `ne[0..n_dims]`).
    pub fn ne(&self) -> &[u64] {
        // `n_dims` is at most the capacity in parsed infos; a hand-made one may say more.
        self.ne.get(..self.n_dims as usize).unwrap_or(&self.ne)
    }

    /// The shape in row-major order (slowest-varying first), as candle and numpy write it.
    pub fn shape(&self) -> Shape {
        let mut dims = [0; MAX_DIMS_CAPACITY];
        for (d, &n) in dims.iter_mut().zip(self.ne().iter().rev()) {
            *d = n;
        }
        Shape {
            dims,
            n_dims: self.n_dims,
        }
    }
}

/// A row-major tensor shape (slowest-varying dimension first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Shape {
    dims: [u64; MAX_DIMS_CAPACITY],
    n_dims: u32,
}

impl Shape {
    /// The dimensions.
    pub fn dims(&self) -> &[u64] {
        self.dims.get(..self.n_dims as usize).unwrap_or(&self.dims)
    }
}

/// Where the data section starts; the last event. The tensor data there is in the file's byte
/// order (see [`TensorInfo`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DataSection {
    /// `general.alignment`, or 32.
    pub alignment: u32,
    /// Absolute offset of the data section: the end of the tensor directory rounded up to the alignment.
    pub data_offset: u64,
}

/// One step of a GGUF header, in file order.
///
/// The sequence is: `Header`; for each metadata pair a `Key` followed by its value (`Scalar`,
/// `String` pieces, or `ArrayStart` .. elements .. `ArrayEnd`, nested arrays likewise); one `Tensor`
/// per tensor info; `End`. Elements of a numeric or bool array come as [`Event::Scalars`]
/// runs; elements of a string or array array come one value at a time.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Event<'a> {
    /// The fixed header.
    Header(Header),
    /// A metadata key and the type of the value that follows.
    Key {
        /// The key.
        key: &'a str,
        /// The value's type.
        value_type: ValueType,
    },
    /// A scalar value at the top level (the value of a key).
    Scalar(Scalar),
    /// Consecutive elements of a numeric or bool array (one or more runs per array).
    Scalars(ScalarRun<'a>),
    /// A string value, or a piece of one.
    String(StrPiece<'a>),
    /// The start of an array; `len` elements and then `ArrayEnd` follow.
    ArrayStart {
        /// Type of the elements.
        element_type: ValueType,
        /// Number of elements.
        len: u64,
    },
    /// The end of the innermost open array.
    ArrayEnd,
    /// A tensor info.
    Tensor(TensorInfo<'a>),
    /// The end of the header.
    End(DataSection),
}
