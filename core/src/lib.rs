//! # miniquant
//!
//! A `no_std`, allocation-free GGUF pull parser and the GGML quantization kernels.
//!
//! - [`gguf`]: a sans-I/O state machine that yields the header's events in file order, with drivers
//!   for a `&[u8]`, an [`embedded_io::Read`] without `Seek`, and pushed chunks. No recursion, no heap,
//!   no panics: every count, length and depth is checked against [`gguf::Limits`] and the bytes that
//!   remain, and every failure is an [`Error`] with its byte offset.
//! - [`GgmlType`]: the ggml type table (codes 0..=42).
//! - [`quant`]: dequantize, quantize, vec_dot and matvec for every ggml type over borrowed slices.
//!
//! # Crate features
//! - `std`: implements `std::error::Error` through `core::error::Error` and enables std I/O
//!   adapters in `embedded-io`.
//! - `defmt`: derives `defmt::Format` for every public type.
//!
//! # Unsafe code
//! The parser is safe code (`#![deny(unsafe_code)]`); `unsafe` is allowed only in SIMD kernel
//! modules, each block with a `// SAFETY:` comment. Byte slices are viewed as blocks through
//! `bytemuck`.
#![no_std]
#![deny(unsafe_code)]
#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

#[cfg(any(test, feature = "std"))]
extern crate std;

pub mod error;
pub mod ggml_type;
pub mod gguf;
pub mod quant;

pub use error::{Error, Result};
pub use ggml_type::GgmlType;
