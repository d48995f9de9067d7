//! The forward pass over several threads: [`Threaded`] implements the core's [`MatMul`] with
//! [`parallel::matmul`], whose every output is still one `vec_dot` of the level, and runs the
//! attention's queries (and the feed-forward activation's rows) on the same pool through
//! [`parallel::for_each_piece`]; each query's attention is computed whole by one thread, in the
//! core's order, so the logits have the same bits for any thread count. [`PackedWeights`] holds a
//! model's matrices packed once at load (`miniquant::quant::packed`), which [`WithPacked`] runs
//! the one-column products (a decode step's) on, with the same bits.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use miniquant::model::{serial_chunks, ChunkWork, MatMul, Model, Weight};
use miniquant::quant::{packed, Level};
use miniquant::{Error, GgmlType};

use crate::parallel;

/// Multiply-adds of chunk work per thread below which fewer threads are used (about the time of
/// a few hand-offs to a spinning worker).
pub const MIN_COST_PER_THREAD: usize = 1 << 16;

/// Pieces per thread a [`MatMul::for_each_chunk`] call is cut into, so that the threads end close
/// together (later queries of a prompt see more positions).
const PIECES_PER_THREAD: usize = 8;

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

    fn threads(&self) -> usize {
        self.threads
    }

    /// Contiguous runs of chunks as pieces of [`parallel::for_each_piece`]; a piece takes a free
    /// lane for its run (at most as many pieces run at once as there are lanes).
    fn for_each_chunk(
        &self,
        out: &mut [f32],
        chunk: usize,
        lanes: &mut [f32],
        lane_len: usize,
        cost: usize,
        work: &ChunkWork<'_>,
    ) -> Result<(), Error> {
        let chunk = chunk.max(1);
        let count = out.len().div_ceil(chunk);
        let lane_count = lanes.len().checked_div(lane_len).unwrap_or(usize::MAX);
        let threads = self
            .threads
            .min(lane_count)
            .min(count)
            .min(cost / MIN_COST_PER_THREAD)
            .max(1);
        if threads == 1 {
            return serial_chunks(out, chunk, lanes, lane_len, work);
        }
        let per_piece = count.div_ceil(threads * PIECES_PER_THREAD);
        let pieces: Vec<Mutex<Option<&mut [f32]>>> = out
            .chunks_mut(chunk * per_piece)
            .map(|c| Mutex::new(Some(c)))
            .collect();
        let lanes: Vec<Mutex<&mut [f32]>> = if lane_len == 0 {
            (0..threads)
                .map(|_| Mutex::new(Default::default()))
                .collect()
        } else {
            lanes
                .chunks_exact_mut(lane_len)
                .take(threads)
                .map(Mutex::new)
                .collect()
        };
        parallel::for_each_piece(threads, pieces.len(), |p| {
            let taken = pieces[p]
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            let Some(piece) = taken else {
                return Ok(());
            };
            // One lane is free: no more pieces run at once than there are threads.
            let mut lane =
                lanes
                    .iter()
                    .find_map(|l| l.try_lock().ok())
                    .ok_or(Error::LengthMismatch {
                        expected: threads as u64,
                        found: lanes.len() as u64,
                    })?;
            for (k, c) in piece.chunks_mut(chunk).enumerate() {
                work(p * per_piece + k, c, &mut lane)?;
            }
            Ok(())
        })
    }
}

/// Matrices larger than this are not packed: a matrix read from memory once a token gains little
/// from the packed kernel, and its copy costs its size (BENCHMARKS.md, "Packed rows").
pub const PACK_MAX_BYTES: usize = 64 << 20;

/// Columns below which a product runs on the packed matrix where the level has a packed matmul
/// kernel; from here on the plain matmul kernels are as fast or faster (BENCHMARKS.md, "Packed
/// rows").
pub const PACKED_MATMUL_MAX_COLUMNS: usize = 32;

/// The same where the level has only a packed rows kernel, which then runs column by column
/// (at AVX2: 1.0-1.6x the plain matmul at 8 columns, 0.9-1.2x at 16).
pub const PACKED_BY_COLUMN_MAX_COLUMNS: usize = 16;

/// A model's weight matrices packed for the one-column product (`miniquant::quant::packed`),
/// each found by the address and length of its plain bytes in the file: the matrices of the types
/// that `level` has a packed kernel for, up to [`PACK_MAX_BYTES`] each and a budget in all
/// (others, and levels without a packed kernel, are not packed). The packed copy takes as much
/// memory as the plain matrices it packs.
#[derive(Debug, Default)]
pub struct PackedWeights {
    /// Each copy on whole cache lines, by its plain bytes' address and length (the copy's length).
    matrices: HashMap<(usize, usize), Box<[CacheLine]>>,
}

/// 64 bytes on a cache line: packed copies start on a line, so that the kernels' 64-byte loads of
/// a group's block do not straddle two lines (a heap allocation this large starts 16 bytes into
/// one: BENCHMARKS.md, "Packed copies on cache lines").
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(64))]
struct CacheLine([u8; 64]);

impl PackedWeights {
    /// Packs `model`'s matrices for `level` on up to `threads` threads, in the forward pass's
    /// order while their copies stay within `budget` bytes in all ([`pack_budget`]); a matrix
    /// whose copy the allocator refuses stays plain. Which matrices are packed changes the speed
    /// of a product, never its bits.
    pub fn of_model<const L: usize>(
        model: &Model<'_, L>,
        level: Level,
        threads: usize,
        budget: usize,
    ) -> Result<PackedWeights, Error> {
        let mut weights: Vec<Weight<'_>> = model
            .layers()
            .iter()
            .flat_map(|l| [l.q, l.k, l.v, l.o, l.gate, l.up, l.down])
            .chain([model.output()])
            .filter(|w| {
                w.data.len() <= PACK_MAX_BYTES && packed::has_packed_kernel(level, w.ggml_type)
            })
            .collect();
        // A matrix given twice (a tied output head) is packed once.
        let mut seen = std::collections::HashSet::new();
        weights.retain(|w| seen.insert((w.data.as_ptr() as usize, w.data.len())));
        let mut left = budget;
        weights.retain(|w| match left.checked_sub(w.data.len()) {
            Some(rest) => {
                left = rest;
                true
            }
            None => false,
        });
        let packed: Vec<Mutex<Option<Box<[CacheLine]>>>> =
            weights.iter().map(|_| Mutex::new(None)).collect();
        crate::parallel::for_each_piece(threads, weights.len(), |i| {
            let w = weights[i];
            let lines = w.data.len().div_ceil(64);
            let mut out = Vec::new();
            if out.try_reserve_exact(lines).is_err() {
                return Ok(());
            }
            out.resize(lines, CacheLine([0; 64]));
            let bytes = &mut bytemuck::cast_slice_mut::<CacheLine, u8>(&mut out)[..w.data.len()];
            packed::pack(w.ggml_type, w.data, w.rows, w.cols, bytes)?;
            *packed[i].lock().unwrap_or_else(PoisonError::into_inner) =
                Some(out.into_boxed_slice());
            Ok(())
        })?;
        let matrices = weights
            .iter()
            .zip(packed)
            .filter_map(|(w, p)| {
                let p = p.into_inner().unwrap_or_else(PoisonError::into_inner)?;
                Some(((w.data.as_ptr() as usize, w.data.len()), p))
            })
            .collect();
        Ok(PackedWeights { matrices })
    }

    /// The packed copy of the matrix whose plain bytes are `w`, if there is one.
    pub fn get(&self, w: &[u8]) -> Option<&[u8]> {
        let lines = self.matrices.get(&(w.as_ptr() as usize, w.len()))?;
        bytemuck::cast_slice::<CacheLine, u8>(lines).get(..w.len())
    }

    /// Matrices packed.
    pub fn len(&self) -> usize {
        self.matrices.len()
    }

    /// Whether no matrix is packed.
    pub fn is_empty(&self) -> bool {
        self.matrices.is_empty()
    }

    /// Bytes the packed copies take.
    pub fn bytes(&self) -> usize {
        self.matrices.keys().map(|&(_, len)| len).sum()
    }
}

/// The bytes packed copies may take on this machine beside `reserved` bytes of working memory:
/// half of what Linux reports available (`MemAvailable`) less `reserved`, so that packing never
/// pushes the run into swap or the OOM killer (the plain matrices stay in the page cache, which
/// the kernel can drop); no limit where that cannot be read.
pub fn pack_budget(reserved: usize) -> usize {
    let available = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|info| mem_available(&info));
    match available {
        Some(bytes) => (bytes / 2).saturating_sub(reserved),
        None => usize::MAX,
    }
}

/// `MemAvailable` of a `/proc/meminfo` text, in bytes.
fn mem_available(meminfo: &str) -> Option<usize> {
    let line = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?;
    let mut words = line.split_whitespace();
    let kib: usize = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => kib.checked_mul(1024),
        _ => None,
    }
}

/// [`Threaded`] with packed weights: a product of fewer than [`PACKED_MATMUL_MAX_COLUMNS`] (or
/// [`PACKED_BY_COLUMN_MAX_COLUMNS`]; at the `amx` level any number of) columns whose matrix is
/// in `packed` runs
/// [`parallel::matmul_packed`] on it (every output the same bits as [`Threaded`]'s); every other
/// product is [`Threaded`]'s.
#[derive(Debug, Clone, Copy)]
pub struct WithPacked<'a> {
    /// The products without packed weights, the level and the threads.
    pub threaded: Threaded,
    /// The packed matrices.
    pub packed: &'a PackedWeights,
}

impl MatMul for WithPacked<'_> {
    fn level(&self) -> Level {
        self.threaded.level
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
        let Threaded { level, threads } = self.threaded;
        let most = if packed::has_tile_kernel(level, t) {
            // Its packed matmul runs on the tiles from 16 columns (BENCHMARKS.md, "AMX tiles
            // over packed rows").
            usize::MAX
        } else if packed::has_packed_matmul_kernel(level, t) {
            PACKED_MATMUL_MAX_COLUMNS
        } else {
            PACKED_BY_COLUMN_MAX_COLUMNS
        };
        match self.packed.get(w).filter(|_| n < most) {
            Some(p) => parallel::matmul_packed(level, t, p, rows, cols, n, x, threads, y),
            None => self.threaded.matmul(t, w, rows, cols, n, x, scratch, y),
        }
    }

    fn threads(&self) -> usize {
        self.threaded.threads
    }

    fn for_each_chunk(
        &self,
        out: &mut [f32],
        chunk: usize,
        lanes: &mut [f32],
        lane_len: usize,
        cost: usize,
        work: &ChunkWork<'_>,
    ) -> Result<(), Error> {
        self.threaded
            .for_each_chunk(out, chunk, lanes, lane_len, cost, work)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_available_reads_the_kib_line_and_nothing_else() {
        let info = "MemTotal:       24731400 kB\nMemFree:  100 kB\nMemAvailable:   20000000 kB\n";
        assert_eq!(mem_available(info), Some(20_000_000 * 1024));
        assert_eq!(mem_available("MemFree: 5 kB\n"), None);
        assert_eq!(mem_available("MemAvailable: 5 MB\n"), None);
        assert_eq!(mem_available("MemAvailable: x kB\n"), None);
        assert_eq!(
            mem_available(&format!("MemAvailable: {} kB\n", usize::MAX)),
            None
        );
        // This machine's, where there is one.
        if let Ok(info) = std::fs::read_to_string("/proc/meminfo") {
            assert!(mem_available(&info).is_some_and(|b| b > 0), "{info}");
            assert!(pack_budget(0) < usize::MAX && pack_budget(usize::MAX) == 0);
        }
    }
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Every chunk once, with its index and its own slice; a lane used by one call at a time; the
    /// same result at every thread count, above and below the cost threshold.
    #[test]
    fn every_chunk_once_with_an_exclusive_lane() {
        for threads in 1..=3 {
            for (len, chunk) in [(100, 7), (64, 1), (5, 9), (0, 3)] {
                for cost in [0, usize::MAX] {
                    let mm = Threaded {
                        level: Level::Scalar,
                        threads,
                    };
                    let mut out = vec![0.0f32; len];
                    let lane_len = 4;
                    let mut lanes = vec![0.0f32; threads * lane_len];
                    let calls = AtomicUsize::new(0);
                    mm.for_each_chunk(
                        &mut out,
                        chunk,
                        &mut lanes,
                        lane_len,
                        cost,
                        &|i, c, lane| {
                            calls.fetch_add(1, Ordering::Relaxed);
                            assert_eq!(lane.len(), lane_len);
                            lane.fill(i as f32);
                            for (k, v) in c.iter_mut().enumerate() {
                                *v = (i * chunk + k) as f32;
                            }
                            std::hint::black_box(&*c);
                            assert!(lane.iter().all(|&v| v == i as f32), "lane shared");
                            Ok(())
                        },
                    )
                    .unwrap();
                    assert_eq!(calls.load(Ordering::Relaxed), len.div_ceil(chunk));
                    assert!(out.iter().enumerate().all(|(k, &v)| v == k as f32));
                }
            }
        }
    }

    #[test]
    fn an_error_is_returned_and_missing_lanes_refused() {
        let mm = Threaded {
            level: Level::Scalar,
            threads: 2,
        };
        let mut out = vec![0.0f32; 64];
        let failing = |i: usize, _: &mut [f32], _: &mut [f32]| {
            if i == 40 {
                Err(Error::LengthMismatch {
                    expected: 1,
                    found: 0,
                })
            } else {
                Ok(())
            }
        };
        let got = mm.for_each_chunk(&mut out, 1, &mut [0.0; 8], 4, usize::MAX, &failing);
        assert!(got.is_err());
        // No lane at all where lanes are asked for.
        let ok = |_: usize, _: &mut [f32], _: &mut [f32]| Ok(());
        assert!(mm.for_each_chunk(&mut out, 1, &mut [], 4, 0, &ok).is_err());
    }
}
