//! The push driver: the caller hands over chunks of any size as they arrive (a socket, DMA), and
//! pulls events whenever it likes. Same buffer rules as the [`ReadParser`](super::ReadParser).

use super::event::Event;
use super::limits::{Limits, DEFAULT_DEPTH_CAPACITY};
use super::machine::{Parser, RawStep};
use super::window::Window;
use crate::error::Result;

/// Accepts input chunk by chunk; yields the events those chunks complete.
///
/// The natural loop ends: once the header is complete (or parsing failed), [`feed`](Self::feed)
/// takes every chunk whole, as nothing after the header is the parser's business. The bytes after
/// the header that were already buffered are in [`buffered`](Self::buffered).
///
/// ```
/// use miniquant::gguf::{Event, PushParser};
/// let file: &[u8] = include_bytes!("../../../examples/tiny.gguf");
/// let mut buf = [0u8; 256];
/// let mut parser = PushParser::new(&mut buf, Default::default())?;
/// let (mut keys, mut tensors) = (0, 0);
/// for mut chunk in file.chunks(7) {
///     while !chunk.is_empty() {
///         let taken = parser.feed(chunk);
///         chunk = &chunk[taken..];
///         while let Some(event) = parser.next_event()? {
///             keys += matches!(event, Event::Key { .. }) as usize;
///             tensors += matches!(event, Event::Tensor(_)) as usize;
///         }
///     }
/// }
/// parser.finish();
/// while let Some(_event) = parser.next_event()? {}
/// assert!(parser.is_done());
/// assert_eq!((keys, tensors), (20, 5));
/// # Ok::<(), miniquant::Error>(())
/// ```
///
/// `DEPTH` is the nesting capacity, as in [`Parser`].
pub struct PushParser<'b, const DEPTH: usize = DEFAULT_DEPTH_CAPACITY> {
    window: Window<'b>,
    parser: Parser<DEPTH>,
    finished: bool,
    failed: bool,
}

impl<'b> PushParser<'b> {
    /// A parser buffering through `buf` (at least [`MIN_BUFFER`](super::MIN_BUFFER) bytes), with the
    /// default nesting capacity.
    pub fn new(buf: &'b mut [u8], limits: Limits) -> Result<Self> {
        Self::with_depth_capacity(buf, limits)
    }
}

impl<'b, const DEPTH: usize> PushParser<'b, DEPTH> {
    /// Like [`PushParser::new`], nesting at most `DEPTH` deep.
    pub fn with_depth_capacity(buf: &'b mut [u8], limits: Limits) -> Result<Self> {
        Ok(Self {
            window: Window::new(buf)?,
            parser: Parser::with_depth_capacity(limits),
            finished: false,
            failed: false,
        })
    }

    /// Tells the parser the input's total length, so that counts and lengths are checked against
    /// the bytes that remain.
    pub fn with_total_len(mut self, total_len: u64) -> Self {
        self.parser = self.parser.with_total_len(total_len);
        self
    }

    /// Copies as much of `chunk` as the buffer has room for and returns how many bytes it took.
    /// When it takes fewer than offered, pull events with [`next_event`](Self::next_event) first.
    ///
    /// Once the header is complete ([`is_done`](Self::is_done)) or an error was returned, it takes
    /// the whole chunk without copying it: the parser needs no more input, and a loop that feeds
    /// until every chunk is taken must end.
    pub fn feed(&mut self, chunk: &[u8]) -> usize {
        if self.failed || self.parser.is_done() {
            return chunk.len();
        }
        self.window.compact();
        let space = self.window.space();
        let n = space.len().min(chunk.len());
        if let (Some(dst), Some(src)) = (space.get_mut(..n), chunk.get(..n)) {
            dst.copy_from_slice(src);
        }
        self.window.filled(n);
        n
    }

    /// Declares the input complete: what is still missing is then a truncation error.
    pub fn finish(&mut self) {
        self.finished = true;
    }

    /// The next event the buffered input completes, or `None` when more input is needed (or the
    /// header is done, see [`is_done`](Self::is_done)).
    #[inline(always)]
    pub fn next_event(&mut self) -> Result<Option<Event<'_>>> {
        if self.failed {
            return Ok(None);
        }
        let event = match self.window.step(&mut self.parser, self.finished) {
            Ok(RawStep::Event { event: raw, .. }) => self.window.resolve(&raw),
            Ok(RawStep::NeedMore { .. } | RawStep::Done) => Ok(None),
            Err(e) => Err(e),
        };
        if event.is_err() {
            self.failed = true;
        }
        event
    }

    /// After the header is complete: the bytes that followed it in the chunks fed so far (the start
    /// of the padding and tensor data), which [`feed`](Self::feed) had already taken. Before that,
    /// the buffered bytes not parsed yet.
    pub fn buffered(&self) -> &[u8] {
        self.window.unparsed()
    }

    /// Whether the header is complete ([`Event::End`] was yielded).
    pub fn is_done(&self) -> bool {
        self.parser.is_done()
    }

    /// The state machine (offset, header, depth).
    pub fn parser(&self) -> &Parser<DEPTH> {
        &self.parser
    }
}

#[cfg(feature = "defmt")]
impl<const DEPTH: usize> defmt::Format for PushParser<'_, DEPTH> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(
            f,
            "PushParser {{ offset: {=u64}, done: {=bool} }}",
            self.parser.offset(),
            self.parser.is_done()
        );
    }
}
