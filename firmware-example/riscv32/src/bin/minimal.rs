//! The minimal RISC-V image, for the budgets: `firmware_common::minimal` (parser + `Catalog`, and
//! with feature `kernels` the Q8_0 and Q4_K matvec against the host's bits), no logging. Exit code
//! 0 if everything matches, 1 if not. With `no-panic-link` it links only if no panic is reachable.
#![no_std]
#![no_main]

#[riscv_rt::entry]
fn main() -> ! {
    semihosting::process::exit(if firmware_common::minimal::run() {
        0
    } else {
        1
    })
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
