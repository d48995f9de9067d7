//! # miniquant-std
//!
//! The std side of miniquant: open a GGUF file by memory-mapping it ([`GgufFile`]), keep an owned
//! index of its header ([`Index`]: metadata and tensors in file order, lookup by name), check the
//! whole file ([`validate`]), print it as text or JSON, and the `miniquant` command line ([`cli`]).
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

mod build;
pub mod cli;
pub mod example;
pub mod file;
pub mod format;
pub mod index;
pub mod json;
mod names;
pub mod parallel;
pub mod stats;
pub mod validate;
pub mod value;
pub mod writer;

pub use file::{GgufFile, OpenError, TensorDataError};
pub use index::{Index, MetadataEntry, ReaderOptions, TensorEntry};
pub use validate::{Report, Warning};
pub use value::{Array, Element, Strings, Value};
