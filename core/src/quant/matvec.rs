//! Matrix-vector product over quantized weights: `y[r] = vec_dot(row r, x quantized once)`.
//!
//! The activation vector is quantized into the weight type's vec-dot type a single time, into a
//! caller-provided scratch buffer (no allocation), and every output is one [`vec_dot`] call, so the
//! result is the same as calling [`quantize`] and [`vec_dot`] by hand, row by row.

use super::blockwise::same_len;
use super::{bytes_for, quantize, vec_dot, vec_dot_type};
use crate::error::{Error, Op, Result};
use crate::ggml_type::GgmlType;

/// Scratch bytes [`matvec`] needs for `cols` activations against weights of type `t`: the size of
/// `cols` values in `t`'s vec-dot type.
pub fn matvec_scratch_bytes(t: GgmlType, cols: usize) -> Result<usize> {
    let vd = vec_dot_type_of(t)?;
    bytes_for(t, cols)?;
    bytes_for(vd, cols)
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
    let vd = vec_dot_type_of(t)?;
    let row_bytes = bytes_for(t, cols)?;
    let scratch_len = bytes_for(vd, cols)?;
    let weight_bytes = row_bytes.checked_mul(rows).ok_or(Error::LengthMismatch {
        expected: u64::MAX,
        found: w.len() as u64,
    })?;
    same_len(weight_bytes, w.len())?;
    same_len(cols, x.len())?;
    same_len(rows, y.len())?;
    let available = scratch.len();
    let xq = scratch
        .get_mut(..scratch_len)
        .ok_or(Error::LengthMismatch {
            expected: scratch_len as u64,
            found: available as u64,
        })?;
    quantize(vd, x, xq)?;
    let xq: &[u8] = xq;

    if row_bytes == 0 {
        y.fill(0.0);
        return Ok(());
    }
    for (out, row) in y.iter_mut().zip(w.chunks_exact(row_bytes)) {
        *out = vec_dot(t, row, xq)?;
    }
    Ok(())
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
