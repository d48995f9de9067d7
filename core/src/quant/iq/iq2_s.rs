//! IQ2_S: 256 values in 82 bytes (2.5625 bits per weight).
//!
//! After the f16 super-block scale `d`: 32 low bytes of 10-bit indices into `iq2s_grid` (8
//! magnitudes each), 32 sign bytes (bit `j` set = value `j` negative), 8 `qh` bytes holding the
//! two high index bits of each of a group's 4 indices, and 8 scale bytes (low nibble for the first
//! 16 values of a 32-value group, high nibble for the rest).
//! Value = `d * (0.5 + nibble) * 0.25 * magnitude * sign`.

use bytemuck::{Pod, Zeroable};

use super::grid_iq2::IQ2S_GRID;
use super::tables::{apply_sign, grid8, sign_i32};
use crate::ggml_type::GgmlType;
use crate::quant::activation::{BlockQ8K, QK_K};
use crate::quant::cast::{f16_le, Block};

/// `block_iq2_s`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockIq2S {
    /// Super-block scale, f16 little-endian.
    pub d: [u8; 2],
    /// Low 8 bits of the grid indices, 4 per group of 32 values.
    pub qs: [[u8; 4]; QK_K / 32],
    /// Sign bits, one byte per 8 values (ggml keeps them in the second half of `qs`).
    pub signs: [[u8; 4]; QK_K / 32],
    /// High 2 bits of each group's 4 indices (bits `2l..2l+2` for index `l`).
    pub qh: [u8; QK_K / 32],
    /// Two 4-bit scales per group.
    pub scales: [u8; QK_K / 32],
}

impl Block for BlockIq2S {
    const TYPE: GgmlType = GgmlType::IQ2_S;
}

/// The magnitudes of index `l` of a group: `qs[l] | (qh << (8 - 2l) & 0x300)`.
fn magnitudes(low: u8, qh: u8, l: usize) -> [u8; 8] {
    let index = u32::from(low) | ((u32::from(qh) << (8 - 2 * (l & 3))) & 0x300);
    grid8(&IQ2S_GRID, index as usize)
}

/// `dequantize_row_iq2_s` for one block.
pub(crate) fn dequantize_block(block: &BlockIq2S, out: &mut [f32; QK_K]) {
    let d = f16_le(block.d);
    let groups = block
        .qs
        .iter()
        .zip(&block.signs)
        .zip(&block.qh)
        .zip(&block.scales);
    for ((((lows, signs), &qh), &scale), out) in groups.zip(out.chunks_exact_mut(32)) {
        let db = [
            d * (0.5 + f32::from(scale & 0xf)) * 0.25,
            d * (0.5 + f32::from(scale >> 4)) * 0.25,
        ];
        for (l, ((&low, &sign), out)) in lows
            .iter()
            .zip(signs)
            .zip(out.chunks_exact_mut(8))
            .enumerate()
        {
            let dl = db[l / 2];
            let grid = magnitudes(low, qh, l);
            for (j, (y, g)) in out.iter_mut().zip(grid).enumerate() {
                *y = apply_sign(dl * f32::from(g), sign, j);
            }
        }
    }
}

/// `ggml_vec_dot_iq2_s_q8_K_generic`. Integer sums stay below 2^31 (256 · 43 · 128 · 31).
pub(crate) fn vec_dot(xs: &[BlockIq2S], ys: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (x, y) in xs.iter().zip(ys) {
        let d = f16_le(x.d) * y.scale();
        let mut bsum = 0i32;
        let groups = x.qs.iter().zip(&x.signs).zip(&x.qh).zip(&x.scales);
        for ((((lows, signs), &qh), &scale), q8) in groups.zip(y.qs.chunks_exact(32)) {
            let ls1 = 1 + 2 * i32::from(scale & 0xf);
            let ls2 = 1 + 2 * i32::from(scale >> 4);
            let mut sums = [0i32; 2];
            for (l, ((&low, &sign), q8)) in
                lows.iter().zip(signs).zip(q8.chunks_exact(8)).enumerate()
            {
                let grid = magnitudes(low, qh, l);
                let sum = &mut sums[l / 2];
                for (j, (&q, &g)) in q8.iter().zip(&grid).enumerate() {
                    *sum += i32::from(q) * i32::from(g) * sign_i32(sign, j);
                }
            }
            bsum += ls1 * sums[0] + ls2 * sums[1];
        }
        sumf += d * bsum as f32;
    }
    0.125 * sumf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dequantize_hand_built_block() {
        // d = 1.0. Group 0: low index bytes 0, 0, 0xff, 0 and qh = 0x34: index 1 gets high bits
        // 01 (qh bits 2..4) -> 256, index 2 gets 11 (bits 4..6) -> 1023. Entry 0: eight 0x08;
        // entry 256 = 0x0819081919191919: bytes 25 25 25 25 25 8 25 8; entry 1023: eight 0x2b.
        // Signs: byte 0 = 0x01 (value 0 negative), byte 2 = 0x80 (value 7 negative). Scale byte
        // 0x10: db0 = 0.5 · 0.25 = 0.125, db1 = 1.5 · 0.25 = 0.375. Other groups: 8 · 0.125 = 1.
        let mut block = BlockIq2S {
            d: [0x00, 0x3c],
            qs: [[0; 4]; 8],
            signs: [[0; 4]; 8],
            qh: [0; 8],
            scales: [0; 8],
        };
        block.qs[0] = [0, 0, 0xff, 0];
        block.qh[0] = 0x34;
        block.signs[0] = [0x01, 0, 0x80, 0];
        block.scales[0] = 0x10;
        let mut out = [0.0f32; QK_K];
        dequantize_block(&block, &mut out);
        assert_eq!(out[..8], [-1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]);
        assert_eq!(
            out[8..16],
            [3.125, 3.125, 3.125, 3.125, 3.125, 1.0, 3.125, 1.0]
        );
        assert_eq!(
            out[16..24],
            [16.125, 16.125, 16.125, 16.125, 16.125, 16.125, 16.125, -16.125]
        );
        assert_eq!(out[24..32], [3.0; 8]);
        assert!(out[32..].iter().all(|&v| v == 1.0));
    }
}
