//! The lane-parallel `make_qkx2_quants` search of the Q4_K, Q5_K and Q2_K quantizers, written once
//! over a lane vector and expanded by [`qkx2_lane_search`] in `q4_k::quantize` (AVX2, 8 lanes,
//! sub-blocks of 32) and `q2_k` (sub-blocks of 16), with the lane operations it calls (also
//! the Q6_K quantizer's). The AVX-512 level uses this AVX2
//! expansion (an untested 16-lane one was dropped: docs/kernel-experiments.md).
//!
//! Each lane runs one sub-block's scalar search (the twin is `k_quants::q4_k::fit_sub_blocks`):
//! the same float operations on the same values in the same order (lane-wise IEEE operations round
//! as the scalar ones, no FMA), comparisons as selects. A verdict only changes its own lane.
//!
//! Two shortcuts keep the bits while saving work:
//! - A trial's levels `clamp(nearest_int(iscale·(x − min)), 0, nmax)` are computed in float
//!   (`round` to nearest even, clamps only where some lane needs them) when a guard shows every
//!   `iscale·(x − min)` of the trial is a number below 2²² in magnitude: there ggml's
//!   `nearest_int` trick is exact rounding, and rounding and clamping to integers commute. The
//!   guard uses monotonicity: `iscale·(x − min)` lies between its values at the lane's smallest
//!   and largest `x`. Lanes holding a NaN, or out of range, take the exact integer form (the
//!   trick's bits) for the whole trial.
//!   Without the low clamp a level can be `-0.0` where the integer form gives `+0.0` (for
//!   `x − min = -0.0`); its products are zeros that leave the sums and the error unchanged, which
//!   start at `+0.0` and never become `-0.0`.
//! - The best levels are not kept per trial: a lane keeps the winning trial's `iscale` and
//!   minimum, and the levels are computed again from them (in the integer form) at the end.
//!
//! The expanding module imports the lane type `F`, mask type `Mask`, integer lane type `I` and
//! the primitives the body calls (`splat`, `add`, `sub`, `mul`, `div`, `sqrt`, `min`, `max` with
//! x86's `minps`/`maxps` NaN rules, `abs`, `neg`, `round`, `lt`, `gt`, `ge`, `eq`, `unordered`,
//! `and`, `or`, `any`, `all`, `select`, `level_int`, `to_float`, `zero_where`, `load_lanes`,
//! `lane_ints`, all defined here) and provides the lane count `LANES`; the search is compiled for
//! `$features`.

use core::arch::x86_64::*;

/// The lane vector of the Q4_K search, its compare masks and its integer lanes.
pub(super) type F = __m256;

pub(super) type Mask = __m256;

pub(super) type I = __m256i;

#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn splat(v: f32) -> F {
    _mm256_set1_ps(v)
}

#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn add(a: F, b: F) -> F {
    _mm256_add_ps(a, b)
}

#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn sub(a: F, b: F) -> F {
    _mm256_sub_ps(a, b)
}

#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn mul(a: F, b: F) -> F {
    _mm256_mul_ps(a, b)
}

#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn div(a: F, b: F) -> F {
    _mm256_div_ps(a, b)
}

#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn sqrt(a: F) -> F {
    _mm256_sqrt_ps(a)
}

/// `a < b ? a : b` (`b` when either is NaN).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn min(a: F, b: F) -> F {
    _mm256_min_ps(a, b)
}

/// `a > b ? a : b` (`b` when either is NaN).
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn max(a: F, b: F) -> F {
    _mm256_max_ps(a, b)
}

#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn abs(a: F) -> F {
    _mm256_andnot_ps(_mm256_set1_ps(-0.0), a)
}

#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn neg(a: F) -> F {
    _mm256_xor_ps(a, _mm256_set1_ps(-0.0))
}

/// To the nearest integer, ties to even.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn round(a: F) -> F {
    _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(a)
}

#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn lt(a: F, b: F) -> Mask {
    _mm256_cmp_ps::<_CMP_LT_OQ>(a, b)
}

#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn gt(a: F, b: F) -> Mask {
    _mm256_cmp_ps::<_CMP_GT_OQ>(a, b)
}

#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn ge(a: F, b: F) -> Mask {
    _mm256_cmp_ps::<_CMP_GE_OQ>(a, b)
}

#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn eq(a: F, b: F) -> Mask {
    _mm256_cmp_ps::<_CMP_EQ_OQ>(a, b)
}

#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn unordered(a: F, b: F) -> Mask {
    _mm256_cmp_ps::<_CMP_UNORD_Q>(a, b)
}

#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn and(a: Mask, b: Mask) -> Mask {
    _mm256_and_ps(a, b)
}

#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn or(a: Mask, b: Mask) -> Mask {
    _mm256_or_ps(a, b)
}

#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn any(m: Mask) -> bool {
    _mm256_movemask_ps(m) != 0
}

#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn all(m: Mask) -> bool {
    _mm256_movemask_ps(m) == 0xff
}

/// `m ? if_true : if_false` in each lane.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn select(m: Mask, if_true: F, if_false: F) -> F {
    _mm256_blendv_ps(if_false, if_true, m)
}

#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn to_float(l: I) -> F {
    _mm256_cvtepi32_ps(l)
}

/// Eight f32 as a lane vector.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn load_lanes(v: &[f32; 8]) -> F {
    // SAFETY: `v` holds eight f32; `loadu` has no alignment requirement.
    unsafe { _mm256_loadu_ps(v.as_ptr()) }
}

/// The eight integer lanes.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn lane_ints(l: I) -> [i32; 8] {
    let mut lanes = [0i32; 8];
    // SAFETY: `lanes` holds eight i32; `storeu` has no alignment requirement.
    unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), l) };
    lanes
}

/// `l`, with 0 in the lanes of `m`.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn zero_where(m: Mask, l: I) -> I {
    _mm256_andnot_si256(_mm256_castps_si256(m), l)
}

/// ggml's `nearest_int` in each lane: `bits(v + 1.5·2²³) & 0x7fffff - 0x400000`.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn nearest_int(v: __m256) -> __m256i {
    let shifted = _mm256_add_ps(v, _mm256_set1_ps(12_582_912.0));
    _mm256_sub_epi32(
        _mm256_and_si256(_mm256_castps_si256(shifted), _mm256_set1_epi32(0x007f_ffff)),
        _mm256_set1_epi32(0x0040_0000),
    )
}

/// `max(0, min(nmax, nearest_int(iscale · (x − min))))`.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn level_int(iscale: F, x: F, min: F, nmax: i32) -> I {
    let l = nearest_int(_mm256_mul_ps(iscale, _mm256_sub_ps(x, min)));
    _mm256_max_epi32(
        _mm256_min_epi32(l, _mm256_set1_epi32(nmax)),
        _mm256_setzero_si256(),
    )
}

/// Expands the search (`Lanes`, `start`, `trial`, `finish`) in the calling module, compiled for
/// the target features `$features`, over sub-blocks of `$sub` values weighted by `$weights`
/// (a function of the calling module from the transposed values to their weights).
macro_rules! qkx2_lane_search {
    ($features:literal, $sub:literal, $weights:path) => {
        /// Values in a sub-block.
        const SUB: usize = $sub;

        /// Sub-blocks transposed: lane `j` of vector `i` is value `i` of the lane's sub-block.
        type Columns = [F; SUB];

        /// One vector's search state, one sub-block per lane.
        #[derive(Clone, Copy)]
        struct Lanes {
            x: Columns,
            w: Columns,
            /// The smallest and largest values (NaN skipped unless first, as ggml's loop).
            x_min: F,
            max: F,
            /// Lanes with a NaN value: their trials take the exact integer levels.
            nan: Mask,
            /// The search's current minimum (`x_min` capped at 0, then each winning trial's).
            min: F,
            sum_w: F,
            sum_x: F,
            scale: F,
            best_error: F,
            /// The winning trial's inverse scale and the minimum its levels were measured from.
            best_iscale: F,
            best_from: F,
            /// Lanes whose values are all equal (`max == min`): ggml returns levels 0, scale 0 and
            /// the minimum at that point; the lane's later arithmetic is discarded.
            flat: Mask,
            flat_min: F,
        }

        /// `max(0, min(nmax, nearest_int(iscale · (x − min))))` by ggml's integer trick.
        #[inline]
        #[target_feature(enable = $features)]
        fn exact_level(iscale: F, x: F, min: F, nmax: i32) -> F {
            to_float(level_int(iscale, x, min, nmax))
        }

        /// `w · err(scale·l + min − x)`, `err` the absolute (`use_mad`) or squared difference.
        #[inline]
        #[target_feature(enable = $features)]
        fn error_term(scale: F, l: F, min: F, x: F, w: F, mad: bool) -> F {
            let diff = sub(add(mul(scale, l), min), x);
            mul(w, if mad { abs(diff) } else { mul(diff, diff) })
        }

        /// The weights and the search up to its first error.
        #[inline]
        #[target_feature(enable = $features)]
        fn start(search: Qkx2Search, x: Columns) -> Lanes {
            let zero = splat(0.0);
            let mut nan = unordered(zero, zero);
            for &v in &x {
                nan = or(nan, unordered(v, v));
            }
            let w: Columns = $weights(&x);

            let [x0, ..] = x;
            let [w0, ..] = w;
            let (mut min, mut max, mut sum_w) = (x0, x0, w0);
            let mut sum_x = mul(sum_w, x0);
            for (&xi, &wi) in x.iter().zip(&w).skip(1) {
                // `if (x < min) min = x`: minps returns its first operand only when it is smaller.
                min = self::min(xi, min);
                max = self::max(xi, max);
                sum_w = add(sum_w, wi);
                sum_x = add(sum_x, mul(wi, xi));
            }
            let x_min = min;
            min = select(gt(min, zero), zero, min);
            let flat = eq(max, min);

            let iscale = div(splat(search.nmax as f32), sub(max, min));
            let scale = div(splat(1.0), iscale);
            let mut best_error = zero;
            for (&xi, &wi) in x.iter().zip(&w) {
                let l = exact_level(iscale, xi, min, search.nmax);
                best_error = add(
                    best_error,
                    error_term(scale, l, min, xi, wi, search.use_mad),
                );
            }
            Lanes {
                x,
                w,
                x_min,
                max,
                nan,
                min,
                sum_w,
                sum_x,
                scale,
                best_error,
                best_iscale: iscale,
                best_from: min,
                flat,
                flat_min: min,
            }
        }

        /// How a trial's levels may be computed in all its lanes: `exact` (the integer trick),
        /// else rounding in float with the low and high clamps only where needed.
        #[derive(Clone, Copy)]
        struct LevelForm {
            exact: bool,
            clamp_low: bool,
            clamp_high: bool,
        }

        /// The guard of the float form: the range of `iscale·(x − min)` in each lane from its
        /// smallest and largest value.
        #[inline]
        #[target_feature(enable = $features)]
        fn level_form<const G: usize>(nmax: i32, lanes: &[Lanes; G], iscale: &[F; G]) -> LevelForm {
            let zero = splat(0.0);
            // Below 2²², `bits(v + 1.5·2²³)` holds `v` rounded to the nearest even integer.
            let exact_below = splat(4_194_304.0);
            let top = splat(nmax as f32 + 0.5);
            let mut form = LevelForm {
                exact: false,
                clamp_low: false,
                clamp_high: false,
            };
            for (s, &iscale) in lanes.iter().zip(iscale) {
                let low = mul(iscale, sub(s.x_min, s.min));
                let high = mul(iscale, sub(s.max, s.min));
                let in_range = and(lt(abs(low), exact_below), lt(abs(high), exact_below));
                form.exact |= any(s.nan) || !all(in_range);
                form.clamp_low |= any(or(lt(low, zero), lt(high, zero)));
                form.clamp_high |= any(or(ge(low, top), ge(high, top)));
            }
            form
        }

        /// `round(iscale · (x − from))` clamped to `0` (`LOW`) and to `nmax` (`HIGH`): a trial's
        /// levels in the float form, equal to [`exact_level`]'s where [`level_form`] allows it.
        #[inline]
        #[target_feature(enable = $features)]
        fn float_level<const LOW: bool, const HIGH: bool>(iscale: F, x: F, from: F, nmax: F) -> F {
            let l = round(mul(iscale, sub(x, from)));
            let l = if HIGH { min(l, nmax) } else { l };
            if LOW {
                max(l, splat(0.0))
            } else {
                l
            }
        }

        /// [`float_level`] in the form `form` (for the tests that hold it to [`exact_level`]).
        #[cfg(test)]
        #[allow(dead_code, reason = "only the AVX2 tests run it")]
        #[target_feature(enable = $features)]
        fn level_in_form(form: LevelForm, iscale: F, x: F, from: F, nmax: i32) -> F {
            let nmax_f = splat(nmax as f32);
            match (form.exact, form.clamp_low, form.clamp_high) {
                (true, _, _) => exact_level(iscale, x, from, nmax),
                (false, false, false) => float_level::<false, false>(iscale, x, from, nmax_f),
                (false, false, true) => float_level::<false, true>(iscale, x, from, nmax_f),
                (false, true, false) => float_level::<true, false>(iscale, x, from, nmax_f),
                (false, true, true) => float_level::<true, true>(iscale, x, from, nmax_f),
            }
        }

        /// A trial's levels (by `level`) and their sums `(Σ w·l, Σ (w·l)·l, Σ (w·l)·x)`, added
        /// in element order, the groups interleaved.
        #[inline]
        #[target_feature(enable = $features)]
        fn level_sums<const G: usize>(
            lanes: &[Lanes; G],
            iscale: &[F; G],
            levels: &mut [Columns; G],
            level: impl Fn(F, F, F) -> F,
        ) -> [(F, F, F); G] {
            let zero = splat(0.0);
            let mut sums = [(zero, zero, zero); G];
            for i in 0..SUB {
                for (((s, l), &iscale), (sl, sl2, sxl)) in lanes
                    .iter()
                    .zip(levels.iter_mut())
                    .zip(iscale)
                    .zip(sums.iter_mut())
                {
                    let (Some(&xi), Some(&wi), Some(l)) = (s.x.get(i), s.w.get(i), l.get_mut(i))
                    else {
                        continue;
                    };
                    *l = level(iscale, xi, s.min);
                    let wl = mul(wi, *l);
                    *sl = add(*sl, wl);
                    *sl2 = add(*sl2, mul(wl, *l));
                    *sxl = add(*sxl, mul(wl, xi));
                }
            }
            sums
        }

        /// One trial of the search (`is`) in every lane of every group: levels at the trial
        /// scale, the least-squares scale and minimum, their error, and the verdict "strictly
        /// better" as selects.
        #[inline]
        #[target_feature(enable = $features)]
        fn trial<const G: usize>(search: Qkx2Search, is: i32, lanes: &mut [Lanes; G]) {
            let zero = splat(0.0);
            let nmax = search.nmax;
            let nmax_f = splat(nmax as f32);
            let offset = splat(search.rmin + search.rdelta * is as f32 + nmax as f32);
            let iscale = lanes.map(|s| div(offset, sub(s.max, s.min)));
            let mut levels = [[zero; SUB]; G];
            let form = level_form(nmax, lanes, &iscale);
            let sums = match form {
                LevelForm { exact: true, .. } => {
                    level_sums(lanes, &iscale, &mut levels, |i, x, m| {
                        exact_level(i, x, m, nmax)
                    })
                }
                LevelForm {
                    clamp_low: false,
                    clamp_high: false,
                    ..
                } => level_sums(lanes, &iscale, &mut levels, |i, x, m| {
                    float_level::<false, false>(i, x, m, nmax_f)
                }),
                LevelForm {
                    clamp_low: false,
                    clamp_high: true,
                    ..
                } => level_sums(lanes, &iscale, &mut levels, |i, x, m| {
                    float_level::<false, true>(i, x, m, nmax_f)
                }),
                LevelForm {
                    clamp_low: true,
                    clamp_high: false,
                    ..
                } => level_sums(lanes, &iscale, &mut levels, |i, x, m| {
                    float_level::<true, false>(i, x, m, nmax_f)
                }),
                LevelForm { .. } => level_sums(lanes, &iscale, &mut levels, |i, x, m| {
                    float_level::<true, true>(i, x, m, nmax_f)
                }),
            };
            let mut fit = [(unordered(zero, zero), zero, zero); G];
            for ((f, s), &(sl, sl2, sxl)) in fit.iter_mut().zip(&*lanes).zip(&sums) {
                let det = sub(mul(s.sum_w, sl2), mul(sl, sl));
                let this_scale = div(sub(mul(s.sum_w, sxl), mul(s.sum_x, sl)), det);
                let this_min = div(sub(mul(sl2, s.sum_x), mul(sl, sxl)), det);
                let positive = gt(this_min, zero);
                let this_scale = select(positive, div(sxl, sl2), this_scale);
                let this_min = select(positive, zero, this_min);
                *f = (gt(det, zero), this_scale, this_min);
            }
            let mut error = [zero; G];
            for i in 0..SUB {
                for (((s, l), &(_, this_scale, this_min)), e) in
                    lanes.iter().zip(&levels).zip(&fit).zip(error.iter_mut())
                {
                    let (Some(&xi), Some(&wi), Some(&l)) = (s.x.get(i), s.w.get(i), l.get(i))
                    else {
                        continue;
                    };
                    *e = add(
                        *e,
                        error_term(this_scale, l, this_min, xi, wi, search.use_mad),
                    );
                }
            }
            for (((s, &(fits, this_scale, this_min)), &e), &iscale) in
                lanes.iter_mut().zip(&fit).zip(&error).zip(&iscale)
            {
                let better = and(fits, lt(e, s.best_error));
                s.best_error = select(better, e, s.best_error);
                s.scale = select(better, this_scale, s.scale);
                s.best_iscale = select(better, iscale, s.best_iscale);
                s.best_from = select(better, s.min, s.best_from);
                s.min = select(better, this_min, s.min);
            }
        }

        /// The search's results: each lane's scale, negated minimum and levels (`0..=nmax`).
        #[inline]
        #[target_feature(enable = $features)]
        fn finish(search: Qkx2Search, s: &Lanes) -> (F, F, [I; SUB]) {
            let zero = splat(0.0);
            let scale = select(s.flat, zero, s.scale);
            let min = select(s.flat, s.flat_min, s.min);
            let levels = s.x.map(|x| {
                zero_where(
                    s.flat,
                    level_int(s.best_iscale, x, s.best_from, search.nmax),
                )
            });
            (scale, neg(min), levels)
        }

        /// `LANES` sub-blocks of `x` by column: lane `j` of vector `i` is `x[SUB * j + i]` (lanes
        /// past the end of `x` hold 0).
        #[inline]
        #[target_feature(enable = $features)]
        fn columns(x: &[f32]) -> Columns {
            let mut lanes = [[0.0f32; LANES]; SUB];
            for (j, sub) in x.chunks_exact(SUB).take(LANES).enumerate() {
                for (column, &v) in lanes.iter_mut().zip(sub) {
                    if let Some(slot) = column.get_mut(j) {
                        *slot = v;
                    }
                }
            }
            lanes.map(|column| load_lanes(&column))
        }

        /// [`finish`]'s levels back in value order: `out[SUB * j + i]` is lane `j` of vector `i`.
        #[inline]
        #[target_feature(enable = $features)]
        fn scatter_levels(levels: &[I; SUB], out: &mut [u8]) {
            for (i, &l) in levels.iter().enumerate() {
                for (j, l) in lane_ints(l).into_iter().enumerate() {
                    if let Some(slot) = out.get_mut(SUB * j + i) {
                        // The levels lie in 0..=nmax, nmax below 256.
                        *slot = l as u8;
                    }
                }
            }
        }
    };
}

pub(super) use qkx2_lane_search;
