//! The 4-bit float (E2M1) levels shared by MXFP4 and NVFP4, and their scale encodings: E8M0 (a
//! bare power of two, MXFP4) and UE4M3 (an unsigned 8-bit float, NVFP4). Conversions are exact and
//! built from bits, so they need no libm (`ldexpf`) and give the same bits on every target.

use crate::quant::float::fabsf;

/// `kvalues_mxfp4`: the E2M1 values doubled (0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives become
/// integers); the scale conversions below return half the scale to compensate.
#[rustfmt::skip]
pub(crate) static KVALUES_FP4: [i8; 16] = [
    0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12,
];

/// Level `code` (4 bits) as `i8`.
#[inline(always)]
pub(super) fn fp4_level(code: u8) -> i8 {
    KVALUES_FP4[usize::from(code & 0xf)]
}

/// 2^e for a normal exponent (-126..=127), from its bits.
#[inline(always)]
fn pow2(e: i32) -> f32 {
    f32::from_bits(((e + 127) as u32 & 0xff) << 23)
}

/// `GGML_E8M0_TO_FP32_HALF`: half of the E8M0 scale `2^(x - 127)`, i.e. `2^(x - 128)`. Codes 0
/// and 1 give the subnormals 2^-128 and 2^-127; 255 gives 2^127 (ggml does not treat it as NaN).
#[inline(always)]
pub(crate) fn e8m0_to_f32_half(x: u8) -> f32 {
    if x < 2 {
        f32::from_bits(0x0020_0000 << x)
    } else {
        f32::from_bits(u32::from(x - 1) << 23)
    }
}

/// `ggml_ue4m3_to_fp32`: half the UE4M3 value (4 exponent bits, bias 7, 3 mantissa bits; bit 7 is
/// ignored). Codes 0 and 0x7F (NaN in E4M3) give 0.
#[inline(always)]
pub(super) fn ue4m3_to_f32_half(x: u8) -> f32 {
    if x == 0 || x == 0x7f {
        return 0.0;
    }
    let exp = i32::from((x >> 3) & 0xf);
    let man = i32::from(x & 7);
    if exp == 0 {
        // man · 2^-9, halved.
        man as f32 * pow2(-10)
    } else {
        // (1 + man/8) · 2^(exp-7), halved = (8 + man) · 2^(exp-11).
        (8 + man) as f32 * pow2(exp - 11)
    }
}

/// `ggml_fp32_to_ue4m3`: the UE4M3 code for a positive scale; not positive (or NaN) gives 0.
/// Normal results round half up on the 4th mantissa bit; subnormal ones use `(int)(x·512 + 0.5)`.
/// Everything from 256 up (exponent 15) becomes 0x7E (448), not only values beyond 448.
pub(super) fn f32_to_ue4m3(x: f32) -> u8 {
    if x.is_nan() || x <= 0.0 {
        return 0;
    }
    let x = if x > 448.0 { 448.0 } else { x };
    let bits = x.to_bits();
    let fp32_exp = ((bits >> 23) & 0xff) as i32 - 127;
    let fp32_man = ((bits >> 20) & 7) as i32;
    let mut exp = fp32_exp + 7;
    if exp <= 0 {
        // x < 2^-6 here, so x·512 + 0.5 < 8.5 and the truncating cast is in range.
        let man = ((x * 512.0 + 0.5) as i32).min(7);
        return if man < 1 { 0 } else { man as u8 };
    }
    if exp >= 15 {
        return 0x7e;
    }
    let mut man = fp32_man + ((bits >> 19) & 1) as i32;
    if man > 7 {
        man = 0;
        exp += 1;
        if exp >= 15 {
            return 0x7e;
        }
    }
    ((exp << 3) | man) as u8
}

/// `best_index_mxfp4`: the first level `i` minimising `|level_i · scale - x|` (strictly smaller
/// errors replace the best; a NaN error never does).
pub(super) fn best_index_fp4(x: f32, scale: f32) -> u8 {
    let mut best = 0u8;
    let mut best_err = fabsf(f32::from(KVALUES_FP4[0]) * scale - x);
    for (i, &level) in (0u8..).zip(&KVALUES_FP4).skip(1) {
        let err = fabsf(f32::from(level) * scale - x);
        if err < best_err {
            best = i;
            best_err = err;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e8m0_half_is_a_power_of_two() {
        // 127 is 2^0; half of it is 0.5. 128 -> 1.0, 2 -> 2^-126 (smallest normal), 1 -> 2^-127.
        assert_eq!(e8m0_to_f32_half(127), 0.5);
        assert_eq!(e8m0_to_f32_half(128), 1.0);
        assert_eq!(e8m0_to_f32_half(2), f32::MIN_POSITIVE);
        assert_eq!(e8m0_to_f32_half(1), f32::MIN_POSITIVE / 2.0);
        assert_eq!(e8m0_to_f32_half(0), f32::MIN_POSITIVE / 4.0);
        // Exact powers of two from their bits: `powi` promises no precision (Miri perturbs it).
        assert_eq!(e8m0_to_f32_half(255), f32::from_bits(254 << 23)); // 2^127
    }

    #[test]
    fn ue4m3_decodes_by_hand() {
        // 0x38: exp 7, man 0 -> 1.0, halved 0.5. 0x7E: exp 15, man 6 -> 1.75 · 2^8 = 448, halved 224.
        assert_eq!(ue4m3_to_f32_half(0x38), 0.5);
        assert_eq!(ue4m3_to_f32_half(0x7e), 224.0);
        // 0x01: subnormal 1 · 2^-9, halved 2^-10. 0x7F: NaN code -> 0. Bit 7 ignored: 0xB8 = 0x38.
        assert_eq!(ue4m3_to_f32_half(0x01), f32::from_bits((127 - 10) << 23)); // 2^-10
        assert_eq!(ue4m3_to_f32_half(0x7f), 0.0);
        assert_eq!(ue4m3_to_f32_half(0xb8), 0.5);
    }

    #[test]
    fn ue4m3_encodes_by_hand() {
        assert_eq!(f32_to_ue4m3(1.0), 0x38);
        assert_eq!(f32_to_ue4m3(1000.0), 0x7e);
        assert_eq!(f32_to_ue4m3(f32::INFINITY), 0x7e);
        assert_eq!(f32_to_ue4m3(-1.0), 0);
        assert_eq!(f32_to_ue4m3(f32::NAN), 0);
        // 1.0625 = 1 + 1/16: the round bit (4th mantissa bit) is set -> man 1: 0x39.
        assert_eq!(f32_to_ue4m3(1.0625), 0x39);
        // 1.9375 rounds up into the next binade: exp 8, man 0 = 0x40.
        assert_eq!(f32_to_ue4m3(1.9375), 0x40);
        // Subnormal: 3 · 2^-9 -> man 3.
        assert_eq!(f32_to_ue4m3(3.0 / 512.0), 3);
        assert_eq!(f32_to_ue4m3(0.5 / 512.0), 1);
        assert_eq!(f32_to_ue4m3(0.4 / 512.0), 0);
        // Codes below exponent 15 decode (doubled) and re-encode to themselves. Exponent 15 (256 up
        // to 448) always encodes as 0x7E: ggml saturates as soon as the exponent reaches 15.
        for code in 1u8..0x78 {
            assert_eq!(
                f32_to_ue4m3(2.0 * ue4m3_to_f32_half(code)),
                code,
                "code {code:#x}"
            );
        }
        for code in 0x78u8..0x7f {
            assert_eq!(
                f32_to_ue4m3(2.0 * ue4m3_to_f32_half(code)),
                0x7e,
                "code {code:#x}"
            );
        }
    }

    #[test]
    fn best_index_prefers_the_first_of_equal_errors() {
        // Scale 1: levels 0,1,2,3,4,6,8,12. 5 is 1 from 4 (index 4) and from 6 (index 5): first wins.
        assert_eq!(best_index_fp4(5.0, 1.0), 4);
        assert_eq!(best_index_fp4(-7.1, 1.0), 14);
        // 0 and -0 (index 8) tie: index 0.
        assert_eq!(best_index_fp4(0.0, 1.0), 0);
        assert_eq!(best_index_fp4(f32::NAN, 1.0), 0);
    }
}
