//! The C float operations that ggml's reference kernels rely on, reproduced bit for bit with `core`
//! alone: `core` has no `fabsf`, `roundf`, `lroundf` or `floorf` on every target, and we want no
//! libm. Where C leaves a result undefined (a NaN or out-of-range float converted to an integer),
//! these return what ggml's x86-64 build does, so the bytes match the reference build we compare
//! against.
//!
//! Shared by the `iq` and `misc` families.

use crate::quant::cast;

/// `fabsf`: clears the sign bit (NaN payloads are kept).
#[inline(always)]
pub(in crate::quant) fn fabsf(x: f32) -> f32 {
    f32::from_bits(x.to_bits() & 0x7fff_ffff)
}

/// `copysignf`: the magnitude of `magnitude` with the sign of `sign`.
#[inline(always)]
fn copysignf(magnitude: f32, sign: f32) -> f32 {
    f32::from_bits((magnitude.to_bits() & 0x7fff_ffff) | (sign.to_bits() & 0x8000_0000))
}

/// ggml's `MAX(a, b)` macro, `a > b ? a : b`: when either is NaN it yields `b`.
#[inline(always)]
pub(in crate::quant) fn c_max(a: f32, b: f32) -> f32 {
    if a > b {
        a
    } else {
        b
    }
}

/// ggml's `nearest_int`: adding 1.5·2^23 leaves the rounded integer in the low mantissa bits, which
/// rounds ties to even for |x| ≤ 2^22 - 1. Outside that range (and for NaN) the same bit arithmetic
/// runs, as in C, so it never panics.
#[inline(always)]
pub(in crate::quant) fn nearest_int(x: f32) -> i32 {
    let bits = (x + 12_582_912.0).to_bits() as i32;
    (bits & 0x007f_ffff) - 0x0040_0000
}

/// `GGML_FP32_TO_FP16` as little-endian bytes: round to nearest even, and every NaN becomes the quiet
/// NaN 0x7E00 with the input's sign (the `half` crate would keep part of the payload).
#[inline(always)]
pub(in crate::quant) fn f16_bytes(x: f32) -> [u8; 2] {
    if x.is_nan() {
        let sign = ((x.to_bits() >> 16) & 0x8000) as u16;
        (sign | 0x7e00).to_le_bytes()
    } else {
        cast::f16_to_le(x)
    }
}

/// C's `(int)x` as x86-64 executes it (`cvttss2si`): truncation toward zero, and `i32::MIN` (the
/// "integer indefinite" value) for NaN and values outside the `int` range.
#[inline(always)]
pub(in crate::quant) fn trunc_to_int(x: f32) -> i32 {
    if (-2_147_483_648.0..2_147_483_648.0).contains(&x) {
        x as i32
    } else {
        i32::MIN
    }
}

/// `roundf`: the nearest integer, ties away from zero, keeping the sign of zero.
#[inline(always)]
pub(in crate::quant) fn roundf(x: f32) -> f32 {
    let ax = fabsf(x);
    // From 2^23 on every float is an integer; infinities and NaN come back unchanged.
    if ax.is_nan() || ax >= 8_388_608.0 {
        return x;
    }
    // `ax as u32` truncates; `ax - whole` is exact because both lie in the same or adjacent binades.
    let whole = ax as u32 as f32;
    let rounded = if ax - whole >= 0.5 {
        whole + 1.0
    } else {
        whole
    };
    copysignf(rounded, x)
}

/// glibc's `lroundf` on x86-64: `roundf` converted to `long`; NaN, infinities and values beyond the
/// `long` range give `i64::MIN` (the conversion's "integer indefinite" value).
#[inline(always)]
pub(in crate::quant) fn lroundf(x: f32) -> i64 {
    let r = roundf(x);
    if (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&r) {
        r as i64
    } else {
        i64::MIN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_int_rounds_ties_to_even() {
        // 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -2.5 -> -2: what ties-to-even gives, unlike `f32::round`.
        assert_eq!(nearest_int(0.5), 0);
        assert_eq!(nearest_int(1.5), 2);
        assert_eq!(nearest_int(2.5), 2);
        assert_eq!(nearest_int(-2.5), -2);
        assert_eq!(nearest_int(-3.7), -4);
        assert_eq!(nearest_int(31.49), 31);
        // NaN: the sum is NaN (0x7fc00000), whose low mantissa bits are 0x400000 -> 0.
        assert_eq!(nearest_int(f32::NAN), 0);
    }

    #[test]
    fn roundf_ties_away_from_zero() {
        assert_eq!(roundf(0.5), 1.0);
        assert_eq!(roundf(2.5), 3.0);
        assert_eq!(roundf(-2.5), -3.0);
        assert_eq!(roundf(0.49999997), 0.0);
        assert_eq!(roundf(-0.3).to_bits(), (-0.0f32).to_bits());
        assert_eq!(roundf(8_388_609.0), 8_388_609.0);
        assert!(roundf(f32::NAN).is_nan());
        assert_eq!(roundf(f32::NEG_INFINITY), f32::NEG_INFINITY);
    }

    #[test]
    fn lroundf_and_trunc_follow_x86_for_undefined_inputs() {
        assert_eq!(lroundf(-1.5), -2);
        assert_eq!(lroundf(0.49), 0);
        assert_eq!(lroundf(f32::NAN), i64::MIN);
        assert_eq!(lroundf(f32::INFINITY), i64::MIN);
        assert_eq!(lroundf(1e19), i64::MIN);
        assert_eq!(trunc_to_int(-1.9), -1);
        assert_eq!(trunc_to_int(f32::NAN), i32::MIN);
        assert_eq!(trunc_to_int(3e9), i32::MIN);
        assert_eq!(trunc_to_int(-2_147_483_648.0), i32::MIN);
    }

    #[test]
    fn f16_bytes_canonicalises_nan() {
        assert_eq!(f16_bytes(f32::from_bits(0x7fff_ffff)), [0x00, 0x7e]);
        assert_eq!(f16_bytes(f32::from_bits(0xff80_0001)), [0x00, 0xfe]);
        // 1.0 = 0x3c00; 65520 overflows to +inf (0x7c00) under round to nearest even.
        assert_eq!(f16_bytes(1.0), [0x00, 0x3c]);
        assert_eq!(f16_bytes(65520.0), [0x00, 0x7c]);
        assert_eq!(fabsf(-0.0).to_bits(), 0);
        assert_eq!(c_max(f32::NAN, 1.0), 1.0);
        assert!(c_max(1.0, f32::NAN).is_nan());
    }
}
