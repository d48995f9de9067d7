//! Q6_K: 256 values in 16 sub-blocks of 16, 6-bit quants (4 low bits in `ql`, 2 high bits in `qh`)
//! and signed 8-bit sub-block scales scaled by the f16 `d`: value = `d*sc * (q - 32)`.

use super::common::{make_qx_quants, sub_blocks, sub_blocks_mut, GROUP_MAX_EPS};
use super::dot::{accumulate_lanes, add_lanes, scaled_lane_sums};
use crate::ggml_type::GgmlType;
use crate::quant::activation::{BlockQ8K, QK_K};
use crate::quant::arrays::map;
use crate::quant::cast::{f16_le, f16_to_le, Block};
use crate::quant::float::nearest_int;
use bytemuck::{Pod, Zeroable};

/// `block_q6_K`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockQ6K {
    /// Low 4 bits: in each 128 values, byte `l` of the half's 64 holds value `l` (`l < 64`) in its
    /// low nibble and value `l + 64` in its high nibble.
    pub ql: [u8; QK_K / 2],
    /// High 2 bits: in each 128 values, byte `l` (`l < 32`) holds values `l`, `l + 32`, `l + 64` and
    /// `l + 96` at bit offsets 0, 2, 4 and 6.
    pub qh: [u8; QK_K / 4],
    /// Sub-block scales.
    pub scales: [i8; QK_K / 16],
    /// Super-block scale, f16 little-endian.
    pub d: [u8; 2],
}

impl Block for BlockQ6K {
    const TYPE: GgmlType = GgmlType::Q6_K;
}

/// The 256 signed quants (`-32..32`) of a block, in element order. Each half of 128 values reads
/// 64 `ql` bytes and 32 `qh` bytes: for `l < 32`, `ql[l]` and `ql[l + 32]` give the low nibbles of
/// values `l` and `l + 32` and the high nibbles of values `l + 64` and `l + 96`, whose top two bits
/// sit in `qh[l]` at bit offsets 0, 2, 4 and 6.
#[inline(always)]
fn signed_quants(block: &BlockQ6K) -> [i8; QK_K] {
    let mut quants = [0i8; QK_K];
    for ((values, ql), qh) in sub_blocks_mut::<128, _>(&mut quants)
        .zip(sub_blocks::<64, _>(&block.ql))
        .zip(sub_blocks::<32, _>(&block.qh))
    {
        let (first, second) = ql.split_at(32);
        let (v0, rest) = values.split_at_mut(32);
        let (v1, rest) = rest.split_at_mut(32);
        let (v2, v3) = rest.split_at_mut(32);
        let outputs = v0.iter_mut().zip(v1).zip(v2).zip(v3);
        for ((((y0, y1), y2), y3), ((&a, &b), &h)) in outputs.zip(first.iter().zip(second).zip(qh))
        {
            *y0 = ((a & 0x0f) | ((h & 3) << 4)) as i8 - 32;
            *y1 = ((b & 0x0f) | (((h >> 2) & 3) << 4)) as i8 - 32;
            *y2 = ((a >> 4) | (((h >> 4) & 3) << 4)) as i8 - 32;
            *y3 = ((b >> 4) | ((h >> 6) << 4)) as i8 - 32;
        }
    }
    quants
}

/// `dequantize_row_q6_K` for one block: `(d * sc) * q`, in that order.
pub fn dequantize_block(block: &BlockQ6K, out: &mut [f32; QK_K]) {
    let d = f16_le(block.d);
    let quants = signed_quants(block);
    for ((values, qs), &sc) in sub_blocks_mut::<16, _>(out)
        .zip(sub_blocks::<16, _>(&quants))
        .zip(&block.scales)
    {
        for (y, &q) in values.iter_mut().zip(qs) {
            *y = d * sc as f32 * q as f32;
        }
    }
}

/// `quantize_row_q6_K_ref` for one block. An all-zero block (largest sub-scale below 1e-15) is all
/// zero bytes, including `d = +0`.
pub fn quantize_block(x: &[f32; QK_K]) -> BlockQ6K {
    let mut levels = [0i8; QK_K];
    let mut scales = [0.0f32; QK_K / 16];
    for ((xs, ls), scale) in sub_blocks::<16, _>(x)
        .zip(sub_blocks_mut::<16, _>(&mut levels))
        .zip(&mut scales)
    {
        *scale = make_qx_quants(32, xs, ls);
    }
    block_from_fits(x, &scales, levels)
}

/// The rest of `quantize_row_q6_K_ref` after each sub-block's `make_qx_quants` (its scale and
/// levels, stored `+32`): the 8-bit scales, the values re-quantized against them, the packing.
/// (The SIMD levels run the 16 searches side by side and share this.)
pub(crate) fn block_from_fits(
    x: &[f32; QK_K],
    scales: &[f32; QK_K / 16],
    mut levels: [i8; QK_K],
) -> BlockQ6K {
    let mut max_scale = 0.0f32;
    let mut max_abs_scale = 0.0f32;
    for &scale in scales {
        let abs_scale = scale.abs();
        if abs_scale > max_abs_scale {
            max_abs_scale = abs_scale;
            max_scale = scale;
        }
    }

    let mut block = BlockQ6K::zeroed();
    if max_abs_scale < GROUP_MAX_EPS {
        block.d = f16_to_le(0.0);
        return block;
    }

    let iscale = -128.0 / max_scale;
    block.d = f16_to_le(1.0 / iscale);
    for (packed, &scale) in block.scales.iter_mut().zip(scales) {
        *packed = nearest_int(iscale * scale).min(127) as i8;
    }

    // Re-quantize against the rounded scales; sub-blocks whose scale is 0 keep the search's levels.
    let d_all = f16_le(block.d);
    for ((xs, ls), &sc) in sub_blocks::<16, _>(x)
        .zip(sub_blocks_mut::<16, _>(&mut levels))
        .zip(&block.scales)
    {
        let d = d_all * sc as f32;
        if d == 0.0 {
            continue;
        }
        for (l, &v) in ls.iter_mut().zip(xs) {
            *l = (nearest_int(v / d).clamp(-32, 31) + 32) as i8;
        }
    }

    for (e, &l) in levels.iter().enumerate() {
        let (half, r) = (e / 128, e % 128);
        let l = l as u8;
        let low = &mut block.ql[64 * half + r % 64];
        if r < 64 {
            *low |= l & 0x0f;
        } else {
            *low |= (l & 0x0f) << 4;
        }
        block.qh[32 * half + r % 32] |= (l >> 4) << (2 * (r / 32));
    }
    block
}

/// `ggml_vec_dot_q6_K_q8_K_generic`: eight i32 lanes per super-block, `sums[lane] += d * lane_sum`
/// across blocks, and the lane totals added in order at the end.
pub fn vec_dot(w: &[BlockQ6K], x: &[BlockQ8K]) -> f32 {
    let mut sums = [0.0f32; 8];
    for (wb, xb) in w.iter().zip(x) {
        let lanes = scaled_lane_sums(&signed_quants(wb), &xb.qs, &map(&wb.scales, i16::from));
        accumulate_lanes(&mut sums, f16_le(wb.d) * xb.scale(), &lanes);
    }
    add_lanes(0.0, &sums)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_grid_block_by_hand() {
        // x = 8 - e % 16: each sub-block is 8, 7, ..., -7 with signed max 8, so make_qx_quants uses
        // iscale = -32/8 and levels l = 4 * (e % 16) - 32 with scale -0.25 exactly. Then
        // iscale = -128 / -0.25 = 512, d = f16(1/512) = 0x1800 and every scale
        // min(127, nearest_int(512 * -0.25)) = -128. Re-quantizing with d * -128 = -0.25 stores
        // L = 4 * (e % 16): low nibble (4k) & 15 in ql, high bits k / 4 in qh.
        let x: [f32; QK_K] = core::array::from_fn(|e| 8.0 - (e % 16) as f32);
        let block = quantize_block(&x);
        assert_eq!(u16::from_le_bytes(block.d), 0x1800);
        assert_eq!(block.scales, [-128; 16]);
        for (i, &q) in block.ql.iter().enumerate() {
            let k = (i % 16) as u8;
            assert_eq!(q, ((4 * k) & 15) * 0x11, "ql[{i}]");
        }
        for (i, &q) in block.qh.iter().enumerate() {
            let k = (i % 16) as u8;
            assert_eq!(q, (k / 4) * 0x55, "qh[{i}]");
        }
        let mut y = [0.0f32; QK_K];
        dequantize_block(&block, &mut y);
        assert_eq!(y, x);
    }

    #[test]
    fn zero_block_is_zero_bytes() {
        let block = quantize_block(&[0.0; QK_K]);
        assert_eq!(block, BlockQ6K::zeroed());
        let block = quantize_block(&[1e-16; QK_K]);
        assert_eq!(block, BlockQ6K::zeroed());
    }
}
