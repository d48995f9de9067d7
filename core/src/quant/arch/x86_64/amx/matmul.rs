//! The AMX matmul: strips of 32 weight rows against groups of 32 activation columns, a block at a
//! time. Per block, the activation tiles `A0`, `A1` hold the group's columns (16 each, one
//! 32-byte block per tile row, the quants as they are) and the weight tiles `B0`, `B1` the strip's
//! rows (16 each, decoded to signed bytes and interleaved by dword: tile row `k` holds bytes
//! `4k..4k + 4` of each weight row); four `tdpbssd` leave in `C<i><j>` the exact integer sum of
//! every (column, row) pair of the block, laid out as the output is (a column's rows
//! contiguous). Each output's `sumf` then takes the type's float step for the block, in block
//! order, unfused, as its scalar vec_dot does.
//!
//! Activation tiles of 16 columns are loaded from `x` in place (a column's block to the next
//! column's is a fixed stride); only a last tile of fewer columns is copied into tile layout.
//! The activation scales are converted once per chunk of blocks for up to 64 columns; a strip's
//! weights are decoded once per chunk for those columns. Between chunks an output's `sumf` waits
//! in `y` (an f32, exact). Tiles past the strip's rows or the group's columns are neither loaded
//! nor multiplied; within a tile, lanes past them are zero and not written out.

use super::tiles::{
    multiply_into, BlockSums, Hardware, Tile, Tiles, A_COLSB, B_COLSB, KERNEL_CONFIG, TILE_BYTES,
    TILE_ROWS,
};
use crate::quant::activation::{BlockQ8_0, BlockQ8_1};
use crate::quant::arch::x86_64::legacy::matmul::{
    matmul_iq4_nl_vnni, matmul_q4_0_vnni, matmul_q4_1_vnni, matmul_q5_0_vnni, matmul_q5_1_vnni,
    matmul_q8_0_vnni,
};
use crate::quant::arch::x86_64::tokens::{kernel, Amx};
use crate::quant::cast::f16_le;
use crate::quant::iq::iq4_nl::BlockIq4Nl;
use crate::quant::iq::tables::KVALUES_IQ4NL;
use crate::quant::legacy::q5_0::quant_pair;
use crate::quant::legacy::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1};

/// Weight rows of a strip: two weight tiles.
const STRIP_ROWS: usize = 2 * TILE_ROWS;
/// Activation columns of a group: two activation tiles.
const GROUP_COLUMNS: usize = 2 * TILE_ROWS;
/// Blocks staged at once: 32 KiB of weight tiles. An output's `sumf` waits in `y` between
/// chunks, so longer chunks mean fewer round trips.
const CHUNK_BLOCKS: usize = 32;
/// Columns whose activation scales are converted once per chunk, for every strip.
const SCALE_COLUMNS: usize = 2 * GROUP_COLUMNS;
/// Fewer columns run the VNNI matmul: configuring the tiles and taking whole tiles for a few
/// columns cannot pay (not tuned: the level is slower than VNNI at every n measured).
const MIN_COLUMNS: usize = 8;

/// What a type's matmul takes from the type: its weight blocks as 32 signed bytes in element
/// order with their scales `(d, m)`, its activation blocks' `(d, s)` and where their quants sit,
/// and its scalar twin's float step `term(sumf, sumi, d_w, m_w, d_x, s_x)`, the new `sumf`.
/// Constants, so that the drivers (inlined into each kernel) call them directly.
pub(super) struct Kit<W, X> {
    pub(super) decode: fn(&W) -> [i8; 32],
    pub(super) w_scales: fn(&W) -> (f32, f32),
    pub(super) x_scales: fn(&X) -> (f32, f32),
    /// Where an activation block's 32 quants start in its bytes (tiles load them there).
    pub(super) x_quants_at: usize,
    pub(super) term: fn(f32, i32, f32, f32, f32, f32) -> f32,
}

/// A strip's weights for one chunk, in weight-tile layout, with their rows' scales (on whole
/// cache lines, as [`BlockSums`]).
#[repr(align(64))]
struct Strip {
    tiles: [[[u8; TILE_BYTES]; 2]; CHUNK_BLOCKS],
    d: [[f32; STRIP_ROWS]; CHUNK_BLOCKS],
    m: [[f32; STRIP_ROWS]; CHUNK_BLOCKS],
}

/// The activation scales `(d, s)` of up to [`SCALE_COLUMNS`] columns for one chunk, as f32.
struct Scales {
    d: [[f32; SCALE_COLUMNS]; CHUNK_BLOCKS],
    s: [[f32; SCALE_COLUMNS]; CHUNK_BLOCKS],
}

/// A group's activations for one chunk in activation-tile layout, for a tile of fewer than 16
/// columns (whole tiles are loaded from `x` itself: [`XTiles`]); on whole cache lines.
#[repr(align(64))]
struct Group {
    tiles: [[[u8; TILE_BYTES]; 2]; CHUNK_BLOCKS],
}

/// Every row of `w` (`row_blocks` blocks each) against every one of the `n` columns of `x`,
/// row `r` of column `c` to `y[c * y_stride + r]`, on `tiles` (configured here and released at
/// the end). The matmul kernel contract of `table::MatmulFn`; memory-safe and panic-free for any
/// lengths (garbage in, garbage out).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) fn gemm<T: Tiles, W, X: bytemuck::Pod>(
    tiles: &mut T,
    w: &[W],
    row_blocks: usize,
    x: &[X],
    n: usize,
    y: &mut [f32],
    y_stride: usize,
    kit: &Kit<W, X>,
) {
    if row_blocks == 0 || n == 0 {
        return;
    }
    let column_blocks = x.len() / n;
    let blocks = row_blocks.min(column_blocks);
    let rows = w.len() / row_blocks;
    let mut strip = Strip {
        tiles: [[[0; TILE_BYTES]; 2]; CHUNK_BLOCKS],
        d: [[0.0; STRIP_ROWS]; CHUNK_BLOCKS],
        m: [[0.0; STRIP_ROWS]; CHUNK_BLOCKS],
    };
    let mut scales = Scales {
        d: [[0.0; SCALE_COLUMNS]; CHUNK_BLOCKS],
        s: [[0.0; SCALE_COLUMNS]; CHUNK_BLOCKS],
    };
    let mut group = Group {
        tiles: [[[0; TILE_BYTES]; 2]; CHUNK_BLOCKS],
    };
    let x_tiles = XTiles {
        bytes: bytemuck::cast_slice(x),
        column_blocks,
        quants_at: kit.x_quants_at,
    };
    tiles.configure(&KERNEL_CONFIG);
    let mut first_scaled = 0;
    while first_scaled < n {
        let scaled = SCALE_COLUMNS.min(n - first_scaled);
        // At least one chunk, so that rows of no blocks still get their zero.
        let mut first_block = 0;
        while first_block == 0 || first_block < blocks {
            let chunk = CHUNK_BLOCKS.min(blocks - first_block);
            let mut place = Place {
                first_row: 0,
                strip_rows: 0,
                first_scaled,
                first_column: first_scaled,
                columns: 0,
                first_block,
                chunk,
            };
            gather_scales(&mut scales, x, column_blocks, &place, scaled, kit);
            while place.first_row < rows {
                place.strip_rows = STRIP_ROWS.min(rows - place.first_row);
                stage_weights(&mut strip, w, row_blocks, &place, kit);
                place.first_column = first_scaled;
                while place.first_column < first_scaled + scaled {
                    place.columns = GROUP_COLUMNS.min(first_scaled + scaled - place.first_column);
                    if !place.columns.is_multiple_of(TILE_ROWS) {
                        stage_activations::<X>(&mut group, &x_tiles, &place);
                    }
                    run_chunk::<T, X>(
                        tiles, &strip, &scales, &group, &x_tiles, &place, y, y_stride, kit.term,
                    );
                    place.first_column += place.columns;
                }
                place.first_row += place.strip_rows;
            }
            if chunk == 0 {
                break;
            }
            first_block += chunk;
        }
        first_scaled += scaled;
    }
    tiles.release();
}

/// Where a chunk of a (strip, group) pair sits.
struct Place {
    first_row: usize,
    strip_rows: usize,
    /// The first column of [`Scales`].
    first_scaled: usize,
    first_column: usize,
    columns: usize,
    first_block: usize,
    chunk: usize,
}

/// Decodes rows `first_row..first_row + strip_rows` of the chunk's blocks into weight-tile
/// layout; rows past the strip get zeros.
#[inline(always)]
fn stage_weights<W, X>(
    strip: &mut Strip,
    w: &[W],
    row_blocks: usize,
    place: &Place,
    kit: &Kit<W, X>,
) {
    for k in 0..place.chunk.min(CHUNK_BLOCKS) {
        for r in 0..STRIP_ROWS {
            let (j, lane) = (r / TILE_ROWS, r % TILE_ROWS);
            let at = (place.first_row + r)
                .saturating_mul(row_blocks)
                .saturating_add(place.first_block + k);
            let block = if r < place.strip_rows {
                w.get(at)
            } else {
                None
            };
            let (q, (d, m)) = match block {
                Some(b) => ((kit.decode)(b), (kit.w_scales)(b)),
                None => ([0; 32], (0.0, 0.0)),
            };
            strip.d[k][r] = d;
            strip.m[k][r] = m;
            let tile = &mut strip.tiles[k][j];
            // Dword `dw` of the row to tile row `dw`, dword column `lane`.
            for (dw, quad) in q.chunks_exact(4).enumerate() {
                let at = dw * B_COLSB + 4 * lane;
                for (byte, &v) in tile[at..at + 4].iter_mut().zip(quad) {
                    *byte = v as u8;
                }
            }
        }
    }
}

/// Converts the activation scales of the chunk's blocks for `scaled` columns from
/// `place.first_scaled` on.
#[inline(always)]
fn gather_scales<W, X>(
    scales: &mut Scales,
    x: &[X],
    column_blocks: usize,
    place: &Place,
    scaled: usize,
    kit: &Kit<W, X>,
) {
    for c in 0..scaled.min(SCALE_COLUMNS) {
        let first = place
            .first_scaled
            .saturating_add(c)
            .saturating_mul(column_blocks)
            .saturating_add(place.first_block);
        for k in 0..place.chunk.min(CHUNK_BLOCKS) {
            let (d, s) = x
                .get(first.saturating_add(k))
                .map_or((0.0, 0.0), |xb| (kit.x_scales)(xb));
            scales.d[k][c] = d;
            scales.s[k][c] = s;
        }
    }
}

/// Copies the activation blocks of the group's tile of fewer than 16 columns into
/// activation-tile layout (one block per tile row); rows past the columns get zeros.
#[inline(always)]
fn stage_activations<X>(group: &mut Group, x: &XTiles, place: &Place) {
    let i = place.columns / TILE_ROWS;
    for k in 0..place.chunk.min(CHUNK_BLOCKS) {
        for lane in 0..TILE_ROWS {
            let c = TILE_ROWS * i + lane;
            let quants = if c < place.columns {
                let column = place.first_column.saturating_add(c);
                x.from::<X>(column, place.first_block + k).get(..A_COLSB)
            } else {
                None
            };
            let row = &mut group.tiles[k][i & 1][lane * A_COLSB..(lane + 1) * A_COLSB];
            match quants {
                Some(quants) => row.copy_from_slice(quants),
                None => row.fill(0),
            }
        }
    }
}

/// The activations as tiles load them in place: block `k` of column `c` has its 32 quants at
/// `(c * column_blocks + k) * size_of::<X>() + quants_at`, the next column's a row stride on.
struct XTiles<'x> {
    bytes: &'x [u8],
    column_blocks: usize,
    quants_at: usize,
}

impl XTiles<'_> {
    /// Bytes from one column's block to the next column's same block.
    fn stride<X>(&self) -> usize {
        self.column_blocks.saturating_mul(core::mem::size_of::<X>())
    }

    /// The bytes from the quants of block `block` of column `column` on (empty past the end).
    fn from<X>(&self, column: usize, block: usize) -> &[u8] {
        let at = column
            .saturating_mul(self.column_blocks)
            .saturating_add(block)
            .saturating_mul(core::mem::size_of::<X>())
            .saturating_add(self.quants_at);
        self.bytes.get(at..).unwrap_or(&[])
    }
}

/// One (strip, group) pair over one chunk: per block, the tile products and every output's
/// float step; each `sumf` starts from zero at the first chunk, else from `y`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn run_chunk<T: Tiles, X>(
    tiles: &mut T,
    strip: &Strip,
    scales: &Scales,
    group: &Group,
    x: &XTiles,
    place: &Place,
    y: &mut [f32],
    y_stride: usize,
    term: fn(f32, i32, f32, f32, f32, f32) -> f32,
) {
    let (row_tiles, column_tiles) = (
        place.strip_rows.div_ceil(TILE_ROWS).min(2),
        place.columns.div_ceil(TILE_ROWS).min(2),
    );
    let output = |c: usize, r: usize| {
        place
            .first_column
            .saturating_add(c)
            .checked_mul(y_stride)
            .and_then(|at| at.checked_add(place.first_row + r))
    };
    // acc[c][r]: the sumf of column `c`, row `r` of the pair.
    let mut acc = [[0f32; STRIP_ROWS]; GROUP_COLUMNS];
    if place.first_block > 0 {
        for (c, column) in acc.iter_mut().enumerate().take(place.columns) {
            for (r, sumf) in column.iter_mut().enumerate().take(place.strip_rows) {
                if let Some(&v) = output(c, r).and_then(|at| y.get(at)) {
                    *sumf = v;
                }
            }
        }
    }
    // The accumulators as stored: row `lane` (a column) holds 16 int32 (rows), native order.
    let mut sums = BlockSums::ZERO;
    let scaled_at = place.first_column - place.first_scaled;
    for k in 0..place.chunk.min(CHUNK_BLOCKS) {
        for (i, tile) in [Tile::A0, Tile::A1]
            .into_iter()
            .enumerate()
            .take(column_tiles)
        {
            if place.columns >= TILE_ROWS * (i + 1) {
                let first = place.first_column + TILE_ROWS * i;
                tiles.load(
                    tile,
                    x.from::<X>(first, place.first_block + k),
                    x.stride::<X>(),
                );
            } else {
                tiles.load(tile, &group.tiles[k][i], A_COLSB);
            }
        }
        for (j, tile) in [Tile::B0, Tile::B1].into_iter().enumerate().take(row_tiles) {
            tiles.load(tile, &strip.tiles[k][j], B_COLSB);
        }
        multiply_into(tiles, column_tiles, row_tiles, &mut sums);
        let (dw, mw) = (&strip.d[k], &strip.m[k]);
        let (dx, sx) = (&scales.d[k][scaled_at..], &scales.s[k][scaled_at..]);
        for i in 0..column_tiles {
            for j in 0..row_tiles {
                let tile = &sums.0[2 * i + j];
                for lane in 0..TILE_ROWS {
                    let c = TILE_ROWS * i + lane;
                    let row = &tile[lane * TILE_ROWS..(lane + 1) * TILE_ROWS];
                    let column = &mut acc[c][TILE_ROWS * j..TILE_ROWS * (j + 1)];
                    let (dw, mw) = (&dw[TILE_ROWS * j..], &mw[TILE_ROWS * j..]);
                    let (dx, sx) = (dx.get(c).copied(), sx.get(c).copied());
                    let (dx, sx) = (dx.unwrap_or(0.0), sx.unwrap_or(0.0));
                    for (r, (sumf, &sumi)) in column.iter_mut().zip(row).enumerate() {
                        *sumf = term(*sumf, sumi, dw[r], mw[r], dx, sx);
                    }
                }
            }
        }
    }
    for (c, column) in acc.iter().enumerate().take(place.columns) {
        for (r, &sumf) in column.iter().enumerate().take(place.strip_rows) {
            if let Some(out) = output(c, r).and_then(|at| y.get_mut(at)) {
                *out = sumf;
            }
        }
    }
}

/// The Q8_0 kit: quants as they are, `sumf += sumi · (d_w · d_x)` (the scalar twin's order).
pub(super) const Q8_0: Kit<BlockQ8_0, BlockQ8_0> = Kit {
    decode: |b| b.qs,
    w_scales: |b| (f16_le(b.d), 0.0),
    x_scales: |xb| (f16_le(xb.d), 0.0),
    x_quants_at: core::mem::offset_of!(BlockQ8_0, qs),
    term: |sumf, sumi, dw, _, dx, _| sumf + sumi as f32 * (dw * dx),
};

/// The Q4_0 kit: nibbles minus 8 (low nibbles are elements 0..16, high ones 16..32),
/// `sumf += (sumi · d_w) · d_x` (the scalar twin's order).
pub(super) const Q4_0: Kit<BlockQ4_0, BlockQ8_0> = Kit {
    decode: |b| {
        core::array::from_fn(|j| {
            let byte = b.qs[j % 16];
            let nibble = if j < 16 { byte & 0x0f } else { byte >> 4 };
            nibble as i8 - 8
        })
    },
    w_scales: |b| (f16_le(b.d), 0.0),
    x_scales: |xb| (f16_le(xb.d), 0.0),
    x_quants_at: core::mem::offset_of!(BlockQ8_0, qs),
    term: |sumf, sumi, dw, _, dx, _| sumf + sumi as f32 * dw * dx,
};

/// The 32 quants of a block of two nibbles per byte (low nibbles elements 0..16, high ones
/// 16..32), mapped by `level`.
#[inline(always)]
fn nibbles(qs: &[u8; 16], level: impl Fn(u8) -> i8) -> [i8; 32] {
    core::array::from_fn(|j| {
        let byte = qs[j % 16];
        level(if j < 16 { byte & 0x0f } else { byte >> 4 })
    })
}

/// The 32 five-bit quants of a Q5 block (`quant_pair`, the scalar twin's), minus `bias`.
#[inline(always)]
fn five_bits(qs: &[u8; 16], qh: [u8; 4], bias: i32) -> [i8; 32] {
    let qh = u32::from_le_bytes(qh);
    let mut out = [0i8; 32];
    for (j, &q) in qs.iter().enumerate() {
        let (q0, q1) = quant_pair(q, qh, j);
        out[j] = (q0 - bias) as i8;
        out[j + 16] = (q1 - bias) as i8;
    }
    out
}

/// The Q5_0 kit: five-bit quants minus 16, `sumf += (d_w · d_x) · sumi`.
pub(super) const Q5_0: Kit<BlockQ5_0, BlockQ8_0> = Kit {
    decode: |b| five_bits(&b.qs, b.qh, 16),
    w_scales: |b| (f16_le(b.d), 0.0),
    x_scales: |xb| (f16_le(xb.d), 0.0),
    x_quants_at: core::mem::offset_of!(BlockQ8_0, qs),
    term: |sumf, sumi, dw, _, dx, _| sumf + (dw * dx) * sumi as f32,
};

/// The Q4_1 kit (against Q8_1): nibbles as they are,
/// `sumf += (d_w · d_x) · sumi + m_w · s_x`.
pub(super) const Q4_1: Kit<BlockQ4_1, BlockQ8_1> = Kit {
    decode: |b| nibbles(&b.qs, |q| q as i8),
    w_scales: |b| (f16_le(b.d), f16_le(b.m)),
    x_scales: |xb| (f16_le(xb.d), f16_le(xb.s)),
    x_quants_at: core::mem::offset_of!(BlockQ8_1, qs),
    term: |sumf, sumi, dw, mw, dx, sx| sumf + ((dw * dx) * sumi as f32 + mw * sx),
};

/// The Q5_1 kit (against Q8_1): five-bit quants as they are,
/// `sumf += (d_w · d_x) · sumi + m_w · s_x`.
pub(super) const Q5_1: Kit<BlockQ5_1, BlockQ8_1> = Kit {
    decode: |b| five_bits(&b.qs, b.qh, 0),
    w_scales: |b| (f16_le(b.d), f16_le(b.m)),
    x_scales: |xb| (f16_le(xb.d), f16_le(xb.s)),
    x_quants_at: core::mem::offset_of!(BlockQ8_1, qs),
    term: |sumf, sumi, dw, mw, dx, sx| sumf + ((dw * dx) * sumi as f32 + mw * sx),
};

/// The IQ4_NL kit: nibbles through the non-linear table, `sumf += (d_x · d_w) · sumi`.
pub(super) const IQ4_NL: Kit<BlockIq4Nl, BlockQ8_0> = Kit {
    decode: |b| nibbles(&b.qs, |q| KVALUES_IQ4NL[usize::from(q & 0x0f)]),
    w_scales: |b| (f16_le(b.d), 0.0),
    x_scales: |xb| (f16_le(xb.d), 0.0),
    x_quants_at: core::mem::offset_of!(BlockQ8_0, qs),
    term: |sumf, sumi, dw, _, dx, _| sumf + (dx * dw) * sumi as f32,
};

/// AMX matmul entries: `name(W, X, kit, VNNI fallback)`, each taking the [`Amx`] token and running
/// the VNNI matmul for fewer than [`MIN_COLUMNS`] columns.
macro_rules! amx_matmuls {
    ($($name:ident($W:ty, $X:ty, $kit:expr, $vnni:path);)*) => {
        kernel! {$(
            #[doc = concat!("`", stringify!($W), "` matmul on AMX tiles.")]
            #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
            pub(in super::super) fn $name(
                t: Amx,
                w: &[$W],
                row_blocks: usize,
                x: &[$X],
                n: usize,
                y: &mut [f32],
                y_stride: usize,
            ) {
                if n < MIN_COLUMNS {
                    return $vnni(t.vnni(), w, row_blocks, x, n, y, y_stride);
                }
                gemm(&mut Hardware::new(t), w, row_blocks, x, n, y, y_stride, &$kit)
            }
        )*}
    };
}

amx_matmuls! {
    matmul_q8_0(BlockQ8_0, BlockQ8_0, Q8_0, matmul_q8_0_vnni);
    matmul_q4_0(BlockQ4_0, BlockQ8_0, Q4_0, matmul_q4_0_vnni);
    matmul_q5_0(BlockQ5_0, BlockQ8_0, Q5_0, matmul_q5_0_vnni);
    matmul_q4_1(BlockQ4_1, BlockQ8_1, Q4_1, matmul_q4_1_vnni);
    matmul_q5_1(BlockQ5_1, BlockQ8_1, Q5_1, matmul_q5_1_vnni);
    matmul_iq4_nl(BlockIq4Nl, BlockQ8_0, IQ4_NL, matmul_iq4_nl_vnni);
}
