//! The working memory of a forward pass ([`Layout`]) and the pass itself ([`Session`]).

use super::attention::{rows_times, Wide, MAX_ROWS};
use super::ops;
use super::{Activation, Config, MatMul, Model, ModelError, RopeStyle, Weight};
use crate::quant::bytes_for;
use crate::quant::dequantize_at;
use crate::quant::matvec::matmul_scratch_bytes;

/// The sizes of a session's buffers for a context of `max_context` positions, batches of up to
/// `max_batch` tokens and attention on up to `threads` threads: `floats` f32 (KV cache,
/// activations, each thread's attention scores, and for a GeGLU model the table of GELU's values
/// on f16 inputs) and `scratch_bytes` bytes (the quantized activations of one batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Layout {
    /// Positions the KV cache holds.
    pub max_context: usize,
    /// Tokens one matmul takes at most.
    pub max_batch: usize,
    /// Threads the attention may run on at once (each has its own scores).
    pub threads: usize,
    /// f32 elements of the float buffer.
    pub floats: usize,
    /// Bytes of the scratch buffer.
    pub scratch_bytes: usize,
    /// f32 elements of the KV cache within `floats` (keys and values of every layer).
    pub kv_cache_floats: usize,
}

impl Layout {
    /// The buffers `model` needs for `max_context` positions and batches of `max_batch` tokens
    /// (both at least 1), attention on one thread. A context beyond the model's trained
    /// `context_length` is allowed (the caller decides); sizes that overflow `usize` are
    /// [`ModelError::TooLarge`].
    pub fn new<const L: usize>(
        model: &Model<'_, L>,
        max_context: usize,
        max_batch: usize,
    ) -> Result<Self, ModelError> {
        Self::with_threads(model, max_context, max_batch, 1)
    }

    /// [`Layout::new`] with room for the attention of a batch to run on up to `threads` threads
    /// (at least 1) through [`MatMul::for_each_chunk`].
    pub fn with_threads<const L: usize>(
        model: &Model<'_, L>,
        max_context: usize,
        max_batch: usize,
        threads: usize,
    ) -> Result<Self, ModelError> {
        let c = model.config();
        let max_context = max_context.max(1);
        let max_batch = max_batch.max(1);
        let threads = threads.max(1);
        let kv_cache_floats = mul(&[2, c.n_layers, max_context, c.kv_dim()])?;
        let per_token = sum(&[
            mul(&[2, c.d_model])?, // x, xb
            mul(&[2, c.q_dim()])?, // q, att
            mul(&[2, c.d_ff])?,    // gate, up
        ])?;
        let floats = sum(&[
            kv_cache_floats,
            mul(&[max_batch, per_token])?,
            mul(&[threads, lane_len(c, max_context)?])?, // attention scores
            c.rope_dims,                                 // cos/sin of one position
            gelu_table_len(c),
        ])?;
        // The head multiplies the last position only.
        let head = model.output();
        let mut scratch_bytes = matmul_scratch_bytes(head.ggml_type, head.cols, 1)?;
        for w in model.block_matrices() {
            scratch_bytes =
                scratch_bytes.max(matmul_scratch_bytes(w.ggml_type, w.cols, max_batch)?);
        }
        Ok(Self {
            max_context,
            max_batch,
            threads,
            floats,
            scratch_bytes,
            kv_cache_floats,
        })
    }

    /// Total bytes of both buffers.
    pub fn bytes(&self) -> usize {
        self.floats
            .saturating_mul(4)
            .saturating_add(self.scratch_bytes)
    }
}

/// The scores one attention thread keeps: one row of `max_context` per query head taken together
/// (those of one KV head, up to [`MAX_ROWS`]).
fn lane_len(c: &Config, max_context: usize) -> Result<usize, ModelError> {
    mul(&[attention_rows(c), max_context])
}

/// The floats of GeGLU's table ([`ops::fill_gelu_table`]) for a model with that activation.
fn gelu_table_len(c: &Config) -> usize {
    match c.activation {
        Activation::GeluTanh => ops::GELU_TABLE_LEN,
        Activation::Silu => 0,
    }
}

/// Query heads whose scores are computed together: those sharing a KV head, up to [`MAX_ROWS`].
fn attention_rows(c: &Config) -> usize {
    (c.n_heads / c.n_kv_heads.max(1)).clamp(1, MAX_ROWS)
}

fn mul(factors: &[usize]) -> Result<usize, ModelError> {
    factors
        .iter()
        .try_fold(1usize, |a, &b| a.checked_mul(b))
        .ok_or(ModelError::TooLarge)
}

fn sum(terms: &[usize]) -> Result<usize, ModelError> {
    terms
        .iter()
        .try_fold(0usize, |a, &b| a.checked_add(b))
        .ok_or(ModelError::TooLarge)
}

/// Takes the first `len` elements off `buf`.
fn take<'b, T>(buf: &mut &'b mut [T], len: usize) -> Result<&'b mut [T], ModelError> {
    let whole = core::mem::take(buf);
    let (head, tail) = whole
        .split_at_mut_checked(len)
        .ok_or(ModelError::TooLarge)?;
    *buf = tail;
    Ok(head)
}

/// The first `len` elements of `buf`.
fn prefix<T>(buf: &[T], len: usize) -> Result<&[T], ModelError> {
    buf.get(..len).ok_or(ModelError::TooLarge)
}

/// The first `len` elements of `buf`, mutable.
fn prefix_mut<T>(buf: &mut [T], len: usize) -> Result<&mut [T], ModelError> {
    buf.get_mut(..len).ok_or(ModelError::TooLarge)
}

/// A model's state for one sequence: the KV cache of the positions seen so far and the buffers of
/// the next batch, all in caller memory.
#[derive(Debug)]
pub struct Session<'m, 'a, 'b, const L: usize = 128> {
    model: &'m Model<'a, L>,
    layout: Layout,
    position: usize,
    k_cache: &'b mut [f32],
    v_cache: &'b mut [f32],
    x: &'b mut [f32],
    xb: &'b mut [f32],
    q: &'b mut [f32],
    att: &'b mut [f32],
    gate: &'b mut [f32],
    up: &'b mut [f32],
    lanes: &'b mut [f32],
    rope: &'b mut [f32],
    gelu_table: &'b [f32],
    scratch: &'b mut [u8],
}

impl<'m, 'a, 'b, const L: usize> Session<'m, 'a, 'b, L> {
    /// A session at position 0 over `floats` and `scratch`, which must hold at least
    /// `layout.floats` and `layout.scratch_bytes` (a `layout` from [`Layout::new`] for `model`).
    pub fn new(
        model: &'m Model<'a, L>,
        layout: Layout,
        floats: &'b mut [f32],
        scratch: &'b mut [u8],
    ) -> Result<Self, ModelError> {
        let expected =
            Layout::with_threads(model, layout.max_context, layout.max_batch, layout.threads)?;
        let too_small = |buffer, needed: usize, found: usize| ModelError::BufferTooSmall {
            buffer,
            needed,
            found,
        };
        if floats.len() < expected.floats {
            return Err(too_small("floats", expected.floats, floats.len()));
        }
        if scratch.len() < expected.scratch_bytes {
            return Err(too_small("scratch", expected.scratch_bytes, scratch.len()));
        }
        let c = model.config();
        let (b, cache) = (expected.max_batch, expected.kv_cache_floats / 2);
        let mut rest = floats;
        let k_cache = take(&mut rest, cache)?;
        let v_cache = take(&mut rest, cache)?;
        let x = take(&mut rest, mul(&[b, c.d_model])?)?;
        let xb = take(&mut rest, mul(&[b, c.d_model])?)?;
        let q = take(&mut rest, mul(&[b, c.q_dim()])?)?;
        let att = take(&mut rest, mul(&[b, c.q_dim()])?)?;
        let gate = take(&mut rest, mul(&[b, c.d_ff])?)?;
        let up = take(&mut rest, mul(&[b, c.d_ff])?)?;
        let lanes = take(
            &mut rest,
            mul(&[expected.threads, lane_len(c, expected.max_context)?])?,
        )?;
        let rope = take(&mut rest, c.rope_dims)?;
        let gelu_table = take(&mut rest, gelu_table_len(c))?;
        ops::fill_gelu_table(gelu_table);
        Ok(Self {
            model,
            layout: expected,
            position: 0,
            k_cache,
            v_cache,
            x,
            xb,
            q,
            att,
            gate,
            up,
            lanes,
            rope,
            gelu_table,
            scratch,
        })
    }

    /// Positions in the KV cache: the tokens run so far.
    pub fn position(&self) -> usize {
        self.position
    }

    /// The layout the session was built with.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// Forgets every position (a new sequence).
    pub fn reset(&mut self) {
        self.position = 0;
    }

    /// Runs `tokens` at the next positions, in batches of up to `max_batch`, and writes the logits
    /// of the last one into `logits` (at least `vocab` elements). Nothing is run if the tokens do
    /// not fit the context or one is out of range.
    pub fn forward(
        &mut self,
        mm: &impl MatMul,
        tokens: &[u32],
        logits: &mut [f32],
    ) -> Result<(), ModelError> {
        let c = *self.model.config();
        let end = self.position.checked_add(tokens.len());
        if end.is_none_or(|e| e > self.layout.max_context) {
            return Err(ModelError::ContextFull {
                position: self.position,
                tokens: tokens.len(),
                max_context: self.layout.max_context,
            });
        }
        if let Some(&token) = tokens.iter().find(|&&t| t as usize >= c.vocab) {
            return Err(ModelError::TokenOutOfRange {
                token,
                vocab: c.vocab,
            });
        }
        if logits.len() < c.vocab {
            return Err(ModelError::BufferTooSmall {
                buffer: "logits",
                needed: c.vocab,
                found: logits.len(),
            });
        }
        // At least 1 by construction (`Layout::new`); `max` shows it to the optimizer, so that
        // no division-by-zero panic is linked (firmware checks that none is).
        let max_batch = self.layout.max_batch.max(1);
        for batch in tokens.chunks(max_batch) {
            self.batch(mm, batch)?;
            self.position += batch.len();
        }
        if !tokens.is_empty() {
            self.head(mm, tokens.len().saturating_sub(1) % max_batch, logits)?;
        }
        Ok(())
    }

    /// Runs one batch at positions `self.position..`, leaving the final residuals in `x`.
    fn batch(&mut self, mm: &impl MatMul, tokens: &[u32]) -> Result<(), ModelError> {
        let model = self.model;
        let c = *model.config();
        let n = tokens.len();
        // Each at least 1 (`Config`): `max` shows it to the optimizer (no panic path in chunking).
        let (d, qd, kvd, ff, hd) = (c.d_model, c.q_dim(), c.kv_dim(), c.d_ff, c.head_dim);
        let (d, qd, kvd, hd) = (d.max(1), qd.max(1), kvd.max(1), hd.max(1));
        let level = mm.level();
        let wide = Wide::of(level);
        let embd = model.embedding();
        let row_bytes = bytes_for(embd.ggml_type, d)?;
        for (&token, x) in tokens.iter().zip(self.x.chunks_exact_mut(d)) {
            let start = mul(&[token as usize, row_bytes])?;
            let row = embd
                .data
                .get(start..start.saturating_add(row_bytes))
                .ok_or(ModelError::TooLarge)?;
            dequantize_at(level, embd.ggml_type, row, x)?;
            if c.embedding_scale != 1.0 {
                ops::scale(x, c.embedding_scale);
            }
        }
        let layer_cache = mul(&[self.layout.max_context, kvd])?;
        let (pos, rope_freqs) = (self.position, model.rope_freqs);
        for (l, layer) in model.layers().iter().enumerate() {
            let (freq_base, freq_scale) = c.rope_of(l);
            let theta_scale = ops::rope_theta_scale(freq_base, c.rope_dims);
            // Attention.
            for (x, xb) in self
                .x
                .chunks_exact(d)
                .zip(self.xb.chunks_exact_mut(d))
                .take(n)
            {
                ops::rms_norm(x, layer.attn_norm, c.rms_eps, xb);
            }
            let xb = prefix(self.xb, n * d)?;
            let ctx = self.layout.max_context;
            let layer_at = mul(&[l, layer_cache])?;
            let cache_at = layer_at.saturating_add(pos * kvd);
            let new_v = self
                .v_cache
                .get_mut(cache_at..cache_at.saturating_add(n * kvd))
                .ok_or(ModelError::TooLarge)?;
            // The new keys wait in `att` (n × kv_dim <= n × q_dim) for their rope, then go to the
            // transposed cache.
            let q = prefix_mut(self.q, n * qd)?;
            let new_k = prefix_mut(self.att, n * kvd)?;
            product(mm, layer.q, n, xb, self.scratch, q)?;
            product(mm, layer.k, n, xb, self.scratch, new_k)?;
            product(mm, layer.v, n, xb, self.scratch, new_v)?;
            for (j, (q, k)) in q
                .chunks_exact_mut(qd)
                .zip(new_k.chunks_exact_mut(kvd))
                .enumerate()
            {
                if let Some((q_norm, k_norm)) = layer.qk_norm {
                    for head in q.chunks_exact_mut(hd) {
                        ops::rms_norm_in_place(head, q_norm, c.rms_eps);
                    }
                    for head in k.chunks_exact_mut(hd) {
                        ops::rms_norm_in_place(head, k_norm, c.rms_eps);
                    }
                }
                ops::rope_cache(pos + j, theta_scale, freq_scale, rope_freqs, self.rope);
                for head in q.chunks_exact_mut(hd).chain(k.chunks_exact_mut(hd)) {
                    match c.rope_style {
                        RopeStyle::Normal => ops::rope_normal(head, self.rope),
                        RopeStyle::Neox => ops::rope_neox(head, self.rope),
                    }
                }
                if c.query_scale != 1.0 {
                    ops::scale(q, c.query_scale);
                }
            }
            let keys = self
                .k_cache
                .get_mut(layer_at..layer_at.saturating_add(layer_cache))
                .ok_or(ModelError::TooLarge)?;
            // Key dimension `e` of position `p` at `e × max_context + p`.
            for (j, k) in new_k.chunks_exact(kvd).enumerate() {
                for (row, &value) in keys.chunks_exact_mut(ctx.max(1)).zip(k) {
                    *row.get_mut(pos + j).ok_or(ModelError::TooLarge)? = value;
                }
            }
            let keys: &[f32] = keys;
            let values = self
                .v_cache
                .get(layer_at..layer_at.saturating_add(layer_cache))
                .ok_or(ModelError::TooLarge)?;
            let q: &[f32] = q;
            let attend = |j: usize, out: &mut [f32], lane: &mut [f32]| -> crate::Result<()> {
                let q = q.get(j * qd..(j + 1) * qd).unwrap_or(&[]);
                attend(&c, wide, l, pos + j, q, keys, values, ctx, out, lane)
            };
            // Multiply-adds: scores and weighted values of every head over every seen position.
            let seen: usize = (0..n).map(|j| pos + j + 1 - c.first_seen(l, pos + j)).sum();
            let cost = seen.saturating_mul(c.n_heads.saturating_mul(2 * hd));
            let lane = lane_len(&c, ctx)?;
            let att = prefix_mut(self.att, n * qd)?;
            mm.for_each_chunk(att, qd, self.lanes, lane, cost, &attend)?;
            let xb = prefix_mut(self.xb, n * d)?;
            product(mm, layer.o, n, prefix(self.att, n * qd)?, self.scratch, xb)?;
            if let Some((attn_post, _)) = layer.post_norms {
                for out in xb.chunks_exact_mut(d) {
                    ops::rms_norm_in_place(out, attn_post, c.rms_eps);
                }
            }
            ops::add(prefix_mut(self.x, n * d)?, xb);
            // Feed-forward.
            for (x, xb) in self
                .x
                .chunks_exact(d)
                .zip(self.xb.chunks_exact_mut(d))
                .take(n)
            {
                ops::rms_norm(x, layer.ffn_norm, c.rms_eps, xb);
            }
            let xb = prefix(self.xb, n * d)?;
            let gate = prefix_mut(self.gate, n * ff)?;
            let up = prefix_mut(self.up, n * ff)?;
            product(mm, layer.gate, n, xb, self.scratch, gate)?;
            product(mm, layer.up, n, xb, self.scratch, up)?;
            let up: &[f32] = up;
            let gelu_table: &[f32] = self.gelu_table;
            let activation = |j: usize, g: &mut [f32], _: &mut [f32]| -> crate::Result<()> {
                let u = up.get(j * ff..(j + 1) * ff).unwrap_or(&[]);
                match c.activation {
                    Activation::Silu => ops::swiglu(g, u, wide),
                    Activation::GeluTanh => wide.geglu(g, u, gelu_table),
                }
                Ok(())
            };
            // An exp (or a GELU read from its table) per element.
            let cost = (n * ff).saturating_mul(ACTIVATION_COST);
            mm.for_each_chunk(gate, ff.max(1), &mut [], 0, cost, &activation)?;
            let xb = prefix_mut(self.xb, n * d)?;
            product(mm, layer.down, n, gate, self.scratch, xb)?;
            if let Some((_, ffn_post)) = layer.post_norms {
                for out in xb.chunks_exact_mut(d) {
                    ops::rms_norm_in_place(out, ffn_post, c.rms_eps);
                }
            }
            ops::add(prefix_mut(self.x, n * d)?, xb);
        }
        Ok(())
    }

    /// The logits of batch column `j` of the last batch.
    fn head(&mut self, mm: &impl MatMul, j: usize, logits: &mut [f32]) -> Result<(), ModelError> {
        let model = self.model;
        let c = model.config();
        let d = c.d_model.max(1);
        let x = self.x.chunks_exact(d).nth(j).ok_or(ModelError::TooLarge)?;
        let xb = prefix_mut(self.xb, d)?;
        ops::rms_norm(x, model.output_norm, c.rms_eps, xb);
        let logits = prefix_mut(logits, c.vocab)?;
        product(mm, model.output(), 1, xb, self.scratch, logits)?;
        if let Some(cap) = c.final_logit_softcap {
            ops::softcap(logits, cap);
        }
        Ok(())
    }
}

/// Multiply-adds one element of the feed-forward activation is counted as (an `exp` or `tanh`).
const ACTIVATION_COST: usize = 32;

/// The attention of the query `q` (all heads) at `position` of layer `layer` over the positions it
/// sees, into `out` (`q_dim`), with `lane` for the scores. `keys` and `values` are the layer's
/// caches: keys transposed (`kv_dim` rows of `max_context`), values one `kv_dim` row per
/// position. Every score is the serial dot of the query head and the key head times
/// `score_scale`, and every output the serial sum of the weighted values ([`rows_times`]).
#[allow(clippy::too_many_arguments)]
fn attend(
    c: &Config,
    wide: Wide,
    layer: usize,
    position: usize,
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    max_context: usize,
    out: &mut [f32],
    lane: &mut [f32],
) -> crate::Result<()> {
    let (hd, kvd) = (c.head_dim.max(1), c.kv_dim());
    let group = (c.n_heads / c.n_kv_heads.max(1)).max(1);
    let first = c.first_seen(layer, position);
    let len = (position + 1).saturating_sub(first);
    let short = |expected: usize, found: usize| crate::Error::LengthMismatch {
        expected: expected as u64,
        found: found as u64,
    };
    if q.len() < c.q_dim() || out.len() < c.q_dim() {
        return Err(short(c.q_dim(), q.len().min(out.len())));
    }
    let mut h0 = 0;
    while h0 < c.n_heads {
        // Heads h0..end share KV head g.
        let g = h0 / group;
        let end = ((g + 1) * group).min(c.n_heads).min(h0 + MAX_ROWS);
        let rows = end - h0;
        if g >= c.n_kv_heads {
            return Err(short(c.n_kv_heads, g + 1));
        }
        let qs = q.get(h0 * hd..end * hd).unwrap_or(&[]);
        let kt = keys.get(g * hd * max_context + first..).unwrap_or(&[]);
        let lane_floats = lane.len();
        let scores = lane
            .get_mut(..rows * len)
            .ok_or(short(rows * len, lane_floats))?;
        if !rows_times(wide, rows, hd, len, qs, hd, kt, max_context, scores, len) {
            return Err(short(hd * max_context, kt.len()));
        }
        ops::scale(scores, c.score_scale);
        ops::softmax_rows::<MAX_ROWS>(scores, len, wide);
        let vs = values.get(first * kvd + g * hd..).unwrap_or(&[]);
        let o = out.get_mut(h0 * hd..end * hd).unwrap_or(&mut []);
        if !rows_times(wide, rows, len, hd, scores, len, vs, kvd, o, hd) {
            return Err(short(len * kvd, vs.len()));
        }
        h0 = end;
    }
    Ok(())
}

/// `y = W x` for `n` columns through `mm`.
fn product(
    mm: &impl MatMul,
    w: Weight<'_>,
    n: usize,
    x: &[f32],
    scratch: &mut [u8],
    y: &mut [f32],
) -> Result<(), ModelError> {
    mm.matmul(w.ggml_type, w.data, w.rows, w.cols, n, x, scratch, y)?;
    Ok(())
}

/// The configuration a session's buffers are sized for.
impl<const L: usize> Session<'_, '_, '_, L> {
    /// The model's configuration.
    pub fn config(&self) -> &Config {
        self.model.config()
    }
}
