//! The Cortex-M4F image: runs the checks of `firmware-common` with a SysTick cycle counter and exits
//! through semihosting with 0 if they pass, 1 if not (101/102 on a panic).
//!
//! SysTick counts the 25 MHz core clock down from 2^24 - 1; its interrupt counts the wraps. The
//! wrap count is shared between the handler and the main loop behind a `critical_section::Mutex`
//! (the single-core implementation: PRIMASK).
#![no_std]
#![no_main]

use core::cell::Cell;

use cortex_m::peripheral::syst::SystClkSource;
use cortex_m::peripheral::{SCB, SYST};
use cortex_m_rt::{entry, exception};
use critical_section::Mutex;
use defmt_semihosting as _;
use firmware_common::Board;

/// SysTick's reload value: the counter is 24 bits wide.
const RELOAD: u32 = 0x00FF_FFFF;

/// SysTick wraps so far, shared with the SysTick handler.
static WRAPS: Mutex<Cell<u32>> = Mutex::new(Cell::new(0));

#[exception]
fn SysTick() {
    critical_section::with(|cs| {
        let wraps = WRAPS.borrow(cs);
        wraps.set(wraps.get().wrapping_add(1));
    });
}

struct Mps2An386;

impl Board for Mps2An386 {
    const NAME: &'static str = "Cortex-M4F (mps2-an386)";
    const TICK_HZ: u32 = 25_000_000;

    fn ticks(&self) -> u64 {
        critical_section::with(|cs| {
            let mut wraps = WRAPS.borrow(cs).get();
            let mut left = SYST::get_current();
            // A wrap whose interrupt is pending (masked by this critical section) is not counted
            // yet: count it, and read the counter again after it.
            if SCB::is_pendst_pending() {
                wraps = wraps.wrapping_add(1);
                left = SYST::get_current();
            }
            u64::from(wraps) * (u64::from(RELOAD) + 1) + u64::from(RELOAD - left)
        })
    }
}

#[entry]
fn main() -> ! {
    let Some(mut core) = cortex_m::Peripherals::take() else {
        semihosting::process::exit(1)
    };
    core.SYST.set_clock_source(SystClkSource::Core);
    core.SYST.set_reload(RELOAD);
    core.SYST.clear_current();
    core.SYST.enable_interrupt();
    core.SYST.enable_counter();

    let code = match firmware_common::checks::run(&Mps2An386) {
        Ok(()) => 0,
        Err(_) => 1,
    };
    semihosting::process::exit(code)
}

/// A fault ends the run with its program counter in the log, rather than looping forever.
#[exception]
unsafe fn HardFault(frame: &cortex_m_rt::ExceptionFrame) -> ! {
    defmt::error!("HardFault at pc {=u32:#010x}", frame.pc());
    semihosting::process::exit(103)
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
