//! TQ2_0 (ternary): 256 values in 66 bytes (2.0625 bits per weight): 2-bit codes `t` standing for
//! `d · (t - 1)`, then the f16 scale `d`. Byte `32h + m` holds values `128h + 32l + m` in bits
//! `2l..2l+2` (`l` = 0..4).

use bytemuck::{Pod, Zeroable};

use crate::ggml_type::GgmlType;
use crate::quant::activation::{BlockQ8K, QK_K};
use crate::quant::cast::{f16_le, f16_to_le, Block};
use crate::quant::float::{c_max, fabsf, lroundf};

/// `block_tq2_0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockTq2_0 {
    /// 2-bit codes, in two halves of 32 bytes.
    pub qs: [[u8; 32]; 2],
    /// Scale, f16 little-endian.
    pub d: [u8; 2],
}

impl Block for BlockTq2_0 {
    const TYPE: GgmlType = GgmlType::TQ2_0;
}

/// The block's 256 codes (0..=3) in value order.
fn codes(block: &BlockTq2_0) -> impl Iterator<Item = i32> + '_ {
    block.qs.iter().flat_map(|half| {
        (0..4).flat_map(move |l| half.iter().map(move |&b| i32::from((b >> (2 * l)) & 3)))
    })
}

/// `dequantize_row_tq2_0` for one block.
pub(crate) fn dequantize_block(block: &BlockTq2_0, out: &mut [f32; QK_K]) {
    let d = f16_le(block.d);
    for (y, q) in out.iter_mut().zip(codes(block)) {
        *y = (q - 1) as f32 * d;
    }
}

/// `quantize_row_tq2_0_ref` for one block: `d = max |x|`, codes `round(x / d) + 1` (only the low
/// 2 bits kept, as in C).
pub(crate) fn quantize_block(x: &[f32; QK_K]) -> BlockTq2_0 {
    let mut amax = 0.0f32;
    for &v in x {
        amax = c_max(amax, fabsf(v));
    }
    let d = amax;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut block = BlockTq2_0 {
        qs: [[0; 32]; 2],
        d: f16_to_le(d),
    };
    for (half, xh) in block.qs.iter_mut().zip(x.chunks_exact(128)) {
        for (m, q) in half.iter_mut().enumerate() {
            for (n, &v) in xh.iter().skip(m).step_by(32).enumerate() {
                let code = (lroundf(v * id).wrapping_add(1) & 3) as u8;
                *q = q.wrapping_add(code << (2 * n));
            }
        }
    }
    block
}

/// `ggml_vec_dot_tq2_0_q8_K_generic`.
pub(crate) fn vec_dot(xs: &[BlockTq2_0], ys: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (x, y) in xs.iter().zip(ys) {
        let mut sumi = 0i32;
        for (c, &q) in codes(x).zip(&y.qs) {
            sumi += i32::from(q) * (c - 1);
        }
        let d = y.scale() * f16_le(x.d);
        sumf += sumi as f32 * d;
    }
    sumf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dequantize_hand_built_block() {
        // d = 2.0. Byte 0 = 0b11_10_01_00: values 0, 32, 64, 96 get codes 0, 1, 2, 3 -> (q - 1) · 2
        // = -2, 0, 2, 4. Byte 32 + 5 = 0x02: value 128 + 5 gets code 2 -> 2, values 165, 197, 229
        // code 0 -> -2. Every other code is 0 -> -2.
        let mut block = BlockTq2_0 {
            qs: [[0; 32]; 2],
            d: [0x00, 0x40],
        };
        block.qs[0][0] = 0b1110_0100;
        block.qs[1][5] = 0x02;
        let mut out = [0.0f32; QK_K];
        dequantize_block(&block, &mut out);
        assert_eq!([out[0], out[32], out[64], out[96]], [-2.0, 0.0, 2.0, 4.0]);
        assert_eq!([out[133], out[165]], [2.0, -2.0]);
        let others = out
            .iter()
            .enumerate()
            .filter(|(i, _)| ![0, 32, 64, 96, 133].contains(i));
        assert!(others.clone().all(|(_, &v)| v == -2.0));
        // Quantizing the result back: d = max |x| = 4, codes round(x / 4) + 1 (ties away from
        // zero): -2/4 = -0.5 -> -1 -> code 0; 0 -> 1; 2/4 = 0.5 -> 1 -> code 2; 4/4 -> code 2.
        let back = quantize_block(&out);
        assert_eq!(back.d, [0x00, 0x44]);
        assert_eq!(back.qs[0][0], 0b1010_0100);
    }
}
