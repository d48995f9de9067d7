//! The kernel levels as plain data: the names, the order and the fallback chains. Imports
//! nothing, so the error type can name a level; which level this CPU has and which one is in
//! effect is [`super::level`]'s business.

use core::fmt;

/// A kernel level. Levels of one architecture form a chain: each includes the ones below it
/// (`I8mm` ⊃ `Dotprod` ⊃ `Neon` ⊃ `Scalar`, `Amx` ⊃ `Avx512Vnni` ⊃ `Avx2` ⊃ `Scalar`), and a kernel missing
/// at one level falls back to the next lower one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum Level {
    /// Portable Rust, the reference bits.
    Scalar = 0,
    /// AArch64 Advanced SIMD.
    Neon = 1,
    /// AArch64 with the `dotprod` extension (`sdot`).
    Dotprod = 2,
    /// AArch64 with `dotprod` and `i8mm` (`smmla`).
    I8mm = 3,
    /// x86_64 with AVX2 and F16C.
    Avx2 = 4,
    /// x86_64 with AVX-512 F/BW/VL and VNNI (`vpdpbusd`), on top of AVX2.
    Avx512Vnni = 5,
    /// x86_64 with AMX-TILE and AMX-INT8 (`tdpbssd` on tiles), on top of AVX-512 VNNI; usable
    /// only once the OS permission is granted (`level::grant_amx`), and then the automatic
    /// choice: its tiles run the packed matmul from 16 columns, every other kernel is
    /// `avx512vnni`'s.
    Amx = 6,
}

impl Level {
    /// Every level, lowest first.
    pub const ALL: [Level; 7] = [
        Level::Scalar,
        Level::Neon,
        Level::Dotprod,
        Level::I8mm,
        Level::Avx2,
        Level::Avx512Vnni,
        Level::Amx,
    ];

    /// The level's name: `scalar neon dotprod i8mm avx2 avx512vnni amx`.
    pub const fn name(self) -> &'static str {
        match self {
            Level::Scalar => "scalar",
            Level::Neon => "neon",
            Level::Dotprod => "dotprod",
            Level::I8mm => "i8mm",
            Level::Avx2 => "avx2",
            Level::Avx512Vnni => "avx512vnni",
            Level::Amx => "amx",
        }
    }

    /// The level named `name` (exactly as [`Level::name`] gives it).
    pub fn parse(name: &str) -> Option<Level> {
        Level::ALL.into_iter().find(|l| l.name() == name)
    }

    /// The next lower level of the same chain (`Scalar` has none).
    pub const fn fallback(self) -> Option<Level> {
        match self {
            Level::Scalar => None,
            Level::Neon | Level::Avx2 => Some(Level::Scalar),
            Level::Dotprod => Some(Level::Neon),
            Level::I8mm => Some(Level::Dotprod),
            Level::Avx512Vnni => Some(Level::Avx2),
            Level::Amx => Some(Level::Avx512Vnni),
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
