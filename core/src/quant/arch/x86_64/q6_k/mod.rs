//! Q6_K: vec_dot, multi-row, dequantize and quantize.
//!
//! The dot reads quants and activation in `lane_groups` order: in 32-bit lane `m` of a group of 32
//! values, the first sub-block's two elements of lane `m`, then the second's. So each `maddubs`
//! leaves the group's two sub-block sums of lane `m` as the i16 pair of lane `m`, and one `madd`
//! (`vpdpwssd` at VNNI) with the pair's two scales adds them to lane `m`. The VNNI entries run a
//! copy with VBMI's one-`vpermb` lane groups where the CPU has it.
//!
//! The quantizer runs `make_qx_quants` for the 16 sub-blocks of 16 side by side, 8 per vector (the
//! scalar twin is `k_quants::common::make_qx_quants`).

use crate::quant::OutputColumns;
use core::arch::x86_64::*;

pub(super) mod matmul;

use super::drivers::prepared_rows;
use super::primitives::Primitives;
use super::qkx2_lanes::nearest_int;
use super::tokens::{every_level, kernel, Avx2};
use super::vector::{
    accumulate, add_lanes, f16_le, load16, load32, part, prefetch_block_ahead, scale_i8x16,
    ScalePairs,
};
use crate::quant::activation::{BlockQ8K, QK_K};
use crate::quant::k_quants::common::GROUP_MAX_EPS;
use crate::quant::k_quants::{q6_k, BlockQ6K};

/// Activation group `g` (bytes `32g..32g + 32`) as the Q6_K dot takes it: through
/// [`lane_groups`], and `maddubs(32, x)` of that (the bias part of `Σ (u - 32)·x`).
#[inline]
#[target_feature(enable = "avx2")]
fn q6_k_activation_group<P: Primitives>(p: P, qs: &[i8; 256], g: usize) -> (__m256i, __m256i) {
    let x = p.grouped(load32(part(qs, 32 * g)));
    (x, _mm256_maddubs_epi16(_mm256_set1_epi8(32), x))
}

/// `ggml_vec_dot_q6_K_q8_K_generic`'s order over `paired`, whose block `k` gives activation group
/// `g` of `x[k]` as [`q6_k_activation_group`] does (computed here, or prepared once for many
/// rows).
///
/// The quants are read in [`lane_groups`] order: in 32-bit lane `m` of a group of 32 values, the
/// first sub-block's two elements of lane `m`, then the second's. So each `maddubs` leaves the
/// group's two sub-block sums of lane `m` as the i16 pair of lane `m`, and one `madd` (`vpdpwssd`
/// at `VNNI`) with the pair's two scales adds them to lane `m`: no interleaving of sub-blocks and
/// no reordering of lanes per block. The scales, sign-extended once a block, are broadcast from
/// memory (a load, not a shuffle) per group.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn dot_q6_k<P: Primitives, A>(
    p: P,
    w: &[BlockQ6K],
    x: &[BlockQ8K],
    paired: &[A],
    group: impl Fn(&A, usize) -> (__m256i, __m256i),
) -> f32 {
    let mut sums = _mm256_setzero_ps();
    // The previous block's lanes and `d·dx`, whose float steps run one block late (see
    // `dot_with_mins`; starting from zeros adds `+0·0` to `+0`).
    let mut pending = (_mm256_setzero_si256(), 0.0);
    let nibble = _mm256_set1_epi8(0x0f);
    let mut scale_pairs = ScalePairs::new();
    for ((wb, xb), xp) in w.iter().zip(x).zip(paired) {
        prefetch_block_ahead(wb);
        scale_pairs.store(_mm256_cvtepi8_epi16(load16(&wb.scales)));
        let mut acc = _mm256_setzero_si256();
        let halves = wb.ql.chunks_exact(64).zip(wb.qh.chunks_exact(32));
        for (half, (ql, qh)) in halves.enumerate() {
            // Reordered before the bit extraction (bytewise, so it commutes): three permutes,
            // not one per group of 32 values.
            let a = p.grouped(load32(part(ql, 0)));
            let b = p.grouped(load32(part(ql, 32)));
            let h = p.grouped(load32(part(qh, 0)));
            let high_bits = q6_k_high_bits(h);
            let a_high = _mm256_and_si256(_mm256_srli_epi16::<4>(a), nibble);
            let b_high = _mm256_and_si256(_mm256_srli_epi16::<4>(b), nibble);
            // Four groups of 32 values (each two sub-blocks of 16) as unsigned q + 32 (0..63).
            let groups = [
                _mm256_or_si256(_mm256_and_si256(a, nibble), high_bits[0]),
                _mm256_or_si256(_mm256_and_si256(b, nibble), high_bits[1]),
                _mm256_or_si256(a_high, high_bits[2]),
                _mm256_or_si256(b_high, high_bits[3]),
            ];
            for (quants, g) in groups.into_iter().zip(0..) {
                let k = 4 * half + g;
                let (x, bias_x) = group(xp, k);
                // Σ (u - 32)·x = maddubs(u, x) - maddubs(32, x): each i16 is below 2·63·128 +
                // 2·32·128 in magnitude, exact.
                let pair_sums = _mm256_sub_epi16(_mm256_maddubs_epi16(quants, x), bias_x);
                acc = p.add_scaled_pair(acc, pair_sums, scale_pairs.get(k));
            }
        }
        let d = f16_le(wb.d) * xb.scale();
        let (lanes, d_before) = pending;
        sums = accumulate(sums, d_before, lanes);
        pending = (acc, d);
    }
    let (lanes, d) = pending;
    add_lanes(0.0, accumulate(sums, d, lanes))
}

/// The four 2-bit fields of each Q6_K `qh` byte (bits `2g..2g + 2` for group `g`) at bits 4..5,
/// where they join the group's low nibble: one shift and one mask each. (16-bit shifts are
/// fine: bits crossing into the other byte land outside the mask.)
#[inline]
#[target_feature(enable = "avx2")]
fn q6_k_high_bits(h: __m256i) -> [__m256i; 4] {
    let bits45 = _mm256_set1_epi8(0x30);
    [
        _mm256_and_si256(_mm256_slli_epi16::<4>(h), bits45),
        _mm256_and_si256(_mm256_slli_epi16::<2>(h), bits45),
        _mm256_and_si256(h, bits45),
        _mm256_and_si256(_mm256_srli_epi16::<2>(h), bits45),
    ]
}

every_level! {
    /// `ggml_vec_dot_q6_K_q8_K_generic`.
    fn vec_dot_q6_k, vec_dot_q6_k_vnni_only, vec_dot_q6_k_vbmi => vec_dot_q6_k_vnni(
        t,
        w: &[BlockQ6K],
        x: &[BlockQ8K],
    ) -> f32 {
        dot_q6_k(t, w, x, x, |xb, g| q6_k_activation_group(t, &xb.qs, g))
    }
}

/// Q6_K rows: besides the shuffles, each group's `maddubs(32, x)` is prepared too (two of the
/// five vector steps per group that do not depend on the weights). scale products by `vpdpwssd` at
/// VNNI.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn q6_k_rows<P: Primitives>(
    p: P,
    w: &[BlockQ6K],
    row_blocks: usize,
    x: &[BlockQ8K],
    out: &mut [f32],
    single: impl Fn(&[BlockQ6K], &[BlockQ8K]) -> f32,
) {
    prepared_rows(
        w,
        row_blocks,
        x,
        out,
        |xb| -> [(__m256i, __m256i); 8] {
            core::array::from_fn(|g| q6_k_activation_group(p, &xb.qs, g))
        },
        |row, paired| {
            dot_q6_k(p, row, x, paired, |groups, g| {
                groups.get(g).copied().unwrap_or(groups[0])
            })
        },
        single,
    )
}

every_level! {
    /// Q6_K rows.
    fn rows_q6_k, rows_q6_k_vnni_only, rows_q6_k_vbmi => rows_q6_k_vnni(
        t,
        w: &[BlockQ6K],
        row_blocks: usize,
        x: &[BlockQ8K],
        out: &mut [f32],
    ); single = vec_dot_q6_k, vec_dot_q6_k_vnni_only, vec_dot_q6_k_vbmi {
        q6_k_rows(t, w, row_blocks, x, out, single)
    }
}

every_level! {
    /// Q6_K matmul.
    fn matmul_q6_k, matmul_q6_k_vnni_only, matmul_q6_k_vbmi => matmul_q6_k_vnni(
        t,
        w: &[BlockQ6K],
        row_blocks: usize,
        x: &[BlockQ8K],
        n: usize,
        y: &mut OutputColumns<'_, '_>,
    ); single = vec_dot_q6_k, vec_dot_q6_k_vnni_only, vec_dot_q6_k_vbmi {
        matmul::q6_k_matmul(t, w, row_blocks, x, n, y, single)
    }
}

kernel! {
    /// `dequantize_row_q6_K`: `(d * sc) * q` with `q` in -32..31.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn dequantize_q6_k(_t: Avx2, blocks: &[BlockQ6K], out: &mut [f32]) {
        let nibble = _mm256_set1_epi8(0x0f);
        let bias = _mm256_set1_epi8(32);
        for (block, values) in blocks.iter().zip(out.chunks_exact_mut(256)) {
            let d = f16_le(block.d);
            let halves = block.ql.chunks_exact(64).zip(block.qh.chunks_exact(32));
            let halves = halves.zip(values.chunks_exact_mut(128));
            for (((ql, qh), values), scales) in halves.zip(block.scales.chunks_exact(8)) {
                let a = load32(part(ql, 0));
                let b = load32(part(ql, 32));
                let h = load32(part(qh, 0));
                let lows = [
                    _mm256_and_si256(a, nibble),
                    _mm256_and_si256(b, nibble),
                    _mm256_and_si256(_mm256_srli_epi16::<4>(a), nibble),
                    _mm256_and_si256(_mm256_srli_epi16::<4>(b), nibble),
                ];
                let groups = values
                    .chunks_exact_mut(32)
                    .zip(lows.into_iter().zip(q6_k_high_bits(h)));
                for ((values, (low, high)), sc) in groups.zip(scales.chunks_exact(2)) {
                    let q = _mm256_sub_epi8(_mm256_or_si256(low, high), bias);
                    let (first, second) = values.split_at_mut(16);
                    let &[sc1, sc2] = sc else {
                        continue;
                    };
                    let d1 = _mm256_set1_ps(d * f32::from(sc1));
                    let d2 = _mm256_set1_ps(d * f32::from(sc2));
                    scale_i8x16(first, _mm256_castsi256_si128(q), d1);
                    scale_i8x16(second, _mm256_extracti128_si256::<1>(q), d2);
                }
            }
        }
    }
}

/// Sub-blocks in half a Q6_K super-block, one per lane.
const LANES: usize = 8;

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

kernel! {
    /// `quantize_row_q6_K_ref`.
    #[target_feature(enable = "avx2")]
    pub(super) fn quantize_q6_k(_t: Avx2, values: &[f32], blocks: &mut [BlockQ6K]) {
        for (x, out) in values.chunks_exact(QK_K).zip(blocks) {
            if let Ok(x) = <&[f32; QK_K]>::try_from(x) {
                let (scales, levels) = fit_q6_k(x);
                *out = q6_k::block_from_fits(x, &scales, levels);
            }
        }
    }
}
