//! The QEMU `virt` board both Cortex-A images run on: the DAIF critical section, the identity page
//! table (MMU on), the exception handlers, the generic timer as the tick counter, and the panic
//! handlers (exit 101/102 through semihosting).

use aarch64_rt::{exception_handlers, initial_pagetable, ExceptionHandlers, InitialPagetable};
use firmware_common::Board;

/// Masks interrupts through DAIF; the restore state is the previous DAIF.
struct DaifCriticalSection;
critical_section::set_impl!(DaifCriticalSection);

// SAFETY: one core; masking every exception class makes the section exclusive, and `release`
// restores exactly the mask `acquire` saw.
unsafe impl critical_section::Impl for DaifCriticalSection {
    unsafe fn acquire() -> u64 {
        let daif: u64;
        // SAFETY: reads DAIF, then masks D, A, I and F; touches no memory.
        unsafe { core::arch::asm!("mrs {0}, daif", "msr daifset, #0xf", out(reg) daif) };
        daif
    }

    unsafe fn release(daif: u64) {
        // SAFETY: writes back the DAIF value `acquire` read.
        unsafe { core::arch::asm!("msr daif, {0}", in(reg) daif) };
    }
}

// Identity map in 1 GiB blocks: [0] device memory (UART, GIC), [1] normal RAM (the image, and the
// model and working memory of the `smollm2` image).
// Bits: valid | AttrIndx << 2 | SH << 8 | AF << 10 | nG << 11 | UXN << 54.
initial_pagetable!({
    let mut table = [0; 512];
    table[0] = 1 | (1 << 10) | (1 << 54);
    table[1] = 1 | (1 << 2) | (3 << 8) | (1 << 10) | (1 << 11) | 0x4000_0000;
    InitialPagetable(table)
});

/// The default handlers report an unexpected exception as a panic.
struct Exceptions;
impl ExceptionHandlers for Exceptions {}
exception_handlers!(Exceptions);

/// Boot stack pages (4 KiB each): room for the checks and the painted measuring window.
pub const STACK_PAGES: usize = 64;

pub struct Virt;

impl Board for Virt {
    const NAME: &'static str = "Cortex-A (virt, -cpu max)";
    /// QEMU's generic timer frequency (CNTFRQ_EL0).
    const TICK_HZ: u32 = 62_500_000;

    fn ticks(&self) -> u64 {
        let count: u64;
        // SAFETY: reads the virtual counter (EL0/EL1 readable); the ISB keeps the read in order
        // with the code being timed.
        unsafe {
            core::arch::asm!("isb", "mrs {0}, cntvct_el0", out(reg) count, options(nomem, nostack))
        };
        count
    }
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
