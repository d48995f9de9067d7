//! AArch64 kernels: NEON (every AArch64 core), `dotprod` (`sdot`) and `i8mm` (`smmla`).
//!
//! Each kernel has the signature of its scalar twin and returns the same bits: integer sums are
//! exact in any order, and every float step is the scalar reference's, in its order, unfused (LLVM
//! does not contract `fmul` + `fadd` on AArch64 unless asked to). Inputs the fast path cannot take
//! exactly (NaN in a quantizer's input, out-of-range conversions) go to the scalar twin.
//!
//! `vdotq_s32` and `vmmlaq_s32` are unstable, so `sdot` and `smmla` are written as inline `asm!`
//! inside `#[target_feature]` functions ([`ops`]). The public `dotprod` / `i8mm` entry points are
//! safe: they check the feature (at compile time, or once at run time with `std`) and otherwise
//! run the NEON kernel, which gives the same bits.
//!
//! The K-quant vec_dots have no `sdot` form: ggml's generic order scales and accumulates eight lanes
//! per super-block in float, lane = element index mod 8, while `sdot` sums four *consecutive* bytes.
//! Widening multiply-accumulates (`smull`/`smlal`) land each product in its lane for free; an `sdot`
//! form would first have to shuffle both operands (4 `tbl` per 32 values) and costs more.
#![allow(unsafe_code)]

pub mod dequantize;
mod ops;
pub mod q4_0;
pub mod q4_k;
pub mod q6_k;
pub mod q8_0;
pub mod q8_k;
#[cfg(test)]
mod tests;

/// Whether `sdot` may run: compiled in, or detected at run time (with `std`).
#[inline]
pub fn has_dotprod() -> bool {
    #[cfg(target_feature = "dotprod")]
    {
        true
    }
    #[cfg(all(not(target_feature = "dotprod"), any(test, feature = "std")))]
    {
        std::arch::is_aarch64_feature_detected!("dotprod")
    }
    #[cfg(all(not(target_feature = "dotprod"), not(any(test, feature = "std"))))]
    {
        false
    }
}

/// Whether `smmla` may run: compiled in, or detected at run time (with `std`).
#[inline]
pub fn has_i8mm() -> bool {
    #[cfg(target_feature = "i8mm")]
    {
        true
    }
    #[cfg(all(not(target_feature = "i8mm"), any(test, feature = "std")))]
    {
        std::arch::is_aarch64_feature_detected!("i8mm")
    }
    #[cfg(all(not(target_feature = "i8mm"), not(any(test, feature = "std"))))]
    {
        false
    }
}
