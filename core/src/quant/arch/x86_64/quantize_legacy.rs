//! AVX2 quantizers of Q4_0 and of Q5_0, the type `requantize --type q4_k` falls back to for rows
//! that are not whole 256-value blocks (most of SmolLM2's tensors, whose rows are 576 values). The
//! scalar twins are `legacy::q4_0::quantize_block` and `legacy::q5_0::quantize_block`.

use core::arch::x86_64::*;

use crate::quant::cast::f16_to_le;
use crate::quant::legacy::q4_0::BlockQ4_0;
use crate::quant::legacy::q5_0::{BlockQ5_0, QK};

/// A 32-value block as four vectors.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn load_block(x: &[f32]) -> [__m256; 4] {
    let mut v = [_mm256_setzero_ps(); 4];
    for (v, chunk) in v.iter_mut().zip(x.chunks_exact(8)) {
        // SAFETY: `chunk` holds eight f32; `loadu` has no alignment requirement.
        *v = unsafe { _mm256_loadu_ps(chunk.as_ptr()) };
    }
    v
}

/// The first value of `x` (loaded as `v`) with the largest magnitude, NaN never counting; 0 when
/// all are zeros or NaN (the scalar twin is `float::first_largest_magnitude`).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn first_largest_magnitude(x: &[f32], v: &[__m256; 4]) -> f32 {
    let magnitude = _mm256_set1_epi32(0x7fff_ffff);
    let infinity = _mm256_set1_epi32(0x7f80_0000);
    // Magnitudes as integers (ordered like the values), NaN's set to 0 so it never wins.
    let bits = v.map(|v| {
        let m = _mm256_and_si256(_mm256_castps_si256(v), magnitude);
        _mm256_andnot_si256(_mm256_cmpgt_epi32(m, infinity), m)
    });
    let [b0, b1, b2, b3] = bits;
    let top = _mm256_max_epi32(_mm256_max_epi32(b0, b1), _mm256_max_epi32(b2, b3));
    let top = _mm256_max_epi32(top, _mm256_permute2x128_si256::<1>(top, top));
    let top = _mm256_max_epi32(top, _mm256_shuffle_epi32::<0b01_00_11_10>(top));
    let top = _mm256_max_epi32(top, _mm256_shuffle_epi32::<0b10_11_00_01>(top));
    if _mm256_extract_epi32::<0>(top) == 0 {
        return 0.0;
    }
    // The first value whose magnitude is the largest.
    let mut hits = 0u32;
    for (k, &b) in bits.iter().enumerate() {
        let mask = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(b, top)));
        hits |= (mask as u32) << (8 * k);
    }
    x.get(hits.trailing_zeros() as usize)
        .copied()
        .unwrap_or(0.0)
}

/// `quantize_row_q4_0_ref`: `d = max / -8` (`max` the first value of largest magnitude, NaN never
/// counting), `q = min(15, (int8_t)(x / d + 8.5))` stored as `uint8_t`, value `l` in the low
/// nibble of byte `l` and value `l + 16` shifted into its high nibble (C's `xi0 | xi1 << 4` in a
/// byte: an out-of-range `xi0` keeps its high bits, as in ggml).
#[target_feature(enable = "avx2,f16c")]
fn quantize_q4_0_impl(values: &[f32], blocks: &mut [BlockQ4_0]) {
    for (x, block) in values.chunks_exact(QK).zip(blocks) {
        let v = load_block(x);
        let d = first_largest_magnitude(x, &v) / -8.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        block.d = f16_to_le(d);
        let (id, half) = (_mm256_set1_ps(id), _mm256_set1_ps(8.5));
        let levels = v.map(|v| {
            // C's (int)x (cvttps: i32::MIN for NaN and out of range), then (int8_t) of it.
            let l = _mm256_cvttps_epi32(_mm256_add_ps(_mm256_mul_ps(v, id), half));
            let l = _mm256_srai_epi32::<24>(_mm256_slli_epi32::<24>(l));
            _mm256_min_epi32(l, _mm256_set1_epi32(15))
        });
        // Bytes `lo | hi << 4` (their low 8 bits) in eight i32 lanes, then narrowed: packs work
        // within 128-bit halves, the permutation puts the four groups of four back in order.
        let [l0, l1, l2, l3] = levels;
        let byte = _mm256_set1_epi32(0xff);
        let pair = |lo, hi| _mm256_and_si256(_mm256_or_si256(lo, _mm256_slli_epi32::<4>(hi)), byte);
        let words = _mm256_packus_epi32(pair(l0, l2), pair(l1, l3));
        let bytes = _mm256_packus_epi16(words, words);
        let bytes = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 0, 0, 0, 0));
        // SAFETY: `qs` holds sixteen bytes; `storeu` has no alignment requirement.
        unsafe { _mm_storeu_si128(block.qs.as_mut_ptr().cast(), _mm256_castsi256_si128(bytes)) };
    }
}

/// Safe entry of [`quantize_q4_0_impl`].
pub(super) fn quantize_q4_0(values: &[f32], blocks: &mut [BlockQ4_0]) {
    // SAFETY: only handed out for an available AVX2 level (as the AVX2 kernels of `avx2.rs`).
    unsafe { quantize_q4_0_impl(values, blocks) }
}

/// `quantize_row_q5_0_ref`: `d = max / -16` (`max` the first value of largest magnitude, NaN never
/// counting), `q = min(31, (int8_t)(x / d + 16.5))`, four low bits in `qs`, the fifth in `qh`.
#[target_feature(enable = "avx2,f16c")]
fn quantize_q5_0_impl(values: &[f32], blocks: &mut [BlockQ5_0]) {
    for (x, block) in values.chunks_exact(QK).zip(blocks) {
        let v = load_block(x);
        let max = first_largest_magnitude(x, &v);
        let d = max / -16.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        block.d = f16_to_le(d);
        let (id, half) = (_mm256_set1_ps(id), _mm256_set1_ps(16.5));
        let mut levels = [0i32; QK];
        let mut qh = 0u32;
        for (k, (&v, out)) in v.iter().zip(levels.chunks_exact_mut(8)).enumerate() {
            // C's (int)x (cvttps: i32::MIN for NaN and out of range), then (int8_t) of it.
            let l = _mm256_cvttps_epi32(_mm256_add_ps(_mm256_mul_ps(v, id), half));
            let l = _mm256_srai_epi32::<24>(_mm256_slli_epi32::<24>(l));
            let l = _mm256_min_epi32(l, _mm256_set1_epi32(31));
            // Bit 4 of each level, moved to the sign bit.
            let fifth = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_slli_epi32::<27>(l)));
            qh |= (fifth as u32 & 0xff) << (8 * k);
            // SAFETY: `out` holds eight i32; `storeu` has no alignment requirement.
            unsafe { _mm256_storeu_si256(out.as_mut_ptr().cast(), l) };
        }
        let (low, high) = levels.split_at(QK / 2);
        for ((q, &lo), &hi) in block.qs.iter_mut().zip(low).zip(high) {
            *q = (lo as u8 & 0x0f) | ((hi as u8 & 0x0f) << 4);
        }
        block.qh = qh.to_le_bytes();
    }
}

/// Safe entry of [`quantize_q5_0_impl`].
pub(super) fn quantize_q5_0(values: &[f32], blocks: &mut [BlockQ5_0]) {
    // SAFETY: only handed out for an available AVX2 level (as the AVX2 kernels of `avx2.rs`).
    unsafe { quantize_q5_0_impl(values, blocks) }
}
