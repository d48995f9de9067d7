//! Zero-copy views of byte slices as block slices.
//!
//! Every block type is `#[repr(C)]` with alignment 1 (f16 fields are kept as `[u8; 2]`), so any
//! `&[u8]` whose length is a whole number of blocks is a valid `&[Block]`, at any address.

use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;

/// A block of a ggml type: plain bytes, alignment 1, any bit pattern valid.
pub trait Block: bytemuck::Pod {
    /// The type this block belongs to.
    const TYPE: GgmlType;
}

/// Views `bytes` as blocks of `B`, or fails if the length is not a whole number of blocks.
pub fn blocks<B: Block>(bytes: &[u8]) -> Result<&[B]> {
    bytemuck::try_cast_slice(bytes).map_err(|_| Error::PartialBlock {
        ggml_type: B::TYPE,
        len: bytes.len() as u64,
    })
}

/// Views `bytes` as mutable blocks of `B`, or fails if the length is not a whole number of blocks.
pub fn blocks_mut<B: Block>(bytes: &mut [u8]) -> Result<&mut [B]> {
    let len = bytes.len() as u64;
    bytemuck::try_cast_slice_mut(bytes).map_err(|_| Error::PartialBlock {
        ggml_type: B::TYPE,
        len,
    })
}

/// The crate's one f16 decoder (SIMD kernels use the conversion instruction with these bits, each
/// tested against it). Reads a little-endian IEEE half stored as two bytes: exact, with NaNs made
/// quiet (payload kept), as the `half` crate and the F16C / AArch64 conversion instructions do.
#[inline(always)]
pub fn f16_le(bytes: [u8; 2]) -> f32 {
    f16_bits_to_f32(u16::from_le_bytes(bytes))
}

/// Where the target has a conversion instruction, `half` uses it.
#[cfg(target_feature = "f16c")]
#[inline(always)]
fn f16_bits_to_f32(bits: u16) -> f32 {
    half::f16::from_bits(bits).to_f32()
}

/// Without one, a branchless form: `half`'s portable path branches per value, which costs more than
/// the whole conversion in the kernels that read a scale every 32 values.
#[cfg(not(target_feature = "f16c"))]
#[inline(always)]
fn f16_bits_to_f32(bits: u16) -> f32 {
    /// 2^112: moves a half's exponent bias (15) to f32's (127).
    const REBIAS: f32 = f32::from_bits(0x7780_0000);
    let bits = u32::from(bits);
    let sign = (bits & 0x8000) << 16;
    let magnitude = bits & 0x7fff;
    // Exponent and mantissa shifted into f32's fields read as 2^-112 times the half's value (a
    // subnormal half lands on an f32 subnormal), so one exact multiplication rescales both normals
    // and subnormals.
    let finite = (f32::from_bits(magnitude << 13) * REBIAS).to_bits();
    let special = 0x7f80_0000 | ((magnitude & 0x03ff) << 13) | u32::from(magnitude > 0x7c00) << 22;
    let magnitude = if magnitude >= 0x7c00 { special } else { finite };
    f32::from_bits(sign | magnitude)
}

/// The crate's one f16 encoder, ggml's `GGML_FP32_TO_FP16`, as little-endian bytes: round to
/// nearest even, overflow to infinity, and every NaN becomes the quiet NaN `0x7E00` with the
/// input's sign (ggml's scalar rule; its payload is not kept, unlike the decoder's).
#[inline(always)]
pub fn f16_to_le(x: f32) -> [u8; 2] {
    f32_to_f16_bits(x).to_le_bytes()
}

/// [`f16_to_le`]'s bits.
#[inline(always)]
pub(crate) fn f32_to_f16_bits(x: f32) -> u16 {
    if x.is_nan() {
        ((x.to_bits() >> 16) as u16 & 0x8000) | 0x7e00
    } else {
        half::f16::from_f32(x).to_bits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_rounds_to_even_and_canonicalises_nan() {
        // 1 + 2^-11 is halfway between 1 and the next f16 (1 + 2^-10): ties to even gives 1.
        assert_eq!(f32_to_f16_bits(1.0 + 1.0 / 2048.0), 0x3c00);
        // 1 + 3*2^-11 is halfway between 1+2^-10 and 1+2^-9: ties to even gives 1+2^-9 (0x3c02).
        assert_eq!(f32_to_f16_bits(1.0 + 3.0 / 2048.0), 0x3c02);
        assert_eq!(f32_to_f16_bits(65520.0), 0x7c00);
        assert_eq!(f32_to_f16_bits(f32::from_bits(0x7f80_0001)), 0x7e00);
        assert_eq!(f32_to_f16_bits(f32::from_bits(0xffc1_2345)), 0xfe00);
        assert_eq!(f32_to_f16_bits(-0.0), 0x8000);
        assert_eq!(f16_to_le(f32::from_bits(0xff80_0001)), [0x00, 0xfe]);
        assert_eq!(f16_to_le(65520.0), [0x00, 0x7c]);
    }

    #[test]
    fn f16_conversion_matches_half_for_every_bit_pattern() {
        for bits in 0..=u16::MAX {
            let expected = half::f16::from_bits(bits).to_f32().to_bits();
            let found = f16_le(bits.to_le_bytes()).to_bits();
            assert_eq!(found, expected, "f16 {bits:#06x}");
        }
    }
}
