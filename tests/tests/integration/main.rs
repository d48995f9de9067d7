//! The integration tests of `miniquant-tests` as one test binary (each module was a binary of its
//! own: one link of candle and the oracles instead of seventeen). Run one group with its module
//! path, e.g. `cargo test -p miniquant-tests --test integration ggml_kernels::`.
//!
//! - oracles: `ggml_kernels`, `ggml_real_files`, `ggml_validate`, `quant_error_table` (ggml's C
//!   reference), `candle_header`, `candle_kernels`, `candle_real_files` (candle 0.11), `gguf_py`,
//!   `gguf_dump_json`, `json_vs_gguf_py`, `big_endian` (gguf-py);
//! - the CLI's file commands: `extract`, `requantize`, `writer_real_files`;
//! - the parser: `hostile_headers`, `stream_equivalence`, `fuzz_corpus` (the committed fuzz
//!   corpus replayed on stable).
//!
//! `tests/neon_counts.rs` stays a binary of its own: `cargo xtask aarch64 count` cross-compiles
//! it alone.

#[path = "../candle_common/mod.rs"]
mod candle_common;

mod big_endian;
mod candle_header;
mod candle_kernels;
mod candle_real_files;
mod extract;
mod fuzz_corpus;
mod ggml_kernels;
mod ggml_real_files;
mod ggml_validate;
mod gguf_dump_json;
mod gguf_py;
mod hostile_headers;
mod json_vs_gguf_py;
mod quant_error_table;
mod requantize;
mod stream_equivalence;
mod writer_real_files;
