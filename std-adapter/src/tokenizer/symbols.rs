//! The merge loop both BPE kinds share: a text's characters as a chain of symbols, adjacent pairs
//! merged in place while some pair has a priority, the highest first and the leftmost among
//! equals (llama.cpp's `llm_tokenizer_spm_session` and `llm_tokenizer_bpe_session` differ only in
//! what the priority is).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A symbol: a byte range of the text (empty once merged into its left neighbour).
#[derive(Clone, Copy)]
pub(super) struct Symbol {
    pub start: usize,
    pub len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

/// The symbols of `text`: one per character, in order.
fn chars_of(text: &str) -> Vec<Symbol> {
    let mut symbols: Vec<Symbol> = Vec::with_capacity(text.len());
    for (i, (start, c)) in text.char_indices().enumerate() {
        symbols.push(Symbol {
            start,
            len: c.len_utf8(),
            prev: i.checked_sub(1),
            next: None,
        });
        if let Some(prev) = i.checked_sub(1).and_then(|p| symbols.get_mut(p)) {
            prev.next = Some(i);
        }
    }
    symbols
}

/// The text of `symbol`.
pub(super) fn text_of<'t>(text: &'t str, symbol: &Symbol) -> &'t str {
    text.get(symbol.start..symbol.start + symbol.len)
        .unwrap_or_default()
}

/// Merges the characters of `text` pairwise: `priority(left, right, joined)` says whether two
/// adjacent symbols may merge and how urgently. Returns the symbols left, in text order.
pub(super) fn merge_all<P: Ord>(
    text: &str,
    priority: impl Fn(&str, &str, &str) -> Option<P>,
) -> impl Iterator<Item = Symbol> {
    let mut symbols = chars_of(text);
    // (priority, leftmost first, right, joined length when queued)
    let mut queue = BinaryHeap::new();
    let push = |queue: &mut BinaryHeap<(P, Reverse<usize>, usize, usize)>,
                symbols: &[Symbol],
                left: Option<usize>,
                right: Option<usize>| {
        let (Some(left), Some(right)) = (left, right) else {
            return;
        };
        let (l, r) = (&symbols[left], &symbols[right]);
        let len = l.len + r.len;
        let joined = text.get(l.start..l.start + len).unwrap_or_default();
        if let Some(p) = priority(text_of(text, l), text_of(text, r), joined) {
            queue.push((p, Reverse(left), right, len));
        }
    };
    for i in 1..symbols.len() {
        push(&mut queue, &symbols, Some(i - 1), Some(i));
    }
    while let Some((_, Reverse(left), right, len)) = queue.pop() {
        let (l, r) = (symbols[left], symbols[right]);
        // Stale: one side was merged since it was queued. A symbol only grows by absorbing its
        // right neighbour, so the pair is intact exactly when both are alive with the joined
        // length they had.
        if l.len == 0 || r.len == 0 || l.len + r.len != len {
            continue;
        }
        symbols[left].len += r.len;
        symbols[left].next = r.next;
        symbols[right].len = 0;
        if let Some(n) = r.next {
            symbols[n].prev = Some(left);
        }
        push(&mut queue, &symbols, l.prev, Some(left));
        push(&mut queue, &symbols, Some(left), r.next);
    }
    symbols.into_iter().filter(|s| s.len > 0)
}
