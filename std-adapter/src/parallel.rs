//! Matrix-vector product over several threads: the activations are quantized once, then the rows
//! are split into contiguous ranges, one per thread, each computed with
//! [`matvec_quantized`]. Every output is the same single vec_dot whichever thread computes it, so
//! the result has the same bits for any thread count (and equals `miniquant::quant::matvec`).
//!
//! Threads are `std::thread::scope` threads: they borrow the (memory-mapped) weights and the output
//! directly, need no new dependency, and one spawn per call costs microseconds against a matvec
//! that streams megabytes of weights. (rayon would add a dependency and a global pool for no gain
//! at this granularity.)

use miniquant::quant::matvec::{matvec_quantized, matvec_scratch_bytes, quantize_activations};
use miniquant::quant::{bytes_for, Level};
use miniquant::{Error, GgmlType};

/// The number of threads to use by default: every core the process may run on.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `y = W x` for a row-major `rows × cols` matrix `w` of type `t`, with `threads` threads (at least
/// one; never more than there are rows) and the kernels of `level`.
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
    let threads = threads.clamp(1, rows.max(1));
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
    let rows_per_thread = rows.div_ceil(threads);
    let mut ranges = w
        .chunks(rows_per_thread * row_bytes)
        .zip(y.chunks_mut(rows_per_thread));
    // The calling thread takes the first range itself: one spawn fewer per call.
    let first = ranges.next();
    std::thread::scope(|scope| {
        let workers: Vec<_> = ranges
            .map(|(w, y)| scope.spawn(move || matvec_quantized(level, t, w, y.len(), cols, xq, y)))
            .collect();
        let own = first.map_or(Ok(()), |(w, y)| {
            matvec_quantized(level, t, w, y.len(), cols, xq, y)
        });
        workers
            .into_iter()
            .map(|worker| {
                worker
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .chain([own])
            .collect::<Result<Vec<()>, Error>>()
            .map(|_| ())
    })
}
