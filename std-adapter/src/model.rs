//! The forward pass's matrix products over several threads: [`Threaded`] implements the core's
//! [`MatMul`] with [`parallel::matmul`], whose every output is still one `vec_dot` of the level, so
//! the logits have the same bits for any thread count.

use miniquant::model::MatMul;
use miniquant::quant::Level;
use miniquant::{Error, GgmlType};

use crate::parallel;

/// [`MatMul`] on up to `threads` threads with the kernels of `level`, on the kept worker pool of
/// [`parallel`]: a prompt batch's columns are quantized once and the rows split across threads.
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

    /// `scratch` is not needed: [`parallel::matmul`] keeps the quantized columns itself.
    fn matmul(
        &self,
        t: GgmlType,
        w: &[u8],
        rows: usize,
        cols: usize,
        n: usize,
        x: &[f32],
        _scratch: &mut [u8],
        y: &mut [f32],
    ) -> Result<(), Error> {
        parallel::matmul(self.level, t, w, rows, cols, n, x, self.threads, y)
    }
}
