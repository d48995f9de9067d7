//! What both firmware images run, whatever the core: parse the embedded GGUF extract with the
//! `&[u8]` driver and again through the `embedded_io::Read` driver (256-byte buffer, a reader that
//! returns short reads), find keys and tensors with `Catalog`, run one matvec per tensor and compare
//! its bits with the host's, and check that hostile headers give their expected errors. Each step
//! is timed by the board's tick counter and its stack high-water mark measured by stack painting.
//! With feature `model`, the model images' greedy generation and its digest (`model`,
//! `model_report`). The board crates supply the clock, the logger transport and the exit.
#![no_std]

pub mod checks;
pub mod hostile;
pub mod inputs;
pub mod minimal;
#[cfg(feature = "model")]
pub mod model;
#[cfg(feature = "model")]
pub mod model_report;
pub mod readme;
pub mod short_reads;
pub mod stack;

/// What a board provides to the checks.
pub trait Board {
    /// The board's name, for the log.
    const NAME: &'static str;
    /// Ticks per second of [`ticks`](Self::ticks).
    const TICK_HZ: u32;
    /// A monotonic tick count.
    fn ticks(&self) -> u64;
}
