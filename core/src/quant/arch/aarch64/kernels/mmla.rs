//! Two weight rows × two activation columns with i8mm's `smmla` (the table's `vec_dot_2x2` slot,
//! used by matmul), for the 32-value types against Q8_0 / Q8_1.
//!
//! Per block pair, four `smmla`s (one per 8 values) give the four integer sums `[w0·x0, w0·x1,
//! w1·x0, w1·x1]` in the lanes of one vector, exactly. Each output then takes its scalar twin's
//! float step, in the twin's order and unfused; the four outputs are independent, so they share the
//! vector lanes with the scales laid out `[w0, w0, w1, w1]` and `[x0, x1, x0, x1]`.

use super::has_i8mm;
use super::nibbles::{iq4_nl_weights, mxfp4_weights, q4_1_weights, q5_0_weights, q5_1_weights};
use super::ops::{f16_le, load_i8, piece, smmla, store_f32};
use super::q4_0::quants as q4_0_weights;
use super::{nibbles, q4_0, q8_0};
use crate::quant::activation::{BlockQ8_0, BlockQ8_1};
use crate::quant::iq::iq4_nl::BlockIq4Nl;
use crate::quant::legacy::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1};
use crate::quant::misc::fp4::e8m0_to_f32_half;
use crate::quant::misc::mxfp4::BlockMxfp4;
use core::arch::aarch64::*;

/// Bytes 0..8 of `a` then bytes 0..8 of `b`.
#[inline]
#[target_feature(enable = "neon")]
fn low_halves(a: int8x16_t, b: int8x16_t) -> int8x16_t {
    vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)))
}

/// Bytes 8..16 of `a` then bytes 8..16 of `b`.
#[inline]
#[target_feature(enable = "neon")]
fn high_halves(a: int8x16_t, b: int8x16_t) -> int8x16_t {
    vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)))
}

/// The four integer sums of one block pair: weights `w0`, `w1` (elements 0..16, 16..32) against
/// the activation quants `x0`, `x1`, lanes `[w0·x0, w0·x1, w1·x0, w1·x1]`.
#[inline]
#[target_feature(enable = "neon,i8mm")]
fn block_sums(
    w0: (int8x16_t, int8x16_t),
    w1: (int8x16_t, int8x16_t),
    x0: &[i8; 32],
    x1: &[i8; 32],
) -> float32x4_t {
    let (a0, a1) = (load_i8(piece(x0, 0)), load_i8(piece(x1, 0)));
    let (b0, b1) = (load_i8(piece(x0, 1)), load_i8(piece(x1, 1)));
    let mut acc = vdupq_n_s32(0);
    acc = smmla(acc, low_halves(w0.0, w1.0), low_halves(a0, a1));
    acc = smmla(acc, high_halves(w0.0, w1.0), high_halves(a0, a1));
    acc = smmla(acc, low_halves(w0.1, w1.1), low_halves(b0, b1));
    acc = smmla(acc, high_halves(w0.1, w1.1), high_halves(b0, b1));
    vcvtq_f32_s32(acc)
}

/// Per-output scales: `[w0, w0, w1, w1]` and `[x0, x1, x0, x1]`.
#[inline]
#[target_feature(enable = "neon")]
fn lanes(w: [f32; 2], x: [f32; 2]) -> (float32x4_t, float32x4_t) {
    let (w, x) = ([w[0], w[0], w[1], w[1]], [x[0], x[1], x[0], x[1]]);
    // SAFETY: each array holds exactly the four f32 that `ld1` reads.
    unsafe { (vld1q_f32(w.as_ptr()), vld1q_f32(x.as_ptr())) }
}

/// Q8_0: `sumf += sumi * (dw * dx)`.
#[inline]
#[target_feature(enable = "neon")]
fn q8_0_step(
    sumf: float32x4_t,
    w: [&BlockQ8_0; 2],
    x: [&BlockQ8_0; 2],
    s: float32x4_t,
) -> float32x4_t {
    let (dw, dx) = lanes(w.map(|b| f16_le(b.d)), x.map(|b| f16_le(b.d)));
    vaddq_f32(sumf, vmulq_f32(s, vmulq_f32(dw, dx)))
}

/// Q4_0: `sumf += (sumi * dw) * dx`.
#[inline]
#[target_feature(enable = "neon")]
fn q4_0_step(
    sumf: float32x4_t,
    w: [&BlockQ4_0; 2],
    x: [&BlockQ8_0; 2],
    s: float32x4_t,
) -> float32x4_t {
    let (dw, dx) = lanes(w.map(|b| f16_le(b.d)), x.map(|b| f16_le(b.d)));
    vaddq_f32(sumf, vmulq_f32(vmulq_f32(s, dw), dx))
}

/// Q5_0: `sumf += (dw * dx) * sumi`.
#[inline]
#[target_feature(enable = "neon")]
fn q5_0_step(
    sumf: float32x4_t,
    w: [&BlockQ5_0; 2],
    x: [&BlockQ8_0; 2],
    s: float32x4_t,
) -> float32x4_t {
    let (dw, dx) = lanes(w.map(|b| f16_le(b.d)), x.map(|b| f16_le(b.d)));
    vaddq_f32(sumf, vmulq_f32(vmulq_f32(dw, dx), s))
}

/// IQ4_NL: `sumf += (dx * dw) * sumi`.
#[inline]
#[target_feature(enable = "neon")]
fn iq4_nl_step(
    sumf: float32x4_t,
    w: [&BlockIq4Nl; 2],
    x: [&BlockQ8_0; 2],
    s: float32x4_t,
) -> float32x4_t {
    let (dw, dx) = lanes(w.map(|b| f16_le(b.d)), x.map(|b| f16_le(b.d)));
    vaddq_f32(sumf, vmulq_f32(vmulq_f32(dx, dw), s))
}

/// MXFP4: `sumf += (dx * e8m0_half(e)) * sumi`.
#[inline]
#[target_feature(enable = "neon")]
fn mxfp4_step(
    sumf: float32x4_t,
    w: [&BlockMxfp4; 2],
    x: [&BlockQ8_0; 2],
    s: float32x4_t,
) -> float32x4_t {
    let (dw, dx) = lanes(w.map(|b| e8m0_to_f32_half(b.e)), x.map(|b| f16_le(b.d)));
    vaddq_f32(sumf, vmulq_f32(vmulq_f32(dx, dw), s))
}

/// The scale and min of Q4_1 / Q5_1 blocks.
trait WithMin {
    fn d_m(&self) -> ([u8; 2], [u8; 2]);
}
impl WithMin for BlockQ4_1 {
    fn d_m(&self) -> ([u8; 2], [u8; 2]) {
        (self.d, self.m)
    }
}
impl WithMin for BlockQ5_1 {
    fn d_m(&self) -> ([u8; 2], [u8; 2]) {
        (self.d, self.m)
    }
}

/// Q4_1 / Q5_1: `sumf += (dw * dx) * sumi + m * s`.
#[inline]
#[target_feature(enable = "neon")]
fn with_min_step<W: WithMin>(
    sumf: float32x4_t,
    w: [&W; 2],
    x: [&BlockQ8_1; 2],
    s: float32x4_t,
) -> float32x4_t {
    let (dw, dx) = lanes(w.map(|b| f16_le(b.d_m().0)), x.map(|b| f16_le(b.d)));
    let (m, xs) = lanes(w.map(|b| f16_le(b.d_m().1)), x.map(|b| f16_le(b.s)));
    let scaled = vmulq_f32(vmulq_f32(dw, dx), s);
    vaddq_f32(sumf, vaddq_f32(scaled, vmulq_f32(m, xs)))
}

/// Defines a type's `smmla` 2×2 kernel and its safe entry point, which falls back to four calls of
/// the one-pair kernel without i8mm or when the four rows differ in length.
macro_rules! two_by_two {
    ($W:ty, $X:ty, $weights:path, $step:path, $smmla:ident, $public:ident, $one:path) => {
        #[target_feature(enable = "neon,i8mm")]
        fn $smmla(w0: &[$W], w1: &[$W], x0: &[$X], x1: &[$X]) -> [f32; 4] {
            let mut sumf = vdupq_n_f32(0.0);
            for ((a, b), (c, d)) in w0.iter().zip(w1).zip(x0.iter().zip(x1)) {
                let s = block_sums($weights(a), $weights(b), &c.qs, &d.qs);
                sumf = $step(sumf, [a, b], [c, d], s);
            }
            let mut out = [0.0f32; 4];
            store_f32(&mut out, sumf);
            out
        }

        /// `[w0·x0, w0·x1, w1·x0, w1·x1]`, each with the scalar vec_dot's bits; `smmla` where
        /// the CPU has i8mm.
        pub fn $public(w0: &[$W], w1: &[$W], x0: &[$X], x1: &[$X]) -> [f32; 4] {
            let n = w0.len();
            if has_i8mm() && w1.len() == n && x0.len() == n && x1.len() == n {
                // SAFETY: the CPU has i8mm (checked just above).
                unsafe { $smmla(w0, w1, x0, x1) }
            } else {
                [$one(w0, x0), $one(w0, x1), $one(w1, x0), $one(w1, x1)]
            }
        }
    };
}

/// The Q8_0 weights as two vectors.
#[inline]
#[target_feature(enable = "neon")]
fn q8_0_weights(b: &BlockQ8_0) -> (int8x16_t, int8x16_t) {
    (load_i8(piece(&b.qs, 0)), load_i8(piece(&b.qs, 1)))
}

#[rustfmt::skip]
two_by_two!(BlockQ8_0, BlockQ8_0, q8_0_weights, q8_0_step, q8_0_smmla, q8_0_2x2,
    q8_0::vec_dot_dotprod);
#[rustfmt::skip]
two_by_two!(BlockQ4_0, BlockQ8_0, q4_0_weights, q4_0_step, q4_0_smmla, q4_0_2x2,
    q4_0::vec_dot_dotprod);
#[rustfmt::skip]
two_by_two!(BlockQ4_1, BlockQ8_1, q4_1_weights, with_min_step, q4_1_smmla, q4_1_2x2,
    nibbles::vec_dot_q4_1_dotprod);
#[rustfmt::skip]
two_by_two!(BlockQ5_0, BlockQ8_0, q5_0_weights, q5_0_step, q5_0_smmla, q5_0_2x2,
    nibbles::vec_dot_q5_0_dotprod);
#[rustfmt::skip]
two_by_two!(BlockQ5_1, BlockQ8_1, q5_1_weights, with_min_step, q5_1_smmla, q5_1_2x2,
    nibbles::vec_dot_q5_1_dotprod);
#[rustfmt::skip]
two_by_two!(BlockIq4Nl, BlockQ8_0, iq4_nl_weights, iq4_nl_step, iq4_nl_smmla, iq4_nl_2x2,
    nibbles::vec_dot_iq4_nl_dotprod);
#[rustfmt::skip]
two_by_two!(BlockMxfp4, BlockQ8_0, mxfp4_weights, mxfp4_step, mxfp4_smmla, mxfp4_2x2,
    nibbles::vec_dot_mxfp4_dotprod);
