//! Why a file's tokenizer metadata cannot be used.

use std::fmt;

/// A problem in a file's `tokenizer.ggml.*` metadata, naming the key and the limit it breaks.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum TokenizerError {
    /// A key the tokenizer needs is absent.
    MissingKey(&'static str),
    /// A key holds a value of another type.
    WrongType {
        /// The key.
        key: &'static str,
        /// What it should hold.
        expected: &'static str,
    },
    /// `tokenizer.ggml.model` names a tokenizer this crate does not implement.
    UnsupportedModel(String),
    /// `tokenizer.ggml.pre` names a pre-tokenizer this crate does not implement.
    UnsupportedPreTokenizer(String),
    /// An array has fewer elements than there are tokens.
    TooShort {
        /// The key.
        key: &'static str,
        /// Its length.
        len: usize,
        /// The number of tokens.
        tokens: usize,
    },
    /// An array is longer than any real vocabulary ([`MAX_ARRAY_LEN`](super::MAX_ARRAY_LEN)).
    TooLong {
        /// The key.
        key: &'static str,
        /// Its length.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// A token id is not below the number of tokens.
    IdOutOfRange {
        /// The key.
        key: &'static str,
        /// The id.
        id: u64,
        /// The number of tokens.
        tokens: usize,
    },
    /// Two tokens have the same text (llama.cpp refuses such a vocabulary too).
    DuplicateToken {
        /// The text.
        text: String,
        /// The first id.
        first: u32,
        /// The second id.
        second: u32,
    },
    /// A token of type BYTE whose text is not `<0xXX>`.
    BadByteToken {
        /// The token id.
        id: u32,
        /// Its text.
        text: String,
    },
    /// The file asks for a BOS (or EOS) token to be added but has none.
    MissingSpecialToken {
        /// The key that asks for it (`tokenizer.ggml.add_bos_token`, ...).
        key: &'static str,
    },
}

impl fmt::Display for TokenizerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MissingKey(key) => write!(f, "tokenizer: the file has no {key}"),
            Self::WrongType { key, expected } => {
                write!(f, "tokenizer: {key} is not {expected}")
            }
            Self::UnsupportedModel(m) => write!(
                f,
                "tokenizer: tokenizer.ggml.model {m:?} is not supported (supported: \"gpt2\", \
                 \"llama\")"
            ),
            Self::UnsupportedPreTokenizer(p) => write!(
                f,
                "tokenizer: tokenizer.ggml.pre {p:?} is not supported (supported: {})",
                super::vocab::SUPPORTED_PRE_TOKENIZERS.join(", ")
            ),
            Self::TooShort { key, len, tokens } => write!(
                f,
                "tokenizer: {key} has {len} elements, fewer than the {tokens} tokens"
            ),
            Self::TooLong { key, len, limit } => write!(
                f,
                "tokenizer: {key} has {len} elements, more than the limit of {limit}"
            ),
            Self::IdOutOfRange { key, id, tokens } => write!(
                f,
                "tokenizer: {key} is {id}, but the vocabulary has {tokens} tokens"
            ),
            Self::DuplicateToken {
                text,
                first,
                second,
            } => write!(
                f,
                "tokenizer: tokens {first} and {second} have the same text {text:?}"
            ),
            Self::BadByteToken { id, text } => write!(
                f,
                "tokenizer: token {id} has type BYTE but its text {text:?} is not <0xXX>"
            ),
            Self::MissingSpecialToken { key } => {
                write!(f, "tokenizer: {key} is true but the file has no such token")
            }
        }
    }
}

impl std::error::Error for TokenizerError {}
