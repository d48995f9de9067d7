//! Level-independent x86_64 vector helpers the type modules share: loads and stores of block
//! fields, nibble and level unpacking, horizontal sums and the eight-row transpose, the K-quants'
//! lane accumulators and scale pairs, prefetching, and the F16C scale decoder. Each function
//! enables only the features its own instructions need (AVX2, or F16C).

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

/// The 32 Q4_0 quants of a block as bytes `0..16`: element `j` low nibble, `j + 16` high nibble.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn q4_0_nibbles(qs: &[u8; 16]) -> __m256i {
    let bytes = load16(qs);
    let low = _mm_and_si128(bytes, _mm_set1_epi8(0x0f));
    let high = _mm_and_si128(_mm_srli_epi16::<4>(bytes), _mm_set1_epi8(0x0f));
    _mm256_set_m128i(high, low)
}

/// Σ level·y over 32 signed levels (|level| ≤ 127) and 32 Q8_0 quants, widened to i16 first
/// (exact for every byte value), as eight i32 partial sums.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn dot_levels(levels: __m256i, y: &[i8; 32]) -> __m256i {
    let y = load32(y);
    let l_lo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(levels));
    let l_hi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(levels));
    let y_lo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(y));
    let y_hi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(y));
    _mm256_add_epi32(_mm256_madd_epi16(l_lo, y_lo), _mm256_madd_epi16(l_hi, y_hi))
}

/// Sixteen signed bytes times `d` into `out[..16]`: `q as f32 * d`, one rounding each.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn scale_i8x16(out: &mut [f32], q: __m128i, d: __m256) {
    let (first, second) = out.split_at_mut(8.min(out.len()));
    let low = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
    let high = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128::<8>(q)));
    store8(first, _mm256_mul_ps(low, d));
    store8(second, _mm256_mul_ps(high, d));
}

/// Thirty-two signed quants in element order times `d` (`q * d`).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn scale_block(values: &mut [f32], q: __m256i, d: f32) {
    let d = _mm256_set1_ps(d);
    let (first, second) = values.split_at_mut(16.min(values.len()));
    scale_i8x16(first, _mm256_castsi256_si128(q), d);
    scale_i8x16(second, _mm256_extracti128_si256::<1>(q), d);
}

/// `sums[l] += d * lanes[l]` (multiply, then add: the scalar `accumulate_lanes`).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn accumulate(sums: __m256, d: f32, lanes: __m256i) -> __m256 {
    _mm256_add_ps(
        sums,
        _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes)),
    )
}

/// The scalar `add_lanes`: the eight totals added to `sumf` in lane order.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn add_lanes(mut sumf: f32, sums: __m256) -> f32 {
    let mut lanes = [0.0f32; 8];
    // SAFETY: `lanes` holds eight f32; `storeu` has no alignment requirement.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), sums) };
    for s in lanes {
        sumf += s;
    }
    sumf
}

/// The sixteen scales of a super-block with 16-value sub-blocks (Q3_K, Q6_K) as eight i16 pairs,
/// pair `k` = `(s[2k], s[2k + 1])`: the two scales of 32-value group `k` (element index `32k..`),
/// as [`add_scaled_pair`] takes them. Kept in memory, and each pair broadcast from there when
/// used: a load, where taking it from the register that held all sixteen is a shuffle, on pipes
/// these kernels already crowd.
pub(super) struct ScalePairs([i32; 8]);

impl ScalePairs {
    #[inline(always)]
    pub(super) fn new() -> ScalePairs {
        ScalePairs([0; 8])
    }

    /// Stores the sixteen scales, sign-extended to i16 in order (`_mm256_cvtepi8_epi16`).
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn store(&mut self, scales: __m256i) {
        // SAFETY: the array is 32 bytes; `storeu` has no alignment requirement.
        unsafe { _mm256_storeu_si256(self.0.as_mut_ptr().cast(), scales) };
        // SAFETY: the template is empty and only receives the address; LLVM must then assume
        // the memory behind it read and written (no `nomem`, no `readonly`), so it loads each
        // pair back rather than extracting it from the register stored.
        unsafe { asm!("/* {0} */", in(reg) self.0.as_ptr(), options(nostack, preserves_flags)) };
    }

    /// Pair `k` in every 32-bit element.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(super) fn get(&self, k: usize) -> __m256i {
        _mm256_set1_epi32(self.0.get(k).copied().unwrap_or(0))
    }
}

/// Eight bytes, each zero-extended to a 32-bit lane.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn widen8(bytes: &[u8; 8]) -> __m256i {
    // SAFETY: the array holds eight bytes, exactly what `loadl_epi64` reads; it has no alignment
    // requirement.
    _mm256_cvtepu8_epi32(unsafe { _mm_loadl_epi64(bytes.as_ptr().cast()) })
}

/// Eight bytes (`u8` or `i8` as `signed`) to f32 times `d`: `d * x`, one rounding each.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn scaled8(bytes: &[u8; 8], signed: bool, d: __m256) -> __m256 {
    // SAFETY: as `widen8`.
    let raw = unsafe { _mm_loadl_epi64(bytes.as_ptr().cast()) };
    let lanes = if signed {
        _mm256_cvtepi8_epi32(raw)
    } else {
        _mm256_cvtepu8_epi32(raw)
    };
    _mm256_mul_ps(d, _mm256_cvtepi32_ps(lanes))
}

/// Stores eight f32 at `out[at..at + 8]` (the callers' offsets are constants inside the array,
/// so the range check folds away; a range outside would store nothing).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn store_at<const N: usize>(out: &mut [f32; N], at: usize, v: __m256) {
    if let Some(eight) = out
        .get_mut(at..)
        .and_then(|rest| rest.first_chunk_mut::<8>())
    {
        // SAFETY: `eight` holds eight f32; `storeu` has no alignment requirement.
        unsafe { _mm256_storeu_ps(eight.as_mut_ptr(), v) };
    }
}

/// `scales[k]` (every caller's `k` is inside the array; the zero fallback keeps the kernels free
/// of panics).
#[inline(always)]
pub(super) fn scale_of<const N: usize>(scales: &[f32; N], k: usize) -> f32 {
    scales.get(k).copied().unwrap_or(0.0)
}
