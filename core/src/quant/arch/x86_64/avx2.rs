//! AVX2 (+F16C) kernels. Integer sums are taken exactly (products widened to i16 before any
//! pairwise add, so no `maddubs` saturation and no sign trick that breaks on -128), then the float
//! steps run in the scalar twin's order, one multiply or add at a time.

use core::arch::asm;
use core::arch::x86_64::*;

use super::primitives::{add_scaled_pair, grouped, mins_layout};
use super::vector::{
    f16_le, f16x8, hsum4_splat, hsum_i32, load16, load32, opaque, part, prefetch_block_ahead,
    store8, transpose_sums,
};

use crate::quant::activation::{BlockQ8K, BlockQ8_0, BlockQ8_1};
use crate::quant::iq::iq4_nl::BlockIq4Nl;
use crate::quant::iq::tables::KVALUES_IQ4NL;
use crate::quant::k_quants::q4_k::scales_and_mins;
use crate::quant::k_quants::{BlockQ2K, BlockQ4K, BlockQ5K, BlockQ6K};
use crate::quant::legacy::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1};
use crate::quant::misc::fp4::{e8m0_to_f32_half, KVALUES_FP4};
use crate::quant::misc::mxfp4::BlockMxfp4;

/// 32 signed bytes times 32 signed bytes, as eight i32 partial sums (exact for every byte value).
#[inline]
#[target_feature(enable = "avx2")]
fn dot_i8x32(a: &[i8; 32], b: &[i8; 32]) -> __m256i {
    let a_lo = _mm256_cvtepi8_epi16(load16(part(a, 0)));
    let a_hi = _mm256_cvtepi8_epi16(load16(part(a, 16)));
    let b_lo = _mm256_cvtepi8_epi16(load16(part(b, 0)));
    let b_hi = _mm256_cvtepi8_epi16(load16(part(b, 16)));
    _mm256_add_epi32(_mm256_madd_epi16(a_lo, b_lo), _mm256_madd_epi16(a_hi, b_hi))
}

/// `ggml_vec_dot_q8_0_q8_0_generic`: per block `sumf += sumi * (dx * dy)`, blocks in order.
/// Eight blocks' integer sums and products `sumi * (dx * dy)` are formed side by side (each lane
/// rounds exactly as the scalar expression does), then added to `sumf` one by one.
#[target_feature(enable = "avx2,f16c")]
fn vec_dot_q8_0_impl(w: &[BlockQ8_0], x: &[BlockQ8_0]) -> f32 {
    let mut sumf = 0.0f32;
    let mut w8 = w.chunks_exact(8);
    let mut x8 = x.chunks_exact(8);
    for (wc, xc) in (&mut w8).zip(&mut x8) {
        let mut partial = [_mm256_setzero_si256(); 8];
        let mut dw = [[0u8; 2]; 8];
        let mut dx = [[0u8; 2]; 8];
        let slots = partial.iter_mut().zip(&mut dw).zip(&mut dx);
        for (((p, dw), dx), (wb, xb)) in slots.zip(wc.iter().zip(xc)) {
            *p = dot_i8x32(&wb.qs, &xb.qs);
            *dw = wb.d;
            *dx = xb.d;
        }
        let sumi = _mm256_cvtepi32_ps(transpose_sums(&partial));
        let products = _mm256_mul_ps(sumi, _mm256_mul_ps(f16x8(&dw), f16x8(&dx)));
        let mut lanes = [0.0f32; 8];
        // SAFETY: `lanes` holds eight f32; `storeu` has no alignment requirement.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), products) };
        for p in lanes {
            sumf += p;
        }
    }
    let tail = w8.remainder().iter().zip(x8.remainder());
    for (wb, xb) in tail {
        let sumi = hsum_i32(dot_i8x32(&wb.qs, &xb.qs));
        let d = f16_le(wb.d) * f16_le(xb.d);
        sumf += sumi as f32 * d;
    }
    sumf
}

/// Safe entry of [`vec_dot_q8_0_impl`] for the kernel table.
pub(super) fn vec_dot_q8_0(w: &[BlockQ8_0], x: &[BlockQ8_0]) -> f32 {
    // SAFETY: the table only hands this kernel out for an available AVX2 level (`pick!` checks
    // `Level::is_available`, which requires avx2 and f16c).
    unsafe { vec_dot_q8_0_impl(w, x) }
}

/// The 32 Q4_0 quants of a block as bytes `0..16`: element `j` low nibble, `j + 16` high nibble.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn q4_0_nibbles(qs: &[u8; 16]) -> __m256i {
    let bytes = load16(qs);
    let low = _mm_and_si128(bytes, _mm_set1_epi8(0x0f));
    let high = _mm_and_si128(_mm_srli_epi16::<4>(bytes), _mm_set1_epi8(0x0f));
    _mm256_set_m128i(high, low)
}

/// Σ (q - 8)·y over one Q4_0 block, as eight i32 partial sums. `q` is below 16 so `q·y` pairs fit
/// `maddubs` (|2·15·128| < 2^15), and so do `8·y` pairs; the difference is exact in i16.
#[inline]
#[target_feature(enable = "avx2")]
fn dot_q4_0(qs: &[u8; 16], y: &[i8; 32]) -> __m256i {
    let q = q4_0_nibbles(qs);
    let y = load32(y);
    let qy = _mm256_maddubs_epi16(q, y);
    let eight_y = _mm256_maddubs_epi16(_mm256_set1_epi8(8), y);
    _mm256_madd_epi16(_mm256_sub_epi16(qy, eight_y), _mm256_set1_epi16(1))
}

/// `ggml_vec_dot_q4_0_q8_0_generic`: per block `sumf += sumi * dx * dy` (that is, `(sumi * dx) * dy`).
#[target_feature(enable = "avx2,f16c")]
fn vec_dot_q4_0_impl(w: &[BlockQ4_0], x: &[BlockQ8_0]) -> f32 {
    let mut sumf = 0.0f32;
    let mut w8 = w.chunks_exact(8);
    let mut x8 = x.chunks_exact(8);
    for (wc, xc) in (&mut w8).zip(&mut x8) {
        let mut partial = [_mm256_setzero_si256(); 8];
        let mut dw = [[0u8; 2]; 8];
        let mut dx = [[0u8; 2]; 8];
        let slots = partial.iter_mut().zip(&mut dw).zip(&mut dx);
        for (((p, dw), dx), (wb, xb)) in slots.zip(wc.iter().zip(xc)) {
            *p = dot_q4_0(&wb.qs, &xb.qs);
            *dw = wb.d;
            *dx = xb.d;
        }
        let sumi = _mm256_cvtepi32_ps(transpose_sums(&partial));
        let products = _mm256_mul_ps(_mm256_mul_ps(sumi, f16x8(&dw)), f16x8(&dx));
        let mut lanes = [0.0f32; 8];
        // SAFETY: `lanes` holds eight f32; `storeu` has no alignment requirement.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), products) };
        for p in lanes {
            sumf += p;
        }
    }
    let tail = w8.remainder().iter().zip(x8.remainder());
    for (wb, xb) in tail {
        let sumi = hsum_i32(dot_q4_0(&wb.qs, &xb.qs));
        sumf += sumi as f32 * f16_le(wb.d) * f16_le(xb.d);
    }
    sumf
}

/// Safe entry of [`vec_dot_q4_0_impl`].
pub(super) fn vec_dot_q4_0(w: &[BlockQ4_0], x: &[BlockQ8_0]) -> f32 {
    // SAFETY: only handed out for an available AVX2 level (see `vec_dot_q8_0`).
    unsafe { vec_dot_q4_0_impl(w, x) }
}

/// Eight-lane integer accumulator of a K-quant super-block (ggml's `aux32[8]`): two sub-block sums
/// (i16 per lane, in `[lanes | lanes]` layout) are interleaved and multiplied by their scales with
/// `madd`, so every i32 lane only ever receives products of its own lane.
pub(super) struct LaneAcc {
    /// Lanes 0..3 in each half.
    low: __m256i,
    /// Lanes 4..7 in each half.
    high: __m256i,
}

impl LaneAcc {
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn new() -> LaneAcc {
        LaneAcc {
            low: _mm256_setzero_si256(),
            high: _mm256_setzero_si256(),
        }
    }

    /// Adds `scale_a · a + scale_b · b` lane by lane (`a`, `b` in `[lanes | lanes]` layout), the
    /// scales as a vector: each 32-bit element holds `(scale_a, scale_b)` as two i16 for its half
    /// (so the halves may have different scales).
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn add_pair_scaled(&mut self, a: __m256i, b: __m256i, scales: __m256i) {
        let low = _mm256_unpacklo_epi16(a, b);
        let high = _mm256_unpackhi_epi16(a, b);
        self.low = _mm256_add_epi32(self.low, _mm256_madd_epi16(low, scales));
        self.high = _mm256_add_epi32(self.high, _mm256_madd_epi16(high, scales));
    }

    /// The eight lanes in order.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn lanes(&self) -> __m256i {
        let first = _mm256_permute2x128_si256::<0x20>(self.low, self.high);
        let second = _mm256_permute2x128_si256::<0x31>(self.low, self.high);
        _mm256_add_epi32(first, second)
    }
}

/// `sums[l] += d * lanes[l]` (multiply, then add: the scalar `accumulate_lanes`).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn accumulate(sums: __m256, d: f32, lanes: __m256i) -> __m256 {
    _mm256_add_ps(
        sums,
        _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes)),
    )
}

/// The scalar `add_lanes`: the eight totals added to `sumf` in lane order.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn add_lanes(mut sumf: f32, sums: __m256) -> f32 {
    let mut lanes = [0.0f32; 8];
    // SAFETY: `lanes` holds eight f32; `storeu` has no alignment requirement.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), sums) };
    for s in lanes {
        sumf += s;
    }
    sumf
}

/// `ggml_vec_dot_q4_K_q8_K_generic`: per block the lane sums scaled by `d·dx` into `sums`, then
/// `sumf -= (dmin·dx) · Σ bsums·mins`; the lanes added to `sumf` last.
#[target_feature(enable = "avx2,f16c")]
fn vec_dot_q4_k_impl(w: &[BlockQ4K], x: &[BlockQ8K]) -> f32 {
    dot_with_mins_unprepared::<false, false, _>(w, x, q4_k_parts)
}

/// [`dot_with_mins`] with the activation worked block by block as it is read (one vec_dot).
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn dot_with_mins_unprepared<const VNNI: bool, const VBMI: bool, W>(
    w: &[W],
    x: &[BlockQ8K],
    parts: impl Fn(&W) -> MinsBlock<'_>,
) -> f32 {
    dot_with_mins::<VNNI, VBMI, _, _>(
        w,
        x,
        x,
        parts,
        |xb, at| mins_layout::<VNNI, VBMI>(load32(part(&xb.qs, at))),
        |xb, mins| min_products(xb, mins),
    )
}

/// A Q4_K block as [`dot_with_mins`] reads it.
#[inline(always)]
pub(super) fn q4_k_parts(b: &BlockQ4K) -> MinsBlock<'_> {
    (&b.scales, &b.qs, None, d_and_dmin(b))
}

/// A Q5_K block as [`dot_with_mins`] reads it.
#[inline(always)]
pub(super) fn q5_k_parts(b: &BlockQ5K) -> MinsBlock<'_> {
    (&b.scales, &b.qs, Some(&b.qh), d_and_dmin(b))
}

/// One Q4_K/Q5_K block as [`dot_with_mins`] reads it: packed scales, the 4-bit quants, the fifth
/// bits (Q5_K), and the f16 `d` then `dmin` (the block's first four bytes).
pub(super) type MinsBlock<'a> = (
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

/// The dot shared by Q4_K and Q5_K (`vec_dot_with_mins` of the scalar twins): lanes scaled by
/// `d·dx` into `sums` per block, `sumf -= (dmin·dx)·Σ bsums·mins`, lanes added to `sumf` last.
/// `activation(&paired[k], at)` gives the 32 bytes at `at` of activation block `k` through
/// [`mins_layout`], and `mins_dot(&paired[k], mins)` its `Σ bsums·mins` as four i32 partial sums
/// (`paired` is `x` itself, worked here, or a copy prepared once for many rows).
///
/// Below the VNNI level each pair of sub-blocks is two `maddubs` (element `k` beside `k + 8`, one
/// lane) into a [`LaneAcc`]. At the VNNI level the quants are in [`lane_groups`] order: one
/// `vpdpbusd` per sub-block leaves its eight lane sums in lane order, and one `vpdpwssd` scales
/// and adds the pair (two fewer shuffles per pair, and none to put the lanes back in order).
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn dot_with_mins<const VNNI: bool, const VBMI: bool, W, A>(
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
        let high_bits = qh.map(|h| mins_layout::<VNNI, VBMI>(load32(h)));

        // The eight scale bytes in every 64-bit element; pair p (scales 2p, 2p+1, as i16) is
        // taken into every 32-bit element by one byte shuffle (a 256-bit widening costs two).
        let scale_bytes = _mm256_set1_epi64x(i64::from_le_bytes(scales));
        let mut acc = LaneAcc::new();
        let mut grouped = _mm256_setzero_si256();
        for (p, qs) in qs_all.chunks_exact(32).enumerate() {
            // 32 bytes: low nibbles are sub-block 2p (elements 0..32), high ones 2p+1 (32..64).
            // maddubs of unsigned quants (< 32) and Q8_K bytes: pairs below 2·31·128, exact.
            // One shuffle for both nibbles (the nibble split is bytewise, so it commutes).
            let q = mins_layout::<VNNI, VBMI>(load32(part(qs, 0)));
            let mut low = _mm256_and_si256(q, nibble);
            let mut high = _mm256_and_si256(_mm256_srli_epi16::<4>(q), nibble);
            if let Some(h) = high_bits {
                let (bit_low, bit_high) = q5_k_fifth_bits(h, p);
                low = _mm256_or_si256(low, bit_low);
                high = _mm256_or_si256(high, bit_high);
            }
            let x0 = activation(xp, 64 * p);
            let x1 = activation(xp, 64 * p + 32);
            let scales = scale_pair(scale_bytes, p);
            if VNNI {
                // SAFETY: `VNNI` is true only in the `*_vnni` kernels, which the table hands out
                // only at an available AVX-512 VNNI level.
                grouped = unsafe {
                    super::primitives::grouped_pair(grouped, [low, high], [x0, x1], scales)
                };
            } else {
                let s0 = _mm256_maddubs_epi16(low, x0);
                let s1 = _mm256_maddubs_epi16(high, x1);
                acc.add_pair_scaled(s0, s1, scales);
            }
        }
        let block_lanes = if VNNI { grouped } else { acc.lanes() };
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

/// `ggml_vec_dot_q5_K_q8_K_generic`.
#[target_feature(enable = "avx2,f16c")]
fn vec_dot_q5_k_impl(w: &[BlockQ5K], x: &[BlockQ8K]) -> f32 {
    dot_with_mins_unprepared::<false, false, _>(w, x, q5_k_parts)
}

/// Safe entry of [`vec_dot_q5_k_impl`].
pub(super) fn vec_dot_q5_k(w: &[BlockQ5K], x: &[BlockQ8K]) -> f32 {
    // SAFETY: only handed out for an available AVX2 level (see `vec_dot_q8_0`).
    unsafe { vec_dot_q5_k_impl(w, x) }
}

/// Safe entry of [`vec_dot_q4_k_impl`].
pub(super) fn vec_dot_q4_k(w: &[BlockQ4K], x: &[BlockQ8K]) -> f32 {
    // SAFETY: only handed out for an available AVX2 level (see `vec_dot_q8_0`).
    unsafe { vec_dot_q4_k_impl(w, x) }
}

/// `ggml_vec_dot_q6_K_q8_K_generic`: the lane sums scaled by `d·dx` into `sums` per block, added
/// in lane order at the end.
#[target_feature(enable = "avx2,f16c")]
fn vec_dot_q6_k_impl(w: &[BlockQ6K], x: &[BlockQ8K]) -> f32 {
    dot_q6_k::<false, false, _>(w, x, x, |xb, g| q6_k_activation_group::<false>(&xb.qs, g))
}

/// Activation group `g` (bytes `32g..32g + 32`) as the Q6_K dot takes it: through
/// [`lane_groups`], and `maddubs(32, x)` of that (the bias part of `Σ (u - 32)·x`).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn q6_k_activation_group<const VBMI: bool>(
    qs: &[i8; 256],
    g: usize,
) -> (__m256i, __m256i) {
    let x = grouped::<VBMI>(load32(part(qs, 32 * g)));
    (x, _mm256_maddubs_epi16(_mm256_set1_epi8(32), x))
}

/// `ggml_vec_dot_q6_K_q8_K_generic`'s order over `paired`, whose block `k` gives activation group
/// `g` of `x[k]` as [`q6_k_activation_group`] does (computed here, or prepared once for many
/// rows).
///
/// The quants are read in [`lane_groups`] order: in 32-bit lane `m` of a group of 32 values, the
/// first sub-block's two elements of lane `m`, then the second's. So each `maddubs` leaves the
/// group's two sub-block sums of lane `m` as the i16 pair of lane `m`, and one `madd` (`vpdpwssd`
/// at `VNNI`) with the pair's two scales adds them to lane `m`: no interleaving of sub-blocks and
/// no reordering of lanes per block. The scales, sign-extended once a block, are broadcast from
/// memory (a load, not a shuffle) per group.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn dot_q6_k<const VNNI: bool, const VBMI: bool, A>(
    w: &[BlockQ6K],
    x: &[BlockQ8K],
    paired: &[A],
    group: impl Fn(&A, usize) -> (__m256i, __m256i),
) -> f32 {
    let mut sums = _mm256_setzero_ps();
    // The previous block's lanes and `d·dx`, whose float steps run one block late (see
    // `dot_with_mins`; starting from zeros adds `+0·0` to `+0`).
    let mut pending = (_mm256_setzero_si256(), 0.0);
    let nibble = _mm256_set1_epi8(0x0f);
    let mut scale_pairs = ScalePairs::new();
    for ((wb, xb), xp) in w.iter().zip(x).zip(paired) {
        prefetch_block_ahead(wb);
        scale_pairs.store(_mm256_cvtepi8_epi16(load16(&wb.scales)));
        let mut acc = _mm256_setzero_si256();
        let halves = wb.ql.chunks_exact(64).zip(wb.qh.chunks_exact(32));
        for (half, (ql, qh)) in halves.enumerate() {
            // Reordered before the bit extraction (bytewise, so it commutes): three permutes,
            // not one per group of 32 values.
            let a = grouped::<VBMI>(load32(part(ql, 0)));
            let b = grouped::<VBMI>(load32(part(ql, 32)));
            let h = grouped::<VBMI>(load32(part(qh, 0)));
            let high_bits = q6_k_high_bits(h);
            let a_high = _mm256_and_si256(_mm256_srli_epi16::<4>(a), nibble);
            let b_high = _mm256_and_si256(_mm256_srli_epi16::<4>(b), nibble);
            // Four groups of 32 values (each two sub-blocks of 16) as unsigned q + 32 (0..63).
            let groups = [
                _mm256_or_si256(_mm256_and_si256(a, nibble), high_bits[0]),
                _mm256_or_si256(_mm256_and_si256(b, nibble), high_bits[1]),
                _mm256_or_si256(a_high, high_bits[2]),
                _mm256_or_si256(b_high, high_bits[3]),
            ];
            for (quants, g) in groups.into_iter().zip(0..) {
                let k = 4 * half + g;
                let (x, bias_x) = group(xp, k);
                // Σ (u - 32)·x = maddubs(u, x) - maddubs(32, x): each i16 is below 2·63·128 +
                // 2·32·128 in magnitude, exact.
                let pair_sums = _mm256_sub_epi16(_mm256_maddubs_epi16(quants, x), bias_x);
                acc = add_scaled_pair::<VNNI>(acc, pair_sums, scale_pairs.get(k));
            }
        }
        let d = f16_le(wb.d) * xb.scale();
        let (lanes, d_before) = pending;
        sums = accumulate(sums, d_before, lanes);
        pending = (acc, d);
    }
    let (lanes, d) = pending;
    add_lanes(0.0, accumulate(sums, d, lanes))
}

/// The sixteen scales of a super-block with 16-value sub-blocks (Q3_K, Q6_K) as eight i16 pairs,
/// pair `k` = `(s[2k], s[2k + 1])`: the two scales of 32-value group `k` (element index `32k..`),
/// as [`add_scaled_pair`] takes them. Kept in memory, and each pair broadcast from there when
/// used: a load, where taking it from the register that held all sixteen is a shuffle, on pipes
/// these kernels already crowd.
pub(super) struct ScalePairs([i32; 8]);

impl ScalePairs {
    #[inline(always)]
    pub(super) fn new() -> ScalePairs {
        ScalePairs([0; 8])
    }

    /// Stores the sixteen scales, sign-extended to i16 in order (`_mm256_cvtepi8_epi16`).
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn store(&mut self, scales: __m256i) {
        // SAFETY: the array is 32 bytes; `storeu` has no alignment requirement.
        unsafe { _mm256_storeu_si256(self.0.as_mut_ptr().cast(), scales) };
        // SAFETY: the template is empty and only receives the address; LLVM must then assume
        // the memory behind it read and written (no `nomem`, no `readonly`), so it loads each
        // pair back rather than extracting it from the register stored.
        unsafe { asm!("/* {0} */", in(reg) self.0.as_ptr(), options(nostack, preserves_flags)) };
    }

    /// Pair `k` in every 32-bit element.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn get(&self, k: usize) -> __m256i {
        _mm256_set1_epi32(self.0.get(k).copied().unwrap_or(0))
    }
}

/// The four 2-bit fields of each Q6_K `qh` byte (bits `2g..2g + 2` for group `g`) at bits 4..5,
/// where they join the group's low nibble: one shift and one mask each. (16-bit shifts are
/// fine: bits crossing into the other byte land outside the mask.)
#[inline]
#[target_feature(enable = "avx2")]
fn q6_k_high_bits(h: __m256i) -> [__m256i; 4] {
    let bits45 = _mm256_set1_epi8(0x30);
    [
        _mm256_and_si256(_mm256_slli_epi16::<4>(h), bits45),
        _mm256_and_si256(_mm256_slli_epi16::<2>(h), bits45),
        _mm256_and_si256(h, bits45),
        _mm256_and_si256(_mm256_srli_epi16::<2>(h), bits45),
    ]
}

/// Safe entry of [`vec_dot_q6_k_impl`].
pub(super) fn vec_dot_q6_k(w: &[BlockQ6K], x: &[BlockQ8K]) -> f32 {
    // SAFETY: only handed out for an available AVX2 level (see `vec_dot_q8_0`).
    unsafe { vec_dot_q6_k_impl(w, x) }
}

/// Sixteen signed bytes times `d` into `out[..16]`: `q as f32 * d`, one rounding each.
#[inline]
#[target_feature(enable = "avx2")]
fn scale_i8x16(out: &mut [f32], q: __m128i, d: __m256) {
    let (first, second) = out.split_at_mut(8.min(out.len()));
    let low = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
    let high = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128::<8>(q)));
    store8(first, _mm256_mul_ps(low, d));
    store8(second, _mm256_mul_ps(high, d));
}

/// `dequantize_row_q8_0`: `q * d` per value.
#[target_feature(enable = "avx2,f16c")]
fn dequantize_q8_0_impl(blocks: &[BlockQ8_0], out: &mut [f32]) {
    for (block, values) in blocks.iter().zip(out.chunks_exact_mut(32)) {
        let d = _mm256_set1_ps(f16_le(block.d));
        let (first, second) = values.split_at_mut(16);
        scale_i8x16(first, load16(part(&block.qs, 0)), d);
        scale_i8x16(second, load16(part(&block.qs, 16)), d);
    }
}

/// Safe entry of [`dequantize_q8_0_impl`].
pub(super) fn dequantize_q8_0(blocks: &[BlockQ8_0], out: &mut [f32]) {
    // SAFETY: only handed out for an available AVX2 level (see `vec_dot_q8_0`).
    unsafe { dequantize_q8_0_impl(blocks, out) }
}

/// `dequantize_row_q4_0`: `(q - 8) * d`, low nibbles first.
#[target_feature(enable = "avx2,f16c")]
fn dequantize_q4_0_impl(blocks: &[BlockQ4_0], out: &mut [f32]) {
    for (block, values) in blocks.iter().zip(out.chunks_exact_mut(32)) {
        let d = _mm256_set1_ps(f16_le(block.d));
        let q = _mm256_sub_epi8(q4_0_nibbles(&block.qs), _mm256_set1_epi8(8));
        let (first, second) = values.split_at_mut(16);
        scale_i8x16(first, _mm256_castsi256_si128(q), d);
        scale_i8x16(second, _mm256_extracti128_si256::<1>(q), d);
    }
}

/// Safe entry of [`dequantize_q4_0_impl`].
pub(super) fn dequantize_q4_0(blocks: &[BlockQ4_0], out: &mut [f32]) {
    // SAFETY: only handed out for an available AVX2 level (see `vec_dot_q8_0`).
    unsafe { dequantize_q4_0_impl(blocks, out) }
}

/// `dequantize_row_q6_K`: `(d * sc) * q` with `q` in -32..31.
#[target_feature(enable = "avx2,f16c")]
fn dequantize_q6_k_impl(blocks: &[BlockQ6K], out: &mut [f32]) {
    let nibble = _mm256_set1_epi8(0x0f);
    let bias = _mm256_set1_epi8(32);
    for (block, values) in blocks.iter().zip(out.chunks_exact_mut(256)) {
        let d = f16_le(block.d);
        let halves = block.ql.chunks_exact(64).zip(block.qh.chunks_exact(32));
        let halves = halves.zip(values.chunks_exact_mut(128));
        for (((ql, qh), values), scales) in halves.zip(block.scales.chunks_exact(8)) {
            let a = load32(part(ql, 0));
            let b = load32(part(ql, 32));
            let h = load32(part(qh, 0));
            let lows = [
                _mm256_and_si256(a, nibble),
                _mm256_and_si256(b, nibble),
                _mm256_and_si256(_mm256_srli_epi16::<4>(a), nibble),
                _mm256_and_si256(_mm256_srli_epi16::<4>(b), nibble),
            ];
            let groups = values
                .chunks_exact_mut(32)
                .zip(lows.into_iter().zip(q6_k_high_bits(h)));
            for ((values, (low, high)), sc) in groups.zip(scales.chunks_exact(2)) {
                let q = _mm256_sub_epi8(_mm256_or_si256(low, high), bias);
                let (first, second) = values.split_at_mut(16);
                let &[sc1, sc2] = sc else {
                    continue;
                };
                let d1 = _mm256_set1_ps(d * f32::from(sc1));
                let d2 = _mm256_set1_ps(d * f32::from(sc2));
                scale_i8x16(first, _mm256_castsi256_si128(q), d1);
                scale_i8x16(second, _mm256_extracti128_si256::<1>(q), d2);
            }
        }
    }
}

/// Safe entry of [`dequantize_q6_k_impl`].
pub(super) fn dequantize_q6_k(blocks: &[BlockQ6K], out: &mut [f32]) {
    // SAFETY: only handed out for an available AVX2 level (see `vec_dot_q8_0`).
    unsafe { dequantize_q6_k_impl(blocks, out) }
}

/// The legacy block dot: `partial` gives a block pair's eight i32 partial sums; eight block pairs
/// at a time are reduced to their integer sums, `combine` forms each pair's float term side by
/// side (the scalar expression, lane by lane), and the terms are added to `sumf` in block order.
/// `tail` is the same term for one pair, for the last `len % 8` blocks.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn legacy_dot<W, X>(
    w: &[W],
    x: &[X],
    partial: impl Fn(&W, &X) -> __m256i,
    combine: impl Fn(__m256, &[W], &[X]) -> __m256,
    tail: impl Fn(f32, &W, &X) -> f32,
) -> f32 {
    let mut sumf = 0.0f32;
    let mut w8 = w.chunks_exact(8);
    let mut x8 = x.chunks_exact(8);
    for (wc, xc) in (&mut w8).zip(&mut x8) {
        let mut partials = [_mm256_setzero_si256(); 8];
        for (p, (wb, xb)) in partials.iter_mut().zip(wc.iter().zip(xc)) {
            *p = partial(wb, xb);
        }
        let sumi = _mm256_cvtepi32_ps(transpose_sums(&partials));
        let mut terms = [0.0f32; 8];
        // SAFETY: `terms` holds eight f32; `storeu` has no alignment requirement.
        unsafe { _mm256_storeu_ps(terms.as_mut_ptr(), combine(sumi, wc, xc)) };
        for t in terms {
            sumf += t;
        }
    }
    for (wb, xb) in w8.remainder().iter().zip(x8.remainder()) {
        sumf += tail(hsum_i32(partial(wb, xb)) as f32, wb, xb);
    }
    sumf
}

/// Eight f16 fields, one from each of the first eight blocks, to f32.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn gather_f16<B>(blocks: &[B], field: impl Fn(&B) -> [u8; 2]) -> __m256 {
    let mut halves = [[0u8; 2]; 8];
    for (h, b) in halves.iter_mut().zip(blocks) {
        *h = field(b);
    }
    f16x8(&halves)
}

/// Σ q·y over 32 unsigned quants below 32 (`maddubs` pairs stay below 2^15) minus Σ bias·y.
#[inline]
#[target_feature(enable = "avx2")]
fn dot_unsigned(q: __m256i, y: &[i8; 32], bias: i8) -> __m256i {
    let y = load32(y);
    let qy = _mm256_maddubs_epi16(q, y);
    let ones = _mm256_set1_epi16(1);
    if bias == 0 {
        return _mm256_madd_epi16(qy, ones);
    }
    let by = _mm256_maddubs_epi16(_mm256_set1_epi8(bias), y);
    _mm256_madd_epi16(_mm256_sub_epi16(qy, by), ones)
}

/// The fifth bits of a Q5 block (`qh` bit `i` for element `i`) as 0x10 in byte `i`.
#[inline]
#[target_feature(enable = "avx2")]
fn fifth_bits(qh: [u8; 4]) -> __m256i {
    let bits = _mm256_set1_epi32(i32::from_le_bytes(qh));
    // Byte i takes qh byte i / 8, then tests bit i % 8.
    let spread = _mm256_shuffle_epi8(
        bits,
        _mm256_setr_epi8(
            0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3,
            3, 3, 3,
        ),
    );
    let mask = _mm256_set1_epi64x(0x8040_2010_0804_0201_u64 as i64);
    let set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, mask), mask);
    _mm256_and_si256(set, _mm256_set1_epi8(0x10))
}

/// `ggml_vec_dot_q4_1_q8_1_generic`: per block `sumf += (dx * dy) * sumi + m * s`.
#[target_feature(enable = "avx2,f16c")]
fn vec_dot_q4_1_impl(w: &[BlockQ4_1], x: &[BlockQ8_1]) -> f32 {
    legacy_dot(
        w,
        x,
        |wb, xb| dot_unsigned(q4_0_nibbles(&wb.qs), &xb.qs, 0),
        |sumi, wc, xc| {
            let dd = _mm256_mul_ps(gather_f16(wc, |b| b.d), gather_f16(xc, |b| b.d));
            let ms = _mm256_mul_ps(gather_f16(wc, |b| b.m), gather_f16(xc, |b| b.s));
            _mm256_add_ps(_mm256_mul_ps(dd, sumi), ms)
        },
        |sumi, wb, xb| (f16_le(wb.d) * f16_le(xb.d)) * sumi + f16_le(wb.m) * f16_le(xb.s),
    )
}

/// Safe entry of [`vec_dot_q4_1_impl`].
pub(super) fn vec_dot_q4_1(w: &[BlockQ4_1], x: &[BlockQ8_1]) -> f32 {
    // SAFETY: only handed out for an available AVX2 level (see `vec_dot_q8_0`).
    unsafe { vec_dot_q4_1_impl(w, x) }
}

/// `ggml_vec_dot_q5_0_q8_0_generic`: per block `sumf += (dx * dy) * sumi`, quants `q - 16`.
#[target_feature(enable = "avx2,f16c")]
fn vec_dot_q5_0_impl(w: &[BlockQ5_0], x: &[BlockQ8_0]) -> f32 {
    legacy_dot(
        w,
        x,
        |wb, xb| {
            let q = _mm256_or_si256(q4_0_nibbles(&wb.qs), fifth_bits(wb.qh));
            dot_unsigned(q, &xb.qs, 16)
        },
        |sumi, wc, xc| {
            let dd = _mm256_mul_ps(gather_f16(wc, |b| b.d), gather_f16(xc, |b| b.d));
            _mm256_mul_ps(dd, sumi)
        },
        |sumi, wb, xb| (f16_le(wb.d) * f16_le(xb.d)) * sumi,
    )
}

/// Safe entry of [`vec_dot_q5_0_impl`].
pub(super) fn vec_dot_q5_0(w: &[BlockQ5_0], x: &[BlockQ8_0]) -> f32 {
    // SAFETY: only handed out for an available AVX2 level (see `vec_dot_q8_0`).
    unsafe { vec_dot_q5_0_impl(w, x) }
}

/// `ggml_vec_dot_q5_1_q8_1_generic`: per block `sumf += (dx * dy) * sumi + m * s`.
#[target_feature(enable = "avx2,f16c")]
fn vec_dot_q5_1_impl(w: &[BlockQ5_1], x: &[BlockQ8_1]) -> f32 {
    legacy_dot(
        w,
        x,
        |wb, xb| {
            let q = _mm256_or_si256(q4_0_nibbles(&wb.qs), fifth_bits(wb.qh));
            dot_unsigned(q, &xb.qs, 0)
        },
        |sumi, wc, xc| {
            let dd = _mm256_mul_ps(gather_f16(wc, |b| b.d), gather_f16(xc, |b| b.d));
            let ms = _mm256_mul_ps(gather_f16(wc, |b| b.m), gather_f16(xc, |b| b.s));
            _mm256_add_ps(_mm256_mul_ps(dd, sumi), ms)
        },
        |sumi, wb, xb| (f16_le(wb.d) * f16_le(xb.d)) * sumi + f16_le(wb.m) * f16_le(xb.s),
    )
}

/// Safe entry of [`vec_dot_q5_1_impl`].
pub(super) fn vec_dot_q5_1(w: &[BlockQ5_1], x: &[BlockQ8_1]) -> f32 {
    // SAFETY: only handed out for an available AVX2 level (see `vec_dot_q8_0`).
    unsafe { vec_dot_q5_1_impl(w, x) }
}

/// `q * d + m` for sixteen unsigned bytes into `out[..16]` (multiply, then add).
#[inline]
#[target_feature(enable = "avx2")]
fn scale_add_u8x16<const NAN_PRODUCTS: bool>(out: &mut [f32], q: __m128i, d: __m256, m: __m256) {
    let (first, second) = out.split_at_mut(8.min(out.len()));
    let low = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q));
    let high = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128::<8>(q)));
    for (out, q) in [(first, low), (second, high)] {
        let product = _mm256_mul_ps(q, d);
        let sum = _mm256_add_ps(product, m);
        if NAN_PRODUCTS {
            // When `q·d` is NaN the result is that NaN (its payload), as the scalar code, candle
            // and ggml give on x86 when `m` is NaN too; LLVM may commute the vector add, so pick
            // it explicitly.
            let product_nan = _mm256_cmp_ps::<_CMP_UNORD_Q>(product, product);
            store8(out, _mm256_blendv_ps(sum, product, product_nan));
        } else {
            store8(out, sum);
        }
    }
}

/// Thirty-two quants in element order (one per byte) and a block's `q * d + m`.
#[inline]
#[target_feature(enable = "avx2")]
fn scale_add_block(values: &mut [f32], q: __m256i, d: f32, m: f32) {
    // With a finite `d` no product is NaN (the quants are small integers), so only `m` can
    // make a NaN, and the add gives its payload in either operand order: the operand choice
    // below is needed only for the rare block whose `d` is NaN or infinite.
    let finite = d.is_finite();
    let (d, m) = (_mm256_set1_ps(d), _mm256_set1_ps(m));
    let (first, second) = values.split_at_mut(16.min(values.len()));
    let (low, high) = (_mm256_castsi256_si128(q), _mm256_extracti128_si256::<1>(q));
    if finite {
        scale_add_u8x16::<false>(first, low, d, m);
        scale_add_u8x16::<false>(second, high, d, m);
    } else {
        scale_add_u8x16::<true>(first, low, d, m);
        scale_add_u8x16::<true>(second, high, d, m);
    }
}

/// Thirty-two signed quants in element order times `d` (`q * d`).
#[inline]
#[target_feature(enable = "avx2")]
fn scale_block(values: &mut [f32], q: __m256i, d: f32) {
    let d = _mm256_set1_ps(d);
    let (first, second) = values.split_at_mut(16.min(values.len()));
    scale_i8x16(first, _mm256_castsi256_si128(q), d);
    scale_i8x16(second, _mm256_extracti128_si256::<1>(q), d);
}

/// `dequantize_row_q4_1`: `q * d + m`.
#[target_feature(enable = "avx2,f16c")]
fn dequantize_q4_1_impl(blocks: &[BlockQ4_1], out: &mut [f32]) {
    for (block, values) in blocks.iter().zip(out.chunks_exact_mut(32)) {
        let q = q4_0_nibbles(&block.qs);
        scale_add_block(values, q, f16_le(block.d), f16_le(block.m));
    }
}

/// Safe entry of [`dequantize_q4_1_impl`].
pub(super) fn dequantize_q4_1(blocks: &[BlockQ4_1], out: &mut [f32]) {
    // SAFETY: only handed out for an available AVX2 level (see `vec_dot_q8_0`).
    unsafe { dequantize_q4_1_impl(blocks, out) }
}

/// `dequantize_row_q5_0`: `(q - 16) * d`.
#[target_feature(enable = "avx2,f16c")]
fn dequantize_q5_0_impl(blocks: &[BlockQ5_0], out: &mut [f32]) {
    for (block, values) in blocks.iter().zip(out.chunks_exact_mut(32)) {
        let q = _mm256_or_si256(q4_0_nibbles(&block.qs), fifth_bits(block.qh));
        let q = _mm256_sub_epi8(q, _mm256_set1_epi8(16));
        scale_block(values, q, f16_le(block.d));
    }
}

/// Safe entry of [`dequantize_q5_0_impl`].
pub(super) fn dequantize_q5_0(blocks: &[BlockQ5_0], out: &mut [f32]) {
    // SAFETY: only handed out for an available AVX2 level (see `vec_dot_q8_0`).
    unsafe { dequantize_q5_0_impl(blocks, out) }
}

/// `dequantize_row_q5_1`: `q * d + m`.
#[target_feature(enable = "avx2,f16c")]
fn dequantize_q5_1_impl(blocks: &[BlockQ5_1], out: &mut [f32]) {
    for (block, values) in blocks.iter().zip(out.chunks_exact_mut(32)) {
        let q = _mm256_or_si256(q4_0_nibbles(&block.qs), fifth_bits(block.qh));
        scale_add_block(values, q, f16_le(block.d), f16_le(block.m));
    }
}

/// Safe entry of [`dequantize_q5_1_impl`].
pub(super) fn dequantize_q5_1(blocks: &[BlockQ5_1], out: &mut [f32]) {
    // SAFETY: only handed out for an available AVX2 level (see `vec_dot_q8_0`).
    unsafe { dequantize_q5_1_impl(blocks, out) }
}

/// A block's 32 four-bit codes mapped through a 16-entry signed table, in element order.
#[inline]
#[target_feature(enable = "avx2")]
fn table_lookup(qs: &[u8; 16], table: &[i8; 16]) -> __m256i {
    let table = load16(table);
    _mm256_shuffle_epi8(_mm256_set_m128i(table, table), q4_0_nibbles(qs))
}

/// `dequantize_row_iq4_nl`: `d * level`.
#[target_feature(enable = "avx2,f16c")]
fn dequantize_iq4_nl_impl(blocks: &[BlockIq4Nl], out: &mut [f32]) {
    for (block, values) in blocks.iter().zip(out.chunks_exact_mut(32)) {
        let q = table_lookup(&block.qs, &KVALUES_IQ4NL);
        scale_block(values, q, f16_le(block.d));
    }
}

/// Safe entry of [`dequantize_iq4_nl_impl`].
pub(super) fn dequantize_iq4_nl(blocks: &[BlockIq4Nl], out: &mut [f32]) {
    // SAFETY: only handed out for an available AVX2 level (see `vec_dot_q8_0`).
    unsafe { dequantize_iq4_nl_impl(blocks, out) }
}

/// `dequantize_row_mxfp4`: `level * d`.
#[target_feature(enable = "avx2,f16c")]
fn dequantize_mxfp4_impl(blocks: &[BlockMxfp4], out: &mut [f32]) {
    for (block, values) in blocks.iter().zip(out.chunks_exact_mut(32)) {
        let q = table_lookup(&block.qs, &KVALUES_FP4);
        scale_block(values, q, e8m0_to_f32_half(block.e));
    }
}

/// Safe entry of [`dequantize_mxfp4_impl`].
pub(super) fn dequantize_mxfp4(blocks: &[BlockMxfp4], out: &mut [f32]) {
    // SAFETY: only handed out for an available AVX2 level (see `vec_dot_q8_0`).
    unsafe { dequantize_mxfp4_impl(blocks, out) }
}

/// `ggml_vec_dot_iq4_nl_q8_0_generic`: per block `sumf += (dy * dx) * sumi`.
#[target_feature(enable = "avx2,f16c")]
fn vec_dot_iq4_nl_impl(w: &[BlockIq4Nl], x: &[BlockQ8_0]) -> f32 {
    legacy_dot(
        w,
        x,
        |wb, xb| dot_levels(table_lookup(&wb.qs, &KVALUES_IQ4NL), &xb.qs),
        |sumi, wc, xc| {
            let d = _mm256_mul_ps(gather_f16(xc, |b| b.d), gather_f16(wc, |b| b.d));
            _mm256_mul_ps(d, sumi)
        },
        |sumi, wb, xb| (f16_le(xb.d) * f16_le(wb.d)) * sumi,
    )
}

/// Safe entry of [`vec_dot_iq4_nl_impl`].
pub(super) fn vec_dot_iq4_nl(w: &[BlockIq4Nl], x: &[BlockQ8_0]) -> f32 {
    // SAFETY: only handed out for an available AVX2 level (see `vec_dot_q8_0`).
    unsafe { vec_dot_iq4_nl_impl(w, x) }
}

/// `ggml_vec_dot_mxfp4_q8_0_generic`: per block `sumf += (dy * scale) * sumi`.
#[target_feature(enable = "avx2,f16c")]
fn vec_dot_mxfp4_impl(w: &[BlockMxfp4], x: &[BlockQ8_0]) -> f32 {
    legacy_dot(
        w,
        x,
        |wb, xb| dot_levels(table_lookup(&wb.qs, &KVALUES_FP4), &xb.qs),
        |sumi, wc, xc| {
            let mut scales = [0.0f32; 8];
            for (s, b) in scales.iter_mut().zip(wc) {
                *s = e8m0_to_f32_half(b.e);
            }
            // SAFETY: `scales` holds eight f32; `loadu` has no alignment requirement.
            let scales = unsafe { _mm256_loadu_ps(scales.as_ptr()) };
            _mm256_mul_ps(_mm256_mul_ps(gather_f16(xc, |b| b.d), scales), sumi)
        },
        |sumi, wb, xb| (f16_le(xb.d) * e8m0_to_f32_half(wb.e)) * sumi,
    )
}

/// Safe entry of [`vec_dot_mxfp4_impl`].
pub(super) fn vec_dot_mxfp4(w: &[BlockMxfp4], x: &[BlockQ8_0]) -> f32 {
    // SAFETY: only handed out for an available AVX2 level (see `vec_dot_q8_0`).
    unsafe { vec_dot_mxfp4_impl(w, x) }
}

/// Σ level·y over 32 signed levels (|level| ≤ 127) and 32 Q8_0 quants, widened to i16 first
/// (exact for every byte value), as eight i32 partial sums.
#[inline]
#[target_feature(enable = "avx2")]
fn dot_levels(levels: __m256i, y: &[i8; 32]) -> __m256i {
    let y = load32(y);
    let l_lo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(levels));
    let l_hi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(levels));
    let y_lo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(y));
    let y_hi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(y));
    _mm256_add_epi32(_mm256_madd_epi16(l_lo, y_lo), _mm256_madd_epi16(l_hi, y_hi))
}

/// The low byte of each i32 lane (C's `(int8_t)` of an int), eight lanes to eight bytes.
#[inline]
#[target_feature(enable = "avx2")]
fn low_bytes(v: __m256i) -> [u8; 8] {
    let order = _mm256_setr_epi8(
        0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1, -1, -1, -1,
        -1, -1, -1, -1, -1, -1, -1, -1,
    );
    let packed = _mm256_shuffle_epi8(v, order);
    let low = _mm_cvtsi128_si32(_mm256_castsi256_si128(packed)) as u32;
    let high = _mm_cvtsi128_si32(_mm256_extracti128_si256::<1>(packed)) as u32;
    (u64::from(low) | (u64::from(high) << 32)).to_le_bytes()
}

/// `quantize_row_q8_K_ref`: `iscale = -127 / max` (`max` the first value of largest magnitude,
/// NaNs never largest), `q = min(127, nearest_int(iscale * x))` as a byte, the sums of each 16
/// quants, `d = 1 / iscale`. The scan for the largest magnitude and the rounding run eight values
/// at a time with the scalar operations (multiply, then add the 1.5·2^23 rounding constant).
#[target_feature(enable = "avx2")]
fn quantize_q8_k_impl(values: &[f32], blocks: &mut [BlockQ8K]) {
    const MAGIC: f32 = 12_582_912.0;
    for (x, block) in values.chunks_exact(256).zip(blocks) {
        let mut top = _mm256_setzero_si256();
        let abs_mask = _mm256_set1_epi32(0x7fff_ffff);
        let infinity = _mm256_set1_epi32(0x7f80_0000);
        for chunk in x.chunks_exact(8) {
            // SAFETY: `chunk` holds eight f32; `loadu` has no alignment requirement.
            let v = unsafe { _mm256_loadu_si256(chunk.as_ptr().cast()) };
            let magnitude = _mm256_and_si256(v, abs_mask);
            let nan = _mm256_cmpgt_epi32(magnitude, infinity);
            top = _mm256_max_epi32(top, _mm256_andnot_si256(nan, magnitude));
        }
        let mut lanes = [0u32; 8];
        // SAFETY: `lanes` holds eight u32; `storeu` has no alignment requirement.
        unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), top) };
        let top = lanes.into_iter().max().unwrap_or(0);
        *block = BlockQ8K {
            d: [0; 4],
            qs: [0; 256],
            bsums: [[0; 2]; 16],
        };
        if top == 0 {
            continue;
        }
        let max = x
            .iter()
            .copied()
            .find(|v| v.to_bits() & 0x7fff_ffff == top)
            .unwrap_or(0.0);
        let iscale = -127.0 / max;
        let scale = _mm256_set1_ps(iscale);
        let magic = _mm256_set1_ps(MAGIC);
        let mantissa = _mm256_set1_epi32(0x007f_ffff);
        let offset = _mm256_set1_epi32(0x0040_0000);
        let limit = _mm256_set1_epi32(127);
        for (chunk, q) in x.chunks_exact(8).zip(block.qs.chunks_exact_mut(8)) {
            // SAFETY: `chunk` holds eight f32; `loadu` has no alignment requirement.
            let v = unsafe { _mm256_loadu_ps(chunk.as_ptr()) };
            let shifted = _mm256_add_ps(_mm256_mul_ps(scale, v), magic);
            let rounded = _mm256_sub_epi32(
                _mm256_and_si256(_mm256_castps_si256(shifted), mantissa),
                offset,
            );
            let bytes = low_bytes(_mm256_min_epi32(rounded, limit));
            for (q, b) in q.iter_mut().zip(bytes) {
                *q = b as i8;
            }
        }
        for (sum, qs) in block.bsums.iter_mut().zip(block.qs.chunks_exact(16)) {
            let total: i32 = qs.iter().map(|&q| i32::from(q)).sum();
            *sum = (total as i16).to_le_bytes();
        }
        block.d = (1.0 / iscale).to_le_bytes();
    }
}

/// Safe entry of [`quantize_q8_k_impl`].
pub(super) fn quantize_q8_k(values: &[f32], blocks: &mut [BlockQ8K]) {
    // SAFETY: only handed out for an available AVX2 level (see `vec_dot_q8_0`).
    unsafe { quantize_q8_k_impl(values, blocks) }
}

/// C's `roundf` converted to int as x86 does (the scalar `c_round_i32`): ties away from zero,
/// `i32::MIN` for NaN and values outside the i32 range.
#[inline]
#[target_feature(enable = "avx2")]
fn c_round_i32x8(x: __m256) -> __m256i {
    let in_range = _mm256_and_ps(
        _mm256_cmp_ps::<_CMP_GE_OQ>(x, _mm256_set1_ps(-2_147_483_648.0)),
        _mm256_cmp_ps::<_CMP_LT_OQ>(x, _mm256_set1_ps(2_147_483_648.0)),
    );
    let truncated = _mm256_cvttps_epi32(x);
    let fraction = _mm256_sub_ps(x, _mm256_cvtepi32_ps(truncated));
    let up = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_GE_OQ>(fraction, _mm256_set1_ps(0.5)));
    let down = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_LE_OQ>(fraction, _mm256_set1_ps(-0.5)));
    // The masks are -1 where true: subtracting `up` adds one, adding `down` subtracts one.
    let rounded = _mm256_add_epi32(_mm256_sub_epi32(truncated, up), down);
    _mm256_blendv_epi8(
        _mm256_set1_epi32(i32::MIN),
        rounded,
        _mm256_castps_si256(in_range),
    )
}

/// `quantize_row_q8_0_ref`: `d = amax / 127`, `q = roundf(x / d)` as a byte. A block with a NaN
/// takes the scalar twin (its running `MAX` restarts after each NaN, an order a vector maximum
/// does not keep); the others take the maximum and the rounding eight values at a time.
#[target_feature(enable = "avx2,f16c")]
fn quantize_q8_0_impl(values: &[f32], blocks: &mut [BlockQ8_0]) {
    let abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fff_ffff));
    for (x, block) in values.chunks_exact(32).zip(blocks) {
        let mut v = [_mm256_setzero_ps(); 4];
        for (v, chunk) in v.iter_mut().zip(x.chunks_exact(8)) {
            // SAFETY: `chunk` holds eight f32; `loadu` has no alignment requirement.
            *v = unsafe { _mm256_loadu_ps(chunk.as_ptr()) };
        }
        let [a, b, c, d] = v;
        let unordered = _mm256_or_ps(
            _mm256_cmp_ps::<_CMP_UNORD_Q>(a, b),
            _mm256_cmp_ps::<_CMP_UNORD_Q>(c, d),
        );
        if _mm256_movemask_ps(unordered) != 0 {
            if let Ok(x) = <&[f32; 32]>::try_from(x) {
                *block = crate::quant::legacy::q8_0::quantize_block(x);
            }
            continue;
        }
        let m = _mm256_max_ps(
            _mm256_max_ps(_mm256_and_ps(a, abs_mask), _mm256_and_ps(b, abs_mask)),
            _mm256_max_ps(_mm256_and_ps(c, abs_mask), _mm256_and_ps(d, abs_mask)),
        );
        let mut lanes = [0.0f32; 8];
        // SAFETY: `lanes` holds eight f32; `storeu` has no alignment requirement.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), m) };
        // No NaN here, so the order of the maxima does not matter.
        let amax = lanes
            .into_iter()
            .fold(0.0f32, |m, v| if m > v { m } else { v });
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        block.d = crate::quant::cast::f16_to_le(d);
        let id = _mm256_set1_ps(id);
        for (v, q) in v.into_iter().zip(block.qs.chunks_exact_mut(8)) {
            let bytes = low_bytes(c_round_i32x8(_mm256_mul_ps(v, id)));
            for (q, b) in q.iter_mut().zip(bytes) {
                *q = b as i8;
            }
        }
    }
}

/// Safe entry of [`quantize_q8_0_impl`].
pub(super) fn quantize_q8_0(values: &[f32], blocks: &mut [BlockQ8_0]) {
    // SAFETY: only handed out for an available AVX2 level (see `vec_dot_q8_0`).
    unsafe { quantize_q8_0_impl(values, blocks) }
}

/// A Q2_K block's `Σ bsums·mins` against its activation block, as eight i32 partial sums.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn q2_k_mins_products(wb: &BlockQ2K, xb: &BlockQ8K) -> __m256i {
    let high = _mm_and_si128(_mm_srli_epi16::<4>(load16(&wb.scales)), _mm_set1_epi8(0x0f));
    let bsums: &[u8; 32] = bytemuck::cast_ref(&xb.bsums);
    _mm256_madd_epi16(load32(bsums), _mm256_cvtepu8_epi16(high))
}

/// Group g of half h covers sub-blocks `s = 8h + 2g` (low 128 bits) and `s + 1` (high): the
/// shuffle that puts their scale bytes into the low byte of every i16 of their half (0x80 zeroes
/// the high byte).
#[inline]
#[target_feature(enable = "avx2")]
fn q2_k_scale_pick(s: i8) -> __m256i {
    let (a, b, z) = (s, s + 1, -128);
    _mm256_setr_epi8(
        a, z, a, z, a, z, a, z, a, z, a, z, a, z, a, z, b, z, b, z, b, z, b, z, b, z, b, z, b, z,
        b, z,
    )
}

/// A Q2_K block's `Σ scale·Σ q·x` over its sixteen sub-blocks, as eight i32 partial sums.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn q2_k_scaled_sums(wb: &BlockQ2K, xb: &BlockQ8K) -> __m256i {
    let low2 = _mm256_set1_epi8(3);
    let packed = _mm256_broadcastsi128_si256(load16(&wb.scales));
    // Opaque: its halves are equal, and LLVM would narrow the scale shuffles.
    let scales = opaque(_mm256_and_si256(packed, _mm256_set1_epi8(0x0f)));
    let mut acc = _mm256_setzero_si256();
    let halves = wb.qs.chunks_exact(32).zip(xb.qs.chunks_exact(128));
    for ((qs, xq), h) in halves.zip(0..) {
        let q = load32(part(qs, 0));
        let groups = [
            q,
            _mm256_srli_epi16::<2>(q),
            _mm256_srli_epi16::<4>(q),
            _mm256_srli_epi16::<6>(q),
        ];
        for (g, shifted) in groups.into_iter().enumerate() {
            let qg = _mm256_and_si256(shifted, low2);
            // maddubs of 2-bit quants: pairs below 2·3·128, exact; pairs stay in a sub-block.
            let products = _mm256_maddubs_epi16(qg, load32(part(xq, 32 * g)));
            let scale = _mm256_shuffle_epi8(scales, q2_k_scale_pick(8 * h + 2 * g as i8));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(products, scale));
        }
    }
    acc
}

/// `ggml_vec_dot_q2_K_q8_K_generic`: one exact integer total per block (each sub-block's sum times
/// its 4-bit scale), then `sumf += dall * isum - dmin * summs`. Those float steps, and the two
/// horizontal sums before them, run one block late (as the other K-quant kernels' do), so that the
/// block's long tail does not hold the scheduler while the next block's loads wait.
#[target_feature(enable = "avx2,f16c")]
fn vec_dot_q2_k_impl(w: &[BlockQ2K], x: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    // The previous block's integer sums (as vectors) and its `dall`, `dmin`; zeros at first,
    // which add `+0·0 − 0·0` to `+0`: the same bits.
    let mut pending = (
        _mm256_setzero_si256(),
        _mm256_setzero_si256(),
        0.0f32,
        0.0f32,
    );
    for (wb, xb) in w.iter().zip(x) {
        let (acc, mins_products) = (q2_k_scaled_sums(wb, xb), q2_k_mins_products(wb, xb));
        let (acc_before, mins_before, dall, dmin) = pending;
        sumf += dall * hsum_i32(acc_before) as f32 - dmin * hsum_i32(mins_before) as f32;
        pending = (
            acc,
            mins_products,
            xb.scale() * f16_le(wb.d),
            xb.scale() * f16_le(wb.dmin),
        );
    }
    let (acc, mins_products, dall, dmin) = pending;
    sumf + (dall * hsum_i32(acc) as f32 - dmin * hsum_i32(mins_products) as f32)
}

/// Safe entry of [`vec_dot_q2_k_impl`].
pub(super) fn vec_dot_q2_k(w: &[BlockQ2K], x: &[BlockQ8K]) -> f32 {
    // SAFETY: only handed out for an available AVX2 level (see `vec_dot_q8_0`).
    unsafe { vec_dot_q2_k_impl(w, x) }
}
