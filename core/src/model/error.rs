//! What can go wrong loading or running a model: each variant names the key, tensor or buffer at
//! fault, so a file that is not a supported model says why without a debugger.

use super::config::{Arch, SUPPORTED};
use crate::ggml_type::GgmlType;

/// The role of a weight tensor; with a layer number it names the tensor as the file does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Role {
    /// `token_embd.weight`.
    TokenEmbedding,
    /// `output_norm.weight`.
    OutputNorm,
    /// `output.weight` (absent when the embedding is tied).
    Output,
    /// `rope_freqs.weight` (Llama 3's per-frequency factors).
    RopeFreqs,
    /// `blk.N.attn_norm.weight`.
    AttnNorm,
    /// `blk.N.attn_q.weight`.
    AttnQ,
    /// `blk.N.attn_k.weight`.
    AttnK,
    /// `blk.N.attn_v.weight`.
    AttnV,
    /// `blk.N.attn_output.weight`.
    AttnOutput,
    /// `blk.N.ffn_norm.weight`.
    FfnNorm,
    /// `blk.N.ffn_gate.weight`.
    FfnGate,
    /// `blk.N.ffn_up.weight`.
    FfnUp,
    /// `blk.N.ffn_down.weight`.
    FfnDown,
    /// `blk.N.attn_q_norm.weight`: RMSNorm weight of each query head (Gemma).
    AttnQNorm,
    /// `blk.N.attn_k_norm.weight`: RMSNorm weight of each key head (Gemma).
    AttnKNorm,
    /// `blk.N.post_attention_norm.weight`: RMSNorm of the attention output (Gemma).
    AttnPostNorm,
    /// `blk.N.post_ffw_norm.weight`: RMSNorm of the feed-forward output (Gemma).
    FfnPostNorm,
}

impl Role {
    /// The per-layer roles, in the order [`super::Layer`] keeps them.
    pub const PER_LAYER: [Role; 13] = [
        Role::AttnNorm,
        Role::AttnQ,
        Role::AttnK,
        Role::AttnV,
        Role::AttnOutput,
        Role::FfnNorm,
        Role::FfnGate,
        Role::FfnUp,
        Role::FfnDown,
        Role::AttnQNorm,
        Role::AttnKNorm,
        Role::AttnPostNorm,
        Role::FfnPostNorm,
    ];

    /// The name without the `blk.N.` prefix and `.weight` suffix.
    pub const fn stem(self) -> &'static str {
        match self {
            Self::TokenEmbedding => "token_embd",
            Self::OutputNorm => "output_norm",
            Self::Output => "output",
            Self::RopeFreqs => "rope_freqs",
            Self::AttnNorm => "attn_norm",
            Self::AttnQ => "attn_q",
            Self::AttnK => "attn_k",
            Self::AttnV => "attn_v",
            Self::AttnOutput => "attn_output",
            Self::FfnNorm => "ffn_norm",
            Self::FfnGate => "ffn_gate",
            Self::FfnUp => "ffn_up",
            Self::FfnDown => "ffn_down",
            Self::AttnQNorm => "attn_q_norm",
            Self::AttnKNorm => "attn_k_norm",
            Self::AttnPostNorm => "post_attention_norm",
            Self::FfnPostNorm => "post_ffw_norm",
        }
    }

    /// Whether the tensor belongs to a layer (`blk.N.`).
    pub const fn is_per_layer(self) -> bool {
        !matches!(
            self,
            Self::TokenEmbedding | Self::OutputNorm | Self::Output | Self::RopeFreqs
        )
    }
}

/// A tensor's name as the file spells it: `token_embd.weight`, `blk.3.attn_q.weight`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TensorName {
    /// The layer, for per-layer tensors.
    pub layer: Option<u32>,
    /// What the tensor is.
    pub role: Role,
}

impl core::fmt::Display for TensorName {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if let Some(layer) = self.layer {
            write!(f, "blk.{layer}.")?;
        }
        write!(f, "{}.weight", self.role.stem())
    }
}

/// The architecture name of a file this module does not run (the first 32 bytes of it).
pub type ArchName = heapless::String<32>;

/// Every failure of [`crate::model`].
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum ModelError {
    /// The header could not be parsed, or a kernel refused its input.
    Core(crate::Error),
    /// The file is big-endian; the kernels read little-endian blocks.
    BigEndian,
    /// `general.architecture` is missing or not a string.
    NoArchitecture,
    /// `general.architecture` names an architecture this module does not run.
    UnknownArchitecture(ArchName),
    /// A required metadata key (`{arch}.{suffix}`) is missing or not a number.
    MissingKey {
        /// The architecture prefix.
        arch: Arch,
        /// The key after `{arch}.`.
        suffix: &'static str,
    },
    /// A metadata value is out of range or inconsistent with the others.
    BadValue {
        /// The architecture prefix.
        arch: Arch,
        /// The key after `{arch}.`.
        suffix: &'static str,
        /// The value found (integers; floats by their bits as u64 are not reported).
        found: u64,
        /// What it had to be.
        why: &'static str,
    },
    /// A required tensor is missing.
    MissingTensor(TensorName),
    /// A tensor's shape is not what the metadata implies.
    TensorShape {
        /// The tensor.
        tensor: TensorName,
        /// Its expected `ne` (fastest-varying first).
        expected: [u64; 2],
        /// Its `ne` as stored (unused dimensions are 1).
        found: [u64; 4],
    },
    /// A tensor's type cannot serve its role (a norm that is not F32, a weight with no vec_dot).
    TensorType {
        /// The tensor.
        tensor: TensorName,
        /// Its type.
        ggml_type: GgmlType,
    },
    /// A tensor's data extends past the end of the file.
    TensorOutsideFile {
        /// The tensor.
        tensor: TensorName,
        /// The absolute end offset of its data.
        end: u64,
        /// The file's length.
        file_len: u64,
    },
    /// The model has more layers than the `Model`'s layer capacity.
    TooManyLayers {
        /// `block_count`.
        layers: u64,
        /// The `MAX_LAYERS` of the `Model` type.
        capacity: usize,
    },
    /// Working memory sizes overflow `usize` (a context or batch too large for this machine).
    TooLarge,
    /// A caller buffer is smaller than [`super::Layout`] says.
    BufferTooSmall {
        /// Which buffer: `"floats"`, `"scratch"` or `"logits"`.
        buffer: &'static str,
        /// Elements (floats) or bytes (scratch) needed.
        needed: usize,
        /// Elements or bytes given.
        found: usize,
    },
    /// The tokens would run past the context the session was laid out for.
    ContextFull {
        /// Positions already in the cache.
        position: usize,
        /// Tokens asked for.
        tokens: usize,
        /// The session's maximum context.
        max_context: usize,
    },
    /// A token id is not below the vocabulary size.
    TokenOutOfRange {
        /// The token.
        token: u32,
        /// The vocabulary size.
        vocab: usize,
    },
}

impl From<crate::Error> for ModelError {
    fn from(e: crate::Error) -> Self {
        Self::Core(e)
    }
}

impl core::fmt::Display for ModelError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Core(e) => write!(f, "{e}"),
            Self::BigEndian => f.write_str(
                "the file is big-endian; the model runs little-endian files (convert it first)",
            ),
            Self::NoArchitecture => f.write_str("general.architecture is missing or not a string"),
            Self::UnknownArchitecture(name) => write!(
                f,
                "architecture {name:?} is not supported (supported: {SUPPORTED})"
            ),
            Self::MissingKey { arch, suffix } => write!(
                f,
                "metadata key {}.{suffix} is missing or not a number",
                arch.name()
            ),
            Self::BadValue {
                arch,
                suffix,
                found,
                why,
            } => write!(f, "{}.{suffix} = {found}: {why}", arch.name()),
            Self::MissingTensor(t) => write!(f, "tensor {t} is missing"),
            Self::TensorShape {
                tensor,
                expected,
                found,
            } => write!(
                f,
                "tensor {tensor} has ne {found:?}, expected [{}, {}]",
                expected[0], expected[1]
            ),
            Self::TensorType { tensor, ggml_type } => {
                write!(
                    f,
                    "tensor {tensor} has type {ggml_type}, which cannot serve its role"
                )
            }
            Self::TensorOutsideFile {
                tensor,
                end,
                file_len,
            } => write!(
                f,
                "tensor {tensor} ends at byte {end}, past the end of the file ({file_len} bytes)"
            ),
            Self::TooManyLayers { layers, capacity } => write!(
                f,
                "the model has {layers} layers; this Model type holds at most {capacity}"
            ),
            Self::TooLarge => f.write_str("working memory size overflows usize"),
            Self::BufferTooSmall {
                buffer,
                needed,
                found,
            } => write!(f, "{buffer} buffer holds {found}, needs {needed}"),
            Self::ContextFull {
                position,
                tokens,
                max_context,
            } => write!(
                f,
                "{tokens} more tokens after {position} exceed the context of {max_context}"
            ),
            Self::TokenOutOfRange { token, vocab } => {
                write!(f, "token {token} is not below the vocabulary size {vocab}")
            }
        }
    }
}

impl core::error::Error for ModelError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Self::Core(e) => Some(e),
            _ => None,
        }
    }
}
