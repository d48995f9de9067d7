//! The tokenizer against llama.cpp: the ids of every text of `tests/data/tokenizer/texts` under
//! both real model files (SmolLM2: byte-level BPE, pre-tokenizer `smollm`; Gemma 3:
//! SentencePiece-style with byte fallback), and under variants of them that reach the other
//! paths (SmolLM2's vocabulary with the `llama-bpe`, `gpt-2` and `default` pre-tokenizers and with
//! BOS; Gemma 3's with the space prefix), must equal what llama.cpp's `llama-tokenize` gave, as
//! committed in `tests/data/tokenizer/expected/*.tsv` by `scripts/tokenizer-oracle.sh`. Decoding
//! must give every text back.
//!
//! The expected ids come from llama.cpp only. Building llama.cpp takes minutes, so it is not part
//! of CI: CI compares against the committed files, and `scripts/tokenizer-oracle.sh --check`
//! re-verifies those files against a live `llama-tokenize` (after `scripts/build-llama.sh`).
//! The model files come from `cargo xtask fetch`; without them these tests say so and skip.

use std::path::{Path, PathBuf};

use miniquant_std::tokenizer::{Tokenizer, TokenizerError};
use miniquant_std::GgufFile;

fn cache() -> PathBuf {
    std::env::var_os("MINIQUANT_CACHE").map_or_else(
        || Path::new(&std::env::var_os("HOME").unwrap_or_default()).join(".cache/miniquant"),
        PathBuf::from,
    )
}

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/tokenizer")
}

/// One line of an expected file.
struct Expected {
    case: String,
    mode: String,
    ids: Vec<u32>,
}

fn expected(model: &str) -> Vec<Expected> {
    let path = data().join("expected").join(format!("{model}.tsv"));
    let table =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    table
        .lines()
        .map(|line| {
            let mut fields = line.split('\t');
            let (Some(case), Some(mode), Some(ids), None) =
                (fields.next(), fields.next(), fields.next(), fields.next())
            else {
                panic!("{}: bad line {line:?}", path.display());
            };
            Expected {
                case: case.to_owned(),
                mode: mode.to_owned(),
                ids: ids
                    .split_whitespace()
                    .map(|id| id.parse().expect("an id"))
                    .collect(),
            }
        })
        .collect()
}

fn text(case: &str) -> String {
    let path = data().join("texts").join(format!("{case}.txt"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The model file, or `None` after saying why the test skips.
fn open_file(file_name: &str) -> Option<GgufFile> {
    let path = cache().join(file_name);
    if !path.exists() {
        eprintln!(
            "skipped: {} is not there (cargo xtask fetch)",
            path.display()
        );
        return None;
    }
    Some(GgufFile::open(&path).expect("the model opens"))
}

fn open(file_name: &str) -> Option<Tokenizer> {
    let file = open_file(file_name)?;
    Some(Tokenizer::from_gguf(&file).expect("its tokenizer loads"))
}

/// Encodes every text in both modes and compares with llama.cpp's ids (nothing to do when the
/// model file is missing: `tokenizer` is `None`).
fn agrees_with_llama_cpp(model: &str, tokenizer: Option<Tokenizer>) {
    let Some(tokenizer) = tokenizer else {
        return;
    };
    let table = expected(model);
    let texts = std::fs::read_dir(data().join("texts")).unwrap().count();
    assert_eq!(table.len(), 2 * texts, "{model}: two lines per text");
    let mut failures = Vec::new();
    for e in &table {
        let text = text(&e.case);
        let ids = match e.mode.as_str() {
            // llama-tokenize adds specials only when the file asks for BOS.
            "default" => tokenizer.encode(&text, tokenizer.adds_bos(), true),
            "plain" => tokenizer.encode(&text, false, false),
            other => panic!("unknown mode {other:?}"),
        };
        if ids != e.ids {
            failures.push(format!(
                "{} {}: {text:?}\n  llama.cpp: {:?}\n  ours:      {ids:?}",
                e.case, e.mode, e.ids
            ));
        }
    }
    eprintln!(
        "{model}: {} of {} agree with llama.cpp",
        table.len() - failures.len(),
        table.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every text decodes back to itself, with special tokens parsed or not, BOS added or not.
fn round_trips(tokenizer: &Tokenizer) {
    for entry in std::fs::read_dir(data().join("texts")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for parse_special in [false, true] {
            let ids = tokenizer.encode(&text, false, parse_special);
            assert_eq!(
                String::from_utf8_lossy(&tokenizer.decode(&ids)),
                text,
                "{} (parse_special {parse_special})",
                path.display()
            );
            let with_bos = tokenizer.encode(&text, true, parse_special);
            assert_eq!(
                String::from_utf8_lossy(&tokenizer.detokenize(&with_bos, true, true)),
                text,
                "{} with BOS removed",
                path.display()
            );
        }
    }
}

#[test]
fn smollm2_ids_equal_llama_cpp() {
    agrees_with_llama_cpp("smollm2-135m", open("SmolLM2-135M-Instruct.Q4_1.gguf"));
}

#[test]
fn gemma3_ids_equal_llama_cpp() {
    agrees_with_llama_cpp("gemma3-270m", open("gemma-3-270m-q4_k_m.gguf"));
}

/// A model's tokenizer with one metadata key changed, as the oracle script makes the file
/// llama-tokenize reads (with gguf-py's gguf-new-metadata or gguf-set-metadata).
fn with_key(file_name: &str, key: &str, value: miniquant_std::Value) -> Option<Tokenizer> {
    let file = open_file(file_name)?;
    let mut w = miniquant_std::writer::GgufWriter::new();
    for e in file.index().metadata() {
        if e.key == key {
            w.kv(&e.key, value.clone());
        } else {
            w.kv(&e.key, e.value.clone());
        }
    }
    let index = miniquant_std::Index::from_bytes(&w.to_bytes()).expect("a valid header");
    Some(Tokenizer::from_index(&index).expect("its tokenizer loads"))
}

/// SmolLM2's vocabulary under another `tokenizer.ggml.pre`.
fn smollm2_with_pre(pre: &str) -> Option<Tokenizer> {
    with_key(
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "tokenizer.ggml.pre",
        miniquant_std::Value::from(pre),
    )
}

fn set_true(file_name: &str, key: &str) -> Option<Tokenizer> {
    let t = miniquant::gguf::Scalar::Bool(true);
    with_key(file_name, key, miniquant_std::Value::from(t))
}

#[test]
fn bpe_with_bos_equals_llama_cpp() {
    agrees_with_llama_cpp(
        "smollm2-135m-add-bos",
        set_true(
            "SmolLM2-135M-Instruct.Q4_1.gguf",
            "tokenizer.ggml.add_bos_token",
        ),
    );
}

/// Llama 2-style SentencePiece: a space before the text and after every special token.
#[test]
fn sentencepiece_with_space_prefix_equals_llama_cpp() {
    let t = set_true(
        "gemma-3-270m-q4_k_m.gguf",
        "tokenizer.ggml.add_space_prefix",
    );
    agrees_with_llama_cpp("gemma3-270m-space-prefix", t);
}

#[test]
fn llama3_pre_tokenizer_equals_llama_cpp() {
    agrees_with_llama_cpp("smollm2-135m-llama-bpe", smollm2_with_pre("llama-bpe"));
}

#[test]
fn gpt2_pre_tokenizer_equals_llama_cpp() {
    agrees_with_llama_cpp("smollm2-135m-gpt-2", smollm2_with_pre("gpt-2"));
}

#[test]
fn default_pre_tokenizer_equals_llama_cpp() {
    agrees_with_llama_cpp("smollm2-135m-default", smollm2_with_pre("default"));
}

#[test]
fn smollm2_decodes_every_text_back() {
    let Some(tokenizer) = open("SmolLM2-135M-Instruct.Q4_1.gguf") else {
        return;
    };
    round_trips(&tokenizer);
}

#[test]
fn gemma3_decodes_every_text_back() {
    let Some(tokenizer) = open("gemma-3-270m-q4_k_m.gguf") else {
        return;
    };
    round_trips(&tokenizer);
}

#[test]
fn special_tokens_and_end_of_generation() {
    if let Some(t) = open("SmolLM2-135M-Instruct.Q4_1.gguf") {
        let im_end = t.token_id("<|im_end|>").unwrap();
        assert_eq!((t.bos(), t.eos(), t.adds_bos()), (Some(1), Some(2), false));
        assert!(t.is_end_of_generation(im_end));
        assert!(t.is_end_of_generation(0), "<|endoftext|>");
        // llama.cpp's load log ("printing all EOG tokens"): 0, 2 and 4 (<reponame>, a
        // fill-in-the-middle repository token).
        assert_eq!(t.end_of_generation(), [0, 2, 4]);
        assert!(!t.is_end_of_generation(t.token_id("<|im_start|>").unwrap()));
        assert_eq!(t.token_to_piece(im_end), b"<|im_end|>");
        assert_eq!(t.piece(im_end, false), b"");
        assert_eq!(t.token_to_piece(t.token_id("Ġworld").unwrap()), b" world");
        assert_eq!(t.vocab_size(), 49152);
    }
    if let Some(t) = open("gemma-3-270m-q4_k_m.gguf") {
        let end_of_turn = t.token_id("<end_of_turn>").unwrap();
        assert_eq!((t.bos(), t.eos(), t.adds_bos()), (Some(2), Some(1), true));
        assert_eq!(t.eot(), Some(end_of_turn));
        assert!(t.is_end_of_generation(end_of_turn));
        assert!(t.is_end_of_generation(1), "<eos>");
        // llama.cpp's load log: <eos>, <end_of_turn> and </s>.
        assert_eq!(t.end_of_generation(), [1, 106, 212]);
        assert_eq!(t.token_to_piece(t.token_id("<0x0A>").unwrap()), b"\n");
        assert_eq!(t.token_to_piece(t.token_id("▁world").unwrap()), b" world");
        assert_eq!(t.token_to_piece(u32::MAX), b"");
        assert_eq!(t.vocab_size(), 262_144);
    }
}

/// A GGUF header with the given tokenizer keys.
fn index_with(keys: &[(&str, miniquant_std::Value)]) -> miniquant_std::Index {
    let mut w = miniquant_std::writer::GgufWriter::new();
    for (k, v) in keys {
        w.kv(k, v.clone());
    }
    miniquant_std::Index::from_bytes(&w.to_bytes()).expect("a valid header")
}

#[test]
fn hostile_metadata_is_a_clear_error() {
    use miniquant::gguf::Scalar;
    use miniquant_std::{Array, Value};
    let tokens = |t: &[&str]| Value::from(t.iter().copied().collect::<Array>());
    let gpt2 = || ("tokenizer.ggml.model", Value::from("gpt2"));
    let llama = || ("tokenizer.ggml.model", Value::from("llama"));
    /// The keys, the error they must give, words of its message.
    type Case = (Vec<(&'static str, Value)>, TokenizerError, &'static str);
    let cases: Vec<Case> = vec![
        (
            vec![],
            TokenizerError::MissingKey("tokenizer.ggml.model"),
            "no tokenizer.ggml.model",
        ),
        (
            vec![gpt2(), ("tokenizer.ggml.tokens", tokens(&["a", "b"]))],
            TokenizerError::MissingKey("tokenizer.ggml.merges"),
            "no tokenizer.ggml.merges",
        ),
        (
            vec![("tokenizer.ggml.model", Value::from("bert"))],
            TokenizerError::UnsupportedModel("bert".into()),
            "\"bert\" is not supported",
        ),
        (
            vec![gpt2(), ("tokenizer.ggml.pre", Value::from("qwen2"))],
            TokenizerError::UnsupportedPreTokenizer("qwen2".into()),
            "\"qwen2\" is not supported (supported: default, gpt-2",
        ),
        (
            vec![
                llama(),
                ("tokenizer.ggml.tokens", tokens(&["<unk>", "<s>", "</s>"])),
                (
                    "tokenizer.ggml.scores",
                    Value::from(Array::F32(vec![0.0, 1.0])),
                ),
            ],
            TokenizerError::TooShort {
                key: "tokenizer.ggml.scores",
                len: 2,
                tokens: 3,
            },
            "has 2 elements, fewer than the 3 tokens",
        ),
        (
            vec![
                llama(),
                ("tokenizer.ggml.tokens", tokens(&["<unk>", "<s>", "</s>"])),
                (
                    "tokenizer.ggml.token_type",
                    Value::from(Array::I32(vec![2])),
                ),
            ],
            TokenizerError::TooShort {
                key: "tokenizer.ggml.token_type",
                len: 1,
                tokens: 3,
            },
            "fewer than the 3 tokens",
        ),
        (
            vec![
                llama(),
                ("tokenizer.ggml.tokens", tokens(&["<unk>", "<s>", "</s>"])),
                ("tokenizer.ggml.bos_token_id", Value::from(Scalar::U32(3))),
            ],
            TokenizerError::IdOutOfRange {
                key: "tokenizer.ggml.bos_token_id",
                id: 3,
                tokens: 3,
            },
            "tokenizer.ggml.bos_token_id is 3, but the vocabulary has 3 tokens",
        ),
        (
            vec![
                llama(),
                ("tokenizer.ggml.tokens", tokens(&["<unk>", "x", "x"])),
            ],
            TokenizerError::DuplicateToken {
                text: "x".into(),
                first: 1,
                second: 2,
            },
            "tokens 1 and 2 have the same text \"x\"",
        ),
        (
            vec![
                llama(),
                ("tokenizer.ggml.tokens", Value::from(Array::U32(vec![1]))),
            ],
            TokenizerError::WrongType {
                key: "tokenizer.ggml.tokens",
                expected: "an array of strings",
            },
            "tokenizer.ggml.tokens is not an array of strings",
        ),
        (
            // Two tokens: the default BOS (1) is there, but add_bos with it removed is not.
            vec![
                llama(),
                ("tokenizer.ggml.tokens", tokens(&["a"])),
                (
                    "tokenizer.ggml.add_bos_token",
                    Value::from(Scalar::Bool(true)),
                ),
            ],
            TokenizerError::MissingSpecialToken {
                key: "tokenizer.ggml.add_bos_token",
            },
            "add_bos_token is true but the file has no such token",
        ),
        (
            vec![
                llama(),
                ("tokenizer.ggml.tokens", tokens(&["<unk>", "<0xZZ>"])),
                (
                    "tokenizer.ggml.token_type",
                    Value::from(Array::I32(vec![2, 6])),
                ),
                (
                    "tokenizer.ggml.add_bos_token",
                    Value::from(Scalar::Bool(false)),
                ),
            ],
            TokenizerError::BadByteToken {
                id: 1,
                text: "<0xZZ>".into(),
            },
            "token 1 has type BYTE",
        ),
    ];
    for (keys, want, message) in cases {
        let err = Tokenizer::from_index(&index_with(&keys)).expect_err(message);
        assert_eq!(err, want);
        assert!(err.to_string().contains(message), "{err} lacks {message:?}");
    }
}

#[test]
fn huge_arrays_are_refused_before_any_table_is_built() {
    use miniquant_std::{Array, Value};
    let n = miniquant_std::tokenizer::MAX_ARRAY_LEN + 1;
    let index = index_with(&[
        ("tokenizer.ggml.model", Value::from("llama")),
        (
            "tokenizer.ggml.tokens",
            Value::from(Array::F32(vec![0.0; n])),
        ),
    ]);
    assert_eq!(
        Tokenizer::from_index(&index).unwrap_err(),
        TokenizerError::TooLong {
            key: "tokenizer.ggml.tokens",
            len: n,
            limit: n - 1,
        }
    );
}

/// A small SentencePiece vocabulary built here: merges by score, byte fallback, the space
/// prefix, special tokens in the text.
#[test]
fn a_small_sentencepiece_vocabulary() {
    use miniquant::gguf::Scalar;
    use miniquant_std::{Array, Value};
    let mut texts = vec!["<unk>", "<s>", "</s>", "▁", "a", "b", "ab", "▁ab", "<sep>"];
    let mut types = vec![2, 3, 3, 1, 1, 1, 1, 1, 3];
    let bytes: Vec<String> = (0..=255u8).map(|b| format!("<0x{b:02X}>")).collect();
    texts.extend(bytes.iter().map(String::as_str));
    types.extend(std::iter::repeat_n(6, 256));
    let mut scores = vec![0.0, 0.0, 0.0, -5.0, -1.0, -1.0, -2.0, -3.0, 0.0];
    scores.extend(std::iter::repeat_n(0.0, 256));
    let index = index_with(&[
        ("tokenizer.ggml.model", Value::from("llama")),
        (
            "tokenizer.ggml.tokens",
            Value::from(texts.iter().copied().collect::<Array>()),
        ),
        ("tokenizer.ggml.scores", Value::from(Array::F32(scores))),
        ("tokenizer.ggml.token_type", Value::from(Array::I32(types))),
        ("tokenizer.ggml.eos_token_id", Value::from(Scalar::U32(2))),
    ]);
    let t = Tokenizer::from_index(&index).unwrap();
    let byte = |b: u8| 9 + u32::from(b);
    // " ab" is one token; "é" is not in the vocabulary: its two UTF-8 bytes.
    assert_eq!(t.encode("ab", true, false), [1, 7]);
    assert_eq!(t.encode("abé", false, false), [7, byte(0xc3), byte(0xa9)]);
    // A special token in the text, parsed or not; text after it gets the space prefix again.
    assert_eq!(t.encode("a<sep>b", false, true), [3, 4, 8, 3, 5]);
    assert!(t.encode("a<sep>b", false, false).len() > 5);
    assert_eq!(
        t.decode(&[1, 7, byte(0xc3), byte(0xa9)]),
        "<s> abé".as_bytes()
    );
    // llama.cpp keeps the prefix space when it removes a BOS, and drops it otherwise.
    assert_eq!(t.detokenize(&[1, 7], true, false), b" ab");
    assert_eq!(
        t.detokenize(&[7], false, false),
        b"ab",
        "the prefix space goes"
    );
    assert!(t.is_end_of_generation(2));
}

/// Texts made of random pieces (words, white space runs, digits, scripts, emoji, marks,
/// punctuation, special tokens, control characters) from a fixed seed.
fn random_texts(count: usize) -> Vec<String> {
    const PIECES: &[&str] = &[
        "the",
        "The",
        "WORLD",
        "naïve",
        "don't",
        "I'M",
        "we'll",
        " ",
        "  ",
        "   ",
        "\n",
        "\r\n",
        "\t",
        "\n\n",
        " \n",
        "\u{a0}",
        "\u{3000}",
        "0",
        "12",
        "345",
        "6789",
        "中文",
        "日本語",
        "한국어",
        "Привет",
        "مرحبا",
        "नमस्ते",
        "🦀",
        "👍🏽",
        "👨\u{200d}👩\u{200d}👧",
        "🇫🇷",
        "e\u{301}",
        "\u{200b}",
        "ﬁ",
        "½",
        "٣",
        "\u{1}",
        "\u{7f}",
        ".",
        ",",
        "'",
        "\"",
        "(",
        ")",
        "<",
        ">",
        "+",
        "-",
        "$",
        "|",
        "~",
        "`",
        "_",
        "<|im_start|>",
        "<|im_end|>",
        "<start_of_turn>",
        "<end_of_turn>",
        "<bos>",
        "<eos>",
        "<|endoftext|>",
        "<pad>",
        "<unk>",
        "<",
        "|",
        "im_",
    ];
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    (0..count)
        .map(|_| {
            let len = 1 + next(30);
            (0..len).map(|_| PIECES[next(PIECES.len())]).collect()
        })
        .collect()
}

/// Random texts decode back to themselves, and adding specials only adds BOS/EOS around the
/// same ids.
#[test]
fn random_texts_round_trip() {
    for file in [
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "gemma-3-270m-q4_k_m.gguf",
    ] {
        let Some(t) = open(file) else {
            continue;
        };
        for text in random_texts(500) {
            for parse_special in [false, true] {
                let ids = t.encode(&text, false, parse_special);
                assert_eq!(
                    String::from_utf8_lossy(&t.decode(&ids)),
                    text,
                    "{file}, parse_special {parse_special}"
                );
                let with = t.encode(&text, true, parse_special);
                let bos = usize::from(t.adds_bos());
                assert_eq!(&with[bos..], &ids[..], "{file}: {text:?}");
                assert_eq!(
                    with.first().copied().filter(|_| t.adds_bos()),
                    t.bos().filter(|_| t.adds_bos())
                );
            }
        }
    }
}

/// Vocabularies no converter would write still encode without a panic: NaN scores, merges
/// without a separator or of strings that are no tokens, no byte tokens for a text's bytes.
#[test]
fn odd_vocabularies_encode_without_panicking() {
    use miniquant::gguf::Scalar;
    use miniquant_std::{Array, Value};
    let spm = index_with(&[
        ("tokenizer.ggml.model", Value::from("llama")),
        (
            "tokenizer.ggml.tokens",
            Value::from(
                ["<unk>", "<s>", "</s>", "a", "b", "ab", "▁a"]
                    .into_iter()
                    .collect::<Array>(),
            ),
        ),
        (
            "tokenizer.ggml.scores",
            Value::from(Array::F32(vec![
                f32::NAN,
                0.0,
                0.0,
                f32::NAN,
                -1.0,
                f32::INFINITY,
                f32::NAN,
            ])),
        ),
    ]);
    let t = Tokenizer::from_index(&spm).unwrap();
    for text in ["", "ab", "abab a b", "é中😀", "<s></s>"] {
        let ids = t.encode(text, true, true);
        assert!(
            ids.iter().all(|&id| (id as usize) < t.vocab_size()),
            "{text:?}: {ids:?}"
        );
    }
    let bpe = index_with(&[
        ("tokenizer.ggml.model", Value::from("gpt2")),
        ("tokenizer.ggml.pre", Value::from("llama-bpe")),
        (
            "tokenizer.ggml.tokens",
            Value::from(
                ["a", "b", "ab", "Ġ", "<|x|>"]
                    .into_iter()
                    .collect::<Array>(),
            ),
        ),
        (
            "tokenizer.ggml.token_type",
            Value::from(Array::I32(vec![1, 1, 1, 1, 3])),
        ),
        (
            "tokenizer.ggml.merges",
            Value::from(
                ["a b", "nospace", "", " ", "q r", "ab Ġ"]
                    .into_iter()
                    .collect::<Array>(),
            ),
        ),
        (
            "tokenizer.ggml.add_bos_token",
            Value::from(Scalar::Bool(false)),
        ),
    ]);
    let t = Tokenizer::from_index(&bpe).unwrap();
    assert_eq!(t.encode("ab", false, false), [2]);
    // Bytes with no token are dropped, as llama.cpp drops them; the special token is parsed.
    assert_eq!(t.encode("ab é<|x|>b", false, true), [2, 3, 4, 1]);
}

/// `TextStream` (what `run` prints as it generates) gives `decode` of all the ids, in chunks of
/// whole characters, for every text: emoji and CJK characters whose bytes are split over tokens
/// (byte-level BPE pieces, SentencePiece byte fallback) and the spaces `decode` cleans before
/// punctuation included.
fn streams_as_decode(tokenizer: &Tokenizer) {
    let mut split_characters = 0;
    for entry in std::fs::read_dir(data().join("texts")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for parse_special in [false, true] {
            let ids = tokenizer.encode(&text, false, parse_special);
            let mut stream = miniquant_std::tokenizer::TextStream::new(tokenizer);
            let mut chunks: Vec<Vec<u8>> = ids.iter().map(|&id| stream.push(id)).collect();
            chunks.push(stream.finish());
            assert_eq!(
                chunks.concat(),
                tokenizer.decode(&ids),
                "{} (parse_special {parse_special})",
                path.display()
            );
            for chunk in &chunks {
                assert!(
                    std::str::from_utf8(chunk).is_ok(),
                    "{}: a chunk cuts a character: {chunk:?}",
                    path.display()
                );
            }
            split_characters += ids
                .iter()
                .filter(|&&id| std::str::from_utf8(tokenizer.token_to_piece(id)).is_err())
                .count();
        }
    }
    // The texts do split characters over tokens, so the hold-back was exercised.
    assert!(split_characters > 0);
}

#[test]
fn streamed_text_equals_the_one_shot_decode() {
    let tokenizers = [
        open("SmolLM2-135M-Instruct.Q4_1.gguf"),
        open("gemma-3-270m-q4_k_m.gguf"),
        set_true(
            "gemma-3-270m-q4_k_m.gguf",
            "tokenizer.ggml.add_space_prefix",
        ),
    ];
    for tokenizer in tokenizers.iter().flatten() {
        streams_as_decode(tokenizer);
    }
}
