//! GGML quantization kernels over borrowed slices: dequantize, quantize, vec_dot, matvec and matmul
//! for every ggml type, with SIMD kernels that give the scalar reference's bits.
//!
//! The scalar kernels follow ggml's C reference (`quantize_row_*_ref`, `dequantize_row_*`,
//! `ggml_vec_dot_*_generic`) operation for operation, unfused and in the same order: their bits are the
//! canonical result, which the SIMD kernels (module `arch`) reproduce exactly at every [`Level`].
//!
//! Byte slices are viewed as blocks without copying ([`cast`]): every block type has alignment 1, so
//! data at any address (flash, mmap, a network buffer) works. Lengths that are not whole blocks are
//! errors, never panics.
//!
//! Dispatch: [`table`] lists every block type once, with its scalar kernels and the SIMD overrides
//! per level. The entry points here check lengths once, resolve the type's kernel for the level
//! once (once per matvec, not per row) and run it. [`typed`] is the same API for a block type known
//! at compile time. The scalar kernels are grouped by family:
//! - [`legacy`]: F32, F16, BF16, F64, I8..I64 and the 32-element blocks Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1;
//! - [`k_quants`]: the 256-element super-blocks Q2_K..Q8_K;
//! - [`iq`]: the IQ types with their lookup grids;
//! - [`misc`]: TQ1_0, TQ2_0, MXFP4, NVFP4, Q1_0, Q2_0.

// With a kernel family left out, helpers that only its kernels use are unreferenced: that is the
// point of the features (nothing of theirs is linked), not dead code to remove.
#![cfg_attr(
    not(all(
        feature = "legacy",
        feature = "k-quants",
        feature = "iq",
        feature = "misc"
    )),
    allow(dead_code, unused_imports)
)]

pub mod activation;
pub(crate) mod arch;
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
pub mod level;
pub(crate) mod level_id;
#[cfg(test)]
mod level_tests;
pub mod matvec;
pub mod misc;
pub mod output_columns;
pub mod packed;
pub mod table;
pub mod typed;
pub mod validate;

pub use level::Level;
pub use output_columns::OutputColumns;

use crate::error::{Error, Op, Result};
use crate::ggml_type::GgmlType;
use table::{visit, Kernels, Visitor};
use typed::check_level;

/// The type that `vec_dot` takes its second operand in (ggml's `type_traits_cpu[t].vec_dot_type`),
/// or `None` if ggml has no vec_dot for `t` (Q8_1, Q8_K and the integer types).
pub const fn vec_dot_type(t: GgmlType) -> Option<GgmlType> {
    table::vec_dot_type(t)
}

/// Number of elements that `bytes` bytes of type `t` hold, or an error if they are not whole blocks.
pub fn elements_in(t: GgmlType, bytes: usize) -> Result<usize> {
    let block_bytes = t.block_bytes() as usize;
    if !bytes.is_multiple_of(block_bytes) {
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

/// F64 and the integer types: no block type in the kernel table, only a dequantize (in
/// `legacy::plain`); ggml has no quantizer or vec_dot for them.
const fn is_dequantize_only(t: GgmlType) -> bool {
    use GgmlType::*;
    matches!(t, F64 | I8 | I16 | I32 | I64)
}

fn unsupported(t: GgmlType, op: Op) -> Error {
    Error::Unsupported { ggml_type: t, op }
}

/// Dequantizes `src` (whole blocks of type `t`) into `dst`, which must hold exactly the elements.
pub fn dequantize(t: GgmlType, src: &[u8], dst: &mut [f32]) -> Result<()> {
    dequantize_at(level::current(), t, src, dst)
}

/// [`dequantize`] with the kernels of `level` ([`Error::LevelUnavailable`] if the CPU lacks it).
pub fn dequantize_at(level: Level, t: GgmlType, src: &[u8], dst: &mut [f32]) -> Result<()> {
    struct Run<'a> {
        level: Level,
        src: &'a [u8],
        dst: &'a mut [f32],
    }
    impl Visitor for Run<'_> {
        type Out = Result<()>;
        fn visit<B: Kernels>(self) -> Result<()> {
            typed::dequantize_at::<B>(self.level, self.src, self.dst)
        }
    }
    check_level(level)?;
    blockwise::same_len(elements_in(t, src.len())?, dst.len())?;
    if is_dequantize_only(t) {
        return legacy::plain::dequantize(t, src, dst);
    }
    visit(t, Run { level, src, dst }).unwrap_or(Err(unsupported(t, Op::Dequantize)))
}

/// Quantizes `src` into `dst` (whole blocks of type `t`), byte-identical to ggml's
/// `quantize_row_*_ref`. Types whose reference needs an importance matrix give
/// [`Error::Unsupported`].
pub fn quantize(t: GgmlType, src: &[f32], dst: &mut [u8]) -> Result<()> {
    quantize_at(level::current(), t, src, dst)
}

/// [`quantize`] with the kernels of `level`.
pub fn quantize_at(level: Level, t: GgmlType, src: &[f32], dst: &mut [u8]) -> Result<()> {
    struct Run<'a> {
        level: Level,
        src: &'a [f32],
        dst: &'a mut [u8],
    }
    impl Visitor for Run<'_> {
        type Out = Result<()>;
        fn visit<B: Kernels>(self) -> Result<()> {
            typed::quantize_at::<B>(self.level, self.src, self.dst)
        }
    }
    check_level(level)?;
    blockwise::same_len(bytes_for(t, src.len())?, dst.len())?;
    visit(t, Run { level, src, dst }).unwrap_or(Err(unsupported(t, Op::Quantize)))
}

/// Dot product of `w` (whole blocks of type `t`) with `x` (the same number of elements in
/// [`vec_dot_type`]`(t)`), in the float order of `ggml_vec_dot_*_generic`.
pub fn vec_dot(t: GgmlType, w: &[u8], x: &[u8]) -> Result<f32> {
    vec_dot_at(level::current(), t, w, x)
}

/// [`vec_dot`] with the kernels of `level`.
pub fn vec_dot_at(level: Level, t: GgmlType, w: &[u8], x: &[u8]) -> Result<f32> {
    struct Run<'a> {
        level: Level,
        w: &'a [u8],
        x: &'a [u8],
    }
    impl Visitor for Run<'_> {
        type Out = Result<f32>;
        fn visit<B: Kernels>(self) -> Result<f32> {
            typed::vec_dot_at::<B>(self.level, self.w, self.x)
        }
    }
    check_level(level)?;
    let vd = vec_dot_type(t).ok_or(unsupported(t, Op::VecDot))?;
    let n = elements_in(t, w.len())?;
    blockwise::same_len(bytes_for(vd, n)?, x.len())?;
    visit(t, Run { level, w, x }).unwrap_or(Err(unsupported(t, Op::VecDot)))
}
