//! MXFP4 (OCP microscaling FP4): 32 values in 17 bytes (4.25 bits per weight): an E8M0 scale
//! byte `e` and 32 E2M1 codes (value `j` in the low nibble of byte `j`, value `j + 16` in its high
//! nibble). Value = `kvalues_mxfp4[code] · 2^(e - 128)` (the doubled levels times half the scale).

use bytemuck::{Pod, Zeroable};

use super::fp4::{best_index_fp4, e8m0_to_f32_half, fp4_level};
use crate::ggml_type::GgmlType;
use crate::quant::activation::BlockQ8_0;
use crate::quant::cast::{f16_le, Block};
use crate::quant::float::{c_cast_i32, fabsf};

/// Values per MXFP4 block.
pub const QK_MXFP4: usize = 32;

/// `block_mxfp4`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockMxfp4 {
    /// E8M0 scale: the power of two `2^(e - 127)`.
    pub e: u8,
    /// E2M1 codes, two per byte.
    pub qs: [u8; QK_MXFP4 / 2],
}

impl Block for BlockMxfp4 {
    const TYPE: GgmlType = GgmlType::MXFP4;
}

/// For `K = floor(log2 x) + 1` (the next power of two's exponent), `K - δ = log2 x` rounds to `K`
/// in f32 when δ is below half the gap between `K` and its f32 neighbour beyond `x`. Writing
/// `x = 2^(K-1) · (2 - j·2^-23)` (`j = 2^23 -` the 23-bit mantissa), δ < 2^-s exactly when
/// `j ≤ ROUND_UP_MAX_J[s - 17]`, i.e. `floor(2^24 · (1 - 2^(-2^-s)))`, for the half-gaps 2^-s
/// that occur (s = 17..=25).
const ROUND_UP_MAX_J: [u32; 9] = [88, 44, 22, 11, 5, 2, 1, 0, 0];

/// `floorf(log2f(x))` for finite `x > 0`, as with a correctly rounded `log2f` (glibc's, on the
/// inputs checked): the exponent of `x`, plus one when `x` lies so close below the next power of
/// two that the f32 logarithm rounds up to that integer.
fn floor_log2f(x: f32) -> i32 {
    let bits = x.to_bits() & 0x7fff_ffff;
    let (exponent, mantissa) = if bits >= 0x0080_0000 {
        ((bits >> 23) as i32 - 127, bits & 0x007f_ffff)
    } else {
        // Subnormal: normalise the mantissa (bits > 0 here, so the leading bit exists).
        let top = 31 - bits.leading_zeros() as i32;
        (top - 149, (bits << (23 - top)) & 0x007f_ffff)
    };
    let k = exponent + 1;
    if k == 0 {
        // log2 x is in [-1, 0), and f32 resolves it down to about 1e-45: never rounds to 0.
        return exponent;
    }
    let magnitude_binade = 31 - k.unsigned_abs().leading_zeros() as i32;
    // Below a positive power of two the f32 grid is twice as fine.
    let s = if k > 0 && k.unsigned_abs().is_power_of_two() {
        25 - magnitude_binade
    } else {
        24 - magnitude_binade
    };
    let j = 0x0080_0000 - mantissa;
    let max_j = ROUND_UP_MAX_J.get((s - 17) as usize).copied().unwrap_or(0);
    if j <= max_j {
        k
    } else {
        exponent
    }
}

/// The E8M0 byte ggml picks for a block whose largest |x| is `amax`:
/// `amax > 0 ? (uint8_t)(floorf(log2f(amax)) - 2 + 127) : 0`. The float-to-`uint8_t` conversion
/// is undefined in C when the value is out of range (tiny or infinite `amax`); x86-64 converts to
/// a 32-bit int (`cvttss2si`, infinity -> `i32::MIN`) and keeps the low byte, which we reproduce.
fn e8m0_for(amax: f32) -> u8 {
    if amax.is_nan() || amax <= 0.0 {
        return 0;
    }
    let exponent = if amax == f32::INFINITY {
        f32::INFINITY
    } else {
        floor_log2f(amax) as f32
    };
    c_cast_i32(exponent - 2.0 + 127.0) as u8
}

/// `dequantize_row_mxfp4` for one block.
pub(crate) fn dequantize_block(block: &BlockMxfp4, out: &mut [f32; QK_MXFP4]) {
    let d = e8m0_to_f32_half(block.e);
    let (low, high) = out.split_at_mut(QK_MXFP4 / 2);
    for ((&q, lo), hi) in block.qs.iter().zip(low).zip(high) {
        *lo = f32::from(fp4_level(q)) * d;
        *hi = f32::from(fp4_level(q >> 4)) * d;
    }
}

/// `quantize_row_mxfp4_ref` for one block: the scale puts the largest |x| in the top binade of the
/// levels, then each value takes the nearest level.
pub(crate) fn quantize_block(x: &[f32; QK_MXFP4]) -> BlockMxfp4 {
    let mut amax = 0.0f32;
    for &v in x {
        if amax < fabsf(v) {
            amax = fabsf(v);
        }
    }
    let e = e8m0_for(amax);
    let d = e8m0_to_f32_half(e);
    let mut qs = [0u8; QK_MXFP4 / 2];
    let (low, high) = x.split_at(QK_MXFP4 / 2);
    for ((q, &lo), &hi) in qs.iter_mut().zip(low).zip(high) {
        *q = best_index_fp4(lo, d) | (best_index_fp4(hi, d) << 4);
    }
    BlockMxfp4 { e, qs }
}

/// `ggml_vec_dot_mxfp4_q8_0_generic`.
pub(crate) fn vec_dot(xs: &[BlockMxfp4], ys: &[BlockQ8_0]) -> f32 {
    let mut sumf = 0.0f32;
    for (x, y) in xs.iter().zip(ys) {
        let d = f16_le(y.d) * e8m0_to_f32_half(x.e);
        let (y_low, y_high) = y.qs.split_at(QK_MXFP4 / 2);
        let mut sumi1 = 0i32;
        let mut sumi2 = 0i32;
        for ((&q, &lo), &hi) in x.qs.iter().zip(y_low).zip(y_high) {
            sumi1 += i32::from(lo) * i32::from(fp4_level(q));
            sumi2 += i32::from(hi) * i32::from(fp4_level(q >> 4));
        }
        sumf += d * (sumi1 + sumi2) as f32;
    }
    sumf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dequantize_hand_built_block() {
        // e = 128: half the scale 2^(128 - 127) = 1. Byte 0 = 0xf7: value 0 code 7 (level 12) ->
        // 12, value 16 code 15 (level -12) -> -12. Byte 1 = 0x08: code 8 (level 0, "-0") -> 0.
        let mut block = BlockMxfp4 {
            e: 128,
            qs: [0; 16],
        };
        block.qs[0] = 0xf7;
        block.qs[1] = 0x08;
        let mut out = [0.0f32; QK_MXFP4];
        dequantize_block(&block, &mut out);
        assert_eq!((out[0], out[16], out[1], out[17]), (12.0, -12.0, 0.0, 0.0));
        // e = 120: half scale 2^-8; code 1 (level 1) -> 2^-8.
        let block = BlockMxfp4 {
            e: 120,
            qs: [0x11; 16],
        };
        dequantize_block(&block, &mut out);
        assert!(out.iter().all(|&v| v == 1.0 / 256.0));
    }

    #[test]
    fn quantize_picks_exponent_and_levels() {
        // max |x| = 6: floor(log2 6) = 2 -> e = 2 - 2 + 127 = 127, half scale 0.5. 6 / 0.5 = 12
        // -> code 7. -1.25 is 0.25 from -1.0 (code 10, level -2) and from -1.5 (code 11, level -3):
        // the first in code order wins.
        let mut x = [0.0f32; QK_MXFP4];
        x[0] = 6.0;
        x[16] = -1.25;
        let block = quantize_block(&x);
        assert_eq!(block.e, 127);
        assert_eq!(block.qs[0], 0xa7);
        assert!(block.qs[1..].iter().all(|&q| q == 0));
    }

    #[test]
    fn floor_log2_rounds_up_just_below_powers_of_two() {
        extern crate std;
        // f32 just below 2^K: log2 is K - δ with δ ≈ j · 2^-24 / ln 2; rounded to f32 it reaches
        // K when δ is below half the f32 spacing there. Check against f64 log2 rounded to f32.
        for exponent in -149..=127i32 {
            for j in 1u32..200 {
                let bits = if exponent >= -126 {
                    (((exponent + 127) as u32) << 23) | (0x0080_0000 - j)
                } else {
                    // Subnormal with top bit `exponent + 149`: keep only the representable bits.
                    let top = (exponent + 149) as u32;
                    if j >= (1 << top) {
                        continue;
                    }
                    (1u32 << (top + 1)) - j
                };
                let x = f32::from_bits(bits);
                let reference = (f64::from(x).log2() as f32).floor() as i32;
                assert_eq!(floor_log2f(x), reference, "x = {x:e} ({bits:#x})");
            }
            let power = f32::from_bits(if exponent >= -126 {
                ((exponent + 127) as u32) << 23
            } else {
                1 << (exponent + 149)
            });
            assert_eq!(floor_log2f(power), exponent);
        }
    }

    #[test]
    fn exponent_byte_wraps_like_x86_for_tiny_and_infinite_amax() {
        // amax = 2^-140: -140 - 2 + 127 = -15 -> int -15 -> low byte 241.
        assert_eq!(e8m0_for(f32::from_bits(1 << 9)), 241);
        assert_eq!(e8m0_for(f32::INFINITY), 0);
        assert_eq!(e8m0_for(0.0), 0);
        assert_eq!(e8m0_for(1.0), 125);
    }
}
