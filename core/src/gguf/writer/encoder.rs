//! The format's primitives in one byte order, unchecked: the checked writer builds on it, and
//! tests use it directly to build broken files.

use crate::error::{Error, Result};
use crate::gguf::{ByteOrder, Scalar, ValueType};

/// Puts GGUF primitives into a writer in one byte order, counting the bytes written. It checks
/// nothing about the file's structure.
#[derive(Debug)]
pub struct Encoder<W> {
    pub(super) sink: W,
    pub(super) order: ByteOrder,
    /// Width of lengths and counts: 4 bytes in version 1, 8 after.
    pub(super) len_width: usize,
    pub(super) written: u64,
}

impl<W: embedded_io::Write> Encoder<W> {
    /// An encoder for a file of `version` (1 uses 32-bit lengths and counts) in `order`.
    pub fn new(sink: W, version: u32, order: ByteOrder) -> Self {
        Self {
            sink,
            order,
            len_width: if version == 1 { 4 } else { 8 },
            written: 0,
        }
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// The byte order.
    pub fn byte_order(&self) -> ByteOrder {
        self.order
    }

    /// The writer.
    pub fn into_inner(self) -> W {
        self.sink
    }

    /// Flushes the writer.
    pub fn flush(&mut self) -> Result<()> {
        let offset = self.written;
        self.sink.flush().map_err(|e| io_error(e, offset))
    }

    /// Raw bytes, as given.
    pub fn bytes(&mut self, bytes: &[u8]) -> Result<()> {
        let offset = self.written;
        self.sink
            .write_all(bytes)
            .map_err(|e| io_error(e, offset))?;
        self.written = self.written.saturating_add(bytes.len() as u64);
        Ok(())
    }

    /// `n` zero bytes.
    pub fn zeros(&mut self, mut n: u64) -> Result<()> {
        const ZEROS: [u8; 64] = [0; 64];
        while n > 0 {
            let k = n.min(ZEROS.len() as u64) as usize;
            self.bytes(ZEROS.get(..k).unwrap_or(&ZEROS))?;
            n = n.saturating_sub(k as u64);
        }
        Ok(())
    }

    /// Zero bytes up to the next multiple of `alignment` (a power of two).
    pub fn pad_to(&mut self, alignment: u32) -> Result<()> {
        let end = self
            .written
            .checked_next_multiple_of(u64::from(alignment.max(1)))
            .unwrap_or(self.written);
        let n = end.saturating_sub(self.written);
        self.zeros(n)
    }

    /// A `u32` in the file's byte order.
    pub fn u32(&mut self, v: u32) -> Result<()> {
        match self.order {
            ByteOrder::Little => self.bytes(&v.to_le_bytes()),
            ByteOrder::Big => self.bytes(&v.to_be_bytes()),
        }
    }

    /// A `u64` in the file's byte order.
    pub fn u64(&mut self, v: u64) -> Result<()> {
        match self.order {
            ByteOrder::Little => self.bytes(&v.to_le_bytes()),
            ByteOrder::Big => self.bytes(&v.to_be_bytes()),
        }
    }

    /// A length or count: a `u64`, or in version 1 a `u32` (truncated if larger).
    pub fn len(&mut self, n: u64) -> Result<()> {
        if self.len_width == 4 {
            self.u32(n as u32)
        } else {
            self.u64(n)
        }
    }

    /// A length-prefixed string.
    pub fn str(&mut self, s: &str) -> Result<()> {
        self.len(s.len() as u64)?;
        self.bytes(s.as_bytes())
    }

    /// A scalar value (without its type code).
    pub fn scalar(&mut self, s: Scalar) -> Result<()> {
        let mut buf = [0u8; 8];
        let size = encode_scalar(s, self.order, &mut buf);
        self.bytes(buf.get(..size).unwrap_or(&buf[..0]))
    }

    /// An array header: element type code and length.
    pub fn array_header(&mut self, element_type: ValueType, len: u64) -> Result<()> {
        self.u32(element_type.code())?;
        self.len(len)
    }
}

/// Writes `s` into the front of `buf` in byte order `order`; returns its size.
fn encode_scalar(s: Scalar, order: ByteOrder, buf: &mut [u8; 8]) -> usize {
    let mut put = |le: &[u8]| {
        let n = le.len();
        let out = buf.get_mut(..n).unwrap_or(&mut []);
        out.copy_from_slice(le);
        if order == ByteOrder::Big {
            out.reverse();
        }
        n
    };
    match s {
        Scalar::U8(v) => put(&[v]),
        Scalar::I8(v) => put(&v.to_le_bytes()),
        Scalar::Bool(v) => put(&[u8::from(v)]),
        Scalar::U16(v) => put(&v.to_le_bytes()),
        Scalar::I16(v) => put(&v.to_le_bytes()),
        Scalar::U32(v) => put(&v.to_le_bytes()),
        Scalar::I32(v) => put(&v.to_le_bytes()),
        Scalar::F32(v) => put(&v.to_le_bytes()),
        Scalar::U64(v) => put(&v.to_le_bytes()),
        Scalar::I64(v) => put(&v.to_le_bytes()),
        Scalar::F64(v) => put(&v.to_le_bytes()),
    }
}

fn io_error<E: embedded_io::Error>(e: E, offset: u64) -> Error {
    Error::WriteFailed {
        kind: e.kind(),
        offset,
    }
}
