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

/// Columns of the register tile (one AVX vector; two SSE or NEON vectors).
const LANES: usize = 8;

/// Rows of one product at most: the query heads of one KV head taken together (more share a KV
/// head only in blocks of this many).
pub(super) const MAX_ROWS: usize = 4;

/// `out[r·out_stride + c] = Σ_k a[r·a_stride + k] · b[k·b_stride + c]` for `r < rows`,
/// `c < width`, `k < depth`, each sum started at `0.0` and taken in ascending `k` (a serial dot
/// product's order). Returns `false`, leaving `out` partly written, if a slice is too short or
/// `rows` exceeds [`MAX_ROWS`].
#[allow(clippy::too_many_arguments)]
pub(super) fn rows_times(
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
        1 => tiles::<1>(shape, a, b, out),
        2 => tiles::<2>(shape, a, b, out),
        3 => tiles::<3>(shape, a, b, out),
        4 => tiles::<4>(shape, a, b, out),
        _ => false,
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

/// [`rows_times`] for `R` rows: full tiles of [`LANES`] columns, then the last columns one by one.
fn tiles<const R: usize>(s: Shape, a: &[f32], b: &[f32], out: &mut [f32]) -> bool {
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
    let full = s.width / LANES * LANES;
    let mut c0 = 0;
    while c0 < full {
        let mut acc = [[0.0f32; LANES]; R];
        for k in 0..s.depth {
            let start = k * s.b_stride + c0;
            let Some(Ok(bk)) = b.get(start..start + LANES).map(<&[f32; LANES]>::try_from) else {
                return false;
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
            let Some(o) = out.get_mut(start..start + LANES) else {
                return false;
            };
            o.copy_from_slice(acc_r);
        }
        c0 += LANES;
    }
    for c in full..s.width {
        for r in 0..R {
            let mut sum = 0.0f32;
            for k in 0..s.depth {
                let (Some(&x), Some(&y)) = (a.get(r * s.a_stride + k), b.get(k * s.b_stride + c))
                else {
                    return false;
                };
                sum += x * y;
            }
            let Some(o) = out.get_mut(r * s.out_stride + c) else {
                return false;
            };
            *o = sum;
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

    #[test]
    fn every_output_is_the_serial_dot_on_odd_shapes() {
        for rows in 0..=MAX_ROWS {
            for depth in [0, 1, 2, 5, 8, 17, 64] {
                for width in (0..=17).chain([31, 64]) {
                    let (a_stride, b_stride, out_stride) = (depth + 3, width + 5, width + 2);
                    let a = values(rows.max(1) * a_stride, 1);
                    let b = values(depth.max(1) * b_stride, 2);
                    let mut out = vec![f32::NAN; rows.max(1) * out_stride];
                    let ok = rows_times(
                        rows, depth, width, &a, a_stride, &b, b_stride, &mut out, out_stride,
                    );
                    assert!(ok, "rows {rows} depth {depth} width {width}");
                    for r in 0..rows {
                        let ar = &a[r * a_stride..r * a_stride + depth];
                        for c in 0..width {
                            let want = serial(ar, &b, b_stride, c);
                            let got = out[r * out_stride + c];
                            assert_eq!(got.to_bits(), want.to_bits(), "r {r} c {c} depth {depth}");
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

    #[test]
    fn short_slices_and_too_many_rows_are_refused() {
        let a = [1.0f32; 8];
        let b = [1.0f32; 16];
        let mut out = [0.0f32; 16];
        assert!(!rows_times(MAX_ROWS + 1, 1, 1, &a, 1, &b, 1, &mut out, 1));
        // a: 2 rows of depth 4 with stride 5 need 9 values.
        assert!(!rows_times(2, 4, 2, &a, 5, &b, 2, &mut out, 2));
        // b: depth 4, stride 4, width 8 need 20 values.
        assert!(!rows_times(1, 4, 8, &a, 4, &b, 4, &mut out, 8));
        // out: 2 rows of width 8 with stride 9 need 17 values.
        assert!(!rows_times(2, 1, 8, &a, 1, &b, 8, &mut out, 9));
        assert!(rows_times(2, 1, 8, &a, 1, &b, 8, &mut out, 8));
        assert!(rows_times(1, 0, 3, &[], 0, &[], 0, &mut out, 0));
        assert_eq!(&out[..3], &[0.0; 3]);
    }
}
