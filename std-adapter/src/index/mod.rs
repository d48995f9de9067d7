//! The owned index of a GGUF header: every metadata pair and tensor info in file order, with
//! lookup by name, built from the core parser's events.
//!
//! [`Index::from_bytes`] parses a header held in memory through [`SliceParser`];
//! [`Index::from_reader`] reads it from any [`std::io::Read`] through [`ReadParser`] (strings that
//! arrive in pieces are reassembled). Neither preallocates by a count read from the file: every
//! `Vec` grows as elements actually arrive, so memory stays proportional to the header's real size.
//!
//! Building an index checks the header's structure (what the core parser checks). Duplicate names are
//! recorded, not rejected, and lookups by name return the first occurrence; the whole-file checks
//! (duplicates, tensor bounds, overlaps, layout warnings) are in [`crate::validate`].

mod build;

use miniquant::gguf::{ByteOrder, Limits, ReadParser, SliceParser, MAX_DIMS_CAPACITY};
use miniquant::{Error, GgmlType, Result};

use crate::names::NameIndex;
use crate::value::Value;
use build::Builder;

/// One metadata key/value pair.
#[derive(Debug, Clone, PartialEq)]
pub struct MetadataEntry {
    /// The key.
    pub key: String,
    /// The value.
    pub value: Value,
    /// Absolute offset of the key's length prefix.
    pub key_offset: u64,
    /// Absolute offset of the value's encoding (for a string its length prefix, for an array its
    /// element type).
    pub value_offset: u64,
}

/// One tensor info of the tensor directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorEntry {
    /// The tensor's name.
    pub name: String,
    /// Element type.
    pub ggml_type: GgmlType,
    /// Number of dimensions.
    pub n_dims: u32,
    /// Dimensions as stored (ggml's `ne`, fastest-varying first); only `..n_dims` are meaningful.
    pub ne_all: [u64; MAX_DIMS_CAPACITY],
    /// Offset of the data, relative to the data section, as stored.
    pub offset: u64,
    /// Number of elements.
    pub elements: u64,
    /// Size of the data in bytes.
    pub bytes: u64,
    /// Absolute offset of the tensor info in the file.
    pub info_offset: u64,
}

impl TensorEntry {
    /// The dimensions as stored, fastest-varying first (ggml's `ne[0..n_dims]`).
    pub fn ne(&self) -> &[u64] {
        self.ne_all.get(..self.n_dims as usize).unwrap_or(&[])
    }

    /// The shape in row-major order (slowest-varying first), as numpy and candle write it.
    pub fn shape(&self) -> Vec<u64> {
        self.ne().iter().rev().copied().collect()
    }
}

/// The owned index of a GGUF header.
#[derive(Debug, Clone, Default)]
pub struct Index {
    pub(crate) version: u32,
    pub(crate) byte_order: Option<ByteOrder>,
    pub(crate) declared_tensors: u64,
    pub(crate) declared_metadata: u64,
    pub(crate) alignment: u32,
    pub(crate) data_offset: u64,
    pub(crate) file_size: Option<u64>,
    pub(crate) complete: bool,
    pub(crate) metadata: Vec<MetadataEntry>,
    pub(crate) tensors: Vec<TensorEntry>,
    pub(crate) key_lookup: NameIndex,
    pub(crate) tensor_lookup: NameIndex,
    /// `DuplicateKey` / `DuplicateTensor` errors, in file order.
    pub(crate) duplicates: Vec<Error>,
}

/// How [`Index::from_reader_with`] reads.
#[derive(Debug, Clone, Copy)]
pub struct ReaderOptions {
    /// The parser's buffer. Every key and tensor info must fit it; string values may be longer.
    pub buffer_bytes: usize,
    /// The stream's total length, if known: lets the parser check counts against it, and is kept as
    /// [`Index::file_size`].
    pub total_len: Option<u64>,
    /// Parser limits.
    pub limits: Limits,
}

impl Default for ReaderOptions {
    fn default() -> Self {
        // A key or tensor name may be 65535 bytes (the default `max_key_bytes`) plus its framing.
        Self {
            buffer_bytes: 128 * 1024,
            total_len: None,
            limits: Limits::DEFAULT,
        }
    }
}

impl Index {
    /// Parses the header at the start of `bytes` (the whole file, or at least its header);
    /// `file_size` is `bytes.len()`.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        match Self::from_bytes_partial(bytes, Limits::DEFAULT) {
            (index, None) => Ok(index),
            (_, Some(e)) => Err(e),
        }
    }

    /// Like [`from_bytes`](Self::from_bytes), but on a parse error also returns what was read up to
    /// it (the index is then not [`complete`](Self::is_complete)), so that more problems can be
    /// reported than the first.
    pub fn from_bytes_partial(bytes: &[u8], limits: Limits) -> (Self, Option<Error>) {
        let mut builder = Builder::new(Some(bytes.len() as u64));
        let mut parser = SliceParser::new(bytes, limits);
        loop {
            let offset = parser.parser().offset();
            match parser.next_event() {
                Ok(Some(event)) => {
                    if let Err(e) = builder.observe(&event, offset) {
                        return (builder.finish(), Some(e));
                    }
                }
                Ok(None) => return (builder.finish(), None),
                Err(e) => return (builder.finish(), Some(e)),
            }
        }
    }

    /// Reads the header from `reader` (a file, a pipe, a socket) with the default
    /// [`ReaderOptions`]; the stream's length is unknown, so [`file_size`](Self::file_size) is `None`.
    pub fn from_reader<R: std::io::Read>(reader: R) -> Result<Self> {
        Self::from_reader_with(reader, ReaderOptions::default())
    }

    /// Reads the header from `reader` with the given options. The reader is left somewhere after the
    /// header.
    pub fn from_reader_with<R: std::io::Read>(reader: R, options: ReaderOptions) -> Result<Self> {
        let mut buf = vec![0u8; options.buffer_bytes];
        let reader = embedded_io_adapters::std::FromStd::new(RetryInterrupted(reader));
        let mut parser = ReadParser::new(reader, &mut buf, options.limits)?;
        if let Some(len) = options.total_len {
            parser = parser.with_total_len(len);
        }
        let mut builder = Builder::new(options.total_len);
        loop {
            // Events borrow the parser's buffer, so take the offset first: it is where the next
            // event starts.
            let offset = parser.parser().offset();
            match parser.next_event()? {
                Some(event) => builder.observe(&event, offset)?,
                None => return Ok(builder.finish()),
            }
        }
    }

    /// The GGUF version (1, 2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The file's byte order (`None` only for an index whose header could not be read).
    pub fn byte_order(&self) -> Option<ByteOrder> {
        self.byte_order
    }

    /// `general.alignment`, or 32.
    pub fn alignment(&self) -> u32 {
        self.alignment
    }

    /// Absolute offset of the data section.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// Size of the file the index was read from, when known.
    pub fn file_size(&self) -> Option<u64> {
        self.file_size
    }

    /// Whether the whole header was read (false only for a partial index after a parse error).
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// The header's metadata count.
    pub fn declared_metadata_count(&self) -> u64 {
        self.declared_metadata
    }

    /// The header's tensor count.
    pub fn declared_tensor_count(&self) -> u64 {
        self.declared_tensors
    }

    /// Every metadata pair, in file order.
    pub fn metadata(&self) -> &[MetadataEntry] {
        &self.metadata
    }

    /// Every tensor info, in file order.
    pub fn tensors(&self) -> &[TensorEntry] {
        &self.tensors
    }

    /// The metadata pair with this key (the first, if the key is duplicated).
    pub fn entry(&self, key: &str) -> Option<&MetadataEntry> {
        let i = self
            .key_lookup
            .find(key, |i| self.metadata.get(i).map(|e| e.key.as_str()))?;
        self.metadata.get(i)
    }

    /// The value of this key (the first, if the key is duplicated).
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.entry(key).map(|e| &e.value)
    }

    /// The tensor with this name (the first, if the name is duplicated).
    pub fn tensor(&self, name: &str) -> Option<&TensorEntry> {
        let i = self
            .tensor_lookup
            .find(name, |i| self.tensors.get(i).map(|t| t.name.as_str()))?;
        self.tensors.get(i)
    }

    /// The duplicate keys and tensor names found, as errors at the second occurrence.
    pub fn duplicates(&self) -> &[Error] {
        &self.duplicates
    }

    /// Absolute byte range of a tensor's data, checked against overflow (not against the file).
    pub fn data_range(&self, tensor: &TensorEntry) -> Result<std::ops::Range<u64>> {
        let overflow = Error::ShapeOverflow {
            offset: tensor.info_offset,
        };
        let start = self
            .data_offset
            .checked_add(tensor.offset)
            .ok_or(overflow)?;
        let end = start.checked_add(tensor.bytes).ok_or(overflow)?;
        Ok(start..end)
    }
}

/// Retries reads that a signal interrupted, as `std::io::Read::read_exact` does.
struct RetryInterrupted<R>(R);

impl<R: std::io::Read> std::io::Read for RetryInterrupted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            match self.0.read(buf) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                other => return other,
            }
        }
    }
}
