//! The legacy types' matmul kernels (`Ops::matmul`): many weight rows against many activation
//! columns, every output with the bits of its scalar vec_dot.
//!
//! Rows sit in the i32 lanes of a vector (sixteen at VNNI). A strip of rows is decoded once per
//! chunk of blocks into unsigned bytes (signed quants biased) and transposed so that vector `j`
//! of a block holds bytes `4j..4j + 4` of every row; a column's block is then eight `vpdpbusd`
//! against its dword `j` broadcast, which leave each row's exact integer sum in the row's lane
//! with no horizontal reduction. The float step of the scalar twin runs on all the strip's rows
//! at once, in its order, added to each lane's serial `sumf`. A decoded strip serves a group of
//! columns; each column's block scales and `bias · Σ y` are taken once per group and chunk for
//! all strips. Between chunks of blocks a lane's `sumf` waits in its output (an f32, exact).

use core::arch::x86_64::*;

use super::rows::q5_block_masked;
use crate::quant::activation::{BlockQ8_0, BlockQ8_1};
use crate::quant::arch::x86_64::primitives::dpbusd;
use crate::quant::arch::x86_64::tokens::{kernel, Avx512Vnni};
use crate::quant::arch::x86_64::vector::{hsum_i32, load16, load32, q4_0_nibbles};
use crate::quant::cast::f16_le;
use crate::quant::iq::iq4_nl::BlockIq4Nl;
use crate::quant::iq::tables::KVALUES_IQ4NL;
use crate::quant::legacy::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1};
use crate::quant::misc::fp4::{e8m0_to_f32_half, KVALUES_FP4};
use crate::quant::misc::mxfp4::BlockMxfp4;

/// Rows of a VNNI strip (the i32 lanes of a zmm).
const STRIP_ROWS: usize = 16;

/// Blocks of a chunk: a decoded strip of them is 10 KiB, well inside L1 beside the columns'.
const CHUNK_BLOCKS: usize = 16;

/// Columns that share a decoded strip.
const GROUP_COLUMNS: usize = 32;

/// A strip of rows decoded for one chunk: per block, the eight transposed quant vectors and the
/// rows' scales (`d`, and `m` where the type has a minimum) as f32 lanes.
struct Strip {
    quants: [[__m512i; 8]; CHUNK_BLOCKS],
    d: [__m512; CHUNK_BLOCKS],
    m: [__m512; CHUNK_BLOCKS],
}

/// One column's summaries of a chunk's blocks: `d`, `s` (Q8_1) and `-bias · Σ y`.
#[derive(Clone, Copy)]
struct ColumnChunk {
    d: [f32; CHUNK_BLOCKS],
    s: [f32; CHUNK_BLOCKS],
    neg_bias_sum: [i32; CHUNK_BLOCKS],
}

/// What a legacy type's matmul takes from the type: its weight blocks as unsigned bytes in element
/// order (quant plus `bias`) with their scales `(d, m)`, its activation blocks' `(d, s)` and
/// quants, and the scalar twin's float term from `(sumi, d_w, m_w, d_x, s_x)`, sixteen rows wide.
struct Kit<DW, SW, SX, QX, T> {
    bias: i8,
    decode: DW,
    w_scales: SW,
    x_scales: SX,
    x_quants: QX,
    term: T,
}

/// Sixteen rows of 32 bytes, `rows[r]` in element order, as eight vectors: vector `j` holds
/// bytes `4j..4j + 4` of row `r` in i32 lane `r`.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl")]
fn transpose16(rows: &[__m256i; STRIP_ROWS]) -> [__m512i; 8] {
    // Row r in the low half, row r + 8 in the high half; then an 8×8 dword transpose within each
    // half (unpacks) and the 128-bit pieces put in row order (two-source qword permutes).
    let z: [__m512i; 8] = core::array::from_fn(|r| {
        _mm512_inserti64x4::<1>(_mm512_castsi256_si512(rows[r]), rows[r + 8])
    });
    let t: [__m512i; 8] = core::array::from_fn(|i| {
        let (a, b) = (z[i & !1], z[i | 1]);
        if i % 2 == 0 {
            _mm512_unpacklo_epi32(a, b)
        } else {
            _mm512_unpackhi_epi32(a, b)
        }
    });
    // u[4h + j]: dword j (lanes 0, 2) and j + 4 (lanes 1, 3) of rows 4h..4h + 4 (and + 8).
    let u: [__m512i; 8] = core::array::from_fn(|i| {
        let (h, j) = (i / 4, i % 4);
        let (a, b) = (t[4 * h + j / 2], t[4 * h + 2 + j / 2]);
        if j % 2 == 0 {
            _mm512_unpacklo_epi64(a, b)
        } else {
            _mm512_unpackhi_epi64(a, b)
        }
    });
    let low = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
    let high = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
    core::array::from_fn(|j| {
        let index = if j < 4 { low } else { high };
        _mm512_permutex2var_epi64(u[j % 4], index, u[4 + j % 4])
    })
}

/// Decodes rows `rows` of `w` (`row_blocks` blocks each) for the chunk of blocks at `first_block`
/// (`blocks` of them) into `strip`; lanes past the strip's rows get zeros.
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn decode_strip<W>(
    strip: &mut Strip,
    w: &[W],
    row_blocks: usize,
    rows: core::ops::Range<usize>,
    first_block: usize,
    blocks: usize,
    decode: &impl Fn(&W) -> __m256i,
    w_scales: &impl Fn(&W) -> (f32, f32),
) {
    for k in 0..blocks.min(CHUNK_BLOCKS) {
        let mut quants = [_mm256_setzero_si256(); STRIP_ROWS];
        let mut d = [0f32; STRIP_ROWS];
        let mut m = [0f32; STRIP_ROWS];
        for (lane, row) in rows.clone().take(STRIP_ROWS).enumerate() {
            let at = row
                .saturating_mul(row_blocks)
                .saturating_add(first_block + k);
            if let Some(b) = w.get(at) {
                quants[lane] = decode(b);
                (d[lane], m[lane]) = w_scales(b);
            }
        }
        strip.quants[k] = transpose16(&quants);
        // SAFETY: `d` and `m` hold sixteen f32; `loadu` has no alignment requirement.
        unsafe {
            strip.d[k] = _mm512_loadu_ps(d.as_ptr());
            strip.m[k] = _mm512_loadu_ps(m.as_ptr());
        }
    }
}

/// Dword `j` of an activation block's quants, in every lane.
#[inline(always)]
fn broadcast_dword(qs: &[i8; 32], j: usize) -> i32 {
    let bytes = qs.get(4 * j..).and_then(|rest| rest.first_chunk::<4>());
    i32::from_le_bytes(bytes.copied().unwrap_or([0; 4]).map(|b| b as u8))
}

/// The strip's rows against `C` columns over one chunk: `columns[c]` the column's blocks of the
/// chunk, `summaries[c]` their [`ColumnChunk`], `outputs[c]` the index in `y` of the strip's
/// first row in that column. `first` says whether this is the row's first chunk (else `sumf`
/// continues from `y`).
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn strip_columns<X, const C: usize>(
    strip: &Strip,
    blocks: usize,
    columns: [&[X]; C],
    summaries: [&ColumnChunk; C],
    outputs: [usize; C],
    y: &mut [f32],
    strip_rows: usize,
    first: bool,
    x_quants: &impl Fn(&X) -> &[i8; 32],
    term: &impl Fn(__m512, __m512, __m512, __m512, __m512) -> __m512,
) {
    let mask: __mmask16 = ((1u32 << strip_rows.min(STRIP_ROWS)) - 1) as __mmask16;
    let lanes = strip_rows.min(STRIP_ROWS);
    let mut sumf = [_mm512_setzero_ps(); C];
    if !first {
        for (s, &at) in sumf.iter_mut().zip(&outputs) {
            if let Some(out) = y.get(at..at.saturating_add(lanes)) {
                // SAFETY: `out` holds `lanes` f32 and the mask reads only those.
                *s = unsafe { _mm512_maskz_loadu_ps(mask, out.as_ptr()) };
            }
        }
    }
    let blocks = blocks.min(CHUNK_BLOCKS);
    for k in 0..blocks {
        let (q, dw, mw) = (&strip.quants[k], strip.d[k], strip.m[k]);
        for c in 0..C {
            let Some(xb) = columns[c].get(k) else {
                continue;
            };
            let qs = x_quants(xb);
            let summary = summaries[c];
            let mut acc = _mm512_set1_epi32(summary.neg_bias_sum[k]);
            for (j, qj) in q.iter().enumerate() {
                acc = _mm512_dpbusd_epi32(acc, *qj, _mm512_set1_epi32(broadcast_dword(qs, j)));
            }
            let dx = _mm512_set1_ps(summary.d[k]);
            let sx = _mm512_set1_ps(summary.s[k]);
            sumf[c] = _mm512_add_ps(sumf[c], term(_mm512_cvtepi32_ps(acc), dw, mw, dx, sx));
        }
    }
    for (s, &at) in sumf.iter().zip(&outputs) {
        if let Some(out) = y.get_mut(at..at.saturating_add(lanes)) {
            // SAFETY: `out` holds `lanes` f32 and the mask writes only those.
            unsafe { _mm512_mask_storeu_ps(out.as_mut_ptr(), mask, *s) };
        }
    }
}

/// The VNNI matmul driver (see the module doc): rows of `w` (`row_blocks` blocks each) against
/// the `n` columns of `x`, row `r` of column `c` into `y[c * y_stride + r]`.
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn gemm_vnni<W, X>(
    w: &[W],
    row_blocks: usize,
    x: &[X],
    n: usize,
    y: &mut [f32],
    y_stride: usize,
    kit: Kit<
        impl Fn(&W) -> __m256i,
        impl Fn(&W) -> (f32, f32),
        impl Fn(&X) -> (f32, f32),
        impl Fn(&X) -> &[i8; 32],
        impl Fn(__m512, __m512, __m512, __m512, __m512) -> __m512,
    >,
) {
    if row_blocks == 0 || n == 0 {
        return;
    }
    let column_blocks = x.len() / n;
    let blocks = row_blocks.min(column_blocks);
    let rows = w.len() / row_blocks;
    let mut strip = Strip {
        quants: [[_mm512_setzero_si512(); 8]; CHUNK_BLOCKS],
        d: [_mm512_setzero_ps(); CHUNK_BLOCKS],
        m: [_mm512_setzero_ps(); CHUNK_BLOCKS],
    };
    let empty = ColumnChunk {
        d: [0.0; CHUNK_BLOCKS],
        s: [0.0; CHUNK_BLOCKS],
        neg_bias_sum: [0; CHUNK_BLOCKS],
    };
    let mut summaries = [empty; GROUP_COLUMNS];
    let bias = _mm256_set1_epi8(kit.bias);
    // At least one chunk, so that rows of no blocks still get their zero.
    let mut first_block = 0;
    while first_block == 0 || first_block < blocks {
        let chunk = CHUNK_BLOCKS.min(blocks - first_block);
        let mut first_column = 0;
        while first_column < n {
            let group = GROUP_COLUMNS.min(n - first_column);
            let column_chunk = |c: usize| {
                let start = (first_column + c)
                    .saturating_mul(column_blocks)
                    .saturating_add(first_block);
                x.get(start..start.saturating_add(chunk)).unwrap_or(&[])
            };
            for (c, summary) in summaries.iter_mut().take(group).enumerate() {
                for (k, xb) in column_chunk(c).iter().enumerate() {
                    let (d, s) = (kit.x_scales)(xb);
                    summary.d[k] = d;
                    summary.s[k] = s;
                    let by = dpbusd(_mm256_setzero_si256(), bias, load32((kit.x_quants)(xb)));
                    summary.neg_bias_sum[k] = hsum_i32(by).wrapping_neg();
                }
            }
            let mut first_row = 0;
            while first_row < rows {
                let strip_rows = STRIP_ROWS.min(rows - first_row);
                decode_strip(
                    &mut strip,
                    w,
                    row_blocks,
                    first_row..first_row + strip_rows,
                    first_block,
                    chunk,
                    &kit.decode,
                    &kit.w_scales,
                );
                let output = |c: usize| {
                    (first_column + c)
                        .saturating_mul(y_stride)
                        .saturating_add(first_row)
                };
                let mut c = 0;
                while c < group {
                    let left = group - c;
                    let first = first_block == 0;
                    let (x_quants, term) = (&kit.x_quants, &kit.term);
                    if left >= 4 {
                        strip_columns::<X, 4>(
                            &strip,
                            chunk,
                            core::array::from_fn(|i| column_chunk(c + i)),
                            core::array::from_fn(|i| &summaries[c + i]),
                            core::array::from_fn(|i| output(c + i)),
                            y,
                            strip_rows,
                            first,
                            x_quants,
                            term,
                        );
                        c += 4;
                    } else if left >= 2 {
                        strip_columns::<X, 2>(
                            &strip,
                            chunk,
                            core::array::from_fn(|i| column_chunk(c + i)),
                            core::array::from_fn(|i| &summaries[c + i]),
                            core::array::from_fn(|i| output(c + i)),
                            y,
                            strip_rows,
                            first,
                            x_quants,
                            term,
                        );
                        c += 2;
                    } else {
                        strip_columns::<X, 1>(
                            &strip,
                            chunk,
                            [column_chunk(c)],
                            [&summaries[c]],
                            [output(c)],
                            y,
                            strip_rows,
                            first,
                            x_quants,
                            term,
                        );
                        c += 1;
                    }
                }
                first_row += strip_rows;
            }
            first_column += group;
        }
        first_block += CHUNK_BLOCKS;
    }
}

/// A Q8_0 activation block's `(d, 0)`.
#[inline(always)]
fn q8_0_scales(xb: &BlockQ8_0) -> (f32, f32) {
    (f16_le(xb.d), 0.0)
}

/// A Q8_1 activation block's `(d, s)`.
#[inline(always)]
fn q8_1_scales(xb: &BlockQ8_1) -> (f32, f32) {
    (f16_le(xb.d), f16_le(xb.s))
}

/// A Q8_0 activation block's quants.
#[inline(always)]
fn q8_0_quants(xb: &BlockQ8_0) -> &[i8; 32] {
    &xb.qs
}

/// A Q8_1 activation block's quants.
#[inline(always)]
fn q8_1_quants(xb: &BlockQ8_1) -> &[i8; 32] {
    &xb.qs
}

/// A block's `d` and no minimum.
#[inline(always)]
fn d_only(d: [u8; 2]) -> (f32, f32) {
    (f16_le(d), 0.0)
}

/// `(d_w · d_x) · sumi + m_w · s_x`, the Q4_1 and Q5_1 term.
#[inline]
#[target_feature(enable = "avx512f")]
fn term_with_min(sumi: __m512, dw: __m512, mw: __m512, dx: __m512, sx: __m512) -> __m512 {
    _mm512_add_ps(
        _mm512_mul_ps(_mm512_mul_ps(dw, dx), sumi),
        _mm512_mul_ps(mw, sx),
    )
}

/// `(d_w · d_x) · sumi`, the Q5_0, IQ4_NL and MXFP4 term (`d_x · d_w` there: the same product).
#[inline]
#[target_feature(enable = "avx512f")]
fn term_scaled(sumi: __m512, dw: __m512, dx: __m512) -> __m512 {
    _mm512_mul_ps(_mm512_mul_ps(dw, dx), sumi)
}

/// A block's 32 four-bit codes through a 16-entry signed table, plus 128 (unsigned bytes).
#[inline]
#[target_feature(enable = "avx2")]
fn table_biased(qs: &[u8; 16], table: &[i8; 16]) -> __m256i {
    let table = _mm256_broadcastsi128_si256(load16(table));
    let levels = _mm256_shuffle_epi8(table, q4_0_nibbles(qs));
    _mm256_xor_si256(levels, _mm256_set1_epi8(-128))
}

kernel! {
    /// Q8_0 matmul, AVX-512 VNNI: `sumf += sumi * (d_w * d_x)`, weights biased by 128.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(in super::super) fn matmul_q8_0_vnni(
        _t: Avx512Vnni,
        w: &[BlockQ8_0],
        row_blocks: usize,
        x: &[BlockQ8_0],
        n: usize,
        y: &mut [f32],
        y_stride: usize,
    ) {
        let kit = Kit {
            bias: -128,
            decode: |b: &BlockQ8_0| _mm256_xor_si256(load32(&b.qs), _mm256_set1_epi8(-128)),
            w_scales: |b: &BlockQ8_0| d_only(b.d),
            x_scales: q8_0_scales,
            x_quants: q8_0_quants,
            term: |sumi, dw, _, dx, _| _mm512_mul_ps(sumi, _mm512_mul_ps(dw, dx)),
        };
        gemm_vnni(w, row_blocks, x, n, y, y_stride, kit)
    }

    /// Q4_0 matmul, AVX-512 VNNI: `sumf += (sumi * d_w) * d_x`, quants `q - 8`.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(in super::super) fn matmul_q4_0_vnni(
        _t: Avx512Vnni,
        w: &[BlockQ4_0],
        row_blocks: usize,
        x: &[BlockQ8_0],
        n: usize,
        y: &mut [f32],
        y_stride: usize,
    ) {
        let kit = Kit {
            bias: 8,
            decode: |b: &BlockQ4_0| q4_0_nibbles(&b.qs),
            w_scales: |b: &BlockQ4_0| d_only(b.d),
            x_scales: q8_0_scales,
            x_quants: q8_0_quants,
            term: |sumi, dw, _, dx, _| _mm512_mul_ps(_mm512_mul_ps(sumi, dw), dx),
        };
        gemm_vnni(w, row_blocks, x, n, y, y_stride, kit)
    }

    /// Q4_1 matmul, AVX-512 VNNI: `sumf += (d_w * d_x) * sumi + m_w * s_x`.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(in super::super) fn matmul_q4_1_vnni(
        _t: Avx512Vnni,
        w: &[BlockQ4_1],
        row_blocks: usize,
        x: &[BlockQ8_1],
        n: usize,
        y: &mut [f32],
        y_stride: usize,
    ) {
        let kit = Kit {
            bias: 0,
            decode: |b: &BlockQ4_1| q4_0_nibbles(&b.qs),
            w_scales: |b: &BlockQ4_1| (f16_le(b.d), f16_le(b.m)),
            x_scales: q8_1_scales,
            x_quants: q8_1_quants,
            term: |sumi, dw, mw, dx, sx| term_with_min(sumi, dw, mw, dx, sx),
        };
        gemm_vnni(w, row_blocks, x, n, y, y_stride, kit)
    }

    /// Q5_0 matmul, AVX-512 VNNI: `sumf += (d_w * d_x) * sumi`, quants `q - 16`.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(in super::super) fn matmul_q5_0_vnni(
        _t: Avx512Vnni,
        w: &[BlockQ5_0],
        row_blocks: usize,
        x: &[BlockQ8_0],
        n: usize,
        y: &mut [f32],
        y_stride: usize,
    ) {
        let kit = Kit {
            bias: 16,
            decode: |b: &BlockQ5_0| q5_block_masked(&b.qs, b.qh),
            w_scales: |b: &BlockQ5_0| d_only(b.d),
            x_scales: q8_0_scales,
            x_quants: q8_0_quants,
            term: |sumi, dw, _, dx, _| term_scaled(sumi, dw, dx),
        };
        gemm_vnni(w, row_blocks, x, n, y, y_stride, kit)
    }

    /// Q5_1 matmul, AVX-512 VNNI: `sumf += (d_w * d_x) * sumi + m_w * s_x`.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(in super::super) fn matmul_q5_1_vnni(
        _t: Avx512Vnni,
        w: &[BlockQ5_1],
        row_blocks: usize,
        x: &[BlockQ8_1],
        n: usize,
        y: &mut [f32],
        y_stride: usize,
    ) {
        let kit = Kit {
            bias: 0,
            decode: |b: &BlockQ5_1| q5_block_masked(&b.qs, b.qh),
            w_scales: |b: &BlockQ5_1| (f16_le(b.d), f16_le(b.m)),
            x_scales: q8_1_scales,
            x_quants: q8_1_quants,
            term: |sumi, dw, mw, dx, sx| term_with_min(sumi, dw, mw, dx, sx),
        };
        gemm_vnni(w, row_blocks, x, n, y, y_stride, kit)
    }

    /// IQ4_NL matmul, AVX-512 VNNI: `sumf += (d_x * d_w) * sumi`, levels biased by 128.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(in super::super) fn matmul_iq4_nl_vnni(
        _t: Avx512Vnni,
        w: &[BlockIq4Nl],
        row_blocks: usize,
        x: &[BlockQ8_0],
        n: usize,
        y: &mut [f32],
        y_stride: usize,
    ) {
        let kit = Kit {
            bias: -128,
            decode: |b: &BlockIq4Nl| table_biased(&b.qs, &KVALUES_IQ4NL),
            w_scales: |b: &BlockIq4Nl| d_only(b.d),
            x_scales: q8_0_scales,
            x_quants: q8_0_quants,
            term: |sumi, dw, _, dx, _| term_scaled(sumi, dw, dx),
        };
        gemm_vnni(w, row_blocks, x, n, y, y_stride, kit)
    }

    /// MXFP4 matmul, AVX-512 VNNI: `sumf += (d_x * scale_w) * sumi`, levels biased by 128.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(in super::super) fn matmul_mxfp4_vnni(
        _t: Avx512Vnni,
        w: &[BlockMxfp4],
        row_blocks: usize,
        x: &[BlockQ8_0],
        n: usize,
        y: &mut [f32],
        y_stride: usize,
    ) {
        let kit = Kit {
            bias: -128,
            decode: |b: &BlockMxfp4| table_biased(&b.qs, &KVALUES_FP4),
            w_scales: |b: &BlockMxfp4| (e8m0_to_f32_half(b.e), 0.0),
            x_scales: q8_0_scales,
            x_quants: q8_0_quants,
            term: |sumi, dw, _, dx, _| term_scaled(sumi, dw, dx),
        };
        gemm_vnni(w, row_blocks, x, n, y, y_stride, kit)
    }
}
