//! Q4_K and Q5_K (they share their sub-block scales and mins): vec_dot, multi-row, dequantize,
//! and the quantizers in [`quantize`].
//!
//! The dot is written once over the level's [`Primitives`]: at AVX2 each pair of sub-blocks is two
//! `maddubs` (element `k` beside `k + 8`) scaled into the eight lanes; at VNNI the quants are in
//! `lane_groups` order, one `vpdpbusd` per sub-block and one `vpdpwssd` per scale pair. The VNNI
//! entries run a copy with VBMI's one-`vpermb` lane groups where the CPU has it.
//! The float steps are the scalar twin's: lanes scaled by `d·dx` per block, `sumf -= (dmin·dx)·Σ
//! bsums·mins`, the lanes added in order at the end.
//!
//! The dequantizer takes the twin's per-value steps (`u8 → f32`, multiply, subtract) eight at a
//! time, on bytes widened to 32-bit lanes as they are loaded.

use crate::quant::OutputColumns;
use core::arch::x86_64::*;

use super::drivers::prepared_rows;
use super::primitives::Primitives;
use super::tokens::{every_level, kernel, Avx2};
use super::vector::{
    add_lanes, f16_le, hsum4_splat, load16, load32, part, prefetch_block_ahead, scale_of, scaled8,
    store_at, widen8,
};
use crate::quant::activation::{BlockQ8K, QK_K};
use crate::quant::k_quants::q4_k::scales_and_mins;
use crate::quant::k_quants::{BlockQ4K, BlockQ5K};

mod matmul;
pub(super) mod quantize;

/// A Q4_K block as [`dot_with_mins`] reads it.
#[inline(always)]
fn q4_k_parts(b: &BlockQ4K) -> MinsBlock<'_> {
    (&b.scales, &b.qs, None, d_and_dmin(b))
}

/// A Q5_K block as [`dot_with_mins`] reads it.
#[inline(always)]
fn q5_k_parts(b: &BlockQ5K) -> MinsBlock<'_> {
    (&b.scales, &b.qs, Some(&b.qh), d_and_dmin(b))
}

/// One Q4_K/Q5_K block as [`dot_with_mins`] reads it: packed scales, the 4-bit quants, the fifth
/// bits (Q5_K), and the f16 `d` then `dmin` (the block's first four bytes).
type MinsBlock<'a> = (
    &'a [u8; 12],
    &'a [u8; 128],
    Option<&'a [u8; 32]>,
    &'a [u8; 4],
);

/// The first four bytes of a Q4_K/Q5_K block: `d` and `dmin`, read as one word.
#[inline(always)]
fn d_and_dmin<B: bytemuck::Pod>(b: &B) -> &[u8; 4] {
    bytemuck::bytes_of(b).first_chunk().unwrap_or(&[0; 4])
}

/// [`dot_with_mins`] with the activation worked block by block as it is read (one vec_dot).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn dot_with_mins_unprepared<P: Primitives, W>(
    p: P,
    w: &[W],
    x: &[BlockQ8K],
    parts: impl Fn(&W) -> MinsBlock<'_>,
) -> f32 {
    dot_with_mins(
        p,
        w,
        x,
        x,
        parts,
        |xb, at| p.mins_layout(load32(part(&xb.qs, at))),
        |xb, mins| min_products(xb, mins),
    )
}

/// The dot shared by Q4_K and Q5_K (`vec_dot_with_mins` of the scalar twins): lanes scaled by
/// `d·dx` into `sums` per block, `sumf -= (dmin·dx)·Σ bsums·mins`, lanes added to `sumf` last.
/// `activation(&paired[k], at)` gives the 32 bytes at `at` of activation block `k` through
/// [`mins_layout`], and `mins_dot(&paired[k], mins)` its `Σ bsums·mins` as four i32 partial sums
/// (`paired` is `x` itself, worked here, or a copy prepared once for many rows).
///
/// Below the VNNI level each pair of sub-blocks is two `maddubs` (element `k` beside `k + 8`, one
/// lane) into a `LaneAcc`. At the VNNI level the quants are in `lane_groups` order: one
/// `vpdpbusd` per sub-block leaves its eight lane sums in lane order, and one `vpdpwssd` scales
/// and adds the pair (two fewer shuffles per pair, and none to put the lanes back in order).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn dot_with_mins<P: Primitives, W, A>(
    p: P,
    w: &[W],
    x: &[BlockQ8K],
    paired: &[A],
    parts: impl Fn(&W) -> MinsBlock<'_>,
    activation: impl Fn(&A, usize) -> __m256i,
    mins_dot: impl Fn(&A, [u8; 8]) -> __m128i,
) -> f32 {
    let mut sums = _mm256_setzero_ps();
    // The scalar `sumf` is lane 1 (where `dmin·dx` is); the other lanes are never read.
    let mut sumf = _mm_setzero_ps();
    // The previous block's integer results, whose float steps run one block late: in program
    // order they then come after this block's integer work, whose loads they would otherwise
    // wait behind, holding scheduler entries. Starting from zeros adds `+0·0` to `+0`: the
    // scalar twin's bits.
    let mut pending = (
        _mm256_setzero_si256(),
        _mm_setzero_ps(),
        _mm_setzero_si128(),
    );
    let nibble = _mm256_set1_epi8(0x0f);
    for ((wb, xb), xp) in w.iter().zip(x).zip(paired) {
        prefetch_block_ahead(wb);
        let (packed, qs_all, qh, d_dmin) = parts(wb);
        let (scales, mins) = scales_and_mins(packed);
        let mins_sum = mins_dot(xp, mins);
        // Shuffled once for the block: the bit extraction below is bytewise, so it commutes.
        let high_bits = qh.map(|h| p.mins_layout(load32(h)));

        // The eight scale bytes in every 64-bit element; pair p (scales 2p, 2p+1, as i16) is
        // taken into every 32-bit element by one byte shuffle (a 256-bit widening costs two).
        let scale_bytes = _mm256_set1_epi64x(i64::from_le_bytes(scales));
        let mut acc = p.mins_acc();
        for (pair, qs) in qs_all.chunks_exact(32).enumerate() {
            // 32 bytes: low nibbles are sub-block 2·pair (elements 0..32), high ones the next (32..64).
            // maddubs of unsigned quants (< 32) and Q8_K bytes: pairs below 2·31·128, exact.
            // One shuffle for both nibbles (the nibble split is bytewise, so it commutes).
            let q = p.mins_layout(load32(part(qs, 0)));
            let mut low = _mm256_and_si256(q, nibble);
            let mut high = _mm256_and_si256(_mm256_srli_epi16::<4>(q), nibble);
            if let Some(h) = high_bits {
                let (bit_low, bit_high) = q5_k_fifth_bits(h, pair);
                low = _mm256_or_si256(low, bit_low);
                high = _mm256_or_si256(high, bit_high);
            }
            let x0 = activation(xp, 64 * pair);
            let x1 = activation(xp, 64 * pair + 32);
            let scales = scale_pair(scale_bytes, pair);
            acc = p.mins_acc_add(acc, [low, high], [x0, x1], scales);
        }
        let block_lanes = p.mins_acc_lanes(acc);
        // `d·dx` and `dmin·dx` in one conversion and one multiply (lanes 0 and 1).
        let heads = _mm_cvtph_ps(_mm_cvtsi32_si128(i32::from_le_bytes(*d_dmin)));
        let scaled = _mm_mul_ps(heads, _mm_set1_ps(xb.scale()));
        let (lanes, scaled_before, mins_before) = pending;
        (sums, sumf) = mins_block_floats(sums, sumf, lanes, scaled_before, mins_before);
        pending = (block_lanes, scaled, mins_sum);
    }
    let (lanes, scaled, mins_sum) = pending;
    (sums, sumf) = mins_block_floats(sums, sumf, lanes, scaled, mins_sum);
    add_lanes(_mm_cvtss_f32(_mm_movehdup_ps(sumf)), sums)
}

/// The float steps of one Q4_K/Q5_K block: `sums[l] += (d·dx)·lanes[l]`, then
/// `sumf -= (dmin·dx)·Σ bsums·mins` (in lane 1 of `sumf`; `scaled` is `[d·dx, dmin·dx, ..]`,
/// `mins_sum` the four partial sums of `Σ bsums·mins`).
#[inline]
#[target_feature(enable = "avx2")]
fn mins_block_floats(
    sums: __m256,
    sumf: __m128,
    lanes: __m256i,
    scaled: __m128,
    mins_sum: __m128i,
) -> (__m256, __m128) {
    let sums = _mm256_add_ps(
        sums,
        _mm256_mul_ps(_mm256_broadcastss_ps(scaled), _mm256_cvtepi32_ps(lanes)),
    );
    let sumi = _mm_cvtepi32_ps(hsum4_splat(mins_sum));
    (sums, _mm_sub_ps(sumf, _mm_mul_ps(scaled, sumi)))
}

/// Q5_K's fifth bits for the 64 values of pair `p`, as `0x10` in each byte ([`pair_lanes`]
/// layout, as `h`): bit `2p` of `qh[l]` for element `l`, bit `2p + 1` for element `l + 32`.
/// One shift and one mask each (16-bit shifts of at most 4: bit 4 of either byte only receives
/// bits of its own byte).
#[inline]
#[target_feature(enable = "avx2")]
fn q5_k_fifth_bits(h: __m256i, p: usize) -> (__m256i, __m256i) {
    let (low, high) = match p {
        0 => (_mm256_slli_epi16::<4>(h), _mm256_slli_epi16::<3>(h)),
        1 => (_mm256_slli_epi16::<2>(h), _mm256_slli_epi16::<1>(h)),
        2 => (h, _mm256_srli_epi16::<1>(h)),
        _ => (_mm256_srli_epi16::<2>(h), _mm256_srli_epi16::<3>(h)),
    };
    let fifth = _mm256_set1_epi8(0x10);
    (_mm256_and_si256(low, fifth), _mm256_and_si256(high, fifth))
}

/// Scales `2p` and `2p + 1` of `scale_bytes` (eight scale bytes in every 64-bit element) as
/// the i16 pair `(s[2p], s[2p + 1])` in every 32-bit element.
#[inline]
#[target_feature(enable = "avx2")]
fn scale_pair(scale_bytes: __m256i, p: usize) -> __m256i {
    // Every 32-bit element: byte 2p to the low byte of the first i16, 2p + 1 to the second's;
    // 0xff (bit 7 set) zeroes the high bytes. (`p` is below 4; the loop is unrolled, so this is
    // a constant.)
    let first = 2 * (p & 3) as u8;
    let control = _mm256_set1_epi32(i32::from_le_bytes([first, 0xff, first + 1, 0xff]));
    _mm256_shuffle_epi8(scale_bytes, control)
}

/// `Σ bsums·mins` of an activation block as four i32 partial sums: each min covers two bsums
/// (16 i16 · 16 i16 in one madd, exact).
#[inline]
#[target_feature(enable = "avx2")]
fn min_products(xb: &BlockQ8K, mins: [u8; 8]) -> __m128i {
    let bsums: &[u8; 32] = bytemuck::cast_ref(&xb.bsums);
    let mins = _mm_set_epi64x(0, i64::from_le_bytes(mins));
    let min_pairs = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mins, mins));
    let products = _mm256_madd_epi16(load32(bsums), min_pairs);
    _mm_add_epi32(
        _mm256_castsi256_si128(products),
        _mm256_extracti128_si256::<1>(products),
    )
}

every_level! {
    /// `ggml_vec_dot_q4_K_q8_K_generic`.
    fn vec_dot_q4_k, vec_dot_q4_k_vnni_only, vec_dot_q4_k_vbmi => vec_dot_q4_k_vnni(
        t,
        w: &[BlockQ4K],
        x: &[BlockQ8K],
    ) -> f32 {
        dot_with_mins_unprepared(t, w, x, q4_k_parts)
    }
}

every_level! {
    /// `ggml_vec_dot_q5_K_q8_K_generic`.
    fn vec_dot_q5_k, vec_dot_q5_k_vnni_only, vec_dot_q5_k_vbmi => vec_dot_q5_k_vnni(
        t,
        w: &[BlockQ5K],
        x: &[BlockQ8K],
    ) -> f32 {
        dot_with_mins_unprepared(t, w, x, q5_k_parts)
    }
}

/// An activation super-block as the Q4_K/Q5_K rows kernels read it.
#[derive(Clone, Copy)]
struct MinsActivation {
    /// The eight 32-byte groups through `mins_layout`.
    groups: [__m256i; 8],
    /// The even bsums (`bsums[2j]`) and the odd ones, as eight i16 each: min `j` multiplies
    /// `bsums[2j]` and `bsums[2j + 1]`. (Not their sums in i16: a Q8_K block's `bsums` are
    /// data, and two of them can add past i16.)
    even_bsums: __m128i,
    odd_bsums: __m128i,
}

impl MinsActivation {
    #[inline]
    #[target_feature(enable = "avx2")]
    fn of<P: Primitives>(p: P, xb: &BlockQ8K) -> MinsActivation {
        let bsums: &[u8; 32] = bytemuck::cast_ref(&xb.bsums);
        // Per 128-bit half: the four even i16, then the four odd ones.
        let split = _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
        let first = _mm_shuffle_epi8(load16(part(bsums, 0)), split);
        let second = _mm_shuffle_epi8(load16(part(bsums, 16)), split);
        MinsActivation {
            groups: core::array::from_fn(|g| p.mins_layout(load32(part(&xb.qs, 32 * g)))),
            even_bsums: _mm_unpacklo_epi64(first, second),
            odd_bsums: _mm_unpackhi_epi64(first, second),
        }
    }

    /// Group `at / 32` (`at` is below 256 at every call).
    #[inline(always)]
    fn group_at(&self, at: usize) -> __m256i {
        self.groups.get(at / 32).copied().unwrap_or(self.groups[0])
    }

    /// `Σ bsums·mins` as four i32 partial sums: one 128-bit widening, two madds (exact: each
    /// product is below 2^21 in magnitude).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn mins_dot(&self, mins: [u8; 8]) -> __m128i {
        let mins = _mm_cvtepu8_epi16(_mm_set_epi64x(0, i64::from_le_bytes(mins)));
        _mm_add_epi32(
            _mm_madd_epi16(mins, self.even_bsums),
            _mm_madd_epi16(mins, self.odd_bsums),
        )
    }
}

/// The Q4_K/Q5_K rows kernels: [`prepared_rows`] over [`MinsActivation`], each row through
/// [`dot_with_mins`] (`parts` reads a block, `single` is the type's vec_dot).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn mins_rows<P: Primitives, W>(
    p: P,
    w: &[W],
    row_blocks: usize,
    x: &[BlockQ8K],
    out: &mut [f32],
    parts: impl Fn(&W) -> MinsBlock<'_> + Copy,
    single: impl Fn(&[W], &[BlockQ8K]) -> f32,
) {
    prepared_rows(
        w,
        row_blocks,
        x,
        out,
        |xb| MinsActivation::of(p, xb),
        |row, prepared| {
            dot_with_mins(
                p,
                row,
                x,
                prepared,
                parts,
                MinsActivation::group_at,
                |a, mins| a.mins_dot(mins),
            )
        },
        single,
    )
}

every_level! {
    /// Q4_K rows.
    fn rows_q4_k, rows_q4_k_vnni_only, rows_q4_k_vbmi => rows_q4_k_vnni(
        t,
        w: &[BlockQ4K],
        row_blocks: usize,
        x: &[BlockQ8K],
        out: &mut [f32],
    ); single = vec_dot_q4_k, vec_dot_q4_k_vnni_only, vec_dot_q4_k_vbmi {
        mins_rows(t, w, row_blocks, x, out, q4_k_parts, single)
    }
}

every_level! {
    /// Q5_K rows.
    fn rows_q5_k, rows_q5_k_vnni_only, rows_q5_k_vbmi => rows_q5_k_vnni(
        t,
        w: &[BlockQ5K],
        row_blocks: usize,
        x: &[BlockQ8K],
        out: &mut [f32],
    ); single = vec_dot_q5_k, vec_dot_q5_k_vnni_only, vec_dot_q5_k_vbmi {
        mins_rows(t, w, row_blocks, x, out, q5_k_parts, single)
    }
}

every_level! {
    /// Q4_K matmul.
    fn matmul_q4_k, matmul_q4_k_vnni_only, matmul_q4_k_vbmi => matmul_q4_k_vnni(
        t,
        w: &[BlockQ4K],
        row_blocks: usize,
        x: &[BlockQ8K],
        n: usize,
        y: &mut OutputColumns<'_, '_>,
    ); single = vec_dot_q4_k, vec_dot_q4_k_vnni_only, vec_dot_q4_k_vbmi {
        matmul::mins_matmul(t, w, row_blocks, x, n, y, q4_k_parts, single)
    }
}

every_level! {
    /// Q5_K matmul.
    fn matmul_q5_k, matmul_q5_k_vnni_only, matmul_q5_k_vbmi => matmul_q5_k_vnni(
        t,
        w: &[BlockQ5K],
        row_blocks: usize,
        x: &[BlockQ8K],
        n: usize,
        y: &mut OutputColumns<'_, '_>,
    ); single = vec_dot_q5_k, vec_dot_q5_k_vnni_only, vec_dot_q5_k_vbmi {
        matmul::mins_matmul(t, w, row_blocks, x, n, y, q5_k_parts, single)
    }
}

/// Q4_K's and Q5_K's eight `dl = d·sc_j` and `ml = dmin·m_j` (the scalar twin's products) from
/// the 12 packed scale bytes.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn k4_scales(packed: &[u8; 12], d: [u8; 2], dmin: [u8; 2]) -> ([f32; 8], [f32; 8]) {
    let (scales, mins) = scales_and_mins(packed);
    let mut dl = [0.0f32; 8];
    let mut ml = [0.0f32; 8];
    store_at(
        &mut dl,
        0,
        scaled8(&scales, false, _mm256_set1_ps(f16_le(d))),
    );
    store_at(
        &mut ml,
        0,
        scaled8(&mins, false, _mm256_set1_ps(f16_le(dmin))),
    );
    (dl, ml)
}

/// Sub-block pair `pair`'s `[dl, ml]` of its first and second sub-block, broadcast.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn pair_scales(dl: &[f32; 8], ml: &[f32; 8], pair: usize) -> [__m256; 4] {
    [
        _mm256_set1_ps(scale_of(dl, 2 * pair)),
        _mm256_set1_ps(scale_of(ml, 2 * pair)),
        _mm256_set1_ps(scale_of(dl, 2 * pair + 1)),
        _mm256_set1_ps(scale_of(ml, 2 * pair + 1)),
    ]
}

/// `dequantize_row_q5_K` for one block: sub-block `j` (32 values) is `dl·q − ml` with
/// One Q4_K or Q5_K block (`dequantize_row_q{4,5}_K`): `dl = d·sc_j`, `ml = dmin·m_j`, and
/// `dl·q − ml` with `q` the nibble, or for Q5_K (`FIFTH`) `nibble | fifth bit << 4`. Pair `p`
/// of sub-blocks reads the 32 `qs` bytes at `32p`, low nibbles for `2p`, high for `2p + 1`;
/// sub-block `j` takes bit `j` of the 32 `qh` bytes. Bytes are widened to 32-bit lanes straight
/// from memory (the `qh` ones once per block), and give eight values of both sub-blocks.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn dequantize_with_mins_block<const FIFTH: bool>(
    (scales, d, dmin): (&[u8; 12], [u8; 2], [u8; 2]),
    qs: &[u8; 128],
    qh: &[u8; 32],
    out: &mut [f32; QK_K],
) {
    let nibble = _mm256_set1_epi32(0x0f);
    let fifth = _mm256_set1_epi32(0x10);
    let (dl, ml) = k4_scales(scales, d, dmin);
    // Lane i of `high_bits[g]`: qh byte 8g + i, shifted right by 2 per pair so that bits 2p and
    // 2p + 1 sit at bits 0 and 1.
    // (A const parameter, not an `Option`: each type gets its own loop, without a run-time test.)
    let mut high_bits = [0, 8, 16, 24].map(|at| widen8(part(qh, at)));
    for pair in 0..4 {
        let [d1, m1, d2, m2] = pair_scales(&dl, &ml, pair);
        for g in 0..4 {
            let q = widen8(part(qs, 32 * pair + 8 * g));
            let mut low = _mm256_and_si256(q, nibble);
            let mut high = _mm256_srli_epi32::<4>(q);
            if let (true, Some(h)) = (FIFTH, high_bits.get_mut(g)) {
                low = _mm256_or_si256(low, _mm256_and_si256(_mm256_slli_epi32::<4>(*h), fifth));
                high = _mm256_or_si256(high, _mm256_and_si256(_mm256_slli_epi32::<3>(*h), fifth));
                *h = _mm256_srli_epi32::<2>(*h);
            }
            let at = 64 * pair + 8 * g;
            let low = _mm256_cvtepi32_ps(low);
            let high = _mm256_cvtepi32_ps(high);
            store_at(out, at, _mm256_sub_ps(_mm256_mul_ps(d1, low), m1));
            store_at(out, at + 32, _mm256_sub_ps(_mm256_mul_ps(d2, high), m2));
        }
    }
}

kernel! {
    /// `dequantize_row_q4_K` at AVX2.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn dequantize_q4_k(_t: Avx2, blocks: &[BlockQ4K], out: &mut [f32]) {
        for (block, values) in blocks.iter().zip(out.as_chunks_mut::<QK_K>().0) {
            let head = (&block.scales, block.d, block.dmin);
            dequantize_with_mins_block::<false>(head, &block.qs, &[0; 32], values);
        }
    }

    /// `dequantize_row_q5_K` at AVX2.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn dequantize_q5_k(_t: Avx2, blocks: &[BlockQ5K], out: &mut [f32]) {
        for (block, values) in blocks.iter().zip(out.as_chunks_mut::<QK_K>().0) {
            let head = (&block.scales, block.d, block.dmin);
            dequantize_with_mins_block::<true>(head, &block.qs, &block.qh, values);
        }
    }
}
