//! Level-independent x86_64 vector helpers every kernel uses: loads and stores of block fields,
//! horizontal sums and the eight-row transpose, prefetching, and the F16C scale decoder. Each
//! function enables only the features its own instructions need (AVX2, or F16C).

use core::arch::asm;
use core::arch::x86_64::*;

/// 16 bytes as a vector.
#[inline(always)]
pub(super) fn load16<T: Copy>(bytes: &[T; 16]) -> __m128i {
    const { assert!(core::mem::size_of::<T>() == 1) };
    // SAFETY: the array holds 16 one-byte elements; `loadu` has no alignment requirement.
    unsafe { _mm_loadu_si128(bytes.as_ptr().cast()) }
}

/// 32 bytes as a vector.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn load32<T: Copy>(bytes: &[T; 32]) -> __m256i {
    const { assert!(core::mem::size_of::<T>() == 1) };
    // SAFETY: the array holds 32 one-byte elements; `loadu` has no alignment requirement.
    unsafe { _mm256_loadu_si256(bytes.as_ptr().cast()) }
}

/// The `N` bytes at `start` of a block's array (every call passes a range inside the array, so the
/// zero fallback is never taken; it only keeps the kernels free of panics).
#[inline(always)]
pub(super) fn part<T: Zero, const N: usize>(s: &[T], start: usize) -> &[T; N] {
    s.get(start..)
        .and_then(|rest| rest.first_chunk::<N>())
        .unwrap_or(T::zeros())
}

/// Byte types whose all-zero array the kernels can fall back to.
pub(super) trait Zero: Copy + 'static {
    /// `&[0; N]`.
    fn zeros<const N: usize>() -> &'static [Self; N];
}

impl Zero for u8 {
    fn zeros<const N: usize>() -> &'static [u8; N] {
        const { &[0u8; N] }
    }
}

impl Zero for i8 {
    fn zeros<const N: usize>() -> &'static [i8; N] {
        const { &[0i8; N] }
    }
}

/// Eight f16 scales (little-endian bytes) to f32, exactly (F16C, NaNs quieted like the scalar path).
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn f16x8(halves: &[[u8; 2]; 8]) -> __m256 {
    let mut bits = [0u8; 16];
    for (b, h) in bits.chunks_exact_mut(2).zip(halves) {
        b.copy_from_slice(h);
    }
    _mm256_cvtph_ps(load16(&bits))
}

/// Asks for the cache lines of `len` bytes from `start` (a hint: a prefetch never faults, and the
/// address is only formed, never read, so it may lie past the end of the weights).
#[inline(always)]
pub(super) fn prefetch_range(start: *const i8, len: usize) {
    for offset in (0..len).step_by(64) {
        // SAFETY: a prefetch reads nothing architecturally and cannot fault on any address; SSE
        // is part of the x86_64 baseline.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(start.wrapping_add(offset)) };
    }
}

/// [`prefetch_range`] into L2 (`prefetcht1`).
#[inline(always)]
pub(super) fn prefetch_range_l2(start: *const i8, len: usize) {
    for offset in (0..len).step_by(64) {
        // SAFETY: as `prefetch_range`.
        unsafe { _mm_prefetch::<_MM_HINT_T1>(start.wrapping_add(offset)) };
    }
}

/// How far ahead of the block being summed a K-quant kernel asks for weights: a matvec reads its
/// rows back to back, so this runs into the next row, as the summing will (distance measured:
/// docs/kernel-experiments.md).
const K_PREFETCH_BYTES: usize = 4096;

/// `v`, with what LLVM knows of it hidden behind an empty `asm!`, where its shuffle combining
/// makes more shuffles than the code asks for: a byte shuffle of a vector whose two 128-bit
/// halves are equal becomes a 128-bit one plus a `vpermq` (two uops on some cores), and a
/// constant `vpermd` becomes `vpermilps` + `vpermpd` (see `lane_groups`).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn opaque(mut v: __m256i) -> __m256i {
    // SAFETY: the template is empty; it reads and writes only the named register.
    unsafe { asm!("/* {0} */", inout(ymm_reg) v, options(pure, nomem, nostack)) };
    v
}

/// Asks for the lines of the block `K_PREFETCH_BYTES` past `block`.
#[inline(always)]
pub(super) fn prefetch_block_ahead<W>(block: &W) {
    let start = (block as *const W)
        .cast::<i8>()
        .wrapping_add(K_PREFETCH_BYTES);
    prefetch_range(start, core::mem::size_of::<W>());
}

/// A little-endian IEEE half as f32 by F16C (`vcvtph2ps`): the bits of `cast::f16_le` (exact,
/// NaNs made quiet with their payload kept), in three instructions. `cast`'s own form picks F16C
/// only when the whole build has it; a plain build would run its portable form, about fifteen
/// instructions, for every block's scale.
#[inline]
#[target_feature(enable = "f16c")]
pub(super) fn f16_le(bytes: [u8; 2]) -> f32 {
    let bits = i32::from(u16::from_le_bytes(bytes));
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits)))
}

/// Sum of the eight i32 lanes.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn hsum_i32(v: __m256i) -> i32 {
    hsum4_i32(_mm_add_epi32(
        _mm256_castsi256_si128(v),
        _mm256_extracti128_si256::<1>(v),
    ))
}

/// Sum of the four i32 lanes.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn hsum4_i32(s: __m128i) -> i32 {
    _mm_cvtsi128_si32(hsum4_splat(s))
}

/// Sum of the four i32 lanes, in every lane.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn hsum4_splat(s: __m128i) -> __m128i {
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
    _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s))
}

/// Eight vectors of eight i32 to the vector of their eight totals (lane `i` = sum of `v[i]`).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn transpose_sums(v: &[__m256i; 8]) -> __m256i {
    let a = _mm256_hadd_epi32(v[0], v[1]);
    let b = _mm256_hadd_epi32(v[2], v[3]);
    let c = _mm256_hadd_epi32(v[4], v[5]);
    let d = _mm256_hadd_epi32(v[6], v[7]);
    let ab = _mm256_hadd_epi32(a, b);
    let cd = _mm256_hadd_epi32(c, d);
    // ab = [v0 v1 v2 v3 (low halves) | v0 v1 v2 v3 (high halves)], cd likewise for v4..v7.
    let low = _mm256_permute2x128_si256::<0x20>(ab, cd);
    let high = _mm256_permute2x128_si256::<0x31>(ab, cd);
    _mm256_add_epi32(low, high)
}

/// Stores eight f32 into `out`.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn store8(out: &mut [f32], v: __m256) {
    if let Some(out) = out.first_chunk_mut::<8>() {
        // SAFETY: `out` holds eight f32; `storeu` has no alignment requirement.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), v) };
    }
}
