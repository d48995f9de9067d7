//! The buffer that the streaming drivers share: a caller-provided byte slice holding the unparsed
//! part of the input, compacted to the front when the parser needs more contiguous bytes.

use super::machine::{Feed, Parser, RawStep};
use crate::error::{Error, Result};
use crate::gguf::Event;

/// Smallest buffer a streaming driver accepts: room for the header and any UTF-8 character.
pub const MIN_BUFFER: usize = 64;

pub(crate) struct Window<'b> {
    buf: &'b mut [u8],
    /// Unparsed bytes are `buf[start..end]`.
    start: usize,
    end: usize,
    /// Bytes of the last event, dropped at the next call (the event borrowed them).
    consumed: usize,
    last_offset: u64,
}

impl<'b> Window<'b> {
    pub(crate) fn new(buf: &'b mut [u8]) -> Result<Self> {
        if buf.len() < MIN_BUFFER {
            return Err(Error::BufferTooSmall {
                needed: MIN_BUFFER as u64,
                capacity: buf.len() as u64,
                offset: 0,
            });
        }
        Ok(Self {
            buf,
            start: 0,
            end: 0,
            consumed: 0,
            last_offset: 0,
        })
    }

    pub(crate) fn last_offset(&self) -> u64 {
        self.last_offset
    }

    /// The free tail of the buffer, for the driver to fill.
    #[inline(always)]
    pub(crate) fn space(&mut self) -> &mut [u8] {
        self.buf.get_mut(self.end..).unwrap_or(&mut [])
    }

    /// Records that `n` bytes were written into [`space`](Self::space).
    #[inline(always)]
    pub(crate) fn filled(&mut self, n: usize) {
        self.end = self.end.saturating_add(n).min(self.buf.len());
    }

    /// The unparsed bytes (after the last event's).
    pub(crate) fn unparsed(&self) -> &[u8] {
        let start = self.start.saturating_add(self.consumed);
        self.buf.get(start..self.end).unwrap_or(&[])
    }

    /// Drops the bytes of the last event and moves the unparsed bytes to the front.
    pub(crate) fn compact(&mut self) {
        self.drop_consumed();
        if self.start == 0 {
            // Already at the front: copying them onto themselves would cost a buffer's length per
            // call (a push driver fed 1-byte chunks through a large buffer would be quadratic).
            return;
        }
        // `start <= end <= buf.len()` always holds; `get_mut` and `min` keep `copy_within`
        // from panicking (and from linking a panic path) even if it did not.
        let Some(live) = self.buf.get_mut(..self.end) else {
            return;
        };
        let start = self.start.min(live.len());
        live.copy_within(start.., 0);
        self.end = self.end.saturating_sub(start);
        self.start = 0;
    }

    /// Drops the bytes of the last event (they were in `start..end`).
    #[inline(always)]
    fn drop_consumed(&mut self) {
        self.start = self
            .start
            .saturating_add(core::mem::take(&mut self.consumed))
            .min(self.end);
    }

    /// Runs the parser over the buffered bytes. After an event, its bytes stay in the buffer until
    /// the next call (the event borrows them); after [`RawStep::NeedMore`], the free space (see
    /// [`space`](Self::space)) is as large as it can be. The parser's answer is returned as it
    /// came, so that it is written once, in the caller's frame.
    #[inline(always)]
    pub(crate) fn step<const DEPTH: usize>(
        &mut self,
        parser: &mut Parser<DEPTH>,
        at_end: bool,
    ) -> Result<RawStep> {
        self.drop_consumed();
        let full = self.start == 0 && self.end == self.buf.len();
        let feed = if at_end {
            Feed::End
        } else if full {
            Feed::Full
        } else {
            Feed::More
        };
        let input = self.buf.get(self.start..self.end).unwrap_or(&[]);
        let step = parser.next_raw(input, feed);
        match &step {
            Ok(RawStep::Event { event, consumed }) => {
                self.consumed = *consumed;
                self.last_offset = event.offset();
            }
            Ok(RawStep::NeedMore { .. }) => self.compact(),
            Ok(RawStep::Done) | Err(_) => {}
        }
        step
    }

    /// The event stored by the last `step`, borrowing the buffer, as a driver returns it.
    #[inline(always)]
    pub(crate) fn resolve(&self, raw: &super::machine::RawEvent) -> Result<Option<Event<'_>>> {
        raw.resolve_some(self.buf.get(self.start..self.end).unwrap_or(&[]))
    }
}
