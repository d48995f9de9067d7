//! ggml's data check (`ggml_validate_row_data`, which llama.cpp runs on every tensor it loads when
//! asked to check tensors): which stored values or block scales are not finite.
//!
//! The rules are ggml's, type by type: every F32, F16, BF16 and F64 value must be finite (an F64
//! value as an f32: ggml converts it first, so values beyond f32's range fail too); a
//! quantized block's f16 scales (`d`, and `m` / `dmin` where the type has one; IQ1_M's scale spread
//! over its scale words; Q8_K's f32 `d`) must be finite; an MXFP4 block's shared exponent must not
//! be 0xFF. NVFP4 and the integer types have nothing to check. Q8_1, an activation format only,
//! is refused by ggml's function whatever its bytes ([`Problem::NotValidated`]).
//!
//! Each type has a scalar checker over its borrowed blocks that stops at the first bad block, as
//! ggml does. The float types are scanned a chunk at a time with a branch-free OR over the
//! exponent bits, written so that the compiler can vectorize it, and only a chunk with a hit is
//! searched value by value.

use super::activation::{BlockQ8K, BlockQ8_0};
use super::cast::{blocks, Block};
use super::iq::{
    iq1_m::BlockIq1M, iq1_s::BlockIq1S, iq2_s::BlockIq2S, iq2_xs::BlockIq2Xs, iq2_xxs::BlockIq2Xxs,
    iq3_s::BlockIq3S, iq3_xxs::BlockIq3Xxs, iq4_nl::BlockIq4Nl, iq4_xs::BlockIq4Xs,
};
use super::k_quants::{BlockQ2K, BlockQ3K, BlockQ4K, BlockQ5K, BlockQ6K};
use super::legacy::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1};
use super::misc::{
    mxfp4::BlockMxfp4, q1_0::BlockQ1_0, q2_0::BlockQ2_0, tq1_0::BlockTq1_0, tq2_0::BlockTq2_0,
};
use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;

/// What is wrong with a value or a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Problem {
    /// An infinite value or scale.
    Inf,
    /// A NaN value or scale.
    Nan,
    /// An MXFP4 shared exponent of 0xFF (E8M0's NaN).
    NanExponent,
    /// An F64 value beyond f32's range: ggml checks F64 values after converting them to f32, where
    /// they become infinite.
    BeyondF32,
    /// A type ggml's function refuses whatever the data (Q8_1: an activation format, never stored).
    NotValidated,
}

impl Problem {
    /// A few words for messages: "NaN", "infinite", ...
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Inf => "infinite",
            Self::Nan => "NaN",
            Self::NanExponent => "0xFF (NaN)",
            Self::BeyondF32 => "beyond f32's range (ggml checks F64 values as f32)",
            Self::NotValidated => "not checked by ggml (it refuses the type)",
        }
    }
}

/// The first bad value or block of some data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Invalid {
    /// Index of the block (of the value, for the float types, whose blocks are single values).
    pub block: usize,
    /// The field that holds the bad number: `"value"`, `"d"`, `"m"`, `"dmin"`, `"scale"` or `"e"`.
    pub field: &'static str,
    /// What is wrong with it.
    pub problem: Problem,
}

/// Checks `data` (whole blocks of type `t`, little-endian as the kernels read them) by ggml's
/// rules: `Ok(None)` if ggml's `ggml_validate_row_data` accepts it, else the first bad block.
///
/// # Errors
/// [`Error::PartialBlock`] if `data` is not a whole number of blocks.
pub fn first_invalid(t: GgmlType, data: &[u8]) -> Result<Option<Invalid>> {
    use GgmlType::*;
    let partial = || Error::PartialBlock {
        ggml_type: t,
        len: data.len() as u64,
    };
    if !data.len().is_multiple_of(t.block_bytes() as usize) {
        return Err(partial());
    }
    Ok(match t {
        F32 => f32_values(data),
        F16 => f16_values(data),
        BF16 => bf16_values(data),
        F64 => f64_values(data),
        I8 | I16 | I32 | I64 | NVFP4 => None,
        // Refused even when empty: ggml's switch has no case for it.
        Q8_1 => Some(Invalid {
            block: 0,
            field: "type",
            problem: Problem::NotValidated,
        }),
        Q4_0 => scan::<BlockQ4_0>(data, |b| f16_field(b.d, "d"))?,
        Q4_1 => scan::<BlockQ4_1>(data, |b| f16_pair(b.d, "d", b.m, "m"))?,
        Q5_0 => scan::<BlockQ5_0>(data, |b| f16_field(b.d, "d"))?,
        Q5_1 => scan::<BlockQ5_1>(data, |b| f16_pair(b.d, "d", b.m, "m"))?,
        Q8_0 => scan::<BlockQ8_0>(data, |b| f16_field(b.d, "d"))?,
        Q1_0 => scan::<BlockQ1_0>(data, |b| f16_field(b.d, "d"))?,
        Q2_0 => scan::<BlockQ2_0>(data, |b| f16_field(b.d, "d"))?,
        MXFP4 => scan::<BlockMxfp4>(data, |b| {
            (b.e == 0xff).then_some(("e", Problem::NanExponent))
        })?,
        Q2_K => scan::<BlockQ2K>(data, |b| f16_pair(b.d, "d", b.dmin, "dmin"))?,
        Q3_K => scan::<BlockQ3K>(data, |b| f16_field(b.d, "d"))?,
        Q4_K => scan::<BlockQ4K>(data, |b| f16_pair(b.d, "d", b.dmin, "dmin"))?,
        Q5_K => scan::<BlockQ5K>(data, |b| f16_pair(b.d, "d", b.dmin, "dmin"))?,
        Q6_K => scan::<BlockQ6K>(data, |b| f16_field(b.d, "d"))?,
        Q8_K => scan::<BlockQ8K>(data, |b| {
            f32_problem(u32::from_le_bytes(b.d)).map(|p| ("d", p))
        })?,
        TQ1_0 => scan::<BlockTq1_0>(data, |b| f16_field(b.d, "d"))?,
        TQ2_0 => scan::<BlockTq2_0>(data, |b| f16_field(b.d, "d"))?,
        IQ1_S => scan::<BlockIq1S>(data, |b| f16_field(b.d, "d"))?,
        IQ1_M => scan::<BlockIq1M>(data, |b| f16_field(iq1_m_scale(b), "scale"))?,
        IQ2_XXS => scan::<BlockIq2Xxs>(data, |b| f16_field(b.d, "d"))?,
        IQ2_XS => scan::<BlockIq2Xs>(data, |b| f16_field(b.d, "d"))?,
        IQ2_S => scan::<BlockIq2S>(data, |b| f16_field(b.d, "d"))?,
        IQ3_XXS => scan::<BlockIq3Xxs>(data, |b| f16_field(b.d, "d"))?,
        IQ3_S => scan::<BlockIq3S>(data, |b| f16_field(b.d, "d"))?,
        IQ4_XS => scan::<BlockIq4Xs>(data, |b| f16_field(b.d, "d"))?,
        IQ4_NL => scan::<BlockIq4Nl>(data, |b| f16_field(b.d, "d"))?,
    })
}

/// The first block of `data` for which `check` names a bad field.
fn scan<B: Block>(
    data: &[u8],
    check: impl Fn(&B) -> Option<(&'static str, Problem)>,
) -> Result<Option<Invalid>> {
    Ok(blocks::<B>(data)?
        .iter()
        .enumerate()
        .find_map(|(block, b)| {
            check(b).map(|(field, problem)| Invalid {
                block,
                field,
                problem,
            })
        }))
}

/// An IEEE half's problem (exponent all ones: infinite with a zero mantissa, else NaN).
#[inline(always)]
const fn f16_problem(bits: u16) -> Option<Problem> {
    if bits & 0x7c00 != 0x7c00 {
        None
    } else if bits & 0x03ff == 0 {
        Some(Problem::Inf)
    } else {
        Some(Problem::Nan)
    }
}

#[inline(always)]
const fn f32_problem(bits: u32) -> Option<Problem> {
    if bits & 0x7f80_0000 != 0x7f80_0000 {
        None
    } else if bits & 0x007f_ffff == 0 {
        Some(Problem::Inf)
    } else {
        Some(Problem::Nan)
    }
}

fn f16_field(le: [u8; 2], name: &'static str) -> Option<(&'static str, Problem)> {
    f16_problem(u16::from_le_bytes(le)).map(|p| (name, p))
}

/// ggml checks `d` first, then the second scale.
fn f16_pair(
    d: [u8; 2],
    d_name: &'static str,
    m: [u8; 2],
    m_name: &'static str,
) -> Option<(&'static str, Problem)> {
    f16_field(d, d_name).or_else(|| f16_field(m, m_name))
}

/// IQ1_M's f16 scale: the top nibble of each of its four u16 scale words, first word lowest.
fn iq1_m_scale(b: &BlockIq1M) -> [u8; 2] {
    let [s0, s1, s2, s3] = b.scales.map(u16::from_le_bytes);
    ((s0 >> 12) | ((s1 >> 8) & 0x00f0) | ((s2 >> 4) & 0x0f00) | (s3 & 0xf000)).to_le_bytes()
}

/// Values per chunk of the float scans: big enough for the compiler to vectorize the OR, small
/// enough that the search inside a chunk with a hit costs nothing.
const CHUNK: usize = 64;

/// The first value of `data` (`W` little-endian bytes each) for which `problem` names one. A chunk
/// is first tested with one OR of `is_special` over every value, without a branch per value.
fn first_special<const W: usize>(
    data: &[u8],
    is_special: impl Fn([u8; W]) -> bool,
    problem: impl Fn([u8; W]) -> Option<Problem>,
) -> Option<Invalid> {
    // `data` is whole values (the caller checked): the remainder is empty.
    let (values, _) = data.as_chunks::<W>();
    values
        .chunks(CHUNK)
        .enumerate()
        .find_map(|(chunk, values)| {
            if !values.iter().fold(false, |any, &v| any | is_special(v)) {
                return None;
            }
            values.iter().enumerate().find_map(|(i, &v)| {
                problem(v).map(|problem| Invalid {
                    block: chunk * CHUNK + i,
                    field: "value",
                    problem,
                })
            })
        })
}

fn f32_values(data: &[u8]) -> Option<Invalid> {
    let bits = u32::from_le_bytes;
    first_special::<4>(
        data,
        |v| bits(v) & 0x7f80_0000 == 0x7f80_0000,
        |v| f32_problem(bits(v)),
    )
}

fn f16_values(data: &[u8]) -> Option<Invalid> {
    let bits = u16::from_le_bytes;
    first_special::<2>(
        data,
        |v| bits(v) & 0x7c00 == 0x7c00,
        |v| f16_problem(bits(v)),
    )
}

/// BF16 is the top half of an f32. (ggml counts the NaNs and infinities of the whole row and
/// names NaN first; the verdict is the same: any one fails.)
fn bf16_values(data: &[u8]) -> Option<Invalid> {
    let bits = |v: [u8; 2]| u32::from(u16::from_le_bytes(v)) << 16;
    first_special::<2>(
        data,
        |v| bits(v) & 0x7f80_0000 == 0x7f80_0000,
        |v| f32_problem(bits(v)),
    )
}

fn f64_values(data: &[u8]) -> Option<Invalid> {
    let value = f64::from_le_bytes;
    // A value whose f32 is infinite or NaN: every NaN and infinity, and finite values from about
    // 3.4e38 up (the conversion rounds them to infinity), which ggml refuses too.
    first_special::<8>(
        data,
        |v| f32_problem((value(v) as f32).to_bits()).is_some(),
        |v| {
            let v = value(v);
            match f32_problem((v as f32).to_bits()) {
                Some(_) if v.is_finite() => Some(Problem::BeyondF32),
                other => other,
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(block: usize, field: &'static str, problem: Problem) -> Option<Invalid> {
        Some(Invalid {
            block,
            field,
            problem,
        })
    }

    #[test]
    fn floats_report_the_first_non_finite_value() {
        let mut data = [0u8; 4 * 200];
        assert_eq!(first_invalid(GgmlType::F32, &data), Ok(None));
        data[4 * 150..4 * 151].copy_from_slice(&f32::NAN.to_le_bytes());
        data[4 * 170..4 * 171].copy_from_slice(&f32::INFINITY.to_le_bytes());
        assert_eq!(
            first_invalid(GgmlType::F32, &data),
            Ok(at(150, "value", Problem::Nan))
        );
        data[4 * 3..4 * 4].copy_from_slice(&f32::NEG_INFINITY.to_le_bytes());
        assert_eq!(
            first_invalid(GgmlType::F32, &data),
            Ok(at(3, "value", Problem::Inf))
        );
        // The largest finite value is not special.
        let max = f32::MAX.to_le_bytes().repeat(3);
        assert_eq!(first_invalid(GgmlType::F32, &max), Ok(None));
    }

    #[test]
    fn every_half_and_bfloat_pattern_is_judged_like_its_f32() {
        for bits in 0..=u16::MAX {
            let le = bits.to_le_bytes();
            let expected = |x: f32| {
                if x.is_nan() {
                    at(0, "value", Problem::Nan)
                } else if x.is_infinite() {
                    at(0, "value", Problem::Inf)
                } else {
                    None
                }
            };
            let half = half::f16::from_bits(bits).to_f32();
            assert_eq!(
                first_invalid(GgmlType::F16, &le),
                Ok(expected(half)),
                "{bits:#x}"
            );
            let bf = f32::from_bits(u32::from(bits) << 16);
            assert_eq!(
                first_invalid(GgmlType::BF16, &le),
                Ok(expected(bf)),
                "{bits:#x}"
            );
        }
    }

    #[test]
    fn f64_values_are_checked() {
        let mut data = [0u8; 8 * 3];
        data[8..16].copy_from_slice(&f64::NEG_INFINITY.to_le_bytes());
        assert_eq!(
            first_invalid(GgmlType::F64, &data),
            Ok(at(1, "value", Problem::Inf))
        );
        data[0..8].copy_from_slice(&f64::NAN.to_le_bytes());
        assert_eq!(
            first_invalid(GgmlType::F64, &data),
            Ok(at(0, "value", Problem::Nan))
        );
        // ggml converts F64 values to f32 before checking them.
        let mut big = [0u8; 16];
        big[..8].copy_from_slice(&f64::from(f32::MAX).to_le_bytes());
        assert_eq!(first_invalid(GgmlType::F64, &big), Ok(None));
        big[8..].copy_from_slice(&1e39f64.to_le_bytes());
        assert_eq!(
            first_invalid(GgmlType::F64, &big),
            Ok(at(1, "value", Problem::BeyondF32))
        );
    }

    #[test]
    fn scales_are_found_where_each_layout_keeps_them() {
        let nan = 0x7e00u16.to_le_bytes();
        let inf = 0xfc00u16.to_le_bytes();
        // (type, byte offset of the checked f16 in a block, its name)
        let cases = [
            (GgmlType::Q4_0, 0, "d"),
            (GgmlType::Q4_1, 2, "m"),
            (GgmlType::Q5_1, 0, "d"),
            (GgmlType::Q2_K, 80, "d"),
            (GgmlType::Q2_K, 82, "dmin"),
            (GgmlType::Q3_K, 108, "d"),
            (GgmlType::Q4_K, 2, "dmin"),
            (GgmlType::Q6_K, 208, "d"),
            (GgmlType::TQ1_0, 52, "d"),
            (GgmlType::TQ2_0, 64, "d"),
            (GgmlType::IQ4_XS, 0, "d"),
        ];
        for (t, offset, field) in cases {
            let size = t.block_bytes() as usize;
            let mut data = [0u8; 4 * 256];
            let data = &mut data[..3 * size];
            assert_eq!(first_invalid(t, data), Ok(None), "{t}");
            data[2 * size + offset..][..2].copy_from_slice(&inf);
            assert_eq!(
                first_invalid(t, data),
                Ok(at(2, field, Problem::Inf)),
                "{t}"
            );
            data[size + offset..][..2].copy_from_slice(&nan);
            assert_eq!(
                first_invalid(t, data),
                Ok(at(1, field, Problem::Nan)),
                "{t}"
            );
        }
    }

    #[test]
    fn odd_scales_and_exponents() {
        // IQ1_M: the scale's nibbles are the top nibbles of the four scale words (bytes 48..56).
        let mut iq1_m = [0u8; 56];
        for word in iq1_m[48..].chunks_exact_mut(2) {
            word[1] = 0x70; // nibble 7 in every word: 0x7777, a finite half
        }
        assert_eq!(first_invalid(GgmlType::IQ1_M, &iq1_m), Ok(None));
        iq1_m[49] = 0xc0; // lowest nibble 0xc: 0x777c, still finite
        assert_eq!(first_invalid(GgmlType::IQ1_M, &iq1_m), Ok(None));
        iq1_m[55] = 0xf0;
        iq1_m[53] = 0xc0; // 0xfc7c: exponent all ones, mantissa non-zero
        assert_eq!(
            first_invalid(GgmlType::IQ1_M, &iq1_m),
            Ok(at(0, "scale", Problem::Nan))
        );
        // MXFP4: exponent 0xFF.
        let mut mxfp4 = [0u8; 17 * 2];
        mxfp4[17] = 0xfe;
        assert_eq!(first_invalid(GgmlType::MXFP4, &mxfp4), Ok(None));
        mxfp4[17] = 0xff;
        assert_eq!(
            first_invalid(GgmlType::MXFP4, &mxfp4),
            Ok(at(1, "e", Problem::NanExponent))
        );
        // Q8_K: an f32 scale.
        let mut q8_k = [0u8; 292];
        q8_k[..4].copy_from_slice(&f32::INFINITY.to_le_bytes());
        assert_eq!(
            first_invalid(GgmlType::Q8_K, &q8_k),
            Ok(at(0, "d", Problem::Inf))
        );
        // NVFP4's scales are all valid; Q8_1 is refused; partial blocks are errors.
        assert_eq!(first_invalid(GgmlType::NVFP4, &[0xff; 36]), Ok(None));
        assert_eq!(
            first_invalid(GgmlType::Q8_1, &[0; 36]),
            Ok(at(0, "type", Problem::NotValidated))
        );
        assert!(first_invalid(GgmlType::Q8_0, &[0; 35]).is_err());
    }
}
