//! Register-blocked matmul tiles for the K-quants Q4_K, Q5_K and Q6_K (the table's `matmul` slot:
//! the NEON tiles at every AArch64 level): `R` weight rows × `C` activation columns per tile, each
//! weight super-block decoded once per tile (nibbles split, fifth / high bits merged, 6-bit scales
//! and mins unpacked, `d` converted) and used for all its columns, each activation super-block
//! loaded once per tile's rows. Shapes: `MINS_NEON`, `Q6_K_NEON`, `MINS_SDOT`.
//!
//! The scalar twins keep eight i32 lanes per super-block (lane = element index mod 8, each
//! sub-block's products times its scale), then `sums[l] += (d · d_x) · lane[l]` in float, and the
//! eight sums added in lane order at the end (Q4_K / Q5_K: `sumf -= (dmin · d_x) · Σ bsums·mins`
//! per super-block first). The tiles keep exactly those lanes per output, so every output is its
//! column's scalar vec_dot, bit for bit:
//!
//! - NEON (all three types, in the table at every level): the vec_dot kernels' widening multiplies
//!   (`smull`/`smlal` into i16, then `smlal` by the sub-block's scale lane into i32), per row and
//!   column of the tile.
//! - `sdot` (Q4_K, Q5_K; tested, not in the table: it executes more instructions than the NEON
//!   tile, see docs/kernel-experiments.md): both operands of a 32-value sub-block are permuted by
//!   one `tbl` per 16 bytes so that the four bytes of each 32-bit word share their element index
//!   mod 8 (word `l` holds elements `l, l + 8, l + 16, l + 24`); one `sdot` per 16 bytes then adds
//!   each lane's four products. The sub-block scales enter by summation by parts: the `sdot`
//!   accumulators `P` run over the whole super-block (the prefix sums), and after sub-block `s` the
//!   lanes take `(scale_s − scale_{s+1}) · P` (`mla` by element, `scale_8 = 0`), which totals
//!   `Σ_s scale_s · (P_s − P_{s−1})`: exact in wrapping i32, two instructions per 16 products where
//!   the widening form needs three. Q6_K's sub-blocks hold only two elements per lane, too few for
//!   a 4-byte `sdot` word.
//! - `i8mm`: `smmla` adds eight consecutive bytes, and a K-quant sub-block has at most four
//!   elements per lane, so there is no `smmla` tile.
//!
//! Rows and columns past the matrix's edge repeat the last row / column (computed, never stored).
//! Instruction counts, old path against these: docs/kernel-experiments.md.

use super::has_dotprod;
use super::matmul::each_block;
use super::ops::{f16_le, load_i8, load_u8, piece, sdot};
use super::q4_k::{add_lanes, add_sub_block as add_sub_block_32};
use super::q5_k::sub_block as q5_k_sub_block;
use super::q6_k::{add_sub_block as add_sub_block_16, half_quants};
use crate::quant::activation::BlockQ8K;
use crate::quant::k_quants::q4_k::{scales_and_mins, BlockQ4K};
use crate::quant::k_quants::q5_k::BlockQ5K;
use crate::quant::k_quants::q6_k::BlockQ6K;
use core::arch::aarch64::*;

/// The K-quants with eight 32-value sub-blocks and 6-bit scales and mins (Q4_K, Q5_K).
pub trait WithMins: Sized + 'static {
    /// `d`, `dmin` and the packed scales and mins.
    fn header(&self) -> ([u8; 2], [u8; 2], &[u8; 12]);
    /// The quants (unsigned, below 32) of sub-block `j`: values 0..16 and 16..32.
    fn sub_block(&self, j: usize) -> (int8x16_t, int8x16_t);
    /// Sub-block `j` reordered by [`LANE_WORDS`] (`index` holds it).
    #[inline(always)]
    fn sub_block_by_lane(
        &self,
        j: usize,
        index: (uint8x16_t, uint8x16_t),
    ) -> (int8x16_t, int8x16_t) {
        // SAFETY: this module is compiled only for targets with NEON (quant/arch).
        unsafe { by_lane(self.sub_block(j), index) }
    }
}

/// Q4_K's sub-block `j`: the low (even `j`) or high (odd `j`) nibbles of qs bytes `32 (j / 2)..`.
#[inline]
#[target_feature(enable = "neon")]
fn q4_k_sub_block(b: &BlockQ4K, j: usize) -> (int8x16_t, int8x16_t) {
    let one = |i: usize| {
        let q = load_u8(piece(&b.qs, 2 * (j / 2) + i));
        let v = if j.is_multiple_of(2) {
            vandq_u8(q, vdupq_n_u8(0x0f))
        } else {
            vshrq_n_u8::<4>(q)
        };
        vreinterpretq_s8_u8(v)
    };
    (one(0), one(1))
}

impl WithMins for BlockQ4K {
    #[inline(always)]
    fn header(&self) -> ([u8; 2], [u8; 2], &[u8; 12]) {
        (self.d, self.dmin, &self.scales)
    }
    #[inline(always)]
    fn sub_block(&self, j: usize) -> (int8x16_t, int8x16_t) {
        // SAFETY: this module is compiled only for targets with NEON (quant/arch).
        unsafe { q4_k_sub_block(self, j) }
    }
    /// The qs bytes reordered before their nibbles are split: the same `tbl`s serve sub-blocks
    /// `2p` and `2p + 1`.
    #[inline(always)]
    fn sub_block_by_lane(
        &self,
        j: usize,
        index: (uint8x16_t, uint8x16_t),
    ) -> (int8x16_t, int8x16_t) {
        // SAFETY: this module is compiled only for targets with NEON (quant/arch).
        unsafe { q4_k_sub_block_by_lane(self, j, index) }
    }
}

/// [`q4_k_sub_block`] reordered by [`LANE_WORDS`]: the qs bytes first, then their nibbles.
#[inline]
#[target_feature(enable = "neon")]
fn q4_k_sub_block_by_lane(
    b: &BlockQ4K,
    j: usize,
    index: (uint8x16_t, uint8x16_t),
) -> (int8x16_t, int8x16_t) {
    let p = 2 * (j / 2);
    let raw = (
        vreinterpretq_s8_u8(load_u8(piece(&b.qs, p))),
        vreinterpretq_s8_u8(load_u8(piece(&b.qs, p + 1))),
    );
    let (a, c) = by_lane(raw, index);
    let nibbles = |v: int8x16_t| {
        let v = vreinterpretq_u8_s8(v);
        vreinterpretq_s8_u8(if j.is_multiple_of(2) {
            vandq_u8(v, vdupq_n_u8(0x0f))
        } else {
            vshrq_n_u8::<4>(v)
        })
    };
    (nibbles(a), nibbles(c))
}

impl WithMins for BlockQ5K {
    #[inline(always)]
    fn header(&self) -> ([u8; 2], [u8; 2], &[u8; 12]) {
        (self.d, self.dmin, &self.scales)
    }
    #[inline(always)]
    fn sub_block(&self, j: usize) -> (int8x16_t, int8x16_t) {
        // SAFETY: this module is compiled only for targets with NEON (quant/arch).
        unsafe {
            let (a, b) = q5_k_sub_block(self, j);
            (vreinterpretq_s8_u8(a), vreinterpretq_s8_u8(b))
        }
    }
}

/// What a tile keeps of one weight super-block of a [`WithMins`] row: `d` and `dmin` as f32, the
/// scales as i16 lanes (NEON) and the mins as two i32 vectors.
#[derive(Clone, Copy)]
struct MinsHead {
    d: f32,
    dmin: f32,
    scales: [u8; 8],
    mins: (int32x4_t, int32x4_t),
}

#[inline]
#[target_feature(enable = "neon")]
fn mins_head<W: WithMins>(b: &W) -> MinsHead {
    let (d, dmin, packed) = b.header();
    let (scales, mins) = scales_and_mins(packed);
    // SAFETY: `mins` is 8 bytes, exactly what `ld1` reads.
    let m = vreinterpretq_s16_u16(vmovl_u8(unsafe { vld1_u8(mins.as_ptr()) }));
    MinsHead {
        d: f16_le(d),
        dmin: f16_le(dmin),
        scales,
        mins: (vmovl_s16(vget_low_s16(m)), vmovl_high_s16(m)),
    }
}

/// A [`MinsHead`] of zeros (an array's filler).
#[inline]
#[target_feature(enable = "neon")]
fn zero_head() -> MinsHead {
    MinsHead {
        d: 0.0,
        dmin: 0.0,
        scales: [0; 8],
        mins: (vdupq_n_s32(0), vdupq_n_s32(0)),
    }
}

/// Eight u8 as i16 lanes.
#[inline]
#[target_feature(enable = "neon")]
fn widen8(v: &[u8; 8]) -> int16x8_t {
    // SAFETY: `v` is 8 bytes, exactly what `ld1` reads.
    vreinterpretq_s16_u16(vmovl_u8(unsafe { vld1_u8(v.as_ptr()) }))
}

/// What a tile keeps of one activation super-block for the [`WithMins`] types: `d` and the sums of
/// the bsum pairs `2j, 2j + 1` (the ones that share min `j`) as i32.
#[derive(Clone, Copy)]
struct XHead {
    d: f32,
    pairs: (int32x4_t, int32x4_t),
}

#[inline]
#[target_feature(enable = "neon")]
fn x_head(xb: &BlockQ8K) -> XHead {
    // SAFETY: `bsums` is 16 pairs of bytes = 32 bytes; each load reads 16 of them. They are
    // little-endian i16, the native order (quant/arch compiles this module for little-endian only).
    let (b0, b1) = unsafe {
        let p = xb.bsums.as_ptr().cast::<i16>();
        (vld1q_s16(p), vld1q_s16(p.add(8)))
    };
    XHead {
        d: xb.scale(),
        pairs: (vpaddlq_s16(b0), vpaddlq_s16(b1)),
    }
}

/// An [`XHead`] of zeros (an array's filler).
#[inline]
#[target_feature(enable = "neon")]
fn zero_x_head() -> XHead {
    XHead {
        d: 0.0,
        pairs: (vdupq_n_s32(0), vdupq_n_s32(0)),
    }
}

/// `Σ bsums·mins` of one output (exact: every product and the sum fit in i32).
#[inline]
#[target_feature(enable = "neon")]
fn min_sum(w: &MinsHead, x: &XHead) -> i32 {
    vaddvq_s32(vmlaq_s32(
        vmulq_s32(w.mins.0, x.pairs.0),
        w.mins.1,
        x.pairs.1,
    ))
}

/// One output's float state across super-blocks: the eight lane sums and `sumf`.
#[derive(Clone, Copy)]
struct Acc {
    low: float32x4_t,
    high: float32x4_t,
    sumf: f32,
}

#[inline]
#[target_feature(enable = "neon")]
fn acc_zero() -> Acc {
    Acc {
        low: vdupq_n_f32(0.0),
        high: vdupq_n_f32(0.0),
        sumf: 0.0,
    }
}

/// The twin's per-super-block float step on the lanes: `sums[l] += d · lane[l]`.
#[inline]
#[target_feature(enable = "neon")]
fn add_scaled(acc: &mut Acc, d: f32, lanes: (int32x4_t, int32x4_t)) {
    let d = vdupq_n_f32(d);
    acc.low = vaddq_f32(acc.low, vmulq_f32(d, vcvtq_f32_s32(lanes.0)));
    acc.high = vaddq_f32(acc.high, vmulq_f32(d, vcvtq_f32_s32(lanes.1)));
}

/// The float steps of a [`WithMins`] super-block for every output of the tile, in the twin's order:
/// the lanes scaled by `d · d_x`, then `sumf -= (dmin · d_x) · Σ bsums·mins`.
#[inline(always)]
fn finish_mins<const R: usize, const C: usize>(
    acc: &mut [[Acc; C]; R],
    lanes: &[[(int32x4_t, int32x4_t); C]; R],
    heads: &[MinsHead; R],
    xs: &[XHead; C],
) {
    for ((acc, lanes), head) in acc.iter_mut().zip(lanes).zip(heads) {
        for ((acc, &lanes), x) in acc.iter_mut().zip(lanes).zip(xs) {
            // SAFETY: this module is compiled only for targets with NEON (quant/arch).
            let sumi = unsafe {
                add_scaled(acc, head.d * x.d, lanes);
                min_sum(head, x)
            };
            let dmin = head.dmin * x.d;
            acc.sumf -= dmin * sumi as f32;
        }
    }
}

/// The outputs: each output's `sumf` plus its lane sums in lane order.
#[inline(always)]
fn outputs<const R: usize, const C: usize>(acc: &[[Acc; C]; R]) -> [[f32; C]; R] {
    // SAFETY: this module is compiled only for targets with NEON (quant/arch).
    acc.map(|row| row.map(|a| unsafe { add_lanes(a.sumf, a.low, a.high) }))
}

/// `f` of each element of `a`, by a plain loop over an array filled with `init` first:
/// `array::map` and `array::from_fn` go through an adapter that LLVM kept out of line here (a call
/// per element, its results through memory).
#[inline(always)]
fn each<T: Copy, U: Copy, const N: usize>(a: [T; N], init: U, f: impl Fn(T) -> U) -> [U; N] {
    let mut out = [init; N];
    for (o, t) in out.iter_mut().zip(a) {
        *o = f(t);
    }
    out
}

/// A zeroed pair of i32 lane vectors.
#[inline]
#[target_feature(enable = "neon")]
fn lanes_zero() -> (int32x4_t, int32x4_t) {
    (vdupq_n_s32(0), vdupq_n_s32(0))
}

/// `R` rows of a [`WithMins`] type against `C` columns with widening multiplies: per sub-block,
/// each row's quants and each column's quants once, then the products of every pair.
#[inline]
#[target_feature(enable = "neon")]
fn tile_mins_neon<W: WithMins, const R: usize, const C: usize>(
    w: [&[W]; R],
    x: [&[BlockQ8K]; C],
) -> [[f32; C]; R] {
    let mut acc = [[acc_zero(); C]; R];
    let z8 = (vdupq_n_s8(0), vdupq_n_s8(0));
    each_block(w, x, |wb, xb| {
        let heads = each(wb, zero_head(), |b| mins_head(b));
        let scales = each(heads, vdupq_n_s16(0), |h| widen8(&h.scales));
        let mut lanes = [[lanes_zero(); C]; R];
        macro_rules! sub {
            ($j:literal) => {{
                let wq = each(wb, z8, |b| b.sub_block($j));
                let xq = each(xb, z8, |b| {
                    (
                        load_i8(piece(&b.qs, 2 * $j)),
                        load_i8(piece(&b.qs, 2 * $j + 1)),
                    )
                });
                for ((lanes, &wq), &s) in lanes.iter_mut().zip(&wq).zip(&scales) {
                    for (lanes, &xq) in lanes.iter_mut().zip(&xq) {
                        add_sub_block_32::<$j>(lanes, wq, xq, s);
                    }
                }
            }};
        }
        sub!(0);
        sub!(1);
        sub!(2);
        sub!(3);
        sub!(4);
        sub!(5);
        sub!(6);
        sub!(7);
        let xs = each(xb, zero_x_head(), |b| x_head(b));
        finish_mins(&mut acc, &lanes, &heads, &xs);
    });
    outputs(&acc)
}

/// Byte `4l + i` of the first (second) vector takes element `l + 8i` (`l + 4 + 8i`) of a 32-value
/// sub-block: each 32-bit word then holds the four elements of one lane `element mod 8`.
const LANE_WORDS: [[u8; 16]; 2] = {
    let mut t = [[0u8; 16]; 2];
    let mut k = 0;
    while k < 32 {
        let (half, at) = (k / 16, k % 16);
        let (l, i) = (4 * half + at / 4, at % 4);
        t[half][at] = (l + 8 * i) as u8;
        k += 1;
    }
    t
};

/// The 32 values `(a, b)` reordered by [`LANE_WORDS`].
#[inline]
#[target_feature(enable = "neon")]
fn by_lane(v: (int8x16_t, int8x16_t), index: (uint8x16_t, uint8x16_t)) -> (int8x16_t, int8x16_t) {
    let table = int8x16x2_t(v.0, v.1);
    (vqtbl2q_s8(table, index.0), vqtbl2q_s8(table, index.1))
}

/// Lane `J` of `v` times `m`, added to `acc` (`mla` by element).
#[inline]
#[target_feature(enable = "neon")]
fn mla_lane<const J: i32>(acc: int32x4_t, m: int32x4_t, v: int32x4_t) -> int32x4_t {
    vmlaq_laneq_s32::<J>(acc, m, v)
}

/// `R` rows of a [`WithMins`] type against `C` columns with `sdot`: per sub-block each row's and
/// each column's quants reordered by lane once, then per pair two `sdot`s into the running prefix
/// sums and two `mla`s of them by the scale differences.
#[inline]
#[target_feature(enable = "neon,dotprod")]
fn tile_mins_sdot<W: WithMins, const R: usize, const C: usize>(
    w: [&[W]; R],
    x: [&[BlockQ8K]; C],
) -> [[f32; C]; R] {
    // SAFETY: both arrays are 16 bytes, what `ld1` reads.
    let index = unsafe {
        (
            vld1q_u8(LANE_WORDS[0].as_ptr()),
            vld1q_u8(LANE_WORDS[1].as_ptr()),
        )
    };
    let mut acc = [[acc_zero(); C]; R];
    let z8 = (vdupq_n_s8(0), vdupq_n_s8(0));
    each_block(w, x, |wb, xb| {
        let heads = each(wb, zero_head(), |b| mins_head(b));
        // scale_s − scale_{s+1} (scale_8 = 0) as i32 lanes.
        let deltas = each(heads, lanes_zero(), |h| {
            let s = widen8(&h.scales);
            let d = vsubq_s16(s, vextq_s16::<1>(s, vdupq_n_s16(0)));
            (vmovl_s16(vget_low_s16(d)), vmovl_high_s16(d))
        });
        let mut prefix = [[lanes_zero(); C]; R];
        let mut lanes = [[lanes_zero(); C]; R];
        macro_rules! sub {
            ($j:literal, $half:tt, $lane:literal) => {{
                let wq = each(wb, z8, |b| b.sub_block_by_lane($j, index));
                let xq = each(xb, z8, |b| {
                    let v = (
                        load_i8(piece(&b.qs, 2 * $j)),
                        load_i8(piece(&b.qs, 2 * $j + 1)),
                    );
                    by_lane(v, index)
                });
                for (((prefix, lanes), &wq), delta) in
                    prefix.iter_mut().zip(&mut lanes).zip(&wq).zip(&deltas)
                {
                    for ((p, l), &xq) in prefix.iter_mut().zip(lanes.iter_mut()).zip(&xq) {
                        p.0 = sdot(p.0, wq.0, xq.0);
                        p.1 = sdot(p.1, wq.1, xq.1);
                        l.0 = mla_lane::<$lane>(l.0, p.0, delta.$half);
                        l.1 = mla_lane::<$lane>(l.1, p.1, delta.$half);
                    }
                }
            }};
        }
        sub!(0, 0, 0);
        sub!(1, 0, 1);
        sub!(2, 0, 2);
        sub!(3, 0, 3);
        sub!(4, 1, 0);
        sub!(5, 1, 1);
        sub!(6, 1, 2);
        sub!(7, 1, 3);
        let xs = each(xb, zero_x_head(), |b| x_head(b));
        finish_mins(&mut acc, &lanes, &heads, &xs);
    });
    outputs(&acc)
}

/// `R` Q6_K rows against `C` columns with widening multiplies: per half super-block each row's
/// quants decoded once, per 16-value sub-block each column's quants once, then the products of
/// every pair.
#[inline]
#[target_feature(enable = "neon")]
fn tile_q6_k_neon<const R: usize, const C: usize>(
    w: [&[BlockQ6K]; R],
    x: [&[BlockQ8K]; C],
) -> [[f32; C]; R] {
    let mut acc = [[acc_zero(); C]; R];
    each_block(w, x, |wb, xb| {
        let d = each(wb, 0.0, |b| f16_le(b.d));
        let scales = each(wb, vdupq_n_s8(0), |b| load_i8(&b.scales));
        let mut lanes = [[lanes_zero(); C]; R];
        macro_rules! half {
            ($half:literal) => {{
                let q = each(wb, [vdupq_n_s8(0); 8], |b| half_quants(b, $half));
                let s = each(scales, vdupq_n_s16(0), |s| {
                    if $half == 0 {
                        vmovl_s8(vget_low_s8(s))
                    } else {
                        vmovl_high_s8(s)
                    }
                });
                macro_rules! sub {
                    ($i:literal) => {{
                        let xq = each(xb, vdupq_n_s8(0), |b| load_i8(piece(&b.qs, 8 * $half + $i)));
                        for ((lanes, q), &s) in lanes.iter_mut().zip(&q).zip(&s) {
                            for (lanes, &xq) in lanes.iter_mut().zip(&xq) {
                                add_sub_block_16::<$i>(lanes, q[$i], xq, s);
                            }
                        }
                    }};
                }
                sub!(0);
                sub!(1);
                sub!(2);
                sub!(3);
                sub!(4);
                sub!(5);
                sub!(6);
                sub!(7);
            }};
        }
        half!(0);
        half!(1);
        for ((acc, lanes), &d) in acc.iter_mut().zip(&lanes).zip(&d) {
            for ((acc, &lanes), xb) in acc.iter_mut().zip(lanes).zip(&xb) {
                add_scaled(acc, d * xb.scale(), lanes);
            }
        }
    });
    outputs(&acc)
}

/// A matrix as the tiles see it: `rows` rows of `row_blocks` weight super-blocks, `n` columns of
/// as many activation super-blocks, outputs at `y[c * y_stride + r]`.
struct Problem<'a, W> {
    w: &'a [W],
    row_blocks: usize,
    rows: usize,
    x: &'a [BlockQ8K],
    n: usize,
    y_stride: usize,
}

impl<'a, W> Problem<'a, W> {
    fn new(
        w: &'a [W],
        row_blocks: usize,
        x: &'a [BlockQ8K],
        n: usize,
        y_stride: usize,
    ) -> Option<Self> {
        if row_blocks == 0 || n == 0 || w.len() < row_blocks {
            return None;
        }
        Some(Problem {
            w,
            row_blocks,
            rows: w.len() / row_blocks,
            x,
            n,
            y_stride,
        })
    }

    fn row(&self, r: usize) -> &'a [W] {
        let start = r.saturating_mul(self.row_blocks);
        self.w
            .get(start..start.saturating_add(self.row_blocks))
            .unwrap_or_default()
    }

    fn column(&self, c: usize) -> &'a [BlockQ8K] {
        let blocks = self.x.len() / self.n;
        let start = c.saturating_mul(blocks);
        self.x
            .get(start..start.saturating_add(blocks))
            .unwrap_or_default()
    }

    /// The tiles of the columns `columns` in groups of `C`, every row in groups of `R`; a group
    /// at the edge repeats its last column or row (computed, never stored).
    #[inline(always)]
    fn tiles<const R: usize, const C: usize>(
        &self,
        columns: core::ops::Range<usize>,
        y: &mut [f32],
        tile: impl Fn([&'a [W]; R], [&'a [BlockQ8K]; C]) -> [[f32; C]; R],
    ) {
        let (rows, last_column) = (self.rows, columns.end.saturating_sub(1));
        for c0 in columns.clone().step_by(C) {
            let xs: [&[BlockQ8K]; C] =
                core::array::from_fn(|j| self.column((c0 + j).min(last_column)));
            let valid_columns = (columns.end - c0).min(C);
            for r0 in (0..rows).step_by(R) {
                let ws: [&[W]; R] = core::array::from_fn(|i| self.row((r0 + i).min(rows - 1)));
                let out = tile(ws, xs);
                let valid_rows = (rows - r0).min(R);
                for (i, row) in out.iter().enumerate().take(valid_rows) {
                    for (j, &v) in row.iter().enumerate().take(valid_columns) {
                        let at = (c0 + j)
                            .saturating_mul(self.y_stride)
                            .saturating_add(r0 + i);
                        if let Some(out) = y.get_mut(at) {
                            *out = v;
                        }
                    }
                }
            }
        }
    }
}

/// A level's matmul driver for one tile kind: `$rows` × `$wide` tiles, the columns left in one
/// tile of `$narrow` (if at most that many are left) or one padded wide tile.
macro_rules! driver {
    ($features:literal, $name:ident, $w:ty, $tile:ident $(:: <$t:ty>)?, $shape:ident) => {
        #[target_feature(enable = $features)]
        fn $name(w: &[$w], row_blocks: usize, x: &[BlockQ8K], n: usize, y: &mut [f32], y_stride: usize) {
            let Some(m) = Problem::new(w, row_blocks, x, n, y_stride) else {
                return;
            };
            let rest = m.n % $shape.1;
            let wide = if rest > $shape.2 { m.n } else { m.n - rest };
            m.tiles::<{ $shape.0 }, { $shape.1 }>(0..wide, y, |w, x| {
                $tile::<$($t,)? { $shape.0 }, { $shape.1 }>(w, x)
            });
            m.tiles::<{ $shape.0 }, { $shape.2 }>(wide..m.n, y, |w, x| {
                $tile::<$($t,)? { $shape.0 }, { $shape.2 }>(w, x)
            });
        }
    };
}

/// Tile shapes `(rows, wide columns, narrow columns)`, chosen by instruction counts
/// (docs/kernel-experiments.md): Q4_K / Q5_K NEON.
const MINS_NEON: (usize, usize, usize) = (1, 4, 2);
/// Q4_K / Q5_K `sdot` (four accumulators per output: two rows by two columns).
const MINS_SDOT: (usize, usize, usize) = (2, 2, 1);
/// Q6_K NEON.
const Q6_K_NEON: (usize, usize, usize) = (1, 4, 2);

driver!(
    "neon",
    q4_k_neon_tiles,
    BlockQ4K,
    tile_mins_neon::<BlockQ4K>,
    MINS_NEON
);
driver!(
    "neon",
    q5_k_neon_tiles,
    BlockQ5K,
    tile_mins_neon::<BlockQ5K>,
    MINS_NEON
);
driver!("neon", q6_k_neon_tiles, BlockQ6K, tile_q6_k_neon, Q6_K_NEON);
driver!(
    "neon,dotprod",
    q4_k_sdot_tiles,
    BlockQ4K,
    tile_mins_sdot::<BlockQ4K>,
    MINS_SDOT
);
driver!(
    "neon,dotprod",
    q5_k_sdot_tiles,
    BlockQ5K,
    tile_mins_sdot::<BlockQ5K>,
    MINS_SDOT
);

/// The entry points: NEON tiles (the table's, at every level), and `sdot` tiles where the CPU has
/// dotprod (else the NEON tiles, same bits; tested, not in the table).
macro_rules! entry {
    ($doc:literal, $name:ident, $w:ty, $tiles:ident) => {
        #[doc = $doc]
        pub fn $name(
            w: &[$w],
            row_blocks: usize,
            x: &[BlockQ8K],
            n: usize,
            y: &mut [f32],
            y_stride: usize,
        ) {
            // SAFETY: this module is compiled only for targets with NEON (quant/arch).
            unsafe { $tiles(w, row_blocks, x, n, y, y_stride) }
        }
    };
    ($doc:literal, $name:ident, $w:ty, $tiles:ident, $fallback:ident) => {
        #[doc = $doc]
        pub fn $name(
            w: &[$w],
            row_blocks: usize,
            x: &[BlockQ8K],
            n: usize,
            y: &mut [f32],
            y_stride: usize,
        ) {
            if has_dotprod() {
                // SAFETY: the CPU has dotprod (checked just above).
                unsafe { $tiles(w, row_blocks, x, n, y, y_stride) }
            } else {
                $fallback(w, row_blocks, x, n, y, y_stride);
            }
        }
    };
}

entry!(
    "Q4_K matmul, NEON tiles.",
    q4_k_neon,
    BlockQ4K,
    q4_k_neon_tiles
);
entry!(
    "Q5_K matmul, NEON tiles.",
    q5_k_neon,
    BlockQ5K,
    q5_k_neon_tiles
);
entry!(
    "Q6_K matmul, NEON tiles (every level).",
    q6_k_neon,
    BlockQ6K,
    q6_k_neon_tiles
);
entry!(
    "Q4_K matmul, `sdot` tiles.",
    q4_k_dotprod,
    BlockQ4K,
    q4_k_sdot_tiles,
    q4_k_neon
);
entry!(
    "Q5_K matmul, `sdot` tiles.",
    q5_k_dotprod,
    BlockQ5K,
    q5_k_sdot_tiles,
    q5_k_neon
);
