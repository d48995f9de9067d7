//! AVX-512 VNNI kernels (`vpdpbusd` on 256-bit vectors through AVX-512 VL): four u8·i8 products
//! summed into each i32 lane in one instruction, without saturation. Signed weights are biased to
//! unsigned (`w + 128`, or the raw nibble) and the bias times the activation sum, taken the same
//! way, is subtracted: exact for every byte value. Q4_K/Q5_K quants are read four same-lane
//! elements to a 32-bit lane (`lane_groups`), so one `vpdpbusd` gives a sub-block's eight lane
//! sums and one `vpdpwssd` scales a pair of them. The float steps are the AVX2 kernels'.

use core::arch::asm;
use core::arch::x86_64::*;

use super::avx2::{
    dot_q6_k, dot_with_mins_unprepared, f16_le, f16x8, hsum_i32, load32, q4_0_nibbles, q4_k_parts,
    q5_k_parts, q6_k_activation_group, transpose_sums,
};
use crate::quant::activation::{BlockQ8K, BlockQ8_0};
use crate::quant::k_quants::{BlockQ3K, BlockQ4K, BlockQ5K, BlockQ6K};
use crate::quant::legacy::BlockQ4_0;

/// `vpdpbusd acc, a, b`: `acc[i] += Σ_{j<4} a[4i+j] (u8) · b[4i+j] (i8)`, no saturation.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) fn dpbusd(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
    _mm256_dpbusd_epi32(acc, a, b)
}

/// `lane_groups` by one `vpermb` (AVX-512 VBMI).
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vbmi")]
pub(super) fn lane_groups_vbmi(v: __m256i) -> __m256i {
    const ORDER: [u8; 32] = {
        let mut order = [0u8; 32];
        let mut i = 0;
        while i < 32 {
            order[i] = (i / 4 + 8 * (i % 4)) as u8;
            i += 1;
        }
        order
    };
    // SAFETY: `ORDER` is 32 bytes; `loadu` has no alignment requirement.
    let order = unsafe { _mm256_loadu_si256(ORDER.as_ptr().cast()) };
    _mm256_permutexvar_epi8(order, v)
}

/// One sub-block pair of a Q4_K/Q5_K block in [`lane_groups`](super::avx2::lane_groups) order:
/// `acc[m] += s_a·Σ q_a·x_a + s_b·Σ q_b·x_b` over lane `m`'s four elements of each sub-block,
/// `(s_a, s_b)` the i16 pair in every 32-bit element of `scales`. Each `vpdpbusd` sum is at most
/// 4·31·128 < 2^15 in magnitude, so the two fit one i16 pair for `vpdpwssd`: exact.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) fn grouped_pair(
    acc: __m256i,
    [q_a, q_b]: [__m256i; 2],
    [x_a, x_b]: [__m256i; 2],
    scales: __m256i,
) -> __m256i {
    let zero = _mm256_setzero_si256();
    let a = dpbusd(zero, q_a, x_a);
    let b = dpbusd(zero, q_b, x_b);
    let pairs = _mm256_blend_epi16::<0b1010_1010>(a, _mm256_slli_epi32::<16>(b));
    dpwssd(acc, pairs, scales)
}

/// `vpdpwssd acc, a, b`: `acc[i] += a[2i]·b[2i] + a[2i+1]·b[2i+1]` (i16 products, wrapping i32
/// sum: `madd` then `add`, in one instruction). Through `asm!`, not the intrinsic: under the
/// generic tuning of a plain build LLVM turns each `vpdpwssd` after the first of a chain back
/// into `vpmaddwd` + `vpaddd`.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) fn dpwssd(mut acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
    // SAFETY: one register-only instruction of an enabled feature (AVX-512 VNNI, VL); it touches
    // no memory, stack or flags.
    unsafe {
        asm!(
            "vpdpwssd {acc}, {a}, {b}",
            acc = inout(ymm_reg) acc,
            a = in(ymm_reg) a,
            b = in(ymm_reg) b,
            options(pure, nomem, nostack, preserves_flags),
        )
    };
    acc
}

/// [`dpwssd`] through the intrinsic, for Q6_K: there a native build folds each scale broadcast
/// into it as a memory operand, and even the split LLVM makes of it in a plain build is not slower
/// there.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) fn dpwssd_foldable(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
    _mm256_dpwssd_epi32(acc, a, b)
}

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
