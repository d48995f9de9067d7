//! `miniquant inspect` as text and as JSON, on a generated file holding every value type, awkward
//! floats and strings, and nested arrays. The JSON is parsed back and every field is checked against
//! the values the test wrote and against the library's [`Index`] of the same bytes.

use crate::common;

use common::{assert_no_panic, miniquant, scratch_file};
use miniquant::gguf::Scalar;
use miniquant::GgmlType;
use miniquant_std::writer::GgufWriter;
use miniquant_std::{Array, Index, Value};
use serde_json::Value as Json;

fn strings(items: &[&str]) -> Array {
    items.iter().copied().collect()
}

const UNICODE: &str = "héllo \"quoted\" \\ back\nslash\ttab 🦀";

/// The metadata of the test file, in file order.
fn metadata() -> Vec<(&'static str, Value)> {
    vec![
        ("general.architecture", Value::from("llama")),
        ("s.unicode", Value::from(UNICODE)),
        ("s.long", Value::String("x".repeat(100))),
        ("s.empty", Value::from("")),
        ("n.u8", Scalar::U8(255).into()),
        ("n.i8", Scalar::I8(-128).into()),
        ("n.u16", Scalar::U16(65535).into()),
        ("n.i16", Scalar::I16(-32768).into()),
        ("n.u32", Scalar::U32(30).into()),
        ("n.i32", Scalar::I32(-5).into()),
        ("n.u64", Scalar::U64(u64::MAX).into()),
        ("n.i64", Scalar::I64(i64::MIN).into()),
        ("n.bool", Scalar::Bool(false).into()),
        ("f.eps", Scalar::F32(1e-5).into()),
        ("f.tenth32", Scalar::F32(0.1).into()),
        ("f.negzero", Scalar::F32(-0.0).into()),
        ("f.subnormal", Scalar::F32(f32::from_bits(1)).into()),
        ("f.max", Scalar::F32(f32::MAX).into()),
        ("f.nan", Scalar::F32(f32::NAN).into()),
        ("f.inf", Scalar::F32(f32::INFINITY).into()),
        ("f.neginf", Scalar::F32(f32::NEG_INFINITY).into()),
        ("d.tenth", Scalar::F64(0.1).into()),
        ("d.big", Scalar::F64(1e300).into()),
        ("d.tiny", Scalar::F64(5e-324).into()),
        ("d.nan", Scalar::F64(f64::NAN).into()),
        ("d.neginf", Scalar::F64(f64::NEG_INFINITY).into()),
        ("a.tokens", strings(&["<s>", "", "ü", "</s>"]).into()),
        (
            "a.f32",
            Array::F32(vec![
                0.1,
                f32::NAN,
                f32::INFINITY,
                f32::NEG_INFINITY,
                f32::from_bits(1),
            ])
            .into(),
        ),
        ("a.u64", Array::U64(vec![u64::MAX, 0]).into()),
        ("a.i64", Array::I64(vec![i64::MIN]).into()),
        ("a.bool", Array::Bool(vec![true, false]).into()),
        ("a.empty", Array::U32(Vec::new()).into()),
        (
            "a.nested",
            Array::Array(vec![
                Array::Array(vec![Array::U8(vec![1]), Array::U8(vec![2, 3])]),
                Array::Array(Vec::new()),
            ])
            .into(),
        ),
        (
            "a.nested_strings",
            Array::Array(vec![strings(&["x"]), strings(&["y", "z"])]).into(),
        ),
    ]
}

fn test_file() -> Vec<u8> {
    let mut w = GgufWriter::new();
    for (k, v) in metadata() {
        w.kv(k, v);
    }
    w.tensor(
        "token_embd.weight",
        GgmlType::Q8_0,
        &[64, 3],
        vec![7; 3 * 2 * 34],
    );
    w.tensor("norm", GgmlType::F32, &[5], vec![0; 20]);
    w.tensor("blk.0.w", GgmlType::Q4_K, &[256, 2], vec![0; 2 * 144]);
    w.tensor("scalar", GgmlType::F32, &[], vec![0; 4]);
    w.to_bytes()
}

#[test]
fn json_has_every_field_and_matches_the_index() {
    let bytes = test_file();
    let index = Index::from_bytes(&bytes).unwrap();
    let path = scratch_file("inspect-json.gguf", &bytes);
    let run = miniquant(&["inspect", "--json", &path]);
    assert_no_panic(&run);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let text = run.stdout_text();
    assert_eq!(
        text.matches('\n').count(),
        text.lines().count(),
        "output ends with a newline"
    );
    let json: Json = serde_json::from_str(&text).expect("one JSON object");
    let top = json.as_object().unwrap();
    let mut keys: Vec<_> = top.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "alignment",
            "byte_order",
            "data_offset",
            "file_size",
            "metadata",
            "tensors",
            "version"
        ]
    );
    assert_eq!(json["version"], 3);
    assert_eq!(json["byte_order"], "little");
    assert_eq!(json["alignment"], 32);
    assert_eq!(json["file_size"], bytes.len() as u64);
    assert_eq!(json["data_offset"], index.data_offset());
    assert_eq!(index.data_offset(), header_len());

    let expected = metadata();
    let entries = json["metadata"].as_array().unwrap();
    assert_eq!(entries.len(), expected.len());
    for ((key, value), (entry, indexed)) in
        expected.iter().zip(entries.iter().zip(index.metadata()))
    {
        assert_eq!(entry["key"], *key);
        assert_eq!(indexed.key, *key);
        assert!(
            indexed.value.bits_eq(value),
            "{key}: index has {:?}",
            indexed.value
        );
        let fields = entry.as_object().unwrap().len();
        assert_eq!(entry["type"], value.value_type().name(), "{key}");
        match value {
            Value::Array(a) => {
                assert_eq!(fields, 5, "{key}: {entry}");
                check_array(key, entry, a);
            }
            _ => {
                assert_eq!(fields, 3, "{key}: {entry}");
                check_value(key, &entry["value"], value);
            }
        }
    }

    let tensors = json["tensors"].as_array().unwrap();
    assert_eq!(tensors.len(), index.tensors().len());
    let expected_tensors = [
        ("token_embd.weight", "Q8_0", vec![3u64, 64], 0u64, 204u64),
        ("norm", "F32", vec![5], 224, 20),
        ("blk.0.w", "Q4_K", vec![2, 256], 256, 288),
        ("scalar", "F32", vec![], 544, 4),
    ];
    for (j, (t, (name, ty, shape, offset, bytes))) in tensors
        .iter()
        .zip(index.tensors().iter().zip(expected_tensors))
    {
        assert_eq!(j.as_object().unwrap().len(), 5);
        assert_eq!((j["name"].as_str(), t.name.as_str()), (Some(name), name));
        assert_eq!((j["type"].as_str(), t.ggml_type.name()), (Some(ty), ty));
        let json_shape: Vec<u64> = j["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap())
            .collect();
        assert_eq!(json_shape, shape);
        assert_eq!(t.shape(), shape);
        assert_eq!((j["offset"].as_u64(), t.offset), (Some(offset), offset));
        assert_eq!((j["bytes"].as_u64(), t.bytes), (Some(bytes), bytes));
    }
}

/// Header + metadata + tensor infos, rounded up to 32, computed from the writer's header alone.
fn header_len() -> u64 {
    let mut w = GgufWriter::new();
    for (k, v) in metadata() {
        w.kv(k, v);
    }
    w.tensor("token_embd.weight", GgmlType::Q8_0, &[64, 3], Vec::new());
    w.tensor("norm", GgmlType::F32, &[5], Vec::new());
    w.tensor("blk.0.w", GgmlType::Q4_K, &[256, 2], Vec::new());
    w.tensor("scalar", GgmlType::F32, &[], Vec::new());
    w.header_bytes().len() as u64
}

#[test]
fn json_floats_are_shortest_and_exact() {
    let path = scratch_file("inspect-floats.gguf", &test_file());
    let text = miniquant(&["inspect", "--json", &path]).stdout_text();
    // f32 0.1 is written as its own shortest digits, not as the f64 0.10000000149011612.
    assert!(
        text.contains(r#"{"key":"f.tenth32","type":"f32","value":0.1}"#),
        "{text}"
    );
    assert!(text.contains(r#""value":"NaN"}"#));
    assert!(text.contains(r#"{"key":"n.u64","type":"u64","value":18446744073709551615}"#));
    assert!(text.contains(r#"{"key":"n.i64","type":"i64","value":-9223372036854775808}"#));
}

fn check_value(key: &str, j: &Json, v: &Value) {
    match v {
        Value::String(s) => assert_eq!(j.as_str(), Some(s.as_str()), "{key}"),
        Value::Scalar(s) => check_scalar(key, j, *s),
        Value::Array(_) => unreachable!(),
    }
}

fn check_scalar(key: &str, j: &Json, s: Scalar) {
    let non_finite = |x: f64| {
        if x.is_nan() {
            "NaN"
        } else if x > 0.0 {
            "inf"
        } else {
            "-inf"
        }
    };
    match s {
        Scalar::U8(x) => assert_eq!(j.as_u64(), Some(x.into()), "{key}"),
        Scalar::U16(x) => assert_eq!(j.as_u64(), Some(x.into()), "{key}"),
        Scalar::U32(x) => assert_eq!(j.as_u64(), Some(x.into()), "{key}"),
        Scalar::U64(x) => assert_eq!(j.as_u64(), Some(x), "{key}"),
        Scalar::I8(x) => assert_eq!(j.as_i64(), Some(x.into()), "{key}"),
        Scalar::I16(x) => assert_eq!(j.as_i64(), Some(x.into()), "{key}"),
        Scalar::I32(x) => assert_eq!(j.as_i64(), Some(x.into()), "{key}"),
        Scalar::I64(x) => assert_eq!(j.as_i64(), Some(x), "{key}"),
        Scalar::Bool(x) => assert_eq!(j.as_bool(), Some(x), "{key}"),
        Scalar::F32(x) if x.is_finite() => {
            let back = j.as_f64().unwrap_or_else(|| panic!("{key}: {j}")) as f32;
            assert_eq!(back.to_bits(), x.to_bits(), "{key}: {j}");
        }
        Scalar::F64(x) if x.is_finite() => {
            let back = j.as_f64().unwrap_or_else(|| panic!("{key}: {j}"));
            assert_eq!(back.to_bits(), x.to_bits(), "{key}: {j}");
        }
        Scalar::F32(x) => assert_eq!(j.as_str(), Some(non_finite(x.into())), "{key}"),
        Scalar::F64(x) => assert_eq!(j.as_str(), Some(non_finite(x)), "{key}"),
    }
}

/// `element_type`, `len` and every element of `value`, recursively for nested arrays.
fn check_array(key: &str, j: &Json, a: &Array) {
    assert_eq!(j["element_type"], a.element_type().name(), "{key}");
    assert_eq!(j["len"].as_u64(), Some(a.len() as u64), "{key}");
    let items = j["value"]
        .as_array()
        .unwrap_or_else(|| panic!("{key}: {j}"));
    assert_eq!(items.len(), a.len(), "{key}");
    for (i, item) in items.iter().enumerate() {
        match a {
            Array::String(s) => assert_eq!(item.as_str(), s.get(i), "{key}[{i}]"),
            Array::Array(inner) => {
                assert_eq!(
                    item.as_object().map(|o| o.len()),
                    Some(3),
                    "{key}[{i}]: {item}"
                );
                check_array(key, item, &inner[i]);
            }
            _ => match a.get(i) {
                Some(miniquant_std::Element::Scalar(s)) => check_scalar(key, item, s),
                other => panic!("{key}[{i}]: {other:?}"),
            },
        }
    }
}

#[test]
fn text_lists_header_metadata_tensors_and_totals() {
    let bytes = test_file();
    let path = scratch_file("inspect-text.gguf", &bytes);
    let run = miniquant(&["inspect", &path]);
    assert_no_panic(&run);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let text = run.stdout_text();
    let lines: Vec<&str> = text.lines().collect();
    let n_meta = metadata().len();
    assert_eq!(
        lines[0],
        format!("version 3  byte_order little  kv {n_meta}  tensors 4")
    );
    // No timing on stdout (it would make the output differ run to run).
    assert_eq!(
        lines[1],
        format!(
            "alignment 32  data_offset {}  file_size {}",
            header_len(),
            bytes.len()
        )
    );
    assert_eq!(lines[2], "--- metadata");

    let shown: Vec<(&str, &str)> = lines[3..3 + n_meta]
        .iter()
        .map(|l| {
            l.split_once("  ")
                .map(|(k, v)| (k, v.trim_start()))
                .unwrap()
        })
        .collect();
    let long = format!("\"{}\"... (100 bytes)", "x".repeat(60));
    let expected: Vec<(&str, &str)> = vec![
        ("general.architecture", "\"llama\""),
        ("s.unicode", r#""héllo \"quoted\" \\ back\nslash\ttab 🦀""#),
        ("s.long", &long),
        ("s.empty", "\"\""),
        ("n.u8", "255u8"),
        ("n.i8", "-128i8"),
        ("n.u16", "65535u16"),
        ("n.i16", "-32768i16"),
        ("n.u32", "30u32"),
        ("n.i32", "-5i32"),
        ("n.u64", "18446744073709551615u64"),
        ("n.i64", "-9223372036854775808i64"),
        ("n.bool", "false"),
        ("f.eps", "0.00001f32"),
        ("f.tenth32", "0.1f32"),
        ("f.negzero", "-0f32"),
        ("f.subnormal", "1e-45f32"),
        ("f.max", "3.4028235e38f32"),
        ("f.nan", "NaNf32"),
        ("f.inf", "inff32"),
        ("f.neginf", "-inff32"),
        ("d.tenth", "0.1f64"),
        ("d.big", "1e300f64"),
        ("d.tiny", "5e-324f64"),
        ("d.nan", "NaNf64"),
        ("d.neginf", "-inff64"),
        ("a.tokens", r#"["<s>", "", "ü", ...] (len 4)"#),
        ("a.f32", "[0.1f32, NaNf32, inff32, ...] (len 5)"),
        ("a.u64", "[18446744073709551615u64, 0u64] (len 2)"),
        ("a.i64", "[-9223372036854775808i64] (len 1)"),
        ("a.bool", "[true, false] (len 2)"),
        ("a.empty", "[] (len 0)"),
        (
            "a.nested",
            "[[[1u8] (len 1), [2u8, 3u8] (len 2)] (len 2), [] (len 0)] (len 2)",
        ),
        (
            "a.nested_strings",
            r#"[["x"] (len 1), ["y", "z"] (len 2)] (len 2)"#,
        ),
    ];
    assert_eq!(shown, expected);
    // Keys are padded to one column.
    let value_column = lines[3].len() - "\"llama\"".len();
    assert!(lines[3..3 + n_meta]
        .iter()
        .all(|l| l.get(value_column - 2..value_column) == Some("  ")));

    assert_eq!(
        lines[3 + n_meta],
        "--- tensors (shape row-major, slowest-varying first: ggml's ne reversed; offset relative to the data section)"
    );
    let tensor_rows: Vec<Vec<&str>> = lines[4 + n_meta..8 + n_meta]
        .iter()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        tensor_rows,
        [
            vec![
                "token_embd.weight",
                "Q8_0",
                "[3,",
                "64]",
                "192",
                "elements",
                "offset",
                "0",
                "204",
                "B"
            ],
            vec!["norm", "F32", "[5]", "5", "elements", "offset", "224", "20", "B"],
            vec!["blk.0.w", "Q4_K", "[2,", "256]", "512", "elements", "offset", "256", "288", "B"],
            vec!["scalar", "F32", "[]", "1", "elements", "offset", "544", "4", "B"],
        ]
    );
    // Columns line up: every row has its type at the same position.
    let type_column = lines[4 + n_meta].find("Q8_0").unwrap();
    assert_eq!(lines[5 + n_meta].find("F32"), Some(type_column));
    assert_eq!(lines[8 + n_meta], "--- totals");
    let totals: Vec<Vec<&str>> = lines[9 + n_meta..]
        .iter()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        totals,
        [
            vec!["F32", "2", "tensors", "6", "parameters", "24", "B"],
            vec!["Q8_0", "1", "tensors", "192", "parameters", "204", "B"],
            vec!["Q4_K", "1", "tensors", "512", "parameters", "288", "B"],
            vec!["all", "4", "tensors", "710", "parameters", "516", "B"],
        ]
    );
}

#[test]
fn shipped_example_is_what_make_example_writes() {
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/tiny.gguf");
    let shipped = std::fs::read(&shipped).expect("examples/tiny.gguf exists");
    let out = common::scratch_dir().join("made-example.gguf");
    let run = miniquant(&["make-example", out.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let made = std::fs::read(&out).unwrap();
    assert!(
        made == shipped,
        "examples/tiny.gguf is stale: regenerate it with `cargo run -p miniquant-std -- make-example examples/tiny.gguf`"
    );
    let run = miniquant(&["inspect", out.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // A newcomer's first command prints no warning.
    assert_eq!(run.stderr, "");
    assert!(
        run.stdout_text()
            .contains("blk.0.ffn_down.weight  Q4_K  [2, 256]"),
        "{}",
        run.stdout_text()
    );
}

/// A file cut before its header's counts could be read (empty, or a few bytes) is one error line:
/// there is nothing of it to show. `inspect` used to print a "TRUNCATED" header block claiming
/// version 0, 0 keys and 0 tensors (the 100-byte start of a version-3 file of 5 tensors).
#[test]
fn a_file_cut_before_its_counts_is_one_error_line() {
    let whole = miniquant_std::example::tiny_gguf();
    for len in [0, 3, 100] {
        let path = common::scratch_file(&format!("inspect-cut-{len}.gguf"), &whole[..len]);
        let run = common::miniquant(&["inspect", &path]);
        common::assert_no_panic(&run);
        assert_eq!(run.code, 1, "{len} bytes: {}", run.stderr);
        assert_eq!(run.stdout_text(), "", "{len} bytes");
        assert_eq!(run.stderr_lines().len(), 1, "{len} bytes: {}", run.stderr);
    }
}
