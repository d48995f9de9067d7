//! The C ABI of miniquant's `no_std` core, for firmware and programs written in C.
//!
//! - [`parser`]: the pull parser over a caller's `&[u8]` or a caller's read callback, through a
//!   caller buffer, yielding events as plain C structs; [`catalog`]: "give me these keys and
//!   tensors" in one call.
//! - [`kernels`]: dequantize, quantize, vec_dot and matvec by ggml type code, with caller scratch.
//! - [`error`]: every failure as a code plus the byte offset, the limit and the values involved.
//!
//! No allocator, no global state besides the core's kernel level. Every pointer and length pair
//! from C is checked ([`ffi`]): a NULL pointer with a non-zero length, a misaligned pointer, a
//! length whose byte size overflows or buffers that overlap where one is written are error codes,
//! never undefined behaviour on our side. The header `include/miniquant.h` is generated from this
//! crate by cbindgen (`cargo xtask capi` fails when the committed one is stale).
#![no_std]
#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]
// The C names (`mq_event`, `mq_error`, ...) are the ABI.
#![allow(non_camel_case_types)]

pub mod catalog;
pub mod error;
mod ffi;
pub mod kernels;
pub mod parser;

pub use error::mq_error;

/// The panic handler of the static library. The core has no panics on any input, so none should be
/// reachable; with feature `no-panic-link` the handler calls a symbol no one defines, so a program
/// links only if the linker proves that (after dropping unreachable code), and otherwise it calls
/// the C library's `abort`.
#[cfg(not(test))]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    #[cfg(feature = "no-panic-link")]
    {
        extern "C" {
            fn miniquant_capi_has_a_reachable_panic_path() -> !;
        }
        // SAFETY: the symbol is deliberately undefined: any program in which this call survives
        // dead-code elimination fails to link, so it never runs.
        unsafe { miniquant_capi_has_a_reachable_panic_path() }
    }
    #[cfg(not(feature = "no-panic-link"))]
    {
        extern "C" {
            fn abort() -> !;
        }
        // SAFETY: `abort` is the C library's (glibc, newlib, picolibc all have it); it takes no
        // arguments and never returns.
        unsafe { abort() }
    }
}
