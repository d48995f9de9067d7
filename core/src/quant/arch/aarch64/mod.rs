//! AArch64 kernels: NEON baseline, `dotprod` (`sdot`) and `i8mm` (`smmla`). Placeholder sets with
//! no overrides yet (every type runs its scalar twin); the NEON kernels fill these in.

use crate::quant::table::ArchKernels;

/// Baseline Advanced SIMD.
pub(crate) const NEON: ArchKernels = ArchKernels::NONE;
/// NEON with `dotprod`.
pub(crate) const DOTPROD: ArchKernels = ArchKernels::NONE;
/// NEON with `dotprod` and `i8mm`.
pub(crate) const I8MM: ArchKernels = ArchKernels::NONE;
