//! IQ1_M: 256 values in 56 bytes (1.75 bits per weight). There is no separate scale field: the f16
//! super-block scale is spread over the top nibbles of the four u16 scale words.
//!
//! Per group of 32 values: 4 low index bytes into the IQ1 grid; 2 `qh` bytes, each holding, for
//! two 8-value sub-groups, 3 high index bits (low nibble: bits 0..3, high nibble: bits 4..7) and
//! the sign of that sub-group's `delta = ±1/8` (bit 3 and bit 7). Scale words: group `ib` takes
//! two 3-bit scales from word `ib / 2`, bits `6(ib % 2)..` (first 16 values) and `6(ib % 2) + 3..`
//! (last 16). Value = `d * (2s + 1) * (grid + delta)`.

use bytemuck::{Pod, Zeroable};

use super::iq1_s::IQ1_DELTA;
use super::tables::iq1_grid;
use crate::ggml_type::GgmlType;
use crate::quant::activation::{BlockQ8K, QK_K};
use crate::quant::cast::{f16_le, Block};

/// `block_iq1_m`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockIq1M {
    /// Low 8 bits of the grid indices, 4 per group of 32 values.
    pub qs: [[u8; 4]; QK_K / 32],
    /// Per group, 2 bytes of high index bits and delta signs.
    pub qh: [[u8; 2]; QK_K / 32],
    /// Four little-endian u16: 3-bit group scales, and the f16 super-block scale in the top nibbles.
    pub scales: [[u8; 2]; QK_K / 64],
}

impl Block for BlockIq1M {
    const TYPE: GgmlType = GgmlType::IQ1_M;
}

/// The four scale words and the super-block scale assembled from their top nibbles.
fn scale_words(block: &BlockIq1M) -> ([u16; 4], f32) {
    let sc = block.scales.map(u16::from_le_bytes);
    let bits = (sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000);
    (sc, f16_le(bits.to_le_bytes()))
}

/// The two odd scales `2s + 1` of group `ib`.
fn group_scales(sc: &[u16; 4], ib: usize) -> [i32; 2] {
    let word = sc[(ib / 2) % 4];
    let shift = 6 * (ib % 2);
    [
        2 * i32::from((word >> shift) & 7) + 1,
        2 * i32::from((word >> (shift + 3)) & 7) + 1,
    ]
}

/// For sub-group `l` (0..4) of a group: its grid values and whether its delta is negative.
fn subgroup(low: u8, qh: [u8; 2], l: usize) -> ([i8; 8], bool) {
    let byte = u16::from(qh[(l / 2) % 2]);
    let high = (byte << (8 - 4 * (l % 2))) & 0x700;
    let negative = byte & (0x08 << (4 * (l % 2))) != 0;
    (iq1_grid(usize::from(u16::from(low) | high)), negative)
}

/// `dequantize_row_iq1_m` for one block.
pub(crate) fn dequantize_block(block: &BlockIq1M, out: &mut [f32; QK_K]) {
    let (sc, d) = scale_words(block);
    for (ib, ((lows, &qh), out)) in block
        .qs
        .iter()
        .zip(&block.qh)
        .zip(out.chunks_exact_mut(32))
        .enumerate()
    {
        let [ls1, ls2] = group_scales(&sc, ib);
        let dl = [d * ls1 as f32, d * ls2 as f32];
        for (l, (&low, out)) in lows.iter().zip(out.chunks_exact_mut(8)).enumerate() {
            let (grid, negative) = subgroup(low, qh, l);
            let delta = if negative { -IQ1_DELTA } else { IQ1_DELTA };
            let dl = dl[l / 2];
            for (y, g) in out.iter_mut().zip(grid) {
                *y = dl * (f32::from(g) + delta);
            }
        }
    }
}

/// `ggml_vec_dot_iq1_m_q8_K_generic`. Integer sums stay below 2^31 (256 · 128 · 15).
pub(crate) fn vec_dot(xs: &[BlockIq1M], ys: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (x, y) in xs.iter().zip(ys) {
        let (sc, d) = scale_words(x);
        let mut sumi1 = 0i32;
        let mut sumi2 = 0i32;
        for (ib, ((lows, &qh), q8)) in
            x.qs.iter()
                .zip(&x.qh)
                .zip(y.qs.chunks_exact(32))
                .enumerate()
        {
            let mut sum1 = [0i32; 2];
            let mut sum2 = [0i32; 2];
            for (l, (&low, q8)) in lows.iter().zip(q8.chunks_exact(8)).enumerate() {
                let (grid, negative) = subgroup(low, qh, l);
                let mut lsum1 = 0i32;
                let mut lsum2 = 0i32;
                for (&q, g) in q8.iter().zip(grid) {
                    lsum1 += i32::from(q) * i32::from(g);
                    lsum2 += i32::from(q);
                }
                sum1[l / 2] += lsum1;
                sum2[l / 2] += lsum2 * if negative { -1 } else { 1 };
            }
            let [ls1, ls2] = group_scales(&sc, ib);
            sumi1 += sum1[0] * ls1 + sum1[1] * ls2;
            sumi2 += sum2[0] * ls1 + sum2[1] * ls2;
        }
        sumf += d * y.scale() * (sumi1 as f32 + IQ1_DELTA * sumi2 as f32);
    }
    sumf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dequantize_hand_built_block() {
        // Super-block scale 1.0 = f16 0x3c00, nibbles (low to high) 0, 0, 0xc, 0x3: they go to the
        // top nibbles of words 0, 1, 2, 3, so word 2 = 0xc000 and word 3 = 0x3000.
        // Word 0 = 0x000a: group 0 scales bits 0..3 = 2 -> 5 (first 16 values), bits 3..6 = 1 -> 3.
        // Group 0: low bytes 0, 1, 0, 0; qh = 0x81, 0x08: index 0 high bits 1 -> 256, delta +1/8;
        // index 1 high bits 0, delta -1/8 (bit 7); index 2 delta -1/8 (bit 3 of byte 1); index 3
        // delta +1/8. Entry 256: -1 0 1 0 1 -1 0 -1; entry 1: +1 then seven -1; entry 0: -1s.
        // Other groups: scales 0 -> 1, delta +1/8, entry 0 -> -0.875.
        let mut block = BlockIq1M {
            qs: [[0; 4]; 8],
            qh: [[0; 2]; 8],
            scales: [[0; 2]; 4],
        };
        block.scales = [0x000au16, 0, 0xc000, 0x3000].map(u16::to_le_bytes);
        block.qs[0] = [0, 1, 0, 0];
        block.qh[0] = [0x81, 0x08];
        let mut out = [0.0f32; QK_K];
        dequantize_block(&block, &mut out);
        // 5 · (g + 0.125)
        assert_eq!(
            out[..8],
            [-4.375, 0.625, 5.625, 0.625, 5.625, -4.375, 0.625, -4.375]
        );
        // 5 · (g - 0.125)
        assert_eq!(
            out[8..16],
            [4.375, -5.625, -5.625, -5.625, -5.625, -5.625, -5.625, -5.625]
        );
        // 3 · (-1 - 0.125) and 3 · (-1 + 0.125)
        assert_eq!(out[16..24], [-3.375; 8]);
        assert_eq!(out[24..32], [-2.625; 8]);
        assert!(out[32..].iter().all(|&v| v == -0.875));
    }
}
