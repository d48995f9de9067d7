//! Hostile GGUF headers: one test per case, each asserting the specific error (variant, values and
//! byte offset, taken from where the crafted file put the offending field) from the slice driver
//! and the same error from the `Read` driver. candle-core 0.11.0 reads every file too, inside
//! `catch_unwind`, and its outcome is printed beside ours (and asserted where it panics).
//!
//! Run with `--nocapture` to see the side-by-side lines.

use candle_core::quantized::gguf_file::{Content, Value as CValue};
use miniquant::error::{AlignmentProblem, Field, Limit};
use miniquant::gguf::{ByteOrder, Feed, Limits, Parser, Step, ValueType};
use miniquant::{Error, GgmlType};
use miniquant_tests::cache::model_path;
use miniquant_tests::craft::{code, Endian, GgufFile, Tensor, Value, Writer};
use miniquant_tests::drive::{self, Ev};
use std::time::Instant;

const KIB: usize = 1024;
const F32: u32 = 0;
const Q4_0: u32 = 2;

// ----- drivers -----------------------------------------------------------------------------

/// The error the slice driver ends with; the `Read` and push drivers (told the total length) must
/// end with the same error after the same events, through a 4096-byte buffer (plus `buffers`) and
/// reads or chunks of 4096 bytes (plus 1 and 7 bytes for files up to 64 KiB).
fn error_of(case: &str, bytes: &[u8], limits: Limits, buffers: &[usize]) -> Error {
    let slice = drive::slice(bytes, limits);
    let error = slice
        .error
        .unwrap_or_else(|| panic!("{case}: the slice driver accepted the file"));
    let mut read_sizes = vec![vec![4096]];
    if bytes.len() <= 64 * KIB {
        read_sizes.extend([vec![1], vec![7]]);
    }
    for &buffer in [4096].iter().chain(buffers) {
        for sizes in &read_sizes {
            let read = drive::read_chunked(
                bytes,
                sizes.clone(),
                buffer,
                Some(bytes.len() as u64),
                limits,
            );
            assert_eq!(
                read.error,
                Some(error),
                "{case}: read driver (buffer {buffer}, reads {sizes:?})"
            );
            assert_eq!(
                read.events, slice.events,
                "{case}: events before the error (buffer {buffer})"
            );
            let push = drive::push(bytes, sizes, buffer, Some(bytes.len() as u64), limits);
            assert_eq!(
                push.result(),
                slice.result(),
                "{case}: push driver (buffer {buffer}, chunks {sizes:?})"
            );
        }
    }
    error
}

/// Asserts that every driver rejects `bytes` with exactly `expected`.
fn rejects(case: &str, bytes: &[u8], expected: Error) {
    rejects_within(case, bytes, Limits::DEFAULT, expected);
}

fn rejects_within(case: &str, bytes: &[u8], limits: Limits, expected: Error) {
    let error = error_of(case, bytes, limits, &[]);
    assert_eq!(error, expected, "{case}");
    println!("{case}: ours: {error}");
}

/// Asserts that every driver rejects `bytes` with the same error, one that `check` accepts (for
/// errors with implementation-defined fields, such as a saturated byte count).
fn rejects_as(
    case: &str,
    bytes: &[u8],
    limits: Limits,
    what: &str,
    check: impl Fn(&Error) -> bool,
) -> Error {
    let error = error_of(case, bytes, limits, &[]);
    assert!(check(&error), "{case}: expected {what}, got {error:?}");
    println!("{case}: ours: {error}");
    error
}

/// Asserts that every driver parses `bytes` through `End` with the same events; returns them.
fn accepts(case: &str, bytes: &[u8], limits: Limits) -> Vec<Ev> {
    let slice = drive::slice(bytes, limits);
    assert!(
        slice.is_complete(),
        "{case}: slice driver: {:?}",
        slice.error
    );
    for sizes in [vec![4096], vec![1], vec![7]] {
        let read =
            drive::read_chunked(bytes, sizes.clone(), 4096, Some(bytes.len() as u64), limits);
        assert_eq!(
            read.result(),
            slice.result(),
            "{case}: read driver (reads {sizes:?})"
        );
    }
    slice.events
}

// ----- candle ------------------------------------------------------------------------------

enum Candle {
    Read(Content),
    Failed(String),
    Panicked(String),
}

impl std::fmt::Display for Candle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Read(c) => write!(
                f,
                "OK ({} keys, {} tensors, data offset {})",
                c.metadata.len(),
                c.tensor_infos.len(),
                c.tensor_data_offset
            ),
            Self::Failed(e) => write!(f, "error: {e}"),
            Self::Panicked(m) => write!(f, "PANIC: {m}"),
        }
    }
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(non-string panic)".into())
}

/// candle's `Content::read` over the bytes, panics caught.
fn candle(case: &str, bytes: &[u8]) -> Candle {
    let outcome = match std::panic::catch_unwind(|| Content::read(&mut std::io::Cursor::new(bytes)))
    {
        Ok(Ok(content)) => Candle::Read(content),
        Ok(Err(e)) => Candle::Failed(e.to_string().lines().next().unwrap_or("").to_owned()),
        Err(payload) => Candle::Panicked(panic_message(payload)),
    };
    println!("{case}: candle: {outcome}");
    outcome
}

fn assert_candle_panics(case: &str, bytes: &[u8], message: &str) {
    match candle(case, bytes) {
        Candle::Panicked(m) => assert!(m.contains(message), "{case}: candle panicked with {m:?}"),
        other => panic!("{case}: expected candle to panic ({message}), got {other}"),
    }
}

// ----- file builders -----------------------------------------------------------------------

/// A v3 little-endian writer after a header declaring `tensors` and `kvs`.
fn file(tensors: u64, kvs: u64) -> Writer {
    let mut w = Writer::new();
    w.header(3, tensors, kvs);
    w
}

/// A file with one key `general.alignment` of type `type_code`; returns the bytes and the
/// offsets of the type code and of the value.
fn alignment_file(type_code: u32, value: &Value) -> (Vec<u8>, u64, u64) {
    let mut w = file(0, 1);
    w.string(b"general.alignment");
    let type_at = w.position();
    w.u32(type_code);
    let value_at = w.position();
    w.value(value);
    (w.into_bytes(), type_at, value_at)
}

/// A file with one tensor info (after `general.alignment` when given); returns the bytes and the
/// offset of the tensor info.
fn one_tensor(alignment: Option<u32>, write: impl FnOnce(&mut Writer)) -> (Vec<u8>, u64) {
    let mut w = file(1, u64::from(alignment.is_some()));
    if let Some(a) = alignment {
        w.kv(b"general.alignment", &Value::U32(a));
    }
    let at = w.position();
    write(&mut w);
    (w.into_bytes(), at)
}

fn tensor(w: &mut Writer, ne: &[u64], type_code: u32, offset: u64) {
    w.tensor_info(b"t", ne, type_code, offset);
}

// ----- 1. general.alignment ------------------------------------------------------------------

#[test]
fn alignment_u32_zero_is_rejected_where_candle_panics() {
    let (bytes, _, value_at) = alignment_file(code::U32, &Value::U32(0));
    rejects(
        "alignment u32 0",
        &bytes,
        Error::BadAlignment {
            problem: AlignmentProblem::Zero,
            offset: value_at,
        },
    );
    assert_candle_panics("alignment u32 0", &bytes, "divide by zero");
}

#[test]
fn alignment_u8_zero_is_rejected_where_candle_panics() {
    let (bytes, type_at, _) = alignment_file(code::U8, &Value::U8(0));
    let problem = AlignmentProblem::NotU32(ValueType::U8);
    rejects(
        "alignment u8 0",
        &bytes,
        Error::BadAlignment {
            problem,
            offset: type_at,
        },
    );
    assert_candle_panics("alignment u8 0", &bytes, "divide by zero");
}

#[test]
fn alignment_u64_zero_is_rejected() {
    let (bytes, type_at, _) = alignment_file(code::U64, &Value::U64(0));
    let problem = AlignmentProblem::NotU32(ValueType::U64);
    rejects(
        "alignment u64 0",
        &bytes,
        Error::BadAlignment {
            problem,
            offset: type_at,
        },
    );
    candle("alignment u64 0", &bytes);
}

#[test]
fn alignment_u32_three_is_rejected() {
    let (bytes, _, value_at) = alignment_file(code::U32, &Value::U32(3));
    let problem = AlignmentProblem::NotPowerOfTwo(3);
    rejects(
        "alignment u32 3",
        &bytes,
        Error::BadAlignment {
            problem,
            offset: value_at,
        },
    );
    if let Candle::Read(c) = candle("alignment u32 3", &bytes) {
        assert_eq!(c.tensor_data_offset % 3, 0, "candle aligns to 3");
    }
}

#[test]
fn alignment_u64_64_is_rejected() {
    let (bytes, type_at, _) = alignment_file(code::U64, &Value::U64(64));
    let problem = AlignmentProblem::NotU32(ValueType::U64);
    rejects(
        "alignment u64 64",
        &bytes,
        Error::BadAlignment {
            problem,
            offset: type_at,
        },
    );
    candle("alignment u64 64", &bytes);
}

#[test]
fn alignment_string_32_is_rejected() {
    let (bytes, type_at, _) = alignment_file(code::STRING, &Value::str("32"));
    let problem = AlignmentProblem::NotU32(ValueType::String);
    rejects(
        "alignment string \"32\"",
        &bytes,
        Error::BadAlignment {
            problem,
            offset: type_at,
        },
    );
    candle("alignment string \"32\"", &bytes);
}

#[test]
fn alignment_duplicate_32_then_0_is_rejected_where_candle_panics() {
    let mut w = file(0, 2);
    w.kv(b"general.alignment", &Value::U32(32));
    let second = w.position();
    w.kv(b"general.alignment", &Value::U32(0));
    let bytes = w.into_bytes();
    let problem = AlignmentProblem::Duplicate;
    rejects(
        "alignment 32 then 0",
        &bytes,
        Error::BadAlignment {
            problem,
            offset: second,
        },
    );
    assert_candle_panics("alignment 32 then 0", &bytes, "divide by zero");
}

// ----- 2. huge counts ------------------------------------------------------------------------

#[test]
fn metadata_count_2_62_is_rejected() {
    let bytes = file(0, 1 << 62).into_bytes();
    let expected = Error::LimitExceeded {
        limit: Limit::MetadataCount,
        max: 1 << 20,
        found: 1 << 62,
        offset: 16,
    };
    rejects("metadata count 2^62", &bytes, expected);
    candle("metadata count 2^62", &bytes);
}

#[test]
fn metadata_count_2_40_is_rejected() {
    let bytes = file(0, 1 << 40).into_bytes();
    let expected = Error::LimitExceeded {
        limit: Limit::MetadataCount,
        max: 1 << 20,
        found: 1 << 40,
        offset: 16,
    };
    rejects("metadata count 2^40", &bytes, expected);
    candle("metadata count 2^40", &bytes);
}

#[test]
fn tensor_count_2_40_is_rejected() {
    let bytes = file(1 << 40, 0).into_bytes();
    let expected = Error::LimitExceeded {
        limit: Limit::TensorCount,
        max: 1 << 20,
        found: 1 << 40,
        offset: 8,
    };
    rejects("tensor count 2^40", &bytes, expected);
    candle("tensor count 2^40", &bytes);
}

#[test]
fn tensor_count_2_62_is_rejected() {
    let bytes = file(1 << 62, 0).into_bytes();
    let expected = Error::LimitExceeded {
        limit: Limit::TensorCount,
        max: 1 << 20,
        found: 1 << 62,
        offset: 8,
    };
    rejects("tensor count 2^62", &bytes, expected);
}

#[test]
fn counts_within_limits_but_beyond_the_input_are_rejected() {
    // 2^20 tensors need at least 24 bytes each; the file ends after the header.
    let bytes = file(1 << 20, 0).into_bytes();
    rejects_as(
        "2^20 tensors in 24 bytes",
        &bytes,
        Limits::DEFAULT,
        "ExceedsInput(TensorCount) at 8",
        |e| {
            matches!(*e, Error::ExceedsInput { field: Field::TensorCount, found, needed, available: 0, offset: 8 }
            if found == 1 << 20 && needed >= 24 << 20)
        },
    );
    // With the limits lifted, a 2^40 count is caught by the same check: no allocation, no loop.
    let bytes = file(0, 1 << 40).into_bytes();
    let lifted = Limits {
        max_metadata: u64::MAX,
        ..Limits::DEFAULT
    };
    rejects_as(
        "2^40 keys, no limit",
        &bytes,
        lifted,
        "ExceedsInput(MetadataCount) at 16",
        |e| {
            matches!(*e, Error::ExceedsInput { field: Field::MetadataCount, found, available: 0, offset: 16, .. }
            if found == 1 << 40)
        },
    );
}

#[test]
fn string_length_2_40_in_a_tiny_file_is_rejected() {
    let mut w = file(0, 1);
    w.key(b"s", code::STRING);
    let at = w.position();
    w.lying_string(1 << 40, b"short");
    let bytes = w.into_bytes();
    let expected = Error::LimitExceeded {
        limit: Limit::StringBytes,
        max: 1 << 30,
        found: 1 << 40,
        offset: at,
    };
    rejects("string length 2^40", &bytes, expected);
    candle("string length 2^40", &bytes);
}

#[test]
fn string_length_beyond_the_input_is_rejected() {
    let mut w = file(0, 1);
    w.key(b"s", code::STRING);
    let at = w.position();
    w.lying_string(1 << 20, b"short");
    let bytes = w.into_bytes();
    let expected = Error::ExceedsInput {
        field: Field::String,
        found: 1 << 20,
        needed: 1 << 20,
        available: 5,
        offset: at,
    };
    rejects("string length 2^20 in a tiny file", &bytes, expected);
}

// ----- 3. array length vs the remaining bytes -------------------------------------------------

/// A file with one array-valued key whose header says `len` elements of `element_type`; returns
/// the bytes and the offset of the array header.
fn array_file(element_type: u32, len: u64) -> (Vec<u8>, u64) {
    let mut w = file(0, 1);
    w.key(b"a", code::ARRAY);
    let at = w.position();
    w.array_header(element_type, len).raw(&[0; 16]);
    (w.into_bytes(), at)
}

const NO_ARRAY_CAP: Limits = Limits {
    max_array_len: u64::MAX,
    ..Limits::DEFAULT
};

#[test]
fn u8_array_of_2_62_is_rejected() {
    let (bytes, at) = array_file(code::U8, 1 << 62);
    let limit = Error::LimitExceeded {
        limit: Limit::ArrayLen,
        max: 1 << 30,
        found: 1 << 62,
        offset: at + 4,
    };
    rejects("u8 array of 2^62", &bytes, limit);
    let exceeds = Error::ExceedsInput {
        field: Field::ArrayHeader,
        found: 1 << 62,
        needed: 1 << 62,
        available: 16,
        offset: at,
    };
    rejects_within("u8 array of 2^62, no cap", &bytes, NO_ARRAY_CAP, exceeds);
    candle("u8 array of 2^62", &bytes);
}

#[test]
fn u64_array_of_2_61_is_rejected_without_wrapping() {
    let (bytes, at) = array_file(code::U64, 1 << 61);
    let limit = Error::LimitExceeded {
        limit: Limit::ArrayLen,
        max: 1 << 30,
        found: 1 << 61,
        offset: at + 4,
    };
    rejects("u64 array of 2^61", &bytes, limit);
    // 2^61 × 8 bytes is 2^64: a wrapping multiplication would say 0 bytes are needed.
    rejects_as(
        "u64 array of 2^61, no cap",
        &bytes,
        NO_ARRAY_CAP,
        "ExceedsInput without wrap",
        |e| {
            matches!(*e, Error::ExceedsInput { field: Field::ArrayHeader, found, needed, available: 16, offset }
            if found == 1 << 61 && needed >= 1 << 61 && offset == at)
        },
    );
    candle("u64 array of 2^61", &bytes);
}

#[test]
fn string_array_of_2_61_is_rejected_without_wrapping() {
    let (bytes, at) = array_file(code::STRING, 1 << 61);
    let limit = Error::LimitExceeded {
        limit: Limit::ArrayLen,
        max: 1 << 30,
        found: 1 << 61,
        offset: at + 4,
    };
    rejects("string array of 2^61", &bytes, limit);
    // Each string needs at least its 8-byte length: 2^64 bytes in all.
    rejects_as(
        "string array of 2^61, no cap",
        &bytes,
        NO_ARRAY_CAP,
        "ExceedsInput without wrap",
        |e| {
            matches!(*e, Error::ExceedsInput { field: Field::ArrayHeader, found, needed, available: 16, offset }
            if found == 1 << 61 && needed >= 1 << 61 && offset == at)
        },
    );
    candle("string array of 2^61", &bytes);
}

// ----- 4. invalid value types ----------------------------------------------------------------

fn value_type_file(type_code: u32) -> (Vec<u8>, u64) {
    let mut w = file(0, 1);
    w.string(b"k");
    let at = w.position();
    w.u32(type_code).u64(0);
    (w.into_bytes(), at)
}

#[test]
fn value_type_13_is_rejected() {
    let (bytes, at) = value_type_file(13);
    rejects(
        "value type 13",
        &bytes,
        Error::InvalidValueType {
            code: 13,
            offset: at,
        },
    );
    candle("value type 13", &bytes);
}

#[test]
fn value_type_u32_max_is_rejected() {
    let (bytes, at) = value_type_file(u32::MAX);
    rejects(
        "value type 0xFFFFFFFF",
        &bytes,
        Error::InvalidValueType {
            code: u32::MAX,
            offset: at,
        },
    );
    candle("value type 0xFFFFFFFF", &bytes);
}

#[test]
fn array_element_type_13_is_rejected() {
    let (bytes, at) = array_file(13, 1);
    rejects(
        "array element type 13",
        &bytes,
        Error::InvalidValueType {
            code: 13,
            offset: at,
        },
    );
    candle("array element type 13", &bytes);
}

#[test]
fn array_element_type_u32_max_is_rejected() {
    let (bytes, at) = array_file(u32::MAX, 1);
    rejects(
        "array element type 0xFFFFFFFF",
        &bytes,
        Error::InvalidValueType {
            code: u32::MAX,
            offset: at,
        },
    );
    candle("array element type 0xFFFFFFFF", &bytes);
}

// ----- 5. nesting ----------------------------------------------------------------------------

/// A key whose value is `depth` nested arrays; returns the bytes and the offset of the outermost
/// array header.
fn nested_file(depth: usize) -> (Vec<u8>, u64) {
    let mut w = file(0, 1);
    w.key(b"n", code::ARRAY);
    let at = w.position();
    w.nested_arrays(depth, code::U8, 0);
    (w.into_bytes(), at)
}

#[test]
fn a_million_nested_arrays_hit_the_depth_limit_without_recursion() {
    let (bytes, at) = nested_file(1_000_000);
    // The 9th array header (12 bytes each) exceeds the default depth of 8.
    let expected = Error::LimitExceeded {
        limit: Limit::Depth,
        max: 8,
        found: 9,
        offset: at + 8 * 12,
    };
    rejects("1,000,000 nested arrays", &bytes, expected);
    candle("1,000,000 nested arrays", &bytes);
}

#[test]
fn a_hundred_thousand_nested_arrays_hit_the_depth_capacity() {
    let (bytes, at) = nested_file(100_000);
    // Asking for unlimited depth still stops at the fixed stack's capacity (the parser's `DEPTH`).
    let unlimited = Limits {
        max_depth: u32::MAX,
        ..Limits::DEFAULT
    };
    let cap = miniquant::gguf::DEFAULT_DEPTH_CAPACITY as u64;
    let expected = Error::LimitExceeded {
        limit: Limit::Depth,
        max: cap,
        found: cap + 1,
        offset: at + cap * 12,
    };
    rejects_within(
        "100,000 nested arrays, unlimited depth",
        &bytes,
        unlimited,
        expected,
    );
}

#[test]
fn an_array_of_two_arrays_of_one_u8_parses() {
    let mut w = file(0, 1);
    w.kv(
        b"aa",
        &Value::array(vec![
            Value::array(vec![Value::U8(7)]),
            Value::array(vec![Value::U8(9)]),
        ]),
    );
    let bytes = w.into_bytes();
    let events = accepts("array of 2 arrays of [u8; 1]", &bytes, Limits::DEFAULT);
    let u8_start = Ev::ArrayStart {
        element_type: ValueType::U8,
        len: 1,
    };
    let u8_value = |v: u64| Ev::Scalar {
        value_type: ValueType::U8,
        bits: v,
    };
    assert_eq!(
        events[1..events.len() - 1],
        [
            Ev::Key {
                key: "aa".into(),
                value_type: ValueType::Array
            },
            Ev::ArrayStart {
                element_type: ValueType::Array,
                len: 2
            },
            u8_start.clone(),
            u8_value(7),
            Ev::ArrayEnd,
            u8_start,
            u8_value(9),
            Ev::ArrayEnd,
            Ev::ArrayEnd,
        ]
    );
    let Candle::Read(c) = candle("array of 2 arrays of [u8; 1]", &bytes) else {
        panic!("candle reads it")
    };
    let CValue::Array(outer) = &c.metadata["aa"] else {
        panic!("array")
    };
    let inner: Vec<u8> = outer
        .iter()
        .map(|v| v.to_vec().unwrap()[0].to_u8().unwrap())
        .collect();
    assert_eq!(inner, [7, 9]);
}

// ----- 6. shape arithmetic -------------------------------------------------------------------

#[test]
fn shape_2_32_cubed_overflows() {
    let (bytes, at) = one_tensor(None, |w| tensor(w, &[1 << 32, 1 << 32, 1 << 32], F32, 0));
    rejects(
        "shape [2^32, 2^32, 2^32] F32",
        &bytes,
        Error::ShapeOverflow { offset: at },
    );
    if let Candle::Read(c) = candle("shape [2^32, 2^32, 2^32] F32", &bytes) {
        let info = &c.tensor_infos["t"];
        let count = std::panic::catch_unwind(|| info.shape.elem_count());
        println!("  candle elem_count: {:?}", count.map_err(panic_message));
    }
}

#[test]
fn shape_2_62_f32_overflows_the_byte_count() {
    let (mut bytes, at) = one_tensor(None, |w| tensor(w, &[1 << 62], F32, 0));
    rejects(
        "shape [2^62] F32",
        &bytes,
        Error::ShapeOverflow { offset: at },
    );
    bytes.resize(bytes.len().next_multiple_of(32) + 64, 0);
    if let Candle::Read(c) = candle("shape [2^62] F32", &bytes) {
        let info = &c.tensor_infos["t"];
        let load = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut cursor = std::io::Cursor::new(&bytes);
            info.read(&mut cursor, c.tensor_data_offset, &candle_core::Device::Cpu)
                .map(|t| t.shape().clone())
        }));
        match load {
            Ok(r) => println!(
                "  candle TensorInfo::read: {:?}",
                r.map_err(|e| e.to_string())
            ),
            Err(p) => println!("  candle TensorInfo::read: PANIC: {}", panic_message(p)),
        }
    }
}

#[test]
fn dimension_u64_max_is_rejected() {
    let mut dim_at = 0;
    let (bytes, _) = one_tensor(None, |w| {
        w.string(b"t").u32(1);
        dim_at = w.position();
        w.u64(u64::MAX).u32(F32).u64(0);
    });
    rejects(
        "dimension 2^64-1",
        &bytes,
        Error::DimensionTooLarge {
            value: u64::MAX,
            offset: dim_at,
        },
    );
    candle("dimension 2^64-1", &bytes);
}

fn n_dims_file(n_dims: u32, ne: &[u64]) -> (Vec<u8>, u64) {
    let (bytes, at) = one_tensor(None, |w| {
        w.tensor_info_claiming(b"t", n_dims, ne, F32, 0);
    });
    // name length (8) + name (1)
    (bytes, at + 9)
}

#[test]
fn five_dimensions_are_rejected() {
    let (bytes, at) = n_dims_file(5, &[1; 5]);
    rejects(
        "n_dims 5",
        &bytes,
        Error::LimitExceeded {
            limit: Limit::Dims,
            max: 4,
            found: 5,
            offset: at,
        },
    );
    candle("n_dims 5", &bytes);
}

#[test]
fn n_dims_u32_max_is_rejected() {
    let (bytes, at) = n_dims_file(u32::MAX, &[]);
    let expected = Error::LimitExceeded {
        limit: Limit::Dims,
        max: 4,
        found: u32::MAX.into(),
        offset: at,
    };
    rejects("n_dims 0xFFFFFFFF", &bytes, expected);
    candle("n_dims 0xFFFFFFFF", &bytes);
}

#[test]
fn zero_dimensions_make_a_scalar() {
    let (bytes, _) = one_tensor(None, |w| tensor(w, &[], F32, 0));
    let events = accepts("n_dims 0", &bytes, Limits::DEFAULT);
    let scalar = Ev::Tensor {
        name: "t".into(),
        ne: vec![],
        ggml_type: GgmlType::F32,
        offset: 0,
        elements: 1,
        bytes: 4,
    };
    assert_eq!(events[1], scalar);
    if let Candle::Read(c) = candle("n_dims 0", &bytes) {
        assert_eq!(c.tensor_infos["t"].shape.rank(), 0);
    }
}

// ----- 7. padding wrap -----------------------------------------------------------------------

/// ggml pads each tensor's size to the alignment when it sums offsets; F32 with ne0 = 2^62 - 1 is
/// 2^64 - 4 bytes, which a wrapping pad turns into 0 so that a second tensor "fits" at offset 0
/// (ggml HEAD accepts this file). The core pads with checked arithmetic: the first tensor info is
/// rejected.
#[test]
fn padding_wrap_is_rejected() {
    let mut w = file(2, 0);
    let at = w.position();
    tensor(&mut w, &[(1 << 62) - 1], F32, 0);
    w.tensor_info(b"b", &[8], F32, 0);
    let bytes = w.into_bytes();
    rejects("padding wrap", &bytes, Error::ShapeOverflow { offset: at });
    candle("padding wrap", &bytes);
}

// ----- 8. placement --------------------------------------------------------------------------

#[test]
fn offset_4_with_alignment_32_is_misaligned() {
    let mut offset_at = 0;
    let (bytes, _) = one_tensor(None, |w| {
        w.string(b"t").u32(1).u64(8).u32(F32);
        offset_at = w.position();
        w.u64(4);
    });
    let expected = Error::MisalignedTensor {
        tensor_offset: 4,
        alignment: 32,
        offset: offset_at,
    };
    rejects("offset 4, alignment 32", &bytes, expected);
    candle("offset 4, alignment 32", &bytes);
}

#[test]
fn offset_near_2_64_overflows_offset_plus_size() {
    // Alignment 16 makes 2^64 - 16 a valid multiple; adding 32 bytes of F32 overflows.
    let (bytes, at) = one_tensor(Some(16), |w| tensor(w, &[8], F32, u64::MAX - 15));
    rejects(
        "offset 2^64-16 (alignment 16)",
        &bytes,
        Error::ShapeOverflow { offset: at },
    );
    candle("offset 2^64-16 (alignment 16)", &bytes);
    let (bytes, at) = one_tensor(None, |w| tensor(w, &[8], F32, u64::MAX - 31));
    rejects(
        "offset 2^64-32",
        &bytes,
        Error::ShapeOverflow { offset: at },
    );
}

// ----- 9. key identity -----------------------------------------------------------------------

#[test]
fn an_empty_key_is_rejected() {
    let mut w = file(0, 1);
    let at = w.position();
    // Padded: a pair needs at least 14 bytes with a 1-byte key, which the header check assumes.
    w.kv(b"", &Value::U8(1)).raw(&[0; 8]);
    let bytes = w.into_bytes();
    rejects(
        "empty key",
        &bytes,
        Error::EmptyName {
            field: Field::Key,
            offset: at,
        },
    );
    candle("empty key", &bytes);
}

#[test]
fn a_key_with_a_nul_is_rejected() {
    let mut w = file(0, 2);
    let at = w.position();
    w.kv(b"general.name\0evil", &Value::str("shadow"));
    w.kv(b"general.name", &Value::str("real"));
    let bytes = w.into_bytes();
    let nul = at + 8 + "general.name".len() as u64;
    rejects(
        "key general.name\\0evil",
        &bytes,
        Error::NulInName {
            field: Field::Key,
            offset: nul,
        },
    );
    if let Candle::Read(c) = candle("key general.name\\0evil", &bytes) {
        println!("  candle keys: {:?}", c.metadata.keys().collect::<Vec<_>>());
    }
}

#[test]
fn a_tensor_name_with_a_nul_is_rejected() {
    let (bytes, at) = one_tensor(None, |w| {
        w.tensor_info(b"w\0x", &[8], F32, 0);
    });
    rejects(
        "tensor name w\\0x",
        &bytes,
        Error::NulInName {
            field: Field::TensorName,
            offset: at + 9,
        },
    );
}

/// The core has no heap, so it cannot remember keys: duplicates (other than `general.alignment`)
/// reach the consumer as two `Key` events, in file order, and deduplication is the consumer's job.
#[test]
fn duplicate_keys_reach_the_consumer_in_order() {
    let mut w = file(0, 2);
    w.kv(b"general.name", &Value::str("first"));
    w.kv(b"general.name", &Value::str("second"));
    let events = accepts("duplicate key", &w.into_bytes(), Limits::DEFAULT);
    let strings: Vec<&Ev> = events
        .iter()
        .filter(|e| matches!(e, Ev::String(_)))
        .collect();
    assert_eq!(
        strings,
        [&Ev::String("first".into()), &Ev::String("second".into())]
    );
}

// ----- 10. tensor types ----------------------------------------------------------------------

fn tensor_type_file(type_code: u32, ne: &[u64]) -> (Vec<u8>, u64, u64) {
    let mut type_at = 0;
    let (bytes, at) = one_tensor(None, |w| {
        w.string(b"t").u32(ne.len() as u32);
        for &d in ne {
            w.u64(d);
        }
        type_at = w.position();
        w.u32(type_code).u64(0);
    });
    (bytes, at, type_at)
}

#[test]
fn removed_tensor_type_4_is_rejected() {
    let (bytes, _, at) = tensor_type_file(4, &[32]);
    rejects(
        "tensor type 4",
        &bytes,
        Error::RemovedGgmlType {
            code: 4,
            offset: at,
        },
    );
    candle("tensor type 4", &bytes);
}

#[test]
fn removed_tensor_type_31_is_rejected() {
    let (bytes, _, at) = tensor_type_file(31, &[32]);
    rejects(
        "tensor type 31",
        &bytes,
        Error::RemovedGgmlType {
            code: 31,
            offset: at,
        },
    );
}

#[test]
fn unknown_tensor_type_43_is_rejected() {
    let (bytes, _, at) = tensor_type_file(43, &[32]);
    rejects(
        "tensor type 43",
        &bytes,
        Error::UnknownGgmlType {
            code: 43,
            offset: at,
        },
    );
}

#[test]
fn unknown_tensor_type_u32_max_is_rejected() {
    let (bytes, _, at) = tensor_type_file(u32::MAX, &[32]);
    rejects(
        "tensor type 0xFFFFFFFF",
        &bytes,
        Error::UnknownGgmlType {
            code: u32::MAX,
            offset: at,
        },
    );
    candle("tensor type 0xFFFFFFFF", &bytes);
}

/// Types newer than candle's table, with block size and bytes per block from ggml's type traits:
/// a [2 blocks, 3 rows] tensor of each.
#[test]
fn newer_tensor_types_are_accepted_with_their_sizes() {
    for (code, name, block, block_bytes) in [
        (34, "TQ1_0", 256, 54),
        (39, "MXFP4", 32, 17),
        (40, "NVFP4", 64, 36),
        (41, "Q1_0", 128, 18),
        (42, "Q2_0", 64, 18),
    ] {
        let case = format!("tensor type {code} ({name})");
        let (bytes, _, _) = tensor_type_file(code, &[2 * block, 3]);
        let events = accepts(&case, &bytes, Limits::DEFAULT);
        let Ev::Tensor {
            ggml_type,
            elements,
            bytes: size,
            ..
        } = &events[1]
        else {
            panic!("{case}: tensor")
        };
        assert_eq!((ggml_type.code(), ggml_type.name()), (code, name), "{case}");
        assert_eq!((*elements, *size), (6 * block, 6 * block_bytes), "{case}");
        println!("{case}: ours: {size} bytes");
        candle(&case, &bytes);
    }
}

#[test]
fn q4_0_with_ne0_1_is_rejected() {
    let (bytes, at, _) = tensor_type_file(Q4_0, &[1]);
    rejects(
        "Q4_0 with ne0 = 1",
        &bytes,
        Error::NotWholeBlocks {
            ggml_type: GgmlType::Q4_0,
            ne0: 1,
            offset: at,
        },
    );
    candle("Q4_0 with ne0 = 1", &bytes);
}

// ----- versions, magic, bool, UTF-8 ----------------------------------------------------------

#[test]
fn version_0_is_rejected() {
    let bytes = Writer::new().header(0, 0, 0).bytes().to_vec();
    rejects(
        "version 0",
        &bytes,
        Error::UnsupportedVersion { version: 0 },
    );
    candle("version 0", &bytes);
}

#[test]
fn version_4_is_rejected() {
    let bytes = Writer::new().header(4, 0, 0).bytes().to_vec();
    rejects(
        "version 4",
        &bytes,
        Error::UnsupportedVersion { version: 4 },
    );
    candle("version 4", &bytes);
}

/// A small valid file with strings, arrays (nested too), every scalar width and two tensors.
fn sample_file(version: u32, endian: Endian) -> GgufFile {
    GgufFile {
        version,
        endian,
        metadata: vec![
            (b"general.architecture".to_vec(), Value::str("llama")),
            (b"general.alignment".to_vec(), Value::U32(64)),
            (b"u16".to_vec(), Value::U16(0xBEEF)),
            (b"i64".to_vec(), Value::I64(-5)),
            (b"f32".to_vec(), Value::F32(-1.5)),
            (b"f64".to_vec(), Value::F64(std::f64::consts::E)),
            (b"flag".to_vec(), Value::Bool(true)),
            (
                b"tokens".to_vec(),
                Value::array(vec![Value::str("<s>"), Value::str("é"), Value::str("")]),
            ),
            (
                b"nested".to_vec(),
                Value::array(vec![Value::array(vec![Value::I32(-1), Value::I32(2)])]),
            ),
        ],
        tensors: vec![
            Tensor {
                name: b"a".to_vec(),
                ne: vec![32, 2],
                type_code: 8,
                offset: 0,
            },
            Tensor {
                name: b"b".to_vec(),
                ne: vec![3],
                type_code: 0,
                offset: 128,
            },
        ],
        alignment: 64,
        data: Vec::new(),
    }
}

/// Events with the header's version and byte order blanked, to compare twins.
fn without_header_format(events: &[Ev]) -> Vec<Ev> {
    events
        .iter()
        .map(|e| match e {
            Ev::Header(h) => Ev::Header(miniquant::gguf::Header {
                version: 0,
                byte_order: ByteOrder::Little,
                ..*h
            }),
            e => e.clone(),
        })
        .collect()
}

#[test]
fn version_1_with_32_bit_lengths_parses_like_version_3() {
    let v1 = sample_file(1, Endian::Little);
    let v3 = sample_file(3, Endian::Little);
    let v1_bytes = v1.to_bytes();
    let v1_events = accepts("version 1", &v1_bytes, Limits::DEFAULT);
    let v3_events = accepts("version 3 twin", &v3.to_bytes(), Limits::DEFAULT);
    let Ev::Header(h) = v1_events[0] else {
        panic!("header")
    };
    assert_eq!(h.version, 1);
    assert!(
        v1_bytes.len() < v3.to_bytes().len(),
        "v1 lengths are narrower"
    );
    // Everything but the version and the data offset (the directory is shorter) is the same.
    let strip = |events: &[Ev]| -> Vec<Ev> {
        without_header_format(events)
            .into_iter()
            .filter(|e| !matches!(e, Ev::End(_)))
            .collect()
    };
    assert_eq!(strip(&v1_events), strip(&v3_events));
    let Some(Ev::End(section)) = v1_events.last() else {
        panic!("end")
    };
    assert_eq!(section.data_offset, v1.data_offset());
    if let Candle::Read(c) = candle("version 1", &v1_bytes) {
        assert_eq!(c.tensor_data_offset, v1.data_offset());
        assert_eq!(c.metadata.len(), v1.metadata.len());
    }
}

#[test]
fn big_endian_version_3_parses_like_its_little_endian_twin() {
    let be = sample_file(3, Endian::Big).to_bytes();
    let le = sample_file(3, Endian::Little).to_bytes();
    assert_ne!(be, le);
    let be_events = accepts("big-endian v3", &be, Limits::DEFAULT);
    let le_events = accepts("little-endian twin", &le, Limits::DEFAULT);
    let Ev::Header(h) = be_events[0] else {
        panic!("header")
    };
    assert_eq!((h.version, h.byte_order), (3, ByteOrder::Big));
    assert_eq!(
        without_header_format(&be_events),
        without_header_format(&le_events)
    );
    candle("big-endian v3", &be);
}

/// Regression: the streaming drivers re-enter the header step when its bytes arrive in parts. The
/// byte order found from the version must not depend on how many attempts came before (it once
/// flipped on every attempt, so a big-endian header split after its version was read with the
/// wrong order or not, depending on the parity of the number of reads).
#[test]
fn big_endian_header_arriving_in_small_reads_keeps_its_byte_order() {
    for version in [1, 3] {
        let bytes = sample_file(version, Endian::Big).to_bytes();
        let slice = drive::slice(&bytes, Limits::DEFAULT);
        assert!(slice.is_complete());
        for size in 1..=30 {
            let case = format!("big-endian v{version}, reads of {size}");
            let read = drive::read_chunked(
                &bytes,
                vec![size],
                4096,
                Some(bytes.len() as u64),
                Limits::DEFAULT,
            );
            assert_eq!(read.result(), slice.result(), "{case}");
            let push = drive::push(&bytes, &[size], 4096, None, Limits::DEFAULT);
            assert_eq!(push.result(), slice.result(), "{case} (push)");
        }
    }
}

#[test]
fn fugg_magic_is_rejected() {
    let mut bytes = sample_file(3, Endian::Little).to_bytes();
    bytes[..4].copy_from_slice(b"FUGG");
    rejects("magic FUGG", &bytes, Error::BadMagic { found: *b"FUGG" });
    candle("magic FUGG", &bytes);
}

#[test]
fn bool_2_is_rejected() {
    let mut w = file(0, 1);
    w.key(b"flag", code::BOOL);
    let at = w.position();
    w.u8(2);
    let bytes = w.into_bytes();
    rejects(
        "bool 2",
        &bytes,
        Error::InvalidBool {
            value: 2,
            offset: at,
        },
    );
    candle("bool 2", &bytes);
}

#[test]
fn invalid_utf8_in_a_key_is_rejected_at_the_bad_byte() {
    let mut w = file(0, 1);
    let at = w.position();
    w.kv(b"ab\xffcd", &Value::U8(1));
    let bytes = w.into_bytes();
    rejects(
        "invalid UTF-8 in a key",
        &bytes,
        Error::InvalidUtf8 {
            field: Field::Key,
            offset: at + 8 + 2,
        },
    );
    candle("invalid UTF-8 in a key", &bytes);
}

#[test]
fn invalid_utf8_in_a_string_value_is_rejected_at_the_bad_byte() {
    let mut w = file(0, 1);
    w.key(b"s", code::STRING);
    let at = w.position();
    w.string(b"caf\xc3\xa9 \xc3(");
    let bytes = w.into_bytes();
    // The second `\xc3` starts a sequence that `(` does not continue.
    rejects(
        "invalid UTF-8 in a string",
        &bytes,
        Error::InvalidUtf8 {
            field: Field::String,
            offset: at + 8 + 6,
        },
    );
    candle("invalid UTF-8 in a string", &bytes);
}

#[test]
fn invalid_utf8_deep_in_a_long_string_is_found_by_streaming_drivers_too() {
    // 300 bytes of "é": a 64- or 100-byte buffer gets the string in pieces. Byte 249, the second
    // byte of the 125th "é", becomes 0xff, so the character starting at byte 248 is invalid.
    let mut text = "é".repeat(150).into_bytes();
    text[249] = 0xff;
    let mut w = file(0, 1);
    w.key(b"s", code::STRING);
    let at = w.position();
    w.string(&text);
    let bytes = w.into_bytes();
    // Bytes 0..248 are 124 whole "é"; byte 248 is the lead byte of the 125th, byte 249 is 0xff.
    let expected = Error::InvalidUtf8 {
        field: Field::String,
        offset: at + 8 + 248,
    };
    let error = error_of(
        "invalid UTF-8 in a split string",
        &bytes,
        Limits::DEFAULT,
        &[64, 100],
    );
    assert_eq!(error, expected);
}

#[test]
fn invalid_utf8_in_a_tensor_name_is_rejected_at_the_bad_byte() {
    let (bytes, at) = one_tensor(None, |w| {
        w.tensor_info(b"w\xe2\x82", &[8], F32, 0);
    });
    rejects(
        "invalid UTF-8 in a tensor name",
        &bytes,
        Error::InvalidUtf8 {
            field: Field::TensorName,
            offset: at + 9,
        },
    );
    candle("invalid UTF-8 in a tensor name", &bytes);
}

// ----- budgets -------------------------------------------------------------------------------

#[test]
fn a_10_mb_u8_array_parses() {
    const LEN: usize = 10_000_000;
    let mut w = file(0, 1);
    w.key(b"blob", code::ARRAY)
        .array_header(code::U8, LEN as u64);
    w.raw(&(0..LEN).map(|i| (i % 251) as u8).collect::<Vec<_>>());
    let bytes = w.into_bytes();

    let start = Instant::now();
    let mut parser = miniquant::gguf::SliceParser::new(&bytes, Limits::DEFAULT);
    let mut values = 0usize;
    while let Some(event) = parser.next_event().expect("valid") {
        if let miniquant::gguf::Event::Scalars(run) = event {
            for (i, &v) in run.raw().iter().enumerate() {
                assert_eq!(usize::from(v), (values + i) % 251, "element {}", values + i);
            }
            values += run.len();
        }
    }
    let slice_time = start.elapsed();
    assert_eq!(values, LEN);

    let start = Instant::now();
    let mut buf = [0u8; 4096];
    let reader = drive::ChunkReader::new(&bytes, vec![4096]);
    let mut parser =
        miniquant::gguf::ReadParser::new(reader, &mut buf, Limits::DEFAULT).expect("buffer");
    let mut read_values = 0usize;
    while let Some(event) = parser.next_event().expect("valid") {
        if let miniquant::gguf::Event::Scalars(run) = event {
            read_values += run.len();
        }
    }
    let read_time = start.elapsed();
    assert_eq!(read_values, LEN);

    let start = Instant::now();
    let Candle::Read(c) = candle("10 MB u8 array", &bytes) else {
        panic!("candle reads it")
    };
    let candle_time = start.elapsed();
    assert_eq!(c.metadata["blob"].to_vec().unwrap().len(), LEN);
    println!(
        "10 MB u8 array ({} build): ours slice {slice_time:.2?}, ours Read {read_time:.2?}, candle Cursor {candle_time:.2?}",
        if cfg!(debug_assertions) { "debug" } else { "release" }
    );
}

// ----- truncation of the real headers --------------------------------------------------------

/// Every prefix of a real header must end in an error (never a panic, never `End`).
///
/// Re-parsing each of millions of prefixes from byte 0 is quadratic, so coverage is in two parts:
/// 1. Every length L in 0..end-of-directory, exhaustively, by resuming: one parse over the whole
///    header records the parser before each event; for each L the copy from the last event start
///    at or before L is told the input is L bytes long and run on the rest of the prefix, exactly
///    as the slice driver would run from there. (A parse from byte 0 reaches that state with the
///    same events unless an earlier check against the shorter input fails first, which is an
///    error too, so this covers every prefix; part 2 checks the argument.)
/// 2. The slice driver from byte 0 on every prefix shorter than 8 KiB and on 64 prefixes spread
///    over the header: each must fail, with the resumed run's error or an earlier `ExceedsInput`.
///
/// Prefixes that end in the padding after the directory (at most alignment - 1 bytes) are
/// reported separately: the header is complete there, and the parser says so (`End` with a data
/// offset beyond the input); the tensor data lies past the input, which consumers check.
fn truncations(file_name: &str) {
    let path = model_path(file_name);
    let (header, data_offset) = drive::real_header(&path);
    let start = Instant::now();
    // The prefixes part 2 parses from byte 0; part 1 records its errors for them.
    let spread = (0..64).map(|i| i * header.len() / 64 + i);
    let direct_lengths: std::collections::BTreeSet<usize> = (0..8 * KIB).chain(spread).collect();
    let mut resumed_errors = std::collections::BTreeMap::new();

    // Part 1.
    let mut whole = Parser::new(Limits::DEFAULT).with_total_len(header.len() as u64);
    let mut at = 0usize;
    let mut lengths = 0usize;
    let directory_end = loop {
        let before = whole.clone();
        let step = whole
            .next(&header[at..], Feed::End)
            .expect("the whole header parses");
        let consumed = match step {
            Step::Event {
                event: miniquant::gguf::Event::End(_),
                ..
            } => break at,
            Step::Event { consumed, .. } => consumed,
            other => panic!("{file_name}: unexpected {other:?}"),
        };
        for l in at..at + consumed {
            let error = resume(&before, &header[at..l], l as u64)
                .unwrap_or_else(|| panic!("{file_name}: prefix of {l} bytes parsed through End"));
            assert!(
                matches!(error, Error::Truncated { .. } | Error::ExceedsInput { .. }),
                "{file_name}: prefix of {l} bytes: {error:?}"
            );
            assert!(
                error.offset().is_some_and(|o| o <= l as u64),
                "{file_name}: prefix {l}: {error:?}"
            );
            if direct_lengths.contains(&l) {
                resumed_errors.insert(l, error);
            }
            lengths += 1;
        }
        at += consumed;
    };
    assert_eq!(lengths, directory_end);

    // The padding: the directory is complete.
    let mut padding_prefixes = 0;
    for l in directory_end..data_offset as usize {
        let outcome = drive::slice(&header[..l], Limits::DEFAULT);
        assert!(
            outcome.is_complete(),
            "{file_name}: prefix {l} in the padding: {:?}",
            outcome.error
        );
        let Some(Ev::End(section)) = outcome.events.last() else {
            unreachable!()
        };
        assert_eq!(section.data_offset, data_offset);
        padding_prefixes += 1;
    }
    let resumed_time = start.elapsed();

    // Part 2.
    let start = Instant::now();
    let mut direct = 0;
    let mut earlier = 0;
    for l in direct_lengths.into_iter().filter(|&l| l < directory_end) {
        let outcome = drive::slice(&header[..l], Limits::DEFAULT);
        let error = outcome
            .error
            .unwrap_or_else(|| panic!("{file_name}: prefix {l} accepted"));
        let resumed = resumed_errors[&l];
        if error != resumed {
            assert!(
                matches!(error, Error::ExceedsInput { offset, .. } if offset < resumed.offset().unwrap()),
                "{file_name}: prefix {l}: direct {error:?}, resumed {resumed:?}"
            );
            earlier += 1;
        }
        direct += 1;
    }
    println!(
        "{file_name}: {directory_end} truncations (every byte of 0..{directory_end}) failed cleanly \
         by resuming in {resumed_time:.2?}; {padding_prefixes} prefixes in the padding up to {data_offset} \
         give End; {direct} direct slice parses agree ({earlier} fail earlier with ExceedsInput) in {:.2?}",
        start.elapsed()
    );
}

/// Runs a copy of `parser` (taken at an event start) on `rest`, the prefix's bytes from there, as
/// if the input were `total` bytes long; the error, or `None` if it reached `End`.
fn resume(parser: &Parser, rest: &[u8], total: u64) -> Option<Error> {
    let mut parser = parser.clone().with_total_len(total);
    let mut rest = rest;
    loop {
        match parser.next(rest, Feed::End) {
            Ok(Step::Event { consumed, .. }) => rest = &rest[consumed..],
            Ok(Step::Done) => return None,
            Ok(Step::NeedMore { .. }) => panic!("Feed::End never asks for more"),
            Err(e) => return Some(e),
        }
    }
}

#[test]
fn every_truncation_of_the_smollm2_header_fails() {
    truncations("SmolLM2-135M-Instruct.Q4_1.gguf");
}

#[test]
fn every_truncation_of_the_gemma3_header_fails() {
    truncations("gemma-3-270m-q4_k_m.gguf");
}

// ----- issue 6: fuzzing finds ------------------------------------------------------------------

/// The fuzzer's 65-byte reproducer: key `a` holds an array of two strings, `""` and one whose
/// length prefix is 2^64 - 1. The slice driver's string-run pre-scan added that length to an offset
/// before checking it, which panicked wherever overflow checks are on (this suite runs in debug in
/// CI too).
#[test]
fn string_length_u64_max_after_a_short_string_in_an_array_is_rejected() {
    let bytes = hex("474755460300000000000000000000000100000000000000010000000000000061090000000800000002000000000000000000000000000000ffffffffffffffff");
    assert_eq!(bytes.len(), 65);
    rejects(
        "array of \"\" and a string of 2^64 - 1 bytes",
        &bytes,
        Error::LimitExceeded {
            limit: Limit::StringBytes,
            max: Limits::DEFAULT.max_string_bytes,
            found: u64::MAX,
            offset: 57,
        },
    );
    // With no string limit, the length is checked against the input instead.
    let unlimited = Limits {
        max_string_bytes: u64::MAX,
        ..Limits::DEFAULT
    };
    rejects_within(
        "array of \"\" and a string of 2^64 - 1 bytes, no string limit",
        &bytes,
        unlimited,
        Error::ExceedsInput {
            field: Field::String,
            found: u64::MAX,
            needed: u64::MAX,
            available: 0,
            offset: 57,
        },
    );
    // The same shape, crafted, in both byte orders and with v1's 4-byte lengths.
    for (version, endian) in [(3, Endian::Little), (3, Endian::Big), (1, Endian::Little)] {
        let mut w = Writer::for_version(version, endian);
        w.header(version, 0, 1).key(b"a", code::ARRAY);
        w.array_header(code::STRING, 3).string(b"").string(b"b");
        let at = w.position();
        let huge = if version == 1 {
            u64::from(u32::MAX)
        } else {
            u64::MAX
        };
        w.len(huge);
        let bytes = w.into_bytes();
        let case = format!("v{version} {endian:?}: third string of {huge} bytes");
        let error = error_of(&case, &bytes, unlimited, &[]);
        assert!(
            matches!(error, Error::ExceedsInput { field: Field::String, found, offset, .. }
                if found == huge && offset == at),
            "{case}: {error:?}"
        );
    }
}

fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

/// An array of `count` short strings in which string `bad` holds a 0xFF byte; the file and that
/// byte's offset.
fn strings_with_one_bad(count: usize, bad: usize) -> (Vec<u8>, u64) {
    let mut w = file(0, 1);
    w.key(b"tokenizer.ggml.tokens", code::ARRAY)
        .array_header(code::STRING, count as u64);
    let mut bad_at = 0;
    for i in 0..count {
        if i == bad {
            w.len(4);
            bad_at = w.position() + 2;
            w.raw(b"ok\xffk");
        } else {
            w.string(format!("tok{i}").as_bytes());
        }
    }
    (w.into_bytes(), bad_at)
}

/// One invalid string among 262,144 (a Gemma-sized vocabulary) is found at its byte by every
/// driver and by both whole-file validators. Each string after a failed run check used to rescan
/// the rest of the array (108 s for the bad string at the end); the work is now linear (the unit
/// test `one_bad_string_among_many_costs_linear_utf8_work` bounds it).
#[test]
fn one_bad_string_in_a_262144_string_array_is_found_at_its_byte() {
    const COUNT: usize = 262_144;
    for bad in [0, COUNT / 2, COUNT - 1] {
        let (bytes, bad_at) = strings_with_one_bad(COUNT, bad);
        let expected = Error::InvalidUtf8 {
            field: Field::String,
            offset: bad_at,
        };
        rejects(&format!("bad string {bad} of {COUNT}"), &bytes, expected);
        assert_validators_report(&bytes, expected);
    }
}

/// Both of the std adapter's validators report exactly `expected`.
fn assert_validators_report(bytes: &[u8], expected: Error) {
    let streamed = miniquant_std::validate::check_bytes(bytes);
    assert_eq!(streamed.errors, [expected], "check_bytes");
    let (index, parse_error) = miniquant_std::Index::from_bytes_partial(bytes, Limits::DEFAULT);
    let indexed = miniquant_std::validate::check(&index, parse_error);
    assert_eq!(indexed.errors, [expected], "check");
}

/// The real Gemma 3 header (262,144 tokens) with one byte of one token (the first, the last) made
/// invalid UTF-8: rejected at that byte by every driver and both validators.
#[test]
fn gemma3_header_with_one_token_byte_flipped_is_rejected_at_that_byte() {
    let (header, _) = drive::real_header(&model_path(miniquant_tests::cache::GEMMA3_Q4_K_M));
    // Where each token's text starts, from the slice driver's events.
    let mut parser = miniquant::gguf::SliceParser::new(&header, Limits::DEFAULT);
    let mut in_tokens = false;
    let mut token_texts = Vec::new();
    while let Some(event) = parser.next_event().expect("the real header parses") {
        match event {
            miniquant::gguf::Event::Key { key, .. } => {
                in_tokens = key == "tokenizer.ggml.tokens";
            }
            miniquant::gguf::Event::String(piece) if in_tokens && piece.len > 0 => {
                token_texts.push(parser.event_offset() + 8);
            }
            _ => {}
        }
    }
    assert!(token_texts.len() > 200_000, "{} tokens", token_texts.len());
    // The first token and the last (the worst case before the fix: 131 s to reject).
    for at in [token_texts[0], token_texts[token_texts.len() - 1]] {
        let mut bytes = header.clone();
        bytes[at as usize] = 0xFF;
        let expected = Error::InvalidUtf8 {
            field: Field::String,
            offset: at,
        };
        rejects(
            &format!("Gemma 3, token byte {at} flipped"),
            &bytes,
            expected,
        );
        assert_validators_report(&bytes, expected);
    }
}

/// With every limit lifted and the input's length unknown (a stream), nothing bounds a length
/// prefix but its type: lengths near 2^64 for a key, a string value and a tensor name were added to
/// the prefix's width before any check (a panic with overflow checks on). Now the needed byte count
/// saturates and the stream's end is a truncation error.
#[test]
fn lengths_near_2_64_in_a_stream_without_limits_are_truncations() {
    let unlimited = Limits {
        max_depth: u32::MAX,
        max_string_bytes: u64::MAX,
        max_key_bytes: u64::MAX,
        max_array_len: u64::MAX,
        max_metadata: u64::MAX,
        max_tensors: u64::MAX,
        max_dims: u32::MAX,
    };
    let key = {
        let mut w = file(0, 1);
        w.len(u64::MAX - 2).raw(b"abc");
        (w.into_bytes(), Field::Key, 24)
    };
    let string = {
        let mut w = file(0, 1);
        w.key(b"s", code::STRING).len(u64::MAX - 7).raw(b"text");
        (w.into_bytes(), Field::String, 37)
    };
    let in_array = {
        let mut w = file(0, 1);
        w.key(b"a", code::ARRAY)
            .array_header(code::STRING, 2)
            .string(b"")
            .len(u64::MAX)
            .raw(b"x");
        (w.into_bytes(), Field::String, 57)
    };
    let tensor_name = {
        let mut w = file(1, 0);
        w.len(u64::MAX - 5).raw(b"name");
        (w.into_bytes(), Field::DimensionCount, 24)
    };
    for (case, (bytes, field, offset)) in [
        ("key", key),
        ("string value", string),
        ("string in an array", in_array),
        ("tensor name", tensor_name),
    ] {
        let expected = Error::Truncated {
            field,
            offset,
            needed: u64::MAX,
            available: bytes.len() as u64 - offset,
        };
        for sizes in [vec![4096], vec![1], vec![7]] {
            let read = drive::read_chunked(&bytes, sizes.clone(), 4096, None, unlimited);
            assert_eq!(read.error, Some(expected), "{case}: read, reads {sizes:?}");
            let push = drive::push(&bytes, &sizes, 4096, None, unlimited);
            assert_eq!(push.error, Some(expected), "{case}: push, chunks {sizes:?}");
        }
        // Knowing the length, the slice driver says the length exceeds the input.
        let slice = drive::slice(&bytes, unlimited);
        assert!(
            matches!(slice.error, Some(Error::ExceedsInput { .. })),
            "{case}: slice: {:?}",
            slice.error
        );
    }
}

/// A bool array whose third element is 18: every driver yields the two valid elements, then the
/// error, whatever the read or chunk sizes. (A run that held the bad byte used to fail without
/// its valid prefix, so the events before the error depended on where reads ended; found by the
/// stream-equivalence property test.)
#[test]
fn bool_array_with_a_bad_third_element_yields_the_first_two() {
    let mut w = file(0, 1);
    w.key(b"flags", code::ARRAY).array_header(code::BOOL, 4);
    let at = w.position() + 2;
    w.raw(&[0, 1, 18, 0]);
    let bytes = w.into_bytes();
    rejects(
        "bool array [0, 1, 18, 0]",
        &bytes,
        Error::InvalidBool {
            value: 18,
            offset: at,
        },
    );
    let slice = drive::slice(&bytes, Limits::DEFAULT);
    let bools = slice
        .events
        .iter()
        .filter(|e| {
            matches!(
                e,
                Ev::Scalar {
                    value_type: ValueType::Bool,
                    ..
                }
            )
        })
        .count();
    assert_eq!(bools, 2, "{:?}", slice.events);
}
