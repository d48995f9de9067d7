//! The Q8_K activation quantizer (`quantize_row_q8_K_ref`) with NEON.

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

/// Four f32 from `x[4 i..]`.
#[inline]
#[target_feature(enable = "neon")]
fn quad(x: &[f32; QK_K], i: usize) -> float32x4_t {
    match x.get(4 * i..4 * i + 4) {
        // SAFETY: the slice holds exactly the four f32 that `ld1` reads.
        Some(four) => unsafe { vld1q_f32(four.as_ptr()) },
        None => vdupq_n_f32(0.0),
    }
}

#[target_feature(enable = "neon")]
fn quantize_block_neon(x: &[f32; QK_K]) -> BlockQ8K {
    // Largest |x|, and whether every value is ordered (not NaN), in one pass.
    let mut max = [vdupq_n_f32(0.0); 4];
    let mut ordered = vdupq_n_u32(u32::MAX);
    for i in (0..QK_K / 4).step_by(4) {
        for (k, m) in max.iter_mut().enumerate() {
            let v = quad(x, i + k);
            ordered = vandq_u32(ordered, vceqq_f32(v, v));
            *m = vmaxq_f32(*m, vabsq_f32(v));
        }
    }
    if vminvq_u32(ordered) != u32::MAX {
        return scalar::quantize_block(x);
    }
    let amax = vmaxvq_f32(vmaxq_f32(
        vmaxq_f32(max[0], max[1]),
        vmaxq_f32(max[2], max[3]),
    ));
    if amax == 0.0 {
        return scalar::quantize_block(x);
    }
    // The first value whose magnitude is amax, sign kept: the first quad that has it, then the
    // first lane.
    let wanted = vdupq_n_f32(amax);
    let first = (0..QK_K / 4)
        .find(|&i| vmaxvq_u32(vceqq_f32(vabsq_f32(quad(x, i)), wanted)) != 0)
        .unwrap_or(0);
    let max = x
        .iter()
        .skip(4 * first)
        .copied()
        .find(|v| v.abs() == amax)
        .unwrap_or(amax);
    let iscale = -127.0 / max;
    let mut block = BlockQ8K {
        d: (1.0 / iscale).to_le_bytes(),
        qs: [0; QK_K],
        bsums: [[0; 2]; QK_K / 16],
    };
    // Below 4194303 the magic-number trick and `fcvtns` agree; NaN fails the compare.
    let limit = vdupq_n_f32(4_194_303.0);
    let top = vdupq_n_s32(127);
    let mut in_range = vdupq_n_u32(u32::MAX);
    for (group, sum) in block.bsums.iter_mut().enumerate() {
        let q: [int32x4_t; 4] = core::array::from_fn(|k| {
            let scaled = vmulq_n_f32(quad(x, 4 * group + k), iscale);
            in_range = vandq_u32(in_range, vcaltq_f32(scaled, limit));
            vminq_s32(vcvtnq_s32_f32(scaled), top)
        });
        let low = vcombine_s16(vmovn_s32(q[0]), vmovn_s32(q[1]));
        let high = vcombine_s16(vmovn_s32(q[2]), vmovn_s32(q[3]));
        // Sum of 16 quants, each in -128..=127: fits i16 as ggml stores it.
        *sum = vaddvq_s16(vaddq_s16(low, high)).to_le_bytes();
        let bytes = vcombine_s8(vmovn_s16(low), vmovn_s16(high));
        if let Some(dst) = block.qs.get_mut(16 * group..16 * group + 16) {
            // SAFETY: `dst` is exactly the 16 bytes that `st1` writes.
            unsafe { vst1q_s8(dst.as_mut_ptr(), bytes) };
        }
    }
    if vminvq_u32(in_range) != u32::MAX {
        return scalar::quantize_block(x);
    }
    block
}
