//! Kernel levels: which instruction-set extension the quant kernels may use, and how one is chosen.
//!
//! Every level computes the same bits (the scalar reference's); a level only decides speed. The
//! level in effect is, in order of precedence:
//! 1. a level forced with [`set_level`] (tests, benchmarks, the CLI's `--level`);
//! 2. under the `std` feature, the environment variable `MINIQUANT_LEVEL` (read once; a name that
//!    does not parse or a level this CPU lacks is ignored here, the CLI reports it as an error);
//! 3. the best level the CPU has: known at compile time from `cfg(target_feature)` (bare metal,
//!    `-C target-cpu`), else detected at run time once and cached in an atomic: on x86_64 in
//!    every build (`cpuid`), on aarch64 under `std`.
//!
//! The `amx` level needs more than the CPU: the OS must let the process use the tile registers.
//! Linux asks for a per-process request (`arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA)`), which
//! this `no_std` crate cannot make; bare-metal firmware enables the tile state in XCR0 itself.
//! Whoever did so says it with [`grant_amx`] (the `std` adapter does, after its request
//! succeeded); without that grant `amx` is unavailable, and with it `amx` is the detected level
//! (a grant after the level was first detected takes effect from then on).
//!
//! Built with `--cfg miniquant_disable_simd`, only [`Level::Scalar`] exists at run time and no
//! SIMD code is compiled.

use core::fmt;
use core::sync::atomic::{AtomicBool, AtomicU8, Ordering};

pub use super::level_id::Level;

/// Why a level cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum LevelError {
    /// The name is none of `scalar neon dotprod i8mm avx2 avx512vnni amx` (or `auto` where
    /// accepted).
    UnknownName,
    /// This CPU (or this build) does not have the level.
    Unavailable {
        /// The level asked for.
        level: Level,
        /// The best level this CPU and build have.
        best: Level,
    },
}

impl LevelError {
    /// `level` is unavailable here.
    pub(crate) fn unavailable(level: Level) -> LevelError {
        LevelError::Unavailable {
            level,
            best: detect(),
        }
    }
}

impl From<LevelError> for crate::Error {
    fn from(e: LevelError) -> crate::Error {
        match e {
            LevelError::UnknownName => crate::Error::LevelUnknown,
            LevelError::Unavailable { level, best } => {
                crate::Error::LevelUnavailable { level, best }
            }
        }
    }
}

/// The message is [`crate::Error`]'s, written once there.
impl fmt::Display for LevelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&crate::Error::from(*self), f)
    }
}

#[cfg(feature = "std")]
impl std::error::Error for LevelError {}

impl Level {
    /// Whether this CPU and build can run the level.
    pub fn is_available(self) -> bool {
        if self == Level::Scalar {
            return true;
        }
        if cfg!(miniquant_disable_simd) {
            return false;
        }
        compiled_in(self) || detected(self)
    }

    fn from_u8(v: u8) -> Option<Level> {
        Level::ALL.into_iter().find(|l| *l as u8 == v)
    }
}

impl core::str::FromStr for Level {
    type Err = LevelError;
    fn from_str(s: &str) -> Result<Level, LevelError> {
        Level::parse(s).ok_or(LevelError::UnknownName)
    }
}

/// Whether the compile-time target features already guarantee `level`.
#[allow(unreachable_code)]
const fn compiled_in(level: Level) -> bool {
    #[cfg(miniquant_disable_simd)]
    return matches!(level, Level::Scalar);
    match level {
        Level::Scalar => true,
        Level::Avx2 => cfg!(all(
            target_arch = "x86_64",
            target_feature = "avx2",
            target_feature = "f16c"
        )),
        Level::Avx512Vnni => cfg!(all(
            target_arch = "x86_64",
            target_feature = "avx2",
            target_feature = "f16c",
            target_feature = "avx512f",
            target_feature = "avx512bw",
            target_feature = "avx512vl",
            target_feature = "avx512vnni"
        )),
        Level::Neon => cfg!(all(target_arch = "aarch64", target_feature = "neon")),
        Level::Dotprod => cfg!(all(
            target_arch = "aarch64",
            target_feature = "neon",
            target_feature = "dotprod"
        )),
        Level::I8mm => cfg!(all(
            target_arch = "aarch64",
            target_feature = "neon",
            target_feature = "dotprod",
            target_feature = "i8mm"
        )),
        // Never known at compile time: the tiles also need the OS's (or firmware's) grant.
        Level::Amx => false,
    }
}

/// Set by [`grant_amx`].
static AMX_GRANTED: AtomicBool = AtomicBool::new(false);

/// Declares that this process may execute AMX tile instructions, and returns whether the `amx`
/// level is now available (the CPU has AMX-TILE and AMX-INT8, the OS saves the tile state, and
/// this build has SIMD). Without this call the `amx` level is never available; with it, `amx` is
/// the level [`detect`] gives and [`current`] uses unless a level was forced or named in
/// `MINIQUANT_LEVEL`.
///
/// # Safety
/// The tile state must be enabled for this process, so that no tile instruction faults: on Linux,
/// `arch_prctl(ARCH_REQ_XCOMP_PERM, 18)` (permission for XTILEDATA) returned success in this
/// process; on bare metal, XCR0 bits 17 and 18 are set (and XFD does not trap the tiles) on every
/// core that runs the kernels.
#[allow(unsafe_code)] // The contract is the caller's; this body has no unsafe operation.
pub unsafe fn grant_amx() -> bool {
    AMX_GRANTED.store(true, Ordering::Relaxed);
    // Detected again on the next call; the level in effect too, unless it was forced or named.
    DETECTED.store(UNKNOWN, Ordering::Relaxed);
    if CURRENT_IS_DETECTED.load(Ordering::Relaxed) {
        CURRENT.store(UNKNOWN, Ordering::Relaxed);
    }
    Level::Amx.is_available()
}

/// Whether the CPU has AMX-TILE and AMX-INT8 and the OS saves the tile state (XCR0), whether or
/// not the process was granted their use: what decides whether asking the OS is worth it.
pub fn amx_supported() -> bool {
    #[cfg(all(target_arch = "x86_64", not(miniquant_disable_simd)))]
    return super::arch::x86_64::detect::amx();
    #[allow(unreachable_code)]
    false
}

/// Whether the tiles may be used: granted, or in this crate's own tests, requested from the OS
/// by the test build itself (Linux), so that the level tests run `amx` wherever the CPU has it.
#[cfg(all(target_arch = "x86_64", not(miniquant_disable_simd)))]
fn amx_granted() -> bool {
    #[cfg(test)]
    if super::arch::x86_64::amx::request_for_tests() {
        return true;
    }
    AMX_GRANTED.load(Ordering::Relaxed)
}

/// Run-time detection. On x86_64 with `cpuid`/`xgetbv` in every build (no `std` needed), cached
/// there; on aarch64 under `std` (the standard library asks the OS), bare metal relies on
/// [`compiled_in`].
#[allow(unused_variables)]
fn detected(level: Level) -> bool {
    #[cfg(all(target_arch = "x86_64", not(miniquant_disable_simd)))]
    {
        let has = super::arch::x86_64::detect::features();
        return match level {
            Level::Avx2 => has.avx2,
            Level::Avx512Vnni => has.avx512vnni,
            Level::Amx => super::arch::x86_64::detect::amx() && amx_granted(),
            _ => false,
        };
    }
    #[cfg(all(
        any(test, feature = "std"),
        target_arch = "aarch64",
        not(miniquant_disable_simd)
    ))]
    {
        use std::arch::is_aarch64_feature_detected as has;
        let neon = has!("neon");
        return match level {
            Level::Neon => neon,
            Level::Dotprod => neon && has!("dotprod"),
            Level::I8mm => neon && has!("dotprod") && has!("i8mm"),
            _ => false,
        };
    }
    #[allow(unreachable_code)]
    false
}

/// "Not yet known" in the caches below; a level is stored as its discriminant plus one.
const UNKNOWN: u8 = 0;
/// The best level this CPU has, once detected.
static DETECTED: AtomicU8 = AtomicU8::new(UNKNOWN);
/// The level in effect (forced, from the environment, or detected), once resolved.
static CURRENT: AtomicU8 = AtomicU8::new(UNKNOWN);
/// Whether [`CURRENT`] holds the detected level (neither forced nor named in the environment).
static CURRENT_IS_DETECTED: AtomicBool = AtomicBool::new(false);

/// The best level this CPU and build have (detected once, then cached; again after
/// [`grant_amx`]).
pub fn detect() -> Level {
    if let Some(level) = Level::from_u8(DETECTED.load(Ordering::Relaxed).wrapping_sub(1)) {
        return level;
    }
    let best = Level::ALL
        .into_iter()
        .rev()
        .find(|l| l.is_available())
        .unwrap_or(Level::Scalar);
    DETECTED.store(best as u8 + 1, Ordering::Relaxed);
    best
}

/// The level the public kernel entry points use now.
pub fn current() -> Level {
    if let Some(level) = Level::from_u8(CURRENT.load(Ordering::Relaxed).wrapping_sub(1)) {
        return level;
    }
    let named = env_level().ok().flatten();
    let level = named.unwrap_or_else(detect);
    CURRENT_IS_DETECTED.store(named.is_none(), Ordering::Relaxed);
    CURRENT.store(level as u8 + 1, Ordering::Relaxed);
    level
}

/// Forces `level` for every later kernel call in this process, or fails if the CPU lacks it.
pub fn set_level(level: Level) -> Result<(), LevelError> {
    if !level.is_available() {
        return Err(LevelError::unavailable(level));
    }
    CURRENT_IS_DETECTED.store(false, Ordering::Relaxed);
    CURRENT.store(level as u8 + 1, Ordering::Relaxed);
    Ok(())
}

/// Parses a level name as the CLI and `MINIQUANT_LEVEL` take it: `auto` gives the detected level.
/// Fails for an unknown name or a level the CPU lacks.
pub fn resolve(name: &str) -> Result<Level, LevelError> {
    let level = if name == "auto" {
        detect()
    } else {
        Level::parse(name).ok_or(LevelError::UnknownName)?
    };
    if level.is_available() {
        Ok(level)
    } else {
        Err(LevelError::unavailable(level))
    }
}

/// The level named by the environment variable `MINIQUANT_LEVEL` (under `std`): `Ok(None)` when it
/// is unset or empty, an error when it names no level or one the CPU lacks.
pub fn env_level() -> Result<Option<Level>, LevelError> {
    #[cfg(feature = "std")]
    {
        match std::env::var("MINIQUANT_LEVEL") {
            Ok(name) if !name.is_empty() => resolve(&name).map(Some),
            Ok(_) | Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => Err(LevelError::UnknownName),
        }
    }
    #[cfg(not(feature = "std"))]
    Ok(None)
}

/// The levels this CPU and build have, lowest first (tests and benchmarks run each).
pub fn available() -> impl Iterator<Item = Level> {
    Level::ALL.into_iter().filter(|l| l.is_available())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for level in Level::ALL {
            assert_eq!(Level::parse(level.name()), Some(level));
            assert_eq!(level.name().parse::<Level>(), Ok(level));
        }
        assert_eq!(Level::parse("AVX2"), None);
        assert_eq!(resolve("fast"), Err(LevelError::UnknownName));
        assert_eq!(resolve("auto"), Ok(detect()));
    }

    #[test]
    fn chains_end_in_scalar_and_scalar_is_always_there() {
        for level in Level::ALL {
            let mut l = level;
            let mut steps = 0;
            while let Some(next) = l.fallback() {
                assert!(next < l);
                l = next;
                steps += 1;
            }
            assert_eq!(l, Level::Scalar);
            assert!(steps <= 3);
            // A level implies the whole chain below it.
            if level.is_available() {
                assert!(level.fallback().is_none_or(Level::is_available));
            }
        }
        assert!(Level::Scalar.is_available());
        assert!(detect().is_available());
    }

    /// `amx` exists only where the CPU has AMX (and, outside these tests, the OS's grant), and
    /// is then the detected level.
    #[test]
    fn amx_needs_the_cpu_and_is_detected_where_available() {
        assert_eq!(detect() == Level::Amx, Level::Amx.is_available());
        if !amx_supported() {
            assert!(!Level::Amx.is_available());
            assert_eq!(
                set_level(Level::Amx),
                Err(LevelError::unavailable(Level::Amx))
            );
            std::eprintln!("no AMX here: the amx level is not run");
        }
    }

    #[test]
    fn other_architectures_are_unavailable() {
        let x86 = [Level::Avx2, Level::Avx512Vnni, Level::Amx];
        let arm = [Level::Neon, Level::Dotprod, Level::I8mm];
        let foreign: &[Level] = if cfg!(target_arch = "x86_64") {
            &arm
        } else if cfg!(target_arch = "aarch64") {
            &x86
        } else {
            &[]
        };
        for &level in foreign {
            assert!(!level.is_available());
            assert_eq!(set_level(level), Err(LevelError::unavailable(level)));
        }
    }
}
