//! The per-level primitives the x86_64 kernels are built from: the AVX-512 instructions the VNNI
//! level adds (`vpdpbusd`, `vpdpwssd`, VBMI's `vpermb` lane groups) and their AVX2 equivalents
//! (lane orders, `maddubs`/`madd` sums), each behind a function that enables exactly the features
//! it uses, and [`Primitives`], which lets a kernel body written once pick them by its token.

use core::arch::asm;
use core::arch::x86_64::*;

use super::tokens::{Avx2, Avx512Vbmi, Avx512Vnni, Token};
use super::vector::opaque;

/// What a kernel body generic over its level calls where the levels differ. A body takes the
/// token as `P` and is compiled (`#[inline]`, with AVX2 and F16C, which every token proves) into
/// each level's entry; each method reaches its instructions through a function that enables
/// exactly their features, which the token proves the CPU has.
pub(super) trait Primitives: Token {
    /// The Q4_K/Q5_K block accumulator: [`LaneAcc`] at AVX2, one vector of lane sums at VNNI.
    type MinsAcc: Copy;

    /// `v` in [`lane_groups`] order (one `vpermb` with VBMI).
    fn grouped(self, v: __m256i) -> __m256i;

    /// The Q4_K/Q5_K byte order of quants and activation: [`pair_lanes`] at AVX2 (for
    /// `maddubs` and [`LaneAcc`]), [`lane_groups`] at VNNI (for `vpdpbusd`).
    fn mins_layout(self, v: __m256i) -> __m256i;

    /// `acc[m] += s_a·sums[2m] + s_b·sums[2m + 1]` for `(s_a, s_b)` the i16 pair in every 32-bit
    /// element of `scales`: a group's two sub-block sums of lane `m` (the [`lane_groups`] layout,
    /// after `maddubs`) scaled into lane `m`. `madd` and `add`; one `vpdpwssd` at VNNI.
    fn add_scaled_pair(self, acc: __m256i, sums: __m256i, scales: __m256i) -> __m256i;

    /// `Σ low·y_low + Σ high·y_high` per i32 lane, for unsigned quants below 32 and signed
    /// activation bytes (exact: `maddubs` pairs stay below 2^15; `vpdpbusd` does not saturate).
    fn nibble_pair_sums(self, low: __m256i, high: __m256i, y: [__m256i; 2]) -> __m256i;

    /// An empty [`Self::MinsAcc`].
    fn mins_acc(self) -> Self::MinsAcc;

    /// One sub-block pair of a Q4_K/Q5_K block, quants `q` and activation `x` in
    /// [`Self::mins_layout`] order: `acc[m] += s_a·Σ q_a·x_a + s_b·Σ q_b·x_b` over lane `m`, the
    /// scales as in [`Self::add_scaled_pair`].
    fn mins_acc_add(
        self,
        acc: Self::MinsAcc,
        q: [__m256i; 2],
        x: [__m256i; 2],
        scales: __m256i,
    ) -> Self::MinsAcc;

    /// The eight lane sums of `acc`, in lane order.
    fn mins_acc_lanes(self, acc: Self::MinsAcc) -> __m256i;
}

impl Primitives for Avx2 {
    type MinsAcc = LaneAcc;

    #[inline(always)]
    fn grouped(self, v: __m256i) -> __m256i {
        // SAFETY: the token proves AVX2.
        unsafe { lane_groups(v) }
    }

    #[inline(always)]
    fn mins_layout(self, v: __m256i) -> __m256i {
        // SAFETY: the token proves AVX2.
        unsafe { pair_lanes(v) }
    }

    #[inline(always)]
    fn add_scaled_pair(self, acc: __m256i, sums: __m256i, scales: __m256i) -> __m256i {
        // SAFETY: the token proves AVX2.
        unsafe { madd_add(acc, sums, scales) }
    }

    #[inline(always)]
    fn nibble_pair_sums(self, low: __m256i, high: __m256i, y: [__m256i; 2]) -> __m256i {
        // SAFETY: the token proves AVX2.
        unsafe { maddubs_pair_sums(low, high, y) }
    }

    #[inline(always)]
    fn mins_acc(self) -> LaneAcc {
        // SAFETY: the token proves AVX2.
        unsafe { LaneAcc::new() }
    }

    #[inline(always)]
    fn mins_acc_add(
        self,
        mut acc: LaneAcc,
        q: [__m256i; 2],
        x: [__m256i; 2],
        scales: __m256i,
    ) -> LaneAcc {
        // SAFETY: the token proves AVX2.
        unsafe { acc.add_maddubs_pair(q, x, scales) };
        acc
    }

    #[inline(always)]
    fn mins_acc_lanes(self, acc: LaneAcc) -> __m256i {
        // SAFETY: the token proves AVX2.
        unsafe { acc.lanes() }
    }
}

impl Primitives for Avx512Vnni {
    type MinsAcc = __m256i;

    #[inline(always)]
    fn grouped(self, v: __m256i) -> __m256i {
        self.avx2().grouped(v)
    }

    #[inline(always)]
    fn mins_layout(self, v: __m256i) -> __m256i {
        self.grouped(v)
    }

    #[inline(always)]
    fn add_scaled_pair(self, acc: __m256i, sums: __m256i, scales: __m256i) -> __m256i {
        // SAFETY: the token proves AVX-512 VNNI and VL.
        unsafe { dpwssd_foldable(acc, sums, scales) }
    }

    #[inline(always)]
    fn nibble_pair_sums(self, low: __m256i, high: __m256i, y: [__m256i; 2]) -> __m256i {
        // SAFETY: the token proves AVX-512 VNNI and VL.
        unsafe { dpbusd_pair_sums(low, high, y) }
    }

    #[inline(always)]
    fn mins_acc(self) -> __m256i {
        // SAFETY: the token proves AVX (AVX2).
        unsafe { _mm256_setzero_si256() }
    }

    #[inline(always)]
    fn mins_acc_add(
        self,
        acc: __m256i,
        q: [__m256i; 2],
        x: [__m256i; 2],
        scales: __m256i,
    ) -> __m256i {
        // SAFETY: the token proves AVX-512 VNNI and VL.
        unsafe { grouped_pair(acc, q, x, scales) }
    }

    #[inline(always)]
    fn mins_acc_lanes(self, acc: __m256i) -> __m256i {
        acc
    }
}

impl Primitives for Avx512Vbmi {
    type MinsAcc = __m256i;

    #[inline(always)]
    fn grouped(self, v: __m256i) -> __m256i {
        // SAFETY: the token proves AVX-512 VBMI, VL, BW and F.
        unsafe { lane_groups_vbmi(v) }
    }

    #[inline(always)]
    fn mins_layout(self, v: __m256i) -> __m256i {
        self.grouped(v)
    }

    #[inline(always)]
    fn add_scaled_pair(self, acc: __m256i, sums: __m256i, scales: __m256i) -> __m256i {
        self.vnni().add_scaled_pair(acc, sums, scales)
    }

    #[inline(always)]
    fn nibble_pair_sums(self, low: __m256i, high: __m256i, y: [__m256i; 2]) -> __m256i {
        self.vnni().nibble_pair_sums(low, high, y)
    }

    #[inline(always)]
    fn mins_acc(self) -> __m256i {
        self.vnni().mins_acc()
    }

    #[inline(always)]
    fn mins_acc_add(
        self,
        acc: __m256i,
        q: [__m256i; 2],
        x: [__m256i; 2],
        scales: __m256i,
    ) -> __m256i {
        self.vnni().mins_acc_add(acc, q, x, scales)
    }

    #[inline(always)]
    fn mins_acc_lanes(self, acc: __m256i) -> __m256i {
        acc
    }
}

/// Byte `4m + j` of the result is byte `m + 8j` of `v`: the four elements of a 32-element
/// sub-block that share lane `m` (element index mod 8) side by side, so that one `vpdpbusd` sums
/// them into i32 lane `m`. Dwords 0, 2, 4, 6 (elements 0-3, 8-11, 16-19, 24-27) go to the low
/// half, then each half's 4x4 bytes are transposed: two shuffles, kept apart and the `vpermd`
/// index hidden (`opaque`), because LLVM's generic tuning otherwise makes three of them
/// (`vpermilps` and `vpermpd` for the `vpermd`, or two `vpshufb` around a `vpermq`).
/// Built with AVX-512 VBMI enabled (`-C target-cpu` of a CPU that has it) it is one `vpermb`;
/// otherwise the VNNI kernels take [`lane_groups_vbmi`] by their VBMI token where the CPU has it
/// (Cascade Lake has VNNI without it).
#[inline]
#[target_feature(enable = "avx2")]
fn lane_groups(v: __m256i) -> __m256i {
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

/// In each 16-byte half, element `k` next to element `k + 8`, so that `maddubs` adds two products
/// of the same lane (element index mod 8).
#[inline]
#[target_feature(enable = "avx2")]
fn pair_lanes(v: __m256i) -> __m256i {
    let order = _mm256_setr_epi8(
        0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15, 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5,
        13, 6, 14, 7, 15,
    );
    _mm256_shuffle_epi8(v, order)
}

/// `acc + madd(sums, scales)`.
#[inline]
#[target_feature(enable = "avx2")]
fn madd_add(acc: __m256i, sums: __m256i, scales: __m256i) -> __m256i {
    _mm256_add_epi32(acc, _mm256_madd_epi16(sums, scales))
}

/// [`Primitives::nibble_pair_sums`] by `maddubs` (each pair below 2·31·128, their sum below 2^15:
/// exact in i16) and `madd` by ones.
#[inline]
#[target_feature(enable = "avx2")]
fn maddubs_pair_sums(low: __m256i, high: __m256i, [y_low, y_high]: [__m256i; 2]) -> __m256i {
    let products = _mm256_add_epi16(
        _mm256_maddubs_epi16(low, y_low),
        _mm256_maddubs_epi16(high, y_high),
    );
    _mm256_madd_epi16(products, _mm256_set1_epi16(1))
}

/// [`Primitives::nibble_pair_sums`] by two `vpdpbusd`: four u8·i8 products per i32 lane, summed
/// without saturation.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn dpbusd_pair_sums(low: __m256i, high: __m256i, [y_low, y_high]: [__m256i; 2]) -> __m256i {
    dpbusd(dpbusd(_mm256_setzero_si256(), low, y_low), high, y_high)
}

/// Eight-lane integer accumulator of a K-quant super-block (ggml's `aux32[8]`): two sub-block sums
/// (i16 per lane, in `[lanes | lanes]` layout) are interleaved and multiplied by their scales with
/// `madd`, so every i32 lane only ever receives products of its own lane.
#[derive(Clone, Copy)]
pub(super) struct LaneAcc {
    /// Lanes 0..3 in each half.
    low: __m256i,
    /// Lanes 4..7 in each half.
    high: __m256i,
}

impl LaneAcc {
    #[inline]
    #[target_feature(enable = "avx2")]
    fn new() -> LaneAcc {
        LaneAcc {
            low: _mm256_setzero_si256(),
            high: _mm256_setzero_si256(),
        }
    }

    /// Adds `scale_a · a + scale_b · b` lane by lane (`a`, `b` in `[lanes | lanes]` layout), the
    /// scales as a vector: each 32-bit element holds `(scale_a, scale_b)` as two i16 for its half
    /// (so the halves may have different scales).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn add_pair_scaled(&mut self, a: __m256i, b: __m256i, scales: __m256i) {
        let low = _mm256_unpacklo_epi16(a, b);
        let high = _mm256_unpackhi_epi16(a, b);
        self.low = _mm256_add_epi32(self.low, _mm256_madd_epi16(low, scales));
        self.high = _mm256_add_epi32(self.high, _mm256_madd_epi16(high, scales));
    }

    /// One sub-block pair by `maddubs` (unsigned quants below 32 against Q8_K bytes: pairs below
    /// 2·31·128, exact), scaled into the lanes by [`LaneAcc::add_pair_scaled`].
    #[inline]
    #[target_feature(enable = "avx2")]
    fn add_maddubs_pair(
        &mut self,
        [q_a, q_b]: [__m256i; 2],
        [x_a, x_b]: [__m256i; 2],
        scales: __m256i,
    ) {
        let s0 = _mm256_maddubs_epi16(q_a, x_a);
        let s1 = _mm256_maddubs_epi16(q_b, x_b);
        self.add_pair_scaled(s0, s1, scales);
    }

    /// The eight lanes in order.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn lanes(&self) -> __m256i {
        let first = _mm256_permute2x128_si256::<0x20>(self.low, self.high);
        let second = _mm256_permute2x128_si256::<0x31>(self.low, self.high);
        _mm256_add_epi32(first, second)
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
fn lane_groups_vbmi(v: __m256i) -> __m256i {
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
fn grouped_pair(
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
fn dpwssd(mut acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
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
fn dpwssd_foldable(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
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
