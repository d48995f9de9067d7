//! Per-architecture SIMD kernels, the only code of the crate besides zero-copy casts that uses
//! `unsafe`. Each architecture module provides one [`ArchKernels`](super::table::ArchKernels)
//! constant per [`Level`](super::level::Level) it implements; [`pick!`] reads one field of those
//! constants for a level, walking the level's fallback chain, and the table falls back to the
//! scalar twin when no level has the kernel.
//!
//! Every kernel here has the exact signature of its scalar twin and must return the same bits
//! (the level tests check that for every level the CPU has). On x86_64 each kernel entry takes a
//! capability token, made only by the level check (`x86_64::tokens`); the table's entries make
//! it after `pick!`'s check, the one place that does so unchecked. A `#[target_feature]` function
//! thus never runs on a CPU that lacks the feature.
//!
//! Built with `--cfg miniquant_disable_simd`, no architecture module is compiled.

#[cfg(all(target_arch = "x86_64", not(miniquant_disable_simd)))]
pub(crate) mod x86_64;

#[cfg(all(target_arch = "aarch64", not(miniquant_disable_simd)))]
pub(crate) mod aarch64;

/// The SIMD kernel for `field.op` (e.g. `q8_0.vec_dot`) at `level`, or `None` if no level of its
/// chain has one. A level the CPU lacks is treated as `Scalar` (callers that take a level from
/// users report that as an error first); this check is what lets the table's entries make their
/// level's capability token.
///
/// The constants are read by value, field by field, so only the kernel picked is referenced (and
/// linked), not the whole set.
macro_rules! pick {
    ($level:expr, $field:ident . $op:ident) => {{
        let requested: $crate::quant::level::Level = $level;
        #[allow(unused_mut, unused_assignments)]
        let mut level = if requested.is_available() {
            requested
        } else {
            $crate::quant::level::Level::Scalar
        };
        loop {
            #[allow(unreachable_patterns)]
            let found = match level {
                #[cfg(all(target_arch = "x86_64", not(miniquant_disable_simd)))]
                $crate::quant::level::Level::Avx2 => $crate::quant::arch::x86_64::AVX2.$field.$op,
                #[cfg(all(target_arch = "x86_64", not(miniquant_disable_simd)))]
                $crate::quant::level::Level::Avx512Vnni => {
                    $crate::quant::arch::x86_64::AVX512VNNI.$field.$op
                }
                #[cfg(all(target_arch = "x86_64", not(miniquant_disable_simd)))]
                $crate::quant::level::Level::Amx => $crate::quant::arch::x86_64::AMX.$field.$op,
                #[cfg(all(target_arch = "aarch64", not(miniquant_disable_simd)))]
                $crate::quant::level::Level::Neon => $crate::quant::arch::aarch64::NEON.$field.$op,
                #[cfg(all(target_arch = "aarch64", not(miniquant_disable_simd)))]
                $crate::quant::level::Level::Dotprod => {
                    $crate::quant::arch::aarch64::DOTPROD.$field.$op
                }
                #[cfg(all(target_arch = "aarch64", not(miniquant_disable_simd)))]
                $crate::quant::level::Level::I8mm => $crate::quant::arch::aarch64::I8MM.$field.$op,
                _ => None,
            };
            if found.is_some() {
                break found;
            }
            match level.fallback() {
                Some(next) => level = next,
                None => break None,
            }
        }
    }};
}
pub(crate) use pick;
