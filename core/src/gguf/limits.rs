//! Parser limits, as data.

/// The nesting stack's capacity of a [`Parser`](super::Parser) (and of the drivers) unless its
/// `DEPTH` parameter says otherwise: arrays nest at most this deep, whatever
/// [`Limits::max_depth`] says. It equals the default limit; each level costs 8 bytes.
pub const DEFAULT_DEPTH_CAPACITY: usize = 8;

/// Tensors may have at most this many dimensions in any parser (ggml's `GGML_MAX_DIMS` is 4).
pub const MAX_DIMS_CAPACITY: usize = 4;

/// Limits the parser enforces. Exceeding one is an [`Error::LimitExceeded`](crate::Error) naming the
/// limit, its value, the value found and the byte offset.
///
/// The defaults accept every real file we know of (262144-token tokenizers, headers above 8 MiB) and
/// match ggml's and candle's caps where those exist. Independently of the limits, every count and
/// length is checked against the bytes that can remain in the input when the input length is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Limits {
    /// Array nesting depth (an array of arrays is depth 2); capped at the parser's nesting capacity,
    /// its `DEPTH` parameter ([`DEFAULT_DEPTH_CAPACITY`] by default): the depth error names the
    /// smaller of the two.
    pub max_depth: u32,
    /// Bytes of one string value.
    pub max_string_bytes: u64,
    /// Bytes of one key or tensor name (the spec allows 65535 for keys).
    pub max_key_bytes: u64,
    /// Elements of one array.
    pub max_array_len: u64,
    /// Metadata key/value pairs.
    pub max_metadata: u64,
    /// Tensors.
    pub max_tensors: u64,
    /// Dimensions of one tensor; capped at [`MAX_DIMS_CAPACITY`].
    pub max_dims: u32,
}

impl Limits {
    /// The defaults: depth 8, strings and arrays up to 2^30, keys and names up to 65535 bytes,
    /// 2^20 metadata pairs, 2^20 tensors, 4 dimensions.
    pub const DEFAULT: Self = Self {
        max_depth: 8,
        max_string_bytes: 1 << 30,
        max_key_bytes: 65535,
        max_array_len: 1 << 30,
        max_metadata: 1 << 20,
        max_tensors: 1 << 20,
        max_dims: 4,
    };

    pub(crate) fn dims(&self) -> u32 {
        self.max_dims.min(MAX_DIMS_CAPACITY as u32)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self::DEFAULT
    }
}
