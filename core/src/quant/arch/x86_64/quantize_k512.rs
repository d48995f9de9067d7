//! AVX-512 form of the Q4_K search of `quantize_k.rs`: the same lane-per-sub-block
//! `make_qkx2_quants`, with 16 lanes holding the 8 sub-blocks of two super-blocks, and two such
//! vectors interleaved (four super-blocks per pass). Compares give mask registers and verdicts are
//! masked blends; every float operation is the scalar twin's, in its order. Fewer than four
//! remaining blocks take the AVX2 kernel.

use core::arch::x86_64::*;

use crate::quant::activation::QK_K;
use crate::quant::k_quants::common::Qkx2Search;
use crate::quant::k_quants::q4_k::{SubBlockFits, Q4K_SEARCH};
use crate::quant::k_quants::BlockQ4K;

/// Values in a sub-block.
const SUB: usize = 32;
/// Sub-blocks in a super-block.
const PER_BLOCK: usize = QK_K / SUB;
/// Lanes of a vector: the sub-blocks of two super-blocks.
const LANES: usize = 16;
/// Vectors interleaved per pass.
const GROUPS: usize = 2;
/// Super-blocks per pass.
const BLOCKS: usize = GROUPS * LANES / PER_BLOCK;

/// Two super-blocks transposed: lane `8b + j` of vector `i` is value `i` of sub-block `j` of
/// super-block `b`.
type Columns = [__m512; SUB];

/// Two super-blocks by column.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn columns(x: [&[f32; QK_K]; 2]) -> Columns {
    let mut lanes = [[0.0f32; LANES]; SUB];
    for (b, x) in x.iter().enumerate() {
        for (j, sub) in x.chunks_exact(SUB).enumerate() {
            for (column, &v) in lanes.iter_mut().zip(sub) {
                if let Some(slot) = column.get_mut(PER_BLOCK * b + j) {
                    *slot = v;
                }
            }
        }
    }
    // SAFETY: each `column` holds sixteen f32; `loadu` has no alignment requirement.
    lanes.map(|column| unsafe { _mm512_loadu_ps(column.as_ptr()) })
}

/// `max(0, min(nmax, nearest_int(iscale · (x − min))))` as a float (ggml's `nearest_int`:
/// `bits(v + 1.5·2²³) & 0x7fffff − 0x400000`).
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn level(iscale: __m512, x: __m512, min: __m512, nmax: __m512i) -> __m512 {
    let shifted = _mm512_add_ps(
        _mm512_mul_ps(iscale, _mm512_sub_ps(x, min)),
        _mm512_set1_ps(12_582_912.0),
    );
    let l = _mm512_sub_epi32(
        _mm512_and_si512(_mm512_castps_si512(shifted), _mm512_set1_epi32(0x007f_ffff)),
        _mm512_set1_epi32(0x0040_0000),
    );
    let l = _mm512_max_epi32(_mm512_min_epi32(l, nmax), _mm512_setzero_si512());
    _mm512_cvtepi32_ps(l)
}

/// `w · err(scale·l + min − x)`, `err` the absolute (`use_mad`) or squared difference.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn error_term(scale: __m512, l: __m512, min: __m512, x: __m512, w: __m512, mad: bool) -> __m512 {
    let diff = _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(scale, l), min), x);
    let err = if mad {
        _mm512_abs_ps(diff)
    } else {
        _mm512_mul_ps(diff, diff)
    };
    _mm512_mul_ps(w, err)
}

/// The search state of two super-blocks, lane `8b + j` = sub-block `j` of super-block `b`.
#[derive(Clone, Copy)]
struct Lanes {
    x: Columns,
    w: Columns,
    best: Columns,
    min: __m512,
    max: __m512,
    sum_w: __m512,
    sum_x: __m512,
    scale: __m512,
    best_error: __m512,
    flat: __mmask16,
    flat_min: __m512,
}

/// The weights `sqrt(Σx²/32) + |x|` and the search up to its first error.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn start(search: Qkx2Search, x: Columns) -> Lanes {
    let mut sum_x2 = _mm512_setzero_ps();
    for &v in &x {
        sum_x2 = _mm512_add_ps(sum_x2, _mm512_mul_ps(v, v));
    }
    let av_x = _mm512_sqrt_ps(_mm512_div_ps(sum_x2, _mm512_set1_ps(32.0)));
    let w = x.map(|v| _mm512_add_ps(av_x, _mm512_abs_ps(v)));

    let [x0, ..] = x;
    let [w0, ..] = w;
    let (mut min, mut max, mut sum_w) = (x0, x0, w0);
    let mut sum_x = _mm512_mul_ps(sum_w, x0);
    for (&xi, &wi) in x.iter().zip(&w).skip(1) {
        // `if (x < min) min = x`: vminps returns its first operand only when it is smaller.
        min = _mm512_min_ps(xi, min);
        max = _mm512_max_ps(xi, max);
        sum_w = _mm512_add_ps(sum_w, wi);
        sum_x = _mm512_add_ps(sum_x, _mm512_mul_ps(wi, xi));
    }
    let zero = _mm512_setzero_ps();
    min = _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_GT_OQ>(min, zero), min, zero);
    let flat = _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(max, min);

    let nmax = _mm512_set1_epi32(search.nmax);
    let iscale = _mm512_div_ps(_mm512_set1_ps(search.nmax as f32), _mm512_sub_ps(max, min));
    let scale = _mm512_div_ps(_mm512_set1_ps(1.0), iscale);
    let mut best = [zero; SUB];
    let mut best_error = zero;
    for ((b, &xi), &wi) in best.iter_mut().zip(&x).zip(&w) {
        *b = level(iscale, xi, min, nmax);
        best_error = _mm512_add_ps(
            best_error,
            error_term(scale, *b, min, xi, wi, search.use_mad),
        );
    }
    Lanes {
        x,
        w,
        best,
        min,
        max,
        sum_w,
        sum_x,
        scale,
        best_error,
        flat,
        flat_min: min,
    }
}

/// One trial `is` in every lane of both vectors (see `quantize_k.rs`).
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn trial(search: Qkx2Search, is: i32, lanes: &mut [Lanes; GROUPS]) {
    let zero = _mm512_setzero_ps();
    let nmax = _mm512_set1_epi32(search.nmax);
    let offset = _mm512_set1_ps(search.rmin + search.rdelta * is as f32 + search.nmax as f32);
    let iscale = lanes.map(|s| _mm512_div_ps(offset, _mm512_sub_ps(s.max, s.min)));
    let mut levels = [[zero; SUB]; GROUPS];
    let mut sum_l = [zero; GROUPS];
    let mut sum_l2 = [zero; GROUPS];
    let mut sum_xl = [zero; GROUPS];
    for i in 0..SUB {
        for g in 0..GROUPS {
            let (Some(s), Some(l)) = (lanes.get(g), levels.get_mut(g)) else {
                continue;
            };
            let (Some(&xi), Some(&wi), Some(l)) = (s.x.get(i), s.w.get(i), l.get_mut(i)) else {
                continue;
            };
            let (Some(&iscale), Some(sl), Some(sl2), Some(sxl)) = (
                iscale.get(g),
                sum_l.get_mut(g),
                sum_l2.get_mut(g),
                sum_xl.get_mut(g),
            ) else {
                continue;
            };
            *l = level(iscale, xi, s.min, nmax);
            let wl = _mm512_mul_ps(wi, *l);
            *sl = _mm512_add_ps(*sl, wl);
            *sl2 = _mm512_add_ps(*sl2, _mm512_mul_ps(wl, *l));
            *sxl = _mm512_add_ps(*sxl, _mm512_mul_ps(wl, xi));
        }
    }
    let mut fit: [(__mmask16, __m512, __m512); GROUPS] = [(0, zero, zero); GROUPS];
    for ((((f, s), &sl), &sl2), &sxl) in fit
        .iter_mut()
        .zip(&*lanes)
        .zip(&sum_l)
        .zip(&sum_l2)
        .zip(&sum_xl)
    {
        let det = _mm512_sub_ps(_mm512_mul_ps(s.sum_w, sl2), _mm512_mul_ps(sl, sl));
        let this_scale = _mm512_div_ps(
            _mm512_sub_ps(_mm512_mul_ps(s.sum_w, sxl), _mm512_mul_ps(s.sum_x, sl)),
            det,
        );
        let this_min = _mm512_div_ps(
            _mm512_sub_ps(_mm512_mul_ps(sl2, s.sum_x), _mm512_mul_ps(sl, sxl)),
            det,
        );
        let positive = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(this_min, zero);
        let this_scale = _mm512_mask_blend_ps(positive, this_scale, _mm512_div_ps(sxl, sl2));
        let this_min = _mm512_mask_blend_ps(positive, this_min, zero);
        *f = (
            _mm512_cmp_ps_mask::<_CMP_GT_OQ>(det, zero),
            this_scale,
            this_min,
        );
    }
    let mut error = [zero; GROUPS];
    for i in 0..SUB {
        for g in 0..GROUPS {
            let (Some(s), Some(l), Some(&(_, this_scale, this_min)), Some(e)) =
                (lanes.get(g), levels.get(g), fit.get(g), error.get_mut(g))
            else {
                continue;
            };
            let (Some(&xi), Some(&wi), Some(&l)) = (s.x.get(i), s.w.get(i), l.get(i)) else {
                continue;
            };
            *e = _mm512_add_ps(
                *e,
                error_term(this_scale, l, this_min, xi, wi, search.use_mad),
            );
        }
    }
    for (((s, l), &(fits, this_scale, this_min)), &e) in
        lanes.iter_mut().zip(&levels).zip(&fit).zip(&error)
    {
        let better = fits & _mm512_cmp_ps_mask::<_CMP_LT_OQ>(e, s.best_error);
        for (b, &l) in s.best.iter_mut().zip(l) {
            *b = _mm512_mask_blend_ps(better, *b, l);
        }
        s.best_error = _mm512_mask_blend_ps(better, s.best_error, e);
        s.scale = _mm512_mask_blend_ps(better, s.scale, this_scale);
        s.min = _mm512_mask_blend_ps(better, s.min, this_min);
    }
}

/// The two super-blocks' results in the scalar twin's form.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn fits(s: &Lanes) -> [SubBlockFits; 2] {
    let zero = _mm512_setzero_ps();
    let scale = _mm512_mask_blend_ps(s.flat, s.scale, zero);
    let min = _mm512_mask_blend_ps(s.flat, s.min, s.flat_min);
    let neg_min = _mm512_castsi512_ps(_mm512_xor_si512(
        _mm512_castps_si512(min),
        _mm512_set1_epi32(i32::MIN),
    ));
    let mut scales = [0.0f32; LANES];
    let mut mins = [0.0f32; LANES];
    // SAFETY: `scales` and `mins` hold sixteen f32; `storeu` has no alignment requirement.
    unsafe {
        _mm512_storeu_ps(scales.as_mut_ptr(), scale);
        _mm512_storeu_ps(mins.as_mut_ptr(), neg_min);
    }
    let mut out = [0, 1].map(|b| SubBlockFits {
        scales: scales
            .get(PER_BLOCK * b..)
            .and_then(|s| s.first_chunk().copied())
            .unwrap_or_default(),
        mins: mins
            .get(PER_BLOCK * b..)
            .and_then(|s| s.first_chunk().copied())
            .unwrap_or_default(),
        levels: [0; QK_K],
    });
    for (i, &b) in s.best.iter().enumerate() {
        let mut lane = [0i32; LANES];
        let l = _mm512_cvtps_epi32(_mm512_mask_blend_ps(s.flat, b, zero));
        // SAFETY: `lane` holds sixteen i32; `storeu` has no alignment requirement.
        unsafe { _mm512_storeu_si512(lane.as_mut_ptr().cast(), l) };
        for (k, &l) in lane.iter().enumerate() {
            let (block, j) = (k / PER_BLOCK, k % PER_BLOCK);
            if let Some(slot) = out
                .get_mut(block)
                .and_then(|f| f.levels.get_mut(SUB * j + i))
            {
                // The levels lie in 0..=nmax.
                *slot = l as u8;
            }
        }
    }
    out
}

/// `quantize_row_q4_K_ref`, four super-blocks at a time; the rest through the AVX2 kernel.
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn quantize_q4_k_impl(values: &[f32], blocks: &mut [BlockQ4K]) {
    let search = Q4K_SEARCH;
    let mut groups = values
        .chunks_exact(BLOCKS * QK_K)
        .zip(blocks.chunks_exact_mut(BLOCKS));
    for (x, out) in &mut groups {
        let Some(x) = x.first_chunk::<{ BLOCKS * QK_K }>() else {
            continue;
        };
        let xs: [&[f32; QK_K]; BLOCKS] = core::array::from_fn(|b| {
            x.get(b * QK_K..)
                .and_then(|s| s.first_chunk::<QK_K>())
                .unwrap_or(&[0.0; QK_K])
        });
        let [a, b, c, d] = xs;
        let mut lanes = [
            start(search, columns([a, b])),
            start(search, columns([c, d])),
        ];
        if search.nstep >= 1 {
            for is in 0..=search.nstep {
                trial(search, is, &mut lanes);
            }
        }
        let [[fa, fb], [fc, fd]] = lanes.map(|s| fits(&s));
        for ((out, x), f) in out.iter_mut().zip(xs).zip([fa, fb, fc, fd]) {
            *out = super::quantize_k::q4_k_block_from_fits(x, f);
        }
    }
    let done = blocks.len() / BLOCKS * BLOCKS;
    let rest = values.get(done * QK_K..).unwrap_or(&[]);
    if let Some(out) = blocks.get_mut(done..) {
        super::quantize_k::quantize_q4_k(rest, out);
    }
}

/// Safe entry of [`quantize_q4_k_impl`].
pub(super) fn quantize_q4_k(values: &[f32], blocks: &mut [BlockQ4K]) {
    // SAFETY: only handed out for an available AVX-512 VNNI level (as the kernels of
    // `avx512.rs`), which includes AVX2.
    unsafe { quantize_q4_k_impl(values, blocks) }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::quant::k_quants::q4_k;
    use bytemuck::Zeroable;
    use std::vec::Vec;

    #[test]
    fn avx512_q4_k_quantizer_gives_the_scalar_bytes() {
        if !(std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("avx512vl")
            && std::is_x86_feature_detected!("avx512vnni"))
        {
            return;
        }
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let specials = [0.0f32, -0.0, 1e-40, 3e37, f32::NAN, f32::INFINITY, 7.0];
        // Block counts around the four-block pass, so the AVX2 tail runs too.
        for n_blocks in [1usize, 4, 5, 7, 9] {
            for round in 0..30 {
                let values: Vec<f32> = (0..n_blocks * QK_K)
                    .map(|i| {
                        let r = next();
                        let sub = (i / SUB) as u64 + round;
                        match (sub % 9, r % 61) {
                            // A constant sub-block, then sub-blocks with a special value.
                            (0, _) => 0.25,
                            (1, 0) => specials[(r >> 8) as usize % specials.len()],
                            // All positive (the minimum clamps to 0).
                            (2, _) => (r >> 40) as f32 / 1e6 + 3.0,
                            // Values on a grid (ties between trials).
                            (3, _) => ((r >> 60) as f32 - 8.0) * 0.5,
                            _ => {
                                ((r >> 40) as f32 / (1u64 << 24) as f32 - 0.5)
                                    * (1 + sub % 5) as f32
                            }
                        }
                    })
                    .collect();
                let mut got = std::vec![BlockQ4K::zeroed(); n_blocks];
                quantize_q4_k(&values, &mut got);
                for (b, (x, got)) in values.chunks_exact(QK_K).zip(&got).enumerate() {
                    let want = q4_k::quantize_block(x.try_into().unwrap());
                    assert_eq!(*got, want, "block {b} of {n_blocks}, round {round}");
                }
            }
        }
    }
}
