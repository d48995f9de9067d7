//! The integer core of the K-quant vec_dots: a super-block's 256 unpacked weight quants times Q8_K's
//! 256 quants, weighted by the sub-block scales and summed into eight lanes (lane = element index
//! mod 8, ggml's `aux32[8]`).
//!
//! Integer sums are exact, so they may be taken in any order; what must match ggml is only which lane
//! each product lands in, because each lane is then scaled and accumulated in float on its own. The
//! loops run over fixed chunks of 16 so that LLVM keeps the lanes in vector registers (SSE2 / NEON)
//! instead of adding into memory one element at a time.

use super::common::sub_blocks;
use crate::quant::activation::QK_K;

/// Eight lanes of products, one super-block.
pub(crate) type Lanes = [i32; 8];

/// `lanes[l] = Σ_s scales[s] · Σ_{e in sub-block s, e % 8 = l} w[e]·x[e]` for `SUBS` equal
/// sub-blocks (16 of 16 or 8 of 32 elements).
///
/// Each product `w·x` is taken in i16, which is exact for every K-quant (`|w| ≤ 32`, so
/// `|w·x| ≤ 4096`), then scaled into i32. Arithmetic wraps rather than panics, so quants outside
/// that range would give a wrong sum, never a panic. (Summing a sub-block's products in i16 before
/// scaling looks cheaper, but LLVM then widens those adds to i32 for SSE2 and the loop gets slower.)
#[inline(always)]
pub(crate) fn scaled_lane_sums<const SUBS: usize>(
    w: &[i8; QK_K],
    x: &[i8; QK_K],
    scales: &[i16; SUBS],
) -> Lanes {
    let chunks_per_sub = QK_K / SUBS / 16;
    // Sixteen lanes (element index mod 16) while summing, folded to eight at the end: a chunk of
    // 16 quants fills a whole SSE2 / NEON register.
    let mut wide = [0i32; 16];
    for (c, (wc, xc)) in sub_blocks::<16, _>(w)
        .zip(sub_blocks::<16, _>(x))
        .enumerate()
    {
        // `c / chunks_per_sub < SUBS` always; the fallback only keeps the code free of panics.
        let scale = scales.get(c / chunks_per_sub).copied().unwrap_or(0);
        let mut product = [0i16; 16];
        for ((p, &a), &b) in product.iter_mut().zip(wc).zip(xc) {
            *p = i16::from(a).wrapping_mul(i16::from(b));
        }
        for (lane, &p) in wide.iter_mut().zip(&product) {
            *lane = lane.wrapping_add(i32::from(scale).wrapping_mul(i32::from(p)));
        }
    }
    let mut lanes = [0i32; 8];
    let (low, high) = wide.split_at(8);
    for ((lane, &l), &h) in lanes.iter_mut().zip(low).zip(high) {
        *lane = l.wrapping_add(h);
    }
    lanes
}

/// `sums[l] += d * lanes[l]` for each lane: ggml's per-block float step, lane by lane (each lane is
/// one multiply and one add, so vectorizing it changes no bit).
#[inline(always)]
pub(crate) fn accumulate_lanes(sums: &mut [f32; 8], d: f32, lanes: &Lanes) {
    for (sum, &lane) in sums.iter_mut().zip(lanes) {
        *sum += d * lane as f32;
    }
}

/// The lane totals added to `sumf` in lane order (ggml's final loop).
#[inline(always)]
pub(crate) fn add_lanes(mut sumf: f32, sums: &[f32; 8]) -> f32 {
    for &sum in sums {
        sumf += sum;
    }
    sumf
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The straightforward per-element form the fast loop must equal.
    fn naive<const SUBS: usize>(w: &[i8; QK_K], x: &[i8; QK_K], scales: &[i16; SUBS]) -> Lanes {
        let mut lanes = [0i32; 8];
        for e in 0..QK_K {
            lanes[e % 8] += scales[e / (QK_K / SUBS)] as i32 * (w[e] as i32 * x[e] as i32);
        }
        lanes
    }

    #[test]
    fn matches_the_per_element_sum_at_the_extremes() {
        // Extremes of each K-quant's range against Q8_K's -128..=127.
        for (lo, hi) in [(0i8, 31i8), (-32, 31), (-4, 3), (0, 3)] {
            let w: [i8; QK_K] = core::array::from_fn(|e| if e % 3 == 0 { lo } else { hi });
            let x: [i8; QK_K] = core::array::from_fn(|e| if e % 5 < 2 { -128 } else { 127 });
            let s16: [i16; 16] = core::array::from_fn(|s| if s % 2 == 0 { -128 } else { 127 });
            let s8: [i16; 8] = core::array::from_fn(|s| 63 - s as i16);
            assert_eq!(scaled_lane_sums(&w, &x, &s16), naive(&w, &x, &s16));
            assert_eq!(scaled_lane_sums(&w, &x, &s8), naive(&w, &x, &s8));
            let all_low = [lo; QK_K];
            let all_min = [-128i8; QK_K];
            assert_eq!(
                scaled_lane_sums(&all_low, &all_min, &s8),
                naive(&all_low, &all_min, &s8)
            );
        }
    }
}
