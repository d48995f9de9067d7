//! Q3_K × Q8_K vec_dot and dequantize with NEON (also the `dotprod` level's: like the other
//! K-quants, ggml's generic order keeps eight float lanes by element index, see the module docs of
//! [`aarch64`](super::super)).

use super::dequantize::store_each;
use super::ops::{f16_le, load_i8, load_u8, piece};
use super::q4_k::add_lanes;
use super::q6_k::add_sub_block;
use crate::quant::activation::{BlockQ8K, QK_K};
use crate::quant::k_quants::common::unpack_q3_scales;
use crate::quant::k_quants::q3_k::BlockQ3K;
use core::arch::aarch64::*;

/// The signed quants (`-4..=3`) of one half (128 values) of a super-block, 8 vectors of 16 values
/// in element order: low bits from `qs` (bits `2j` of piece `i` for vector `2j + i`), and 4
/// subtracted where the `hmask` bit `4 half + j` is clear.
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn half_quants(block: &BlockQ3K, half: usize) -> [int8x16_t; 8] {
    let three = vdupq_n_u8(3);
    let four = vdupq_n_u8(4);
    let h = [
        load_u8(piece(&block.hmask, 0)),
        load_u8(piece(&block.hmask, 1)),
    ];
    let mut out = [vdupq_n_s8(0); 8];
    for i in 0..2 {
        let q = load_u8(piece(&block.qs, 2 * half + i));
        let low = [
            vandq_u8(q, three),
            vandq_u8(vshrq_n_u8::<2>(q), three),
            vandq_u8(vshrq_n_u8::<4>(q), three),
            vshrq_n_u8::<6>(q),
        ];
        for (j, low) in low.into_iter().enumerate() {
            let bit = vdupq_n_u8(1 << (4 * half + j));
            let minus = vbicq_u8(four, vtstq_u8(h[i], bit));
            out[2 * j + i] = vreinterpretq_s8_u8(vsubq_u8(low, minus));
        }
    }
    out
}

/// The 16 sub-block scales (`sc - 32`).
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn scales(block: &BlockQ3K) -> int8x16_t {
    let s: [u8; 16] = unpack_q3_scales(&block.scales).map(|s| s as u8);
    vsubq_s8(vreinterpretq_s8_u8(load_u8(&s)), vdupq_n_s8(32))
}

#[target_feature(enable = "neon")]
fn vec_dot_neon(w: &[BlockQ3K], x: &[BlockQ8K]) -> f32 {
    let mut sums_low = vdupq_n_f32(0.0);
    let mut sums_high = vdupq_n_f32(0.0);
    for (wb, xb) in w.iter().zip(x) {
        let mut lanes = (vdupq_n_s32(0), vdupq_n_s32(0));
        let s = scales(wb);
        let scale_halves = [vmovl_s8(vget_low_s8(s)), vmovl_high_s8(s)];
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

/// `ggml_vec_dot_q3_K_q8_K_generic` with NEON: each sub-block's products in lane `e mod 8`, times
/// its scale; per super-block `sums[l] += d * lane[l]`; the lanes added in order at the end.
pub fn vec_dot(w: &[BlockQ3K], x: &[BlockQ8K]) -> f32 {
    // SAFETY: this module is compiled only for targets with NEON (quant/arch).
    unsafe { vec_dot_neon(w, x) }
}

/// `dequantize_row_q3_K` for one block: `(d * (sc - 32)) * q`.
pub fn dequantize(block: &BlockQ3K, out: &mut [f32; QK_K]) {
    // SAFETY: this module is compiled only for targets with NEON (quant/arch).
    unsafe { dequantize_neon(block, out) }
}

#[target_feature(enable = "neon")]
fn dequantize_neon(block: &BlockQ3K, out: &mut [f32; QK_K]) {
    let d = f16_le(block.d);
    let s = unpack_q3_scales(&block.scales);
    for half in 0..2 {
        let q = half_quants(block, half);
        for (i, &q) in q.iter().enumerate() {
            let k = 8 * half + i;
            let sc = s.get(k).copied().unwrap_or(0);
            let dl = vdupq_n_f32(d * (i32::from(sc) - 32) as f32);
            store_each(out, k, q, |q| vmulq_f32(dl, q));
        }
    }
}
