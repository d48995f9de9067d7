//! x86_64 kernels: AVX2 (with F16C) and AVX-512 VNNI (`vpdpbusd`, on top of AVX-512 F/BW/VL).
//!
//! Each kernel computes the integer parts of the scalar twin exactly in SIMD registers, then does
//! the float steps in the twin's order, one rounding at a time (no FMA contraction), so its bits
//! equal the twin's.
#![allow(unsafe_code)]

mod avx2;
mod avx512;
mod dequantize_k;
pub(crate) mod detect;
mod iq4_xs;
mod plain;
mod primitives;
mod q3_k;
mod qkx2_lanes;
mod quantize_k;
mod quantize_legacy;
mod quantize_q2_k;
mod rows;
mod vector;

use crate::quant::table::{ArchKernels, Ops};
#[cfg(test)]
std::thread_local! {
    /// Set by a test to run the VNNI level's K-quant kernels in their form without VBMI on this
    /// thread, on a CPU that has VBMI.
    pub(crate) static WITHOUT_VBMI: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

/// Whether the VNNI level's K-quant kernels may use AVX-512 VBMI's `vpermb` (see
/// `avx2::grouped`): known at compile time, or detected at run time. Both forms give the scalar
/// twin's bits.
fn vbmi() -> bool {
    #[cfg(test)]
    if WITHOUT_VBMI.with(|off| off.get()) {
        return false;
    }
    if cfg!(all(
        target_feature = "avx512vbmi",
        target_feature = "avx512vl"
    )) {
        return true;
    }
    detect::features().avx512vbmi
}

/// AVX2 + F16C.
pub(crate) const AVX2: ArchKernels = ArchKernels {
    q8_0: Ops {
        vec_dot: Some(avx2::vec_dot_q8_0),
        quantize: Some(avx2::quantize_q8_0),
        dequantize: Some(avx2::dequantize_q8_0),
        rows: Some(rows::rows_q8_0_avx2),
        ..Ops::NONE
    },
    q4_0: Ops {
        vec_dot: Some(avx2::vec_dot_q4_0),
        dequantize: Some(avx2::dequantize_q4_0),
        quantize: Some(quantize_legacy::quantize_q4_0),
        rows: Some(rows::rows_q4_0_avx2),
        ..Ops::NONE
    },
    q4_k: Ops {
        vec_dot: Some(avx2::vec_dot_q4_k),
        dequantize: Some(dequantize_k::dequantize_q4_k),
        quantize: Some(quantize_k::quantize_q4_k),
        rows: Some(rows::rows_q4_k_avx2),
        ..Ops::NONE
    },
    q6_k: Ops {
        vec_dot: Some(avx2::vec_dot_q6_k),
        dequantize: Some(avx2::dequantize_q6_k),
        quantize: Some(quantize_k::quantize_q6_k),
        rows: Some(rows::rows_q6_k_avx2),
        ..Ops::NONE
    },
    q4_1: Ops {
        vec_dot: Some(avx2::vec_dot_q4_1),
        dequantize: Some(avx2::dequantize_q4_1),
        rows: Some(rows::rows_q4_1_avx2),
        ..Ops::NONE
    },
    q5_0: Ops {
        vec_dot: Some(avx2::vec_dot_q5_0),
        dequantize: Some(avx2::dequantize_q5_0),
        quantize: Some(quantize_legacy::quantize_q5_0),
        rows: Some(rows::rows_q5_0_avx2),
        ..Ops::NONE
    },
    q5_1: Ops {
        vec_dot: Some(avx2::vec_dot_q5_1),
        dequantize: Some(avx2::dequantize_q5_1),
        rows: Some(rows::rows_q5_1_avx2),
        ..Ops::NONE
    },
    q2_k: Ops {
        vec_dot: Some(avx2::vec_dot_q2_k),
        dequantize: Some(dequantize_k::dequantize_q2_k),
        quantize: Some(quantize_q2_k::quantize_q2_k),
        rows: Some(rows::rows_q2_k_avx2),
        ..Ops::NONE
    },
    q5_k: Ops {
        vec_dot: Some(avx2::vec_dot_q5_k),
        dequantize: Some(dequantize_k::dequantize_q5_k),
        quantize: Some(quantize_k::quantize_q5_k),
        rows: Some(rows::rows_q5_k_avx2),
        ..Ops::NONE
    },
    q8_k: Ops {
        quantize: Some(avx2::quantize_q8_k),
        ..Ops::NONE
    },
    iq4_nl: Ops {
        vec_dot: Some(avx2::vec_dot_iq4_nl),
        dequantize: Some(avx2::dequantize_iq4_nl),
        ..Ops::NONE
    },
    mxfp4: Ops {
        vec_dot: Some(avx2::vec_dot_mxfp4),
        dequantize: Some(avx2::dequantize_mxfp4),
        ..Ops::NONE
    },
    q3_k: Ops {
        vec_dot: Some(q3_k::vec_dot),
        dequantize: Some(dequantize_k::dequantize_q3_k),
        rows: Some(rows::rows_q3_k_avx2),
        ..Ops::NONE
    },
    iq4_xs: Ops {
        vec_dot: Some(iq4_xs::vec_dot),
        dequantize: Some(iq4_xs::dequantize),
        ..Ops::NONE
    },
    f32: Ops {
        dequantize: Some(plain::dequantize_f32),
        quantize: Some(plain::quantize_f32),
        vec_dot: Some(plain::vec_dot_f32_avx2),
        ..Ops::NONE
    },
    f16: Ops {
        dequantize: Some(plain::dequantize_f16_avx2),
        quantize: Some(plain::quantize_f16_avx2),
        vec_dot: Some(plain::vec_dot_f16_avx2),
        ..Ops::NONE
    },
    bf16: Ops {
        dequantize: Some(plain::dequantize_bf16_avx2),
        quantize: Some(plain::quantize_bf16_avx2),
        vec_dot: Some(plain::vec_dot_bf16_avx2),
        ..Ops::NONE
    },
    ..ArchKernels::NONE
};

/// AVX-512 VNNI; kernels not set here fall back to the AVX2 ones.
pub(crate) const AVX512VNNI: ArchKernels = ArchKernels {
    q8_0: Ops {
        vec_dot: Some(avx512::vec_dot_q8_0),
        rows: Some(rows::rows_q8_0_vnni),
        ..Ops::NONE
    },
    q4_0: Ops {
        vec_dot: Some(avx512::vec_dot_q4_0),
        rows: Some(rows::rows_q4_0_vnni),
        ..Ops::NONE
    },
    q4_1: Ops {
        rows: Some(rows::rows_q4_1_vnni),
        ..Ops::NONE
    },
    q5_0: Ops {
        rows: Some(rows::rows_q5_0_vnni),
        ..Ops::NONE
    },
    q5_1: Ops {
        rows: Some(rows::rows_q5_1_vnni),
        ..Ops::NONE
    },
    q4_k: Ops {
        vec_dot: Some(avx512::vec_dot_q4_k),
        rows: Some(rows::rows_q4_k_vnni),
        ..Ops::NONE
    },
    q5_k: Ops {
        vec_dot: Some(avx512::vec_dot_q5_k),
        rows: Some(rows::rows_q5_k_vnni),
        ..Ops::NONE
    },
    q6_k: Ops {
        vec_dot: Some(avx512::vec_dot_q6_k),
        rows: Some(rows::rows_q6_k_vnni),
        ..Ops::NONE
    },
    q3_k: Ops {
        vec_dot: Some(avx512::vec_dot_q3_k),
        rows: Some(rows::rows_q3_k_vnni),
        ..Ops::NONE
    },
    f32: Ops {
        vec_dot: Some(plain::vec_dot_f32_avx512),
        ..Ops::NONE
    },
    f16: Ops {
        dequantize: Some(plain::dequantize_f16_avx512),
        quantize: Some(plain::quantize_f16_avx512),
        vec_dot: Some(plain::vec_dot_f16_avx512),
        ..Ops::NONE
    },
    bf16: Ops {
        dequantize: Some(plain::dequantize_bf16_avx512),
        quantize: Some(plain::quantize_bf16_avx512),
        vec_dot: Some(plain::vec_dot_bf16_avx512),
        ..Ops::NONE
    },
    ..ArchKernels::NONE
};
