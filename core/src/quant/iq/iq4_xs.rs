//! IQ4_XS: 256 values in 136 bytes (4.25 bits per weight). An f16 super-block scale `d` and, per
//! group of 32 values, a 6-bit scale `ls` (low 4 bits in `scales_l`, nibble `ib % 2` of byte
//! `ib / 2`; high 2 bits in `scales_h`, bits `2ib..2ib+2`) and 32 four-bit indices into
//! `kvalues_iq4nl`, packed as in IQ4_NL. Value = `d * (ls - 32) * level`.

use bytemuck::{Pod, Zeroable};

use super::iq4_search::{best_index, group_scale, pack_levels};
use super::tables::iq4_level;
use crate::ggml_type::GgmlType;
use crate::quant::activation::{BlockQ8K, QK_K};
use crate::quant::cast::{f16_le, f16_to_le, Block};
use crate::quant::float::{fabsf, nearest_int};

/// `block_iq4_xs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockIq4Xs {
    /// Super-block scale, f16 little-endian.
    pub d: [u8; 2],
    /// High 2 bits of the 8 group scales, a little-endian u16.
    pub scales_h: [u8; 2],
    /// Low 4 bits of the 8 group scales, two per byte.
    pub scales_l: [u8; QK_K / 64],
    /// Level indices, 16 bytes per group of 32 values.
    pub qs: [[u8; 16]; QK_K / 32],
}

impl Block for BlockIq4Xs {
    const TYPE: GgmlType = GgmlType::IQ4_XS;
}

const _: () =
    assert!(core::mem::size_of::<BlockIq4Xs>() == GgmlType::IQ4_XS.block_bytes() as usize);

/// The 6-bit scale of group `ib`.
fn group_scale_code(block: &BlockIq4Xs, ib: usize) -> i32 {
    let low = (block.scales_l[(ib / 2) % 4] >> (4 * (ib % 2))) & 0xf;
    let high = (u16::from_le_bytes(block.scales_h) >> (2 * ib)) & 3;
    i32::from(low) | (i32::from(high) << 4)
}

/// `dequantize_row_iq4_xs` for one block.
pub(crate) fn dequantize_block(block: &BlockIq4Xs, out: &mut [f32; QK_K]) {
    let d = f16_le(block.d);
    for (ib, (qs, out)) in block.qs.iter().zip(out.chunks_exact_mut(32)).enumerate() {
        let dl = d * (group_scale_code(block, ib) - 32) as f32;
        let (low, high) = out.split_at_mut(16);
        for ((&q, lo), hi) in qs.iter().zip(low).zip(high) {
            *lo = dl * f32::from(iq4_level(q));
            *hi = dl * f32::from(iq4_level(q >> 4));
        }
    }
}

/// `quantize_row_iq4_xs_ref` for one block: per group, a least-squares scale refined over 15
/// restarts (`ntry = 7`); then the group scales are quantized to 6 bits against the super-block
/// scale `-max_scale / 32` and every group's indices are recomputed for its quantized scale.
/// Every byte is defined, even for an all-zero block.
pub(crate) fn quantize_block(x: &[f32; QK_K]) -> BlockIq4Xs {
    let groups = || {
        x.chunks_exact(32)
            .filter_map(|g| <&[f32; 32]>::try_from(g).ok())
    };
    let mut scales = [0.0f32; QK_K / 32];
    let mut levels = [[0u8; 32]; QK_K / 32];
    let mut max_scale = 0.0f32;
    let mut amax_scale = 0.0f32;
    for ((xb, lb), scale) in groups().zip(&mut levels).zip(&mut scales) {
        let Some(d) = group_scale(xb, 7, lb) else {
            continue;
        };
        *scale = d;
        let abs_d = fabsf(d);
        if abs_d > amax_scale {
            amax_scale = abs_d;
            max_scale = d;
        }
    }

    let d = -max_scale / 32.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut scales_h = 0u16;
    let mut scales_l = [0u8; QK_K / 64];
    for (ib, ((xb, lb), &scale)) in groups().zip(&mut levels).zip(&scales).enumerate() {
        let l = nearest_int(id * scale).clamp(-32, 31);
        let dl = d * l as f32;
        let idl = if dl != 0.0 { 1.0 / dl } else { 0.0 };
        for (level, &x) in lb.iter_mut().zip(xb) {
            *level = best_index(idl * x);
        }
        // 0..=63 after the shift.
        let code = (l + 32) as u8;
        if let Some(byte) = scales_l.get_mut(ib / 2) {
            *byte |= (code & 0xf) << (4 * (ib % 2));
        }
        scales_h |= u16::from(code >> 4) << (2 * ib);
    }
    BlockIq4Xs {
        d: f16_to_le(d),
        scales_h: scales_h.to_le_bytes(),
        scales_l,
        qs: levels.map(|l| pack_levels(&l)),
    }
}

/// `ggml_vec_dot_iq4_xs_q8_K_generic`: one float accumulation per group of 32, in group order.
pub(crate) fn vec_dot(xs: &[BlockIq4Xs], ys: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (x, y) in xs.iter().zip(ys) {
        let d4d8 = f16_le(x.d) * y.scale();
        for (ib, (qs, q8)) in x.qs.iter().zip(y.qs.chunks_exact(32)).enumerate() {
            let dl = d4d8 * (group_scale_code(x, ib) - 32) as f32;
            let (q8_low, q8_high) = q8.split_at(16);
            let mut sumi1 = 0i32;
            let mut sumi2 = 0i32;
            for ((&q, &lo), &hi) in qs.iter().zip(q8_low).zip(q8_high) {
                sumi1 += i32::from(lo) * i32::from(iq4_level(q));
                sumi2 += i32::from(hi) * i32::from(iq4_level(q >> 4));
            }
            sumf += dl * (sumi1 + sumi2) as f32;
        }
    }
    sumf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dequantize_hand_built_block() {
        // d = 1.0. Group 0: ls = 33 = 0b10_0001 (low nibble 1 in scales_l[0], high bits 2 in
        // scales_h bits 0..2) -> dl = 1. Group 1: ls = 31 = 0b01_1111 (high nibble 0xf, scales_h
        // bits 2..4 = 1) -> dl = -1. Groups 2..8: ls = 0 -> dl = -32. scales_h = 0b0110.
        // Group 0 byte 0 = 0xf8: value 0 -> level 8 (1) -> 1, value 16 -> level 15 (113) -> 113.
        // Group 1 byte 0 = 0: level -127 -> 127. Group 2 value 0: -32 · -127 = 4064.
        let mut block = BlockIq4Xs {
            d: [0x00, 0x3c],
            scales_h: [0b0110, 0],
            scales_l: [0xf1, 0, 0, 0],
            qs: [[0; 16]; 8],
        };
        block.qs[0][0] = 0xf8;
        let mut out = [0.0f32; QK_K];
        dequantize_block(&block, &mut out);
        assert_eq!((out[0], out[16], out[1]), (1.0, 113.0, -127.0));
        assert_eq!((out[32], out[48]), (127.0, 127.0));
        assert_eq!(out[64], 4064.0);
    }

    #[test]
    fn zero_block_is_fully_defined() {
        // All groups skipped: max_scale = 0, d = -0/32 = -0.0 (f16 0x8000); every group scale
        // quantizes to l = 0 -> code 32 (scales_l nibbles 0, scales_h bits 2); indices are
        // best_index(0) = 8 (level 1 is nearest to 0).
        let block = quantize_block(&[0.0; QK_K]);
        assert_eq!(block.d, [0x00, 0x80]);
        assert_eq!(block.scales_l, [0; 4]);
        assert_eq!(u16::from_le_bytes(block.scales_h), 0xaaaa);
        assert!(block.qs.iter().flatten().all(|&q| q == 0x88));
    }
}
