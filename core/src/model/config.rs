//! The hyperparameters of a llama-family model, read from a GGUF header's `{arch}.*` keys: its
//! shape, and what its architecture changes in the one forward pass (Gemma 3's scaled embeddings,
//! GeGLU, sliding-window layers, NeoX rope, ...).

use super::error::{ArchName, ModelError};
use crate::gguf::{ByteOrder, Event, Limits, Scalar, SliceParser};

/// An architecture this module runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Arch {
    /// `llama`: SmolLM2, TinyLlama, Llama 2/3 and stories-class models.
    Llama,
    /// `gemma3` (text): embeddings scaled by `sqrt(d_model)`, RMSNorm on each head's queries and
    /// keys, norms after attention and the feed-forward as well as before, GeGLU, NeoX rope, and
    /// sliding-window attention on five layers of six, with their own rope base.
    Gemma3,
}

/// The architectures [`Arch`] names, for error messages.
pub const SUPPORTED: &str = "llama, gemma3";

impl Arch {
    /// The `general.architecture` value, which is also the metadata key prefix.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Llama => "llama",
            Self::Gemma3 => "gemma3",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        match name {
            "llama" => Some(Self::Llama),
            "gemma3" => Some(Self::Gemma3),
            _ => None,
        }
    }
}

/// The feed-forward's gate activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Activation {
    /// SwiGLU: `silu(gate) * up` (llama).
    Silu,
    /// GeGLU with GELU's tanh approximation: `gelu(gate) * up` (Gemma).
    GeluTanh,
}

/// Which of a head's values rope rotates together (ggml's rope modes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum RopeStyle {
    /// Adjacent pairs `(x[2i], x[2i+1])`: `GGML_ROPE_TYPE_NORMAL` (llama).
    Normal,
    /// The two halves `(x[i], x[i + rope_dims/2])`: `GGML_ROPE_TYPE_NEOX` (Gemma).
    Neox,
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
    /// How rope pairs values (fixed by the architecture).
    pub rope_style: RopeStyle,
    /// `1 / rope.scaling.factor` (linear scaling only; 1 without it), for the global layers.
    pub rope_freq_scale: f32,
    /// `attention.sliding_window`: the positions a local layer's query sees, itself included;
    /// 0 when every layer is global.
    pub sliding_window: usize,
    /// `attention.sliding_window_pattern`: every this-many-th layer is global, the others local
    /// (Gemma 3's default: 6).
    pub sliding_window_pattern: usize,
    /// `rope.freq_base_swa`: the rope base of the local layers (default 10000).
    pub rope_freq_base_local: f32,
    /// The feed-forward's activation.
    pub activation: Activation,
    /// Factor of the embedding rows (`sqrt(d_model)` for Gemma, 1 for llama).
    pub embedding_scale: f32,
    /// Factor of the queries after rope (Gemma's `1/sqrt(query_pre_attn_scalar)`, 1 for llama).
    pub query_scale: f32,
    /// Factor of the attention scores (`1/sqrt(head_dim)` for llama, 1 for Gemma).
    pub score_scale: f32,
    /// `final_logit_softcapping`: logits become `cap * tanh(logit / cap)`; `None` without it.
    pub final_logit_softcap: Option<f32>,
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

    /// Whether layer `layer` attends to the last `sliding_window` positions only (llama.cpp's
    /// `set_swa_pattern` without `dense_first`: the last layer of each group of the pattern is
    /// global).
    pub fn is_local(&self, layer: usize) -> bool {
        self.sliding_window > 0
            && layer % self.sliding_window_pattern.max(1)
                < self.sliding_window_pattern.saturating_sub(1)
    }

    /// The rope base and frequency scale of layer `layer`.
    pub fn rope_of(&self, layer: usize) -> (f32, f32) {
        if self.is_local(layer) {
            (self.rope_freq_base_local, 1.0)
        } else {
            (self.rope_freq_base, self.rope_freq_scale)
        }
    }

    /// The first position a query at `position` attends to in layer `layer`.
    pub fn first_seen(&self, layer: usize, position: usize) -> usize {
        if self.is_local(layer) {
            (position + 1).saturating_sub(self.sliding_window)
        } else {
            0
        }
    }
}

/// Metadata suffixes read after `{arch}.`, in the order of [`RawValues`]' fields.
const KEYS: [&str; 18] = [
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
    "attention.value_length",
    "attention.sliding_window",
    "attention.sliding_window_pattern",
    "rope.freq_base_swa",
    "final_logit_softcapping",
    "rope.scaling.type",
];

/// A string value of one of [`KEYS`] (only `rope.scaling.type` is read as one), kept if short.
pub(super) type KeyText = heapless::String<16>;

/// The values of [`KEYS`] as found (by index).
#[derive(Default)]
pub(super) struct RawValues {
    values: [Option<Scalar>; KEYS.len()],
    /// Keys whose value was an array (per-layer values, which this module does not take).
    arrays: [bool; KEYS.len()],
    /// Keys whose value was a string: its text, or `None` if longer than [`KeyText`] holds.
    texts: [Option<Option<KeyText>>; KEYS.len()],
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

    pub(super) fn set_array(&mut self, i: usize) {
        if let Some(slot) = self.arrays.get_mut(i) {
            *slot = true;
        }
    }

    /// Records a string value given whole (a piece of a longer one counts as too long).
    pub(super) fn set_text(&mut self, i: usize, text: &str, whole: bool) {
        if let Some(slot) = self.texts.get_mut(i) {
            let kept = if whole {
                KeyText::try_from(text).ok()
            } else {
                None
            };
            *slot = Some(kept);
        }
    }

    fn is_array(&self, suffix: &str) -> bool {
        KEYS.iter()
            .position(|&k| k == suffix)
            .and_then(|i| self.arrays.get(i).copied())
            .unwrap_or(false)
    }

    fn text(&self, suffix: &str) -> Option<Option<&str>> {
        let i = KEYS.iter().position(|&k| k == suffix)?;
        let t = self.texts.get(i)?.as_ref()?;
        Some(t.as_deref())
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
    // Per-layer arrays (llama.cpp's get_key_or_arr) would silently become one value here.
    for suffix in [
        "feed_forward_length",
        "attention.head_count",
        "attention.head_count_kv",
        "attention.sliding_window_pattern",
    ] {
        if raw.is_array(suffix) {
            return Err(bad(suffix, 0, "per-layer arrays are not supported"));
        }
    }
    let rope_freq_scale = rope_freq_scale(raw, &bad)?;
    if let Some(v) = raw.get("attention.value_length") {
        let v = v.as_u64().ok_or(missing("attention.value_length"))?;
        if v != head_dim as u64 {
            return Err(bad(
                "attention.value_length",
                v,
                "must equal the key length (attention.key_length)",
            ));
        }
    }
    let context_length = count("context_length", None)?;
    let vocab = count("vocab_size", vocab_rows)?;
    let positive_float = |suffix: &'static str, default: f32| -> Result<f32, ModelError> {
        let v = match raw.get(suffix) {
            Some(s) => float(s).ok_or(missing(suffix))?,
            None => default,
        };
        if !(v.is_finite() && v > 0.0) {
            return Err(bad(
                suffix,
                u64::from(v.to_bits()),
                "must be a positive finite float (bits shown)",
            ));
        }
        Ok(v)
    };
    let llama = Config {
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
        rope_style: RopeStyle::Normal,
        rope_freq_scale,
        sliding_window: 0,
        sliding_window_pattern: 1,
        rope_freq_base_local: rope_freq_base,
        activation: Activation::Silu,
        embedding_scale: 1.0,
        query_scale: 1.0,
        score_scale: 1.0f32 / libm::sqrtf(head_dim as f32),
        final_logit_softcap: None,
    };
    match arch {
        Arch::Llama => Ok(llama),
        Arch::Gemma3 => {
            // llama.cpp's gemma3 loader: a window only with a positive sliding_window; every
            // sixth layer global unless the file says otherwise; local layers' rope base
            // rope.freq_base_swa (10000 by default) and unscaled.
            let sliding_window = match raw.get("attention.sliding_window") {
                Some(s) => s.as_u64().ok_or(missing("attention.sliding_window"))?,
                None => 0,
            };
            let sliding_window = usize::try_from(sliding_window.min(1 << 24)).unwrap_or(0);
            let sliding_window_pattern = match raw.get("attention.sliding_window_pattern") {
                Some(_) => count("attention.sliding_window_pattern", None)?,
                None => 6,
            };
            // Softcapping is off unless the file has a non-zero value.
            let cap = match raw.get("final_logit_softcapping") {
                Some(s) => float(s).ok_or(missing("final_logit_softcapping"))?,
                None => 0.0,
            };
            let final_logit_softcap = if cap == 0.0 {
                None
            } else {
                Some(positive_float("final_logit_softcapping", cap)?)
            };
            // Gemma's query_pre_attn_scalar is not in the file: llama.cpp takes the head width,
            // except for the 62-layer 27B model, whose scalar is d_model / n_heads.
            let scalar = if n_layers == 62 {
                d_model / n_heads
            } else {
                head_dim
            };
            Ok(Config {
                rope_style: RopeStyle::Neox,
                sliding_window,
                sliding_window_pattern,
                rope_freq_base_local: positive_float("rope.freq_base_swa", 10000.0)?,
                activation: Activation::GeluTanh,
                embedding_scale: libm::sqrtf(d_model as f32),
                query_scale: 1.0f32 / libm::sqrtf(scalar as f32),
                score_scale: 1.0,
                final_logit_softcap,
                ..llama
            })
        }
    }
}

/// `1 / rope.scaling.factor` for linear scaling (no factor, 0 or 1: no scaling); other scaling
/// types with a factor are refused.
fn rope_freq_scale(
    raw: &RawValues,
    bad: &impl Fn(&'static str, u64, &'static str) -> ModelError,
) -> Result<f32, ModelError> {
    let Some(factor) = raw.get("rope.scaling.factor").and_then(float) else {
        return Ok(1.0);
    };
    if factor == 0.0 || factor == 1.0 {
        return Ok(1.0);
    }
    let linear = match raw.text("rope.scaling.type") {
        None => true,
        Some(t) => t == Some("linear"),
    };
    if !linear {
        return Err(bad(
            "rope.scaling.type",
            u64::from(factor.to_bits()),
            "only linear rope scaling is supported (the factor's bits shown)",
        ));
    }
    if !(factor.is_finite() && factor > 0.0) {
        return Err(bad(
            "rope.scaling.factor",
            u64::from(factor.to_bits()),
            "must be a positive finite float (bits shown)",
        ));
    }
    Ok(1.0 / factor)
}
