//! Q8_0 × Q8_0 vec_dot (NEON, `sdot`), and the Q8_0 activation quantizer.

use super::has_dotprod;
use super::ops::{f16_le, load_i8, piece, sdot};
use crate::quant::activation::{BlockQ8_0, BlockQ8_1, QK8_0 as QK};
use crate::quant::cast::f16_to_le;
use crate::quant::legacy::q8_0 as scalar;
use core::arch::aarch64::*;

/// `sumi` of one block pair with widening multiplies: each i16 product (at most 2^14) is
/// pairwise-added into i32 lanes right away, since two of them may not fit in i16.
#[inline]
#[target_feature(enable = "neon")]
fn block_sum_neon(w: &BlockQ8_0, x: &BlockQ8_0) -> i32 {
    let mut acc = vdupq_n_s32(0);
    for i in 0..2 {
        let a = load_i8(piece(&w.qs, i));
        let b = load_i8(piece(&x.qs, i));
        acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
        acc = vpadalq_s16(acc, vmull_high_s8(a, b));
    }
    vaddvq_s32(acc)
}

/// [`scalar::vec_dot`] with NEON: per block `sumf += sumi * (dx * dy)`, serially.
pub fn vec_dot(w: &[BlockQ8_0], x: &[BlockQ8_0]) -> f32 {
    // SAFETY: this module is compiled only for targets with NEON (quant/arch).
    unsafe { vec_dot_neon(w, x) }
}

#[target_feature(enable = "neon")]
fn vec_dot_neon(w: &[BlockQ8_0], x: &[BlockQ8_0]) -> f32 {
    let mut sumf = 0.0f32;
    for (wb, xb) in w.iter().zip(x) {
        let sumi = block_sum_neon(wb, xb);
        sumf += sumi as f32 * (f16_le(wb.d) * f16_le(xb.d));
    }
    sumf
}

#[target_feature(enable = "neon,dotprod")]
fn vec_dot_sdot(w: &[BlockQ8_0], x: &[BlockQ8_0]) -> f32 {
    let mut sumf = 0.0f32;
    for (wb, xb) in w.iter().zip(x) {
        let mut acc = vdupq_n_s32(0);
        acc = sdot(acc, load_i8(piece(&wb.qs, 0)), load_i8(piece(&xb.qs, 0)));
        acc = sdot(acc, load_i8(piece(&wb.qs, 1)), load_i8(piece(&xb.qs, 1)));
        let sumi = vaddvq_s32(acc);
        sumf += sumi as f32 * (f16_le(wb.d) * f16_le(xb.d));
    }
    sumf
}

/// [`scalar::vec_dot`] with `sdot` where the CPU has it (else [`vec_dot`]).
pub fn vec_dot_dotprod(w: &[BlockQ8_0], x: &[BlockQ8_0]) -> f32 {
    if has_dotprod() {
        // SAFETY: the CPU has dotprod (checked just above).
        unsafe { vec_dot_sdot(w, x) }
    } else {
        vec_dot(w, x)
    }
}

/// Largest |x| of a block without NaN (which the scalar `MAX` chain treats by position), or
/// `None` if the block has a NaN.
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn amax_without_nan(x: &[float32x4_t]) -> Option<f32> {
    let mut max = vdupq_n_f32(0.0);
    let mut ordered = vdupq_n_u32(u32::MAX);
    for &v in x {
        ordered = vandq_u32(ordered, vceqq_f32(v, v));
        max = vmaxq_f32(max, vabsq_f32(v));
    }
    (vminvq_u32(ordered) == u32::MAX).then(|| vmaxvq_f32(max))
}

/// Loads a block of floats into vectors.
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn load_f32<const N: usize, const V: usize>(x: &[f32; N]) -> [float32x4_t; V] {
    const { assert!(N == 4 * V) };
    // SAFETY: vector `i` reads x[4i..4i+4], inside the array since N = 4V.
    core::array::from_fn(|i| unsafe { vld1q_f32(x.as_ptr().add(4 * i)) })
}

/// [`scalar::quantize_block`] (`quantize_row_q8_0_ref`): `roundf` (ties away from zero) is
/// `fcvtas`. Blocks with a NaN, or whose scaled values leave the i32 range (a subnormal `d` whose
/// inverse overflows), take the scalar twin, which follows C's conversion there.
pub fn quantize_block(x: &[f32; QK]) -> BlockQ8_0 {
    // SAFETY: this module is compiled only for targets with NEON (quant/arch).
    match unsafe { scale_and_quants(x) } {
        Some((d, qs)) => BlockQ8_0 {
            d: f16_to_le(d),
            qs,
        },
        None => scalar::quantize_block(x),
    }
}

/// `quantize_row_q8_1_ref` for one block: Q8_0's `d` and quants, plus `s = f16(sum(qs) * d)`.
pub fn quantize_block_q8_1(x: &[f32; QK]) -> BlockQ8_1 {
    // SAFETY: this module is compiled only for targets with NEON (quant/arch).
    match unsafe { scale_and_quants(x) } {
        Some((d, qs)) => {
            let sum: i32 = qs.iter().map(|&q| i32::from(q)).sum();
            BlockQ8_1 {
                d: f16_to_le(d),
                s: f16_to_le(sum as f32 * d),
                qs,
            }
        }
        None => crate::quant::legacy::q8_1::quantize_block(x),
    }
}

/// Q8_0's `d = amax / 127` and quants `roundf(x / d)`, or `None` for the blocks the scalar twin
/// must take.
#[target_feature(enable = "neon")]
fn scale_and_quants(x: &[f32; QK]) -> Option<(f32, [i8; QK])> {
    let v: [float32x4_t; 8] = load_f32(x);
    let amax = amax_without_nan(&v)?;
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let scaled = v.map(|v| vmulq_n_f32(v, id));
    // 2^30: far inside the range where `fcvtas` and C's cast agree; NaN fails the compare.
    let limit = vdupq_n_f32(1_073_741_824.0);
    let mut in_range = vdupq_n_u32(u32::MAX);
    for &s in &scaled {
        in_range = vandq_u32(in_range, vcaltq_f32(s, limit));
    }
    if vminvq_u32(in_range) != u32::MAX {
        return None;
    }
    let q = scaled.map(|s| vcvtaq_s32_f32(s));
    let mut qs = [0i8; QK];
    // (int8_t) of the rounded int keeps its low byte, as `xtn` does.
    for (i, pair) in q.chunks_exact(4).enumerate() {
        let low = vcombine_s16(vmovn_s32(pair[0]), vmovn_s32(pair[1]));
        let high = vcombine_s16(vmovn_s32(pair[2]), vmovn_s32(pair[3]));
        let bytes = vcombine_s8(vmovn_s16(low), vmovn_s16(high));
        // SAFETY: qs[16i..16i+16] is inside the 32-byte array for i < 2.
        unsafe { vst1q_s8(qs.as_mut_ptr().add(16 * i), bytes) };
    }
    Some((d, qs))
}
