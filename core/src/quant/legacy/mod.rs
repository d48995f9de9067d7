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

pub use plain::{BlockBf16, BlockF16, BlockF32};
pub use q4_0::BlockQ4_0;
pub use q4_1::BlockQ4_1;
pub use q5_0::BlockQ5_0;
pub use q5_1::BlockQ5_1;
