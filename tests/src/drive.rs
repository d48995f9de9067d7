//! Runs each parser driver (slice, `Read`, push) over the same bytes and records what it yields as
//! owned, comparable values: the events, with consecutive string pieces joined back into whole
//! strings (after checking that the pieces are consistent), and the error that ended the parse.

use miniquant::gguf::{
    DataSection, Event, Header, Limits, PushParser, ReadParser, Scalar, SliceParser, ValueType,
};
use miniquant::{Error, GgmlType};

/// An event with its strings owned and string pieces joined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ev {
    /// The fixed header.
    Header(Header),
    /// A key.
    Key {
        /// The key.
        key: String,
        /// The value's type.
        value_type: ValueType,
    },
    /// A scalar, floats by their bits.
    Scalar {
        /// Its type.
        value_type: ValueType,
        /// Its value (sign-extended for signed types, raw bits for floats).
        bits: u64,
    },
    /// A whole string, however many pieces it came in.
    String(String),
    /// An array start.
    ArrayStart {
        /// Element type.
        element_type: ValueType,
        /// Element count.
        len: u64,
    },
    /// An array end.
    ArrayEnd,
    /// A tensor info.
    Tensor {
        /// Name.
        name: String,
        /// Dimensions as stored (`ne[..n_dims]`).
        ne: Vec<u64>,
        /// Type.
        ggml_type: GgmlType,
        /// Offset relative to the data section.
        offset: u64,
        /// Element count.
        elements: u64,
        /// Byte count.
        bytes: u64,
    },
    /// The end of the header.
    End(DataSection),
}

/// A scalar as (type, bits), so that events compare exactly.
pub fn scalar_bits(s: Scalar) -> (ValueType, u64) {
    let bits = match s {
        Scalar::U8(v) => v.into(),
        Scalar::I8(v) => v as i64 as u64,
        Scalar::U16(v) => v.into(),
        Scalar::I16(v) => v as i64 as u64,
        Scalar::U32(v) => v.into(),
        Scalar::I32(v) => v as i64 as u64,
        Scalar::F32(v) => v.to_bits().into(),
        Scalar::Bool(v) => v.into(),
        Scalar::U64(v) => v,
        Scalar::I64(v) => v as u64,
        Scalar::F64(v) => v.to_bits(),
    };
    (s.value_type(), bits)
}

/// What one driver produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Events, string pieces joined.
    pub events: Vec<Ev>,
    /// The error that ended the parse, if any.
    pub error: Option<Error>,
    /// Number of string events seen (pieces included): above the number of strings when some
    /// string was split.
    pub string_pieces: usize,
}

impl Outcome {
    /// Whether the parse reached [`Event::End`] without error.
    pub fn is_complete(&self) -> bool {
        self.error.is_none() && matches!(self.events.last(), Some(Ev::End(_)))
    }

    /// The events and the error: what must agree across drivers (the number of string pieces
    /// depends on the buffer).
    pub fn result(&self) -> (&[Ev], Option<Error>) {
        (&self.events, self.error)
    }

    /// Number of whole strings among the events.
    pub fn strings(&self) -> usize {
        self.events
            .iter()
            .filter(|e| matches!(e, Ev::String(_)))
            .count()
    }
}

/// Accumulates events; checks that string pieces follow each other exactly.
#[derive(Debug, Default)]
pub struct Collector {
    events: Vec<Ev>,
    open: Option<(String, u64)>,
    pieces: usize,
}

impl Collector {
    /// Records one event.
    ///
    /// # Panics
    /// If a string piece does not continue the open string exactly (position, total length), or
    /// another event interrupts an unfinished string.
    pub fn push(&mut self, event: &Event<'_>) {
        if let Event::String(piece) = event {
            self.pieces += 1;
            let (mut text, len) = self.open.take().unwrap_or_default();
            if text.is_empty() {
                assert_eq!(piece.at, 0, "a string must start at 0: {piece:?}");
            } else {
                assert_eq!(
                    piece.len, len,
                    "a piece changed the string's length: {piece:?}"
                );
            }
            assert_eq!(
                piece.at,
                text.len() as u64,
                "pieces must be contiguous: {piece:?}"
            );
            assert!(
                !piece.text.is_empty() || piece.len == 0,
                "an empty piece of a non-empty string: {piece:?}"
            );
            text.push_str(piece.text);
            assert!(
                text.len() as u64 <= piece.len,
                "pieces overrun the string: {piece:?}"
            );
            if piece.is_last() {
                self.events.push(Ev::String(text));
            } else {
                self.open = Some((text, piece.len));
            }
            return;
        }
        assert!(
            self.open.is_none(),
            "{event:?} interrupts an unfinished string"
        );
        self.events.push(match *event {
            Event::Header(h) => Ev::Header(h),
            Event::Key { key, value_type } => Ev::Key {
                key: key.to_owned(),
                value_type,
            },
            Event::Scalar(s) => {
                let (value_type, bits) = scalar_bits(s);
                Ev::Scalar { value_type, bits }
            }
            Event::Scalars(run) => {
                // Runs are cut where a streaming driver's buffer ends: record each element.
                for s in run.iter() {
                    let (value_type, bits) = scalar_bits(s);
                    self.events.push(Ev::Scalar { value_type, bits });
                }
                return;
            }
            Event::String(_) => unreachable!("handled above"),
            Event::ArrayStart { element_type, len } => Ev::ArrayStart { element_type, len },
            Event::ArrayEnd => Ev::ArrayEnd,
            Event::Tensor(t) => Ev::Tensor {
                name: t.name.to_owned(),
                ne: t.ne().to_vec(),
                ggml_type: t.ggml_type,
                offset: t.offset,
                elements: t.elements,
                bytes: t.bytes,
            },
            Event::End(d) => Ev::End(d),
        });
    }

    /// The outcome, with the error that ended the parse (an unfinished string stays out).
    pub fn finish(self, error: Option<Error>) -> Outcome {
        Outcome {
            events: self.events,
            error,
            string_pieces: self.pieces,
        }
    }
}

/// The `&[u8]` driver over `bytes`.
pub fn slice(bytes: &[u8], limits: Limits) -> Outcome {
    let mut parser = SliceParser::new(bytes, limits);
    let mut out = Collector::default();
    loop {
        match parser.next_event() {
            Ok(Some(event)) => out.push(&event),
            Ok(None) => return out.finish(None),
            Err(e) => return out.finish(Some(e)),
        }
    }
}

/// A reader over a byte slice that returns at most the next of `sizes` (cycled) bytes per call.
#[derive(Debug, Clone)]
pub struct ChunkReader<'a> {
    data: &'a [u8],
    sizes: Vec<usize>,
    calls: usize,
}

impl<'a> ChunkReader<'a> {
    /// Reads of `sizes[0]`, `sizes[1]`, ... bytes, cycling (each at least 1).
    pub fn new(data: &'a [u8], sizes: Vec<usize>) -> Self {
        assert!(!sizes.is_empty(), "at least one read size");
        Self {
            data,
            sizes,
            calls: 0,
        }
    }
}

impl embedded_io::ErrorType for ChunkReader<'_> {
    type Error = core::convert::Infallible;
}

impl embedded_io::Read for ChunkReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Self::Error> {
        let want = self.sizes[self.calls % self.sizes.len()].max(1);
        self.calls += 1;
        let n = want.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

/// The `Read` driver over any reader, through a buffer of `buf_len` bytes; `total_len` is passed
/// to [`ReadParser::with_total_len`] when given.
pub fn read<R: embedded_io::Read>(
    reader: R,
    buf_len: usize,
    total_len: Option<u64>,
    limits: Limits,
) -> Outcome {
    let mut buf = vec![0u8; buf_len];
    let mut out = Collector::default();
    let mut parser = match ReadParser::new(reader, &mut buf, limits) {
        Ok(p) => p,
        Err(e) => return out.finish(Some(e)),
    };
    if let Some(total) = total_len {
        parser = parser.with_total_len(total);
    }
    loop {
        match parser.next_event() {
            Ok(Some(event)) => out.push(&event),
            Ok(None) => return out.finish(None),
            Err(e) => return out.finish(Some(e)),
        }
    }
}

/// The `Read` driver over `bytes` delivered `sizes` bytes per read (cycled).
pub fn read_chunked(
    bytes: &[u8],
    sizes: Vec<usize>,
    buf_len: usize,
    total_len: Option<u64>,
    limits: Limits,
) -> Outcome {
    read(ChunkReader::new(bytes, sizes), buf_len, total_len, limits)
}

/// The push driver through a buffer of `buf_len` bytes, fed chunks of `sizes[0]`, `sizes[1]`, ...
/// bytes (cycled), then finished; `total_len` is passed to [`PushParser::with_total_len`] when
/// given.
///
/// # Panics
/// If the parser neither takes input nor yields an event (it would stall forever).
pub fn push(
    bytes: &[u8],
    sizes: &[usize],
    buf_len: usize,
    total_len: Option<u64>,
    limits: Limits,
) -> Outcome {
    assert!(!sizes.is_empty(), "at least one chunk size");
    let mut buf = vec![0u8; buf_len];
    let mut out = Collector::default();
    let mut parser = match PushParser::new(&mut buf, limits) {
        Ok(p) => p,
        Err(e) => return out.finish(Some(e)),
    };
    if let Some(total) = total_len {
        parser = parser.with_total_len(total);
    }
    let mut rest = bytes;
    let mut chunk_no = 0;
    while !rest.is_empty() && !parser.is_done() {
        let size = sizes[chunk_no % sizes.len()].max(1).min(rest.len());
        chunk_no += 1;
        let mut chunk = &rest[..size];
        rest = &rest[size..];
        while !chunk.is_empty() && !parser.is_done() {
            let taken = parser.feed(chunk);
            chunk = &chunk[taken..];
            let mut yielded = false;
            loop {
                match parser.next_event() {
                    Ok(Some(event)) => {
                        yielded = true;
                        out.push(&event);
                    }
                    Ok(None) => break,
                    Err(e) => return out.finish(Some(e)),
                }
            }
            assert!(
                taken > 0 || yielded || parser.is_done(),
                "push parser stalled at {}",
                parser.parser().offset()
            );
        }
    }
    parser.finish();
    loop {
        match parser.next_event() {
            Ok(Some(event)) => out.push(&event),
            Ok(None) => return out.finish(None),
            Err(e) => return out.finish(Some(e)),
        }
    }
}

/// The header of a real file: its bytes from 0 to the data section (found with the `Read` driver
/// over the file), and the data offset.
///
/// # Panics
/// If the file cannot be read or its header does not parse.
pub fn real_header(path: &std::path::Path) -> (Vec<u8>, u64) {
    use std::io::Read as _;
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let file_len = file.metadata().expect("file size").len();
    let reader = embedded_io_adapters::std::FromStd::new(std::io::BufReader::new(file));
    let outcome = read(reader, 4096, Some(file_len), Limits::DEFAULT);
    assert!(
        outcome.is_complete(),
        "{}: {:?}",
        path.display(),
        outcome.error
    );
    let Some(Ev::End(section)) = outcome.events.last() else {
        unreachable!("complete")
    };
    let mut header = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(section.data_offset).read_to_end(&mut header))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(header.len() as u64, section.data_offset, "short read");
    (header, section.data_offset)
}
