//! IQ4_XS at AVX2: vec_dot (`ggml_vec_dot_iq4_xs_q8_K_generic`) and dequantize
//! (`dequantize_row_iq4_xs`).
//!
//! Each group of 32 indices becomes 32 signed levels with one byte shuffle of `kvalues_iq4nl`
//! (low nibbles = elements 0..16, high nibbles = 16..32, IQ4_NL's packing). The dot widens levels
//! and quants to i16 before `madd` (exact for every byte, -128 included), reduces the eight
//! groups of a block to their eight integer sums at once, forms the eight float terms
//! `(d·dx·(ls − 32))·sumi` side by side (each rounds as the scalar expression does), and adds them
//! to `sumf` in group order: the scalar twin's serial float sum.

use super::tokens::{kernel, Avx2};
use super::vector::{dot_levels, f16_le, load16, q4_0_nibbles, store8, transpose_sums};
use crate::quant::activation::BlockQ8K;
use crate::quant::iq::iq4_xs::BlockIq4Xs;
use crate::quant::iq::tables::KVALUES_IQ4NL;
use core::arch::x86_64::*;

/// The 32 signed levels of one group: element `j` from the low nibble of byte `j`, element
/// `j + 16` from its high nibble.
#[inline]
#[target_feature(enable = "avx2")]
fn levels(qs: &[u8; 16]) -> __m256i {
    let table = load16(&KVALUES_IQ4NL);
    _mm256_shuffle_epi8(_mm256_set_m128i(table, table), q4_0_nibbles(qs))
}

/// The eight 6-bit group scales minus 32, as f32 (the scalar `group_scale_code(ib) - 32`).
#[inline(always)]
fn group_scales(block: &BlockIq4Xs) -> [f32; 8] {
    let high = u16::from_le_bytes(block.scales_h);
    core::array::from_fn(|ib| {
        let low = block
            .scales_l
            .get(ib / 2)
            .map_or(0, |b| (b >> (4 * (ib % 2))) & 0xf);
        let code = i32::from(low) | (i32::from((high >> (2 * ib)) & 3) << 4);
        (code - 32) as f32
    })
}

kernel! {
    /// `ggml_vec_dot_iq4_xs_q8_K_generic` at AVX2.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn vec_dot(_t: Avx2, w: &[BlockIq4Xs], x: &[BlockQ8K]) -> f32 {
        let mut sumf = 0.0f32;
        for (wb, xb) in w.iter().zip(x) {
            let mut partial = [_mm256_setzero_si256(); 8];
            let groups = wb.qs.iter().zip(xb.qs.chunks_exact(32));
            for (p, (qs, q8)) in partial.iter_mut().zip(groups) {
                if let Some(q8) = q8.first_chunk::<32>() {
                    *p = dot_levels(levels(qs), q8);
                }
            }
            let sumi = _mm256_cvtepi32_ps(transpose_sums(&partial));
            let scales = group_scales(wb);
            // SAFETY: `scales` holds eight f32; `loadu` has no alignment requirement.
            let scales = unsafe { _mm256_loadu_ps(scales.as_ptr()) };
            // dl = (d·dx)·(ls − 32), then dl·sumi: the scalar expression lane by lane.
            let dl = _mm256_mul_ps(_mm256_set1_ps(f16_le(wb.d) * xb.scale()), scales);
            let terms = _mm256_mul_ps(dl, sumi);
            let mut lanes = [0.0f32; 8];
            // SAFETY: `lanes` holds eight f32; `storeu` has no alignment requirement.
            unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), terms) };
            for t in lanes {
                sumf += t;
            }
        }
        sumf
    }

    /// `dequantize_row_iq4_xs` at AVX2: `(d·(ls − 32))·level`.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn dequantize(_t: Avx2, blocks: &[BlockIq4Xs], out: &mut [f32]) {
        for (block, values) in blocks.iter().zip(out.chunks_exact_mut(256)) {
            let d = f16_le(block.d);
            let scales = group_scales(block);
            let groups = block.qs.iter().zip(values.chunks_exact_mut(32));
            for ((qs, values), &scale) in groups.zip(&scales) {
                let dl = _mm256_set1_ps(d * scale);
                let q = levels(qs);
                let halves = [_mm256_castsi256_si128(q), _mm256_extracti128_si256::<1>(q)];
                for (eight, k) in values.chunks_exact_mut(8).zip(0..) {
                    let half = halves[k / 2];
                    let bytes = if k % 2 == 0 {
                        half
                    } else {
                        _mm_srli_si128::<8>(half)
                    };
                    let level = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes));
                    store8(eight, _mm256_mul_ps(dl, level));
                }
            }
        }
    }
}
