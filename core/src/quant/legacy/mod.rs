//! The legacy family: the plain numeric types (F32, F16, BF16, F64, I8..I64) and the 32-element
//! blocks Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q8_1.
//!
//! Each quantized type has its own module with its block layout, `dequantize_block`,
//! `quantize_block` (a port of ggml's `quantize_row_*_ref`) and `vec_dot` (a port of
//! `ggml_vec_dot_*_generic`). This module only dispatches on the type.

pub mod plain;
pub mod q4_0;
pub mod q4_1;
pub mod q5_0;
pub mod q5_1;
pub mod q8_0;
pub mod q8_1;

pub use q4_0::BlockQ4_0;
pub use q4_1::BlockQ4_1;
pub use q5_0::BlockQ5_0;
pub use q5_1::BlockQ5_1;

use super::activation::{BlockQ8_0, BlockQ8_1};
use super::blockwise::{dequantize_blocks, paired_blocks, quantize_blocks};
use crate::error::{Error, Op, Result};
use crate::ggml_type::GgmlType;

pub(crate) fn dequantize(t: GgmlType, src: &[u8], dst: &mut [f32]) -> Result<()> {
    use GgmlType::*;
    match t {
        F32 | F16 | BF16 | F64 | I8 | I16 | I32 | I64 => plain::dequantize(t, src, dst),
        Q4_0 => dequantize_blocks(src, dst, q4_0::dequantize_block),
        Q4_1 => dequantize_blocks(src, dst, q4_1::dequantize_block),
        Q5_0 => dequantize_blocks(src, dst, q5_0::dequantize_block),
        Q5_1 => dequantize_blocks(src, dst, q5_1::dequantize_block),
        Q8_0 => dequantize_blocks(src, dst, q8_0::dequantize_block),
        Q8_1 => dequantize_blocks(src, dst, q8_1::dequantize_block),
        _ => Err(Error::Unsupported {
            ggml_type: t,
            op: Op::Dequantize,
        }),
    }
}

pub(crate) fn quantize(t: GgmlType, src: &[f32], dst: &mut [u8]) -> Result<()> {
    use GgmlType::*;
    match t {
        F32 | F16 | BF16 => plain::quantize(t, src, dst),
        Q4_0 => quantize_blocks(src, dst, q4_0::quantize_block),
        Q4_1 => quantize_blocks(src, dst, q4_1::quantize_block),
        Q5_0 => quantize_blocks(src, dst, q5_0::quantize_block),
        Q5_1 => quantize_blocks(src, dst, q5_1::quantize_block),
        Q8_0 => quantize_blocks(src, dst, q8_0::quantize_block),
        Q8_1 => quantize_blocks(src, dst, q8_1::quantize_block),
        _ => Err(Error::Unsupported {
            ggml_type: t,
            op: Op::Quantize,
        }),
    }
}

pub(crate) fn vec_dot(t: GgmlType, w: &[u8], x: &[u8]) -> Result<f32> {
    use GgmlType::*;
    match t {
        F32 | F16 | BF16 => plain::vec_dot(t, w, x),
        Q4_0 => paired_blocks::<BlockQ4_0, BlockQ8_0>(w, x).map(|(w, x)| q4_0::vec_dot(w, x)),
        Q4_1 => paired_blocks::<BlockQ4_1, BlockQ8_1>(w, x).map(|(w, x)| q4_1::vec_dot(w, x)),
        Q5_0 => paired_blocks::<BlockQ5_0, BlockQ8_0>(w, x).map(|(w, x)| q5_0::vec_dot(w, x)),
        Q5_1 => paired_blocks::<BlockQ5_1, BlockQ8_1>(w, x).map(|(w, x)| q5_1::vec_dot(w, x)),
        Q8_0 => paired_blocks::<BlockQ8_0, BlockQ8_0>(w, x).map(|(w, x)| q8_0::vec_dot(w, x)),
        _ => Err(Error::Unsupported {
            ggml_type: t,
            op: Op::VecDot,
        }),
    }
}
