//! Q4_K × Q8_K vec_dot with NEON (also the `dotprod` level's kernel: see the module docs of
//! [`aarch64`](super::super) for why `sdot` does not help here).

use super::ops::{f16_le, load_i8, load_u8, piece};
use crate::quant::activation::BlockQ8K;
use crate::quant::k_quants::q4_k::{scales_and_mins, BlockQ4K};
use core::arch::aarch64::*;

/// `Σ bsums[j] · mins[j / 2]` over a super-block, exactly for any bytes (products widen to i32
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

/// Adds one 32-value sub-block's products (`w0`/`x0` values 0..16, `w1`/`x1` 16..32), times its
/// scale (lane `LANE` of `scales`), into the eight i32 lanes (lane = element index mod 8). Each i16
/// lane holds four products of at most 15·128.
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn add_sub_block<const LANE: i32>(
    lanes: &mut (int32x4_t, int32x4_t),
    w: (int8x16_t, int8x16_t),
    x: (int8x16_t, int8x16_t),
    scales: int16x8_t,
) {
    let mut p = vmull_s8(vget_low_s8(w.0), vget_low_s8(x.0));
    p = vmlal_high_s8(p, w.0, x.0);
    p = vmlal_s8(p, vget_low_s8(w.1), vget_low_s8(x.1));
    p = vmlal_high_s8(p, w.1, x.1);
    lanes.0 = vmlal_laneq_s16::<LANE>(lanes.0, vget_low_s16(p), scales);
    lanes.1 = vmlal_high_laneq_s16::<LANE>(lanes.1, p, scales);
}

/// The eight lanes (element index mod 8) of Σ scale · w · x over one super-block, as the scalar
/// `scaled_lane_sums`: sub-block `2p` is the low nibbles of qs bytes `32p..32p+32`, sub-block
/// `2p + 1` their high nibbles.
#[inline]
#[target_feature(enable = "neon")]
fn lane_sums(wb: &BlockQ4K, xb: &BlockQ8K, scales: &[u8; 8]) -> (int32x4_t, int32x4_t) {
    let mut lanes = (vdupq_n_s32(0), vdupq_n_s32(0));
    // SAFETY: `scales` is 8 bytes, exactly what `ld1` reads.
    let s = vreinterpretq_s16_u16(vmovl_u8(unsafe { vld1_u8(scales.as_ptr()) }));
    let mask = vdupq_n_u8(0x0f);
    let low = |q: uint8x16_t| vreinterpretq_s8_u8(vandq_u8(q, mask));
    let high = |q: uint8x16_t| vreinterpretq_s8_u8(vshrq_n_u8::<4>(q));
    let q: [uint8x16_t; 8] = core::array::from_fn(|i| load_u8(piece(&wb.qs, i)));
    let x: [int8x16_t; 16] = core::array::from_fn(|i| load_i8(piece(&xb.qs, i)));
    add_sub_block::<0>(&mut lanes, (low(q[0]), low(q[1])), (x[0], x[1]), s);
    add_sub_block::<1>(&mut lanes, (high(q[0]), high(q[1])), (x[2], x[3]), s);
    add_sub_block::<2>(&mut lanes, (low(q[2]), low(q[3])), (x[4], x[5]), s);
    add_sub_block::<3>(&mut lanes, (high(q[2]), high(q[3])), (x[6], x[7]), s);
    add_sub_block::<4>(&mut lanes, (low(q[4]), low(q[5])), (x[8], x[9]), s);
    add_sub_block::<5>(&mut lanes, (high(q[4]), high(q[5])), (x[10], x[11]), s);
    add_sub_block::<6>(&mut lanes, (low(q[6]), low(q[7])), (x[12], x[13]), s);
    add_sub_block::<7>(&mut lanes, (high(q[6]), high(q[7])), (x[14], x[15]), s);
    lanes
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
    with_mins(
        w,
        x,
        |wb| (wb.d, wb.dmin, &wb.scales),
        |wb, xb, s| lane_sums(wb, xb, s),
    )
}

/// The float steps Q4_K and Q5_K share (`vec_dot_with_mins` in the scalar code), given each
/// block's `d`, `dmin`, packed scales and its eight integer lanes.
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn with_mins<W>(
    w: &[W],
    x: &[BlockQ8K],
    header: impl Fn(&W) -> ([u8; 2], [u8; 2], &[u8; 12]),
    lanes: impl Fn(&W, &BlockQ8K, &[u8; 8]) -> (int32x4_t, int32x4_t),
) -> f32 {
    let mut sums_low = vdupq_n_f32(0.0);
    let mut sums_high = vdupq_n_f32(0.0);
    let mut sumf = 0.0f32;
    for (wb, xb) in w.iter().zip(x) {
        let (d, dmin, packed) = header(wb);
        let (scales, mins) = scales_and_mins(packed);
        let sumi = min_correction(xb, &mins);
        let (low, high) = lanes(wb, xb, &scales);
        let d = vdupq_n_f32(f16_le(d) * xb.scale());
        sums_low = vaddq_f32(sums_low, vmulq_f32(d, vcvtq_f32_s32(low)));
        sums_high = vaddq_f32(sums_high, vmulq_f32(d, vcvtq_f32_s32(high)));
        let dmin = f16_le(dmin) * xb.scale();
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
