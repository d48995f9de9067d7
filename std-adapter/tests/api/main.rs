//! The library's integration tests (no CLI): the owned index, the forward pass against llama.cpp's
//! logits, requantization, robustness on hostile files, the tokenizer against its oracle. One test
//! binary for all of them (see `tests/cli/main.rs`); `cargo test -p miniquant-std --test api
//! tokenizer::` runs one module.

#[path = "../common/mod.rs"]
mod common;

mod index;
mod model;
mod requantize;
mod robustness;
mod tokenizer;
