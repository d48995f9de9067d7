//! Tensor data of big-endian GGUF files, turned into the layout the kernels read.
//!
//! The kernels read ggml's blocks as a little-endian file stores them. A big-endian file (written by
//! gguf-py's `gguf-convert-endian`, the tool that defines the format) stores instead:
//! - F32, F16, BF16, F64, I16, I32, I64: every element byte-swapped (I8 is one byte);
//! - Q4_0 and Q8_0: the f16 scale `d` (bytes 0..2 of each block) swapped, the quants as they are;
//! - Q4_K: `d` and `dmin` (bytes 0..2 and 2..4) swapped, the packed 6-bit scales and the quants as
//!   they are;
//! - Q6_K: `d` (bytes 208..210) swapped, the quants and the i8 scales as they are;
//! - MXFP4 and NVFP4: nothing (every field is one byte).
//!
//! `gguf-convert-endian` refuses every other type, so no big-endian layout of them exists; here they
//! are [`Error::Unsupported`] with [`Op::FromBigEndian`]. (The tool itself converts only F32, F16 and
//! BF16 of the plain types; the others follow the same per-element rule as numpy's `byteswap`.)

use crate::error::{Error, Op, Result};
use crate::ggml_type::GgmlType;

/// What turns one big-endian block (or element) of a type into its little-endian form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Swap {
    /// Reverse every element of this many bytes.
    Elements(usize),
    /// Swap the two bytes of each 16-bit field starting at these offsets within a block.
    Fields16(&'static [usize]),
}

const fn swap_of(t: GgmlType) -> Option<Swap> {
    use GgmlType::*;
    Some(match t {
        F32 | I32 => Swap::Elements(4),
        F16 | BF16 | I16 => Swap::Elements(2),
        F64 | I64 => Swap::Elements(8),
        I8 | MXFP4 | NVFP4 => Swap::Fields16(&[]),
        Q4_0 | Q8_0 => Swap::Fields16(&[0]),
        Q4_K => Swap::Fields16(&[0, 2]),
        Q6_K => Swap::Fields16(&[208]),
        _ => return None,
    })
}

/// Whether big-endian data of type `t` has a defined layout (see the module docs).
pub const fn big_endian_layout_known(t: GgmlType) -> bool {
    swap_of(t).is_some()
}

/// Turns `data`, whole blocks of type `t` as a big-endian file stores them, into the layout the
/// kernels read, in place. Applying it twice gives the input back.
///
/// # Errors
/// [`Error::Unsupported`] for a type without a big-endian layout, [`Error::PartialBlock`] if
/// `data` is not whole blocks.
pub fn big_endian_to_native_in_place(t: GgmlType, data: &mut [u8]) -> Result<()> {
    let swap = swap_of(t).ok_or(Error::Unsupported {
        ggml_type: t,
        op: Op::FromBigEndian,
    })?;
    let block_bytes = t.block_bytes() as usize;
    if block_bytes == 0 || data.len() % block_bytes != 0 {
        return Err(Error::PartialBlock {
            ggml_type: t,
            len: data.len() as u64,
        });
    }
    match swap {
        Swap::Elements(width) => data.chunks_exact_mut(width).for_each(<[u8]>::reverse),
        Swap::Fields16(&[]) => {}
        Swap::Fields16(fields) => {
            for block in data.chunks_exact_mut(block_bytes) {
                for &at in fields {
                    if let Some(field) = block.get_mut(at..at + 2) {
                        field.swap(0, 1);
                    }
                }
            }
        }
    }
    Ok(())
}

/// Like [`big_endian_to_native_in_place`], from `src` into `dst` (of the same length).
///
/// # Errors
/// As [`big_endian_to_native_in_place`], and [`Error::LengthMismatch`] if the lengths differ.
pub fn big_endian_to_native(t: GgmlType, src: &[u8], dst: &mut [u8]) -> Result<()> {
    if src.len() != dst.len() {
        return Err(Error::LengthMismatch {
            expected: src.len() as u64,
            found: dst.len() as u64,
        });
    }
    if !big_endian_layout_known(t) {
        return Err(Error::Unsupported {
            ggml_type: t,
            op: Op::FromBigEndian,
        });
    }
    dst.copy_from_slice(src);
    big_endian_to_native_in_place(t, dst)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::dequantize;

    #[test]
    fn f32_elements_are_swapped() {
        let values = [0.0f32, 1.5, -63.0, f32::MIN_POSITIVE];
        let big: std::vec::Vec<u8> = values.iter().flat_map(|v| v.to_be_bytes()).collect();
        let mut native = [0u8; 16];
        big_endian_to_native(GgmlType::F32, &big, &mut native).unwrap();
        let mut out = [0f32; 4];
        dequantize(GgmlType::F32, &native, &mut out).unwrap();
        assert_eq!(out, values);
    }

    #[test]
    fn i64_and_i16_elements_are_swapped() {
        let mut data = std::vec::Vec::new();
        data.extend_from_slice(&(-2i64).to_be_bytes());
        big_endian_to_native_in_place(GgmlType::I64, &mut data).unwrap();
        assert_eq!(data, (-2i64).to_le_bytes());
        let mut data = 0x1234i16.to_be_bytes();
        big_endian_to_native_in_place(GgmlType::I16, &mut data).unwrap();
        assert_eq!(data, 0x1234i16.to_le_bytes());
    }

    /// A Q8_0 block with a big-endian scale of 0.5 and quants 0..32 dequantizes to 0, 0.5, ...
    #[test]
    fn q8_0_scale_is_swapped_and_quants_kept() {
        let mut block = [0u8; 34];
        block[..2].copy_from_slice(&half::f16::from_f32(0.5).to_bits().to_be_bytes());
        for (i, q) in block[2..].iter_mut().enumerate() {
            *q = i as u8;
        }
        let mut native = [0u8; 34];
        big_endian_to_native(GgmlType::Q8_0, &block, &mut native).unwrap();
        let mut out = [0f32; 32];
        dequantize(GgmlType::Q8_0, &native, &mut out).unwrap();
        for (i, v) in out.iter().enumerate() {
            assert_eq!(*v, i as f32 * 0.5);
        }
    }

    /// Q6_K's scale is at the end of its block: bytes 208 and 209 swap, nothing else moves.
    #[test]
    fn q6_k_swaps_only_its_trailing_scale() {
        let big: std::vec::Vec<u8> = (0..210u32).map(|i| i as u8).collect();
        let mut native = std::vec![0u8; 210];
        big_endian_to_native(GgmlType::Q6_K, &big, &mut native).unwrap();
        for (i, (b, n)) in big.iter().zip(&native).enumerate() {
            match i {
                208 => assert_eq!(*n, big[209]),
                209 => assert_eq!(*n, big[208]),
                _ => assert_eq!(n, b, "byte {i}"),
            }
        }
    }

    #[test]
    fn types_without_a_big_endian_layout_are_refused() {
        for t in [
            GgmlType::Q4_1,
            GgmlType::Q5_K,
            GgmlType::IQ4_NL,
            GgmlType::Q8_K,
        ] {
            let bytes = t.block_bytes() as usize;
            let src = std::vec![0u8; bytes];
            let mut dst = std::vec![0u8; bytes];
            let e = big_endian_to_native(t, &src, &mut dst).unwrap_err();
            assert_eq!(
                e,
                Error::Unsupported {
                    ggml_type: t,
                    op: Op::FromBigEndian
                }
            );
        }
    }

    #[test]
    fn partial_blocks_and_length_mismatches_are_errors() {
        let mut data = [0u8; 35];
        assert_eq!(
            big_endian_to_native_in_place(GgmlType::Q8_0, &mut data),
            Err(Error::PartialBlock {
                ggml_type: GgmlType::Q8_0,
                len: 35
            })
        );
        assert_eq!(
            big_endian_to_native(GgmlType::F32, &[0; 8], &mut [0; 4]),
            Err(Error::LengthMismatch {
                expected: 8,
                found: 4
            })
        );
    }
}
