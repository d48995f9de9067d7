//! Special tokens found in the text itself (llama.cpp's `tokenizer_st_partition`): the text is
//! cut around every occurrence of a special token's text, longest tokens first, each token over
//! all the text that earlier ones left; the pieces in between are tokenized normally.

use std::ops::Range;

use super::vocab::{attr, Vocab};

/// A piece of the text: raw text to tokenize, or a special token found in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Fragment {
    Text(Range<usize>),
    Token(u32),
}

/// The special tokens in the order they are searched: control, user-defined and unknown tokens,
/// longest text first (ties by id; llama.cpp's unstable sort leaves their order unspecified, which
/// matters only for equally long special tokens that overlap in a text).
pub(super) fn search_order(vocab: &Vocab) -> Vec<u32> {
    let special = attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN;
    let mut ids: Vec<u32> = (0..vocab.len())
        .filter(|&i| vocab.attrs[i] & special != 0)
        .filter_map(|i| u32::try_from(i).ok())
        .collect();
    ids.sort_by_key(|&id| std::cmp::Reverse(vocab.text(id).map_or(0, str::len)));
    ids
}

/// Where to look for special tokens quickly: the bytes they start with and their lengths.
#[derive(Debug)]
pub(super) struct Finder {
    first_bytes: [bool; 256],
    /// The distinct lengths of special token texts.
    lengths: Vec<usize>,
}

impl Finder {
    pub fn new(vocab: &Vocab, order: &[u32]) -> Self {
        let mut first_bytes = [false; 256];
        let mut lengths = Vec::new();
        for &id in order {
            if let Some(t) = vocab.text(id) {
                if let Some(&b) = t.as_bytes().first() {
                    first_bytes[usize::from(b)] = true;
                }
                lengths.push(t.len());
            }
        }
        lengths.sort_unstable();
        lengths.dedup();
        Self {
            first_bytes,
            lengths,
        }
    }

    /// The special tokens whose text occurs somewhere in `text`, sorted: one pass over the text
    /// instead of one search per special token (a vocabulary may have thousands of them).
    fn occurring(&self, vocab: &Vocab, text: &str) -> Vec<u32> {
        let special = attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN;
        let mut found = Vec::new();
        for (i, &b) in text.as_bytes().iter().enumerate() {
            if !self.first_bytes[usize::from(b)] {
                continue;
            }
            for &len in &self.lengths {
                let Some(candidate) = text.get(i..i + len) else {
                    continue;
                };
                if let Some(id) = vocab.token_id(candidate) {
                    if vocab.attr(id) & special != 0 {
                        found.push(id);
                    }
                }
            }
        }
        found.sort_unstable();
        found.dedup();
        found
    }
}

/// Cuts `text` into fragments. With `parse_special` false, control and unknown tokens are text
/// like any other (user-defined tokens are still found, as llama.cpp does).
pub(super) fn partition(
    vocab: &Vocab,
    order: &[u32],
    finder: &Finder,
    text: &str,
    parse_special: bool,
) -> Vec<Fragment> {
    let mut fragments = Vec::new();
    if text.is_empty() {
        return fragments;
    }
    fragments.push(Fragment::Text(0..text.len()));
    // Only special tokens that occur in the whole text can occur in a fragment of it.
    let occurring = finder.occurring(vocab, text);
    for &id in order {
        if occurring.binary_search(&id).is_err() {
            continue;
        }
        let a = vocab.attr(id);
        if !parse_special && a & (attr::CONTROL | attr::UNKNOWN) != 0 {
            continue;
        }
        let Some(needle) = vocab.text(id).filter(|t| !t.is_empty()) else {
            continue;
        };
        let mut next = Vec::with_capacity(fragments.len() + 2);
        for fragment in fragments {
            match fragment {
                Fragment::Text(range) => cut(text, range, needle, id, a, &mut next),
                token => next.push(token),
            }
        }
        fragments = next;
    }
    fragments
}

/// Cuts one text fragment around every occurrence of `needle` (token `id`, attributes `a`).
fn cut(text: &str, range: Range<usize>, needle: &str, id: u32, a: u16, out: &mut Vec<Fragment>) {
    let bytes = text.as_bytes();
    let mut start = range.start;
    let end = range.end;
    // `text[start..end]` is on character boundaries: fragments only end at a token's text.
    while let Some(found) = text.get(start..end).and_then(|t| t.find(needle)) {
        let at = start + found;
        let mut left_end = at;
        if a & attr::LSTRIP != 0 {
            while left_end > start && is_c_space(bytes[left_end - 1]) {
                left_end -= 1;
            }
        }
        if left_end > start {
            out.push(Fragment::Text(start..left_end));
        }
        out.push(Fragment::Token(id));
        start = at + needle.len();
        if a & attr::RSTRIP != 0 {
            while start < end && is_c_space(bytes[start]) {
                start += 1;
            }
        }
    }
    if start < end {
        out.push(Fragment::Text(start..end));
    }
}

/// C's `isspace` in the "C" locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}
