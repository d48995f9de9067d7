//! SentencePiece-style BPE (`tokenizer.ggml.model` = `llama`): a text's characters are merged
//! pairwise, the pair whose concatenation is the token of highest score first (leftmost among
//! equal scores), while any adjacent pair forms a token; what remains is looked up, and a symbol
//! that is no token falls back to byte tokens (`<0xXX>`), as llama.cpp's
//! `llm_tokenizer_spm_session` does.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::symbols::{chars_of, merge, text_of, Symbol};
use super::vocab::Vocab;

/// A candidate merge. Ordered so that the heap's top is the highest score, then the leftmost.
struct Bigram {
    score: f32,
    left: usize,
    right: usize,
    len: usize,
}

impl Ord for Bigram {
    fn cmp(&self, other: &Self) -> Ordering {
        // A total order even for NaN scores (hostile files): `total_cmp`.
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.left.cmp(&self.left))
    }
}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Bigram {}

/// Appends the ids of `text` (already space-escaped).
pub(super) fn encode(vocab: &Vocab, text: &str, out: &mut Vec<u32>) {
    let mut symbols = chars_of(text);
    let mut queue = BinaryHeap::new();
    let push = |queue: &mut BinaryHeap<Bigram>,
                symbols: &[Symbol],
                left: Option<usize>,
                right: Option<usize>| {
        let (Some(left), Some(right)) = (left, right) else {
            return;
        };
        let (l, r) = (symbols[left], symbols[right]);
        let len = l.len + r.len;
        let Some(id) = text
            .get(l.start..l.start + len)
            .and_then(|t| vocab.token_id(t))
        else {
            return;
        };
        queue.push(Bigram {
            score: vocab.score(id),
            left,
            right,
            len,
        });
    };
    for i in 1..symbols.len() {
        push(&mut queue, &symbols, Some(i - 1), Some(i));
    }
    while let Some(b) = queue.pop() {
        let (l, r) = (symbols[b.left], symbols[b.right]);
        if l.len == 0 || r.len == 0 || l.len + r.len != b.len {
            continue;
        }
        merge(&mut symbols, b.left, b.right);
        push(&mut queue, &symbols, l.prev, Some(b.left));
        push(&mut queue, &symbols, Some(b.left), r.next);
    }
    let mut at = if symbols.is_empty() { None } else { Some(0) };
    while let Some(i) = at {
        let s = symbols[i];
        let piece = text_of(text, &s);
        match vocab.token_id(piece) {
            Some(id) => out.push(id),
            None => out.extend(piece.bytes().filter_map(|b| vocab.byte_token(b))),
        }
        at = s.next;
    }
}
