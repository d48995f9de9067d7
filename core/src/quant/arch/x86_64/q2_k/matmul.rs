//! Q2_K matmul at AVX-512 VNNI: many weight rows against many activation columns, every output
//! with the bits of its scalar vec_dot.
//!
//! Q2_K's scalar twin sums a whole super-block in one integer (`Σ sc·Σ q·x`, no lanes) and takes
//! one float step per super-block, so it runs as the legacy tiles do (`legacy::matmul`): sixteen
//! rows in the i32 lanes of a zmm, each row's super-block decoded once per chunk into the bytes
//! `q·sc` (at most 3·15: exact unsigned `vpdpbusd` operands, so the sub-block scales cost nothing
//! per column) and transposed so that vector `j` holds bytes `4j..4j + 4` of every row. A
//! column's super-block is then 64 `vpdpbusd` against its dwords broadcast, and `Σ bsums·mins` 8
//! `vpdpwssd` against the rows' min pairs; the float step `sumf += (dx·d)·isum − (dx·dmin)·summs`
//! runs on all sixteen rows at once in the twin's order. Between chunks a lane's `sumf` waits in
//! its output (an f32, exact).

use crate::quant::OutputColumns;
use core::arch::x86_64::*;

use super::super::legacy::matmul::transpose16;
use super::super::tokens::{kernel, Avx512Vnni};
use super::super::vector::{f16_le, load32, part};
use super::rows;
use crate::quant::activation::BlockQ8K;
use crate::quant::k_quants::BlockQ2K;

/// Rows of a strip (the i32 lanes of a zmm).
const STRIP_ROWS: usize = 16;

/// Super-blocks of a chunk: a decoded strip of them is 18 KiB.
const CHUNK_BLOCKS: usize = 4;

/// Columns that share a decoded strip: 128, as the legacy tiles (docs/kernel-experiments.md,
/// "ggml's repacked GEMMs against ours").
const GROUP_COLUMNS: usize = 128;

/// Fewer columns than this run the rows kernel once per column (docs/kernel-experiments.md).
const MIN_COLUMNS: usize = 4;

/// A strip of rows decoded for one chunk: per super-block, the 64 transposed vectors of `q·sc`,
/// the eight vectors of min pairs (`m[2i]`, `m[2i + 1]` as i16 in lane `r`), and `d`, `dmin`.
struct Strip {
    quants: [[__m512i; 64]; CHUNK_BLOCKS],
    mins: [[__m512i; 8]; CHUNK_BLOCKS],
    d: [__m512; CHUNK_BLOCKS],
    dmin: [__m512; CHUNK_BLOCKS],
}

/// A block's 256 quants times their sub-block scales, as bytes in element order: group `g`
/// (values `32g..32g + 32`: sub-blocks `2g` and `2g + 1`) is bits `2(g % 4)..` of the 32 `qs`
/// bytes of half `g / 4`, each 16-bit lane times its sub-block's scale (`q ≤ 3`, `sc ≤ 15`: the
/// low byte's product never carries into the high byte's).
#[inline]
#[target_feature(enable = "avx2")]
fn scaled_quants(b: &BlockQ2K) -> [__m256i; 8] {
    let three = _mm256_set1_epi8(3);
    let scale = |s: usize| i16::from(b.scales.get(s).copied().unwrap_or(0) & 0x0f);
    core::array::from_fn(|g| {
        let bytes = load32(part(&b.qs, 32 * (g / 4)));
        let shift = _mm_cvtsi32_si128(2 * (g % 4) as i32);
        let q = _mm256_and_si256(_mm256_srl_epi16(bytes, shift), three);
        let sc = _mm256_setr_m128i(
            _mm_set1_epi16(scale(2 * g)),
            _mm_set1_epi16(scale(2 * g + 1)),
        );
        _mm256_mullo_epi16(q, sc)
    })
}

/// Decodes rows `rows` of `w` (`row_blocks` super-blocks each) for the chunk of super-blocks at
/// `first_block` (`blocks` of them) into `strip`; lanes past the strip's rows get zeros.
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn decode_strip(
    strip: &mut Strip,
    w: &[BlockQ2K],
    row_blocks: usize,
    rows: core::ops::Range<usize>,
    first_block: usize,
    blocks: usize,
) {
    let zero = <BlockQ2K as bytemuck::Zeroable>::zeroed();
    for k in 0..blocks.min(CHUNK_BLOCKS) {
        let block = |r: usize| {
            let row = rows.start + r;
            if row < rows.end {
                w.get(row * row_blocks + first_block + k).unwrap_or(&zero)
            } else {
                &zero
            }
        };
        let mut scaled = [[_mm256_setzero_si256(); 8]; STRIP_ROWS];
        let mut min_pairs = [[0i32; STRIP_ROWS]; 8];
        let mut d = [0f32; STRIP_ROWS];
        let mut dmin = [0f32; STRIP_ROWS];
        for r in 0..STRIP_ROWS {
            let b = block(r);
            scaled[r] = scaled_quants(b);
            for (i, pairs) in min_pairs.iter_mut().enumerate() {
                let m = |s: usize| i32::from(b.scales.get(s).copied().unwrap_or(0) >> 4);
                pairs[r] = m(2 * i) | m(2 * i + 1) << 16;
            }
            d[r] = f16_le(b.d);
            dmin[r] = f16_le(b.dmin);
        }
        for (g, vectors) in strip.quants[k].chunks_exact_mut(8).enumerate() {
            let group: [__m256i; STRIP_ROWS] = core::array::from_fn(|r| scaled[r][g]);
            vectors.copy_from_slice(&transpose16(&group));
        }
        for (v, pairs) in strip.mins[k].iter_mut().zip(&min_pairs) {
            // SAFETY: `pairs` holds 16 i32, which the unaligned load reads.
            *v = unsafe { _mm512_loadu_si512(pairs.as_ptr().cast()) };
        }
        // SAFETY: as above, 16 f32 each.
        strip.d[k] = unsafe { _mm512_loadu_ps(d.as_ptr()) };
        // SAFETY: as above.
        strip.dmin[k] = unsafe { _mm512_loadu_ps(dmin.as_ptr()) };
    }
}

/// Dword `j` of a column's quants (bytes `4j..4j + 4`).
#[inline(always)]
fn quant_dword(xb: &BlockQ8K, j: usize) -> i32 {
    let q = |i: usize| xb.qs.get(4 * j + i).map_or(0, |&v| v as u8);
    i32::from_le_bytes([q(0), q(1), q(2), q(3)])
}

/// Dword `j` of a column's `bsums`: the i16 pair `2j, 2j + 1`.
#[inline(always)]
fn bsum_dword(xb: &BlockQ8K, j: usize) -> i32 {
    let b = |i: usize| xb.bsums.get(2 * j + i).copied().unwrap_or([0, 0]);
    let (a, c) = (b(0), b(1));
    i32::from_le_bytes([a[0], a[1], c[0], c[1]])
}

/// `S` strips' rows against `C` columns over one chunk (`columns[c]` the column's super-blocks of
/// the chunk): `at` is the first column and the first row of strip 0 in `y` (strip `s` starts
/// `s * STRIP_ROWS` rows on), `strip_rows[s]` its row count; `first` says whether this is the rows' first chunk (else each
/// `sumf` continues from `y`).
// Strip and column indices into parallel arrays of an unrolled tile read best as such.
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn tile<const S: usize, const C: usize>(
    strips: [&Strip; S],
    blocks: usize,
    columns: [&[BlockQ8K]; C],
    at: (usize, usize),
    y: &mut OutputColumns<'_, '_>,
    strip_rows: [usize; S],
    first: bool,
) {
    let lanes = strip_rows.map(|r| r.min(STRIP_ROWS));
    let masks = lanes.map(|l| ((1u32 << l) - 1) as __mmask16);
    let mut sumf = [[_mm512_setzero_ps(); C]; S];
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
    let blocks = columns
        .iter()
        .fold(blocks.min(CHUNK_BLOCKS), |b, column| b.min(column.len()));
    for k in 0..blocks {
        let xs: [&BlockQ8K; C] = core::array::from_fn(|c| &columns[c][k]);
        let mut isum = [[_mm512_setzero_si512(); C]; S];
        for j in 0..64 {
            let xj: [__m512i; C] = xs.map(|xb| _mm512_set1_epi32(quant_dword(xb, j)));
            for s in 0..S {
                let wj = strips[s].quants[k][j];
                for c in 0..C {
                    isum[s][c] = _mm512_dpbusd_epi32(isum[s][c], wj, xj[c]);
                }
            }
        }
        let mut summs = [[_mm512_setzero_si512(); C]; S];
        for i in 0..8 {
            let xi: [__m512i; C] = xs.map(|xb| _mm512_set1_epi32(bsum_dword(xb, i)));
            for s in 0..S {
                let mi = strips[s].mins[k][i];
                for c in 0..C {
                    summs[s][c] = _mm512_dpwssd_epi32(summs[s][c], mi, xi[c]);
                }
            }
        }
        for c in 0..C {
            let dx = _mm512_set1_ps(xs[c].scale());
            for s in 0..S {
                let dall = _mm512_mul_ps(dx, strips[s].d[k]);
                let dmin = _mm512_mul_ps(dx, strips[s].dmin[k]);
                let term = _mm512_sub_ps(
                    _mm512_mul_ps(dall, _mm512_cvtepi32_ps(isum[s][c])),
                    _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(summs[s][c])),
                );
                sumf[s][c] = _mm512_add_ps(sumf[s][c], term);
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

/// One pass of `S` strips (rows from `first_row`) over a group of columns, four at a time (then
/// one).
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn strips_over_group<'x, const S: usize>(
    strips: [&Strip; S],
    strip_rows: [usize; S],
    first_row: usize,
    chunk: usize,
    group: usize,
    column_chunk: &impl Fn(usize) -> &'x [BlockQ8K],
    output: &impl Fn(usize, usize) -> (usize, usize),
    y: &mut OutputColumns<'_, '_>,
    first: bool,
) {
    let mut c = 0;
    while c < group {
        macro_rules! tile {
            ($cols:literal) => {{
                tile::<S, $cols>(
                    strips,
                    chunk,
                    core::array::from_fn(|i| column_chunk(c + i)),
                    output(c, first_row),
                    y,
                    strip_rows,
                    first,
                );
                c += $cols;
            }};
        }
        if group - c >= 4 {
            tile!(4);
        } else {
            tile!(1);
        }
    }
}

kernel! {
    /// Q2_K matmul, AVX-512 VNNI (see the module doc): rows of `w` (`row_blocks` super-blocks
    /// each) against the `n` columns of `x`, row `r` of column `c` into `y.get_mut(c, r)`.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(in super::super) fn matmul_vnni(
        t: Avx512Vnni,
        w: &[BlockQ2K],
        row_blocks: usize,
        x: &[BlockQ8K],
        n: usize,
        y: &mut OutputColumns<'_, '_>,
    ) {
        if row_blocks == 0 || n == 0 {
            return;
        }
        let column_blocks = x.len() / n;
        let blocks = row_blocks.min(column_blocks);
        let rows_count = w.len() / row_blocks;
        if n < MIN_COLUMNS {
            for (c, column) in x.chunks_exact(column_blocks.max(1)).take(n).enumerate() {
                if let Some(out) = y.run(c, 0, rows_count) {
                    rows(t.avx2(), w, row_blocks, column, out);
                }
            }
            return;
        }
        let new_strip = || Strip {
            quants: [[_mm512_setzero_si512(); 64]; CHUNK_BLOCKS],
            mins: [[_mm512_setzero_si512(); 8]; CHUNK_BLOCKS],
            d: [_mm512_setzero_ps(); CHUNK_BLOCKS],
            dmin: [_mm512_setzero_ps(); CHUNK_BLOCKS],
        };
        let mut strips = [new_strip(), new_strip()];
        // At least one chunk, so that rows of no super-blocks still get their zero.
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
                let output = |c: usize, row: usize| {
                    (first_column + c, row)
                };
                let mut first_row = 0;
                while first_row < rows_count {
                    let left = rows_count - first_row;
                    let strip_rows = [left.min(STRIP_ROWS), left.saturating_sub(STRIP_ROWS)];
                    let [a, b] = &mut strips;
                    for (s, strip) in [a, b].into_iter().enumerate() {
                        let count = strip_rows[s].min(STRIP_ROWS);
                        if count > 0 {
                            let start = first_row + s * STRIP_ROWS;
                            decode_strip(strip, w, row_blocks, start..start + count, first_block, chunk);
                        }
                    }
                    let [a, b] = &strips;
                    if strip_rows[1] > 0 {
                        strips_over_group::<2>(
                            [a, b],
                            strip_rows.map(|r| r.min(STRIP_ROWS)),
                            first_row,
                            chunk,
                            group,
                            &column_chunk,
                            &output,
                            y,
                            first,
                        );
                    } else {
                        strips_over_group::<1>(
                            [a],
                            [strip_rows[0]],
                            first_row,
                            chunk,
                            group,
                            &column_chunk,
                            &output,
                            y,
                            first,
                        );
                    }
                    first_row += 2 * STRIP_ROWS;
                }
                first_column += group;
            }
            first_block += CHUNK_BLOCKS;
        }
    }
}
