//! The minimal images, for the budgets: `firmware_common::minimal` (the `&[u8]` driver and
//! `Catalog` over the embedded extract and, with feature `kernels`, the Q8_0 and Q4_K matvec
//! compared with the host's bits; with feature `model` instead, the tiny llama's greedy run
//! compared with the host's); no logging.
//! Exit code 0 if everything matches, 1 if not.
//!
//! With feature `no-panic-link`, the panic handler calls a symbol that exists nowhere, so the image
//! links only if the optimizer proved every panic unreachable: the link itself is the check.
#![no_std]
#![no_main]

#[cfg(feature = "model")]
#[path = "../free_ram.rs"]
mod free_ram;

use cortex_m_rt::entry;

#[entry]
fn main() -> ! {
    #[cfg(not(feature = "model"))]
    let ok = firmware_common::minimal::run();
    #[cfg(feature = "model")]
    let ok = free_ram::take().is_some_and(firmware_common::minimal::run_model);
    semihosting::process::exit(if ok { 0 } else { 1 })
}

#[cfg(not(feature = "no-panic-link"))]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    semihosting::process::exit(101)
}

#[cfg(feature = "no-panic-link")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    extern "C" {
        /// Defined nowhere: referenced only if some panic is reachable.
        fn miniquant_minimal_image_has_a_reachable_panic() -> !;
    }
    // SAFETY: never runs; if the call survives optimization, the link fails, which is the point.
    unsafe { miniquant_minimal_image_has_a_reachable_panic() }
}
