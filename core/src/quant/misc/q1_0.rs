//! Q1_0: 128 values in 18 bytes (1.125 bits per weight): an f16 scale `d` and one bit per value
//! (bit `j % 8` of byte `j / 8`): set means `+d`, clear `-d`.

use bytemuck::{Pod, Zeroable};

use crate::ggml_type::GgmlType;
use crate::quant::activation::{BlockQ8_0, QK8_0};
use crate::quant::cast::{f16_le, f16_to_le, Block};
use crate::quant::float::fabsf;

/// Values per Q1_0 block.
pub const QK1_0: usize = 128;
/// Q8_0 blocks per Q1_0 block in vec_dot.
pub(crate) const Q8_PER_BLOCK: usize = QK1_0 / QK8_0;

/// `block_q1_0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockQ1_0 {
    /// Scale, f16 little-endian.
    pub d: [u8; 2],
    /// Sign bits, 4 bytes per 32 values.
    pub qs: [[u8; QK8_0 / 8]; Q8_PER_BLOCK],
}

impl Block for BlockQ1_0 {
    const TYPE: GgmlType = GgmlType::Q1_0;
}

/// `dequantize_row_q1_0` for one block.
pub(crate) fn dequantize_block(block: &BlockQ1_0, out: &mut [f32; QK1_0]) {
    let d = f16_le(block.d);
    let neg_d = -d;
    for (&byte, out) in block.qs.iter().flatten().zip(out.chunks_exact_mut(8)) {
        for (bit, y) in out.iter_mut().enumerate() {
            *y = if (byte >> bit) & 1 != 0 { d } else { neg_d };
        }
    }
}

/// `quantize_row_q1_0_ref` for one block: `d` is the mean |x| (summed in order), each bit the sign
/// (`x >= 0`; -0.0 counts as non-negative, NaN as negative).
pub(crate) fn quantize_block(x: &[f32; QK1_0]) -> BlockQ1_0 {
    let mut sum_abs = 0.0f32;
    for &v in x {
        sum_abs += fabsf(v);
    }
    let d = sum_abs / QK1_0 as f32;
    let mut block = BlockQ1_0 {
        d: f16_to_le(d),
        qs: [[0; QK8_0 / 8]; Q8_PER_BLOCK],
    };
    for (byte, xs) in block.qs.iter_mut().flatten().zip(x.chunks_exact(8)) {
        for (bit, &v) in xs.iter().enumerate() {
            if v >= 0.0 {
                *byte |= 1 << bit;
            }
        }
    }
    block
}

/// `ggml_vec_dot_q1_0_q8_0_generic`: per Q8_0 block an integer sum of ±q, scaled by the Q8_0 scale
/// into a per-block float, which is then scaled by `d`.
pub(crate) fn vec_dot<'a>(
    pairs: impl Iterator<Item = (&'a BlockQ1_0, &'a [BlockQ8_0; Q8_PER_BLOCK])>,
) -> f32 {
    let mut sumf = 0.0f32;
    for (x, ys) in pairs {
        let d0 = f16_le(x.d);
        let mut sumi = 0.0f32;
        for (bits, y) in x.qs.iter().zip(ys) {
            let d1 = f16_le(y.d);
            let mut sumi_block = 0i32;
            for (&mask, qy) in bits.iter().zip(y.qs.chunks_exact(8)) {
                for (bit, &q) in qy.iter().enumerate() {
                    let q = i32::from(q);
                    sumi_block += if (mask >> bit) & 1 != 0 { q } else { -q };
                }
            }
            sumi += d1 * sumi_block as f32;
        }
        sumf += d0 * sumi;
    }
    sumf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dequantize_hand_built_block() {
        // d = 0.25 (0x3400). Byte 0 = 0b101: values 0 and 2 are +0.25, 1 and 3..8 are -0.25.
        // Last byte = 0x80: value 127 is +0.25.
        let mut block = BlockQ1_0 {
            d: [0x00, 0x34],
            qs: [[0; 4]; 4],
        };
        block.qs[0][0] = 0b101;
        block.qs[3][3] = 0x80;
        let mut out = [0.0f32; QK1_0];
        dequantize_block(&block, &mut out);
        assert_eq!(out[..4], [0.25, -0.25, 0.25, -0.25]);
        assert_eq!(out[127], 0.25);
        assert!(out[3..127].iter().all(|&v| v == -0.25));
    }

    #[test]
    fn quantize_stores_mean_magnitude_and_signs() {
        // Alternating 1, -3: sum |x| = 64 · 4 = 256, d = 256 / 128 = 2 (f16 0x4000); even values
        // are non-negative -> bits 0, 2, 4, 6 -> 0x55 in every byte.
        let x: [f32; QK1_0] = core::array::from_fn(|i| if i % 2 == 0 { 1.0 } else { -3.0 });
        let block = quantize_block(&x);
        assert_eq!(block.d, [0x00, 0x40]);
        assert!(block.qs.iter().flatten().all(|&b| b == 0x55));
    }
}
