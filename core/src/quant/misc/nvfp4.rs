//! NVFP4: 64 values in 36 bytes (4.5 bits per weight): four UE4M3 scales, one per 16 values, then
//! 32 bytes of E2M1 codes, 8 per sub-block (value `j` of a sub-block in the low nibble of its byte
//! `j`, value `j + 8` in the high nibble). Value = `kvalues_mxfp4[code] · ue4m3(d[s]) / 2`.

use bytemuck::{Pod, Zeroable};

use super::fp4::{best_index_fp4, f32_to_ue4m3, fp4_level, ue4m3_to_f32_half};
use crate::ggml_type::GgmlType;
use crate::quant::activation::BlockQ8_0;
use crate::quant::cast::{f16_le, Block};
use crate::quant::float::fabsf;

/// Values per NVFP4 block.
pub const QK_NVFP4: usize = 64;
/// Values per NVFP4 scale.
pub const QK_NVFP4_SUB: usize = 16;
const SUBS: usize = QK_NVFP4 / QK_NVFP4_SUB;

/// `block_nvfp4`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockNvfp4 {
    /// UE4M3 scales, one per 16 values.
    pub d: [u8; SUBS],
    /// E2M1 codes, 8 bytes per sub-block.
    pub qs: [[u8; QK_NVFP4_SUB / 2]; SUBS],
}

impl Block for BlockNvfp4 {
    const TYPE: GgmlType = GgmlType::NVFP4;
}

/// `dequantize_row_nvfp4` for one block.
pub(crate) fn dequantize_block(block: &BlockNvfp4, out: &mut [f32; QK_NVFP4]) {
    for ((&scale, qs), out) in block
        .d
        .iter()
        .zip(&block.qs)
        .zip(out.chunks_exact_mut(QK_NVFP4_SUB))
    {
        let d = ue4m3_to_f32_half(scale);
        let (low, high) = out.split_at_mut(QK_NVFP4_SUB / 2);
        for ((&q, lo), hi) in qs.iter().zip(low).zip(high) {
            *lo = f32::from(fp4_level(q)) * d;
            *hi = f32::from(fp4_level(q >> 4)) * d;
        }
    }
}

/// `quantize_row_nvfp4_ref` for one block: per 16 values, the UE4M3 code of `amax / 6` (6 is the
/// largest E2M1 magnitude), then the nearest level for each value under the decoded scale.
pub(crate) fn quantize_block(x: &[f32; QK_NVFP4]) -> BlockNvfp4 {
    let mut block = BlockNvfp4 {
        d: [0; SUBS],
        qs: [[0; QK_NVFP4_SUB / 2]; SUBS],
    };
    for ((scale, qs), xb) in block
        .d
        .iter_mut()
        .zip(&mut block.qs)
        .zip(x.chunks_exact(QK_NVFP4_SUB))
    {
        let mut amax = 0.0f32;
        for &v in xb {
            if amax < fabsf(v) {
                amax = fabsf(v);
            }
        }
        *scale = f32_to_ue4m3(amax / 6.0);
        let d = ue4m3_to_f32_half(*scale);
        let (low, high) = xb.split_at(QK_NVFP4_SUB / 2);
        for ((q, &lo), &hi) in qs.iter_mut().zip(low).zip(high) {
            *q = best_index_fp4(lo, d) | (best_index_fp4(hi, d) << 4);
        }
    }
    block
}

/// `ggml_vec_dot_nvfp4_q8_0_generic`: one float accumulation per 16 values. Sub-blocks 0, 1 use
/// the first Q8_0 block (its values 0..16 and 16..32), sub-blocks 2, 3 the second.
pub(crate) fn vec_dot<'a>(
    pairs: impl Iterator<Item = (&'a BlockNvfp4, &'a [BlockQ8_0; 2])>,
) -> f32 {
    let mut sumf = 0.0f32;
    for (x, ys) in pairs {
        let halves = ys.iter().flat_map(|y| {
            y.qs.chunks_exact(QK_NVFP4_SUB)
                .map(move |q8| (f16_le(y.d), q8))
        });
        for ((&scale, qs), (dy, q8)) in x.d.iter().zip(&x.qs).zip(halves) {
            let d = ue4m3_to_f32_half(scale);
            let (q8_low, q8_high) = q8.split_at(QK_NVFP4_SUB / 2);
            let mut sumi_lo = 0i32;
            let mut sumi_hi = 0i32;
            for ((&q, &lo), &hi) in qs.iter().zip(q8_low).zip(q8_high) {
                sumi_lo += i32::from(lo) * i32::from(fp4_level(q));
                sumi_hi += i32::from(hi) * i32::from(fp4_level(q >> 4));
            }
            sumf += dy * d * (sumi_lo + sumi_hi) as f32;
        }
    }
    sumf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dequantize_hand_built_block() {
        // Scales: 0x38 = 1.0 (half: 0.5), 0x40 = 2.0 (half: 1.0), 0x01 = 2^-9 (half: 2^-10), 0 -> 0.
        // Sub-block 0 byte 0 = 0x71: value 0 code 1 (level 1) -> 0.5, value 8 code 7 (12) -> 6.
        // Sub-block 1 byte 0 = 0xd0: value 16 code 0 -> 0, value 24 code 13 (-6) -> -6.
        // Sub-block 2 byte 0 = 0x07: value 32 code 7 -> 12 · 2^-10. Sub-block 3: scale 0 -> zeros.
        let mut block = BlockNvfp4 {
            d: [0x38, 0x40, 0x01, 0x00],
            qs: [[0; 8]; 4],
        };
        block.qs[0][0] = 0x71;
        block.qs[1][0] = 0xd0;
        block.qs[2][0] = 0x07;
        block.qs[3] = [0x77; 8];
        let mut out = [0.0f32; QK_NVFP4];
        dequantize_block(&block, &mut out);
        assert_eq!((out[0], out[8], out[16], out[24]), (0.5, 6.0, 0.0, -6.0));
        assert_eq!(out[32], 12.0 / 1024.0);
        assert!(out[48..].iter().all(|&v| v == 0.0));
    }

    #[test]
    fn quantize_scales_each_sixteen_values() {
        // Sub-block 0: max |x| = 6 -> 6 / 6 = 1.0 -> code 0x38, half scale 0.5; 6 -> level 12
        // (code 7). Sub-block 1 is all zeros -> scale code 0 (amax / 6 is not positive), codes 0.
        let mut x = [0.0f32; QK_NVFP4];
        x[0] = 6.0;
        x[8] = -1.0;
        let block = quantize_block(&x);
        assert_eq!(block.d, [0x38, 0, 0, 0]);
        // -1 / 0.5 = -2 -> code 10, in the high nibble of byte 0.
        assert_eq!(block.qs[0][0], 0xa7);
        assert!(block.qs[1..].iter().flatten().all(|&q| q == 0));
    }
}
