//! The `embedded_io::Read` driver: parses a header from a stream without `Seek`, through a buffer
//! the caller provides. String values longer than the buffer arrive in pieces; keys and tensor infos
//! must fit the buffer ([`Error::BufferTooSmall`] otherwise).

use super::event::Event;
use super::limits::Limits;
use super::machine::Parser;
use super::window::{Want, Window};
use crate::error::{Error, Result};
use embedded_io::Error as _;

/// Pulls events from an [`embedded_io::Read`] through a caller-provided buffer.
pub struct ReadParser<'b, R> {
    reader: R,
    window: Window<'b>,
    parser: Parser,
    eof: bool,
    failed: bool,
}

impl<'b, R: embedded_io::Read> ReadParser<'b, R> {
    /// A parser reading from `reader` through `buf` (at least [`MIN_BUFFER`](super::MIN_BUFFER)
    /// bytes; a few KiB is plenty for real files).
    pub fn new(reader: R, buf: &'b mut [u8], limits: Limits) -> Result<Self> {
        Ok(Self {
            reader,
            window: Window::new(buf)?,
            parser: Parser::new(limits),
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
    pub fn next_event(&mut self) -> Result<Option<Event<'_>>> {
        if self.failed {
            return Ok(None);
        }
        let raw = match self.pull() {
            Ok(Some(raw)) => raw,
            Ok(None) => return Ok(None),
            Err(e) => {
                self.failed = true;
                return Err(e);
            }
        };
        let event = self.window.resolve(&raw);
        if event.is_err() {
            self.failed = true;
        }
        event.map(Some)
    }

    fn pull(&mut self) -> Result<Option<super::machine::RawEvent>> {
        let mut slot = None;
        loop {
            match self.window.step(&mut self.parser, self.eof, &mut slot)? {
                Want::Event => return Ok(slot),
                Want::Done => return Ok(None),
                Want::Input => match self.reader.read(self.window.space()) {
                    Ok(0) => self.eof = true,
                    Ok(n) => self.window.filled(n),
                    Err(e) => {
                        return Err(Error::Io {
                            kind: e.kind(),
                            offset: self.parser.offset(),
                        })
                    }
                },
            }
        }
    }

    /// Absolute offset where the last event's bytes start.
    pub fn event_offset(&self) -> u64 {
        self.window.last_offset()
    }

    /// The state machine (offset, header, depth).
    pub fn parser(&self) -> &Parser {
        &self.parser
    }

    /// Gives the reader back. It is positioned somewhere after the bytes parsed so far.
    pub fn into_inner(self) -> R {
        self.reader
    }
}
