//! The 32-value block types: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL and MXFP4 (vec_dot, dequantize,
//! the Q4_0 and Q5_0 quantizers), their multi-row kernels in [`rows`] and their many-row,
//! many-column kernels in [`matmul`].
//!
//! Integer sums are taken exactly (AVX2: products widened to i16 before any pairwise add, so no
//! `maddubs` saturation and no sign trick that breaks on -128; VNNI: `vpdpbusd` of unsigned
//! biased weights, the bias times the activation sum taken the same way and subtracted), then
//! every vec_dot runs one driver, [`legacy_dot`]: eight blocks' float terms formed side by side
//! in the scalar twin's order, added to `sumf` one by one.

use core::arch::x86_64::*;

use super::primitives::dpbusd;
use super::tokens::{kernel, Avx2, Avx512Vnni};
use super::vector::{
    dot_levels, f16_le, f16x8, hsum_i32, load16, load32, part, q4_0_nibbles, scale_block,
    scale_i8x16, store8, transpose_sums,
};
use crate::quant::activation::{BlockQ8_0, BlockQ8_1};
use crate::quant::cast::f16_to_le;
use crate::quant::iq::iq4_nl::BlockIq4Nl;
use crate::quant::iq::tables::KVALUES_IQ4NL;
use crate::quant::legacy::q5_0::QK;
use crate::quant::legacy::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1};
use crate::quant::misc::fp4::{e8m0_to_f32_half, KVALUES_FP4};
use crate::quant::misc::mxfp4::BlockMxfp4;

pub(super) mod matmul;
pub(super) mod packed;
pub(super) mod rows;

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

/// Σ w·x over 32 signed bytes each, as eight i32 partial sums: Σ (w + 128)·x − Σ 128·x.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn dot_i8x32_vnni(w: &[i8; 32], x: &[i8; 32]) -> __m256i {
    let bias = _mm256_set1_epi8(-128);
    let x = load32(x);
    let biased = _mm256_xor_si256(load32(w), bias);
    let zero = _mm256_setzero_si256();
    _mm256_sub_epi32(dpbusd(zero, biased, x), dpbusd(zero, bias, x))
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

/// Σ (q − 8)·y over a Q4_0 block: Σ q·y − Σ 8·y.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn dot_q4_0_vnni(qs: &[u8; 16], y: &[i8; 32]) -> __m256i {
    let y = load32(y);
    let zero = _mm256_setzero_si256();
    _mm256_sub_epi32(
        dpbusd(zero, q4_0_nibbles(qs), y),
        dpbusd(zero, _mm256_set1_epi8(8), y),
    )
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

/// Q8_0's dot over [`legacy_dot`], `partial` its integer sums: `sumf += sumi * (dx * dy)`.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn q8_0_dot(
    w: &[BlockQ8_0],
    x: &[BlockQ8_0],
    partial: impl Fn(&BlockQ8_0, &BlockQ8_0) -> __m256i,
) -> f32 {
    legacy_dot(
        w,
        x,
        partial,
        |sumi, wc, xc| {
            let d = _mm256_mul_ps(gather_f16(wc, |b| b.d), gather_f16(xc, |b| b.d));
            _mm256_mul_ps(sumi, d)
        },
        |sumi, wb, xb| sumi * (f16_le(wb.d) * f16_le(xb.d)),
    )
}

/// Q4_0's dot over [`legacy_dot`], `partial` its integer sums: `sumf += sumi * dx * dy` (that
/// is, `(sumi * dx) * dy`).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn q4_0_dot(
    w: &[BlockQ4_0],
    x: &[BlockQ8_0],
    partial: impl Fn(&BlockQ4_0, &BlockQ8_0) -> __m256i,
) -> f32 {
    legacy_dot(
        w,
        x,
        partial,
        |sumi, wc, xc| {
            let dw = gather_f16(wc, |b| b.d);
            _mm256_mul_ps(_mm256_mul_ps(sumi, dw), gather_f16(xc, |b| b.d))
        },
        |sumi, wb, xb| sumi * f16_le(wb.d) * f16_le(xb.d),
    )
}

kernel! {
    /// `ggml_vec_dot_q8_0_q8_0_generic`.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn vec_dot_q8_0(_t: Avx2, w: &[BlockQ8_0], x: &[BlockQ8_0]) -> f32 {
        q8_0_dot(w, x, |wb, xb| dot_i8x32(&wb.qs, &xb.qs))
    }

    /// `ggml_vec_dot_q8_0_q8_0_generic` with VNNI integer sums.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(super) fn vec_dot_q8_0_vnni(_t: Avx512Vnni, w: &[BlockQ8_0], x: &[BlockQ8_0]) -> f32 {
        q8_0_dot(w, x, |wb, xb| dot_i8x32_vnni(&wb.qs, &xb.qs))
    }

    /// `ggml_vec_dot_q4_0_q8_0_generic`.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn vec_dot_q4_0(_t: Avx2, w: &[BlockQ4_0], x: &[BlockQ8_0]) -> f32 {
        q4_0_dot(w, x, |wb, xb| dot_q4_0(&wb.qs, &xb.qs))
    }

    /// `ggml_vec_dot_q4_0_q8_0_generic` with VNNI integer sums.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(super) fn vec_dot_q4_0_vnni(_t: Avx512Vnni, w: &[BlockQ4_0], x: &[BlockQ8_0]) -> f32 {
        q4_0_dot(w, x, |wb, xb| dot_q4_0_vnni(&wb.qs, &xb.qs))
    }
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

kernel! {
    /// `ggml_vec_dot_q4_1_q8_1_generic`: per block `sumf += (dx * dy) * sumi + m * s`.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn vec_dot_q4_1(_t: Avx2, w: &[BlockQ4_1], x: &[BlockQ8_1]) -> f32 {
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

    /// `ggml_vec_dot_q5_0_q8_0_generic`: per block `sumf += (dx * dy) * sumi`, quants `q - 16`.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn vec_dot_q5_0(_t: Avx2, w: &[BlockQ5_0], x: &[BlockQ8_0]) -> f32 {
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

    /// `ggml_vec_dot_q5_1_q8_1_generic`: per block `sumf += (dx * dy) * sumi + m * s`.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn vec_dot_q5_1(_t: Avx2, w: &[BlockQ5_1], x: &[BlockQ8_1]) -> f32 {
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
}

/// A block's 32 four-bit codes mapped through a 16-entry signed table, in element order.
#[inline]
#[target_feature(enable = "avx2")]
fn table_lookup(qs: &[u8; 16], table: &[i8; 16]) -> __m256i {
    let table = load16(table);
    _mm256_shuffle_epi8(_mm256_set_m128i(table, table), q4_0_nibbles(qs))
}

kernel! {
    /// `ggml_vec_dot_iq4_nl_q8_0_generic`: per block `sumf += (dy * dx) * sumi`.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn vec_dot_iq4_nl(_t: Avx2, w: &[BlockIq4Nl], x: &[BlockQ8_0]) -> f32 {
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

    /// `ggml_vec_dot_mxfp4_q8_0_generic`: per block `sumf += (dy * scale) * sumi`.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn vec_dot_mxfp4(_t: Avx2, w: &[BlockMxfp4], x: &[BlockQ8_0]) -> f32 {
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

kernel! {
    /// `dequantize_row_q8_0`: `q * d` per value.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn dequantize_q8_0(_t: Avx2, blocks: &[BlockQ8_0], out: &mut [f32]) {
        for (block, values) in blocks.iter().zip(out.chunks_exact_mut(32)) {
            let d = _mm256_set1_ps(f16_le(block.d));
            let (first, second) = values.split_at_mut(16);
            scale_i8x16(first, load16(part(&block.qs, 0)), d);
            scale_i8x16(second, load16(part(&block.qs, 16)), d);
        }
    }

    /// `dequantize_row_q4_0`: `(q - 8) * d`, low nibbles first.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn dequantize_q4_0(_t: Avx2, blocks: &[BlockQ4_0], out: &mut [f32]) {
        for (block, values) in blocks.iter().zip(out.chunks_exact_mut(32)) {
            let d = _mm256_set1_ps(f16_le(block.d));
            let q = _mm256_sub_epi8(q4_0_nibbles(&block.qs), _mm256_set1_epi8(8));
            let (first, second) = values.split_at_mut(16);
            scale_i8x16(first, _mm256_castsi256_si128(q), d);
            scale_i8x16(second, _mm256_extracti128_si256::<1>(q), d);
        }
    }

    /// `dequantize_row_q4_1`: `q * d + m`.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn dequantize_q4_1(_t: Avx2, blocks: &[BlockQ4_1], out: &mut [f32]) {
        for (block, values) in blocks.iter().zip(out.chunks_exact_mut(32)) {
            let q = q4_0_nibbles(&block.qs);
            scale_add_block(values, q, f16_le(block.d), f16_le(block.m));
        }
    }

    /// `dequantize_row_q5_0`: `(q - 16) * d`.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn dequantize_q5_0(_t: Avx2, blocks: &[BlockQ5_0], out: &mut [f32]) {
        for (block, values) in blocks.iter().zip(out.chunks_exact_mut(32)) {
            let q = _mm256_or_si256(q4_0_nibbles(&block.qs), fifth_bits(block.qh));
            let q = _mm256_sub_epi8(q, _mm256_set1_epi8(16));
            scale_block(values, q, f16_le(block.d));
        }
    }

    /// `dequantize_row_q5_1`: `q * d + m`.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn dequantize_q5_1(_t: Avx2, blocks: &[BlockQ5_1], out: &mut [f32]) {
        for (block, values) in blocks.iter().zip(out.chunks_exact_mut(32)) {
            let q = _mm256_or_si256(q4_0_nibbles(&block.qs), fifth_bits(block.qh));
            scale_add_block(values, q, f16_le(block.d), f16_le(block.m));
        }
    }

    /// `dequantize_row_iq4_nl`: `d * level`.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn dequantize_iq4_nl(_t: Avx2, blocks: &[BlockIq4Nl], out: &mut [f32]) {
        for (block, values) in blocks.iter().zip(out.chunks_exact_mut(32)) {
            let q = table_lookup(&block.qs, &KVALUES_IQ4NL);
            scale_block(values, q, f16_le(block.d));
        }
    }

    /// `dequantize_row_mxfp4`: `level * d`.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn dequantize_mxfp4(_t: Avx2, blocks: &[BlockMxfp4], out: &mut [f32]) {
        for (block, values) in blocks.iter().zip(out.chunks_exact_mut(32)) {
            let q = table_lookup(&block.qs, &KVALUES_FP4);
            scale_block(values, q, e8m0_to_f32_half(block.e));
        }
    }
}

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

kernel! {
    /// `quantize_row_q4_0_ref`: `d = max / -8` (`max` the first value of largest magnitude, NaN never
    /// counting), `q = min(15, (int8_t)(x / d + 8.5))` stored as `uint8_t`, value `l` in the low
    /// nibble of byte `l` and value `l + 16` shifted into its high nibble (C's `xi0 | xi1 << 4` in a
    /// byte: an out-of-range `xi0` keeps its high bits, as in ggml).
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn quantize_q4_0(_t: Avx2, values: &[f32], blocks: &mut [BlockQ4_0]) {
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
            let pair =
                |lo, hi| _mm256_and_si256(_mm256_or_si256(lo, _mm256_slli_epi32::<4>(hi)), byte);
            let words = _mm256_packus_epi32(pair(l0, l2), pair(l1, l3));
            let bytes = _mm256_packus_epi16(words, words);
            let bytes =
                _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 0, 0, 0, 0));
            // SAFETY: `qs` holds sixteen bytes; `storeu` has no alignment requirement.
            unsafe {
                _mm_storeu_si128(block.qs.as_mut_ptr().cast(), _mm256_castsi256_si128(bytes))
            };
        }
    }

    /// `quantize_row_q5_0_ref`: `d = max / -16` (`max` the first value of largest magnitude, NaN never
    /// counting), `q = min(31, (int8_t)(x / d + 16.5))`, four low bits in `qs`, the fifth in `qh`.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn quantize_q5_0(_t: Avx2, values: &[f32], blocks: &mut [BlockQ5_0]) {
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
}
