//! Matrix-vector and matrix-matrix products over several threads: the activations are quantized
//! once (split by columns across the threads when there are many), then the outputs are cut into
//! pieces (ranges of rows, and ranges of columns when the rows alone give too few pieces) that the
//! calling thread and `threads - 1` pool workers take one at a time, each computed with
//! [`matmul_quantized`]. Every output is the same single vec_dot whichever thread computes it, so
//! the result has the same bits for any thread count (and equals `miniquant::quant::matvec` and
//! `matmul`).
//!
//! Three measures keep a multi-threaded call from costing more than it gains:
//!
//! - **Persistent workers.** The workers are a [`rayon_core`] pool built on the first
//!   multi-threaded call and kept for the process (grown, never shrunk, when a call asks for more
//!   threads than it has; a call with `threads = N` still occupies at most `N - 1` of them). Handing
//!   a piece to a parked or spinning worker costs a few microseconds. Spawning and joining a
//!   `std::thread::scope` thread per call, as this module did before, cost as much as a whole
//!   one-thread matvec of a real model's smaller tensors (figures in BENCHMARKS.md), so one spawn
//!   per call is negligible only for tensors of many megabytes.
//! - **Pieces taken on demand.** The work is not split into one fixed share per thread: whoever
//!   is free takes the next piece (for a matvec about [`CHUNK_BYTES`] of weights, fewer and larger
//!   pieces for a large matrix; for a matmul at most one tile of rows, see
//!   [`typed::matmul_tile_rows`], so each piece keeps its weights in cache across its columns). The
//!   caller starts on the first piece at once, so a worker that wakes late only leaves the caller
//!   more pieces, instead of the caller waiting for a fixed half.
//! - **A minimum share per thread.** A call gets at most one thread per [`MIN_BYTES_PER_THREAD`]
//!   of weights times columns: below a few tens of KB two pooled threads lose to one
//!   (BENCHMARKS.md); 64 KiB per thread leaves a margin, and a smaller product is computed by the
//!   caller alone, as fast as with `threads = 1`.
//!
//! When another process keeps the second core busy, two threads cannot gain, and a worker that is
//! descheduled holding a piece still makes the call wait: on a machine known to be loaded, one
//! thread is the faster choice for small tensors (figures in BENCHMARKS.md).

use std::sync::{Arc, Mutex, PoisonError};

use miniquant::quant::matvec::{matmul_quantized, matmul_scratch_bytes, quantize_activations};
use miniquant::quant::{bytes_for, typed, Level};
use miniquant::{Error, GgmlType};
use rayon_core::{ThreadPool, ThreadPoolBuilder};

/// Weight bytes (times columns, for a matmul) per thread below which fewer threads are used: a
/// product over `b` bytes of weights and `n` columns gets at most `max(1, b·n /
/// MIN_BYTES_PER_THREAD)` threads.
pub const MIN_BYTES_PER_THREAD: usize = 64 << 10;

/// The usual weight bytes of one piece of a matvec (at least one row): small enough that the
/// threads end together, large enough that taking a piece (one uncontended lock) costs nothing
/// against it. A matrix of more than `threads × 8` such pieces is cut into `threads × 8` larger
/// ones.
pub const CHUNK_BYTES: usize = 32 << 10;

/// Activation values (columns times their length) from which a matmul quantizes its columns on
/// several threads: below it, waking a worker costs about as much as the quantization.
pub const PARALLEL_QUANTIZE_VALUES: usize = 64 << 10;

/// Pieces per thread a matmul aims at, so that the threads end close together.
const PIECES_PER_THREAD: usize = 8;

/// Rows of a matmul piece are a multiple of this (the rows kernels' groups of eight rows).
const PIECE_ROW_MULTIPLE: usize = 8;

/// The number of threads to use by default: every core the process may run on.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `y = W x` for a row-major `rows × cols` matrix `w` of type `t`, with up to `threads` threads
/// (the caller and `threads - 1` pool workers; at least one; never more than there are rows or
/// [`MIN_BYTES_PER_THREAD`] shares of `w`) and the kernels of `level`: [`matmul`] of one column.
/// If the worker pool cannot be started, the caller computes every row itself.
#[allow(clippy::too_many_arguments)]
pub fn matvec(
    level: Level,
    t: GgmlType,
    w: &[u8],
    rows: usize,
    cols: usize,
    x: &[f32],
    threads: usize,
    y: &mut [f32],
) -> Result<(), Error> {
    matmul(level, t, w, rows, cols, 1, x, threads, y)
}

/// `Y = W X` for `n` activation columns (`x` holds them one after another, `n × cols`; `y`
/// receives `n` output columns of `rows` values), with up to `threads` threads as for [`matvec`]
/// and the kernels of `level`. Column `j` of `y` is bit-identical to `miniquant`'s `matvec` of
/// column `j`, for any thread count. The columns are quantized once (on several threads when
/// there are at least [`PARALLEL_QUANTIZE_VALUES`] values).
#[allow(clippy::too_many_arguments)]
pub fn matmul(
    level: Level,
    t: GgmlType,
    w: &[u8],
    rows: usize,
    cols: usize,
    n: usize,
    x: &[f32],
    threads: usize,
    y: &mut [f32],
) -> Result<(), Error> {
    let mismatch = |expected: usize, found: usize| Error::LengthMismatch {
        expected: expected as u64,
        found: found as u64,
    };
    let row_bytes = bytes_for(t, cols)?;
    let scratch_bytes = matmul_scratch_bytes(t, cols, n)?;
    let inputs = cols.checked_mul(n).ok_or(mismatch(usize::MAX, x.len()))?;
    if inputs != x.len() {
        return Err(mismatch(inputs, x.len()));
    }
    let weight_bytes = row_bytes
        .checked_mul(rows)
        .ok_or(mismatch(usize::MAX, w.len()))?;
    if weight_bytes != w.len() {
        return Err(mismatch(weight_bytes, w.len()));
    }
    let outputs = rows.checked_mul(n).ok_or(mismatch(usize::MAX, y.len()))?;
    if outputs != y.len() {
        return Err(mismatch(outputs, y.len()));
    }
    let mut scratch = vec![0u8; scratch_bytes];
    let work = w.len().saturating_mul(n);
    let threads = threads
        .min(rows.saturating_mul(n))
        .min(work / MIN_BYTES_PER_THREAD)
        .max(1);
    // What does not depend on the data (the level, the type's kernels) fails here, on no rows,
    // before any worker is woken.
    matmul_quantized(level, t, &[], 0, cols, 0, &[], &mut [])?;
    let pool = if threads > 1 { pool(threads - 1) } else { None };
    let Some(pool) = pool.filter(|_| row_bytes > 0 && n > 0) else {
        let xq = quantize_activations(level, t, inputs, x, &mut scratch)?;
        return matmul_quantized(level, t, w, rows, cols, n, xq, y);
    };
    let xq = quantize_columns(&pool, threads, level, t, cols, n, x, &mut scratch)?;
    let (piece_rows, piece_columns) = pieces(threads, rows, row_bytes, n);
    let per_column = xq.len() / n;
    let row_ranges = (0..rows).step_by(piece_rows);
    let pieces = row_ranges.flat_map(|first_row| {
        (0..n)
            .step_by(piece_columns)
            .map(move |first_column| (first_row, first_column))
    });
    let y = Mutex::new(y);
    share(&pool, threads, pieces, |(first_row, first_column), out| {
        let piece_rows = piece_rows.min(rows - first_row);
        let piece_n = piece_columns.min(n - first_column);
        let w = &w[first_row * row_bytes..(first_row + piece_rows) * row_bytes];
        let xq = &xq[first_column * per_column..(first_column + piece_n) * per_column];
        out.clear();
        out.resize(piece_rows * piece_n, 0.0);
        matmul_quantized(level, t, w, piece_rows, cols, piece_n, xq, out)?;
        let mut y = y.lock().unwrap_or_else(PoisonError::into_inner);
        let columns = y.chunks_exact_mut(rows).skip(first_column);
        for (column, piece) in columns.zip(out.chunks_exact(piece_rows)) {
            column[first_row..first_row + piece_rows].copy_from_slice(piece);
        }
        Ok(())
    })
}

/// The `n` columns of `x` quantized into `scratch`, split by columns across up to `threads`
/// threads when there are at least [`PARALLEL_QUANTIZE_VALUES`] values.
#[allow(clippy::too_many_arguments)]
fn quantize_columns<'s>(
    pool: &ThreadPool,
    threads: usize,
    level: Level,
    t: GgmlType,
    cols: usize,
    n: usize,
    x: &[f32],
    scratch: &'s mut [u8],
) -> Result<&'s [u8], Error> {
    let per_column = scratch.len() / n;
    if x.len() < PARALLEL_QUANTIZE_VALUES || n < 2 {
        return quantize_activations(level, t, x.len(), x, scratch);
    }
    let block = n.div_ceil(threads * 4);
    let parts = x
        .chunks(block * cols)
        .zip(scratch.chunks_mut(block * per_column));
    share(pool, threads, parts, |(x, xq), _| {
        quantize_activations(level, t, x.len(), x, xq).map(drop)
    })?;
    Ok(scratch)
}

/// Rows and columns of one matmul piece: one row range for every `threads × 8` pieces (up to one
/// tile of rows, in groups of 8 rows; for one column, about [`CHUNK_BYTES`] of weights as one
/// matvec chunk), and the columns cut as well when the row ranges alone are too few.
fn pieces(threads: usize, rows: usize, row_bytes: usize, n: usize) -> (usize, usize) {
    let wanted = threads * PIECES_PER_THREAD;
    if n == 1 {
        let chunk_bytes = CHUNK_BYTES.max((rows * row_bytes).div_ceil(wanted));
        return (chunk_bytes.div_ceil(row_bytes).max(1), 1);
    }
    let even = rows.div_ceil(wanted).next_multiple_of(PIECE_ROW_MULTIPLE);
    let piece_rows = even.min(typed::matmul_tile_rows(row_bytes)).max(1);
    let row_ranges = rows.div_ceil(piece_rows);
    let column_ranges = wanted.div_ceil(row_ranges).min(n);
    (piece_rows, n.div_ceil(column_ranges))
}

/// Runs `work` on every item of `items`, the items taken one at a time by the caller and
/// `threads - 1` workers of `pool` (each with its own reusable buffer). The first error is
/// returned, and no item is started after it.
fn share<I>(
    pool: &ThreadPool,
    threads: usize,
    items: I,
    work: impl Fn(I::Item, &mut Vec<f32>) -> Result<(), Error> + Sync,
) -> Result<(), Error>
where
    I: Iterator + Send,
{
    let items = Mutex::new(items);
    let failure: Mutex<Option<Error>> = Mutex::new(None);
    let run = || {
        let mut buffer = Vec::new();
        loop {
            let next = items.lock().unwrap_or_else(PoisonError::into_inner).next();
            let Some(item) = next else { return };
            if let Err(e) = work(item, &mut buffer) {
                // Leave no item for the other threads, then report.
                let mut rest = items.lock().unwrap_or_else(PoisonError::into_inner);
                rest.by_ref().for_each(drop);
                drop(rest);
                failure
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get_or_insert(e);
                return;
            }
        }
    };
    // A panic in a worker is re-raised here once every spawned job has ended, as `join` did.
    pool.in_place_scope(|scope| {
        for _ in 1..threads {
            scope.spawn(|_| run());
        }
        run();
    });
    match failure.into_inner().unwrap_or_else(PoisonError::into_inner) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The worker pool, with at least `workers` threads: the one kept for the process, or a larger one
/// that replaces it (calls still running keep the old one alive until they end). `None` if the
/// threads cannot be started.
fn pool(workers: usize) -> Option<Arc<ThreadPool>> {
    static POOL: Mutex<Option<Arc<ThreadPool>>> = Mutex::new(None);
    let mut kept = POOL.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(pool) = kept.as_ref().filter(|p| p.current_num_threads() >= workers) {
        return Some(Arc::clone(pool));
    }
    let pool = ThreadPoolBuilder::new()
        .num_threads(workers)
        .thread_name(|i| format!("miniquant-matvec-{i}"))
        .build()
        .ok()?;
    Some(Arc::clone(kept.insert(Arc::new(pool))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use miniquant::quant::matvec::matvec_scratch_bytes;
    use miniquant::quant::{self, level};

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| {
                ((i as f32 * 0.37 + seed as f32).sin() * 2.0) + if i % 41 == 0 { 9.0 } else { 0.0 }
            })
            .collect()
    }

    /// A `rows × cols` matrix of `t` large enough for several threads and several chunks each.
    fn matrix(t: GgmlType, rows: usize, cols: usize) -> Vec<u8> {
        let mut w = vec![0u8; bytes_for(t, rows * cols).unwrap()];
        quant::quantize(t, &values(rows * cols, t.code()), &mut w).unwrap();
        w
    }

    #[test]
    fn every_thread_count_gives_the_bits_of_one_call() {
        // 301 rows: the chunks and the threads' shares do not divide the rows evenly.
        let (rows, cols) = (301, 2048);
        let x = values(cols, 7);
        for t in [
            GgmlType::Q8_0,
            GgmlType::Q4_K,
            GgmlType::Q5_0,
            GgmlType::Q6_K,
        ] {
            let w = matrix(t, rows, cols);
            assert!(
                w.len() >= 4 * MIN_BYTES_PER_THREAD,
                "{t}: too small to use 4 threads"
            );
            for lvl in level::available() {
                let mut scratch = vec![0u8; matvec_scratch_bytes(t, cols).unwrap()];
                let mut want = vec![0f32; rows];
                quant::matvec::matvec_at(lvl, t, &w, rows, cols, &x, &mut scratch, &mut want)
                    .unwrap();
                for threads in [1, 2, 3, 4, 7, 64, usize::MAX] {
                    let mut y = vec![f32::NAN; rows];
                    matvec(lvl, t, &w, rows, cols, &x, threads, &mut y).unwrap();
                    assert!(
                        y.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()),
                        "{t} at {lvl:?} on {threads} threads differs from one call"
                    );
                }
            }
        }
    }

    #[test]
    fn small_matrices_and_few_rows_stay_exact() {
        let x = values(256, 3);
        for (rows, cols) in [(0, 256), (1, 256), (3, 256), (40, 256)] {
            let t = GgmlType::Q8_0;
            let w = matrix(t, rows, cols);
            let mut scratch = vec![0u8; matvec_scratch_bytes(t, cols).unwrap()];
            let mut want = vec![0f32; rows];
            quant::matvec::matvec(t, &w, rows, cols, &x, &mut scratch, &mut want).unwrap();
            let mut y = vec![f32::NAN; rows];
            matvec(level::current(), t, &w, rows, cols, &x, 8, &mut y).unwrap();
            assert_eq!(
                y.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                want.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn bad_lengths_are_errors_on_any_thread_count() {
        let (rows, cols, t) = (300, 2048, GgmlType::Q8_0);
        let w = matrix(t, rows, cols);
        let x = values(cols, 1);
        let lvl = level::current();
        for threads in [1, 2, 5] {
            let mut y = vec![0f32; rows];
            let short = matvec(lvl, t, &w[..w.len() - 1], rows, cols, &x, threads, &mut y);
            assert!(
                matches!(short, Err(Error::LengthMismatch { .. })),
                "{short:?}"
            );
            let long_w = [&w[..], &[0u8; 34]].concat();
            let long = matvec(lvl, t, &long_w, rows, cols, &x, threads, &mut y);
            assert!(
                matches!(long, Err(Error::LengthMismatch { .. })),
                "{long:?}"
            );
            let mut short_y = vec![0f32; rows - 1];
            let y_len = matvec(lvl, t, &w, rows, cols, &x, threads, &mut short_y);
            assert!(
                matches!(y_len, Err(Error::LengthMismatch { .. })),
                "{y_len:?}"
            );
            let x_len = matvec(lvl, t, &w, rows, cols, &x[1..], threads, &mut y);
            assert!(x_len.is_err());
            let huge = matvec(lvl, t, &w, usize::MAX, cols, &x, threads, &mut y);
            assert!(huge.is_err());
        }
    }

    /// `miniquant`'s matvec of each column of `x`, at `lvl`.
    fn matvec_per_column(
        lvl: Level,
        t: GgmlType,
        w: &[u8],
        rows: usize,
        cols: usize,
        x: &[f32],
    ) -> Vec<u32> {
        let mut scratch = vec![0u8; matvec_scratch_bytes(t, cols).unwrap()];
        let mut want = vec![0f32; x.len() / cols.max(1) * rows];
        for (column, out) in x.chunks_exact(cols).zip(want.chunks_exact_mut(rows)) {
            quant::matvec::matvec_at(lvl, t, w, rows, cols, column, &mut scratch, out).unwrap();
        }
        want.iter().map(|v| v.to_bits()).collect()
    }

    #[test]
    fn matmul_on_any_thread_count_gives_matvec_per_column() {
        // 301 rows: neither the tiles, the groups of eight rows nor the pieces divide them; 33
        // columns of 2048 values are quantized on several threads.
        let (rows, cols) = (301, 2048);
        for t in [
            GgmlType::Q8_0,
            GgmlType::Q4_0,
            GgmlType::Q4_K,
            GgmlType::Q5_0,
            GgmlType::Q6_K,
        ] {
            let w = matrix(t, rows, cols);
            for n in [1, 2, 3, 8, 17, 33] {
                let x = values(n * cols, n as u32);
                assert_eq!(
                    n >= 32,
                    x.len() >= PARALLEL_QUANTIZE_VALUES,
                    "n = 33 quantizes in parallel, the others not"
                );
                for lvl in level::available() {
                    let want = matvec_per_column(lvl, t, &w, rows, cols, &x);
                    for threads in [1, 2, 3, 4, 64] {
                        let mut y = vec![f32::NAN; n * rows];
                        matmul(lvl, t, &w, rows, cols, n, &x, threads, &mut y).unwrap();
                        let got: Vec<u32> = y.iter().map(|v| v.to_bits()).collect();
                        assert!(
                            got == want,
                            "{t} at {lvl:?}, {n} columns on {threads} threads differs from matvec"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn matmul_of_small_and_odd_shapes_on_three_threads() {
        // Few rows and many columns (the columns are cut into pieces), one row, no columns.
        let t = GgmlType::Q8_0;
        let lvl = level::current();
        for (rows, cols, n) in [(1, 256, 200), (3, 256, 17), (17, 512, 64), (40, 256, 0)] {
            let w = matrix(t, rows, cols);
            let x = values(n * cols, 5);
            let want = matvec_per_column(lvl, t, &w, rows, cols, &x);
            for threads in [1, 2, 3] {
                let mut y = vec![f32::NAN; n * rows];
                matmul(lvl, t, &w, rows, cols, n, &x, threads, &mut y).unwrap();
                let got: Vec<u32> = y.iter().map(|v| v.to_bits()).collect();
                assert!(got == want, "{rows}x{cols}, {n} columns, {threads} threads");
            }
        }
    }

    #[test]
    fn matmul_pieces_cover_the_output_in_tiles() {
        // Enough row ranges: whole columns, rows in groups of eight, at most a tile.
        let tile = typed::matmul_tile_rows(2176);
        let (piece_rows, piece_columns) = pieces(2, 2048, 2176, 512);
        assert_eq!(piece_columns, 512);
        assert!(piece_rows <= tile && piece_rows % PIECE_ROW_MULTIPLE == 0);
        // Few rows: the columns are cut so that two threads get 16 pieces.
        let (piece_rows, piece_columns) = pieces(2, 3, 2176, 512);
        assert_eq!(piece_rows, 8);
        assert_eq!(piece_columns, 32);
        // One column: matvec's chunks of about CHUNK_BYTES.
        assert_eq!(pieces(2, 64, 2176, 1), (16, 1));
        // A large matrix: threads × 8 larger chunks.
        assert_eq!(pieces(2, 2048, 2176, 1), (128, 1));
    }

    #[test]
    fn matmul_bad_lengths_are_errors_on_any_thread_count() {
        let (rows, cols, n, t) = (300, 2048, 4, GgmlType::Q8_0);
        let w = matrix(t, rows, cols);
        let x = values(n * cols, 1);
        let lvl = level::current();
        for threads in [1, 2, 5] {
            let mut y = vec![0f32; n * rows];
            let mismatch = |r: Result<(), Error>| matches!(r, Err(Error::LengthMismatch { .. }));
            assert!(mismatch(matmul(
                lvl,
                t,
                &w[..w.len() - 1],
                rows,
                cols,
                n,
                &x,
                threads,
                &mut y
            )));
            assert!(mismatch(matmul(
                lvl,
                t,
                &w,
                rows,
                cols,
                n,
                &x[1..],
                threads,
                &mut y
            )));
            assert!(mismatch(matmul(
                lvl,
                t,
                &w,
                rows,
                cols,
                n,
                &x,
                threads,
                &mut y[1..]
            )));
            assert!(mismatch(matmul(
                lvl,
                t,
                &w,
                rows,
                cols,
                usize::MAX,
                &x,
                threads,
                &mut y
            )));
            let partial = matmul(lvl, t, &w, rows, 48, n, &x, threads, &mut y);
            assert!(
                matches!(partial, Err(Error::PartialBlock { .. })),
                "{partial:?}"
            );
            let unsupported = matmul(lvl, GgmlType::Q8_K, &w, rows, cols, n, &x, threads, &mut y);
            assert!(
                matches!(unsupported, Err(Error::Unsupported { .. })),
                "{unsupported:?}"
            );
        }
    }

    #[test]
    fn the_pool_is_kept_and_grows() {
        let two = pool(2).expect("pool of 2");
        assert!(two.current_num_threads() >= 2);
        let again = pool(1).expect("pool of 1");
        assert!(
            again.current_num_threads() >= 2,
            "a smaller request reuses the kept pool"
        );
        let five = pool(5).expect("pool of 5");
        assert!(five.current_num_threads() >= 5);
        // (Other tests may grow the pool meanwhile: only lower bounds hold.)
        assert!(pool(3).expect("pool of 3").current_num_threads() >= 5);
    }
}
