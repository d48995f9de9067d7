//! Q3_K's vec_dot at AVX2 (`ggml_vec_dot_q3_K_q8_K_generic`); its dequantizer is in
//! `dequantize_k`.
//!
//! A quant is `u - 4` with `u = low2 | hbit << 2` in `0..8`. The dot takes `Σ u·x − Σ 4·x` per pair
//! of same-lane elements with `maddubs` (pairs below 2·7·128 and 2·4·128: exact in i16), then
//! scales the sub-block sums into eight i32 lanes (lane = element index mod 8, the scalar
//! `aux32`) with `madd`, as the Q6_K kernel does; the float steps are the scalar twin's:
//! `sums[l] += (d·dx)·lane[l]` per block, the lanes added in order at the end.

use core::arch::x86_64::*;

use super::avx2::{load32, part};
use crate::quant::activation::BlockQ8K;
use crate::quant::cast::f16_le;
use crate::quant::k_quants::common::unpack_q3_scales;
use crate::quant::k_quants::BlockQ3K;

/// In each 16-byte half, element `k` next to element `k + 8`, so that `maddubs` adds two products
/// of the same lane (element index mod 8).
#[inline]
#[target_feature(enable = "avx2")]
fn pair_lanes(v: __m256i) -> __m256i {
    let order = _mm256_setr_epi8(
        0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15, 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5,
        13, 6, 14, 7, 15,
    );
    _mm256_shuffle_epi8(v, order)
}

/// The eight groups of 32 unsigned quants `u = q + 4` of one block, in element order: group
/// `4·half + c` takes bits `2c..2c+2` of the half's 32 `qs` bytes and bit `4·half + c` of the
/// 32 `hmask` bytes.
#[inline]
#[target_feature(enable = "avx2")]
fn unsigned_quants(block: &BlockQ3K) -> [__m256i; 8] {
    let three = _mm256_set1_epi8(3);
    let one = _mm256_set1_epi8(1);
    let hmask = load32(&block.hmask);
    let mut groups = [_mm256_setzero_si256(); 8];
    for (half, out) in groups.chunks_exact_mut(4).enumerate() {
        let qs = load32(part(&block.qs, 32 * half));
        // 16-bit shifts: the mask after each shift keeps only bits of the byte's own.
        let lows = [
            qs,
            _mm256_srli_epi16::<2>(qs),
            _mm256_srli_epi16::<4>(qs),
            _mm256_srli_epi16::<6>(qs),
        ];
        let h = if half == 0 {
            hmask
        } else {
            _mm256_srli_epi16::<4>(hmask)
        };
        let highs = [
            h,
            _mm256_srli_epi16::<1>(h),
            _mm256_srli_epi16::<2>(h),
            _mm256_srli_epi16::<3>(h),
        ];
        for ((g, low), high) in out.iter_mut().zip(lows).zip(highs) {
            let high = _mm256_slli_epi16::<2>(_mm256_and_si256(high, one));
            *g = _mm256_or_si256(_mm256_and_si256(low, three), high);
        }
    }
    groups
}

/// `sums[l] += d * lanes[l]` (multiply, then add: the scalar `accumulate_lanes`).
#[inline]
#[target_feature(enable = "avx2")]
fn accumulate(sums: __m256, d: f32, lanes: __m256i) -> __m256 {
    _mm256_add_ps(
        sums,
        _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes)),
    )
}

#[target_feature(enable = "avx2,f16c")]
fn vec_dot_impl(w: &[BlockQ3K], x: &[BlockQ8K]) -> f32 {
    let mut sums = _mm256_setzero_ps();
    let four = _mm256_set1_epi8(4);
    for (wb, xb) in w.iter().zip(x) {
        let groups = unsigned_quants(wb);
        let scales = unpack_q3_scales(&wb.scales);
        // Lanes 0..3 and 4..7 of each 128-bit half (after the pair shuffle and `madd`).
        let mut low = _mm256_setzero_si256();
        let mut high = _mm256_setzero_si256();
        // Groups 2p and 2p + 1 hold sub-blocks 4p, 4p + 1 (low / high half of group 2p) and
        // 4p + 2, 4p + 3 (group 2p + 1): interleaved, each i16 pair gets its two scales.
        for (p, pair) in groups.chunks_exact(2).enumerate() {
            let mut sums16 = [_mm256_setzero_si256(); 2];
            for ((s, &g), k) in sums16.iter_mut().zip(pair).zip(0..) {
                let xq = pair_lanes(load32(part(&xb.qs, 64 * p + 32 * k)));
                let ux = _mm256_maddubs_epi16(pair_lanes(g), xq);
                *s = _mm256_sub_epi16(ux, _mm256_maddubs_epi16(four, xq));
            }
            let sc = |i: usize| i32::from(scales.get(4 * p + i).copied().unwrap_or(32)) - 32;
            let pack = |a: i32, b: i32| (b << 16) | (a & 0xffff);
            let lo_pair = pack(sc(0), sc(2));
            let hi_pair = pack(sc(1), sc(3));
            let scale = _mm256_setr_epi32(
                lo_pair, lo_pair, lo_pair, lo_pair, hi_pair, hi_pair, hi_pair, hi_pair,
            );
            let [a, b] = sums16;
            low = _mm256_add_epi32(low, _mm256_madd_epi16(_mm256_unpacklo_epi16(a, b), scale));
            high = _mm256_add_epi32(high, _mm256_madd_epi16(_mm256_unpackhi_epi16(a, b), scale));
        }
        let lanes = _mm256_add_epi32(
            _mm256_permute2x128_si256::<0x20>(low, high),
            _mm256_permute2x128_si256::<0x31>(low, high),
        );
        sums = accumulate(sums, f16_le(wb.d) * xb.scale(), lanes);
    }
    let mut lanes = [0.0f32; 8];
    // SAFETY: `lanes` holds eight f32; `storeu` has no alignment requirement.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), sums) };
    let mut sumf = 0.0f32;
    for s in lanes {
        sumf += s;
    }
    sumf
}

/// `ggml_vec_dot_q3_K_q8_K_generic` at AVX2.
pub(super) fn vec_dot(w: &[BlockQ3K], x: &[BlockQ8K]) -> f32 {
    // SAFETY: the table only hands this kernel out for an available AVX2 level (`pick!` checks
    // `Level::is_available`, which requires avx2 and f16c).
    unsafe { vec_dot_impl(w, x) }
}
