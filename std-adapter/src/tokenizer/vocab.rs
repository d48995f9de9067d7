//! A vocabulary read from a file's `tokenizer.ggml.*` metadata: the tokens with their scores and
//! attributes, lookup by text, the BPE merges, the special token ids and the flags that say how
//! to encode, with llama.cpp's defaults and its name-based fix-ups (`llama_vocab::impl::load`).

use std::collections::HashMap;

use super::bpe::Merges;
use super::error::TokenizerError;
use super::pretokenize::PreTokenizer;
use super::MAX_ARRAY_LEN;
use crate::index::Index;
use crate::names::{Inserted, NameIndex};
use crate::value::{Array, Strings, Value};

/// Token attributes (llama.cpp's `llama_token_attr` bits).
pub(super) mod attr {
    pub const UNKNOWN: u16 = 1 << 0;
    pub const UNUSED: u16 = 1 << 1;
    pub const NORMAL: u16 = 1 << 2;
    pub const CONTROL: u16 = 1 << 3;
    pub const USER_DEFINED: u16 = 1 << 4;
    pub const BYTE: u16 = 1 << 5;
    pub const LSTRIP: u16 = 1 << 7;
    pub const RSTRIP: u16 = 1 << 8;
}

/// The attribute of each `tokenizer.ggml.token_type` value (llama.cpp's `llama_token_type`).
fn attr_of_type(token_type: i32) -> u16 {
    match token_type {
        1 => attr::NORMAL,
        2 => attr::UNKNOWN,
        3 => attr::CONTROL,
        4 => attr::USER_DEFINED,
        5 => attr::UNUSED,
        6 => attr::BYTE,
        // 0 (undefined) and anything else.
        _ => 0,
    }
}

/// The tokens: text, score, attributes; lookup by text.
#[derive(Debug)]
pub(super) struct Vocab {
    texts: Strings,
    lookup: NameIndex,
    scores: Vec<f32>,
    pub attrs: Vec<u16>,
    /// Strings of merges that are no token, numbered from `texts.len()` on.
    extra_symbols: Strings,
    extra_lookup: NameIndex,
    /// The token of each byte for SentencePiece's byte fallback (`<0xXX>`, or the byte itself).
    byte_tokens: [Option<u32>; 256],
}

impl Vocab {
    pub fn len(&self) -> usize {
        self.texts.len()
    }

    pub fn text(&self, id: u32) -> Option<&str> {
        self.texts.get(id as usize)
    }

    pub fn attr(&self, id: u32) -> u16 {
        self.attrs.get(id as usize).copied().unwrap_or(0)
    }

    pub fn score(&self, id: u32) -> f32 {
        self.scores.get(id as usize).copied().unwrap_or(0.0)
    }

    pub fn token_id(&self, text: &str) -> Option<u32> {
        let i = self.lookup.find(text, |i| self.texts.get(i))?;
        u32::try_from(i).ok()
    }

    /// The id of a merge symbol: its token id, or a number past the tokens.
    pub fn symbol_id(&self, text: &str) -> Option<u32> {
        self.token_id(text).or_else(|| {
            let i = self
                .extra_lookup
                .find(text, |i| self.extra_symbols.get(i))?;
            u32::try_from(self.texts.len() + i).ok()
        })
    }

    fn intern_symbol(&mut self, text: &str) -> Option<u32> {
        if let Some(id) = self.symbol_id(text) {
            return Some(id);
        }
        let i = self.extra_symbols.len();
        self.extra_symbols.push(text);
        let symbols = &self.extra_symbols;
        self.extra_lookup.insert(text, i, |j| symbols.get(j));
        u32::try_from(self.texts.len() + i).ok()
    }

    pub fn byte_token(&self, byte: u8) -> Option<u32> {
        self.byte_tokens[usize::from(byte)]
    }
}

/// How the text is cut before merging.
#[derive(Debug)]
pub(super) enum Model {
    /// Byte-level BPE.
    Bpe {
        pre: PreTokenizer,
        /// Words that are whole tokens skip the merges (Llama 3).
        ignore_merges: bool,
        merges: Merges,
    },
    /// SentencePiece-style merges by score.
    Spm,
}

/// The special token ids (`None`: the vocabulary has none).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct SpecialIds {
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub eot: Option<u32>,
    pub eom: Option<u32>,
    pub unk: Option<u32>,
    pub sep: Option<u32>,
    pub pad: Option<u32>,
    pub mask: Option<u32>,
    pub fim_pre: Option<u32>,
    pub fim_suf: Option<u32>,
    pub fim_mid: Option<u32>,
    pub fim_pad: Option<u32>,
    pub fim_rep: Option<u32>,
    pub fim_sep: Option<u32>,
}

/// Everything read from the metadata.
#[derive(Debug)]
pub(super) struct Loaded {
    pub vocab: Vocab,
    pub model: Model,
    pub ids: SpecialIds,
    pub add_bos: bool,
    pub add_eos: bool,
    pub add_space_prefix: bool,
    pub escape_whitespaces: bool,
    pub clean_spaces: bool,
    /// Ids that end generation, sorted.
    pub end_of_generation: Vec<u32>,
}

/// The `tokenizer.ggml.pre` names implemented here, as llama.cpp maps them.
pub(super) const SUPPORTED_PRE_TOKENIZERS: &[&str] = &[
    "default",
    "gpt-2",
    "phi-2",
    "jina-es",
    "jina-de",
    "gigachat",
    "jina-v2-es",
    "jina-v2-de",
    "a.x-4.0",
    "mellum",
    "modern-bert",
    "exaone4",
    "mpt",
    "olmo",
    "jais",
    "trillion",
    "granite-docling",
    "starcoder",
    "refact",
    "codeshell",
    "exaone",
    "minerva-7b",
    "smollm",
    "command-r",
    "mellum2",
    "llama3",
    "llama-v3",
    "llama-bpe",
    "falcon3",
    "falcon-h1",
    "pixtral",
    "midm-2.0",
    "lfm2",
    "jina-v5-nano",
    "dbrx",
    "smaug-bpe",
];

/// A BPE pre-tokenizer name's split and flags, as llama.cpp sets them.
struct PreConfig {
    pre: PreTokenizer,
    ignore_merges: bool,
    add_bos: bool,
    clean_spaces: bool,
}

fn pre_config(name: &str) -> Option<PreConfig> {
    let plain = |pre, clean_spaces| PreConfig {
        pre,
        ignore_merges: false,
        add_bos: false,
        clean_spaces,
    };
    Some(match name {
        "" | "default" => plain(PreTokenizer::Default, true),
        "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es" | "jina-v2-de"
        | "a.x-4.0" | "mellum" | "modern-bert" | "exaone4" | "mpt" | "olmo" | "jais" => {
            plain(PreTokenizer::Gpt2, true)
        }
        "trillion" | "granite-docling" => plain(PreTokenizer::Gpt2, false),
        "starcoder" | "refact" | "codeshell" | "exaone" | "minerva-7b" => {
            plain(PreTokenizer::DigitsThenGpt2, true)
        }
        "smollm" | "command-r" | "mellum2" => plain(PreTokenizer::DigitsThenGpt2, false),
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" | "midm-2.0"
        | "lfm2" | "jina-v5-nano" => PreConfig {
            pre: PreTokenizer::Llama3,
            ignore_merges: true,
            add_bos: true,
            clean_spaces: true,
        },
        "dbrx" | "smaug-bpe" => plain(PreTokenizer::Llama3, true),
        _ => return None,
    })
}

fn get<'a>(index: &'a Index, key: &'static str) -> Option<&'a Value> {
    index.get(key)
}

fn get_str<'a>(index: &'a Index, key: &'static str) -> Result<Option<&'a str>, TokenizerError> {
    get(index, key)
        .map(|v| {
            v.as_str().ok_or(TokenizerError::WrongType {
                key,
                expected: "a string",
            })
        })
        .transpose()
}

fn get_bool(index: &Index, key: &'static str) -> Result<Option<bool>, TokenizerError> {
    get(index, key)
        .map(|v| {
            v.as_bool().ok_or(TokenizerError::WrongType {
                key,
                expected: "a bool",
            })
        })
        .transpose()
}

fn get_array<'a>(index: &'a Index, key: &'static str) -> Result<Option<&'a Array>, TokenizerError> {
    let Some(value) = get(index, key) else {
        return Ok(None);
    };
    let array = value.as_array().ok_or(TokenizerError::WrongType {
        key,
        expected: "an array",
    })?;
    if array.len() > MAX_ARRAY_LEN {
        return Err(TokenizerError::TooLong {
            key,
            len: array.len(),
            limit: MAX_ARRAY_LEN,
        });
    }
    Ok(Some(array))
}

const MODEL: &str = "tokenizer.ggml.model";
const PRE: &str = "tokenizer.ggml.pre";
const TOKENS: &str = "tokenizer.ggml.tokens";
const SCORES: &str = "tokenizer.ggml.scores";
const TOKEN_TYPE: &str = "tokenizer.ggml.token_type";
const MERGES: &str = "tokenizer.ggml.merges";
const ADD_BOS: &str = "tokenizer.ggml.add_bos_token";
const ADD_EOS: &str = "tokenizer.ggml.add_eos_token";
const ADD_SPACE_PREFIX: &str = "tokenizer.ggml.add_space_prefix";

/// Reads the tokenizer of `index`.
pub(super) fn load(index: &Index) -> Result<Loaded, TokenizerError> {
    let model_name = get_str(index, MODEL)?.ok_or(TokenizerError::MissingKey(MODEL))?;
    let pre_name = get_str(index, PRE)?.unwrap_or("");
    let is_bpe = match model_name {
        "gpt2" => true,
        "llama" => false,
        other => return Err(TokenizerError::UnsupportedModel(other.to_owned())),
    };
    // llama.cpp's defaults per tokenizer kind, before the metadata's own keys.
    let mut ids = SpecialIds::default();
    let mut add_bos;
    let mut add_space_prefix;
    let escape_whitespaces;
    let clean_spaces;
    let pre_config = if is_bpe {
        let config = pre_config(pre_name)
            .ok_or_else(|| TokenizerError::UnsupportedPreTokenizer(pre_name.to_owned()))?;
        ids.bos = Some(11);
        ids.eos = Some(11);
        add_bos = config.add_bos;
        add_space_prefix = false;
        escape_whitespaces = false;
        clean_spaces = config.clean_spaces;
        Some(config)
    } else {
        ids.bos = Some(1);
        ids.eos = Some(2);
        ids.unk = Some(0);
        add_bos = true;
        add_space_prefix = true;
        escape_whitespaces = true;
        clean_spaces = false;
        None
    };
    let mut add_eos = false;
    if let Some(v) = get_bool(index, ADD_SPACE_PREFIX)? {
        add_space_prefix = v;
    }

    let mut vocab = read_tokens(index)?;
    let n_tokens = vocab.len();

    let model = match pre_config {
        Some(config) => Model::Bpe {
            pre: config.pre,
            ignore_merges: config.ignore_merges,
            merges: read_merges(index, &mut vocab)?,
        },
        None => Model::Spm,
    };

    // Defaults that are not tokens of this vocabulary are dropped, as llama.cpp does.
    for id in [&mut ids.bos, &mut ids.eos, &mut ids.unk] {
        if id.is_some_and(|i| i as usize >= n_tokens) {
            *id = None;
        }
    }
    type Slot = fn(&mut SpecialIds) -> &mut Option<u32>;
    let keys: [(&'static str, Slot); 17] = [
        ("tokenizer.ggml.bos_token_id", |i| &mut i.bos),
        ("tokenizer.ggml.eos_token_id", |i| &mut i.eos),
        ("tokenizer.ggml.eot_token_id", |i| &mut i.eot),
        ("tokenizer.ggml.eom_token_id", |i| &mut i.eom),
        ("tokenizer.ggml.unknown_token_id", |i| &mut i.unk),
        ("tokenizer.ggml.seperator_token_id", |i| &mut i.sep),
        ("tokenizer.ggml.padding_token_id", |i| &mut i.pad),
        ("tokenizer.ggml.mask_token_id", |i| &mut i.mask),
        ("tokenizer.ggml.fim_pre_token_id", |i| &mut i.fim_pre),
        ("tokenizer.ggml.fim_suf_token_id", |i| &mut i.fim_suf),
        ("tokenizer.ggml.fim_mid_token_id", |i| &mut i.fim_mid),
        ("tokenizer.ggml.fim_pad_token_id", |i| &mut i.fim_pad),
        ("tokenizer.ggml.fim_rep_token_id", |i| &mut i.fim_rep),
        ("tokenizer.ggml.fim_sep_token_id", |i| &mut i.fim_sep),
        ("tokenizer.ggml.prefix_token_id", |i| &mut i.fim_pre),
        ("tokenizer.ggml.suffix_token_id", |i| &mut i.fim_suf),
        ("tokenizer.ggml.middle_token_id", |i| &mut i.fim_mid),
    ];
    for (key, slot) in keys {
        let slot = slot(&mut ids);
        let Some(value) = get(index, key) else {
            continue;
        };
        let id = value.as_u64().ok_or(TokenizerError::WrongType {
            key,
            expected: "a non-negative integer",
        })?;
        match u32::try_from(id) {
            Ok(id) if (id as usize) < n_tokens => *slot = Some(id),
            _ => {
                return Err(TokenizerError::IdOutOfRange {
                    key,
                    id,
                    tokens: n_tokens,
                })
            }
        }
    }
    if let Some(v) = get_bool(index, ADD_BOS)? {
        add_bos = v;
    }
    if let Some(v) = get_bool(index, ADD_EOS)? {
        add_eos = v;
    }
    if add_bos && ids.bos.is_none() {
        return Err(TokenizerError::MissingSpecialToken { key: ADD_BOS });
    }
    if add_eos && ids.eos.is_none() {
        return Err(TokenizerError::MissingSpecialToken { key: ADD_EOS });
    }

    let end_of_generation = detect_by_text(&mut vocab, &mut ids);
    apply_name_rules(index, &mut vocab, pre_name);

    Ok(Loaded {
        vocab,
        model,
        ids,
        add_bos,
        add_eos,
        add_space_prefix,
        escape_whitespaces,
        clean_spaces,
        end_of_generation,
    })
}

/// Tokens, scores and types.
fn read_tokens(index: &Index) -> Result<Vocab, TokenizerError> {
    let tokens = get_array(index, TOKENS)?.ok_or(TokenizerError::MissingKey(TOKENS))?;
    let strings = tokens.as_strings().ok_or(TokenizerError::WrongType {
        key: TOKENS,
        expected: "an array of strings",
    })?;
    let n = strings.len();
    let scores: Vec<f32> = match get_array(index, SCORES)? {
        None => vec![0.0; n],
        Some(a) => {
            let scores: Vec<f32> = match a {
                Array::F32(v) => v.get(..n).map(<[f32]>::to_vec),
                // Integer scores are converted as llama.cpp does (to the nearest float).
                #[allow(clippy::cast_precision_loss)]
                Array::I32(v) => v.get(..n).map(|s| s.iter().map(|&x| x as f32).collect()),
                _ => {
                    return Err(TokenizerError::WrongType {
                        key: SCORES,
                        expected: "an array of f32 or i32",
                    })
                }
            }
            .ok_or(TokenizerError::TooShort {
                key: SCORES,
                len: a.len(),
                tokens: n,
            })?;
            scores
        }
    };
    let attrs: Vec<u16> = match get_array(index, TOKEN_TYPE)? {
        None => vec![attr::NORMAL; n],
        Some(a) => {
            let types = a.as_i32_slice().ok_or(TokenizerError::WrongType {
                key: TOKEN_TYPE,
                expected: "an array of i32",
            })?;
            let types = types.get(..n).ok_or(TokenizerError::TooShort {
                key: TOKEN_TYPE,
                len: a.len(),
                tokens: n,
            })?;
            types.iter().map(|&t| attr_of_type(t)).collect()
        }
    };
    let mut texts = Strings::new();
    let mut lookup = NameIndex::default();
    for (i, text) in strings.iter().enumerate() {
        // An empty token could never be matched and would make the special-token search loop:
        // llama.cpp renames it the same way.
        let renamed;
        let text = if text.is_empty() {
            renamed = format!("[EMPTY_{i}]");
            renamed.as_str()
        } else {
            text
        };
        texts.push(text);
        if lookup.insert(text, i, |j| texts.get(j)) == Inserted::Duplicate {
            let first = lookup.find(text, |j| texts.get(j)).unwrap_or(0);
            return Err(TokenizerError::DuplicateToken {
                text: text.to_owned(),
                first: u32::try_from(first).unwrap_or(u32::MAX),
                second: u32::try_from(i).unwrap_or(u32::MAX),
            });
        }
    }
    let mut vocab = Vocab {
        texts,
        lookup,
        scores,
        attrs,
        extra_symbols: Strings::new(),
        extra_lookup: NameIndex::default(),
        byte_tokens: [None; 256],
    };
    for b in 0..=255u8 {
        let hex = format!("<0x{b:02X}>");
        let one = [b];
        vocab.byte_tokens[usize::from(b)] = vocab.token_id(&hex).or_else(|| {
            std::str::from_utf8(&one)
                .ok()
                .and_then(|t| vocab.token_id(t))
        });
    }
    for (i, &a) in vocab.attrs.iter().enumerate() {
        if a & attr::BYTE != 0 {
            let text = vocab.texts.get(i).unwrap_or_default();
            if byte_of_token(text).is_none() {
                return Err(TokenizerError::BadByteToken {
                    id: u32::try_from(i).unwrap_or(u32::MAX),
                    text: text.to_owned(),
                });
            }
        }
    }
    Ok(vocab)
}

/// The byte of a `<0xXX>` token.
pub(super) fn byte_of_token(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

/// The merges, ranked by their position; a pair listed twice keeps its first rank.
fn read_merges(index: &Index, vocab: &mut Vocab) -> Result<Merges, TokenizerError> {
    let merges = get_array(index, MERGES)?.ok_or(TokenizerError::MissingKey(MERGES))?;
    let strings = merges.as_strings().ok_or(TokenizerError::WrongType {
        key: MERGES,
        expected: "an array of strings",
    })?;
    let mut ranks = HashMap::with_capacity(strings.len());
    for (rank, merge) in strings.iter().enumerate() {
        // The separator is the first space after the first byte (a merge's left part may
        // itself be a space).
        let Some(pos) = merge.bytes().skip(1).position(|b| b == b' ').map(|p| p + 1) else {
            continue;
        };
        let (left, right) = (&merge[..pos], &merge[pos + 1..]);
        let (Some(l), Some(r)) = (vocab.intern_symbol(left), vocab.intern_symbol(right)) else {
            continue;
        };
        let rank = u32::try_from(rank).unwrap_or(u32::MAX);
        ranks.entry((l, r)).or_insert(rank);
    }
    Ok(Merges { ranks })
}

/// Finds end-of-turn, end-of-message and fill-in-the-middle tokens by their text where the
/// metadata does not name them, marks them (and every end-of-generation text) as control
/// tokens, and returns the ids that end generation, as llama.cpp's loader does. Where several
/// texts of one kind exist, llama.cpp takes whichever its hash map yields first; this takes the
/// lowest id.
fn detect_by_text(vocab: &mut Vocab, ids: &mut SpecialIds) -> Vec<u32> {
    const EOT: &[&str] = &[
        "<|eot_id|>",
        "<|im_end|>",
        "<|end|>",
        "<end_of_turn>",
        "<|endoftext|>",
        "<|end_of_text|>",
        "<EOT>",
        "_<EOT>",
        "[EOT]",
        "<｜end▁of▁sentence｜>",
        "<end_of_utterance>",
    ];
    const EOM: &[&str] = &["<|eom_id|>"];
    const FIM_PRE: &[&str] = &[
        "<|fim_prefix|>",
        "<fim-prefix>",
        "<fim_prefix>",
        "<｜fim▁begin｜>",
        "<PRE>",
        "▁<PRE>",
        "<|code_prefix|>",
        "<|prefix|>",
    ];
    const FIM_SUF: &[&str] = &[
        "<|fim_suffix|>",
        "<fim-suffix>",
        "<fim_suffix>",
        "<｜fim▁hole｜>",
        "<SUF>",
        "▁<SUF>",
        "<|code_suffix|>",
        "<|suffix|>",
    ];
    const FIM_MID: &[&str] = &[
        "<|fim_middle|>",
        "<fim-middle>",
        "<fim_middle>",
        "<｜fim▁end｜>",
        "<MID>",
        "▁<MID>",
        "<|code_middle|>",
        "<|middle|>",
    ];
    const FIM_PAD: &[&str] = &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"];
    const FIM_REP: &[&str] = &[
        "<|fim_repo|>",
        "<|repo_name|>",
        "<fim-repo>",
        "<REPO>",
        "<reponame>",
    ];
    const FIM_SEP: &[&str] = &["<|file_sep|>"];
    const END_OF_GENERATION: &[&str] = &[
        "<|eot_id|>",
        "<|im_end|>",
        "<|end|>",
        "<|return|>",
        "<|call|>",
        "<|flush|>",
        "<|calls|>",
        "<end_of_turn>",
        "<|endoftext|>",
        "</s>",
        "<|eom_id|>",
        "<EOT>",
        "_<EOT>",
        "[EOT]",
        "[EOS]",
        "<|end_of_text|>",
        "<end_of_utterance>",
        "<eos>",
        "<turn|>",
        "<|tool_response>",
        "<｜end▁of▁sentence｜>",
        "[e~[",
    ];

    let find_first = |vocab: &Vocab, texts: &[&str]| -> Option<u32> {
        texts.iter().filter_map(|t| vocab.token_id(t)).min()
    };
    let kinds: [(&mut Option<u32>, &[&str]); 8] = [
        (&mut ids.eot, EOT),
        (&mut ids.eom, EOM),
        (&mut ids.fim_pre, FIM_PRE),
        (&mut ids.fim_suf, FIM_SUF),
        (&mut ids.fim_mid, FIM_MID),
        (&mut ids.fim_pad, FIM_PAD),
        (&mut ids.fim_rep, FIM_REP),
        (&mut ids.fim_sep, FIM_SEP),
    ];
    for (slot, texts) in kinds {
        if slot.is_none() {
            *slot = find_first(vocab, texts);
            if let Some(id) = *slot {
                vocab.attrs[id as usize] |= attr::CONTROL;
            }
        }
    }
    // Control tokens named "unused" are unused (they stay control tokens).
    for i in 0..vocab.len() {
        if vocab.attrs[i] & attr::CONTROL != 0
            && vocab.texts.get(i).is_some_and(|t| t.contains("unused"))
        {
            vocab.attrs[i] |= attr::UNUSED;
        }
    }
    let mut eog: Vec<u32> = [ids.fim_pad, ids.fim_rep, ids.fim_sep]
        .into_iter()
        .flatten()
        .collect();
    for text in END_OF_GENERATION {
        if let Some(id) = vocab.token_id(text) {
            eog.push(id);
            vocab.attrs[id as usize] |= attr::CONTROL;
        }
    }
    // gpt-oss: these are always rendered.
    for text in ["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"] {
        if let Some(id) = vocab.token_id(text) {
            vocab.attrs[id as usize] = attr::USER_DEFINED;
        }
    }
    eog.extend([ids.eos, ids.eot, ids.eom].into_iter().flatten());
    eog.sort_unstable();
    eog.dedup();
    let has = |eog: &[u32], vocab: &Vocab, text: &str| {
        vocab
            .token_id(text)
            .filter(|id| eog.binary_search(id).is_ok())
    };
    // o200k_harmony and solar-open: `<|end|>` is not the end of generation there.
    let end = has(&eog, vocab, "<|end|>");
    let call = has(&eog, vocab, "<|call|>").or(has(&eog, vocab, "<|calls|>"));
    let returns = has(&eog, vocab, "<|return|>");
    let flush = has(&eog, vocab, "<|flush|>");
    if let Some(end) = end {
        if call.is_some() && (returns.is_some() || flush.is_some()) {
            eog.retain(|&id| id != end);
            vocab.attrs[end as usize] = attr::USER_DEFINED;
        }
    }
    // Gemma 4 and PLaMo have an ordinary `</s>`.
    let marker = has(&eog, vocab, "<|tool_response>").or(has(&eog, vocab, "<|plamo:eos|>"));
    if let (Some(_), Some(s)) = (marker, has(&eog, vocab, "</s>")) {
        eog.retain(|&id| id != s);
        vocab.attrs[s as usize] = attr::NORMAL;
    }
    eog
}

/// Per-model attributes llama.cpp sets by name: tokens that swallow the spaces beside them.
fn apply_name_rules(index: &Index, vocab: &mut Vocab, pre_name: &str) {
    let name = index
        .get("general.name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_lowercase();
    let arch = index
        .get("general.architecture")
        .and_then(Value::as_str)
        .unwrap_or("");
    fn set(vocab: &mut Vocab, text: &str, bit: u16, on: bool) {
        if let Some(id) = vocab.token_id(text) {
            let a = &mut vocab.attrs[id as usize];
            *a = if on { *a | bit } else { *a & !bit };
        }
    }
    if ["jina-v2-de", "jina-v2-es", "jina-v2-code"]
        .iter()
        .any(|p| pre_name.contains(p))
        || ["nomic-bert-moe", "jina-bert-v3"]
            .iter()
            .any(|a| arch.contains(a))
    {
        set(vocab, "<mask>", attr::LSTRIP, true);
    } else if name.contains("phi-3") || name.contains("phi3") {
        let special = attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN;
        for a in vocab.attrs.iter_mut().filter(|a| **a & special != 0) {
            *a |= attr::RSTRIP;
        }
        set(vocab, "</s>", attr::RSTRIP, true);
        for text in ["<unk>", "<s>", "<|endoftext|>"] {
            set(vocab, text, attr::RSTRIP, false);
        }
    } else if name.contains("modern-bert") {
        set(vocab, "[MASK]", attr::LSTRIP, true);
    }
}
