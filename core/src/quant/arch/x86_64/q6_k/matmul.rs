//! Q6_K matmul: its weight blocks decoded for the K-quant tiles of
//! [`k_matmul`](super::super::k_matmul), which do the rest; and the tile choice of the signed
//! types without mins (Q6_K, Q3_K).

use crate::quant::OutputColumns;
use core::arch::x86_64::*;

use super::super::k_matmul::{block_lanes, k_matmul, pair_in_lanes, Decoded, TileLevel};
use super::super::k_matmul_busd::signed_four_row_groups;
use super::super::k_matmul_zmm::four_row_groups;
use super::super::primitives::Primitives;
use super::super::vector::{f16_le, load32, part};
use super::{q6_k_high_bits, q6_k_rows};
use crate::quant::activation::BlockQ8K;
use crate::quant::k_quants::BlockQ6K;

/// A Q6_K block in tile form: the signed quants (`q - 32`), half `h`'s groups of 32 values
/// `4h..4h + 4` as pairs `(0, 1)` and `(2, 3)`; pair `p`'s first vector holds 16-value sub-blocks
/// `4p` and `4p + 2` (scale pair `(sc[4p], sc[4p + 2])`), its second `4p + 1` and `4p + 3`. The
/// correction `128·Σ scale·q` per lane is the block's lanes against an activation of all 128.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn decode<P: Primitives>(p: P, b: &BlockQ6K) -> Decoded {
    let nibble = _mm256_set1_epi8(0x0f);
    let bias = _mm256_set1_epi8(32);
    let mut quants = [_mm256_setzero_si256(); 8];
    for (half, out) in quants.chunks_exact_mut(4).enumerate() {
        let a = load32(part(&b.ql, 64 * half));
        let c = load32(part(&b.ql, 64 * half + 32));
        let high_bits = q6_k_high_bits(load32(part(&b.qh, 32 * half)));
        let groups = [
            _mm256_or_si256(_mm256_and_si256(a, nibble), high_bits[0]),
            _mm256_or_si256(_mm256_and_si256(c, nibble), high_bits[1]),
            _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16::<4>(a), nibble),
                high_bits[2],
            ),
            _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16::<4>(c), nibble),
                high_bits[3],
            ),
        ]
        .map(|g| _mm256_sub_epi8(g, bias));
        let [g0, g1, g2, g3] = groups;
        let [v0, v1] = pair_in_lanes(p, g0, g1);
        let [v2, v3] = pair_in_lanes(p, g2, g3);
        out.copy_from_slice(&[v0, v1, v2, v3]);
    }
    let scale = |s: usize| i32::from(b.scales.get(s).copied().unwrap_or(0));
    let scales: [i32; 8] = core::array::from_fn(|v| {
        let (pair, second) = (v / 2, v % 2);
        let first = 4 * pair + second;
        (scale(first) & 0xffff) | scale(first + 2) << 16
    });
    let correction = block_lanes::<P, true>(p, &quants, &scales, _mm256_set1_epi8(i8::MIN));
    Decoded {
        quants,
        scales,
        extra: correction,
        d: f16_le(b.d),
        dmin: 0.0,
    }
}

/// Columns from which the signed types take the row-pair 512-bit tiles
/// ([`k_matmul_zmm`](super::super::k_matmul_zmm)) instead of the column-pair ones
/// ([`k_matmul_busd`](super::super::k_matmul_busd)).
const SIGNED_ROW_PAIR_COLUMNS: usize = 32;

/// The matmul over [`k_matmul`] of a type whose blocks decode to signed tile quants with no mins
/// (Q6_K, Q3_K: the same scalar float steps), `decode` its blocks and `rows` its rows kernel
/// (for fewer columns and rows too long for the tiles).
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(in super::super) fn signed_k_matmul<P: Primitives + TileLevel, W>(
    p: P,
    w: &[W],
    row_blocks: usize,
    x: &[BlockQ8K],
    n: usize,
    y: &mut OutputColumns<'_, '_>,
    decode: impl Fn(&W) -> Decoded + Copy,
    rows: impl Fn(&[W], usize, &[BlockQ8K], &mut [f32]),
) {
    k_matmul::<P, W, true, false>(
        p,
        w,
        row_blocks,
        x,
        n,
        y,
        decode,
        rows,
        |t, w, row_blocks, x, y| {
            // Row-pair tiles from 32 columns (1.05x the column-pair ones at n = 128 and 512) on
            // rows they take; column-pair tiles below (their rows cost less to lay out: n = 8
            // at 1.2x) and on rows of 17-40 super-blocks.
            let done = if x.len() >= SIGNED_ROW_PAIR_COLUMNS.saturating_mul(row_blocks) {
                four_row_groups::<W, true, false>(t, w, row_blocks, x, y, decode)
            } else {
                0
            };
            if done > 0 {
                return done;
            }
            signed_four_row_groups(t, w, row_blocks, x, y, decode)
        },
    )
}

/// The Q6_K matmul over [`k_matmul`]; `single` is the vec_dot (for rows too long for the tiles).
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn q6_k_matmul<P: Primitives + TileLevel>(
    p: P,
    w: &[BlockQ6K],
    row_blocks: usize,
    x: &[BlockQ8K],
    n: usize,
    y: &mut OutputColumns<'_, '_>,
    single: impl Fn(&[BlockQ6K], &[BlockQ8K]) -> f32 + Copy,
) {
    signed_k_matmul(
        p,
        w,
        row_blocks,
        x,
        n,
        y,
        |b| decode(p.avx2(), b),
        |w, row_blocks, x, out| q6_k_rows(p, w, row_blocks, x, out, single),
    )
}
