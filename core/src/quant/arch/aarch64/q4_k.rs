//! Q4_K × Q8_K vec_dot with NEON (also the `dotprod` level's kernel: see the module docs of
//! [`aarch64`](super) for why `sdot` does not help here).

use super::ops::{f16_le, load_i8, load_u8, piece};
use crate::quant::activation::BlockQ8K;
use crate::quant::k_quants::q4_k::{scales_and_mins, BlockQ4K};
use core::arch::aarch64::*;

/// Σ bsums[j] · mins[j / 2] over a super-block, exactly for any bytes (products widen to i32
/// before they are added).
#[inline]
#[target_feature(enable = "neon")]
fn min_correction(xb: &BlockQ8K, mins: &[u8; 8]) -> i32 {
    // SAFETY: `bsums` is 16 pairs of bytes = 32 bytes; each load reads 16 of them. They are
    // little-endian i16, the native order (quant/arch compiles this module for little-endian only).
    let (b0, b1) = unsafe {
        let p = xb.bsums.as_ptr().cast::<i16>();
        (vld1q_s16(p), vld1q_s16(p.add(8)))
    };
    // SAFETY: `mins` is 8 bytes, exactly what `ld1` reads.
    let mins = vreinterpretq_s16_u16(vmovl_u8(unsafe { vld1_u8(mins.as_ptr()) }));
    // bsums 2j and 2j + 1 share min j.
    let (m0, m1) = (vzip1q_s16(mins, mins), vzip2q_s16(mins, mins));
    let mut products = vmull_s16(vget_low_s16(b0), vget_low_s16(m0));
    products = vmlal_high_s16(products, b0, m0);
    products = vmlal_s16(products, vget_low_s16(b1), vget_low_s16(m1));
    products = vmlal_high_s16(products, b1, m1);
    vaddvq_s32(products)
}

/// The eight lanes (element index mod 8) of Σ scale · w · x over one super-block, as the scalar
/// `scaled_lane_sums`: the products of one 32-value sub-block go into an i16 vector whose lane is
/// already `e mod 8` (four products of at most 15·128 each), then widen times the sub-block scale.
#[inline]
#[target_feature(enable = "neon")]
fn lane_sums(wb: &BlockQ4K, xb: &BlockQ8K, scales: &[u8; 8]) -> (int32x4_t, int32x4_t) {
    let mut low = vdupq_n_s32(0);
    let mut high = vdupq_n_s32(0);
    let mask = vdupq_n_u8(0x0f);
    for pair in 0..4 {
        let q0 = load_u8(piece(&wb.qs, 2 * pair));
        let q1 = load_u8(piece(&wb.qs, 2 * pair + 1));
        let nibbles = [
            (vandq_u8(q0, mask), vandq_u8(q1, mask)),
            (vshrq_n_u8::<4>(q0), vshrq_n_u8::<4>(q1)),
        ];
        for (half, (w0, w1)) in nibbles.into_iter().enumerate() {
            let sub = 2 * pair + half;
            let (w0, w1) = (vreinterpretq_s8_u8(w0), vreinterpretq_s8_u8(w1));
            let x0 = load_i8(piece(&xb.qs, 2 * sub));
            let x1 = load_i8(piece(&xb.qs, 2 * sub + 1));
            let mut p = vmull_s8(vget_low_s8(w0), vget_low_s8(x0));
            p = vmlal_high_s8(p, w0, x0);
            p = vmlal_s8(p, vget_low_s8(w1), vget_low_s8(x1));
            p = vmlal_high_s8(p, w1, x1);
            let scale = scales[sub] as i16;
            low = vmlal_n_s16(low, vget_low_s16(p), scale);
            high = vmlal_high_n_s16(high, p, scale);
        }
    }
    (low, high)
}

/// [`scalar::vec_dot`](crate::quant::k_quants::q4_k::vec_dot) with NEON: per super-block
/// `sums[l] += d * lane[l]` in two f32 vectors, `sumf -= dmin * Σ bsums·mins`, and the eight lane
/// totals added to `sumf` in lane order at the end.
pub fn vec_dot(w: &[BlockQ4K], x: &[BlockQ8K]) -> f32 {
    // SAFETY: this module is compiled only for targets with NEON (quant/arch).
    unsafe { vec_dot_neon(w, x) }
}

#[target_feature(enable = "neon")]
fn vec_dot_neon(w: &[BlockQ4K], x: &[BlockQ8K]) -> f32 {
    let mut sums_low = vdupq_n_f32(0.0);
    let mut sums_high = vdupq_n_f32(0.0);
    let mut sumf = 0.0f32;
    for (wb, xb) in w.iter().zip(x) {
        let (scales, mins) = scales_and_mins(&wb.scales);
        let sumi = min_correction(xb, &mins);
        let (low, high) = lane_sums(wb, xb, &scales);
        let d = vdupq_n_f32(f16_le(wb.d) * xb.scale());
        sums_low = vaddq_f32(sums_low, vmulq_f32(d, vcvtq_f32_s32(low)));
        sums_high = vaddq_f32(sums_high, vmulq_f32(d, vcvtq_f32_s32(high)));
        let dmin = f16_le(wb.dmin) * xb.scale();
        sumf -= dmin * sumi as f32;
    }
    add_lanes(sumf, sums_low, sums_high)
}

/// `sumf + sums[0] + … + sums[7]`, one add at a time (the scalar `add_lanes`).
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn add_lanes(sumf: f32, low: float32x4_t, high: float32x4_t) -> f32 {
    let mut sums = [0.0f32; 8];
    let (first, second) = sums.split_at_mut(4);
    if let (Ok(first), Ok(second)) = (first.try_into(), second.try_into()) {
        super::ops::store_f32(first, low);
        super::ops::store_f32(second, high);
    }
    let mut total = sumf;
    for s in sums {
        total += s;
    }
    total
}
