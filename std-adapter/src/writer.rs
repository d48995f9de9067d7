//! A small GGUF v3 (little-endian) writer: for the shipped example file and for tests that need
//! files of a given shape, including broken ones (duplicate keys, overlapping or misplaced tensors,
//! data cut short).
//!
//! The writer does not check what it writes: it encodes exactly the keys and tensor infos it is
//! given, in order. Tensors added with [`GgufWriter::tensor`] are laid out one after the other, each
//! padded to the alignment, as ggml does; [`GgufWriter::tensor_at`] places one at any offset.

use std::io::{self, Write};

use miniquant::gguf::{Scalar, DEFAULT_ALIGNMENT};
use miniquant::GgmlType;

use crate::value::{Array, Element, Value};

struct PendingTensor {
    name: String,
    type_code: u32,
    ne: Vec<u64>,
    offset: u64,
    data: Vec<u8>,
}

/// Builds a GGUF v3 file in memory.
#[derive(Default)]
pub struct GgufWriter {
    metadata: Vec<(String, Value)>,
    tensors: Vec<PendingTensor>,
    /// Where the next [`tensor`](Self::tensor) goes, relative to the data section.
    next_offset: u64,
}

impl GgufWriter {
    /// An empty file.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a metadata pair (a repeated key is written again).
    pub fn kv(&mut self, key: &str, value: impl Into<Value>) -> &mut Self {
        self.metadata.push((key.to_owned(), value.into()));
        self
    }

    /// The alignment the file declares: its first `general.alignment` u32, or 32.
    pub fn alignment(&self) -> u32 {
        self.metadata
            .iter()
            .find_map(|(k, v)| match (k.as_str(), v) {
                ("general.alignment", Value::Scalar(Scalar::U32(a))) if *a > 0 => Some(*a),
                _ => None,
            })
            .unwrap_or(DEFAULT_ALIGNMENT)
    }

    /// Appends a tensor whose data follows the previous tensor's, padded to the alignment. `ne` is
    /// ggml's order (fastest-varying first); `data` is written as given, whatever its length.
    pub fn tensor(
        &mut self,
        name: &str,
        ggml_type: GgmlType,
        ne: &[u64],
        data: Vec<u8>,
    ) -> &mut Self {
        let offset = self.next_offset;
        self.tensor_at(name, ggml_type.code(), ne, offset, data)
    }

    /// Appends a tensor info with any type code and data offset (relative to the data section);
    /// `data` is written at that offset, over anything already there.
    pub fn tensor_at(
        &mut self,
        name: &str,
        type_code: u32,
        ne: &[u64],
        offset: u64,
        data: Vec<u8>,
    ) -> &mut Self {
        let end = offset.saturating_add(data.len() as u64);
        self.next_offset = self.next_offset.max(pad(end, u64::from(self.alignment())));
        self.tensors.push(PendingTensor {
            name: name.to_owned(),
            type_code,
            ne: ne.to_vec(),
            offset,
            data,
        });
        self
    }

    /// The header: magic, counts, metadata, tensor infos and the padding up to the data section.
    pub fn header_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(b"GGUF");
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (key, value) in &self.metadata {
            put_str(&mut out, key);
            out.extend_from_slice(&value.value_type().code().to_le_bytes());
            put_value(&mut out, value);
        }
        for t in &self.tensors {
            put_str(&mut out, &t.name);
            out.extend_from_slice(&(t.ne.len() as u32).to_le_bytes());
            for d in &t.ne {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&t.type_code.to_le_bytes());
            out.extend_from_slice(&t.offset.to_le_bytes());
        }
        let aligned = pad(out.len() as u64, u64::from(self.alignment()));
        out.resize(aligned as usize, 0);
        out
    }

    /// The whole file: the header, then each tensor's data at its offset (zeros in between).
    /// Tensors without data take no room, whatever their offset.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = self.header_bytes();
        let data_start = out.len();
        for t in self.tensors.iter().filter(|t| !t.data.is_empty()) {
            let start = data_start + t.offset as usize;
            let end = start + t.data.len();
            if out.len() < end {
                out.resize(end, 0);
            }
            out[start..end].copy_from_slice(&t.data);
        }
        out
    }

    /// Writes [`to_bytes`](Self::to_bytes) to `w`.
    pub fn write_to<W: Write>(&self, mut w: W) -> io::Result<()> {
        w.write_all(&self.to_bytes())
    }
}

fn pad(n: u64, alignment: u64) -> u64 {
    n.div_ceil(alignment).saturating_mul(alignment)
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_scalar(out: &mut Vec<u8>, s: Scalar) {
    match s {
        Scalar::U8(v) => out.push(v),
        Scalar::I8(v) => out.extend_from_slice(&v.to_le_bytes()),
        Scalar::U16(v) => out.extend_from_slice(&v.to_le_bytes()),
        Scalar::I16(v) => out.extend_from_slice(&v.to_le_bytes()),
        Scalar::U32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Scalar::I32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Scalar::F32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Scalar::Bool(v) => out.push(u8::from(v)),
        Scalar::U64(v) => out.extend_from_slice(&v.to_le_bytes()),
        Scalar::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
        Scalar::F64(v) => out.extend_from_slice(&v.to_le_bytes()),
    }
}

fn put_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Scalar(s) => put_scalar(out, *s),
        Value::String(s) => put_str(out, s),
        Value::Array(a) => put_array(out, a),
    }
}

/// Element type, length, elements. Recursive for nested arrays: the writer encodes values built in
/// code, whose depth the caller chose.
fn put_array(out: &mut Vec<u8>, a: &Array) {
    out.extend_from_slice(&a.element_type().code().to_le_bytes());
    out.extend_from_slice(&(a.len() as u64).to_le_bytes());
    for element in a.iter() {
        match element {
            Element::Scalar(s) => put_scalar(out, s),
            Element::Str(s) => put_str(out, s),
            Element::Array(inner) => put_array(out, inner),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Index;

    #[test]
    fn example_header_bytes_match_the_core_example() {
        let mut w = GgufWriter::new();
        w.kv("general.architecture", "llama");
        w.tensor("w", GgmlType::F32, &[4], vec![0; 16]);
        let header = miniquant::gguf::example_header();
        assert_eq!(&w.to_bytes()[..header.len()], header);
    }

    #[test]
    fn tensors_are_padded_to_the_declared_alignment() {
        let mut w = GgufWriter::new();
        w.kv("general.alignment", Scalar::U32(64));
        w.tensor("a", GgmlType::F32, &[3], vec![1; 12]);
        w.tensor("b", GgmlType::F32, &[1], vec![2; 4]);
        let bytes = w.to_bytes();
        let index = Index::from_bytes(&bytes).unwrap();
        assert_eq!(index.alignment(), 64);
        assert_eq!(index.data_offset() % 64, 0);
        assert_eq!(index.tensors()[1].offset, 64);
        assert_eq!(bytes.len() as u64, index.data_offset() + 64 + 4);
    }
}
