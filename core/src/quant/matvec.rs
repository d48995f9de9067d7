//! Matrix-vector and matrix-matrix products over quantized weights:
//! `y[r] = vec_dot(row r, x quantized once)`.
//!
//! The activations are quantized into the weight type's vec-dot type once, into a caller-provided
//! scratch buffer (no allocation), and every output is one vec_dot with the kernel resolved once per
//! call, so the result is the same as calling [`quantize`](super::quantize) and
//! [`vec_dot`](super::vec_dot) by hand, row by row, at any level. [`matmul`] gives every column the
//! bits [`matvec`] gives it. Callers that split the rows across threads quantize once with
//! [`quantize_activations`] and call [`matvec_quantized`] per range of rows.

use super::level::{self, Level};
use super::output_columns::OutputColumns;
use super::table::{visit, Kernels, Visitor};
use super::typed::{self, check_level};
use super::{bytes_for, vec_dot_type};
use crate::error::{Error, Op, Result};
use crate::ggml_type::GgmlType;

/// Scratch bytes [`matvec`] needs for `cols` activations against weights of type `t`: the size of
/// `cols` values in `t`'s vec-dot type.
pub fn matvec_scratch_bytes(t: GgmlType, cols: usize) -> Result<usize> {
    let vd = vec_dot_type_of(t)?;
    bytes_for(t, cols)?;
    bytes_for(vd, cols)
}

/// Scratch bytes [`matmul`] needs for `n` columns of `cols` activations.
pub fn matmul_scratch_bytes(t: GgmlType, cols: usize, n: usize) -> Result<usize> {
    matvec_scratch_bytes(t, cols)?
        .checked_mul(n)
        .ok_or(Error::LengthMismatch {
            expected: u64::MAX,
            found: n as u64,
        })
}

/// `y = W x` for a row-major `rows × cols` weight matrix `w` of type `t` (each row `cols` elements,
/// whole blocks). `x` (length `cols`) is quantized once into the first
/// [`matvec_scratch_bytes`]`(t, cols)` bytes of `scratch` (it may be longer); `y` has length `rows`.
///
/// Errors: [`Error::Unsupported`] if `t` has no vec_dot, [`Error::PartialBlock`] if `cols` is not a
/// whole number of blocks, [`Error::LengthMismatch`] if `w`, `x`, `y` or `scratch` do not fit.
pub fn matvec(
    t: GgmlType,
    w: &[u8],
    rows: usize,
    cols: usize,
    x: &[f32],
    scratch: &mut [u8],
    y: &mut [f32],
) -> Result<()> {
    matvec_at(level::current(), t, w, rows, cols, x, scratch, y)
}

/// [`matvec`] with the kernels of `level` ([`Error::LevelUnavailable`] if the CPU lacks it).
#[allow(clippy::too_many_arguments)]
pub fn matvec_at(
    level: Level,
    t: GgmlType,
    w: &[u8],
    rows: usize,
    cols: usize,
    x: &[f32],
    scratch: &mut [u8],
    y: &mut [f32],
) -> Result<()> {
    let xq = quantize_activations(level, t, cols, x, scratch)?;
    matvec_quantized(level, t, w, rows, cols, xq, y)
}

/// Quantizes `x` (`cols` values) into `t`'s vec-dot type in the front of `scratch` and returns those
/// bytes, for [`matvec_quantized`].
pub fn quantize_activations<'s>(
    level: Level,
    t: GgmlType,
    cols: usize,
    x: &[f32],
    scratch: &'s mut [u8],
) -> Result<&'s [u8]> {
    check_level(level)?;
    let vd = vec_dot_type_of(t)?;
    let needed = matvec_scratch_bytes(t, cols)?;
    super::blockwise::same_len(cols, x.len())?;
    let available = scratch.len();
    let xq = scratch.get_mut(..needed).ok_or(Error::LengthMismatch {
        expected: needed as u64,
        found: available as u64,
    })?;
    super::quantize_at(level, vd, x, xq)?;
    Ok(xq)
}

/// `y = W xq` for `rows` rows of `cols` values, with `xq` from [`quantize_activations`]. Splitting
/// the rows of one matvec into ranges and calling this per range gives the same bits as one call.
pub fn matvec_quantized(
    level: Level,
    t: GgmlType,
    w: &[u8],
    rows: usize,
    cols: usize,
    xq: &[u8],
    y: &mut [f32],
) -> Result<()> {
    struct Run<'a> {
        level: Level,
        w: &'a [u8],
        rows: usize,
        cols: usize,
        xq: &'a [u8],
        y: &'a mut [f32],
    }
    impl Visitor for Run<'_> {
        type Out = Result<()>;
        fn visit<B: Kernels>(self) -> Result<()> {
            typed::matvec_quantized_at::<B>(
                self.level, self.w, self.rows, self.cols, self.xq, self.y,
            )
        }
    }
    check_level(level)?;
    let vd = vec_dot_type_of(t)?;
    let row_bytes = bytes_for(t, cols)?;
    super::blockwise::same_len(bytes_for(vd, cols)?, xq.len())?;
    let weight_bytes = row_bytes.checked_mul(rows).ok_or(Error::LengthMismatch {
        expected: u64::MAX,
        found: w.len() as u64,
    })?;
    super::blockwise::same_len(weight_bytes, w.len())?;
    super::blockwise::same_len(rows, y.len())?;
    if row_bytes == 0 {
        y.fill(0.0);
        return Ok(());
    }
    let run = Run {
        level,
        w,
        rows,
        cols,
        xq,
        y,
    };
    visit(t, run).unwrap_or(Err(Error::Unsupported {
        ggml_type: t,
        op: Op::VecDot,
    }))
}

/// `Y = W X` for `n` activation columns: `x` holds the columns one after another (`n × cols`) and
/// `y` receives the output columns one after another (`n × rows`). Column `j` of `y` is
/// bit-identical to [`matvec`] of column `j` of `x`. `scratch` holds at least
/// [`matmul_scratch_bytes`] bytes.
#[allow(clippy::too_many_arguments)]
pub fn matmul(
    level: Level,
    t: GgmlType,
    w: &[u8],
    rows: usize,
    cols: usize,
    n: usize,
    x: &[f32],
    scratch: &mut [u8],
    y: &mut [f32],
) -> Result<()> {
    struct Run<'a> {
        level: Level,
        w: &'a [u8],
        rows: usize,
        cols: usize,
        n: usize,
        x: &'a [f32],
        scratch: &'a mut [u8],
        y: &'a mut [f32],
    }
    impl Visitor for Run<'_> {
        type Out = Result<()>;
        fn visit<B: Kernels>(self) -> Result<()> {
            typed::matmul_at::<B>(
                self.level,
                self.w,
                self.rows,
                self.cols,
                self.n,
                self.x,
                self.scratch,
                self.y,
            )
        }
    }
    check_level(level)?;
    vec_dot_type_of(t)?;
    bytes_for(t, cols)?;
    let run = Run {
        level,
        w,
        rows,
        cols,
        n,
        x,
        scratch,
        y,
    };
    visit(t, run).unwrap_or(Err(Error::Unsupported {
        ggml_type: t,
        op: Op::VecDot,
    }))
}

/// `Y = W Xq` for `n` columns already quantized one after another (each as
/// [`quantize_activations`] makes it; [`quantize_activations`] of the `n × cols` values at once
/// makes all of them): the second half of [`matmul`], for callers that split the rows or the
/// columns (threads). Column `j` of `y` (`n × rows`) is bit-identical to [`matvec`] of column `j`.
#[allow(clippy::too_many_arguments)]
pub fn matmul_quantized(
    level: Level,
    t: GgmlType,
    w: &[u8],
    rows: usize,
    cols: usize,
    n: usize,
    xq: &[u8],
    y: &mut [f32],
) -> Result<()> {
    let mut y = OutputColumns::whole(y, rows, n)?;
    matmul_quantized_into(level, t, w, rows, cols, n, xq, &mut y)
}

/// [`matmul_quantized`] into the columns of `y`, which holds `rows` rows of each of the `n`
/// columns: a run of rows of a larger output, so that threads that split the rows write their
/// pieces straight into its columns ([`OutputColumns::split`]).
#[allow(clippy::too_many_arguments)]
pub fn matmul_quantized_into(
    level: Level,
    t: GgmlType,
    w: &[u8],
    rows: usize,
    cols: usize,
    n: usize,
    xq: &[u8],
    y: &mut OutputColumns<'_, '_>,
) -> Result<()> {
    struct Run<'a, 'y, 'c> {
        level: Level,
        w: &'a [u8],
        rows: usize,
        cols: usize,
        n: usize,
        xq: &'a [u8],
        y: &'a mut OutputColumns<'y, 'c>,
    }
    impl Visitor for Run<'_, '_, '_> {
        type Out = Result<()>;
        fn visit<B: Kernels>(self) -> Result<()> {
            typed::matmul_quantized_into_at::<B>(
                self.level, self.w, self.rows, self.cols, self.n, self.xq, self.y,
            )
        }
    }
    check_level(level)?;
    vec_dot_type_of(t)?;
    bytes_for(t, cols)?;
    let run = Run {
        level,
        w,
        rows,
        cols,
        n,
        xq,
        y,
    };
    visit(t, run).unwrap_or(Err(Error::Unsupported {
        ggml_type: t,
        op: Op::VecDot,
    }))
}

/// Rows per tile of rows that [`matmul_quantized`] runs for type `t` at `level` with rows of
/// `row_bytes` bytes and `n` columns (several); a caller that cuts the rows into pieces (the std
/// pool) keeps each piece within one. See [`typed::matmul_tile_rows_at`].
pub fn matmul_tile_rows(level: Level, t: GgmlType, row_bytes: usize, n: usize) -> usize {
    struct Rows {
        level: Level,
        row_bytes: usize,
        n: usize,
    }
    impl Visitor for Rows {
        type Out = usize;
        fn visit<B: Kernels>(self) -> usize {
            typed::matmul_tile_rows_at::<B>(self.level, self.row_bytes, self.n)
        }
    }
    let rows = Rows {
        level,
        row_bytes,
        n,
    };
    visit(t, rows).unwrap_or(typed::matmul_tile_rows(row_bytes))
}

fn vec_dot_type_of(t: GgmlType) -> Result<GgmlType> {
    vec_dot_type(t).ok_or(Error::Unsupported {
        ggml_type: t,
        op: Op::VecDot,
    })
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use crate::quant::{quantize, vec_dot};
    use std::vec;
    use std::vec::Vec;

    fn data(n: usize, seed: f32) -> Vec<f32> {
        (0..n)
            .map(|i| std::primitive::f32::sin(i as f32 * 0.37 + seed) * 2.0)
            .collect()
    }

    #[test]
    fn equals_quantize_then_vec_dot_per_row() {
        let (rows, cols) = (5, 512);
        for t in [
            GgmlType::F32,
            GgmlType::F16,
            GgmlType::Q4_1,
            GgmlType::Q8_0,
            GgmlType::Q6_K,
        ] {
            let weights = data(rows * cols, 0.0);
            let mut w = vec![0u8; bytes_for(t, rows * cols).unwrap()];
            quantize(t, &weights, &mut w).unwrap();
            let x = data(cols, 1.0);
            let mut scratch = vec![0u8; matvec_scratch_bytes(t, cols).unwrap() + 3];
            let mut y = vec![f32::NAN; rows];
            matvec(t, &w, rows, cols, &x, &mut scratch, &mut y).unwrap();

            let vd = vec_dot_type(t).unwrap();
            let mut xq = vec![0u8; bytes_for(vd, cols).unwrap()];
            quantize(vd, &x, &mut xq).unwrap();
            let row_bytes = w.len() / rows;
            for (r, &got) in y.iter().enumerate() {
                let want = vec_dot(t, &w[r * row_bytes..(r + 1) * row_bytes], &xq).unwrap();
                assert_eq!(got.to_bits(), want.to_bits(), "{t} row {r}");
            }
            // And it is a dot product: close to the f32 one.
            let exact: f32 = weights[..cols].iter().zip(&x).map(|(a, b)| a * b).sum();
            assert!(
                (y[0] - exact).abs() < 0.02 * cols as f32,
                "{t}: {} vs {exact}",
                y[0]
            );
        }
    }

    #[test]
    fn scratch_sizes() {
        assert_eq!(matvec_scratch_bytes(GgmlType::Q4_0, 64), Ok(68));
        assert_eq!(matvec_scratch_bytes(GgmlType::Q4_1, 64), Ok(72));
        assert_eq!(matvec_scratch_bytes(GgmlType::Q4_K, 512), Ok(584));
        assert_eq!(matvec_scratch_bytes(GgmlType::F16, 7), Ok(14));
        assert!(matches!(
            matvec_scratch_bytes(GgmlType::Q4_K, 640),
            Err(Error::PartialBlock { .. })
        ));
        assert!(matches!(
            matvec_scratch_bytes(GgmlType::Q8_K, 256),
            Err(Error::Unsupported { .. })
        ));
        assert!(matches!(
            matvec_scratch_bytes(GgmlType::I8, 4),
            Err(Error::Unsupported { .. })
        ));
    }

    #[test]
    fn shape_errors() {
        let t = GgmlType::Q8_0;
        let (rows, cols) = (3, 64);
        let w = vec![0u8; 3 * 68];
        let x = vec![1.0f32; cols];
        let mut scratch = vec![0u8; 68];
        let mut y = vec![0f32; rows];
        let mismatch = |r: Result<()>| matches!(r, Err(Error::LengthMismatch { .. }));
        assert!(mismatch(matvec(
            t,
            &w[..200],
            rows,
            cols,
            &x,
            &mut scratch,
            &mut y
        )));
        assert!(mismatch(matvec(
            t,
            &w,
            rows,
            cols,
            &x[..63],
            &mut scratch,
            &mut y
        )));
        assert!(mismatch(matvec(
            t,
            &w,
            rows,
            cols,
            &x,
            &mut scratch[..67],
            &mut y
        )));
        assert!(mismatch(matvec(
            t,
            &w,
            rows,
            cols,
            &x,
            &mut scratch,
            &mut y[..2]
        )));
        assert!(mismatch(matvec(
            t,
            &w,
            usize::MAX,
            cols,
            &x,
            &mut scratch,
            &mut y
        )));
        assert!(matches!(
            matvec(t, &w, rows, 48, &x[..48], &mut scratch, &mut y),
            Err(Error::PartialBlock { .. })
        ));
        assert!(matches!(
            matvec(
                GgmlType::Q8_K,
                &[0; 292],
                1,
                256,
                &[0.0; 256],
                &mut [0; 292],
                &mut [0.0]
            ),
            Err(Error::Unsupported { .. })
        ));
        matvec(t, &w, rows, cols, &x, &mut scratch, &mut y).unwrap();
        assert_eq!(y, [0.0; 3]);
    }

    #[test]
    fn empty_shapes() {
        let mut y = [f32::NAN; 2];
        matvec(GgmlType::Q4_0, &[], 2, 0, &[], &mut [], &mut y).unwrap();
        assert_eq!(y, [0.0; 2]);
        matvec(
            GgmlType::Q4_0,
            &[],
            0,
            32,
            &[0.5; 32],
            &mut [0; 34],
            &mut [],
        )
        .unwrap();
    }
}
