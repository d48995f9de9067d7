//! The `&[u8]` driver: parses a header held in memory (flash, mmap, a file read whole). Strings
//! borrow from the input: nothing is copied.

use super::event::ByteOrder;
use super::event::Event;
use super::limits::{Limits, DEFAULT_DEPTH_CAPACITY};
use super::machine::{note_utf8_scan, Feed, Parser, RawStep};
use crate::error::Result;

/// Strings shorter than this have a length prefix made of ASCII bytes only (every byte below 0x80).
const SHORT_STRING: u64 = 0x80;

/// Pulls events from a byte slice that holds (at least) the whole header.
///
/// The input's length is known, so every count and length is checked against the bytes that
/// remain. After an error the parser yields nothing more. `DEPTH` is the nesting capacity, as in
/// [`Parser`].
#[derive(Debug, Clone)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SliceParser<'a, const DEPTH: usize = DEFAULT_DEPTH_CAPACITY> {
    parser: Parser<DEPTH>,
    input: &'a [u8],
    rest: usize,
    last_offset: u64,
    failed: bool,
    /// Text already checked as UTF-8 in one piece, and where it starts in `input` (see
    /// [`checked_string_run`]).
    checked: &'a str,
    checked_start: usize,
    /// Strings left in the innermost array of strings being read.
    strings_left: u64,
}

impl<'a> SliceParser<'a> {
    /// A parser over `input` with the given limits and the default nesting capacity.
    pub fn new(input: &'a [u8], limits: Limits) -> Self {
        Self::with_depth_capacity(input, limits)
    }
}

impl<'a, const DEPTH: usize> SliceParser<'a, DEPTH> {
    /// A parser over `input` with the given limits, nesting at most `DEPTH` deep.
    pub fn with_depth_capacity(input: &'a [u8], limits: Limits) -> Self {
        Self {
            parser: Parser::with_depth_capacity(limits).with_total_len(input.len() as u64),
            input,
            rest: 0,
            last_offset: 0,
            failed: false,
            checked: "",
            checked_start: 0,
            strings_left: 0,
        }
    }

    /// The next event, or `None` after [`Event::End`].
    #[inline(always)]
    pub fn next_event(&mut self) -> Result<Option<Event<'a>>> {
        if self.failed {
            return Ok(None);
        }
        let input = self.input.get(self.rest..).unwrap_or(&[]);
        let offset = self.parser.offset();
        // Matched by reference: the raw event is resolved where the parser wrote it.
        let step = self.parser.next_raw(input, Feed::End);
        let result = match &step {
            Ok(RawStep::Event { event, consumed }) => {
                let consumed = *consumed;
                let span = event.string_span();
                let text = span.and_then(|(start, len)| self.checked_text(start, len));
                let resolved = match text.and_then(|text| event.string_event(text)) {
                    Some(e) => Ok(e),
                    None => event.resolve(input),
                };
                // `consumed` bytes were in `input`: this stays within `self.input.len()`.
                let next = self.rest.saturating_add(consumed);
                if let Some(count) = event.string_array_len() {
                    self.strings_left = count;
                    self.check_string_run(next, count);
                } else if span.is_some() && self.strings_left > 0 {
                    self.strings_left = self.strings_left.saturating_sub(1);
                    if text.is_none() && self.strings_left > 0 {
                        // A string the run did not cover (a long one): start a new run after it.
                        self.check_string_run(next, self.strings_left);
                    }
                }
                self.rest = next;
                self.last_offset = offset;
                resolved.map(Some)
            }
            Ok(RawStep::NeedMore { .. } | RawStep::Done) => Ok(None),
            Err(e) => Err(*e),
        };
        if result.is_err() {
            self.failed = true;
        }
        result
    }

    /// The text at `start..start + len` of the unparsed input, if it lies in the checked run.
    #[inline]
    fn checked_text(&self, start: usize, len: usize) -> Option<&'a str> {
        let from = self
            .rest
            .checked_add(start)?
            .checked_sub(self.checked_start)?;
        self.checked.get(from..from.checked_add(len)?)
    }

    /// Before the elements of an array of `count` strings starting at `at`: checks the UTF-8 of
    /// the longest prefix of the array that [`checked_string_run`] allows, in one pass. Out of line:
    /// once per string array, with a frame the event loop need not carry.
    #[inline(never)]
    fn check_string_run(&mut self, at: usize, count: u64) {
        let Some(rest) = self.input.get(at..) else {
            return;
        };
        let width = self.parser.len_width();
        let len = checked_string_run(rest, count, width, self.parser.byte_order());
        let run = rest.get(..len).unwrap_or(&[]);
        note_utf8_scan(run.len());
        self.checked = match simdutf8::basic::from_utf8(run) {
            Ok(text) => text,
            // Invalid UTF-8 somewhere in the run: keep its valid prefix, so that the strings before
            // the bad one are still taken from it and only the bad one is checked again (to find
            // the exact offset). Keeping nothing would make every later string start a new run
            // over the rest of the array: quadratic time on one bad string.
            Err(_) => {
                note_utf8_scan(run.len());
                run.utf8_chunks().next().map_or("", |chunk| chunk.valid())
            }
        };
        self.checked_start = at;
    }

    /// Absolute offset where the last event's bytes start.
    pub fn event_offset(&self) -> u64 {
        self.last_offset
    }

    /// The state machine (offset, header, depth).
    pub fn parser(&self) -> &Parser<DEPTH> {
        &self.parser
    }

    /// The whole input.
    pub fn input(&self) -> &'a [u8] {
        self.input
    }
}

impl<'a, const DEPTH: usize> Iterator for SliceParser<'a, DEPTH> {
    type Item = Result<Event<'a>>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        self.next_event().transpose()
    }
}

/// Byte length of the longest run of whole length-prefixed strings at the start of `bytes` (at most
/// `count` of them) whose lengths are all below 128.
///
/// Those length prefixes consist of bytes below 0x80, which UTF-8 never uses inside a multi-byte
/// character; so the run is valid UTF-8 exactly when every string in it is, and each string is then
/// a `str` slice of the run with char boundaries at both ends. One SIMD validation of the run
/// replaces a byte-at-a-time validation per string, which is most of the cost of a 262144-token
/// vocabulary.
fn checked_string_run(bytes: &[u8], count: u64, width: usize, order: ByteOrder) -> usize {
    let mut at = 0usize;
    for _ in 0..count {
        // The length prefix comes from the file: it is compared against `SHORT_STRING` before any
        // arithmetic uses it (a length near 2^64 would overflow `at + width + len`).
        let Some(text_at) = at.checked_add(width).filter(|&t| t <= bytes.len()) else {
            break;
        };
        let len = prefix_len(bytes.get(at..text_at).unwrap_or(&[]), order);
        if len >= SHORT_STRING {
            break;
        }
        match text_at.checked_add(len as usize) {
            Some(end) if end <= bytes.len() => at = end,
            _ => break,
        }
    }
    at
}

/// A 4- or 8-byte length prefix (`u64::MAX`, which ends a run, for any other width).
#[inline]
fn prefix_len(prefix: &[u8], order: ByteOrder) -> u64 {
    match (order, prefix) {
        (ByteOrder::Little, &[a, b, c, d]) => u32::from_le_bytes([a, b, c, d]).into(),
        (ByteOrder::Big, &[a, b, c, d]) => u32::from_be_bytes([a, b, c, d]).into(),
        (ByteOrder::Little, &[a, b, c, d, e, f, g, h]) => {
            u64::from_le_bytes([a, b, c, d, e, f, g, h])
        }
        (ByteOrder::Big, &[a, b, c, d, e, f, g, h]) => u64::from_be_bytes([a, b, c, d, e, f, g, h]),
        _ => u64::MAX,
    }
}
