//! AVX2 K-quant quantizers: the per-sub-block searches of Q4_K (`make_qkx2_quants`, 8 sub-blocks of
//! 32) and Q6_K (`make_qx_quants`, 16 sub-blocks of 16) run side by side, one sub-block per lane.
//!
//! The sub-blocks' searches are independent (each its own minimum, trials and verdicts), so each
//! lane runs exactly its sub-block's scalar search: the same float operations on the same values
//! in the same order (lane-wise IEEE operations round as the scalar ones, no FMA), `nearest_int`
//! by the same 1.5·2²³ trick, comparisons as blends. A verdict that moves a lane's minimum only
//! changes that lane. Two super-blocks are interleaved so the serial in-order sums of one hide
//! the add latency of the other. The scalar twin is `k_quants::q4_k::fit_sub_blocks`.

use core::arch::x86_64::*;

use crate::quant::activation::QK_K;
use crate::quant::cast::f16_le;
use crate::quant::k_quants::common::scale_min_k4;
use crate::quant::k_quants::common::{Qkx2Search, GROUP_MAX_EPS};
use crate::quant::k_quants::q4_k::{pack_fits, SubBlockFits, Q4K_SEARCH};
use crate::quant::k_quants::{q6_k, BlockQ4K, BlockQ6K};

/// Values in a sub-block.
const SUB: usize = 32;
/// Sub-blocks in a super-block, one per lane.
const LANES: usize = QK_K / SUB;

/// A super-block transposed: element `i` of all 8 sub-blocks in vector `i`.
type Columns = [__m256; SUB];

/// The super-block's values by column: lane `j` of vector `i` is `x[32 * j + i]`.
#[inline]
#[target_feature(enable = "avx2")]
fn columns(x: &[f32; QK_K]) -> Columns {
    let mut lanes = [[0.0f32; LANES]; SUB];
    for (j, sub) in x.chunks_exact(SUB).enumerate() {
        for (column, &v) in lanes.iter_mut().zip(sub) {
            if let Some(slot) = column.get_mut(j) {
                *slot = v;
            }
        }
    }
    // SAFETY: each `column` holds eight f32; `loadu` has no alignment requirement.
    lanes.map(|column| unsafe { _mm256_loadu_ps(column.as_ptr()) })
}

/// ggml's `nearest_int` in each lane: `bits(v + 1.5·2²³) & 0x7fffff - 0x400000`.
#[inline]
#[target_feature(enable = "avx2")]
fn nearest_int(v: __m256) -> __m256i {
    let shifted = _mm256_add_ps(v, _mm256_set1_ps(12_582_912.0));
    _mm256_sub_epi32(
        _mm256_and_si256(_mm256_castps_si256(shifted), _mm256_set1_epi32(0x007f_ffff)),
        _mm256_set1_epi32(0x0040_0000),
    )
}

/// `max(0, min(nmax, nearest_int(iscale · (x − min))))` as a float.
#[inline]
#[target_feature(enable = "avx2")]
fn level(iscale: __m256, x: __m256, min: __m256, nmax: __m256i) -> __m256 {
    let l = nearest_int(_mm256_mul_ps(iscale, _mm256_sub_ps(x, min)));
    let l = _mm256_max_epi32(_mm256_min_epi32(l, nmax), _mm256_setzero_si256());
    _mm256_cvtepi32_ps(l)
}

/// `w · err(scale·l + min − x)`, `err` the absolute (`use_mad`) or squared difference.
#[inline]
#[target_feature(enable = "avx2")]
fn error_term(scale: __m256, l: __m256, min: __m256, x: __m256, w: __m256, mad: bool) -> __m256 {
    let diff = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(scale, l), min), x);
    let err = if mad {
        _mm256_andnot_ps(_mm256_set1_ps(-0.0), diff)
    } else {
        _mm256_mul_ps(diff, diff)
    };
    _mm256_mul_ps(w, err)
}

/// One super-block's search state, lane `j` = sub-block `j`.
#[derive(Clone, Copy)]
struct Lanes {
    x: Columns,
    w: Columns,
    /// The best levels so far (as floats).
    best: Columns,
    min: __m256,
    max: __m256,
    sum_w: __m256,
    sum_x: __m256,
    scale: __m256,
    best_error: __m256,
    /// Lanes whose values are all equal (`max == min`): ggml returns levels 0, scale 0 and the
    /// minimum at that point; the lane's later arithmetic is discarded.
    flat: __m256,
    flat_min: __m256,
}

/// The weights `sqrt(Σx²/32) + |x|` and the search up to its first error (`best_error`).
#[inline]
#[target_feature(enable = "avx2")]
fn start(search: Qkx2Search, x: Columns) -> Lanes {
    let abs_mask = _mm256_set1_ps(-0.0);
    let mut sum_x2 = _mm256_setzero_ps();
    for &v in &x {
        sum_x2 = _mm256_add_ps(sum_x2, _mm256_mul_ps(v, v));
    }
    let av_x = _mm256_sqrt_ps(_mm256_div_ps(sum_x2, _mm256_set1_ps(32.0)));
    let w = x.map(|v| _mm256_add_ps(av_x, _mm256_andnot_ps(abs_mask, v)));

    let [x0, ..] = x;
    let [w0, ..] = w;
    let (mut min, mut max, mut sum_w) = (x0, x0, w0);
    let mut sum_x = _mm256_mul_ps(sum_w, x0);
    for (&xi, &wi) in x.iter().zip(&w).skip(1) {
        // `if (x < min) min = x`: minps returns its first operand only when it is smaller.
        min = _mm256_min_ps(xi, min);
        max = _mm256_max_ps(xi, max);
        sum_w = _mm256_add_ps(sum_w, wi);
        sum_x = _mm256_add_ps(sum_x, _mm256_mul_ps(wi, xi));
    }
    let zero = _mm256_setzero_ps();
    min = _mm256_blendv_ps(min, zero, _mm256_cmp_ps::<_CMP_GT_OQ>(min, zero));
    let flat = _mm256_cmp_ps::<_CMP_EQ_OQ>(max, min);

    let nmax = _mm256_set1_epi32(search.nmax);
    let iscale = _mm256_div_ps(_mm256_set1_ps(search.nmax as f32), _mm256_sub_ps(max, min));
    let scale = _mm256_div_ps(_mm256_set1_ps(1.0), iscale);
    let mut best = [zero; SUB];
    let mut best_error = zero;
    for ((b, &xi), &wi) in best.iter_mut().zip(&x).zip(&w) {
        *b = level(iscale, xi, min, nmax);
        best_error = _mm256_add_ps(
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

/// One trial of the search (`is`) in every lane of every super-block: levels at the trial scale,
/// the least-squares scale and minimum, their error, and the verdict "strictly better" as blends.
#[inline]
#[target_feature(enable = "avx2")]
fn trial<const G: usize>(search: Qkx2Search, is: i32, lanes: &mut [Lanes; G]) {
    let zero = _mm256_setzero_ps();
    let nmax = _mm256_set1_epi32(search.nmax);
    let offset = _mm256_set1_ps(search.rmin + search.rdelta * is as f32 + search.nmax as f32);
    let iscale = lanes.map(|s| _mm256_div_ps(offset, _mm256_sub_ps(s.max, s.min)));
    let mut levels = [[zero; SUB]; G];
    let mut sum_l = [zero; G];
    let mut sum_l2 = [zero; G];
    let mut sum_xl = [zero; G];
    for i in 0..SUB {
        for g in 0..G {
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
            let wl = _mm256_mul_ps(wi, *l);
            *sl = _mm256_add_ps(*sl, wl);
            *sl2 = _mm256_add_ps(*sl2, _mm256_mul_ps(wl, *l));
            *sxl = _mm256_add_ps(*sxl, _mm256_mul_ps(wl, xi));
        }
    }
    let mut fit = [(zero, zero, zero); G];
    for ((((f, s), &sl), &sl2), &sxl) in fit
        .iter_mut()
        .zip(&*lanes)
        .zip(&sum_l)
        .zip(&sum_l2)
        .zip(&sum_xl)
    {
        let det = _mm256_sub_ps(_mm256_mul_ps(s.sum_w, sl2), _mm256_mul_ps(sl, sl));
        let this_scale = _mm256_div_ps(
            _mm256_sub_ps(_mm256_mul_ps(s.sum_w, sxl), _mm256_mul_ps(s.sum_x, sl)),
            det,
        );
        let this_min = _mm256_div_ps(
            _mm256_sub_ps(_mm256_mul_ps(sl2, s.sum_x), _mm256_mul_ps(sl, sxl)),
            det,
        );
        let positive = _mm256_cmp_ps::<_CMP_GT_OQ>(this_min, zero);
        let this_scale = _mm256_blendv_ps(this_scale, _mm256_div_ps(sxl, sl2), positive);
        let this_min = _mm256_blendv_ps(this_min, zero, positive);
        *f = (_mm256_cmp_ps::<_CMP_GT_OQ>(det, zero), this_scale, this_min);
    }
    let mut error = [zero; G];
    for i in 0..SUB {
        for g in 0..G {
            let (Some(s), Some(l), Some(&(_, this_scale, this_min)), Some(e)) =
                (lanes.get(g), levels.get(g), fit.get(g), error.get_mut(g))
            else {
                continue;
            };
            let (Some(&xi), Some(&wi), Some(&l)) = (s.x.get(i), s.w.get(i), l.get(i)) else {
                continue;
            };
            *e = _mm256_add_ps(
                *e,
                error_term(this_scale, l, this_min, xi, wi, search.use_mad),
            );
        }
    }
    for (((s, l), &(fits, this_scale, this_min)), &e) in
        lanes.iter_mut().zip(&levels).zip(&fit).zip(&error)
    {
        let better = _mm256_and_ps(fits, _mm256_cmp_ps::<_CMP_LT_OQ>(e, s.best_error));
        for (b, &l) in s.best.iter_mut().zip(l) {
            *b = _mm256_blendv_ps(*b, l, better);
        }
        s.best_error = _mm256_blendv_ps(s.best_error, e, better);
        s.scale = _mm256_blendv_ps(s.scale, this_scale, better);
        s.min = _mm256_blendv_ps(s.min, this_min, better);
    }
}

/// The search's results in the scalar twin's form.
#[inline]
#[target_feature(enable = "avx2")]
fn fits(s: &Lanes) -> SubBlockFits {
    let zero = _mm256_setzero_ps();
    let scale = _mm256_blendv_ps(s.scale, zero, s.flat);
    let min = _mm256_blendv_ps(s.min, s.flat_min, s.flat);
    let neg_min = _mm256_xor_ps(min, _mm256_set1_ps(-0.0));
    let mut out = SubBlockFits {
        scales: [0.0; LANES],
        mins: [0.0; LANES],
        levels: [0; QK_K],
    };
    // SAFETY: `scales` and `mins` hold eight f32; `storeu` has no alignment requirement.
    unsafe {
        _mm256_storeu_ps(out.scales.as_mut_ptr(), scale);
        _mm256_storeu_ps(out.mins.as_mut_ptr(), neg_min);
    }
    for (i, &b) in s.best.iter().enumerate() {
        let mut lane = [0i32; LANES];
        let l = _mm256_cvtps_epi32(_mm256_blendv_ps(b, zero, s.flat));
        // SAFETY: `lane` holds eight i32; `storeu` has no alignment requirement.
        unsafe { _mm256_storeu_si256(lane.as_mut_ptr().cast(), l) };
        for (j, &l) in lane.iter().enumerate() {
            if let Some(slot) = out.levels.get_mut(SUB * j + i) {
                // The levels lie in 0..=nmax.
                *slot = l as u8;
            }
        }
    }
    out
}

/// `fit_sub_blocks` of `G` super-blocks, their searches interleaved.
#[inline]
#[target_feature(enable = "avx2")]
fn fit_super_blocks<const G: usize>(search: Qkx2Search, x: [&[f32; QK_K]; G]) -> [SubBlockFits; G] {
    let mut lanes = x.map(|x| start(search, columns(x)));
    if search.nstep >= 1 {
        for is in 0..=search.nstep {
            trial(search, is, &mut lanes);
        }
    }
    lanes.map(|s| fits(&s))
}

/// The twin's `block_from_fits` with the re-quantization in SIMD: each sub-block's values against
/// its rounded scale and min, `clamp(nearest_int((x + dm) / d), 0, 15)`, eight at a time (a vector
/// division rounds as the scalar one), sub-blocks whose `d` is 0 keeping the search's levels.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn q4_k_block_from_fits(x: &[f32; QK_K], fits: SubBlockFits) -> BlockQ4K {
    let (scales, d, dmin) = pack_fits(&fits.scales, &fits.mins);
    let d_all = f16_le(d);
    let dmin_all = f16_le(dmin);
    let mut levels = fits.levels;
    let fifteen = _mm256_set1_epi32(15);
    for (j, (xs, ls)) in x
        .chunks_exact(SUB)
        .zip(levels.chunks_exact_mut(SUB))
        .enumerate()
    {
        let (sc, m) = scale_min_k4(j, &scales);
        let d = d_all * sc as f32;
        if d == 0.0 {
            continue;
        }
        let dm = _mm256_set1_ps(dmin_all * m as f32);
        let d = _mm256_set1_ps(d);
        for (v, l) in xs.chunks_exact(8).zip(ls.chunks_exact_mut(8)) {
            // SAFETY: `v` holds eight f32; `loadu` has no alignment requirement.
            let v = unsafe { _mm256_loadu_ps(v.as_ptr()) };
            let q = nearest_int(_mm256_div_ps(_mm256_add_ps(v, dm), d));
            let q = _mm256_max_epi32(_mm256_min_epi32(q, fifteen), _mm256_setzero_si256());
            let mut lane = [0i32; 8];
            // SAFETY: `lane` holds eight i32; `storeu` has no alignment requirement.
            unsafe { _mm256_storeu_si256(lane.as_mut_ptr().cast(), q) };
            for (l, &q) in l.iter_mut().zip(&lane) {
                *l = q as u8;
            }
        }
    }
    let mut block = BlockQ4K {
        d,
        dmin,
        scales,
        qs: [0; QK_K / 2],
    };
    for (bytes, ls) in block.qs.chunks_exact_mut(32).zip(levels.chunks_exact(64)) {
        let (low, high) = ls.split_at(32);
        for ((q, &lo), &hi) in bytes.iter_mut().zip(low).zip(high) {
            *q = lo | (hi << 4);
        }
    }
    block
}

/// `quantize_row_q4_K_ref`, two super-blocks at a time.
#[target_feature(enable = "avx2")]
fn quantize_q4_k_impl(values: &[f32], blocks: &mut [BlockQ4K]) {
    let mut pairs = values
        .chunks_exact(2 * QK_K)
        .zip(blocks.chunks_exact_mut(2));
    for (x, out) in &mut pairs {
        let (Some((a, b)), [first, second]) = (x.split_first_chunk::<QK_K>(), out) else {
            continue;
        };
        let Ok(b) = <&[f32; QK_K]>::try_from(b) else {
            continue;
        };
        let [fa, fb] = fit_super_blocks(Q4K_SEARCH, [a, b]);
        *first = q4_k_block_from_fits(a, fa);
        *second = q4_k_block_from_fits(b, fb);
    }
    let done = blocks.len() / 2 * 2;
    let rest = values.get(done * QK_K..).unwrap_or(&[]);
    for (x, out) in rest.chunks_exact(QK_K).zip(blocks.iter_mut().skip(done)) {
        if let Ok(x) = <&[f32; QK_K]>::try_from(x) {
            let [fits] = fit_super_blocks(Q4K_SEARCH, [x]);
            *out = q4_k_block_from_fits(x, fits);
        }
    }
}

/// Safe entry of [`quantize_q4_k_impl`].
pub(super) fn quantize_q4_k(values: &[f32], blocks: &mut [BlockQ4K]) {
    // SAFETY: only handed out for an available AVX2 level (as the AVX2 kernels of `avx2.rs`).
    unsafe { quantize_q4_k_impl(values, blocks) }
}

/// Values in a Q6_K sub-block.
const SUB6: usize = 16;

/// Half a Q6_K super-block transposed: lane `j` of vector `i` is value `i` of sub-block `j` of
/// the half.
type Columns6 = [__m256; SUB6];

/// The two halves of a Q6_K super-block by column.
#[inline]
#[target_feature(enable = "avx2")]
fn columns6(x: &[f32; QK_K]) -> [Columns6; 2] {
    let mut lanes = [[[0.0f32; LANES]; SUB6]; 2];
    for (k, sub) in x.chunks_exact(SUB6).enumerate() {
        let (half, j) = (k / LANES, k % LANES);
        if let Some(half) = lanes.get_mut(half) {
            for (column, &v) in half.iter_mut().zip(sub) {
                if let Some(slot) = column.get_mut(j) {
                    *slot = v;
                }
            }
        }
    }
    // SAFETY: each `column` holds eight f32; `loadu` has no alignment requirement.
    lanes.map(|half| half.map(|column| unsafe { _mm256_loadu_ps(column.as_ptr()) }))
}

/// `max(-nmax, min(nmax - 1, nearest_int(iscale · x)))`.
#[inline]
#[target_feature(enable = "avx2")]
fn symmetric_level(iscale: __m256, x: __m256, nmax: i32) -> __m256i {
    let l = nearest_int(_mm256_mul_ps(iscale, x));
    _mm256_max_epi32(
        _mm256_min_epi32(l, _mm256_set1_epi32(nmax - 1)),
        _mm256_set1_epi32(-nmax),
    )
}

/// `make_qx_quants(16, 32, x, L, 1, NULL)` for the 16 sub-blocks of a Q6_K super-block, 8 per
/// vector (the scalar twin is `k_quants::common::make_qx_quants`): in each lane the first largest
/// magnitude, then the 19 trial scales in ggml's order, each's two sums added in element order and
/// its verdict taken as blends. Returns the scales and the levels (`+32`).
#[inline]
#[target_feature(enable = "avx2")]
fn fit_q6_k(x: &[f32; QK_K]) -> ([f32; QK_K / 16], [i8; QK_K]) {
    const NMAX: i32 = 32;
    let nmax_f = NMAX as f32;
    let zero = _mm256_setzero_ps();
    let sign = _mm256_set1_ps(-0.0);
    let halves = columns6(x);
    let mut max = [zero; 2];
    let mut amax = [zero; 2];
    for ((max, amax), half) in max.iter_mut().zip(&mut amax).zip(&halves) {
        // `if (amax < |v|) { amax = |v|; max = v; }`: NaN never replaces.
        for &v in half {
            let a = _mm256_andnot_ps(sign, v);
            let larger = _mm256_cmp_ps::<_CMP_LT_OQ>(*amax, a);
            *amax = _mm256_blendv_ps(*amax, a, larger);
            *max = _mm256_blendv_ps(*max, v, larger);
        }
    }
    let w = halves.map(|h| h.map(|v| _mm256_mul_ps(v, v)));
    let mut wx = [[zero; SUB6]; 2];
    for ((wx, w), h) in wx.iter_mut().zip(&w).zip(&halves) {
        for ((wx, &w), &x) in wx.iter_mut().zip(w).zip(h) {
            *wx = _mm256_mul_ps(w, x);
        }
    }
    // The sums of one trial inverse scale `-numerator / max` in both halves.
    let sums = |numerator: f32| {
        let iscale = max.map(|m| _mm256_div_ps(_mm256_set1_ps(numerator), m));
        let mut sumlx = [zero; 2];
        let mut suml2 = [zero; 2];
        for i in 0..SUB6 {
            for h in 0..2 {
                let (Some(&iscale), Some(half), Some(w), Some(wx), Some(lx), Some(l2)) = (
                    iscale.get(h),
                    halves.get(h),
                    w.get(h),
                    wx.get(h),
                    sumlx.get_mut(h),
                    suml2.get_mut(h),
                ) else {
                    continue;
                };
                let (Some(&xi), Some(&wi), Some(&wxi)) = (half.get(i), w.get(i), wx.get(i)) else {
                    continue;
                };
                let l = _mm256_cvtepi32_ps(symmetric_level(iscale, xi, NMAX));
                *lx = _mm256_add_ps(*lx, _mm256_mul_ps(wxi, l));
                *l2 = _mm256_add_ps(*l2, _mm256_mul_ps(_mm256_mul_ps(wi, l), l));
            }
        }
        (iscale, sumlx, suml2)
    };
    let (mut chosen, sumlx, suml2) = sums(-nmax_f);
    let mut scale = [zero; 2];
    let mut best = [zero; 2];
    for (((scale, best), &lx), &l2) in scale.iter_mut().zip(&mut best).zip(&sumlx).zip(&suml2) {
        let nonzero = _mm256_cmp_ps::<_CMP_NEQ_UQ>(l2, zero);
        *scale = _mm256_and_ps(_mm256_div_ps(lx, l2), nonzero);
        *best = _mm256_mul_ps(*scale, lx);
    }
    for is in (-9i32..=9).filter(|&is| is != 0) {
        let (iscale, sumlx, suml2) = sums(-(nmax_f + 0.1 * is as f32));
        for h in 0..2 {
            let (Some(scale), Some(best), Some(chosen), Some(&iscale), Some(&lx), Some(&l2)) = (
                scale.get_mut(h),
                best.get_mut(h),
                chosen.get_mut(h),
                iscale.get(h),
                sumlx.get(h),
                suml2.get(h),
            ) else {
                continue;
            };
            let better = _mm256_and_ps(
                _mm256_cmp_ps::<_CMP_GT_OQ>(l2, zero),
                _mm256_cmp_ps::<_CMP_GT_OQ>(_mm256_mul_ps(lx, lx), _mm256_mul_ps(*best, l2)),
            );
            let new_scale = _mm256_div_ps(lx, l2);
            *scale = _mm256_blendv_ps(*scale, new_scale, better);
            *best = _mm256_blendv_ps(*best, _mm256_mul_ps(new_scale, lx), better);
            *chosen = _mm256_blendv_ps(*chosen, iscale, better);
        }
    }
    let mut scales = [0.0f32; QK_K / 16];
    let mut levels = [0i8; QK_K];
    for (h, ((half, &iscale), (&scale, &amax))) in halves
        .iter()
        .zip(&chosen)
        .zip(scale.iter().zip(&amax))
        .enumerate()
    {
        // All-zero sub-blocks: scale 0 and levels 0 (not +32).
        let tiny = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_LT_OQ>(
            amax,
            _mm256_set1_ps(GROUP_MAX_EPS),
        ));
        let scale = _mm256_andnot_ps(_mm256_castsi256_ps(tiny), scale);
        if let Some(out) = scales
            .get_mut(h * LANES..)
            .and_then(|s| s.first_chunk_mut::<LANES>())
        {
            // SAFETY: `out` holds eight f32; `storeu` has no alignment requirement.
            unsafe { _mm256_storeu_ps(out.as_mut_ptr(), scale) };
        }
        for (i, &xi) in half.iter().enumerate() {
            let l = _mm256_add_epi32(symmetric_level(iscale, xi, NMAX), _mm256_set1_epi32(NMAX));
            let l = _mm256_andnot_si256(tiny, l);
            let mut lane = [0i32; LANES];
            // SAFETY: `lane` holds eight i32; `storeu` has no alignment requirement.
            unsafe { _mm256_storeu_si256(lane.as_mut_ptr().cast(), l) };
            for (j, &l) in lane.iter().enumerate() {
                if let Some(slot) = levels.get_mut(SUB6 * (h * LANES + j) + i) {
                    // The levels lie in 0..64.
                    *slot = l as i8;
                }
            }
        }
    }
    (scales, levels)
}

/// `quantize_row_q6_K_ref`.
#[target_feature(enable = "avx2")]
fn quantize_q6_k_impl(values: &[f32], blocks: &mut [BlockQ6K]) {
    for (x, out) in values.chunks_exact(QK_K).zip(blocks) {
        if let Ok(x) = <&[f32; QK_K]>::try_from(x) {
            let (scales, levels) = fit_q6_k(x);
            *out = q6_k::block_from_fits(x, &scales, levels);
        }
    }
}

/// Safe entry of [`quantize_q6_k_impl`].
pub(super) fn quantize_q6_k(values: &[f32], blocks: &mut [BlockQ6K]) {
    // SAFETY: only handed out for an available AVX2 level (as the AVX2 kernels of `avx2.rs`).
    unsafe { quantize_q6_k_impl(values, blocks) }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::quant::k_quants::{q4_k, q6_k};
    use bytemuck::Zeroable;
    use std::vec::Vec;

    /// xorshift64*: reproducible inputs without a dependency.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        /// Uniform in [-1, 1).
        fn unit(&mut self) -> f32 {
            (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        }

        /// Roughly normal: the sum of four uniforms.
        fn normal(&mut self) -> f32 {
            (0..4).map(|_| self.unit()).sum::<f32>() * 0.5
        }
    }

    /// One 32-value sub-block of kind `kind`: the shapes that steer the search differently
    /// (minimum above zero, all equal, grids that tie, outliers, extremes, NaN and infinities).
    fn sub_block(rng: &mut Rng, kind: u64) -> [f32; 32] {
        let scale = 10f32.powi((rng.next() % 13) as i32 - 6);
        let offset = rng.normal() * scale;
        core::array::from_fn(|i| match kind {
            0 => rng.normal() * scale,
            1 => rng.normal() * scale + offset,
            2 => rng.unit().abs() * scale + 1.0,
            3 => -rng.unit().abs() * scale,
            4 => offset,
            5 => 0.0,
            6 => ((rng.next() % 16) as f32 - 4.0) * 0.25,
            7 if i % 9 == 0 => rng.normal() * scale * 100.0,
            7 => rng.normal() * scale,
            8 => rng.normal() * 1e-40,
            9 => rng.normal() * 3e37,
            10 if i == 5 => f32::NAN,
            11 if i == 17 => f32::INFINITY,
            12 if i == 3 => f32::NEG_INFINITY,
            13 => (i % 16) as f32,
            14 if i % 2 == 0 => -0.0,
            _ => rng.normal(),
        })
    }

    #[test]
    fn avx2_q4_k_quantizer_gives_the_scalar_bytes() {
        if !std::is_x86_feature_detected!("avx2") {
            return;
        }
        let mut rng = Rng(0x853c_49e6_748f_ea9b);
        // Odd block counts exercise the single-super-block tail after the interleaved pairs.
        for n_blocks in [1usize, 2, 3, 8, 33] {
            for _ in 0..40 {
                let uniform_kind = rng.next().is_multiple_of(2);
                let first = rng.next() % 17;
                let values: Vec<f32> = (0..n_blocks * 8)
                    .flat_map(|_| {
                        let kind = if uniform_kind { first } else { rng.next() % 17 };
                        sub_block(&mut rng, kind)
                    })
                    .collect();
                let mut got = std::vec![BlockQ4K::zeroed(); n_blocks];
                quantize_q4_k(&values, &mut got);
                for (b, (x, got)) in values.chunks_exact(QK_K).zip(&got).enumerate() {
                    let want = q4_k::quantize_block(x.try_into().unwrap());
                    assert_eq!(*got, want, "block {b} of {n_blocks}: {x:?}");
                }
            }
        }
    }

    #[test]
    fn avx2_q6_k_quantizer_gives_the_scalar_bytes() {
        if !std::is_x86_feature_detected!("avx2") {
            return;
        }
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        for n_blocks in [1usize, 3, 8] {
            for _ in 0..60 {
                let uniform_kind = rng.next().is_multiple_of(2);
                let first = rng.next() % 17;
                // Two 16-value sub-blocks from each 32-value draw.
                let values: Vec<f32> = (0..n_blocks * 8)
                    .flat_map(|_| {
                        let kind = if uniform_kind { first } else { rng.next() % 17 };
                        sub_block(&mut rng, kind)
                    })
                    .collect();
                let mut got = std::vec![BlockQ6K::zeroed(); n_blocks];
                quantize_q6_k(&values, &mut got);
                for (b, (x, got)) in values.chunks_exact(QK_K).zip(&got).enumerate() {
                    let want = q6_k::quantize_block(x.try_into().unwrap());
                    assert_eq!(*got, want, "block {b} of {n_blocks}: {x:?}");
                }
            }
        }
    }
}
