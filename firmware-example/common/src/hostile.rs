//! Hostile headers with the error each must give, worked out from the GGUF layout (magic, u32
//! version, u64 tensor count, u64 metadata count, then length-prefixed keys and tensor infos).

use miniquant::Error;

/// A metadata value type code of 13 (valid codes are 0..=12), at byte 24 + 8 + 1 = 33; eight more
/// bytes follow, so that the pair fits what remains.
const BAD_VALUE_TYPE: &[u8] = b"GGUF\x03\0\0\0\
    \0\0\0\0\0\0\0\0\
    \x01\0\0\0\0\0\0\0\
    \x01\0\0\0\0\0\0\0a\
    \x0d\0\0\0\
    \0\0\0\0\0\0\0\0";

/// A tensor of ggml type 99 (no ggml version defines it): name at 24, one dimension at 37, the type
/// code at 24 + 8 + 1 + 4 + 8 = 45.
const UNKNOWN_GGML_TYPE: &[u8] = b"GGUF\x03\0\0\0\
    \x01\0\0\0\0\0\0\0\
    \0\0\0\0\0\0\0\0\
    \x01\0\0\0\0\0\0\0w\
    \x01\0\0\0\
    \x20\0\0\0\0\0\0\0\
    \x63\0\0\0\
    \0\0\0\0\0\0\0\0";

/// A metadata count of 2^40, far above `Limits::max_metadata` (2^20), at byte 16.
const HUGE_METADATA_COUNT: &[u8] = b"GGUF\x03\0\0\0\
    \0\0\0\0\0\0\0\0\
    \0\0\0\0\0\x01\0\0";

/// A hostile header and what parsing it must give.
pub struct Hostile {
    /// What is wrong with it.
    pub name: &'static str,
    /// Its bytes.
    pub bytes: &'static [u8],
    /// Whether the parser's error is the expected one.
    pub expected: fn(&Error) -> bool,
}

/// The hostile headers.
pub const HOSTILE: [Hostile; 3] = [
    Hostile {
        name: "value type 13",
        bytes: BAD_VALUE_TYPE,
        expected: |e| {
            *e == Error::InvalidValueType {
                code: 13,
                offset: 33,
            }
        },
    },
    Hostile {
        name: "ggml type 99",
        bytes: UNKNOWN_GGML_TYPE,
        expected: |e| {
            *e == Error::UnknownGgmlType {
                code: 99,
                offset: 45,
            }
        },
    },
    Hostile {
        name: "2^40 metadata pairs",
        bytes: HUGE_METADATA_COUNT,
        // Over the limit and over the bytes that remain: either check may fire first.
        expected: |e| {
            matches!(
                e,
                Error::LimitExceeded {
                    found: 0x100_0000_0000,
                    offset: 16,
                    ..
                } | Error::ExceedsInput {
                    found: 0x100_0000_0000,
                    offset: 16,
                    ..
                }
            )
        },
    },
];
