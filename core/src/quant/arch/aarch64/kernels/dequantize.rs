//! Dequantize kernels with NEON, one block at a time, each the same bits as its scalar twin's
//! `dequantize_block`: every value is one or two unfused f32 operations in the twin's order.

use super::nibbles::{iq4_levels, nibbles, q5_0_weights, q5_1_weights};
use super::ops::{f16_le, load_i8, load_u8, piece};
use super::q6_k::half_quants;
use crate::quant::activation::{BlockQ8_0, QK8_0, QK_K};
use crate::quant::iq::iq4_nl::BlockIq4Nl;
use crate::quant::k_quants::q4_k::{scales_and_mins, BlockQ4K};
use crate::quant::k_quants::q6_k::BlockQ6K;
use crate::quant::legacy::q4_0::BlockQ4_0;
use crate::quant::legacy::{BlockQ4_1, BlockQ5_0, BlockQ5_1};
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
    for sub in 0..8 {
        let dl = vdupq_n_f32(d * scales[sub] as f32);
        let ml = vdupq_n_f32(min * mins[sub] as f32);
        let pair = sub / 2;
        for i in 0..2 {
            let q = load_u8(piece(&block.qs, 2 * pair + i));
            let q = if sub % 2 == 0 {
                vandq_u8(q, vdupq_n_u8(0x0f))
            } else {
                vshrq_n_u8::<4>(q)
            };
            let low = vmovl_u8(vget_low_u8(q));
            let high = vmovl_high_u8(q);
            let quads = [
                vmovl_u16(vget_low_u16(low)),
                vmovl_high_u16(low),
                vmovl_u16(vget_low_u16(high)),
                vmovl_high_u16(high),
            ];
            for (k, quad) in quads.into_iter().enumerate() {
                let value = vsubq_f32(vmulq_f32(dl, vcvtq_f32_u32(quad)), ml);
                let start = 32 * sub + 16 * i + 4 * k;
                if let Some(dst) = out.get_mut(start..start + 4) {
                    // SAFETY: `dst` is exactly the four f32 that `st1` writes.
                    unsafe { vst1q_f32(dst.as_mut_ptr(), value) };
                }
            }
        }
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
fn store_each<const N: usize>(
    out: &mut [f32; N],
    at: usize,
    q: int8x16_t,
    value: impl Fn(float32x4_t) -> float32x4_t,
) {
    let low = vmovl_s8(vget_low_s8(q));
    let high = vmovl_high_s8(q);
    let quads = [
        vmovl_s16(vget_low_s16(low)),
        vmovl_high_s16(low),
        vmovl_s16(vget_low_s16(high)),
        vmovl_high_s16(high),
    ];
    for (k, quad) in quads.into_iter().enumerate() {
        let v = value(vcvtq_f32_s32(quad));
        let start = 16 * at + 4 * k;
        if let Some(dst) = out.get_mut(start..start + 4) {
            // SAFETY: `dst` is exactly the four f32 that `st1` writes.
            unsafe { vst1q_f32(dst.as_mut_ptr(), v) };
        }
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
