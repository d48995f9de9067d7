//! AMX int8 kernels (the `amx` level): the packed matmul of Q8_0, Q4_0 and Q4_1
//! (`quant::packed`'s layout, whose group blocks already are weight tiles). `tdpbssd` multiplies a
//! tile of sixteen activation blocks by a tile of sixteen weight rows' blocks into sixteen ×
//! sixteen exact integer block sums, and each output then takes its scalar twin's float step per
//! block, in block order, unfused: the outputs have `matvec`'s bits. Every other product at the
//! `amx` level is the VNNI level's (a plain-layout AMX matmul, which decoded each row into tiles,
//! ran slower than the VNNI matmul everywhere it was measured and was dropped).
//!
//! The kernels are written over [`tiles::Tiles`], so that a scalar emulation of the instructions
//! (`emulated`, tests only) runs them on any x86_64 CPU: on machines without AMX the tests check
//! everything but the instruction encodings and the hardware's own semantics. Where AMX is
//! present and granted the tests also run the real tiles against the scalar bits (they have, on
//! Intel Xeons with AMX, in CI). Where granted, the level is the automatic choice.
//!
//! Using the tiles takes the OS's permission (`level::grant_amx`; on Linux the `std` adapter asks
//! with `arch_prctl`). This crate's own tests ask themselves ([`request_for_tests`]).

#[cfg(test)]
mod emulated;
mod packed;
#[cfg(test)]
mod tests;
mod tiles;

pub(super) use packed::{packed_matmul_q4_0, packed_matmul_q4_1, packed_matmul_q8_0};

/// In this crate's tests on Linux: asks the kernel once for the tile data permission
/// (`arch_prctl(ARCH_REQ_XCOMP_PERM = 0x1023, XTILEDATA = 18)`, Linux's
/// Documentation/arch/x86/xstate.rst) where the CPU has AMX, and returns whether it was given.
/// The library itself never asks: a `no_std` crate has no OS to ask.
#[cfg(test)]
pub(crate) fn request_for_tests() -> bool {
    use core::sync::atomic::{AtomicU8, Ordering};
    /// 0 not asked, 1 given, 2 refused or not applicable.
    static STATE: AtomicU8 = AtomicU8::new(0);
    match STATE.load(Ordering::Relaxed) {
        1 => return true,
        2 => return false,
        _ => {}
    }
    let given = super::detect::amx() && ask_linux();
    STATE.store(if given { 1 } else { 2 }, Ordering::Relaxed);
    given
}

#[cfg(all(test, target_os = "linux"))]
fn ask_linux() -> bool {
    const SYS_ARCH_PRCTL: usize = 158;
    const ARCH_REQ_XCOMP_PERM: usize = 0x1023;
    const XFEATURE_XTILEDATA: usize = 18;
    let result: isize;
    // SAFETY: the x86_64 Linux system call convention (number in rax, arguments in rdi and rsi,
    // rcx and r11 clobbered, result in rax); arch_prctl with this request reads no memory and
    // changes only which register state the kernel lets this process use.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") SYS_ARCH_PRCTL as isize => result,
            in("rdi") ARCH_REQ_XCOMP_PERM,
            in("rsi") XFEATURE_XTILEDATA,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    result == 0
}

#[cfg(all(test, not(target_os = "linux")))]
fn ask_linux() -> bool {
    false
}
