//! The OS permission the `amx` kernel level needs (Intel AMX tiles).
//!
//! On Linux a process must ask before its first tile instruction, or that instruction faults
//! (SIGILL): `arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`, the kernel's
//! Documentation/arch/x86/xstate.rst. The core crate (`no_std`) cannot make the call, so it
//! keeps `amx` unavailable until told the permission is held (`level::grant_amx`); [`request`]
//! asks and tells. The `miniquant` binary calls it first thing, before the command line (and its
//! `--level`) is read. It is only asked for where the CPU has AMX and the OS saves its state.
//!
//! The grant makes the level available and the automatic choice: the same bits as every level,
//! its tiles run the packed matmul from 16 columns (faster than `avx512vnni`'s where measured),
//! every other kernel is `avx512vnni`'s. A library user who wants it calls [`request`] too.

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

    /// The request grants exactly where the CPU has AMX (and the kernel agrees); `amx` is then
    /// the detected level and the one in effect (unless `MINIQUANT_LEVEL` names another), also
    /// when both were resolved before the request (unless another test of this binary asked
    /// first, as `parallel`'s may).
    #[test]
    fn request_grants_only_where_amx_is_and_makes_it_the_automatic_level() {
        let _detected_before = level::detect();
        let _current_before = level::current();
        let granted = super::request();
        assert_eq!(granted, Level::Amx.is_available());
        if !level::amx_supported() {
            assert!(!granted);
            eprintln!("no AMX on this CPU: the amx level is not run");
        }
        assert_eq!(level::detect() == Level::Amx, granted);
        let named = level::env_level().ok().flatten();
        assert_eq!(level::current(), named.unwrap_or_else(level::detect));
        // Idempotent.
        assert_eq!(super::request(), granted);
    }
}
