//! Byte-level BPE (`tokenizer.ggml.model` = `gpt2`): a word's bytes are written as printable
//! characters (GPT-2's byte-to-character table), then adjacent symbols are merged by the rank of
//! their pair in `tokenizer.ggml.merges`, lowest rank first, leftmost first among equal ranks, as
//! llama.cpp's `llm_tokenizer_bpe_session` does.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::symbols::{chars_of, merge, text_of, Symbol};
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
    let mut symbols = chars_of(word);
    // (rank, left, right, right's length when queued): lowest rank, then leftmost, first.
    let mut queue: BinaryHeap<Reverse<(u32, usize, usize, usize)>> = BinaryHeap::new();
    let rank_of = |symbols: &[Symbol], left: usize, right: usize| -> Option<u32> {
        let (l, r) = (symbols.get(left)?, symbols.get(right)?);
        let left_id = vocab.symbol_id(text_of(word, l))?;
        let right_id = vocab.symbol_id(text_of(word, r))?;
        merges.ranks.get(&(left_id, right_id)).copied()
    };
    let push = |queue: &mut BinaryHeap<_>,
                symbols: &[Symbol],
                left: Option<usize>,
                right: Option<usize>| {
        if let (Some(left), Some(right)) = (left, right) {
            if let Some(rank) = rank_of(symbols, left, right) {
                queue.push(Reverse((rank, left, right, symbols[right].len)));
            }
        }
    };
    for i in 1..symbols.len() {
        push(&mut queue, &symbols, Some(i - 1), Some(i));
    }
    while let Some(Reverse((_, left, right, right_len))) = queue.pop() {
        let (l, r) = (symbols[left], symbols[right]);
        // Stale: one side was merged since (a symbol only grows by absorbing its right
        // neighbour, so the pair is intact exactly when both are alive and the right one has
        // the length it was queued with).
        if l.len == 0 || r.len == 0 || r.len != right_len || l.next != Some(right) {
            continue;
        }
        merge(&mut symbols, left, right);
        push(&mut queue, &symbols, l.prev, Some(left));
        push(&mut queue, &symbols, Some(left), r.next);
    }
    for s in symbols.iter().filter(|s| s.len > 0) {
        let text = text_of(word, s);
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
