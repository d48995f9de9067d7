//! The tokenizer stored in a GGUF file's `tokenizer.ggml.*` metadata, encoding and decoding as
//! llama.cpp does (`llama_tokenize`, `llama_token_to_piece`, `llama_detokenize`), token for
//! token.
//!
//! Two kinds are implemented: byte-level BPE (`tokenizer.ggml.model` = `gpt2`: GPT-2, Llama 3,
//! SmolLM, StarCoder, ...) with the pre-tokenizer `tokenizer.ggml.pre` names, and
//! SentencePiece-style BPE with scores and byte fallback (`llama`: Llama 2, Gemma, TinyLlama,
//! ...). Special tokens (`<|im_start|>`, `<start_of_turn>`, ...) written in the text are
//! recognised when asked (`parse_special`); BOS and EOS are added as the file says.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use miniquant_std::tokenizer::Tokenizer;
//! let file = miniquant_std::GgufFile::open("model.gguf")?;
//! let tokenizer = Tokenizer::from_gguf(&file)?;
//! let ids = tokenizer.encode("Hello world", true, true);
//! let text = tokenizer.decode(&ids);
//! # let _ = text;
//! # Ok(())
//! # }
//! ```

mod bpe;
mod error;
mod pretokenize;
mod special;
mod spm;
mod stream;
mod symbols;
mod unicode;
mod vocab;

pub use error::TokenizerError;
pub use pretokenize::PreTokenizer;
pub use stream::TextStream;

use crate::error::{Error, ErrorKind};
use crate::file::GgufFile;
use crate::index::Index;
use special::Fragment;
use vocab::{attr, Model, SpecialIds, Vocab};

/// The most elements a tokenizer array (tokens, scores, types, merges) may have: 16 Mi, 64 times
/// the largest vocabularies in use (262144 tokens), so that a hostile header cannot make the
/// tokenizer build tables of billions of entries.
pub const MAX_ARRAY_LEN: usize = 1 << 24;

/// A GGUF file's tokenizer. Built once ([`from_gguf`](Self::from_gguf)); encoding and decoding
/// take `&self` and can run from several threads.
pub struct Tokenizer {
    vocab: Vocab,
    model: Model,
    ids: SpecialIds,
    add_bos: bool,
    add_eos: bool,
    add_space_prefix: bool,
    escape_whitespaces: bool,
    clean_spaces: bool,
    end_of_generation: Vec<u32>,
    /// Special tokens in the order the text is searched for them.
    special_order: Vec<u32>,
    special_finder: special::Finder,
    /// Each token's piece with special tokens rendered, back to back; `piece_ends[i]` is the end
    /// of token i's.
    pieces: Vec<u8>,
    piece_ends: Vec<usize>,
    /// GPT-2's byte-to-character table (byte-level BPE only).
    byte_chars: [char; 256],
}

/// Short: the kind and the special tokens, not the vocabulary (it would print for pages).
impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.model {
            Model::Bpe { pre, .. } => format!("byte-level BPE, {pre:?} pre-tokenizer"),
            Model::Spm => "SentencePiece".to_owned(),
        };
        f.debug_struct("Tokenizer")
            .field("kind", &kind)
            .field("vocab_size", &self.vocab.len())
            .field("bos", &self.ids.bos)
            .field("eos", &self.ids.eos)
            .field("add_bos", &self.add_bos)
            .field("add_eos", &self.add_eos)
            .field("end_of_generation", &self.end_of_generation)
            .finish()
    }
}

/// The byte each character of GPT-2's table stands for (the table's characters are all below
/// U+0144).
fn char_bytes(byte_chars: &[char; 256]) -> Vec<Option<u8>> {
    let mut inverse = vec![None; 0x144];
    for (b, &c) in byte_chars.iter().enumerate() {
        if let Some(slot) = inverse.get_mut(c as usize) {
            *slot = u8::try_from(b).ok();
        }
    }
    inverse
}

impl Tokenizer {
    /// The tokenizer of an open file. Errors name the file and the metadata key at fault.
    pub fn from_gguf(file: &GgufFile) -> Result<Self, Error> {
        Self::from_index(file.index())
            .map_err(|e| Error::new(ErrorKind::Tokenizer(e), file.path().map(Into::into)))
    }

    /// The tokenizer described by a header's metadata.
    pub fn from_index(index: &Index) -> Result<Self, TokenizerError> {
        let loaded = vocab::load(index)?;
        let special_order = special::search_order(&loaded.vocab);
        let special_finder = special::Finder::new(&loaded.vocab, &special_order);
        let mut tokenizer = Self {
            vocab: loaded.vocab,
            model: loaded.model,
            ids: loaded.ids,
            add_bos: loaded.add_bos,
            add_eos: loaded.add_eos,
            add_space_prefix: loaded.add_space_prefix,
            escape_whitespaces: loaded.escape_whitespaces,
            clean_spaces: loaded.clean_spaces,
            end_of_generation: loaded.end_of_generation,
            special_order,
            special_finder,
            pieces: Vec::new(),
            piece_ends: Vec::new(),
            byte_chars: bpe::byte_chars(),
        };
        let inverse = char_bytes(&tokenizer.byte_chars);
        let mut pieces = Vec::new();
        let mut ends = Vec::with_capacity(tokenizer.vocab.len());
        for id in 0..tokenizer.vocab.len() {
            tokenizer.render_piece(u32::try_from(id).unwrap_or(u32::MAX), &inverse, &mut pieces);
            ends.push(pieces.len());
        }
        tokenizer.pieces = pieces;
        tokenizer.piece_ends = ends;
        Ok(tokenizer)
    }

    /// The number of tokens.
    pub fn vocab_size(&self) -> usize {
        self.vocab.len()
    }

    /// The beginning-of-sequence token.
    pub fn bos(&self) -> Option<u32> {
        self.ids.bos
    }

    /// The end-of-sequence token.
    pub fn eos(&self) -> Option<u32> {
        self.ids.eos
    }

    /// The end-of-turn token (`<|im_end|>`, `<end_of_turn>`, ...), from the metadata or found by
    /// its text.
    pub fn eot(&self) -> Option<u32> {
        self.ids.eot
    }

    /// Whether [`encode`](Self::encode) with `add_special` starts with BOS
    /// (`tokenizer.ggml.add_bos_token`, or the tokenizer kind's default).
    pub fn adds_bos(&self) -> bool {
        self.add_bos
    }

    /// Whether [`encode`](Self::encode) with `add_special` ends with EOS.
    pub fn adds_eos(&self) -> bool {
        self.add_eos
    }

    /// Whether generation stops at `id`: EOS, end of turn, end of message and the other
    /// end-of-generation tokens llama.cpp recognises.
    pub fn is_end_of_generation(&self, id: u32) -> bool {
        self.end_of_generation.binary_search(&id).is_ok()
    }

    /// The end-of-generation tokens, sorted.
    pub fn end_of_generation(&self) -> &[u32] {
        &self.end_of_generation
    }

    /// Whether `id` is a control token (BOS, EOS, `<|im_start|>`, ...), which
    /// [`piece`](Self::piece) without `special` renders as nothing.
    pub fn is_control(&self, id: u32) -> bool {
        self.vocab.attr(id) & attr::CONTROL != 0
    }

    /// The text of token `id` as the vocabulary stores it (`Ġworld`, `▁world`, `<0x0A>`).
    pub fn token_text(&self, id: u32) -> Option<&str> {
        self.vocab.text(id)
    }

    /// The id of the token whose stored text is `text`.
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.vocab.token_id(text)
    }

    /// The bytes token `id` stands for, special tokens rendered as their text
    /// (`llama_token_to_piece` with `special` true); empty for an id out of range.
    pub fn token_to_piece(&self, id: u32) -> &[u8] {
        let i = id as usize;
        let Some(&end) = self.piece_ends.get(i) else {
            return &[];
        };
        let start = match i.checked_sub(1) {
            Some(p) => self.piece_ends.get(p).copied().unwrap_or(0),
            None => 0,
        };
        self.pieces.get(start..end).unwrap_or(&[])
    }

    /// The bytes token `id` stands for (`llama_token_to_piece`): with `special` false, control
    /// and unknown tokens are empty.
    pub fn piece(&self, id: u32, special: bool) -> &[u8] {
        if !special && self.vocab.attr(id) & (attr::CONTROL | attr::UNKNOWN) != 0 {
            return &[];
        }
        self.token_to_piece(id)
    }

    /// The text of `ids`, special tokens rendered (`llama_detokenize` with `remove_special`
    /// false and `unparse_special` true). Bytes, not a `String`: a sequence may end inside a
    /// character.
    pub fn decode(&self, ids: &[u32]) -> Vec<u8> {
        self.detokenize(ids, false, true)
    }

    /// `llama_detokenize`: with `remove_special`, a leading BOS and a trailing EOS that the
    /// tokenizer adds are left out; with `unparse_special`, control tokens are rendered. The
    /// space a SentencePiece tokenizer puts before the text is removed, and a BPE tokenizer that
    /// asks for it cleans spaces before punctuation, as llama.cpp does.
    pub fn detokenize(&self, ids: &[u32], remove_special: bool, unparse_special: bool) -> Vec<u8> {
        let mut ids = ids;
        let mut remove_space = self.add_space_prefix;
        if remove_special && self.add_bos {
            if let Some((&first, rest)) = ids.split_first() {
                if Some(first) == self.ids.bos {
                    remove_space = false;
                    ids = rest;
                }
            }
        }
        if remove_special && self.add_eos {
            if let Some((&last, rest)) = ids.split_last() {
                if Some(last) == self.ids.eos {
                    ids = rest;
                }
            }
        }
        let mut text = Vec::new();
        for &id in ids {
            let piece = self.piece(id, unparse_special);
            let piece = match piece.split_first() {
                Some((b' ', rest)) if remove_space => rest,
                _ => piece,
            };
            text.extend_from_slice(piece);
            remove_space = false;
        }
        if self.clean_spaces {
            clean_up_spaces(&mut text);
        }
        text
    }

    /// The token ids of `text` (`llama_tokenize`). With `add_special`, BOS and EOS are added if
    /// the file asks for them; with `parse_special`, control tokens written in the text
    /// (`<|im_start|>`) are recognised, otherwise they are tokenized as plain text.
    pub fn encode(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<u32> {
        let fragments = special::partition(
            &self.vocab,
            &self.special_order,
            &self.special_finder,
            text,
            parse_special,
        );
        let mut out = Vec::new();
        let add_bos = add_special && self.add_bos;
        if let (true, Some(bos)) = (add_bos, self.ids.bos) {
            out.push(bos);
        }
        match &self.model {
            Model::Spm => {
                // A space goes before text that starts the sequence or follows a special token.
                let mut after_special = true;
                for fragment in &fragments {
                    match fragment {
                        Fragment::Text(range) => {
                            let raw = text.get(range.clone()).unwrap_or_default();
                            let mut piece = String::with_capacity(raw.len() + 4);
                            if self.add_space_prefix && after_special {
                                piece.push(' ');
                            }
                            piece.push_str(raw);
                            if self.escape_whitespaces {
                                piece = piece.replace(' ', "\u{2581}");
                            }
                            spm::encode(&self.vocab, &piece, &mut out);
                            after_special = false;
                        }
                        Fragment::Token(id) => {
                            out.push(*id);
                            after_special = true;
                        }
                    }
                }
            }
            Model::Bpe {
                pre,
                ignore_merges,
                merges,
            } => {
                for fragment in &fragments {
                    match fragment {
                        Fragment::Text(range) => {
                            let raw = text.get(range.clone()).unwrap_or_default();
                            self.encode_bpe(*pre, *ignore_merges, merges, raw, &mut out);
                        }
                        Fragment::Token(id) => out.push(*id),
                    }
                }
            }
        }
        if let (true, true, Some(eos)) = (add_special, self.add_eos, self.ids.eos) {
            out.push(eos);
        }
        out
    }

    fn encode_bpe(
        &self,
        pre: PreTokenizer,
        ignore_merges: bool,
        merges: &bpe::Merges,
        text: &str,
        out: &mut Vec<u32>,
    ) {
        let chars: Vec<char> = text.chars().collect();
        let mut word = String::new();
        for range in pre.split(&chars) {
            word.clear();
            let mut utf8 = [0u8; 4];
            for &c in chars.get(range).unwrap_or_default() {
                for &b in c.encode_utf8(&mut utf8).as_bytes() {
                    word.push(self.byte_chars[usize::from(b)]);
                }
            }
            bpe::encode_word(&self.vocab, merges, ignore_merges, &word, out);
        }
    }

    /// Appends token `id`'s piece with special tokens rendered (llama.cpp's piece cache).
    fn render_piece(&self, id: u32, inverse: &[Option<u8>], out: &mut Vec<u8>) {
        let a = self.vocab.attr(id);
        let text = self.vocab.text(id).unwrap_or_default();
        if a & (attr::CONTROL | attr::UNKNOWN | attr::USER_DEFINED) != 0 {
            out.extend_from_slice(text.as_bytes());
        } else if a & attr::NORMAL != 0 {
            match self.model {
                Model::Bpe { .. } if !self.escape_whitespaces => unmap_bytes(inverse, text, out),
                _ => out.extend_from_slice(text.replace('\u{2581}', " ").as_bytes()),
            }
        } else if a & attr::BYTE != 0 {
            if let Some(b) = vocab::byte_of_token(text) {
                out.push(b);
            }
        }
        // Unused and undefined tokens have no piece.
    }
}

/// A byte-level BPE token's bytes: each character back to the byte it stands for (`inverse`);
/// one that stands for none is written as llama.cpp writes it (`[UNK_BYTE_0x..]`).
fn unmap_bytes(inverse: &[Option<u8>], text: &str, out: &mut Vec<u8>) {
    for c in text.chars() {
        match inverse.get(c as usize).copied().flatten() {
            Some(b) => out.push(b),
            None => {
                out.extend_from_slice(b"[UNK_BYTE_0x");
                let mut utf8 = [0u8; 4];
                for b in c.encode_utf8(&mut utf8).bytes() {
                    out.extend_from_slice(format!("{b:02x}").as_bytes());
                }
                out.extend_from_slice(text.as_bytes());
                out.push(b']');
            }
        }
    }
}

/// llama.cpp's `clean_up_tokenization_spaces`: no space before `?!.,`, ` ' ` becomes `'`, and
/// no space before `'s`, `'m`, `'re`, `'ve`.
fn clean_up_spaces(text: &mut Vec<u8>) {
    if text.is_empty() {
        return;
    }
    // Each pass reads the previous pass's output and writes a shorter one.
    let src = std::mem::take(text);
    let mut out = vec![src[0]];
    for i in 1..src.len() {
        let x = src[i];
        if src[i - 1] == b' ' && matches!(x, b'?' | b'!' | b'.' | b',') {
            out.pop();
        }
        out.push(x);
    }
    let mut src = out;
    let mut out = vec![src[0]];
    let mut i = 1;
    while i < src.len() {
        let x = src[i];
        if x == b'\'' && i + 1 < src.len() && src[i - 1] == b' ' && src[i + 1] == b' ' {
            out.pop();
            // The space after is dropped, and no longer counts as a space before the next byte.
            src[i + 1] = 0;
            i += 1;
        }
        out.push(x);
        i += 1;
    }
    let src = out;
    let mut out = vec![src[0]];
    for i in 1..src.len() {
        let x = src[i];
        if src[i - 1] == b' ' && x == b'\'' && i + 1 < src.len() {
            let x1 = src[i + 1];
            let x2 = src.get(i + 2).copied();
            let drop = matches!(x1, b's' | b'm')
                || (!matches!(x1, b't' | b'd')
                    && i + 2 < src.len()
                    && matches!((x1, x2), (b'r', Some(b'e')) | (b'v', Some(b'e'))));
            if drop {
                out.pop();
            }
        }
        out.push(x);
    }
    *text = out;
}

#[cfg(test)]
mod tests {
    use super::clean_up_spaces;

    fn cleaned(s: &str) -> String {
        let mut bytes = s.as_bytes().to_vec();
        clean_up_spaces(&mut bytes);
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn spaces_are_cleaned_as_llama_cpp_cleans_them() {
        assert_eq!(
            cleaned("Hello , world . Yes ! No ?"),
            "Hello, world. Yes! No?"
        );
        assert_eq!(cleaned("a ' b"), "a'b");
        assert_eq!(
            cleaned("it 's I 'm we 're they 've"),
            "it's I'm we're they've"
        );
        // Kept: 't, 'd, 'll, and anything at the very end.
        assert_eq!(cleaned("don 't we 'd I 'll x '"), "don 't we 'd I 'll x '");
        assert_eq!(cleaned(""), "");
        assert_eq!(cleaned(" ."), ".");
    }
}
