//! The Cortex-M4F image: runs the checks of `firmware-common` with a SysTick cycle counter and exits
//! through semihosting with 0 if they pass, 1 if not (101/102 on a panic).
#![no_std]
#![no_main]

mod board;

use cortex_m_rt::entry;
use defmt_semihosting as _;

#[entry]
fn main() -> ! {
    if !board::start_ticks() {
        semihosting::process::exit(1)
    }
    let code = match firmware_common::checks::run(&board::Mps2An386) {
        Ok(()) => 0,
        Err(_) => 1,
    };
    semihosting::process::exit(code)
}
