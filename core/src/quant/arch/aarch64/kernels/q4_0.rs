//! Q4_0 × Q8_0 vec_dot: NEON and `sdot` (the `smmla` 2×2 kernel is in `mmla`).

use super::has_dotprod;
use super::ops::{f16_le, load_i8, load_u8, piece, sdot};
use crate::quant::activation::BlockQ8_0;
use crate::quant::legacy::q4_0::BlockQ4_0;
use core::arch::aarch64::*;

/// The 32 signed quants (`q - 8`) of a block: elements 0..16, then 16..32.
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn quants(block: &BlockQ4_0) -> (int8x16_t, int8x16_t) {
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
