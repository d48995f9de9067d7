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
