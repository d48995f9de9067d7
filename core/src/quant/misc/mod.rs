//! The "misc" family: the ternary types TQ1_0 and TQ2_0, the 4-bit float types MXFP4 and NVFP4,
//! and the 1- and 2-bit types Q1_0 and Q2_0.
//!
//! Every type has dequantize (bit-identical to ggml's `dequantize_row_*`), quantize (byte-identical
//! to `quantize_row_*_ref` of ggml built with `-ffp-contract=off`; all six have one that needs no
//! importance matrix) and vec_dot (the float order of `ggml_vec_dot_*_generic`; second operand
//! Q8_K for TQ1_0 and TQ2_0, Q8_0 for the rest).

pub(crate) mod fp4;
pub mod mxfp4;
pub mod nvfp4;
pub mod q1_0;
pub mod q2_0;
pub mod tq1_0;
pub mod tq2_0;

#[cfg(test)]
mod tests;
