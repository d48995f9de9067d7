//! Matrix-vector product over several threads: the activations are quantized once, then the rows
//! are cut into contiguous chunks that the calling thread and `threads - 1` pool workers take one
//! at a time, each computed with [`matvec_quantized`]. Every output is the same single vec_dot
//! whichever thread computes it, so the result has the same bits for any thread count (and equals
//! `miniquant::quant::matvec`).
//!
//! Three measures keep a multi-threaded call from costing more than it gains:
//!
//! - **Persistent workers.** The workers are a [`rayon_core`] pool built on the first
//!   multi-threaded call and kept for the process (grown, never shrunk, when a call asks for more
//!   threads than it has; a call with `threads = N` still occupies at most `N - 1` of them). Handing
//!   a chunk to a parked or spinning worker costs a few microseconds. Spawning and joining a
//!   `std::thread::scope` thread per call, as this module did before, cost as much as a whole
//!   one-thread matvec of a real model's smaller tensors (figures in BENCHMARKS.md), so one spawn
//!   per call is negligible only for tensors of many megabytes.
//! - **Chunks taken on demand.** The rows are not split into one fixed range per thread: whoever
//!   is free takes the next chunk of about [`CHUNK_BYTES`] of weights (fewer, larger chunks for a
//!   large matrix). The caller starts on the first chunk at once, so a worker that wakes late only
//!   leaves the caller more chunks, instead of the caller waiting for a fixed half.
//! - **A minimum share per thread.** A matrix gets at most one thread per
//!   [`MIN_BYTES_PER_THREAD`] of weights: below a few tens of KB two pooled threads lose to one
//!   (BENCHMARKS.md); 64 KiB per thread leaves a margin, and a smaller matrix is computed by the
//!   caller alone, as fast as with `threads = 1`.
//!
//! When another process keeps the second core busy, two threads cannot gain, and a worker that is
//! descheduled holding a chunk still makes the call wait: on a machine known to be loaded, one
//! thread is the faster choice for small tensors (figures in BENCHMARKS.md).

use std::sync::{Arc, Mutex, PoisonError};

use miniquant::quant::matvec::{matvec_quantized, matvec_scratch_bytes, quantize_activations};
use miniquant::quant::{bytes_for, Level};
use miniquant::{Error, GgmlType};
use rayon_core::{ThreadPool, ThreadPoolBuilder};

/// Weight bytes per thread below which fewer threads are used: a matrix of `b` bytes gets at most
/// `max(1, b / MIN_BYTES_PER_THREAD)` threads.
pub const MIN_BYTES_PER_THREAD: usize = 64 << 10;

/// The usual weight bytes of one chunk of rows (at least one row): small enough that the threads
/// end together, large enough that taking a chunk (one uncontended lock) costs nothing against it.
/// A matrix of more than `threads × 8` such chunks is cut into `threads × 8` larger ones.
pub const CHUNK_BYTES: usize = 32 << 10;

/// The number of threads to use by default: every core the process may run on.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `y = W x` for a row-major `rows × cols` matrix `w` of type `t`, with up to `threads` threads
/// (the caller and `threads - 1` pool workers; at least one; never more than there are rows or
/// [`MIN_BYTES_PER_THREAD`] shares of `w`) and the kernels of `level`. If the worker pool cannot be
/// started, the caller computes every row itself.
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
    let mut scratch = vec![0u8; matvec_scratch_bytes(t, cols)?];
    let xq = quantize_activations(level, t, cols, x, &mut scratch)?;
    let row_bytes = bytes_for(t, cols)?;
    let threads = threads.min(rows).min(w.len() / MIN_BYTES_PER_THREAD).max(1);
    if threads == 1 || row_bytes == 0 {
        return matvec_quantized(level, t, w, rows, cols, xq, y);
    }
    let mismatch = |expected: usize, found: usize| Error::LengthMismatch {
        expected: expected as u64,
        found: found as u64,
    };
    let weight_bytes = row_bytes
        .checked_mul(rows)
        .ok_or(mismatch(usize::MAX, w.len()))?;
    if weight_bytes != w.len() {
        return Err(mismatch(weight_bytes, w.len()));
    }
    if rows != y.len() {
        return Err(mismatch(rows, y.len()));
    }
    // What does not depend on the rows (the level, the type's kernels) fails here, on no rows,
    // before any worker is woken.
    matvec_quantized(level, t, &[], 0, cols, xq, &mut [])?;
    let Some(pool) = pool(threads - 1) else {
        return matvec_quantized(level, t, w, rows, cols, xq, y);
    };
    let chunk_bytes = CHUNK_BYTES.max(weight_bytes.div_ceil(threads * 8));
    let chunk_rows = chunk_bytes.div_ceil(row_bytes);
    let chunks = Mutex::new(
        w.chunks(chunk_rows * row_bytes)
            .zip(y.chunks_mut(chunk_rows)),
    );
    let failure: Mutex<Option<Error>> = Mutex::new(None);
    // Takes chunks until none is left or a thread has failed; the first error is kept.
    let work = || loop {
        let next = chunks.lock().unwrap_or_else(PoisonError::into_inner).next();
        let Some((w, y)) = next else { return };
        if let Err(e) = matvec_quantized(level, t, w, y.len(), cols, xq, y) {
            // Leave no chunk for the other threads, then report.
            let mut rest = chunks.lock().unwrap_or_else(PoisonError::into_inner);
            rest.by_ref().for_each(drop);
            drop(rest);
            failure
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get_or_insert(e);
            return;
        }
    };
    // A panic in a worker is re-raised here once every spawned job has ended, as `join` did.
    pool.in_place_scope(|scope| {
        for _ in 1..threads {
            scope.spawn(|_| work());
        }
        work();
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
