//! AVX-512 VNNI kernels (`vpdpbusd` on 256-bit vectors through AVX-512 VL): four u8·i8 products
//! summed into each i32 lane in one instruction, without saturation. Signed weights are biased to
//! unsigned (`w + 128`, or the raw nibble) and the bias times the activation sum, taken the same
//! way, is subtracted: exact for every byte value. Q4_K/Q5_K quants are read four same-lane
//! elements to a 32-bit lane (`lane_groups`), so one `vpdpbusd` gives a sub-block's eight lane
//! sums and one `vpdpwssd` scales a pair of them. The float steps are the AVX2 kernels'.

use core::arch::x86_64::*;

use super::primitives::dpbusd;

use super::avx2::{
    dot_q6_k, dot_with_mins_unprepared, q4_0_nibbles, q4_k_parts, q5_k_parts, q6_k_activation_group,
};
use super::vector::{f16_le, f16x8, hsum_i32, load32, transpose_sums};
use crate::quant::activation::{BlockQ8K, BlockQ8_0};
use crate::quant::k_quants::{BlockQ3K, BlockQ4K, BlockQ5K, BlockQ6K};
use crate::quant::legacy::BlockQ4_0;

/// Σ w·x over 32 signed bytes each, as eight i32 partial sums: Σ (w + 128)·x − Σ 128·x.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn dot_i8x32(w: &[i8; 32], x: &[i8; 32]) -> __m256i {
    let bias = _mm256_set1_epi8(-128);
    let x = load32(x);
    let biased = _mm256_xor_si256(load32(w), bias);
    let zero = _mm256_setzero_si256();
    _mm256_sub_epi32(dpbusd(zero, biased, x), dpbusd(zero, bias, x))
}

/// Σ (q − 8)·y over a Q4_0 block: Σ q·y − Σ 8·y.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn dot_q4_0(qs: &[u8; 16], y: &[i8; 32]) -> __m256i {
    let y = load32(y);
    let zero = _mm256_setzero_si256();
    _mm256_sub_epi32(
        dpbusd(zero, q4_0_nibbles(qs), y),
        dpbusd(zero, _mm256_set1_epi8(8), y),
    )
}

/// The legacy dot shared by Q8_0 and Q4_0: eight blocks' integer sums at a time, their float
/// products formed side by side by `products`, then added to `sumf` in block order.
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn legacy_dot<W>(
    w: &[W],
    x: &[BlockQ8_0],
    block: impl Fn(&W, &BlockQ8_0) -> (__m256i, [u8; 2]),
    products: impl Fn(__m256, __m256, __m256) -> __m256,
    tail: impl Fn(i32, f32, f32) -> f32,
) -> f32 {
    let mut sumf = 0.0f32;
    let mut w8 = w.chunks_exact(8);
    let mut x8 = x.chunks_exact(8);
    for (wc, xc) in (&mut w8).zip(&mut x8) {
        let mut partial = [_mm256_setzero_si256(); 8];
        let mut dw = [[0u8; 2]; 8];
        let mut dx = [[0u8; 2]; 8];
        let slots = partial.iter_mut().zip(&mut dw).zip(&mut dx);
        for (((p, dw), dx), (wb, xb)) in slots.zip(wc.iter().zip(xc)) {
            (*p, *dw) = block(wb, xb);
            *dx = xb.d;
        }
        let sumi = _mm256_cvtepi32_ps(transpose_sums(&partial));
        let lanes_vec = products(sumi, f16x8(&dw), f16x8(&dx));
        let mut lanes = [0.0f32; 8];
        // SAFETY: `lanes` holds eight f32; `storeu` has no alignment requirement.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), lanes_vec) };
        for p in lanes {
            sumf += p;
        }
    }
    for (wb, xb) in w8.remainder().iter().zip(x8.remainder()) {
        let (partial, dw) = block(wb, xb);
        sumf += tail(hsum_i32(partial), f16_le(dw), f16_le(xb.d));
    }
    sumf
}

#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn vec_dot_q8_0_impl(w: &[BlockQ8_0], x: &[BlockQ8_0]) -> f32 {
    legacy_dot(
        w,
        x,
        // Closures inherit the function's target features.
        |wb, xb| (dot_i8x32(&wb.qs, &xb.qs), wb.d),
        // `sumi * (dx * dy)`, the scalar order.
        |sumi, dw, dx| _mm256_mul_ps(sumi, _mm256_mul_ps(dw, dx)),
        |sumi, dw, dx| sumi as f32 * (dw * dx),
    )
}

/// `ggml_vec_dot_q8_0_q8_0_generic` with VNNI integer sums.
pub(super) fn vec_dot_q8_0(w: &[BlockQ8_0], x: &[BlockQ8_0]) -> f32 {
    // SAFETY: the table only hands this kernel out for an available AVX-512 VNNI level (`pick!`
    // checks `Level::is_available`: avx2, f16c, avx512f/bw/vl and avx512vnni).
    unsafe { vec_dot_q8_0_impl(w, x) }
}

#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn vec_dot_q4_0_impl(w: &[BlockQ4_0], x: &[BlockQ8_0]) -> f32 {
    legacy_dot(
        w,
        x,
        |wb, xb| (dot_q4_0(&wb.qs, &xb.qs), wb.d),
        // `(sumi * dx) * dy`, the scalar order.
        |sumi, dw, dx| _mm256_mul_ps(_mm256_mul_ps(sumi, dw), dx),
        |sumi, dw, dx| sumi as f32 * dw * dx,
    )
}

/// `ggml_vec_dot_q4_0_q8_0_generic` with VNNI integer sums.
pub(super) fn vec_dot_q4_0(w: &[BlockQ4_0], x: &[BlockQ8_0]) -> f32 {
    // SAFETY: as `vec_dot_q8_0`.
    unsafe { vec_dot_q4_0_impl(w, x) }
}

/// A VNNI K-quant vec_dot entry: `$body` compiled twice, with the const `$vbmi` false and, in a
/// function that also enables AVX-512 VBMI, true; the second runs where `vbmi()` finds VBMI.
macro_rules! k_vec_dot_entry {
    ($(#[$doc:meta])* $name:ident($w:ty), |$wv:ident, $xv:ident, $vbmi:ident| $body:expr) => {
        $(#[$doc])*
        pub(super) fn $name($wv: &[$w], $xv: &[BlockQ8K]) -> f32 {
            #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
            fn without_vbmi($wv: &[$w], $xv: &[BlockQ8K]) -> f32 {
                const $vbmi: bool = false;
                $body
            }
            #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
            fn with_vbmi($wv: &[$w], $xv: &[BlockQ8K]) -> f32 {
                const $vbmi: bool = true;
                $body
            }
            if super::vbmi() {
                // SAFETY: the table hands this kernel out only for an available AVX-512 VNNI
                // level (`pick!`), and `vbmi()` found AVX-512 VBMI too.
                unsafe { with_vbmi($wv, $xv) }
            } else {
                // SAFETY: as `vec_dot_q8_0`.
                unsafe { without_vbmi($wv, $xv) }
            }
        }
    };
}

k_vec_dot_entry!(
    /// `ggml_vec_dot_q4_K_q8_K_generic` over `lane_groups` (`vpdpbusd` sums, `vpdpwssd` scales).
    vec_dot_q4_k(BlockQ4K),
    |w, x, VBMI| dot_with_mins_unprepared::<true, VBMI, _>(w, x, q4_k_parts)
);
k_vec_dot_entry!(
    /// `ggml_vec_dot_q5_K_q8_K_generic` over `lane_groups` (`vpdpbusd` sums, `vpdpwssd` scales).
    vec_dot_q5_k(BlockQ5K),
    |w, x, VBMI| dot_with_mins_unprepared::<true, VBMI, _>(w, x, q5_k_parts)
);
k_vec_dot_entry!(
    /// `ggml_vec_dot_q6_K_q8_K_generic` with `vpdpwssd` scale products.
    vec_dot_q6_k(BlockQ6K),
    |w, x, VBMI| dot_q6_k::<true, VBMI, _>(w, x, x, |xb, g| {
        q6_k_activation_group::<VBMI>(&xb.qs, g)
    })
);
k_vec_dot_entry!(
    /// `ggml_vec_dot_q3_K_q8_K_generic` at AVX-512 VNNI (scale products by `vpdpwssd`).
    vec_dot_q3_k(BlockQ3K),
    |w, x, VBMI| super::q3_k::dot::<true, VBMI, _>(w, x, x, |xb, g| {
        super::q3_k::activation_group::<VBMI>(&xb.qs, g)
    })
);
