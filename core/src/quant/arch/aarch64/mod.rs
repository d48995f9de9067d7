//! AArch64 kernels: NEON (every AArch64 core), `dotprod` (`sdot`) and `i8mm` (`smmla`), one
//! [`ArchKernels`] set per level.
//!
//! Each kernel has the signature of its scalar twin and returns the same bits: integer sums are
//! exact in any order, and every float step is the scalar reference's, in its order, unfused (LLVM
//! does not contract `fmul` + `fadd` on AArch64 unless asked to). Inputs the fast path cannot take
//! exactly (NaN in a quantizer's input, out-of-range conversions) go to the scalar twin.
//!
//! `vdotq_s32` and `vmmlaq_s32` are unstable, so `sdot` and `smmla` are written as inline `asm!`
//! inside `#[target_feature]` functions (`kernels::ops`). The `dotprod` / `i8mm` entry points check the
//! level themselves as well (besides `pick!`) and otherwise run the NEON kernel, same bits.
//!
//! The K-quant vec_dots have no `sdot` form: ggml's generic order scales and accumulates eight lanes
//! per super-block in float, lane = element index mod 8, while `sdot` sums four *consecutive* bytes.
//! Widening multiply-accumulates (`smull`/`smlal`) land each product in its lane for free; an `sdot`
//! form would first have to shuffle both operands (4 `tbl` per 32 values) and costs more. So the
//! `dotprod` level inherits the K-quant kernels from NEON. Q2_K is the exception: its generic dot is
//! one integer total per super-block, so it has an `sdot` form.
//!
//! `i8mm` fills the table's `vec_dot_2x2` slot (two rows × two columns per `smmla`) for the
//! 32-value types (`kernels::mmla`); its one-pair vec_dots are the `dotprod` ones.
//!
//! Every level fills the table's `matmul` slot for the 32-value types (`kernels::matmul`): register
//! tiles of four rows × eight columns (four or two for the last columns) with widening multiplies,
//! `sdot` by element on word-transposed weights or `smmla` on row and column pairs, each output
//! with its scalar vec_dot's bits. matmul takes them before the 2×2 slot.
//!
//! Q4_K, Q5_K, Q6_K, Q3_K and Q2_K fill the NEON `matmul` slot (`kernels::k_matmul`): one row × four columns
//! per tile, each super-block's decode shared by the columns, the vec_dots' widening multiplies and
//! float steps per output. The `dotprod` and `i8mm` levels inherit them: an `sdot` form (operands
//! reordered by lane, scales by summation by parts) was built and tested but executed more
//! instructions than the NEON tile (docs/kernel-experiments.md), and `smmla`'s 8-byte groups do not
//! fit a K-quant sub-block's four elements per lane. Q2_K (one integer total, no lanes) also has
//! `sdot` tiles at `dotprod`.
//!
//! IQ4_XS fills the `matmul` slot too (`kernels::iq4_xs`): its twin sums each 32-value group in one
//! integer, so its tiles are the 32-value tiles with a group as the block (NEON four rows × four
//! columns at every level, `sdot` four rows × eight columns at `dotprod`, `smmla` at `i8mm`),
//! each super-block's `d` and group scales decoded once per tile.
//!
//! The kernels are compiled for little-endian targets with NEON (block fields are read as native
//! integers); elsewhere (`aarch64_be`, soft-float) the sets are empty and the scalar twins run.
#![allow(unsafe_code)]

#[cfg(not(all(target_endian = "little", target_feature = "neon")))]
use crate::quant::table::ArchKernels;

#[cfg(all(target_endian = "little", target_feature = "neon"))]
pub(crate) mod kernels {
    pub mod dequantize;
    pub mod iq4_xs;
    pub mod k_matmul;
    #[cfg(test)]
    mod k_matmul_tests;
    pub mod matmul;
    #[cfg(test)]
    mod matmul_tests;
    pub mod mmla;
    pub mod nibbles;
    mod ops;
    pub mod plain;
    pub mod q2_k;
    pub mod q3_k;
    pub mod q4_0;
    pub mod q4_k;
    pub mod q5_k;
    pub mod q6_k;
    pub mod q8_0;
    pub mod q8_k;
    pub mod row_forms;
    #[cfg(test)]
    mod tests;

    use crate::quant::level::Level;

    /// Whether `sdot` may run (compiled in, or detected at run time with `std`).
    #[inline]
    pub fn has_dotprod() -> bool {
        Level::Dotprod.is_available()
    }

    /// Whether `smmla` may run (compiled in, or detected at run time with `std`).
    #[inline]
    pub fn has_i8mm() -> bool {
        Level::I8mm.is_available()
    }
}

#[cfg(all(target_endian = "little", target_feature = "neon"))]
mod sets {
    use super::kernels::{
        iq4_xs, k_matmul, matmul, mmla, nibbles as n, plain, q2_k, q3_k, q4_0, q4_k, q5_k, q6_k,
        q8_0, row_forms,
    };
    use crate::quant::table::{ArchKernels, Ops};

    /// Baseline Advanced SIMD.
    pub(crate) const NEON: ArchKernels = ArchKernels {
        q8_0: Ops {
            dequantize: Some(row_forms::dequantize_q8_0),
            quantize: Some(row_forms::quantize_q8_0),
            vec_dot: Some(q8_0::vec_dot),
            matmul: Some(matmul::neon),
            ..Ops::NONE
        },
        q8_1: Ops {
            quantize: Some(row_forms::quantize_q8_1),
            ..Ops::NONE
        },
        q8_k: Ops {
            quantize: Some(row_forms::quantize_q8_k),
            ..Ops::NONE
        },
        q4_0: Ops {
            dequantize: Some(row_forms::dequantize_q4_0),
            vec_dot: Some(q4_0::vec_dot),
            matmul: Some(matmul::neon),
            ..Ops::NONE
        },
        q4_1: Ops {
            dequantize: Some(row_forms::dequantize_q4_1),
            vec_dot: Some(n::vec_dot_q4_1),
            matmul: Some(matmul::neon),
            ..Ops::NONE
        },
        q5_0: Ops {
            dequantize: Some(row_forms::dequantize_q5_0),
            vec_dot: Some(n::vec_dot_q5_0),
            matmul: Some(matmul::neon),
            ..Ops::NONE
        },
        q5_1: Ops {
            dequantize: Some(row_forms::dequantize_q5_1),
            vec_dot: Some(n::vec_dot_q5_1),
            matmul: Some(matmul::neon),
            ..Ops::NONE
        },
        iq4_nl: Ops {
            dequantize: Some(row_forms::dequantize_iq4_nl),
            vec_dot: Some(n::vec_dot_iq4_nl),
            matmul: Some(matmul::neon),
            ..Ops::NONE
        },
        q2_k: Ops {
            dequantize: Some(row_forms::dequantize_q2_k),
            vec_dot: Some(q2_k::vec_dot),
            matmul: Some(k_matmul::q2_k_neon),
            ..Ops::NONE
        },
        q3_k: Ops {
            dequantize: Some(row_forms::dequantize_q3_k),
            vec_dot: Some(q3_k::vec_dot),
            matmul: Some(k_matmul::q3_k_neon),
            ..Ops::NONE
        },
        q4_k: Ops {
            dequantize: Some(row_forms::dequantize_q4_k),
            vec_dot: Some(q4_k::vec_dot),
            matmul: Some(k_matmul::q4_k_neon),
            ..Ops::NONE
        },
        q5_k: Ops {
            dequantize: Some(row_forms::dequantize_q5_k),
            vec_dot: Some(q5_k::vec_dot),
            matmul: Some(k_matmul::q5_k_neon),
            ..Ops::NONE
        },
        q6_k: Ops {
            dequantize: Some(row_forms::dequantize_q6_k),
            vec_dot: Some(q6_k::vec_dot),
            matmul: Some(k_matmul::q6_k_neon),
            ..Ops::NONE
        },
        iq4_xs: Ops {
            dequantize: Some(row_forms::dequantize_iq4_xs),
            vec_dot: Some(iq4_xs::vec_dot),
            matmul: Some(iq4_xs::matmul_neon),
            ..Ops::NONE
        },
        mxfp4: Ops {
            dequantize: Some(row_forms::dequantize_mxfp4),
            vec_dot: Some(n::vec_dot_mxfp4),
            matmul: Some(matmul::neon),
            ..Ops::NONE
        },
        f32: Ops {
            dequantize: Some(plain::dequantize_f32),
            vec_dot: Some(plain::vec_dot_f32),
            ..Ops::NONE
        },
        f16: Ops {
            dequantize: Some(plain::dequantize_f16),
            vec_dot: Some(plain::vec_dot_f16),
            ..Ops::NONE
        },
        bf16: Ops {
            dequantize: Some(plain::dequantize_bf16),
            vec_dot: Some(plain::vec_dot_bf16),
            ..Ops::NONE
        },
        ..ArchKernels::NONE
    };

    /// NEON with `dotprod`: `sdot` for the 32-value types, everything else from NEON.
    pub(crate) const DOTPROD: ArchKernels = ArchKernels {
        q8_0: Ops {
            vec_dot: Some(q8_0::vec_dot_dotprod),
            matmul: Some(matmul::dotprod),
            ..Ops::NONE
        },
        q4_0: Ops {
            vec_dot: Some(q4_0::vec_dot_dotprod),
            matmul: Some(matmul::dotprod),
            ..Ops::NONE
        },
        q4_1: Ops {
            vec_dot: Some(n::vec_dot_q4_1_dotprod),
            matmul: Some(matmul::dotprod),
            ..Ops::NONE
        },
        q5_0: Ops {
            vec_dot: Some(n::vec_dot_q5_0_dotprod),
            matmul: Some(matmul::dotprod),
            ..Ops::NONE
        },
        q5_1: Ops {
            vec_dot: Some(n::vec_dot_q5_1_dotprod),
            matmul: Some(matmul::dotprod),
            ..Ops::NONE
        },
        iq4_nl: Ops {
            vec_dot: Some(n::vec_dot_iq4_nl_dotprod),
            matmul: Some(matmul::dotprod),
            ..Ops::NONE
        },
        q2_k: Ops {
            vec_dot: Some(q2_k::vec_dot_dotprod),
            matmul: Some(k_matmul::q2_k_dotprod),
            ..Ops::NONE
        },
        iq4_xs: Ops {
            vec_dot: Some(iq4_xs::vec_dot_dotprod),
            matmul: Some(iq4_xs::matmul_dotprod),
            ..Ops::NONE
        },
        mxfp4: Ops {
            vec_dot: Some(n::vec_dot_mxfp4_dotprod),
            matmul: Some(matmul::dotprod),
            ..Ops::NONE
        },
        ..ArchKernels::NONE
    };

    /// NEON with `dotprod` and `i8mm`: `smmla` 2×2 tiles for matmul; everything else from
    /// `dotprod`.
    pub(crate) const I8MM: ArchKernels = ArchKernels {
        q8_0: Ops {
            vec_dot_2x2: Some(mmla::q8_0_2x2),
            matmul: Some(matmul::i8mm),
            ..Ops::NONE
        },
        q4_0: Ops {
            vec_dot_2x2: Some(mmla::q4_0_2x2),
            matmul: Some(matmul::i8mm),
            ..Ops::NONE
        },
        q4_1: Ops {
            vec_dot_2x2: Some(mmla::q4_1_2x2),
            matmul: Some(matmul::i8mm),
            ..Ops::NONE
        },
        q5_0: Ops {
            vec_dot_2x2: Some(mmla::q5_0_2x2),
            matmul: Some(matmul::i8mm),
            ..Ops::NONE
        },
        q5_1: Ops {
            vec_dot_2x2: Some(mmla::q5_1_2x2),
            matmul: Some(matmul::i8mm),
            ..Ops::NONE
        },
        iq4_nl: Ops {
            vec_dot_2x2: Some(mmla::iq4_nl_2x2),
            matmul: Some(matmul::i8mm),
            ..Ops::NONE
        },
        mxfp4: Ops {
            vec_dot_2x2: Some(mmla::mxfp4_2x2),
            matmul: Some(matmul::i8mm),
            ..Ops::NONE
        },
        iq4_xs: Ops {
            matmul: Some(iq4_xs::matmul_i8mm),
            ..Ops::NONE
        },
        ..ArchKernels::NONE
    };
}
#[cfg(all(target_endian = "little", target_feature = "neon"))]
pub(crate) use sets::{DOTPROD, I8MM, NEON};

/// Without NEON or on big-endian: no overrides.
#[cfg(not(all(target_endian = "little", target_feature = "neon")))]
pub(crate) const NEON: ArchKernels = ArchKernels::NONE;
/// Without NEON or on big-endian: no overrides.
#[cfg(not(all(target_endian = "little", target_feature = "neon")))]
pub(crate) const DOTPROD: ArchKernels = ArchKernels::NONE;
/// Without NEON or on big-endian: no overrides.
#[cfg(not(all(target_endian = "little", target_feature = "neon")))]
pub(crate) const I8MM: ArchKernels = ArchKernels::NONE;
