//! The Q4_K and Q5_K quantizers at AVX2: the per-sub-block `make_qkx2_quants` searches (8
//! sub-blocks of 32, levels to 15 and to 31) run side by side, one sub-block per lane, by the lane
//! search of `qkx2_lanes.rs`, two super-blocks interleaved so the serial in-order sums of one hide
//! the add latency of the other. Each lane runs exactly its sub-block's scalar search (the twin is
//! `k_quants::q4_k::fit_sub_blocks`). The AVX-512 level uses these.

use core::arch::x86_64::*;

use crate::quant::activation::QK_K;
use crate::quant::arch::x86_64::qkx2_lanes::{
    abs, add, all, and, any, div, eq, ge, gt, lane_ints, level_int, load_lanes, lt, max, min, mul,
    nearest_int, neg, or, qkx2_lane_search, round, select, splat, sqrt, sub, to_float, unordered,
    zero_where, Mask, F, I,
};
use crate::quant::arch::x86_64::tokens::{kernel, Avx2};
use crate::quant::cast::f16_le;
use crate::quant::k_quants::common::scale_min_k4;
use crate::quant::k_quants::common::Qkx2Search;
use crate::quant::k_quants::q4_k::{pack_fits, SubBlockFits, Q4K_SEARCH};
use crate::quant::k_quants::q5_k::{self, Q5K_SEARCH};
use crate::quant::k_quants::{BlockQ4K, BlockQ5K};

/// Sub-blocks in a super-block, one per lane.
const LANES: usize = QK_K / SUB;

/// The Q4_K/Q5_K weights: `sqrt(Σx²/32) + |x|`.
#[inline]
#[target_feature(enable = "avx2")]
fn q4_k_weights(x: &Columns) -> Columns {
    let mut sum_x2 = splat(0.0);
    for &v in x {
        sum_x2 = add(sum_x2, mul(v, v));
    }
    let av_x = sqrt(div(sum_x2, splat(32.0)));
    x.map(|v| add(av_x, abs(v)))
}

qkx2_lane_search!("avx2", 32, q4_k_weights);

/// The search's results in the scalar twin's form.
#[inline]
#[target_feature(enable = "avx2")]
fn fits(search: Qkx2Search, s: &Lanes) -> SubBlockFits {
    let (scale, neg_min, levels) = finish(search, s);
    let mut out = SubBlockFits {
        scales: [0.0; LANES],
        mins: [0.0; LANES],
        levels: [0; QK_K],
    };
    // SAFETY: `scales` and `mins` hold eight f32; `storeu` has no alignment requirement.
    unsafe {
        _mm256_storeu_ps(out.scales.as_mut_ptr(), scale);
        _mm256_storeu_ps(out.mins.as_mut_ptr(), neg_min);
    }
    scatter_levels(&levels, &mut out.levels);
    out
}

/// `fit_sub_blocks` of `G` super-blocks, their searches interleaved.
#[inline]
#[target_feature(enable = "avx2")]
fn fit_super_blocks<const G: usize>(search: Qkx2Search, x: [&[f32; QK_K]; G]) -> [SubBlockFits; G] {
    let mut lanes = x.map(|x| start(search, columns(x)));
    if search.nstep >= 1 {
        for is in 0..=search.nstep {
            trial(search, is, &mut lanes);
        }
    }
    lanes.map(|s| fits(search, &s))
}

/// The twin's `requantize` in SIMD: each sub-block's values against its rounded scale and min,
/// `clamp(nearest_int((x + dm) / d), 0, nmax)`, eight at a time (a vector division rounds as the
/// scalar one), sub-blocks whose `d` is 0 keeping the search's levels.
#[inline]
#[target_feature(enable = "avx2")]
fn requantize_levels(x: &[f32; QK_K], packed: &Packed, nmax: i32, levels: &mut [u8; QK_K]) {
    let (scales, d, dmin) = packed;
    let d_all = f16_le(*d);
    let dmin_all = f16_le(*dmin);
    let top = _mm256_set1_epi32(nmax);
    for (j, (xs, ls)) in x
        .chunks_exact(SUB)
        .zip(levels.chunks_exact_mut(SUB))
        .enumerate()
    {
        let (sc, m) = scale_min_k4(j, scales);
        let d = d_all * sc as f32;
        if d == 0.0 {
            continue;
        }
        let dm = _mm256_set1_ps(dmin_all * m as f32);
        let d = _mm256_set1_ps(d);
        for (v, l) in xs.chunks_exact(8).zip(ls.chunks_exact_mut(8)) {
            // SAFETY: `v` holds eight f32; `loadu` has no alignment requirement.
            let v = unsafe { _mm256_loadu_ps(v.as_ptr()) };
            let q = nearest_int(_mm256_div_ps(_mm256_add_ps(v, dm), d));
            let q = _mm256_max_epi32(_mm256_min_epi32(q, top), _mm256_setzero_si256());
            let mut lane = [0i32; 8];
            // SAFETY: `lane` holds eight i32; `storeu` has no alignment requirement.
            unsafe { _mm256_storeu_si256(lane.as_mut_ptr().cast(), q) };
            for (l, &q) in l.iter_mut().zip(&lane) {
                *l = q as u8;
            }
        }
    }
}

/// A Q4_K/Q5_K block's packed scales and mins, `d` and `dmin` (`pack_fits`' result).
type Packed = ([u8; 12], [u8; 2], [u8; 2]);

/// The twin's `block_from_fits`, the re-quantization in SIMD.
#[inline]
#[target_feature(enable = "avx2")]
fn q4_k_block_from_fits(x: &[f32; QK_K], fits: SubBlockFits) -> BlockQ4K {
    let packed = pack_fits(&fits.scales, &fits.mins);
    let mut levels = fits.levels;
    requantize_levels(x, &packed, 15, &mut levels);
    let (scales, d, dmin) = packed;
    let mut block = BlockQ4K {
        d,
        dmin,
        scales,
        qs: [0; QK_K / 2],
    };
    for (bytes, ls) in block.qs.chunks_exact_mut(32).zip(levels.chunks_exact(64)) {
        let (low, high) = ls.split_at(32);
        for ((q, &lo), &hi) in bytes.iter_mut().zip(low).zip(high) {
            *q = lo | (hi << 4);
        }
    }
    block
}

/// The rest of `quantize_row_q5_K_ref` after the search, the re-quantization in SIMD.
#[inline]
#[target_feature(enable = "avx2")]
fn q5_k_block_from_fits(x: &[f32; QK_K], fits: SubBlockFits) -> BlockQ5K {
    let packed = pack_fits(&fits.scales, &fits.mins);
    let mut levels = fits.levels;
    requantize_levels(x, &packed, 31, &mut levels);
    let (scales, d, dmin) = packed;
    q5_k::block_from_levels(d, dmin, scales, &levels)
}

/// A Q4_K/Q5_K quantizer: `search` over two super-blocks at a time (their searches interleaved),
/// then `finish` per super-block.
#[inline]
#[target_feature(enable = "avx2")]
fn quantize_searched<B>(
    values: &[f32],
    blocks: &mut [B],
    search: Qkx2Search,
    finish: impl Fn(&[f32; QK_K], SubBlockFits) -> B,
) {
    let mut pairs = values
        .chunks_exact(2 * QK_K)
        .zip(blocks.chunks_exact_mut(2));
    for (x, out) in &mut pairs {
        let (Some((a, b)), [first, second]) = (x.split_first_chunk::<QK_K>(), out) else {
            continue;
        };
        let Ok(b) = <&[f32; QK_K]>::try_from(b) else {
            continue;
        };
        let [fa, fb] = fit_super_blocks(search, [a, b]);
        *first = finish(a, fa);
        *second = finish(b, fb);
    }
    let done = blocks.len() / 2 * 2;
    let rest = values.get(done * QK_K..).unwrap_or(&[]);
    for (x, out) in rest.chunks_exact(QK_K).zip(blocks.iter_mut().skip(done)) {
        if let Ok(x) = <&[f32; QK_K]>::try_from(x) {
            let [fits] = fit_super_blocks(search, [x]);
            *out = finish(x, fits);
        }
    }
}

kernel! {
    /// `quantize_row_q4_K_ref`.
    #[target_feature(enable = "avx2")]
    pub(in super::super) fn quantize_q4_k(_t: Avx2, values: &[f32], blocks: &mut [BlockQ4K]) {
        quantize_searched(values, blocks, Q4K_SEARCH, |x, fits| {
            q4_k_block_from_fits(x, fits)
        })
    }

    /// `quantize_row_q5_K_ref`.
    #[target_feature(enable = "avx2")]
    pub(in super::super) fn quantize_q5_k(_t: Avx2, values: &[f32], blocks: &mut [BlockQ5K]) {
        quantize_searched(values, blocks, Q5K_SEARCH, |x, fits| {
            q5_k_block_from_fits(x, fits)
        })
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::quant::k_quants::{q4_k, q6_k, BlockQ6K};
    use bytemuck::Zeroable;
    use std::vec::Vec;

    /// xorshift64*: reproducible inputs without a dependency.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        /// Uniform in [-1, 1).
        fn unit(&mut self) -> f32 {
            (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        }

        /// Roughly normal: the sum of four uniforms.
        fn normal(&mut self) -> f32 {
            (0..4).map(|_| self.unit()).sum::<f32>() * 0.5
        }
    }

    /// One 32-value sub-block of kind `kind`: the shapes that steer the search differently
    /// (minimum above zero, all equal, grids that tie, outliers, extremes, NaN and infinities).
    fn sub_block(rng: &mut Rng, kind: u64) -> [f32; 32] {
        let scale = 10f32.powi((rng.next() % 13) as i32 - 6);
        let offset = rng.normal() * scale;
        core::array::from_fn(|i| match kind {
            0 => rng.normal() * scale,
            1 => rng.normal() * scale + offset,
            2 => rng.unit().abs() * scale + 1.0,
            3 => -rng.unit().abs() * scale,
            4 => offset,
            5 => 0.0,
            6 => ((rng.next() % 16) as f32 - 4.0) * 0.25,
            7 if i % 9 == 0 => rng.normal() * scale * 100.0,
            7 => rng.normal() * scale,
            8 => rng.normal() * 1e-40,
            9 => rng.normal() * 3e37,
            10 if i == 5 => f32::NAN,
            11 if i == 17 => f32::INFINITY,
            12 if i == 3 => f32::NEG_INFINITY,
            13 => (i % 16) as f32,
            14 if i % 2 == 0 => -0.0,
            _ => rng.normal(),
        })
    }

    /// `simd` over rows of 1 to 33 super-blocks (odd counts exercise the single-super-block tail
    /// after the interleaved pairs) of sub-blocks of every kind, against `scalar` per block.
    fn holds_searched_quantizer_to_scalar<B: Zeroable + Copy + PartialEq + core::fmt::Debug>(
        seed: u64,
        simd: fn(Avx2, &[f32], &mut [B]),
        scalar: fn(&[f32; QK_K]) -> B,
    ) {
        let Some(avx2) = Avx2::try_new() else {
            return;
        };
        let mut rng = Rng(seed);
        for n_blocks in [1usize, 2, 3, 8, 33] {
            for _ in 0..40 {
                let uniform_kind = rng.next().is_multiple_of(2);
                let first = rng.next() % 17;
                let values: Vec<f32> = (0..n_blocks * 8)
                    .flat_map(|_| {
                        let kind = if uniform_kind { first } else { rng.next() % 17 };
                        sub_block(&mut rng, kind)
                    })
                    .collect();
                let mut got = std::vec![B::zeroed(); n_blocks];
                simd(avx2, &values, &mut got);
                for (b, (x, got)) in values.chunks_exact(QK_K).zip(&got).enumerate() {
                    let want = scalar(x.try_into().unwrap());
                    assert_eq!(*got, want, "block {b} of {n_blocks}: {x:?}");
                }
            }
        }
    }

    #[test]
    fn avx2_q2_k_quantizer_gives_the_scalar_bytes() {
        holds_searched_quantizer_to_scalar(
            0x2c2c_5eed_0bad_f00d,
            crate::quant::arch::x86_64::q2_k::quantize_q2_k,
            crate::quant::k_quants::q2_k::quantize_block,
        );
    }

    #[test]
    fn avx2_q4_k_quantizer_gives_the_scalar_bytes() {
        holds_searched_quantizer_to_scalar(
            0x853c_49e6_748f_ea9b,
            quantize_q4_k,
            q4_k::quantize_block,
        );
    }

    #[test]
    fn avx2_q5_k_quantizer_gives_the_scalar_bytes() {
        holds_searched_quantizer_to_scalar(
            0x2545_f491_4f6c_dd1d,
            quantize_q5_k,
            q5_k::quantize_block,
        );
    }

    /// The guard of the float levels: wherever `level_form` allows the float form, its levels
    /// equal the integer trick's in every lane (up to a `-0.0` for `+0.0` without the low clamp,
    /// which the sums do not see), for minimums and inverse scales around and beyond the search's.
    #[test]
    fn avx2_float_levels_equal_the_integer_levels_where_the_guard_allows() {
        if !std::is_x86_feature_detected!("avx2") {
            return;
        }
        let mut rng = Rng(0x1405_7b7e_f767_814f);
        let mut float_forms = 0;
        for round in 0..3000 {
            // All lanes of one kind, or each its own.
            let x: Vec<f32> = (0..LANES as u64)
                .flat_map(|j| {
                    let kind = if round % 2 == 0 { round / 2 } else { j + round };
                    sub_block(&mut rng, kind % 17)
                })
                .collect();
            let x: &[f32; QK_K] = x.as_slice().try_into().unwrap();
            // SAFETY: AVX2 is available (checked above).
            unsafe {
                let mut s = start(Q4K_SEARCH, columns(x));
                // A winning trial's minimum: zero, a little above or below the smallest value, or
                // far off.
                let shift = [0.0, 0.01, -0.01, 0.5, -3.0, 1e30][(round % 6) as usize];
                let mut lanes_min = [0.0f32; LANES];
                _mm256_storeu_ps(lanes_min.as_mut_ptr(), s.x_min);
                let moved = lanes_min.map(|m| (m - shift * m.abs() - shift).min(0.0));
                if round % 3 != 0 {
                    s.min = _mm256_loadu_ps(moved.as_ptr());
                }
                let offset = 14.0 + 0.1 * (round % 21) as f32;
                let offset = if round % 7 == 0 { offset * 1e8 } else { offset };
                let iscale = div(splat(offset), sub(s.max, s.min));
                let form = level_form(Q4K_SEARCH.nmax, &[s], &[iscale]);
                if form.exact {
                    continue;
                }
                float_forms += 1;
                for &column in &s.x {
                    let float = level_in_form(form, iscale, column, s.min, Q4K_SEARCH.nmax);
                    let exact = exact_level(iscale, column, s.min, Q4K_SEARCH.nmax);
                    let (mut f, mut e) = ([0.0f32; LANES], [0.0f32; LANES]);
                    _mm256_storeu_ps(f.as_mut_ptr(), float);
                    _mm256_storeu_ps(e.as_mut_ptr(), exact);
                    for (f, e) in f.iter().zip(&e) {
                        let same = f.to_bits() == e.to_bits()
                            || (*f == 0.0 && *e == 0.0 && !form.clamp_low);
                        assert!(same, "round {round}: float {f:?}, integer {e:?}");
                    }
                }
            }
        }
        assert!(
            float_forms > 1000,
            "{float_forms} trials took the float form"
        );
    }

    #[test]
    fn avx2_q6_k_quantizer_gives_the_scalar_bytes() {
        let Some(avx2) = Avx2::try_new() else {
            return;
        };
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        for n_blocks in [1usize, 3, 8] {
            for _ in 0..60 {
                let uniform_kind = rng.next().is_multiple_of(2);
                let first = rng.next() % 17;
                // Two 16-value sub-blocks from each 32-value draw.
                let values: Vec<f32> = (0..n_blocks * 8)
                    .flat_map(|_| {
                        let kind = if uniform_kind { first } else { rng.next() % 17 };
                        sub_block(&mut rng, kind)
                    })
                    .collect();
                let mut got = std::vec![BlockQ6K::zeroed(); n_blocks];
                crate::quant::arch::x86_64::q6_k::quantize_q6_k(avx2, &values, &mut got);
                for (b, (x, got)) in values.chunks_exact(QK_K).zip(&got).enumerate() {
                    let want = q6_k::quantize_block(x.try_into().unwrap());
                    assert_eq!(*got, want, "block {b} of {n_blocks}: {x:?}");
                }
            }
        }
    }
}
