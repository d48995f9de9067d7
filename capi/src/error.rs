//! Error codes and the error record: each of the core's errors, and each misuse of the C API, as a
//! negative code plus the byte offset, the limit and the values involved.

use core::ffi::c_char;

use miniquant::error::{AlignmentProblem, Field, Limit};
use miniquant::Error;

use crate::ffi::c_str;

/// Success.
pub const MQ_OK: i32 = 0;
/// `mq_parser_next`: the header is complete, no event was written.
pub const MQ_DONE: i32 = 1;

/// The file does not start with `GGUF` (`found`: its first four bytes, little-endian).
pub const MQ_E_BAD_MAGIC: i32 = -1;
/// A GGUF version other than 1, 2 or 3 (`found`).
pub const MQ_E_UNSUPPORTED_VERSION: i32 = -2;
/// The input ends inside `field` (`expected`: bytes needed, `available`: bytes left).
pub const MQ_E_TRUNCATED: i32 = -3;
/// A count, length or depth exceeds `limit` (`expected`: the limit's value, `found`: the file's).
pub const MQ_E_LIMIT_EXCEEDED: i32 = -4;
/// A count or length in `field` (`found`) cannot fit the bytes left (`expected`: bytes it needs,
/// `available`).
pub const MQ_E_EXCEEDS_INPUT: i32 = -5;
/// A key, string or tensor name (`field`) is not UTF-8; `offset`: the first bad byte.
pub const MQ_E_INVALID_UTF8: i32 = -6;
/// An empty key or tensor name (`field`).
pub const MQ_E_EMPTY_NAME: i32 = -7;
/// A key or tensor name (`field`) contains a NUL byte.
pub const MQ_E_NUL_IN_NAME: i32 = -8;
/// A bool other than 0 or 1 (`found`).
pub const MQ_E_INVALID_BOOL: i32 = -9;
/// A metadata value type code outside 0..=12 (`found`).
pub const MQ_E_INVALID_VALUE_TYPE: i32 = -10;
/// A ggml type code no ggml version defines (`found`), in a file or passed to a kernel.
pub const MQ_E_UNKNOWN_GGML_TYPE: i32 = -11;
/// A ggml type code ggml removed (`found`: 4, 5, 31..=33, 36..=38).
pub const MQ_E_REMOVED_GGML_TYPE: i32 = -12;
/// `general.alignment` is unusable (`detail`: `MQ_ALIGNMENT_*`, `found`: the value or its type).
pub const MQ_E_BAD_ALIGNMENT: i32 = -13;
/// A tensor dimension above `INT64_MAX` (`found`).
pub const MQ_E_DIMENSION_TOO_LARGE: i32 = -14;
/// A tensor's element count, byte count or end offset overflows 64 bits.
pub const MQ_E_SHAPE_OVERFLOW: i32 = -15;
/// A tensor's first dimension (`found`) is not whole blocks of its type (`detail`: the type code,
/// `expected`: its block size).
pub const MQ_E_NOT_WHOLE_BLOCKS: i32 = -16;
/// A tensor's data offset (`found`) is not a multiple of the alignment (`expected`).
pub const MQ_E_MISALIGNED_TENSOR: i32 = -17;
/// A key or tensor info needs `expected` contiguous bytes; the read buffer holds `found`.
pub const MQ_E_BUFFER_TOO_SMALL: i32 = -18;
/// The read callback returned a negative value, or more bytes than asked for.
pub const MQ_E_IO: i32 = -19;
/// A key appears twice.
pub const MQ_E_DUPLICATE_KEY: i32 = -20;
/// A tensor name appears twice.
pub const MQ_E_DUPLICATE_TENSOR: i32 = -21;
/// A tensor's data ends (`found`) past the end of the file (`expected`: the file size).
pub const MQ_E_TENSOR_OUT_OF_BOUNDS: i32 = -22;
/// Two tensors' data overlap.
pub const MQ_E_TENSOR_OVERLAP: i32 = -23;
/// A length (`found`) is not whole blocks of the type (`detail`: the type code).
pub const MQ_E_PARTIAL_BLOCK: i32 = -24;
/// Two lengths that must agree do not (`expected`, `found`).
pub const MQ_E_LENGTH_MISMATCH: i32 = -25;
/// The operation (`found`: `MQ_OP_*`) is not available for the type (`detail`: its code).
pub const MQ_E_UNSUPPORTED: i32 = -26;
/// A kernel level this CPU or build lacks.
pub const MQ_E_LEVEL_UNAVAILABLE: i32 = -27;
/// An error of the core this version of the C API has no code for.
pub const MQ_E_OTHER: i32 = -63;

/// A pointer that may not be NULL was NULL (or NULL with a non-zero length).
pub const MQ_E_NULL: i32 = -64;
/// A pointer not aligned for its element type.
pub const MQ_E_MISALIGNED_POINTER: i32 = -65;
/// A length whose byte size does not fit the address space.
pub const MQ_E_TOO_LONG: i32 = -66;
/// A buffer the call writes overlaps another buffer of the call.
pub const MQ_E_OVERLAP: i32 = -67;
/// A name passed from C is not UTF-8.
pub const MQ_E_NAME_NOT_UTF8: i32 = -68;
/// More names than the catalog holds (`found`: asked, `expected`: capacity).
pub const MQ_E_TOO_MANY_NAMES: i32 = -69;
/// The `mq_parser` was not initialised by `mq_parser_init_*`.
pub const MQ_E_NOT_INITIALISED: i32 = -70;

/// `mq_error.limit`: none.
pub const MQ_LIMIT_NONE: i32 = 0;
/// `mq_limits.max_depth`.
pub const MQ_LIMIT_DEPTH: i32 = 1;
/// `mq_limits.max_string_bytes`.
pub const MQ_LIMIT_STRING_BYTES: i32 = 2;
/// `mq_limits.max_key_bytes`.
pub const MQ_LIMIT_KEY_BYTES: i32 = 3;
/// `mq_limits.max_array_len`.
pub const MQ_LIMIT_ARRAY_LEN: i32 = 4;
/// `mq_limits.max_metadata`.
pub const MQ_LIMIT_METADATA_COUNT: i32 = 5;
/// `mq_limits.max_tensors`.
pub const MQ_LIMIT_TENSOR_COUNT: i32 = 6;
/// `mq_limits.max_dims`.
pub const MQ_LIMIT_DIMS: i32 = 7;

/// `mq_error.detail` of `MQ_E_BAD_ALIGNMENT`: the value is not a u32 (`found`: its value type).
pub const MQ_ALIGNMENT_NOT_U32: i32 = 1;
/// The alignment is 0.
pub const MQ_ALIGNMENT_ZERO: i32 = 2;
/// The alignment (`found`) is not a power of two.
pub const MQ_ALIGNMENT_NOT_POWER_OF_TWO: i32 = 3;
/// `general.alignment` appears twice.
pub const MQ_ALIGNMENT_DUPLICATE: i32 = 4;

/// An error: what, where and which limit. All fields are 0 when the call succeeded; fields an
/// error does not use are 0.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct mq_error {
    /// `MQ_E_*`, or `MQ_OK`.
    pub code: i32,
    /// `MQ_LIMIT_*` for `MQ_E_LIMIT_EXCEEDED`, else `MQ_LIMIT_NONE`.
    pub limit: i32,
    /// The header field involved (`MQ_FIELD_*`), 0 if none.
    pub field: i32,
    /// A code-specific detail (see each `MQ_E_*`).
    pub detail: i32,
    /// 1 if `offset` is a byte offset in the input, 0 if the error has none (kernel errors).
    pub has_offset: i32,
    /// Byte offset in the input that the error points at.
    pub offset: u64,
    /// The value found (count, length, code, ...).
    pub found: u64,
    /// The value allowed or needed (the limit's value, the length required, ...).
    pub expected: u64,
    /// Bytes that remained in the input, where it matters.
    pub available: u64,
}

impl mq_error {
    /// No error.
    pub(crate) const NONE: mq_error = mq_error {
        code: MQ_OK,
        limit: MQ_LIMIT_NONE,
        field: 0,
        detail: 0,
        has_offset: 0,
        offset: 0,
        found: 0,
        expected: 0,
        available: 0,
    };
}

/// What went wrong in a call: an error of the core, or a misuse caught at the boundary.
#[derive(Clone, Copy, Debug)]
pub enum Failure {
    /// An error of the core.
    Core(Error),
    /// NULL pointer.
    Null,
    /// Misaligned pointer.
    Misaligned,
    /// Byte size beyond the address space.
    TooLong,
    /// A written buffer overlaps another.
    Overlap,
    /// A name from C is not UTF-8.
    NotUtf8,
    /// More names than capacity.
    TooManyNames {
        /// Names passed.
        found: usize,
        /// Capacity.
        capacity: usize,
    },
    /// Uninitialised parser.
    NotInitialised,
    /// A ggml type code passed to a kernel that is not a ggml type.
    TypeCode {
        /// The code.
        code: u32,
        /// Whether ggml removed it (else no ggml version defined it).
        removed: bool,
    },
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Core(e)
    }
}

const fn limit_code(limit: Limit) -> i32 {
    match limit {
        Limit::Depth => MQ_LIMIT_DEPTH,
        Limit::StringBytes => MQ_LIMIT_STRING_BYTES,
        Limit::KeyBytes => MQ_LIMIT_KEY_BYTES,
        Limit::ArrayLen => MQ_LIMIT_ARRAY_LEN,
        Limit::MetadataCount => MQ_LIMIT_METADATA_COUNT,
        Limit::TensorCount => MQ_LIMIT_TENSOR_COUNT,
        Limit::Dims => MQ_LIMIT_DIMS,
        #[allow(unreachable_patterns)]
        _ => MQ_LIMIT_NONE,
    }
}

/// `mq_error.field` values: the header field involved.
pub const MQ_FIELD_MAGIC: i32 = 1;
/// The u32 version.
pub const MQ_FIELD_VERSION: i32 = 2;
/// The tensor count.
pub const MQ_FIELD_TENSOR_COUNT: i32 = 3;
/// The metadata count.
pub const MQ_FIELD_METADATA_COUNT: i32 = 4;
/// A metadata key.
pub const MQ_FIELD_KEY: i32 = 5;
/// A value type code.
pub const MQ_FIELD_VALUE_TYPE: i32 = 6;
/// A metadata value.
pub const MQ_FIELD_VALUE: i32 = 7;
/// A string value.
pub const MQ_FIELD_STRING: i32 = 8;
/// An array's element type and length.
pub const MQ_FIELD_ARRAY_HEADER: i32 = 9;
/// A tensor name.
pub const MQ_FIELD_TENSOR_NAME: i32 = 10;
/// A tensor's dimension count.
pub const MQ_FIELD_DIMENSION_COUNT: i32 = 11;
/// A tensor dimension.
pub const MQ_FIELD_DIMENSION: i32 = 12;

const fn field_code(field: Field) -> i32 {
    match field {
        Field::Magic => MQ_FIELD_MAGIC,
        Field::Version => MQ_FIELD_VERSION,
        Field::TensorCount => MQ_FIELD_TENSOR_COUNT,
        Field::MetadataCount => MQ_FIELD_METADATA_COUNT,
        Field::Key => MQ_FIELD_KEY,
        Field::ValueType => MQ_FIELD_VALUE_TYPE,
        Field::Value => MQ_FIELD_VALUE,
        Field::String => MQ_FIELD_STRING,
        Field::ArrayHeader => MQ_FIELD_ARRAY_HEADER,
        Field::TensorName => MQ_FIELD_TENSOR_NAME,
        Field::DimensionCount => MQ_FIELD_DIMENSION_COUNT,
        Field::Dimension => MQ_FIELD_DIMENSION,
        #[allow(unreachable_patterns)]
        _ => 0,
    }
}

impl Failure {
    /// The C record of this failure.
    pub fn to_c(self) -> mq_error {
        let plain = |code| mq_error {
            code,
            ..mq_error::NONE
        };
        match self {
            Failure::Core(e) => core_error(e),
            Failure::Null => plain(MQ_E_NULL),
            Failure::Misaligned => plain(MQ_E_MISALIGNED_POINTER),
            Failure::TooLong => plain(MQ_E_TOO_LONG),
            Failure::Overlap => plain(MQ_E_OVERLAP),
            Failure::NotUtf8 => plain(MQ_E_NAME_NOT_UTF8),
            Failure::TooManyNames { found, capacity } => mq_error {
                found: found as u64,
                expected: capacity as u64,
                ..plain(MQ_E_TOO_MANY_NAMES)
            },
            Failure::NotInitialised => plain(MQ_E_NOT_INITIALISED),
            Failure::TypeCode { code, removed } => mq_error {
                found: u64::from(code),
                ..plain(if removed {
                    MQ_E_REMOVED_GGML_TYPE
                } else {
                    MQ_E_UNKNOWN_GGML_TYPE
                })
            },
        }
    }
}

/// The C record of an error of the core. One function, so that a change of the core's error type
/// is one place to follow.
fn core_error(e: Error) -> mq_error {
    let mut c = mq_error::NONE;
    if let Some(offset) = e.offset() {
        c.has_offset = 1;
        c.offset = offset;
    }
    c.code = match e {
        Error::BadMagic { found } => {
            c.found = u64::from(u32::from_le_bytes(found));
            MQ_E_BAD_MAGIC
        }
        Error::UnsupportedVersion { version } => {
            c.found = u64::from(version);
            MQ_E_UNSUPPORTED_VERSION
        }
        Error::Truncated {
            field,
            needed,
            available,
            ..
        } => {
            c.field = field_code(field);
            c.expected = needed;
            c.available = available;
            MQ_E_TRUNCATED
        }
        Error::LimitExceeded {
            limit, max, found, ..
        } => {
            c.limit = limit_code(limit);
            c.expected = max;
            c.found = found;
            MQ_E_LIMIT_EXCEEDED
        }
        Error::ExceedsInput {
            field,
            found,
            needed,
            available,
            ..
        } => {
            c.field = field_code(field);
            c.found = found;
            c.expected = needed;
            c.available = available;
            MQ_E_EXCEEDS_INPUT
        }
        Error::InvalidUtf8 { field, .. } => {
            c.field = field_code(field);
            MQ_E_INVALID_UTF8
        }
        Error::EmptyName { field, .. } => {
            c.field = field_code(field);
            MQ_E_EMPTY_NAME
        }
        Error::NulInName { field, .. } => {
            c.field = field_code(field);
            MQ_E_NUL_IN_NAME
        }
        Error::InvalidBool { value, .. } => {
            c.found = u64::from(value);
            MQ_E_INVALID_BOOL
        }
        Error::InvalidValueType { code, .. } => {
            c.found = u64::from(code);
            MQ_E_INVALID_VALUE_TYPE
        }
        Error::UnknownGgmlType { code, .. } => {
            c.found = u64::from(code);
            MQ_E_UNKNOWN_GGML_TYPE
        }
        Error::RemovedGgmlType { code, .. } => {
            c.found = u64::from(code);
            MQ_E_REMOVED_GGML_TYPE
        }
        Error::BadAlignment { problem, .. } => {
            (c.detail, c.found) = match problem {
                AlignmentProblem::NotU32(t) => (MQ_ALIGNMENT_NOT_U32, u64::from(t.code())),
                AlignmentProblem::Zero => (MQ_ALIGNMENT_ZERO, 0),
                AlignmentProblem::NotPowerOfTwo(a) => (MQ_ALIGNMENT_NOT_POWER_OF_TWO, u64::from(a)),
                AlignmentProblem::Duplicate => (MQ_ALIGNMENT_DUPLICATE, 0),
                #[allow(unreachable_patterns)]
                _ => (0, 0),
            };
            MQ_E_BAD_ALIGNMENT
        }
        Error::DimensionTooLarge { value, .. } => {
            c.found = value;
            MQ_E_DIMENSION_TOO_LARGE
        }
        Error::ShapeOverflow { .. } => MQ_E_SHAPE_OVERFLOW,
        Error::NotWholeBlocks { ggml_type, ne0, .. } => {
            c.detail = ggml_type.code() as i32;
            c.found = ne0;
            c.expected = u64::from(ggml_type.block_size());
            MQ_E_NOT_WHOLE_BLOCKS
        }
        Error::MisalignedTensor {
            tensor_offset,
            alignment,
            ..
        } => {
            c.found = tensor_offset;
            c.expected = u64::from(alignment);
            MQ_E_MISALIGNED_TENSOR
        }
        Error::BufferTooSmall {
            needed, capacity, ..
        } => {
            c.found = capacity;
            c.expected = needed;
            MQ_E_BUFFER_TOO_SMALL
        }
        Error::Io { .. } => MQ_E_IO,
        Error::DuplicateKey { .. } => MQ_E_DUPLICATE_KEY,
        Error::DuplicateTensor { .. } => MQ_E_DUPLICATE_TENSOR,
        Error::TensorOutOfBounds { end, file_size, .. } => {
            c.found = end;
            c.expected = file_size;
            MQ_E_TENSOR_OUT_OF_BOUNDS
        }
        Error::TensorOverlap { .. } => MQ_E_TENSOR_OVERLAP,
        Error::PartialBlock { ggml_type, len } => {
            c.detail = ggml_type.code() as i32;
            c.found = len;
            MQ_E_PARTIAL_BLOCK
        }
        Error::LengthMismatch { expected, found } => {
            c.expected = expected;
            c.found = found;
            MQ_E_LENGTH_MISMATCH
        }
        Error::Unsupported { ggml_type, op } => {
            c.detail = ggml_type.code() as i32;
            c.found = op as u64;
            MQ_E_UNSUPPORTED
        }
        Error::LevelUnavailable { level, .. } => {
            c.found = level as u64;
            MQ_E_LEVEL_UNAVAILABLE
        }
        _ => MQ_E_OTHER,
    };
    c
}

/// The name of an error code: the core's name for the error (`"LimitExceeded"`, ...) or the C
/// API's (`"Null"`, ...); `"Ok"` for `MQ_OK`, `"Done"` for `MQ_DONE`, `"Unknown"` otherwise.
/// The string is static and NUL-terminated.
#[no_mangle]
pub extern "C" fn mq_error_name(code: i32) -> *const c_char {
    c_str(match code {
        MQ_OK => c"Ok",
        MQ_DONE => c"Done",
        MQ_E_BAD_MAGIC => c"BadMagic",
        MQ_E_UNSUPPORTED_VERSION => c"UnsupportedVersion",
        MQ_E_TRUNCATED => c"Truncated",
        MQ_E_LIMIT_EXCEEDED => c"LimitExceeded",
        MQ_E_EXCEEDS_INPUT => c"ExceedsInput",
        MQ_E_INVALID_UTF8 => c"InvalidUtf8",
        MQ_E_EMPTY_NAME => c"EmptyName",
        MQ_E_NUL_IN_NAME => c"NulInName",
        MQ_E_INVALID_BOOL => c"InvalidBool",
        MQ_E_INVALID_VALUE_TYPE => c"InvalidValueType",
        MQ_E_UNKNOWN_GGML_TYPE => c"UnknownGgmlType",
        MQ_E_REMOVED_GGML_TYPE => c"RemovedGgmlType",
        MQ_E_BAD_ALIGNMENT => c"BadAlignment",
        MQ_E_DIMENSION_TOO_LARGE => c"DimensionTooLarge",
        MQ_E_SHAPE_OVERFLOW => c"ShapeOverflow",
        MQ_E_NOT_WHOLE_BLOCKS => c"NotWholeBlocks",
        MQ_E_MISALIGNED_TENSOR => c"MisalignedTensor",
        MQ_E_BUFFER_TOO_SMALL => c"BufferTooSmall",
        MQ_E_IO => c"Io",
        MQ_E_DUPLICATE_KEY => c"DuplicateKey",
        MQ_E_DUPLICATE_TENSOR => c"DuplicateTensor",
        MQ_E_TENSOR_OUT_OF_BOUNDS => c"TensorOutOfBounds",
        MQ_E_TENSOR_OVERLAP => c"TensorOverlap",
        MQ_E_PARTIAL_BLOCK => c"PartialBlock",
        MQ_E_LENGTH_MISMATCH => c"LengthMismatch",
        MQ_E_UNSUPPORTED => c"Unsupported",
        MQ_E_LEVEL_UNAVAILABLE => c"LevelUnavailable",
        MQ_E_OTHER => c"Other",
        MQ_E_NULL => c"Null",
        MQ_E_MISALIGNED_POINTER => c"MisalignedPointer",
        MQ_E_TOO_LONG => c"TooLong",
        MQ_E_OVERLAP => c"Overlap",
        MQ_E_NAME_NOT_UTF8 => c"NameNotUtf8",
        MQ_E_TOO_MANY_NAMES => c"TooManyNames",
        MQ_E_NOT_INITIALISED => c"NotInitialised",
        _ => c"Unknown",
    })
}

/// The `mq_limits` field a `MQ_LIMIT_*` code names (`"max_metadata"`, ...), `""` for none. Static,
/// NUL-terminated.
#[no_mangle]
pub extern "C" fn mq_limit_name(limit: i32) -> *const c_char {
    c_str(match limit {
        MQ_LIMIT_DEPTH => c"max_depth",
        MQ_LIMIT_STRING_BYTES => c"max_string_bytes",
        MQ_LIMIT_KEY_BYTES => c"max_key_bytes",
        MQ_LIMIT_ARRAY_LEN => c"max_array_len",
        MQ_LIMIT_METADATA_COUNT => c"max_metadata",
        MQ_LIMIT_TENSOR_COUNT => c"max_tensors",
        MQ_LIMIT_DIMS => c"max_dims",
        _ => c"",
    })
}
