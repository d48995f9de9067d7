//! IQ2_XXS: 256 values in 66 bytes (2.0625 bits per weight).
//!
//! After the f16 super-block scale `d` come 8 groups of 32 values, 8 bytes each: four indices into
//! `iq2xxs_grid` (8 magnitudes each), then a little-endian u32 whose bits `7l..7l+7` are the sign
//! code of sub-group `l` (expanded by `ksigns_iq2xs`) and whose top 4 bits are the group scale `s`.
//! Value = `d * (0.5 + s) * 0.25 * magnitude * sign`.

use bytemuck::{Pod, Zeroable};

use super::grid_iq2::IQ2XXS_GRID;
use super::tables::{apply_sign, grid8, ksigns, sign_i32};
use crate::ggml_type::GgmlType;
use crate::quant::activation::{BlockQ8K, QK_K};
use crate::quant::cast::{f16_le, Block};

/// `block_iq2_xxs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockIq2Xxs {
    /// Super-block scale, f16 little-endian.
    pub d: [u8; 2],
    /// 8 groups: 4 grid indices, then the u32 (little-endian) of sign codes and scale. ggml
    /// declares this as 32 `u16`; the bytes are the same.
    pub qs: [[u8; 8]; QK_K / 32],
}

impl Block for BlockIq2Xxs {
    const TYPE: GgmlType = GgmlType::IQ2_XXS;
}

const _: () =
    assert!(core::mem::size_of::<BlockIq2Xxs>() == GgmlType::IQ2_XXS.block_bytes() as usize);

/// Splits a group into its 4 grid indices and its sign-and-scale word.
fn split_group(group: &[u8; 8]) -> ([u8; 4], u32) {
    let [i0, i1, i2, i3, a0, a1, a2, a3] = *group;
    ([i0, i1, i2, i3], u32::from_le_bytes([a0, a1, a2, a3]))
}

/// `dequantize_row_iq2_xxs` for one block.
pub(crate) fn dequantize_block(block: &BlockIq2Xxs, out: &mut [f32; QK_K]) {
    let d = f16_le(block.d);
    for (group, out) in block.qs.iter().zip(out.chunks_exact_mut(32)) {
        let (indices, aux) = split_group(group);
        let db = d * (0.5 + (aux >> 28) as f32) * 0.25;
        for (l, (index, out)) in indices.into_iter().zip(out.chunks_exact_mut(8)).enumerate() {
            let grid = grid8(&IQ2XXS_GRID, usize::from(index));
            let signs = ksigns(aux >> (7 * l));
            for (j, (y, g)) in out.iter_mut().zip(grid).enumerate() {
                *y = apply_sign(db * f32::from(g), signs, j);
            }
        }
    }
}

/// `ggml_vec_dot_iq2_xxs_q8_K_generic`. Integer sums stay below 2^31: per block at most
/// 256 · 43 · 128 · 31.
pub(crate) fn vec_dot(xs: &[BlockIq2Xxs], ys: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (x, y) in xs.iter().zip(ys) {
        let d = f16_le(x.d) * y.scale();
        let mut bsum = 0i32;
        for (group, q8) in x.qs.iter().zip(y.qs.chunks_exact(32)) {
            let (indices, aux) = split_group(group);
            let ls = (2 * (aux >> 28) + 1) as i32;
            let mut sumi = 0i32;
            for (l, (index, q8)) in indices.into_iter().zip(q8.chunks_exact(8)).enumerate() {
                let grid = grid8(&IQ2XXS_GRID, usize::from(index));
                let signs = ksigns(aux >> (7 * l));
                for (j, (&g, &q)) in grid.iter().zip(q8).enumerate() {
                    sumi += i32::from(g) * i32::from(q) * sign_i32(signs, j);
                }
            }
            bsum += sumi * ls;
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
        // d = 1.0 (f16 0x3c00). Group 0: indices 0, 1, 0, 0 and the word 3 << 28 | 1: scale s = 3,
        // sign code 1 for sub-group 0 (ksigns[1] = 0b1000_0001: values 0 and 7 negative), code 0
        // for the rest. db = 1 · (0.5 + 3) · 0.25 = 0.875. Grid entry 0 is eight 0x08 -> 8 · 0.875
        // = 7; entry 1 has 0x2b (43) in byte 0 -> 43 · 0.875 = 37.625. The other groups are zero
        // bytes: s = 0, db = 0.125, entry 0 -> 8 · 0.125 = 1.
        let mut block = BlockIq2Xxs {
            d: [0x00, 0x3c],
            qs: [[0; 8]; 8],
        };
        let [a0, a1, a2, a3] = ((3u32 << 28) | 1).to_le_bytes();
        block.qs[0] = [0, 1, 0, 0, a0, a1, a2, a3];
        let mut out = [0.0f32; QK_K];
        dequantize_block(&block, &mut out);
        assert_eq!(out[..8], [-7.0, 7.0, 7.0, 7.0, 7.0, 7.0, 7.0, -7.0]);
        assert_eq!(out[8..16], [37.625, 7.0, 7.0, 7.0, 7.0, 7.0, 7.0, 7.0]);
        assert_eq!(out[16..32], [7.0; 16]);
        assert!(out[32..].iter().all(|&v| v == 1.0));
    }
}
