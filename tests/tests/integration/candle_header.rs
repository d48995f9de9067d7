//! Our GGUF parser against candle-core 0.11.0's `Content::read` on the two real files: every
//! metadata entry (arrays element by element, nested ones included), every tensor info and the
//! data offset must agree.

use candle_core::quantized::gguf_file::{Content, Value as CValue};
use candle_core::quantized::GgmlDType;
use miniquant::gguf::{Limits, ValueType};
use miniquant::GgmlType;
use miniquant_tests::cache::model_path;
use miniquant_tests::drive::{self, Ev};
use std::collections::HashSet;

const SMOLLM2: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
const GEMMA: &str = "gemma-3-270m-q4_k_m.gguf";

/// A metadata value rebuilt from our events.
#[derive(Debug)]
enum Value {
    Scalar {
        value_type: ValueType,
        bits: u64,
    },
    String(String),
    Array {
        element_type: ValueType,
        items: Vec<Value>,
    },
}

struct Tensor {
    name: String,
    ne: Vec<u64>,
    ggml_type: GgmlType,
    offset: u64,
    bytes: u64,
}

#[derive(Default)]
struct Parsed {
    metadata_count: u64,
    metadata: Vec<(String, Value)>,
    tensors: Vec<Tensor>,
    alignment: u32,
    data_offset: u64,
}

/// Rebuilds keys, values and tensors from the event stream (iteratively: arrays use a stack).
fn rebuild(events: &[Ev]) -> Parsed {
    let mut parsed = Parsed::default();
    let mut key: Option<String> = None;
    let mut open: Vec<(ValueType, Vec<Value>)> = Vec::new();
    for event in events {
        let value = match event {
            Ev::Header(h) => {
                parsed.metadata_count = h.metadata_count;
                continue;
            }
            Ev::Key { key: k, .. } => {
                key = Some(k.clone());
                continue;
            }
            Ev::Scalar { value_type, bits } => Value::Scalar {
                value_type: *value_type,
                bits: *bits,
            },
            Ev::String(s) => Value::String(s.clone()),
            Ev::ArrayStart { element_type, len } => {
                open.push((*element_type, Vec::with_capacity(*len as usize)));
                continue;
            }
            Ev::ArrayEnd => {
                let (element_type, items) = open.pop().expect("ArrayEnd closes an array");
                Value::Array {
                    element_type,
                    items,
                }
            }
            Ev::Tensor {
                name,
                ne,
                ggml_type,
                offset,
                bytes,
                ..
            } => {
                parsed.tensors.push(Tensor {
                    name: name.clone(),
                    ne: ne.clone(),
                    ggml_type: *ggml_type,
                    offset: *offset,
                    bytes: *bytes,
                });
                continue;
            }
            Ev::End(section) => {
                parsed.alignment = section.alignment;
                parsed.data_offset = section.data_offset;
                continue;
            }
        };
        match open.last_mut() {
            Some((_, items)) => items.push(value),
            None => parsed
                .metadata
                .push((key.take().expect("a value follows a key"), value)),
        }
    }
    assert!(open.is_empty(), "unclosed array");
    parsed
}

/// Candle's value as (type, bits) when it is a scalar, in our encoding of bits.
fn candle_scalar(v: &CValue) -> Option<(ValueType, u64)> {
    Some(match *v {
        CValue::U8(x) => (ValueType::U8, x.into()),
        CValue::I8(x) => (ValueType::I8, x as i64 as u64),
        CValue::U16(x) => (ValueType::U16, x.into()),
        CValue::I16(x) => (ValueType::I16, x as i64 as u64),
        CValue::U32(x) => (ValueType::U32, x.into()),
        CValue::I32(x) => (ValueType::I32, x as i64 as u64),
        CValue::F32(x) => (ValueType::F32, x.to_bits().into()),
        CValue::Bool(x) => (ValueType::Bool, x.into()),
        CValue::U64(x) => (ValueType::U64, x),
        CValue::I64(x) => (ValueType::I64, x as u64),
        CValue::F64(x) => (ValueType::F64, x.to_bits()),
        CValue::String(_) | CValue::Array(_) => return None,
    })
}

/// What the comparison covered.
#[derive(Debug, Default)]
struct Counts {
    scalars: usize,
    strings: usize,
    arrays: usize,
    array_elements: usize,
    /// Strings that end in NUL bytes, which candle strips (compared without them).
    trailing_nul_strings: usize,
}

/// Compares our value with candle's, in full. Arrays are walked with an explicit stack.
fn compare_value(path: &str, ours: &Value, theirs: &CValue, counts: &mut Counts) {
    let mut pending: Vec<(String, &Value, &CValue)> = vec![(path.to_owned(), ours, theirs)];
    while let Some((path, ours, theirs)) = pending.pop() {
        match (ours, theirs) {
            (Value::Scalar { value_type, bits }, theirs) => {
                let candle = candle_scalar(theirs)
                    .unwrap_or_else(|| panic!("{path}: candle has {theirs:?}"));
                assert_eq!((*value_type, *bits), candle, "{path}: scalar differs");
                counts.scalars += 1;
            }
            (Value::String(s), CValue::String(c)) => {
                // candle pops trailing NULs and decodes lossily; our string is exact UTF-8.
                let trimmed = s.trim_end_matches('\0');
                if trimmed.len() != s.len() {
                    counts.trailing_nul_strings += 1;
                }
                assert_eq!(trimmed, c.as_str(), "{path}: string differs");
                counts.strings += 1;
            }
            (
                Value::Array {
                    element_type,
                    items,
                },
                CValue::Array(c),
            ) => {
                assert_eq!(items.len(), c.len(), "{path}: array length differs");
                counts.arrays += 1;
                counts.array_elements += items.len();
                for (i, (o, t)) in items.iter().zip(c).enumerate() {
                    let element = format!("{path}[{i}]");
                    let their_type = match t {
                        CValue::String(_) => ValueType::String,
                        CValue::Array(_) => ValueType::Array,
                        scalar => candle_scalar(scalar).expect("scalar").0,
                    };
                    assert_eq!(*element_type, their_type, "{element}: element type differs");
                    pending.push((element, o, t));
                }
            }
            (ours, theirs) => panic!("{path}: we have {ours:?}, candle has {theirs:?}"),
        }
    }
}

/// Our type for candle's dtype, by ggml code.
fn our_type(dtype: GgmlDType) -> GgmlType {
    let code = match dtype {
        GgmlDType::F32 => 0,
        GgmlDType::F16 => 1,
        GgmlDType::Q4_0 => 2,
        GgmlDType::Q4_1 => 3,
        GgmlDType::Q5_0 => 6,
        GgmlDType::Q5_1 => 7,
        GgmlDType::Q8_0 => 8,
        GgmlDType::Q8_1 => 9,
        GgmlDType::Q2K => 10,
        GgmlDType::Q3K => 11,
        GgmlDType::Q4K => 12,
        GgmlDType::Q5K => 13,
        GgmlDType::Q6K => 14,
        GgmlDType::Q8K => 15,
        GgmlDType::BF16 => 30,
    };
    GgmlType::from_code(code).expect("candle's 16 types are all known to us")
}

fn compare_file(file_name: &str) {
    let path = model_path(file_name);
    let (header, data_offset) = drive::real_header(&path);
    let ours = drive::slice(&header, Limits::DEFAULT);
    assert!(ours.is_complete(), "{file_name}: {:?}", ours.error);
    let ours = rebuild(&ours.events);

    let mut reader = std::io::BufReader::new(std::fs::File::open(&path).expect("open"));
    let candle = Content::read(&mut reader).expect("candle reads the file");

    // Metadata: same key set and count, no duplicates on our side.
    let our_keys: HashSet<&str> = ours.metadata.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        our_keys.len(),
        ours.metadata.len(),
        "{file_name}: duplicate keys"
    );
    assert_eq!(
        ours.metadata.len() as u64,
        ours.metadata_count,
        "{file_name}: key count vs header"
    );
    let candle_keys: HashSet<&str> = candle.metadata.keys().map(String::as_str).collect();
    assert_eq!(our_keys, candle_keys, "{file_name}: key sets differ");
    let mut counts = Counts::default();
    for (key, value) in &ours.metadata {
        compare_value(key, value, &candle.metadata[key], &mut counts);
    }

    // Tensors: shape, type, offset, byte size.
    assert_eq!(
        ours.tensors.len(),
        candle.tensor_infos.len(),
        "{file_name}: tensor count"
    );
    let mut types = std::collections::BTreeMap::<GgmlType, usize>::new();
    for t in &ours.tensors {
        let c = candle
            .tensor_infos
            .get(&t.name)
            .unwrap_or_else(|| panic!("{file_name}: candle lacks {}", t.name));
        let row_major: Vec<u64> = t.ne.iter().rev().copied().collect();
        let candle_dims: Vec<u64> = c.shape.dims().iter().map(|&d| d as u64).collect();
        assert_eq!(row_major, candle_dims, "{}: shape", t.name);
        assert_eq!(t.ggml_type, our_type(c.ggml_dtype), "{}: type", t.name);
        assert_eq!(t.offset, c.offset, "{}: offset", t.name);
        let candle_bytes =
            c.shape.elem_count() / c.ggml_dtype.block_size() * c.ggml_dtype.type_size();
        assert_eq!(t.bytes, candle_bytes as u64, "{}: byte size", t.name);
        *types.entry(t.ggml_type).or_default() += 1;
    }

    assert_eq!(
        ours.data_offset, candle.tensor_data_offset,
        "{file_name}: data offset"
    );
    assert_eq!(ours.data_offset, data_offset);
    println!(
        "{file_name}: {} keys ({} scalars, {} strings, {} arrays with {} elements compared one by one, \
         {} strings with trailing NULs), {} tensors {types:?}, alignment {}, data offset {}",
        ours.metadata.len(),
        counts.scalars,
        counts.strings,
        counts.arrays,
        counts.array_elements,
        counts.trailing_nul_strings,
        ours.tensors.len(),
        ours.alignment,
        ours.data_offset,
    );
}

#[test]
fn smollm2_header_matches_candle() {
    compare_file(SMOLLM2);
}

#[test]
fn gemma3_header_matches_candle() {
    compare_file(GEMMA);
}

/// The comparison itself must be able to fail: a crafted file with a nested array agrees, and a
/// single changed nested element or float bit is caught.
#[test]
fn comparison_catches_a_changed_nested_element() {
    use miniquant_tests::craft::{GgufFile, Value as W};
    let file = GgufFile {
        metadata: vec![
            (
                b"nested".to_vec(),
                W::array(vec![
                    W::array(vec![W::U8(1)]),
                    W::array(vec![W::U8(2), W::U8(3)]),
                ]),
            ),
            (b"pi".to_vec(), W::F32(std::f32::consts::PI)),
        ],
        ..GgufFile::default()
    };
    let bytes = file.to_bytes();
    let ours = rebuild(&drive::slice(&bytes, Limits::DEFAULT).events);
    let mut candle = Content::read(&mut std::io::Cursor::new(&bytes)).expect("candle reads it");
    let mut counts = Counts::default();
    for (key, value) in &ours.metadata {
        compare_value(key, value, &candle.metadata[key], &mut counts);
    }
    assert_eq!(
        (counts.arrays, counts.array_elements, counts.scalars),
        (3, 5, 4)
    );

    let CValue::Array(outer) = candle.metadata.get_mut("nested").unwrap() else {
        panic!("array")
    };
    let CValue::Array(inner) = &mut outer[1] else {
        panic!("array")
    };
    inner[1] = CValue::U8(4);
    let nested = &ours.metadata[0].1;
    let changed = std::panic::catch_unwind(|| {
        compare_value(
            "nested",
            nested,
            &candle.metadata["nested"],
            &mut Counts::default(),
        )
    });
    assert!(changed.is_err(), "a changed nested element went unnoticed");
    let pi = &ours.metadata[1].1;
    let next_float = CValue::F32(f32::from_bits(std::f32::consts::PI.to_bits() + 1));
    let changed =
        std::panic::catch_unwind(|| compare_value("pi", pi, &next_float, &mut Counts::default()));
    assert!(changed.is_err(), "a one-ulp float change went unnoticed");
}
