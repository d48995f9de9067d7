//! `Debug` for the streaming drivers: where they are in the input, not their buffers (a caller's
//! buffer of KiBs would print as thousands of numbers).

use core::fmt;

use super::push::PushParser;
use super::read::ReadParser;

impl<R: embedded_io::Read, const DEPTH: usize> fmt::Debug for ReadParser<'_, R, DEPTH> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadParser")
            .field("offset", &self.parser().offset())
            .field("depth", &self.parser().depth())
            .field("done", &self.parser().is_done())
            .finish_non_exhaustive()
    }
}

impl<const DEPTH: usize> fmt::Debug for PushParser<'_, DEPTH> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PushParser")
            .field("offset", &self.parser().offset())
            .field("depth", &self.parser().depth())
            .field("done", &self.is_done())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Limits, PushParser, ReadParser};
    use std::format;

    #[test]
    fn drivers_debug_shows_the_position_not_the_buffer() {
        let mut buf = [0u8; 256];
        let input: &[u8] = super::super::example_header();
        let mut parser = ReadParser::new(input, &mut buf, Limits::default()).unwrap();
        parser.next_event().unwrap();
        let text = format!("{parser:?}");
        assert_eq!(text, "ReadParser { offset: 24, depth: 0, done: false, .. }");
        let mut buf = [0u8; 256];
        let push = PushParser::new(&mut buf, Limits::default()).unwrap();
        assert_eq!(
            format!("{push:?}"),
            "PushParser { offset: 0, depth: 0, done: false, .. }"
        );
    }
}
