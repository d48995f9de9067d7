//! IQ4_NL: 32 values in 18 bytes (4.5 bits per weight): an f16 scale `d` and 32 four-bit indices
//! into the non-linear levels `kvalues_iq4nl` (value `j` in the low nibble of byte `j`, value
//! `j + 16` in its high nibble). Value = `d * level`.

use bytemuck::{Pod, Zeroable};

use super::iq4_search::{group_scale, pack_levels};
use super::tables::iq4_level;
use crate::ggml_type::GgmlType;
use crate::quant::activation::BlockQ8_0;
use crate::quant::cast::{f16_le, f16_to_le, Block};

/// Values per IQ4_NL block.
pub const QK4_NL: usize = 32;

/// `block_iq4_nl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockIq4Nl {
    /// Scale, f16 little-endian.
    pub d: [u8; 2],
    /// Level indices, two per byte.
    pub qs: [u8; QK4_NL / 2],
}

impl Block for BlockIq4Nl {
    const TYPE: GgmlType = GgmlType::IQ4_NL;
}

const _: () =
    assert!(core::mem::size_of::<BlockIq4Nl>() == GgmlType::IQ4_NL.block_bytes() as usize);

/// `dequantize_row_iq4_nl` for one block.
pub(crate) fn dequantize_block(block: &BlockIq4Nl, out: &mut [f32; QK4_NL]) {
    let d = f16_le(block.d);
    let (low, high) = out.split_at_mut(QK4_NL / 2);
    for ((&q, lo), hi) in block.qs.iter().zip(low).zip(high) {
        *lo = d * f32::from(iq4_level(q));
        *hi = d * f32::from(iq4_level(q >> 4));
    }
}

/// `quantize_row_iq4_nl_ref` for one block: one least-squares pass, no refinement (ggml passes
/// `ntry = -1`).
///
/// ggml leaves `qs` uninitialised (in practice: the previous block's indices) when the block's
/// largest |x| is below 1e-15; only `d` (zero) is defined then. We write zero indices there.
pub(crate) fn quantize_block(x: &[f32; QK4_NL]) -> BlockIq4Nl {
    let mut levels = [0u8; QK4_NL];
    let scale = group_scale(x, -1, &mut levels).unwrap_or(0.0);
    BlockIq4Nl {
        d: f16_to_le(scale),
        qs: pack_levels(&levels),
    }
}

/// `ggml_vec_dot_iq4_nl_q8_0_generic`.
pub(crate) fn vec_dot(xs: &[BlockIq4Nl], ys: &[BlockQ8_0]) -> f32 {
    let mut sumf = 0.0f32;
    for (x, y) in xs.iter().zip(ys) {
        let d = f16_le(y.d) * f16_le(x.d);
        let (y_low, y_high) = y.qs.split_at(QK4_NL / 2);
        let mut sumi1 = 0i32;
        let mut sumi2 = 0i32;
        for ((&q, &lo), &hi) in x.qs.iter().zip(y_low).zip(y_high) {
            sumi1 += i32::from(lo) * i32::from(iq4_level(q));
            sumi2 += i32::from(hi) * i32::from(iq4_level(q >> 4));
        }
        sumf += d * (sumi1 + sumi2) as f32;
    }
    sumf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dequantize_hand_built_block() {
        // d = 0.5 (0x3800). Byte 0 = 0xf0: value 0 -> level 0 (-127) -> -63.5, value 16 -> level
        // 15 (113) -> 56.5. Byte 1 = 0x78: value 1 -> level 8 (1) -> 0.5, value 17 -> level 7
        // (-10) -> -5. Other bytes 0 -> -63.5.
        let mut block = BlockIq4Nl {
            d: [0x00, 0x38],
            qs: [0; 16],
        };
        block.qs[0] = 0xf0;
        block.qs[1] = 0x78;
        let mut out = [0.0f32; QK4_NL];
        dequantize_block(&block, &mut out);
        assert_eq!((out[0], out[16], out[1], out[17]), (-63.5, 56.5, 0.5, -5.0));
        assert!(out[2..16].iter().chain(&out[18..]).all(|&v| v == -63.5));
    }

    #[test]
    fn quantize_recovers_levels_times_a_scale() {
        // x_j = 0.01 · level(j % 16) (j < 16) and 0.01 · level(15 - j % 16) (j >= 16): max |x| is
        // 1.27 at level -127, so the first scale guess is 1.27 / 127 = 0.01 and every x maps to its
        // own level; the least-squares scale stays 0.01 up to rounding.
        let x: [f32; QK4_NL] = core::array::from_fn(|j| {
            let code = if j < 16 { j } else { 15 - (j - 16) };
            0.01 * f32::from(iq4_level(code as u8))
        });
        let block = quantize_block(&x);
        for (j, &q) in block.qs.iter().enumerate() {
            assert_eq!(usize::from(q & 0xf), j);
            assert_eq!(usize::from(q >> 4), 15 - j);
        }
        let d = f16_le(block.d);
        assert!((d - 0.01).abs() < 0.01 / 1024.0, "d = {d}");
    }
}
