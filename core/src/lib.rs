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
//! # Examples
//!
//! Parsing a header held in memory with [`gguf::SliceParser`] (zero copy: names and strings borrow
//! from the input):
//!
//! ```
//! use miniquant::gguf::{Event, Limits, SliceParser};
//! # let file: &[u8] = miniquant::gguf::example_header();
//! let mut parser = SliceParser::new(file, Limits::default());
//! while let Some(event) = parser.next_event()? {
//!     match event {
//!         Event::Key { key, .. } => println!("key {key} at byte {}", parser.event_offset()),
//!         Event::String(s) => println!("  = {:?}", s.text),
//!         Event::Tensor(t) => println!("tensor {} {} ne {:?}", t.name, t.ggml_type, t.ne()),
//!         Event::End(d) => println!("data section at byte {}", d.data_offset),
//!         _ => {}
//!     }
//! }
//! # Ok::<(), miniquant::Error>(())
//! ```
//!
//! Streaming from any [`embedded_io::Read`] (a UART, an SD card, a socket) without `Seek`, through
//! a buffer the caller owns, with [`gguf::ReadParser`]:
//!
//! ```
//! use miniquant::gguf::{Catalog, Limits, ReadParser};
//! # let stream: &[u8] = miniquant::gguf::example_header();
//! let mut buf = [0u8; 256]; // at least `MIN_BUFFER`; every key and tensor info must fit
//! let mut parser = ReadParser::new(stream, &mut buf, Limits::default())?;
//! let mut want = Catalog::of(&["general.architecture"], &["w"]);
//! loop {
//!     // An event borrows the buffer, so take its offset (where it starts) before pulling it.
//!     let offset = parser.parser().offset();
//!     let Some(event) = parser.next_event()? else { break };
//!     want.observe(&event, offset);
//! }
//! let w = want.tensor("w").expect("the header lists w");
//! assert_eq!((w.ggml_type, w.bytes), (miniquant::GgmlType::F32, 16));
//! # Ok::<(), miniquant::Error>(())
//! ```
//!
//! The kernels work on borrowed slices: [`quant::quantize`] f32 into blocks,
//! [`quant::dequantize`] them back, [`quant::vec_dot`] a row against an activation already in the
//! type's [`quant::vec_dot_type`], and [`quant::matvec::matvec`] a whole matrix:
//!
//! ```
//! use miniquant::{quant, GgmlType};
//! let t = GgmlType::Q8_0; // 32 values per 34-byte block
//! let x: [f32; 64] = core::array::from_fn(|i| i as f32 / 64.0 - 0.5);
//!
//! let mut blocks = [0u8; 68];
//! quant::quantize(t, &x, &mut blocks)?;
//! let mut back = [0f32; 64];
//! quant::dequantize(t, &blocks, &mut back)?;
//! assert!(x.iter().zip(&back).all(|(a, b)| (a - b).abs() < 0.01));
//!
//! // Q8_0 dots against Q8_0: the activation is quantized the same way.
//! assert_eq!(quant::vec_dot_type(t), Some(GgmlType::Q8_0));
//! let dot = quant::vec_dot(t, &blocks, &blocks)?;
//! assert!((dot - x.iter().map(|v| v * v).sum::<f32>()).abs() < 0.05);
//!
//! // y = W x for W of 2 rows x 32 columns (the same 68 bytes seen as two rows).
//! let mut scratch = [0u8; 34]; // quant::matvec::matvec_scratch_bytes(t, 32)
//! let mut y = [0f32; 2];
//! quant::matvec::matvec(t, &blocks, 2, 32, &x[..32], &mut scratch, &mut y)?;
//! # Ok::<(), miniquant::Error>(())
//! ```
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
#[cfg(feature = "model")]
pub mod model;
pub mod quant;

pub use error::{Error, Result};
pub use ggml_type::GgmlType;
