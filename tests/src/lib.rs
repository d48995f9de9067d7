//! Test support for the integration tests: real-file and ggml-source locations ([`cache`]), a
//! byte-level GGUF writer that can also write invalid files ([`craft`]), runners that record what
//! each parser driver yields ([`drive`]), ggml's C reference behind safe wrappers ([`ggml`]),
//! deterministic kernel test data ([`data`]), the first difference between two outputs ([`diff`])
//! and per-type result tables ([`report`]).

pub mod cache;
pub mod craft;
pub mod data;
pub mod diff;
pub mod drive;
pub mod ggml;
pub mod report;
