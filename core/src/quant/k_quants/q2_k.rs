//! Q2_K: 256 values in 16 sub-blocks of 16, 2-bit quants, and per sub-block a 4-bit scale and a
//! 4-bit min, themselves scaled by the f16 `d` and `dmin`: value = `d*sc * q - dmin*m`.

use super::common::{
    largest_scale_and_min, make_qkx2_quants, pack_2bit, sub_blocks, sub_blocks_mut, Qkx2Search,
};
use crate::ggml_type::GgmlType;
use crate::quant::activation::{BlockQ8K, QK_K};
use crate::quant::arrays::map;
use crate::quant::cast::{f16_le, f16_to_le, Block};
use crate::quant::float::nearest_int;
use bytemuck::{Pod, Zeroable};

/// `block_q2_K`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockQ2K {
    /// Per sub-block: scale in the low nibble, min in the high nibble.
    pub scales: [u8; QK_K / 16],
    /// 2-bit quants, packed as described in [`dequantize_block`].
    pub qs: [u8; QK_K / 4],
    /// Super-block scale of the scales, f16 little-endian.
    pub d: [u8; 2],
    /// Super-block scale of the mins, f16 little-endian.
    pub dmin: [u8; 2],
}

impl Block for BlockQ2K {
    const TYPE: GgmlType = GgmlType::Q2_K;
}

/// Sub-block `k` (16 values) reads bytes `32*(k/8) + 16*(k%2) ..+16` of `qs` at bit offset
/// `2*((k%8)/2)`.
#[inline(always)]
fn quant_bytes(qs: &[u8; QK_K / 4], k: usize) -> (&[u8], u32) {
    let start = 32 * (k / 8) + 16 * (k % 2);
    (&qs[start..start + 16], 2 * ((k % 8) / 2) as u32)
}

/// The 256 quants (`0..4`) of a block, in element order: in each half of 128 values, the 32-value
/// chunk `c` reads the half's 32 `qs` bytes at bit offset `2c`.
#[inline(always)]
fn quants(block: &BlockQ2K) -> [i8; QK_K] {
    let mut quants = [0i8; QK_K];
    for (values, bytes) in sub_blocks_mut::<128, _>(&mut quants).zip(sub_blocks::<32, _>(&block.qs))
    {
        for (chunk, out) in sub_blocks_mut::<32, _>(values).enumerate() {
            let shift = 2 * chunk as u32;
            for (y, &q) in out.iter_mut().zip(bytes) {
                *y = ((q >> shift) & 3) as i8;
            }
        }
    }
    quants
}

/// `dequantize_row_q2_K` for one block.
pub fn dequantize_block(block: &BlockQ2K, out: &mut [f32; QK_K]) {
    let d = f16_le(block.d);
    let min = f16_le(block.dmin);
    for (k, (values, &sc)) in sub_blocks_mut::<16, _>(out).zip(&block.scales).enumerate() {
        let dl = d * (sc & 0x0f) as f32;
        let ml = min * (sc >> 4) as f32;
        let (bytes, shift) = quant_bytes(&block.qs, k);
        for (y, &q) in values.iter_mut().zip(bytes) {
            *y = dl * ((q >> shift) & 3) as f32 - ml;
        }
    }
}

/// Q2_K's `make_qkx2_quants` parameters (the weights are `|x|`).
pub(crate) const Q2K_SEARCH: Qkx2Search = Qkx2Search {
    nmax: 3,
    rmin: -0.5,
    rdelta: 0.1,
    nstep: 15,
    use_mad: true,
};

/// `quantize_row_q2_K_ref` for one block.
pub fn quantize_block(x: &[f32; QK_K]) -> BlockQ2K {
    let mut levels = [0u8; QK_K];
    let mut scales = [0.0f32; QK_K / 16];
    let mut mins = [0.0f32; QK_K / 16];
    for (((xs, ls), scale), min) in sub_blocks::<16, _>(x)
        .zip(sub_blocks_mut::<16, _>(&mut levels))
        .zip(&mut scales)
        .zip(&mut mins)
    {
        let weights = map(xs, f32::abs);
        (*scale, *min) = make_qkx2_quants(Q2K_SEARCH, xs, &weights, ls);
    }
    block_from_fits(x, &scales, &mins, levels)
}

/// The rest of `quantize_row_q2_K_ref` after the sub-blocks' searches (`scales`, `mins` and
/// `levels` as `make_qkx2_quants` gave them): the 4-bit scales and mins, and the levels again
/// against the rounded ones.
pub(crate) fn block_from_fits(
    x: &[f32; QK_K],
    scales: &[f32; QK_K / 16],
    mins: &[f32; QK_K / 16],
    mut levels: [u8; QK_K],
) -> BlockQ2K {
    const Q4SCALE: f32 = 15.0;
    let (max_scale, max_min) = largest_scale_and_min(scales, mins);

    let mut block = BlockQ2K::zeroed();
    if max_scale > 0.0 {
        let iscale = Q4SCALE / max_scale;
        for (packed, &scale) in block.scales.iter_mut().zip(scales) {
            *packed = nearest_int(iscale * scale) as u8;
        }
        block.d = f16_to_le(max_scale / Q4SCALE);
    } else {
        block.d = f16_to_le(0.0);
    }
    if max_min > 0.0 {
        let iscale = Q4SCALE / max_min;
        for (packed, &min) in block.scales.iter_mut().zip(mins) {
            *packed |= (nearest_int(iscale * min) << 4) as u8;
        }
        block.dmin = f16_to_le(max_min / Q4SCALE);
    } else {
        block.dmin = f16_to_le(0.0);
    }

    // Re-quantize against the rounded scales; a sub-block whose scale rounds to 0 keeps the levels
    // from the search, as ggml does.
    let d_all = f16_le(block.d);
    let dmin_all = f16_le(block.dmin);
    for ((xs, ls), &sc) in sub_blocks::<16, _>(x)
        .zip(sub_blocks_mut::<16, _>(&mut levels))
        .zip(&block.scales)
    {
        let d = d_all * (sc & 0x0f) as f32;
        if d == 0.0 {
            continue;
        }
        let dm = dmin_all * (sc >> 4) as f32;
        for (l, &v) in ls.iter_mut().zip(xs) {
            *l = nearest_int((v + dm) / d).clamp(0, 3) as u8;
        }
    }
    block.qs = pack_2bit(&levels);
    block
}

/// `ggml_vec_dot_q2_K_q8_K_generic`: integer sums per super-block, then
/// `sumf += dall * isum - dmin * summs`.
pub fn vec_dot(w: &[BlockQ2K], x: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (wb, xb) in w.iter().zip(x) {
        let mut summs = 0i32;
        for (bsum, &sc) in xb.bsums.iter().zip(&wb.scales) {
            summs += i32::from(i16::from_le_bytes(*bsum)) * i32::from(sc >> 4);
        }
        let dall = xb.scale() * f16_le(wb.d);
        let dmin = xb.scale() * f16_le(wb.dmin);

        // One integer total, no lanes: the sum of each sub-block is a plain reduction.
        let mut isum = 0i32;
        for ((ws, xs), &sc) in sub_blocks::<16, _>(&quants(wb))
            .zip(sub_blocks::<16, _>(&xb.qs))
            .zip(&wb.scales)
        {
            let mut isuml = 0i32;
            for (&a, &b) in ws.iter().zip(xs) {
                isuml += i32::from(a) * i32::from(b);
            }
            isum += i32::from(sc & 0x0f) * isuml;
        }
        sumf += dall * isum as f32 - dmin * summs as f32;
    }
    sumf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_grid_block_by_hand() {
        // x = e % 4: every sub-block is 0,1,2,3 repeated, so the search finds scale 1 and min 0 with
        // zero error. Scales quantize to 15/15 (byte 0x0f, min nibble 0), d = f16(1/15) = 0x2c44,
        // dmin = 0. Each qs byte packs four elements with the same e % 4: (l % 4) * 0b01010101.
        let x: [f32; QK_K] = core::array::from_fn(|e| (e % 4) as f32);
        let block = quantize_block(&x);
        assert_eq!(block.scales, [0x0f; 16]);
        assert_eq!(u16::from_le_bytes(block.d), 0x2c44);
        assert_eq!(block.dmin, [0, 0]);
        for (l, &q) in block.qs.iter().enumerate() {
            assert_eq!(q, (l % 4) as u8 * 0x55, "qs[{l}]");
        }
        // d * 15 = 1092/16384 * 15 = 0.999755859375 exactly.
        let mut y = [0.0f32; QK_K];
        dequantize_block(&block, &mut y);
        for (e, &v) in y.iter().enumerate() {
            assert_eq!(v, 0.999_755_86 * (e % 4) as f32, "y[{e}]");
        }
    }
}
