//! Q2_0: 64 values in 18 bytes (2.25 bits per weight): an f16 scale `d` and 2-bit codes `q`
//! (bits `2(j % 4)..` of byte `j / 4`) standing for `(q - 1) · d`, i.e. -d, 0, d or 2d.

use bytemuck::{Pod, Zeroable};

use crate::ggml_type::GgmlType;
use crate::quant::activation::{BlockQ8_0, QK8_0};
use crate::quant::cast::{f16_le, f16_to_le, Block};
use crate::quant::float::{c_round_i32, fabsf};

/// Values per Q2_0 block.
pub const QK2_0: usize = 64;
/// Q8_0 blocks per Q2_0 block in vec_dot.
pub(crate) const Q8_PER_BLOCK: usize = QK2_0 / QK8_0;

/// `block_q2_0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockQ2_0 {
    /// Scale, f16 little-endian.
    pub d: [u8; 2],
    /// 2-bit codes, 8 bytes per 32 values.
    pub qs: [[u8; QK8_0 / 4]; Q8_PER_BLOCK],
}

impl Block for BlockQ2_0 {
    const TYPE: GgmlType = GgmlType::Q2_0;
}

/// The 4 codes of a byte, value order.
fn codes(byte: u8) -> [i32; 4] {
    [0, 2, 4, 6].map(|shift| i32::from((byte >> shift) & 3))
}

/// `dequantize_row_q2_0` for one block.
pub(crate) fn dequantize_block(block: &BlockQ2_0, out: &mut [f32; QK2_0]) {
    let d = f16_le(block.d);
    for (&byte, out) in block.qs.iter().flatten().zip(out.chunks_exact_mut(4)) {
        for (y, q) in out.iter_mut().zip(codes(byte)) {
            *y = (q - 1) as f32 * d;
        }
    }
}

/// `quantize_row_q2_0_ref` for one block: `d = max |x|`, codes `(int)round_half_away(x / d) + 1` clamped to
/// 0..=3. The C `(int)` of NaN (from an infinite or NaN input) is undefined; x86-64 gives
/// `INT_MIN`, hence code 0, which we reproduce.
pub(crate) fn quantize_block(x: &[f32; QK2_0]) -> BlockQ2_0 {
    let mut amax = 0.0f32;
    for &v in x {
        let a = fabsf(v);
        if a > amax {
            amax = a;
        }
    }
    let d = amax;
    let id = if d > 0.0 { 1.0 / d } else { 0.0 };
    let mut block = BlockQ2_0 {
        d: f16_to_le(d),
        qs: [[0; QK8_0 / 4]; Q8_PER_BLOCK],
    };
    for (byte, xs) in block.qs.iter_mut().flatten().zip(x.chunks_exact(4)) {
        for (slot, &w) in xs.iter().enumerate() {
            let q = c_round_i32(w * id).saturating_add(1).clamp(0, 3) as u8;
            *byte |= q << (2 * slot);
        }
    }
    block
}

/// `ggml_vec_dot_q2_0_q8_0_generic`: as Q1_0, a float per Q8_0 block, then scaled by `d`.
pub(crate) fn vec_dot<'a>(
    pairs: impl Iterator<Item = (&'a BlockQ2_0, &'a [BlockQ8_0; Q8_PER_BLOCK])>,
) -> f32 {
    let mut sumf = 0.0f32;
    for (x, ys) in pairs {
        let d0 = f16_le(x.d);
        let mut sumi = 0.0f32;
        for (bytes, y) in x.qs.iter().zip(ys) {
            let d1 = f16_le(y.d);
            let mut sumi_block = 0i32;
            for (&byte, qy) in bytes.iter().zip(y.qs.chunks_exact(4)) {
                for (q, &v) in codes(byte).iter().zip(qy) {
                    sumi_block += (q - 1) * i32::from(v);
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
        // d = 1.5 (0x3e00). Byte 0 = 0b11_10_01_00: values 0..4 have codes 0, 1, 2, 3 -> (q - 1)
        // · 1.5 = -1.5, 0, 1.5, 3. Byte 15 = 0xc0: value 63 has code 3 -> 3. Others: -1.5.
        let mut block = BlockQ2_0 {
            d: [0x00, 0x3e],
            qs: [[0; 8]; 2],
        };
        block.qs[0][0] = 0b1110_0100;
        block.qs[1][7] = 0xc0;
        let mut out = [0.0f32; QK2_0];
        dequantize_block(&block, &mut out);
        assert_eq!(out[..4], [-1.5, 0.0, 1.5, 3.0]);
        assert_eq!(out[63], 3.0);
        assert!(out[4..63].iter().all(|&v| v == -1.5));
    }

    #[test]
    fn quantize_rounds_ties_away_from_zero() {
        // max |x| = 1 -> d = 1. -0.5 -> round_half_away = -1 -> code 0; 0 -> 1; 0.5 -> 1 -> code 2;
        // 1 -> code 2. Byte 0 = 0 | 1 << 2 | 2 << 4 | 2 << 6 = 0xa4; the zero values -> code 1 (0x55).
        let mut x = [0.0f32; QK2_0];
        x[..4].copy_from_slice(&[-0.5, 0.0, 0.5, 1.0]);
        let block = quantize_block(&x);
        assert_eq!(block.d, [0x00, 0x3c]);
        assert_eq!(block.qs[0][0], 0xa4);
        assert!(block.qs.iter().flatten().skip(1).all(|&b| b == 0x55));
        // An infinite value: d = inf, id = 0, inf · 0 = NaN -> (int) NaN = INT_MIN on x86 -> code 0;
        // the finite values give 0 · 0 = 0 -> code 1.
        x[5] = f32::INFINITY;
        let block = quantize_block(&x);
        assert_eq!(block.d, [0x00, 0x7c]);
        assert_eq!(block.qs[0][1], 0b0101_0001);
    }
}
