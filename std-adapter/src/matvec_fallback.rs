//! TEMPORARY stand-in for `miniquant::quant::matvec::{matvec, matvec_scratch_bytes}`, which is being
//! written in the core crate. Same signatures; delete this module and switch the import in
//! `cli/matvec.rs` once it merges.
//!
//! y = W x row by row: `x` is quantized once into W's vec-dot type (in `scratch`), then each row of
//! `W` is dotted with it through `miniquant::quant::vec_dot`.

use miniquant::quant::{self, vec_dot_type};
use miniquant::{Error, GgmlType, Result};

/// Bytes of scratch [`matvec`] needs for rows of `cols` elements of type `t`.
pub fn matvec_scratch_bytes(t: GgmlType, cols: usize) -> Result<usize> {
    let vd = vec_dot_type(t).ok_or(Error::Unsupported {
        ggml_type: t,
        op: miniquant::error::Op::VecDot,
    })?;
    quant::bytes_for(vd, cols)
}

/// `y[r] = dot(W[r], x)` for the `rows` x `cols` matrix `w` (row-major blocks of type `t`).
pub fn matvec(
    t: GgmlType,
    w: &[u8],
    rows: usize,
    cols: usize,
    x: &[f32],
    scratch: &mut [u8],
    y: &mut [f32],
) -> Result<()> {
    let row_bytes = quant::bytes_for(t, cols)?;
    let w_bytes = row_bytes.checked_mul(rows).ok_or(Error::LengthMismatch {
        expected: u64::MAX,
        found: w.len() as u64,
    })?;
    let check = |expected: usize, found: usize| {
        if expected == found {
            Ok(())
        } else {
            Err(Error::LengthMismatch {
                expected: expected as u64,
                found: found as u64,
            })
        }
    };
    check(w_bytes, w.len())?;
    check(cols, x.len())?;
    check(rows, y.len())?;
    let x_bytes = matvec_scratch_bytes(t, cols)?;
    let scratch_len = scratch.len() as u64;
    let xq = scratch.get_mut(..x_bytes).ok_or(Error::LengthMismatch {
        expected: x_bytes as u64,
        found: scratch_len,
    })?;
    let vd = vec_dot_type(t).ok_or(Error::Unsupported {
        ggml_type: t,
        op: miniquant::error::Op::VecDot,
    })?;
    quant::quantize(vd, x, xq)?;
    if row_bytes == 0 {
        y.fill(0.0);
        return Ok(());
    }
    for (row, out) in w.chunks_exact(row_bytes).zip(y.iter_mut()) {
        *out = quant::vec_dot(t, row, xq)?;
    }
    Ok(())
}
