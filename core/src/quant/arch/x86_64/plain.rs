//! x86_64 kernels of the plain float types F32, F16 and BF16: conversions (AVX2 + F16C, 8 values
//! a step; AVX-512, 16) and the dot products.
//!
//! - dequantize: F32 is a byte copy; F16 is `vcvtph2ps` (exact, NaNs quieted with their payload,
//!   as the scalar `f16_le`); BF16 is a 16-bit shift. These are the instruction loops candle's
//!   `to_float` runs too (`memcpy`, `half`'s F16C slice conversion, a vectorized shift), and at
//!   one load, one convert and one 32-byte store per eight values they run at the cache or
//!   memory bandwidth, not the core's speed.
//! - quantize: F32 is a byte copy; F16 is `vcvtps2ph` with round-to-nearest-even (immediate 0, so
//!   MXCSR is not consulted), then every NaN lane replaced by `sign | 0x7E00`
//!   (`GGML_FP32_TO_FP16`); BF16 is `ggml_compute_fp32_to_bf16` in integer lanes (add
//!   `0x7FFF + lsb`, shift; NaN: `bits >> 16 | 0x40`). The AVX-512 `vcvtneps2bf16` is not used: it
//!   flushes subnormals to zero, which ggml's conversion does not.
//! - vec_dot: ggml's scalar order is `sumf += (double)(a * b)` one element after the other, a
//!   serial chain of f64 additions that no reordering may touch. The products are formed and
//!   widened to f64 a vector at a time; the additions stay in element order. Before that chain
//!   each group of [`GROUP`] elements is checked for the case where no addition of the chain can
//!   round ([`exact_group`]): then the group's exact sum, taken in any order, is the chain's
//!   result, and the vector lanes add it without the chain.
//!
//! Tails shorter than a vector use the scalar twins' element functions.

use super::tokens::{kernel, Avx2, Avx512Vnni};
use super::vector::load16;
use crate::quant::legacy::plain::{quantize_bf16, quantize_f16, BlockBf16, BlockF16, BlockF32};
use core::arch::x86_64::*;

/// A plain float block type as the vector kernels read it.
trait Plain: Copy + bytemuck::Pod {
    /// The value as f32 (the scalar twin's conversion).
    fn value(self) -> f32;
    /// Significant bits of any normal f32 product of two values (24 for F32; 22 for F16 and
    /// 16 for BF16, whose products are exact): a nonzero normal product with exponent field
    /// `e` is a multiple of `2^(e - 127 - (PRODUCT_BITS - 1))`.
    const PRODUCT_BITS: i32;
    /// Eight values as f32 (AVX2 + F16C).
    ///
    /// # Safety
    /// The CPU has AVX2 and F16C.
    unsafe fn load8(v: &[Self; 8]) -> __m256;
    /// Sixteen values as f32 (AVX-512 F).
    ///
    /// # Safety
    /// The CPU has AVX-512 F.
    unsafe fn load16(v: &[Self; 16]) -> __m512;
}

/// 32 bytes as a vector.
#[inline]
#[target_feature(enable = "avx2")]
fn bytes32<T: bytemuck::Pod, const N: usize>(v: &[T; N]) -> __m256i {
    const { assert!(core::mem::size_of::<[T; N]>() == 32) };
    // SAFETY: the array is 32 bytes; `loadu` has no alignment requirement.
    unsafe { _mm256_loadu_si256(v.as_ptr().cast()) }
}

impl Plain for BlockF32 {
    const PRODUCT_BITS: i32 = 24;
    #[inline(always)]
    fn value(self) -> f32 {
        BlockF32::value(self)
    }
    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn load8(v: &[Self; 8]) -> __m256 {
        // SAFETY: eight blocks are 32 bytes; `loadu` has no alignment requirement.
        unsafe { _mm256_loadu_ps(v.as_ptr().cast()) }
    }
    #[inline]
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl")]
    unsafe fn load16(v: &[Self; 16]) -> __m512 {
        // SAFETY: sixteen blocks are 64 bytes; `loadu` has no alignment requirement.
        unsafe { _mm512_loadu_ps(v.as_ptr().cast()) }
    }
}

impl Plain for BlockF16 {
    const PRODUCT_BITS: i32 = 22;
    #[inline(always)]
    fn value(self) -> f32 {
        BlockF16::value(self)
    }
    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn load8(v: &[Self; 8]) -> __m256 {
        let bytes: &[u8; 16] = bytemuck::cast_ref(v);
        _mm256_cvtph_ps(load16(bytes))
    }
    #[inline]
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl")]
    unsafe fn load16(v: &[Self; 16]) -> __m512 {
        _mm512_cvtph_ps(bytes32(v))
    }
}

impl Plain for BlockBf16 {
    const PRODUCT_BITS: i32 = 16;
    #[inline(always)]
    fn value(self) -> f32 {
        BlockBf16::value(self)
    }
    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn load8(v: &[Self; 8]) -> __m256 {
        let bytes: &[u8; 16] = bytemuck::cast_ref(v);
        _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(load16(
            bytes,
        ))))
    }
    #[inline]
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl")]
    unsafe fn load16(v: &[Self; 16]) -> __m512 {
        _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(bytes32(v))))
    }
}

// ---------------------------------------------------------------------------------------------
// F32: byte copies (any level).

/// F32 dequantize: the bytes are the little-endian f32 values.
pub(super) fn dequantize_f32(blocks: &[BlockF32], out: &mut [f32]) {
    let n = blocks.len().min(out.len());
    let (src, dst) = (
        blocks.get(..n).unwrap_or(&[]),
        out.get_mut(..n).unwrap_or(&mut []),
    );
    bytemuck::cast_slice_mut::<f32, u8>(dst).copy_from_slice(bytemuck::cast_slice(src));
}

/// F32 quantize: a bit copy.
pub(super) fn quantize_f32(values: &[f32], blocks: &mut [BlockF32]) {
    let n = blocks.len().min(values.len());
    let (src, dst) = (
        values.get(..n).unwrap_or(&[]),
        blocks.get_mut(..n).unwrap_or(&mut []),
    );
    bytemuck::cast_slice_mut::<BlockF32, u8>(dst).copy_from_slice(bytemuck::cast_slice(src));
}

// ---------------------------------------------------------------------------------------------
// Dequantize F16, BF16.

#[inline]
#[target_feature(enable = "avx2,f16c")]
fn dequantize_avx2<B: Plain>(blocks: &[B], out: &mut [f32]) {
    let mut src = blocks.chunks_exact(8);
    let mut dst = out.chunks_exact_mut(8);
    for (s, d) in (&mut src).zip(&mut dst) {
        if let (Ok(s), Some(d)) = (<&[B; 8]>::try_from(s), d.first_chunk_mut::<8>()) {
            // SAFETY: AVX2 and F16C are enabled here; `d` holds eight f32 (`storeu`: any alignment).
            unsafe { _mm256_storeu_ps(d.as_mut_ptr(), B::load8(s)) };
        }
    }
    for (&s, d) in src.remainder().iter().zip(dst.into_remainder()) {
        *d = s.value();
    }
}

#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl")]
fn dequantize_avx512<B: Plain>(blocks: &[B], out: &mut [f32]) {
    let mut src = blocks.chunks_exact(16);
    let mut dst = out.chunks_exact_mut(16);
    for (s, d) in (&mut src).zip(&mut dst) {
        if let (Ok(s), Some(d)) = (<&[B; 16]>::try_from(s), d.first_chunk_mut::<16>()) {
            // SAFETY: AVX-512 F is enabled here; `d` holds sixteen f32.
            unsafe { _mm512_storeu_ps(d.as_mut_ptr(), B::load16(s)) };
        }
    }
    let (rest_src, rest_dst) = (src.remainder(), dst.into_remainder());
    dequantize_avx2(rest_src, rest_dst);
}

kernel! {
    /// F16 dequantize, AVX2 + F16C.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn dequantize_f16_avx2(_t: Avx2, blocks: &[BlockF16], out: &mut [f32]) {
        dequantize_avx2(blocks, out)
    }

    /// BF16 dequantize, AVX2.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn dequantize_bf16_avx2(_t: Avx2, blocks: &[BlockBf16], out: &mut [f32]) {
        dequantize_avx2(blocks, out)
    }

    /// F16 dequantize, AVX-512.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl")]
    pub(super) fn dequantize_f16_avx512(_t: Avx512Vnni, blocks: &[BlockF16], out: &mut [f32]) {
        dequantize_avx512(blocks, out)
    }

    /// BF16 dequantize, AVX-512.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl")]
    pub(super) fn dequantize_bf16_avx512(_t: Avx512Vnni, blocks: &[BlockBf16], out: &mut [f32]) {
        dequantize_avx512(blocks, out)
    }
}

// ---------------------------------------------------------------------------------------------
// Quantize F16, BF16.

/// Eight f32 to `GGML_FP32_TO_FP16` halves: `vcvtps2ph` rounding to nearest even, NaN lanes
/// replaced by `sign | 0x7E00`.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn f16x8_from(x: __m256) -> __m128i {
    let halves = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x);
    let bits = _mm256_castps_si256(x);
    let nan_bits = _mm256_or_si256(
        _mm256_and_si256(_mm256_srli_epi32::<16>(bits), _mm256_set1_epi32(0x8000)),
        _mm256_set1_epi32(0x7e00),
    );
    let nan = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_UNORD_Q>(x, x));
    let low = _mm256_castsi256_si128(nan);
    let nan16 = _mm_packs_epi32(low, _mm256_extracti128_si256::<1>(nan));
    let nan_bits16 = _mm_packus_epi32(
        _mm256_castsi256_si128(nan_bits),
        _mm256_extracti128_si256::<1>(nan_bits),
    );
    _mm_blendv_epi8(halves, nan_bits16, nan16)
}

/// Eight f32 to `ggml_compute_fp32_to_bf16` bits, in 32-bit lanes.
#[inline]
#[target_feature(enable = "avx2")]
fn bf16x8_from(x: __m256) -> __m128i {
    let bits = _mm256_castps_si256(x);
    let magnitude = _mm256_and_si256(bits, _mm256_set1_epi32(0x7fff_ffff));
    let nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f80_0000));
    let lsb = _mm256_and_si256(_mm256_srli_epi32::<16>(bits), _mm256_set1_epi32(1));
    let rounding = _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb);
    let rounded = _mm256_srli_epi32::<16>(_mm256_add_epi32(bits, rounding));
    let quiet = _mm256_or_si256(_mm256_srli_epi32::<16>(bits), _mm256_set1_epi32(0x40));
    let out = _mm256_blendv_epi8(rounded, quiet, nan);
    // Every lane is below 2^16, so the unsigned-saturating pack is exact.
    _mm_packus_epi32(
        _mm256_castsi256_si128(out),
        _mm256_extracti128_si256::<1>(out),
    )
}

/// Quantizes eight values a step with `convert`, the tail with the scalar twin's `scalar`.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn quantize_avx2<B: Plain>(
    values: &[f32],
    blocks: &mut [B],
    convert: impl Fn(__m256) -> __m128i,
    scalar: impl Fn(&[f32; 1]) -> B,
) {
    let mut src = values.chunks_exact(8);
    let mut dst = blocks.chunks_exact_mut(8);
    for (s, d) in (&mut src).zip(&mut dst) {
        if let (Some(s), Some(d)) = (s.first_chunk::<8>(), d.first_chunk_mut::<8>()) {
            let d: &mut [u8; 16] = bytemuck::cast_mut(d);
            // SAFETY: `s` holds eight f32 and `d` sixteen bytes; `loadu`/`storeu` have no
            // alignment requirement; AVX2 is enabled here.
            unsafe {
                _mm_storeu_si128(d.as_mut_ptr().cast(), convert(_mm256_loadu_ps(s.as_ptr())))
            };
        }
    }
    for (&s, d) in src.remainder().iter().zip(dst.into_remainder()) {
        *d = scalar(&[s]);
    }
}

kernel! {
    /// F16 quantize, AVX2 + F16C.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn quantize_f16_avx2(_t: Avx2, values: &[f32], blocks: &mut [BlockF16]) {
        quantize_avx2(values, blocks, |x| f16x8_from(x), quantize_f16)
    }

    /// BF16 quantize, AVX2.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn quantize_bf16_avx2(_t: Avx2, values: &[f32], blocks: &mut [BlockBf16]) {
        quantize_avx2(values, blocks, |x| bf16x8_from(x), quantize_bf16)
    }
}

/// Sixteen f32 to `GGML_FP32_TO_FP16` halves (AVX-512).
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl")]
fn f16x16_from(x: __m512) -> __m256i {
    let halves = _mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x);
    let bits = _mm512_castps_si512(x);
    let nan_bits = _mm512_or_si512(
        _mm512_and_si512(_mm512_srli_epi32::<16>(bits), _mm512_set1_epi32(0x8000)),
        _mm512_set1_epi32(0x7e00),
    );
    let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, x);
    _mm256_mask_blend_epi16(nan, halves, _mm512_cvtepi32_epi16(nan_bits))
}

/// Sixteen f32 to `ggml_compute_fp32_to_bf16` bits (AVX-512).
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl")]
fn bf16x16_from(x: __m512) -> __m256i {
    let bits = _mm512_castps_si512(x);
    let magnitude = _mm512_and_si512(bits, _mm512_set1_epi32(0x7fff_ffff));
    let nan = _mm512_cmpgt_epi32_mask(magnitude, _mm512_set1_epi32(0x7f80_0000));
    let lsb = _mm512_and_si512(_mm512_srli_epi32::<16>(bits), _mm512_set1_epi32(1));
    let rounding = _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb);
    let rounded = _mm512_srli_epi32::<16>(_mm512_add_epi32(bits, rounding));
    let quiet = _mm512_or_si512(_mm512_srli_epi32::<16>(bits), _mm512_set1_epi32(0x40));
    _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, quiet))
}

/// Quantizes sixteen values a step with `convert`, the rest with the AVX2 form.
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl")]
fn quantize_avx512<B: Plain>(
    values: &[f32],
    blocks: &mut [B],
    convert: impl Fn(__m512) -> __m256i,
    rest: impl Fn(&[f32], &mut [B]),
) {
    let mut src = values.chunks_exact(16);
    let mut dst = blocks.chunks_exact_mut(16);
    for (s, d) in (&mut src).zip(&mut dst) {
        if let (Some(s), Some(d)) = (s.first_chunk::<16>(), d.first_chunk_mut::<16>()) {
            let d: &mut [u8; 32] = bytemuck::cast_mut(d);
            // SAFETY: `s` holds sixteen f32 and `d` 32 bytes; unaligned forms; AVX-512 F enabled.
            unsafe {
                _mm256_storeu_si256(d.as_mut_ptr().cast(), convert(_mm512_loadu_ps(s.as_ptr())))
            };
        }
    }
    rest(src.remainder(), dst.into_remainder());
}

kernel! {
    /// F16 quantize, AVX-512.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl")]
    pub(super) fn quantize_f16_avx512(_t: Avx512Vnni, values: &[f32], blocks: &mut [BlockF16]) {
        quantize_avx512(
            values,
            blocks,
            |x| f16x16_from(x),
            |v, b| quantize_avx2(v, b, |x| f16x8_from(x), quantize_f16),
        )
    }

    /// BF16 quantize, AVX-512.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl")]
    pub(super) fn quantize_bf16_avx512(_t: Avx512Vnni, values: &[f32], blocks: &mut [BlockBf16]) {
        quantize_avx512(
            values,
            blocks,
            |x| bf16x16_from(x),
            |v, b| quantize_avx2(v, b, |x| bf16x8_from(x), quantize_bf16),
        )
    }
}

// ---------------------------------------------------------------------------------------------
// vec_dot: the serial f64 chain.

/// Elements per exactness check of the dot (see [`exact_group`]).
const GROUP: usize = 64;

/// Adds the f64 widening of eight f32 products to `sum`, one after the other.
#[inline]
#[target_feature(enable = "avx2")]
fn add_serially(mut sum: f64, products: __m256) -> f64 {
    let mut wide = [0.0f64; 8];
    // SAFETY: `wide` holds eight f64 (`storeu`: any alignment); AVX2 is enabled here.
    unsafe {
        _mm256_storeu_pd(
            wide.as_mut_ptr(),
            _mm256_cvtps_pd(_mm256_castps256_ps128(products)),
        );
        _mm256_storeu_pd(
            wide.as_mut_ptr().add(4),
            _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(products)),
        );
    }
    for p in wide {
        sum += p;
    }
    sum
}

/// Whether adding `products` (f32 values, each exactly representable in f64) to `sum` one after
/// the other rounds at no step. Sufficient condition: with `2^q` the smallest unit in the last
/// place among the nonzero products and the lowest set bit of `sum`, every partial sum is a
/// multiple of `2^q`; if also `|sum| + Σ|p| < 2^(53+q)`, every partial sum is an integer multiple
/// of `2^q` below `2^53` in magnitude, so f64 holds it exactly: each addition is exact, in any
/// order. Infinities and NaNs are never exact.
///
/// The caller passes, from the products' biased f32 exponent fields `e` (it has checked that none
/// is 255, inf or NaN): `smallest_unit`, the minimum over nonzero products of `max(e, 1) - 150`
/// (the exponent of their last place; `i32::MAX` if all are zero); `largest_bound`, the maximum
/// of `max(e, 1) - 126` (every `|p| < 2^largest_bound`); and `count_log2`, with at most
/// `2^count_log2` products.
#[inline(always)]
fn exact_group(sum: f64, smallest_unit: i32, largest_bound: i32, count_log2: i32) -> bool {
    // The sum's own lowest set bit and magnitude bound (a finite sum is never an f64 subnormal:
    // it is 0 or a sum of multiples of 2^-149, rounded or not).
    if !sum.is_finite() {
        return false;
    }
    let (sum_unit, sum_bound) = if sum == 0.0 {
        (i32::MAX, i32::MIN)
    } else {
        let bits = sum.to_bits();
        let biased = ((bits >> 52) & 0x7ff) as i32;
        let mantissa = (bits & ((1 << 52) - 1)) | (1 << 52);
        (
            biased - 1075 + mantissa.trailing_zeros() as i32,
            biased - 1022,
        )
    };
    let unit = smallest_unit.min(sum_unit);
    // |sum| + n·max|p| < 2^sum_bound + 2^(largest_bound + count_log2) <= 2^(max + 1).
    let bound = sum_bound
        .max(largest_bound.saturating_add(count_log2))
        .saturating_add(1);
    bound <= unit.saturating_add(53)
}

/// The dot at AVX-512: per group of [`GROUP`] elements, the products sixteen at a time with their
/// exponent range; an exact group is added in four f64 vectors of lanes, any other group (and
/// every group with an infinity or NaN) one element after the other.
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl")]
fn vec_dot_avx512<B: Plain>(w: &[B], x: &[B]) -> f32 {
    let mut sum = 0.0f64;
    let mut wg = w.chunks_exact(GROUP);
    let mut xg = x.chunks_exact(GROUP);
    let exponent_mask = _mm512_set1_epi32(0xff);
    for (wc, xc) in (&mut wg).zip(&mut xg) {
        let mut products = [_mm512_setzero_ps(); GROUP / 16];
        let mut smallest = _mm512_set1_epi32(i32::MAX);
        let mut largest = _mm512_setzero_si512();
        let w16 = wc
            .chunks_exact(16)
            .filter_map(|c| <&[B; 16]>::try_from(c).ok());
        let x16 = xc
            .chunks_exact(16)
            .filter_map(|c| <&[B; 16]>::try_from(c).ok());
        for ((p, a), b) in products.iter_mut().zip(w16).zip(x16) {
            // SAFETY: AVX-512 F is enabled here.
            *p = unsafe { _mm512_mul_ps(B::load16(a), B::load16(b)) };
            let bits = _mm512_castps_si512(*p);
            let field = _mm512_and_si512(_mm512_srli_epi32::<23>(bits), exponent_mask);
            let nonzero = _mm512_test_epi32_mask(bits, _mm512_set1_epi32(0x7fff_ffff));
            smallest = _mm512_mask_min_epi32(smallest, nonzero, smallest, field);
            largest = _mm512_max_epi32(largest, field);
        }
        let smallest = _mm512_reduce_min_epi32(smallest);
        let largest = _mm512_reduce_max_epi32(largest);
        let finite = largest < 255;
        let (smallest_unit, largest_bound) = (unit_of::<B>(smallest), largest.max(1) - 126);
        if finite && exact_group(sum, smallest_unit, largest_bound, GROUP.ilog2() as i32) {
            let mut lanes = _mm512_setzero_pd();
            for p in products {
                lanes = _mm512_add_pd(lanes, _mm512_cvtps_pd(_mm512_castps512_ps256(p)));
                let high = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(p)));
                lanes = _mm512_add_pd(lanes, _mm512_cvtps_pd(high));
            }
            sum += _mm512_reduce_add_pd(lanes);
        } else {
            for p in products {
                sum = add_serially(sum, _mm512_castps512_ps256(p));
                let high = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(p)));
                sum = add_serially(sum, high);
            }
        }
    }
    vec_dot_avx2_sum(sum, wg.remainder(), xg.remainder()) as f32
}

/// The serial chain continued from `sum`, eight products at a time (the tails of the dots).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn vec_dot_avx2_sum<B: Plain>(mut sum: f64, w: &[B], x: &[B]) -> f64 {
    let mut w8 = w.chunks_exact(8);
    let mut x8 = x.chunks_exact(8);
    for (wc, xc) in (&mut w8).zip(&mut x8) {
        if let (Ok(wc), Ok(xc)) = (<&[B; 8]>::try_from(wc), <&[B; 8]>::try_from(xc)) {
            // SAFETY: AVX2 and F16C are enabled here.
            let products = unsafe { _mm256_mul_ps(B::load8(wc), B::load8(xc)) };
            sum = add_serially(sum, products);
        }
    }
    for (&a, &b) in w8.remainder().iter().zip(x8.remainder()) {
        sum += f64::from(a.value() * b.value());
    }
    sum
}

/// The exponent of the last place of every nonzero product of `B` whose f32 exponent field is at
/// least `field` (`i32::MAX` when there is none): subnormal products are multiples of 2^-149.
#[inline(always)]
fn unit_of<B: Plain>(field: i32) -> i32 {
    match field {
        i32::MAX => i32::MAX,
        0 => -149,
        e => e - 127 - (B::PRODUCT_BITS - 1),
    }
}

/// The smallest and largest of eight i32 lanes.
#[inline]
#[target_feature(enable = "avx2")]
fn min_max_i32(smallest: __m256i, largest: __m256i) -> (i32, i32) {
    let mut low = [0i32; 8];
    let mut high = [0i32; 8];
    // SAFETY: both arrays hold eight i32; `storeu` has no alignment requirement.
    unsafe {
        _mm256_storeu_si256(low.as_mut_ptr().cast(), smallest);
        _mm256_storeu_si256(high.as_mut_ptr().cast(), largest);
    }
    let smallest = low.into_iter().min().unwrap_or(i32::MAX);
    let largest = high.into_iter().max().unwrap_or(i32::MAX);
    (smallest, largest)
}

/// The dot at AVX2: per group of [`GROUP`] elements, the products eight at a time with their
/// exponent range; an exact group ([`exact_group`]) is added in two f64 vectors of lanes, any
/// other group one element after the other; the last `len % GROUP` elements serially.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn vec_dot_avx2<B: Plain>(w: &[B], x: &[B]) -> f32 {
    let mut sum = 0.0f64;
    let mut wg = w.chunks_exact(GROUP);
    let mut xg = x.chunks_exact(GROUP);
    let exponent_mask = _mm256_set1_epi32(0xff);
    let magnitude_mask = _mm256_set1_epi32(0x7fff_ffff);
    for (wc, xc) in (&mut wg).zip(&mut xg) {
        let mut products = [_mm256_setzero_ps(); GROUP / 8];
        let mut smallest = _mm256_set1_epi32(i32::MAX);
        let mut largest = _mm256_setzero_si256();
        let w8 = wc
            .chunks_exact(8)
            .filter_map(|c| <&[B; 8]>::try_from(c).ok());
        let x8 = xc
            .chunks_exact(8)
            .filter_map(|c| <&[B; 8]>::try_from(c).ok());
        for ((p, a), b) in products.iter_mut().zip(w8).zip(x8) {
            // SAFETY: AVX2 and F16C are enabled here.
            *p = unsafe { _mm256_mul_ps(B::load8(a), B::load8(b)) };
            let bits = _mm256_castps_si256(*p);
            let field = _mm256_and_si256(_mm256_srli_epi32::<23>(bits), exponent_mask);
            // Zero products (all ones here) become i32::MAX: they never set the smallest unit.
            let zero = _mm256_cmpeq_epi32(
                _mm256_and_si256(bits, magnitude_mask),
                _mm256_setzero_si256(),
            );
            let unit = _mm256_or_si256(field, _mm256_srli_epi32::<1>(zero));
            smallest = _mm256_min_epi32(smallest, unit);
            largest = _mm256_max_epi32(largest, field);
        }
        let (smallest, largest) = min_max_i32(smallest, largest);
        let (smallest_unit, largest_bound) = (unit_of::<B>(smallest), largest.max(1) - 126);
        if largest < 255 && exact_group(sum, smallest_unit, largest_bound, GROUP.ilog2() as i32) {
            let mut lanes = [_mm256_setzero_pd(); 2];
            for p in products {
                lanes[0] = _mm256_add_pd(lanes[0], _mm256_cvtps_pd(_mm256_castps256_ps128(p)));
                lanes[1] = _mm256_add_pd(lanes[1], _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(p)));
            }
            let mut wide = [0.0f64; 4];
            // SAFETY: `wide` holds four f64; `storeu` has no alignment requirement.
            unsafe { _mm256_storeu_pd(wide.as_mut_ptr(), _mm256_add_pd(lanes[0], lanes[1])) };
            // Every partial sum is exact (see `exact_group`): any order gives the chain's value.
            sum += (wide[0] + wide[1]) + (wide[2] + wide[3]);
        } else {
            for p in products {
                sum = add_serially(sum, p);
            }
        }
    }
    vec_dot_avx2_sum(sum, wg.remainder(), xg.remainder()) as f32
}

kernel! {
    /// `ggml_vec_dot_f32` (scalar order) at AVX2.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn vec_dot_f32_avx2(_t: Avx2, w: &[BlockF32], x: &[BlockF32]) -> f32 {
        vec_dot_avx2(w, x)
    }

    /// `ggml_vec_dot_f32` (scalar order) at AVX-512.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl")]
    pub(super) fn vec_dot_f32_avx512(_t: Avx512Vnni, w: &[BlockF32], x: &[BlockF32]) -> f32 {
        vec_dot_avx512(w, x)
    }

    /// `ggml_vec_dot_f16` (scalar order) at AVX2.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn vec_dot_f16_avx2(_t: Avx2, w: &[BlockF16], x: &[BlockF16]) -> f32 {
        vec_dot_avx2(w, x)
    }

    /// `ggml_vec_dot_f16` (scalar order) at AVX-512.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl")]
    pub(super) fn vec_dot_f16_avx512(_t: Avx512Vnni, w: &[BlockF16], x: &[BlockF16]) -> f32 {
        vec_dot_avx512(w, x)
    }

    /// `ggml_vec_dot_bf16` (scalar order) at AVX2.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn vec_dot_bf16_avx2(_t: Avx2, w: &[BlockBf16], x: &[BlockBf16]) -> f32 {
        vec_dot_avx2(w, x)
    }

    /// `ggml_vec_dot_bf16` (scalar order) at AVX-512.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl")]
    pub(super) fn vec_dot_bf16_avx512(_t: Avx512Vnni, w: &[BlockBf16], x: &[BlockBf16]) -> f32 {
        vec_dot_avx512(w, x)
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use std::vec::Vec;

    /// The arguments the kernels pass to `exact_group` for these products, computed per element.
    fn group_arguments(products: &[f32]) -> Option<(i32, i32)> {
        let mut smallest = i32::MAX;
        let mut largest = 1;
        for p in products {
            let field = ((p.to_bits() >> 23) & 0xff) as i32;
            if field == 255 {
                return None;
            }
            let field = field.max(1);
            if *p != 0.0 {
                smallest = smallest.min(field - 150);
            }
            largest = largest.max(field);
        }
        Some((smallest, largest - 126))
    }

    fn serial(mut sum: f64, products: &[f32]) -> f64 {
        for &p in products {
            sum += f64::from(p);
        }
        sum
    }

    /// Whenever the check says a group is exact, the serial chain equals two other orders (so
    /// a looser bound, which lets a rounding step through, fails here); and it does say so for
    /// sums of small integers, so the vector path is really taken.
    #[test]
    fn exact_groups_sum_the_same_in_any_order() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            state.wrapping_mul(0x2545_f491_4f6c_dd1d)
        };
        let (mut exact, mut inexact) = (0, 0);
        for case in 0..20_000 {
            // Products over a range of binary orders that widens with the case number, and a
            // running sum from an earlier group, sometimes zero.
            let orders = 1 + (case % 40) as u32;
            let products: Vec<f32> = (0..GROUP)
                .map(|_| {
                    let r = next();
                    let exponent = 127 - 10 + (r % u64::from(orders)) as u32;
                    let mantissa = (r >> 20) as u32 & 0x7f_ffff;
                    let sign = ((r >> 50) & 1) as u32;
                    f32::from_bits(sign << 31 | exponent << 23 | mantissa)
                })
                .collect();
            let sum = if case % 3 == 0 {
                0.0
            } else {
                serial(0.0, &products[..(case % 64) as usize]) * 3.0
            };
            let (smallest, largest) = group_arguments(&products).unwrap_or((0, 0));
            if exact_group(sum, smallest, largest, GROUP.ilog2() as i32) {
                exact += 1;
                let want = serial(sum, &products);
                let reversed = products.iter().rev().fold(0.0f64, |s, &p| s + f64::from(p));
                let halves = serial(0.0, &products[..32]) + serial(0.0, &products[32..]);
                assert_eq!(want.to_bits(), (sum + reversed).to_bits(), "case {case}");
                assert_eq!(want.to_bits(), (halves + sum).to_bits(), "case {case}");
            } else {
                inexact += 1;
            }
        }
        assert!(
            exact > 1000 && inexact > 1000,
            "{exact} exact, {inexact} not"
        );
        let integers: Vec<f32> = (0..GROUP).map(|i| (i % 17) as f32 - 8.0).collect();
        let (smallest, largest) = group_arguments(&integers).unwrap_or((0, 0));
        assert!(exact_group(0.0, smallest, largest, GROUP.ilog2() as i32));
        assert!(exact_group(1e6, smallest, largest, GROUP.ilog2() as i32));
        // 2^53 + 1 is not an f64: adding 1 to 2^53 rounds.
        let two_53 = 9_007_199_254_740_992.0;
        assert!(!exact_group(
            two_53,
            smallest,
            largest,
            GROUP.ilog2() as i32
        ));
        assert!(!exact_group(
            f64::INFINITY,
            smallest,
            largest,
            GROUP.ilog2() as i32
        ));
    }
}
