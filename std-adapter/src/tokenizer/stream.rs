//! Text of token ids as they come ([`TextStream`]): each token costs the bytes it adds, not a new
//! decode of everything so far, and the concatenated output is exactly
//! [`Tokenizer::decode`](super::Tokenizer::decode) of all the ids.
//!
//! Two things join across tokens and are held back until they are settled:
//! - a character whose UTF-8 bytes are split over tokens (byte-fallback pieces, byte-level BPE):
//!   its first bytes wait for the rest, so every chunk written is whole characters;
//! - llama.cpp's clean-up of spaces before punctuation (`clean_up_spaces`), for tokenizers that
//!   ask for it: its rules start at a space and read at most three bytes on, so bytes are written
//!   only up to a point where no rule window straddles (see [`settled_prefix`]).

use super::{clean_up_spaces, Tokenizer};

/// The text of ids pushed one at a time.
#[derive(Debug)]
pub struct TextStream<'t> {
    tokenizer: &'t Tokenizer,
    pieces: PieceStream,
    first: bool,
}

impl<'t> TextStream<'t> {
    /// A stream at the start of a text (the first piece loses its leading space as in
    /// [`Tokenizer::decode`](super::Tokenizer::decode)).
    pub fn new(tokenizer: &'t Tokenizer) -> Self {
        Self {
            tokenizer,
            pieces: PieceStream::new(tokenizer.clean_spaces),
            first: true,
        }
    }

    /// Adds `id` and returns the bytes now settled (possibly none).
    pub fn push(&mut self, id: u32) -> Vec<u8> {
        let piece = self.tokenizer.piece(id, true);
        let piece = match piece.split_first() {
            Some((b' ', rest)) if self.first && self.tokenizer.add_space_prefix => rest,
            _ => piece,
        };
        self.first = false;
        self.pieces.push(piece)
    }

    /// The bytes still held back: the end of the text.
    pub fn finish(self) -> Vec<u8> {
        self.pieces.finish()
    }
}

/// The byte-level part of [`TextStream`]: pieces in, settled (cleaned) bytes out.
#[derive(Debug)]
struct PieceStream {
    clean: bool,
    pending: Vec<u8>,
}

impl PieceStream {
    fn new(clean: bool) -> Self {
        Self {
            clean,
            pending: Vec::new(),
        }
    }

    fn push(&mut self, piece: &[u8]) -> Vec<u8> {
        self.pending.extend_from_slice(piece);
        let settled = settled_prefix(&self.pending, self.clean);
        let rest = self.pending.split_off(settled);
        let mut out = std::mem::replace(&mut self.pending, rest);
        if self.clean {
            clean_up_spaces(&mut out);
        }
        out
    }

    fn finish(mut self) -> Vec<u8> {
        if self.clean {
            clean_up_spaces(&mut self.pending);
        }
        self.pending
    }
}

/// The longest prefix of `pending` that can be written now: it ends on a character boundary
/// and, with `clean`, cleaning it alone gives what cleaning the whole text would give there.
///
/// A clean-up rule needs a space at some `s` and reads up to `s + 3` (a space before `?!.,`, or
/// before `'` with up to two bytes after). A cut at `c` is safe when no such window straddles
/// it: the byte before the cut is no space and no `'`, and neither of the two before it is a
/// `'`. (Rules only ever delete spaces, so none of them can move a byte across such a cut.)
fn settled_prefix(pending: &[u8], clean: bool) -> usize {
    let whole = complete_characters(pending);
    if !clean {
        return whole;
    }
    // Only the last few cuts need a look: a later cut is at most 3 bytes of quotes away, or the
    // text ends with a run of spaces and quotes, which waits.
    (1..=whole)
        .rev()
        .take(8)
        .find(|&c| {
            let at = |back: usize| c.checked_sub(back).map(|i| pending[i]);
            !matches!(at(1), Some(b' ' | b'\''))
                && at(2) != Some(b'\'')
                && at(3) != Some(b'\'')
                && is_char_boundary(pending, c)
        })
        .unwrap_or(0)
}

/// `bytes.len()`, less an unfinished UTF-8 sequence at the end (its lead byte and the
/// continuation bytes so far). Invalid bytes count as complete: they are written as they are.
fn complete_characters(bytes: &[u8]) -> usize {
    let len = bytes.len();
    for back in 1..=len.min(3) {
        let b = bytes[len - back];
        if b & 0xC0 == 0x80 {
            continue; // a continuation byte: look further back for the lead
        }
        let needed = match b {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1,
        };
        return if needed > back { len - back } else { len };
    }
    len
}

/// Whether `c` is not inside a UTF-8 sequence of `bytes` (the byte at `c` is no continuation
/// byte of a lead before it).
fn is_char_boundary(bytes: &[u8], c: usize) -> bool {
    complete_characters(&bytes[..c]) == c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn streamed(pieces: &[&[u8]], clean: bool) -> (Vec<u8>, Vec<Vec<u8>>) {
        let mut stream = PieceStream::new(clean);
        let mut chunks: Vec<Vec<u8>> = pieces.iter().map(|p| stream.push(p)).collect();
        chunks.push(stream.finish());
        (chunks.concat(), chunks)
    }

    fn one_shot(pieces: &[&[u8]], clean: bool) -> Vec<u8> {
        let mut all = pieces.concat();
        if clean {
            clean_up_spaces(&mut all);
        }
        all
    }

    #[test]
    fn characters_split_over_pieces_come_out_whole() {
        // 🦀 (4 bytes) and 中 (3 bytes) cut after every byte, as byte-fallback tokens give them.
        let text = "a🦀中b".as_bytes();
        let pieces: Vec<&[u8]> = text.chunks(1).collect();
        for clean in [false, true] {
            let (all, chunks) = streamed(&pieces, clean);
            assert_eq!(all, text);
            for chunk in &chunks {
                assert!(std::str::from_utf8(chunk).is_ok(), "{chunk:?}");
            }
        }
        // Every chunk is written once the character is whole: nothing waits longer.
        let (_, chunks) = streamed(&pieces, false);
        let lens: Vec<usize> = chunks.iter().map(Vec::len).collect();
        assert_eq!(lens, [1, 0, 0, 0, 4, 0, 0, 3, 1, 0]);
    }

    #[test]
    fn every_split_of_short_texts_streams_as_the_one_shot_clean_up() {
        // Every text of up to 6 bytes over bytes the rules look at, pushed a byte at a time.
        let alphabet = b" ',.stre";
        let mut checked = 0;
        for len in 0..=6u32 {
            for mut n in 0..alphabet.len().pow(len) {
                let text: Vec<u8> = (0..len)
                    .map(|_| {
                        let b = alphabet[n % alphabet.len()];
                        n /= alphabet.len();
                        b
                    })
                    .collect();
                let pieces: Vec<&[u8]> = text.chunks(1).collect();
                for clean in [false, true] {
                    assert_eq!(
                        streamed(&pieces, clean).0,
                        one_shot(&pieces, clean),
                        "{:?} clean {clean}",
                        String::from_utf8_lossy(&text)
                    );
                }
                checked += 1;
            }
        }
        assert_eq!(checked, 299_593);
    }

    #[test]
    fn counting_text_streams_as_it_comes() {
        // " 6, 7, 8," must not wait for the end: no space is before a comma.
        let pieces: [&[u8]; 6] = [b" 6", b",", b" 7", b",", b" 8", b","];
        let (all, chunks) = streamed(&pieces, true);
        assert_eq!(all, one_shot(&pieces, true));
        assert_eq!(chunks[..6], pieces.map(<[u8]>::to_vec));
        // A space waits for what follows it: " ." is cleaned to ".".
        let (all, chunks) = streamed(&[b"a", b" ", b".", b" b"], true);
        assert_eq!(all, b"a. b");
        assert_eq!(chunks, [&b"a"[..], b"", b".", b" b", b""]);
    }
}
