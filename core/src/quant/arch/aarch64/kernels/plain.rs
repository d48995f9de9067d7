//! The plain float types F32, F16 and BF16 with NEON: dequantize (exact conversions: `fcvtl` for
//! halves, a 16-bit shift for bfloat16) and vec_dot in ggml's scalar order, each product in f32,
//! widened to f64 and added one element after the other, rounded to f32 once. The vector work is
//! the conversions and the products; the f64 sum stays serial, as the canonical order requires.

use super::ops::{f16_le, load_u8, store_f32};
use crate::quant::legacy::plain::{BlockBf16, BlockF16, BlockF32};
use core::arch::aarch64::*;
use core::arch::asm;

/// Eight halves to two vectors of f32 with `fcvtl` / `fcvtl2`: exact, NaNs made quiet with their
/// payload kept, as [`f16_le`] (the scalar twin's conversion).
#[inline]
#[target_feature(enable = "neon")]
fn halves_to_f32(h: uint8x16_t) -> [float32x4_t; 2] {
    let low: float32x4_t;
    let high: float32x4_t;
    // SAFETY: `fcvtl`/`fcvtl2` are base Advanced SIMD (enabled here) and touch only the named
    // registers; `out` (not `lateout`) keeps `low` apart from `h`, which the second line reads.
    unsafe {
        asm!(
            "fcvtl {low:v}.4s, {h:v}.4h",
            "fcvtl2 {high:v}.4s, {h:v}.8h",
            h = in(vreg) h,
            low = out(vreg) low,
            high = out(vreg) high,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    [low, high]
}

/// Eight bfloat16 values to two vectors of f32 (the bits shifted into the top half: exact).
#[inline]
#[target_feature(enable = "neon")]
fn bf16_to_f32(h: uint8x16_t) -> [float32x4_t; 2] {
    let h = vreinterpretq_u16_u8(h);
    [
        vreinterpretq_f32_u32(vshll_n_u16::<16>(vget_low_u16(h))),
        vreinterpretq_f32_u32(vshll_high_n_u16::<16>(h)),
    ]
}

/// Four f32 from 16 little-endian bytes.
#[inline]
#[target_feature(enable = "neon")]
fn f32_quad(bytes: &[u8]) -> float32x4_t {
    match <&[u8; 16]>::try_from(bytes) {
        Ok(b) => vreinterpretq_f32_u8(load_u8(b)),
        Err(_) => vdupq_n_f32(0.0),
    }
}

/// 16 bytes as a vector (zeros if `bytes` is not 16 long, which the callers' chunking rules out).
#[inline]
#[target_feature(enable = "neon")]
fn bytes16(bytes: &[u8]) -> uint8x16_t {
    match <&[u8; 16]>::try_from(bytes) {
        Ok(b) => load_u8(b),
        Err(_) => vdupq_n_u8(0),
    }
}

/// Stores `v` into `dst` (four values per vector; nothing if the lengths differ).
#[inline]
#[target_feature(enable = "neon")]
fn store(dst: &mut [f32], v: &[float32x4_t]) {
    for (d, &v) in dst.chunks_exact_mut(4).zip(v) {
        if let Ok(d) = <&mut [f32; 4]>::try_from(d) {
            store_f32(d, v);
        }
    }
}

/// `sum += (f64) p[i]` for the four lanes of `p`, in lane order.
#[inline]
#[target_feature(enable = "neon")]
fn add_serially(sum: f64, p: float32x4_t) -> f64 {
    let low = vcvt_f64_f32(vget_low_f32(p));
    let high = vcvt_high_f64_f32(p);
    let mut sum = sum + vgetq_lane_f64::<0>(low);
    sum += vgetq_lane_f64::<1>(low);
    sum += vgetq_lane_f64::<0>(high);
    sum + vgetq_lane_f64::<1>(high)
}

/// Defines a plain type's dequantize and vec_dot from its 8-values-from-16-bytes (or, for F32,
/// 4-values) conversion `$load` and the scalar per-value conversion `$value`.
macro_rules! plain_kernels {
    ($B:ty, $size:literal, $per:literal, $load:expr, $value:expr,
     $deq_neon:ident, $deq:ident, $dot_neon:ident, $dot:ident) => {
        #[target_feature(enable = "neon")]
        fn $deq_neon(blocks: &[$B], out: &mut [f32]) {
            let bytes: &[u8] = bytemuck::cast_slice(blocks);
            let n = blocks.len().min(out.len());
            let (bytes, out) = (
                bytes.get(..n * $size).unwrap_or(&[]),
                out.get_mut(..n).unwrap_or(&mut []),
            );
            let mut src = bytes.chunks_exact(16);
            let mut dst = out.chunks_exact_mut($per);
            for (s, d) in (&mut src).zip(&mut dst) {
                store(d, &$load(s));
            }
            let tail: &[$B] = bytemuck::cast_slice(src.remainder());
            for (b, y) in tail.iter().zip(dst.into_remainder()) {
                *y = $value(*b);
            }
        }

        /// Dequantize with NEON (the scalar twin's bits).
        pub fn $deq(blocks: &[$B], out: &mut [f32]) {
            // SAFETY: this module is compiled only for targets with NEON (quant/arch).
            unsafe { $deq_neon(blocks, out) }
        }

        #[target_feature(enable = "neon")]
        fn $dot_neon(w: &[$B], x: &[$B]) -> f32 {
            let n = w.len().min(x.len());
            let (w, x) = (w.get(..n).unwrap_or(&[]), x.get(..n).unwrap_or(&[]));
            let (wb, xb): (&[u8], &[u8]) = (bytemuck::cast_slice(w), bytemuck::cast_slice(x));
            let mut sum = 0.0f64;
            let (mut ws, mut xs) = (wb.chunks_exact(16), xb.chunks_exact(16));
            for (a, b) in (&mut ws).zip(&mut xs) {
                let (a, b) = ($load(a), $load(b));
                for (&a, &b) in a.iter().zip(&b) {
                    sum = add_serially(sum, vmulq_f32(a, b));
                }
            }
            let (wt, xt): (&[$B], &[$B]) = (
                bytemuck::cast_slice(ws.remainder()),
                bytemuck::cast_slice(xs.remainder()),
            );
            for (&a, &b) in wt.iter().zip(xt) {
                sum += f64::from($value(a) * $value(b));
            }
            sum as f32
        }

        /// vec_dot with NEON (the scalar twin's bits: f32 products, serial f64 sum).
        pub fn $dot(w: &[$B], x: &[$B]) -> f32 {
            // SAFETY: this module is compiled only for targets with NEON (quant/arch).
            unsafe { $dot_neon(w, x) }
        }
    };
}

#[target_feature(enable = "neon")]
fn load_f32(s: &[u8]) -> [float32x4_t; 1] {
    [f32_quad(s)]
}

#[target_feature(enable = "neon")]
fn load_f16(s: &[u8]) -> [float32x4_t; 2] {
    halves_to_f32(bytes16(s))
}

#[target_feature(enable = "neon")]
fn load_bf16(s: &[u8]) -> [float32x4_t; 2] {
    bf16_to_f32(bytes16(s))
}

plain_kernels!(
    BlockF32,
    4,
    4,
    load_f32,
    BlockF32::value,
    f32_deq_neon,
    dequantize_f32,
    f32_dot_neon,
    vec_dot_f32
);
plain_kernels!(
    BlockF16,
    2,
    8,
    load_f16,
    |b: BlockF16| f16_le(b.0),
    f16_deq_neon,
    dequantize_f16,
    f16_dot_neon,
    vec_dot_f16
);
plain_kernels!(
    BlockBf16,
    2,
    8,
    load_bf16,
    BlockBf16::value,
    bf16_deq_neon,
    dequantize_bf16,
    bf16_dot_neon,
    vec_dot_bf16
);
