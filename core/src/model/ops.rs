//! The float operations between the matmuls, each in one fixed order so their bits depend on
//! nothing but their inputs: serial sums, no fused multiply-add (Rust never contracts `a * b + c`),
//! and `exp`, `sin`, `cos`, `pow` and `sqrt` from the portable `libm` crate rather than the
//! platform's. The steps follow ggml's CPU operators (named in each function), so the results stay
//! close to llama.cpp's.

use super::attention::Wide;
use crate::quant::cast::{f16_le, f16_to_le};

/// `out = x / sqrt(mean(x²) + eps) * weight`, as ggml's `rms_norm` then `mul`: the squares are
/// f32 products summed in f64, the mean rounded to f32.
/// `weight` is little-endian f32 bytes, as in the file.
pub(super) fn rms_norm(x: &[f32], weight: &[u8], eps: f32, out: &mut [f32]) {
    let scale = rms_scale(x, eps);
    for ((o, &v), w) in out.iter_mut().zip(x).zip(weight.chunks_exact(4)) {
        if let [a, b, c, d] = *w {
            *o = v * scale * f32::from_le_bytes([a, b, c, d]);
        }
    }
}

/// [`rms_norm`] of `x` into itself (the same bits).
pub(super) fn rms_norm_in_place(x: &mut [f32], weight: &[u8], eps: f32) {
    let scale = rms_scale(x, eps);
    for (v, w) in x.iter_mut().zip(weight.chunks_exact(4)) {
        if let [a, b, c, d] = *w {
            *v = *v * scale * f32::from_le_bytes([a, b, c, d]);
        }
    }
}

/// `1 / sqrt(mean(x²) + eps)`.
fn rms_scale(x: &[f32], eps: f32) -> f32 {
    let mut sum = 0.0f64;
    for &v in x {
        sum += f64::from(v * v);
    }
    let mean = (sum / x.len().max(1) as f64) as f32;
    1.0f32 / libm::sqrtf(mean + eps)
}

/// The cos/sin table of one position for ggml's `rope` (`ggml_rope_cache_init` without YaRN):
/// `theta` starts at the position and is multiplied by `theta_scale = freq_base^(-2/rope_dims)`
/// once per pair, each pair's angle divided by its frequency factor if the model has them, then
/// multiplied by `freq_scale` (linear scaling; 1 is exact). `cache` holds `rope_dims` values:
/// cos, sin per pair.
pub(super) fn rope_cache(
    position: usize,
    theta_scale: f32,
    freq_scale: f32,
    freq_factors: Option<&[u8]>,
    cache: &mut [f32],
) {
    let mut theta = position as f32;
    for (i, pair) in cache.chunks_exact_mut(2).enumerate() {
        let factor = freq_factors.map_or(1.0, |f| f32_at(f, i).unwrap_or(1.0));
        let angle = freq_scale * (theta / factor);
        if let [c, s] = pair {
            *c = libm::cosf(angle);
            *s = libm::sinf(angle);
        }
        theta *= theta_scale;
    }
}

/// `freq_base^(-2/rope_dims)`, as ggml computes it once per rope call.
pub(super) fn rope_theta_scale(freq_base: f32, rope_dims: usize) -> f32 {
    libm::powf(freq_base, -2.0f32 / rope_dims as f32)
}

/// Rotates the adjacent pairs `(x[2i], x[2i+1])` of one head by the cached angles: ggml's
/// `GGML_ROPE_TYPE_NORMAL`, the mode llama.cpp uses for `LLM_ARCH_LLAMA`. Values past the cache
/// (beyond `rope_dims`) are left as they are.
pub(super) fn rope_normal(head: &mut [f32], cache: &[f32]) {
    for (pair, angle) in head.chunks_exact_mut(2).zip(cache.chunks_exact(2)) {
        if let ([x0, x1], [c, s]) = (pair, angle) {
            let (a, b) = (*x0, *x1);
            *x0 = a * *c - b * *s;
            *x1 = a * *s + b * *c;
        }
    }
}

/// Rotates the pairs `(x[i], x[i + rope_dims/2])` of one head by the cached angles: ggml's
/// `GGML_ROPE_TYPE_NEOX`, the mode llama.cpp uses for Gemma. Values past `rope_dims` are left as
/// they are.
pub(super) fn rope_neox(head: &mut [f32], cache: &[f32]) {
    let half = cache.len() / 2;
    let Some((low, high)) = head
        .get_mut(..2 * half)
        .and_then(|r| r.split_at_mut_checked(half))
    else {
        return;
    };
    for ((x0, x1), angle) in low.iter_mut().zip(high).zip(cache.chunks_exact(2)) {
        if let [c, s] = angle {
            let (a, b) = (*x0, *x1);
            *x0 = a * *c - b * *s;
            *x1 = a * *s + b * *c;
        }
    }
}

/// In-place softmax of each row of `len` values in `x` (up to `R` rows; more are left as they
/// are), as ggml's `soft_max`: subtract the row's maximum, `exp`, sum in f64 value after value,
/// multiply by the f32 rounding of `1/sum`. The rows' sums are interleaved: one row's sum is a
/// chain of dependent adds (most of a softmax's time), several run side by side.
pub(super) fn softmax_rows<const R: usize>(x: &mut [f32], len: usize, wide: Wide) {
    let mut rows: [&mut [f32]; R] = core::array::from_fn(|_| -> &mut [f32] { &mut [] });
    for (slot, row) in rows.iter_mut().zip(x.chunks_exact_mut(len.max(1))) {
        *slot = row;
    }
    for row in rows.iter_mut() {
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        for v in row.iter_mut() {
            *v -= max;
        }
        wide.exp(row);
    }
    let mut sums = [0.0f64; R];
    for j in 0..len {
        for (sum, row) in sums.iter_mut().zip(rows.iter()) {
            if let Some(&v) = row.get(j) {
                *sum += f64::from(v);
            }
        }
    }
    for (row, sum) in rows.iter_mut().zip(sums) {
        let inv = (1.0 / sum) as f32;
        for v in row.iter_mut() {
            *v *= inv;
        }
    }
}

/// `gate = silu(gate) * up` (SwiGLU), with ggml's `silu(x) = x / (1 + exp(-x))`.
pub(super) fn swiglu(gate: &mut [f32], up: &[f32], wide: Wide) {
    let mut e = [0.0f32; EXP_CHUNK];
    for (g, u) in gate.chunks_mut(EXP_CHUNK).zip(up.chunks(EXP_CHUNK)) {
        let Some(e) = e.get_mut(..g.len()) else {
            return;
        };
        for (e, &x) in e.iter_mut().zip(g.iter()) {
            *e = -x;
        }
        wide.exp(e);
        for ((g, &u), &e) in g.iter_mut().zip(u).zip(e.iter()) {
            let x = *g;
            *g = x / (1.0f32 + e) * u;
        }
    }
}

/// Values [`swiglu`] exponentiates at a time (on the stack).
const EXP_CHUNK: usize = 64;

/// `x = exp(x)` for every element (compiled for the target's baseline, or inlined into the AVX2 and
/// AVX-512 wrappers of [`Wide::exp`]), each with the bits of `libm::expf` (checked for every f32 by
/// an ignored test, on a sample in CI): its steps (FreeBSD's reduction by `k·ln 2` in a high and
/// a low part, the degree-2 rational approximation, the scaling by `2^k` in at most two
/// multiplications) written without branches, lane by lane, so the compiler can vectorize them.
#[inline(always)]
pub(super) fn exp_lanes(x: &mut [f32]) {
    // Whole vectors of lanes, then the last values padded to one: a softmax row's length is
    // rarely a multiple of the vector, and a scalar tail cost more than its share
    // (docs/kernel-experiments.md).
    let (chunks, tail) = x.as_chunks_mut::<EXP_LANES>();
    for chunk in chunks {
        for v in chunk.iter_mut() {
            *v = exp_lane(*v);
        }
    }
    if !tail.is_empty() {
        let mut padded = [0.0f32; EXP_LANES];
        padded[..tail.len()].copy_from_slice(tail);
        for v in padded.iter_mut() {
            *v = exp_lane(*v);
        }
        tail.copy_from_slice(&padded[..tail.len()]);
    }
}

/// Values [`exp_lanes`] computes together: one AVX-512 vector, two AVX2 ones.
const EXP_LANES: usize = 16;

/// `libm::expf(x)` as selects.
#[inline(always)]
fn exp_lane(x: f32) -> f32 {
    // libm's constants, by their bits.
    let ln2_hi = f32::from_bits(0x3f31_7200);
    let ln2_lo = f32::from_bits(0x35bf_be8e);
    let inv_ln2 = f32::from_bits(0x3fb8_aa3b);
    let p1 = f32::from_bits(0x3e2a_aa8f);
    let p2 = f32::from_bits(0xbb35_5215);
    let bits = x.to_bits();
    let negative = bits >> 31 != 0;
    let hx = bits & 0x7fff_ffff;
    // Argument reduction: k = round(x / ln 2) beyond 1.5 ln 2, ±1 beyond 0.5 ln 2, else 0.
    let half = if negative { -0.5f32 } else { 0.5 };
    // C's `(int)` of `inv_ln2 * x + half`, truncation toward zero, without Rust's saturating cast
    // (which LLVM converts lane by lane): clamped to ±256 first (only lanes whose result is
    // replaced below have |x| > 104, beyond ±150 here; a NaN becomes -256), then the nearest
    // integer by the 1.5·2^23 rounding constant, one less where that rounded up.
    #[allow(clippy::manual_clamp)] // `clamp` would keep a NaN.
    let t = (inv_ln2 * x + half).max(-256.0).min(256.0);
    let a = t.abs();
    let nearest = ((a + 12_582_912.0).to_bits() & 0x007f_ffff) as i32 - 0x0040_0000;
    let toward_zero = nearest - i32::from(nearest as f32 > a);
    let k_far = if t < 0.0 { -toward_zero } else { toward_zero };
    let k_near = if negative { -1 } else { 1 };
    let reduce = hx > 0x3eb1_7218;
    let k = if !reduce {
        0
    } else if hx > 0x3f85_1592 {
        k_far
    } else {
        k_near
    };
    let kf = k as f32;
    let hi_r = x - kf * ln2_hi;
    let lo_r = kf * ln2_lo;
    let hi = if reduce { hi_r } else { x };
    let lo = if reduce { lo_r } else { 0.0 };
    let r = if reduce { hi_r - lo_r } else { x };
    let rr = r * r;
    let c = r - rr * (p1 + rr * p2);
    let y = 1.0f32 + (r * c / (2.0f32 - c) - lo + hi);
    // y · 2^k: k > 127 first by 2^127, k < -126 first by 2^-102 (never subnormal there), then by
    // 2^n (the clamp only matters in lanes whose result is replaced below).
    let (y, n) = if k > 127 {
        (y * f32::from_bits(0x7f00_0000), k.wrapping_sub(127))
    } else if k < -126 {
        (y * f32::from_bits(0x0c80_0000), k.wrapping_add(102))
    } else {
        (y, k)
    };
    let n = n.clamp(-126, 127);
    let scaled = y * f32::from_bits(((0x7f + n) as u32) << 23);
    // |x| <= 2^-14: 1 + x.
    let out = if hx <= 0x3900_0000 {
        1.0f32 + x
    } else {
        scaled
    };
    // Beyond the range: 0 below -103.97, x · 2^127 (overflow, or +inf) above 88.72, NaN as is.
    let out = if negative && hx >= 0x42cf_f1b5 {
        0.0
    } else {
        out
    };
    let out = if !negative && hx >= 0x42b1_7218 {
        x * f32::from_bits(0x7f00_0000)
    } else {
        out
    };
    if hx > 0x7f80_0000 {
        x
    } else {
        out
    }
}

/// Entries of [`fill_gelu_table`]'s table: one per f16 value in `[-10, 10]` (`0x4900` is 10.0),
/// the positive ones then the negative ones.
pub(super) const GELU_TABLE_LEN: usize = 2 * GELU_SIDE;

/// f16 bit patterns from +0 to 10.0 (and from -0 to -10.0).
const GELU_SIDE: usize = 0x4901;

/// The [`geglu`] table's slot of an f16 bit pattern, `None` beyond ±10 or for NaN.
#[inline(always)]
fn gelu_slot(bits: u16) -> Option<usize> {
    let magnitude = usize::from(bits & 0x7fff);
    if magnitude >= GELU_SIDE {
        return None;
    }
    Some(if bits & 0x8000 == 0 {
        magnitude
    } else {
        GELU_SIDE + magnitude
    })
}

/// Fills `table` (at least [`GELU_TABLE_LEN`] values) with [`gelu_f16`] of every f16 it has a slot
/// for: ggml's `ggml_table_gelu_f16`, as f32. [`geglu`] then reads GELU instead of computing a
/// `tanhf` per element, with the same bits.
pub(super) fn fill_gelu_table(table: &mut [f32]) {
    for bits in (0..=u16::MAX).filter(|&b| gelu_slot(b).is_some()) {
        if let Some(slot) = gelu_slot(bits).and_then(|i| table.get_mut(i)) {
            *slot = gelu_f16(f16_le(bits.to_le_bytes()));
        }
    }
}

/// `gate = gelu(gate) * up` (GeGLU), as ggml's CPU `geglu` computes it: GELU's tanh form
/// `0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x²)))` evaluated at `x` rounded to f16 and its
/// result rounded to f16 (ggml reads it from a table indexed by the f16 input, as this does from
/// `table`, filled by [`fill_gelu_table`]; an input without an entry there is computed), except
/// `gelu(x) = 0` for `x <= -10` and `x` for `x >= 10`.
pub(super) fn geglu(gate: &mut [f32], up: &[f32], table: &[f32]) {
    for (g, &u) in gate.iter_mut().zip(up) {
        let x = *g;
        let gelu = if x <= -10.0 {
            0.0
        } else if x >= 10.0 {
            x
        } else {
            let bits = u16::from_le_bytes(f16_to_le(x));
            match gelu_slot(bits).and_then(|i| table.get(i)) {
                Some(&gelu) => gelu,
                None => gelu_f16(f16_le(bits.to_le_bytes())),
            }
        };
        *g = gelu * u;
    }
}

/// [`geglu`] written without branches (so that it vectorizes: compiled for the baseline, or inlined
/// into the AVX2 and AVX-512 wrappers of `Wide::geglu`), with its bits: each input rounded to f16
/// by [`f16_bits_nearest_even`], GELU read from `table`, which must hold every slot (otherwise
/// this is [`geglu`]).
#[inline(always)]
pub(super) fn geglu_lanes(gate: &mut [f32], up: &[f32], table: &[f32]) {
    let Some(table) = table.get(..GELU_TABLE_LEN) else {
        return geglu(gate, up, table);
    };
    for (g, &u) in gate.iter_mut().zip(up) {
        let x = *g;
        let h = f16_bits_nearest_even(x);
        let magnitude = usize::from(h & 0x7fff);
        let slot = if h & 0x8000 == 0 {
            magnitude
        } else {
            GELU_SIDE + magnitude
        };
        // Every x in (-10, 10) rounds to a slot; the others (and NaN) discard what is read.
        let read = table
            .get(slot.min(GELU_TABLE_LEN - 1))
            .copied()
            .unwrap_or(0.0);
        let gelu = if x <= -10.0 {
            0.0
        } else if x >= 10.0 || x.is_nan() {
            // NaN: GELU of NaN is NaN, as the table-free formula gives.
            x
        } else {
            read
        };
        *g = gelu * u;
    }
}

/// The f16 bits of `x` rounded to nearest even, for `|x|` below 65520 (where no f16 overflows)
/// and `x` not NaN; other inputs give some f16 bits. Without branches: below f16's smallest normal
/// (2^-14), adding 0.5 rounds `|x|` to a multiple of 2^-24 (the f16 subnormals' step), which the
/// float's low mantissa bits then hold; above it, the mantissa is rounded at bit 13 (a half
/// rounds up only onto an even result) and the exponent rebased, which may carry into it.
#[inline(always)]
fn f16_bits_nearest_even(x: f32) -> u16 {
    const HALF: u32 = 126 << 23;
    const SMALLEST_NORMAL: u32 = 113 << 23;
    let bits = x.to_bits();
    let sign = (bits >> 16) & 0x8000;
    let magnitude = bits & 0x7fff_ffff;
    let subnormal = (f32::from_bits(magnitude) + f32::from_bits(HALF))
        .to_bits()
        .wrapping_sub(HALF);
    let odd = (magnitude >> 13) & 1;
    let normal = magnitude
        .wrapping_sub((127 - 15) << 23)
        .wrapping_add(0xfff + odd)
        >> 13;
    let h = if magnitude < SMALLEST_NORMAL {
        subnormal
    } else {
        normal
    };
    (h | sign) as u16
}

/// GELU of an f16 value (given as f32), rounded to f16: one entry of ggml's table.
fn gelu_f16(x16: f32) -> f32 {
    f16_le(f16_to_le(gelu_tanh(x16)))
}

/// GELU's tanh approximation in f32, ggml's `ggml_gelu_f32`.
fn gelu_tanh(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    const COEF_A: f32 = 0.044715;
    0.5f32 * x * (1.0f32 + libm::tanhf(SQRT_2_OVER_PI * x * (1.0f32 + COEF_A * x * x)))
}

/// `x *= factor`, ggml's `scale`.
pub(super) fn scale(x: &mut [f32], factor: f32) {
    for v in x.iter_mut() {
        *v *= factor;
    }
}

/// `x = cap * tanh(x * (1/cap))`, as ggml's scale, tanh and scale that llama.cpp builds for a
/// final logit softcap.
pub(super) fn softcap(x: &mut [f32], cap: f32) {
    let inv = 1.0f32 / cap;
    for v in x.iter_mut() {
        *v = libm::tanhf(*v * inv) * cap;
    }
}

/// `x += y`.
pub(super) fn add(x: &mut [f32], y: &[f32]) {
    for (a, &b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// The little-endian f32 at element `i` of `bytes`.
pub(super) fn f32_at(bytes: &[u8], i: usize) -> Option<f32> {
    let start = i.checked_mul(4)?;
    let b = bytes.get(start..start.checked_add(4)?)?;
    Some(f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `step`-th f32 bit pattern from `start`, and the edges of every branch of libm's expf.
    fn exp_matches_libm_on(start: u32, step: u32) {
        let edges = [
            0x3eb1_7218u32,
            0x3f85_1592,
            0x3900_0000,
            0x42ae_ac50,
            0x42b1_7218,
            0x42cf_f1b5,
            0x7f80_0000,
            0x7f80_0001,
            0x7fc0_0000,
            0,
            1,
        ];
        let mut inputs: std::vec::Vec<f32> = edges
            .iter()
            .flat_map(|&e| (0..=4).map(move |d| e.wrapping_add(d).wrapping_sub(2)))
            .flat_map(|b| [b, b | 0x8000_0000])
            .map(f32::from_bits)
            .collect();
        // Every compilation this CPU runs.
        let wides: std::vec::Vec<Wide> = crate::quant::Level::ALL
            .into_iter()
            .filter(|l| l.is_available())
            .map(Wide::of)
            .collect();
        let check = |inputs: &[f32]| {
            let want: std::vec::Vec<f32> = inputs.iter().map(|&x| libm::expf(x)).collect();
            for &wide in &wides {
                let mut got = inputs.to_vec();
                wide.exp(&mut got);
                for ((&x, &y), &want) in inputs.iter().zip(&got).zip(&want) {
                    assert!(
                        y.to_bits() == want.to_bits() || (y.is_nan() && want.is_nan()),
                        "{wide:?} exp({x:e} = {:#010x}): {y:e}, libm {want:e}",
                        x.to_bits()
                    );
                }
            }
        };
        check(&inputs);
        // Every length up to two vectors and a half, so every tail runs.
        for len in 1..=40 {
            check(&inputs[..len]);
        }
        let mut b = Some(start);
        while b.is_some() {
            inputs.clear();
            while let Some(next) = b.filter(|_| inputs.len() < 1 << 20) {
                inputs.push(f32::from_bits(next));
                b = next.checked_add(step);
            }
            check(&inputs);
        }
    }

    #[test]
    fn exp_has_libm_s_bits_on_a_sample() {
        exp_matches_libm_on(12_345, 4099);
    }

    /// Every f32 (seconds in release: `cargo test -p miniquant --release --features model --
    /// --ignored exp_has_libm`).
    #[test]
    #[ignore]
    fn exp_has_libm_s_bits_everywhere() {
        exp_matches_libm_on(0, 1);
    }

    /// A filled GELU table, and every f16 value as f32.
    fn gelu_table_and_every_f16() -> (std::vec::Vec<f32>, std::vec::Vec<f32>) {
        let mut table = std::vec![0.0f32; GELU_TABLE_LEN];
        fill_gelu_table(&mut table);
        let inputs = (0..=u16::MAX).map(|b| f16_le(b.to_le_bytes())).collect();
        (table, inputs)
    }

    /// The table-read GeGLU against the formula at every f16 input below ±10, just past them, at
    /// ±10 and beyond, at NaN and infinities; and without a table (every entry computed).
    #[test]
    fn geglu_from_the_table_has_the_formula_s_bits() {
        let (table, mut inputs) = gelu_table_and_every_f16();
        inputs.extend([
            9.999, 9.996, 10.0, 10.001, -9.999, -10.0, -10.5, 1e-8, -1e-30, 65520.0,
        ]);
        inputs.extend([f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 3.1e-5, -7.3]);
        let up: std::vec::Vec<f32> = (0..inputs.len()).map(|i| 0.5 + (i % 7) as f32).collect();
        let want: std::vec::Vec<f32> = inputs
            .iter()
            .zip(&up)
            .map(|(&x, &u)| {
                let gelu = if x <= -10.0 {
                    0.0
                } else if x >= 10.0 {
                    x
                } else {
                    gelu_f16(f16_le(f16_to_le(x)))
                };
                gelu * u
            })
            .collect();
        for table in [&table[..], &[]] {
            let mut got = inputs.clone();
            geglu(&mut got, &up, table);
            for ((&x, &g), &w) in inputs.iter().zip(&got).zip(&want) {
                assert!(
                    g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                    "geglu({x:e}) = {g:e}, formula {w:e} (table of {})",
                    table.len()
                );
            }
        }
        // The table is not all one value: it is GELU (0 at 0, x far out, below 0 on the left).
        assert_eq!(table[0], 0.0);
        assert!(table[0x4800] > 7.9 && table[GELU_SIDE + 0x3c00] < 0.0);
    }

    /// The branch-free f16 rounding against `half`'s on a sweep of every 251st f32 below 65520, on
    /// every exact tie between two f16 values and the floats either side of it, and on both signs.
    #[test]
    fn f16_rounding_without_branches_has_half_s_bits() {
        let mut inputs: std::vec::Vec<u32> = (0..0x477f_f000u32).step_by(251).collect();
        for h in 0u32..0x7bff {
            let low = f16_le((h as u16).to_le_bytes());
            let high = f16_le((h as u16 + 1).to_le_bytes());
            let tie = ((f64::from(low) + f64::from(high)) / 2.0) as f32;
            inputs.extend([tie.to_bits() - 1, tie.to_bits(), tie.to_bits() + 1]);
        }
        for bits in inputs.into_iter().flat_map(|b| [b, b | 0x8000_0000]) {
            let x = f32::from_bits(bits);
            assert_eq!(
                f16_bits_nearest_even(x).to_le_bytes(),
                f16_to_le(x),
                "{x:e} ({bits:#010x})"
            );
        }
    }

    /// `geglu_lanes` in every compilation this CPU runs against `geglu`: every f16 value, a sweep
    /// of f32 in (-12, 12), the edges and NaN.
    #[test]
    fn geglu_in_every_compilation_has_the_scalar_bits() {
        let (table, mut inputs) = gelu_table_and_every_f16();
        inputs.extend((0..200_000).map(|i| (i as f32 * 0.000_12) - 12.0));
        inputs.extend([
            9.999, 9.996, 10.0, 10.001, -9.999, -10.0, -10.5, 1e-8, -1e-30, 1e-45,
        ]);
        inputs.extend([
            f32::NAN,
            -f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MAX,
        ]);
        let up: std::vec::Vec<f32> = (0..inputs.len())
            .map(|i| (i % 13) as f32 * 0.37 - 2.0)
            .collect();
        let mut want = inputs.clone();
        geglu(&mut want, &up, &table);
        let wides: std::vec::Vec<Wide> = crate::quant::Level::ALL
            .into_iter()
            .filter(|l| l.is_available())
            .map(Wide::of)
            .collect();
        for wide in wides {
            // Odd lengths, so every compilation's tail runs too.
            for len in [inputs.len(), 1, 7, 33, 1001] {
                let mut got = inputs[..len].to_vec();
                wide.geglu(&mut got, &up[..len], &table);
                for ((&x, &g), &w) in inputs.iter().zip(&got).zip(&want) {
                    assert!(
                        g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                        "{wide:?} geglu({x:e}) = {g:e}, scalar {w:e}"
                    );
                }
            }
        }
    }

    /// Rows softmaxed together have the bits of each row alone, computed step by step here as
    /// ggml does (maximum, exp, serial f64 sum, f32 inverse), for 1-4 rows of several lengths.
    #[test]
    fn softmax_of_rows_together_has_each_row_s_bits() {
        let value = |i: usize| ((i * 37 % 101) as f32 - 50.0) * 0.173;
        for len in [1, 2, 7, 16, 33, 256] {
            for rows in 1..=4 {
                let mut x: std::vec::Vec<f32> = (0..rows * len).map(value).collect();
                if rows > 1 && len > 3 {
                    x[len + 2] = f32::NEG_INFINITY;
                }
                let mut want = x.clone();
                for row in want.chunks_exact_mut(len) {
                    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                    let mut sum = 0.0f64;
                    for v in row.iter_mut() {
                        *v = libm::expf(*v - max);
                        sum += f64::from(*v);
                    }
                    let inv = (1.0 / sum) as f32;
                    for v in row.iter_mut() {
                        *v *= inv;
                    }
                }
                softmax_rows::<4>(&mut x, len, Wide::Portable);
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<std::vec::Vec<_>>();
                assert_eq!(bits(&x), bits(&want), "{rows} rows of {len}");
            }
        }
    }

    #[test]
    fn softmax_sums_to_one_and_keeps_order() {
        let mut x = [1.0f32, 2.0, 3.0, f32::NEG_INFINITY];
        softmax_rows::<1>(&mut x, 4, Wide::Portable);
        assert_eq!(x[3], 0.0);
        assert!(x[0] < x[1] && x[1] < x[2]);
        assert!((x.iter().sum::<f32>() - 1.0).abs() < 1e-6);
    }

    #[test]
    fn rope_at_position_zero_is_identity_and_rotates_pairs() {
        let scale = rope_theta_scale(10000.0, 4);
        let mut cache = [0.0f32; 4];
        rope_cache(0, scale, 1.0, None, &mut cache);
        let mut head = [1.0f32, 2.0, 3.0, 4.0, 5.0];
        rope_normal(&mut head, &cache);
        assert_eq!(head, [1.0, 2.0, 3.0, 4.0, 5.0]);
        rope_cache(1, scale, 1.0, None, &mut cache);
        rope_normal(&mut head, &cache);
        // Pair 0 turns by 1 radian: its length is kept; value 4 (past rope_dims) is untouched.
        let (c, s) = (libm::cosf(1.0), libm::sinf(1.0));
        assert_eq!(head[0], 1.0 * c - 2.0 * s);
        assert_eq!(head[1], 1.0 * s + 2.0 * c);
        assert_eq!(head[4], 5.0);
        assert!(((head[2] * head[2] + head[3] * head[3]) - 25.0).abs() < 1e-4);
    }

    #[test]
    fn rms_norm_of_a_constant_is_the_weight() {
        let mut out = [0.0f32; 4];
        let mut weight = [0u8; 16];
        for (b, w) in weight.chunks_exact_mut(4).zip([1.0f32, 2.0, 3.0, 4.0]) {
            b.copy_from_slice(&w.to_le_bytes());
        }
        rms_norm(&[3.0; 4], &weight, 0.0, &mut out);
        assert_eq!(out, [1.0, 2.0, 3.0, 4.0]);
    }
}
