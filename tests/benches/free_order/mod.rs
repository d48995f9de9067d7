//! What ggml's order costs: Q4_K and Q6_K dot products over the same blocks that add their
//! products in whatever order is fastest, as every AVX2 port of ggml does (adjacent bytes
//! summed by `maddubs` regardless of their lane, one scale per sub-block, fused multiply-add).
//! Their bits are not ggml's reference bits, so they live here, in the benchmark, and nowhere
//! in the library: the kernels benchmark times them beside our exact kernels and candle's, so
//! the price of the canonical order on this CPU is a measured figure, not a guess.
//!
//! Written for this benchmark from the block layouts (`../shared/reference/kernels.md`).

/// Q4_K block: `d`, `dmin` (f16), 12 bytes of packed 6-bit scales and mins, 128 bytes of nibbles.
const Q4_K_BYTES: usize = 144;
/// Q6_K block: 128 bytes of low nibbles, 64 of high bit pairs, 16 i8 scales, f16 `d`.
const Q6_K_BYTES: usize = 210;
/// Q8_K block: f32 `d`, 256 i8 quants, 16 i16 sums of 16 quants each.
const Q8_K_BYTES: usize = 292;

use miniquant::GgmlType;

/// Whether this CPU has what the free-order kernels use: AVX2, FMA and F16C.
fn has_features() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::is_x86_feature_detected!("avx2")
        && std::is_x86_feature_detected!("fma")
        && std::is_x86_feature_detected!("f16c");
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Whether [`dot`] has a kernel for `t` on this CPU.
pub fn has_kernel(t: GgmlType) -> bool {
    matches!(t, GgmlType::Q4_K | GgmlType::Q6_K) && has_features()
}

/// The free-order dot of one weight row of type `t` (Q4_K or Q6_K) and its Q8_K activation, or
/// `None` where [`has_kernel`] is false.
pub fn dot(t: GgmlType, w: &[u8], x: &[u8]) -> Option<f32> {
    if !has_kernel(t) {
        return None;
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `has_kernel` checked the features these functions enable.
    return Some(unsafe {
        if t == GgmlType::Q4_K {
            avx2::q4_k(w, x)
        } else {
            avx2::q6_k(w, x)
        }
    });
    #[cfg(not(target_arch = "x86_64"))]
    None
}

/// The 6-bit scales and mins of a Q4_K block (ggml's `get_scale_min_k4`), a word at a time.
fn scales_and_mins(packed: &[u8; 12]) -> (u64, u64) {
    let word = |i: usize| u32::from_le_bytes(packed[4 * i..4 * i + 4].try_into().unwrap());
    let (w0, w1, w2) = (word(0), word(1), word(2));
    let scales_low = w0 & 0x3f3f_3f3f;
    let scales_high = (w2 & 0x0f0f_0f0f) | (((w0 >> 6) & 0x0303_0303) << 4);
    let mins_low = w1 & 0x3f3f_3f3f;
    let mins_high = ((w2 >> 4) & 0x0f0f_0f0f) | (((w1 >> 6) & 0x0303_0303) << 4);
    let join = |low: u32, high: u32| u64::from(low) | (u64::from(high) << 32);
    (join(scales_low, scales_high), join(mins_low, mins_high))
}

fn f16_at(bytes: &[u8], at: usize) -> f32 {
    half::f16::from_le_bytes([bytes[at], bytes[at + 1]]).to_f32()
}

fn f32_at(bytes: &[u8], at: usize) -> f32 {
    f32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::*;
    use std::arch::x86_64::*;

    /// 32 bytes at `at` (bounds-checked).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn load32(bytes: &[u8], at: usize) -> __m256i {
        let chunk: &[u8; 32] = bytes[at..at + 32].try_into().unwrap();
        // SAFETY: `chunk` is 32 readable bytes; `loadu` has no alignment requirement.
        unsafe { _mm256_loadu_si256(chunk.as_ptr().cast()) }
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn hsum_ps(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn q4_k(w: &[u8], x: &[u8]) -> f32 {
        let nibble = _mm256_set1_epi8(0x0f);
        let mut acc = _mm256_setzero_ps();
        let mut acc_mins = _mm_setzero_ps();
        for (wb, xb) in w.chunks_exact(Q4_K_BYTES).zip(x.chunks_exact(Q8_K_BYTES)) {
            let dx = f32_at(xb, 0);
            let (scales, mins) = scales_and_mins(wb[4..16].try_into().unwrap());
            // Σ bsums·mins: each min covers two bsums (one madd, any order).
            let bsums = _mm256_loadu_si256(xb[260..292].as_ptr().cast());
            let min_pairs = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(
                _mm_set_epi64x(0, mins as i64),
                _mm_set_epi64x(0, mins as i64),
            ));
            let products = _mm256_madd_epi16(bsums, min_pairs);
            let products = _mm_add_epi32(
                _mm256_castsi256_si128(products),
                _mm256_extracti128_si256::<1>(products),
            );
            let dmin = _mm_set1_ps(f16_at(wb, 2) * dx);
            acc_mins = _mm_fmadd_ps(dmin, _mm_cvtepi32_ps(products), acc_mins);
            // Scale k as i16 in every element: one byte shuffle of the broadcast scale bytes.
            let scale_bytes = _mm256_set1_epi64x(scales as i64);
            let scale = |k: i8| {
                _mm256_shuffle_epi8(
                    scale_bytes,
                    _mm256_set1_epi16(i16::from_le_bytes([k as u8, 0x80])),
                )
            };
            let mut sums = _mm256_setzero_si256();
            for p in 0..4 {
                let q = load32(wb, 16 + 32 * p);
                let low = _mm256_and_si256(q, nibble);
                let high = _mm256_and_si256(_mm256_srli_epi16::<4>(q), nibble);
                let p0 = _mm256_maddubs_epi16(low, load32(xb, 4 + 64 * p));
                let p1 = _mm256_maddubs_epi16(high, load32(xb, 4 + 64 * p + 32));
                sums = _mm256_add_epi32(sums, _mm256_madd_epi16(p0, scale(2 * p as i8)));
                sums = _mm256_add_epi32(sums, _mm256_madd_epi16(p1, scale(2 * p as i8 + 1)));
            }
            let d = _mm256_set1_ps(f16_at(wb, 0) * dx);
            acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sums), acc);
        }
        let mins = _mm_add_ps(acc_mins, _mm_movehl_ps(acc_mins, acc_mins));
        let mins = _mm_add_ss(mins, _mm_movehdup_ps(mins));
        hsum_ps(acc) - _mm_cvtss_f32(mins)
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn q6_k(w: &[u8], x: &[u8]) -> f32 {
        let nibble = _mm256_set1_epi8(0x0f);
        let bits45 = _mm256_set1_epi8(0x30);
        let bias = _mm256_set1_epi8(32);
        let mut acc = _mm256_setzero_ps();
        for (wb, xb) in w.chunks_exact(Q6_K_BYTES).zip(x.chunks_exact(Q8_K_BYTES)) {
            let d = f16_at(wb, 208) * f32_at(xb, 0);
            let all_scales =
                _mm256_broadcastsi128_si256(_mm_loadu_si128(wb[192..208].as_ptr().cast()));
            let mut sums = _mm256_setzero_si256();
            for half in 0..2 {
                let a = load32(wb, 64 * half);
                let b = load32(wb, 64 * half + 32);
                let h = load32(wb, 128 + 32 * half);
                let groups = [
                    _mm256_or_si256(
                        _mm256_and_si256(a, nibble),
                        _mm256_and_si256(_mm256_slli_epi16::<4>(h), bits45),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(b, nibble),
                        _mm256_and_si256(_mm256_slli_epi16::<2>(h), bits45),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16::<4>(a), nibble),
                        _mm256_and_si256(h, bits45),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16::<4>(b), nibble),
                        _mm256_and_si256(_mm256_srli_epi16::<2>(h), bits45),
                    ),
                ];
                for (g, quants) in groups.into_iter().enumerate() {
                    let at = 4 + 128 * half + 32 * g;
                    let xv = load32(xb, at);
                    let products = _mm256_sub_epi16(
                        _mm256_maddubs_epi16(quants, xv),
                        _mm256_maddubs_epi16(bias, xv),
                    );
                    // Sub-block 2g of the half in the low 128 bits, 2g + 1 in the high ones:
                    // each scale byte shuffled to the high byte of every i16, then shifted
                    // down sign-extended.
                    let sub = (8 * half + 2 * g) as u8;
                    let control = _mm256_set_m128i(
                        _mm_set1_epi16(i16::from_le_bytes([0x80, sub + 1])),
                        _mm_set1_epi16(i16::from_le_bytes([0x80, sub])),
                    );
                    let scales = _mm256_srai_epi16::<8>(_mm256_shuffle_epi8(all_scales, control));
                    sums = _mm256_add_epi32(sums, _mm256_madd_epi16(products, scales));
                }
            }
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sums), acc);
        }
        hsum_ps(acc)
    }
}
