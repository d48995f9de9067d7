//! The JSON layout of gguf-py's `gguf-dump --json --json-array` (`miniquant inspect --json-format
//! gguf-dump`), for tools written against it:
//!
//! ```text
//! {"filename": "x.gguf", "endian": "LITTLE",
//!  "metadata": {"GGUF.version": {"index": 0, "type": "UINT32", "offset": 4, "value": 3}, ...,
//!               "tokenizer.ggml.tokens": {"index": 7, "type": "ARRAY", "offset": 1234,
//!                                         "array_types": ["STRING"], "value": ["<s>", ...]}},
//!  "tensors": {"token_embd.weight": {"index": 0, "shape": [576, 49152], "type": "Q8_0",
//!                                    "offset": 5678}}}
//! ```
//!
//! As gguf-dump: the three header fields come first as pseudo-keys (`GGUF.version`,
//! `GGUF.tensor_count`, `GGUF.kv_count`); `offset` is the absolute offset of the key (of the field,
//! for the pseudo-keys; of the tensor info, for tensors); value types are gguf-py's enum names;
//! `shape` is in stored order (ggml's `ne`, fastest-varying first); an f32 is written as the f64 of
//! the same value (gguf-py widens it); a nested array's elements are flattened into one list and
//! its `array_types` come from the first element of each level, so an empty array lists none
//! (gguf-py's reader does all three). Non-finite floats, which
//! JSON lacks, are written as gguf-py's `json` module writes them: `NaN`, `Infinity`, `-Infinity`.

use std::io::{self, Write};

use miniquant::gguf::{ByteOrder, Scalar, ValueType};

use crate::index::Index;
use crate::json::{self, string};
use crate::value::{Array, Element, Value};

/// Writes `index` in gguf-dump's layout, `filename` as given; tensors only if `with_tensors`
/// (gguf-dump's `--no-tensors` leaves an empty object).
pub fn write_json<W: Write>(
    index: &Index,
    filename: &str,
    with_tensors: bool,
    w: &mut W,
) -> io::Result<()> {
    w.write_all(b"{\"filename\": ")?;
    string(w, filename)?;
    let endian = match index.byte_order() {
        Some(ByteOrder::Big) => "BIG",
        _ => "LITTLE",
    };
    write!(w, ", \"endian\": \"{endian}\", \"metadata\": {{")?;
    // The header fields at their offsets: version at 4, then the two u64 counts (u32 in v1).
    let count_bytes = if index.version() == 1 { 4 } else { 8 };
    let pseudo = [
        ("GGUF.version", "UINT32", 4, u64::from(index.version())),
        (
            "GGUF.tensor_count",
            if count_bytes == 4 { "UINT32" } else { "UINT64" },
            8,
            index.declared_tensor_count(),
        ),
        (
            "GGUF.kv_count",
            if count_bytes == 4 { "UINT32" } else { "UINT64" },
            8 + count_bytes,
            index.declared_metadata_count(),
        ),
    ];
    for (i, (name, ty, offset, value)) in pseudo.iter().enumerate() {
        if i > 0 {
            w.write_all(b", ")?;
        }
        string(w, name)?;
        write!(
            w,
            ": {{\"index\": {i}, \"type\": \"{ty}\", \"offset\": {offset}, \"value\": {value}}}"
        )?;
    }
    for (i, e) in index.metadata().iter().enumerate() {
        w.write_all(b", ")?;
        string(w, &e.key)?;
        write!(
            w,
            ": {{\"index\": {}, \"type\": \"{}\", \"offset\": {}",
            i + pseudo.len(),
            type_name(e.value.value_type()),
            e.key_offset
        )?;
        match &e.value {
            Value::Scalar(s) => {
                w.write_all(b", \"value\": ")?;
                scalar(w, *s)?;
            }
            Value::String(s) => {
                w.write_all(b", \"value\": ")?;
                string(w, s)?;
            }
            Value::Array(a) => {
                w.write_all(b", \"array_types\": [")?;
                array_types(w, a, true)?;
                w.write_all(b"], \"value\": [")?;
                flat_elements(w, a, &mut true)?;
                w.write_all(b"]")?;
            }
        }
        w.write_all(b"}")?;
    }
    w.write_all(b"}, \"tensors\": {")?;
    if with_tensors {
        for (i, t) in index.tensors().iter().enumerate() {
            if i > 0 {
                w.write_all(b", ")?;
            }
            string(w, &t.name)?;
            write!(w, ": {{\"index\": {i}, \"shape\": [")?;
            for (j, d) in t.ne().iter().enumerate() {
                if j > 0 {
                    w.write_all(b", ")?;
                }
                write!(w, "{d}")?;
            }
            write!(
                w,
                "], \"type\": \"{}\", \"offset\": {}}}",
                t.ggml_type.name(),
                t.info_offset
            )?;
        }
    }
    w.write_all(b"}}\n")
}

/// gguf-py's `GGUFValueType` names.
fn type_name(t: ValueType) -> &'static str {
    match t {
        ValueType::U8 => "UINT8",
        ValueType::I8 => "INT8",
        ValueType::U16 => "UINT16",
        ValueType::I16 => "INT16",
        ValueType::U32 => "UINT32",
        ValueType::I32 => "INT32",
        ValueType::F32 => "FLOAT32",
        ValueType::Bool => "BOOL",
        ValueType::String => "STRING",
        ValueType::Array => "ARRAY",
        ValueType::U64 => "UINT64",
        ValueType::I64 => "INT64",
        ValueType::F64 => "FLOAT64",
    }
}

/// The element types below the top-level `ARRAY`, as gguf-py's reader collects them: from the
/// first element of each level, so an empty array (at any level) ends the list.
fn array_types<W: Write>(w: &mut W, a: &Array, first: bool) -> io::Result<()> {
    let Some(element) = a.iter().next() else {
        return Ok(());
    };
    if !first {
        w.write_all(b", ")?;
    }
    write!(w, "\"{}\"", type_name(a.element_type()))?;
    if let Element::Array(inner) = element {
        array_types(w, inner, false)?;
    }
    Ok(())
}

/// Every leaf element of `a`, depth first, as one list.
fn flat_elements<W: Write>(w: &mut W, a: &Array, first: &mut bool) -> io::Result<()> {
    for element in a.iter() {
        if let Element::Array(inner) = element {
            flat_elements(w, inner, first)?;
            continue;
        }
        if !*first {
            w.write_all(b", ")?;
        }
        *first = false;
        match element {
            Element::Scalar(s) => scalar(w, s)?,
            Element::Str(s) => string(w, s)?,
            Element::Array(_) => {}
        }
    }
    Ok(())
}

/// Integers, bools and strings as in our own JSON; floats as Python's `json` writes a float that
/// numpy widened to f64 (NaN and infinities unquoted).
fn scalar<W: Write>(w: &mut W, s: Scalar) -> io::Result<()> {
    match s {
        Scalar::F32(v) => float(w, f64::from(v)),
        Scalar::F64(v) => float(w, v),
        other => json::scalar(w, other),
    }
}

fn float<W: Write>(w: &mut W, v: f64) -> io::Result<()> {
    if v.is_nan() {
        w.write_all(b"NaN")
    } else if v.is_infinite() {
        w.write_all(if v > 0.0 { b"Infinity" } else { b"-Infinity" })
    } else {
        serde_json::to_writer(w, &v).map_err(io::Error::from)
    }
}
