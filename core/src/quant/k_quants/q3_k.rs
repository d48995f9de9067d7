//! Q3_K: 256 values in 16 sub-blocks of 16, 3-bit quants (2 low bits in `qs`, the third in
//! `hmask`) and 6-bit signed sub-block scales scaled by the f16 `d`: value = `d*(sc-32) * (q-4)`.

use super::common::{make_q3_quants, pack_2bit, sub_blocks, sub_blocks_mut, unpack_q3_scales};
use super::dot::{accumulate_lanes, add_lanes, scaled_lane_sums};
use crate::ggml_type::GgmlType;
use crate::quant::activation::{BlockQ8K, QK_K};
use crate::quant::arrays::map;
use crate::quant::cast::{f16_le, f16_to_le, Block};
use crate::quant::float::nearest_int;
use bytemuck::{Pod, Zeroable};

/// `block_q3_K`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockQ3K {
    /// Third bits: element `e` uses bit `e / 32` of byte `e % 32`; a clear bit subtracts 4.
    pub hmask: [u8; QK_K / 8],
    /// Low 2 bits, packed as Q2_K's quants.
    pub qs: [u8; QK_K / 4],
    /// 16 six-bit scales, offset by 32 (see `unpack_q3_scales`).
    pub scales: [u8; 12],
    /// Super-block scale, f16 little-endian.
    pub d: [u8; 2],
}

impl Block for BlockQ3K {
    const TYPE: GgmlType = GgmlType::Q3_K;
}

/// The 256 signed quants (`-4..=3`) of a block, in element order. In each half of 128 values, the
/// 32-value chunk `c` takes its low bits from the half's 32 `qs` bytes at bit offset `2c` and its
/// third bit from bit `4·half + c` of the 32 `hmask` bytes.
#[inline(always)]
fn signed_quants(block: &BlockQ3K) -> [i8; QK_K] {
    let mut quants = [0i8; QK_K];
    for (half, (values, bytes)) in sub_blocks_mut::<128, _>(&mut quants)
        .zip(sub_blocks::<32, _>(&block.qs))
        .enumerate()
    {
        for (chunk, out) in sub_blocks_mut::<32, _>(values).enumerate() {
            let shift = 2 * chunk as u32;
            let bit = (4 * half + chunk) as u32;
            for ((y, &q), &h) in out.iter_mut().zip(bytes).zip(&block.hmask) {
                // A clear third bit means `low - 4`, a set one `low`: `(low | bit << 2) - 4`.
                *y = (((q >> shift) & 3) | (((h >> bit) & 1) << 2)) as i8 - 4;
            }
        }
    }
    quants
}

/// `dequantize_row_q3_K` for one block.
pub fn dequantize_block(block: &BlockQ3K, out: &mut [f32; QK_K]) {
    let d_all = f16_le(block.d);
    let scales = unpack_q3_scales(&block.scales);
    let quants = signed_quants(block);
    for ((values, qs), &sc) in sub_blocks_mut::<16, _>(out)
        .zip(sub_blocks::<16, _>(&quants))
        .zip(&scales)
    {
        let dl = d_all * (sc as i32 - 32) as f32;
        for (y, &q) in values.iter_mut().zip(qs) {
            *y = dl * q as f32;
        }
    }
}

/// `quantize_row_q3_K_ref` for one block.
pub fn quantize_block(x: &[f32; QK_K]) -> BlockQ3K {
    let mut levels = [0i8; QK_K];
    let mut scales = [0.0f32; QK_K / 16];
    let mut max_scale = 0.0f32;
    let mut amax = 0.0f32;
    for ((xs, ls), scale) in sub_blocks::<16, _>(x)
        .zip(sub_blocks_mut::<16, _>(&mut levels))
        .zip(&mut scales)
    {
        *scale = make_q3_quants(4, xs, ls);
        let abs_scale = scale.abs();
        if abs_scale > amax {
            amax = abs_scale;
            max_scale = *scale;
        }
    }

    let mut block = BlockQ3K::zeroed();
    if max_scale != 0.0 {
        let iscale = -32.0 / max_scale;
        // C stores nearest_int in an int8_t before clamping.
        let levels6 = map(&scales, |s| {
            ((nearest_int(iscale * s) as i8 as i32).clamp(-32, 31) + 32) as u8
        });
        // Scale `j`'s low 4 bits go to byte `j % 8` (the high nibble for `j >= 8`), its top 2 bits
        // to byte `8 + j % 4` at bit offset `2 * (j / 4)`.
        let (first, second) = levels6.split_at(8);
        let (low, high) = block.scales.split_at_mut(8);
        for ((packed, &a), &b) in low.iter_mut().zip(first).zip(second) {
            *packed = (a & 0x0f) | ((b & 0x0f) << 4);
        }
        for (quarter, four) in sub_blocks::<4, _>(&levels6).enumerate() {
            for (packed, &l) in high.iter_mut().zip(four) {
                *packed |= (l >> 4) << (2 * quarter);
            }
        }
        block.d = f16_to_le(1.0 / iscale);
    } else {
        block.d = f16_to_le(0.0);
    }

    // Re-quantize against the rounded scales; sub-blocks whose scale is 0 keep the search's levels.
    let d_all = f16_le(block.d);
    let packed_scales = unpack_q3_scales(&block.scales);
    for ((xs, ls), &sc) in sub_blocks::<16, _>(x)
        .zip(sub_blocks_mut::<16, _>(&mut levels))
        .zip(&packed_scales)
    {
        let d = d_all * (sc as i32 - 32) as f32;
        if d == 0.0 {
            continue;
        }
        for (l, &v) in ls.iter_mut().zip(xs) {
            *l = (nearest_int(v / d).clamp(-4, 3) + 4) as i8;
        }
    }

    let mut low_bits = [0u8; QK_K];
    for (e, (low, &l)) in low_bits.iter_mut().zip(&levels).enumerate() {
        if l > 3 {
            block.hmask[e % 32] |= 1 << (e / 32);
            *low = (l - 4) as u8;
        } else {
            *low = l as u8;
        }
    }
    block.qs = pack_2bit(&low_bits);
    block
}

/// `ggml_vec_dot_q3_K_q8_K_generic`: eight i32 lanes per super-block (lane = element index mod 8),
/// `sums[lane] += d * lane_sum` across blocks, and the 8 lane totals added in order at the end.
pub fn vec_dot(w: &[BlockQ3K], x: &[BlockQ8K]) -> f32 {
    let mut sums = [0.0f32; 8];
    for (wb, xb) in w.iter().zip(x) {
        let scales = map(&unpack_q3_scales(&wb.scales), |sc| i16::from(sc) - 32);
        let lanes = scaled_lane_sums(&signed_quants(wb), &xb.qs, &scales);
        accumulate_lanes(&mut sums, f16_le(wb.d) * xb.scale(), &lanes);
    }
    add_lanes(0.0, &sums)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_grid_block_by_hand() {
        // x = -(e % 8 - 4) / 2 = 2, 1.5, ..., -1.5: the signed max is 2, so make_q3_quants starts at
        // iscale = -4/2 and gets levels e % 8 - 4 with scale -0.5 exactly (the fit is exact, no
        // level moves). All 16 scales are -0.5: iscale = -32/-0.5 = 64, each scale level
        // nearest_int(64 * -0.5) = -32 -> stored 0, d = f16(1/64) = 0x2400. Re-quantizing with
        // d * (0 - 32) = -0.5 gives levels e % 8; the third bit is set for e % 8 >= 4.
        let x: [f32; QK_K] = core::array::from_fn(|e| -((e % 8) as f32 - 4.0) * 0.5);
        let block = quantize_block(&x);
        assert_eq!(block.scales, [0; 12]);
        assert_eq!(u16::from_le_bytes(block.d), 0x2400);
        for (b, &h) in block.hmask.iter().enumerate() {
            assert_eq!(h, if b % 8 >= 4 { 0xff } else { 0 }, "hmask[{b}]");
        }
        for (l, &q) in block.qs.iter().enumerate() {
            assert_eq!(q, (l % 4) as u8 * 0x55, "qs[{l}]");
        }
        let mut y = [0.0f32; QK_K];
        dequantize_block(&block, &mut y);
        assert_eq!(y, x);
    }
}
