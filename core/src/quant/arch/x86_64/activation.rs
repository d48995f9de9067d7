//! The activation quantizers at AVX2: Q8_0 (`quantize_row_q8_0_ref`) and Q8_K
//! (`quantize_row_q8_K_ref`), the second operands of every vec_dot (the VNNI level uses these).

use core::arch::x86_64::*;

use super::tokens::{kernel, Avx2};
use crate::quant::activation::{BlockQ8K, BlockQ8_0, BlockQ8_1};

/// The low byte of each i32 lane (C's `(int8_t)` of an int), eight lanes to eight bytes.
#[inline]
#[target_feature(enable = "avx2")]
fn low_bytes(v: __m256i) -> [u8; 8] {
    let order = _mm256_setr_epi8(
        0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1, -1, -1, -1,
        -1, -1, -1, -1, -1, -1, -1, -1,
    );
    let packed = _mm256_shuffle_epi8(v, order);
    let low = _mm_cvtsi128_si32(_mm256_castsi256_si128(packed)) as u32;
    let high = _mm_cvtsi128_si32(_mm256_extracti128_si256::<1>(packed)) as u32;
    (u64::from(low) | (u64::from(high) << 32)).to_le_bytes()
}

kernel! {
    /// `quantize_row_q8_K_ref`: `iscale = -127 / max` (`max` the first value of largest magnitude,
    /// NaNs never largest), `q = min(127, nearest_int(iscale * x))` as a byte, the sums of each 16
    /// quants, `d = 1 / iscale`. The scan for the largest magnitude and the rounding run eight values
    /// at a time with the scalar operations (multiply, then add the 1.5·2^23 rounding constant).
    #[target_feature(enable = "avx2")]
    pub(super) fn quantize_q8_k(_t: Avx2, values: &[f32], blocks: &mut [BlockQ8K]) {
        const MAGIC: f32 = 12_582_912.0;
        for (x, block) in values.chunks_exact(256).zip(blocks) {
            let mut top = _mm256_setzero_si256();
            let abs_mask = _mm256_set1_epi32(0x7fff_ffff);
            let infinity = _mm256_set1_epi32(0x7f80_0000);
            for chunk in x.chunks_exact(8) {
                // SAFETY: `chunk` holds eight f32; `loadu` has no alignment requirement.
                let v = unsafe { _mm256_loadu_si256(chunk.as_ptr().cast()) };
                let magnitude = _mm256_and_si256(v, abs_mask);
                let nan = _mm256_cmpgt_epi32(magnitude, infinity);
                top = _mm256_max_epi32(top, _mm256_andnot_si256(nan, magnitude));
            }
            let mut lanes = [0u32; 8];
            // SAFETY: `lanes` holds eight u32; `storeu` has no alignment requirement.
            unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), top) };
            let top = lanes.into_iter().max().unwrap_or(0);
            *block = BlockQ8K {
                d: [0; 4],
                qs: [0; 256],
                bsums: [[0; 2]; 16],
            };
            if top == 0 {
                continue;
            }
            let max = x
                .iter()
                .copied()
                .find(|v| v.to_bits() & 0x7fff_ffff == top)
                .unwrap_or(0.0);
            let iscale = -127.0 / max;
            let scale = _mm256_set1_ps(iscale);
            let magic = _mm256_set1_ps(MAGIC);
            let mantissa = _mm256_set1_epi32(0x007f_ffff);
            let offset = _mm256_set1_epi32(0x0040_0000);
            let limit = _mm256_set1_epi32(127);
            for (chunk, q) in x.chunks_exact(8).zip(block.qs.chunks_exact_mut(8)) {
                // SAFETY: `chunk` holds eight f32; `loadu` has no alignment requirement.
                let v = unsafe { _mm256_loadu_ps(chunk.as_ptr()) };
                let shifted = _mm256_add_ps(_mm256_mul_ps(scale, v), magic);
                let rounded = _mm256_sub_epi32(
                    _mm256_and_si256(_mm256_castps_si256(shifted), mantissa),
                    offset,
                );
                let bytes = low_bytes(_mm256_min_epi32(rounded, limit));
                for (q, b) in q.iter_mut().zip(bytes) {
                    *q = b as i8;
                }
            }
            for (sum, qs) in block.bsums.iter_mut().zip(block.qs.chunks_exact(16)) {
                let total: i32 = qs.iter().map(|&q| i32::from(q)).sum();
                *sum = (total as i16).to_le_bytes();
            }
            block.d = (1.0 / iscale).to_le_bytes();
        }
    }
}

/// C's `roundf` converted to int as x86 does (the scalar `c_round_i32`): ties away from zero,
/// `i32::MIN` for NaN and values outside the i32 range.
#[inline]
#[target_feature(enable = "avx2")]
fn c_round_i32x8(x: __m256) -> __m256i {
    let in_range = _mm256_and_ps(
        _mm256_cmp_ps::<_CMP_GE_OQ>(x, _mm256_set1_ps(-2_147_483_648.0)),
        _mm256_cmp_ps::<_CMP_LT_OQ>(x, _mm256_set1_ps(2_147_483_648.0)),
    );
    let truncated = _mm256_cvttps_epi32(x);
    let fraction = _mm256_sub_ps(x, _mm256_cvtepi32_ps(truncated));
    let up = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_GE_OQ>(fraction, _mm256_set1_ps(0.5)));
    let down = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_LE_OQ>(fraction, _mm256_set1_ps(-0.5)));
    // The masks are -1 where true: subtracting `up` adds one, adding `down` subtracts one.
    let rounded = _mm256_add_epi32(_mm256_sub_epi32(truncated, up), down);
    _mm256_blendv_epi8(
        _mm256_set1_epi32(i32::MIN),
        rounded,
        _mm256_castps_si256(in_range),
    )
}

/// One block of `quantize_row_q8_0_ref` from 32 values: `d = amax / 127` and `q = roundf(x / d)`
/// as bytes, the maximum and the rounding eight values at a time; `None` when a value is NaN (the
/// scalar twin's running `MAX` restarts after each NaN, an order a vector maximum does not keep).
#[inline]
#[target_feature(enable = "avx2")]
fn q8_block(x: &[f32; 32]) -> Option<(f32, [i8; 32])> {
    let abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fff_ffff));
    let mut v = [_mm256_setzero_ps(); 4];
    for (v, chunk) in v.iter_mut().zip(x.chunks_exact(8)) {
        // SAFETY: `chunk` holds eight f32; `loadu` has no alignment requirement.
        *v = unsafe { _mm256_loadu_ps(chunk.as_ptr()) };
    }
    let [a, b, c, d] = v;
    let unordered = _mm256_or_ps(
        _mm256_cmp_ps::<_CMP_UNORD_Q>(a, b),
        _mm256_cmp_ps::<_CMP_UNORD_Q>(c, d),
    );
    if _mm256_movemask_ps(unordered) != 0 {
        return None;
    }
    let m = _mm256_max_ps(
        _mm256_max_ps(_mm256_and_ps(a, abs_mask), _mm256_and_ps(b, abs_mask)),
        _mm256_max_ps(_mm256_and_ps(c, abs_mask), _mm256_and_ps(d, abs_mask)),
    );
    let mut lanes = [0.0f32; 8];
    // SAFETY: `lanes` holds eight f32; `storeu` has no alignment requirement.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), m) };
    // No NaN here, so the order of the maxima does not matter.
    let amax = lanes
        .into_iter()
        .fold(0.0f32, |m, v| if m > v { m } else { v });
    let d = amax / 127.0;
    let id = _mm256_set1_ps(if d != 0.0 { 1.0 / d } else { 0.0 });
    let mut qs = [0i8; 32];
    for (v, q) in v.into_iter().zip(qs.chunks_exact_mut(8)) {
        let bytes = low_bytes(c_round_i32x8(_mm256_mul_ps(v, id)));
        for (q, b) in q.iter_mut().zip(bytes) {
            *q = b as i8;
        }
    }
    Some((d, qs))
}

kernel! {
    /// `quantize_row_q8_0_ref` ([`q8_block`]; a block with a NaN takes the scalar twin).
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn quantize_q8_0(_t: Avx2, values: &[f32], blocks: &mut [BlockQ8_0]) {
        let (chunks, _) = values.as_chunks::<32>();
        for (x, block) in chunks.iter().zip(blocks) {
            match q8_block(x) {
                Some((d, qs)) => {
                    block.d = crate::quant::cast::f16_to_le(d);
                    block.qs = qs;
                }
                None => *block = crate::quant::legacy::q8_0::quantize_block(x),
            }
        }
    }

    /// `quantize_row_q8_1_ref`: [`quantize_q8_0`]'s quants and `d`, and `s = d · Σ q` (the sum of
    /// the quants as bytes, as the scalar twin sums them). Q4_1's and Q5_1's activations, whose
    /// portable quantizer was a visible share of a matvec (figures: docs/kernel-experiments.md).
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn quantize_q8_1(_t: Avx2, values: &[f32], blocks: &mut [BlockQ8_1]) {
        let (chunks, _) = values.as_chunks::<32>();
        for (x, block) in chunks.iter().zip(blocks) {
            match q8_block(x) {
                Some((d, qs)) => {
                    let sum: i32 = qs.iter().map(|&q| i32::from(q)).sum();
                    block.d = crate::quant::cast::f16_to_le(d);
                    block.qs = qs;
                    block.s = crate::quant::cast::f16_to_le(sum as f32 * d);
                }
                None => *block = crate::quant::legacy::q8_1::quantize_block(x),
            }
        }
    }
}
