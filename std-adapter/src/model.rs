//! The forward pass's matrix products over several threads: [`Threaded`] implements the core's
//! [`MatMul`] by splitting the output rows, so every output is still one `vec_dot` and the logits
//! have the same bits for any thread count.

use miniquant::model::MatMul;
use miniquant::quant::matvec::{matvec_quantized, matvec_scratch_bytes, quantize_activations};
use miniquant::quant::{bytes_for, Level};
use miniquant::{Error, GgmlType};

use crate::parallel;

/// [`MatMul`] on up to `threads` threads with the kernels of `level`. One column (generation)
/// goes through [`parallel::matvec`] and its worker pool; several columns (a prompt batch) are
/// quantized once, then scoped threads each take a contiguous range of rows of every column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Threaded {
    /// The kernel level.
    pub level: Level,
    /// Threads to use (1 computes everything on the caller).
    pub threads: usize,
}

impl MatMul for Threaded {
    fn level(&self) -> Level {
        self.level
    }

    fn matmul(
        &self,
        t: GgmlType,
        w: &[u8],
        rows: usize,
        cols: usize,
        n: usize,
        x: &[f32],
        scratch: &mut [u8],
        y: &mut [f32],
    ) -> Result<(), Error> {
        if n == 1 {
            return parallel::matvec(self.level, t, w, rows, cols, x, self.threads, y);
        }
        let per_column = matvec_scratch_bytes(t, cols)?;
        let mismatch = |expected: usize, found: usize| Error::LengthMismatch {
            expected: expected as u64,
            found: found as u64,
        };
        let needed = per_column.checked_mul(n).ok_or(mismatch(usize::MAX, n))?;
        let values = cols.checked_mul(n).ok_or(mismatch(usize::MAX, n))?;
        let outputs = rows.checked_mul(n).ok_or(mismatch(usize::MAX, n))?;
        if x.len() != values {
            return Err(mismatch(values, x.len()));
        }
        if y.len() != outputs {
            return Err(mismatch(outputs, y.len()));
        }
        let scratch_len = scratch.len();
        let scratch = scratch
            .get_mut(..needed)
            .ok_or(mismatch(needed, scratch_len))?;
        if per_column == 0 || rows == 0 {
            return miniquant::quant::matvec::matmul(
                self.level, t, w, rows, cols, n, x, scratch, y,
            );
        }
        for (column, xq) in x
            .chunks_exact(cols)
            .zip(scratch.chunks_exact_mut(per_column))
        {
            quantize_activations(self.level, t, cols, column, xq)?;
        }
        let row_bytes = bytes_for(t, cols)?;
        let weight_bytes = row_bytes
            .checked_mul(rows)
            .ok_or(mismatch(usize::MAX, w.len()))?;
        if w.len() != weight_bytes {
            return Err(mismatch(weight_bytes, w.len()));
        }
        let threads = self.threads.clamp(1, rows);
        let share = rows.div_ceil(threads);
        // Each thread's slices of every output column: rows `i * share ..` of each.
        let mut parts: Vec<Vec<&mut [f32]>> = (0..threads).map(|_| Vec::with_capacity(n)).collect();
        for column in y.chunks_exact_mut(rows) {
            for (part, piece) in parts.iter_mut().zip(column.chunks_mut(share)) {
                part.push(piece);
            }
        }
        let scratch: &[u8] = scratch;
        let level = self.level;
        let run = |i: usize, pieces: Vec<&mut [f32]>| -> Result<(), Error> {
            let first = i * share;
            let count = pieces.first().map_or(0, |p| p.len());
            let w = w
                .get(first * row_bytes..(first + count) * row_bytes)
                .ok_or(mismatch((first + count) * row_bytes, w.len()))?;
            for (xq, piece) in scratch.chunks_exact(per_column).zip(pieces) {
                matvec_quantized(level, t, w, count, cols, xq, piece)?;
            }
            Ok(())
        };
        std::thread::scope(|scope| {
            let mut parts = parts.into_iter().enumerate();
            let mine = parts.next();
            let handles: Vec<_> = parts
                .map(|(i, pieces)| scope.spawn(move || run(i, pieces)))
                .collect();
            let mut result = mine.map_or(Ok(()), |(i, pieces)| run(i, pieces));
            for handle in handles {
                let joined = handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                result = result.and(joined);
            }
            result
        })
    }
}
