//! GGML quantization kernels over borrowed slices: dequantize, quantize, vec_dot and matvec for every
//! ggml type, in scalar reference form.
//!
//! The scalar kernels follow ggml's C reference (`quantize_row_*_ref`, `dequantize_row_*`,
//! `ggml_vec_dot_*_generic`) operation for operation, unfused and in the same order: their bits are the
//! canonical result, which SIMD kernels must reproduce exactly.
//!
//! Byte slices are viewed as blocks without copying ([`cast`]): every block type has alignment 1, so
//! data at any address (flash, mmap, a network buffer) works. Lengths that are not whole blocks are
//! errors, never panics.
//!
//! The kernels are grouped by family, each with its own dispatcher:
//! - [`legacy`]: F32, F16, BF16, F64, I8..I64 and the 32-element blocks Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1;
//! - [`k_quants`]: the 256-element super-blocks Q2_K..Q8_K;
//! - [`iq`]: the IQ types with their lookup grids;
//! - [`misc`]: TQ1_0, TQ2_0, MXFP4, NVFP4, Q1_0, Q2_0.

pub mod activation;
mod arrays;
mod blockwise;
pub mod byte_order;
pub mod cast;
mod float;
pub mod iq;
pub mod k_quants;
#[cfg(test)]
mod kernel_tests;
pub mod legacy;
pub mod matvec;
pub mod misc;

use crate::error::{Error, Op, Result};
use crate::ggml_type::GgmlType;

/// The family a type's kernels live in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Legacy,
    KQuants,
    Iq,
    Misc,
}

const fn family(t: GgmlType) -> Family {
    use GgmlType::*;
    match t {
        F32 | F16 | BF16 | F64 | I8 | I16 | I32 | I64 | Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 | Q8_1 => {
            Family::Legacy
        }
        Q2_K | Q3_K | Q4_K | Q5_K | Q6_K | Q8_K => Family::KQuants,
        IQ2_XXS | IQ2_XS | IQ3_XXS | IQ1_S | IQ4_NL | IQ3_S | IQ2_S | IQ4_XS | IQ1_M => Family::Iq,
        TQ1_0 | TQ2_0 | MXFP4 | NVFP4 | Q1_0 | Q2_0 => Family::Misc,
    }
}

/// The type that `vec_dot` takes its second operand in (ggml's `type_traits_cpu[t].vec_dot_type`),
/// or `None` if ggml has no vec_dot for `t` (Q8_1, Q8_K and the integer types).
pub const fn vec_dot_type(t: GgmlType) -> Option<GgmlType> {
    use GgmlType::*;
    Some(match t {
        F32 => F32,
        F16 => F16,
        BF16 => BF16,
        Q4_0 | Q5_0 | Q8_0 | IQ4_NL | MXFP4 | NVFP4 | Q1_0 | Q2_0 => Q8_0,
        Q4_1 | Q5_1 => Q8_1,
        Q2_K | Q3_K | Q4_K | Q5_K | Q6_K | IQ2_XXS | IQ2_XS | IQ3_XXS | IQ1_S | IQ3_S | IQ2_S
        | IQ4_XS | IQ1_M | TQ1_0 | TQ2_0 => Q8_K,
        Q8_1 | Q8_K | I8 | I16 | I32 | I64 | F64 => return None,
    })
}

/// Number of elements that `bytes` bytes of type `t` hold, or an error if they are not whole blocks.
pub fn elements_in(t: GgmlType, bytes: usize) -> Result<usize> {
    let block_bytes = t.block_bytes() as usize;
    if bytes % block_bytes != 0 {
        return Err(Error::PartialBlock {
            ggml_type: t,
            len: bytes as u64,
        });
    }
    (bytes / block_bytes)
        .checked_mul(t.block_size() as usize)
        .ok_or(Error::PartialBlock {
            ggml_type: t,
            len: bytes as u64,
        })
}

/// Bytes that `elements` values of type `t` take, or an error if they are not whole blocks.
pub fn bytes_for(t: GgmlType, elements: usize) -> Result<usize> {
    t.bytes_for(elements as u64)
        .and_then(|b| usize::try_from(b).ok())
        .ok_or(Error::PartialBlock {
            ggml_type: t,
            len: elements as u64,
        })
}

/// Dequantizes `src` (whole blocks of type `t`) into `dst`, which must hold exactly the elements.
pub fn dequantize(t: GgmlType, src: &[u8], dst: &mut [f32]) -> Result<()> {
    blockwise::same_len(elements_in(t, src.len())?, dst.len())?;
    match family(t) {
        Family::Legacy => legacy::dequantize(t, src, dst),
        Family::KQuants => k_quants::dequantize(t, src, dst),
        Family::Iq => iq::dequantize(t, src, dst),
        Family::Misc => misc::dequantize(t, src, dst),
    }
}

/// Quantizes `src` into `dst` (whole blocks of type `t`), byte-identical to ggml's
/// `quantize_row_*_ref`. Types whose reference needs an importance matrix give
/// [`Error::Unsupported`].
pub fn quantize(t: GgmlType, src: &[f32], dst: &mut [u8]) -> Result<()> {
    blockwise::same_len(bytes_for(t, src.len())?, dst.len())?;
    match family(t) {
        Family::Legacy => legacy::quantize(t, src, dst),
        Family::KQuants => k_quants::quantize(t, src, dst),
        Family::Iq => iq::quantize(t, src, dst),
        Family::Misc => misc::quantize(t, src, dst),
    }
}

/// Dot product of `w` (whole blocks of type `t`) with `x` (the same number of elements in
/// [`vec_dot_type`]`(t)`), in the float order of `ggml_vec_dot_*_generic`.
pub fn vec_dot(t: GgmlType, w: &[u8], x: &[u8]) -> Result<f32> {
    let vd = vec_dot_type(t).ok_or(Error::Unsupported {
        ggml_type: t,
        op: Op::VecDot,
    })?;
    let n = elements_in(t, w.len())?;
    blockwise::same_len(bytes_for(vd, n)?, x.len())?;
    match family(t) {
        Family::Legacy => legacy::vec_dot(t, w, x),
        Family::KQuants => k_quants::vec_dot(t, w, x),
        Family::Iq => iq::vec_dot(t, w, x),
        Family::Misc => misc::vec_dot(t, w, x),
    }
}
