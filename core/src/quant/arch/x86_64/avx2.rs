//! AVX2 (+F16C) kernels. Integer sums are taken exactly (products widened to i16 before any
//! pairwise add, so no `maddubs` saturation and no sign trick that breaks on -128), then the float
//! steps run in the scalar twin's order, one multiply or add at a time.

use core::arch::x86_64::*;

use crate::quant::activation::{BlockQ8K, BlockQ8_0};
use crate::quant::k_quants::{BlockQ4K, BlockQ6K};
use crate::quant::legacy::BlockQ4_0;

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

/// Sum of the eight i32 lanes.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn hsum_i32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
    _mm_cvtsi128_si32(s)
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

/// 32 signed bytes times 32 signed bytes, as eight i32 partial sums (exact for every byte value).
#[inline]
#[target_feature(enable = "avx2")]
fn dot_i8x32(a: &[i8; 32], b: &[i8; 32]) -> __m256i {
    let a_lo = _mm256_cvtepi8_epi16(load16(part(a, 0)));
    let a_hi = _mm256_cvtepi8_epi16(load16(part(a, 16)));
    let b_lo = _mm256_cvtepi8_epi16(load16(part(b, 0)));
    let b_hi = _mm256_cvtepi8_epi16(load16(part(b, 16)));
    _mm256_add_epi32(_mm256_madd_epi16(a_lo, b_lo), _mm256_madd_epi16(a_hi, b_hi))
}

/// `ggml_vec_dot_q8_0_q8_0_generic`: per block `sumf += sumi * (dx * dy)`, blocks in order.
/// Eight blocks' integer sums and products `sumi * (dx * dy)` are formed side by side (each lane
/// rounds exactly as the scalar expression does), then added to `sumf` one by one.
#[target_feature(enable = "avx2,f16c")]
fn vec_dot_q8_0_impl(w: &[BlockQ8_0], x: &[BlockQ8_0]) -> f32 {
    let mut sumf = 0.0f32;
    let mut w8 = w.chunks_exact(8);
    let mut x8 = x.chunks_exact(8);
    for (wc, xc) in (&mut w8).zip(&mut x8) {
        let mut partial = [_mm256_setzero_si256(); 8];
        let mut dw = [[0u8; 2]; 8];
        let mut dx = [[0u8; 2]; 8];
        let slots = partial.iter_mut().zip(&mut dw).zip(&mut dx);
        for (((p, dw), dx), (wb, xb)) in slots.zip(wc.iter().zip(xc)) {
            *p = dot_i8x32(&wb.qs, &xb.qs);
            *dw = wb.d;
            *dx = xb.d;
        }
        let sumi = _mm256_cvtepi32_ps(transpose_sums(&partial));
        let products = _mm256_mul_ps(sumi, _mm256_mul_ps(f16x8(&dw), f16x8(&dx)));
        let mut lanes = [0.0f32; 8];
        // SAFETY: `lanes` holds eight f32; `storeu` has no alignment requirement.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), products) };
        for p in lanes {
            sumf += p;
        }
    }
    let tail = w8.remainder().iter().zip(x8.remainder());
    for (wb, xb) in tail {
        let sumi = hsum_i32(dot_i8x32(&wb.qs, &xb.qs));
        let d = crate::quant::cast::f16_le(wb.d) * crate::quant::cast::f16_le(xb.d);
        sumf += sumi as f32 * d;
    }
    sumf
}

/// Safe entry of [`vec_dot_q8_0_impl`] for the kernel table.
pub(super) fn vec_dot_q8_0(w: &[BlockQ8_0], x: &[BlockQ8_0]) -> f32 {
    // SAFETY: the table only hands this kernel out for an available AVX2 level (`pick!` checks
    // `Level::is_available`, which requires avx2 and f16c).
    unsafe { vec_dot_q8_0_impl(w, x) }
}

/// The 32 Q4_0 quants of a block as bytes `0..16`: element `j` low nibble, `j + 16` high nibble.
#[inline]
#[target_feature(enable = "avx2")]
fn q4_0_nibbles(qs: &[u8; 16]) -> __m256i {
    let bytes = load16(qs);
    let low = _mm_and_si128(bytes, _mm_set1_epi8(0x0f));
    let high = _mm_and_si128(_mm_srli_epi16::<4>(bytes), _mm_set1_epi8(0x0f));
    _mm256_set_m128i(high, low)
}

/// Σ (q - 8)·y over one Q4_0 block, as eight i32 partial sums. `q` is below 16 so `q·y` pairs fit
/// `maddubs` (|2·15·128| < 2^15), and so do `8·y` pairs; the difference is exact in i16.
#[inline]
#[target_feature(enable = "avx2")]
fn dot_q4_0(qs: &[u8; 16], y: &[i8; 32]) -> __m256i {
    let q = q4_0_nibbles(qs);
    let y = load32(y);
    let qy = _mm256_maddubs_epi16(q, y);
    let eight_y = _mm256_maddubs_epi16(_mm256_set1_epi8(8), y);
    _mm256_madd_epi16(_mm256_sub_epi16(qy, eight_y), _mm256_set1_epi16(1))
}

/// `ggml_vec_dot_q4_0_q8_0_generic`: per block `sumf += sumi * dx * dy` (that is, `(sumi * dx) * dy`).
#[target_feature(enable = "avx2,f16c")]
fn vec_dot_q4_0_impl(w: &[BlockQ4_0], x: &[BlockQ8_0]) -> f32 {
    let mut sumf = 0.0f32;
    let mut w8 = w.chunks_exact(8);
    let mut x8 = x.chunks_exact(8);
    for (wc, xc) in (&mut w8).zip(&mut x8) {
        let mut partial = [_mm256_setzero_si256(); 8];
        let mut dw = [[0u8; 2]; 8];
        let mut dx = [[0u8; 2]; 8];
        let slots = partial.iter_mut().zip(&mut dw).zip(&mut dx);
        for (((p, dw), dx), (wb, xb)) in slots.zip(wc.iter().zip(xc)) {
            *p = dot_q4_0(&wb.qs, &xb.qs);
            *dw = wb.d;
            *dx = xb.d;
        }
        let sumi = _mm256_cvtepi32_ps(transpose_sums(&partial));
        let products = _mm256_mul_ps(_mm256_mul_ps(sumi, f16x8(&dw)), f16x8(&dx));
        let mut lanes = [0.0f32; 8];
        // SAFETY: `lanes` holds eight f32; `storeu` has no alignment requirement.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), products) };
        for p in lanes {
            sumf += p;
        }
    }
    let tail = w8.remainder().iter().zip(x8.remainder());
    for (wb, xb) in tail {
        let sumi = hsum_i32(dot_q4_0(&wb.qs, &xb.qs));
        sumf += sumi as f32 * crate::quant::cast::f16_le(wb.d) * crate::quant::cast::f16_le(xb.d);
    }
    sumf
}

/// Safe entry of [`vec_dot_q4_0_impl`].
pub(super) fn vec_dot_q4_0(w: &[BlockQ4_0], x: &[BlockQ8_0]) -> f32 {
    // SAFETY: only handed out for an available AVX2 level (see `vec_dot_q8_0`).
    unsafe { vec_dot_q4_0_impl(w, x) }
}

/// Products of 16 weight quants (as i16) with 16 Q8_K quants: `[e0..e7 | e8..e15]`, so both
/// 128-bit halves hold lanes 0..7 (element index mod 8) in order. Exact: |w·x| ≤ 32·128.
#[inline]
#[target_feature(enable = "avx2")]
fn products16(w: __m256i, x: &[i8; 16]) -> __m256i {
    _mm256_mullo_epi16(w, _mm256_cvtepi8_epi16(load16(x)))
}

/// Eight-lane integer accumulator of a K-quant super-block (ggml's `aux32[8]`): two sub-block sums
/// (i16 per lane, in `[lanes | lanes]` layout) are interleaved and multiplied by their scales with
/// `madd`, so every i32 lane only ever receives products of its own lane.
struct LaneAcc {
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

    /// Adds `scale_a · a + scale_b · b` lane by lane (`a`, `b` in `[lanes | lanes]` layout).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn add_pair(&mut self, a: __m256i, b: __m256i, scale_a: i16, scale_b: i16) {
        let scales = _mm256_set1_epi32((i32::from(scale_b) << 16) | i32::from(scale_a as u16));
        let low = _mm256_madd_epi16(_mm256_unpacklo_epi16(a, b), scales);
        let high = _mm256_madd_epi16(_mm256_unpackhi_epi16(a, b), scales);
        self.low = _mm256_add_epi32(self.low, low);
        self.high = _mm256_add_epi32(self.high, high);
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

/// `sums[l] += d * lanes[l]` (multiply, then add: the scalar `accumulate_lanes`).
#[inline]
#[target_feature(enable = "avx2")]
fn accumulate(sums: __m256, d: f32, lanes: __m256i) -> __m256 {
    _mm256_add_ps(
        sums,
        _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes)),
    )
}

/// The scalar `add_lanes`: the eight totals added to `sumf` in lane order.
#[inline]
#[target_feature(enable = "avx2")]
fn add_lanes(mut sumf: f32, sums: __m256) -> f32 {
    let mut lanes = [0.0f32; 8];
    // SAFETY: `lanes` holds eight f32; `storeu` has no alignment requirement.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), sums) };
    for s in lanes {
        sumf += s;
    }
    sumf
}

/// `ggml_vec_dot_q4_K_q8_K_generic`: per block the lane sums scaled by `d·dx` into `sums`, then
/// `sumf -= (dmin·dx) · Σ bsums·mins`; the lanes added to `sumf` last.
#[target_feature(enable = "avx2,f16c")]
fn vec_dot_q4_k_impl(w: &[BlockQ4K], x: &[BlockQ8K]) -> f32 {
    let mut sums = _mm256_setzero_ps();
    let mut sumf = 0.0f32;
    let nibble = _mm256_set1_epi16(0x0f);
    for (wb, xb) in w.iter().zip(x) {
        let (scales, mins) = crate::quant::k_quants::q4_k::scales_and_mins(&wb.scales);
        // Σ bsums·mins: each min covers two bsums (16 i16 · 16 i16 in one madd, exact).
        let bsums = load32(&flatten_bsums(&xb.bsums));
        let mut min_pairs = [0i16; 16];
        for (pair, &m) in min_pairs.chunks_exact_mut(2).zip(&mins) {
            pair.fill(i16::from(m));
        }
        // SAFETY: 16 i16 are 32 bytes; `loadu` has no alignment requirement.
        let min_vec = unsafe { _mm256_loadu_si256(min_pairs.as_ptr().cast()) };
        let sumi = hsum_i32(_mm256_madd_epi16(bsums, min_vec));

        let mut acc = LaneAcc::new();
        let pairs = wb.qs.chunks_exact(32).zip(xb.qs.chunks_exact(64));
        for ((qs, xq), sc) in pairs.zip(scales.chunks_exact(2)) {
            // 32 bytes: low nibbles are sub-block 2p (elements 0..32), high ones 2p+1 (32..64).
            let lo_bytes = _mm256_cvtepu8_epi16(load16(part(qs, 0)));
            let hi_bytes = _mm256_cvtepu8_epi16(load16(part(qs, 16)));
            let w0 = _mm256_and_si256(lo_bytes, nibble); // elements 0..16
            let w1 = _mm256_and_si256(hi_bytes, nibble); // 16..32
            let w2 = _mm256_srli_epi16::<4>(lo_bytes); // 32..48
            let w3 = _mm256_srli_epi16::<4>(hi_bytes); // 48..64
                                                       // Four products per lane per sub-block: |Σ| ≤ 4·15·128, fits i16.
            let s0 = _mm256_add_epi16(products16(w0, part(xq, 0)), products16(w1, part(xq, 16)));
            let s1 = _mm256_add_epi16(products16(w2, part(xq, 32)), products16(w3, part(xq, 48)));
            if let [sc0, sc1] = *sc {
                acc.add_pair(s0, s1, i16::from(sc0), i16::from(sc1));
            }
        }
        let d = crate::quant::cast::f16_le(wb.d) * xb.scale();
        sums = accumulate(sums, d, acc.lanes());
        let dmin = crate::quant::cast::f16_le(wb.dmin) * xb.scale();
        sumf -= dmin * sumi as f32;
    }
    add_lanes(sumf, sums)
}

/// The sixteen bsums as 32 bytes (i16 little-endian, as x86 reads them).
#[inline(always)]
fn flatten_bsums(bsums: &[[u8; 2]; 16]) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (o, b) in out.chunks_exact_mut(2).zip(bsums) {
        o.copy_from_slice(b);
    }
    out
}

/// Safe entry of [`vec_dot_q4_k_impl`].
pub(super) fn vec_dot_q4_k(w: &[BlockQ4K], x: &[BlockQ8K]) -> f32 {
    // SAFETY: only handed out for an available AVX2 level (see `vec_dot_q8_0`).
    unsafe { vec_dot_q4_k_impl(w, x) }
}

/// `ggml_vec_dot_q6_K_q8_K_generic`: the lane sums scaled by `d·dx` into `sums` per block, added
/// in lane order at the end.
#[target_feature(enable = "avx2,f16c")]
fn vec_dot_q6_k_impl(w: &[BlockQ6K], x: &[BlockQ8K]) -> f32 {
    let mut sums = _mm256_setzero_ps();
    let low2 = _mm256_set1_epi8(0x03);
    let nibble = _mm256_set1_epi8(0x0f);
    let bias = _mm256_set1_epi8(32);
    for (wb, xb) in w.iter().zip(x) {
        let mut acc = LaneAcc::new();
        let halves = wb.ql.chunks_exact(64).zip(wb.qh.chunks_exact(32));
        let halves = halves
            .zip(xb.qs.chunks_exact(128))
            .zip(wb.scales.chunks_exact(8));
        for (((ql, qh), xq), half_scales) in halves {
            let a = load32(part(ql, 0));
            let b = load32(part(ql, 32));
            let h = load32(part(qh, 0));
            // (h >> shift) & 3, moved to bits 4..5 (16-bit shifts are fine: the mask comes after).
            let high_bits = [
                _mm256_slli_epi16::<4>(_mm256_and_si256(h, low2)),
                _mm256_slli_epi16::<4>(_mm256_and_si256(_mm256_srli_epi16::<2>(h), low2)),
                _mm256_slli_epi16::<4>(_mm256_and_si256(_mm256_srli_epi16::<4>(h), low2)),
                _mm256_slli_epi16::<4>(_mm256_and_si256(_mm256_srli_epi16::<6>(h), low2)),
            ];
            let a_high = _mm256_and_si256(_mm256_srli_epi16::<4>(a), nibble);
            let b_high = _mm256_and_si256(_mm256_srli_epi16::<4>(b), nibble);
            // Four groups of 32 values (each two sub-blocks of 16), signed -32..31.
            let groups = [
                _mm256_sub_epi8(
                    _mm256_or_si256(_mm256_and_si256(a, nibble), high_bits[0]),
                    bias,
                ),
                _mm256_sub_epi8(
                    _mm256_or_si256(_mm256_and_si256(b, nibble), high_bits[1]),
                    bias,
                ),
                _mm256_sub_epi8(_mm256_or_si256(a_high, high_bits[2]), bias),
                _mm256_sub_epi8(_mm256_or_si256(b_high, high_bits[3]), bias),
            ];
            let per_group = groups.into_iter().zip(half_scales.chunks_exact(2));
            for (g, (group, sc)) in per_group.enumerate() {
                let w0 = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(group));
                let w1 = _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(group));
                let p0 = products16(w0, part(xq, 32 * g));
                let p1 = products16(w1, part(xq, 32 * g + 16));
                if let [sc0, sc1] = *sc {
                    acc.add_pair(p0, p1, i16::from(sc0), i16::from(sc1));
                }
            }
        }
        let d = crate::quant::cast::f16_le(wb.d) * xb.scale();
        sums = accumulate(sums, d, acc.lanes());
    }
    add_lanes(0.0, sums)
}

/// Safe entry of [`vec_dot_q6_k_impl`].
pub(super) fn vec_dot_q6_k(w: &[BlockQ6K], x: &[BlockQ8K]) -> f32 {
    // SAFETY: only handed out for an available AVX2 level (see `vec_dot_q8_0`).
    unsafe { vec_dot_q6_k_impl(w, x) }
}
