//! Q4_0 × Q8_0 vec_dot: NEON, `sdot`, and a 2×2 `smmla` kernel.

use super::ops::{f16_le, load_i8, load_u8, piece, sdot, smmla};
use super::q8_0::{high_halves, low_halves};
use super::{has_dotprod, has_i8mm};
use crate::quant::activation::BlockQ8_0;
use crate::quant::legacy::q4_0::BlockQ4_0;
use core::arch::aarch64::*;

/// The 32 signed quants (`q - 8`) of a block: elements 0..16, then 16..32.
#[inline]
#[target_feature(enable = "neon")]
fn quants(block: &BlockQ4_0) -> (int8x16_t, int8x16_t) {
    let q = load_u8(&block.qs);
    let eight = vdupq_n_s8(8);
    let low = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0f))), eight);
    let high = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8::<4>(q)), eight);
    (low, high)
}

/// [`scalar::vec_dot`](crate::quant::legacy::q4_0::vec_dot) with NEON: per block
/// `sumf += sumi * dx * dy`, serially. The i16 products are at most 2^10, so four of them add up
/// in i16 before one widening sum.
pub fn vec_dot(w: &[BlockQ4_0], x: &[BlockQ8_0]) -> f32 {
    // SAFETY: this module is compiled only for targets with NEON (quant/arch).
    unsafe { vec_dot_neon(w, x) }
}

#[target_feature(enable = "neon")]
fn vec_dot_neon(w: &[BlockQ4_0], x: &[BlockQ8_0]) -> f32 {
    let mut sumf = 0.0f32;
    for (wb, xb) in w.iter().zip(x) {
        let (low, high) = quants(wb);
        let (x0, x1) = (load_i8(piece(&xb.qs, 0)), load_i8(piece(&xb.qs, 1)));
        let mut p = vmull_s8(vget_low_s8(low), vget_low_s8(x0));
        p = vmlal_high_s8(p, low, x0);
        p = vmlal_s8(p, vget_low_s8(high), vget_low_s8(x1));
        p = vmlal_high_s8(p, high, x1);
        let sumi = vaddlvq_s16(p);
        sumf += sumi as f32 * f16_le(wb.d) * f16_le(xb.d);
    }
    sumf
}

#[target_feature(enable = "neon,dotprod")]
fn vec_dot_sdot(w: &[BlockQ4_0], x: &[BlockQ8_0]) -> f32 {
    let mut sumf = 0.0f32;
    for (wb, xb) in w.iter().zip(x) {
        let (low, high) = quants(wb);
        let mut acc = vdupq_n_s32(0);
        acc = sdot(acc, low, load_i8(piece(&xb.qs, 0)));
        acc = sdot(acc, high, load_i8(piece(&xb.qs, 1)));
        let sumi = vaddvq_s32(acc);
        sumf += sumi as f32 * f16_le(wb.d) * f16_le(xb.d);
    }
    sumf
}

/// [`vec_dot`] with `sdot` where the CPU has it (else the NEON kernel).
pub fn vec_dot_dotprod(w: &[BlockQ4_0], x: &[BlockQ8_0]) -> f32 {
    if has_dotprod() {
        // SAFETY: the CPU has dotprod (checked just above).
        unsafe { vec_dot_sdot(w, x) }
    } else {
        vec_dot(w, x)
    }
}

#[cfg_attr(not(test), allow(dead_code))] // used once the table has a 2x2 (matmul) slot
#[target_feature(enable = "neon,i8mm")]
fn vec_dot_2x2_smmla(w: [&[BlockQ4_0]; 2], x: [&[BlockQ8_0]; 2]) -> [[f32; 2]; 2] {
    let mut sumf = vdupq_n_f32(0.0);
    let blocks = w[0].iter().zip(w[1]).zip(x[0].iter().zip(x[1]));
    for ((w0, w1), (x0, x1)) in blocks {
        let ((l0, h0), (l1, h1)) = (quants(w0), quants(w1));
        let (a0, a1) = (load_i8(piece(&x0.qs, 0)), load_i8(piece(&x1.qs, 0)));
        let (b0, b1) = (load_i8(piece(&x0.qs, 1)), load_i8(piece(&x1.qs, 1)));
        let mut acc = vdupq_n_s32(0);
        acc = smmla(acc, low_halves(l0, l1), low_halves(a0, a1));
        acc = smmla(acc, high_halves(l0, l1), high_halves(a0, a1));
        acc = smmla(acc, low_halves(h0, h1), low_halves(b0, b1));
        acc = smmla(acc, high_halves(h0, h1), high_halves(b0, b1));
        let dw = [f16_le(w0.d), f16_le(w0.d), f16_le(w1.d), f16_le(w1.d)];
        let dx = [f16_le(x0.d), f16_le(x1.d), f16_le(x0.d), f16_le(x1.d)];
        // SAFETY: each array holds exactly the four f32 that `ld1` reads.
        let (dw, dx) = unsafe { (vld1q_f32(dw.as_ptr()), vld1q_f32(dx.as_ptr())) };
        // `(sumi * dx) * dy`, the scalar kernel's association.
        sumf = vaddq_f32(sumf, vmulq_f32(vmulq_f32(vcvtq_f32_s32(acc), dw), dx));
    }
    let mut out = [0.0f32; 4];
    super::ops::store_f32(&mut out, sumf);
    [[out[0], out[1]], [out[2], out[3]]]
}

/// Two rows times two columns: `out[r][c]` = `scalar::vec_dot(w[r], x[c])` bit for bit, with
/// `smmla` where the CPU has i8mm. Rows and columns of different lengths take the one-pair kernel.
#[cfg_attr(not(test), allow(dead_code))] // used once the table has a 2x2 (matmul) slot
pub fn vec_dot_2x2(w: [&[BlockQ4_0]; 2], x: [&[BlockQ8_0]; 2]) -> [[f32; 2]; 2] {
    let n = w[0].len();
    if has_i8mm() && w[1].len() == n && x[0].len() == n && x[1].len() == n {
        // SAFETY: the CPU has i8mm (checked just above).
        unsafe { vec_dot_2x2_smmla(w, x) }
    } else {
        let one = |r: usize, c: usize| vec_dot_dotprod(w[r], x[c]);
        [[one(0, 0), one(0, 1)], [one(1, 0), one(1, 1)]]
    }
}
