//! The crate's one error type: a small `Copy` enum whose `Display` needs no allocation.
//!
//! Parser errors say what was wrong, which limit (with its value and the value found) and at which
//! byte offset of the input. Kernel errors say which lengths or types did not fit.
//!
//! A leaf: it imports only plain `Copy` enums from leaf modules (they import nothing of the crate
//! but each other: `ggml_type`, `gguf::format`, `gguf::writer::misuse`, `quant::level_id`) and
//! calls only their `const fn`s, so formatting an error does no work (no CPU detection: the best
//! level is recorded when the error is built).

use crate::ggml_type::GgmlType;
use crate::gguf::{Misuse, ValueType};
use crate::quant::level_id::Level;

/// A field of the GGUF header, named in errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Field {
    /// The 4-byte magic `GGUF`.
    Magic,
    /// The u32 version.
    Version,
    /// The tensor count.
    TensorCount,
    /// The metadata key/value count.
    MetadataCount,
    /// A metadata key.
    Key,
    /// A metadata value's type code.
    ValueType,
    /// A metadata value.
    Value,
    /// A string value.
    String,
    /// An array's element type and length.
    ArrayHeader,
    /// A tensor name.
    TensorName,
    /// A tensor's dimension count.
    DimensionCount,
    /// A tensor dimension.
    Dimension,
}

impl Field {
    /// A short lower-case name for messages.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Magic => "magic",
            Self::Version => "version",
            Self::TensorCount => "tensor count",
            Self::MetadataCount => "metadata count",
            Self::Key => "metadata key",
            Self::ValueType => "value type",
            Self::Value => "metadata value",
            Self::String => "string",
            Self::ArrayHeader => "array header",
            Self::TensorName => "tensor name",
            Self::DimensionCount => "dimension count",
            Self::Dimension => "dimension",
        }
    }
}

/// A configurable parser limit (see [`Limits`](crate::gguf::Limits)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Limit {
    /// `Limits::max_depth`: array nesting depth.
    Depth,
    /// `Limits::max_string_bytes`: bytes of one string value.
    StringBytes,
    /// `Limits::max_key_bytes`: bytes of one key or tensor name.
    KeyBytes,
    /// `Limits::max_array_len`: elements of one array.
    ArrayLen,
    /// `Limits::max_metadata`: metadata key/value count.
    MetadataCount,
    /// `Limits::max_tensors`: tensor count.
    TensorCount,
    /// `Limits::max_dims`: dimensions of one tensor.
    Dims,
}

impl Limit {
    /// The `Limits` field this limit is set by.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Depth => "max_depth",
            Self::StringBytes => "max_string_bytes",
            Self::KeyBytes => "max_key_bytes",
            Self::ArrayLen => "max_array_len",
            Self::MetadataCount => "max_metadata",
            Self::TensorCount => "max_tensors",
            Self::Dims => "max_dims",
        }
    }
}

/// What is wrong with `general.alignment`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum AlignmentProblem {
    /// The value is not a u32.
    NotU32(ValueType),
    /// The value is 0.
    Zero,
    /// The value is not a power of two.
    NotPowerOfTwo(u32),
    /// The key appears twice.
    Duplicate,
}

/// Every error of the crate. `Copy`, no allocation; `Display` writes one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Error {
    /// The file does not start with `GGUF`.
    BadMagic {
        /// The first four bytes.
        found: [u8; 4],
    },
    /// A version other than 1, 2 or 3 (in either byte order).
    UnsupportedVersion {
        /// The version as read little-endian.
        version: u32,
    },
    /// The input ends (or would end) before `field` is complete.
    Truncated {
        /// What was being read.
        field: Field,
        /// Where it starts.
        offset: u64,
        /// Bytes it needs.
        needed: u64,
        /// Bytes that remain in the input from `offset`.
        available: u64,
    },
    /// A count, length or depth exceeds its configured limit.
    LimitExceeded {
        /// Which limit.
        limit: Limit,
        /// The limit's value.
        max: u64,
        /// The value found in the file.
        found: u64,
        /// Offset of the field that holds the value.
        offset: u64,
    },
    /// A count or length cannot fit in the bytes that remain in the input.
    ExceedsInput {
        /// The field holding the count or length.
        field: Field,
        /// The count or length found.
        found: u64,
        /// Minimum bytes it implies.
        needed: u64,
        /// Bytes remaining after the field.
        available: u64,
        /// Offset of the field.
        offset: u64,
    },
    /// A key, string or tensor name is not valid UTF-8.
    InvalidUtf8 {
        /// Which kind of string.
        field: Field,
        /// Offset of the first invalid byte.
        offset: u64,
    },
    /// A key or tensor name is empty.
    EmptyName {
        /// Key or tensor name.
        field: Field,
        /// Offset of its length.
        offset: u64,
    },
    /// A key or tensor name contains a NUL byte (C consumers would see a different name).
    NulInName {
        /// Key or tensor name.
        field: Field,
        /// Offset of the NUL byte.
        offset: u64,
    },
    /// A bool value other than 0 or 1.
    InvalidBool {
        /// The byte found.
        value: u8,
        /// Its offset.
        offset: u64,
    },
    /// A metadata value type code outside 0..=12.
    InvalidValueType {
        /// The code found.
        code: u32,
        /// Its offset.
        offset: u64,
    },
    /// A ggml type code that no ggml version defines.
    UnknownGgmlType {
        /// The code found.
        code: u32,
        /// Its offset.
        offset: u64,
    },
    /// A ggml type code that ggml removed (4, 5, 31..=33, 36..=38).
    RemovedGgmlType {
        /// The code found.
        code: u32,
        /// Its offset.
        offset: u64,
    },
    /// `general.alignment` is unusable.
    BadAlignment {
        /// Why.
        problem: AlignmentProblem,
        /// Offset of the value (or of the duplicate key).
        offset: u64,
    },
    /// A tensor dimension above `i64::MAX` (ggml's dimensions are signed).
    DimensionTooLarge {
        /// The value found.
        value: u64,
        /// Its offset.
        offset: u64,
    },
    /// A tensor's element count, byte count or end offset overflows `u64`.
    ShapeOverflow {
        /// Offset of the tensor info.
        offset: u64,
    },
    /// A tensor's first dimension is not a multiple of its type's block size.
    NotWholeBlocks {
        /// The tensor's type.
        ggml_type: GgmlType,
        /// Its first (fastest-varying) dimension.
        ne0: u64,
        /// Offset of the tensor info.
        offset: u64,
    },
    /// A tensor's data offset is not a multiple of the alignment.
    MisalignedTensor {
        /// The data offset (relative to the data section).
        tensor_offset: u64,
        /// The alignment.
        alignment: u32,
        /// Offset of the field.
        offset: u64,
    },
    /// A key or tensor info needs more contiguous bytes than the driver's buffer holds.
    BufferTooSmall {
        /// Bytes needed.
        needed: u64,
        /// The buffer's capacity.
        capacity: u64,
        /// Offset of the item.
        offset: u64,
    },
    /// The underlying reader failed.
    Io {
        /// The reader's error kind.
        kind: embedded_io::ErrorKind,
        /// Offset being read.
        offset: u64,
    },
    /// A key appears twice.
    DuplicateKey {
        /// Offset of the second occurrence.
        offset: u64,
    },
    /// A tensor name appears twice.
    DuplicateTensor {
        /// Offset of the second occurrence.
        offset: u64,
    },
    /// A tensor's data extends past the end of the file.
    TensorOutOfBounds {
        /// Absolute offset of the tensor's end.
        end: u64,
        /// File size.
        file_size: u64,
        /// Offset of the tensor info.
        offset: u64,
    },
    /// Two tensors' data overlap.
    TensorOverlap {
        /// Offset of the later tensor info.
        offset: u64,
    },
    /// A byte length is not a whole number of blocks of the type.
    PartialBlock {
        /// The type.
        ggml_type: GgmlType,
        /// The length in bytes (or elements, for f32 inputs).
        len: u64,
    },
    /// Two lengths that must agree do not.
    LengthMismatch {
        /// The length required.
        expected: u64,
        /// The length given.
        found: u64,
    },
    /// The operation is not available for this type.
    Unsupported {
        /// The type.
        ggml_type: GgmlType,
        /// The operation.
        op: Op,
    },
    /// A kernel level name that is none of `auto scalar neon dotprod i8mm avx2 avx512vnni amx`.
    LevelUnknown,
    /// A kernel level was requested that this CPU or build does not have.
    LevelUnavailable {
        /// The level.
        level: Level,
        /// The best level this CPU and build have (detected when the error was built).
        best: Level,
    },
    /// A [`GgufWriter`](crate::gguf::GgufWriter) call that would make a wrong file; nothing of it
    /// was written, and the writer refuses further calls.
    WriterMisuse {
        /// What was wrong.
        problem: Misuse,
        /// Bytes written before the call.
        offset: u64,
    },
    /// The writer's output failed (the GGUF writer's counterpart of [`Error::Io`]).
    WriteFailed {
        /// The output's error kind.
        kind: embedded_io::ErrorKind,
        /// Offset in the output being written.
        offset: u64,
    },
}

/// A kernel operation, named in [`Error::Unsupported`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Op {
    /// f32 to blocks.
    Quantize,
    /// Blocks to f32.
    Dequantize,
    /// Dot product against the vec-dot type.
    VecDot,
    /// Big-endian tensor data to the kernels' layout ([`crate::quant::byte_order`]).
    FromBigEndian,
    /// Rows interleaved for the one-column product ([`crate::quant::packed`]).
    Pack,
}

impl Op {
    /// The operation's name in messages.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Quantize => "quantize",
            Self::Dequantize => "dequantize",
            Self::VecDot => "vec_dot",
            Self::FromBigEndian => "reading big-endian data",
            Self::Pack => "packing rows",
        }
    }
}

impl Error {
    /// The byte offset in the input that the error points at, if it has one.
    pub const fn offset(&self) -> Option<u64> {
        match *self {
            Self::BadMagic { .. } => Some(0),
            Self::UnsupportedVersion { .. } => Some(4),
            Self::Truncated { offset, .. }
            | Self::LimitExceeded { offset, .. }
            | Self::ExceedsInput { offset, .. }
            | Self::InvalidUtf8 { offset, .. }
            | Self::EmptyName { offset, .. }
            | Self::NulInName { offset, .. }
            | Self::InvalidBool { offset, .. }
            | Self::InvalidValueType { offset, .. }
            | Self::UnknownGgmlType { offset, .. }
            | Self::RemovedGgmlType { offset, .. }
            | Self::BadAlignment { offset, .. }
            | Self::DimensionTooLarge { offset, .. }
            | Self::ShapeOverflow { offset }
            | Self::NotWholeBlocks { offset, .. }
            | Self::MisalignedTensor { offset, .. }
            | Self::BufferTooSmall { offset, .. }
            | Self::Io { offset, .. }
            | Self::DuplicateKey { offset }
            | Self::DuplicateTensor { offset }
            | Self::TensorOutOfBounds { offset, .. }
            | Self::TensorOverlap { offset }
            | Self::WriterMisuse { offset, .. }
            | Self::WriteFailed { offset, .. } => Some(offset),
            Self::PartialBlock { .. }
            | Self::LengthMismatch { .. }
            | Self::Unsupported { .. }
            | Self::LevelUnknown
            | Self::LevelUnavailable { .. } => None,
        }
    }
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            Self::BadMagic { found } => write!(f, "bad magic {found:02x?} (expected \"GGUF\")")?,
            Self::UnsupportedVersion { version } => {
                write!(f, "unsupported GGUF version {version} (1, 2 and 3 are known)")?
            }
            Self::Truncated { field, needed, available, .. } => write!(
                f,
                "input ends inside the {}: it needs {needed} bytes, {available} remain",
                field.as_str()
            )?,
            Self::LimitExceeded { limit, max, found, .. } => write!(
                f,
                "limit {} = {max} exceeded: found {found}",
                limit.as_str()
            )?,
            Self::ExceedsInput { field, found, needed, available, .. } => write!(
                f,
                "{} {found} needs at least {needed} bytes but only {available} remain",
                field.as_str()
            )?,
            Self::InvalidUtf8 { field, .. } => write!(f, "{} is not valid UTF-8", field.as_str())?,
            Self::EmptyName { field, .. } => write!(f, "empty {}", field.as_str())?,
            Self::NulInName { field, .. } => write!(f, "{} contains a NUL byte", field.as_str())?,
            Self::InvalidBool { value, .. } => write!(f, "bool value {value} (must be 0 or 1)")?,
            Self::InvalidValueType { code, .. } => {
                write!(f, "invalid metadata value type {code} (0..=12 are defined)")?
            }
            Self::UnknownGgmlType { code, .. } => write!(f, "unknown ggml type {code}")?,
            Self::RemovedGgmlType { code, .. } => {
                write!(f, "ggml type {code} was removed from ggml and has no layout")?
            }
            Self::BadAlignment { problem, .. } => match problem {
                AlignmentProblem::NotU32(t) => {
                    write!(f, "general.alignment must be a u32, found {}", t.name())?
                }
                AlignmentProblem::Zero => write!(f, "general.alignment is 0")?,
                AlignmentProblem::NotPowerOfTwo(a) => {
                    write!(f, "general.alignment {a} is not a power of two")?
                }
                AlignmentProblem::Duplicate => write!(f, "general.alignment appears twice")?,
            },
            Self::DimensionTooLarge { value, .. } => {
                write!(f, "tensor dimension {value} exceeds i64::MAX")?
            }
            Self::ShapeOverflow { .. } => {
                write!(f, "tensor element count, byte count or end offset overflows u64")?
            }
            Self::NotWholeBlocks { ggml_type, ne0, .. } => write!(
                f,
                "tensor of type {ggml_type} has first dimension {ne0}, not a multiple of its block size {}",
                ggml_type.block_size()
            )?,
            Self::MisalignedTensor { tensor_offset, alignment, .. } => write!(
                f,
                "tensor data offset {tensor_offset} is not a multiple of the alignment {alignment}"
            )?,
            Self::BufferTooSmall { needed, capacity, .. } => write!(
                f,
                "item needs {needed} contiguous bytes but the buffer holds {capacity}"
            )?,
            Self::Io { kind, .. } => write!(f, "read failed: {kind:?}")?,
            Self::DuplicateKey { .. } => write!(f, "duplicate metadata key")?,
            Self::DuplicateTensor { .. } => write!(f, "duplicate tensor name")?,
            // "at byte" is kept for the error's own offset (the tensor info), once per message.
            Self::TensorOutOfBounds { end, file_size, .. } => write!(
                f,
                "tensor data runs past the end of the file (it ends at offset {end}, the file has {file_size} bytes)"
            )?,
            Self::TensorOverlap { .. } => write!(f, "tensor data overlaps another tensor's")?,
            Self::PartialBlock { ggml_type, len } => write!(
                f,
                "length {len} is not a whole number of {ggml_type} blocks"
            )?,
            Self::LengthMismatch { expected, found } => {
                write!(f, "length mismatch: expected {expected}, found {found}")?
            }
            Self::Unsupported { ggml_type, op } => {
                write!(f, "{} is not available for {ggml_type}", op.as_str())?;
                if op == Op::Quantize && ggml_type.is_quantized() {
                    f.write_str(" (ggml quantizes it only with an importance matrix or tables built at run time)")?;
                }
                if op == Op::Pack {
                    f.write_str(" (rows are packed for Q4_0, Q4_1, Q5_0 and Q8_0)")?;
                }
                if op == Op::FromBigEndian {
                    f.write_str(" (gguf-convert-endian defines the big-endian layout of F32, F16, BF16, Q4_0, Q8_0, Q4_K, Q6_K, MXFP4 and NVFP4 only)")?;
                }
            }
            Self::LevelUnknown => f.write_str(
                "unknown kernel level (expected one of auto, scalar, neon, dotprod, i8mm, avx2, avx512vnni, amx)",
            )?,
            Self::LevelUnavailable { level, best } => write!(
                f,
                "kernel level {level} is not available on this CPU or build (best available: {best})"
            )?,
            Self::WriterMisuse { problem, .. } => write!(f, "GGUF writer misuse: {problem}")?,
            Self::WriteFailed { kind, .. } => write!(f, "write failed: {kind:?}")?,
        }
        if let Some(offset) = self.offset() {
            write!(f, " at byte {offset}")?;
        }
        Ok(())
    }
}

impl core::error::Error for Error {}

/// The crate's result type.
pub type Result<T, E = Error> = core::result::Result<T, E>;
