//! The RISC-V image: runs the checks of `firmware-common` in machine mode on QEMU `virt`
//! (riscv32imac: no FPU, so every f32 operation of the kernels is a soft-float call), timed by the
//! `mcycle` counter, and exits through semihosting with 0 if they pass, 1 if not (101/102 on a
//! panic).
#![no_std]
#![no_main]

use defmt_semihosting as _;
use firmware_common::Board;

struct Virt;

impl Board for Virt {
    const NAME: &'static str = "RISC-V rv32imac (virt)";
    /// Under `-icount shift=0` QEMU's cycle counter advances one per instruction, at 1 GHz of
    /// virtual time.
    const TICK_HZ: u32 = 1_000_000_000;

    fn ticks(&self) -> u64 {
        riscv::register::mcycle::read64()
    }
}

#[riscv_rt::entry]
fn main() -> ! {
    let code = match firmware_common::checks::run(&Virt) {
        Ok(()) => 0,
        Err(_) => 1,
    };
    semihosting::process::exit(code)
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    defmt::error!("{}", defmt::Display2Format(info));
    semihosting::process::exit(101)
}

#[defmt::panic_handler]
fn defmt_panic() -> ! {
    semihosting::process::exit(102)
}
