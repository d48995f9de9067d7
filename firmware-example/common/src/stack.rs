//! Stack high-water marks by painting: fill a window below the current stack pointer with a known
//! word, run the function, and find the lowest word it overwrote.
//!
//! The measured function must not be inlined into the caller (mark it `#[inline(never)]`), or its
//! locals would live in the caller's frame, above the point where measuring starts. An interrupt
//! taken during the call adds its exception frame to the figure.

use core::ptr::{read_volatile, write_volatile};

const PAINT: u32 = 0xCCCC_CCCC;

/// Bytes painted below the stack pointer; a figure equal to this means "at least this much".
pub const WINDOW: usize = 32 * 1024;

#[inline(always)]
fn stack_pointer() -> usize {
    let sp: usize;
    // SAFETY: reads the stack pointer register into a general register; no memory is touched.
    // `mov <reg>, sp` is valid in both Thumb-2 and AArch64, `mv` is RISC-V's.
    #[cfg(not(target_arch = "riscv32"))]
    unsafe {
        core::arch::asm!("mov {}, sp", out(reg) sp, options(nomem, nostack, preserves_flags))
    };
    // SAFETY: as above.
    #[cfg(target_arch = "riscv32")]
    unsafe {
        core::arch::asm!("mv {}, sp", out(reg) sp, options(nomem, nostack, preserves_flags))
    };
    sp
}

/// Bytes left unpainted just below the caller's stack pointer: the painter's own frame (a saved
/// register pair), which the compiler may push after reading the stack pointer. Figures below this
/// read as this.
const PAINTER_FRAME: usize = 16;

/// Paints the `WINDOW` bytes below `sp` (the caller's stack pointer), except the painter's own
/// frame; returns the window's bottom.
#[inline(never)]
fn paint_below(sp: usize) -> usize {
    let top = (sp & !3) - PAINTER_FRAME;
    let bottom = (sp & !3) - WINDOW;
    let mut p = bottom;
    while p < top {
        // SAFETY: `p` is word-aligned and lies in the free part of the stack below the stack
        // pointer, which the boards reserve at least `WINDOW` bytes for; nothing lives there, and
        // this leaf loop keeps its state in registers.
        unsafe { write_volatile(p as *mut u32, PAINT) };
        p += 4;
    }
    bottom
}

/// The lowest address in `bottom..top` whose word is no longer the paint.
#[inline(never)]
fn lowest_written(bottom: usize, top: usize) -> usize {
    let mut p = bottom;
    // SAFETY: `bottom..top` is the painted, word-aligned window of the free stack.
    while p < top && unsafe { read_volatile(p as *const u32) } == PAINT {
        p += 4;
    }
    p
}

/// Runs `f` and returns its result with the bytes of stack it used below the caller's stack pointer.
#[inline(never)]
pub fn measure<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let top = stack_pointer();
    let bottom = paint_below(top);
    let result = f();
    (result, top.saturating_sub(lowest_written(bottom, top)))
}
