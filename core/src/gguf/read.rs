//! The `embedded_io::Read` driver: parses a header from a stream without `Seek`, through a buffer
//! the caller provides. String values longer than the buffer arrive in pieces; keys and tensor infos
//! must fit the buffer ([`Error::BufferTooSmall`] otherwise).

use super::event::Event;
use super::limits::{Limits, DEFAULT_DEPTH_CAPACITY};
use super::machine::{Parser, RawStep};
use super::window::Window;
use crate::error::{Error, Result};
use embedded_io::Error as _;

/// Pulls events from an [`embedded_io::Read`] through a caller-provided buffer. `DEPTH` is the
/// nesting capacity, as in [`Parser`].
pub struct ReadParser<'b, R, const DEPTH: usize = DEFAULT_DEPTH_CAPACITY> {
    reader: R,
    window: Window<'b>,
    parser: Parser<DEPTH>,
    eof: bool,
    failed: bool,
}

impl<'b, R: embedded_io::Read> ReadParser<'b, R> {
    /// A parser reading from `reader` through `buf` (at least [`MIN_BUFFER`](super::MIN_BUFFER)
    /// bytes; a few KiB is plenty for real files), with the default nesting capacity.
    pub fn new(reader: R, buf: &'b mut [u8], limits: Limits) -> Result<Self> {
        Self::with_depth_capacity(reader, buf, limits)
    }
}

impl<'b, R: embedded_io::Read, const DEPTH: usize> ReadParser<'b, R, DEPTH> {
    /// Like [`ReadParser::new`], nesting at most `DEPTH` deep.
    pub fn with_depth_capacity(reader: R, buf: &'b mut [u8], limits: Limits) -> Result<Self> {
        Ok(Self {
            reader,
            window: Window::new(buf)?,
            parser: Parser::with_depth_capacity(limits),
            eof: false,
            failed: false,
        })
    }

    /// Tells the parser the stream's total length (e.g. the file size), so that counts and lengths
    /// are checked against the bytes that remain.
    pub fn with_total_len(mut self, total_len: u64) -> Self {
        self.parser = self.parser.with_total_len(total_len);
        self
    }

    /// The next event, or `None` after [`Event::End`]. The event borrows the buffer until the next
    /// call.
    #[inline(always)]
    pub fn next_event(&mut self) -> Result<Option<Event<'_>>> {
        if self.failed {
            return Ok(None);
        }
        // Matched by reference: the raw event is resolved where the parser wrote it.
        let step = self.pull();
        let raw = match &step {
            Ok(RawStep::Event { event, .. }) => event,
            Ok(RawStep::NeedMore { .. } | RawStep::Done) => return Ok(None),
            Err(e) => {
                self.failed = true;
                return Err(*e);
            }
        };
        let event = self.window.resolve(raw);
        if event.is_err() {
            self.failed = true;
        }
        event
    }

    /// The parser's next answer other than [`RawStep::NeedMore`]: reads until it has one.
    #[inline(always)]
    fn pull(&mut self) -> Result<RawStep> {
        loop {
            let step = self.window.step(&mut self.parser, self.eof);
            match step {
                Ok(RawStep::NeedMore { .. }) => match self.reader.read(self.window.space()) {
                    Ok(0) => self.eof = true,
                    Ok(n) => self.window.filled(n),
                    Err(e) => {
                        return Err(Error::Io {
                            kind: e.kind(),
                            offset: self.parser.offset(),
                        })
                    }
                },
                _ => return step,
            }
        }
    }

    /// Absolute offset where the last event's bytes start.
    pub fn event_offset(&self) -> u64 {
        self.window.last_offset()
    }

    /// The state machine (offset, header, depth).
    pub fn parser(&self) -> &Parser<DEPTH> {
        &self.parser
    }

    /// Gives the reader back. It is positioned somewhere after the bytes parsed so far.
    pub fn into_inner(self) -> R {
        self.reader
    }
}

#[cfg(feature = "defmt")]
impl<R, const DEPTH: usize> defmt::Format for ReadParser<'_, R, DEPTH> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(
            f,
            "ReadParser {{ offset: {=u64}, done: {=bool} }}",
            self.parser.offset(),
            self.parser.is_done()
        );
    }
}
