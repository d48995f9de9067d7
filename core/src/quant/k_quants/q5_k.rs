//! Q5_K: Q4_K with a fifth bit per quant in `qh`: value = `d*sc * q - dmin*m` with `q` in `0..32`.

use super::common::{scale_min_k4, sub_blocks, sub_blocks_mut, Qkx2Search};
use super::q4_k::{requantize, search_sub_blocks, vec_dot_with_mins, DotParts};
use crate::ggml_type::GgmlType;
use crate::quant::activation::{BlockQ8K, QK_K};
use crate::quant::cast::{f16_le, Block};
use bytemuck::{Pod, Zeroable};

/// `block_q5_K`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockQ5K {
    /// Super-block scale of the scales, f16 little-endian.
    pub d: [u8; 2],
    /// Super-block scale of the mins, f16 little-endian.
    pub dmin: [u8; 2],
    /// 8 scales and 8 mins of 6 bits (as Q4_K).
    pub scales: [u8; 12],
    /// Fifth bits: element `e` uses bit `e / 32` of byte `e % 32`.
    pub qh: [u8; QK_K / 8],
    /// Low 4 bits, laid out as Q4_K's quants.
    pub qs: [u8; QK_K / 2],
}

impl Block for BlockQ5K {
    const TYPE: GgmlType = GgmlType::Q5_K;
}

/// The 256 quants (`0..32`) of a block, in element order: each 32 bytes of `qs` give 32 low nibbles,
/// then 32 high nibbles (as Q4_K), and chunk `c` of 32 elements takes its fifth bit from bit `c` of
/// the 32 `qh` bytes.
#[inline(always)]
fn quants(block: &BlockQ5K) -> [i8; QK_K] {
    let mut quants = [0i8; QK_K];
    for (pair, (values, bytes)) in sub_blocks_mut::<64, _>(&mut quants)
        .zip(sub_blocks::<32, _>(&block.qs))
        .enumerate()
    {
        let shift = 2 * pair as u32;
        let (low, high) = values.split_at_mut(32);
        for (((lo, hi), &q), &h) in low.iter_mut().zip(high).zip(bytes).zip(&block.qh) {
            *lo = ((q & 0x0f) | (((h >> shift) & 1) << 4)) as i8;
            *hi = ((q >> 4) | (((h >> (shift + 1)) & 1) << 4)) as i8;
        }
    }
    quants
}

/// `dequantize_row_q5_K` for one block.
pub fn dequantize_block(block: &BlockQ5K, out: &mut [f32; QK_K]) {
    let d = f16_le(block.d);
    let min = f16_le(block.dmin);
    let quants = quants(block);
    for (j, (values, qs)) in sub_blocks_mut::<32, _>(out)
        .zip(sub_blocks::<32, _>(&quants))
        .enumerate()
    {
        let (sc, m) = scale_min_k4(j, &block.scales);
        let (dl, ml) = (d * sc as f32, min * m as f32);
        for (y, &q) in values.iter_mut().zip(qs) {
            *y = dl * q as f32 - ml;
        }
    }
}

/// The sub-block search of `quantize_row_q5_K_ref` (`make_qkx2_quants(32, 31, ..., -0.5, 0.1,
/// 15, false)`).
pub(crate) const Q5K_SEARCH: Qkx2Search = Qkx2Search {
    nmax: 31,
    rmin: -0.5,
    rdelta: 0.1,
    nstep: 15,
    use_mad: false,
};

/// `quantize_row_q5_K_ref` for one block.
pub fn quantize_block(x: &[f32; QK_K]) -> BlockQ5K {
    let (scales, d, dmin, mut levels) = search_sub_blocks(x, Q5K_SEARCH);
    requantize(x, &scales, d, dmin, 31, &mut levels);
    block_from_levels(d, dmin, scales, &levels)
}

/// A block from its packed scales and its final levels (`0..32`): low nibbles as Q4_K's, fifth
/// bits in `qh`.
pub(crate) fn block_from_levels(
    d: [u8; 2],
    dmin: [u8; 2],
    scales: [u8; 12],
    levels: &[u8; QK_K],
) -> BlockQ5K {
    let mut block = BlockQ5K {
        d,
        dmin,
        scales,
        qh: [0; QK_K / 8],
        qs: [0; QK_K / 2],
    };
    for (e, &l) in levels.iter().enumerate() {
        let low = if l > 15 {
            block.qh[e % 32] |= 1 << (e / 32);
            l - 16
        } else {
            l
        };
        let byte = &mut block.qs[32 * (e / 64) + e % 32];
        if e % 64 < 32 {
            *byte |= low;
        } else {
            *byte |= low << 4;
        }
    }
    block
}

/// `ggml_vec_dot_q5_K_q8_K_generic` (the same float order as Q4_K's).
pub fn vec_dot(w: &[BlockQ5K], x: &[BlockQ8K]) -> f32 {
    vec_dot_with_mins(w, x, |b| DotParts {
        quants: quants(b),
        scales: b.scales,
        d: f16_le(b.d),
        dmin: f16_le(b.dmin),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_grid_block_by_hand() {
        // x = e % 32: each sub-block is 0..31: scale 1, min 0; d = f16(1/63) as in Q4_K. The fifth
        // bit of element e is set when e % 32 >= 16, so qh[b] is 0xff for b >= 16; the low nibbles
        // of elements l and l + 32 of a 64-chunk are both l % 16.
        let x: [f32; QK_K] = core::array::from_fn(|e| (e % 32) as f32);
        let block = quantize_block(&x);
        assert_eq!(u16::from_le_bytes(block.d), 0x2410);
        assert_eq!(block.dmin, [0, 0]);
        for (b, &h) in block.qh.iter().enumerate() {
            assert_eq!(h, if b >= 16 { 0xff } else { 0 }, "qh[{b}]");
        }
        for (l, &q) in block.qs.iter().enumerate() {
            assert_eq!(q, (l % 16) as u8 * 0x11, "qs[{l}]");
        }
        let mut y = [0.0f32; QK_K];
        dequantize_block(&block, &mut y);
        for (e, &v) in y.iter().enumerate() {
            assert_eq!(v, 0.999_755_86 * (e % 32) as f32, "y[{e}]");
        }
    }
}
