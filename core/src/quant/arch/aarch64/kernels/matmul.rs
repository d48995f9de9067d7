//! Register-blocked matmul tiles for the 32-value types (the table's `matmul` slot at every
//! AArch64 level): four weight rows × eight activation columns per tile (the last columns in tiles
//! of four or two), each weight block decoded once per tile's columns and each activation block
//! loaded once per four rows.
//!
//! - NEON: per block and column, widening multiplies (`smull`, `sadalp`) give four partial sums
//!   per row; three `addp` fold the four rows' into one vector (lane = row), exact.
//! - `dotprod`: the four rows' weights transposed by 32-bit words once per block; per column,
//!   eight `sdot` by element leave each row's exact sum in its lane (no horizontal sum).
//! - `i8mm`: per block, rows and columns are paired; four `smmla` per row pair and column pair give
//!   their 2×2 integer sums `[r0·c0, r0·c1, r1·c0, r1·c1]`, exact. The scales take that layout too
//!   (`[w0, w0, w1, w1]`, `[x0, x1, x0, x1]`); at the end of the rows `uzp1`/`uzp2` put the outputs
//!   back in column order.
//!
//! Either way each output lane runs its scalar twin's float step, in its order and unfused, once
//! per block, serially over the blocks: the bits of the scalar vec_dot of its column. Rows and
//! columns past the matrix's edge are filled by repeating the last row / column (computed, never
//! stored), so a few tile shapes serve every shape. Instruction counts per output and block, old
//! path against these: docs/kernel-experiments.md.

use super::nibbles::{iq4_nl_weights, mxfp4_weights, q4_1_weights, q5_0_weights, q5_1_weights};
use super::ops::{load_i8, piece, smmla, store_f32};
use super::q4_0::quants as q4_0_weights;
use super::{has_dotprod, has_i8mm};
use crate::quant::activation::{BlockQ8_0, BlockQ8_1};
use crate::quant::iq::iq4_nl::BlockIq4Nl;
use crate::quant::legacy::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1};
use crate::quant::misc::fp4::e8m0_to_f32_half;
use crate::quant::misc::mxfp4::BlockMxfp4;
use crate::quant::OutputColumns;
use core::arch::aarch64::*;
use core::arch::asm;

/// Rows of a tile.
pub(super) const ROWS: usize = 4;

/// Columns of a wide baseline NEON tile.
const NEON_WIDE: usize = 8;

/// Columns of a wide `dotprod` tile.
const SDOT_WIDE: usize = 8;

/// Columns of a wide `i8mm` tile (column pairs).
const SMMLA_WIDE: usize = 8;

/// Four f16 values (little-endian bytes, each anywhere in memory) as f32 lanes: one `ldr` and
/// three `ld1` lane loads, then one `fcvtl`: exact, NaNs quieted with their payload kept, as the
/// scalar `fcvt` of [`super::ops::f16_le`] (tested for every pattern).
#[inline(always)]
pub(super) fn f16x4(h: [&[u8; 2]; 4]) -> float32x4_t {
    let out: float32x4_t;
    // SAFETY: each load reads the two bytes of one of the references (AArch64 loads from normal
    // memory need no alignment); `fcvtl` is Advanced SIMD (this module is compiled only with
    // NEON). Only the named registers are written.
    unsafe {
        asm!(
            "ldr {v:h}, [{p0}]",
            "ld1 {{{v:v}.h}}[1], [{p1}]",
            "ld1 {{{v:v}.h}}[2], [{p2}]",
            "ld1 {{{v:v}.h}}[3], [{p3}]",
            "fcvtl {v:v}.4s, {v:v}.4h",
            p0 = in(reg) h[0].as_ptr(),
            p1 = in(reg) h[1].as_ptr(),
            p2 = in(reg) h[2].as_ptr(),
            p3 = in(reg) h[3].as_ptr(),
            v = out(vreg) out,
            options(pure, readonly, nostack, preserves_flags)
        );
    }
    out
}

/// Four f32 as one vector.
#[inline(always)]
pub(super) fn f32x4(v: [f32; 4]) -> float32x4_t {
    // SAFETY: the array holds exactly the four f32 that `ld1` reads.
    unsafe { vld1q_f32(v.as_ptr()) }
}

/// What the tiles take from a 32-value type: its weights as signed bytes, its activation quants,
/// the scales of four blocks of each side as f32 lanes (`(d, m)` and `(d, s)`; zeros where the
/// type has no min), and its scalar twin's float step on four outputs.
pub trait Tiled: Sized + 'static {
    /// The activation block.
    type X: 'static;
    /// The 32 weights (elements 0..16, 16..32).
    fn weights(&self) -> (int8x16_t, int8x16_t);
    /// The activation quants.
    fn quants(x: &Self::X) -> &[i8; 32];
    /// `(d, m)` of four weight blocks.
    fn w_scales(b: [&Self; 4]) -> (float32x4_t, float32x4_t);
    /// `(d, s)` of four activation blocks.
    fn x_scales(b: [&Self::X; 4]) -> (float32x4_t, float32x4_t);
    /// The scalar twin's float step.
    const ORDER: Order;
}

/// No min: a zero vector beside `d`.
#[inline(always)]
fn d_only(d: float32x4_t) -> (float32x4_t, float32x4_t) {
    (d, f32x4([0.0; 4]))
}

/// The order of a scalar twin's float step, `sumf += term` per block with the block's exact
/// integer sum `sumi` and scales `dw`, `dx` (and the min `m` and activation sum `s`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// `sumi * (dw * dx)` (Q8_0).
    SumiDwDx,
    /// `(sumi * dw) * dx` (Q4_0).
    SumiDwThenDx,
    /// `(dw * dx) * sumi` (Q5_0).
    DwDxThenSumi,
    /// `(dx * dw) * sumi` (IQ4_NL, MXFP4).
    DxDwThenSumi,
    /// `(dw * dx) * sumi + m * s` (Q4_1, Q5_1).
    WithMin,
}

/// `sumf + term`, lane by lane, in `order`, unfused: `s` holds the exact integer sums as f32, `w`
/// the lanes' `(dw, m)`, `x` their `(dx, s)`.
#[inline]
#[target_feature(enable = "neon")]
fn step(
    order: Order,
    sumf: float32x4_t,
    s: float32x4_t,
    w: (float32x4_t, float32x4_t),
    x: (float32x4_t, float32x4_t),
) -> float32x4_t {
    let term = match order {
        Order::SumiDwDx => vmulq_f32(s, vmulq_f32(w.0, x.0)),
        Order::SumiDwThenDx => vmulq_f32(vmulq_f32(s, w.0), x.0),
        Order::DwDxThenSumi => vmulq_f32(vmulq_f32(w.0, x.0), s),
        Order::DxDwThenSumi => vmulq_f32(vmulq_f32(x.0, w.0), s),
        Order::WithMin => vaddq_f32(vmulq_f32(vmulq_f32(w.0, x.0), s), vmulq_f32(w.1, x.1)),
    };
    vaddq_f32(sumf, term)
}

impl Tiled for BlockQ8_0 {
    type X = BlockQ8_0;
    #[inline(always)]
    fn weights(&self) -> (int8x16_t, int8x16_t) {
        (load_i8(piece(&self.qs, 0)), load_i8(piece(&self.qs, 1)))
    }
    #[inline(always)]
    fn quants(x: &BlockQ8_0) -> &[i8; 32] {
        &x.qs
    }
    #[inline(always)]
    fn w_scales(b: [&Self; 4]) -> (float32x4_t, float32x4_t) {
        d_only(f16x4(b.map(|b| &b.d)))
    }
    #[inline(always)]
    fn x_scales(b: [&BlockQ8_0; 4]) -> (float32x4_t, float32x4_t) {
        d_only(f16x4(b.map(|b| &b.d)))
    }
    /// `sumf += sumi * (dw * dx)`.
    const ORDER: Order = Order::SumiDwDx;
}

/// The parts shared by the types dotted with Q8_0 blocks.
macro_rules! against_q8_0 {
    () => {
        type X = BlockQ8_0;
        #[inline(always)]
        fn quants(x: &BlockQ8_0) -> &[i8; 32] {
            &x.qs
        }
        #[inline(always)]
        fn x_scales(b: [&BlockQ8_0; 4]) -> (float32x4_t, float32x4_t) {
            d_only(f16x4(b.map(|b| &b.d)))
        }
    };
}

/// The parts shared by the types dotted with Q8_1 blocks (those with a min).
macro_rules! against_q8_1 {
    () => {
        type X = BlockQ8_1;
        #[inline(always)]
        fn quants(x: &BlockQ8_1) -> &[i8; 32] {
            &x.qs
        }
        #[inline(always)]
        fn w_scales(b: [&Self; 4]) -> (float32x4_t, float32x4_t) {
            (f16x4(b.map(|b| &b.d)), f16x4(b.map(|b| &b.m)))
        }
        #[inline(always)]
        fn x_scales(b: [&BlockQ8_1; 4]) -> (float32x4_t, float32x4_t) {
            (f16x4(b.map(|b| &b.d)), f16x4(b.map(|b| &b.s)))
        }
        /// `sumf += (dw * dx) * sumi + m * s`.
        const ORDER: Order = Order::WithMin;
    };
}

impl Tiled for BlockQ4_0 {
    against_q8_0!();
    #[inline(always)]
    fn weights(&self) -> (int8x16_t, int8x16_t) {
        // SAFETY: this module is compiled only for targets with NEON (quant/arch).
        unsafe { q4_0_weights(self) }
    }
    #[inline(always)]
    fn w_scales(b: [&Self; 4]) -> (float32x4_t, float32x4_t) {
        d_only(f16x4(b.map(|b| &b.d)))
    }
    /// `sumf += (sumi * dw) * dx`.
    const ORDER: Order = Order::SumiDwThenDx;
}

impl Tiled for BlockQ5_0 {
    against_q8_0!();
    #[inline(always)]
    fn weights(&self) -> (int8x16_t, int8x16_t) {
        // SAFETY: this module is compiled only for targets with NEON (quant/arch).
        unsafe { q5_0_weights(self) }
    }
    #[inline(always)]
    fn w_scales(b: [&Self; 4]) -> (float32x4_t, float32x4_t) {
        d_only(f16x4(b.map(|b| &b.d)))
    }
    /// `sumf += (dw * dx) * sumi`.
    const ORDER: Order = Order::DwDxThenSumi;
}

impl Tiled for BlockIq4Nl {
    against_q8_0!();
    #[inline(always)]
    fn weights(&self) -> (int8x16_t, int8x16_t) {
        // SAFETY: this module is compiled only for targets with NEON (quant/arch).
        unsafe { iq4_nl_weights(self) }
    }
    #[inline(always)]
    fn w_scales(b: [&Self; 4]) -> (float32x4_t, float32x4_t) {
        d_only(f16x4(b.map(|b| &b.d)))
    }
    /// `sumf += (dx * dw) * sumi`.
    const ORDER: Order = Order::DxDwThenSumi;
}

impl Tiled for BlockMxfp4 {
    against_q8_0!();
    #[inline(always)]
    fn weights(&self) -> (int8x16_t, int8x16_t) {
        // SAFETY: this module is compiled only for targets with NEON (quant/arch).
        unsafe { mxfp4_weights(self) }
    }
    #[inline(always)]
    fn w_scales(b: [&Self; 4]) -> (float32x4_t, float32x4_t) {
        d_only(f32x4(b.map(|b| e8m0_to_f32_half(b.e))))
    }
    /// `sumf += (dx * e8m0_half(e)) * sumi`.
    const ORDER: Order = Order::DxDwThenSumi;
}

impl Tiled for BlockQ4_1 {
    against_q8_1!();
    #[inline(always)]
    fn weights(&self) -> (int8x16_t, int8x16_t) {
        // SAFETY: this module is compiled only for targets with NEON (quant/arch).
        unsafe { q4_1_weights(self) }
    }
}

impl Tiled for BlockQ5_1 {
    against_q8_1!();
    #[inline(always)]
    fn weights(&self) -> (int8x16_t, int8x16_t) {
        // SAFETY: this module is compiled only for targets with NEON (quant/arch).
        unsafe { q5_1_weights(self) }
    }
}

/// The activation quants of a block as two vectors.
#[inline(always)]
fn activation<W: Tiled>(x: &W::X) -> (int8x16_t, int8x16_t) {
    let q = W::quants(x);
    (load_i8(piece(q, 0)), load_i8(piece(q, 1)))
}

/// `f` on the blocks `k` of the `R` rows and `C` columns, for every `k` below the shortest
/// slice's length. Each slice is first cut to exactly that length (a `get` that cannot fail), so
/// that indexing below it needs no bounds check per block.
#[inline(always)]
pub(super) fn each_block<W, X, const R: usize, const C: usize>(
    w: [&[W]; R],
    x: [&[X]; C],
    mut f: impl FnMut([&W; R], [&X; C]),
) {
    let rows = w.iter().fold(usize::MAX, |l, s| l.min(s.len()));
    let blocks = x.iter().fold(rows, |l, s| l.min(s.len()));
    let mut w_cut: [&[W]; R] = [&[]; R];
    let mut x_cut: [&[X]; C] = [&[]; C];
    for (cut, s) in w_cut.iter_mut().zip(w) {
        let Some(s) = s.get(..blocks) else { return };
        *cut = s;
    }
    for (cut, s) in x_cut.iter_mut().zip(x) {
        let Some(s) = s.get(..blocks) else { return };
        *cut = s;
    }
    for k in 0..blocks {
        let (wb, xb) = (w_cut.map(|s| &s[k]), x_cut.map(|s| &s[k]));
        f(wb, xb);
    }
}

/// `sdot` by element: each i32 lane `i` of `acc` plus the dot product of bytes `4i..4i + 4` of
/// `a` with bytes `4L..4L + 4` of `b`.
#[inline]
#[target_feature(enable = "neon,dotprod")]
pub(super) fn sdot_lane<const L: i32>(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let mut acc = acc;
    // SAFETY: `sdot` only reads and writes the named registers; the enclosing function requires
    // the dotprod feature, so the instruction exists.
    unsafe {
        asm!(
            "sdot {acc:v}.4s, {a:v}.16b, {b:v}.4b[{l}]",
            acc = inout(vreg) acc,
            a = in(vreg) a,
            b = in(vreg) b,
            l = const L,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    acc
}

/// Four rows of 16 bytes transposed by 32-bit words: vector `j` holds word `j` of row `i` in lane
/// `i`.
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn transpose_words(r: [int8x16_t; ROWS]) -> [int8x16_t; 4] {
    let [r0, r1, r2, r3] = r.map(|v| vreinterpretq_s32_s8(v));
    let (t0, t1) = (vtrn1q_s32(r0, r1), vtrn2q_s32(r0, r1));
    let (t2, t3) = (vtrn1q_s32(r2, r3), vtrn2q_s32(r2, r3));
    let [t0, t1, t2, t3] = [t0, t1, t2, t3].map(|v| vreinterpretq_s64_s32(v));
    [
        vtrn1q_s64(t0, t2),
        vtrn1q_s64(t1, t3),
        vtrn2q_s64(t0, t2),
        vtrn2q_s64(t1, t3),
    ]
    .map(|v| vreinterpretq_s8_s64(v))
}

/// Broadcast lane `c % 4` of `v`.
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn lane(v: float32x4_t, c: usize) -> float32x4_t {
    match c % 4 {
        0 => vdupq_laneq_f32::<0>(v),
        1 => vdupq_laneq_f32::<1>(v),
        2 => vdupq_laneq_f32::<2>(v),
        _ => vdupq_laneq_f32::<3>(v),
    }
}

/// Four rows against `C` columns with `sdot` by element: the rows' weights transposed by words
/// once per block, then per column eight `sdot`s leave each row's exact sum in its lane. Returns
/// per column the four rows' outputs as lanes.
#[inline]
#[target_feature(enable = "neon,dotprod")]
fn tile_sdot<W: Tiled, const C: usize>(w: [&[W]; ROWS], x: [&[W::X]; C]) -> [float32x4_t; C] {
    let mut sumf = [vdupq_n_f32(0.0); C];
    each_block(w, x, |wb, xb| {
        let wv = wb.map(W::weights);
        let [t0, t1, t2, t3] = transpose_words(wv.map(|v| v.0));
        let [t4, t5, t6, t7] = transpose_words(wv.map(|v| v.1));
        let ws = W::w_scales(wb);
        // Columns in groups of four for their scales. The groups are written out by a macro:
        // as a loop or a closure called twice, LLVM kept them rolled (sums in memory, the
        // scale lane picked by branches).
        macro_rules! group {
            ($group:expr) => {{
                let group: usize = $group;
                let xg: [&W::X; 4] = core::array::from_fn(|j| xb[(4 * group + j).min(C - 1)]);
                let (dx, sx) = W::x_scales(xg);
                for (j, xb) in xg.iter().enumerate().take(C) {
                    let (x0, x1) = activation::<W>(xb);
                    let mut acc = sdot_lane::<0>(vdupq_n_s32(0), t0, x0);
                    acc = sdot_lane::<1>(acc, t1, x0);
                    acc = sdot_lane::<2>(acc, t2, x0);
                    acc = sdot_lane::<3>(acc, t3, x0);
                    acc = sdot_lane::<0>(acc, t4, x1);
                    acc = sdot_lane::<1>(acc, t5, x1);
                    acc = sdot_lane::<2>(acc, t6, x1);
                    acc = sdot_lane::<3>(acc, t7, x1);
                    let s = vcvtq_f32_s32(acc);
                    if let Some(sumf) = sumf.get_mut(4 * group + j) {
                        *sumf = step(W::ORDER, *sumf, s, ws, (lane(dx, j), lane(sx, j)));
                    }
                }
            }};
        }
        group!(0);
        if C > 4 {
            group!(1);
        }
    });
    sumf
}

/// `Σ w·x` of a block pair as four i32 partial sums, with widening multiplies: each i16 product
/// (at most 2^14 in magnitude) is pairwise-added into i32 lanes right away, exact for any bytes.
#[inline]
#[target_feature(enable = "neon")]
fn block_lanes(w: (int8x16_t, int8x16_t), x0: int8x16_t, x1: int8x16_t) -> int32x4_t {
    let mut acc = vpaddlq_s16(vmull_s8(vget_low_s8(w.0), vget_low_s8(x0)));
    acc = vpadalq_s16(acc, vmull_high_s8(w.0, x0));
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(w.1), vget_low_s8(x1)));
    vpadalq_s16(acc, vmull_high_s8(w.1, x1))
}

/// Four rows against `C` columns with baseline NEON: per block and column, four partial sums per
/// row from widening multiplies, folded into one vector (lane = row) by three `addp`, exact.
/// Returns per column the four rows' outputs as lanes.
#[inline]
#[target_feature(enable = "neon")]
fn tile_neon<W: Tiled, const C: usize>(w: [&[W]; ROWS], x: [&[W::X]; C]) -> [float32x4_t; C] {
    let mut sumf = [vdupq_n_f32(0.0); C];
    each_block(w, x, |wb, xb| {
        let wv = wb.map(W::weights);
        let ws = W::w_scales(wb);
        // Columns in groups of four for their scales, written out (as in the `sdot` tile).
        macro_rules! group {
            ($group:expr) => {{
                let group: usize = $group;
                let xg: [&W::X; 4] = core::array::from_fn(|j| xb[(4 * group + j).min(C - 1)]);
                let (dx, sx) = W::x_scales(xg);
                for (j, xb) in xg.iter().enumerate().take(C) {
                    let (x0, x1) = activation::<W>(xb);
                    let acc: [int32x4_t; ROWS] = wv.map(|w| block_lanes(w, x0, x1));
                    let sums = vpaddq_s32(vpaddq_s32(acc[0], acc[1]), vpaddq_s32(acc[2], acc[3]));
                    let s = vcvtq_f32_s32(sums);
                    if let Some(sumf) = sumf.get_mut(4 * group + j) {
                        *sumf = step(W::ORDER, *sumf, s, ws, (lane(dx, j), lane(sx, j)));
                    }
                }
            }};
        }
        group!(0);
        if C > 4 {
            group!(1);
        }
    });
    sumf
}

/// Bytes 0..8 of `a` then bytes 0..8 of `b`, and bytes 8..16 of each: the `smmla` operands of
/// the row (or column) pair `a`, `b` over 16 values.
#[inline]
#[target_feature(enable = "neon")]
fn pair_halves(a: int8x16_t, b: int8x16_t) -> [int8x16_t; 2] {
    let (a, b) = (vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b));
    [
        vreinterpretq_s8_s64(vzip1q_s64(a, b)),
        vreinterpretq_s8_s64(vzip2q_s64(a, b)),
    ]
}

/// The four `smmla` operands of a pair of blocks (rows or columns).
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn pair_operands(
    a: (int8x16_t, int8x16_t),
    b: (int8x16_t, int8x16_t),
) -> [int8x16_t; 4] {
    let [p0, p1] = pair_halves(a.0, b.0);
    let [p2, p3] = pair_halves(a.1, b.1);
    [p0, p1, p2, p3]
}

/// Lanes `[v0, v0, v1, v1]` and `[v2, v2, v3, v3]`: a row pair's scales.
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn row_pair_lanes(v: float32x4_t) -> [float32x4_t; 2] {
    [vzip1q_f32(v, v), vzip2q_f32(v, v)]
}

/// Lanes `[v0, v1, v0, v1]` or `[v2, v3, v2, v3]` (`high`): a column pair's scales.
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn column_pair_lanes(v: float32x4_t, high: bool) -> float32x4_t {
    let v = vreinterpretq_f64_f32(v);
    vreinterpretq_f32_f64(if high {
        vdupq_laneq_f64::<1>(v)
    } else {
        vdupq_laneq_f64::<0>(v)
    })
}

/// Four rows against `C` columns (`C` even) with `smmla`: per block, the two row pairs' operands
/// once, then per column pair four `smmla`s per row pair. Returns per column the four rows'
/// outputs as lanes.
#[inline]
#[target_feature(enable = "neon,i8mm")]
fn tile_smmla<W: Tiled, const C: usize>(w: [&[W]; ROWS], x: [&[W::X]; C]) -> [float32x4_t; C] {
    // sumf[q][p]: column pair q, row pair p, lanes [r0·c0, r0·c1, r1·c0, r1·c1].
    let mut sumf = [[vdupq_n_f32(0.0); 2]; C];
    each_block(w, x, |wb, xb| {
        let wv = wb.map(W::weights);
        let a = [pair_operands(wv[0], wv[1]), pair_operands(wv[2], wv[3])];
        let (dw, mw) = W::w_scales(wb);
        let (dw, mw) = (row_pair_lanes(dw), row_pair_lanes(mw));
        // Columns in groups of four for their scales, the groups written out (as in the `sdot`
        // tile).
        macro_rules! group {
            ($group:expr) => {{
                let group: usize = $group;
                let xg: [&W::X; 4] = core::array::from_fn(|j| xb[(4 * group + j).min(C - 1)]);
                let (dx, sx) = W::x_scales(xg);
                for half in 0..(C / 2).min(2) {
                    let b = pair_operands(
                        activation::<W>(xg[2 * half]),
                        activation::<W>(xg[2 * half + 1]),
                    );
                    let high = half == 1;
                    let x_lanes = (column_pair_lanes(dx, high), column_pair_lanes(sx, high));
                    for p in 0..2 {
                        let mut acc = vdupq_n_s32(0);
                        for (&a, &b) in a[p].iter().zip(&b) {
                            acc = smmla(acc, a, b);
                        }
                        let s = vcvtq_f32_s32(acc);
                        let q = 2 * group + half;
                        if let Some(sumf) = sumf.get_mut(q).and_then(|t| t.get_mut(p)) {
                            *sumf = step(W::ORDER, *sumf, s, (dw[p], mw[p]), x_lanes);
                        }
                    }
                }
            }};
        }
        group!(0);
        if C > 4 {
            group!(1);
        }
    });
    // Column 2q: the even lanes of both row pairs; column 2q + 1: the odd ones.
    core::array::from_fn(|c| {
        let [t0, t1] = sumf[c / 2];
        if c % 2 == 0 {
            vuzp1q_f32(t0, t1)
        } else {
            vuzp2q_f32(t0, t1)
        }
    })
}

/// Writes a tile's outputs of column `c` (`rows` valid lanes of `v`) at its rows from `r0`.
#[inline]
#[target_feature(enable = "neon")]
fn store_rows(y: &mut OutputColumns<'_, '_>, c: usize, r0: usize, rows: usize, v: float32x4_t) {
    let mut lanes = [0f32; 4];
    store_f32(&mut lanes, v);
    if rows == ROWS {
        if let Some(out) = y
            .run(c, r0, ROWS)
            .and_then(|o| <&mut [f32; 4]>::try_from(o).ok())
        {
            store_f32(out, v);
            return;
        }
    }
    for (i, &value) in lanes.iter().enumerate().take(rows) {
        if let Some(out) = y.get_mut(c, r0.saturating_add(i)) {
            *out = value;
        }
    }
}

/// A matrix as the tiles see it: `rows` rows of `row_blocks` weight blocks, `n` columns of
/// `column_blocks` activation blocks.
pub(super) struct Problem<'a, W, X> {
    w: &'a [W],
    row_blocks: usize,
    rows: usize,
    x: &'a [X],
    column_blocks: usize,
    n: usize,
}

impl<W, X> Problem<'_, W, X> {
    fn row(&self, r: usize) -> &[W] {
        let start = r.saturating_mul(self.row_blocks);
        let end = start.saturating_add(self.row_blocks);
        self.w.get(start..end).unwrap_or_default()
    }

    fn column(&self, c: usize) -> &[X] {
        let start = c.saturating_mul(self.column_blocks);
        let end = start.saturating_add(self.column_blocks);
        self.x.get(start..end).unwrap_or_default()
    }

    /// The tiles of the columns `c0..c1` in groups of `C`, every row in fours; a group or a four
    /// at the edge repeats its last column or row (computed, never stored). `tile` computes one
    /// tile (per column, the four rows' outputs as lanes).
    #[inline(always)]
    pub(super) fn tiles<const C: usize>(
        &self,
        columns: core::ops::Range<usize>,
        y: &mut OutputColumns<'_, '_>,
        tile: impl Fn([&[W]; ROWS], [&[X]; C]) -> [float32x4_t; C],
    ) {
        let (rows, last_column) = (self.rows, columns.end.saturating_sub(1));
        for c0 in columns.clone().step_by(C) {
            let xs: [&[X]; C] = core::array::from_fn(|j| self.column((c0 + j).min(last_column)));
            let valid = (columns.end - c0).min(C);
            for r0 in (0..rows).step_by(ROWS) {
                let ws: [&[W]; ROWS] = core::array::from_fn(|i| self.row((r0 + i).min(rows - 1)));
                let out = tile(ws, xs);
                for (j, &v) in out.iter().enumerate().take(valid) {
                    // SAFETY: this module is compiled only for targets with NEON (quant/arch).
                    unsafe { store_rows(y, c0 + j, r0, (rows - r0).min(ROWS), v) };
                }
            }
        }
    }
}

/// The matrix as a [`Problem`], `None` when it has no output.
pub(super) fn problem<'a, W, X>(
    w: &'a [W],
    row_blocks: usize,
    x: &'a [X],
    n: usize,
) -> Option<Problem<'a, W, X>> {
    if row_blocks == 0 || n == 0 || w.len() < row_blocks {
        return None;
    }
    Some(Problem {
        w,
        row_blocks,
        rows: w.len() / row_blocks,
        x,
        column_blocks: x.len() / n,
        n,
    })
}

/// How the columns are split between tile widths: the first `.0` columns in wide tiles (a last
/// group of more than four columns padded to a wide one), then the rest (at most four) in
/// four-column tiles if more than two are left, else in two-column ones (`.1`).
pub(super) fn split_columns(n: usize, wide: usize) -> (usize, bool) {
    let rest = n % wide;
    if rest == 0 || rest > 4 {
        (n, false)
    } else {
        (n - rest, rest > 2)
    }
}

/// A level's matmul driver: the problem checked, then the wide tiles and those for the columns
/// left. The closures inherit the function's target features.
macro_rules! level_driver {
    ($features:literal, $name:ident, $tile:ident, $wide:ident) => {
        #[target_feature(enable = $features)]
        fn $name<W: Tiled>(
            w: &[W],
            row_blocks: usize,
            x: &[W::X],
            n: usize,
            y: &mut OutputColumns<'_, '_>,
        ) {
            let Some(m) = problem(w, row_blocks, x, n) else {
                return;
            };
            let (wide, four) = split_columns(m.n, $wide);
            m.tiles::<$wide>(0..wide, y, |w, x| $tile::<W, $wide>(w, x));
            if four {
                m.tiles::<4>(wide..m.n, y, |w, x| $tile::<W, 4>(w, x));
            } else {
                m.tiles::<2>(wide..m.n, y, |w, x| $tile::<W, 2>(w, x));
            }
        }
    };
}

level_driver!("neon", matmul_neon, tile_neon, NEON_WIDE);
level_driver!("neon,dotprod", matmul_sdot, tile_sdot, SDOT_WIDE);
level_driver!("neon,i8mm", matmul_smmla, tile_smmla, SMMLA_WIDE);

/// The NEON level's matmul ([`MatmulFn`](crate::quant::table::MatmulFn)): tiles of widening
/// multiplies.
pub fn neon<W: Tiled>(
    w: &[W],
    row_blocks: usize,
    x: &[W::X],
    n: usize,
    y: &mut OutputColumns<'_, '_>,
) {
    // SAFETY: this module is compiled only for targets with NEON (quant/arch).
    unsafe { matmul_neon(w, row_blocks, x, n, y) }
}

/// The `dotprod` level's matmul: `sdot` tiles where the CPU has dotprod, else [`neon`] (same
/// bits).
pub fn dotprod<W: Tiled>(
    w: &[W],
    row_blocks: usize,
    x: &[W::X],
    n: usize,
    y: &mut OutputColumns<'_, '_>,
) {
    if has_dotprod() {
        // SAFETY: the CPU has dotprod (checked just above).
        unsafe { matmul_sdot(w, row_blocks, x, n, y) }
    } else {
        neon(w, row_blocks, x, n, y);
    }
}

/// The `i8mm` level's matmul: `smmla` tiles where the CPU has i8mm, else [`dotprod`] (same bits).
pub fn i8mm<W: Tiled>(
    w: &[W],
    row_blocks: usize,
    x: &[W::X],
    n: usize,
    y: &mut OutputColumns<'_, '_>,
) {
    if has_i8mm() {
        // SAFETY: the CPU has i8mm (checked just above).
        unsafe { matmul_smmla(w, row_blocks, x, n, y) }
    } else {
        dotprod(w, row_blocks, x, n, y);
    }
}
