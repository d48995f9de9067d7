//! Attention of one query over the cached positions, as small matrix products whose every output
//! is summed in the order of a serial dot product: `s = 0.0; s += a[0]·b[0]; s += a[1]·b[1]; …`.
//!
//! The keys are cached transposed (per KV head, one row of `max_context` positions per head
//! dimension), so the scores of a query head over positions `first..=last` are
//! `s[p] = Σ_d q[d] · kᵀ[d][p]` with `d` ascending, and the attention output is
//! `o[i] = Σ_p w[p] · v[p][i]` with `p` ascending: the same float steps as a serial dot of the query
//! and each key, and as adding each weighted value row in turn, so the bits do not depend on the
//! kernel level, the target, or how many queries a batch holds. What changes is only which sums
//! run side by side: [`rows_times`] keeps an `R × LANES` tile of independent sums in registers,
//! each broadcast `a` value and each loaded row of `b` used by `R` rows (the query heads that share
//! a KV head, and their weights), instead of one latency-bound chain per score.

use super::ops;

/// Rows of one product at most: the query heads of one KV head taken together (more share a KV
/// head only in blocks of this many).
pub(super) const MAX_ROWS: usize = 4;

/// Columns of the narrow register tile (two SSE or NEON vectors, one AVX vector); the last
/// columns of a product are computed in one such tile padded with zeros.
const NARROW: usize = 8;

/// `out[r·out_stride + c] = Σ_k a[r·a_stride + k] · b[k·b_stride + c]` for `r < rows`,
/// `c < width`, `k < depth`, each sum started at `0.0` and taken in ascending `k` (a serial dot
/// product's order), with the widest tile `wide` allows (AVX2 or AVX-512 code of the same Rust
/// where the level has it; the bits are the same). Returns `false`, leaving `out` partly
/// written, if a slice is too short or `rows` exceeds [`MAX_ROWS`].
#[allow(clippy::too_many_arguments)]
pub(super) fn rows_times(
    wide: Wide,
    rows: usize,
    depth: usize,
    width: usize,
    a: &[f32],
    a_stride: usize,
    b: &[f32],
    b_stride: usize,
    out: &mut [f32],
    out_stride: usize,
) -> bool {
    let shape = Shape {
        depth,
        width,
        a_stride,
        b_stride,
        out_stride,
    };
    match rows {
        0 => true,
        1 => wide.tiles::<1>(shape, a, b, out),
        2 => wide.tiles::<2>(shape, a, b, out),
        3 => wide.tiles::<3>(shape, a, b, out),
        4 => wide.tiles::<4>(shape, a, b, out),
        _ => false,
    }
}

/// Which compilation of the tiles runs: the portable one, or the same code compiled for AVX2 or
/// AVX-512 (no other difference: Rust never fuses a multiply and an add).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Wide {
    /// Baseline target features, tiles of [`NARROW`] columns.
    Portable,
    /// AVX2 code, tiles of 16 columns (two vectors per row).
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// AVX-512 code, tiles of 32 columns (two vectors per row).
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Wide {
    /// The widest compilation `level` allows on this CPU.
    pub(super) fn of(level: crate::quant::Level) -> Wide {
        #[cfg(target_arch = "x86_64")]
        {
            use crate::quant::Level;
            if level.is_available() {
                match level {
                    Level::Avx512Vnni | Level::Amx => return Wide::Avx512,
                    Level::Avx2 => return Wide::Avx2,
                    _ => {}
                }
            }
        }
        let _ = level;
        Wide::Portable
    }

    /// `x = exp(x)` ([`ops::exp_lanes`]) in this compilation.
    pub(super) fn exp(self, x: &mut [f32]) {
        match self {
            Wide::Portable => ops::exp_lanes(x),
            #[cfg(target_arch = "x86_64")]
            Wide::Avx2 => x86::exp_avx2(x),
            #[cfg(target_arch = "x86_64")]
            Wide::Avx512 => x86::exp_avx512(x),
        }
    }

    /// `gate = gelu(gate) * up` ([`ops::geglu_lanes`]) in this compilation.
    pub(super) fn geglu(self, gate: &mut [f32], up: &[f32], table: &[f32]) {
        match self {
            Wide::Portable => ops::geglu_lanes(gate, up, table),
            #[cfg(target_arch = "x86_64")]
            Wide::Avx2 => x86::geglu_avx2(gate, up, table),
            #[cfg(target_arch = "x86_64")]
            Wide::Avx512 => x86::geglu_avx512(gate, up, table),
        }
    }

    fn tiles<const R: usize>(self, s: Shape, a: &[f32], b: &[f32], out: &mut [f32]) -> bool {
        match self {
            Wide::Portable => tiles::<R, NARROW>(s, a, b, out),
            #[cfg(target_arch = "x86_64")]
            Wide::Avx2 => x86::tiles_avx2::<R>(s, a, b, out),
            #[cfg(target_arch = "x86_64")]
            Wide::Avx512 => x86::tiles_avx512::<R>(s, a, b, out),
        }
    }
}

/// [`tiles`], [`ops::exp_lanes`] and [`ops::geglu_lanes`] compiled for AVX2 and AVX-512 F: the
/// model's SIMD module.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod x86 {
    use super::{ops, tiles, Shape};

    /// [`ops::exp_lanes`] in AVX2 code. Only for [`super::Wide::Avx2`].
    pub(super) fn exp_avx2(x: &mut [f32]) {
        #[target_feature(enable = "avx2")]
        unsafe fn run(x: &mut [f32]) {
            ops::exp_lanes(x)
        }
        // SAFETY: called only for `Wide::Avx2`, which `Wide::of` gives only when the Avx2 level
        // is available on this CPU.
        unsafe { run(x) }
    }

    /// [`ops::exp_lanes`] in AVX-512 code. Only for [`super::Wide::Avx512`].
    pub(super) fn exp_avx512(x: &mut [f32]) {
        #[target_feature(enable = "avx512f")]
        unsafe fn run(x: &mut [f32]) {
            ops::exp_lanes(x)
        }
        // SAFETY: called only for `Wide::Avx512`, which `Wide::of` gives only when the
        // Avx512Vnni level is available on this CPU.
        unsafe { run(x) }
    }

    /// [`ops::geglu_lanes`] in AVX2 code. Only for [`super::Wide::Avx2`].
    pub(super) fn geglu_avx2(gate: &mut [f32], up: &[f32], table: &[f32]) {
        #[target_feature(enable = "avx2")]
        unsafe fn run(gate: &mut [f32], up: &[f32], table: &[f32]) {
            ops::geglu_lanes(gate, up, table)
        }
        // SAFETY: called only for `Wide::Avx2`, which `Wide::of` gives only when the Avx2 level
        // is available on this CPU.
        unsafe { run(gate, up, table) }
    }

    /// [`ops::geglu_lanes`] in AVX-512 code. Only for [`super::Wide::Avx512`].
    pub(super) fn geglu_avx512(gate: &mut [f32], up: &[f32], table: &[f32]) {
        #[target_feature(enable = "avx512f")]
        unsafe fn run(gate: &mut [f32], up: &[f32], table: &[f32]) {
            ops::geglu_lanes(gate, up, table)
        }
        // SAFETY: called only for `Wide::Avx512`, which `Wide::of` gives only when the
        // Avx512Vnni level is available on this CPU.
        unsafe { run(gate, up, table) }
    }

    /// [`tiles`] in AVX2 code, 16 columns per tile. Only [`super::Wide::of`] makes a
    /// [`super::Wide::Avx2`], for an available AVX2 level.
    pub(super) fn tiles_avx2<const R: usize>(
        s: Shape,
        a: &[f32],
        b: &[f32],
        out: &mut [f32],
    ) -> bool {
        #[target_feature(enable = "avx2")]
        unsafe fn run<const R: usize>(s: Shape, a: &[f32], b: &[f32], out: &mut [f32]) -> bool {
            tiles::<R, 16>(s, a, b, out)
        }
        // SAFETY: called only for `Wide::Avx2`, which `Wide::of` gives only when the Avx2 level
        // (AVX2 and F16C) is available on this CPU.
        unsafe { run::<R>(s, a, b, out) }
    }

    /// [`tiles`] in AVX-512 code, 32 columns per tile. Only [`super::Wide::of`] makes a
    /// [`super::Wide::Avx512`], for an available AVX-512 VNNI level.
    pub(super) fn tiles_avx512<const R: usize>(
        s: Shape,
        a: &[f32],
        b: &[f32],
        out: &mut [f32],
    ) -> bool {
        #[target_feature(enable = "avx512f")]
        unsafe fn run<const R: usize>(s: Shape, a: &[f32], b: &[f32], out: &mut [f32]) -> bool {
            tiles::<R, 32>(s, a, b, out)
        }
        // SAFETY: called only for `Wide::Avx512`, which `Wide::of` gives only when the
        // Avx512Vnni level (AVX-512 F/BW/VL and VNNI) is available on this CPU.
        unsafe { run::<R>(s, a, b, out) }
    }
}

#[derive(Clone, Copy)]
struct Shape {
    depth: usize,
    width: usize,
    a_stride: usize,
    b_stride: usize,
    out_stride: usize,
}

/// [`rows_times`] for `R` rows: tiles of `W` columns, then of [`NARROW`], then the last columns in
/// one narrow tile padded with zeros.
#[inline(always)]
fn tiles<const R: usize, const W: usize>(s: Shape, a: &[f32], b: &[f32], out: &mut [f32]) -> bool {
    // Every row of `a` within `a`, every used element of `b` within `b`, every row of `out` within
    // `out`: then no access below fails.
    let a_end = (R - 1)
        .checked_mul(s.a_stride)
        .and_then(|x| x.checked_add(s.depth));
    let b_end = match s.depth.checked_sub(1) {
        None => Some(0),
        Some(k) => k
            .checked_mul(s.b_stride)
            .and_then(|x| x.checked_add(s.width)),
    };
    let out_end = (R - 1)
        .checked_mul(s.out_stride)
        .and_then(|x| x.checked_add(s.width));
    let fits = |end: Option<usize>, len: usize| end.is_some_and(|e| e <= len);
    if !(fits(a_end, a.len()) && fits(b_end, b.len()) && fits(out_end, out.len())) {
        return false;
    }
    let mut c0 = 0;
    while c0 + W <= s.width {
        if !tile::<R, W, true>(&s, a, b, out, c0, W) {
            return false;
        }
        c0 += W;
    }
    while c0 + NARROW <= s.width {
        if !tile::<R, NARROW, true>(&s, a, b, out, c0, NARROW) {
            return false;
        }
        c0 += NARROW;
    }
    if c0 < s.width {
        return tile::<R, NARROW, false>(&s, a, b, out, c0, s.width - c0);
    }
    true
}

/// Columns `c0..c0 + cols` (`cols <= W`, and `cols == W` when `FULL`) of every row.
#[inline(always)]
fn tile<const R: usize, const W: usize, const FULL: bool>(
    s: &Shape,
    a: &[f32],
    b: &[f32],
    out: &mut [f32],
    c0: usize,
    cols: usize,
) -> bool {
    let mut acc = [[0.0f32; W]; R];
    for k in 0..s.depth {
        let start = k * s.b_stride + c0;
        let mut padded = [0.0f32; W];
        let bk: &[f32; W] = if FULL {
            match b.get(start..start + W).map(<&[f32; W]>::try_from) {
                Some(Ok(bk)) => bk,
                _ => return false,
            }
        } else {
            match (b.get(start..start + cols), padded.get_mut(..cols)) {
                (Some(src), Some(dst)) => dst.copy_from_slice(src),
                _ => return false,
            }
            &padded
        };
        for (r, acc_r) in acc.iter_mut().enumerate() {
            let Some(&x) = a.get(r * s.a_stride + k) else {
                return false;
            };
            for (sum, &y) in acc_r.iter_mut().zip(bk) {
                *sum += x * y;
            }
        }
    }
    for (r, acc_r) in acc.iter().enumerate() {
        let start = r * s.out_stride + c0;
        match (out.get_mut(start..start + cols), acc_r.get(..cols)) {
            (Some(o), Some(v)) => o.copy_from_slice(v),
            _ => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec;
    use std::vec::Vec;

    /// The serial dot product `rows_times` must reproduce bit for bit.
    fn serial(a: &[f32], b: &[f32], b_stride: usize, c: usize) -> f32 {
        let mut sum = 0.0f32;
        for (k, &x) in a.iter().enumerate() {
            sum += x * b[k * b_stride + c];
        }
        sum
    }

    fn values(n: usize, seed: u32) -> Vec<f32> {
        // Magnitudes spread over many binades, signs mixed: a reordered sum would differ.
        (0..n)
            .map(|i| {
                let x = ((i as u32).wrapping_mul(2_654_435_761) ^ seed.wrapping_mul(40_503)) >> 8;
                let m = (x % 1000) as f32 / 997.0 - 0.5;
                m * [1.0, 1e-3, 37.0, 1e4][(x as usize / 1000) % 4]
            })
            .collect()
    }

    /// Every compilation this CPU runs.
    fn wides() -> Vec<Wide> {
        crate::quant::Level::ALL
            .into_iter()
            .filter(|l| l.is_available())
            .map(Wide::of)
            .collect()
    }

    #[test]
    fn every_output_is_the_serial_dot_on_odd_shapes() {
        for wide in wides() {
            for rows in 0..=MAX_ROWS {
                for depth in [0, 1, 2, 5, 8, 17, 64] {
                    for width in (0..=17).chain([31, 33, 40, 64, 71]) {
                        let (a_stride, b_stride, out_stride) = (depth + 3, width + 5, width + 2);
                        let a = values(rows.max(1) * a_stride, 1);
                        let b = values(depth.max(1) * b_stride, 2);
                        let mut out = vec![f32::NAN; rows.max(1) * out_stride];
                        let ok = rows_times(
                            wide, rows, depth, width, &a, a_stride, &b, b_stride, &mut out,
                            out_stride,
                        );
                        assert!(ok, "rows {rows} depth {depth} width {width}");
                        for r in 0..rows {
                            let ar = &a[r * a_stride..r * a_stride + depth];
                            for c in 0..width {
                                let want = serial(ar, &b, b_stride, c);
                                let got = out[r * out_stride + c];
                                assert_eq!(
                                    got.to_bits(),
                                    want.to_bits(),
                                    "r {r} c {c} depth {depth}"
                                );
                            }
                            // Past `width`: untouched.
                            assert!(out[r * out_stride + width..][..out_stride - width]
                                .iter()
                                .all(|v| v.is_nan()));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn short_slices_and_too_many_rows_are_refused() {
        let a = [1.0f32; 8];
        let b = [1.0f32; 16];
        let mut out = [0.0f32; 16];
        assert!(!rows_times(
            Wide::Portable,
            MAX_ROWS + 1,
            1,
            1,
            &a,
            1,
            &b,
            1,
            &mut out,
            1
        ));
        // a: 2 rows of depth 4 with stride 5 need 9 values.
        assert!(!rows_times(
            Wide::Portable,
            2,
            4,
            2,
            &a,
            5,
            &b,
            2,
            &mut out,
            2
        ));
        // b: depth 4, stride 4, width 8 need 20 values.
        assert!(!rows_times(
            Wide::Portable,
            1,
            4,
            8,
            &a,
            4,
            &b,
            4,
            &mut out,
            8
        ));
        // out: 2 rows of width 8 with stride 9 need 17 values.
        assert!(!rows_times(
            Wide::Portable,
            2,
            1,
            8,
            &a,
            1,
            &b,
            8,
            &mut out,
            9
        ));
        assert!(rows_times(
            Wide::Portable,
            2,
            1,
            8,
            &a,
            1,
            &b,
            8,
            &mut out,
            8
        ));
        assert!(rows_times(
            Wide::Portable,
            1,
            0,
            3,
            &[],
            0,
            &[],
            0,
            &mut out,
            0
        ));
        assert_eq!(&out[..3], &[0.0; 3]);
    }
}
