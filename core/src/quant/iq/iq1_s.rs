//! IQ1_S: 256 values in 50 bytes (1.5625 bits per weight).
//!
//! After the f16 super-block scale `d`: the low 8 bits of 32 eleven-bit indices into the IQ1 grid
//! (8 values of -1, 0, +1 each), 4 per group of 32 values; then one little-endian u16 per group:
//! bits `3l..3l+3` are the high bits of index `l`, bits 12..15 a 3-bit scale `s`, bit 15 the sign
//! of the group's shift `delta = ±1/8`. Value = `d * (2s + 1) * (grid + delta)`.

use bytemuck::{Pod, Zeroable};

use super::tables::iq1_grid;
use crate::ggml_type::GgmlType;
use crate::quant::activation::{BlockQ8K, QK_K};
use crate::quant::cast::{f16_le, Block};

/// `IQ1S_DELTA`: the shift added to every grid value, ±1/8.
pub(super) const IQ1_DELTA: f32 = 0.125;

/// `block_iq1_s`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockIq1S {
    /// Super-block scale, f16 little-endian.
    pub d: [u8; 2],
    /// Low 8 bits of the grid indices, 4 per group of 32 values.
    pub qs: [[u8; 4]; QK_K / 32],
    /// Per group, a little-endian u16: high index bits, scale and delta sign.
    pub qh: [[u8; 2]; QK_K / 32],
}

impl Block for BlockIq1S {
    const TYPE: GgmlType = GgmlType::IQ1_S;
}

/// The grid values of index `l` of a group: `qs[l] | ((qh >> 3l) & 7) << 8`.
fn grid_values(low: u8, qh: u16, l: usize) -> [i8; 8] {
    let high = (usize::from(qh) >> (3 * (l & 3))) & 7;
    iq1_grid(usize::from(low) | (high << 8))
}

/// The odd scale `2s + 1` of a group.
fn group_scale(qh: u16) -> i32 {
    2 * i32::from((qh >> 12) & 7) + 1
}

/// `dequantize_row_iq1_s` for one block.
pub(crate) fn dequantize_block(block: &BlockIq1S, out: &mut [f32; QK_K]) {
    let d = f16_le(block.d);
    for ((lows, &qh), out) in block.qs.iter().zip(&block.qh).zip(out.chunks_exact_mut(32)) {
        let qh = u16::from_le_bytes(qh);
        let dl = d * group_scale(qh) as f32;
        let delta = if qh & 0x8000 != 0 {
            -IQ1_DELTA
        } else {
            IQ1_DELTA
        };
        for (l, (&low, out)) in lows.iter().zip(out.chunks_exact_mut(8)).enumerate() {
            for (y, g) in out.iter_mut().zip(grid_values(low, qh, l)) {
                *y = dl * (f32::from(g) + delta);
            }
        }
    }
}

/// `ggml_vec_dot_iq1_s_q8_K_generic`: the delta term uses the activation block sums. Integer sums
/// stay below 2^31 (256 · 128 · 15, and 8 · 15 · 2 · 32768).
pub(crate) fn vec_dot(xs: &[BlockIq1S], ys: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (x, y) in xs.iter().zip(ys) {
        let mut sumi = 0i32;
        let mut sumi1 = 0i32;
        for (ib, ((lows, &qh), q8)) in
            x.qs.iter()
                .zip(&x.qh)
                .zip(y.qs.chunks_exact(32))
                .enumerate()
        {
            let qh = u16::from_le_bytes(qh);
            let ls = group_scale(qh);
            let delta = if qh & 0x8000 != 0 { -1 } else { 1 };
            let mut lsum = 0i32;
            for (l, (&low, q8)) in lows.iter().zip(q8.chunks_exact(8)).enumerate() {
                for (&q, g) in q8.iter().zip(grid_values(low, qh, l)) {
                    lsum += i32::from(q) * i32::from(g);
                }
            }
            sumi += ls * lsum;
            sumi1 += ls * delta * (i32::from(y.bsum(2 * ib)) + i32::from(y.bsum(2 * ib + 1)));
        }
        sumf += f16_le(x.d) * y.scale() * (sumi as f32 + IQ1_DELTA * sumi1 as f32);
    }
    sumf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dequantize_hand_built_block() {
        // d = 1.0. Group 0: low bytes 1, 0, 0, 0; qh = 0xa008: bit 15 -> delta = -1/8, bits 12..15
        // = 2 -> dl = 2·2 + 1 = 5, bits 3..6 = 1 -> index 1 becomes 256.
        // Entry 1 = 0xffffffffffffff01: +1 then seven -1. Entry 256 = 0xff00ff01000100ff:
        // -1 0 1 0 1 -1 0 -1. Entry 0: eight -1. Values 5 · (g - 0.125): +1 -> 4.375, 0 -> -0.625,
        // -1 -> -5.625. Other groups: qh = 0 -> dl = 1, delta = +1/8, entry 0 -> -0.875.
        let mut block = BlockIq1S {
            d: [0x00, 0x3c],
            qs: [[0; 4]; 8],
            qh: [[0; 2]; 8],
        };
        block.qs[0] = [1, 0, 0, 0];
        block.qh[0] = 0xa008u16.to_le_bytes();
        let mut out = [0.0f32; QK_K];
        dequantize_block(&block, &mut out);
        assert_eq!(
            out[..8],
            [4.375, -5.625, -5.625, -5.625, -5.625, -5.625, -5.625, -5.625]
        );
        assert_eq!(
            out[8..16],
            [-5.625, -0.625, 4.375, -0.625, 4.375, -5.625, -0.625, -5.625]
        );
        assert_eq!(out[16..32], [-5.625; 16]);
        assert!(out[32..].iter().all(|&v| v == -0.875));
    }
}
