//! The float primitives that ggml's C reference kernels use, with C's exact semantics, for `no_std`.
//!
//! `core` has no `sqrtf`, `roundf` or `round_ties_even`, and Rust's float-to-int `as` saturates where
//! C (as compiled by GCC for x86-64) wraps through `cvttss2si`. Every helper here reproduces what the
//! C code does bit for bit, for every input (including NaN, infinities and huge values), so a port
//! written with them gives ggml's bytes.

/// ggml's `nearest_int`: adds 1.5·2²³ and reads the low mantissa bits, which rounds to nearest with
/// ties to even for |x| ≤ 4194303. Outside that range the same bit trick gives the same (meaningless)
/// value as in C, rather than a saturated one.
#[inline(always)]
pub(crate) fn nearest_int(x: f32) -> i32 {
    let shifted = x + 12_582_912.0;
    (shifted.to_bits() as i32 & 0x007f_ffff) - 0x0040_0000
}

/// C's `(int)x` for a float as GCC compiles it on x86-64 (`cvttss2si`): truncation toward zero, and
/// `i32::MIN` for NaN and out-of-range values. Narrower casts (`(int8_t)x`, `(uint8_t)x`) take the low
/// bits of this result, which is what `as i8` / `as u8` on the returned `i32` do.
#[inline(always)]
pub(crate) fn c_cast_i32(x: f32) -> i32 {
    if (-2_147_483_648.0..2_147_483_648.0).contains(&x) {
        x as i32
    } else {
        i32::MIN
    }
}

/// [`c_cast_i32`] of each value. When every `|x| < 2^22` it rounds with [`nearest_int`]'s bit trick
/// and steps back toward zero where that went past `x`, which LLVM vectorizes; any other input takes
/// the scalar form, so every input gives exactly [`c_cast_i32`]'s result.
#[inline(always)]
pub(crate) fn c_cast_i32_each<const N: usize>(x: &[f32; N]) -> [i32; N] {
    const MAGIC: f32 = 12_582_912.0;
    let mut out = [0i32; N];
    let small = x.iter().fold(true, |all, &v| all & (v.abs() < 4_194_304.0));
    if !small {
        for (o, &v) in out.iter_mut().zip(x) {
            *o = c_cast_i32(v);
        }
        return out;
    }
    for (o, &v) in out.iter_mut().zip(x) {
        let shifted = v + MAGIC;
        let nearest = (shifted.to_bits() as i32 & 0x007f_ffff) - 0x0040_0000;
        let rounded = shifted - MAGIC;
        *o = nearest - i32::from(rounded > v && v > 0.0) + i32::from(rounded < v && v < 0.0);
    }
    out
}

/// The first value of largest magnitude and that magnitude, as ggml's scan
/// `if (amax < fabsf(x)) { amax = fabsf(x); max = x; }` from `amax = max = 0` finds them: NaNs never
/// win, and all zeros or NaNs give `(0, 0)`.
///
/// The scan's branch on every value is slow; instead the largest magnitude is an integer maximum
/// over the magnitudes' bits (ordered like the values for non-NaN floats), which LLVM vectorizes,
/// and `max` is the first value with that magnitude.
#[inline(always)]
pub(crate) fn first_largest_magnitude(x: &[f32]) -> (f32, f32) {
    let mut top = 0u32;
    for &v in x {
        let bits = v.to_bits() & 0x7fff_ffff;
        // A NaN's magnitude bits are above infinity's; it must count as never larger.
        let bits = if bits > 0x7f80_0000 { 0 } else { bits };
        top = top.max(bits);
    }
    if top == 0 {
        return (0.0, 0.0);
    }
    let max = x
        .iter()
        .copied()
        .find(|v| v.to_bits() & 0x7fff_ffff == top)
        .unwrap_or(0.0);
    (max, f32::from_bits(top))
}

/// C's `roundf`: round to nearest, ties away from zero.
#[inline(always)]
pub(crate) fn round_half_away(x: f32) -> f32 {
    // At or above 2^23 every float is an integer; NaN and infinities pass through too.
    if x.is_nan() || x.abs() >= 8_388_608.0 {
        return x;
    }
    let truncated = x as i32 as f32;
    // Exact: both are within 2^23 of each other and share the exponent range.
    let fraction = x - truncated;
    let rounded = if fraction >= 0.5 {
        truncated + 1.0
    } else if fraction <= -0.5 {
        truncated - 1.0
    } else {
        truncated
    };
    rounded.copysign(x)
}

/// C's `fabsf`: clears the sign bit (NaN payloads are kept).
#[inline(always)]
pub(crate) fn fabsf(x: f32) -> f32 {
    f32::from_bits(x.to_bits() & 0x7fff_ffff)
}

/// `(int)roundf(x)` as GCC compiles it on x86-64: [`c_cast_i32`] of [`round_half_away`], in a
/// branchless form: truncate, then step away from zero when the dropped fraction is at least one
/// half.
#[inline(always)]
pub(crate) fn c_round_i32(x: f32) -> i32 {
    let in_range = (-2_147_483_648.0..2_147_483_648.0).contains(&x);
    let truncated = x as i32;
    // Exact: below 2^23 the fraction of x is representable, and from 2^23 on x is an integer.
    let fraction = x - truncated as f32;
    // Out of range the step may wrap; that result is discarded below.
    let rounded = truncated
        .wrapping_add(i32::from(fraction >= 0.5))
        .wrapping_sub(i32::from(fraction <= -0.5));
    if in_range {
        rounded
    } else {
        i32::MIN
    }
}

/// [`c_round_i32`] of each value. When every `|x| < 2^22` (the quantizers' normal case) it takes
/// [`nearest_int`]'s bit trick, which rounds ties to even, and moves each tie that went toward zero
/// one step away: only float adds, compares and integer ops, which LLVM vectorizes. Any other input
/// takes the scalar form, so every input gives exactly [`c_round_i32`]'s result.
#[inline(always)]
pub(crate) fn c_round_i32_each<const N: usize>(x: &[f32; N]) -> [i32; N] {
    const MAGIC: f32 = 12_582_912.0;
    let mut out = [0i32; N];
    let small = x.iter().fold(true, |all, &v| all & (v.abs() < 4_194_304.0));
    if !small {
        for (o, &v) in out.iter_mut().zip(x) {
            *o = c_round_i32(v);
        }
        return out;
    }
    for (o, &v) in out.iter_mut().zip(x) {
        let shifted = v + MAGIC;
        let even = (shifted.to_bits() as i32 & 0x007f_ffff) - 0x0040_0000;
        // Exact: the rounded value and the difference (at most 1/2) are representable.
        let dropped = v - (shifted - MAGIC);
        *o = even + i32::from(dropped == 0.5 && v > 0.0) - i32::from(dropped == -0.5 && v < 0.0);
    }
    out
}

/// glibc's `lroundf` on x86-64: `roundf` converted to `long`; NaN, infinities and values beyond the
/// `long` range give `i64::MIN` (the conversion's "integer indefinite" value).
#[inline(always)]
pub(crate) fn lroundf(x: f32) -> i64 {
    let r = round_half_away(x);
    if (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&r) {
        r as i64
    } else {
        i64::MIN
    }
}

/// C's `MAX(a, b)` macro: `a > b ? a : b` (so a NaN in `a` is dropped, a NaN in `b` is kept).
#[inline(always)]
pub(crate) fn c_max(a: f32, b: f32) -> f32 {
    if a > b {
        a
    } else {
        b
    }
}

/// Correctly rounded square root (IEEE `sqrtf`), computed with integers so it needs no libm.
pub(crate) fn sqrt(x: f32) -> f32 {
    if x.is_nan() || x == 0.0 || x == f32::INFINITY {
        return x;
    }
    if x < 0.0 {
        return f32::NAN;
    }
    let bits = x.to_bits();
    let exponent_bits = (bits >> 23) as i32;
    let fraction_bits = bits & 0x007f_ffff;
    // x = mantissa * 2^exponent with the mantissa an integer in [2^23, 2^24).
    let (mut mantissa, mut exponent) = if exponent_bits == 0 {
        let shift = fraction_bits.leading_zeros() as i32 - 8;
        (fraction_bits << shift, -149 - shift)
    } else {
        (fraction_bits | 0x0080_0000, exponent_bits - 150)
    };
    if exponent & 1 != 0 {
        mantissa <<= 1;
        exponent -= 1;
    }
    // sqrt(x) = sqrt(mantissa * 2^26) * 2^((exponent - 26) / 2); the integer root has 25-26 bits.
    let radicand = u64::from(mantissa) << 26;
    let (root, remainder) = integer_sqrt(radicand);
    // One extra bit below the root marks an inexact root, so the u64 -> f32 conversion (round to
    // nearest even) rounds exactly as the real square root would.
    let with_sticky = (root << 1) | u64::from(remainder != 0);
    let scale_exponent = (exponent - 26) / 2 - 1;
    // scale_exponent is within [-100, 38]: 2^scale_exponent is a normal float and the product exact.
    let scale = f32::from_bits(((scale_exponent + 127) as u32) << 23);
    with_sticky as f32 * scale
}

/// Floor of the square root of `n` (digit by digit) and the remainder `n - root²`.
fn integer_sqrt(n: u64) -> (u64, u64) {
    let mut remainder = n;
    let mut root = 0u64;
    let mut bit = 1u64 << 62;
    while bit > n {
        bit >>= 2;
    }
    while bit != 0 {
        if remainder >= root + bit {
            remainder -= root + bit;
            root = (root >> 1) + bit;
        } else {
            root >>= 1;
        }
        bit >>= 2;
    }
    (root, remainder)
}

/// `ggml_compute_fp32_to_bf16`: round to nearest even on the top 16 bits; a NaN keeps its sign and
/// top payload bits and is made quiet.
#[inline(always)]
pub(crate) fn f32_to_bf16_bits(x: f32) -> u16 {
    let bits = x.to_bits();
    if bits & 0x7fff_ffff > 0x7f80_0000 {
        return ((bits >> 16) | 0x0040) as u16;
    }
    let rounding = 0x7fff + ((bits >> 16) & 1);
    (bits.wrapping_add(rounding) >> 16) as u16
}

/// bf16 to f32: the bf16 bits are the top half of the f32.
#[inline(always)]
pub(crate) fn bf16_bits_to_f32(bits: u16) -> f32 {
    f32::from_bits(u32::from(bits) << 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lroundf_and_casts_follow_x86_for_undefined_inputs() {
        assert_eq!(lroundf(-1.5), -2);
        assert_eq!(lroundf(0.49), 0);
        assert_eq!(lroundf(f32::NAN), i64::MIN);
        assert_eq!(lroundf(f32::INFINITY), i64::MIN);
        assert_eq!(lroundf(1e19), i64::MIN);
        assert_eq!(c_cast_i32(-1.9), -1);
        assert_eq!(c_cast_i32(f32::NAN), i32::MIN);
        assert_eq!(c_cast_i32(3e9), i32::MIN);
        assert_eq!(fabsf(-0.0).to_bits(), 0);
    }

    #[test]
    fn blockwise_and_branchless_casts_match_the_scalar_forms() {
        let mut bits = Bits(0x9e37_79b9_7f4a_7c15);
        let specials = [
            0.0f32,
            -0.0,
            0.5,
            -0.5,
            1.5,
            -1.5,
            2.5,
            -2.5,
            0.499_999_97,
            -0.499_999_97,
            8_388_607.5,
            -8_388_607.5,
            8_388_608.0,
            2_147_483_520.0,
            -2_147_483_648.0,
            2_147_483_648.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            f32::MIN_POSITIVE,
            127.5,
            -127.5,
        ];
        let random = (0..1_000_000).map(|_| f32::from_bits(bits.next()));
        // Small magnitudes, where the fraction matters most.
        let small = (0..1_000_000).map(|i| (i as f32 - 500_000.0) / 1024.0);
        let all: std::vec::Vec<f32> = specials.into_iter().chain(random).chain(small).collect();
        for &x in &all {
            let expected = c_cast_i32(round_half_away(x));
            assert_eq!(c_round_i32(x), expected, "{x:e} ({:#010x})", x.to_bits());
        }
        // The blockwise form, on blocks that take the fast path (all small) and blocks that do not.
        for block in all.chunks_exact(32) {
            let block: [f32; 32] = core::array::from_fn(|i| block[i]);
            let scaled = block.map(|v| v * 1e-3);
            for b in [block, scaled] {
                assert_eq!(c_round_i32_each(&b), b.map(c_round_i32), "{b:?}");
                assert_eq!(c_cast_i32_each(&b), b.map(c_cast_i32), "{b:?}");
            }
        }
    }

    #[test]
    fn first_largest_magnitude_matches_the_scan() {
        fn scan(x: &[f32]) -> (f32, f32) {
            let (mut max, mut amax) = (0.0f32, 0.0f32);
            for &v in x {
                if amax < v.abs() {
                    amax = v.abs();
                    max = v;
                }
            }
            (max, amax)
        }
        let mut bits = Bits(0x1234_5678_9abc_def0);
        let pool = [
            0.0f32,
            -0.0,
            1.0,
            -1.0,
            2.0,
            -2.0,
            f32::NAN,
            -f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1e-45,
            -1e-45,
            3.5,
            -3.5,
        ];
        for len in [0usize, 1, 2, 7, 32] {
            for _ in 0..20_000 {
                let x: std::vec::Vec<f32> = (0..len)
                    .map(|_| match bits.next() % 3 {
                        0 => pool[bits.next() as usize % pool.len()],
                        1 => f32::from_bits(bits.next()),
                        _ => (bits.next() % 7) as f32 - 3.0,
                    })
                    .collect();
                let (a, b) = (first_largest_magnitude(&x), scan(&x));
                assert_eq!(
                    (a.0.to_bits(), a.1.to_bits()),
                    (b.0.to_bits(), b.1.to_bits()),
                    "{x:?}"
                );
            }
        }
    }

    /// A small deterministic generator for bit patterns (xorshift64*).
    struct Bits(u64);
    impl Bits {
        fn next(&mut self) -> u32 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32
        }
    }

    #[test]
    fn nearest_int_rounds_ties_to_even() {
        assert_eq!(nearest_int(2.5), 2);
        assert_eq!(nearest_int(3.5), 4);
        assert_eq!(nearest_int(-2.5), -2);
        assert_eq!(nearest_int(-0.5), 0);
        assert_eq!(nearest_int(0.49999997), 0);
        assert_eq!(nearest_int(-7.6), -8);
        assert_eq!(nearest_int(4_194_303.0), 4_194_303);
        assert_eq!(nearest_int(-4_194_303.0), -4_194_303);
    }

    #[test]
    fn nearest_int_of_nan_and_infinity_follow_the_bit_trick() {
        // inf + 1.5*2^23 = inf: mantissa 0, so the result is -0x400000, not a saturated value.
        assert_eq!(nearest_int(f32::INFINITY), -0x0040_0000);
        assert_eq!(nearest_int(f32::NEG_INFINITY), -0x0040_0000);
    }

    #[test]
    fn c_cast_truncates_and_gives_int_min_out_of_range() {
        assert_eq!(c_cast_i32(16.99), 16);
        assert_eq!(c_cast_i32(-0.99), 0);
        assert_eq!(c_cast_i32(-3.5), -3);
        assert_eq!(c_cast_i32(f32::NAN), i32::MIN);
        assert_eq!(c_cast_i32(3e9), i32::MIN);
        assert_eq!(c_cast_i32(-3e9), i32::MIN);
        assert_eq!(c_cast_i32(-2_147_483_648.0), i32::MIN);
        assert_eq!(c_cast_i32(2_147_483_520.0), 2_147_483_520);
    }

    #[test]
    fn round_half_away_matches_roundf() {
        let cases = [
            (0.5, 1.0),
            (-0.5, -1.0),
            (1.5, 2.0),
            (2.5, 3.0),
            (-2.5, -3.0),
            (0.49999997, 0.0),
            (126.49999, 126.0),
            (8_388_607.5, 8_388_608.0),
            (1e10, 1e10),
        ];
        for (x, want) in cases {
            assert_eq!(round_half_away(x), want, "roundf({x})");
        }
        assert!(round_half_away(-0.3).is_sign_negative());
        assert!(round_half_away(f32::NAN).is_nan());
        assert_eq!(round_half_away(f32::NEG_INFINITY), f32::NEG_INFINITY);
    }

    #[test]
    fn sqrt_is_correctly_rounded() {
        extern crate std;
        let mut bits = Bits(0x9e37_79b9_7f4a_7c15);
        for _ in 0..200_000 {
            let x = f32::from_bits(bits.next() & 0x7fff_ffff);
            let want = std::primitive::f32::sqrt(x);
            let got = sqrt(x);
            assert!(
                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                "sqrt({x:e}) = {got:e}, want {want:e}"
            );
        }
        for sub in (1..0x0080_0000u32).step_by(997) {
            let x = f32::from_bits(sub);
            assert_eq!(sqrt(x), std::primitive::f32::sqrt(x));
        }
        assert_eq!(sqrt(4.0), 2.0);
        assert!(sqrt(-0.0).is_sign_negative());
        assert!(sqrt(-1.0).is_nan());
        assert_eq!(sqrt(f32::INFINITY), f32::INFINITY);
    }

    #[test]
    fn bf16_rounds_to_even_and_quiets_nan() {
        assert_eq!(f32_to_bf16_bits(f32::from_bits(0x3f80_8000)), 0x3f80);
        assert_eq!(f32_to_bf16_bits(f32::from_bits(0x3f81_8000)), 0x3f82);
        assert_eq!(f32_to_bf16_bits(f32::from_bits(0x3f80_8001)), 0x3f81);
        assert_eq!(f32_to_bf16_bits(f32::from_bits(0x7f7f_ffff)), 0x7f80);
        assert_eq!(f32_to_bf16_bits(f32::from_bits(0x7f80_0001)), 0x7fc0);
        assert_eq!(f32_to_bf16_bits(f32::from_bits(0xff81_0000)), 0xffc1);
        assert_eq!(bf16_bits_to_f32(0x3fc0), 1.5);
    }
}
