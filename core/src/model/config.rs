//! The hyperparameters of a llama-family model, read from a GGUF header's `{arch}.*` keys.

use super::error::{ArchName, ModelError};
use crate::gguf::{ByteOrder, Event, Limits, Scalar, SliceParser};

/// An architecture this module runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Arch {
    /// `llama`: SmolLM2, TinyLlama, Llama 2/3 and stories-class models.
    Llama,
}

impl Arch {
    /// The `general.architecture` value, which is also the metadata key prefix.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Llama => "llama",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        match name {
            "llama" => Some(Self::Llama),
            _ => None,
        }
    }
}

/// A model's shape and constants.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Config {
    /// The architecture.
    pub arch: Arch,
    /// `block_count`.
    pub n_layers: usize,
    /// `embedding_length`: the residual stream's width.
    pub d_model: usize,
    /// `feed_forward_length`.
    pub d_ff: usize,
    /// `attention.head_count`.
    pub n_heads: usize,
    /// `attention.head_count_kv` (defaults to `n_heads`).
    pub n_kv_heads: usize,
    /// Width of one head: `attention.key_length`, or `d_model / n_heads`.
    pub head_dim: usize,
    /// `rope.dimension_count` (defaults to `head_dim`): the rotated leading part of each head.
    pub rope_dims: usize,
    /// `rope.freq_base` (defaults to 10000).
    pub rope_freq_base: f32,
    /// `attention.layer_norm_rms_epsilon`.
    pub rms_eps: f32,
    /// `context_length`: the context the model was trained for.
    pub context_length: usize,
    /// `vocab_size`, or the embedding's row count.
    pub vocab: usize,
}

impl Config {
    /// Width of the queries of all heads.
    pub fn q_dim(&self) -> usize {
        self.n_heads.saturating_mul(self.head_dim)
    }

    /// Width of the keys (and values) of all KV heads.
    pub fn kv_dim(&self) -> usize {
        self.n_kv_heads.saturating_mul(self.head_dim)
    }
}

/// Metadata suffixes read after `{arch}.`, in the order of [`RawValues`]' fields.
const KEYS: [&str; 12] = [
    "block_count",
    "embedding_length",
    "feed_forward_length",
    "attention.head_count",
    "attention.head_count_kv",
    "attention.key_length",
    "rope.dimension_count",
    "rope.freq_base",
    "attention.layer_norm_rms_epsilon",
    "context_length",
    "vocab_size",
    "rope.scaling.factor",
];

/// The values of [`KEYS`] as found (by index).
#[derive(Default)]
pub(super) struct RawValues {
    values: [Option<Scalar>; KEYS.len()],
}

impl RawValues {
    fn get(&self, suffix: &str) -> Option<Scalar> {
        let i = KEYS.iter().position(|&k| k == suffix)?;
        *self.values.get(i)?
    }
}

/// Reads `general.architecture` and the byte order: the first pass over the header.
pub(super) fn architecture(file: &[u8]) -> Result<Arch, ModelError> {
    let mut parser = SliceParser::new(file, Limits::default());
    let mut in_arch_key = false;
    while let Some(event) = parser.next_event()? {
        match event {
            Event::Header(h) if h.byte_order == ByteOrder::Big => {
                return Err(ModelError::BigEndian)
            }
            Event::Key { key, .. } => in_arch_key = key == "general.architecture",
            Event::String(s) if in_arch_key => {
                return Arch::from_name(s.text).ok_or_else(|| {
                    let mut name = ArchName::new();
                    for c in s.text.chars() {
                        if name.push(c).is_err() {
                            break;
                        }
                    }
                    ModelError::UnknownArchitecture(name)
                });
            }
            Event::Tensor(_) | Event::End(_) => break,
            _ => in_arch_key = false,
        }
    }
    Err(ModelError::NoArchitecture)
}

/// Records the scalar value of `{arch}.{KEYS[i]}` if `key` is one of them; returns whether the
/// next scalar event is its value.
pub(super) fn wanted_key(arch: Arch, key: &str) -> Option<usize> {
    let suffix = key.strip_prefix(arch.name())?.strip_prefix('.')?;
    KEYS.iter().position(|&k| k == suffix)
}

impl RawValues {
    pub(super) fn set(&mut self, i: usize, value: Scalar) {
        if let Some(slot) = self.values.get_mut(i) {
            *slot = Some(value);
        }
    }
}

fn float(s: Scalar) -> Option<f32> {
    match s {
        Scalar::F32(v) => Some(v),
        Scalar::F64(v) => Some(v as f32),
        _ => None,
    }
}

/// Builds the configuration; `vocab_rows` is the embedding's row count, used when the file has
/// no `vocab_size`.
pub(super) fn build(
    arch: Arch,
    raw: &RawValues,
    vocab_rows: Option<u64>,
) -> Result<Config, ModelError> {
    let missing = |suffix| ModelError::MissingKey { arch, suffix };
    let bad = |suffix, found: u64, why| ModelError::BadValue {
        arch,
        suffix,
        found,
        why,
    };
    // A count: present, a non-negative integer, at least 1 and at most 2^24 (no real model has
    // a dimension near it, and it keeps every product of two of them far below usize on 64-bit).
    let count = |suffix: &'static str, default: Option<u64>| -> Result<usize, ModelError> {
        let v = match raw.get(suffix) {
            Some(s) => s.as_u64().ok_or(missing(suffix))?,
            None => default.ok_or(missing(suffix))?,
        };
        if v == 0 || v > 1 << 24 {
            return Err(bad(suffix, v, "must be between 1 and 2^24"));
        }
        usize::try_from(v).map_err(|_| bad(suffix, v, "does not fit usize"))
    };
    let n_layers = count("block_count", None)?;
    let d_model = count("embedding_length", None)?;
    let d_ff = count("feed_forward_length", None)?;
    let n_heads = count("attention.head_count", None)?;
    let n_kv_heads = count("attention.head_count_kv", Some(n_heads as u64))?;
    if n_heads % n_kv_heads != 0 {
        return Err(bad(
            "attention.head_count_kv",
            n_kv_heads as u64,
            "must divide attention.head_count",
        ));
    }
    if d_model % n_heads != 0 && raw.get("attention.key_length").is_none() {
        return Err(bad(
            "attention.head_count",
            n_heads as u64,
            "must divide embedding_length",
        ));
    }
    let head_dim = count("attention.key_length", Some((d_model / n_heads) as u64))?;
    let rope_dims = count("rope.dimension_count", Some(head_dim as u64))?;
    if rope_dims > head_dim || rope_dims % 2 != 0 {
        return Err(bad(
            "rope.dimension_count",
            rope_dims as u64,
            "must be even and at most the head width",
        ));
    }
    let rope_freq_base = match raw.get("rope.freq_base") {
        Some(s) => float(s).ok_or(missing("rope.freq_base"))?,
        None => 10000.0,
    };
    if !(rope_freq_base.is_finite() && rope_freq_base > 0.0) {
        return Err(bad(
            "rope.freq_base",
            u64::from(rope_freq_base.to_bits()),
            "must be a positive finite float (bits shown)",
        ));
    }
    let rms_eps = raw
        .get("attention.layer_norm_rms_epsilon")
        .and_then(float)
        .ok_or(missing("attention.layer_norm_rms_epsilon"))?;
    if !(rms_eps.is_finite() && rms_eps >= 0.0) {
        return Err(bad(
            "attention.layer_norm_rms_epsilon",
            u64::from(rms_eps.to_bits()),
            "must be a non-negative finite float (bits shown)",
        ));
    }
    if let Some(factor) = raw.get("rope.scaling.factor").and_then(float) {
        if factor != 0.0 && factor != 1.0 {
            return Err(bad(
                "rope.scaling.factor",
                u64::from(factor.to_bits()),
                "rope scaling is not supported (bits shown)",
            ));
        }
    }
    let context_length = count("context_length", None)?;
    let vocab = count("vocab_size", vocab_rows)?;
    Ok(Config {
        arch,
        n_layers,
        d_model,
        d_ff,
        n_heads,
        n_kv_heads,
        head_dim,
        rope_dims,
        rope_freq_base,
        rms_eps,
        context_length,
        vocab,
    })
}
