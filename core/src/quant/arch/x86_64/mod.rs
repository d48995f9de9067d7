//! x86_64 kernels: AVX2 (with F16C), AVX-512 VNNI (`vpdpbusd`, on top of AVX-512 F/BW/VL) and
//! AMX (`tdpbssd` tiles, on top of AVX-512 VNNI; the `amx` module).
//!
//! One module per block-type family, each with its vec_dot, multi-row (`rows`), dequantize and
//! quantize kernels at every level; beside them the level-independent helpers (`vector`), the
//! loops the families fill in (`drivers`), the per-level primitives (`primitives`), the
//! capability tokens (`tokens`) and CPU detection (`detect`).
//!
//! Each kernel computes the integer parts of the scalar twin exactly in SIMD registers, then does
//! the float steps in the twin's order, one rounding at a time (no FMA contraction), so its bits
//! equal the twin's.
#![allow(unsafe_code)]

mod activation;
pub(crate) use activation::sum_signed_bytes;
pub(crate) mod amx;
pub(crate) mod detect;
mod drivers;
mod iq4_xs;
mod k_matmul;
mod k_matmul_busd;
#[cfg(test)]
mod k_matmul_tests;
mod legacy;
mod plain;
mod primitives;
mod q2_k;
mod q3_k;
mod q4_k;
mod q6_k;
mod qkx2_lanes;
pub(crate) mod tokens;
mod vector;

use crate::quant::table::{ArchKernels, Ops};
use tokens::{Amx, Avx2, Avx512Vnni};

/// One level's [`ArchKernels`] from `field: { op: kernel, .. }` lists, each kernel an entry taking
/// the level's token `$T`; the table's plain function for it makes the token and calls it.
macro_rules! level_kernels {
    ($T:ident { $($field:ident: { $($op:ident: $kernel:path),* $(,)? }),* $(,)? }) => {
        ArchKernels {
            $($field: Ops { $($op: level_kernels!(@entry $T, $op, $kernel),)* ..Ops::NONE },)*
            ..ArchKernels::NONE
        }
    };
    (@entry $T:ident, dequantize, $kernel:path) => {
        level_kernels!(@with $T, $kernel, blocks, out)
    };
    (@entry $T:ident, quantize, $kernel:path) => {
        level_kernels!(@with $T, $kernel, values, blocks)
    };
    (@entry $T:ident, vec_dot, $kernel:path) => { level_kernels!(@with $T, $kernel, w, x) };
    (@entry $T:ident, rows, $kernel:path) => {
        level_kernels!(@with $T, $kernel, w, row_blocks, x, out)
    };
    (@entry $T:ident, matmul, $kernel:path) => {
        level_kernels!(@with $T, $kernel, w, row_blocks, x, n, y)
    };
    (@entry $T:ident, packed_rows, $kernel:path) => {
        level_kernels!(@with $T, $kernel, packed, row_blocks, x, out)
    };
    (@entry $T:ident, packed_matmul, $kernel:path) => {
        level_kernels!(@with $T, $kernel, packed, row_blocks, x, starts, n, y)
    };
    (@with $T:ident, $kernel:path, $($arg:ident),*) => {
        Some(|$($arg),*| {
            // SAFETY: the one place a token is made unchecked. This constant's kernels are reached
            // only through `pick!`, which reads it only for a level that `Level::is_available`
            // (the check `$T::try_new` makes) found on this CPU, so the CPU has `$T`'s features.
            let token = unsafe { $T::new_unchecked() };
            debug_assert!($T::try_new().is_some(), "a kernel table entry run without its level");
            $kernel(token, $($arg),*)
        })
    };
}

/// AVX2 + F16C.
pub(crate) const AVX2: ArchKernels = {
    let mut set = level_kernels!(Avx2 {
        q8_0: {
            vec_dot: legacy::vec_dot_q8_0,
            quantize: activation::quantize_q8_0,
            dequantize: legacy::dequantize_q8_0,
            rows: legacy::rows::rows_q8_0,
            matmul: legacy::matmul::matmul_q8_0,
            packed_rows: legacy::packed::packed_q8_0,
        },
        q8_1: {
            quantize: activation::quantize_q8_1,
        },
        q4_0: {
            vec_dot: legacy::vec_dot_q4_0,
            dequantize: legacy::dequantize_q4_0,
            quantize: legacy::quantize_q4_0,
            rows: legacy::rows::rows_q4_0,
            matmul: legacy::matmul::matmul_q4_0,
            packed_rows: legacy::packed::packed_q4_0,
        },
        q4_1: {
            vec_dot: legacy::vec_dot_q4_1,
            dequantize: legacy::dequantize_q4_1,
            rows: legacy::rows::rows_q4_1,
            matmul: legacy::matmul::matmul_q4_1,
            packed_rows: legacy::packed::packed_q4_1,
        },
        q5_0: {
            vec_dot: legacy::vec_dot_q5_0,
            dequantize: legacy::dequantize_q5_0,
            quantize: legacy::quantize_q5_0,
            rows: legacy::rows::rows_q5_0,
            matmul: legacy::matmul::matmul_q5_0,
            packed_rows: legacy::packed::packed_q5_0,
        },
        q5_1: {
            vec_dot: legacy::vec_dot_q5_1,
            dequantize: legacy::dequantize_q5_1,
            rows: legacy::rows::rows_q5_1,
            matmul: legacy::matmul::matmul_q5_1,
        },
        iq4_nl: {
            vec_dot: legacy::vec_dot_iq4_nl,
            dequantize: legacy::dequantize_iq4_nl,
            rows: legacy::rows::rows_iq4_nl,
            matmul: legacy::matmul::matmul_iq4_nl,
        },
        mxfp4: {
            vec_dot: legacy::vec_dot_mxfp4,
            dequantize: legacy::dequantize_mxfp4,
            rows: legacy::rows::rows_mxfp4,
        },
        q2_k: {
            vec_dot: q2_k::vec_dot,
            dequantize: q2_k::dequantize,
            quantize: q2_k::quantize_q2_k,
            rows: q2_k::rows,
        },
        q3_k: {
            vec_dot: q3_k::vec_dot,
            dequantize: q3_k::dequantize,
            rows: q3_k::rows,
            matmul: q3_k::matmul,
        },
        q4_k: {
            vec_dot: q4_k::vec_dot_q4_k,
            dequantize: q4_k::dequantize_q4_k,
            quantize: q4_k::quantize::quantize_q4_k,
            rows: q4_k::rows_q4_k,
            matmul: q4_k::matmul_q4_k,
        },
        q5_k: {
            vec_dot: q4_k::vec_dot_q5_k,
            dequantize: q4_k::dequantize_q5_k,
            quantize: q4_k::quantize::quantize_q5_k,
            rows: q4_k::rows_q5_k,
            matmul: q4_k::matmul_q5_k,
        },
        q6_k: {
            vec_dot: q6_k::vec_dot_q6_k,
            dequantize: q6_k::dequantize_q6_k,
            quantize: q6_k::quantize_q6_k,
            rows: q6_k::rows_q6_k,
            matmul: q6_k::matmul_q6_k,
        },
        q8_k: {
            quantize: activation::quantize_q8_k,
        },
        iq4_xs: {
            vec_dot: iq4_xs::vec_dot,
            dequantize: iq4_xs::dequantize,
            rows: iq4_xs::rows,
            matmul: iq4_xs::matmul,
        },
        f32: {
            vec_dot: plain::vec_dot_f32_avx2,
        },
        f16: {
            dequantize: plain::dequantize_f16_avx2,
            quantize: plain::quantize_f16_avx2,
            vec_dot: plain::vec_dot_f16_avx2,
        },
        bf16: {
            dequantize: plain::dequantize_bf16_avx2,
            quantize: plain::quantize_bf16_avx2,
            vec_dot: plain::vec_dot_bf16_avx2,
        },
    });
    // Byte copies, no SIMD (and no token): any level.
    set.f32.dequantize = Some(plain::dequantize_f32);
    set.f32.quantize = Some(plain::quantize_f32);
    set
};

/// AVX-512 VNNI; kernels not set here fall back to the AVX2 ones.
pub(crate) const AVX512VNNI: ArchKernels = level_kernels!(Avx512Vnni {
    q8_k: {
        quantize: activation::quantize_q8_k_512,
    },
    q8_0: {
        quantize: activation::quantize_q8_0_512,
        vec_dot: legacy::vec_dot_q8_0_vnni,
        rows: legacy::rows::rows_q8_0_vnni,
        matmul: legacy::matmul::matmul_q8_0_vnni,
        packed_rows: legacy::packed::packed_q8_0_vnni,
        packed_matmul: legacy::packed::packed_matmul_q8_0_vnni,
    },
    q8_1: {
        quantize: activation::quantize_q8_1_512,
    },
    q4_0: {
        vec_dot: legacy::vec_dot_q4_0_vnni,
        rows: legacy::rows::rows_q4_0_vnni,
        matmul: legacy::matmul::matmul_q4_0_vnni,
        packed_rows: legacy::packed::packed_q4_0_vnni,
        packed_matmul: legacy::packed::packed_matmul_q4_0_vnni,
    },
    q4_1: {
        rows: legacy::rows::rows_q4_1_vnni,
        matmul: legacy::matmul::matmul_q4_1_vnni,
        packed_rows: legacy::packed::packed_q4_1_vnni,
        packed_matmul: legacy::packed::packed_matmul_q4_1_vnni,
    },
    q5_0: {
        rows: legacy::rows::rows_q5_0_vnni,
        matmul: legacy::matmul::matmul_q5_0_vnni,
        packed_rows: legacy::packed::packed_q5_0_vnni,
        packed_matmul: legacy::packed::packed_matmul_q5_0_vnni,
    },
    q5_1: {
        rows: legacy::rows::rows_q5_1_vnni,
        matmul: legacy::matmul::matmul_q5_1_vnni,
    },
    iq4_nl: {
        rows: legacy::rows::rows_iq4_nl_vnni,
        matmul: legacy::matmul::matmul_iq4_nl_vnni,
    },
    mxfp4: {
        rows: legacy::rows::rows_mxfp4_vnni,
        matmul: legacy::matmul::matmul_mxfp4_vnni,
    },
    q2_k: {
        rows: q2_k::rows_vnni,
        matmul: q2_k::matmul_vnni,
    },
    q3_k: {
        vec_dot: q3_k::vec_dot_vnni,
        rows: q3_k::rows_vnni,
        matmul: q3_k::matmul_vnni,
    },
    iq4_xs: {
        rows: iq4_xs::rows_vnni,
        matmul: iq4_xs::matmul_vnni,
    },
    q4_k: {
        vec_dot: q4_k::vec_dot_q4_k_vnni,
        rows: q4_k::rows_q4_k_vnni,
        matmul: q4_k::matmul_q4_k_vnni,
    },
    q5_k: {
        vec_dot: q4_k::vec_dot_q5_k_vnni,
        rows: q4_k::rows_q5_k_vnni,
        matmul: q4_k::matmul_q5_k_vnni,
    },
    q6_k: {
        vec_dot: q6_k::vec_dot_q6_k_vnni,
        rows: q6_k::rows_q6_k_vnni,
        matmul: q6_k::matmul_q6_k_vnni,
    },
    f32: {
        vec_dot: plain::vec_dot_f32_avx512,
    },
    f16: {
        dequantize: plain::dequantize_f16_avx512,
        quantize: plain::quantize_f16_avx512,
        vec_dot: plain::vec_dot_f16_avx512,
    },
    bf16: {
        dequantize: plain::dequantize_bf16_avx512,
        quantize: plain::quantize_bf16_avx512,
        vec_dot: plain::vec_dot_bf16_avx512,
    },
});

/// AMX: the tiles for the packed matmul; every other kernel
/// is the VNNI level's (a plain-layout AMX matmul, decoding each row into tiles, ran at 0.2-0.7x
/// the VNNI matmul and was dropped: docs/kernel-experiments.md).
pub(crate) const AMX: ArchKernels = level_kernels!(Amx {
    q8_0: {
        packed_matmul: amx::packed_matmul_q8_0,
    },
    q4_0: {
        packed_matmul: amx::packed_matmul_q4_0,
    },
    q4_1: {
        packed_matmul: amx::packed_matmul_q4_1,
    },
});

/// Whether the AMX level has a packed matmul of its own for `t` (tiles), rather than the VNNI
/// one its chain falls back to.
pub(crate) fn amx_has_packed_matmul(t: crate::GgmlType) -> bool {
    use crate::GgmlType;
    match t {
        GgmlType::Q4_0 => AMX.q4_0.packed_matmul.is_some(),
        GgmlType::Q4_1 => AMX.q4_1.packed_matmul.is_some(),
        GgmlType::Q5_0 => AMX.q5_0.packed_matmul.is_some(),
        GgmlType::Q8_0 => AMX.q8_0.packed_matmul.is_some(),
        _ => false,
    }
}
