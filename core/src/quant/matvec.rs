//! Matrix-vector product over quantized weights: `y[r] = vec_dot(row r, x quantized once)`.
//!
//! The activation vector is quantized into the weight type's vec-dot type a single time, into a
//! caller-provided scratch buffer (no allocation), and every output is one [`vec_dot`] call, so the
//! result is the same as calling [`quantize`] and [`vec_dot`] by hand, row by row.

use super::{bytes_for, quantize, vec_dot, vec_dot_type};
use crate::error::{Error, Op, Result};
use crate::ggml_type::GgmlType;

/// Scratch bytes [`matvec`] needs for `cols` activations against weights of type `t`: the size of
/// `cols` values in `t`'s vec-dot type.
pub fn matvec_scratch_bytes(t: GgmlType, cols: usize) -> Result<usize> {
    let vd = vec_dot_type(t).ok_or(Error::Unsupported {
        ggml_type: t,
        op: Op::VecDot,
    })?;
    bytes_for(t, cols)?;
    bytes_for(vd, cols)
}

fn expect_len(expected: usize, found: usize) -> Result<()> {
    if expected == found {
        Ok(())
    } else {
        Err(Error::LengthMismatch {
            expected: expected as u64,
            found: found as u64,
        })
    }
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
    let scratch_len = matvec_scratch_bytes(t, cols)?;
    let row_bytes = bytes_for(t, cols)?;
    let weight_bytes = row_bytes.checked_mul(rows).ok_or(Error::LengthMismatch {
        expected: u64::MAX,
        found: w.len() as u64,
    })?;
    expect_len(weight_bytes, w.len())?;
    expect_len(cols, x.len())?;
    expect_len(rows, y.len())?;
    let available = scratch.len();
    let xq = scratch
        .get_mut(..scratch_len)
        .ok_or(Error::LengthMismatch {
            expected: scratch_len as u64,
            found: available as u64,
        })?;
    quantize(vec_dot_type_of(t)?, x, xq)?;
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
