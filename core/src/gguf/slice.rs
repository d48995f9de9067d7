//! The `&[u8]` driver: parses a header held in memory (flash, mmap, a file read whole). Strings
//! borrow from the input: nothing is copied.

use super::event::Event;
use super::limits::Limits;
use super::machine::{Feed, Parser, Step};
use crate::error::Result;

/// Pulls events from a byte slice that holds (at least) the whole header.
///
/// The input's length is known, so every count and length is checked against the bytes that
/// remain. After an error the parser yields nothing more.
#[derive(Debug, Clone)]
pub struct SliceParser<'a> {
    parser: Parser,
    input: &'a [u8],
    rest: usize,
    last_offset: u64,
    failed: bool,
}

impl<'a> SliceParser<'a> {
    /// A parser over `input` with the given limits.
    pub fn new(input: &'a [u8], limits: Limits) -> Self {
        Self {
            parser: Parser::new(limits).with_total_len(input.len() as u64),
            input,
            rest: 0,
            last_offset: 0,
            failed: false,
        }
    }

    /// The next event, or `None` after [`Event::End`].
    #[inline]
    pub fn next_event(&mut self) -> Result<Option<Event<'a>>> {
        if self.failed {
            return Ok(None);
        }
        let input = self.input.get(self.rest..).unwrap_or(&[]);
        let offset = self.parser.offset();
        match self.parser.next(input, Feed::End) {
            Ok(Step::Event { event, consumed }) => {
                self.rest += consumed;
                self.last_offset = offset;
                Ok(Some(event))
            }
            Ok(Step::NeedMore { .. } | Step::Done) => Ok(None),
            Err(e) => {
                self.failed = true;
                Err(e)
            }
        }
    }

    /// Absolute offset where the last event's bytes start.
    pub fn event_offset(&self) -> u64 {
        self.last_offset
    }

    /// The state machine (offset, header, depth).
    pub fn parser(&self) -> &Parser {
        &self.parser
    }

    /// The whole input.
    pub fn input(&self) -> &'a [u8] {
        self.input
    }
}

impl<'a> Iterator for SliceParser<'a> {
    type Item = Result<Event<'a>>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        self.next_event().transpose()
    }
}
