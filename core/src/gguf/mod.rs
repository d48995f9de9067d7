//! The GGUF pull parser.
//!
//! [`Parser`] is a sans-I/O state machine: it never reads, it is handed bytes and yields
//! [`Event`]s in file order. Three drivers feed it:
//! - [`SliceParser`] over a `&[u8]` holding the header (zero copy: strings borrow from it);
//! - [`ReadParser`] over an [`embedded_io::Read`] through a caller buffer, without `Seek`;
//! - [`PushParser`] for chunks of any size pushed as they arrive.
//!
//! All three produce the same events for the same bytes, except that a string value longer than a
//! streaming driver's buffer arrives as several [`StrPiece`]s. [`Catalog`] records the keys and
//! tensors a program asks for, without a heap.

#![deny(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

mod catalog;
mod driver_debug;
mod event;
mod format;
mod found_value;
mod limits;
mod machine;
mod push;
mod read;
mod slice;
mod value;
mod window;
mod writer;

#[cfg(test)]
mod tests;

pub use catalog::{CapacityExceeded, Catalog, FoundKey, FoundTensor};
pub use event::{ByteOrder, DataSection, Event, Header, Shape, StrPiece, TensorInfo};
pub use limits::{Limits, DEFAULT_DEPTH_CAPACITY, MAX_DIMS_CAPACITY};
pub use machine::{Feed, Parser, RawEvent, RawStep, Step, DEFAULT_ALIGNMENT};
pub use push::PushParser;
pub use read::ReadParser;
pub use slice::SliceParser;
pub use value::{Scalar, ScalarRun, ValueType};
pub use window::MIN_BUFFER;
pub use writer::{
    Encoder, Expected, GgufWriter, Misuse, TensorSpec, WriteOptions, ALIGNMENT_KEY, GGUF_MAGIC,
    MAX_CHECKED_KEYS,
};

/// A small valid GGUF v3 header (one string key, one F32 tensor `w` of 4 elements), for examples.
#[doc(hidden)]
pub fn example_header() -> &'static [u8] {
    b"GGUF\x03\0\0\0\x01\0\0\0\0\0\0\0\x01\0\0\0\0\0\0\0\
      \x14\0\0\0\0\0\0\0general.architecture\x08\0\0\0\x05\0\0\0\0\0\0\0llama\
      \x01\0\0\0\0\0\0\0w\x01\0\0\0\x04\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0"
}
