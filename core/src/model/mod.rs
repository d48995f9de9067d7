//! A llama-family forward pass over a GGUF file held in memory or flash: token ids in, next-token
//! logits out, with no heap. Architectures (`llama`, `gemma3`) are configurations of the one pass
//! ([`Config`]): which norms, activation, rope mode and attention window a layer has.
//!
//! [`Model::from_gguf`] reads the configuration from the header's `{arch}.*` keys and finds every
//! weight by name, borrowing its bytes from the file. [`Layout::new`] computes the working memory a
//! context and batch size need (KV cache, activations, scratch for quantized activations);
//! [`Session::new`] takes those buffers from the caller and [`Session::forward`] runs tokens
//! through the model. Matrix products go through a [`MatMul`], so a caller with threads can split
//! the rows ([`SingleThread`] is the core's own).
//!
//! Every float step has one order (see `ops`), and every output row of a product is one
//! `vec_dot`, so the logits have the same bits at every kernel level, for any split of the rows
//! and for a prompt given in one batch or one token at a time.

mod attention;
mod config;
mod error;
mod ops;
mod session;

#[cfg(test)]
mod tests;

pub use config::{Activation, Arch, Config, RopeStyle};
pub use error::{ArchName, ModelError, Role, TensorName};
pub use session::{Layout, Session};

use crate::gguf::{Event, Limits, SliceParser};
use crate::quant::matvec::{matmul, matvec_at};
use crate::quant::{bytes_for, vec_dot_type, Level};
use crate::GgmlType;

/// Matrix products for the forward pass: `y = W x` for `n` activation columns (`x` is `n × cols`,
/// `y` is `n × rows`, columns one after another), `w` row-major `rows × cols` of type `t`, with
/// `scratch` of at least
/// [`matmul_scratch_bytes`](crate::quant::matvec::matmul_scratch_bytes)`(t, cols, n)` bytes.
///
/// Every output must be the single `vec_dot` of its row and its column's quantized activations,
/// as [`matmul`] and [`crate::quant::matvec::matvec`] compute it, so an implementation may split
/// rows or columns across threads without changing a bit.
pub trait MatMul {
    /// The kernel level, also used to dequantize embedding rows.
    fn level(&self) -> Level;

    /// `y = W x` for `n` columns.
    #[allow(clippy::too_many_arguments)]
    fn matmul(
        &self,
        t: GgmlType,
        w: &[u8],
        rows: usize,
        cols: usize,
        n: usize,
        x: &[f32],
        scratch: &mut [u8],
        y: &mut [f32],
    ) -> crate::Result<()>;

    /// Lanes (threads) [`Self::for_each_chunk`] may use at once; a session gives it at most
    /// [`Layout::threads`] lanes. The default is 1.
    fn threads(&self) -> usize {
        1
    }

    /// Runs `work(i, chunk, lane)` for every chunk `i` of `out` cut into `chunk` elements (the last
    /// may be shorter), where `lane` is one of the `lane_len`-element lanes of `lanes`, used by one
    /// call of `work` at a time. `cost` is the work's size in multiply-adds, for an implementation
    /// to decide whether other threads are worth waking. Each call of `work` must depend only on
    /// its arguments, so that any split across threads gives the same bits. The first error is
    /// returned. The default runs every chunk in order on the caller with the first lane.
    fn for_each_chunk(
        &self,
        out: &mut [f32],
        chunk: usize,
        lanes: &mut [f32],
        lane_len: usize,
        cost: usize,
        work: &ChunkWork<'_>,
    ) -> crate::Result<()> {
        let _ = cost;
        serial_chunks(out, chunk, lanes, lane_len, work)
    }
}

/// The work of [`MatMul::for_each_chunk`]: `(chunk index, chunk, lane)`.
pub type ChunkWork<'a> = dyn Fn(usize, &mut [f32], &mut [f32]) -> crate::Result<()> + Sync + 'a;

/// [`MatMul::for_each_chunk`] on the caller alone, with the first lane.
pub fn serial_chunks(
    out: &mut [f32],
    chunk: usize,
    lanes: &mut [f32],
    lane_len: usize,
    work: &ChunkWork<'_>,
) -> crate::Result<()> {
    let found = lanes.len() as u64;
    let lane = lanes
        .get_mut(..lane_len)
        .ok_or(crate::Error::LengthMismatch {
            expected: lane_len as u64,
            found,
        })?;
    for (i, c) in out.chunks_mut(chunk.max(1)).enumerate() {
        work(i, c, lane)?;
    }
    Ok(())
}

/// The core's [`MatMul`]: one thread, [`matvec_at`] for one column and [`matmul`] for more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SingleThread {
    /// The kernel level.
    pub level: Level,
}

impl MatMul for SingleThread {
    fn level(&self) -> Level {
        self.level
    }

    fn matmul(
        &self,
        t: GgmlType,
        w: &[u8],
        rows: usize,
        cols: usize,
        n: usize,
        x: &[f32],
        scratch: &mut [u8],
        y: &mut [f32],
    ) -> crate::Result<()> {
        if n == 1 {
            matvec_at(self.level, t, w, rows, cols, x, scratch, y)
        } else {
            matmul(self.level, t, w, rows, cols, n, x, scratch, y)
        }
    }
}

/// A weight matrix borrowed from the file: `rows × cols`, row-major, of type `ggml_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Weight<'a> {
    /// Element type.
    pub ggml_type: GgmlType,
    /// The tensor's bytes.
    pub data: &'a [u8],
    /// Output rows (ggml's `ne[1]`).
    pub rows: usize,
    /// Inputs per row (ggml's `ne[0]`).
    pub cols: usize,
}

/// The tensors of one transformer block. Norm weights are little-endian f32 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layer<'a> {
    /// `attn_norm`: RMSNorm weight before attention (`d_model` f32).
    pub attn_norm: &'a [u8],
    /// `attn_q`: `q_dim × d_model`.
    pub q: Weight<'a>,
    /// `attn_k`: `kv_dim × d_model`.
    pub k: Weight<'a>,
    /// `attn_v`: `kv_dim × d_model`.
    pub v: Weight<'a>,
    /// `attn_output`: `d_model × q_dim`.
    pub o: Weight<'a>,
    /// `ffn_norm`: RMSNorm weight before the feed-forward (`d_model` f32).
    pub ffn_norm: &'a [u8],
    /// `ffn_gate`: `d_ff × d_model`.
    pub gate: Weight<'a>,
    /// `ffn_up`: `d_ff × d_model`.
    pub up: Weight<'a>,
    /// `ffn_down`: `d_model × d_ff`.
    pub down: Weight<'a>,
    /// `attn_q_norm`, `attn_k_norm`: RMSNorm weights of each query and key head (`head_dim`
    /// f32 each; Gemma).
    pub qk_norm: Option<(&'a [u8], &'a [u8])>,
    /// `post_attention_norm`, `post_ffw_norm`: RMSNorm weights of the attention and
    /// feed-forward outputs before they join the residual (`d_model` f32 each; Gemma).
    pub post_norms: Option<(&'a [u8], &'a [u8])>,
}

/// A tensor as found in the directory, before its shape is checked.
#[derive(Debug, Clone, Copy)]
struct Found {
    ggml_type: GgmlType,
    ne: [u64; 4],
    /// Offset relative to the data section.
    offset: u64,
    bytes: u64,
}

/// The per-layer tensors found so far (`None` until seen).
type LayerSlots = [Option<Found>; Role::PER_LAYER.len()];

/// A model: its configuration and weights, borrowed from the file. `MAX_LAYERS` bounds the layer
/// table kept inline (no heap); firmware running a small model can choose a small one.
#[derive(Debug, Clone)]
pub struct Model<'a, const MAX_LAYERS: usize = 128> {
    config: Config,
    embedding: Weight<'a>,
    output_norm: &'a [u8],
    output: Weight<'a>,
    rope_freqs: Option<&'a [u8]>,
    layers: heapless::Vec<Layer<'a>, MAX_LAYERS>,
}

impl<'a, const MAX_LAYERS: usize> Model<'a, MAX_LAYERS> {
    /// Reads the model in `file` (a whole GGUF file: header and data): its configuration from the
    /// metadata and its weights by name. Errors name the missing or mis-shaped key or tensor.
    pub fn from_gguf(file: &'a [u8]) -> Result<Self, ModelError> {
        let arch = config::architecture(file)?;
        let mut raw = config::RawValues::default();
        let mut globals: [Option<Found>; 4] = [None; 4];
        let mut layers: heapless::Vec<LayerSlots, MAX_LAYERS> = heapless::Vec::new();
        // Infos keep their offsets relative to the data section, whose start is known only at
        // the end of the directory.
        let mut parser = SliceParser::new(file, Limits::default());
        let mut pending_key: Option<usize> = None;
        let mut data_offset = None;
        let mut layer_count: Option<usize> = None;
        while let Some(event) = parser.next_event()? {
            match event {
                Event::Key { key, .. } => pending_key = config::wanted_key(arch, key),
                Event::Scalar(s) => {
                    if let Some(i) = pending_key.take() {
                        raw.set(i, s);
                    }
                }
                Event::String(s) => {
                    if let Some(i) = pending_key.take() {
                        raw.set_text(i, s.text, s.is_whole());
                    }
                }
                Event::ArrayStart { .. } => {
                    if let Some(i) = pending_key.take() {
                        raw.set_array(i);
                    }
                }
                Event::Tensor(info) => {
                    let n_layers = match layer_count {
                        Some(n) => n,
                        None => {
                            let n = config::build(arch, &raw, Some(1))?.n_layers;
                            if n > MAX_LAYERS {
                                return Err(ModelError::TooManyLayers {
                                    layers: n as u64,
                                    capacity: MAX_LAYERS,
                                });
                            }
                            while layers.len() < n {
                                // Cannot fail: n <= MAX_LAYERS.
                                let _ = layers.push([None; Role::PER_LAYER.len()]);
                            }
                            layer_count = Some(n);
                            n
                        }
                    };
                    let Some((layer, role)) = parse_name(info.name, n_layers) else {
                        continue;
                    };
                    let mut ne = [1u64; 4];
                    for (d, &n) in ne.iter_mut().zip(info.ne()) {
                        *d = n;
                    }
                    let found = Found {
                        ggml_type: info.ggml_type,
                        ne,
                        offset: info.offset,
                        bytes: info.bytes,
                    };
                    let slot = match layer {
                        Some(l) => layers.get_mut(l).and_then(|s| s.get_mut(role_index(role))),
                        None => globals.get_mut(global_index(role)),
                    };
                    if let Some(slot) = slot {
                        *slot = Some(found);
                    }
                }
                Event::End(d) => data_offset = Some(d.data_offset),
                _ => pending_key = None,
            }
        }
        let dir = Directory {
            file,
            data_offset: data_offset.ok_or(ModelError::NoArchitecture)?,
        };
        let [embd, out_norm, output, rope_freqs] = globals;
        let global = |role| TensorName { layer: None, role };
        let embd = embd.ok_or(ModelError::MissingTensor(global(Role::TokenEmbedding)))?;
        let config = config::build(arch, &raw, Some(embd.ne[1]))?;
        let (d, v) = (config.d_model, config.vocab);
        let embedding = dir.weight(embd, global(Role::TokenEmbedding), v, d)?;
        let output_norm = dir.norm(out_norm, global(Role::OutputNorm), d)?;
        let output = match output {
            Some(f) => dir.weight(f, global(Role::Output), v, d)?,
            None => embedding,
        };
        let rope_freqs = match rope_freqs {
            Some(f) => Some(dir.vector(f, global(Role::RopeFreqs), config.rope_dims / 2)?),
            None => None,
        };
        let mut table = heapless::Vec::new();
        let (q, kv, ff) = (config.q_dim(), config.kv_dim(), config.d_ff);
        for (l, slots) in layers.iter().enumerate() {
            let name = |role| TensorName {
                layer: Some(l as u32),
                role,
            };
            let [an, wq, wk, wv, wo, fnorm, wg, wu, wd, qn, kn, apn, fpn] = *slots;
            let (qk_norm, post_norms) = match config.arch {
                Arch::Llama => (None, None),
                Arch::Gemma3 => (
                    Some((
                        dir.norm(qn, name(Role::AttnQNorm), config.head_dim)?,
                        dir.norm(kn, name(Role::AttnKNorm), config.head_dim)?,
                    )),
                    Some((
                        dir.norm(apn, name(Role::AttnPostNorm), d)?,
                        dir.norm(fpn, name(Role::FfnPostNorm), d)?,
                    )),
                ),
            };
            let layer = Layer {
                attn_norm: dir.norm(an, name(Role::AttnNorm), d)?,
                q: dir.weight_of(wq, name(Role::AttnQ), q, d)?,
                k: dir.weight_of(wk, name(Role::AttnK), kv, d)?,
                v: dir.weight_of(wv, name(Role::AttnV), kv, d)?,
                o: dir.weight_of(wo, name(Role::AttnOutput), d, q)?,
                ffn_norm: dir.norm(fnorm, name(Role::FfnNorm), d)?,
                gate: dir.weight_of(wg, name(Role::FfnGate), ff, d)?,
                up: dir.weight_of(wu, name(Role::FfnUp), ff, d)?,
                down: dir.weight_of(wd, name(Role::FfnDown), d, ff)?,
                qk_norm,
                post_norms,
            };
            // Cannot fail: as many layers as slots.
            let _ = table.push(layer);
        }
        Ok(Self {
            config,
            embedding,
            output_norm,
            output,
            rope_freqs,
            layers: table,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The blocks, in order.
    pub fn layers(&self) -> &[Layer<'a>] {
        &self.layers
    }

    /// The token embedding (`vocab × d_model`).
    pub fn embedding(&self) -> Weight<'a> {
        self.embedding
    }

    /// The output head (`vocab × d_model`); the embedding itself when the file ties them.
    pub fn output(&self) -> Weight<'a> {
        self.output
    }

    /// Every matrix of the blocks (the output head aside), for sizing scratch.
    fn block_matrices(&self) -> impl Iterator<Item = Weight<'a>> + '_ {
        self.layers
            .iter()
            .flat_map(|l| [l.q, l.k, l.v, l.o, l.gate, l.up, l.down])
    }
}

const GLOBALS: [Role; 4] = [
    Role::TokenEmbedding,
    Role::OutputNorm,
    Role::Output,
    Role::RopeFreqs,
];

fn global_index(role: Role) -> usize {
    GLOBALS
        .iter()
        .position(|&r| r == role)
        .unwrap_or(usize::MAX)
}

fn role_index(role: Role) -> usize {
    Role::PER_LAYER
        .iter()
        .position(|&r| r == role)
        .unwrap_or(usize::MAX)
}

/// `token_embd.weight` → `(None, TokenEmbedding)`, `blk.3.attn_q.weight` → `(Some(3), AttnQ)`;
/// `None` for other tensors and for layers at or past `n_layers`.
fn parse_name(name: &str, n_layers: usize) -> Option<(Option<usize>, Role)> {
    let stem = name.strip_suffix(".weight")?;
    if let Some(rest) = stem.strip_prefix("blk.") {
        let (layer, role) = rest.split_once('.')?;
        if layer.len() > 1 && layer.starts_with('0') {
            return None;
        }
        let layer: usize = layer.parse().ok()?;
        let role = *Role::PER_LAYER.iter().find(|r| r.stem() == role)?;
        return (layer < n_layers).then_some((Some(layer), role));
    }
    let role = *GLOBALS.iter().find(|r| r.stem() == stem)?;
    Some((None, role))
}

/// Where the tensors' bytes are: the file and the start of its data section.
struct Directory<'a> {
    file: &'a [u8],
    data_offset: u64,
}

impl<'a> Directory<'a> {
    /// The tensor's bytes, checked to lie within the file.
    fn bytes(&self, f: &Found, tensor: TensorName) -> Result<&'a [u8], ModelError> {
        let file_len = self.file.len() as u64;
        let start = self.data_offset.checked_add(f.offset);
        let end = start.and_then(|s| s.checked_add(f.bytes));
        let outside = ModelError::TensorOutsideFile {
            tensor,
            end: end.unwrap_or(u64::MAX),
            file_len,
        };
        let (Some(start), Some(end)) = (start, end) else {
            return Err(outside);
        };
        let range = usize::try_from(start).ok().zip(usize::try_from(end).ok());
        range.and_then(|(s, e)| self.file.get(s..e)).ok_or(outside)
    }

    /// Checks `f`'s `ne` is `[cols, rows]` (any further dimensions 1).
    fn check_shape(
        f: &Found,
        tensor: TensorName,
        rows: usize,
        cols: usize,
    ) -> Result<(), ModelError> {
        let expected = [cols as u64, rows as u64];
        if f.ne != [expected[0], expected[1], 1, 1] {
            return Err(ModelError::TensorShape {
                tensor,
                expected,
                found: f.ne,
            });
        }
        Ok(())
    }

    /// A `rows × cols` matrix of a type with a vec_dot.
    fn weight(
        &self,
        f: Found,
        tensor: TensorName,
        rows: usize,
        cols: usize,
    ) -> Result<Weight<'a>, ModelError> {
        Self::check_shape(&f, tensor, rows, cols)?;
        let type_error = ModelError::TensorType {
            tensor,
            ggml_type: f.ggml_type,
        };
        if vec_dot_type(f.ggml_type).is_none() || bytes_for(f.ggml_type, cols).is_err() {
            return Err(type_error);
        }
        Ok(Weight {
            ggml_type: f.ggml_type,
            data: self.bytes(&f, tensor)?,
            rows,
            cols,
        })
    }

    /// [`Self::weight`] of a tensor that must be present.
    fn weight_of(
        &self,
        f: Option<Found>,
        tensor: TensorName,
        rows: usize,
        cols: usize,
    ) -> Result<Weight<'a>, ModelError> {
        self.weight(
            f.ok_or(ModelError::MissingTensor(tensor))?,
            tensor,
            rows,
            cols,
        )
    }

    /// A vector of `len` little-endian f32.
    fn vector(&self, f: Found, tensor: TensorName, len: usize) -> Result<&'a [u8], ModelError> {
        if f.ne != [len as u64, 1, 1, 1] {
            return Err(ModelError::TensorShape {
                tensor,
                expected: [len as u64, 1],
                found: f.ne,
            });
        }
        if f.ggml_type != GgmlType::F32 {
            return Err(ModelError::TensorType {
                tensor,
                ggml_type: f.ggml_type,
            });
        }
        self.bytes(&f, tensor)
    }

    /// A norm weight of `len` f32 that must be present.
    fn norm(
        &self,
        f: Option<Found>,
        tensor: TensorName,
        len: usize,
    ) -> Result<&'a [u8], ModelError> {
        self.vector(f.ok_or(ModelError::MissingTensor(tensor))?, tensor, len)
    }
}
