//! Q6_K × Q8_K vec_dot with NEON (also the `dotprod` level's kernel: see the module docs of
//! [`aarch64`](super) for why `sdot` does not help here).

use super::ops::{f16_le, load_i8, load_u8, piece};
use super::q4_k::add_lanes;
use crate::quant::activation::BlockQ8K;
use crate::quant::k_quants::q6_k::BlockQ6K;
use core::arch::aarch64::*;

/// The signed quants (`q - 32`) of one half (128 values) of a super-block, as 8 vectors of 16
/// values in element order. `sli`/`sri` merge the 4 low and 2 high bits in two instructions.
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn half_quants(block: &BlockQ6K, half: usize) -> [int8x16_t; 8] {
    let thirty_two = vdupq_n_s8(32);
    let three = vdupq_n_u8(3);
    let bits_4_5 = vdupq_n_u8(0x30);
    let mut out = [vdupq_n_s8(0); 8];
    for i in 0..2 {
        let a = load_u8(piece(&block.ql, 4 * half + i));
        let b = load_u8(piece(&block.ql, 4 * half + 2 + i));
        let h = load_u8(piece(&block.qh, 2 * half + i));
        // Values l, l + 32, l + 64, l + 96 of the half (l = 16 i ..): low bits from a / b (low
        // nibble, then high nibble), high bits from h bits 0-1, 2-3, 4-5, 6-7.
        let q0 = vsliq_n_u8::<4>(a, vandq_u8(h, three));
        let q1 = vsliq_n_u8::<4>(b, vandq_u8(vshrq_n_u8::<2>(h), three));
        let q2 = vsriq_n_u8::<4>(vandq_u8(h, bits_4_5), a);
        let q3 = vsriq_n_u8::<4>(vshrq_n_u8::<2>(h), b);
        for (k, q) in [q0, q1, q2, q3].into_iter().enumerate() {
            out[2 * k + i] = vsubq_s8(vreinterpretq_s8_u8(q), thirty_two);
        }
    }
    out
}

/// [`scalar::vec_dot`](crate::quant::k_quants::q6_k::vec_dot) with NEON. Each 16-value
/// sub-block's products (at most 32·128, two per i16 lane) land in lane `e mod 8`, then widen
/// times the sub-block's scale; per super-block `sums[l] += d * lane[l]`, and the lanes are added
/// in order at the end.
pub fn vec_dot(w: &[BlockQ6K], x: &[BlockQ8K]) -> f32 {
    // SAFETY: this module is compiled only for targets with NEON (quant/arch).
    unsafe { vec_dot_neon(w, x) }
}

#[target_feature(enable = "neon")]
fn vec_dot_neon(w: &[BlockQ6K], x: &[BlockQ8K]) -> f32 {
    let mut sums_low = vdupq_n_f32(0.0);
    let mut sums_high = vdupq_n_f32(0.0);
    for (wb, xb) in w.iter().zip(x) {
        let mut low = vdupq_n_s32(0);
        let mut high = vdupq_n_s32(0);
        for half in 0..2 {
            for (i, q) in half_quants(wb, half).into_iter().enumerate() {
                let sub = 8 * half + i;
                let xs = load_i8(piece(&xb.qs, sub));
                let mut p = vmull_s8(vget_low_s8(q), vget_low_s8(xs));
                p = vmlal_high_s8(p, q, xs);
                let scale = wb.scales[sub] as i16;
                low = vmlal_n_s16(low, vget_low_s16(p), scale);
                high = vmlal_high_n_s16(high, p, scale);
            }
        }
        let d = vdupq_n_f32(f16_le(wb.d) * xb.scale());
        sums_low = vaddq_f32(sums_low, vmulq_f32(d, vcvtq_f32_s32(low)));
        sums_high = vaddq_f32(sums_high, vmulq_f32(d, vcvtq_f32_s32(high)));
    }
    add_lanes(0.0, sums_low, sums_high)
}
