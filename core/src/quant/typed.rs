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
use super::output_columns::{check_holds, OutputColumns};
use super::table::{Kernels, VecDot2x2Fn, VecDotFn};
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
    rows_against_column::<B>(level, kernel, w, row_blocks, xq, y);
    Ok(())
}

/// `out[r]` = vec_dot of row `r` of `w` (`row_blocks` blocks each) with `xq`: the rows kernel of
/// `level` where there is one, else one vec_dot per row.
fn rows_against_column<B: Kernels>(
    level: Level,
    vec_dot: VecDotFn<B, B::Activation>,
    w: &[B],
    row_blocks: usize,
    xq: &[B::Activation],
    out: &mut [f32],
) {
    // Checked here too, not only by the callers: it proves `chunks_exact` below cannot panic, so
    // firmware that calls matvec links no panic path.
    if row_blocks == 0 {
        out.fill(0.0);
        return;
    }
    if let Some(rows_kernel) = B::rows_kernel(level) {
        rows_kernel(w, row_blocks, xq, out);
        return;
    }
    for (out, row) in out.iter_mut().zip(w.chunks_exact(row_blocks)) {
        *out = vec_dot(row, xq);
    }
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

/// Weight bytes of one tile of rows in [`matmul_quantized_at`]: every column passes over a tile
/// while it stays in the core's private L2 (1-2 MiB on current cores), so the weights come from
/// memory once per call instead of once per column. Small enough that a tile and a few columns'
/// activations share L2, large enough that what the rows kernels make once per call and column
/// (activation summaries, prepared K-quant activations) is spread over many rows.
pub const MATMUL_TILE_BYTES: usize = 128 << 10;

/// A tile's rows are a multiple of this: the pair of 16-row strips the legacy types' VNNI matmul
/// decodes at once (a tile of 16 or 24 rows left its second strip empty or half empty;
/// docs/kernel-experiments.md, "Matmul tiles of whole strip pairs"), itself a multiple of every
/// group of rows a kernel runs side by side, so that only the matrix's last tile has rows left
/// over.
const TILE_ROW_MULTIPLE: usize = 32;

/// Rows per tile of [`matmul_quantized_at`] for rows of `row_bytes` bytes where the type has no
/// matmul kernel (the rows kernel runs per column over a tile): about [`MATMUL_TILE_BYTES`] of
/// weights, rounded to the nearest multiple of 32 rows (at least 32).
pub fn matmul_tile_rows(row_bytes: usize) -> usize {
    let rows = MATMUL_TILE_BYTES / row_bytes.max(1) + TILE_ROW_MULTIPLE / 2;
    (rows - rows % TILE_ROW_MULTIPLE).max(TILE_ROW_MULTIPLE)
}

/// The fewest rows of a tile that a matmul kernel gets on x86_64 from
/// [`KERNEL_TILE_MIN_COLUMNS`] columns. Its drivers cut a call into chunks of blocks themselves,
/// so a tile is no cache bound for them, and what they make once per call, chunk and column (the
/// activations' summaries) is spread over more rows in a longer call. With fewer columns the
/// rows' streams matter more: more of them at once lost (docs/kernel-experiments.md, "Long rows
/// in chunks"). Not measured on aarch64: there, as before.
const KERNEL_TILE_MIN_ROWS: usize = if cfg!(target_arch = "x86_64") {
    4 * TILE_ROW_MULTIPLE
} else {
    TILE_ROW_MULTIPLE
};

/// Columns from which a matmul kernel's tiles have at least [`KERNEL_TILE_MIN_ROWS`] rows.
const KERNEL_TILE_MIN_COLUMNS: usize = 32;

/// Rows per tile of [`matmul_quantized_at`] for rows of `row_bytes` bytes and `n` columns where
/// the type has a matmul kernel at the level: [`matmul_tile_rows`], from 32 columns at least 128
/// rows on x86_64 (whose kernels cut their rows into chunks themselves, and spread their work on
/// the activations over more rows in a longer call).
pub fn matmul_kernel_tile_rows(row_bytes: usize, n: usize) -> usize {
    let tile = matmul_tile_rows(row_bytes);
    if n >= KERNEL_TILE_MIN_COLUMNS {
        tile.max(KERNEL_TILE_MIN_ROWS)
    } else {
        tile
    }
}

/// Rows per tile of [`matmul_quantized_at`] for type `B` at `level` (rows of `row_bytes` bytes,
/// `n` columns, several): a caller that cuts the rows into pieces keeps each within a tile.
pub fn matmul_tile_rows_at<B: Kernels>(level: Level, row_bytes: usize, n: usize) -> usize {
    if B::matmul_kernel(level).is_some() {
        matmul_kernel_tile_rows(row_bytes, n)
    } else {
        matmul_tile_rows(row_bytes)
    }
}

/// `Y = W X` for `n` activation columns: `x` holds the columns one after another (`n × cols`),
/// `y` receives one output column of `rows` values per input column (`n × rows`). Every column
/// is bit-identical to [`matvec`] of that column. `scratch` holds at least
/// [`matmul_scratch_bytes`] bytes; the columns are quantized into it once, then
/// [`matmul_quantized_at`] runs.
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
    B::vec_dot_kernel(level).ok_or(unsupported::<B>(Op::VecDot))?;
    let needed = matmul_scratch_bytes::<B>(cols, n)?;
    let inputs = cols.checked_mul(n).ok_or(Error::LengthMismatch {
        expected: u64::MAX,
        found: x.len() as u64,
    })?;
    same_len(inputs, x.len())?;
    let available = scratch.len();
    let xq = scratch.get_mut(..needed).ok_or(Error::LengthMismatch {
        expected: needed as u64,
        found: available as u64,
    })?;
    // The columns are whole blocks each, so they quantize as one run of blocks.
    quantize_at::<B::Activation>(level, x, xq)?;
    matmul_quantized_at::<B>(level, w, rows, cols, n, xq, y)
}

/// `Y = W Xq` with the `n` columns already quantized one after another (each as
/// [`quantize_activations_at`] makes it): the second half of [`matmul_at`], for callers that split
/// the rows or the columns (threads). Splitting either and calling this per part gives the same
/// bits as one call.
///
/// The rows are taken in tiles of [`matmul_tile_rows`]; every column passes over a tile (the
/// matmul kernel of `level`, or its 2×2 kernel, or its rows kernel, or one vec_dot per output)
/// before the next tile is read.
/// One column is one pass over all rows, as in [`matvec_quantized_at`].
pub fn matmul_quantized_at<B: Kernels>(
    level: Level,
    w: &[u8],
    rows: usize,
    cols: usize,
    n: usize,
    xq: &[u8],
    y: &mut [f32],
) -> Result<()> {
    let mut y = OutputColumns::whole(y, rows, n)?;
    matmul_quantized_into_at::<B>(level, w, rows, cols, n, xq, &mut y)
}

/// [`matmul_quantized_at`] into the columns of `y`, which holds `rows` rows of each of the `n`
/// columns (a run of rows of a larger output: threads that split the rows write their pieces
/// straight into its columns).
pub fn matmul_quantized_into_at<B: Kernels>(
    level: Level,
    w: &[u8],
    rows: usize,
    cols: usize,
    n: usize,
    xq: &[u8],
    y: &mut OutputColumns<'_, '_>,
) -> Result<()> {
    check_level(level)?;
    let kernel = B::vec_dot_kernel(level).ok_or(unsupported::<B>(Op::VecDot))?;
    same_len(matmul_scratch_bytes::<B>(cols, n)?, xq.len())?;
    check_holds(y, rows, n)?;
    let row_blocks = cols / B::VALUES;
    let w = blocks::<B>(w)?;
    let expected = row_blocks.checked_mul(rows).ok_or(Error::LengthMismatch {
        expected: u64::MAX,
        found: w.len() as u64,
    })?;
    same_len(expected, w.len())?;
    if row_blocks == 0 || n == 0 || rows == 0 {
        for c in 0..n {
            y.column(c).unwrap_or_default().fill(0.0);
        }
        return Ok(());
    }
    let xq = blocks::<B::Activation>(xq)?;
    // Not 0 (row_blocks is not): `max` shows it to the optimizer, so chunking links no panic.
    let column_blocks = (row_blocks * B::ACTIVATION_BLOCKS).max(1);
    let tile_rows = if n == 1 {
        rows
    } else {
        matmul_tile_rows_at::<B>(
            level,
            row_blocks.saturating_mul(core::mem::size_of::<B>()),
            n,
        )
    };
    let tile_2x2 = B::vec_dot_2x2_kernel(level);
    // One column gains nothing from a matmul kernel's tiles of columns: the rows kernel serves it.
    let matmul_kernel = B::matmul_kernel(level).filter(|_| n > 1);
    for (tile, w_tile) in w
        .chunks(tile_rows.saturating_mul(row_blocks).max(1))
        .enumerate()
    {
        let first_row = tile.saturating_mul(tile_rows);
        let tile_len = w_tile.len() / row_blocks;
        let mut y_tile = y.rows_at(first_row, tile_len);
        if let Some(matmul_kernel) = matmul_kernel {
            matmul_kernel(w_tile, row_blocks, xq, n, &mut y_tile);
            continue;
        }
        let mut xq_columns = xq.chunks_exact(column_blocks).take(n);
        let mut c = 0;
        if let Some(tile_2x2) = tile_2x2 {
            // Pairs of columns through the 2x2 kernel; an odd last column goes below.
            while c + 2 <= n {
                let (Some(x0), Some(x1)) = (xq_columns.next(), xq_columns.next()) else {
                    break;
                };
                if let Some((y0, y1)) = y_tile.pair(c) {
                    pairs_of_rows::<B>(tile_2x2, kernel, w_tile, row_blocks, [x0, x1], [y0, y1]);
                }
                c += 2;
            }
        }
        for (xq_column, c) in xq_columns.zip(c..) {
            let out = y_tile.column(c).unwrap_or_default();
            rows_against_column::<B>(level, kernel, w_tile, row_blocks, xq_column, out);
        }
    }
    Ok(())
}

/// The rows of `w` against two columns through a 2x2 kernel, an odd last row by `vec_dot`; `y0`
/// and `y1` start at the first row of `w`.
fn pairs_of_rows<B: Kernels>(
    tile_2x2: VecDot2x2Fn<B, B::Activation>,
    vec_dot: VecDotFn<B, B::Activation>,
    w: &[B],
    row_blocks: usize,
    [x0, x1]: [&[B::Activation]; 2],
    [y0, y1]: [&mut [f32]; 2],
) {
    let mut row_pairs = w.chunks_exact(2 * row_blocks);
    let mut out_pairs = y0.chunks_mut(2).zip(y1.chunks_mut(2));
    for (pair, (out0, out1)) in (&mut row_pairs).zip(&mut out_pairs) {
        let (w0, w1) = pair.split_at(row_blocks);
        let [a, b, c, d] = tile_2x2(w0, w1, x0, x1);
        if let ([o00, o10], [o01, o11]) = (out0, out1) {
            (*o00, *o01, *o10, *o11) = (a, b, c, d);
        }
    }
    if let (Some(last), Some((out0, out1))) =
        (row_pairs.remainder().get(..row_blocks), out_pairs.next())
    {
        if let (Some(o0), Some(o1)) = (out0.first_mut(), out1.first_mut()) {
            *o0 = vec_dot(last, x0);
            *o1 = vec_dot(last, x1);
        }
    }
}
