//! The IQ family: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M (lattice codes that index the
//! lookup grids of ggml-common.h) and IQ4_NL, IQ4_XS (4-bit indices into 16 non-linear levels).
//!
//! - Dequantize: every type, bit-identical to ggml's `dequantize_row_*`.
//! - Quantize: IQ4_NL and IQ4_XS, byte-identical to `quantize_row_iq4_nl_ref` /
//!   `quantize_row_iq4_xs_ref` (ggml built with `-ffp-contract=off`). The others give
//!   [`Error::Unsupported`]: ggml's quantizers for IQ2_XXS, IQ2_XS and IQ1_S require an importance
//!   matrix (`GGML_ASSERT(quant_weights)`), and those for IQ2_S, IQ3_XXS, IQ3_S and IQ1_M need the
//!   neighbour maps that `ggml_quantize_init` builds on the heap at run time (a search over the
//!   grids that has no place in a no-alloc crate).
//! - vec_dot: every type, in the float order of `ggml_vec_dot_*_generic`; the second operand is
//!   Q8_0 for IQ4_NL and Q8_K for the rest.

pub mod iq1_m;
pub mod iq1_s;
pub mod iq2_s;
pub mod iq2_xs;
pub mod iq2_xxs;
pub mod iq3_s;
pub mod iq3_xxs;
pub mod iq4_nl;
pub mod iq4_xs;

mod grid_iq1;
mod grid_iq2;
mod grid_iq3;
mod iq4_search;
mod tables;
#[cfg(test)]
pub(in crate::quant) mod test_support;
#[cfg(test)]
mod tests;

use crate::error::{Error, Op, Result};
use crate::ggml_type::GgmlType;
use crate::quant::activation::{BlockQ8K, BlockQ8_0, QK_K};
use crate::quant::blockwise::{dequantize_blocks, quantize_blocks, vec_dot_operands};

pub(crate) fn dequantize(t: GgmlType, src: &[u8], dst: &mut [f32]) -> Result<()> {
    match t {
        GgmlType::IQ2_XXS => dequantize_blocks(src, dst, iq2_xxs::dequantize_block),
        GgmlType::IQ2_XS => dequantize_blocks(src, dst, iq2_xs::dequantize_block),
        GgmlType::IQ2_S => dequantize_blocks(src, dst, iq2_s::dequantize_block),
        GgmlType::IQ3_XXS => dequantize_blocks(src, dst, iq3_xxs::dequantize_block),
        GgmlType::IQ3_S => dequantize_blocks(src, dst, iq3_s::dequantize_block),
        GgmlType::IQ1_S => dequantize_blocks(src, dst, iq1_s::dequantize_block),
        GgmlType::IQ1_M => dequantize_blocks(src, dst, iq1_m::dequantize_block),
        GgmlType::IQ4_NL => dequantize_blocks(src, dst, iq4_nl::dequantize_block),
        GgmlType::IQ4_XS => dequantize_blocks(src, dst, iq4_xs::dequantize_block),
        _ => Err(Error::Unsupported {
            ggml_type: t,
            op: Op::Dequantize,
        }),
    }
}

pub(crate) fn quantize(t: GgmlType, src: &[f32], dst: &mut [u8]) -> Result<()> {
    match t {
        GgmlType::IQ4_NL => quantize_blocks(src, dst, iq4_nl::quantize_block),
        GgmlType::IQ4_XS => quantize_blocks::<_, QK_K>(src, dst, iq4_xs::quantize_block),
        _ => Err(Error::Unsupported {
            ggml_type: t,
            op: Op::Quantize,
        }),
    }
}

pub(crate) fn vec_dot(t: GgmlType, w: &[u8], x: &[u8]) -> Result<f32> {
    match t {
        GgmlType::IQ2_XXS => q8k_dot(w, x, iq2_xxs::vec_dot),
        GgmlType::IQ2_XS => q8k_dot(w, x, iq2_xs::vec_dot),
        GgmlType::IQ2_S => q8k_dot(w, x, iq2_s::vec_dot),
        GgmlType::IQ3_XXS => q8k_dot(w, x, iq3_xxs::vec_dot),
        GgmlType::IQ3_S => q8k_dot(w, x, iq3_s::vec_dot),
        GgmlType::IQ1_S => q8k_dot(w, x, iq1_s::vec_dot),
        GgmlType::IQ1_M => q8k_dot(w, x, iq1_m::vec_dot),
        GgmlType::IQ4_XS => q8k_dot(w, x, iq4_xs::vec_dot),
        GgmlType::IQ4_NL => {
            let (ws, ys) = vec_dot_operands::<_, BlockQ8_0>(w, x, 1)?;
            Ok(iq4_nl::vec_dot(ws, ys))
        }
        _ => Err(Error::Unsupported {
            ggml_type: t,
            op: Op::VecDot,
        }),
    }
}

/// Runs a vec_dot kernel whose second operand is one Q8_K block per weight block.
fn q8k_dot<B: crate::quant::cast::Block>(
    w: &[u8],
    x: &[u8],
    kernel: fn(&[B], &[BlockQ8K]) -> f32,
) -> Result<f32> {
    let (ws, ys) = vec_dot_operands::<B, BlockQ8K>(w, x, 1)?;
    Ok(kernel(ws, ys))
}
