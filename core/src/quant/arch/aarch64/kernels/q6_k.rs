//! Q6_K × Q8_K vec_dot with NEON (also the `dotprod` level's kernel: see the module docs of
//! [`aarch64`](super::super) for why `sdot` does not help here).

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

/// Adds one 16-value sub-block's products, times its scale (lane `LANE` of `scales`), into the
/// eight i32 lanes `low` / `high` (lane = element index mod 8). Each i16 lane holds two products of
/// at most 32·128.
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn add_sub_block<const LANE: i32>(
    lanes: &mut (int32x4_t, int32x4_t),
    q: int8x16_t,
    x: int8x16_t,
    scales: int16x8_t,
) {
    let mut p = vmull_s8(vget_low_s8(q), vget_low_s8(x));
    p = vmlal_high_s8(p, q, x);
    lanes.0 = vmlal_laneq_s16::<LANE>(lanes.0, vget_low_s16(p), scales);
    lanes.1 = vmlal_high_laneq_s16::<LANE>(lanes.1, p, scales);
}

/// [`scalar::vec_dot`](crate::quant::k_quants::q6_k::vec_dot) with NEON. Each 16-value
/// sub-block's products land in lane `e mod 8`, then widen times the sub-block's scale (taken
/// from a vector lane); per super-block `sums[l] += d * lane[l]`, and the lanes are added in order
/// at the end.
pub fn vec_dot(w: &[BlockQ6K], x: &[BlockQ8K]) -> f32 {
    // SAFETY: this module is compiled only for targets with NEON (quant/arch).
    unsafe { vec_dot_neon(w, x) }
}

#[target_feature(enable = "neon")]
fn vec_dot_neon(w: &[BlockQ6K], x: &[BlockQ8K]) -> f32 {
    let mut sums_low = vdupq_n_f32(0.0);
    let mut sums_high = vdupq_n_f32(0.0);
    for (wb, xb) in w.iter().zip(x) {
        let mut lanes = (vdupq_n_s32(0), vdupq_n_s32(0));
        let scales = load_i8(&wb.scales);
        let scale_halves = [vmovl_s8(vget_low_s8(scales)), vmovl_high_s8(scales)];
        for (half, s) in scale_halves.into_iter().enumerate() {
            let q = half_quants(wb, half);
            let xs: [int8x16_t; 8] = core::array::from_fn(|i| load_i8(piece(&xb.qs, 8 * half + i)));
            add_sub_block::<0>(&mut lanes, q[0], xs[0], s);
            add_sub_block::<1>(&mut lanes, q[1], xs[1], s);
            add_sub_block::<2>(&mut lanes, q[2], xs[2], s);
            add_sub_block::<3>(&mut lanes, q[3], xs[3], s);
            add_sub_block::<4>(&mut lanes, q[4], xs[4], s);
            add_sub_block::<5>(&mut lanes, q[5], xs[5], s);
            add_sub_block::<6>(&mut lanes, q[6], xs[6], s);
            add_sub_block::<7>(&mut lanes, q[7], xs[7], s);
        }
        let d = vdupq_n_f32(f16_le(wb.d) * xb.scale());
        sums_low = vaddq_f32(sums_low, vmulq_f32(d, vcvtq_f32_s32(lanes.0)));
        sums_high = vaddq_f32(sums_high, vmulq_f32(d, vcvtq_f32_s32(lanes.1)));
    }
    add_lanes(0.0, sums_low, sums_high)
}
