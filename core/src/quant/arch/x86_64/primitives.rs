//! The per-level primitives the x86_64 kernels are built from: the AVX-512 instructions the VNNI
//! level adds (`vpdpbusd`, `vpdpwssd`, VBMI's `vpermb` lane groups), each behind a function that
//! enables exactly the features it uses, and their AVX2 equivalents (lane orders, `madd`-based
//! scaled pairs). Level modules import these, never each other.

use core::arch::asm;
use core::arch::x86_64::*;

use super::vector::opaque;

/// Byte `4m + j` of the result is byte `m + 8j` of `v`: the four elements of a 32-element
/// sub-block that share lane `m` (element index mod 8) side by side, so that one `vpdpbusd` sums
/// them into i32 lane `m`. Dwords 0, 2, 4, 6 (elements 0-3, 8-11, 16-19, 24-27) go to the low
/// half, then each half's 4x4 bytes are transposed: two shuffles, kept apart and the `vpermd`
/// index hidden (`opaque`), because LLVM's generic tuning otherwise makes three of them
/// (`vpermilps` and `vpermpd` for the `vpermd`, or two `vpshufb` around a `vpermq`).
/// Built with AVX-512 VBMI enabled (`-C target-cpu` of a CPU that has it) it is one `vpermb`;
/// otherwise the VNNI kernels pick [`grouped::<true>`](grouped), `vpermb`, at run time where the
/// CPU has VBMI (Cascade Lake has VNNI without it).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn lane_groups(v: __m256i) -> __m256i {
    #[cfg(all(
        target_feature = "avx512vbmi",
        target_feature = "avx512vl",
        target_feature = "avx512bw"
    ))]
    // SAFETY: this build's target features include AVX-512 F, BW, VL and VBMI (the `cfg` above).
    return unsafe { super::primitives::lane_groups_vbmi(v) };
    #[allow(unreachable_code)]
    let dwords = opaque(_mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
    let halves = opaque(_mm256_permutevar8x32_epi32(v, dwords));
    let transpose = _mm256_setr_epi8(
        0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10,
        14, 3, 7, 11, 15,
    );
    _mm256_shuffle_epi8(halves, transpose)
}

/// [`lane_groups`]; with `VBMI` by one `vpermb` (only in kernels run where the CPU has VBMI):
/// one shuffle instead of two.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn grouped<const VBMI: bool>(v: __m256i) -> __m256i {
    if VBMI {
        // SAFETY: `VBMI` is true only in kernels the table's entries run after `vbmi()` said the
        // CPU has AVX-512 VBMI (and VL, BW, F: the VNNI level's).
        unsafe { super::primitives::lane_groups_vbmi(v) }
    } else {
        lane_groups(v)
    }
}

/// In each 16-byte half, element `k` next to element `k + 8`, so that `maddubs` adds two products
/// of the same lane (element index mod 8).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn pair_lanes(v: __m256i) -> __m256i {
    let order = _mm256_setr_epi8(
        0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15, 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5,
        13, 6, 14, 7, 15,
    );
    _mm256_shuffle_epi8(v, order)
}

/// The Q4_K/Q5_K kernels' byte order for weights and activation: [`lane_groups`] at the VNNI
/// level (by `vpermb` with `VBMI`), [`pair_lanes`] below it.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn mins_layout<const VNNI: bool, const VBMI: bool>(v: __m256i) -> __m256i {
    if VNNI {
        grouped::<VBMI>(v)
    } else {
        pair_lanes(v)
    }
}

/// `acc[m] += s_a·sums[2m] + s_b·sums[2m + 1]` for `(s_a, s_b)` the i16 pair in every 32-bit
/// element of `scales`: a group's two sub-block sums of lane `m` (the [`lane_groups`] layout,
/// after `maddubs`) scaled into lane `m`. `madd` and `add`; one `vpdpwssd` at `VNNI`.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn add_scaled_pair<const VNNI: bool>(
    acc: __m256i,
    sums: __m256i,
    scales: __m256i,
) -> __m256i {
    if VNNI {
        // SAFETY: `VNNI` is true only in the `*_vnni` kernels, which the table hands out only at
        // an available AVX-512 VNNI level.
        unsafe { super::primitives::dpwssd_foldable(acc, sums, scales) }
    } else {
        _mm256_add_epi32(acc, _mm256_madd_epi16(sums, scales))
    }
}

/// `vpdpbusd acc, a, b`: `acc[i] += Σ_{j<4} a[4i+j] (u8) · b[4i+j] (i8)`, no saturation.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) fn dpbusd(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
    _mm256_dpbusd_epi32(acc, a, b)
}

/// `lane_groups` by one `vpermb` (AVX-512 VBMI).
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vbmi")]
pub(super) fn lane_groups_vbmi(v: __m256i) -> __m256i {
    const ORDER: [u8; 32] = {
        let mut order = [0u8; 32];
        let mut i = 0;
        while i < 32 {
            order[i] = (i / 4 + 8 * (i % 4)) as u8;
            i += 1;
        }
        order
    };
    // SAFETY: `ORDER` is 32 bytes; `loadu` has no alignment requirement.
    let order = unsafe { _mm256_loadu_si256(ORDER.as_ptr().cast()) };
    _mm256_permutexvar_epi8(order, v)
}

/// One sub-block pair of a Q4_K/Q5_K block in [`lane_groups`](super::primitives::lane_groups) order:
/// `acc[m] += s_a·Σ q_a·x_a + s_b·Σ q_b·x_b` over lane `m`'s four elements of each sub-block,
/// `(s_a, s_b)` the i16 pair in every 32-bit element of `scales`. Each `vpdpbusd` sum is at most
/// 4·31·128 < 2^15 in magnitude, so the two fit one i16 pair for `vpdpwssd`: exact.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) fn grouped_pair(
    acc: __m256i,
    [q_a, q_b]: [__m256i; 2],
    [x_a, x_b]: [__m256i; 2],
    scales: __m256i,
) -> __m256i {
    let zero = _mm256_setzero_si256();
    let a = dpbusd(zero, q_a, x_a);
    let b = dpbusd(zero, q_b, x_b);
    let pairs = _mm256_blend_epi16::<0b1010_1010>(a, _mm256_slli_epi32::<16>(b));
    dpwssd(acc, pairs, scales)
}

/// `vpdpwssd acc, a, b`: `acc[i] += a[2i]·b[2i] + a[2i+1]·b[2i+1]` (i16 products, wrapping i32
/// sum: `madd` then `add`, in one instruction). Through `asm!`, not the intrinsic: under the
/// generic tuning of a plain build LLVM turns each `vpdpwssd` after the first of a chain back
/// into `vpmaddwd` + `vpaddd`.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) fn dpwssd(mut acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
    // SAFETY: one register-only instruction of an enabled feature (AVX-512 VNNI, VL); it touches
    // no memory, stack or flags.
    unsafe {
        asm!(
            "vpdpwssd {acc}, {a}, {b}",
            acc = inout(ymm_reg) acc,
            a = in(ymm_reg) a,
            b = in(ymm_reg) b,
            options(pure, nomem, nostack, preserves_flags),
        )
    };
    acc
}

/// [`dpwssd`] through the intrinsic, for Q6_K: there a native build folds each scale broadcast
/// into it as a memory operand, and even the split LLVM makes of it in a plain build is not slower
/// there.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) fn dpwssd_foldable(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
    _mm256_dpwssd_epi32(acc, a, b)
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use crate::quant::arch::x86_64::vector::f16_le;

    /// The F16C decoder gives the bits of the crate's one decoder, `cast::f16_le`, for every half.
    #[test]
    fn f16c_decoder_matches_the_one_decoder() {
        if !std::is_x86_feature_detected!("f16c") {
            return;
        }
        for bits in 0..=u16::MAX {
            let bytes = bits.to_le_bytes();
            // SAFETY: F16C was detected above.
            let found = unsafe { f16_le(bytes) };
            let expected = crate::quant::cast::f16_le(bytes);
            assert_eq!(found.to_bits(), expected.to_bits(), "f16 {bits:#06x}");
        }
    }

    /// `lane_groups` puts element `m + 8j` of each 32 at byte `4m + j`: lane `m`'s four elements
    /// in 32-bit lane `m`, for any byte values.
    #[test]
    fn lane_groups_gathers_each_lanes_four_elements() {
        if !(std::is_x86_feature_detected!("avx2")) {
            return;
        }
        let input: [u8; 32] = core::array::from_fn(|i| (i as u8).wrapping_mul(37) ^ 0xa5);
        let mut output = [0u8; 32];
        // SAFETY: AVX2 was detected above; both arrays are 32 bytes.
        unsafe {
            let grouped = lane_groups(_mm256_loadu_si256(input.as_ptr().cast()));
            _mm256_storeu_si256(output.as_mut_ptr().cast(), grouped);
        }
        for m in 0..8 {
            for j in 0..4 {
                assert_eq!(output[4 * m + j], input[m + 8 * j], "lane {m}, element {j}");
            }
        }
    }
}
