//! Q5_K × Q8_K vec_dot and Q5_K dequantize with NEON: Q4_K's layout and float steps, plus a fifth
//! bit per value from `qh` (value `l` of sub-block `j` uses bit `j` of `qh[l]`).

use super::ops::{f16_le, load_i8, load_u8, piece};
use super::q4_k::{add_sub_block, with_mins};
use crate::quant::activation::{BlockQ8K, QK_K};
use crate::quant::k_quants::q4_k::scales_and_mins;
use crate::quant::k_quants::q5_k::BlockQ5K;
use core::arch::aarch64::*;

/// The 32 quants (`0..32`) of sub-block `j`: 4 bits from the low (even `j`) or high (odd `j`)
/// nibbles of qs bytes `32 (j / 2)..`, the fifth from bit `j` of `qh`.
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn sub_block(block: &BlockQ5K, j: usize) -> (uint8x16_t, uint8x16_t) {
    let bit = vdupq_n_u8(1 << j);
    let sixteen = vdupq_n_u8(0x10);
    let one = |i: usize| {
        let q = load_u8(piece(&block.qs, 2 * (j / 2) + i));
        let nibble = if j.is_multiple_of(2) {
            vandq_u8(q, vdupq_n_u8(0x0f))
        } else {
            vshrq_n_u8::<4>(q)
        };
        let fifth = vandq_u8(vtstq_u8(load_u8(piece(&block.qh, i)), bit), sixteen);
        vorrq_u8(nibble, fifth)
    };
    (one(0), one(1))
}

/// Eight lanes (element index mod 8) of Σ scale · w · x, as Q4_K's (four products of at most
/// 31·128 per i16 lane).
#[inline]
#[target_feature(enable = "neon")]
fn lane_sums(wb: &BlockQ5K, xb: &BlockQ8K, scales: &[u8; 8]) -> (int32x4_t, int32x4_t) {
    let mut lanes = (vdupq_n_s32(0), vdupq_n_s32(0));
    // SAFETY: `scales` is 8 bytes, exactly what `ld1` reads.
    let s = vreinterpretq_s16_u16(vmovl_u8(unsafe { vld1_u8(scales.as_ptr()) }));
    let w = |j: usize| {
        let (a, b) = sub_block(wb, j);
        (vreinterpretq_s8_u8(a), vreinterpretq_s8_u8(b))
    };
    let x = |j: usize| {
        (
            load_i8(piece(&xb.qs, 2 * j)),
            load_i8(piece(&xb.qs, 2 * j + 1)),
        )
    };
    add_sub_block::<0>(&mut lanes, w(0), x(0), s);
    add_sub_block::<1>(&mut lanes, w(1), x(1), s);
    add_sub_block::<2>(&mut lanes, w(2), x(2), s);
    add_sub_block::<3>(&mut lanes, w(3), x(3), s);
    add_sub_block::<4>(&mut lanes, w(4), x(4), s);
    add_sub_block::<5>(&mut lanes, w(5), x(5), s);
    add_sub_block::<6>(&mut lanes, w(6), x(6), s);
    add_sub_block::<7>(&mut lanes, w(7), x(7), s);
    lanes
}

/// [`scalar::vec_dot`](crate::quant::k_quants::q5_k::vec_dot) with NEON (Q4_K's float steps).
pub fn vec_dot(w: &[BlockQ5K], x: &[BlockQ8K]) -> f32 {
    // SAFETY: this module is compiled only for targets with NEON (quant/arch).
    unsafe { vec_dot_neon(w, x) }
}

#[target_feature(enable = "neon")]
fn vec_dot_neon(w: &[BlockQ5K], x: &[BlockQ8K]) -> f32 {
    with_mins(
        w,
        x,
        |wb| (wb.d, wb.dmin, &wb.scales),
        |wb, xb, s| lane_sums(wb, xb, s),
    )
}

/// `dequantize_row_q5_K` for one block: `dl * q - ml` per 32 values.
pub fn dequantize_block(block: &BlockQ5K, out: &mut [f32; QK_K]) {
    // SAFETY: this module is compiled only for targets with NEON (quant/arch).
    unsafe { dequantize_neon(block, out) }
}

#[target_feature(enable = "neon")]
fn dequantize_neon(block: &BlockQ5K, out: &mut [f32; QK_K]) {
    let d = f16_le(block.d);
    let min = f16_le(block.dmin);
    let (scales, mins) = scales_and_mins(&block.scales);
    for j in 0..8 {
        let dl = vdupq_n_f32(d * scales[j] as f32);
        let ml = vdupq_n_f32(min * mins[j] as f32);
        let (a, b) = sub_block(block, j);
        for (i, q) in [a, b].into_iter().enumerate() {
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
                let start = 32 * j + 16 * i + 4 * k;
                if let Some(dst) = out.get_mut(start..start + 4) {
                    // SAFETY: `dst` is exactly the four f32 that `st1` writes.
                    unsafe { vst1q_f32(dst.as_mut_ptr(), value) };
                }
            }
        }
    }
}
