//! IQ4_XS at AVX2: vec_dot (`ggml_vec_dot_iq4_xs_q8_K_generic`) and dequantize
//! (`dequantize_row_iq4_xs`).
//!
//! Each group of 32 indices becomes 32 signed levels with one byte shuffle of `kvalues_iq4nl`
//! (low nibbles = elements 0..16, high nibbles = 16..32, IQ4_NL's packing). The dot widens levels
//! and quants to i16 before `madd` (exact for every byte, -128 included), reduces the eight
//! groups of a block to their eight integer sums at once, forms the eight float terms
//! `(d·dx·(ls − 32))·sumi` side by side (each rounds as the scalar expression does), and adds them
//! to `sumf` in group order: the scalar twin's serial float sum.
//!
//! The matmul kernels run the legacy types' tiles (`legacy::matmul`) with a group of 32 values as
//! their block, eight to a super-block: per group, the weight row's `d` and `ls − 32` and the
//! column's Q8_K `d`, and the term `((d · d_x) · (ls − 32)) · sumi` on a strip's rows at once,
//! added to each row's `sumf` in group order (at VNNI `d · d_x`, the scalar `d4d8`, is taken once
//! per super-block).

use super::legacy::matmul::{gemm_avx2_wide_grouped, gemm_vnni_grouped, Kit};
use super::tokens::{kernel, Avx2, Avx512Vnni};
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

/// The 6-bit scale of group `ib` minus 32, as f32 (the scalar `group_scale_code(ib) - 32`).
#[inline(always)]
fn group_scale(block: &BlockIq4Xs, ib: usize) -> f32 {
    let low = block
        .scales_l
        .get(ib / 2)
        .map_or(0, |b| (b >> (4 * (ib % 2))) & 0xf);
    let high = (u16::from_le_bytes(block.scales_h) >> (2 * (ib % 8))) & 3;
    (i32::from(low) | (i32::from(high) << 4)) as f32 - 32.0
}

/// Group `g` of a Q8_K block's quants (group 0 past the block's eight).
#[inline(always)]
fn q8k_group(xb: &BlockQ8K, g: usize) -> &[i8; 32] {
    let at = 32 * (g % 8);
    xb.qs
        .get(at..at + 32)
        .and_then(|q| q.first_chunk::<32>())
        .unwrap_or(&[0; 32])
}

/// Group `g` of a block's 32 levels as signed bytes (group 0 past the block's eight).
#[inline]
#[target_feature(enable = "avx2")]
fn group_levels(block: &BlockIq4Xs, g: usize) -> __m256i {
    levels(&block.qs[g % 8])
}

/// The scalar twin's group term on a strip's rows: `((d · d_x) · (ls − 32)) · sumi`, one rounding
/// per product, in its order.
#[inline]
#[target_feature(enable = "avx2")]
fn term8(sumi: __m256, d: __m256, ls: __m256, dx: __m256) -> __m256 {
    _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(d, dx), ls), sumi)
}

/// [`term8`] on sixteen rows, `d · d_x` (`d4d8`) taken once per super-block: `(d4d8 · (ls − 32))
/// · sumi`.
#[inline]
#[target_feature(enable = "avx512f")]
fn term16(sumi: __m512, ls: __m512, d4d8: __m512) -> __m512 {
    _mm512_mul_ps(_mm512_mul_ps(d4d8, ls), sumi)
}

/// Fewer columns than this run [`vec_dot`] per row and column at AVX2, where the tiles start
/// to pay from three columns (docs/kernel-experiments.md).
const MIN_COLUMNS: usize = 3;

/// [`MIN_COLUMNS`] at VNNI: the tiles pay from two columns.
const MIN_COLUMNS_VNNI: usize = 2;

/// `out[r]` = the AVX2 vec_dot of row `r` of `w` (`row_blocks` blocks each) and `x`.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn each_row(t: Avx2, w: &[BlockIq4Xs], row_blocks: usize, x: &[BlockQ8K], out: &mut [f32]) {
    for (o, row) in out.iter_mut().zip(w.chunks_exact(row_blocks.max(1))) {
        *o = vec_dot(t, row, x);
    }
}

/// The eight 6-bit group scales minus 32, as f32 (the scalar `group_scale_code(ib) - 32`).
#[inline(always)]
fn group_scales(block: &BlockIq4Xs) -> [f32; 8] {
    core::array::from_fn(|ib| group_scale(block, ib))
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

    /// IQ4_XS matmul, AVX2: the full-byte tiles (levels widened to i16) over groups of 32.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn matmul(
        t: Avx2,
        w: &[BlockIq4Xs],
        row_blocks: usize,
        x: &[BlockQ8K],
        n: usize,
        y: &mut [f32],
        y_stride: usize,
    ) {
        let kit = Kit {
            bias: 0,
            min_columns: MIN_COLUMNS,
            decode: |b: &BlockIq4Xs, g: usize| group_levels(b, g),
            w_scales: |b: &BlockIq4Xs, g: usize| (f16_le(b.d), group_scale(b, g)),
            x_scales: |xb: &BlockQ8K, _: usize| (xb.scale(), 0.0),
            x_quants: q8k_group,
            term: |sumi, d, ls, dx| term8(sumi, d, ls, dx),
            rows: |w: &[BlockIq4Xs], rb, x: &[BlockQ8K], out: &mut [f32]| each_row(t, w, rb, x, out),
        };
        gemm_avx2_wide_grouped::<8, _, _>(w, row_blocks, x, n, y, y_stride, kit)
    }

    /// IQ4_XS matmul, AVX-512 VNNI: the VNNI tiles (levels biased by 128) over groups of 32.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(super) fn matmul_vnni(
        t: Avx512Vnni,
        w: &[BlockIq4Xs],
        row_blocks: usize,
        x: &[BlockQ8K],
        n: usize,
        y: &mut [f32],
        y_stride: usize,
    ) {
        let kit = Kit {
            bias: -128,
            min_columns: MIN_COLUMNS_VNNI,
            decode: |b: &BlockIq4Xs, g: usize| {
                _mm256_xor_si256(group_levels(b, g), _mm256_set1_epi8(-128))
            },
            w_scales: |b: &BlockIq4Xs, g: usize| (f16_le(b.d), group_scale(b, g)),
            x_scales: |xb: &BlockQ8K, _: usize| (xb.scale(), 0.0),
            x_quants: q8k_group,
            term: (
                |d: __m512, dx: __m512| _mm512_mul_ps(d, dx),
                |sumi, _, ls, _, _, d4d8| term16(sumi, ls, d4d8),
            ),
            rows: |w: &[BlockIq4Xs], rb, x: &[BlockQ8K], out: &mut [f32]| {
                each_row(t.avx2(), w, rb, x, out)
            },
        };
        gemm_vnni_grouped::<8, _, _>(w, row_blocks, x, n, y, y_stride, kit)
    }
}
