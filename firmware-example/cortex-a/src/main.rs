//! The Cortex-A image: runs the checks of `firmware-common` at EL1 on QEMU `virt -cpu max`, built
//! with NEON, dotprod and i8mm, timed by the generic timer's virtual counter, and exits through
//! semihosting with 0 if they pass, 1 if not (101/102 on a panic or an unexpected exception).
#![no_std]
#![no_main]

mod board;

use aarch64_rt::entry;
use defmt_semihosting as _;

entry!(main, { board::STACK_PAGES });

fn main(_x0: u64, _x1: u64, _x2: u64, _x3: u64) -> ! {
    let code = match firmware_common::checks::run(&board::Virt) {
        Ok(()) => 0,
        Err(_) => 1,
    };
    semihosting::process::exit(code)
}
