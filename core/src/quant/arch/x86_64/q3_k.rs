//! Q3_K's vec_dot at AVX2 (`ggml_vec_dot_q3_K_q8_K_generic`), over activation groups computed
//! per call or prepared once for many rows (`rows`); its dequantizer is in `dequantize_k`.
//!
//! A quant is `u - 4` with `u = low2 | hbit << 2` in `0..8`. As in the Q6_K kernel, quants and
//! activation are read in `lane_groups` order, so `maddubs` gives `Σ u·x − Σ 4·x` of each 32-value
//! group as the two sub-block sums of lane `m` in 32-bit lane `m` (pairs below 2·7·128 and
//! 2·4·128: exact in i16), and one `madd` (`vpdpwssd` at `VNNI`) with the group's scale pair adds
//! them to lane `m` (the scalar `aux32`). The float steps are the scalar twin's: `sums[l] +=
//! (d·dx)·lane[l]` per block, the lanes added in order at the end.

use core::arch::x86_64::*;

use super::avx2::{accumulate, add_lanes, ScalePairs};
use super::primitives::{add_scaled_pair, grouped};
use super::vector::{f16_le, load32, part, prefetch_block_ahead};
use crate::quant::activation::BlockQ8K;
use crate::quant::k_quants::common::unpack_q3_scales;
use crate::quant::k_quants::BlockQ3K;

/// Activation group `g` (values `32·g..32·g + 32`) through `lane_groups`, and `maddubs(4, x)`: the
/// part of every row's `Σ (u - 4)·x` that depends on the activation alone.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn activation_group<const VBMI: bool>(qs: &[i8; 256], g: usize) -> (__m256i, __m256i) {
    let x = grouped::<VBMI>(load32(part(qs, 32 * g)));
    (x, _mm256_maddubs_epi16(_mm256_set1_epi8(4), x))
}

/// The sixteen scales less 32, sign-extended to i16 in order (the layout [`ScalePairs`] stores).
#[inline]
#[target_feature(enable = "avx2")]
fn signed_scales(block: &BlockQ3K) -> __m256i {
    let s = unpack_q3_scales(&block.scales).map(|s| s as u8);
    let [low, high] = [0, 8].map(|at| {
        let mut eight = [0u8; 8];
        eight.copy_from_slice(&s[at..at + 8]);
        i64::from_le_bytes(eight)
    });
    _mm256_cvtepi8_epi16(_mm_sub_epi8(_mm_set_epi64x(high, low), _mm_set1_epi8(32)))
}

/// The four groups of 32 unsigned quants `u = q + 4` of half `half` of a block, in the
/// `lane_groups` order: group `c` takes bits `2c..2c + 2` of the half's 32 `qs` bytes and bit
/// `4·half + c` of the 32 `hmask` bytes. Both are shuffled before the bit extraction (bytewise,
/// so it commutes): `qs` once per half and `hmask` once per block, not once per group.
#[inline]
#[target_feature(enable = "avx2")]
fn half_quants(qs: __m256i, hmask: __m256i, half: usize) -> [__m256i; 4] {
    let three = _mm256_set1_epi8(3);
    let four = _mm256_set1_epi8(4);
    let lows = [
        qs,
        _mm256_srli_epi16::<2>(qs),
        _mm256_srli_epi16::<4>(qs),
        _mm256_srli_epi16::<6>(qs),
    ];
    // Bit `4·half + c` to bit 2. 16-bit shifts are fine: what crosses from the other byte lands
    // outside the mask (right shifts here are at most 5).
    let highs = if half == 0 {
        [
            _mm256_slli_epi16::<2>(hmask),
            _mm256_slli_epi16::<1>(hmask),
            hmask,
            _mm256_srli_epi16::<1>(hmask),
        ]
    } else {
        [
            _mm256_srli_epi16::<2>(hmask),
            _mm256_srli_epi16::<3>(hmask),
            _mm256_srli_epi16::<4>(hmask),
            _mm256_srli_epi16::<5>(hmask),
        ]
    };
    let mut groups = [_mm256_setzero_si256(); 4];
    for ((g, low), high) in groups.iter_mut().zip(lows).zip(highs) {
        *g = _mm256_or_si256(_mm256_and_si256(low, three), _mm256_and_si256(high, four));
    }
    groups
}

/// `ggml_vec_dot_q3_K_q8_K_generic`'s order over `paired`, whose block `k` gives activation group
/// `g` of `x[k]` as [`activation_group`] does (computed here, or prepared once for many rows).
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn dot<const VNNI: bool, const VBMI: bool, A>(
    w: &[BlockQ3K],
    x: &[BlockQ8K],
    paired: &[A],
    group: impl Fn(&A, usize) -> (__m256i, __m256i),
) -> f32 {
    let mut sums = _mm256_setzero_ps();
    // The previous block's lanes and `d·dx`, whose float steps run one block late, as in the
    // Q6_K kernel (starting from zeros adds `+0·0` to `+0`).
    let mut pending = (_mm256_setzero_si256(), 0.0);
    let mut scale_pairs = ScalePairs::new();
    for ((wb, xb), xp) in w.iter().zip(x).zip(paired) {
        prefetch_block_ahead(wb);
        scale_pairs.store(signed_scales(wb));
        let hmask = grouped::<VBMI>(load32(&wb.hmask));
        let mut acc = _mm256_setzero_si256();
        for half in 0..2 {
            let qs = grouped::<VBMI>(load32(part(&wb.qs, 32 * half)));
            for (quants, c) in half_quants(qs, hmask, half).into_iter().zip(0..) {
                // Group 4·half + c: sub-blocks 8·half + 2c and 8·half + 2c + 1.
                let k = 4 * half + c;
                let (x, bias_x) = group(xp, k);
                let pair_sums = _mm256_sub_epi16(_mm256_maddubs_epi16(quants, x), bias_x);
                acc = add_scaled_pair::<VNNI>(acc, pair_sums, scale_pairs.get(k));
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

#[target_feature(enable = "avx2,f16c")]
fn vec_dot_impl(w: &[BlockQ3K], x: &[BlockQ8K]) -> f32 {
    dot::<false, false, _>(w, x, x, |xb, g| activation_group::<false>(&xb.qs, g))
}

/// `ggml_vec_dot_q3_K_q8_K_generic` at AVX2.
pub(super) fn vec_dot(w: &[BlockQ3K], x: &[BlockQ8K]) -> f32 {
    // SAFETY: the table only hands this kernel out for an available AVX2 level (`pick!` checks
    // `Level::is_available`, which requires avx2 and f16c).
    unsafe { vec_dot_impl(w, x) }
}
