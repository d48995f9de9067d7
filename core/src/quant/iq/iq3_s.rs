//! IQ3_S: 256 values in 110 bytes (3.4375 bits per weight).
//!
//! After the f16 super-block scale `d`: the low 8 bits of 64 nine-bit indices into `iq3s_grid`
//! (4 magnitudes each), 8 per group of 32 values; one `qh` byte per group holding the ninth bit of
//! its 8 indices (bit `k` for index `k`); 32 sign bytes (bit `j` set = value `j` of 8 negative);
//! 4 scale bytes, a 4-bit scale `s` per group (low nibble for even groups).
//! Value = `d * (1 + 2s) * magnitude * sign`.

use bytemuck::{Pod, Zeroable};

use super::grid_iq3::IQ3S_GRID;
use super::tables::{apply_sign, grid4, sign_i32};
use crate::ggml_type::GgmlType;
use crate::quant::activation::{BlockQ8K, QK_K};
use crate::quant::cast::{f16_le, Block};

/// `block_iq3_s`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockIq3S {
    /// Super-block scale, f16 little-endian.
    pub d: [u8; 2],
    /// Low 8 bits of the grid indices: per group, 4 pairs (one pair per 8 values).
    pub qs: [[[u8; 2]; 4]; QK_K / 32],
    /// Ninth index bit of each group's 8 indices.
    pub qh: [u8; QK_K / 32],
    /// Sign bits, one byte per 8 values.
    pub signs: [[u8; 4]; QK_K / 32],
    /// Two 4-bit group scales per byte.
    pub scales: [u8; QK_K / 64],
}

impl Block for BlockIq3S {
    const TYPE: GgmlType = GgmlType::IQ3_S;
}

/// The 8 magnitudes of sub-group `l` of a group: index `2l` takes its ninth bit from `qh` bit `2l`
/// (`qh << (8 - 2l) & 256`), index `2l + 1` from bit `2l + 1` (`qh << (7 - 2l) & 256`).
fn magnitudes([first, second]: [u8; 2], qh: u8, l: usize) -> [u8; 8] {
    let shift = 2 * (l & 3);
    let qh = u32::from(qh);
    let first = u32::from(first) | ((qh << (8 - shift)) & 256);
    let second = u32::from(second) | ((qh << (7 - shift)) & 256);
    let [a0, a1, a2, a3] = grid4(&IQ3S_GRID, first as usize);
    let [b0, b1, b2, b3] = grid4(&IQ3S_GRID, second as usize);
    [a0, a1, a2, a3, b0, b1, b2, b3]
}

/// The 4-bit scale of group `ib32`.
fn group_scale(scales: &[u8; QK_K / 64], ib32: usize) -> u8 {
    let byte = scales[(ib32 / 2) % (QK_K / 64)];
    if ib32.is_multiple_of(2) {
        byte & 0xf
    } else {
        byte >> 4
    }
}

/// `dequantize_row_iq3_s` for one block. ggml walks the groups in pairs; each group's values depend
/// only on its own bytes, so walking them one at a time gives the same bits.
pub(crate) fn dequantize_block(block: &BlockIq3S, out: &mut [f32; QK_K]) {
    let d = f16_le(block.d);
    let groups = block.qs.iter().zip(&block.qh).zip(&block.signs);
    for (ib32, (((pairs, &qh), signs), out)) in groups.zip(out.chunks_exact_mut(32)).enumerate() {
        let db = d * (1 + 2 * i32::from(group_scale(&block.scales, ib32))) as f32;
        let subgroups = pairs.iter().zip(signs).zip(out.chunks_exact_mut(8));
        for (l, ((&pair, &sign), out)) in subgroups.enumerate() {
            for (j, (y, g)) in out.iter_mut().zip(magnitudes(pair, qh, l)).enumerate() {
                *y = apply_sign(db * f32::from(g), sign, j);
            }
        }
    }
}

/// `ggml_vec_dot_iq3_s_q8_K_generic`. Integer sums stay below 2^31 (256 · 15 · 128 · 31).
pub(crate) fn vec_dot(xs: &[BlockIq3S], ys: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (x, y) in xs.iter().zip(ys) {
        let d = f16_le(x.d) * y.scale();
        let mut bsum = 0i32;
        let groups = x.qs.iter().zip(&x.qh).zip(&x.signs);
        for (ib32, (((pairs, &qh), signs), q8)) in groups.zip(y.qs.chunks_exact(32)).enumerate() {
            let ls = 2 * i32::from(group_scale(&x.scales, ib32)) + 1;
            let mut sumi = 0i32;
            for (l, ((&pair, &sign), q8)) in
                pairs.iter().zip(signs).zip(q8.chunks_exact(8)).enumerate()
            {
                for (j, (&g, &q)) in magnitudes(pair, qh, l).iter().zip(q8).enumerate() {
                    sumi += i32::from(g) * i32::from(q) * sign_i32(sign, j);
                }
            }
            bsum += sumi * ls;
        }
        sumf += d * bsum as f32;
    }
    sumf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dequantize_hand_built_block() {
        // d = 0.5 (0x3800). Scale byte 0x21: group 0 s = 1 -> db = 0.5 · 3 = 1.5; group 1 s = 2 ->
        // db = 0.5 · 5 = 2.5; later groups s = 0 -> db = 0.5.
        // Group 0: pair 0 = (0, 0xff), qh = 0b10 -> the second index gets bit 8: 511 = 0x0f0f0101
        // (1 1 15 15); the first is entry 0 = 0x01010101. Sign byte 0x01: value 0 negative.
        // Group 1: pair 0 = (0, 0), qh = 0b01 -> first index 256 = 0x05090507 (7 5 9 5).
        let mut block = BlockIq3S {
            d: [0x00, 0x38],
            qs: [[[0; 2]; 4]; 8],
            qh: [0; 8],
            signs: [[0; 4]; 8],
            scales: [0x21, 0, 0, 0],
        };
        block.qs[0][0] = [0, 0xff];
        block.qh[0] = 0b10;
        block.signs[0][0] = 0x01;
        block.qh[1] = 0b01;
        let mut out = [0.0f32; QK_K];
        dequantize_block(&block, &mut out);
        assert_eq!(out[..8], [-1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 22.5, 22.5]);
        assert_eq!(out[8..32], [1.5; 24]);
        assert_eq!(out[32..40], [17.5, 12.5, 22.5, 12.5, 2.5, 2.5, 2.5, 2.5]);
        assert_eq!(out[40..64], [2.5; 24]);
        assert!(out[64..].iter().all(|&v| v == 0.5));
    }
}
