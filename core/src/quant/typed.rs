//! The kernel API for one block type known at compile time: `typed::matvec::<BlockQ8_0>(..)`
//! references only that type's kernels and its activation quantizer, so firmware that multiplies
//! with one weight type links nothing else (the run-time [`GgmlType`](crate::GgmlType) API in
//! [`super`] reaches every type).
//!
//! Each function checks lengths once, resolves the kernel for the level once, then runs it. The
//! `_at` forms take a [`Level`] (an error if the CPU lacks it); the others use
//! [`level::current`].

use super::blockwise::same_len;
use super::cast::{blocks, blocks_mut, Block};
use super::level::{self, Level, LevelError};
use super::table::Kernels;
use crate::error::{Error, Op, Result};

/// Fails with [`Error::LevelUnavailable`] if the CPU or build lacks `level`.
pub(crate) fn check_level(level: Level) -> Result<()> {
    if level.is_available() {
        Ok(())
    } else {
        Err(LevelError::unavailable(level).into())
    }
}

fn unsupported<B: Block>(op: Op) -> Error {
    Error::Unsupported {
        ggml_type: B::TYPE,
        op,
    }
}

/// Number of values in `blocks` blocks of `B`.
fn values_in<B: Kernels>(blocks: usize) -> Result<usize> {
    blocks.checked_mul(B::VALUES).ok_or(Error::LengthMismatch {
        expected: u64::MAX,
        found: blocks as u64,
    })
}

/// Dequantizes `src` (whole blocks of `B`) into `dst`, which must hold exactly its values.
pub fn dequantize<B: Kernels>(src: &[u8], dst: &mut [f32]) -> Result<()> {
    dequantize_at::<B>(level::current(), src, dst)
}

/// [`dequantize`] at `level`.
pub fn dequantize_at<B: Kernels>(level: Level, src: &[u8], dst: &mut [f32]) -> Result<()> {
    check_level(level)?;
    let src = blocks::<B>(src)?;
    same_len(values_in::<B>(src.len())?, dst.len())?;
    B::dequantize_kernel(level)(src, dst);
    Ok(())
}

/// Quantizes `src` into `dst` (whole blocks of `B`), byte-identical to ggml's `quantize_row_*_ref`.
pub fn quantize<B: Kernels>(src: &[f32], dst: &mut [u8]) -> Result<()> {
    quantize_at::<B>(level::current(), src, dst)
}

/// [`quantize`] at `level`.
pub fn quantize_at<B: Kernels>(level: Level, src: &[f32], dst: &mut [u8]) -> Result<()> {
    check_level(level)?;
    let kernel = B::quantize_kernel(level).ok_or(unsupported::<B>(Op::Quantize))?;
    if !src.len().is_multiple_of(B::VALUES) {
        return Err(Error::PartialBlock {
            ggml_type: B::TYPE,
            len: src.len() as u64,
        });
    }
    let dst = blocks_mut::<B>(dst)?;
    same_len(src.len() / B::VALUES, dst.len())?;
    kernel(src, dst);
    Ok(())
}

/// Dot product of `w` (whole blocks of `B`) with `x` (as many values in `B`'s activation type), in
/// the float order of `ggml_vec_dot_*_generic`.
pub fn vec_dot<B: Kernels>(w: &[u8], x: &[u8]) -> Result<f32> {
    vec_dot_at::<B>(level::current(), w, x)
}

/// [`vec_dot`] at `level`.
pub fn vec_dot_at<B: Kernels>(level: Level, w: &[u8], x: &[u8]) -> Result<f32> {
    check_level(level)?;
    let kernel = B::vec_dot_kernel(level).ok_or(unsupported::<B>(Op::VecDot))?;
    let (w, x) = operands::<B>(w, x)?;
    Ok(kernel(w, x))
}

/// `w` and `x` as blocks, with as many activation blocks as `w` needs.
fn operands<'a, B: Kernels>(w: &'a [u8], x: &'a [u8]) -> Result<(&'a [B], &'a [B::Activation])> {
    let w = blocks::<B>(w)?;
    let x = blocks::<B::Activation>(x)?;
    let needed = w
        .len()
        .checked_mul(B::ACTIVATION_BLOCKS)
        .ok_or(Error::LengthMismatch {
            expected: u64::MAX,
            found: x.len() as u64,
        })?;
    same_len(needed, x.len())?;
    Ok((w, x))
}

/// Scratch bytes [`matvec`] needs for `cols` activations: their size in `B`'s activation type.
pub fn matvec_scratch_bytes<B: Kernels>(cols: usize) -> Result<usize> {
    if !cols.is_multiple_of(B::VALUES) {
        return Err(Error::PartialBlock {
            ggml_type: B::TYPE,
            len: cols as u64,
        });
    }
    let blocks = (cols / B::VALUES)
        .checked_mul(B::ACTIVATION_BLOCKS)
        .and_then(|b| b.checked_mul(core::mem::size_of::<B::Activation>()));
    blocks.ok_or(Error::LengthMismatch {
        expected: u64::MAX,
        found: cols as u64,
    })
}

/// `y = W x` for a row-major `rows × cols` matrix `w` of blocks of `B`: `x` is quantized once into
/// the first [`matvec_scratch_bytes`] bytes of `scratch`, then each `y[r]` is one vec_dot.
pub fn matvec<B: Kernels>(
    w: &[u8],
    rows: usize,
    cols: usize,
    x: &[f32],
    scratch: &mut [u8],
    y: &mut [f32],
) -> Result<()> {
    matvec_at::<B>(level::current(), w, rows, cols, x, scratch, y)
}

/// [`matvec`] at `level`.
pub fn matvec_at<B: Kernels>(
    level: Level,
    w: &[u8],
    rows: usize,
    cols: usize,
    x: &[f32],
    scratch: &mut [u8],
    y: &mut [f32],
) -> Result<()> {
    check_level(level)?;
    let xq = quantize_activations_at::<B>(level, cols, x, scratch)?;
    matvec_quantized_at::<B>(level, w, rows, cols, xq, y)
}

/// Quantizes `x` (`cols` values) into `B`'s activation type in the front of `scratch` and returns
/// those bytes: the first half of [`matvec`], for callers that split the rows (threads).
pub fn quantize_activations_at<'s, B: Kernels>(
    level: Level,
    cols: usize,
    x: &[f32],
    scratch: &'s mut [u8],
) -> Result<&'s [u8]> {
    check_level(level)?;
    B::vec_dot_kernel(level).ok_or(unsupported::<B>(Op::VecDot))?;
    let needed = matvec_scratch_bytes::<B>(cols)?;
    same_len(cols, x.len())?;
    let available = scratch.len();
    let xq = scratch.get_mut(..needed).ok_or(Error::LengthMismatch {
        expected: needed as u64,
        found: available as u64,
    })?;
    quantize_at::<B::Activation>(level, x, xq)?;
    Ok(xq)
}

/// `y = W xq` with the activations already quantized (by [`quantize_activations_at`]): the second
/// half of [`matvec`]. `w` holds `rows` rows of `cols` values; `y` has `rows` entries.
pub fn matvec_quantized_at<B: Kernels>(
    level: Level,
    w: &[u8],
    rows: usize,
    cols: usize,
    xq: &[u8],
    y: &mut [f32],
) -> Result<()> {
    check_level(level)?;
    let kernel = B::vec_dot_kernel(level).ok_or(unsupported::<B>(Op::VecDot))?;
    same_len(matvec_scratch_bytes::<B>(cols)?, xq.len())?;
    let row_blocks = cols / B::VALUES;
    let w = blocks::<B>(w)?;
    let xq = blocks::<B::Activation>(xq)?;
    let expected = row_blocks.checked_mul(rows).ok_or(Error::LengthMismatch {
        expected: u64::MAX,
        found: w.len() as u64,
    })?;
    same_len(expected, w.len())?;
    same_len(rows, y.len())?;
    if row_blocks == 0 {
        y.fill(0.0);
        return Ok(());
    }
    if let Some(rows_kernel) = B::rows_kernel(level) {
        rows_kernel(w, row_blocks, xq, y);
        return Ok(());
    }
    for (out, row) in y.iter_mut().zip(w.chunks_exact(row_blocks)) {
        *out = kernel(row, xq);
    }
    Ok(())
}

/// Scratch bytes [`matmul_at`] needs for `n` activation columns of `cols` values.
pub fn matmul_scratch_bytes<B: Kernels>(cols: usize, n: usize) -> Result<usize> {
    matvec_scratch_bytes::<B>(cols)?
        .checked_mul(n)
        .ok_or(Error::LengthMismatch {
            expected: u64::MAX,
            found: n as u64,
        })
}

/// `Y = W X` for `n` activation columns: `x` holds the columns one after another (`n × cols`),
/// `y` receives one output column of `rows` values per input column (`n × rows`). Every column
/// is bit-identical to [`matvec`] of that column; the weights are streamed once per tile of rows
/// rather than once per column.
#[allow(clippy::too_many_arguments)]
pub fn matmul_at<B: Kernels>(
    level: Level,
    w: &[u8],
    rows: usize,
    cols: usize,
    n: usize,
    x: &[f32],
    scratch: &mut [u8],
    y: &mut [f32],
) -> Result<()> {
    check_level(level)?;
    let kernel = B::vec_dot_kernel(level).ok_or(unsupported::<B>(Op::VecDot))?;
    let per_column = matvec_scratch_bytes::<B>(cols)?;
    let needed = matmul_scratch_bytes::<B>(cols, n)?;
    let outputs = rows.checked_mul(n).ok_or(Error::LengthMismatch {
        expected: u64::MAX,
        found: y.len() as u64,
    })?;
    let inputs = cols.checked_mul(n).ok_or(Error::LengthMismatch {
        expected: u64::MAX,
        found: x.len() as u64,
    })?;
    same_len(inputs, x.len())?;
    same_len(outputs, y.len())?;
    let available = scratch.len();
    let xq = scratch.get_mut(..needed).ok_or(Error::LengthMismatch {
        expected: needed as u64,
        found: available as u64,
    })?;
    let row_blocks = cols / B::VALUES;
    let w = blocks::<B>(w)?;
    same_len(row_blocks.saturating_mul(rows), w.len())?;
    if row_blocks == 0 || n == 0 {
        y.fill(0.0);
        return Ok(());
    }
    for (column, xq_column) in x.chunks_exact(cols).zip(xq.chunks_exact_mut(per_column)) {
        quantize_at::<B::Activation>(level, column, xq_column)?;
    }
    let xq = blocks::<B::Activation>(xq)?;
    let column_blocks = row_blocks * B::ACTIVATION_BLOCKS;
    // Tiles of rows small enough to stay in cache while every column passes over them.
    const TILE_ROWS: usize = 16;
    let tile_2x2 = B::vec_dot_2x2_kernel(level);
    for (tile, w_tile) in w.chunks(TILE_ROWS.saturating_mul(row_blocks)).enumerate() {
        let first_row = tile.saturating_mul(TILE_ROWS);
        let mut columns = xq.chunks_exact(column_blocks).zip(y.chunks_exact_mut(rows));
        if let Some(tile_2x2) = tile_2x2 {
            // Pairs of columns through the 2x2 kernel; an odd last column goes row by row below.
            while columns.len() >= 2 {
                let (Some((x0, y0)), Some((x1, y1))) = (columns.next(), columns.next()) else {
                    break;
                };
                let y0 = y0.get_mut(first_row..).unwrap_or_default();
                let y1 = y1.get_mut(first_row..).unwrap_or_default();
                let mut row_pairs = w_tile.chunks_exact(2 * row_blocks);
                let mut out_pairs = y0.chunks_mut(2).zip(y1.chunks_mut(2));
                for (pair, (out0, out1)) in (&mut row_pairs).zip(&mut out_pairs) {
                    let (w0, w1) = pair.split_at(row_blocks);
                    let [a, b, c, d] = tile_2x2(w0, w1, x0, x1);
                    if let ([o00, o10], [o01, o11]) = (out0, out1) {
                        (*o00, *o01, *o10, *o11) = (a, b, c, d);
                    }
                }
                // An odd last row of the tile.
                if let (Some(last), Some((out0, out1))) =
                    (row_pairs.remainder().get(..row_blocks), out_pairs.next())
                {
                    if let (Some(o0), Some(o1)) = (out0.first_mut(), out1.first_mut()) {
                        *o0 = kernel(last, x0);
                        *o1 = kernel(last, x1);
                    }
                }
            }
        }
        for (xq_column, y_column) in columns {
            let outs = y_column.iter_mut().skip(first_row);
            for (out, row) in outs.zip(w_tile.chunks_exact(row_blocks)) {
                *out = kernel(row, xq_column);
            }
        }
    }
    Ok(())
}
