//! The CLI's tests: each module runs the `miniquant` binary the way a user would. One test binary
//! for all of them (not one per file) so a test build links and compiles the shared helpers and the
//! library's generic code once; `cargo test -p miniquant-std --test cli pty::` runs one module.
//! Scratch files share one directory (`common::scratch_dir`), so each module names its own files
//! (a prefix or a directory of its own): the modules' tests run at the same time.

#[path = "../common/mod.rs"]
mod common;

mod alias;
mod bench;
mod dequant;
mod docs;
mod errors;
mod flags;
mod inspect;
mod interrupt;
mod kernels;
mod levels;
mod npy;
mod pty;
mod requantize;
mod run;
mod tokenize;
mod truncated;
mod validate;
