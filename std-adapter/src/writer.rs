//! An in-memory GGUF builder over the core writer (version 3, little-endian unless
//! [`GgufWriter::format`] says otherwise): for the shipped example file, for `extract` and
//! `convert-endian`, and for tests that need files of a given shape, including broken ones
//! (duplicate keys, overlapping or misplaced tensors, data cut short).
//!
//! [`GgufWriter`] collects owned keys and tensors. [`GgufWriter::to_bytes`] encodes exactly what it
//! was given, in order, through the core's unchecked [`Encoder`]; [`GgufWriter::to_checked_bytes`]
//! goes through the core's checked [`miniquant::gguf::GgufWriter`] and refuses anything the parser
//! would reject. Tensors added with [`GgufWriter::tensor`] are laid out one after the other, each
//! padded to the alignment, as ggml does; [`GgufWriter::tensor_at`] places one at any offset.
//!
//! For files too large to hold in memory, [`stream`] opens the core writer over any
//! [`std::io::Write`] and [`write_value`] writes an owned [`Value`] through it.

use std::io::{self, Write};

use embedded_io_adapters::std::FromStd;
use miniquant::gguf::{ByteOrder, Encoder, Scalar, TensorSpec, WriteOptions, DEFAULT_ALIGNMENT};
use miniquant::GgmlType;

use crate::value::{Array, Element, Value};

struct PendingTensor {
    name: String,
    type_code: u32,
    ne: Vec<u64>,
    offset: u64,
    data: Vec<u8>,
}

/// Builds a GGUF file in memory.
pub struct GgufWriter {
    metadata: Vec<(String, Value)>,
    tensors: Vec<PendingTensor>,
    /// Where the next [`tensor`](Self::tensor) goes, relative to the data section.
    next_offset: u64,
    version: u32,
    /// The order of the header's numbers; tensor data is written as given.
    byte_order: ByteOrder,
}

impl Default for GgufWriter {
    fn default() -> Self {
        Self {
            metadata: Vec::new(),
            tensors: Vec::new(),
            next_offset: 0,
            version: 3,
            byte_order: ByteOrder::Little,
        }
    }
}

/// Short on purpose: the pending tensors' data can be gigabytes.
impl std::fmt::Debug for GgufWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufWriter")
            .field("keys", &self.metadata.len())
            .field("tensors", &self.tensors.len())
            .field("next_offset", &self.next_offset)
            .finish()
    }
}

impl GgufWriter {
    /// An empty file.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the header's version (1 to 3; 1 has 32-bit lengths and counts) and byte order (default:
    /// 3, little-endian). Tensor data is written as given: data for a big-endian file must already
    /// be in that file's layout ([`miniquant::quant::byte_order`]).
    pub fn format(&mut self, version: u32, byte_order: ByteOrder) -> &mut Self {
        self.version = version;
        self.byte_order = byte_order;
        self
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
        let mut enc = self.directory_encoder();
        let padded = enc.pad_to(self.alignment());
        padded.unwrap_or_else(|e| unreachable!("a Vec cannot fail: {e}"));
        enc.into_inner()
    }

    /// The header without the padding after the tensor infos.
    pub fn directory_bytes(&self) -> Vec<u8> {
        self.directory_encoder().into_inner()
    }

    fn directory_encoder(&self) -> Encoder<Vec<u8>> {
        let mut enc = Encoder::new(Vec::new(), self.version, self.byte_order);
        encode_directory(&mut enc, self).unwrap_or_else(|e| unreachable!("a Vec cannot fail: {e}"));
        enc
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

/// Encodes the header up to the end of the tensor infos, without checking it.
fn encode_directory(enc: &mut Encoder<Vec<u8>>, w: &GgufWriter) -> miniquant::Result<()> {
    enc.bytes(&miniquant::gguf::GGUF_MAGIC)?;
    enc.u32(w.version)?;
    enc.len(w.tensors.len() as u64)?;
    enc.len(w.metadata.len() as u64)?;
    for (key, value) in &w.metadata {
        enc.str(key)?;
        enc.u32(value.value_type().code())?;
        encode_value(enc, value)?;
    }
    for t in &w.tensors {
        enc.str(&t.name)?;
        enc.u32(t.ne.len() as u32)?;
        for &d in &t.ne {
            enc.len(d)?;
        }
        enc.u32(t.type_code)?;
        enc.u64(t.offset)?;
    }
    Ok(())
}

/// Encodes a value without checking it. Recursive for nested arrays: the values were built in
/// code, whose depth the caller chose.
fn encode_value(enc: &mut Encoder<Vec<u8>>, value: &Value) -> miniquant::Result<()> {
    match value {
        Value::Scalar(s) => enc.scalar(*s),
        Value::String(s) => enc.str(s),
        Value::Array(a) => encode_array(enc, a),
    }
}

fn encode_array(enc: &mut Encoder<Vec<u8>>, a: &Array) -> miniquant::Result<()> {
    enc.array_header(a.element_type(), a.len() as u64)?;
    for element in a.iter() {
        match element {
            Element::Scalar(s) => enc.scalar(s)?,
            Element::Str(s) => enc.str(s)?,
            Element::Array(inner) => encode_array(enc, inner)?,
        }
    }
    Ok(())
}

/// The core writer over a [`std::io::Write`].
pub type StreamWriter<'t, W> = miniquant::gguf::GgufWriter<'t, FromStd<W>>;

/// Opens the core's checked streaming writer over `sink` and writes the fixed header; then
/// `metadata_count` keys (see [`write_value`]), [`finish_header`](StreamWriter::finish_header), and
/// each tensor's data in directory order.
pub fn stream<'t, W: Write>(
    sink: W,
    options: WriteOptions,
    metadata_count: u64,
    tensors: &'t [TensorSpec<'t>],
) -> miniquant::Result<StreamWriter<'t, W>> {
    miniquant::gguf::GgufWriter::new(FromStd::new(sink), options, metadata_count, tensors)
}

/// Writes `value` as the value of the key just written (or an array element) through the checked
/// writer. Recursive for nested arrays, whose depth the checked writer limits.
pub fn write_value<W: embedded_io::Write>(
    w: &mut miniquant::gguf::GgufWriter<'_, W>,
    value: &Value,
) -> miniquant::Result<()> {
    match value {
        Value::Scalar(s) => w.scalar(*s),
        Value::String(s) => w.string(s),
        Value::Array(a) => write_array(w, a),
    }
}

fn write_array<W: embedded_io::Write>(
    w: &mut miniquant::gguf::GgufWriter<'_, W>,
    a: &Array,
) -> miniquant::Result<()> {
    w.array_start(a.element_type(), a.len() as u64)?;
    for element in a.iter() {
        match element {
            Element::Scalar(s) => w.scalar(s)?,
            Element::Str(s) => w.string(s)?,
            Element::Array(inner) => write_array(w, inner)?,
        }
    }
    w.array_end()
}

/// Why [`GgufWriter::to_checked_bytes`] refused a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckedWriteError {
    /// A tensor's type code is not a ggml type.
    UnknownType {
        /// The tensor.
        name: String,
        /// Its code.
        code: u32,
    },
    /// A tensor placed with [`GgufWriter::tensor_at`] is not where the sequential layout puts it.
    NotSequential {
        /// The tensor.
        name: String,
    },
    /// The core writer refused the file.
    Core(miniquant::Error),
}

impl std::fmt::Display for CheckedWriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::UnknownType { name, code } => {
                write!(f, "tensor {name}: unknown type code {code}")
            }
            Self::NotSequential { name } => {
                write!(
                    f,
                    "tensor {name}: offset differs from the sequential layout"
                )
            }
            Self::Core(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for CheckedWriteError {}

impl From<miniquant::Error> for CheckedWriteError {
    fn from(e: miniquant::Error) -> Self {
        Self::Core(e)
    }
}

impl GgufWriter {
    /// The whole file through the core's checked writer: for a file the parser accepts, the bytes
    /// of [`to_bytes`](Self::to_bytes) followed by the padding after the last tensor (which ggml
    /// and gguf-py write); an error for anything else
    /// (duplicate keys or names, misaligned or non-sequential tensors, data of the wrong size).
    pub fn to_checked_bytes(&self) -> Result<Vec<u8>, CheckedWriteError> {
        let mut types = Vec::with_capacity(self.tensors.len());
        for t in &self.tensors {
            let ggml_type =
                GgmlType::from_code(t.type_code).map_err(|_| CheckedWriteError::UnknownType {
                    name: t.name.clone(),
                    code: t.type_code,
                })?;
            types.push(ggml_type);
        }
        let specs: Vec<TensorSpec<'_>> = self
            .tensors
            .iter()
            .zip(&types)
            .map(|(t, &ggml_type)| TensorSpec {
                name: &t.name,
                ggml_type,
                ne: &t.ne,
            })
            .collect();
        let mut w = miniquant::gguf::GgufWriter::new(
            Vec::new(),
            WriteOptions::DEFAULT,
            self.metadata.len() as u64,
            &specs,
        )?;
        for (key, value) in &self.metadata {
            w.key(key, value.value_type())?;
            write_value(&mut w, value)?;
        }
        w.finish_header()?;
        let alignment = u64::from(w.alignment());
        let mut offset = 0;
        for t in &self.tensors {
            if t.offset != offset {
                return Err(CheckedWriteError::NotSequential {
                    name: t.name.clone(),
                });
            }
            w.tensor_data(&t.data)?;
            offset = pad(offset + t.data.len() as u64, alignment);
        }
        Ok(w.finish()?)
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
        assert_checked_is_padded(&w);
    }

    fn assert_checked_is_padded(w: &GgufWriter) {
        let plain = w.to_bytes();
        let checked = w.to_checked_bytes().unwrap();
        assert_eq!(&checked[..plain.len()], plain);
        let padded = pad(plain.len() as u64, w.alignment().into());
        assert_eq!(checked.len() as u64, padded);
        assert!(checked[plain.len()..].iter().all(|&b| b == 0));
    }

    #[test]
    fn the_checked_path_refuses_what_the_parser_would() {
        let mut w = GgufWriter::new();
        w.kv("k", Scalar::U8(1)).kv("k", Scalar::U8(2));
        assert!(matches!(
            w.to_checked_bytes(),
            Err(CheckedWriteError::Core(
                miniquant::Error::DuplicateKey { .. }
            ))
        ));
        let mut w = GgufWriter::new();
        w.tensor("a", GgmlType::F32, &[4], vec![0; 12]);
        assert!(w.to_checked_bytes().is_err(), "12 bytes for 4 f32");
        let mut w = GgufWriter::new();
        w.tensor_at("a", GgmlType::F32.code(), &[1], 64, vec![0; 4]);
        assert_eq!(
            w.to_checked_bytes(),
            Err(CheckedWriteError::NotSequential { name: "a".into() })
        );
    }

    #[test]
    fn format_sets_the_header_version_and_byte_order() {
        let mut w = GgufWriter::new();
        w.kv("general.architecture", "x")
            .kv("n", Scalar::U64(0x0102_0304_0506_0708))
            .kv("a", Value::from(Array::I16(vec![-2, 3])));
        w.tensor("t", GgmlType::F32, &[2, 3], vec![7; 24]);
        let summary = |bytes: &[u8]| {
            let index = Index::from_bytes(bytes).unwrap();
            let keys: Vec<_> = index
                .metadata()
                .iter()
                .map(|m| (m.key.clone(), m.value.clone()))
                .collect();
            let t = &index.tensors()[0];
            let tensor = (t.name.clone(), t.ggml_type, t.ne().to_vec(), t.offset);
            (index.version(), index.byte_order(), keys, tensor)
        };
        let (_, _, keys, tensor) = summary(&w.to_bytes());
        for version in 1..=3 {
            for order in [ByteOrder::Little, ByteOrder::Big] {
                let bytes = w.format(version, order).to_bytes();
                let expected = (version, Some(order), keys.clone(), tensor.clone());
                assert_eq!(summary(&bytes), expected);
                assert_eq!(&bytes[bytes.len() - 24..], &[7; 24]);
                let directory = w.directory_bytes();
                assert_eq!(&w.header_bytes()[..directory.len()], directory);
            }
        }
    }

    #[test]
    fn tensors_are_padded_to_the_declared_alignment() {
        let mut w = GgufWriter::new();
        w.kv("general.alignment", Scalar::U32(64));
        w.tensor("a", GgmlType::F32, &[3], vec![1; 12]);
        w.tensor("b", GgmlType::F32, &[1], vec![2; 4]);
        let bytes = w.to_bytes();
        assert_checked_is_padded(&w);
        let index = Index::from_bytes(&bytes).unwrap();
        assert_eq!(index.alignment(), 64);
        assert_eq!(index.data_offset() % 64, 0);
        assert_eq!(index.tensors()[1].offset, 64);
        assert_eq!(bytes.len() as u64, index.data_offset() + 64 + 4);
    }
}
