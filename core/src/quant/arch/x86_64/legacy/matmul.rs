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
//!
//! The VNNI and full-byte AVX2 drivers also take blocks of `G` groups of 32 values whose float
//! step is per group (IQ4_XS against Q8_K: `G = 8`): there a "block" of the loops is one group,
//! `G` of them per weight and activation block, and the type's closures get the group's index.

use crate::quant::OutputColumns;
use core::arch::x86_64::*;

use super::rows::{
    q5_block_masked, rows_iq4_nl, rows_iq4_nl_vnni, rows_mxfp4_vnni, rows_q4_0, rows_q4_0_vnni,
    rows_q4_1, rows_q4_1_vnni, rows_q5_0, rows_q5_0_vnni, rows_q5_1, rows_q5_1_vnni, rows_q8_0,
    rows_q8_0_vnni,
};
use crate::quant::activation::{BlockQ8_0, BlockQ8_1};
use crate::quant::arch::x86_64::primitives::dpbusd;
use crate::quant::arch::x86_64::tokens::{kernel, Avx2, Avx512Vnni};
use crate::quant::arch::x86_64::vector::{
    f16_le, hsum_i32, load16, load32, prefetch_range_l2, q4_0_nibbles,
};
use crate::quant::iq::iq4_nl::BlockIq4Nl;
use crate::quant::iq::tables::KVALUES_IQ4NL;
use crate::quant::legacy::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1};
use crate::quant::misc::fp4::{e8m0_to_f32_half, KVALUES_FP4};
use crate::quant::misc::mxfp4::BlockMxfp4;

/// Rows of a VNNI strip (the i32 lanes of a zmm).
const STRIP_ROWS: usize = 16;

/// Blocks of a chunk: a decoded strip of them is 10 KiB, well inside L1.
const CHUNK_BLOCKS: usize = 16;

/// Columns that share a decoded strip: enough that the strip's decode is a small part of a call,
/// though a group's activation chunks (128 × 16 blocks) then come from L2 rather than L1
/// (docs/kernel-experiments.md, "ggml's repacked GEMMs against ours").
const GROUP_COLUMNS: usize = 128;

/// Fewer columns than this run the rows kernel once per column: a strip's decoding, shared by
/// too few columns, costs more than the rows kernel's per-column work (docs/kernel-experiments.md,
/// "The legacy matmul from four columns"). The AVX2 drivers' and MXFP4's.
const MIN_COLUMNS: usize = 6;

/// [`MIN_COLUMNS`] for the VNNI driver's other types.
const MIN_COLUMNS_VNNI: usize = 4;

/// [`MIN_COLUMNS`] for Q4_1 at AVX2, whose rows kernel is the fastest of the legacy types.
const MIN_COLUMNS_AVX2_Q4_1: usize = 8;

/// [`MIN_COLUMNS`] for Q5_0 at AVX2, whose rows kernel is the slowest.
const MIN_COLUMNS_AVX2_Q5_0: usize = 4;

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
/// quants, and the scalar twin's float term from `(sumi, d_w, m_w, d_x, s_x)`, a strip's rows wide;
/// `rows`, the type's rows kernel at the level (`(w, row_blocks, x, out)`), for fewer columns than
/// `min_columns`. In the grouped drivers (`G` groups of 32 per block) `decode`, `w_scales`,
/// `x_scales` and `x_quants` also take the group's index in its block.
pub(in super::super) struct Kit<DW, SW, SX, QX, T, R> {
    pub(in super::super) bias: i8,
    pub(in super::super) min_columns: usize,
    pub(in super::super) decode: DW,
    pub(in super::super) w_scales: SW,
    pub(in super::super) x_scales: SX,
    pub(in super::super) x_quants: QX,
    pub(in super::super) term: T,
    pub(in super::super) rows: R,
}

/// An activation block's quants as a grouped driver's per-group closure (the group index
/// ignored). The other closures are adapted inside the drivers, whose target features they
/// inherit (so that the type's kernels inline into them).
#[inline(always)]
fn whole_quants<X>(f: impl Fn(&X) -> &[i8; 32]) -> impl Fn(&X, usize) -> &[i8; 32] {
    move |xb, _| f(xb)
}

/// Sixteen rows of 32 bytes, `rows[r]` in element order, as eight vectors: vector `j` holds
/// bytes `4j..4j + 4` of row `r` in i32 lane `r`.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl")]
pub(in super::super) fn transpose16(rows: &[__m256i; STRIP_ROWS]) -> [__m512i; 8] {
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
/// (`blocks` of them; groups, `G` per block of `w`) into `strip`; lanes past the strip's rows get
/// zeros.
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn decode_strip<const G: usize, W>(
    strip: &mut Strip,
    w: &[W],
    row_blocks: usize,
    rows: core::ops::Range<usize>,
    first_block: usize,
    blocks: usize,
    decode: &impl Fn(&W, usize) -> __m256i,
    w_scales: &impl Fn(&W, usize) -> (f32, f32),
) {
    for k in 0..blocks.min(CHUNK_BLOCKS) {
        let mut quants = [_mm256_setzero_si256(); STRIP_ROWS];
        let mut d = [0f32; STRIP_ROWS];
        let mut m = [0f32; STRIP_ROWS];
        let unit = first_block + k;
        for (lane, row) in rows.clone().take(STRIP_ROWS).enumerate() {
            let at = row.saturating_mul(row_blocks).saturating_add(unit / G);
            if let Some(b) = w.get(at) {
                quants[lane] = decode(b, unit % G);
                (d[lane], m[lane]) = w_scales(b, unit % G);
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

/// The weights a driver's next step of strips will decode: the next `rows` rows of this chunk, or
/// the first rows of the next chunk, or after the last chunk the rows past the weights (the next
/// tile's, when the caller tiles a matrix; a prefetch never faults). A step's rows are short
/// streams (a chunk of a row is a few lines), too short for the hardware prefetcher to follow, so
/// their decoding waited on them; they are asked for in parts while the current step's columns
/// are computed.
#[derive(Clone, Copy)]
struct NextStrips {
    start: *const i8,
    row_stride: usize,
    len: usize,
    rows: usize,
}

impl NextStrips {
    /// After the step of `rows` rows at `first_row` and `first_block` (in groups, `G` per block)
    /// of `w`, whose rows have `row_blocks` blocks and whose chunks `blocks` groups in all.
    #[inline(always)]
    fn after<const G: usize, W>(
        w: &[W],
        row_blocks: usize,
        (first_row, rows): (usize, usize),
        first_block: usize,
        blocks: usize,
    ) -> Self {
        let matrix_rows = w.len() / row_blocks.max(1);
        let (row, unit) = if first_row + rows < matrix_rows {
            (first_row + rows, first_block)
        } else if first_block + CHUNK_BLOCKS < blocks {
            (0, first_block + CHUNK_BLOCKS)
        } else {
            (matrix_rows, 0)
        };
        let size = core::mem::size_of::<W>();
        let offset = row
            .saturating_mul(row_blocks)
            .saturating_add(unit / G)
            .saturating_mul(size);
        Self {
            start: w.as_ptr().cast::<i8>().wrapping_add(offset),
            row_stride: row_blocks.saturating_mul(size),
            len: CHUNK_BLOCKS
                .min(blocks.saturating_sub(unit))
                .div_ceil(G)
                .saturating_mul(size)
                .max(1),
            rows,
        }
    }

    /// Asks for part `part` of `parts` of the step's rows (the last part takes the rest; none
    /// past it, none of none).
    #[inline(always)]
    fn ask(&self, part: usize, parts: usize) {
        if part >= parts {
            return;
        }
        let first = self.rows * part / parts;
        let end = if part + 1 >= parts {
            self.rows
        } else {
            self.rows * (part + 1) / parts
        };
        for r in first..end {
            let row = self.start.wrapping_add(r.saturating_mul(self.row_stride));
            prefetch_range_l2(row, self.len);
        }
    }
}

/// Dword `j` of an activation block's quants (to be put in every lane), read as one 32-bit load:
/// assembled from its four bytes, it compiled to four byte loads, shifts and ors, then a
/// broadcast from a general register (docs/kernel-experiments.md).
#[inline(always)]
fn broadcast_dword(qs: &[i8; 32], j: usize) -> i32 {
    // SAFETY: `[i8; 32]` and `[i32; 8]` have the same size and every bit pattern is an `i32`
    // (little-endian: the bytes `4j..4j + 4` of the block in order).
    let words = unsafe { core::mem::transmute::<[i8; 32], [i32; 8]>(*qs) };
    words.get(j).copied().unwrap_or(0)
}

/// `S` strips' rows against `C` columns over one chunk: `columns[c]` the column's blocks of the
/// chunk, `summaries[c]` their [`ColumnChunk`], `at` the first column and the first row of
/// strip 0 in `y` (strip `s` starts `s * STRIP_ROWS` rows on), `strip_rows[s]` its row count (0
/// for none). `first` says whether
/// this is the rows' first chunk (else each `sumf` continues from `y`). Per block and dword, the
/// `C` activation broadcasts serve all `S` strips and each strip's quant vector all `C` columns.
/// With `G` groups per block, block `k` of the chunk is group `k % G` of column block `k / G`.
// Block `k` indexes the columns, their summaries and the strips alike.
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn tile_columns<const G: usize, X, const S: usize, const C: usize>(
    strips: [&Strip; S],
    blocks: usize,
    columns: [&[X]; C],
    summaries: [&ColumnChunk; C],
    at: (usize, usize),
    y: &mut OutputColumns<'_, '_>,
    strip_rows: [usize; S],
    first: bool,
    x_quants: &impl Fn(&X, usize) -> &[i8; 32],
    term: &(
        impl Fn(__m512, __m512) -> __m512,
        impl Fn(__m512, __m512, __m512, __m512, __m512, __m512) -> __m512,
    ),
) {
    let (block_scale, term) = term;
    let lanes = strip_rows.map(|r| r.min(STRIP_ROWS));
    let masks = lanes.map(|l| ((1u32 << l) - 1) as __mmask16);
    let mut sumf = [[_mm512_setzero_ps(); C]; S];
    let mut scales = [[_mm512_setzero_ps(); C]; S];
    // Every strip's rows of each column, in one run (only the last strip can be short).
    let mut span = 0;
    for (s, &l) in lanes.iter().enumerate() {
        if l > 0 {
            span = s * STRIP_ROWS + l;
        }
    }
    let mut runs = y.runs::<C>(at.0, at.1, span);
    if !first {
        for (c, run) in runs.iter().enumerate() {
            let Some(run) = run else { continue };
            for s in 0..S {
                if let Some(out) = run.get(s * STRIP_ROWS..s * STRIP_ROWS + lanes[s]) {
                    // SAFETY: `out` holds `lanes[s]` f32 and the mask reads only those.
                    sumf[s][c] = unsafe { _mm512_maskz_loadu_ps(masks[s], out.as_ptr()) };
                }
            }
        }
    }
    let blocks = columns.iter().fold(blocks.min(CHUNK_BLOCKS), |b, column| {
        b.min(column.len().saturating_mul(G))
    });
    for k in 0..blocks {
        let qs: [&[i8; 32]; C] = core::array::from_fn(|c| x_quants(&columns[c][k / G], k % G));
        let mut acc = [[_mm512_setzero_si512(); C]; S];
        for c in 0..C {
            let bias = _mm512_set1_epi32(summaries[c].neg_bias_sum[k]);
            for a in acc.iter_mut() {
                a[c] = bias;
            }
        }
        for j in 0..8 {
            let xj: [__m512i; C] = qs.map(|q| _mm512_set1_epi32(broadcast_dword(q, j)));
            for s in 0..S {
                let wj = strips[s].quants[k][j];
                for c in 0..C {
                    acc[s][c] = _mm512_dpbusd_epi32(acc[s][c], wj, xj[c]);
                }
            }
        }
        for c in 0..C {
            let dx = _mm512_set1_ps(summaries[c].d[k]);
            let sx = _mm512_set1_ps(summaries[c].s[k]);
            for s in 0..S {
                let (dw, mw) = (strips[s].d[k], strips[s].m[k]);
                // A chunk starts on a block's first group.
                if k % G == 0 {
                    scales[s][c] = block_scale(dw, dx);
                }
                let sumi = _mm512_cvtepi32_ps(acc[s][c]);
                let t = term(sumi, dw, mw, dx, sx, scales[s][c]);
                sumf[s][c] = _mm512_add_ps(sumf[s][c], t);
            }
        }
    }
    for (c, run) in runs.iter_mut().enumerate() {
        let Some(run) = run else { continue };
        for s in 0..S {
            if let Some(out) = run.get_mut(s * STRIP_ROWS..s * STRIP_ROWS + lanes[s]) {
                // SAFETY: `out` holds `lanes[s]` f32 and the mask writes only those.
                unsafe { _mm512_mask_storeu_ps(out.as_mut_ptr(), masks[s], sumf[s][c]) };
            }
        }
    }
}

/// One pass of `S` strips (rows from `first_row`, `strip_rows[s]` each) over a group of columns,
/// `C` columns at a time (then 2, then 1).
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn strips_over_group<'x, const G: usize, X: 'x, const S: usize, const C: usize>(
    strips: [&Strip; S],
    strip_rows: [usize; S],
    first_row: usize,
    chunk: usize,
    group: usize,
    column_chunk: &impl Fn(usize) -> &'x [X],
    summaries: &[ColumnChunk; GROUP_COLUMNS],
    output: &impl Fn(usize, usize) -> (usize, usize),
    y: &mut OutputColumns<'_, '_>,
    first: bool,
    next: NextStrips,
    x_quants: &impl Fn(&X, usize) -> &[i8; 32],
    term: &(
        impl Fn(__m512, __m512) -> __m512,
        impl Fn(__m512, __m512, __m512, __m512, __m512, __m512) -> __m512,
    ),
) {
    let group = group.min(GROUP_COLUMNS);
    let parts = group / C;
    let mut c = 0;
    while c < group {
        let left = group - c;
        next.ask(c / C, parts);
        macro_rules! tile {
            ($cols:tt) => {{
                tile_columns::<G, X, S, $cols>(
                    strips,
                    chunk,
                    core::array::from_fn(|i| column_chunk(c + i)),
                    core::array::from_fn(|i| &summaries[c + i]),
                    output(c, first_row),
                    y,
                    strip_rows,
                    first,
                    x_quants,
                    term,
                );
                c += $cols;
            }};
        }
        if left >= C {
            tile!(C);
        } else if left >= 2 {
            tile!(2);
        } else {
            tile!(1);
        }
    }
}

/// The VNNI matmul driver (see the module doc): rows of `w` (`row_blocks` blocks each) against
/// the `n` columns of `x`, row `r` of column `c` into `y.get_mut(c, r)`.
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn gemm_vnni<W, X>(
    w: &[W],
    row_blocks: usize,
    x: &[X],
    n: usize,
    y: &mut OutputColumns<'_, '_>,
    kit: Kit<
        impl Fn(&W) -> __m256i,
        impl Fn(&W) -> (f32, f32),
        impl Fn(&X) -> (f32, f32),
        impl Fn(&X) -> &[i8; 32],
        impl Fn(__m512, __m512, __m512, __m512, __m512) -> __m512,
        impl Fn(&[W], usize, &[X], &mut [f32]),
    >,
) {
    let (decode, w_scales, x_scales) = (kit.decode, kit.w_scales, kit.x_scales);
    let term = kit.term;
    let kit = Kit {
        bias: kit.bias,
        min_columns: kit.min_columns,
        decode: move |b: &W, _: usize| decode(b),
        w_scales: move |b: &W, _: usize| w_scales(b),
        x_scales: move |xb: &X, _: usize| x_scales(xb),
        x_quants: whole_quants(kit.x_quants),
        term: (
            |_, _| _mm512_setzero_ps(),
            move |sumi, dw, mw, dx, sx, _| term(sumi, dw, mw, dx, sx),
        ),
        rows: kit.rows,
    };
    gemm_vnni_grouped::<1, W, X>(w, row_blocks, x, n, y, kit)
}

/// [`gemm_vnni`] for blocks of `G` groups of 32 values (a divisor of the chunk), each group with
/// its own float step: the loops' blocks are groups, the kit's closures take the group's index,
/// and its term is a pair: `block_scale(d_w, d_x)`, taken at each block's first group, and
/// `term(sumi, d_w, m_w, d_x, s_x, block_scale)` per group (a product shared by a block's groups
/// is rounded once, as the scalar twin does, instead of once per group).
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(in super::super) fn gemm_vnni_grouped<const G: usize, W, X>(
    w: &[W],
    row_blocks: usize,
    x: &[X],
    n: usize,
    y: &mut OutputColumns<'_, '_>,
    kit: Kit<
        impl Fn(&W, usize) -> __m256i,
        impl Fn(&W, usize) -> (f32, f32),
        impl Fn(&X, usize) -> (f32, f32),
        impl Fn(&X, usize) -> &[i8; 32],
        (
            impl Fn(__m512, __m512) -> __m512,
            impl Fn(__m512, __m512, __m512, __m512, __m512, __m512) -> __m512,
        ),
        impl Fn(&[W], usize, &[X], &mut [f32]),
    >,
) {
    const { assert!(G > 0 && CHUNK_BLOCKS.is_multiple_of(G)) };
    if row_blocks == 0 || n == 0 {
        return;
    }
    let column_blocks = x.len() / n;
    // Counted in groups from here on (a chunk starts on a block's first group).
    let blocks = row_blocks.min(column_blocks).saturating_mul(G);
    let rows = w.len() / row_blocks;
    if n < kit.min_columns {
        for (c, column) in x.chunks_exact(column_blocks.max(1)).take(n).enumerate() {
            if let Some(out) = y.run(c, 0, rows) {
                (kit.rows)(w, row_blocks, column, out);
            }
        }
        return;
    }
    let new_strip = || Strip {
        quants: [[_mm512_setzero_si512(); 8]; CHUNK_BLOCKS],
        d: [_mm512_setzero_ps(); CHUNK_BLOCKS],
        m: [_mm512_setzero_ps(); CHUNK_BLOCKS],
    };
    let mut strips = [new_strip(), new_strip()];
    let empty = ColumnChunk {
        d: [0.0; CHUNK_BLOCKS],
        s: [0.0; CHUNK_BLOCKS],
        neg_bias_sum: [0; CHUNK_BLOCKS],
    };
    let mut summaries = [empty; GROUP_COLUMNS];
    let bias = _mm256_set1_epi8(kit.bias);
    let (x_quants, term) = (&kit.x_quants, &kit.term);
    // At least one chunk, so that rows of no blocks still get their zero.
    let mut first_block = 0;
    while first_block == 0 || first_block < blocks {
        let chunk = CHUNK_BLOCKS.min(blocks - first_block);
        let first = first_block == 0;
        let mut first_column = 0;
        while first_column < n {
            let group = GROUP_COLUMNS.min(n - first_column);
            // The column's blocks holding the chunk's groups.
            let column_chunk = |c: usize| {
                let start = (first_column + c)
                    .saturating_mul(column_blocks)
                    .saturating_add(first_block / G);
                x.get(start..start.saturating_add(chunk.div_ceil(G)))
                    .unwrap_or(&[])
            };
            for (c, summary) in summaries.iter_mut().take(group).enumerate() {
                let blocks = column_chunk(c);
                for k in 0..chunk.min(blocks.len().saturating_mul(G)) {
                    let Some(xb) = blocks.get(k / G) else { break };
                    let (d, s) = (kit.x_scales)(xb, k % G);
                    summary.d[k] = d;
                    summary.s[k] = s;
                    let q = load32(x_quants(xb, k % G));
                    let by = dpbusd(_mm256_setzero_si256(), bias, q);
                    summary.neg_bias_sum[k] = hsum_i32(by).wrapping_neg();
                }
            }
            let output = |c: usize, row: usize| (first_column + c, row);
            let mut first_row = 0;
            while first_row < rows {
                let left = rows - first_row;
                let strip_rows = [left.min(STRIP_ROWS), left.saturating_sub(STRIP_ROWS)];
                let [a, b] = &mut strips;
                for (strip, (s, &count)) in [a, b].into_iter().zip(strip_rows.iter().enumerate()) {
                    if count > 0 {
                        let start = first_row + s * STRIP_ROWS;
                        let range = start..start + count.min(STRIP_ROWS);
                        let (decode, scales) = (&kit.decode, &kit.w_scales);
                        decode_strip::<G, W>(
                            strip,
                            w,
                            row_blocks,
                            range,
                            first_block,
                            chunk,
                            decode,
                            scales,
                        );
                    }
                }
                let next = NextStrips::after::<G, W>(
                    w,
                    row_blocks,
                    (first_row, 2 * STRIP_ROWS),
                    first_block,
                    blocks,
                );
                let [a, b] = &strips;
                if strip_rows[1] > 0 {
                    strips_over_group::<G, X, 2, 4>(
                        [a, b],
                        strip_rows.map(|r| r.min(STRIP_ROWS)),
                        first_row,
                        chunk,
                        group,
                        &column_chunk,
                        &summaries,
                        &output,
                        y,
                        first,
                        next,
                        x_quants,
                        term,
                    );
                } else {
                    strips_over_group::<G, X, 1, 4>(
                        [a],
                        [strip_rows[0]],
                        first_row,
                        chunk,
                        group,
                        &column_chunk,
                        &summaries,
                        &output,
                        y,
                        first,
                        next,
                        x_quants,
                        term,
                    );
                }
                first_row += 2 * STRIP_ROWS;
            }
            first_column += group;
        }
        first_block += CHUNK_BLOCKS;
    }
}

/// A Q8_0 activation block's `(d, 0)`.
#[inline]
#[target_feature(enable = "f16c")]
fn q8_0_scales(xb: &BlockQ8_0) -> (f32, f32) {
    (f16_le(xb.d), 0.0)
}

/// A Q8_1 activation block's `(d, s)`.
#[inline]
#[target_feature(enable = "f16c")]
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
#[inline]
#[target_feature(enable = "f16c")]
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
        t: Avx512Vnni,
        w: &[BlockQ8_0],
        row_blocks: usize,
        x: &[BlockQ8_0],
        n: usize,
        y: &mut OutputColumns<'_, '_>,
    ) {
        let kit = Kit {
            bias: -128,
            min_columns: MIN_COLUMNS_VNNI,
            decode: |b: &BlockQ8_0| _mm256_xor_si256(load32(&b.qs), _mm256_set1_epi8(-128)),
            w_scales: |b: &BlockQ8_0| d_only(b.d),
            x_scales: |xb: &BlockQ8_0| q8_0_scales(xb),
            x_quants: q8_0_quants,
            term: |sumi, dw, _, dx, _| _mm512_mul_ps(sumi, _mm512_mul_ps(dw, dx)),
            rows: |w: &[BlockQ8_0], rb, x: &[BlockQ8_0], out: &mut [f32]| rows_q8_0_vnni(t, w, rb, x, out),
        };
        gemm_vnni(w, row_blocks, x, n, y, kit)
    }

    /// Q4_0 matmul, AVX-512 VNNI: `sumf += (sumi * d_w) * d_x`, quants `q - 8`.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(in super::super) fn matmul_q4_0_vnni(
        t: Avx512Vnni,
        w: &[BlockQ4_0],
        row_blocks: usize,
        x: &[BlockQ8_0],
        n: usize,
        y: &mut OutputColumns<'_, '_>,
    ) {
        let kit = Kit {
            bias: 8,
            min_columns: MIN_COLUMNS_VNNI,
            decode: |b: &BlockQ4_0| q4_0_nibbles(&b.qs),
            w_scales: |b: &BlockQ4_0| d_only(b.d),
            x_scales: |xb: &BlockQ8_0| q8_0_scales(xb),
            x_quants: q8_0_quants,
            term: |sumi, dw, _, dx, _| _mm512_mul_ps(_mm512_mul_ps(sumi, dw), dx),
            rows: |w: &[BlockQ4_0], rb, x: &[BlockQ8_0], out: &mut [f32]| rows_q4_0_vnni(t, w, rb, x, out),
        };
        gemm_vnni(w, row_blocks, x, n, y, kit)
    }

    /// Q4_1 matmul, AVX-512 VNNI: `sumf += (d_w * d_x) * sumi + m_w * s_x`.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(in super::super) fn matmul_q4_1_vnni(
        t: Avx512Vnni,
        w: &[BlockQ4_1],
        row_blocks: usize,
        x: &[BlockQ8_1],
        n: usize,
        y: &mut OutputColumns<'_, '_>,
    ) {
        let kit = Kit {
            bias: 0,
            min_columns: MIN_COLUMNS_VNNI,
            decode: |b: &BlockQ4_1| q4_0_nibbles(&b.qs),
            w_scales: |b: &BlockQ4_1| (f16_le(b.d), f16_le(b.m)),
            x_scales: |xb: &BlockQ8_1| q8_1_scales(xb),
            x_quants: q8_1_quants,
            term: |sumi, dw, mw, dx, sx| term_with_min(sumi, dw, mw, dx, sx),
            rows: |w: &[BlockQ4_1], rb, x: &[BlockQ8_1], out: &mut [f32]| rows_q4_1_vnni(t, w, rb, x, out),
        };
        gemm_vnni(w, row_blocks, x, n, y, kit)
    }

    /// Q5_0 matmul, AVX-512 VNNI: `sumf += (d_w * d_x) * sumi`, quants `q - 16`.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(in super::super) fn matmul_q5_0_vnni(
        t: Avx512Vnni,
        w: &[BlockQ5_0],
        row_blocks: usize,
        x: &[BlockQ8_0],
        n: usize,
        y: &mut OutputColumns<'_, '_>,
    ) {
        let kit = Kit {
            bias: 16,
            min_columns: MIN_COLUMNS_VNNI,
            decode: |b: &BlockQ5_0| q5_block_masked(&b.qs, b.qh),
            w_scales: |b: &BlockQ5_0| d_only(b.d),
            x_scales: |xb: &BlockQ8_0| q8_0_scales(xb),
            x_quants: q8_0_quants,
            term: |sumi, dw, _, dx, _| term_scaled(sumi, dw, dx),
            rows: |w: &[BlockQ5_0], rb, x: &[BlockQ8_0], out: &mut [f32]| rows_q5_0_vnni(t, w, rb, x, out),
        };
        gemm_vnni(w, row_blocks, x, n, y, kit)
    }

    /// Q5_1 matmul, AVX-512 VNNI: `sumf += (d_w * d_x) * sumi + m_w * s_x`.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(in super::super) fn matmul_q5_1_vnni(
        t: Avx512Vnni,
        w: &[BlockQ5_1],
        row_blocks: usize,
        x: &[BlockQ8_1],
        n: usize,
        y: &mut OutputColumns<'_, '_>,
    ) {
        let kit = Kit {
            bias: 0,
            min_columns: MIN_COLUMNS_VNNI,
            decode: |b: &BlockQ5_1| q5_block_masked(&b.qs, b.qh),
            w_scales: |b: &BlockQ5_1| (f16_le(b.d), f16_le(b.m)),
            x_scales: |xb: &BlockQ8_1| q8_1_scales(xb),
            x_quants: q8_1_quants,
            term: |sumi, dw, mw, dx, sx| term_with_min(sumi, dw, mw, dx, sx),
            rows: |w: &[BlockQ5_1], rb, x: &[BlockQ8_1], out: &mut [f32]| rows_q5_1_vnni(t, w, rb, x, out),
        };
        gemm_vnni(w, row_blocks, x, n, y, kit)
    }

    /// IQ4_NL matmul, AVX-512 VNNI: `sumf += (d_x * d_w) * sumi`, levels biased by 128.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(in super::super) fn matmul_iq4_nl_vnni(
        t: Avx512Vnni,
        w: &[BlockIq4Nl],
        row_blocks: usize,
        x: &[BlockQ8_0],
        n: usize,
        y: &mut OutputColumns<'_, '_>,
    ) {
        let kit = Kit {
            bias: -128,
            min_columns: MIN_COLUMNS_VNNI,
            decode: |b: &BlockIq4Nl| table_biased(&b.qs, &KVALUES_IQ4NL),
            w_scales: |b: &BlockIq4Nl| d_only(b.d),
            x_scales: |xb: &BlockQ8_0| q8_0_scales(xb),
            x_quants: q8_0_quants,
            term: |sumi, dw, _, dx, _| term_scaled(sumi, dw, dx),
            rows: |w: &[BlockIq4Nl], rb, x: &[BlockQ8_0], out: &mut [f32]| {
                rows_iq4_nl_vnni(t, w, rb, x, out)
            },
        };
        gemm_vnni(w, row_blocks, x, n, y, kit)
    }

    /// MXFP4 matmul, AVX-512 VNNI: `sumf += (d_x * scale_w) * sumi`, levels biased by 128.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(in super::super) fn matmul_mxfp4_vnni(
        t: Avx512Vnni,
        w: &[BlockMxfp4],
        row_blocks: usize,
        x: &[BlockQ8_0],
        n: usize,
        y: &mut OutputColumns<'_, '_>,
    ) {
        let kit = Kit {
            bias: -128,
            min_columns: MIN_COLUMNS,
            decode: |b: &BlockMxfp4| table_biased(&b.qs, &KVALUES_FP4),
            w_scales: |b: &BlockMxfp4| (e8m0_to_f32_half(b.e), 0.0),
            x_scales: |xb: &BlockQ8_0| q8_0_scales(xb),
            x_quants: q8_0_quants,
            term: |sumi, dw, _, dx, _| term_scaled(sumi, dw, dx),
            rows: |w: &[BlockMxfp4], rb, x: &[BlockQ8_0], out: &mut [f32]| {
                rows_mxfp4_vnni(t, w, rb, x, out)
            },
        };
        gemm_vnni(w, row_blocks, x, n, y, kit)
    }
}

/// Rows of an AVX2 strip (the i32 lanes of a ymm).
const STRIP_ROWS_AVX2: usize = 8;

/// Columns of an AVX2 tile.
const TILE_COLUMNS_AVX2: usize = 4;

/// An AVX2 strip decoded for one chunk: per block, the eight transposed quant vectors and the
/// rows' scales as f32 lanes.
struct Strip8 {
    quants: [[__m256i; 8]; CHUNK_BLOCKS],
    d: [__m256; CHUNK_BLOCKS],
    m: [__m256; CHUNK_BLOCKS],
}

/// Eight rows of 32 bytes as eight vectors: vector `j` holds bytes `4j..4j + 4` of row `r` in
/// i32 lane `r` (unpacks, then the 128-bit halves put in row order).
#[inline]
#[target_feature(enable = "avx2")]
fn transpose8(rows: &[__m256i; STRIP_ROWS_AVX2]) -> [__m256i; 8] {
    let t: [__m256i; 8] = core::array::from_fn(|i| {
        let (a, b) = (rows[i & !1], rows[i | 1]);
        if i % 2 == 0 {
            _mm256_unpacklo_epi32(a, b)
        } else {
            _mm256_unpackhi_epi32(a, b)
        }
    });
    let u: [__m256i; 8] = core::array::from_fn(|i| {
        let (h, j) = (i / 4, i % 4);
        let (a, b) = (t[4 * h + j / 2], t[4 * h + 2 + j / 2]);
        if j % 2 == 0 {
            _mm256_unpacklo_epi64(a, b)
        } else {
            _mm256_unpackhi_epi64(a, b)
        }
    });
    core::array::from_fn(|j| {
        if j < 4 {
            _mm256_permute2x128_si256::<0x20>(u[j], u[4 + j])
        } else {
            _mm256_permute2x128_si256::<0x31>(u[j - 4], u[j])
        }
    })
}

/// [`decode_strip`] for eight rows.
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn decode_strip8<W>(
    strip: &mut Strip8,
    w: &[W],
    row_blocks: usize,
    rows: core::ops::Range<usize>,
    first_block: usize,
    blocks: usize,
    decode: &impl Fn(&W) -> __m256i,
    w_scales: &impl Fn(&W) -> (f32, f32),
) {
    for k in 0..blocks.min(CHUNK_BLOCKS) {
        let mut quants = [_mm256_setzero_si256(); STRIP_ROWS_AVX2];
        let mut d = [0f32; STRIP_ROWS_AVX2];
        let mut m = [0f32; STRIP_ROWS_AVX2];
        for (lane, row) in rows.clone().take(STRIP_ROWS_AVX2).enumerate() {
            let at = row
                .saturating_mul(row_blocks)
                .saturating_add(first_block + k);
            if let Some(b) = w.get(at) {
                quants[lane] = decode(b);
                (d[lane], m[lane]) = w_scales(b);
            }
        }
        strip.quants[k] = transpose8(&quants);
        // SAFETY: `d` and `m` hold eight f32; `loadu` has no alignment requirement.
        unsafe {
            strip.d[k] = _mm256_loadu_ps(d.as_ptr());
            strip.m[k] = _mm256_loadu_ps(m.as_ptr());
        }
    }
}

/// The eight rows' `Σ q·y` over one block for quants below 32 (unsigned) against activation
/// dwords `x[j]`: `maddubs` pairs (below 2·31·128) summed four at a time in i16 (below 2^15),
/// each half widened by `madd`: exact.
#[inline]
#[target_feature(enable = "avx2")]
fn block_sums8(q: &[__m256i; 8], x: &[__m256i; 8]) -> __m256i {
    let half = |h: usize| {
        let mut s = _mm256_maddubs_epi16(q[4 * h], x[4 * h]);
        for j in 1..4 {
            s = _mm256_add_epi16(s, _mm256_maddubs_epi16(q[4 * h + j], x[4 * h + j]));
        }
        _mm256_madd_epi16(s, _mm256_set1_epi16(1))
    };
    _mm256_add_epi32(half(0), half(1))
}

/// The strip's rows against `C` columns over one chunk, as [`tile_columns`] for one strip.
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn tile_columns8<X, const C: usize>(
    strip: &Strip8,
    blocks: usize,
    columns: [&[X]; C],
    summaries: [&ColumnChunk; C],
    at: (usize, usize),
    y: &mut OutputColumns<'_, '_>,
    lanes: usize,
    first: bool,
    x_quants: &impl Fn(&X) -> &[i8; 32],
    term: &impl Fn(__m256, __m256, __m256, __m256, __m256) -> __m256,
) {
    let lanes = lanes.min(STRIP_ROWS_AVX2);
    let mut sumf = [_mm256_setzero_ps(); C];
    let mut runs = y.runs::<C>(at.0, at.1, lanes);
    if !first {
        for (sum, run) in sumf.iter_mut().zip(&runs) {
            if let Some(out) = run {
                let mut lanes8 = [0f32; STRIP_ROWS_AVX2];
                lanes8[..lanes].copy_from_slice(out);
                // SAFETY: `lanes8` holds eight f32; `loadu` has no alignment requirement.
                *sum = unsafe { _mm256_loadu_ps(lanes8.as_ptr()) };
            }
        }
    }
    let blocks = columns
        .iter()
        .fold(blocks.min(CHUNK_BLOCKS), |b, column| b.min(column.len()));
    for k in 0..blocks {
        let q = &strip.quants[k];
        for c in 0..C {
            let qs = x_quants(&columns[c][k]);
            let xj: [__m256i; 8] =
                core::array::from_fn(|j| _mm256_set1_epi32(broadcast_dword(qs, j)));
            let sums = _mm256_add_epi32(
                block_sums8(q, &xj),
                _mm256_set1_epi32(summaries[c].neg_bias_sum[k]),
            );
            let dx = _mm256_set1_ps(summaries[c].d[k]);
            let sx = _mm256_set1_ps(summaries[c].s[k]);
            let t = term(_mm256_cvtepi32_ps(sums), strip.d[k], strip.m[k], dx, sx);
            sumf[c] = _mm256_add_ps(sumf[c], t);
        }
    }
    for (sum, run) in sumf.iter().zip(&mut runs) {
        if let Some(out) = run {
            let mut lanes8 = [0f32; STRIP_ROWS_AVX2];
            // SAFETY: `lanes8` holds eight f32; `storeu` has no alignment requirement.
            unsafe { _mm256_storeu_ps(lanes8.as_mut_ptr(), *sum) };
            out.copy_from_slice(&lanes8[..lanes]);
        }
    }
}

/// The AVX2 matmul driver: [`gemm_vnni`]'s loops with eight-row strips, one strip against four
/// columns at a time, and `maddubs` sums ([`block_sums8`]), so only for quants below 32.
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn gemm_avx2<W, X>(
    w: &[W],
    row_blocks: usize,
    x: &[X],
    n: usize,
    y: &mut OutputColumns<'_, '_>,
    kit: Kit<
        impl Fn(&W) -> __m256i,
        impl Fn(&W) -> (f32, f32),
        impl Fn(&X) -> (f32, f32),
        impl Fn(&X) -> &[i8; 32],
        impl Fn(__m256, __m256, __m256, __m256, __m256) -> __m256,
        impl Fn(&[W], usize, &[X], &mut [f32]),
    >,
) {
    if row_blocks == 0 || n == 0 {
        return;
    }
    let column_blocks = x.len() / n;
    let blocks = row_blocks.min(column_blocks);
    let rows = w.len() / row_blocks;
    if n < kit.min_columns {
        for (c, column) in x.chunks_exact(column_blocks.max(1)).take(n).enumerate() {
            if let Some(out) = y.run(c, 0, rows) {
                (kit.rows)(w, row_blocks, column, out);
            }
        }
        return;
    }
    let mut strip = Strip8 {
        quants: [[_mm256_setzero_si256(); 8]; CHUNK_BLOCKS],
        d: [_mm256_setzero_ps(); CHUNK_BLOCKS],
        m: [_mm256_setzero_ps(); CHUNK_BLOCKS],
    };
    let empty = ColumnChunk {
        d: [0.0; CHUNK_BLOCKS],
        s: [0.0; CHUNK_BLOCKS],
        neg_bias_sum: [0; CHUNK_BLOCKS],
    };
    let mut summaries = [empty; GROUP_COLUMNS];
    let bias = _mm256_set1_epi8(kit.bias);
    let (x_quants, term) = (&kit.x_quants, &kit.term);
    let mut first_block = 0;
    while first_block == 0 || first_block < blocks {
        let chunk = CHUNK_BLOCKS.min(blocks - first_block);
        let first = first_block == 0;
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
                    // `bias · Σ y`, the bias below 32: `maddubs` pairs fit i16.
                    let by = _mm256_maddubs_epi16(bias, load32(x_quants(xb)));
                    let by = _mm256_madd_epi16(by, _mm256_set1_epi16(1));
                    summary.neg_bias_sum[k] = hsum_i32(by).wrapping_neg();
                }
            }
            let output = |c: usize, row: usize| (first_column + c, row);
            let mut first_row = 0;
            while first_row < rows {
                let lanes = STRIP_ROWS_AVX2.min(rows - first_row);
                let range = first_row..first_row + lanes;
                let (decode, scales) = (&kit.decode, &kit.w_scales);
                decode_strip8(
                    &mut strip,
                    w,
                    row_blocks,
                    range,
                    first_block,
                    chunk,
                    decode,
                    scales,
                );
                let next = NextStrips::after::<1, W>(
                    w,
                    row_blocks,
                    (first_row, STRIP_ROWS_AVX2),
                    first_block,
                    blocks,
                );
                let parts = group / TILE_COLUMNS_AVX2;
                let mut c = 0;
                while c < group {
                    next.ask(c / TILE_COLUMNS_AVX2, parts);
                    macro_rules! tile {
                        ($cols:tt) => {{
                            tile_columns8::<X, $cols>(
                                &strip,
                                chunk,
                                core::array::from_fn(|i| column_chunk(c + i)),
                                core::array::from_fn(|i| &summaries[c + i]),
                                output(c, first_row),
                                y,
                                lanes,
                                first,
                                x_quants,
                                term,
                            );
                            c += $cols;
                        }};
                    }
                    if group - c >= TILE_COLUMNS_AVX2 {
                        tile!(TILE_COLUMNS_AVX2);
                    } else {
                        tile!(1);
                    }
                }
                first_row += STRIP_ROWS_AVX2;
            }
            first_column += group;
        }
        first_block += CHUNK_BLOCKS;
    }
}

/// An AVX2 strip of full-byte quants (Q8_0, IQ4_NL: products that `maddubs` pairs would
/// saturate) decoded for one chunk: per block, sixteen transposed vectors of i16 pairs (vector
/// `j` holds elements `2j, 2j + 1` of row `r`, sign-extended, in i32 lane `r`) and the rows'
/// scales `(d, m)`.
struct Strip8Wide {
    quants: [[__m256i; 16]; CHUNK_BLOCKS],
    d: [__m256; CHUNK_BLOCKS],
    m: [__m256; CHUNK_BLOCKS],
}

/// [`decode_strip8`] for [`Strip8Wide`] (blocks of `G` groups, as [`decode_strip`]): `decode`
/// gives a block's (group's) 32 signed quants.
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn decode_strip8_wide<const G: usize, W>(
    strip: &mut Strip8Wide,
    w: &[W],
    row_blocks: usize,
    rows: core::ops::Range<usize>,
    first_block: usize,
    blocks: usize,
    decode: &impl Fn(&W, usize) -> __m256i,
    w_scales: &impl Fn(&W, usize) -> (f32, f32),
) {
    for k in 0..blocks.min(CHUNK_BLOCKS) {
        let mut low = [_mm256_setzero_si256(); STRIP_ROWS_AVX2];
        let mut high = [_mm256_setzero_si256(); STRIP_ROWS_AVX2];
        let mut d = [0f32; STRIP_ROWS_AVX2];
        let mut m = [0f32; STRIP_ROWS_AVX2];
        let unit = first_block + k;
        for (lane, row) in rows.clone().take(STRIP_ROWS_AVX2).enumerate() {
            let at = row.saturating_mul(row_blocks).saturating_add(unit / G);
            if let Some(b) = w.get(at) {
                let q = decode(b, unit % G);
                low[lane] = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(q));
                high[lane] = _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(q));
                (d[lane], m[lane]) = w_scales(b, unit % G);
            }
        }
        let (low, high) = (transpose8(&low), transpose8(&high));
        strip.quants[k] = core::array::from_fn(|j| if j < 8 { low[j] } else { high[j - 8] });
        // SAFETY: `d` and `m` hold eight f32; `loadu` has no alignment requirement.
        unsafe {
            strip.d[k] = _mm256_loadu_ps(d.as_ptr());
            strip.m[k] = _mm256_loadu_ps(m.as_ptr());
        }
    }
}

/// An activation block's quants as sixteen i16 pairs (elements `2j, 2j + 1` in dword `j`).
#[inline]
#[target_feature(enable = "avx2")]
fn pairs16(qs: &[i8; 32]) -> [i32; 16] {
    let q = load32(qs);
    let mut pairs = [0i32; 16];
    // SAFETY: `pairs` holds sixteen i32 (two vectors); `storeu` has no alignment requirement.
    unsafe {
        let at = pairs.as_mut_ptr().cast::<__m256i>();
        _mm256_storeu_si256(at, _mm256_cvtepi8_epi16(_mm256_castsi256_si128(q)));
        _mm256_storeu_si256(
            at.add(1),
            _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(q)),
        );
    }
    pairs
}

/// `S` wide strips' rows against `C` columns over one chunk: per block and column, sixteen
/// `madd` of each strip's i16 pairs against the column's pair `j` broadcast (one broadcast for
/// all strips; exact i32 sums), then the float term `term(sumi, d_w, m_w, d_x)` in the scalar
/// order. With `G` groups per block, as [`tile_columns`].
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn tile_columns8_wide<const G: usize, X, const S: usize, const C: usize>(
    strips: [&Strip8Wide; S],
    blocks: usize,
    columns: [&[X]; C],
    summaries: [&ColumnChunk; C],
    at: (usize, usize),
    y: &mut OutputColumns<'_, '_>,
    lanes: [usize; S],
    first: bool,
    x_quants: &impl Fn(&X, usize) -> &[i8; 32],
    term: &impl Fn(__m256, __m256, __m256, __m256) -> __m256,
) {
    let lanes = lanes.map(|l| l.min(STRIP_ROWS_AVX2));
    let mut sumf = [[_mm256_setzero_ps(); C]; S];
    // Every strip's rows of each column, in one run (only the last strip can be short).
    let mut span = 0;
    for (s, &l) in lanes.iter().enumerate() {
        if l > 0 {
            span = s * STRIP_ROWS_AVX2 + l;
        }
    }
    let mut runs = y.runs::<C>(at.0, at.1, span);
    if !first {
        for (c, run) in runs.iter().enumerate() {
            let Some(run) = run else { continue };
            for s in 0..S {
                let rows = s * STRIP_ROWS_AVX2..s * STRIP_ROWS_AVX2 + lanes[s];
                if let Some(out) = run.get(rows) {
                    let mut lanes8 = [0f32; STRIP_ROWS_AVX2];
                    lanes8[..lanes[s]].copy_from_slice(out);
                    // SAFETY: `lanes8` holds eight f32; `loadu` has no alignment requirement.
                    sumf[s][c] = unsafe { _mm256_loadu_ps(lanes8.as_ptr()) };
                }
            }
        }
    }
    let blocks = columns.iter().fold(blocks.min(CHUNK_BLOCKS), |b, column| {
        b.min(column.len().saturating_mul(G))
    });
    for k in 0..blocks {
        let pairs: [[i32; 16]; C] =
            core::array::from_fn(|c| pairs16(x_quants(&columns[c][k / G], k % G)));
        let mut acc = [[_mm256_setzero_si256(); C]; S];
        for j in 0..16 {
            for c in 0..C {
                let xj = _mm256_set1_epi32(pairs[c][j]);
                for s in 0..S {
                    let p = _mm256_madd_epi16(strips[s].quants[k][j], xj);
                    acc[s][c] = _mm256_add_epi32(acc[s][c], p);
                }
            }
        }
        for c in 0..C {
            let dx = _mm256_set1_ps(summaries[c].d[k]);
            for s in 0..S {
                let (dw, mw) = (strips[s].d[k], strips[s].m[k]);
                let t = term(_mm256_cvtepi32_ps(acc[s][c]), dw, mw, dx);
                sumf[s][c] = _mm256_add_ps(sumf[s][c], t);
            }
        }
    }
    for (c, run) in runs.iter_mut().enumerate() {
        let Some(run) = run else { continue };
        for s in 0..S {
            let rows = s * STRIP_ROWS_AVX2..s * STRIP_ROWS_AVX2 + lanes[s];
            if let Some(out) = run.get_mut(rows) {
                let mut lanes8 = [0f32; STRIP_ROWS_AVX2];
                // SAFETY: `lanes8` holds eight f32; `storeu` has no alignment requirement.
                unsafe { _mm256_storeu_ps(lanes8.as_mut_ptr(), sumf[s][c]) };
                out.copy_from_slice(&lanes8[..lanes[s]]);
            }
        }
    }
}

/// The AVX2 matmul driver for full-byte quants: [`gemm_avx2`]'s loops over [`Strip8Wide`] strips
/// (no bias: the quants stay signed), `term(sumi, d_w, d_x)`.
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn gemm_avx2_wide<W, X>(
    w: &[W],
    row_blocks: usize,
    x: &[X],
    n: usize,
    y: &mut OutputColumns<'_, '_>,
    kit: Kit<
        impl Fn(&W) -> __m256i,
        impl Fn(&W) -> (f32, f32),
        impl Fn(&X) -> (f32, f32),
        impl Fn(&X) -> &[i8; 32],
        impl Fn(__m256, __m256, __m256) -> __m256,
        impl Fn(&[W], usize, &[X], &mut [f32]),
    >,
) {
    let (decode, w_scales, x_scales) = (kit.decode, kit.w_scales, kit.x_scales);
    let term = kit.term;
    let kit = Kit {
        bias: kit.bias,
        min_columns: kit.min_columns,
        decode: move |b: &W, _: usize| decode(b),
        w_scales: move |b: &W, _: usize| w_scales(b),
        x_scales: move |xb: &X, _: usize| x_scales(xb),
        x_quants: whole_quants(kit.x_quants),
        term: move |sumi, dw, _, dx| term(sumi, dw, dx),
        rows: kit.rows,
    };
    gemm_avx2_wide_grouped::<1, W, X>(w, row_blocks, x, n, y, kit)
}

/// [`gemm_avx2_wide`] for blocks of `G` groups of 32 values (as [`gemm_vnni_grouped`]), with
/// `term(sumi, d_w, m_w, d_x)`.
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(in super::super) fn gemm_avx2_wide_grouped<const G: usize, W, X>(
    w: &[W],
    row_blocks: usize,
    x: &[X],
    n: usize,
    y: &mut OutputColumns<'_, '_>,
    kit: Kit<
        impl Fn(&W, usize) -> __m256i,
        impl Fn(&W, usize) -> (f32, f32),
        impl Fn(&X, usize) -> (f32, f32),
        impl Fn(&X, usize) -> &[i8; 32],
        impl Fn(__m256, __m256, __m256, __m256) -> __m256,
        impl Fn(&[W], usize, &[X], &mut [f32]),
    >,
) {
    const { assert!(G > 0 && CHUNK_BLOCKS.is_multiple_of(G)) };
    if row_blocks == 0 || n == 0 {
        return;
    }
    let column_blocks = x.len() / n;
    // Counted in groups from here on (a chunk starts on a block's first group).
    let blocks = row_blocks.min(column_blocks).saturating_mul(G);
    let rows = w.len() / row_blocks;
    if n < kit.min_columns {
        for (c, column) in x.chunks_exact(column_blocks.max(1)).take(n).enumerate() {
            if let Some(out) = y.run(c, 0, rows) {
                (kit.rows)(w, row_blocks, column, out);
            }
        }
        return;
    }
    let new_strip = || Strip8Wide {
        quants: [[_mm256_setzero_si256(); 16]; CHUNK_BLOCKS],
        d: [_mm256_setzero_ps(); CHUNK_BLOCKS],
        m: [_mm256_setzero_ps(); CHUNK_BLOCKS],
    };
    let mut strips = [new_strip(), new_strip()];
    let empty = ColumnChunk {
        d: [0.0; CHUNK_BLOCKS],
        s: [0.0; CHUNK_BLOCKS],
        neg_bias_sum: [0; CHUNK_BLOCKS],
    };
    let mut summaries = [empty; GROUP_COLUMNS];
    let (x_quants, term) = (&kit.x_quants, &kit.term);
    let mut first_block = 0;
    while first_block == 0 || first_block < blocks {
        let chunk = CHUNK_BLOCKS.min(blocks - first_block);
        let first = first_block == 0;
        let mut first_column = 0;
        while first_column < n {
            let group = GROUP_COLUMNS.min(n - first_column);
            // The column's blocks holding the chunk's groups.
            let column_chunk = |c: usize| {
                let start = (first_column + c)
                    .saturating_mul(column_blocks)
                    .saturating_add(first_block / G);
                x.get(start..start.saturating_add(chunk.div_ceil(G)))
                    .unwrap_or(&[])
            };
            for (c, summary) in summaries.iter_mut().take(group).enumerate() {
                let blocks = column_chunk(c);
                for k in 0..chunk.min(blocks.len().saturating_mul(G)) {
                    let Some(xb) = blocks.get(k / G) else { break };
                    summary.d[k] = (kit.x_scales)(xb, k % G).0;
                }
            }
            let output = |c: usize, row: usize| (first_column + c, row);
            let mut first_row = 0;
            while first_row < rows {
                let left = rows - first_row;
                let lanes = [
                    left.min(STRIP_ROWS_AVX2),
                    left.saturating_sub(STRIP_ROWS_AVX2).min(STRIP_ROWS_AVX2),
                ];
                for (s, strip) in strips.iter_mut().enumerate() {
                    if lanes[s] > 0 {
                        let start = first_row + s * STRIP_ROWS_AVX2;
                        let (decode, scales) = (&kit.decode, &kit.w_scales);
                        decode_strip8_wide::<G, W>(
                            strip,
                            w,
                            row_blocks,
                            start..start + lanes[s],
                            first_block,
                            chunk,
                            decode,
                            scales,
                        );
                    }
                }
                let next = NextStrips::after::<G, W>(
                    w,
                    row_blocks,
                    (first_row, 2 * STRIP_ROWS_AVX2),
                    first_block,
                    blocks,
                );
                let parts = group / TILE_COLUMNS_AVX2;
                let [a, b] = &strips;
                let mut c = 0;
                while c < group {
                    next.ask(c / TILE_COLUMNS_AVX2, parts);
                    macro_rules! tile {
                        ($strips:expr, $s:tt, $cols:tt) => {{
                            tile_columns8_wide::<G, X, $s, $cols>(
                                $strips,
                                chunk,
                                core::array::from_fn(|i| column_chunk(c + i)),
                                core::array::from_fn(|i| &summaries[c + i]),
                                output(c, first_row),
                                y,
                                core::array::from_fn(|s| lanes[s]),
                                first,
                                x_quants,
                                term,
                            );
                            c += $cols;
                        }};
                    }
                    let wide = group - c >= TILE_COLUMNS_AVX2;
                    match (lanes[1] > 0, wide) {
                        (true, true) => tile!([a, b], 2, TILE_COLUMNS_AVX2),
                        (true, false) => tile!([a, b], 2, 1),
                        (false, true) => tile!([a], 1, TILE_COLUMNS_AVX2),
                        (false, false) => tile!([a], 1, 1),
                    }
                }
                first_row += 2 * STRIP_ROWS_AVX2;
            }
            first_column += group;
        }
        first_block += CHUNK_BLOCKS;
    }
}

/// `(d_w · d_x) · sumi + m_w · s_x` on eight rows.
#[inline]
#[target_feature(enable = "avx2")]
fn term_with_min8(sumi: __m256, dw: __m256, mw: __m256, dx: __m256, sx: __m256) -> __m256 {
    _mm256_add_ps(
        _mm256_mul_ps(_mm256_mul_ps(dw, dx), sumi),
        _mm256_mul_ps(mw, sx),
    )
}

/// The 32 quants of one Q5 block in element order, below 32 (AVX2).
#[inline]
#[target_feature(enable = "avx2")]
fn q5_block(qs: &[u8; 16], qh: [u8; 4]) -> __m256i {
    _mm256_or_si256(q4_0_nibbles(qs), super::fifth_bits(qh))
}

kernel! {
    /// Q4_0 matmul, AVX2: `sumf += (sumi * d_w) * d_x`, quants `q - 8`.
    #[target_feature(enable = "avx2,f16c")]
    pub(in super::super) fn matmul_q4_0(
        t: Avx2,
        w: &[BlockQ4_0],
        row_blocks: usize,
        x: &[BlockQ8_0],
        n: usize,
        y: &mut OutputColumns<'_, '_>,
    ) {
        let kit = Kit {
            bias: 8,
            min_columns: MIN_COLUMNS,
            decode: |b: &BlockQ4_0| q4_0_nibbles(&b.qs),
            w_scales: |b: &BlockQ4_0| d_only(b.d),
            x_scales: |xb: &BlockQ8_0| q8_0_scales(xb),
            x_quants: q8_0_quants,
            term: |sumi, dw, _, dx, _| _mm256_mul_ps(_mm256_mul_ps(sumi, dw), dx),
            rows: |w: &[BlockQ4_0], rb, x: &[BlockQ8_0], out: &mut [f32]| rows_q4_0(t, w, rb, x, out),
        };
        gemm_avx2(w, row_blocks, x, n, y, kit)
    }

    /// Q4_1 matmul, AVX2: `sumf += (d_w * d_x) * sumi + m_w * s_x`.
    #[target_feature(enable = "avx2,f16c")]
    pub(in super::super) fn matmul_q4_1(
        t: Avx2,
        w: &[BlockQ4_1],
        row_blocks: usize,
        x: &[BlockQ8_1],
        n: usize,
        y: &mut OutputColumns<'_, '_>,
    ) {
        let kit = Kit {
            bias: 0,
            min_columns: MIN_COLUMNS_AVX2_Q4_1,
            decode: |b: &BlockQ4_1| q4_0_nibbles(&b.qs),
            w_scales: |b: &BlockQ4_1| (f16_le(b.d), f16_le(b.m)),
            x_scales: |xb: &BlockQ8_1| q8_1_scales(xb),
            x_quants: q8_1_quants,
            term: |sumi, dw, mw, dx, sx| term_with_min8(sumi, dw, mw, dx, sx),
            rows: |w: &[BlockQ4_1], rb, x: &[BlockQ8_1], out: &mut [f32]| rows_q4_1(t, w, rb, x, out),
        };
        gemm_avx2(w, row_blocks, x, n, y, kit)
    }

    /// Q5_0 matmul, AVX2: `sumf += (d_w * d_x) * sumi`, quants `q - 16`.
    #[target_feature(enable = "avx2,f16c")]
    pub(in super::super) fn matmul_q5_0(
        t: Avx2,
        w: &[BlockQ5_0],
        row_blocks: usize,
        x: &[BlockQ8_0],
        n: usize,
        y: &mut OutputColumns<'_, '_>,
    ) {
        let kit = Kit {
            bias: 16,
            min_columns: MIN_COLUMNS_AVX2_Q5_0,
            decode: |b: &BlockQ5_0| q5_block(&b.qs, b.qh),
            w_scales: |b: &BlockQ5_0| d_only(b.d),
            x_scales: |xb: &BlockQ8_0| q8_0_scales(xb),
            x_quants: q8_0_quants,
            term: |sumi, dw, _, dx, _| _mm256_mul_ps(_mm256_mul_ps(dw, dx), sumi),
            rows: |w: &[BlockQ5_0], rb, x: &[BlockQ8_0], out: &mut [f32]| rows_q5_0(t, w, rb, x, out),
        };
        gemm_avx2(w, row_blocks, x, n, y, kit)
    }

    /// Q5_1 matmul, AVX2: `sumf += (d_w * d_x) * sumi + m_w * s_x`.
    #[target_feature(enable = "avx2,f16c")]
    pub(in super::super) fn matmul_q5_1(
        t: Avx2,
        w: &[BlockQ5_1],
        row_blocks: usize,
        x: &[BlockQ8_1],
        n: usize,
        y: &mut OutputColumns<'_, '_>,
    ) {
        let kit = Kit {
            bias: 0,
            min_columns: MIN_COLUMNS,
            decode: |b: &BlockQ5_1| q5_block(&b.qs, b.qh),
            w_scales: |b: &BlockQ5_1| (f16_le(b.d), f16_le(b.m)),
            x_scales: |xb: &BlockQ8_1| q8_1_scales(xb),
            x_quants: q8_1_quants,
            term: |sumi, dw, mw, dx, sx| term_with_min8(sumi, dw, mw, dx, sx),
            rows: |w: &[BlockQ5_1], rb, x: &[BlockQ8_1], out: &mut [f32]| rows_q5_1(t, w, rb, x, out),
        };
        gemm_avx2(w, row_blocks, x, n, y, kit)
    }

    /// Q8_0 matmul, AVX2: `sumf += sumi * (d_w * d_x)`, quants widened to i16.
    #[target_feature(enable = "avx2,f16c")]
    pub(in super::super) fn matmul_q8_0(
        t: Avx2,
        w: &[BlockQ8_0],
        row_blocks: usize,
        x: &[BlockQ8_0],
        n: usize,
        y: &mut OutputColumns<'_, '_>,
    ) {
        let kit = Kit {
            bias: 0,
            min_columns: MIN_COLUMNS,
            decode: |b: &BlockQ8_0| load32(&b.qs),
            w_scales: |b: &BlockQ8_0| d_only(b.d),
            x_scales: |xb: &BlockQ8_0| q8_0_scales(xb),
            x_quants: q8_0_quants,
            term: |sumi, dw, dx| _mm256_mul_ps(sumi, _mm256_mul_ps(dw, dx)),
            rows: |w: &[BlockQ8_0], rb, x: &[BlockQ8_0], out: &mut [f32]| rows_q8_0(t, w, rb, x, out),
        };
        gemm_avx2_wide(w, row_blocks, x, n, y, kit)
    }

    /// IQ4_NL matmul, AVX2: `sumf += (d_x * d_w) * sumi`, levels widened to i16.
    #[target_feature(enable = "avx2,f16c")]
    pub(in super::super) fn matmul_iq4_nl(
        t: Avx2,
        w: &[BlockIq4Nl],
        row_blocks: usize,
        x: &[BlockQ8_0],
        n: usize,
        y: &mut OutputColumns<'_, '_>,
    ) {
        let kit = Kit {
            bias: 0,
            min_columns: MIN_COLUMNS,
            decode: |b: &BlockIq4Nl| {
                let table = _mm256_broadcastsi128_si256(load16(&KVALUES_IQ4NL));
                _mm256_shuffle_epi8(table, q4_0_nibbles(&b.qs))
            },
            w_scales: |b: &BlockIq4Nl| d_only(b.d),
            x_scales: |xb: &BlockQ8_0| q8_0_scales(xb),
            x_quants: q8_0_quants,
            term: |sumi, dw, dx| _mm256_mul_ps(_mm256_mul_ps(dw, dx), sumi),
            rows: |w: &[BlockIq4Nl], rb, x: &[BlockQ8_0], out: &mut [f32]| {
                rows_iq4_nl(t, w, rb, x, out)
            },
        };
        gemm_avx2_wide(w, row_blocks, x, n, y, kit)
    }
}
