//! # miniquant-std
//!
//! The std side of miniquant: open a GGUF file by memory-mapping it ([`GgufFile`]), keep an owned
//! index of its header ([`Index`]: metadata and tensors in file order, lookup by name), check the
//! whole file ([`validate`], with [`diagnose`] for the context of its messages), dequantize or
//! multiply a tensor by name ([`GgufFile::dequantize_tensor`], [`GgufFile::matvec_tensor`], row
//! ranges with [`GgufFile::rows_data`]), print the header as text, JSON ([`json`]) or gguf-py's
//! JSON layout ([`gguf_dump`]), convert the weight tensors to another type ([`requantize`]), and
//! the `miniquant` command line ([`cli`]). Pipes and other unmappable streams are read into memory
//! ([`GgufFile::from_reader`]).
//!
//! Opening a file and reading its tensors fail with one type, [`Error`]: what went wrong
//! ([`ErrorKind`]) and the path of the file (its `Display` names it; `source()` is the
//! underlying I/O or core error). The reads of an entry's bytes ([`GgufFile::data_of`],
//! [`GgufFile::rows_data`], ...) fail with the core's [`miniquant::Error`], which `?` turns into an
//! [`Error`]. A conversion ([`requantize`]) has its own error,
//! [`requantize::RequantizeError`], which also concerns the output.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let file = miniquant_std::GgufFile::open("examples/tiny.gguf")?;
//! for t in file.index().tensors() {
//!     println!("{} {} {:?}", t.name, t.ggml_type, t.shape());
//! }
//! let q = file.tensor_data("blk.0.attn_q.weight")?; // borrowed from the mapping
//! # let _ = q;
//! # Ok(())
//! # }
//! ```
//!
//! # Crate features
//! - `cli` (default): the `miniquant` binary and its [`cli`] module (clap). Library users can
//!   depend on `miniquant-std = { version = "0.1", default-features = false }` and skip clap.
//!
//! The core crate is re-exported as [`miniquant`], so one dependency gives both.
#![deny(missing_docs, missing_debug_implementations)]

/// The core crate: the `no_std` parser ([`miniquant::gguf`]), [`miniquant::GgmlType`] and the
/// kernels ([`miniquant::quant`]).
pub use miniquant;

pub mod amx;
pub mod bench;
#[cfg(feature = "cli")]
pub mod cli;
pub mod diagnose;
pub mod error;
pub mod example;
pub mod file;
pub mod format;
pub mod gguf_dump;
pub mod index;
pub mod json;
pub mod model;
mod names;
pub mod npy;
pub mod output_file;
pub mod parallel;
pub mod requantize;
pub mod sampling;
pub mod signals;
pub mod stats;
pub mod tensor;
pub mod tokenizer;
pub mod validate;
pub mod value;
pub mod working_memory;
pub mod writer;

/// The README's Rust snippets, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;

pub use error::{Error, ErrorKind};
pub use file::GgufFile;
pub use index::{Index, MetadataEntry, ReaderOptions, TensorEntry};
pub use tokenizer::Tokenizer;
pub use validate::{Report, Warning};
pub use value::{Array, Element, Strings, Value};
