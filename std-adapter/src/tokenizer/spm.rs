//! SentencePiece-style BPE (`tokenizer.ggml.model` = `llama`): a text's characters are merged
//! pairwise, the pair whose concatenation is the token of highest score first (leftmost among
//! equal scores), while any adjacent pair forms a token; what remains is looked up, and a symbol
//! that is no token falls back to byte tokens (`<0xXX>`), as llama.cpp's
//! `llm_tokenizer_spm_session` does.

use std::cmp::Ordering;

use super::symbols::{merge_all, text_of};
use super::vocab::Vocab;

/// A score ordered totally, even NaN (a hostile file's): `f32::total_cmp`.
struct Score(f32);

impl Ord for Score {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}
impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl PartialEq for Score {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Score {}

/// Appends the ids of `text` (already space-escaped).
pub(super) fn encode(vocab: &Vocab, text: &str, out: &mut Vec<u32>) {
    // Highest score of the joined token first.
    let score =
        |_: &str, _: &str, joined: &str| vocab.token_id(joined).map(|id| Score(vocab.score(id)));
    for s in merge_all(text, score) {
        let piece = text_of(text, &s);
        match vocab.token_id(piece) {
            Some(id) => out.push(id),
            None => out.extend(piece.bytes().filter_map(|b| vocab.byte_token(b))),
        }
    }
}
