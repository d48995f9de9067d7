//! The QEMU `mps2-an386` board both full Cortex-M4F images run on: a SysTick cycle counter, the
//! HardFault handler (exit 103) and the panic handlers (exit 101/102 through semihosting).
//!
//! SysTick counts the 25 MHz core clock down from 2^24 - 1; its interrupt counts the wraps. The
//! wrap count is shared between the handler and the main loop behind a `critical_section::Mutex`
//! (the single-core implementation: PRIMASK).

use core::cell::Cell;

use cortex_m::peripheral::syst::SystClkSource;
use cortex_m::peripheral::{SCB, SYST};
use cortex_m_rt::exception;
use critical_section::Mutex;
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

/// The board, for the checks: its name and SysTick-based tick count.
pub struct Mps2An386;

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

/// Starts the SysTick counter behind [`Mps2An386::ticks`]; `false` if the core peripherals were
/// already taken.
pub fn start_ticks() -> bool {
    let Some(mut core) = cortex_m::Peripherals::take() else {
        return false;
    };
    core.SYST.set_clock_source(SystClkSource::Core);
    core.SYST.set_reload(RELOAD);
    core.SYST.clear_current();
    core.SYST.enable_interrupt();
    core.SYST.enable_counter();
    true
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
