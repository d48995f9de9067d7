//! The JSON form of an [`Index`] (`miniquant inspect --json`), written as a stream: nothing but the
//! index itself is held in memory, however large the vocabulary.
//!
//! One object:
//! ```text
//! {"version": 3, "byte_order": "little", "alignment": 32, "data_offset": 1234, "file_size": 5678,
//!  "metadata": [{"key": "general.architecture", "type": "string", "value": "llama"},
//!               {"key": "tokenizer.ggml.tokens", "type": "array", "element_type": "string",
//!                "len": 3, "value": ["a", "b", "c"]}, ...],
//!  "tensors": [{"name": "w", "type": "Q8_0", "shape": [2, 64], "offset": 0, "bytes": 136}, ...]}
//! ```
//! - `type` of a metadata value is the GGUF value type in lower case (`u8` .. `f64`, `bool`,
//!   `string`, `array`); `element_type` likewise.
//! - An array of arrays lists each inner array as an object `{"element_type", "len", "value"}`, so
//!   every array, at any depth, carries its element type even when it is empty.
//! - Integers are written exactly (u64 and i64 included). An f32 is written as the shortest decimal
//!   that reads back to the same f32 (not widened to f64 digits), an f64 as the shortest that reads
//!   back to the same f64. NaN and infinities, which JSON lacks, are the strings `"NaN"`, `"inf"`
//!   and `"-inf"`.
//! - Tensor `type` is the ggml name (`Q8_0`, `Q4_K`, ...), `shape` is row-major (slowest-varying
//!   dimension first), `offset` is relative to the data section, as stored.
//! - `file_size` is `null` when unknown (an index read from a stream).
//! - [`write_parts`] leaves out `metadata` or `tensors` (`inspect --no-metadata`, `--no-tensors`)
//!   or lists only some tensors (`inspect --tensor GLOB`); [`write_entry`] writes one metadata
//!   object alone (`inspect --json --key KEY`).

use std::io::{self, Write};

use miniquant::gguf::Scalar;

use crate::index::{Index, MetadataEntry, TensorEntry};
use crate::value::{Array, Element, Value};

/// Writes `index` as one JSON object followed by a newline.
pub fn write_index<W: Write>(index: &Index, w: &mut W) -> io::Result<()> {
    let all: Vec<&TensorEntry> = index.tensors().iter().collect();
    write_parts(index, true, Some(&all), w)
}

/// Writes `index` as one JSON object followed by a newline, with the `metadata` field only if
/// `metadata`, and a `tensors` field listing `tensors` only if it is `Some`.
pub fn write_parts<W: Write>(
    index: &Index,
    metadata: bool,
    tensors: Option<&[&TensorEntry]>,
    w: &mut W,
) -> io::Result<()> {
    write!(w, "{{\"version\":{},\"byte_order\":", index.version())?;
    string(w, index.byte_order().map_or("unknown", |b| b.name()))?;
    write!(
        w,
        ",\"alignment\":{},\"data_offset\":{},\"file_size\":",
        index.alignment(),
        index.data_offset()
    )?;
    match index.file_size() {
        Some(n) => write!(w, "{n}")?,
        None => w.write_all(b"null")?,
    }
    if metadata {
        w.write_all(b",\"metadata\":[")?;
        for (i, e) in index.metadata().iter().enumerate() {
            if i > 0 {
                w.write_all(b",")?;
            }
            w.write_all(b"\n")?;
            write_entry(e, w)?;
        }
        w.write_all(b"]")?;
    }
    let Some(tensors) = tensors else {
        return w.write_all(b"}\n");
    };
    w.write_all(b",\"tensors\":[")?;
    for (i, t) in tensors.iter().enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        w.write_all(b"\n{\"name\":")?;
        string(w, &t.name)?;
        w.write_all(b",\"type\":")?;
        string(w, t.ggml_type.name())?;
        w.write_all(b",\"shape\":[")?;
        for (j, d) in t.shape().iter().enumerate() {
            if j > 0 {
                w.write_all(b",")?;
            }
            write!(w, "{d}")?;
        }
        write!(w, "],\"offset\":{},\"bytes\":{}}}", t.offset, t.bytes)?;
    }
    w.write_all(b"]}\n")
}

/// One metadata entry as an object: `{"key":..,"type":..,"value":..}` (arrays with their
/// `element_type` and `len`).
pub fn write_entry<W: Write>(e: &MetadataEntry, w: &mut W) -> io::Result<()> {
    w.write_all(b"{\"key\":")?;
    string(w, &e.key)?;
    w.write_all(b",\"type\":")?;
    string(w, e.value.value_type().name())?;
    match &e.value {
        Value::Scalar(s) => {
            w.write_all(b",\"value\":")?;
            scalar(w, *s)?;
        }
        Value::String(s) => {
            w.write_all(b",\"value\":")?;
            string(w, s)?;
        }
        Value::Array(a) => {
            w.write_all(b",")?;
            array_fields(w, a)?;
        }
    }
    w.write_all(b"}")
}

/// `"element_type":..,"len":..,"value":[..]` of an array. Nesting is bounded by the parser's
/// depth limit, so the recursion is too.
fn array_fields<W: Write>(w: &mut W, a: &Array) -> io::Result<()> {
    w.write_all(b"\"element_type\":")?;
    string(w, a.element_type().name())?;
    write!(w, ",\"len\":{},\"value\":[", a.len())?;
    for (i, element) in a.iter().enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        match element {
            Element::Scalar(s) => scalar(w, s)?,
            Element::Str(s) => string(w, s)?,
            Element::Array(inner) => {
                w.write_all(b"{")?;
                array_fields(w, inner)?;
                w.write_all(b"}")?;
            }
        }
    }
    w.write_all(b"]")
}

pub(crate) fn string<W: Write>(w: &mut W, s: &str) -> io::Result<()> {
    serde_json::to_writer(w, s).map_err(io::Error::from)
}

pub(crate) fn scalar<W: Write>(w: &mut W, s: Scalar) -> io::Result<()> {
    match s {
        Scalar::U8(v) => write!(w, "{v}"),
        Scalar::I8(v) => write!(w, "{v}"),
        Scalar::U16(v) => write!(w, "{v}"),
        Scalar::I16(v) => write!(w, "{v}"),
        Scalar::U32(v) => write!(w, "{v}"),
        Scalar::I32(v) => write!(w, "{v}"),
        Scalar::U64(v) => write!(w, "{v}"),
        Scalar::I64(v) => write!(w, "{v}"),
        Scalar::Bool(v) => write!(w, "{v}"),
        // serde_json writes an f32 with the shortest digits that round-trip as f32.
        Scalar::F32(v) if v.is_finite() => serde_json::to_writer(w, &v).map_err(io::Error::from),
        Scalar::F64(v) if v.is_finite() => serde_json::to_writer(w, &v).map_err(io::Error::from),
        Scalar::F32(v) => string(w, non_finite(f64::from(v))),
        Scalar::F64(v) => string(w, non_finite(v)),
    }
}

fn non_finite(v: f64) -> &'static str {
    if v.is_nan() {
        "NaN"
    } else if v > 0.0 {
        "inf"
    } else {
        "-inf"
    }
}
