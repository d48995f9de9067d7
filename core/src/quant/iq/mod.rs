//! The IQ family: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M (lattice codes that index the
//! lookup grids of ggml-common.h) and IQ4_NL, IQ4_XS (4-bit indices into 16 non-linear levels).
//!
//! - Dequantize: every type, bit-identical to ggml's `dequantize_row_*`.
//! - Quantize: IQ4_NL and IQ4_XS, byte-identical to `quantize_row_iq4_nl_ref` /
//!   `quantize_row_iq4_xs_ref` (ggml built with `-ffp-contract=off`). The others give
//!   [`Error::Unsupported`](crate::Error::Unsupported): ggml's quantizers for IQ2_XXS, IQ2_XS and IQ1_S require an importance
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
pub(crate) mod tables;
#[cfg(test)]
pub(in crate::quant) mod test_support;
#[cfg(test)]
mod tests;
