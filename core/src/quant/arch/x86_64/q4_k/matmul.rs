//! Q4_K and Q5_K matmul: their weight blocks decoded for the K-quant tiles of
//! [`k_matmul`](super::super::k_matmul), which do the rest.

use crate::quant::OutputColumns;
use core::arch::x86_64::*;

use super::super::k_matmul::{k_matmul, pair_in_lanes, Decoded, TileLevel};
use super::super::k_matmul_busd::mins_four_row_groups;
use super::super::primitives::Primitives;
use super::super::vector::{f16_le, load32, part};
use super::{mins_rows, q5_k_fifth_bits, MinsBlock};
use crate::quant::activation::BlockQ8K;
use crate::quant::k_quants::q4_k::scales_and_mins;

/// A Q4_K/Q5_K block in tile form: pair `p`'s groups are sub-blocks `2p` (low nibbles of
/// `qs[32p..]`, fifth bit `2p` of `qh`) and `2p + 1` (high nibbles, bit `2p + 1`), both with the
/// scale pair `(sc[2p], sc[2p + 1])`; the mins doubled as sixteen i16.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn decode<P: Primitives>(p: P, (packed, qs, qh, d_dmin): MinsBlock<'_>) -> Decoded {
    let (scales, mins) = scales_and_mins(packed);
    let nibble = _mm256_set1_epi8(0x0f);
    let high_bits = qh.map(|h| load32(h));
    let mut quants = [_mm256_setzero_si256(); 8];
    for (pair, out) in quants.chunks_exact_mut(2).enumerate() {
        let q = load32(part(qs, 32 * pair));
        let mut low = _mm256_and_si256(q, nibble);
        let mut high = _mm256_and_si256(_mm256_srli_epi16::<4>(q), nibble);
        if let Some(h) = high_bits {
            let (bit_low, bit_high) = q5_k_fifth_bits(h, pair);
            low = _mm256_or_si256(low, bit_low);
            high = _mm256_or_si256(high, bit_high);
        }
        out.copy_from_slice(&pair_in_lanes(p, low, high));
    }
    let scale_pairs: [i32; 8] = core::array::from_fn(|v| {
        let pair = v / 2;
        let first = scales.get(2 * pair).copied().unwrap_or(0);
        let second = scales.get(2 * pair + 1).copied().unwrap_or(0);
        i32::from(first) | i32::from(second) << 16
    });
    let mins = _mm_set_epi64x(0, i64::from_le_bytes(mins));
    let [d0, d1, m0, m1] = *d_dmin;
    Decoded {
        quants,
        scales: scale_pairs,
        extra: _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mins, mins)),
        d: f16_le([d0, d1]),
        dmin: f16_le([m0, m1]),
    }
}

/// The Q4_K/Q5_K matmul over [`k_matmul`]; `parts` reads a block, `single` is the type's vec_dot
/// (for rows too long for the tiles).
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn mins_matmul<P: Primitives + TileLevel, W>(
    p: P,
    w: &[W],
    row_blocks: usize,
    x: &[BlockQ8K],
    n: usize,
    y: &mut OutputColumns<'_, '_>,
    parts: impl Fn(&W) -> MinsBlock<'_> + Copy,
    single: impl Fn(&[W], &[BlockQ8K]) -> f32 + Copy,
) {
    k_matmul::<P, W, false, true>(
        p,
        w,
        row_blocks,
        x,
        n,
        y,
        |b| decode(p.avx2(), parts(b)),
        |w, row_blocks, x, out| mins_rows(p, w, row_blocks, x, out, parts, single),
        |t, w, row_blocks, x, y| mins_four_row_groups(t, w, row_blocks, x, y, parts),
    )
}
