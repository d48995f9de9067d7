//! Byte-level BPE (`tokenizer.ggml.model` = `gpt2`): a word's bytes are written as printable
//! characters (GPT-2's byte-to-character table), then adjacent symbols are merged by the rank of
//! their pair in `tokenizer.ggml.merges`, lowest rank first, leftmost first among equal ranks, as
//! llama.cpp's `llm_tokenizer_bpe_session` does.

use std::cmp::Reverse;
use std::collections::HashMap;

use super::symbols::{merge_all, text_of};
use super::vocab::Vocab;

/// The character GPT-2's byte-level BPE writes for each byte: printable Latin-1 bytes stand for
/// themselves, the others for U+0100 onwards in byte order.
pub(super) fn byte_chars() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut next = 256u32;
    for (b, slot) in table.iter_mut().enumerate() {
        let printable = matches!(b, 0x21..=0x7e | 0xa1..=0xac | 0xae..=0xff);
        let code = if printable {
            b as u32
        } else {
            next += 1;
            next - 1
        };
        *slot = char::from_u32(code).unwrap_or('\0');
    }
    table
}

/// The merges: the rank of each pair of symbols, the symbols named by their ids in
/// [`Vocab::symbol_id`].
#[derive(Debug, Default)]
pub(super) struct Merges {
    pub ranks: HashMap<(u32, u32), u32>,
}

/// Appends the ids of one pre-tokenized, byte-encoded `word`.
pub(super) fn encode_word(
    vocab: &Vocab,
    merges: &Merges,
    ignore_merges: bool,
    word: &str,
    out: &mut Vec<u32>,
) {
    if ignore_merges {
        if let Some(id) = vocab.token_id(word) {
            out.push(id);
            return;
        }
    }
    // Lowest rank first.
    let rank = |left: &str, right: &str, _: &str| {
        let pair = (vocab.symbol_id(left)?, vocab.symbol_id(right)?);
        merges.ranks.get(&pair).map(|&r| Reverse(r))
    };
    for s in merge_all(word, rank) {
        let text = text_of(word, &s);
        match vocab.token_id(text) {
            Some(id) => out.push(id),
            // A symbol that is no token: its bytes one by one, as single-byte tokens where the
            // vocabulary has them (llama.cpp looks each byte up alone, so only ASCII ones can
            // match; the others are dropped).
            None => out.extend(text.bytes().filter_map(|b| {
                let one = [b];
                std::str::from_utf8(&one)
                    .ok()
                    .and_then(|t| vocab.token_id(t))
            })),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_table_is_gpt2s() {
        let t = byte_chars();
        assert_eq!(t[b'a' as usize], 'a');
        assert_eq!(t[b' ' as usize], 'Ġ');
        assert_eq!(t[b'\n' as usize], 'Ċ');
        assert_eq!(t[0], 'Ā');
        assert_eq!(t[0xad], 'Ń');
        let mut sorted = t.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 256, "one character per byte");
    }
}
