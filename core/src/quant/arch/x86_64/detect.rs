//! Run-time CPU feature detection with `cpuid` and `xgetbv` from `core::arch`, so a `no_std` build
//! finds AVX2 and AVX-512 as the `std` one does (no operating system call is needed: the OS states
//! which register files it saves in XCR0, which `xgetbv` reads).
//!
//! A feature counts only if the CPU has it and the OS saves the registers it uses: YMM state
//! (XCR0 bits 1 and 2) for AVX2, and opmask plus both halves of the ZMM state (bits 5, 6 and 7)
//! for AVX-512, as the Intel SDM (vol. 1, 13.3 and 15.2) prescribes; AMX likewise needs the tile
//! configuration and tile data components saved (XCR0 bits 17 and 18, SDM vol. 1, 13.3 and the
//! AMX chapter, "Detecting Intel AMX support"), and on top of that a grant the OS may require per
//! process (see [`amx`]).

use core::arch::x86_64::{__cpuid, __cpuid_count, _xgetbv};
use core::sync::atomic::{AtomicU8, Ordering};

/// The features the kernels use, as detected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Features {
    /// AVX2 and F16C with YMM state saved.
    pub avx2: bool,
    /// AVX-512 F, BW, VL and VNNI with ZMM and opmask state saved, on top of `avx2`.
    pub avx512vnni: bool,
    /// AVX-512 VBMI (`vpermb`) on top of `avx512vnni`.
    pub avx512vbmi: bool,
}

const AVX2: u8 = 1;
const AVX512VNNI: u8 = 2;
const AVX512VBMI: u8 = 4;
/// AMX-TILE and AMX-INT8 with their state saved, on top of `AVX512VNNI`.
const AMX: u8 = 8;
/// Set once the bits above are known.
const KNOWN: u8 = 0x80;

/// The detected features, `KNOWN` plus their bits once [`features`] ran.
static CACHE: AtomicU8 = AtomicU8::new(0);

/// The detected bits, `KNOWN` included (queried once, then cached).
fn cached() -> u8 {
    let mut bits = CACHE.load(Ordering::Relaxed);
    if bits & KNOWN == 0 {
        bits = query() | KNOWN;
        CACHE.store(bits, Ordering::Relaxed);
    }
    bits
}

/// Whether the CPU has AMX-TILE and AMX-INT8 with the palette the kernels use, the OS saves the
/// tile state (XCR0), and [`features`] reports AVX-512 VNNI (so hiding VNNI in a test hides AMX).
/// This is not yet permission to run a tile instruction: Linux also wants the process to ask
/// (`arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA)`), and firmware must have set XCR0 itself; the
/// level checks add the grant (`level::grant_amx`).
pub(crate) fn amx() -> bool {
    cached() & AMX != 0 && features().avx512vnni
}

/// The features of this CPU and OS (queried once, then cached).
pub(crate) fn features() -> Features {
    let bits = cached();
    #[cfg(test)]
    let bits = {
        let hidden = hidden();
        let hidden_bits = (hidden.avx2 as u8 * AVX2)
            | (hidden.avx512vnni as u8 * AVX512VNNI)
            | (hidden.avx512vbmi as u8 * AVX512VBMI);
        bits & !hidden_bits
    };
    Features {
        avx2: bits & AVX2 != 0,
        avx512vnni: bits & AVX512VNNI != 0,
        avx512vbmi: bits & AVX512VBMI != 0,
    }
}

#[cfg(test)]
std::thread_local! {
    /// Features a test hides from [`features`] on its thread.
    static HIDDEN: core::cell::Cell<Features> = const {
        core::cell::Cell::new(Features { avx2: false, avx512vnni: false, avx512vbmi: false })
    };
}

/// Hides the features set in `hidden` from [`features`] (and so from the level checks and the
/// tokens) on this thread, until the next call: a test's way to run where the CPU lacks them.
#[cfg(test)]
pub(crate) fn hide(hidden: Features) {
    HIDDEN.with(|h| h.set(hidden));
}

/// The features hidden on this thread.
#[cfg(test)]
pub(crate) fn hidden() -> Features {
    HIDDEN.with(|h| h.get())
}

fn bit(word: u32, n: u32) -> bool {
    word >> n & 1 == 1
}

fn query() -> u8 {
    // SAFETY: `cpuid` exists on every x86_64 CPU; leaf 0 gives the highest basic leaf.
    #[allow(unused_unsafe)]
    let max_leaf = unsafe { __cpuid(0) }.eax;
    if max_leaf < 7 {
        return 0;
    }
    // SAFETY: leaves 1 and 7 are at most `max_leaf`.
    #[allow(unused_unsafe)]
    let (leaf1, leaf7) = unsafe { (__cpuid(1), __cpuid_count(7, 0)) };
    // Leaf 1 ECX: OSXSAVE 27, AVX 28, F16C 29.
    let osxsave = bit(leaf1.ecx, 27);
    if !osxsave {
        return 0;
    }
    // SAFETY: OSXSAVE says the OS enabled `xgetbv` (CR4.OSXSAVE), so it does not fault.
    let xcr0 = unsafe { xcr0() };
    let ymm_saved = xcr0 & 0b110 == 0b110;
    let zmm_saved = xcr0 & 0b1110_0110 == 0b1110_0110;
    // Leaf 7 EBX: AVX2 5, AVX512F 16, AVX512BW 30, AVX512VL 31; ECX: AVX512VBMI 1, AVX512VNNI 11.
    let avx2 = ymm_saved && bit(leaf1.ecx, 28) && bit(leaf1.ecx, 29) && bit(leaf7.ebx, 5);
    let avx512vnni = avx2
        && zmm_saved
        && bit(leaf7.ebx, 16)
        && bit(leaf7.ebx, 30)
        && bit(leaf7.ebx, 31)
        && bit(leaf7.ecx, 11);
    let avx512vbmi = avx512vnni && bit(leaf7.ecx, 1);
    // Leaf 7 EDX: AMX-TILE 24, AMX-INT8 25; XCR0: XTILECFG 17, XTILEDATA 18 (both or neither).
    let tiles_saved = xcr0 >> 17 & 0b11 == 0b11;
    let amx = avx512vnni
        && tiles_saved
        && bit(leaf7.edx, 24)
        && bit(leaf7.edx, 25)
        && max_leaf >= 0x1e
        && palette_fits();
    (avx2 as u8 * AVX2)
        | (avx512vnni as u8 * AVX512VNNI)
        | (avx512vbmi as u8 * AVX512VBMI)
        | (amx as u8 * AMX)
}

/// Whether tile palette 1 has the shape the AMX kernels configure: eight tiles of up to 16 rows
/// of 64 bytes (CPUID leaf 1DH, sub-leaf 1: EBX[15:0] bytes per row, EBX[31:16] tile names,
/// ECX[15:0] rows), and the multiplier takes K = 16 rows and N = 64 bytes (leaf 1EH, sub-leaf 0:
/// EBX[7:0] `tmul_maxk`, EBX[23:8] `tmul_maxn`), per the SDM's AMX CPUID tables.
fn palette_fits() -> bool {
    // SAFETY: the caller checked that the highest basic leaf is at least 1EH.
    #[allow(unused_unsafe)]
    let (palettes, palette1, tmul) = unsafe {
        (
            __cpuid_count(0x1d, 0),
            __cpuid_count(0x1d, 1),
            __cpuid_count(0x1e, 0),
        )
    };
    palettes.eax >= 1
        && palette1.ebx & 0xffff >= 64
        && palette1.ebx >> 16 >= 8
        && palette1.ecx & 0xffff >= 16
        && tmul.ebx & 0xff >= 16
        && (tmul.ebx >> 8) & 0xffff >= 64
}

/// XCR0, the register-state components the OS saves.
///
/// # Safety
/// The CPU must report OSXSAVE (CPUID.1:ECX bit 27).
#[target_feature(enable = "xsave")]
unsafe fn xcr0() -> u64 {
    // SAFETY: the caller checked OSXSAVE, which implies XSAVE.
    unsafe { _xgetbv(0) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The detection here agrees with the standard library's on this machine.
    #[test]
    fn agrees_with_std() {
        use std::is_x86_feature_detected as has;
        let avx2 = has!("avx2") && has!("f16c");
        let avx512vnni =
            avx2 && has!("avx512f") && has!("avx512bw") && has!("avx512vl") && has!("avx512vnni");
        let expected = Features {
            avx2,
            avx512vnni,
            avx512vbmi: avx512vnni && has!("avx512vbmi"),
        };
        assert_eq!(features(), expected);
        std::eprintln!("detected {expected:?}, AMX {}", amx());
        // The standard library names no AMX feature on stable; CPUID leaf 7 EDX bit 24 must be set
        // where AMX is found (and AMX implies the VNNI level).
        if amx() {
            // SAFETY: `amx()` found leaf 7 present.
            #[allow(unused_unsafe)]
            let leaf7 = unsafe { __cpuid_count(7, 0) };
            assert!(bit(leaf7.edx, 24) && bit(leaf7.edx, 25) && expected.avx512vnni);
        }
    }
}
