//! x86_64 kernels: AVX2 (with F16C) and AVX-512 VNNI (`vpdpbusd`, on top of AVX-512 F/BW/VL).
//!
//! Each kernel computes the integer parts of the scalar twin exactly in SIMD registers, then does
//! the float steps in the twin's order, one rounding at a time (no FMA contraction), so its bits
//! equal the twin's.
#![allow(unsafe_code)]

mod avx2;

use crate::quant::table::{ArchKernels, Ops};

/// AVX2 + F16C.
pub(crate) const AVX2: ArchKernels = ArchKernels {
    q8_0: Ops {
        vec_dot: Some(avx2::vec_dot_q8_0),
        ..Ops::NONE
    },
    q4_0: Ops {
        vec_dot: Some(avx2::vec_dot_q4_0),
        ..Ops::NONE
    },
    q4_k: Ops {
        vec_dot: Some(avx2::vec_dot_q4_k),
        ..Ops::NONE
    },
    q6_k: Ops {
        vec_dot: Some(avx2::vec_dot_q6_k),
        ..Ops::NONE
    },
    ..ArchKernels::NONE
};

/// AVX-512 VNNI; types without a VNNI kernel use the AVX2 one.
pub(crate) const AVX512VNNI: ArchKernels = ArchKernels::NONE;
