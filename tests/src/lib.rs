//! Test support for the integration tests: real-file locations ([`cache`]), a byte-level GGUF
//! writer that can also write invalid files ([`craft`]), and runners that record what each parser
//! driver yields ([`drive`]).

pub mod cache;
pub mod craft;
pub mod drive;
