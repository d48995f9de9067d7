//! The K-quants' matmul driver (Q4_K, Q5_K, Q6_K): many weight rows against many activation
//! columns, a tile of `R` rows × `C` columns of outputs at a time.
//!
//! Each group of `R` rows is decoded once into a stack buffer ([`Decoded`]: quants as bytes in the
//! tile's lane order, scales as i16 pairs, the float scales), then run against every column; each
//! activation super-block is put in the same lane order once per `R` rows. Rows longer than the
//! buffer go in chunks of super-blocks ([`in_chunks`]): each tile's float state is carried from
//! one chunk to the next, so its steps are the same steps in the same order. Per super-block, an
//! output's eight lane sums (ggml's `aux32[8]`, lane = element index mod 8) are exact integers, one
//! `maddubs` and one `madd` (`vpdpwssd` at VNNI) per 32 values; then the float steps run in the
//! scalar twin's order: `sums[l] += (d·dx)·lane`, `sumf -= (dmin·dx)·Σ bsums·mins` (types with
//! mins), `sumf + sums[0] + .. + sums[7]` last. So every output has the bits of its vec_dot.
//!
//! Lane order: a pair of 32-value groups `A` (elements `64p..64p+32`) and `B` (the next 32) becomes
//! two vectors; 32-bit lane `l` of the first holds `A[l], A[l+8], B[l], B[l+8]`, of the second
//! `A[l+16], A[l+24], B[l+16], B[l+24]`. `maddubs` leaves `A`'s and `B`'s sums of lane `l` as the
//! i16 pair of lane `l`, and one `madd` with the pair `(scale of A's part, scale of B's part)` adds
//! both to lane `l`: the accumulator's lanes are the reference's lanes, in order. Q6_K's signed
//! quants are `maddubs`'s signed operand against the activation plus 128 (unsigned), less a
//! per-row correction `128·Σ scale·q` made when the row is decoded.

use crate::quant::OutputColumns;
use core::arch::x86_64::*;
use core::mem::MaybeUninit;
use core::ops::Range;

use super::primitives::Primitives;
use super::tokens::{Avx2, Avx512Vbmi, Avx512Vnni};
use super::vector::{accumulate, add_lanes, load32, part, transpose_sums};
use crate::quant::activation::BlockQ8K;

/// Rows decoded at once (the tile's height).
const ROWS: usize = 4;

/// Super-blocks of a group of rows decoded at once (the decoded rows live on the stack): rows of
/// up to 10,240 values at once; longer rows in chunks ([`in_chunks`]).
pub(super) const TILE_MAX_BLOCKS: usize = 40;

/// Tiles of columns whose float states a chunked pass keeps ([`in_chunks`]): each chunk of a
/// group's rows is decoded once per this many tiles of columns.
const CHUNKED_TILES: usize = 32;

/// Columns below which a call runs the rows kernel per column instead (AVX-512 VNNI without
/// VBMI: VNNI's rows kernel against the 256-bit tiles): decoding a group of rows costs more than
/// it saves over fewer columns (measured: docs/kernel-experiments.md).
const TILE_MIN_COLUMNS: usize = 8;

/// [`TILE_MIN_COLUMNS`] at the AVX2 level, whose rows kernel is slower than AVX-512 VNNI's: the
/// tiles pay from four columns there (BENCHMARKS.md, "Figures behind design choices").
const AVX2_TILE_MIN_COLUMNS: usize = 4;

/// [`TILE_MIN_COLUMNS`] at levels with 512-bit tiles, whose rows the tiles lay out with `vpermb`:
/// from two columns a tile costs less than the rows kernel per column (BENCHMARKS.md, "Figures
/// behind design choices").
const ZMM_MIN_COLUMNS: usize = 2;

/// What the K-quant matmul asks of a level besides its [`Primitives`]: the tokens of the tiles it
/// runs.
pub(super) trait TileLevel: Copy {
    /// Columns from which the 256-bit tiles run (where there are no 512-bit ones).
    fn tile_min_columns(self) -> usize {
        TILE_MIN_COLUMNS
    }

    /// The 256-bit tiles run at AVX2 on every level: compiled apart from the level's entry (they
    /// are too large to inline into it), a tile only has its own target features, and one built
    /// for AVX-512 would call its `vpdpwssd` and `vpermb` helpers out of line.
    fn avx2(self) -> Avx2;

    /// The token of the 512-bit tiles ([`k_matmul_busd`](super::k_matmul_busd)), at the level
    /// that runs them.
    fn zmm(self) -> Option<Avx512Vbmi> {
        None
    }
}

impl TileLevel for Avx2 {
    fn avx2(self) -> Avx2 {
        self
    }

    fn tile_min_columns(self) -> usize {
        AVX2_TILE_MIN_COLUMNS
    }
}

impl TileLevel for Avx512Vnni {
    fn avx2(self) -> Avx2 {
        Avx512Vnni::avx2(self)
    }
}

impl TileLevel for Avx512Vbmi {
    fn avx2(self) -> Avx2 {
        self.vnni().avx2()
    }

    fn zmm(self) -> Option<Avx512Vbmi> {
        Some(self)
    }
}

/// One weight super-block as the tiles read it.
#[derive(Clone, Copy)]
pub(super) struct Decoded {
    /// The 256 quants in tile lane order (see the module docs), two vectors per pair of 32-value
    /// groups: unsigned (`0..32`) for Q4_K/Q5_K, signed (`-32..32`) for Q6_K.
    pub(super) quants: [__m256i; 8],
    /// Per quant vector, the i16 pair `(scale of A's part, scale of B's part)` as one i32.
    pub(super) scales: [i32; 8],
    /// Q4_K/Q5_K: the eight mins as sixteen i16 `m0, m0, m1, m1, ..` (against the sixteen
    /// bsums); Q6_K: the correction `128·Σ scale·q` per lane.
    pub(super) extra: __m256i,
    /// `d` as f32.
    pub(super) d: f32,
    /// `dmin` as f32 (Q4_K/Q5_K).
    pub(super) dmin: f32,
}

impl Decoded {
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn zero() -> Decoded {
        Decoded {
            quants: [_mm256_setzero_si256(); 8],
            scales: [0; 8],
            extra: _mm256_setzero_si256(),
            d: 0.0,
            dmin: 0.0,
        }
    }
}

/// The pair of 32-value groups `a` (first) and `b` (second) in tile lane order.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn pair_in_lanes<P: Primitives>(p: P, a: __m256i, b: __m256i) -> [__m256i; 2] {
    // `[A 0..16 | B 0..16]` through `lane_groups` is lanes `A[l], A[l+8], B[l], B[l+8]`; the
    // upper 16 of each likewise.
    [
        p.grouped(_mm256_permute2x128_si256::<0x20>(a, b)),
        p.grouped(_mm256_permute2x128_si256::<0x31>(a, b)),
    ]
}

/// `acc + scale-pair · maddubs` of one quant vector against one activation vector (both in tile lane
/// order): unsigned quants as `maddubs`'s unsigned operand, or signed quants against the
/// activation plus 128 (`SIGNED`).
#[inline]
#[target_feature(enable = "avx2")]
fn scaled_products<P: Primitives, const SIGNED: bool>(
    p: P,
    acc: __m256i,
    quants: __m256i,
    x: __m256i,
    scales: __m256i,
) -> __m256i {
    // Pairs below 2·31·128 (unsigned) or 2·255·32 (signed): exact in i16.
    let products = if SIGNED {
        _mm256_maddubs_epi16(x, quants)
    } else {
        _mm256_maddubs_epi16(quants, x)
    };
    p.add_scaled_pair(acc, products, scales)
}

/// The lane sums of one decoded block against `x` (already in tile lane order; plus 128 for
/// `SIGNED`), without Q6_K's correction: what the decoder uses to make that correction.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn block_lanes<P: Primitives, const SIGNED: bool>(
    p: P,
    quants: &[__m256i; 8],
    scales: &[i32; 8],
    x: __m256i,
) -> __m256i {
    let mut acc = _mm256_setzero_si256();
    for (&q, &s) in quants.iter().zip(scales) {
        acc = scaled_products::<P, SIGNED>(p, acc, q, x, _mm256_set1_epi32(s));
    }
    acc
}

/// The activation's pair `pair` (values `64·pair..`) in tile lane order, plus 128 for `SIGNED`.
#[inline]
#[target_feature(enable = "avx2")]
fn activation_pair<P: Primitives, const SIGNED: bool>(
    p: P,
    qs: &[i8; 256],
    pair: usize,
) -> [__m256i; 2] {
    let mut a = load32(part(qs, 64 * pair));
    let mut b = load32(part(qs, 64 * pair + 32));
    if SIGNED {
        let flip = _mm256_set1_epi8(i8::MIN);
        a = _mm256_xor_si256(a, flip);
        b = _mm256_xor_si256(b, flip);
    }
    pair_in_lanes(p, a, b)
}

/// A tile's float state between runs of super-blocks: each output's eight lane `sums` and, for the
/// mins, its serial `sumf` (outputs `8g..8g + 8`, output `r·C + c`, in `sumf[g]`).
#[derive(Clone, Copy)]
struct TileSums<const R: usize, const C: usize> {
    sums: [[__m256; C]; R],
    sumf: [__m256; 2],
}

impl<const R: usize, const C: usize> TileSums<R, C> {
    #[inline]
    #[target_feature(enable = "avx2")]
    fn zero() -> TileSums<R, C> {
        TileSums {
            sums: [[_mm256_setzero_ps(); C]; R],
            sumf: [_mm256_setzero_ps(); 2],
        }
    }
}

/// `R` decoded rows (each `blocks` long, one after another in `rows`) against `C` columns: the
/// `R × C` outputs with their vec_dots' bits (`SIGNED`: Q6_K's quants; `MINS`: Q4_K/Q5_K's mins).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn tile<P: Primitives, const R: usize, const C: usize, const SIGNED: bool, const MINS: bool>(
    p: P,
    rows: &[Decoded],
    blocks: usize,
    columns: [&[BlockQ8K]; C],
) -> [[f32; C]; R] {
    let mut state = TileSums::zero();
    tile_blocks::<P, R, C, SIGNED, MINS, false>(p, &mut state, rows, blocks, columns);
    tile_outputs(state)
}

/// [`tile`]'s float steps over `blocks` super-blocks, from `state` on: the rest of a row's
/// super-blocks may follow in another call, the outputs' float steps in the same order.
/// `CHUNKED` changes nothing but the instance: the one-pass [`tile`] and the chunked passes each
/// call their own, so that each instance has one caller and is inlined into it (with two callers
/// LLVM kept it out of line; docs/kernel-experiments.md, "Long rows in chunks").
// Row, column and output indices into parallel arrays of a fully unrolled tile read best as such.
#[allow(clippy::needless_range_loop)]
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn tile_blocks<
    P: Primitives,
    const R: usize,
    const C: usize,
    const SIGNED: bool,
    const MINS: bool,
    const CHUNKED: bool,
>(
    p: P,
    state: &mut TileSums<R, C>,
    rows: &[Decoded],
    blocks: usize,
    columns: [&[BlockQ8K]; C],
) {
    const { assert!(R * C <= 16 && R > 0 && C > 0) };
    let zero_block = Decoded::zero();
    let zero_column = <BlockQ8K as bytemuck::Zeroable>::zeroed();
    // Copied in and out once, so that the loop works on values as when the state came by value.
    let TileSums { mut sums, mut sumf } = *state;
    for k in 0..blocks {
        let w: [&Decoded; R] =
            core::array::from_fn(|r| rows.get(r * blocks + k).unwrap_or(&zero_block));
        let x: [&BlockQ8K; C] = core::array::from_fn(|c| columns[c].get(k).unwrap_or(&zero_column));
        let mut acc = [[_mm256_setzero_si256(); C]; R];
        for pair in 0..4 {
            let xv: [[__m256i; 2]; C] =
                core::array::from_fn(|c| activation_pair::<P, SIGNED>(p, &x[c].qs, pair));
            for half in 0..2 {
                let v = 2 * pair + half;
                for r in 0..R {
                    let quants = w[r].quants[v];
                    let scales = _mm256_set1_epi32(w[r].scales[v]);
                    for c in 0..C {
                        acc[r][c] =
                            scaled_products::<P, SIGNED>(p, acc[r][c], quants, xv[c][half], scales);
                    }
                }
            }
        }
        for r in 0..R {
            for c in 0..C {
                let lanes = if SIGNED {
                    _mm256_sub_epi32(acc[r][c], w[r].extra)
                } else {
                    acc[r][c]
                };
                sums[r][c] = accumulate(sums[r][c], w[r].d * x[c].scale(), lanes);
            }
        }
        if MINS {
            // `Σ bsums·mins` of each output as eight partial sums (exact in i32), the totals of
            // eight outputs at a time by one transpose.
            let mut partials = [[_mm256_setzero_si256(); 8]; 2];
            let mut dmin_dx = [[0.0f32; 8]; 2];
            for c in 0..C {
                let bsums = load32(bytemuck::cast_ref::<_, [u8; 32]>(&x[c].bsums));
                for r in 0..R {
                    let o = r * C + c;
                    partials[o / 8][o % 8] = _mm256_madd_epi16(bsums, w[r].extra);
                    dmin_dx[o / 8][o % 8] = w[r].dmin * x[c].scale();
                }
            }
            for g in 0..(R * C).div_ceil(8) {
                let sumi = _mm256_cvtepi32_ps(transpose_sums(&partials[g]));
                // SAFETY: `dmin_dx[g]` holds eight f32; `loadu` has no alignment requirement.
                let scale = unsafe { _mm256_loadu_ps(dmin_dx[g].as_ptr()) };
                sumf[g] = _mm256_sub_ps(sumf[g], _mm256_mul_ps(scale, sumi));
            }
        }
    }
    *state = TileSums { sums, sumf };
}

/// A tile's outputs from its final state: `sumf`, then the eight lane sums in lane order.
#[inline]
#[target_feature(enable = "avx2")]
fn tile_outputs<const R: usize, const C: usize>(state: TileSums<R, C>) -> [[f32; C]; R] {
    let TileSums { sums, sumf } = state;
    let mut sumf_out = [[0.0f32; 8]; 2];
    for (out, v) in sumf_out.iter_mut().zip(sumf) {
        // SAFETY: `out` holds eight f32; `storeu` has no alignment requirement.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), v) };
    }
    let mut out = [[0.0f32; C]; R];
    for (r, (out_r, sums_r)) in out.iter_mut().zip(&sums).enumerate() {
        for (c, (o, &sums)) in out_r.iter_mut().zip(sums_r).enumerate() {
            let sumf = sumf_out
                .as_flattened()
                .get(r * C + c)
                .copied()
                .unwrap_or(0.0);
            *o = add_lanes(sumf, sums);
        }
    }
    out
}

/// `R` decoded rows (the first is row `first_row` of `y`) against every column, `C` at a time and
/// the last few one at a time.
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn rows_against_columns<
    P: Primitives,
    const R: usize,
    const C: usize,
    const SIGNED: bool,
    const MINS: bool,
>(
    p: P,
    rows: &[Decoded],
    blocks: usize,
    x: &[BlockQ8K],
    y: &mut OutputColumns<'_, '_>,
    first_row: usize,
) {
    let column = |c: usize| column_part(x, blocks, c, &(0..blocks));
    let n = x.len() / blocks.max(1);
    let mut first = 0;
    while first + C <= n {
        let group: [&[BlockQ8K]; C] = core::array::from_fn(|i| column(first + i));
        let out = tile::<P, R, C, SIGNED, MINS>(p, rows, blocks, group);
        y.store_tile(first, first_row, &out, C);
        first += C;
    }
    for c in first..n {
        let out = tile::<P, R, 1, SIGNED, MINS>(p, rows, blocks, [column(c)]);
        y.store_tile(c, first_row, &out, 1);
    }
}

/// Super-blocks per chunk for rows of `row_blocks` super-blocks where at most `most` fit at once:
/// all of them, or the fewest chunks of at most `most`, as even as can be.
pub(super) fn chunk_blocks(row_blocks: usize, most: usize) -> usize {
    let chunks = row_blocks.div_ceil(most.max(1)).max(1);
    row_blocks.div_ceil(chunks)
}

/// A group of rows too long to decode at once against `n` columns, `TC` at a time: for each block
/// of up to [`CHUNKED_TILES`] tiles of columns, each chunk of `chunk` super-blocks is decoded into
/// `storage` (`decode`, which returns what `step` needs to read it) and every tile's float state
/// (from `zero()`) carried through it (`step`: the state, the tile's columns, the chunk's
/// super-blocks); then `store` gets each final state with its first column and how many of its
/// columns are real (a last tile repeats its last column). Each output's float steps run over its
/// super-blocks in order, as in one pass.
#[allow(clippy::too_many_arguments)]
#[inline]
pub(super) fn in_chunks<St: ?Sized, D: Copy, S: Copy, const TC: usize>(
    storage: &mut St,
    n: usize,
    row_blocks: usize,
    chunk: usize,
    zero: impl Fn() -> S,
    mut decode: impl FnMut(&mut St, Range<usize>) -> D,
    mut step: impl FnMut(&St, D, &mut S, [usize; TC], Range<usize>),
    mut store: impl FnMut(S, usize, usize),
) {
    let mut first = 0;
    while first < n {
        let columns = (CHUNKED_TILES * TC).min(n - first);
        let tiles = columns.div_ceil(TC);
        // `None` until a tile's first chunk: filling every state with `zero` up front wrote
        // all `CHUNKED_TILES` of them (tens of KiB) per call, however few tiles it had.
        let mut states = [None; CHUNKED_TILES];
        let mut start = 0;
        while start < row_blocks {
            let blocks = start..start.saturating_add(chunk.max(1)).min(row_blocks);
            let decoded = decode(storage, blocks.clone());
            let last = blocks.end == row_blocks;
            for (t, state) in states.iter_mut().take(tiles).enumerate() {
                let tile = core::array::from_fn(|i| first + (TC * t + i).min(columns - 1));
                let state = state.get_or_insert_with(&zero);
                step(storage, decoded, state, tile, blocks.clone());
                // Stored as each tile finishes: the outputs' lines are often not in cache, and
                // all the tiles' stores at once filled the store queue (perf: the next tile
                // stalled on its first stores).
                if last {
                    store(*state, first + TC * t, (columns - TC * t).min(TC));
                }
            }
            start = blocks.end;
        }
        first += columns;
    }
}

/// Column `c`'s super-blocks `blocks` (of `row_blocks` per column) in `x`; empty past its end.
#[inline]
pub(super) fn column_part<'x>(
    x: &'x [BlockQ8K],
    row_blocks: usize,
    c: usize,
    blocks: &Range<usize>,
) -> &'x [BlockQ8K] {
    let start = c.saturating_mul(row_blocks);
    x.get(start.saturating_add(blocks.start)..start.saturating_add(blocks.end))
        .unwrap_or(&[])
}

/// The K-quant matmul (see [`MatmulFn`](crate::quant::table::MatmulFn)): rows decoded `ROWS` at a
/// time by `decode` (the last few one at a time), each group against every column in tiles; rows
/// longer than [`TILE_MAX_BLOCKS`] in chunks. Fewer columns than the level's
/// ([`ZMM_MIN_COLUMNS`] with 512-bit tiles, else [`TileLevel::tile_min_columns`]), or columns not
/// `row_blocks` long, run `rows_kernel` per column instead. At levels with 512-bit tiles,
/// `zmm_groups` runs first (the type's 512-bit tiles: weights, `row_blocks`, columns, `y`) and
/// returns the rows it did; the 256-bit tiles do the rest.
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn k_matmul<P: Primitives + TileLevel, W, const SIGNED: bool, const MINS: bool>(
    p: P,
    w: &[W],
    row_blocks: usize,
    x: &[BlockQ8K],
    n: usize,
    y: &mut OutputColumns<'_, '_>,
    decode: impl Fn(&W) -> Decoded,
    rows_kernel: impl Fn(&[W], usize, &[BlockQ8K], &mut [f32]),
    zmm_groups: impl Fn(Avx512Vbmi, &[W], usize, &[BlockQ8K], &mut OutputColumns<'_, '_>) -> usize,
) {
    let min_columns = if p.zmm().is_some() {
        ZMM_MIN_COLUMNS
    } else {
        p.tile_min_columns()
    };
    let fits = row_blocks > 0 && n >= min_columns && Some(x.len()) == n.checked_mul(row_blocks);
    if !fits {
        let rows = w.len() / row_blocks.max(1);
        let column_blocks = x.len() / n.max(1);
        for (c, column) in x.chunks_exact(column_blocks.max(1)).take(n).enumerate() {
            if let Some(out) = y.run(c, 0, rows) {
                rows_kernel(w, row_blocks, column, out);
            }
        }
        return;
    }
    // Whole groups of four rows on 512-bit vectors where the level has them, the rest here.
    let mut first_row = match p.zmm() {
        Some(t) => zmm_groups(t, w, row_blocks, x, y),
        None => 0,
    };
    let w = w.get(first_row.saturating_mul(row_blocks)..).unwrap_or(&[]);
    let mut storage = [const { MaybeUninit::<Decoded>::uninit() }; ROWS * TILE_MAX_BLOCKS];
    let chunk = chunk_blocks(row_blocks, TILE_MAX_BLOCKS);
    let mut groups = w.chunks_exact(ROWS * row_blocks);
    for group in &mut groups {
        group_against_columns::<W, ROWS, SIGNED, MINS>(
            p.avx2(),
            &mut storage,
            group,
            row_blocks,
            chunk,
            x,
            y,
            first_row,
            &decode,
        );
        first_row += ROWS;
    }
    for row in groups.remainder().chunks_exact(row_blocks) {
        group_against_columns::<W, 1, SIGNED, MINS>(
            p.avx2(),
            &mut storage,
            row,
            row_blocks,
            chunk,
            x,
            y,
            first_row,
            &decode,
        );
        first_row += 1;
    }
}

/// Decodes super-blocks `blocks` of each of the `rows` rows of `group` (`row_blocks` each) into
/// `storage`, slot `r · len + k`, and returns how many slots it wrote (all of the first `rows ·
/// len`, as many as `storage` has). One function for every tile height, so that `decode` has
/// one caller and is inlined into it.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn fill_rows<W>(
    storage: &mut [MaybeUninit<Decoded>],
    group: &[W],
    rows: usize,
    row_blocks: usize,
    blocks: Range<usize>,
    decode: &impl Fn(&W) -> Decoded,
) -> usize {
    let mut slots = storage.iter_mut();
    let mut filled = 0;
    for r in 0..rows {
        let row = r * row_blocks;
        for (k, slot) in blocks.clone().zip(&mut slots) {
            // Written in each arm, not through a `match` value: one copy of the block fewer.
            match group.get(row + k) {
                Some(b) => slot.write(decode(b)),
                None => slot.write(Decoded::zero()),
            };
            filled += 1;
        }
    }
    filled
}

/// `R` rows of `row_blocks` super-blocks (`group`, the first is row `first_row` of `y`) decoded
/// into `storage` and run against every column of `x`: at once where `chunk` covers the rows,
/// else in chunks of `chunk` super-blocks, two columns a tile.
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn group_against_columns<W, const R: usize, const SIGNED: bool, const MINS: bool>(
    p: Avx2,
    storage: &mut [MaybeUninit<Decoded>],
    group: &[W],
    row_blocks: usize,
    chunk: usize,
    x: &[BlockQ8K],
    y: &mut OutputColumns<'_, '_>,
    first_row: usize,
    decode: &impl Fn(&W) -> Decoded,
) {
    let fill = |storage: &mut [MaybeUninit<Decoded>], blocks: Range<usize>| {
        fill_rows(storage, group, R, row_blocks, blocks, decode)
    };
    if chunk >= row_blocks {
        let filled = fill(storage, 0..row_blocks);
        // SAFETY: `fill` wrote the first `filled` slots just above, and `MaybeUninit<Decoded>`
        // has the layout of `Decoded`.
        let rows = unsafe { core::slice::from_raw_parts(storage.as_ptr().cast(), filled) };
        rows_against_columns::<Avx2, R, 2, SIGNED, MINS>(p, rows, row_blocks, x, y, first_row);
        return;
    }
    in_chunks::<_, usize, TileSums<R, 2>, 2>(
        storage,
        x.len() / row_blocks,
        row_blocks,
        chunk,
        || TileSums::zero(),
        fill,
        |storage, filled, state, columns, blocks| {
            // SAFETY: as above: `fill` wrote the first `filled` slots for this chunk.
            let rows = unsafe { core::slice::from_raw_parts(storage.as_ptr().cast(), filled) };
            let columns = columns.map(|c| column_part(x, row_blocks, c, &blocks));
            tile_blocks::<Avx2, R, 2, SIGNED, MINS, true>(p, state, rows, blocks.len(), columns);
        },
        |state, first, count| y.store_tile(first, first_row, &tile_outputs(state), count),
    );
}
