//! Shared support for miniquant's integration tests: ggml's C reference behind safe wrappers
//! ([`ggml`]), deterministic test data ([`data`]), locating the cache of real files and ggml
//! sources ([`cache`]), reporting the first difference between two outputs ([`diff`]) and per-type
//! result tables ([`report`]).

pub mod cache;
pub mod data;
pub mod diff;
pub mod ggml;
pub mod report;
