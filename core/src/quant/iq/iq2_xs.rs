//! IQ2_XS: 256 values in 74 bytes (2.3125 bits per weight).
//!
//! After the f16 super-block scale `d` come 32 little-endian u16 codes, one per 8 values: the low
//! 9 bits index `iq2xs_grid`, the high 7 bits are a sign code (expanded by `ksigns_iq2xs`). Then
//! 8 scale bytes, one per 32 values: the low nibble scales its first 16 values, the high nibble the
//! next 16. Value = `d * (0.5 + nibble) * 0.25 * magnitude * sign`.

use bytemuck::{Pod, Zeroable};

use super::grid_iq2::IQ2XS_GRID;
use super::tables::{apply_sign, grid8, ksigns, sign_i32};
use crate::ggml_type::GgmlType;
use crate::quant::activation::{BlockQ8K, QK_K};
use crate::quant::cast::{f16_le, Block};

/// `block_iq2_xs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockIq2Xs {
    /// Super-block scale, f16 little-endian.
    pub d: [u8; 2],
    /// 8 groups of 4 codes, each a little-endian u16 (9-bit grid index, 7-bit sign code).
    pub qs: [[[u8; 2]; 4]; QK_K / 32],
    /// One byte per group: two 4-bit scales.
    pub scales: [u8; QK_K / 32],
}

impl Block for BlockIq2Xs {
    const TYPE: GgmlType = GgmlType::IQ2_XS;
}

const _: () =
    assert!(core::mem::size_of::<BlockIq2Xs>() == GgmlType::IQ2_XS.block_bytes() as usize);

/// The magnitudes and sign bits of one 16-bit code.
fn decode(code: [u8; 2]) -> ([u8; 8], u8) {
    let code = u16::from_le_bytes(code);
    (
        grid8(&IQ2XS_GRID, usize::from(code & 511)),
        ksigns(u32::from(code >> 9)),
    )
}

/// `dequantize_row_iq2_xs` for one block.
pub(crate) fn dequantize_block(block: &BlockIq2Xs, out: &mut [f32; QK_K]) {
    let d = f16_le(block.d);
    for ((codes, &scale), out) in block
        .qs
        .iter()
        .zip(&block.scales)
        .zip(out.chunks_exact_mut(32))
    {
        let db = [
            d * (0.5 + f32::from(scale & 0xf)) * 0.25,
            d * (0.5 + f32::from(scale >> 4)) * 0.25,
        ];
        for (l, (&code, out)) in codes.iter().zip(out.chunks_exact_mut(8)).enumerate() {
            let (grid, signs) = decode(code);
            let dl = db[l / 2];
            for (j, (y, g)) in out.iter_mut().zip(grid).enumerate() {
                *y = apply_sign(dl * f32::from(g), signs, j);
            }
        }
    }
}

/// The signed integer dot of 8 values coded by `code` with 8 activations.
fn dot8(code: [u8; 2], q8: &[i8]) -> i32 {
    let (grid, signs) = decode(code);
    let mut sumi = 0i32;
    for (j, (&g, &q)) in grid.iter().zip(q8).enumerate() {
        sumi += i32::from(g) * i32::from(q) * sign_i32(signs, j);
    }
    sumi
}

/// `ggml_vec_dot_iq2_xs_q8_K_generic`. Integer sums stay below 2^31 (256 · 43 · 128 · 31).
pub(crate) fn vec_dot(xs: &[BlockIq2Xs], ys: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (x, y) in xs.iter().zip(ys) {
        let d = f16_le(x.d) * y.scale();
        let mut bsum = 0i32;
        for ((codes, &scale), q8) in x.qs.iter().zip(&x.scales).zip(y.qs.chunks_exact(32)) {
            let ls1 = 2 * i32::from(scale & 0xf) + 1;
            let ls2 = 2 * i32::from(scale >> 4) + 1;
            let mut sums = [0i32; 4];
            for ((sum, &code), q8) in sums.iter_mut().zip(codes).zip(q8.chunks_exact(8)) {
                *sum = dot8(code, q8);
            }
            bsum += (sums[0] + sums[1]) * ls1;
            bsum += (sums[2] + sums[3]) * ls2;
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
        // d = 2.0 (0x4000). Group 0: codes 1 | 1 << 9 (grid entry 1 = 0x2b then seven 0x08; sign
        // code 1: values 0 and 7 negative), 511 (entry 511: eight 0x2b), 0, 0; scale byte 0x21:
        // db0 = 2 · (0.5 + 1) · 0.25 = 0.75 for codes 0, 1 and db1 = 2 · 2.5 · 0.25 = 1.25 for
        // codes 2, 3. So: 43 · 0.75 = 32.25, 8 · 0.75 = 6, 8 · 1.25 = 10. Other groups: scale 0,
        // db = 2 · 0.5 · 0.25 = 0.25, entry 0 -> 2.
        let mut block = BlockIq2Xs {
            d: [0x00, 0x40],
            qs: [[[0; 2]; 4]; 8],
            scales: [0; 8],
        };
        block.qs[0][0] = (1u16 | (1 << 9)).to_le_bytes();
        block.qs[0][1] = 511u16.to_le_bytes();
        block.scales[0] = 0x21;
        let mut out = [0.0f32; QK_K];
        dequantize_block(&block, &mut out);
        assert_eq!(out[..8], [-32.25, 6.0, 6.0, 6.0, 6.0, 6.0, 6.0, -6.0]);
        assert_eq!(out[8..16], [32.25; 8]);
        assert_eq!(out[16..32], [10.0; 16]);
        assert!(out[32..].iter().all(|&v| v == 2.0));
    }
}
