//! IQ3_XXS: 256 values in 98 bytes (3.0625 bits per weight).
//!
//! After the f16 super-block scale `d`: 64 indices into `iq3xxs_grid` (4 magnitudes each), 8 per
//! group of 32 values, then one little-endian u32 per group whose bits `7l..7l+7` are the sign code
//! of its 8-value sub-group `l` (expanded by `ksigns_iq2xs`) and whose top 4 bits are the scale `s`.
//! Value = `d * (0.5 + s) * 0.5 * magnitude * sign`.

use bytemuck::{Pod, Zeroable};

use super::grid_iq3::IQ3XXS_GRID;
use super::tables::{apply_sign, grid4, ksigns, sign_i32};
use crate::ggml_type::GgmlType;
use crate::quant::activation::{BlockQ8K, QK_K};
use crate::quant::cast::{f16_le, Block};

/// `block_iq3_xxs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockIq3Xxs {
    /// Super-block scale, f16 little-endian.
    pub d: [u8; 2],
    /// Grid indices: per group of 32 values, 4 pairs (one pair per 8 values).
    pub qs: [[[u8; 2]; 4]; QK_K / 32],
    /// Per group: a little-endian u32 of four 7-bit sign codes and a 4-bit scale (ggml keeps
    /// these in the last 32 bytes of `qs`).
    pub scales_and_signs: [[u8; 4]; QK_K / 32],
}

impl Block for BlockIq3Xxs {
    const TYPE: GgmlType = GgmlType::IQ3_XXS;
}

const _: () =
    assert!(core::mem::size_of::<BlockIq3Xxs>() == GgmlType::IQ3_XXS.block_bytes() as usize);

/// The 8 magnitudes of a sub-group: the grid entries of its two indices, one after the other.
fn magnitudes([first, second]: [u8; 2]) -> [u8; 8] {
    let [a0, a1, a2, a3] = grid4(&IQ3XXS_GRID, usize::from(first));
    let [b0, b1, b2, b3] = grid4(&IQ3XXS_GRID, usize::from(second));
    [a0, a1, a2, a3, b0, b1, b2, b3]
}

/// `dequantize_row_iq3_xxs` for one block.
pub(crate) fn dequantize_block(block: &BlockIq3Xxs, out: &mut [f32; QK_K]) {
    let d = f16_le(block.d);
    for ((indices, &aux), out) in block
        .qs
        .iter()
        .zip(&block.scales_and_signs)
        .zip(out.chunks_exact_mut(32))
    {
        let aux = u32::from_le_bytes(aux);
        let db = d * (0.5 + (aux >> 28) as f32) * 0.5;
        for (l, (&pair, out)) in indices.iter().zip(out.chunks_exact_mut(8)).enumerate() {
            let signs = ksigns(aux >> (7 * l));
            // ggml writes y[j] and y[j + 4] in one loop; each value is computed independently.
            for (j, (y, g)) in out.iter_mut().zip(magnitudes(pair)).enumerate() {
                *y = apply_sign(db * f32::from(g), signs, j);
            }
        }
    }
}

/// `ggml_vec_dot_iq3_xxs_q8_K_generic`. Integer sums stay below 2^31 (256 · 62 · 128 · 31).
pub(crate) fn vec_dot(xs: &[BlockIq3Xxs], ys: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (x, y) in xs.iter().zip(ys) {
        let d = f16_le(x.d) * y.scale();
        let mut bsum = 0i32;
        for ((indices, &aux), q8) in
            x.qs.iter()
                .zip(&x.scales_and_signs)
                .zip(y.qs.chunks_exact(32))
        {
            let aux = u32::from_le_bytes(aux);
            let ls = (2 * (aux >> 28) + 1) as i32;
            let mut sumi = 0i32;
            for (l, (&pair, q8)) in indices.iter().zip(q8.chunks_exact(8)).enumerate() {
                let signs = ksigns(aux >> (7 * l));
                for (j, (&g, &q)) in magnitudes(pair).iter().zip(q8).enumerate() {
                    sumi += i32::from(g) * i32::from(q) * sign_i32(signs, j);
                }
            }
            bsum += sumi * ls;
        }
        sumf += d * bsum as f32;
    }
    0.25 * sumf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dequantize_hand_built_block() {
        // d = 1.0. Group 0: first pair (0, 255), word 1 << 28 | 2: scale s = 1 -> db = (0.5 + 1)
        // · 0.5 = 0.75; sign code 2 for sub-group 0 (ksigns[2] = 0b1000_0010: values 1 and 7
        // negative). Entry 0 = 0x04040404 (4 4 4 4), entry 255 = 0x3e341c04 (4 28 52 62). Times
        // 0.75: 3 3 3 3 | 3 21 39 46.5. Other groups: s = 0, db = 0.25, 4 · 0.25 = 1.
        let mut block = BlockIq3Xxs {
            d: [0x00, 0x3c],
            qs: [[[0; 2]; 4]; 8],
            scales_and_signs: [[0; 4]; 8],
        };
        block.qs[0][0] = [0, 255];
        block.scales_and_signs[0] = ((1u32 << 28) | 2).to_le_bytes();
        let mut out = [0.0f32; QK_K];
        dequantize_block(&block, &mut out);
        assert_eq!(out[..8], [3.0, -3.0, 3.0, 3.0, 3.0, 21.0, 39.0, -46.5]);
        assert_eq!(out[8..32], [3.0; 24]);
        assert!(out[32..].iter().all(|&v| v == 1.0));
    }
}
