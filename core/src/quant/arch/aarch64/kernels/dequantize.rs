//! Dequantize kernels with NEON, one block at a time, each the same bits as its scalar twin's
//! `dequantize_block`: every value is one or two unfused f32 operations in the twin's order.

use super::nibbles::{iq4_levels, mxfp4_weights, nibbles, q5_0_weights, q5_1_weights};
use super::ops::{f16_le, load_i8, load_u8, piece};
use super::q6_k::half_quants;
use crate::quant::activation::{BlockQ8_0, QK8_0, QK_K};
use crate::quant::iq::iq4_nl::BlockIq4Nl;
use crate::quant::k_quants::q4_k::{scales_and_mins, BlockQ4K};
use crate::quant::k_quants::q6_k::BlockQ6K;
use crate::quant::legacy::q4_0::BlockQ4_0;
use crate::quant::legacy::{BlockQ4_1, BlockQ5_0, BlockQ5_1};
use crate::quant::misc::fp4::e8m0_to_f32_half;
use crate::quant::misc::mxfp4::BlockMxfp4;
use core::arch::aarch64::*;

/// `dequantize_row_q8_0` for one block: `q * d`.
pub fn q8_0(block: &BlockQ8_0, out: &mut [f32; QK8_0]) {
    // SAFETY: this module is compiled only for targets with NEON (quant/arch).
    unsafe { q8_0_neon(block, out) }
}

#[target_feature(enable = "neon")]
fn q8_0_neon(block: &BlockQ8_0, out: &mut [f32; QK8_0]) {
    let d = vdupq_n_f32(f16_le(block.d));
    for i in 0..2 {
        store_each(out, i, load_i8(piece(&block.qs, i)), |q| vmulq_f32(q, d));
    }
}

/// `dequantize_row_q4_0` for one block: `(q - 8) * d`.
pub fn q4_0(block: &BlockQ4_0, out: &mut [f32; QK8_0]) {
    // SAFETY: this module is compiled only for targets with NEON (quant/arch).
    unsafe { q4_0_neon(block, out) }
}

#[target_feature(enable = "neon")]
fn q4_0_neon(block: &BlockQ4_0, out: &mut [f32; QK8_0]) {
    let d = vdupq_n_f32(f16_le(block.d));
    let q = load_u8(&block.qs);
    let eight = vdupq_n_s8(8);
    let low = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0f))), eight);
    let high = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8::<4>(q)), eight);
    store_each(out, 0, low, |q| vmulq_f32(q, d));
    store_each(out, 1, high, |q| vmulq_f32(q, d));
}

/// `dequantize_row_q4_K` for one block: `d1 * q - m1` per 32 values (`d1 = d * sc`,
/// `m1 = dmin * m`), multiply then subtract.
pub fn q4_k(block: &BlockQ4K, out: &mut [f32; QK_K]) {
    // SAFETY: this module is compiled only for targets with NEON (quant/arch).
    unsafe { q4_k_neon(block, out) }
}

#[target_feature(enable = "neon")]
fn q4_k_neon(block: &BlockQ4K, out: &mut [f32; QK_K]) {
    let d = f16_le(block.d);
    let min = f16_le(block.dmin);
    let (scales, mins) = scales_and_mins(&block.scales);
    let mask = vdupq_n_u8(0x0f);
    for (pair, values) in out.chunks_exact_mut(64).enumerate() {
        let q = [
            load_u8(piece(&block.qs, 2 * pair)),
            load_u8(piece(&block.qs, 2 * pair + 1)),
        ];
        for (half, values) in values.chunks_exact_mut(32).enumerate() {
            let sub = 2 * pair + half;
            let (sc, m) = (scales.get(sub), mins.get(sub));
            let dl = vdupq_n_f32(d * sc.copied().unwrap_or(0) as f32);
            let ml = vdupq_n_f32(min * m.copied().unwrap_or(0) as f32);
            for (q, values) in q.iter().zip(values.chunks_exact_mut(16)) {
                let q = if half == 0 {
                    vandq_u8(*q, mask)
                } else {
                    vshrq_n_u8::<4>(*q)
                };
                // Quants are below 16: their signed and unsigned views agree.
                let quads = widen(vreinterpretq_s8_u8(q));
                store16(values, quads.map(|v| vsubq_f32(vmulq_f32(dl, v), ml)));
            }
        }
    }
}

/// 16 i8 values as four f32 vectors.
#[inline]
#[target_feature(enable = "neon")]
fn widen(q: int8x16_t) -> [float32x4_t; 4] {
    let low = vmovl_s8(vget_low_s8(q));
    let high = vmovl_high_s8(q);
    [
        vcvtq_f32_s32(vmovl_s16(vget_low_s16(low))),
        vcvtq_f32_s32(vmovl_high_s16(low)),
        vcvtq_f32_s32(vmovl_s16(vget_low_s16(high))),
        vcvtq_f32_s32(vmovl_high_s16(high)),
    ]
}

/// Stores four vectors into a 16-value chunk (nothing if `dst` is not 16 values long).
#[inline]
#[target_feature(enable = "neon")]
fn store16(dst: &mut [f32], v: [float32x4_t; 4]) {
    if let Ok(dst) = <&mut [f32; 16]>::try_from(dst) {
        // SAFETY: `dst` is exactly the 64 bytes that `st1` (four registers) writes.
        unsafe { vst1q_f32_x4(dst.as_mut_ptr(), float32x4x4_t(v[0], v[1], v[2], v[3])) };
    }
}

/// `dequantize_row_q6_K` for one block: `(d * sc) * q`.
pub fn q6_k(block: &BlockQ6K, out: &mut [f32; QK_K]) {
    // SAFETY: this module is compiled only for targets with NEON (quant/arch).
    unsafe { q6_k_neon(block, out) }
}

#[target_feature(enable = "neon")]
fn q6_k_neon(block: &BlockQ6K, out: &mut [f32; QK_K]) {
    let d = f16_le(block.d);
    for half in 0..2 {
        for (i, q) in half_quants(block, half).into_iter().enumerate() {
            let sub = 8 * half + i;
            let scale = vdupq_n_f32(d * block.scales[sub] as f32);
            store_each(out, sub, q, |q| vmulq_f32(scale, q));
        }
    }
}

/// Stores 16 i8 values at `out[16 * at..]`, each converted to f32 and passed through `value`.
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn store_each<const N: usize>(
    out: &mut [f32; N],
    at: usize,
    q: int8x16_t,
    value: impl Fn(float32x4_t) -> float32x4_t,
) {
    if let Some(dst) = out.get_mut(16 * at..16 * at + 16) {
        store16(dst, widen(q).map(value));
    }
}

/// `dequantize_row_q4_1` for one block: `q * d + m`.
pub fn q4_1(block: &BlockQ4_1, out: &mut [f32; QK8_0]) {
    // SAFETY: this module is compiled only for targets with NEON (quant/arch).
    unsafe { q4_1_neon(block, out) }
}

#[target_feature(enable = "neon")]
fn q4_1_neon(block: &BlockQ4_1, out: &mut [f32; QK8_0]) {
    let (d, m) = (vdupq_n_f32(f16_le(block.d)), vdupq_n_f32(f16_le(block.m)));
    let (low, high) = nibbles(&block.qs);
    let step = |q: float32x4_t| vaddq_f32(vmulq_f32(q, d), m);
    store_each(out, 0, vreinterpretq_s8_u8(low), step);
    store_each(out, 1, vreinterpretq_s8_u8(high), step);
}

/// `dequantize_row_q5_0` for one block: `(q - 16) * d`.
pub fn q5_0(block: &BlockQ5_0, out: &mut [f32; QK8_0]) {
    // SAFETY: this module is compiled only for targets with NEON (quant/arch).
    unsafe { q5_0_neon(block, out) }
}

#[target_feature(enable = "neon")]
fn q5_0_neon(block: &BlockQ5_0, out: &mut [f32; QK8_0]) {
    let d = vdupq_n_f32(f16_le(block.d));
    let (q0, q1) = q5_0_weights(block);
    store_each(out, 0, q0, |q| vmulq_f32(q, d));
    store_each(out, 1, q1, |q| vmulq_f32(q, d));
}

/// `dequantize_row_q5_1` for one block: `q * d + m`.
pub fn q5_1(block: &BlockQ5_1, out: &mut [f32; QK8_0]) {
    // SAFETY: this module is compiled only for targets with NEON (quant/arch).
    unsafe { q5_1_neon(block, out) }
}

#[target_feature(enable = "neon")]
fn q5_1_neon(block: &BlockQ5_1, out: &mut [f32; QK8_0]) {
    let (d, m) = (vdupq_n_f32(f16_le(block.d)), vdupq_n_f32(f16_le(block.m)));
    let (q0, q1) = q5_1_weights(block);
    let step = |q: float32x4_t| vaddq_f32(vmulq_f32(q, d), m);
    store_each(out, 0, q0, step);
    store_each(out, 1, q1, step);
}

/// `dequantize_row_iq4_nl` for one block: `d * level`.
pub fn iq4_nl(block: &BlockIq4Nl, out: &mut [f32; QK8_0]) {
    // SAFETY: this module is compiled only for targets with NEON (quant/arch).
    unsafe { iq4_nl_neon(block, out) }
}

#[target_feature(enable = "neon")]
fn iq4_nl_neon(block: &BlockIq4Nl, out: &mut [f32; QK8_0]) {
    let d = vdupq_n_f32(f16_le(block.d));
    let (l0, l1) = iq4_levels(&block.qs);
    store_each(out, 0, l0, |l| vmulq_f32(d, l));
    store_each(out, 1, l1, |l| vmulq_f32(d, l));
}

/// 32 values from two vectors of i8 levels (elements 0..16, 16..32) through `value`; nothing if
/// `dst` is not 32 values long.
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn store_levels(
    dst: &mut [f32],
    levels: [int8x16_t; 2],
    value: impl Fn(float32x4_t) -> float32x4_t,
) {
    if let Ok(dst) = <&mut [f32; QK8_0]>::try_from(dst) {
        store_each(dst, 0, levels[0], &value);
        store_each(dst, 1, levels[1], &value);
    }
}

/// `dequantize_row_mxfp4` for one block: `level * e8m0_half(e)`.
pub fn mxfp4(block: &BlockMxfp4, out: &mut [f32; QK8_0]) {
    // SAFETY: this module is compiled only for targets with NEON (quant/arch).
    unsafe { mxfp4_neon(block, out) }
}

#[target_feature(enable = "neon")]
fn mxfp4_neon(block: &BlockMxfp4, out: &mut [f32; QK8_0]) {
    let d = vdupq_n_f32(e8m0_to_f32_half(block.e));
    let (l0, l1) = mxfp4_weights(block);
    store_each(out, 0, l0, |l| vmulq_f32(l, d));
    store_each(out, 1, l1, |l| vmulq_f32(l, d));
}
