//! Hostile headers, one per kind of attack of the core's hostile-header tests
//! (`tests/tests/integration/hostile_headers.rs`), plus a few valid files with every kind of value, written with
//! the tests' byte-level writer. The C API must give the Rust API's error for each, never a crash.

use std::path::{Path, PathBuf};

use crate::craft::{code, Endian, GgufFile, Tensor, Value, Writer};

const F32: u32 = 0;
const Q4_0: u32 = 2;

fn file(tensors: u64, kvs: u64) -> Writer {
    let mut w = Writer::new();
    w.header(3, tensors, kvs);
    w
}

fn alignment(type_code: u32, value: &Value) -> Vec<u8> {
    let mut w = file(0, 1);
    w.string(b"general.alignment").u32(type_code).value(value);
    w.into_bytes()
}

fn one_tensor(alignment: Option<u32>, ne: &[u64], type_code: u32, offset: u64) -> Vec<u8> {
    let mut w = file(1, u64::from(alignment.is_some()));
    if let Some(a) = alignment {
        w.kv(b"general.alignment", &Value::U32(a));
    }
    w.tensor_info(b"t", ne, type_code, offset);
    w.into_bytes()
}

fn value_type(type_code: u32) -> Vec<u8> {
    let mut w = file(0, 1);
    w.key(b"k", type_code).raw(&[0; 8]);
    w.into_bytes()
}

fn array(element_type: u32, len: u64) -> Vec<u8> {
    let mut w = file(0, 1);
    w.key(b"a", code::ARRAY)
        .array_header(element_type, len)
        .raw(&[0; 16]);
    w.into_bytes()
}

/// A valid file with every value type, nested arrays, tensors and data, in `version` and `endian`.
fn sample(version: u32, endian: Endian) -> Vec<u8> {
    GgufFile {
        version,
        endian,
        metadata: vec![
            (b"general.architecture".to_vec(), Value::str("llama")),
            (b"u8".to_vec(), Value::U8(200)),
            (b"i8".to_vec(), Value::I8(-5)),
            (b"u16".to_vec(), Value::U16(60000)),
            (b"i16".to_vec(), Value::I16(-300)),
            (b"u32".to_vec(), Value::U32(4_000_000_000)),
            (b"i32".to_vec(), Value::I32(-70000)),
            (b"f32".to_vec(), Value::F32(-1.5)),
            (b"bool".to_vec(), Value::Bool(true)),
            (b"u64".to_vec(), Value::U64(1 << 40)),
            (b"i64".to_vec(), Value::I64(-(1 << 40))),
            (b"f64".to_vec(), Value::F64(0.1)),
            (
                b"strings".to_vec(),
                Value::array(vec![
                    Value::str("a b"),
                    Value::str("\u{e9}\\\n"),
                    Value::str(""),
                ]),
            ),
            (
                b"nested".to_vec(),
                Value::array(vec![
                    Value::array(vec![Value::U16(1), Value::U16(2)]),
                    Value::array(vec![Value::F32(3.0)]),
                ]),
            ),
            (b"long".to_vec(), Value::str(&"x".repeat(300))),
        ],
        tensors: vec![
            Tensor {
                name: b"w".to_vec(),
                ne: vec![32, 2],
                type_code: Q4_0,
                offset: 0,
            },
            Tensor {
                name: b"b".to_vec(),
                ne: vec![4],
                type_code: F32,
                offset: 64,
            },
        ],
        alignment: 32,
        data: vec![0x11; 80],
    }
    .to_bytes()
}

/// Writes every case into `dir`; returns each path and whether the file must be refused.
pub fn write_all(dir: &Path) -> Result<Vec<(PathBuf, bool)>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut cases: Vec<(&str, Vec<u8>, bool)> = vec![
        (
            "alignment_u32_0",
            alignment(code::U32, &Value::U32(0)),
            true,
        ),
        ("alignment_u8_0", alignment(code::U8, &Value::U8(0)), true),
        ("alignment_3", alignment(code::U32, &Value::U32(3)), true),
        (
            "alignment_string",
            alignment(code::STRING, &Value::str("32")),
            true,
        ),
        ("metadata_count_2_40", file(0, 1 << 40).into_bytes(), true),
        ("tensor_count_2_62", file(1 << 62, 0).into_bytes(), true),
        ("value_type_13", value_type(13), true),
        ("value_type_u32_max", value_type(u32::MAX), true),
        ("array_element_type_13", array(13, 1), true),
        ("u8_array_2_62", array(code::U8, 1 << 62), true),
        ("u64_array_2_61", array(code::U64, 1 << 61), true),
        ("string_array_2_61", array(code::STRING, 1 << 61), true),
        (
            "shape_2_32_cubed",
            one_tensor(None, &[1 << 32, 1 << 32, 1 << 32], F32, 0),
            true,
        ),
        (
            "dimension_u64_max",
            one_tensor(None, &[u64::MAX], F32, 0),
            true,
        ),
        (
            "five_dimensions",
            one_tensor(None, &[1, 1, 1, 1, 1], F32, 0),
            true,
        ),
        // gguflib writes past its 8-entry dimension array on this one.
        ("nine_dimensions", one_tensor(None, &[1; 9], F32, 0), true),
        (
            "misaligned_offset",
            one_tensor(Some(32), &[4], F32, 4),
            true,
        ),
        (
            "offset_near_2_64",
            one_tensor(None, &[4], F32, u64::MAX - 31),
            true,
        ),
        ("removed_type_4", one_tensor(None, &[32], 4, 0), true),
        ("unknown_type_43", one_tensor(None, &[32], 43, 0), true),
        ("type_u32_max", one_tensor(None, &[32], u32::MAX, 0), true),
        ("q4_0_ne0_1", one_tensor(None, &[1], Q4_0, 0), true),
        // The parser does not check tensor data against the file (the std adapter's index does): these
        // two (and `tensor_overlap`, `duplicate_tensor`) parse, and the C API must say the same.
        (
            "tensor_past_the_end",
            one_tensor(None, &[1 << 20], F32, 0),
            false,
        ),
    ];
    let mut w = file(0, 1);
    w.string(b"general.alignment").u32(code::U32).u32(32);
    w.string(b"general.alignment").u32(code::U32).u32(0);
    let mut dup = w.into_bytes();
    dup[16] = 2;
    cases.push(("alignment_duplicate_32_0", dup, true));

    let mut w = file(0, 1);
    w.key(b"s", code::STRING).len(1 << 40).raw(b"abc");
    cases.push(("string_length_2_40", w.into_bytes(), true));

    let mut w = file(0, 1);
    w.key(b"a", code::ARRAY)
        .array_header(code::STRING, 2)
        .string(b"ok")
        .len(u64::MAX);
    cases.push(("string_length_u64_max_in_array", w.into_bytes(), true));

    let mut w = file(0, 1);
    w.key(b"deep", code::ARRAY)
        .nested_arrays(100_000, code::U8, 1);
    cases.push(("nested_100000", w.into_bytes(), true));

    let mut w = file(0, 1);
    w.string(b"").u32(code::U8).u8(1);
    cases.push(("empty_key", w.into_bytes(), true));
    let mut w = file(0, 1);
    w.string(b"a\0b").u32(code::U8).u8(1);
    cases.push(("key_with_nul", w.into_bytes(), true));
    let mut w = file(0, 1);
    w.string(b"k\xff").u32(code::U8).u8(1);
    cases.push(("key_bad_utf8", w.into_bytes(), true));
    let mut w = file(0, 1);
    w.kv(b"s", &Value::String(b"ab\xc3(".to_vec()));
    cases.push(("string_bad_utf8", w.into_bytes(), true));
    let mut w = file(1, 0);
    w.tensor_info(b"t\0", &[4], F32, 0);
    cases.push(("tensor_name_with_nul", w.into_bytes(), true));
    let mut w = file(1, 0);
    w.tensor_info(b"\xfe", &[4], F32, 0);
    cases.push(("tensor_name_bad_utf8", w.into_bytes(), true));
    let mut w = file(1, 0);
    w.tensor_info_claiming(b"t", u32::MAX, &[4], F32, 0);
    cases.push(("n_dims_u32_max", w.into_bytes(), true));
    let mut w = file(0, 1);
    w.key(b"b", code::BOOL).u8(2);
    cases.push(("bool_2", w.into_bytes(), true));
    let mut w = file(2, 0);
    w.tensor_info(b"a", &[8], F32, 0)
        .tensor_info(b"b", &[8], F32, 0);
    w.pad_to(32, 0).raw(&[0; 64]);
    cases.push(("tensor_overlap", w.into_bytes(), false));
    let mut w = file(2, 0);
    w.tensor_info(b"a", &[8], F32, 0)
        .tensor_info(b"a", &[8], F32, 32);
    w.pad_to(32, 0).raw(&[0; 64]);
    cases.push(("duplicate_tensor", w.into_bytes(), false));
    let mut w = Writer::new();
    w.raw(b"FUGG").u32(3).u64(0).u64(0);
    cases.push(("fugg_magic", w.into_bytes(), true));
    for version in [0, 4] {
        let mut w = Writer::new();
        w.raw(b"GGUF").u32(version).u64(0).u64(0);
        cases.push((
            if version == 0 {
                "version_0"
            } else {
                "version_4"
            },
            w.into_bytes(),
            true,
        ));
    }
    cases.push(("empty", Vec::new(), true));

    // Valid files: the other byte order, the 32-bit lengths of version 1.
    cases.push(("valid_big_endian", sample(3, Endian::Big), false));
    cases.push(("valid_v1", sample(1, Endian::Little), false));
    cases.push(("valid", sample(3, Endian::Little), false));

    let mut out = Vec::new();
    for (name, bytes, must_fail) in cases {
        let path = dir.join(format!("{name}.gguf"));
        std::fs::write(&path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        out.push((path, must_fail));
    }
    Ok(out)
}
