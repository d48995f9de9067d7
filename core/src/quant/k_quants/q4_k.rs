//! Q4_K: 256 values in 8 sub-blocks of 32, 4-bit quants, and per sub-block a 6-bit scale and a 6-bit
//! min scaled by the f16 `d` and `dmin`: value = `d*sc * q - dmin*m`.

use super::common::{
    largest_scale_and_min, make_qkx2_quants, pack_scale_min_k4, scale_min_k4, sub_blocks,
    sub_blocks_mut, Qkx2Search,
};
use super::dot::{accumulate_lanes, add_lanes, scaled_lane_sums};
use crate::ggml_type::GgmlType;
use crate::quant::activation::{BlockQ8K, QK_K};
use crate::quant::arrays::map;
use crate::quant::cast::{f16_le, f16_to_le, Block};
use crate::quant::float::{nearest_int, sqrt};
use bytemuck::{Pod, Zeroable};

/// `block_q4_K`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockQ4K {
    /// Super-block scale of the scales, f16 little-endian.
    pub d: [u8; 2],
    /// Super-block scale of the mins, f16 little-endian.
    pub dmin: [u8; 2],
    /// 8 scales and 8 mins of 6 bits (see `scale_min_k4`).
    pub scales: [u8; 12],
    /// Quants: in each 64 values, byte `l` holds value `l` (low nibble) and `l + 32` (high nibble).
    pub qs: [u8; QK_K / 2],
}

impl Block for BlockQ4K {
    const TYPE: GgmlType = GgmlType::Q4_K;
}

/// `dequantize_row_q4_K` for one block.
pub fn dequantize_block(block: &BlockQ4K, out: &mut [f32; QK_K]) {
    let d = f16_le(block.d);
    let min = f16_le(block.dmin);
    for (pair, (values, bytes)) in sub_blocks_mut::<64, _>(out)
        .zip(sub_blocks::<32, _>(&block.qs))
        .enumerate()
    {
        let (sc1, m1) = scale_min_k4(2 * pair, &block.scales);
        let (sc2, m2) = scale_min_k4(2 * pair + 1, &block.scales);
        let (d1, m1) = (d * sc1 as f32, min * m1 as f32);
        let (d2, m2) = (d * sc2 as f32, min * m2 as f32);
        let (low, high) = values.split_at_mut(32);
        for ((lo, hi), &q) in low.iter_mut().zip(high).zip(bytes) {
            *lo = d1 * (q & 0x0f) as f32 - m1;
            *hi = d2 * (q >> 4) as f32 - m2;
        }
    }
}

/// The search Q4_K runs on each sub-block (`quantize_row_q4_K_ref`'s `make_qkx2_quants` options).
pub(crate) const Q4K_SEARCH: Qkx2Search = Qkx2Search {
    nmax: 15,
    rmin: -1.0,
    rdelta: 0.1,
    nstep: 20,
    use_mad: false,
};

/// What the search found for the 8 sub-blocks of a super-block: each one's scale and negated
/// minimum (`make_qkx2_quants`' return value and `the_min`) and the levels of all 256 values.
pub(crate) struct SubBlockFits {
    pub scales: [f32; QK_K / 32],
    pub mins: [f32; QK_K / 32],
    pub levels: [u8; QK_K],
}

/// The per-sub-block search that Q4_K and Q5_K share: weights `sqrt(mean(x²)) + |x|`, then
/// `make_qkx2_quants` on each sub-block. (The SIMD levels run the same search on the 8 sub-blocks
/// side by side, one per lane.)
pub(crate) fn fit_sub_blocks(x: &[f32; QK_K], search: Qkx2Search) -> SubBlockFits {
    let mut fits = SubBlockFits {
        scales: [0.0; QK_K / 32],
        mins: [0.0; QK_K / 32],
        levels: [0; QK_K],
    };
    for (((xs, ls), scale), min) in sub_blocks::<32, _>(x)
        .zip(sub_blocks_mut::<32, _>(&mut fits.levels))
        .zip(&mut fits.scales)
        .zip(&mut fits.mins)
    {
        let mut sum_x2 = 0.0f32;
        for &v in xs {
            sum_x2 += v * v;
        }
        let av_x = sqrt(sum_x2 / 32.0);
        let weights = map(xs, |v| av_x + v.abs());
        (*scale, *min) = make_qkx2_quants(search, xs, &weights, ls);
    }
    fits
}

/// The 6-bit scales and mins of the sub-blocks' fits, packed, with the super-block's `d` and
/// `dmin`.
pub(crate) fn pack_fits(scales: &[f32; 8], mins: &[f32; 8]) -> ([u8; 12], [u8; 2], [u8; 2]) {
    let (max_scale, max_min) = largest_scale_and_min(scales, mins);
    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let mut scale_levels = [0u8; 8];
    let mut min_levels = [0u8; 8];
    for (((ls, lm), &scale), &min) in scale_levels
        .iter_mut()
        .zip(&mut min_levels)
        .zip(scales)
        .zip(mins)
    {
        // C stores nearest_int in a uint8_t before clamping to 63.
        *ls = (nearest_int(inv_scale * scale) as u8).min(63);
        *lm = (nearest_int(inv_min * min) as u8).min(63);
    }
    (
        pack_scale_min_k4(&scale_levels, &min_levels),
        f16_to_le(max_scale / 63.0),
        f16_to_le(max_min / 63.0),
    )
}

/// [`fit_sub_blocks`] then [`pack_fits`]: the packed scales, `d`, `dmin` and the search's levels.
pub(crate) fn search_sub_blocks(
    x: &[f32; QK_K],
    search: Qkx2Search,
) -> ([u8; 12], [u8; 2], [u8; 2], [u8; QK_K]) {
    let fits = fit_sub_blocks(x, search);
    let (packed, d, dmin) = pack_fits(&fits.scales, &fits.mins);
    (packed, d, dmin, fits.levels)
}

/// Re-quantizes each 32-value sub-block against its rounded scale and min (levels `0..=nmax`);
/// sub-blocks whose scale is 0 keep the search's levels.
pub(crate) fn requantize(
    x: &[f32; QK_K],
    scales: &[u8; 12],
    d: [u8; 2],
    dmin: [u8; 2],
    nmax: i32,
    levels: &mut [u8; QK_K],
) {
    let d_all = f16_le(d);
    let dmin_all = f16_le(dmin);
    for (j, (xs, ls)) in sub_blocks::<32, _>(x)
        .zip(sub_blocks_mut::<32, _>(levels))
        .enumerate()
    {
        let (sc, m) = scale_min_k4(j, scales);
        let d = d_all * sc as f32;
        if d == 0.0 {
            continue;
        }
        let dm = dmin_all * m as f32;
        for (l, &v) in ls.iter_mut().zip(xs) {
            *l = nearest_int((v + dm) / d).min(nmax).max(0) as u8;
        }
    }
}

/// `quantize_row_q4_K_ref` for one block.
pub fn quantize_block(x: &[f32; QK_K]) -> BlockQ4K {
    block_from_fits(x, fit_sub_blocks(x, Q4K_SEARCH))
}

/// The rest of `quantize_row_q4_K_ref` after the sub-block search: scales packed, values
/// re-quantized against the rounded scales, nibbles packed.
pub(crate) fn block_from_fits(x: &[f32; QK_K], fits: SubBlockFits) -> BlockQ4K {
    let (scales, d, dmin) = pack_fits(&fits.scales, &fits.mins);
    let mut levels = fits.levels;
    requantize(x, &scales, d, dmin, 15, &mut levels);
    let mut block = BlockQ4K {
        d,
        dmin,
        scales,
        qs: [0; QK_K / 2],
    };
    for (bytes, ls) in sub_blocks_mut::<32, _>(&mut block.qs).zip(sub_blocks::<64, _>(&levels)) {
        let (low, high) = ls.split_at(32);
        for ((q, &lo), &hi) in bytes.iter_mut().zip(low).zip(high) {
            *q = lo | (hi << 4);
        }
    }
    block
}

/// The 8 scales and 8 mins of a Q4_K/Q5_K block ([`scale_min_k4`] for `j = 0..8`), unpacked
/// four at a time with whole-word masks, as ggml's SIMD kernels do (a byte-by-byte loop lets LLVM
/// pick SSE4a's `insertq` amid AVX code when compiling for AMD Zen).
#[inline(always)]
pub(crate) fn scales_and_mins(packed: &[u8; 12]) -> ([u8; 8], [u8; 8]) {
    const LOW6: u32 = 0x3f3f_3f3f;
    const LOW4: u32 = 0x0f0f_0f0f;
    const LOW2: u32 = 0x0303_0303;
    let word = |i: usize| {
        let mut bytes = [0u8; 4];
        bytes.copy_from_slice(packed.get(4 * i..4 * i + 4).unwrap_or(&[0; 4]));
        u32::from_le_bytes(bytes)
    };
    let (w0, w1, w2) = (word(0), word(1), word(2));
    let scales_low = w0 & LOW6;
    let scales_high = (w2 & LOW4) | (((w0 >> 6) & LOW2) << 4);
    let mins_low = w1 & LOW6;
    let mins_high = ((w2 >> 4) & LOW4) | (((w1 >> 6) & LOW2) << 4);
    let join = |a: u32, b: u32| (u64::from(a) | (u64::from(b) << 32)).to_le_bytes();
    (join(scales_low, scales_high), join(mins_low, mins_high))
}

/// One Q4_K/Q5_K block as the shared dot product needs it: its 256 quants (unsigned, below 32) in
/// element order, packed scales, `d` and `dmin`.
pub(crate) struct DotParts {
    pub quants: [i8; QK_K],
    pub scales: [u8; 12],
    pub d: f32,
    pub dmin: f32,
}

/// The dot product shared by Q4_K and Q5_K (`ggml_vec_dot_q{4,5}_K_q8_K_generic`), given each
/// block's unpacked quants: eight i32 lanes per super-block, `sums[lane] += d * lane_sum` across
/// blocks, `sumf -= dmin * sum(bsums * mins)` per block, and the lane totals added to `sumf` last.
#[inline(always)]
pub(crate) fn vec_dot_with_mins<W>(w: &[W], x: &[BlockQ8K], parts: impl Fn(&W) -> DotParts) -> f32 {
    let mut sums = [0.0f32; 8];
    let mut sumf = 0.0f32;
    for (wb, xb) in w.iter().zip(x) {
        let DotParts {
            quants,
            scales,
            d,
            dmin,
        } = parts(wb);
        let (scales, mins) = scales_and_mins(&scales);
        let mut sumi = 0i32;
        for (pair, &m) in sub_blocks::<2, _>(&xb.bsums).zip(&mins) {
            for bsum in pair {
                sumi += i32::from(i16::from_le_bytes(*bsum)) * i32::from(m);
            }
        }
        let lanes = scaled_lane_sums(&quants, &xb.qs, &map(&scales, i16::from));
        accumulate_lanes(&mut sums, d * xb.scale(), &lanes);
        let dmin = dmin * xb.scale();
        sumf -= dmin * sumi as f32;
    }
    add_lanes(sumf, &sums)
}

/// The 256 quants (`0..16`) of a block, in element order: each 32 bytes give 32 low nibbles, then
/// 32 high nibbles.
#[inline(always)]
fn quants(block: &BlockQ4K) -> [i8; QK_K] {
    let mut quants = [0i8; QK_K];
    for (values, bytes) in sub_blocks_mut::<64, _>(&mut quants).zip(sub_blocks::<32, _>(&block.qs))
    {
        let (low, high) = values.split_at_mut(32);
        for ((lo, hi), &q) in low.iter_mut().zip(high).zip(bytes) {
            *lo = (q & 0x0f) as i8;
            *hi = (q >> 4) as i8;
        }
    }
    quants
}

/// `ggml_vec_dot_q4_K_q8_K_generic`.
pub fn vec_dot(w: &[BlockQ4K], x: &[BlockQ8K]) -> f32 {
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
    fn word_unpacking_is_scale_min_k4() {
        // Every byte value in every position (a position's other bytes vary with it).
        for v in 0..=255u8 {
            for at in 0..12 {
                let packed: [u8; 12] = core::array::from_fn(|i| {
                    if i == at {
                        v
                    } else {
                        v.wrapping_mul(i as u8 + 7)
                    }
                });
                let (scales, mins) = scales_and_mins(&packed);
                for j in 0..8 {
                    assert_eq!(
                        (scales[j], mins[j]),
                        scale_min_k4(j, &packed),
                        "{packed:?} j={j}"
                    );
                }
            }
        }
    }

    #[test]
    fn exact_grid_block_by_hand() {
        // x = e % 16: every 32-value sub-block is 0..15 twice: scale 1, min 0, zero error. Scales
        // quantize to 63 and mins to 0; d = f16(1/63) = 1040 * 2^-16 (0x2410), dmin = 0. Packed:
        // bytes 0..4 = 63 | (63 >> 4) << 6 = 0xff, bytes 4..8 = mins 0, bytes 8..12 = 63 & 15.
        // Each qs byte holds elements l and l + 32 of a 64-chunk, both l % 16: (l % 16) * 0x11.
        let x: [f32; QK_K] = core::array::from_fn(|e| (e % 16) as f32);
        let block = quantize_block(&x);
        assert_eq!(u16::from_le_bytes(block.d), 0x2410);
        assert_eq!(block.dmin, [0, 0]);
        assert_eq!(
            block.scales,
            [0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0x0f, 0x0f, 0x0f, 0x0f]
        );
        for (l, &q) in block.qs.iter().enumerate() {
            assert_eq!(q, (l % 16) as u8 * 0x11, "qs[{l}]");
        }
        // d * 63 = 65520 / 65536 = 0.999755859375.
        let mut y = [0.0f32; QK_K];
        dequantize_block(&block, &mut y);
        for (e, &v) in y.iter().enumerate() {
            assert_eq!(v, 0.999_755_86 * (e % 16) as f32, "y[{e}]");
        }
    }
}
