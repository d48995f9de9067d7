//! The K-quant family: 256-element super-blocks Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, and the activation
//! type Q8_K.
//!
//! Each type has its own module with its block layout, `dequantize_block`, `quantize_block` (a port
//! of ggml's `quantize_row_*_ref`, searches included, see `common`) and `vec_dot` against Q8_K (a
//! port of `ggml_vec_dot_*_q8_K_generic`). This module only dispatches on the type.

pub(crate) mod common;
mod dot;
pub mod q2_k;
pub mod q3_k;
pub mod q4_k;
pub mod q5_k;
pub mod q6_k;
pub mod q8_k;

pub use q2_k::BlockQ2K;
pub use q3_k::BlockQ3K;
pub use q4_k::BlockQ4K;
pub use q5_k::BlockQ5K;
pub use q6_k::BlockQ6K;

use super::activation::BlockQ8K;
use super::blockwise::{dequantize_blocks, paired_blocks, quantize_blocks};
use crate::error::{Error, Op, Result};
use crate::ggml_type::GgmlType;

pub(crate) fn dequantize(t: GgmlType, src: &[u8], dst: &mut [f32]) -> Result<()> {
    use GgmlType::*;
    match t {
        Q2_K => dequantize_blocks(src, dst, q2_k::dequantize_block),
        Q3_K => dequantize_blocks(src, dst, q3_k::dequantize_block),
        Q4_K => dequantize_blocks(src, dst, q4_k::dequantize_block),
        Q5_K => dequantize_blocks(src, dst, q5_k::dequantize_block),
        Q6_K => dequantize_blocks(src, dst, q6_k::dequantize_block),
        Q8_K => dequantize_blocks(src, dst, q8_k::dequantize_block),
        _ => Err(Error::Unsupported {
            ggml_type: t,
            op: Op::Dequantize,
        }),
    }
}

pub(crate) fn quantize(t: GgmlType, src: &[f32], dst: &mut [u8]) -> Result<()> {
    use GgmlType::*;
    match t {
        Q2_K => quantize_blocks(src, dst, q2_k::quantize_block),
        Q3_K => quantize_blocks(src, dst, q3_k::quantize_block),
        Q4_K => quantize_blocks(src, dst, q4_k::quantize_block),
        Q5_K => quantize_blocks(src, dst, q5_k::quantize_block),
        Q6_K => quantize_blocks(src, dst, q6_k::quantize_block),
        Q8_K => quantize_blocks(src, dst, q8_k::quantize_block),
        _ => Err(Error::Unsupported {
            ggml_type: t,
            op: Op::Quantize,
        }),
    }
}

pub(crate) fn vec_dot(t: GgmlType, w: &[u8], x: &[u8]) -> Result<f32> {
    use GgmlType::*;
    match t {
        Q2_K => paired_blocks::<BlockQ2K, BlockQ8K>(w, x).map(|(w, x)| q2_k::vec_dot(w, x)),
        Q3_K => paired_blocks::<BlockQ3K, BlockQ8K>(w, x).map(|(w, x)| q3_k::vec_dot(w, x)),
        Q4_K => paired_blocks::<BlockQ4K, BlockQ8K>(w, x).map(|(w, x)| q4_k::vec_dot(w, x)),
        Q5_K => paired_blocks::<BlockQ5K, BlockQ8K>(w, x).map(|(w, x)| q5_k::vec_dot(w, x)),
        Q6_K => paired_blocks::<BlockQ6K, BlockQ8K>(w, x).map(|(w, x)| q6_k::vec_dot(w, x)),
        _ => Err(Error::Unsupported {
            ggml_type: t,
            op: Op::VecDot,
        }),
    }
}
