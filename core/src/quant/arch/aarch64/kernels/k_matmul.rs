//! Register-blocked matmul tiles for the K-quants Q4_K, Q5_K, Q6_K, Q3_K and Q2_K (the table's
//! `matmul` slot: the NEON tiles at every AArch64 level, Q2_K's `sdot` tiles at `dotprod` and
//! `i8mm`): one weight row × four activation columns per tile (the last columns in a tile of three
//! or two, a last single column by the vec_dot), each weight super-block decoded once per tile
//! (nibbles split, fifth / high bits merged, 6-bit scales and mins unpacked, `d` converted) and
//! used for all its columns.
//!
//! The scalar twins of Q4_K, Q5_K, Q6_K and Q3_K keep eight i32 lanes per super-block (lane =
//! element index mod 8, each sub-block's products times its scale), then
//! `sums[l] += (d · d_x) · lane[l]` in float, and the eight sums added in lane order at the end
//! (Q4_K / Q5_K: `sumf -= (dmin · d_x) · Σ bsums·mins` per super-block first). The tiles keep
//! exactly those lanes per output with the vec_dot kernels' widening multiplies (`smull`/`smlal`
//! into i16, then `smlal` by the sub-block's scale lane into i32), so every output is its column's
//! scalar vec_dot, bit for bit. Q2_K's twin keeps one integer total (no lanes): its tiles are the
//! NEON and `sdot` vec_dots' integer forms with the decode shared.
//!
//! Why the lane types have no `sdot` tile, and why one row (instruction counts:
//! docs/kernel-experiments.md): an `sdot` form was built and tested bit-exact (both operands of a
//! 32-value sub-block reordered by `tbl` so that each 32-bit word holds one lane's four elements,
//! the scales applied by summation by parts to running `sdot` sums) but executed more instructions
//! than the NEON tile, the reordering of every column in every tile eating what `sdot` saves;
//! `smmla` adds eight consecutive bytes, more than a sub-block's four (Q6_K, Q3_K: two) elements
//! per lane. Two-row tiles spilled.

use super::has_dotprod;
use super::matmul::each_block;
use super::ops::{f16_le, load_i8, load_u8, piece, sdot};
use super::q2_k::{
    add_scaled as q2_k_add_scaled, half_quants as q2_k_half_quants, mins_sum as q2_k_mins_sum,
    step as q2_k_step, times_scale as q2_k_times_scale,
};
use super::q3_k::{half_quants as q3_k_half_quants, scales as q3_k_scales};
use super::q4_k::{add_lanes, add_sub_block as add_sub_block_32};
use super::q5_k::sub_block as q5_k_sub_block;
use super::q6_k::{add_sub_block as add_sub_block_16, half_quants as q6_k_half_quants};
use crate::quant::activation::BlockQ8K;
use crate::quant::k_quants::q2_k::BlockQ2K;
use crate::quant::k_quants::q3_k::BlockQ3K;
use crate::quant::k_quants::q4_k::{scales_and_mins, BlockQ4K};
use crate::quant::k_quants::q5_k::BlockQ5K;
use crate::quant::k_quants::q6_k::BlockQ6K;
use crate::quant::OutputColumns;
use core::arch::aarch64::*;

/// The K-quants with eight 32-value sub-blocks and 6-bit scales and mins (Q4_K, Q5_K).
pub trait WithMins: Sized + 'static {
    /// `d`, `dmin` and the packed scales and mins.
    fn header(&self) -> ([u8; 2], [u8; 2], &[u8; 12]);
    /// The quants (unsigned, below 32) of sub-block `j`: values 0..16 and 16..32.
    fn sub_block(&self, j: usize) -> (int8x16_t, int8x16_t);
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

/// The K-quants with sixteen 16-value sub-blocks, signed quants and i8 scales, and no mins
/// (Q6_K, Q3_K): the same lanes and float steps.
pub trait Signed16: Sized + 'static {
    /// `d`.
    fn d(&self) -> [u8; 2];
    /// The sixteen sub-block scales.
    fn scales(&self) -> int8x16_t;
    /// The signed quants of half `half` (128 values) as eight vectors of 16, in element order.
    fn half_quants(&self, half: usize) -> [int8x16_t; 8];
}

impl Signed16 for BlockQ6K {
    #[inline(always)]
    fn d(&self) -> [u8; 2] {
        self.d
    }
    #[inline(always)]
    fn scales(&self) -> int8x16_t {
        load_i8(&self.scales)
    }
    #[inline(always)]
    fn half_quants(&self, half: usize) -> [int8x16_t; 8] {
        // SAFETY: this module is compiled only for targets with NEON (quant/arch).
        unsafe { q6_k_half_quants(self, half) }
    }
}

impl Signed16 for BlockQ3K {
    #[inline(always)]
    fn d(&self) -> [u8; 2] {
        self.d
    }
    #[inline(always)]
    fn scales(&self) -> int8x16_t {
        // SAFETY: this module is compiled only for targets with NEON (quant/arch).
        unsafe { q3_k_scales(self) }
    }
    #[inline(always)]
    fn half_quants(&self, half: usize) -> [int8x16_t; 8] {
        // SAFETY: this module is compiled only for targets with NEON (quant/arch).
        unsafe { q3_k_half_quants(self, half) }
    }
}

/// `R` rows of a [`Signed16`] type (Q6_K, Q3_K) against `C` columns with widening multiplies: per
/// half super-block each row's quants decoded once, per 16-value sub-block each column's quants
/// once, then the products of every pair.
#[inline]
#[target_feature(enable = "neon")]
fn tile_signed16_neon<W: Signed16, const R: usize, const C: usize>(
    w: [&[W]; R],
    x: [&[BlockQ8K]; C],
) -> [[f32; C]; R] {
    let mut acc = [[acc_zero(); C]; R];
    each_block(w, x, |wb, xb| {
        let d = each(wb, 0.0, |b| f16_le(b.d()));
        let scales = each(wb, vdupq_n_s8(0), |b| b.scales());
        let mut lanes = [[lanes_zero(); C]; R];
        macro_rules! half {
            ($half:literal) => {{
                let q = each(wb, [vdupq_n_s8(0); 8], |b| b.half_quants($half));
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

/// `R` Q2_K rows against `C` columns with the NEON vec_dot's widening multiplies: each row's
/// quants and scales decoded once per tile, one integer total per output (Q2_K's twin keeps no
/// lanes), then its float step.
#[inline]
#[target_feature(enable = "neon")]
fn tile_q2_k_neon<const R: usize, const C: usize>(
    w: [&[BlockQ2K]; R],
    x: [&[BlockQ8K]; C],
) -> [[f32; C]; R] {
    let mut sumf = [[0f32; C]; R];
    each_block(w, x, |wb, xb| {
        let mut acc = [[vdupq_n_s32(0); C]; R];
        let scales = each(wb, vdupq_n_u8(0), |b| {
            vandq_u8(load_u8(&b.scales), vdupq_n_u8(0x0f))
        });
        macro_rules! half {
            ($half:literal) => {{
                let s = each(scales, vdupq_n_s16(0), |s| {
                    vreinterpretq_s16_u16(if $half == 0 {
                        vmovl_u8(vget_low_u8(s))
                    } else {
                        vmovl_high_u8(s)
                    })
                });
                let q = each(wb, [vdupq_n_u8(0); 8], |b| q2_k_half_quants(b, $half));
                macro_rules! sub {
                    ($i:literal) => {{
                        let xq = each(xb, vdupq_n_s8(0), |b| load_i8(piece(&b.qs, 8 * $half + $i)));
                        for ((acc, q), &s) in acc.iter_mut().zip(&q).zip(&s) {
                            for (acc, &xq) in acc.iter_mut().zip(&xq) {
                                *acc = q2_k_add_scaled::<$i>(*acc, q[$i], xq, s);
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
        q2_k_finish(&mut sumf, &acc, wb, xb);
    });
    sumf
}

/// Each output's float step (the twin's `sumf += dall · isum − dmin · summs`).
#[inline(always)]
fn q2_k_finish<const R: usize, const C: usize>(
    sumf: &mut [[f32; C]; R],
    acc: &[[int32x4_t; C]; R],
    wb: [&BlockQ2K; R],
    xb: [&BlockQ8K; C],
) {
    for ((sumf, acc), wb) in sumf.iter_mut().zip(acc).zip(wb) {
        for ((sumf, &acc), xb) in sumf.iter_mut().zip(acc).zip(xb) {
            // SAFETY: this module is compiled only for targets with NEON (quant/arch).
            let (isum, summs) = unsafe { (vaddvq_s32(acc), q2_k_mins_sum(wb, xb)) };
            *sumf = q2_k_step(*sumf, wb, xb, isum, summs);
        }
    }
}

/// The eight quants of one half times their sub-blocks' scales (at most 3 · 15: bytes), the
/// `sdot` vec_dot's operands.
#[inline]
#[target_feature(enable = "neon")]
fn q2_k_scaled_half(b: &BlockQ2K, half: usize) -> [int8x16_t; 8] {
    let s = vandq_u8(load_u8(&b.scales), vdupq_n_u8(0x0f));
    let q = q2_k_half_quants(b, half);
    if half == 0 {
        [
            q2_k_times_scale::<0>(q[0], s),
            q2_k_times_scale::<1>(q[1], s),
            q2_k_times_scale::<2>(q[2], s),
            q2_k_times_scale::<3>(q[3], s),
            q2_k_times_scale::<4>(q[4], s),
            q2_k_times_scale::<5>(q[5], s),
            q2_k_times_scale::<6>(q[6], s),
            q2_k_times_scale::<7>(q[7], s),
        ]
    } else {
        [
            q2_k_times_scale::<8>(q[0], s),
            q2_k_times_scale::<9>(q[1], s),
            q2_k_times_scale::<10>(q[2], s),
            q2_k_times_scale::<11>(q[3], s),
            q2_k_times_scale::<12>(q[4], s),
            q2_k_times_scale::<13>(q[5], s),
            q2_k_times_scale::<14>(q[6], s),
            q2_k_times_scale::<15>(q[7], s),
        ]
    }
}

/// `R` Q2_K rows against `C` columns with `sdot`: each row's quants times their scales once per
/// tile, then one `sdot` per 16 values and output (the `sdot` vec_dot's integer total).
#[inline]
#[target_feature(enable = "neon,dotprod")]
fn tile_q2_k_sdot<const R: usize, const C: usize>(
    w: [&[BlockQ2K]; R],
    x: [&[BlockQ8K]; C],
) -> [[f32; C]; R] {
    let mut sumf = [[0f32; C]; R];
    each_block(w, x, |wb, xb| {
        let mut acc = [[vdupq_n_s32(0); C]; R];
        macro_rules! half {
            ($half:literal) => {{
                let q = each(wb, [vdupq_n_s8(0); 8], |b| q2_k_scaled_half(b, $half));
                macro_rules! sub {
                    ($i:literal) => {{
                        let xq = each(xb, vdupq_n_s8(0), |b| load_i8(piece(&b.qs, 8 * $half + $i)));
                        for (acc, q) in acc.iter_mut().zip(&q) {
                            for (acc, &xq) in acc.iter_mut().zip(&xq) {
                                *acc = sdot(*acc, q[$i], xq);
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
        q2_k_finish(&mut sumf, &acc, wb, xb);
    });
    sumf
}

/// A matrix as the tiles see it: `rows` rows of `row_blocks` weight super-blocks, `n` columns of
/// as many activation super-blocks.
struct Problem<'a, W> {
    w: &'a [W],
    row_blocks: usize,
    rows: usize,
    x: &'a [BlockQ8K],
    n: usize,
}

impl<'a, W> Problem<'a, W> {
    fn new(w: &'a [W], row_blocks: usize, x: &'a [BlockQ8K], n: usize) -> Option<Self> {
        if row_blocks == 0 || n == 0 || w.len() < row_blocks {
            return None;
        }
        Some(Problem {
            w,
            row_blocks,
            rows: w.len() / row_blocks,
            x,
            n,
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

    /// Column `c` against every row by `vec_dot`.
    fn single_column(
        &self,
        c: usize,
        y: &mut OutputColumns<'_, '_>,
        vec_dot: fn(&[W], &[BlockQ8K]) -> f32,
    ) {
        let x = self.column(c);
        for r in 0..self.rows {
            if let Some(out) = y.get_mut(c, r) {
                *out = vec_dot(self.row(r), x);
            }
        }
    }

    /// The tiles of the columns `columns` in groups of `C`, every row in groups of `R`; a group
    /// at the edge repeats its last column or row (computed, never stored).
    #[inline(always)]
    fn tiles<const R: usize, const C: usize>(
        &self,
        columns: core::ops::Range<usize>,
        y: &mut OutputColumns<'_, '_>,
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
                        if let Some(out) = y.get_mut(c0 + j, r0 + i) {
                            *out = v;
                        }
                    }
                }
            }
        }
    }
}

/// Columns of a wide tile (its rows: one).
const WIDE: usize = 4;

/// A type's matmul: one-row tiles of [`WIDE`] columns, the columns left in one tile of three or
/// two, or a last single column by the vec_dot (a one-column tile shares nothing).
macro_rules! driver {
    ($doc:literal, $name:ident, $tiles:ident, $w:ty, $tile:ident $(:: <$t:ty>)?, $vec_dot:path) => {
        #[target_feature(enable = "neon")]
        fn $tiles(w: &[$w], row_blocks: usize, x: &[BlockQ8K], n: usize, y: &mut OutputColumns<'_, '_>) {
            let Some(m) = Problem::new(w, row_blocks, x, n) else {
                return;
            };
            let wide = m.n - m.n % WIDE;
            m.tiles::<1, WIDE>(0..wide, y, |w, x| $tile::<$($t,)? 1, WIDE>(w, x));
            match m.n - wide {
                3 => m.tiles::<1, 3>(wide..m.n, y, |w, x| $tile::<$($t,)? 1, 3>(w, x)),
                2 => m.tiles::<1, 2>(wide..m.n, y, |w, x| $tile::<$($t,)? 1, 2>(w, x)),
                1 => m.single_column(wide, y, $vec_dot),
                _ => {}
            }
        }

        #[doc = $doc]
        pub fn $name(w: &[$w], row_blocks: usize, x: &[BlockQ8K], n: usize, y: &mut OutputColumns<'_, '_>) {
            // SAFETY: this module is compiled only for targets with NEON (quant/arch).
            unsafe { $tiles(w, row_blocks, x, n, y) }
        }
    };
    (dotprod: $doc:literal, $name:ident, $tiles:ident, $w:ty, $tile:ident, $vec_dot:path, $fallback:path) => {
        #[target_feature(enable = "neon,dotprod")]
        fn $tiles(w: &[$w], row_blocks: usize, x: &[BlockQ8K], n: usize, y: &mut OutputColumns<'_, '_>) {
            let Some(m) = Problem::new(w, row_blocks, x, n) else {
                return;
            };
            let wide = m.n - m.n % WIDE;
            m.tiles::<1, WIDE>(0..wide, y, |w, x| $tile::<1, WIDE>(w, x));
            match m.n - wide {
                3 => m.tiles::<1, 3>(wide..m.n, y, |w, x| $tile::<1, 3>(w, x)),
                2 => m.tiles::<1, 2>(wide..m.n, y, |w, x| $tile::<1, 2>(w, x)),
                1 => m.single_column(wide, y, $vec_dot),
                _ => {}
            }
        }

        #[doc = $doc]
        pub fn $name(w: &[$w], row_blocks: usize, x: &[BlockQ8K], n: usize, y: &mut OutputColumns<'_, '_>) {
            if has_dotprod() {
                // SAFETY: the CPU has dotprod (checked just above).
                unsafe { $tiles(w, row_blocks, x, n, y) }
            } else {
                $fallback(w, row_blocks, x, n, y);
            }
        }
    };
}

driver!(
    "Q4_K's matmul (every AArch64 level).",
    q4_k_neon,
    q4_k_tiles,
    BlockQ4K,
    tile_mins_neon::<BlockQ4K>,
    super::q4_k::vec_dot
);
driver!(
    "Q5_K's matmul (every AArch64 level).",
    q5_k_neon,
    q5_k_tiles,
    BlockQ5K,
    tile_mins_neon::<BlockQ5K>,
    super::q5_k::vec_dot
);
driver!(
    "Q6_K's matmul (every AArch64 level).",
    q6_k_neon,
    q6_k_tiles,
    BlockQ6K,
    tile_signed16_neon::<BlockQ6K>,
    super::q6_k::vec_dot
);
driver!(
    "Q3_K's matmul (every AArch64 level).",
    q3_k_neon,
    q3_k_tiles,
    BlockQ3K,
    tile_signed16_neon::<BlockQ3K>,
    super::q3_k::vec_dot
);
driver!(
    "Q2_K's matmul (NEON).",
    q2_k_neon,
    q2_k_tiles,
    BlockQ2K,
    tile_q2_k_neon,
    super::q2_k::vec_dot
);
driver!(dotprod:
    "Q2_K's matmul with `sdot` where the CPU has it (else [`q2_k_neon`], same bits).",
    q2_k_dotprod,
    q2_k_sdot_tiles,
    BlockQ2K,
    tile_q2_k_sdot,
    super::q2_k::vec_dot_dotprod,
    q2_k_neon
);
