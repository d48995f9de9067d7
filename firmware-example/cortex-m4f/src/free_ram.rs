//! The RAM the linker leaves free, between the end of the statics (cortex-m-rt's `__sheap`) and a
//! reserve for the stack below its top (`_stack_start`): lent once, as f32 words, to the model
//! images for their working memory.

use core::sync::atomic::{AtomicBool, Ordering};

extern "C" {
    static __sheap: u32;
    static _stack_start: u32;
}

/// Bytes kept for the stack below `_stack_start` (the checks paint 32 KiB of it).
pub const STACK_RESERVE: usize = 64 * 1024;

static TAKEN: AtomicBool = AtomicBool::new(false);

/// The free RAM as f32 words; `None` if it was lent already.
pub fn take() -> Option<&'static mut [f32]> {
    let start = core::ptr::addr_of!(__sheap) as usize;
    let end = (core::ptr::addr_of!(_stack_start) as usize).saturating_sub(STACK_RESERVE);
    if TAKEN.swap(true, Ordering::Relaxed) {
        return None;
    }
    let words = end.saturating_sub(start) / 4;
    // SAFETY: `start..start + 4 * words` lies between the end of every static and the stack's
    // reserve, so nothing else uses it; `__sheap` is 4-byte aligned (cortex-m-rt asserts it), and
    // `TAKEN` hands the region out once.
    Some(unsafe { core::slice::from_raw_parts_mut(start as *mut f32, words) })
}
