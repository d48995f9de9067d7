//! The searches that ggml's K-quant reference quantizers share (`make_qkx2_quants`,
//! `make_qx_quants`, `make_q3_quants`), the 6-bit scale packings, and the 2-bit quant packing.
//!
//! The searches are ported operation for operation: every product and sum is written in C's order
//! and association (`w*x*l` is `(w*x)*l`), in f32, never fused, with ggml's `nearest_int` (ties to
//! even). A different order can flip a comparison in the search and change the output bytes.

use crate::quant::arrays::{map, products};
use crate::quant::float::{first_largest_magnitude, nearest_int};

/// ggml's threshold below which a group counts as all zeros (`GROUP_MAX_EPS`).
pub(crate) const GROUP_MAX_EPS: f32 = 1e-15;

/// The options of a `make_qkx2_quants` search.
#[derive(Clone, Copy)]
pub(crate) struct Qkx2Search {
    /// Largest level (levels are `0..=nmax`).
    pub nmax: i32,
    /// First trial offset added to `nmax` when choosing the trial inverse scale.
    pub rmin: f32,
    /// Step between trial offsets.
    pub rdelta: f32,
    /// Number of steps (trials are `0..=nstep`).
    pub nstep: i32,
    /// Weigh absolute errors (true) or squared errors (false).
    pub use_mad: bool,
}

/// The consecutive groups of `N` values of `x` (a super-block's sub-blocks, halves, ...) as arrays;
/// a remainder is dropped. Unlike `chunks_exact`, whose zips divide by the run-time chunk size
/// where LLVM does not inline them, this leaves no panic path, and indexing into an item needs no
/// bounds check.
#[inline(always)]
pub(crate) fn sub_blocks<const N: usize, T>(x: &[T]) -> impl Iterator<Item = &[T; N]> {
    x.as_chunks::<N>().0.iter()
}

/// [`sub_blocks`], mutably.
#[inline(always)]
pub(crate) fn sub_blocks_mut<const N: usize, T>(x: &mut [T]) -> impl Iterator<Item = &mut [T; N]> {
    x.as_chunks_mut::<N>().0.iter_mut()
}

/// `make_qkx2_quants`: levels `0..=nmax` for `x` with a scale and a minimum, chosen by a weighted
/// least-squares search over trial scales. Writes the levels and returns `(scale, -min)` (the minimum
/// is stored negated, as ggml's `the_min`).
///
/// Each pass first computes its per-element terms into arrays (independent, so LLVM vectorizes
/// them), then adds them up one by one in element order: the same float operations on the same
/// values in the same order as ggml's single loop.
pub(crate) fn make_qkx2_quants<const N: usize>(
    search: Qkx2Search,
    x: &[f32; N],
    weights: &[f32; N],
    levels: &mut [u8; N],
) -> (f32, f32) {
    let Qkx2Search {
        nmax,
        rmin,
        rdelta,
        nstep,
        use_mad,
    } = search;
    let (Some(&x0), Some(&w0)) = (x.first(), weights.first()) else {
        return (0.0, 0.0);
    };
    let mut min = x0;
    let mut max = x0;
    let mut sum_w = w0;
    let mut sum_x = sum_w * x0;
    let weighted_x = products(weights, x);
    for ((&xi, &w), &wx) in x.iter().zip(weights).zip(&weighted_x).skip(1) {
        if xi < min {
            min = xi;
        }
        if xi > max {
            max = xi;
        }
        sum_w += w;
        sum_x += wx;
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        levels.fill(0);
        return (0.0, -min);
    }
    let nmax_f = nmax as f32;
    let iscale = nmax_f / (max - min);
    let mut scale = 1.0 / iscale;
    let mut from_min = [0.0f32; N];
    for (d, &xi) in from_min.iter_mut().zip(x) {
        *d = xi - min;
    }
    for (level, &d) in levels.iter_mut().zip(&from_min) {
        *level = nearest_int(iscale * d).min(nmax).max(0) as u8;
    }
    let mut best_error = weighted_error(levels, scale, min, x, weights, use_mad);
    if nstep < 1 {
        return (scale, -min);
    }
    // Each trial's three sums and the previous trial's error are four independent chains of
    // in-order adds; they are summed in one pass so the CPU overlaps their latencies. The next
    // trial is formed before this one's verdict, from the current minimum, and formed again if
    // this trial moves the minimum (its levels, and the scale `iscale`, depend on it).
    let trial_scale = |is: i32, min: f32| (rmin + rdelta * is as f32 + nmax_f) / (max - min);
    let mut current = Trial::new(trial_scale(0, min), nmax, &from_min, x, weights);
    let mut sums = current.sums();
    for is in 0..=nstep {
        let (sum_l, sum_l2, sum_xl) = sums;
        let det = sum_w * sum_l2 - sum_l * sum_l;
        let fit = (det > 0.0).then(|| {
            let this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                (sum_xl / sum_l2, 0.0)
            } else {
                (this_scale, this_min)
            }
        });
        let errors = match fit {
            Some((this_scale, this_min)) => {
                error_terms(&current.levels, this_scale, this_min, x, weights, use_mad)
            }
            None => [0.0; N],
        };
        let mut next = if is < nstep {
            Trial::new(trial_scale(is + 1, min), nmax, &from_min, x, weights)
        } else {
            Trial::empty()
        };
        let (cur_error, next_sums) = next.sums_with(&errors);
        sums = next_sums;
        if let Some((this_scale, this_min)) = fit {
            if cur_error < best_error {
                *levels = current.levels;
                best_error = cur_error;
                scale = this_scale;
                let moved = this_min.to_bits() != min.to_bits();
                min = this_min;
                if moved {
                    // Later trials measure from the new minimum, as ggml's loop does.
                    for (d, &xi) in from_min.iter_mut().zip(x) {
                        *d = xi - min;
                    }
                    if is < nstep {
                        next = Trial::new(trial_scale(is + 1, min), nmax, &from_min, x, weights);
                        sums = next.sums();
                    }
                }
            }
        }
        current = next;
    }
    (scale, -min)
}

/// One trial of the search: its levels and the terms of its three sums, `w·l`, `(w·l)·l` and
/// `(w·l)·x`.
struct Trial<const N: usize> {
    levels: [u8; N],
    wl: [f32; N],
    wl2: [f32; N],
    wlx: [f32; N],
}

impl<const N: usize> Trial<N> {
    /// The levels `clamp(nearest_int(iscale · (x − min)), 0, nmax)` and their terms.
    #[inline(always)]
    fn new(iscale: f32, nmax: i32, from_min: &[f32; N], x: &[f32; N], weights: &[f32; N]) -> Self {
        let mut levels = [0u8; N];
        for (l, &d) in levels.iter_mut().zip(from_min) {
            *l = nearest_int(iscale * d).min(nmax).max(0) as u8;
        }
        let lf = map(&levels, f32::from);
        let wl = products(weights, &lf);
        Trial {
            levels,
            wl2: products(&wl, &lf),
            wlx: products(&wl, x),
            wl,
        }
    }

    /// A placeholder after the last trial (its sums are never used).
    #[inline(always)]
    fn empty() -> Self {
        Trial {
            levels: [0; N],
            wl: [0.0; N],
            wl2: [0.0; N],
            wlx: [0.0; N],
        }
    }

    /// `(Σ w·l, Σ (w·l)·l, Σ (w·l)·x)`, each added in element order.
    #[inline(always)]
    fn sums(&self) -> (f32, f32, f32) {
        self.sums_with(&[0.0; N]).1
    }

    /// `Σ other` and [`Trial::sums`], all four in element order, in one pass.
    #[inline(always)]
    fn sums_with(&self, other: &[f32; N]) -> (f32, (f32, f32, f32)) {
        let (mut total, mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32, 0.0f32);
        for (((&e, &a), &b), &c) in other.iter().zip(&self.wl).zip(&self.wl2).zip(&self.wlx) {
            total += e;
            sum_l += a;
            sum_l2 += b;
            sum_xl += c;
        }
        (total, (sum_l, sum_l2, sum_xl))
    }
}

/// The terms `w · err(scale·l + min − x)` of a weighted error, `err` the absolute or squared
/// difference.
#[inline(always)]
fn error_terms<const N: usize>(
    levels: &[u8; N],
    scale: f32,
    min: f32,
    x: &[f32; N],
    weights: &[f32; N],
    use_mad: bool,
) -> [f32; N] {
    let mut terms = [0.0f32; N];
    for (((t, &l), &xi), &w) in terms.iter_mut().zip(levels).zip(x).zip(weights) {
        let diff = scale * l as f32 + min - xi;
        let diff = if use_mad { diff.abs() } else { diff * diff };
        *t = w * diff;
    }
    terms
}

/// `Σ w · err(scale·l + min − x)` in element order.
#[inline(always)]
fn weighted_error<const N: usize>(
    levels: &[u8; N],
    scale: f32,
    min: f32,
    x: &[f32; N],
    weights: &[f32; N],
    use_mad: bool,
) -> f32 {
    let mut error = 0.0f32;
    for &t in &error_terms(levels, scale, min, x, weights, use_mad) {
        error += t;
    }
    error
}

/// `max(-nmax, min(nmax - 1, l))`.
#[inline(always)]
fn clamp_symmetric(l: i32, nmax: i32) -> i32 {
    l.min(nmax - 1).max(-nmax)
}

/// For one trial inverse scale: the levels `clamp(nearest_int(iscale·x), -nmax, nmax-1)` and the
/// x²-weighted fit sums `Σ (x²·x)·l` and `Σ (x²·l)·l`, added in element order (`w` = x², `wx` =
/// x²·x, precomputed once per sub-block: the same products ggml forms in its loop).
#[inline(always)]
fn symmetric_fit<const N: usize>(
    iscale: f32,
    nmax: i32,
    x: &[f32; N],
    w: &[f32; N],
    wx: &[f32; N],
) -> ([i32; N], f32, f32) {
    let mut levels = [0i32; N];
    for (l, &xi) in levels.iter_mut().zip(x) {
        *l = clamp_symmetric(nearest_int(iscale * xi), nmax);
    }
    let lf = map(&levels, |l| l as f32);
    let lx_terms = products(wx, &lf);
    let l2_terms = products(&products(w, &lf), &lf);
    let mut sumlx = 0.0f32;
    let mut suml2 = 0.0f32;
    for (&a, &b) in lx_terms.iter().zip(&l2_terms) {
        sumlx += a;
        suml2 += b;
    }
    (levels, sumlx, suml2)
}

/// Inverse scales `make_qx_quants` tries: the plain one, then `is = -9..=-1, 1..=9` in ggml's order.
const QX_TRIALS: usize = 19;

/// Lanes of the trial sums: the trials padded to a multiple of the vector width (the padding lanes
/// use inverse scale 0 and are never read).
const QX_LANES: usize = 20;

/// `make_qx_quants(n, nmax, x, L, rmse_type = 1, qw = NULL)`, the only form a `_ref` quantizer uses
/// (Q6_K): levels `0..2*nmax` (stored with `+nmax`) and a scale chosen among 19 trial inverse scales
/// by the x²-weighted least-squares fit.
///
/// A trial's sums do not depend on the verdicts before it, only the comparison does: so all 19
/// trials' sums are formed together, one trial per lane, element by element (each lane adds its
/// terms in element order, as ggml's loop does), and the verdicts then run in ggml's order.
pub(crate) fn make_qx_quants<const N: usize>(nmax: i32, x: &[f32; N], levels: &mut [i8; N]) -> f32 {
    let (max, amax) = first_largest_magnitude(x);
    if amax < GROUP_MAX_EPS {
        levels.fill(0);
        return 0.0;
    }
    let w = products(x, x);
    let wx = products(&w, x);
    let nmax_f = nmax as f32;
    let mut iscales = [0.0f32; QX_LANES];
    iscales[0] = -nmax_f / max;
    for (slot, is) in iscales[1..QX_TRIALS]
        .iter_mut()
        .zip((-9i32..=9).filter(|&is| is != 0))
    {
        *slot = -(nmax_f + 0.1 * is as f32) / max;
    }
    let mut sumlx = [0.0f32; QX_LANES];
    let mut suml2 = [0.0f32; QX_LANES];
    for ((&xi, &wi), &wxi) in x.iter().zip(&w).zip(&wx) {
        let mut lf = [0.0f32; QX_LANES];
        for (l, &iscale) in lf.iter_mut().zip(&iscales) {
            *l = clamp_symmetric(nearest_int(iscale * xi), nmax) as f32;
        }
        for ((lx, l2), &l) in sumlx.iter_mut().zip(suml2.iter_mut()).zip(&lf) {
            *lx += wxi * l;
            *l2 += (wi * l) * l;
        }
    }
    let mut scale = if suml2[0] != 0.0 {
        sumlx[0] / suml2[0]
    } else {
        0.0
    };
    let mut best = scale * sumlx[0];
    let mut chosen = 0;
    for k in 1..QX_TRIALS {
        if suml2[k] > 0.0 && sumlx[k] * sumlx[k] > best * suml2[k] {
            scale = sumlx[k] / suml2[k];
            best = scale * sumlx[k];
            chosen = k;
        }
    }
    let iscale = iscales[chosen];
    for (l, &xi) in levels.iter_mut().zip(x) {
        *l = (clamp_symmetric(nearest_int(iscale * xi), nmax) + nmax) as i8;
    }
    scale
}

/// `make_q3_quants(n, nmax, x, L, do_rmse = true)` (Q3_K's form): levels `-nmax..nmax` from the
/// plain scale `-nmax / max`, then up to 5 passes that move single levels while the x²-weighted fit
/// improves. Levels are stored with `+nmax`.
pub(crate) fn make_q3_quants<const N: usize>(nmax: i32, x: &[f32; N], levels: &mut [i8; N]) -> f32 {
    let (max, amax) = first_largest_magnitude(x);
    if amax < GROUP_MAX_EPS {
        levels.fill(0);
        return 0.0;
    }
    let w = products(x, x);
    let wx = products(&w, x);
    let (first, mut sumlx, mut suml2) = symmetric_fit(-(nmax as f32) / max, nmax, x, &w, &wx);
    *levels = map(&first, |l| l as i8);
    for _ in 0..5 {
        let mut changed = false;
        for (((level, &xi), &w), &wx) in levels.iter_mut().zip(x).zip(&w).zip(&wx) {
            let current = *level as f32;
            let mut slx = sumlx - wx * current;
            if slx > 0.0 {
                let mut sl2 = suml2 - w * current * current;
                let new_l = clamp_symmetric(nearest_int(xi * sl2 / slx), nmax);
                if new_l != *level as i32 {
                    let nf = new_l as f32;
                    slx += wx * nf;
                    sl2 += w * nf * nf;
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        *level = new_l as i8;
                        sumlx = slx;
                        suml2 = sl2;
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    for level in levels.iter_mut() {
        *level = level.wrapping_add(nmax as i8);
    }
    if suml2 > 0.0 {
        sumlx / suml2
    } else {
        0.0
    }
}

/// `get_scale_min_k4`: the 6-bit scale and min of sub-block `j` (0..8) from Q4_K/Q5_K's 12 bytes.
/// Bytes 0..4 hold scales 0..4 and bytes 4..8 mins 0..4 in their low 6 bits; bytes 8..12 hold the low
/// nibbles of scales/mins 4..8, whose top 2 bits sit in the top bits of bytes 0..8.
#[inline(always)]
pub(crate) fn scale_min_k4(j: usize, q: &[u8; 12]) -> (u8, u8) {
    // Callers pass 0..8; saying so lets the compiler drop the bounds checks below, the last panic
    // path a firmware image with the Q4_K kernels linked (found by its no-panic link check).
    let j = j & 7;
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// Packs 8 scales and 8 mins (each below 64) into Q4_K/Q5_K's 12 bytes, the inverse of
/// [`scale_min_k4`].
pub(crate) fn pack_scale_min_k4(scales: &[u8; 8], mins: &[u8; 8]) -> [u8; 12] {
    let mut q = [0u8; 12];
    for j in 0..8 {
        let (ls, lm) = (scales[j], mins[j]);
        if j < 4 {
            q[j] = ls;
            q[j + 4] = lm;
        } else {
            q[j + 4] = (ls & 0x0f) | ((lm & 0x0f) << 4);
            q[j - 4] |= (ls >> 4) << 6;
            q[j] |= (lm >> 4) << 6;
        }
    }
    q
}

/// The largest sub-block scale and the largest min of a K-quant super-block's fits, each from 0
/// (ggml's `if (x > max) max = x` loop: a NaN is never larger).
pub(crate) fn largest_scale_and_min(scales: &[f32], mins: &[f32]) -> (f32, f32) {
    let mut max_scale = 0.0f32;
    let mut max_min = 0.0f32;
    for (&scale, &min) in scales.iter().zip(mins) {
        if scale > max_scale {
            max_scale = scale;
        }
        if min > max_min {
            max_min = min;
        }
    }
    (max_scale, max_min)
}

/// Q3_K's 16 six-bit scales (still offset by 32) from its 12 bytes: the low nibbles of scales 0..8
/// and the high nibbles of scales 8..16 share bytes 0..8, and bytes 8..12 hold the top 2 bits
/// (scale `j`'s at bit offset `2·(j / 4)` of byte `8 + j % 4`). Worked on four bytes at a time.
#[inline(always)]
pub(crate) fn unpack_q3_scales(q: &[u8; 12]) -> [i8; 16] {
    let word = |i: usize| u32::from_le_bytes([q[4 * i], q[4 * i + 1], q[4 * i + 2], q[4 * i + 3]]);
    let (low_a, low_b, high) = (word(0), word(1), word(2));
    let join = |low: u32, shift: u32| (low & 0x0f0f_0f0f) | (((high >> shift) & 0x0303_0303) << 4);
    let words = [
        join(low_a, 0),
        join(low_b, 2),
        join(low_a >> 4, 4),
        join(low_b >> 4, 6),
    ];
    let mut scales = [0i8; 16];
    for (four, w) in sub_blocks_mut::<4, _>(&mut scales).zip(words) {
        for (s, b) in four.iter_mut().zip(w.to_le_bytes()) {
            *s = b as i8;
        }
    }
    scales
}

/// Packs 256 levels of 2 bits (Q2_K, and Q3_K's low bits) into 64 bytes: in each half of 128 values,
/// byte `l` holds values `l`, `l + 32`, `l + 64` and `l + 96` at bit offsets 0, 2, 4 and 6.
pub(crate) fn pack_2bit(levels: &[u8; 256]) -> [u8; 64] {
    let mut qs = [0u8; 64];
    for (out, half) in sub_blocks_mut::<32, _>(&mut qs).zip(sub_blocks::<128, _>(levels)) {
        let (v0, rest) = half.split_at(32);
        let (v1, rest) = rest.split_at(32);
        let (v2, v3) = rest.split_at(32);
        for ((((q, &a), &b), &c), &d) in out.iter_mut().zip(v0).zip(v1).zip(v2).zip(v3) {
            *q = a | (b << 2) | (c << 4) | (d << 6);
        }
    }
    qs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_min_packing_round_trips() {
        let scales = [0, 63, 17, 42, 5, 63, 32, 1];
        let mins = [63, 0, 9, 40, 62, 33, 16, 0];
        let packed = pack_scale_min_k4(&scales, &mins);
        for j in 0..8 {
            assert_eq!(
                scale_min_k4(j, &packed),
                (scales[j], mins[j]),
                "sub-block {j}"
            );
        }
    }

    #[test]
    fn q3_scales_unpack_by_hand() {
        // Scale 0 = 0x2a (low 0xa in byte 0, high 2 in bits 0..2 of byte 8); scale 9 = 0x35 (low 5
        // in the high nibble of byte 1, high 3 in bits 4..6 of byte 9); scale 15 = 0x3f.
        let mut q = [0u8; 12];
        q[0] = 0x0a;
        q[8] = 0x02;
        q[1] = 0x50;
        q[9] = 0x3 << 4;
        q[7] = 0xf0;
        q[11] = 0x3 << 6;
        let s = unpack_q3_scales(&q);
        assert_eq!((s[0], s[9], s[15], s[1], s[7]), (0x2a, 0x35, 0x3f, 0, 0));
    }

    #[test]
    fn qkx2_fits_an_exact_grid() {
        // Values already on a grid 0.5*l - 1 for l = 0..=3 are recovered exactly: scale 0.5, min 1.
        let x: [f32; 16] = core::array::from_fn(|i| 0.5 * (i % 4) as f32 - 1.0);
        let weights = [1.0f32; 16];
        let mut levels = [0u8; 16];
        let search = Qkx2Search {
            nmax: 3,
            rmin: -0.5,
            rdelta: 0.1,
            nstep: 15,
            use_mad: true,
        };
        let (scale, min) = make_qkx2_quants(search, &x, &weights, &mut levels);
        assert_eq!((scale, min), (0.5, 1.0));
        for (i, &l) in levels.iter().enumerate() {
            assert_eq!(l as usize, i % 4);
        }
    }

    #[test]
    fn qx_and_q3_of_zeros_are_zero() {
        let mut levels = [7i8; 16];
        assert_eq!(make_qx_quants(32, &[0.0; 16], &mut levels), 0.0);
        assert_eq!(levels, [0; 16]);
        levels = [7; 16];
        assert_eq!(make_q3_quants(4, &[1e-16; 16], &mut levels), 0.0);
        assert_eq!(levels, [0; 16]);
    }

    #[test]
    fn qx_recovers_a_symmetric_grid() {
        // x = -l for l in -32..=31 scaled by 0.25: make_qx_quants must find scale -0.25 (levels are
        // relative to the signed max, which is x = 8 at l = -32) and store l + 32.
        let x: [f32; 16] = core::array::from_fn(|i| -0.25 * (i as f32 * 4.0 - 32.0));
        let mut levels = [0i8; 16];
        let scale = make_qx_quants(32, &x, &mut levels);
        assert_eq!(scale, -0.25);
        for (i, &l) in levels.iter().enumerate() {
            assert_eq!(l as i32 - 32, i as i32 * 4 - 32);
        }
    }
}
