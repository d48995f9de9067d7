//! The "misc" family: the ternary types TQ1_0 and TQ2_0, the 4-bit float types MXFP4 and NVFP4,
//! and the 1- and 2-bit types Q1_0 and Q2_0.
//!
//! Every type has dequantize (bit-identical to ggml's `dequantize_row_*`), quantize (byte-identical
//! to `quantize_row_*_ref` of ggml built with `-ffp-contract=off`; all six have one that needs no
//! importance matrix) and vec_dot (the float order of `ggml_vec_dot_*_generic`; second operand
//! Q8_K for TQ1_0 and TQ2_0, Q8_0 for the rest).

mod fp4;
pub mod mxfp4;
pub mod nvfp4;
pub mod q1_0;
pub mod q2_0;
pub mod tq1_0;
pub mod tq2_0;

#[cfg(test)]
mod tests;

use crate::error::{Error, Op, Result};
use crate::ggml_type::GgmlType;
use crate::quant::activation::{BlockQ8K, BlockQ8_0, QK_K};
use crate::quant::blockwise::{dequantize_blocks, quantize_blocks, vec_dot_operands, with_groups};

pub(crate) fn dequantize(t: GgmlType, src: &[u8], dst: &mut [f32]) -> Result<()> {
    match t {
        GgmlType::TQ1_0 => dequantize_blocks(src, dst, tq1_0::dequantize_block),
        GgmlType::TQ2_0 => dequantize_blocks(src, dst, tq2_0::dequantize_block),
        GgmlType::MXFP4 => dequantize_blocks(src, dst, mxfp4::dequantize_block),
        GgmlType::NVFP4 => dequantize_blocks(src, dst, nvfp4::dequantize_block),
        GgmlType::Q1_0 => dequantize_blocks(src, dst, q1_0::dequantize_block),
        GgmlType::Q2_0 => dequantize_blocks(src, dst, q2_0::dequantize_block),
        _ => Err(Error::Unsupported {
            ggml_type: t,
            op: Op::Dequantize,
        }),
    }
}

pub(crate) fn quantize(t: GgmlType, src: &[f32], dst: &mut [u8]) -> Result<()> {
    match t {
        GgmlType::TQ1_0 => quantize_blocks::<_, QK_K>(src, dst, tq1_0::quantize_block),
        GgmlType::TQ2_0 => quantize_blocks::<_, QK_K>(src, dst, tq2_0::quantize_block),
        GgmlType::MXFP4 => quantize_blocks(src, dst, mxfp4::quantize_block),
        GgmlType::NVFP4 => quantize_blocks(src, dst, nvfp4::quantize_block),
        GgmlType::Q1_0 => quantize_blocks(src, dst, q1_0::quantize_block),
        GgmlType::Q2_0 => quantize_blocks(src, dst, q2_0::quantize_block),
        _ => Err(Error::Unsupported {
            ggml_type: t,
            op: Op::Quantize,
        }),
    }
}

pub(crate) fn vec_dot(t: GgmlType, w: &[u8], x: &[u8]) -> Result<f32> {
    match t {
        GgmlType::TQ1_0 => {
            let (ws, ys) = vec_dot_operands::<_, BlockQ8K>(w, x, 1)?;
            Ok(tq1_0::vec_dot(ws, ys))
        }
        GgmlType::TQ2_0 => {
            let (ws, ys) = vec_dot_operands::<_, BlockQ8K>(w, x, 1)?;
            Ok(tq2_0::vec_dot(ws, ys))
        }
        GgmlType::MXFP4 => {
            let (ws, ys) = vec_dot_operands::<_, BlockQ8_0>(w, x, 1)?;
            Ok(mxfp4::vec_dot(ws, ys))
        }
        GgmlType::NVFP4 => {
            let (ws, ys) = vec_dot_operands::<nvfp4::BlockNvfp4, BlockQ8_0>(w, x, 2)?;
            Ok(nvfp4::vec_dot(with_groups(ws, ys)))
        }
        GgmlType::Q1_0 => {
            let (ws, ys) =
                vec_dot_operands::<q1_0::BlockQ1_0, BlockQ8_0>(w, x, q1_0::Q8_PER_BLOCK)?;
            Ok(q1_0::vec_dot(with_groups(ws, ys)))
        }
        GgmlType::Q2_0 => {
            let (ws, ys) =
                vec_dot_operands::<q2_0::BlockQ2_0, BlockQ8_0>(w, x, q2_0::Q8_PER_BLOCK)?;
            Ok(q2_0::vec_dot(with_groups(ws, ys)))
        }
        _ => Err(Error::Unsupported {
            ggml_type: t,
            op: Op::VecDot,
        }),
    }
}
