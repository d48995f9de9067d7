//! Q2_K × Q8_K vec_dot (NEON and `sdot`) and dequantize. ggml's generic Q2_K dot is one integer
//! total per super-block (no float lanes), so any exact integer order works, `sdot` included.

use super::dequantize::store_each;
use super::has_dotprod;
use super::ops::{f16_le, load_i8, load_u8, piece, sdot};
use crate::quant::activation::{BlockQ8K, QK_K};
use crate::quant::k_quants::q2_k::BlockQ2K;
use core::arch::aarch64::*;

/// The quants (0..=3) of one half (128 values) of a super-block: 8 vectors of 16 values, in
/// element order (vector `2j + i` = bits `2j` of the half's `qs` piece `i`).
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn half_quants(block: &BlockQ2K, half: usize) -> [uint8x16_t; 8] {
    let three = vdupq_n_u8(3);
    let mut out = [vdupq_n_u8(0); 8];
    for i in 0..2 {
        let q = load_u8(piece(&block.qs, 2 * half + i));
        out[i] = vandq_u8(q, three);
        out[2 + i] = vandq_u8(vshrq_n_u8::<2>(q), three);
        out[4 + i] = vandq_u8(vshrq_n_u8::<4>(q), three);
        out[6 + i] = vshrq_n_u8::<6>(q);
    }
    out
}

/// `Σ bsums[k] · (scales[k] >> 4)`, exactly.
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn mins_sum(wb: &BlockQ2K, xb: &BlockQ8K) -> i32 {
    let mins = vshrq_n_u8::<4>(load_u8(&wb.scales));
    let m0 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mins)));
    let m1 = vreinterpretq_s16_u16(vmovl_high_u8(mins));
    let bsums: &[u8; 32] = bytemuck::cast_ref(&xb.bsums);
    let b0 = vreinterpretq_s16_u8(load_u8(piece(bsums, 0)));
    let b1 = vreinterpretq_s16_u8(load_u8(piece(bsums, 1)));
    let mut acc = vmull_s16(vget_low_s16(b0), vget_low_s16(m0));
    acc = vmlal_high_s16(acc, b0, m0);
    acc = vmlal_s16(acc, vget_low_s16(b1), vget_low_s16(m1));
    acc = vmlal_high_s16(acc, b1, m1);
    vaddvq_s32(acc)
}

/// The float step of one super-block: `sumf += dall * isum - dmin * summs`.
#[inline(always)]
pub(super) fn step(sumf: f32, wb: &BlockQ2K, xb: &BlockQ8K, isum: i32, summs: i32) -> f32 {
    let dall = xb.scale() * f16_le(wb.d);
    let dmin = xb.scale() * f16_le(wb.dmin);
    sumf + (dall * isum as f32 - dmin * summs as f32)
}

/// One sub-block's products times its scale (lane `LANE` of `scales`), into `acc`.
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn add_scaled<const LANE: i32>(
    acc: int32x4_t,
    q: uint8x16_t,
    x: int8x16_t,
    scales: int16x8_t,
) -> int32x4_t {
    let q = vreinterpretq_s8_u8(q);
    let mut p = vmull_s8(vget_low_s8(q), vget_low_s8(x));
    p = vmlal_high_s8(p, q, x);
    let acc = vmlal_laneq_s16::<LANE>(acc, vget_low_s16(p), scales);
    vmlal_high_laneq_s16::<LANE>(acc, p, scales)
}

#[target_feature(enable = "neon")]
fn vec_dot_neon(w: &[BlockQ2K], x: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (wb, xb) in w.iter().zip(x) {
        let scales = vandq_u8(load_u8(&wb.scales), vdupq_n_u8(0x0f));
        let halves = [
            vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(scales))),
            vreinterpretq_s16_u16(vmovl_high_u8(scales)),
        ];
        let mut acc = vdupq_n_s32(0);
        for (half, s) in halves.into_iter().enumerate() {
            let q = half_quants(wb, half);
            let xs: [int8x16_t; 8] = core::array::from_fn(|i| load_i8(piece(&xb.qs, 8 * half + i)));
            acc = add_scaled::<0>(acc, q[0], xs[0], s);
            acc = add_scaled::<1>(acc, q[1], xs[1], s);
            acc = add_scaled::<2>(acc, q[2], xs[2], s);
            acc = add_scaled::<3>(acc, q[3], xs[3], s);
            acc = add_scaled::<4>(acc, q[4], xs[4], s);
            acc = add_scaled::<5>(acc, q[5], xs[5], s);
            acc = add_scaled::<6>(acc, q[6], xs[6], s);
            acc = add_scaled::<7>(acc, q[7], xs[7], s);
        }
        sumf = step(sumf, wb, xb, vaddvq_s32(acc), mins_sum(wb, xb));
    }
    sumf
}

/// Quants of one sub-block times its scale (lane `LANE`): at most 3 · 15, still an i8.
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn times_scale<const LANE: i32>(q: uint8x16_t, scales: uint8x16_t) -> int8x16_t {
    vreinterpretq_s8_u8(vmulq_u8(q, vdupq_laneq_u8::<LANE>(scales)))
}

#[target_feature(enable = "neon,dotprod")]
fn vec_dot_sdot(w: &[BlockQ2K], x: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (wb, xb) in w.iter().zip(x) {
        let s = vandq_u8(load_u8(&wb.scales), vdupq_n_u8(0x0f));
        let mut acc = vdupq_n_s32(0);
        let xs = |k: usize| load_i8(piece(&xb.qs, k));
        let q = half_quants(wb, 0);
        acc = sdot(acc, times_scale::<0>(q[0], s), xs(0));
        acc = sdot(acc, times_scale::<1>(q[1], s), xs(1));
        acc = sdot(acc, times_scale::<2>(q[2], s), xs(2));
        acc = sdot(acc, times_scale::<3>(q[3], s), xs(3));
        acc = sdot(acc, times_scale::<4>(q[4], s), xs(4));
        acc = sdot(acc, times_scale::<5>(q[5], s), xs(5));
        acc = sdot(acc, times_scale::<6>(q[6], s), xs(6));
        acc = sdot(acc, times_scale::<7>(q[7], s), xs(7));
        let q = half_quants(wb, 1);
        acc = sdot(acc, times_scale::<8>(q[0], s), xs(8));
        acc = sdot(acc, times_scale::<9>(q[1], s), xs(9));
        acc = sdot(acc, times_scale::<10>(q[2], s), xs(10));
        acc = sdot(acc, times_scale::<11>(q[3], s), xs(11));
        acc = sdot(acc, times_scale::<12>(q[4], s), xs(12));
        acc = sdot(acc, times_scale::<13>(q[5], s), xs(13));
        acc = sdot(acc, times_scale::<14>(q[6], s), xs(14));
        acc = sdot(acc, times_scale::<15>(q[7], s), xs(15));
        sumf = step(sumf, wb, xb, vaddvq_s32(acc), mins_sum(wb, xb));
    }
    sumf
}

/// `ggml_vec_dot_q2_K_q8_K_generic` with NEON (same bits).
pub fn vec_dot(w: &[BlockQ2K], x: &[BlockQ8K]) -> f32 {
    // SAFETY: this module is compiled only for targets with NEON (quant/arch).
    unsafe { vec_dot_neon(w, x) }
}

/// [`vec_dot`] with `sdot` where the CPU has it.
pub fn vec_dot_dotprod(w: &[BlockQ2K], x: &[BlockQ8K]) -> f32 {
    if has_dotprod() {
        // SAFETY: the CPU has dotprod (checked just above).
        unsafe { vec_dot_sdot(w, x) }
    } else {
        vec_dot(w, x)
    }
}

/// `dequantize_row_q2_K` for one block: `dl * q - ml` per 16 values (`dl = d * (sc & 15)`,
/// `ml = dmin * (sc >> 4)`), multiply then subtract.
pub fn dequantize(block: &BlockQ2K, out: &mut [f32; QK_K]) {
    // SAFETY: this module is compiled only for targets with NEON (quant/arch).
    unsafe { dequantize_neon(block, out) }
}

#[target_feature(enable = "neon")]
fn dequantize_neon(block: &BlockQ2K, out: &mut [f32; QK_K]) {
    let d = f16_le(block.d);
    let min = f16_le(block.dmin);
    for half in 0..2 {
        let q = half_quants(block, half);
        for (i, &q) in q.iter().enumerate() {
            let k = 8 * half + i;
            let sc = block.scales.get(k).copied().unwrap_or(0);
            let dl = vdupq_n_f32(d * (sc & 0x0f) as f32);
            let ml = vdupq_n_f32(min * (sc >> 4) as f32);
            store_each(out, k, vreinterpretq_s8_u8(q), |q| {
                vsubq_f32(vmulq_f32(dl, q), ml)
            });
        }
    }
}
