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
//! The rows kernels put eight rows in the eight lanes of one vector: per group of 32 values, the
//! eight rows' integer sums are transposed into one vector (lane `r` = row `r`), and the term
//! `((d · d_x) · (ls − 32)) · sumi` is formed and added to lane `r`'s `sumf` for the eight rows
//! at once: each row keeps its twin's serial sum, while eight rows share the one chain of adds
//! (the single-row kernel waits on a chain of eight dependent adds per block). The activation
//! group is loaded (and widened, at AVX2) once per eight rows.
//!
//! The matmul kernels run the legacy types' tiles (`legacy::matmul`) with a group of 32 values as
//! their block, eight to a super-block: per group, the weight row's `d` and `ls − 32` and the
//! column's Q8_K `d`, and the term `((d · d_x) · (ls − 32)) · sumi` on a strip's rows at once,
//! added to each row's `sumf` in group order (at VNNI `d · d_x`, the scalar `d4d8`, is taken once
//! per super-block).

use super::drivers::{row_scales, LANES};
use super::legacy::matmul::{gemm_avx2_wide_grouped, gemm_vnni_grouped, Kit};
use super::tokens::{kernel, Avx2, Avx512Vnni};
use super::vector::{
    dot_levels, f16_le, load16, load32, prefetch_range_l2, q4_0_nibbles, store8, transpose_sums,
};
use crate::quant::activation::BlockQ8K;
use crate::quant::iq::iq4_xs::BlockIq4Xs;
use crate::quant::iq::tables::KVALUES_IQ4NL;
use crate::quant::OutputColumns;
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

/// Fewer columns than this run the rows kernels per column at AVX2: the tiles pay from four
/// columns against them (measured: docs/kernel-experiments.md).
const MIN_COLUMNS: usize = 4;

/// [`MIN_COLUMNS`] at VNNI: the tiles pay from five columns (docs/kernel-experiments.md, "The
/// legacy matmul from four columns").
const MIN_COLUMNS_VNNI: usize = 5;

/// The eight 6-bit group scales minus 32, as f32 (the scalar `group_scale_code(ib) - 32`).
#[inline(always)]
fn group_scales(block: &BlockIq4Xs) -> [f32; 8] {
    core::array::from_fn(|ib| group_scale(block, ib))
}

/// Groups `2p` and `2p + 1` of a Q8_K block's quants (64 bytes; groups 0 and 1 past the block).
#[inline]
#[target_feature(enable = "avx512f")]
fn load64(xb: &BlockQ8K, p: usize) -> __m512i {
    let at = 64 * (p % 4);
    let quants = xb.qs.get(at..at + 64).and_then(|q| q.first_chunk::<64>());
    let quants = quants.unwrap_or(&[0; 64]);
    // SAFETY: `quants` holds 64 bytes; `loadu` has no alignment requirement.
    unsafe { _mm512_loadu_si512(quants.as_ptr().cast()) }
}

/// The 32 index bytes of groups `2p` and `2p + 1` of a block (groups 0 and 1 past the block).
#[inline]
#[target_feature(enable = "avx2")]
fn pair_indices(block: &BlockIq4Xs, p: usize) -> __m256i {
    let g = 2 * (p % 4);
    _mm256_set_m128i(load16(&block.qs[g + 1]), load16(&block.qs[g]))
}

/// Eight rows' sums of two groups, lane `r` of the first = row `r`'s dwords 0..4 of `v[r]`
/// added, of the second its dwords 4..8 (`transpose_sums` without its last fold).
#[inline]
#[target_feature(enable = "avx2")]
fn pair_transpose(v: &[__m256i; LANES]) -> [__m256i; 2] {
    let a = _mm256_hadd_epi32(v[0], v[1]);
    let b = _mm256_hadd_epi32(v[2], v[3]);
    let c = _mm256_hadd_epi32(v[4], v[5]);
    let d = _mm256_hadd_epi32(v[6], v[7]);
    // ab = [rows 0..4 of dwords 0..4 | rows 0..4 of dwords 4..8], cd likewise for rows 4..8.
    let ab = _mm256_hadd_epi32(a, b);
    let cd = _mm256_hadd_epi32(c, d);
    [
        _mm256_permute2x128_si256::<0x20>(ab, cd),
        _mm256_permute2x128_si256::<0x31>(ab, cd),
    ]
}

/// Eight rows' exact integer sums of group `g` against `xb` (lane `r` = row `r`), levels and
/// quants widened to i16 for `madd` (the quants once for the eight rows).
#[inline]
#[target_feature(enable = "avx2")]
fn group_sums(bs: &[&BlockIq4Xs; LANES], xb: &BlockQ8K, g: usize) -> __m256i {
    let y = load32(q8k_group(xb, g));
    let y_lo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(y));
    let y_hi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(y));
    let partials: [__m256i; LANES] = core::array::from_fn(|r| {
        let l = group_levels(bs[r], g);
        let l_lo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(l));
        let l_hi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(l));
        _mm256_add_epi32(_mm256_madd_epi16(l_lo, y_lo), _mm256_madd_epi16(l_hi, y_hi))
    });
    transpose_sums(&partials)
}

/// A block of no weights, standing in for a row's block past its end (never reached: every row of
/// a group has `row_blocks` blocks, and the loops stop at the activation's length).
static NO_BLOCK: BlockIq4Xs = BlockIq4Xs {
    d: [0; 2],
    scales_h: [0; 2],
    scales_l: [0; 4],
    qs: [[0; 16]; 8],
};

/// How far ahead of the group of rows being summed the rows kernels ask for weights (into L2), at
/// least: eight rows side by side are eight short streams, as for the legacy rows kernels.
const PREFETCH_BYTES: usize = 8 << 10;

/// Eight rows' scale codes of group `g` minus 32, as f32 (lane `r` = row `r`), from their
/// `scales_h` (`high`, lane `r`) and `scales_l` (`low`, lane `r`, as a little-endian u32).
#[inline]
#[target_feature(enable = "avx2")]
fn lane_scales(high: __m256i, low: __m256i, g: usize) -> __m256 {
    let low_bits = _mm_cvtsi32_si128((4 * g) as i32);
    let high_bits = _mm_cvtsi32_si128((2 * g) as i32);
    let low = _mm256_and_si256(_mm256_srl_epi32(low, low_bits), _mm256_set1_epi32(0xf));
    let high = _mm256_and_si256(_mm256_srl_epi32(high, high_bits), _mm256_set1_epi32(3));
    let code = _mm256_or_si256(low, _mm256_slli_epi32::<4>(high));
    _mm256_cvtepi32_ps(_mm256_sub_epi32(code, _mm256_set1_epi32(32)))
}

/// The rows driver: eight rows at a time in the eight lanes (see the module's comment), rows past
/// the last whole group by `single`. `pair_sums(bs, xb, p)` gives the eight rows' exact integer
/// sums of groups `2p` and `2p + 1` against the activation block `xb`, lane `r` = row `r`.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn rows_of<S>(
    w: &[BlockIq4Xs],
    row_blocks: usize,
    x: &[BlockQ8K],
    out: &mut [f32],
    pair_sums: S,
    single: impl Fn(&[BlockIq4Xs], &[BlockQ8K]) -> f32,
) where
    S: Fn(&[&BlockIq4Xs; LANES], &BlockQ8K, usize) -> [__m256i; 2],
{
    let group_blocks = row_blocks.saturating_mul(LANES).max(1);
    let x = x.get(..row_blocks).unwrap_or(x);
    let whole_groups = w.len() / group_blocks;
    let block_bytes = core::mem::size_of::<BlockIq4Xs>();
    let group_bytes = group_blocks.saturating_mul(block_bytes);
    let groups_ahead = PREFETCH_BYTES.div_ceil(group_bytes.max(1)).max(2);
    let groups = w.chunks_exact(group_blocks).take(whole_groups);
    for (group, out8) in groups.zip(out.chunks_exact_mut(LANES)) {
        let rows: [&[BlockIq4Xs]; LANES] = core::array::from_fn(|r| {
            group
                .get(r * row_blocks..(r + 1) * row_blocks)
                .unwrap_or(&[])
        });
        // The same block of every row of a group `groups_ahead` on, asked for a block at a time.
        let ahead = group
            .as_ptr()
            .cast::<i8>()
            .wrapping_add(group_bytes.saturating_mul(groups_ahead));
        let mut sumf = _mm256_setzero_ps();
        for (k, xb) in x.iter().enumerate() {
            let mut bs = [&NO_BLOCK; LANES];
            for (b, row) in bs.iter_mut().zip(&rows) {
                if let Some(block) = row.get(k) {
                    *b = block;
                }
            }
            for r in 0..LANES {
                let at = (r * row_blocks + k).saturating_mul(block_bytes);
                prefetch_range_l2(ahead.wrapping_add(at), block_bytes);
            }
            // d4d8 = d · d_x, lane by lane.
            let d4d8 = _mm256_mul_ps(row_scales(bs, |b| b.d), _mm256_set1_ps(xb.scale()));
            let high = _mm256_setr_epi32(
                i32::from(u16::from_le_bytes(bs[0].scales_h)),
                i32::from(u16::from_le_bytes(bs[1].scales_h)),
                i32::from(u16::from_le_bytes(bs[2].scales_h)),
                i32::from(u16::from_le_bytes(bs[3].scales_h)),
                i32::from(u16::from_le_bytes(bs[4].scales_h)),
                i32::from(u16::from_le_bytes(bs[5].scales_h)),
                i32::from(u16::from_le_bytes(bs[6].scales_h)),
                i32::from(u16::from_le_bytes(bs[7].scales_h)),
            );
            let low = _mm256_setr_epi32(
                i32::from_le_bytes(bs[0].scales_l),
                i32::from_le_bytes(bs[1].scales_l),
                i32::from_le_bytes(bs[2].scales_l),
                i32::from_le_bytes(bs[3].scales_l),
                i32::from_le_bytes(bs[4].scales_l),
                i32::from_le_bytes(bs[5].scales_l),
                i32::from_le_bytes(bs[6].scales_l),
                i32::from_le_bytes(bs[7].scales_l),
            );
            for p in 0..4 {
                for (sums, g) in pair_sums(&bs, xb, p).into_iter().zip([2 * p, 2 * p + 1]) {
                    let sumi = _mm256_cvtepi32_ps(sums);
                    // The scalar `sumf += (d4d8 · (ls − 32)) · sumi`, in group order.
                    let dl = _mm256_mul_ps(d4d8, lane_scales(high, low, g));
                    sumf = _mm256_add_ps(sumf, _mm256_mul_ps(dl, sumi));
                }
            }
        }
        store8(out8, sumf);
    }
    let rest_rows = w.get(whole_groups * group_blocks..).unwrap_or(&[]);
    let rest_out = out.get_mut(whole_groups * LANES..).unwrap_or(&mut []);
    for (o, row) in rest_out
        .iter_mut()
        .zip(rest_rows.chunks_exact(row_blocks.max(1)))
    {
        *o = single(row, x);
    }
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

    /// IQ4_XS rows, AVX2: eight rows per vector, levels and quants widened to i16 before `madd`
    /// (the activation group once per eight rows).
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn rows(t: Avx2, w: &[BlockIq4Xs], row_blocks: usize, x: &[BlockQ8K], out: &mut [f32]) {
        rows_of(
            w,
            row_blocks,
            x,
            out,
            |bs, xb, p| [group_sums(bs, xb, 2 * p), group_sums(bs, xb, 2 * p + 1)],
            |row, x| vec_dot(t, row, x),
        )
    }

    /// IQ4_XS rows, AVX-512 VNNI: eight rows per vector, two groups a zmm: one `vpshufb` of the
    /// shuffle table with its sign bits flipped gives the levels plus 128 (`vpdpbusd`'s unsigned
    /// operand), and each row's accumulator starts from `−128 · Σ x` of the groups (one
    /// `vpdpbusd` of the quants against 128s, per eight rows), so its lanes add up to the exact
    /// `Σ level · x` for every quant, −128 included.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(super) fn rows_vnni(
        t: Avx512Vnni,
        w: &[BlockIq4Xs],
        row_blocks: usize,
        x: &[BlockQ8K],
        out: &mut [f32],
    ) {
        rows_of(
            w,
            row_blocks,
            x,
            out,
            |bs, xb, p| {
                // Groups 2p and 2p + 1 in one vector, 128-bit lanes in the order [elements 0..16
                // of group 2p, the same of 2p + 1, elements 16..32 of 2p, of 2p + 1]: the order in
                // which a row's 32 index bytes of the two groups and the same bytes shifted by
                // four fall (low nibbles are elements 0..16).
                let y = _mm512_shuffle_i64x2::<0b11_01_10_00>(
                    load64(xb, p),
                    load64(xb, p),
                );
                let bias = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(i8::MIN), y);
                let start = _mm512_sub_epi32(_mm512_setzero_si512(), bias);
                let table = _mm512_broadcast_i32x4(_mm_xor_si128(
                    load16(&KVALUES_IQ4NL),
                    _mm_set1_epi8(i8::MIN),
                ));
                let partials: [__m256i; LANES] = core::array::from_fn(|r| {
                    let qs = pair_indices(bs[r], p);
                    let both = _mm512_inserti64x4::<1>(
                        _mm512_castsi256_si512(qs),
                        _mm256_srli_epi16::<4>(qs),
                    );
                    let indices = _mm512_and_si512(both, _mm512_set1_epi8(0x0f));
                    let levels = _mm512_shuffle_epi8(table, indices);
                    let sums = _mm512_dpbusd_epi32(start, levels, y);
                    // Dwords 0..4 of each half: group 2p, 4..8: group 2p + 1.
                    _mm256_add_epi32(
                        _mm512_castsi512_si256(sums),
                        _mm512_extracti64x4_epi64::<1>(sums),
                    )
                });
                pair_transpose(&partials)
            },
            |row, x| vec_dot(t.avx2(), row, x),
        )
    }

    /// IQ4_XS matmul, AVX2: the full-byte tiles (levels widened to i16) over groups of 32.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn matmul(
        t: Avx2,
        w: &[BlockIq4Xs],
        row_blocks: usize,
        x: &[BlockQ8K],
        n: usize,
        y: &mut OutputColumns<'_, '_>,
    ) {
        let kit = Kit {
            bias: 0,
            min_columns: MIN_COLUMNS,
            decode: |b: &BlockIq4Xs, g: usize| group_levels(b, g),
            w_scales: |b: &BlockIq4Xs, g: usize| (f16_le(b.d), group_scale(b, g)),
            x_scales: |xb: &BlockQ8K, _: usize| (xb.scale(), 0.0),
            x_quants: q8k_group,
            term: |sumi, d, ls, dx| term8(sumi, d, ls, dx),
            rows: |w: &[BlockIq4Xs], rb, x: &[BlockQ8K], out: &mut [f32]| rows(t, w, rb, x, out),
        };
        gemm_avx2_wide_grouped::<8, _, _>(w, row_blocks, x, n, y, kit)
    }

    /// IQ4_XS matmul, AVX-512 VNNI: the VNNI tiles (levels biased by 128) over groups of 32.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(super) fn matmul_vnni(
        t: Avx512Vnni,
        w: &[BlockIq4Xs],
        row_blocks: usize,
        x: &[BlockQ8K],
        n: usize,
        y: &mut OutputColumns<'_, '_>,
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
                rows_vnni(t, w, rb, x, out)
            },
        };
        gemm_vnni_grouped::<8, _, _>(w, row_blocks, x, n, y, kit)
    }
}
