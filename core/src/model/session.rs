//! The working memory of a forward pass ([`Layout`]) and the pass itself ([`Session`]).

use super::ops;
use super::{Activation, Config, MatMul, Model, ModelError, RopeStyle, Weight};
use crate::quant::bytes_for;
use crate::quant::dequantize_at;
use crate::quant::matvec::matmul_scratch_bytes;

/// The sizes of a session's buffers for a context of `max_context` positions and batches of up to
/// `max_batch` tokens: `floats` f32 (KV cache and activations) and `scratch_bytes` bytes (the
/// quantized activations of one batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Layout {
    /// Positions the KV cache holds.
    pub max_context: usize,
    /// Tokens one matmul takes at most.
    pub max_batch: usize,
    /// f32 elements of the float buffer.
    pub floats: usize,
    /// Bytes of the scratch buffer.
    pub scratch_bytes: usize,
    /// f32 elements of the KV cache within `floats` (keys and values of every layer).
    pub kv_cache_floats: usize,
}

impl Layout {
    /// The buffers `model` needs for `max_context` positions and batches of `max_batch` tokens
    /// (both at least 1). A context beyond the model's trained `context_length` is allowed (the
    /// caller decides); sizes that overflow `usize` are [`ModelError::TooLarge`].
    pub fn new<const L: usize>(
        model: &Model<'_, L>,
        max_context: usize,
        max_batch: usize,
    ) -> Result<Self, ModelError> {
        let c = model.config();
        let max_context = max_context.max(1);
        let max_batch = max_batch.max(1);
        let kv_cache_floats = mul(&[2, c.n_layers, max_context, c.kv_dim()])?;
        let per_token = sum(&[
            mul(&[2, c.d_model])?, // x, xb
            mul(&[2, c.q_dim()])?, // q, att
            mul(&[2, c.d_ff])?,    // gate, up
        ])?;
        let floats = sum(&[
            kv_cache_floats,
            mul(&[max_batch, per_token])?,
            max_context, // attention scores of one head
            c.rope_dims, // cos/sin of one position
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
    scores: &'b mut [f32],
    rope: &'b mut [f32],
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
        let expected = Layout::new(model, layout.max_context, layout.max_batch)?;
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
        Ok(Self {
            model,
            layout: expected,
            position: 0,
            k_cache: take(&mut rest, cache)?,
            v_cache: take(&mut rest, cache)?,
            x: take(&mut rest, mul(&[b, c.d_model])?)?,
            xb: take(&mut rest, mul(&[b, c.d_model])?)?,
            q: take(&mut rest, mul(&[b, c.q_dim()])?)?,
            att: take(&mut rest, mul(&[b, c.q_dim()])?)?,
            gate: take(&mut rest, mul(&[b, c.d_ff])?)?,
            up: take(&mut rest, mul(&[b, c.d_ff])?)?,
            scores: take(&mut rest, expected.max_context)?,
            rope: take(&mut rest, c.rope_dims)?,
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
        let group = (c.n_heads / c.n_kv_heads.max(1)).max(1);
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
            let cache_at = mul(&[l, layer_cache])?.saturating_add(pos * kvd);
            let new_k = self
                .k_cache
                .get_mut(cache_at..cache_at.saturating_add(n * kvd))
                .ok_or(ModelError::TooLarge)?;
            let new_v = self
                .v_cache
                .get_mut(cache_at..cache_at.saturating_add(n * kvd))
                .ok_or(ModelError::TooLarge)?;
            let q = prefix_mut(self.q, n * qd)?;
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
                .get(mul(&[l, layer_cache])?..)
                .ok_or(ModelError::TooLarge)?;
            let values = self
                .v_cache
                .get(mul(&[l, layer_cache])?..)
                .ok_or(ModelError::TooLarge)?;
            for (j, (q, out)) in q
                .chunks_exact(qd)
                .zip(self.att.chunks_exact_mut(qd))
                .enumerate()
            {
                // Positions first..=pos + j: all of them, or a local layer's window.
                let first = c.first_seen(l, pos + j);
                let scores = prefix_mut(self.scores, pos + j + 1 - first)?;
                for (h, (qh, oh)) in q.chunks_exact(hd).zip(out.chunks_exact_mut(hd)).enumerate() {
                    let kv_off = (h / group) * hd;
                    for (s, k) in scores.iter_mut().zip(keys.chunks_exact(kvd).skip(first)) {
                        let kh = k.get(kv_off..kv_off + hd).ok_or(ModelError::TooLarge)?;
                        *s = ops::dot(qh, kh) * c.score_scale;
                    }
                    ops::softmax(scores);
                    oh.fill(0.0);
                    for (&p, v) in scores.iter().zip(values.chunks_exact(kvd).skip(first)) {
                        let vh = v.get(kv_off..kv_off + hd).ok_or(ModelError::TooLarge)?;
                        for (o, &vv) in oh.iter_mut().zip(vh) {
                            *o += p * vv;
                        }
                    }
                }
            }
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
            match c.activation {
                Activation::Silu => ops::swiglu(gate, up),
                Activation::GeluTanh => ops::geglu(gate, up),
            }
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
