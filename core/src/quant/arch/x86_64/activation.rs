//! The activation quantizers, the second operands of every vec_dot: Q8_0
//! (`quantize_row_q8_0_ref`), Q8_1 and Q8_K (`quantize_row_q8_K_ref`) at AVX2, and Q8_0 and Q8_1
//! at AVX-512 (sixteen blocks' scales at once; the VNNI level's Q8_K is AVX2's); and the sum of
//! an activation block's quants that the packed kernels' starts are made of (SSE2, every level).

use core::arch::x86_64::*;

use super::tokens::{kernel, Avx2, Avx512Vnni};
use crate::quant::activation::{BlockQ8K, BlockQ8_0, BlockQ8_1};

/// The sum of 32 signed bytes (an activation block's quants), by SSE2's sums of absolute
/// differences, x86_64's baseline (no token): each byte offset by 128 to unsigned, summed into
/// two 64-bit lanes, the offsets taken off. Its scalar twin is `packed::block_sum_scalar`.
pub(crate) fn sum_signed_bytes(q: &[u8; 32]) -> i32 {
    // SAFETY: SSE2 is part of the x86_64 baseline; every CPU this code runs on has it.
    unsafe { sum_signed_bytes_sse2(q) }
}

#[inline]
#[target_feature(enable = "sse2")]
fn sum_signed_bytes_sse2(q: &[u8; 32]) -> i32 {
    let (low, high) = q.split_at(16);
    // SAFETY: each half holds 16 bytes; `loadu` has no alignment requirement.
    let (low, high) = unsafe {
        (
            _mm_loadu_si128(low.as_ptr().cast()),
            _mm_loadu_si128(high.as_ptr().cast()),
        )
    };
    let top = _mm_set1_epi8(i8::MIN);
    let zero = _mm_setzero_si128();
    let sums = _mm_add_epi64(
        _mm_sad_epu8(_mm_xor_si128(low, top), zero),
        _mm_sad_epu8(_mm_xor_si128(high, top), zero),
    );
    // Each 64-bit lane sums 16 bytes (eight of each half), at most 16 · 255.
    let biased = _mm_cvtsi128_si32(sums) + _mm_cvtsi128_si32(_mm_unpackhi_epi64(sums, sums));
    biased - 32 * 128
}

/// The low byte of each i32 lane of `v` (C's `(int8_t)` of an int), in order: 32 bytes.
#[inline]
#[target_feature(enable = "avx2")]
fn low_bytes(v: [__m256i; 4]) -> __m256i {
    let byte = _mm256_set1_epi32(0xff);
    // Each lane is 0..=255 after the mask, so neither unsigned-saturating pack changes it.
    let [a, b, c, d] = v;
    let ab = _mm256_packus_epi32(_mm256_and_si256(a, byte), _mm256_and_si256(b, byte));
    let cd = _mm256_packus_epi32(_mm256_and_si256(c, byte), _mm256_and_si256(d, byte));
    // The packs work within 128-bit halves: dword `k` of the result holds bytes 4k..4k+4 of
    // vector `k % 4` for k < 4 and of the same vectors' upper halves for k ≥ 4.
    let bytes = _mm256_packus_epi16(ab, cd);
    _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7))
}

/// The sum of each 16 signed bytes of 8 vectors of 32, as `quantize_row_q8_K_ref`'s `bsums` (16
/// little-endian i16: no sum of 16 bytes leaves the i16 range, so the pack saturates none).
#[inline]
#[target_feature(enable = "avx2")]
fn sums_of_16(q: &[__m256i; 8]) -> [[u8; 2]; 16] {
    let ones8 = _mm256_set1_epi8(1);
    let ones16 = _mm256_set1_epi16(1);
    let mut fours = [_mm256_setzero_si256(); 8];
    for (four, &q) in fours.iter_mut().zip(q) {
        // Dword `k`: the sum of bytes 4k..4k+4 (unsigned ones times signed bytes).
        *four = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, q), ones16);
    }
    // Within each 128-bit half, two horizontal adds leave one sum of 16 per vector: half 0 holds
    // the groups 0, 2, 4, 6 (of four vectors), half 1 the groups 1, 3, 5, 7.
    let [a, b, c, d, e, f, g, h] = fours;
    let first = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
    let second = _mm256_hadd_epi32(_mm256_hadd_epi32(e, f), _mm256_hadd_epi32(g, h));
    let sums = _mm256_packs_epi32(first, second);
    let even = _mm256_castsi256_si128(sums);
    let odd = _mm256_extracti128_si256::<1>(sums);
    let mut out = [[0u8; 2]; 16];
    // SAFETY: `out` is 32 bytes; `storeu` has no alignment requirement.
    unsafe {
        _mm_storeu_si128(out.as_mut_ptr().cast(), _mm_unpacklo_epi16(even, odd));
        _mm_storeu_si128(out[8..].as_mut_ptr().cast(), _mm_unpackhi_epi16(even, odd));
    }
    out
}

/// The sum (`ADD`; wrapping, callers' sums are small) or the largest of eight i32 lanes.
#[inline]
#[target_feature(enable = "avx2")]
fn reduce_lane<const ADD: bool>(v: __m256i) -> i32 {
    let combine = |a, b| {
        if ADD {
            _mm_add_epi32(a, b)
        } else {
            _mm_max_epi32(a, b)
        }
    };
    let v = combine(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let v = combine(v, _mm_shuffle_epi32::<0b01_00_11_10>(v));
    let v = combine(v, _mm_shuffle_epi32::<0b10_11_00_01>(v));
    _mm_cvtsi128_si32(v)
}

kernel! {
    /// `quantize_row_q8_K_ref`: `iscale = -127 / max` (`max` the first value of largest magnitude,
    /// NaNs never largest), `q = min(127, nearest_int(iscale * x))` as a byte, the sums of each 16
    /// quants, `d = 1 / iscale`. The scan for the largest magnitude and the rounding run eight values
    /// at a time with the scalar operations (multiply, then add the 1.5·2^23 rounding constant).
    #[target_feature(enable = "avx2")]
    pub(super) fn quantize_q8_k(_t: Avx2, values: &[f32], blocks: &mut [BlockQ8K]) {
        const MAGIC: f32 = 12_582_912.0;
        let abs_mask = _mm256_set1_epi32(0x7fff_ffff);
        let infinity = _mm256_set1_epi32(0x7f80_0000);
        let (chunks, _) = values.as_chunks::<256>();
        for (x, block) in chunks.iter().zip(blocks) {
            let (eights, _) = x.as_chunks::<8>();
            let mut top = _mm256_setzero_si256();
            for chunk in eights {
                // SAFETY: `chunk` holds eight f32; `loadu` has no alignment requirement.
                let v = unsafe { _mm256_loadu_si256(chunk.as_ptr().cast()) };
                let magnitude = _mm256_and_si256(v, abs_mask);
                let nan = _mm256_cmpgt_epi32(magnitude, infinity);
                top = _mm256_max_epi32(top, _mm256_andnot_si256(nan, magnitude));
            }
            let top = reduce_lane::<false>(top);
            *block = BlockQ8K {
                d: [0; 4],
                qs: [0; 256],
                bsums: [[0; 2]; 16],
            };
            if top == 0 {
                continue;
            }
            // The first value of that magnitude (there is one: `top` came from these lanes).
            let wanted = _mm256_set1_epi32(top);
            let mut max = 0.0;
            for chunk in eights {
                // SAFETY: `chunk` holds eight f32; `loadu` has no alignment requirement.
                let v = unsafe { _mm256_loadu_si256(chunk.as_ptr().cast()) };
                let hits = _mm256_cmpeq_epi32(_mm256_and_si256(v, abs_mask), wanted);
                let hits = _mm256_movemask_ps(_mm256_castsi256_ps(hits));
                if hits != 0 {
                    max = chunk[hits.trailing_zeros() as usize % 8];
                    break;
                }
            }
            let iscale = -127.0 / max;
            let scale = _mm256_set1_ps(iscale);
            let magic = _mm256_set1_ps(MAGIC);
            let mantissa = _mm256_set1_epi32(0x007f_ffff);
            let offset = _mm256_set1_epi32(0x0040_0000);
            let limit = _mm256_set1_epi32(127);
            let (thirty_twos, _) = x.as_chunks::<32>();
            let mut quants = [_mm256_setzero_si256(); 8];
            for (chunk, q) in thirty_twos.iter().zip(&mut quants) {
                let mut rounded = [_mm256_setzero_si256(); 4];
                for (r, eight) in rounded.iter_mut().zip(chunk.as_chunks::<8>().0) {
                    // SAFETY: `eight` holds eight f32; `loadu` has no alignment requirement.
                    let v = unsafe { _mm256_loadu_ps(eight.as_ptr()) };
                    let shifted = _mm256_add_ps(_mm256_mul_ps(scale, v), magic);
                    let nearest = _mm256_sub_epi32(
                        _mm256_and_si256(_mm256_castps_si256(shifted), mantissa),
                        offset,
                    );
                    *r = _mm256_min_epi32(nearest, limit);
                }
                *q = low_bytes(rounded);
            }
            let (qs, _) = block.qs.as_chunks_mut::<32>();
            for (to, &q) in qs.iter_mut().zip(&quants) {
                // SAFETY: `to` is 32 bytes; `storeu` has no alignment requirement.
                unsafe { _mm256_storeu_si256(to.as_mut_ptr().cast(), q) };
            }
            block.bsums = sums_of_16(&quants);
            block.d = (1.0 / iscale).to_le_bytes();
        }
    }
}

/// C's `roundf` converted to int, for lanes below 2^23 in magnitude and not NaN: the truncation of
/// `x` plus the largest float below one half, with `x`'s sign. Below one half because the add
/// itself rounds: `0.49999997 + 0.5` would round up to 1, where `0.49999997 + 0.49999997` stays
/// below it, and every `k + 0.5` and above still reaches `k + 1`. Four operations where
/// truncating, measuring the dropped fraction and stepping took seven.
#[inline]
#[target_feature(enable = "avx2")]
fn c_round_small_i32x8(x: __m256) -> __m256i {
    let sign = _mm256_set1_ps(-0.0);
    let below_half = _mm256_set1_ps(BELOW_HALF);
    let offset = _mm256_or_ps(_mm256_and_ps(x, sign), below_half);
    _mm256_cvttps_epi32(_mm256_add_ps(x, offset))
}

/// The largest float below one half.
const BELOW_HALF: f32 = 0.499_999_97;

/// `d` as f16 bits, rounded to nearest even as the scalar `f16_to_le` does (`d` is never NaN here).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn f16_bits(d: f32) -> [u8; 2] {
    let h = _mm_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm_set_ss(d));
    (_mm_extract_epi16::<0>(h) as u16).to_le_bytes()
}

/// One block of `quantize_row_q8_0_ref` from 32 values: `d = amax / 127` and `q = roundf(x / d)`
/// as bytes (one vector of 32), the maximum and the rounding eight values at a time. `None` when a
/// value is NaN or infinite or `1 / d` overflows: the scalar twin's running `MAX` restarts after
/// each NaN (an order a vector maximum does not keep), and only with finite values and a finite
/// `1 / d` is every `x / d` within ±128, where the rounding needs no range check.
#[inline]
#[target_feature(enable = "avx2")]
fn q8_block(x: &[f32; 32]) -> Option<(f32, __m256i)> {
    let abs_mask = _mm256_set1_epi32(0x7fff_ffff);
    let largest_finite = _mm256_set1_epi32(0x7f7f_ffff);
    let mut v = [_mm256_setzero_ps(); 4];
    let mut magnitude = [_mm256_setzero_si256(); 4];
    for ((v, m), chunk) in v.iter_mut().zip(&mut magnitude).zip(x.as_chunks::<8>().0) {
        // SAFETY: `chunk` holds eight f32; `loadu` has no alignment requirement.
        *v = unsafe { _mm256_loadu_ps(chunk.as_ptr()) };
        *m = _mm256_and_si256(_mm256_castps_si256(*v), abs_mask);
    }
    let [a, b, c, d] = magnitude;
    // Magnitudes of finite floats order as their bits do.
    let m = _mm256_max_epi32(_mm256_max_epi32(a, b), _mm256_max_epi32(c, d));
    if _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(m, largest_finite))) != 0 {
        return None;
    }
    let amax = f32::from_bits(reduce_lane::<false>(m) as u32);
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    if !id.is_finite() {
        return None;
    }
    let id = _mm256_set1_ps(id);
    let mut rounded = [_mm256_setzero_si256(); 4];
    for (r, v) in rounded.iter_mut().zip(v) {
        *r = c_round_small_i32x8(_mm256_mul_ps(v, id));
    }
    Some((d, low_bytes(rounded)))
}

kernel! {
    /// `quantize_row_q8_0_ref` ([`q8_block`]; a block it declines takes the scalar twin).
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn quantize_q8_0(_t: Avx2, values: &[f32], blocks: &mut [BlockQ8_0]) {
        let (chunks, _) = values.as_chunks::<32>();
        for (x, block) in chunks.iter().zip(blocks) {
            match q8_block(x) {
                Some((d, qs)) => {
                    block.d = f16_bits(d);
                    // SAFETY: `qs` is 32 bytes; `storeu` has no alignment requirement.
                    unsafe { _mm256_storeu_si256(block.qs.as_mut_ptr().cast(), qs) };
                }
                None => *block = crate::quant::legacy::q8_0::quantize_block(x),
            }
        }
    }

    /// `quantize_row_q8_1_ref`: [`quantize_q8_0`]'s quants and `d`, and `s = d · Σ q` (the sum of
    /// the quants as bytes, as the scalar twin sums them). Q4_1's and Q5_1's activations, whose
    /// portable quantizer was a visible share of a matvec (figures: docs/kernel-experiments.md).
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn quantize_q8_1(_t: Avx2, values: &[f32], blocks: &mut [BlockQ8_1]) {
        let (chunks, _) = values.as_chunks::<32>();
        for (x, block) in chunks.iter().zip(blocks) {
            match q8_block(x) {
                Some((d, qs)) => {
                    // Pairs of signed bytes (times unsigned ones), then pairs of those: eight
                    // sums of four, exact in i32.
                    let fours = _mm256_madd_epi16(
                        _mm256_maddubs_epi16(_mm256_set1_epi8(1), qs),
                        _mm256_set1_epi16(1),
                    );
                    let sum = reduce_lane::<true>(fours);
                    block.d = f16_bits(d);
                    // SAFETY: `qs` is 32 bytes; `storeu` has no alignment requirement.
                    unsafe { _mm256_storeu_si256(block.qs.as_mut_ptr().cast(), qs) };
                    block.s = f16_bits(sum as f32 * d);
                }
                None => *block = crate::quant::legacy::q8_1::quantize_block(x),
            }
        }
    }
}

/// Blocks of 32 values an AVX-512 quantizer takes at once: their scales are computed together, one
/// block per lane.
const GROUP: usize = 16;

/// `a + b` (`ADD`) or the larger of `a` and `b`, lane by lane (i32).
#[inline]
#[target_feature(enable = "avx512f")]
fn combine<const ADD: bool>(a: __m512i, b: __m512i) -> __m512i {
    if ADD {
        _mm512_add_epi32(a, b)
    } else {
        _mm512_max_epi32(a, b)
    }
}

/// Sixteen vectors of sixteen i32 lanes to one vector whose lane `b` is the sum (`ADD`) or the
/// largest of vector `b`'s lanes: four rounds, each halving the vectors by pairing their lanes.
#[inline]
#[target_feature(enable = "avx512f")]
fn reduce_lanes<const ADD: bool>(m: [__m512i; GROUP]) -> __m512i {
    // Per 128-bit lane, [a0, b0, a1, b1] and [a2, b2, a3, b3]: lanes 0, 2 of a 128-bit lane then
    // hold vector a's partial maxima, lanes 1, 3 vector b's.
    let mut pairs = [_mm512_setzero_si512(); 8];
    for (p, ab) in pairs.iter_mut().zip(m.as_chunks::<2>().0) {
        let [a, b] = *ab;
        *p = combine::<ADD>(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
    }
    // Then lane k of each 128-bit lane holds vector k's partial maximum (of four).
    let mut fours = [_mm512_setzero_si512(); 4];
    for (f, ab) in fours.iter_mut().zip(pairs.as_chunks::<2>().0) {
        let [a, b] = *ab;
        *f = combine::<ADD>(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
    }
    // Across the 128-bit lanes: [0, 1] with [2, 3] of each vector, then the last pair.
    let [a, b, c, d] = fours;
    let ab = combine::<ADD>(
        _mm512_shuffle_i32x4::<0b10_00_10_00>(a, b),
        _mm512_shuffle_i32x4::<0b11_01_11_01>(a, b),
    );
    let cd = combine::<ADD>(
        _mm512_shuffle_i32x4::<0b10_00_10_00>(c, d),
        _mm512_shuffle_i32x4::<0b11_01_11_01>(c, d),
    );
    combine::<ADD>(
        _mm512_shuffle_i32x4::<0b10_00_10_00>(ab, cd),
        _mm512_shuffle_i32x4::<0b11_01_11_01>(ab, cd),
    )
}

/// [`c_round_small_i32x8`] for sixteen lanes (the sign and the offset in one `vpternlogd`).
#[inline]
#[target_feature(enable = "avx512f")]
fn c_round_small_i32x16(x: __m512) -> __m512i {
    let sign = _mm512_set1_epi32(i32::MIN);
    let below_half = _mm512_set1_epi32(BELOW_HALF.to_bits() as i32);
    // (x & sign) | below_half
    let offset = _mm512_ternarylogic_epi32::<0xEA>(_mm512_castps_si512(x), sign, below_half);
    _mm512_cvttps_epi32(_mm512_add_ps(x, _mm512_castsi512_ps(offset)))
}

/// The scales of sixteen blocks of `quantize_row_q8_0_ref`, computed together.
struct Q8Scales {
    /// The blocks [`q8_block`] would decline (a NaN or infinite value, or `1 / d` infinite): their
    /// quants, `d` and sums here are meaningless, and the callers take the scalar twin's.
    declined: u16,
    /// Each block's `d` as f16 bits.
    d: [u16; GROUP],
    /// Each block's `d` as f32, lane `b` block `b`'s.
    scale: __m512,
    /// Each block's `1 / d` (0 where `d` is).
    ids: [f32; GROUP],
}

/// [`Q8Scales`] of the sixteen blocks `x`.
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl")]
fn q8_scales(x: &[[f32; 32]; GROUP]) -> Q8Scales {
    let abs_mask = _mm512_set1_epi32(0x7fff_ffff);
    let mut largest = [_mm512_setzero_si512(); GROUP];
    for (m, block) in largest.iter_mut().zip(x) {
        // SAFETY: each half of `block` holds sixteen f32; `loadu` has no alignment requirement.
        let (lo, hi) = unsafe {
            (
                _mm512_loadu_si512(block.as_ptr().cast()),
                _mm512_loadu_si512(block[16..].as_ptr().cast()),
            )
        };
        *m = _mm512_max_epi32(
            _mm512_and_si512(lo, abs_mask),
            _mm512_and_si512(hi, abs_mask),
        );
    }
    let amax = reduce_lanes::<false>(largest);
    // Magnitudes of finite floats order as their bits do; NaN and infinity are above them.
    let not_finite = _mm512_cmpgt_epi32_mask(amax, _mm512_set1_epi32(0x7f7f_ffff));
    let amax = _mm512_castsi512_ps(amax);
    let d = _mm512_div_ps(amax, _mm512_set1_ps(127.0));
    let nonzero = _mm512_cmp_ps_mask::<_CMP_NEQ_UQ>(d, _mm512_setzero_ps());
    let id = _mm512_maskz_div_ps(nonzero, _mm512_set1_ps(1.0), d);
    let id_magnitude = _mm512_and_si512(_mm512_castps_si512(id), abs_mask);
    let id_infinite = _mm512_cmpeq_epi32_mask(id_magnitude, _mm512_set1_epi32(0x7f80_0000));
    let mut scales = Q8Scales {
        declined: not_finite | id_infinite,
        d: [0; GROUP],
        scale: d,
        ids: [0.0; GROUP],
    };
    // SAFETY: `d` is 32 bytes, `ids` 64; `storeu` has no alignment requirement.
    unsafe {
        _mm256_storeu_si256(
            scales.d.as_mut_ptr().cast(),
            _mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(d),
        );
        _mm512_storeu_ps(scales.ids.as_mut_ptr(), id);
    }
    scales
}

/// Sixteen blocks' quants, two blocks a vector (block `2k`'s 32 quants, then block `2k + 1`'s),
/// and with `SUMS` each block's Σq in its lane.
struct Q8Quants {
    pairs: [__m512i; GROUP / 2],
    sums: __m512i,
}

/// [`Q8Quants`] of the sixteen blocks `x` at their `1 / d`, `ids`.
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl")]
fn q8_quants<const SUMS: bool>(x: &[[f32; 32]; GROUP], ids: &[f32; GROUP]) -> Q8Quants {
    let mut quants = Q8Quants {
        pairs: [_mm512_setzero_si512(); GROUP / 2],
        sums: _mm512_setzero_si512(),
    };
    // The pack below leaves dword `4j + k` of a pair's vector holding bytes `4j..4j + 4` of the
    // k-th of (block 2p's first half, its second half, block 2p + 1's first, its second).
    let order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    let mut sums = [_mm512_setzero_si512(); GROUP];
    let (pairs, _) = x.as_chunks::<2>();
    let (id_pairs, _) = ids.as_chunks::<2>();
    let (sum_pairs, _) = sums.as_chunks_mut::<2>();
    for (((pair, ids), sums), out) in pairs
        .iter()
        .zip(id_pairs)
        .zip(sum_pairs)
        .zip(&mut quants.pairs)
    {
        let mut halves = [_mm512_setzero_si512(); 4];
        for (b, (block, sum)) in pair.iter().zip(sums).enumerate() {
            let id = _mm512_set1_ps(ids[b]);
            // SAFETY: each half of `block` holds sixteen f32; `loadu` has no alignment
            // requirement.
            let (lo, hi) = unsafe {
                (
                    _mm512_loadu_ps(block.as_ptr()),
                    _mm512_loadu_ps(block[16..].as_ptr()),
                )
            };
            let lo = c_round_small_i32x16(_mm512_mul_ps(lo, id));
            let hi = c_round_small_i32x16(_mm512_mul_ps(hi, id));
            if SUMS {
                *sum = _mm512_add_epi32(lo, hi);
            }
            halves[2 * b] = lo;
            halves[2 * b + 1] = hi;
        }
        // Every quant of a block not declined is within ±127, so neither pack saturates it.
        let [a, b, c, d] = halves;
        let bytes = _mm512_packs_epi16(_mm512_packs_epi32(a, b), _mm512_packs_epi32(c, d));
        *out = _mm512_permutexvar_epi32(order, bytes);
    }
    if SUMS {
        quants.sums = reduce_lanes::<true>(sums);
    }
    quants
}

/// Each group of sixteen blocks of `groups` with its [`Q8Scales`] and [`Q8Quants`] to `emit`,
/// with its sixteen blocks of `out`. The next group's scales are computed before this group's
/// quants: from a group's values to its scales runs a long chain (a reduction, two divisions)
/// that the previous group's rounding can then hide.
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl")]
fn quantize_groups<B, const SUMS: bool>(
    groups: &[[[f32; 32]; GROUP]],
    out: &mut [B],
    mut emit: impl FnMut(&[[f32; 32]; GROUP], &Q8Scales, &Q8Quants, &mut [B]),
) {
    let mut next = groups.first().map(|x| q8_scales(x));
    for (i, (x, out)) in groups.iter().zip(out.chunks_exact_mut(GROUP)).enumerate() {
        let Some(scales) = next.take() else {
            return;
        };
        next = groups.get(i + 1).map(|x| q8_scales(x));
        let quants = q8_quants::<SUMS>(x, &scales.ids);
        emit(x, &scales, &quants, out);
    }
}

/// `values` (whole blocks of 32) in groups of [`GROUP`] blocks and the values after them, and
/// their `blocks` split the same way.
#[allow(clippy::type_complexity)]
fn split_groups<'v, 'b, B>(
    values: &'v [f32],
    blocks: &'b mut [B],
) -> (
    &'v [[[f32; 32]; GROUP]],
    &'v [f32],
    &'b mut [B],
    &'b mut [B],
) {
    let (chunks, _) = values.as_chunks::<32>();
    let (groups, rest) = chunks.as_chunks::<GROUP>();
    let whole = groups.len().saturating_mul(GROUP).min(blocks.len());
    let (out, out_rest) = blocks.split_at_mut(whole);
    (groups, rest.as_flattened(), out, out_rest)
}

/// A pair's vector of quants ([`Q8Quants::pairs`]) to its two blocks.
#[inline]
#[target_feature(enable = "avx512f")]
fn store_pair(first: &mut [i8; 32], second: &mut [i8; 32], quants: __m512i) {
    // SAFETY: each array is 32 bytes, borrowed exclusively; `storeu` has no alignment
    // requirement.
    unsafe {
        _mm256_storeu_si256(first.as_mut_ptr().cast(), _mm512_castsi512_si256(quants));
        _mm256_storeu_si256(
            second.as_mut_ptr().cast(),
            _mm512_extracti64x4_epi64::<1>(quants),
        );
    }
}

/// Overwrites the blocks of `out` that `declined` marks with the scalar twin's `quantize` of
/// their values.
fn take_declined<B>(
    declined: u16,
    x: &[[f32; 32]; GROUP],
    out: &mut [B],
    quantize: fn(&[f32; 32]) -> B,
) {
    let mut left = declined;
    while left != 0 {
        let b = left.trailing_zeros() as usize;
        left &= left - 1;
        if let (Some(block), Some(x)) = (out.get_mut(b), x.get(b)) {
            *block = quantize(x);
        }
    }
}

kernel! {
    /// `quantize_row_q8_0_ref` sixteen blocks at a time ([`q8_group`]), the rest as at AVX2.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(super) fn quantize_q8_0_512(t: Avx512Vnni, values: &[f32], blocks: &mut [BlockQ8_0]) {
        let (groups, rest, out, out_rest) = split_groups(values, blocks);
        quantize_groups::<_, false>(groups, out, |x, scales, quants, out| {
            let (out_pairs, _) = out.as_chunks_mut::<2>();
            let (d_pairs, _) = scales.d.as_chunks::<2>();
            for ((pair, d), &quants) in out_pairs.iter_mut().zip(d_pairs).zip(&quants.pairs) {
                let [first, second] = pair;
                first.d = d[0].to_le_bytes();
                second.d = d[1].to_le_bytes();
                store_pair(&mut first.qs, &mut second.qs, quants);
            }
            take_declined(scales.declined, x, out, crate::quant::legacy::q8_0::quantize_block);
        });
        quantize_q8_0(t.avx2(), rest, out_rest);
    }

    /// `quantize_row_q8_1_ref` sixteen blocks at a time ([`q8_group`], `s = d · Σq` of each
    /// block's lane), the rest as at AVX2.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(super) fn quantize_q8_1_512(t: Avx512Vnni, values: &[f32], blocks: &mut [BlockQ8_1]) {
        let (groups, rest, out, out_rest) = split_groups(values, blocks);
        quantize_groups::<_, true>(groups, out, |x, scales, quants, out| {
            let s = _mm512_mul_ps(_mm512_cvtepi32_ps(quants.sums), scales.scale);
            let mut s_f16 = [0u16; GROUP];
            // SAFETY: `s_f16` is 32 bytes; `storeu` has no alignment requirement.
            unsafe {
                _mm256_storeu_si256(
                    s_f16.as_mut_ptr().cast(),
                    _mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(s),
                )
            };
            let (out_pairs, _) = out.as_chunks_mut::<2>();
            let (d_pairs, _) = scales.d.as_chunks::<2>();
            let (s_pairs, _) = s_f16.as_chunks::<2>();
            for (((pair, d), s), &quants) in out_pairs
                .iter_mut()
                .zip(d_pairs)
                .zip(s_pairs)
                .zip(&quants.pairs)
            {
                let [first, second] = pair;
                first.d = d[0].to_le_bytes();
                second.d = d[1].to_le_bytes();
                first.s = s[0].to_le_bytes();
                second.s = s[1].to_le_bytes();
                store_pair(&mut first.qs, &mut second.qs, quants);
            }
            take_declined(scales.declined, x, out, crate::quant::legacy::q8_1::quantize_block);
        });
        quantize_q8_1(t.avx2(), rest, out_rest);
    }
}

kernel! {
    /// [`quantize_q8_k`] sixteen values at a time: the largest magnitude, its first value, then
    /// each sixteen rounded (multiply, then add the rounding constant) and truncated to bytes as
    /// C's `(int8_t)` does; the sums of each 16 stored bytes by `vpsadbw` (the bytes offset by 128
    /// to make them unsigned, the offset taken back).
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(super) fn quantize_q8_k_512(_t: Avx512Vnni, values: &[f32], blocks: &mut [BlockQ8K]) {
        const MAGIC: f32 = 12_582_912.0;
        let abs_mask = _mm512_set1_epi32(0x7fff_ffff);
        let infinity = _mm512_set1_epi32(0x7f80_0000);
        let (chunks, _) = values.as_chunks::<256>();
        for (x, block) in chunks.iter().zip(blocks) {
            let (sixteens, _) = x.as_chunks::<16>();
            let mut top = _mm512_setzero_si512();
            for chunk in sixteens {
                // SAFETY: `chunk` holds sixteen f32; `loadu` has no alignment requirement.
                let v = unsafe { _mm512_loadu_si512(chunk.as_ptr().cast()) };
                let magnitude = _mm512_and_si512(v, abs_mask);
                let not_nan = _mm512_cmple_epi32_mask(magnitude, infinity);
                top = _mm512_mask_max_epi32(top, not_nan, top, magnitude);
            }
            let top = _mm512_reduce_max_epi32(top);
            if top == 0 {
                *block = BlockQ8K {
                    d: [0; 4],
                    qs: [0; 256],
                    bsums: [[0; 2]; 16],
                };
                continue;
            }
            // The first value of that magnitude (there is one: `top` came from these lanes).
            let wanted = _mm512_set1_epi32(top);
            let mut max = 0.0;
            for chunk in sixteens {
                // SAFETY: `chunk` holds sixteen f32; `loadu` has no alignment requirement.
                let v = unsafe { _mm512_loadu_si512(chunk.as_ptr().cast()) };
                let hits = _mm512_cmpeq_epi32_mask(_mm512_and_si512(v, abs_mask), wanted);
                if hits != 0 {
                    max = chunk[hits.trailing_zeros() as usize % 16];
                    break;
                }
            }
            let iscale = -127.0 / max;
            let scale = _mm512_set1_ps(iscale);
            let magic = _mm512_set1_ps(MAGIC);
            let mantissa = _mm512_set1_epi32(0x007f_ffff);
            let offset = _mm512_set1_epi32(0x0040_0000);
            let limit = _mm512_set1_epi32(127);
            let mut bytes = [_mm_setzero_si128(); 16];
            for (chunk, out) in sixteens.iter().zip(bytes.iter_mut()) {
                // SAFETY: `chunk` holds sixteen f32; `loadu` has no alignment requirement.
                let v = unsafe { _mm512_loadu_ps(chunk.as_ptr()) };
                let shifted = _mm512_add_ps(_mm512_mul_ps(scale, v), magic);
                let nearest = _mm512_sub_epi32(
                    _mm512_and_si512(_mm512_castps_si512(shifted), mantissa),
                    offset,
                );
                *out = _mm512_cvtepi32_epi8(_mm512_min_epi32(nearest, limit));
            }
            // Four sixteens a vector, summed from registers (a wide load of the narrow stores
            // just made would wait for them).
            let flip = _mm512_set1_epi8(i8::MIN);
            let (fours, _) = bytes.as_chunks::<4>();
            let (qs, _) = block.qs.as_chunks_mut::<64>();
            let (sums, _) = block.bsums.as_chunks_mut::<4>();
            for ((four, to), out) in fours.iter().zip(qs).zip(sums) {
                let q = _mm512_inserti32x4::<3>(
                    _mm512_inserti32x4::<2>(
                        _mm512_inserti32x4::<1>(_mm512_castsi128_si512(four[0]), four[1]),
                        four[2],
                    ),
                    four[3],
                );
                // SAFETY: `to` is 64 bytes; `storeu` has no alignment requirement.
                unsafe { _mm512_storeu_si512(to.as_mut_ptr().cast(), q) };
                // Lanes 2k and 2k + 1: the two halves of the k-th sixteen, each byte + 128.
                let halves = _mm512_sad_epu8(_mm512_xor_si512(q, flip), _mm512_setzero_si512());
                let mut lanes = [0u64; 8];
                // SAFETY: `lanes` is 64 bytes; `storeu` has no alignment requirement.
                unsafe { _mm512_storeu_si512(lanes.as_mut_ptr().cast(), halves) };
                let (pairs, _) = lanes.as_chunks::<2>();
                for (sum, pair) in out.iter_mut().zip(pairs) {
                    let total = (pair[0] + pair[1]) as i32 - 16 * 128;
                    *sum = (total as i16).to_le_bytes();
                }
            }
            block.d = (1.0 / iscale).to_le_bytes();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tokens::{kernel, Avx2, Avx512Vnni};
    use super::{c_round_small_i32x16, c_round_small_i32x8, sum_signed_bytes};
    use crate::quant::float::c_round_i32;
    use crate::quant::packed::block_sum_scalar;
    use core::arch::x86_64::*;
    use std::vec::Vec;

    kernel! {
        #[target_feature(enable = "avx2")]
        fn rounded_8(_t: Avx2, x: &[f32; 8]) -> [i32; 8] {
            let mut out = [0i32; 8];
            // SAFETY: `x` holds eight f32 and `out` eight i32; neither access needs alignment.
            unsafe {
                let r = c_round_small_i32x8(_mm256_loadu_ps(x.as_ptr()));
                _mm256_storeu_si256(out.as_mut_ptr().cast(), r);
            }
            out
        }

        #[target_feature(enable = "avx512f")]
        fn rounded_16(_t: Avx512Vnni, x: &[f32; 16]) -> [i32; 16] {
            let mut out = [0i32; 16];
            // SAFETY: `x` holds sixteen f32 and `out` sixteen i32; neither access needs alignment.
            unsafe {
                let r = c_round_small_i32x16(_mm512_loadu_ps(x.as_ptr()));
                _mm512_storeu_si512(out.as_mut_ptr().cast(), r);
            }
            out
        }
    }

    /// Both vector roundings against the scalar `c_round_i32` on the range they are for (below
    /// 2^23 in magnitude): every float within 300 steps of each integer and half-integer up to
    /// ±300 (where the add's own rounding could carry a value below one half over), zeros,
    /// subnormals, and every 1021st float of either sign.
    #[test]
    fn vector_roundings_are_c_roundf() {
        let mut values: Vec<f32> = std::vec![0.0, -0.0, f32::MIN_POSITIVE, 1e-45, -1e-45];
        for half_steps in -600i32..=600 {
            let centre = (half_steps as f32 * 0.5).to_bits();
            for step in 0..300 {
                values.push(f32::from_bits(centre.wrapping_add(step)));
                values.push(f32::from_bits(centre.wrapping_sub(step)));
            }
        }
        for bits in (0..8_388_608f32.to_bits()).step_by(1021) {
            values.push(f32::from_bits(bits));
            values.push(-f32::from_bits(bits));
        }
        values.retain(|v| v.abs() < 8_388_608.0);
        let want: Vec<i32> = values.iter().map(|&v| c_round_i32(v)).collect();
        let (sixteens, _) = values.as_chunks::<16>();
        let (want16, _) = want.as_chunks::<16>();
        match Avx2::try_new() {
            Some(t) => {
                for (x, want) in sixteens.iter().zip(want16) {
                    for (x, want) in x.as_chunks::<8>().0.iter().zip(want.as_chunks::<8>().0) {
                        assert_eq!(rounded_8(t, x), *want, "{x:?}");
                    }
                }
            }
            None => std::println!("vector_roundings_are_c_roundf: no AVX2 here, not run"),
        }
        match Avx512Vnni::try_new() {
            Some(t) => {
                for (x, want) in sixteens.iter().zip(want16) {
                    assert_eq!(rounded_16(t, x), *want, "{x:?}");
                }
            }
            None => std::println!("vector_roundings_are_c_roundf: no AVX-512 VNNI here, not run"),
        }
    }

    /// The SSE2 block sum against its scalar twin: each byte value alone and filling a block, the
    /// extremes (all -128, all 127, alternating), and pseudo-random blocks.
    #[test]
    fn block_sum_is_its_scalar_twins() {
        let mut blocks: std::vec::Vec<[u8; 32]> = std::vec![[0x80; 32], [0x7f; 32], [0; 32]];
        blocks.push(core::array::from_fn(
            |i| if i % 2 == 0 { 0x80 } else { 0x7f },
        ));
        for value in 0..=255u8 {
            blocks.push(core::array::from_fn(|i| {
                if i == usize::from(value) % 32 {
                    value
                } else {
                    0
                }
            }));
            blocks.push([value; 32]);
        }
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..1000 {
            blocks.push(core::array::from_fn(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            }));
        }
        for block in &blocks {
            assert_eq!(
                sum_signed_bytes(block),
                block_sum_scalar(block),
                "{block:?}"
            );
        }
    }
}
