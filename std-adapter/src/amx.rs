//! The OS permission the experimental `amx` kernel level needs (Intel AMX tiles).
//!
//! On Linux a process must ask before its first tile instruction, or that instruction faults
//! (SIGILL): `arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`, the kernel's
//! Documentation/arch/x86/xstate.rst. The core crate (`no_std`) cannot make the call, so it
//! keeps `amx` unavailable until told the permission is held (`level::grant_amx`); [`request`]
//! asks and tells. The `miniquant` binary calls it first thing, before the command line (and its
//! `--level`) is read. It is only asked for where the CPU has AMX and the OS saves its state.
//!
//! The grant makes the level *available*, not the default: `amx` is experimental (it gives the
//! scalar bits on real tiles but is slower than `avx512vnni` where measured) and runs only when
//! named (`--level amx`, `MINIQUANT_LEVEL=amx`).

use std::sync::OnceLock;

/// Asks the OS for the AMX tile permission once per process (where the CPU has AMX) and grants
/// it to the kernels if given; returns whether the `amx` level is available.
pub fn request() -> bool {
    static GRANTED: OnceLock<bool> = OnceLock::new();
    *GRANTED.get_or_init(|| {
        if !miniquant::quant::level::amx_supported() {
            return false;
        }
        #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
        {
            if linux::ask() {
                // SAFETY: the kernel just gave this process the XTILEDATA permission (and the CPU
                // has AMX with the tile state enabled in XCR0: `amx_supported`), so tile
                // instructions do not fault in any of its threads.
                return unsafe { miniquant::quant::level::grant_amx() };
            }
        }
        false
    })
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod linux {
    /// `arch_prctl` requests and the tile data state component (asm/prctl.h, asm/fpu/types.h).
    const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
    const XFEATURE_XTILEDATA: libc::c_long = 18;

    /// `arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`: whether the kernel gave the
    /// permission (it refuses on kernels before 5.16, or when a signal stack is too small).
    pub(super) fn ask() -> bool {
        // SAFETY: a plain system call with two integer arguments; this request reads and writes
        // no user memory, it only enlarges the register state the kernel saves for the process.
        let result = unsafe {
            libc::syscall(
                libc::SYS_arch_prctl,
                ARCH_REQ_XCOMP_PERM,
                XFEATURE_XTILEDATA,
            )
        };
        result == 0
    }
}

#[cfg(test)]
mod tests {
    use miniquant::quant::level::{self, Level};

    /// The request grants exactly where the CPU has AMX (and the kernel agrees); the automatic
    /// level never becomes `amx`.
    #[test]
    fn request_grants_only_where_amx_is() {
        let granted = super::request();
        assert_eq!(granted, Level::Amx.is_available());
        if !level::amx_supported() {
            assert!(!granted);
            eprintln!("no AMX on this CPU: the amx level is not run");
        }
        assert_ne!(level::detect(), Level::Amx);
        // Idempotent.
        assert_eq!(super::request(), granted);
    }
}
