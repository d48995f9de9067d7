//! The AMX packed matmul (`Ops::packed_matmul` at the `amx` level: Q4_0, Q4_1 and Q8_0 in the
//! layout of `quant::packed`). A packed group's block already is a weight tile in the layout
//! `tdpbssd` takes (tile row `k` holds dword `k` of each of the group's 16 rows), so staging it
//! takes only the type's byte fix-up: Q8_0's stored `q + 128` back to `q`, Q4's nibbles split
//! (low ones to tile rows 0..4, high ones to 4..8) and Q4_0's `- 8`; no per-row decode. Every
//! block's accumulators are stored to [`Sums`], and the float step (the scalar twin's,
//! `legacy::packed::step`) then runs on 16 rows a vector, each output's `sumf` held in a register
//! across a chunk of blocks. Integer sums are exact, so every output has the scalar vec_dot's
//! bits.
//!
//! Loop order: for 64 columns at a time and a span of 8 blocks, the activation scales converted
//! and the activation tiles copied into tile layout once for every strip of two groups (32
//! rows); a strip's chunk of 4 blocks staged once for those columns; the outputs of a strip and
//! those columns (8 KiB) wait in `y` between chunks. (Why this order, and what was tried against
//! it: docs/kernel-experiments.md.)

// The entries take the token and `PackedMatmulFn`'s seven arguments.
#![allow(clippy::too_many_arguments)]

use crate::quant::OutputColumns;
use core::arch::x86_64::*;

use super::tiles::{
    multiply_into, BlockSums, Hardware, Tile, Tiles, A_COLSB, B_COLSB, KERNEL_CONFIG, TILE_BYTES,
    TILE_ROWS,
};
use crate::quant::activation::{BlockQ8_0, BlockQ8_1};
use crate::quant::arch::x86_64::legacy::packed::{
    packed_matmul_q4_0_vnni, packed_matmul_q4_1_vnni, packed_matmul_q8_0_vnni, scales_at, step,
    Column, MINS_AT, Q4_0, Q4_0_GROUP_BLOCK, Q4_1, Q4_1_GROUP_BLOCK, Q8_0, Q8_0_GROUP_BLOCK,
};
use crate::quant::arch::x86_64::tokens::{kernel, Amx};
use crate::quant::arch::x86_64::vector::{f16_le, load32, part};
use crate::quant::packed::GROUP_ROWS;

/// Groups of a strip: two weight tiles.
const STRIP_GROUPS: usize = 2;
/// Columns of a column group: two activation tiles.
const GROUP_COLUMNS: usize = 2 * TILE_ROWS;
/// Blocks whose accumulators wait in [`Sums`] at once (16 KiB).
const CHUNK: usize = 4;
/// Blocks whose activation scales [`Scales`] converts at once.
const SPAN: usize = 8;
/// Columns whose activation scales [`Scales`] holds.
const SCALE_COLUMNS: usize = 2 * GROUP_COLUMNS;
/// Fewer columns run the AVX-512 VNNI packed matmul.
const MIN_COLUMNS: usize = 16;

const _: () = assert!(GROUP_ROWS == TILE_ROWS && SPAN.is_multiple_of(CHUNK));

/// A strip's chunk of blocks as weight tiles, with its rows' `d` and `m` as f32 (on whole cache
/// lines, as [`BlockSums`]).
#[repr(align(64))]
struct Staged {
    tiles: [[[u8; TILE_BYTES]; STRIP_GROUPS]; CHUNK],
    d: [[__m512; STRIP_GROUPS]; CHUNK],
    m: [[__m512; STRIP_GROUPS]; CHUNK],
}

/// The activation scales `d` (and Q4_1's `s`) of a span of blocks for up to
/// [`SCALE_COLUMNS`] columns: `[block][column]`.
struct Scales {
    d: [[f32; SCALE_COLUMNS]; SPAN],
    s: [[f32; SCALE_COLUMNS]; SPAN],
}

/// Each chunk block's accumulators as stored (`C<i><j>` at `2 · column tile + group`), row `lane`
/// (a column) holding the group's 16 rows' sums.
struct Sums([BlockSums; CHUNK]);

/// The activation tiles of a span of blocks for up to [`SCALE_COLUMNS`] columns, `[block][16
/// columns]`, one block's quants a row (rows past the columns zero): copied once per span for
/// every strip, so that a tile loads 512 contiguous bytes rather than 16 rows a column apart (on
/// whole cache lines, as [`BlockSums`]).
#[repr(align(64))]
struct ActivationTiles([[[u8; TILE_BYTES]; SCALE_COLUMNS / TILE_ROWS]; SPAN]);

/// Where a chunk of one (strip, column group) pair sits.
struct Place {
    first_group: usize,
    strip_groups: usize,
    first_scaled: usize,
    first_column: usize,
    columns: usize,
    /// The chunk's first block, and its index in the span.
    first_block: usize,
    in_span: usize,
    chunk: usize,
}

/// The whole groups of `packed` (`row_blocks` blocks a row) against the `n` columns of `x`, row
/// `r` of column `c` to `y.get_mut(c, r)`, on `tiles` (configured here, released at the end).
/// `PackedMatmulFn`'s contract without the starts (the weights are staged signed); memory-safe
/// and panic-free for any lengths.
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) fn packed_gemm<T: Tiles, X: Column, const KIND: u8, const GBB: usize>(
    tiles: &mut T,
    packed: &[u8],
    row_blocks: usize,
    x: &[X],
    n: usize,
    y: &mut OutputColumns<'_, '_>,
) {
    let group_bytes = GBB.saturating_mul(row_blocks);
    if group_bytes == 0 || n == 0 {
        return;
    }
    let groups = packed.len() / group_bytes;
    let mut staged = Staged {
        tiles: [[[0; TILE_BYTES]; STRIP_GROUPS]; CHUNK],
        d: [[_mm512_setzero_ps(); STRIP_GROUPS]; CHUNK],
        m: [[_mm512_setzero_ps(); STRIP_GROUPS]; CHUNK],
    };
    let mut scales = Scales {
        d: [[0.0; SCALE_COLUMNS]; SPAN],
        s: [[0.0; SCALE_COLUMNS]; SPAN],
    };
    let mut sums = Sums([BlockSums::ZERO; CHUNK]);
    let mut a_tiles = ActivationTiles([[[0; TILE_BYTES]; SCALE_COLUMNS / TILE_ROWS]; SPAN]);
    tiles.configure(&KERNEL_CONFIG);
    for first_scaled in (0..n).step_by(SCALE_COLUMNS) {
        let scaled = SCALE_COLUMNS.min(n - first_scaled);
        for first_span in (0..row_blocks).step_by(SPAN) {
            let span = SPAN.min(row_blocks - first_span);
            stage_span::<X, KIND>(
                &mut scales,
                &mut a_tiles,
                x,
                row_blocks,
                first_scaled,
                scaled,
                first_span,
            );
            for first_group in (0..groups).step_by(STRIP_GROUPS) {
                for in_span in (0..span).step_by(CHUNK) {
                    let mut place = Place {
                        first_group,
                        strip_groups: STRIP_GROUPS.min(groups - first_group),
                        first_scaled,
                        first_column: first_scaled,
                        columns: 0,
                        first_block: first_span + in_span,
                        in_span,
                        chunk: CHUNK.min(span - in_span),
                    };
                    stage::<KIND, GBB>(&mut staged, packed, group_bytes, &place);
                    while place.first_column < first_scaled + scaled {
                        place.columns =
                            GROUP_COLUMNS.min(first_scaled + scaled - place.first_column);
                        products(tiles, &staged, &mut sums, &a_tiles, &place);
                        // The chunk's length as a constant, so that its blocks unroll.
                        match place.chunk {
                            CHUNK => float_steps::<KIND, CHUNK>(&staged, &sums, &scales, &place, y),
                            3 => float_steps::<KIND, 3>(&staged, &sums, &scales, &place, y),
                            2 => float_steps::<KIND, 2>(&staged, &sums, &scales, &place, y),
                            _ => float_steps::<KIND, 1>(&staged, &sums, &scales, &place, y),
                        }
                        place.first_column += place.columns;
                    }
                }
            }
        }
    }
    tiles.release();
}

/// 64 bytes as a vector.
#[inline]
#[target_feature(enable = "avx512f")]
fn load64(bytes: &[u8; 64]) -> __m512i {
    // SAFETY: the array holds 64 bytes; `loadu` has no alignment requirement.
    unsafe { _mm512_loadu_si512(bytes.as_ptr().cast()) }
}

/// A vector to 64 bytes.
#[inline]
#[target_feature(enable = "avx512f")]
fn store64(bytes: &mut [u8; 64], v: __m512i) {
    // SAFETY: the array holds 64 bytes, borrowed exclusively; `storeu` has no alignment
    // requirement.
    unsafe { _mm512_storeu_si512(bytes.as_mut_ptr().cast(), v) }
}

/// Stages the chunk's blocks of the strip's groups as signed weight tiles, with their scales.
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw")]
fn stage<const KIND: u8, const GBB: usize>(
    staged: &mut Staged,
    packed: &[u8],
    group_bytes: usize,
    place: &Place,
) {
    let nibble = _mm512_set1_epi8(0x0f);
    let (top, eight) = (_mm512_set1_epi8(-128), _mm512_set1_epi8(8));
    for k in 0..place.chunk.min(CHUNK) {
        for j in 0..place.strip_groups.min(STRIP_GROUPS) {
            let at = (place.first_group + j)
                .saturating_mul(group_bytes)
                .saturating_add((place.first_block + k).saturating_mul(GBB));
            let bytes: &[u8; GBB] = part(packed, at);
            let (tile, _) = staged.tiles[k][j].as_chunks_mut::<64>();
            if KIND == Q8_0 {
                for (r, row) in tile.iter_mut().enumerate() {
                    store64(row, _mm512_xor_si512(load64(part(bytes, 64 * r)), top));
                }
            } else {
                for r in 0..4 {
                    let v = load64(part(bytes, 64 * r));
                    let mut low = _mm512_and_si512(v, nibble);
                    let mut high = _mm512_and_si512(_mm512_srli_epi16::<4>(v), nibble);
                    if KIND == Q4_0 {
                        low = _mm512_sub_epi8(low, eight);
                        high = _mm512_sub_epi8(high, eight);
                    }
                    if let Some(row) = tile.get_mut(r) {
                        store64(row, low);
                    }
                    if let Some(row) = tile.get_mut(4 + r) {
                        store64(row, high);
                    }
                }
            }
            // f16 to f32 is exact.
            staged.d[k][j] = _mm512_cvtph_ps(load32(part(bytes, scales_at(KIND))));
            if KIND == Q4_1 {
                staged.m[k][j] = _mm512_cvtph_ps(load32(part(bytes, MINS_AT)));
            }
        }
    }
}

/// Converts the activation scales of the span's blocks and copies their quants into
/// activation-tile layout, for `scaled` columns from `first_scaled`, a column at a time (its
/// blocks are contiguous in `x`); rows past the columns or the row's blocks zero.
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn stage_span<X: Column, const KIND: u8>(
    scales: &mut Scales,
    a_tiles: &mut ActivationTiles,
    x: &[X],
    row_blocks: usize,
    first_scaled: usize,
    scaled: usize,
    first_span: usize,
) {
    let span = SPAN.min(row_blocks.saturating_sub(first_span));
    for c in 0..SCALE_COLUMNS {
        let (i, lane) = (c / TILE_ROWS, c % TILE_ROWS);
        let first = (first_scaled + c)
            .saturating_mul(row_blocks)
            .saturating_add(first_span);
        let blocks: &[X] = if c < scaled {
            match x.get(first..first.saturating_add(span)) {
                Some(blocks) => blocks,
                None => &[],
            }
        } else {
            &[]
        };
        for b in 0..SPAN {
            let Some(row) = a_tiles.0[b][i].get_mut(lane * A_COLSB..(lane + 1) * A_COLSB) else {
                continue;
            };
            match blocks.get(b) {
                Some(xb) => {
                    row.copy_from_slice(bytemuck::cast_ref::<[i8; 32], [u8; 32]>(xb.qs()));
                    scales.d[b][c] = f16_le(xb.d_half());
                    if KIND == Q4_1 {
                        scales.s[b][c] = f16_le(xb.s_half());
                    }
                }
                None => row.fill(0),
            }
        }
    }
}

/// The tile products of one (strip, column group) pair over the chunk: per block, the column
/// group's activation tiles, the strip's weight tiles, and every accumulator zeroed, multiplied
/// and stored to `sums`.
#[inline(always)]
fn products<T: Tiles>(
    tiles: &mut T,
    staged: &Staged,
    sums: &mut Sums,
    a_tiles: &ActivationTiles,
    place: &Place,
) {
    let column_tiles = place.columns.div_ceil(TILE_ROWS).min(2);
    // The column group's first tile among the span's.
    let first_tile = (place.first_column - place.first_scaled) / TILE_ROWS;
    let row_tiles = place.strip_groups.min(STRIP_GROUPS);
    for k in 0..place.chunk.min(CHUNK) {
        let block = &a_tiles.0[(place.in_span + k) % SPAN];
        for (i, a) in [Tile::A0, Tile::A1]
            .into_iter()
            .enumerate()
            .take(column_tiles)
        {
            if let Some(tile) = block.get(first_tile + i) {
                tiles.load(a, tile, A_COLSB);
            }
        }
        for (j, b) in [Tile::B0, Tile::B1].into_iter().enumerate().take(row_tiles) {
            tiles.load(b, &staged.tiles[k][j], B_COLSB);
        }
        multiply_into(tiles, column_tiles, row_tiles, &mut sums.0[k]);
    }
}

/// The float steps of one (strip, column group) pair over the chunk: per column and group of the
/// strip, its 16 rows' `sumf` (zero at the first block, else from `y`) through the chunk's
/// blocks in order, then back to `y`. A column's groups share its place in `y` and its scales.
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn float_steps<const KIND: u8, const K: usize>(
    staged: &Staged,
    sums: &Sums,
    scales: &Scales,
    place: &Place,
    y: &mut OutputColumns<'_, '_>,
) {
    let groups = place.strip_groups.min(STRIP_GROUPS);
    let dw: [[__m512; K]; STRIP_GROUPS] =
        core::array::from_fn(|j| core::array::from_fn(|k| staged.d[k % CHUNK][j]));
    let mw: [[__m512; K]; STRIP_GROUPS] =
        core::array::from_fn(|j| core::array::from_fn(|k| staged.m[k % CHUNK][j]));
    let blocks: [usize; K] = core::array::from_fn(|k| (place.in_span + k) % SPAN);
    let first_row = place.first_group * GROUP_ROWS;
    let fresh = place.first_block == 0;
    for c in 0..place.columns.min(GROUP_COLUMNS) {
        let column = place.first_column + c;
        // (No `Option` combinators here: their closures are not inlined into this
        // function's features, and a call per vector costs more than the vector.)
        let Some(out) = y.run(column, first_row, groups * GROUP_ROWS) else {
            continue;
        };
        let scaled = (column - place.first_scaled) % SCALE_COLUMNS;
        let (i, lane) = ((c / TILE_ROWS) & 1, c % TILE_ROWS);
        // Broadcast once for both groups, from memory (a broadcast of a register would cost a
        // shuffle a use).
        let mut dx = [_mm512_setzero_ps(); K];
        let mut sx = [_mm512_setzero_ps(); K];
        for k in 0..K {
            dx[k] = _mm512_set1_ps(scales.d[blocks[k]][scaled]);
            if KIND == Q4_1 {
                sx[k] = _mm512_set1_ps(scales.s[blocks[k]][scaled]);
            }
        }
        let (out, _) = out.as_chunks_mut::<GROUP_ROWS>();
        for (j, out) in out.iter_mut().enumerate().take(STRIP_GROUPS) {
            let mut sumf = if fresh {
                _mm512_setzero_ps()
            } else {
                // SAFETY: `out` holds 16 f32; `loadu` has no alignment requirement.
                unsafe { _mm512_loadu_ps(out.as_ptr()) }
            };
            for k in 0..K {
                let (rows, _) = sums.0[k % CHUNK].0[(2 * i + j) & 3].as_chunks::<16>();
                let Some(row) = rows.get(lane) else {
                    continue;
                };
                // SAFETY: `row` holds 16 i32; `loadu` has no alignment requirement.
                let sumi = _mm512_cvtepi32_ps(unsafe { _mm512_loadu_si512(row.as_ptr().cast()) });
                sumf = step::<KIND>(sumf, sumi, dw[j][k], mw[j][k], dx[k], sx[k]);
            }
            // SAFETY: `out` holds 16 f32, borrowed exclusively; `storeu` has no alignment
            // requirement.
            unsafe { _mm512_storeu_ps(out.as_mut_ptr(), sumf) };
        }
    }
}

kernel! {
    /// Packed Q4_0 rows against many Q8_0 activation columns on AMX tiles.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(in super::super) fn packed_matmul_q4_0(t: Amx, packed: &[u8], row_blocks: usize, x: &[BlockQ8_0], starts: &[[u8; 4]], n: usize, y: &mut OutputColumns<'_, '_>) {
        if n < MIN_COLUMNS {
            return packed_matmul_q4_0_vnni(t.vnni(), packed, row_blocks, x, starts, n, y);
        }
        packed_gemm::<_, _, Q4_0, Q4_0_GROUP_BLOCK>(&mut Hardware::new(t), packed, row_blocks, x, n, y)
    }

    /// Packed Q4_1 rows against many Q8_1 activation columns on AMX tiles.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(in super::super) fn packed_matmul_q4_1(t: Amx, packed: &[u8], row_blocks: usize, x: &[BlockQ8_1], starts: &[[u8; 4]], n: usize, y: &mut OutputColumns<'_, '_>) {
        if n < MIN_COLUMNS {
            return packed_matmul_q4_1_vnni(t.vnni(), packed, row_blocks, x, starts, n, y);
        }
        packed_gemm::<_, _, Q4_1, Q4_1_GROUP_BLOCK>(&mut Hardware::new(t), packed, row_blocks, x, n, y)
    }

    /// Packed Q8_0 rows against many Q8_0 activation columns on AMX tiles.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(in super::super) fn packed_matmul_q8_0(t: Amx, packed: &[u8], row_blocks: usize, x: &[BlockQ8_0], starts: &[[u8; 4]], n: usize, y: &mut OutputColumns<'_, '_>) {
        if n < MIN_COLUMNS {
            return packed_matmul_q8_0_vnni(t.vnni(), packed, row_blocks, x, starts, n, y);
        }
        packed_gemm::<_, _, Q8_0, Q8_0_GROUP_BLOCK>(&mut Hardware::new(t), packed, row_blocks, x, n, y)
    }
}
