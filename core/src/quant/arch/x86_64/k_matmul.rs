//! The K-quants' matmul driver (Q4_K, Q5_K, Q6_K): many weight rows against many activation
//! columns, a tile of `R` rows × `C` columns of outputs at a time.
//!
//! Each group of `R` rows is decoded once into a stack buffer ([`Decoded`]: quants as bytes in the
//! tile's lane order, scales as i16 pairs, the float scales), then run against every column; each
//! activation super-block is put in the same lane order once per `R` rows. Per super-block, an
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

use super::primitives::Primitives;
use super::tokens::{Avx2, Avx512Vbmi, Avx512Vnni};
use super::vector::{accumulate, add_lanes, load32, part, transpose_sums};
use crate::quant::activation::BlockQ8K;

/// Rows decoded at once (the tile's height).
const ROWS: usize = 4;

/// Super-blocks per row the tiles take (rows of up to 10,240 values, Gemma 3 4B's FFN): the
/// decoded rows live on the stack. Longer rows run the rows kernel once per column.
pub(super) const TILE_MAX_BLOCKS: usize = 40;

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

/// `R` decoded rows (each `blocks` long, one after another in `rows`) against `C` columns: the
/// `R × C` outputs with their vec_dots' bits (`SIGNED`: Q6_K's quants; `MINS`: Q4_K/Q5_K's mins).
// Row, column and output indices into parallel arrays of a fully unrolled tile read best as such.
#[allow(clippy::needless_range_loop)]
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn tile<P: Primitives, const R: usize, const C: usize, const SIGNED: bool, const MINS: bool>(
    p: P,
    rows: &[Decoded],
    blocks: usize,
    columns: [&[BlockQ8K]; C],
) -> [[f32; C]; R] {
    const { assert!(R * C <= 16 && R > 0 && C > 0) };
    let zero_block = Decoded::zero();
    let zero_column = <BlockQ8K as bytemuck::Zeroable>::zeroed();
    let mut sums = [[_mm256_setzero_ps(); C]; R];
    // Outputs `8g..8g + 8` (output `r·C + c`) of the serial `sumf`s, for the mins.
    let mut sumf = [_mm256_setzero_ps(); 2];
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
    let column = |c: usize| {
        let start = c.saturating_mul(blocks);
        x.get(start..start.saturating_add(blocks)).unwrap_or(&[])
    };
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

/// The K-quant matmul (see [`MatmulFn`](crate::quant::table::MatmulFn)): rows decoded `ROWS` at a
/// time by `decode` (the last few one at a time), each group against every column in tiles.
/// Rows longer than [`TILE_MAX_BLOCKS`], fewer than the level's columns ([`ZMM_MIN_COLUMNS`]
/// with 512-bit tiles, else [`TileLevel::tile_min_columns`]), or columns not `row_blocks` long,
/// run `rows_kernel` per column instead. At levels with 512-bit tiles, `zmm_groups` runs first
/// (the type's 512-bit tiles: weights, `row_blocks`, columns, `y`) and returns the rows it did;
/// the 256-bit tiles do the rest.
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
    let fits = row_blocks > 0
        && row_blocks <= TILE_MAX_BLOCKS
        && n >= min_columns
        && Some(x.len()) == n.checked_mul(row_blocks);
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
    let mut groups = w.chunks_exact(ROWS * row_blocks);
    for group in &mut groups {
        let mut filled = 0;
        for (slot, b) in storage.iter_mut().zip(group) {
            slot.write(decode(b));
            filled += 1;
        }
        // SAFETY: the first `filled` slots were written just above, and `MaybeUninit<Decoded>`
        // has the layout of `Decoded`.
        let rows = unsafe { core::slice::from_raw_parts(storage.as_ptr().cast(), filled) };
        rows_against_columns::<Avx2, ROWS, 2, SIGNED, MINS>(
            p.avx2(),
            rows,
            row_blocks,
            x,
            y,
            first_row,
        );
        first_row += ROWS;
    }
    for row in groups.remainder().chunks_exact(row_blocks) {
        let mut filled = 0;
        for (slot, b) in storage.iter_mut().zip(row) {
            slot.write(decode(b));
            filled += 1;
        }
        // SAFETY: as above.
        let rows = unsafe { core::slice::from_raw_parts(storage.as_ptr().cast(), filled) };
        rows_against_columns::<Avx2, 1, 2, SIGNED, MINS>(
            p.avx2(),
            rows,
            row_blocks,
            x,
            y,
            first_row,
        );
        first_row += 1;
    }
}
