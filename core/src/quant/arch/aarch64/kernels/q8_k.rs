//! The Q8_K activation quantizer (`quantize_row_q8_K_ref`) with NEON.

use super::q8_0::{amax_without_nan, load_f32};
use crate::quant::activation::{BlockQ8K, QK_K};
use crate::quant::k_quants::q8_k as scalar;
use core::arch::aarch64::*;

/// [`scalar::quantize_block`]: `iscale = -127 / max` (`max` the first value of largest
/// magnitude), `q = min(127, nearest_int(iscale * x))` with `fcvtns` (ties to even, as the
/// magic-number trick), the sums of each 16 quants, `d = 1 / iscale`. Blocks with a NaN, and
/// blocks whose scaled values leave `nearest_int`'s exact range (|v| ≥ 4194303, e.g. a subnormal
/// `max` whose inverse overflows), take the scalar twin.
pub fn quantize_block(x: &[f32; QK_K]) -> BlockQ8K {
    // SAFETY: this module is compiled only for targets with NEON (quant/arch).
    unsafe { quantize_block_neon(x) }
}

#[target_feature(enable = "neon")]
fn quantize_block_neon(x: &[f32; QK_K]) -> BlockQ8K {
    let v: [float32x4_t; 64] = load_f32(x);
    let Some(amax) = amax_without_nan(&v) else {
        return scalar::quantize_block(x);
    };
    if amax == 0.0 {
        return scalar::quantize_block(x);
    }
    // The first value whose magnitude is amax, sign kept.
    let max = x.iter().copied().find(|v| v.abs() == amax).unwrap_or(amax);
    let iscale = -127.0 / max;
    let scaled = v.map(|v| vmulq_n_f32(v, iscale));
    // Below 4194303 the magic-number trick and `fcvtns` agree; NaN fails the compare.
    let limit = vdupq_n_f32(4_194_303.0);
    let mut in_range = vdupq_n_u32(u32::MAX);
    for &s in &scaled {
        in_range = vandq_u32(in_range, vcaltq_f32(s, limit));
    }
    if vminvq_u32(in_range) != u32::MAX {
        return scalar::quantize_block(x);
    }
    let top = vdupq_n_s32(127);
    let q = scaled.map(|s| vminq_s32(vcvtnq_s32_f32(s), top));
    let mut block = BlockQ8K {
        d: (1.0 / iscale).to_le_bytes(),
        qs: [0; QK_K],
        bsums: [[0; 2]; QK_K / 16],
    };
    for (i, four) in q.chunks_exact(4).enumerate() {
        let low = vcombine_s16(vmovn_s32(four[0]), vmovn_s32(four[1]));
        let high = vcombine_s16(vmovn_s32(four[2]), vmovn_s32(four[3]));
        // Sum of 16 quants, each in -127..=127: fits i16 as ggml stores it.
        let sum = vaddvq_s16(vaddq_s16(low, high));
        block.bsums[i] = sum.to_le_bytes();
        let bytes = vcombine_s8(vmovn_s16(low), vmovn_s16(high));
        // SAFETY: qs[16i..16i+16] is inside the 256-byte array for i < 16.
        unsafe { vst1q_s8(block.qs.as_mut_ptr().add(16 * i), bytes) };
    }
    block
}
