//! Matrix-vector and matrix-matrix products over several threads: the activations are quantized
//! once, in parts that every thread of the call takes as they come (or, when they are few, by
//! every thread for itself: [`ALONE_VALUES`]), then the outputs are cut into pieces (ranges of
//! rows, and ranges of columns when the rows alone give too few pieces) that the calling thread
//! and `threads - 1` pool workers compute with [`matmul_quantized`]. Every output is the same
//! single vec_dot whichever thread computes it, so the result has the same bits for any thread
//! count (and equals `miniquant::quant::matvec` and `matmul`).
//!
//! What keeps a multi-threaded call from costing more than it gains (measurements in
//! BENCHMARKS.md, "Threads at n = 1", and docs/kernel-experiments.md, "Two threads at n = 1 and the
//! legacy tiles" and "The pool's per-call cost"):
//!
//! - **Persistent workers that stay awake between calls.** The workers are a [`rayon_core`] pool
//!   built on the first multi-threaded call and kept for the process (grown, never shrunk; a call
//!   with `threads = N` occupies at most `N - 1` of them). A parked worker takes hundreds of
//!   microseconds to wake on a virtual machine, more than a whole matvec of a real model's
//!   tensors, and the call must wait for it even when the caller has done all the work (a scope
//!   ends when its jobs end). So a worker stays in one lingering job between calls (queued by a
//!   call when its workers are not lingering already) that checks the pool's queue and runs the
//!   next call's job itself as soon as it is queued, for up to [`LINGER`] without one: the
//!   back-to-back products of a forward pass find their workers running, and the hand-off is one
//!   queue push and one queue check.
//! - **The caller as the pool's thread 0, if it asks.** A thread outside the pool hands its jobs
//!   over through the pool's shared queue and learns that they ended through a lock and a
//!   condition variable (a system call on every call); a thread of the pool pushes them on its own
//!   queue, where a lingering worker steals them, and waits on a flag. [`join_pool`] makes the
//!   calling thread thread 0 of a pool of its own (rayon's `use_current_thread`), for good: opt-in,
//!   because rayon work started on that thread afterwards runs in that pool.
//! - **No thread waits asleep.** The caller waits for the workers, and every thread for the
//!   quantization's last part, by spinning, then yielding its core between checks: sleeping in
//!   the scope and being woken costs a time slice on a loaded machine. A lingering worker too
//!   yields its core between checks after 10 µs, so a thread queued behind it on one core runs.
//!   (In the `join` below, a caller would sleep only if the worker's half ended dozens of
//!   microseconds after its own, which the size limit [`HALVES_BYTES`] keeps unlikely.)
//! - **One column on two threads by `join`.** From the joined thread, a one-column product of a
//!   small matrix ([`HALVES_BYTES`]) on two threads skips the scope and the shares below: the rows
//!   are cut where the shares would cut them, and the second half is handed over by
//!   `rayon_core::join`, whose job the worker reads in a line or two from the caller's stack. The
//!   general path's hand-off makes the worker fetch several more lines from the caller's core,
//!   which costs most on a machine whose cores are far apart.
//! - **The workers' path first.** A worker reaches its rows later than the caller (the hand-off
//!   through rayon's queue, then the call's captures read from the caller's core), so a call
//!   hands the workers their jobs before it splits the outputs, and for few activations (up to
//!   [`ALONE_VALUES`]) every thread quantizes all of them itself rather than wait at a barrier for
//!   the other threads' parts.
//! - **A fixed share of rows per thread, few kernel calls, then stealing.** The pieces are dealt
//!   in contiguous shares, thread `i` always getting the same rows of a matrix, so a matrix that
//!   fits in the cores' private caches stays split between them across calls instead of moving
//!   from core to core. For one column a thread claims its whole share at once (each further
//!   kernel call starts its prefetching cold); for several, it claims runs of about a tile of
//!   rows, each one kernel call (a call per piece cost too much on the models' small matrices:
//!   BENCHMARKS.md, "Figures behind design choices"). An owner's outputs go straight into `y`:
//!   it splits the rows it claims off every column of its share ([`OutputColumns`]) and the
//!   kernel writes into them. What an owner has not started when another thread runs out is
//!   taken from its back in halves (computed into a buffer, then copied into the owner's
//!   columns), so the threads end within about a run of each other even when a worker starts
//!   late.
//!   No lock is shared by all the threads: each share has its own (on its own cache lines), taken
//!   by another thread only to steal.
//! - **Columns, not rows, when each thread has many.** From 128 columns a thread the columns
//!   are dealt out instead: each thread quantizes its run of whole columns and computes every row
//!   of them straight into `y`, at the price of reading the whole matrix in every thread and
//!   running the kernel over fewer columns, which pays only from there.
//! - **A minimum share per thread.** A call gets at most one thread per [`MIN_BYTES_PER_THREAD`]
//!   of weights times columns: below it, a hand-off costs more than the share; a smaller product
//!   is computed by the caller alone, as fast as with `threads = 1`.
//! - **No large allocation per call** once a thread has made a call of that size: the quantized
//!   activations and each thread's piece outputs live in thread-local buffers (a multi-threaded
//!   call still allocates its small bookkeeping: the shares, the split of `y`, the pool's job).
//!
//! When another process keeps the second core busy, two threads cannot gain, and a worker that is
//! descheduled holding a piece still makes the call wait: on a machine known to be loaded, one
//! thread is the faster choice for small tensors (figures in BENCHMARKS.md).

use std::cell::RefCell;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};
use std::time::{Duration, Instant};

use miniquant::quant::matvec::{
    matmul_quantized, matmul_quantized_into, matmul_scratch_bytes, matvec_scratch_bytes,
    quantize_activations,
};
use miniquant::quant::packed::{
    activation_starts, packed_activation_bytes, packed_matmul_quantized_into,
    packed_matvec_quantized, quantize_packed_activations,
};
use miniquant::quant::{bytes_for, typed, Level, OutputColumns};
use miniquant::{Error, GgmlType};
use rayon_core::{ThreadPool, ThreadPoolBuilder};

/// Weight bytes (times columns, for a matmul) per thread below which fewer threads are used: a
/// product over `b` bytes of weights and `n` columns gets at most `max(1, b·n /
/// MIN_BYTES_PER_THREAD)` threads.
pub const MIN_BYTES_PER_THREAD: usize = 64 << 10;

/// The weight bytes of the smallest piece of a matvec (at least one row, in groups of eight rows):
/// a thread that runs out of rows takes another's in halves down to one such piece, so that they
/// end within about a piece's time of each other, while the cost of a claim (a lock, a kernel
/// call) stays small against it.
pub const CHUNK_BYTES: usize = 16 << 10;

/// Activation values (columns times their length) per part of the quantization: a call's
/// activations are quantized in parts of at least this many values, which its threads take as they
/// come, before any of them starts on the weights.
pub const PARALLEL_QUANTIZE_VALUES: usize = 1 << 10;

/// Activation values (columns times their length) up to which every thread of a call quantizes
/// all of them itself, into its own buffer, instead of a part each into one shared buffer: it
/// starts on its rows as soon as it has, with no barrier, and no activation line is written by two
/// cores. Below this the duplicated work costs less than the shared parts do: the barrier, a
/// worker handed its job late, and each thread's first read of the activations the other core
/// wrote (docs/kernel-experiments.md, "Two threads at n = 1 in the slow state" and "Row shares in
/// runs").
pub const ALONE_VALUES: usize = 64 << 10;

/// How long a worker keeps checking for the next call after its last job ends, before it parks:
/// longer than the single-threaded work between two products of a forward pass (norms,
/// attention of a short context), short enough that an idle process stops spinning at once.
pub const LINGER: Duration = Duration::from_micros(500);

/// Weight bytes up to which a one-column product on two threads from the joined thread is cut in
/// two halves handed over by `rayon_core::join` (see the module's docs): past it the general
/// path's hand-off costs under 2% of the call, and its waiting (spinning, then yielding the core,
/// never asleep) is kept for the long calls, where the other half may end much later (rayon's
/// `join` puts a waiting thread to sleep after a few dozen yields).
pub const HALVES_BYTES: usize = 4 << 20;

/// Pieces per thread a matmul aims at, so that the threads end close together.
const PIECES_PER_THREAD: usize = 8;

/// Rows of a one-column piece are a multiple of this (the rows kernels' groups of eight rows).
const PIECE_ROW_MULTIPLE: usize = 8;

/// Rows of any piece of a packed matrix are a multiple of this: its groups (`quant::packed`).
const PACKED_PIECE_ROW_MULTIPLE: usize = miniquant::quant::packed::GROUP_ROWS;

/// Rows of a several-column piece are a multiple of this where a tile has at least as many rows:
/// the matmul tiles' row blocks (4 to 32 rows; 32 is the x86_64 legacy tiles' pair of 16-row
/// strips) divide it, so that no piece ends in a partial block that two threads would run where one
/// thread runs none (docs/kernel-experiments.md, "Pieces of whole tiles").
const TILE_PIECE_ROW_MULTIPLE: usize = 32;

/// Columns per thread from which a matmul deals out its columns rather than its rows: each
/// thread quantizes a run of whole columns itself and computes all their rows straight into `y`
/// (one kernel call, nothing shared but the weights). Row shares read the matrix once and write
/// straight into `y`'s columns too, but every thread quantizes (or waits for) all the columns;
/// columns read the matrix in every thread and run the kernel over fewer columns, which pays from
/// this many columns a thread on every shape measured (docs/kernel-experiments.md, "Row shares
/// straight into `y`").
const COLUMN_SHARE_COLUMNS: usize = 128;

/// How long a waiting thread (or a lingering worker) spins before it yields its core between
/// checks.
const SPIN: Duration = Duration::from_micros(10);

thread_local! {
    /// The quantized activations of the calls this thread makes.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// The part of a call's activations this thread quantizes, before it is copied into the
    /// caller's scratch.
    static PART: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// A call's activations quantized by this thread alone (see [`ALONE_VALUES`]).
    static OWN: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// The outputs of the pieces this thread computes for another thread's share (or of a run of
    /// columns), before they are copied into `y`.
    static PIECE_OUT: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    /// The [`Shares`] locks of the calls this thread makes (padded, so allocated aligned: an
    /// allocation per call cost a fifth of a microsecond before the workers were started).
    static SHARE_LOCKS: RefCell<Vec<ShareLock>> = const { RefCell::new(Vec::new()) };
}

/// `f` on this thread's buffer `key`, or on a new one if the thread is already using it (a call
/// made while it waits inside another, e.g. from a job of another pool run meanwhile).
fn with_buffer<T, R>(
    key: &'static std::thread::LocalKey<RefCell<Vec<T>>>,
    f: impl FnOnce(&mut Vec<T>) -> R,
) -> R {
    key.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buffer) => f(&mut buffer),
        Err(_) => f(&mut Vec::new()),
    })
}

/// The first `len` elements of `buffer`, grown (with zeros) if it is shorter, never cleared:
/// every element a call reads is written first (quantized activations, a kernel's outputs), and
/// zeroing them each call would cost a write of every line.
fn at_least<T: Clone + Default>(buffer: &mut Vec<T>, len: usize) -> &mut [T] {
    if buffer.len() < len {
        buffer.resize(len, T::default());
    }
    &mut buffer[..len]
}

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
/// column `j`, for any thread count. The columns are quantized once, by every thread of the call
/// in parts of at least [`PARALLEL_QUANTIZE_VALUES`] values; up to [`ALONE_VALUES`] of them, by
/// every thread for itself.
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
    product(level, t, Layout::Plain, w, rows, cols, n, x, threads, y)
}

/// [`matmul`] over a matrix packed by `miniquant::quant::packed::pack`, with the packed kernels
/// of `level`: the same bits as [`matmul`] of the plain matrix, for any thread count (the threads
/// take whole groups of 16 rows of all the columns).
#[allow(clippy::too_many_arguments)]
pub fn matmul_packed(
    level: Level,
    t: GgmlType,
    packed: &[u8],
    rows: usize,
    cols: usize,
    n: usize,
    x: &[f32],
    threads: usize,
    y: &mut [f32],
) -> Result<(), Error> {
    product(
        level,
        t,
        Layout::Packed,
        packed,
        rows,
        cols,
        n,
        x,
        threads,
        y,
    )
}

/// The layout of a product's weights: plain rows, or rows packed by 16.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Layout {
    Plain,
    Packed,
}

impl Layout {
    /// The product of the rows `w` against the quantized columns `xq`: `matmul_quantized`, or
    /// `packed_matvec_quantized` / `packed_matmul_quantized` (`w` then starts on a group of 16
    /// rows; for several columns `xq` ends with their blocks' starts).
    #[allow(clippy::too_many_arguments)]
    fn run(
        self,
        level: Level,
        t: GgmlType,
        w: &[u8],
        rows: usize,
        cols: usize,
        n: usize,
        xq: &[u8],
        y: &mut [f32],
    ) -> Result<(), Error> {
        let mut y = OutputColumns::whole(y, rows, n)?;
        self.run_into(level, t, w, rows, cols, n, xq, &mut y)
    }

    /// [`Layout::run`] into the columns of `y` (`rows` rows of each of the `n` columns).
    #[allow(clippy::too_many_arguments)]
    fn run_into(
        self,
        level: Level,
        t: GgmlType,
        w: &[u8],
        rows: usize,
        cols: usize,
        n: usize,
        xq: &[u8],
        y: &mut OutputColumns<'_, '_>,
    ) -> Result<(), Error> {
        match self {
            Layout::Plain => matmul_quantized_into(level, t, w, rows, cols, n, xq, y),
            Layout::Packed if n == 1 => {
                let y = y.column(0).unwrap_or_default();
                packed_matvec_quantized(level, t, w, rows, cols, xq, y)
            }
            Layout::Packed => packed_matmul_quantized_into(level, t, w, rows, cols, n, xq, y),
        }
    }
}

/// [`matmul`] over weights in `layout`.
#[allow(clippy::too_many_arguments)]
fn product(
    level: Level,
    t: GgmlType,
    layout: Layout,
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
    // Packed, several columns: the blocks' starts follow the quantized columns.
    let with_starts = layout == Layout::Packed && n > 1;
    let quantized_bytes = matmul_scratch_bytes(t, cols, n)?;
    let scratch_bytes = if with_starts {
        packed_activation_bytes(t, cols, n)?
    } else {
        quantized_bytes
    };
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
    let quantize_all = |scratch: &mut [u8]| -> Result<usize, Error> {
        if with_starts {
            quantize_packed_activations(level, t, cols, n, x, scratch)?;
        } else {
            quantize_activations(level, t, inputs, x, scratch)?;
        }
        Ok(scratch_bytes)
    };
    let work = w.len().saturating_mul(n);
    let threads = threads
        .min(rows.saturating_mul(n))
        .min(work / MIN_BYTES_PER_THREAD)
        .max(1);
    // (What does not depend on the data, the level and the type's kernels, is not checked apart:
    // every thread's first quantization or kernel call fails with it, and a worker hears of the
    // call sooner.)
    with_buffer(&SCRATCH, move |scratch| {
        // Resized, not cleared and refilled with zeros: every byte a call reads is quantized into
        // it first, and zeroing it would write every line the other threads read in the last
        // call, each store waiting for those copies to be invalidated (docs/kernel-experiments.md).
        let pool = if threads > 1 { pool(threads - 1) } else { None };
        let pool = pool.filter(|_| row_bytes > 0 && n > 0);
        let Some(pool) = pool else {
            scratch.resize(scratch_bytes, 0);
            let used = quantize_all(scratch)?;
            return layout.run(level, t, w, rows, cols, n, &scratch[..used], y);
        };
        if layout == Layout::Plain && column_shares_pay(threads, n) {
            return column_shares(&pool, level, t, w, rows, cols, n, x, threads, y);
        }
        let tile_rows = tile_rows(level, t, row_bytes, n, layout);
        let least_multiple = match layout {
            Layout::Plain => PIECE_ROW_MULTIPLE,
            Layout::Packed => PACKED_PIECE_ROW_MULTIPLE,
        };
        let (row_pieces, mut piece_columns, multiple) =
            pieces(threads, rows, row_bytes, tile_rows, n, least_multiple);
        if layout == Layout::Packed {
            // Whole columns: a packed piece's activations are all of them with their starts.
            piece_columns = n;
        }
        let column_ranges = n.div_ceil(piece_columns);
        // Whole columns and few activations: every thread quantizes them for itself (the shared
        // scratch is not used).
        let alone = inputs <= ALONE_VALUES && column_ranges == 1;
        if !alone {
            scratch.resize(scratch_bytes, 0);
        }
        // The activations as one run of whole blocks (each column is whole blocks), quantized in
        // parts of whole blocks; block `b`'s bytes start at `matvec_scratch_bytes(t, b·block)`.
        let block = (t.block_size() as usize).max(1);
        let blocks = inputs / block;
        let parts = (inputs / PARALLEL_QUANTIZE_VALUES)
            .min(threads * PIECES_PER_THREAD)
            .min(blocks)
            .max(1);
        let part_values =
            |part: usize| blocks * part / parts * block..blocks * (part + 1) / parts * block;
        let xq = RwLock::new(&mut scratch[..]);
        let quantize_part = |part: usize| {
            let values = part_values(part);
            let (first_block, part_blocks) = (values.start / block, values.len() / block);
            let at = matvec_scratch_bytes(t, values.start)?;
            with_buffer(&PART, |buffer| {
                let buffer = at_least(buffer, matvec_scratch_bytes(t, values.len())?);
                let part_q = quantize_activations(level, t, values.len(), &x[values], buffer)?;
                let mut xq = xq.write().unwrap_or_else(PoisonError::into_inner);
                let to = xq
                    .get_mut(at..at + part_q.len())
                    .ok_or(mismatch(at + part_q.len(), scratch_bytes))?;
                to.copy_from_slice(part_q);
                if with_starts {
                    let first = quantized_bytes + 4 * first_block;
                    let starts = 4 * part_blocks;
                    let to = xq
                        .get_mut(first..first + starts)
                        .ok_or(mismatch(first + starts, scratch_bytes))?;
                    activation_starts(t, part_q, to)?;
                }
                Ok(())
            })
        };
        // The first row of row piece `i` (pieces of whole groups of `multiple` rows, differing by
        // at most one group).
        let row_start = |i: usize| row_bound(rows, row_pieces, multiple, i);
        let joined = pool.joined && pool.current_thread_index() == Some(0);
        if threads == 2 && n == 1 && alone && w.len() <= HALVES_BYTES && joined {
            // The two shares of the general path below, so that each thread keeps its rows.
            let middle = row_start(Shares::bound(row_pieces, 2, 1));
            // Before the half it hands over: a worker takes the lingering job first, then the
            // half from inside it, and lingers for the next call.
            linger_on(&pool, 1);
            return halves(w, middle * row_bytes, y, middle, |w, y| {
                with_buffer(&OWN, |own| {
                    let own = at_least(own, scratch_bytes);
                    let used = quantize_all(own)?;
                    layout.run(level, t, w, y.len(), cols, 1, &own[..used], y)
                })
            });
        }
        let per_column = scratch_bytes / n;
        let count = row_pieces * column_ranges;
        if column_ranges == 1 {
            // Whole columns: each thread's share of the pieces is a run of rows, and its outputs
            // (that run of every column) are its own, locked only by a thread that steals from it.
            let share_rows = |share: usize| {
                let first = |i: usize| row_start(Shares::bound(row_pieces, threads, i));
                first(share)..first(share + 1)
            };
            // Each share's outputs (its run of rows of every column), split off `y` by the caller
            // once the workers are started: a worker quantizes (or takes its parts) meanwhile
            // and finds them ready when it claims its rows.
            let outs: OnceLock<Vec<ShareOutputs<'_>>> = OnceLock::new();
            let setup = {
                // Set (empty: every claim fails) if the caller unwinds before or while it splits,
                // so that no worker waits for it for ever: dropped with `setup`, run or not.
                let guard = SetOnDrop(&outs);
                let outs = &outs;
                move || {
                    let _guard = guard;
                    let y = y;
                    // Each share's rows once, not once per column (its bounds take divisions).
                    let shares: Vec<Range<usize>> = (0..threads).map(share_rows).collect();
                    let mut split: Vec<_> = shares
                        .iter()
                        .map(|share| {
                            Padded(Mutex::new(ShareColumns {
                                rest: Vec::with_capacity(n),
                                front: share.start,
                                spare: Vec::with_capacity(n),
                            }))
                        })
                        .collect();
                    for column in y.chunks_exact_mut(rows) {
                        let mut rest = column;
                        for (share, out) in shares.iter().zip(split.iter_mut()) {
                            let (mine, after) = std::mem::take(&mut rest)
                                .split_at_mut_checked(share.len())
                                .unwrap_or_default();
                            out.0
                                .get_mut()
                                .unwrap_or_else(PoisonError::into_inner)
                                .rest
                                .push(mine);
                            rest = after;
                        }
                    }
                    let _ = outs.set(split);
                }
            };
            let call_pieces = call_pieces(rows, tile_rows, row_pieces, n);
            let own_claim = if n == 1 {
                OwnClaim::Whole
            } else {
                OwnClaim::Runs(call_pieces)
            };
            // Claims `claim` of share `owner`, by thread `mine`, against the activations `xq`.
            let process = |mine: usize, owner: usize, claim: Range<usize>, xq: &[u8]| {
                wait_until(|| outs.get().is_some());
                let out = outs.get().and_then(|outs| outs.get(owner));
                let out = out.ok_or(mismatch(rows, 0))?;
                let lock = || out.0.lock().unwrap_or_else(PoisonError::into_inner);
                let first = row_start(claim.start);
                let end = row_start(claim.end);
                // Its own rows, the next from the front of its share (an owner claims them in
                // order): split off every column under the lock, then computed straight into
                // them, unlocked.
                let own_columns = || {
                    let mut columns = lock();
                    let ShareColumns { rest, front, spare } = &mut *columns;
                    if *front != first {
                        return None;
                    }
                    let mut claimed = std::mem::take(spare);
                    claimed.clear();
                    for column in rest.iter_mut() {
                        let (claimed_rows, after) = std::mem::take(column)
                            .split_at_mut_checked(end - first)
                            .unwrap_or_default();
                        claimed.push(claimed_rows);
                        *column = after;
                    }
                    *front = end;
                    Some(claimed)
                };
                let claimed = if owner == mine { own_columns() } else { None };
                if let Some(mut claimed) = claimed {
                    // One kernel call: an owner claims a run of pieces (all of them for one
                    // column, see [`OwnClaim::Whole`]).
                    let w = &w[first * row_bytes..end * row_bytes];
                    let result = match claimed.first_mut() {
                        Some(to) if n == 1 => layout.run(level, t, w, end - first, cols, 1, xq, to),
                        _ => {
                            let mut to = OutputColumns::split(&mut claimed, 0, end - first);
                            layout.run_into(level, t, w, end - first, cols, n, xq, &mut to)
                        }
                    };
                    // The vector back for the next claim (its capacity, not its slices).
                    claimed.clear();
                    lock().spare = claimed;
                    return result;
                }
                // Another thread's rows (from the back of its share): computed into a buffer,
                // then copied into the rows its owner has left in `y`.
                for piece in claim.clone().step_by(call_pieces) {
                    let first = row_start(piece);
                    let end = row_start((piece + call_pieces).min(claim.end));
                    let w = &w[first * row_bytes..end * row_bytes];
                    with_buffer(&PIECE_OUT, |piece| {
                        let piece = at_least(piece, (end - first) * n);
                        layout.run(level, t, w, end - first, cols, n, xq, piece)?;
                        let mut columns = lock();
                        let at = first.checked_sub(columns.front).ok_or(mismatch(first, 0))?;
                        let parts = piece.chunks_exact(end - first);
                        for (column, part) in columns.rest.iter_mut().zip(parts) {
                            column
                                .get_mut(at..at + (end - first))
                                .ok_or(mismatch(end, rows))?
                                .copy_from_slice(part);
                        }
                        Ok::<(), Error>(())
                    })?;
                }
                Ok(())
            };
            // One column: a thread's whole share in one kernel call (see [`Shares`]). More: runs of
            // a tile's worth of rows, each one call.
            if alone {
                // Few activations: every thread quantizes all of them into its own buffer, and
                // starts on its rows as soon as it has (no barrier, no line written by two cores).
                return share(
                    &pool,
                    threads,
                    own_claim,
                    0,
                    |_| Ok(()),
                    setup,
                    count,
                    |mine, next| {
                        with_buffer(&OWN, |own| {
                            let own = at_least(own, scratch_bytes);
                            let used = quantize_all(own)?;
                            let xq = &own[..used];
                            while let Some((owner, claim)) = next() {
                                process(mine, owner, claim, xq)?;
                            }
                            Ok(())
                        })
                    },
                );
            }
            return share(
                &pool,
                threads,
                own_claim,
                parts,
                quantize_part,
                setup,
                count,
                |mine, next| {
                    let xq = xq.read().unwrap_or_else(PoisonError::into_inner);
                    while let Some((owner, claim)) = next() {
                        process(mine, owner, claim, &xq)?;
                    }
                    Ok(())
                },
            );
        }
        let y = Mutex::new(y);
        // Rows `rows` of columns `columns` into `y`.
        let compute = |xq: &[u8], row_range: Range<usize>, columns: Range<usize>| {
            let w = &w[row_range.start * row_bytes..row_range.end * row_bytes];
            let xq = &xq[columns.start * per_column..columns.end * per_column];
            let piece_rows = row_range.len();
            with_buffer(&PIECE_OUT, |out| {
                let out = at_least(out, piece_rows * columns.len());
                layout.run(level, t, w, piece_rows, cols, columns.len(), xq, out)?;
                let mut y = y.lock().unwrap_or_else(PoisonError::into_inner);
                let to = y.chunks_exact_mut(rows).skip(columns.start);
                for (column, piece) in to.zip(out.chunks_exact(piece_rows)) {
                    column[row_range.clone()].copy_from_slice(piece);
                }
                Ok::<(), Error>(())
            })
        };
        share(
            &pool,
            threads,
            OwnClaim::Halves,
            parts,
            quantize_part,
            || {},
            count,
            |_, next| {
                let xq = xq.read().unwrap_or_else(PoisonError::into_inner);
                while let Some((_, claim)) = next() {
                    for piece in claim {
                        let first_row = row_start(piece / column_ranges);
                        let first_column = piece % column_ranges * piece_columns;
                        let last_row = row_start(piece / column_ranges + 1);
                        let last_column = (first_column + piece_columns).min(n);
                        compute(&xq, first_row..last_row, first_column..last_column)?;
                    }
                }
                Ok(())
            },
        )
    })
}

/// One column on two threads from the thread that joined the pool ([`join_pool`]): `half` on the
/// weights and outputs before `bytes` and `rows`, and on the rest, the second half handed to the
/// lingering worker by `rayon_core::join`. That hand-off is a job on this thread's own stack,
/// whose captures a worker reads in a line or two and whose end it signals in a flag there; the
/// general path's scope, shares, locks and split of `y` make the worker fetch several more lines
/// from this thread's core, each a round trip between the cores, which on the models' small
/// matrices is a large part of the call (docs/kernel-experiments.md, "One column on two threads
/// by `join`"). A worker not there yet when this thread ends its half finds the second half still
/// queued: this thread takes it back and computes it. The first error is returned.
fn halves(
    w: &[u8],
    bytes: usize,
    y: &mut [f32],
    rows: usize,
    half: impl Fn(&[u8], &mut [f32]) -> Result<(), Error> + Sync,
) -> Result<(), Error> {
    let mismatch = |expected: usize, found: usize| Error::LengthMismatch {
        expected: expected as u64,
        found: found as u64,
    };
    let (w0, w1) = w.split_at_checked(bytes).ok_or(mismatch(bytes, w.len()))?;
    let found = y.len();
    let (y0, y1) = y.split_at_mut_checked(rows).ok_or(mismatch(rows, found))?;
    #[cfg(test)]
    HALVES_TAKEN.with(|taken| taken.set(taken.get() + 1));
    let half = &half;
    let (first, second) = rayon_core::join(|| half(w0, y0), || half(w1, y1));
    first.and(second)
}

#[cfg(test)]
thread_local! {
    /// The calls [`halves`] took on this thread (the tests check which path a call took).
    static HALVES_TAKEN: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Whether a matmul of `n` columns on `threads` threads deals out its columns (see
/// [`COLUMN_SHARE_COLUMNS`]).
fn column_shares_pay(threads: usize, n: usize) -> bool {
    n / threads.max(1) >= COLUMN_SHARE_COLUMNS
}

/// [`matmul`] with its columns dealt out: thread `i` owns the `i`-th of `threads` runs of whole
/// columns (differing by at most one column), quantizes them into its own buffer and computes
/// every row of them into its run of `y` in one kernel call. A thread that ends first takes a run
/// whose owner has not started (a worker handed its job late), so the call never waits for a
/// worker that never came.
#[allow(clippy::too_many_arguments)]
fn column_shares(
    pool: &Pool,
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
    let missing = Error::LengthMismatch {
        expected: (rows * n) as u64,
        found: 0,
    };
    let first_column = |share: usize| Shares::bound(n, threads, share);
    // Each run's outputs, split off `y` by the caller once the workers are started (as the row
    // shares' are).
    let outs: OnceLock<Vec<Padded<Mutex<&mut [f32]>>>> = OnceLock::new();
    let setup = {
        // Set (empty: every claim fails) if the caller unwinds before or while it splits.
        let guard = SetOnDrop(&outs);
        let outs = &outs;
        move || {
            let _guard = guard;
            let mut rest = y;
            let split = (0..threads)
                .map(|share| {
                    let len = (first_column(share + 1) - first_column(share)) * rows;
                    let (mine, after) = std::mem::take(&mut rest)
                        .split_at_mut_checked(len)
                        .unwrap_or_default();
                    rest = after;
                    Padded(Mutex::new(mine))
                })
                .collect();
            let _ = outs.set(split);
        }
    };
    share(
        pool,
        threads,
        OwnClaim::Whole,
        0,
        |_| Ok(()),
        setup,
        threads,
        |_, next| {
            while let Some((_, claim)) = next() {
                for run in claim {
                    let columns = first_column(run)..first_column(run + 1);
                    let x = x.get(columns.start * cols..columns.end * cols).ok_or(
                        Error::LengthMismatch {
                            expected: (columns.end * cols) as u64,
                            found: x.len() as u64,
                        },
                    )?;
                    wait_until(|| outs.get().is_some());
                    let out = outs.get().and_then(|outs| outs.get(run));
                    let mut out = out
                        .ok_or(missing)?
                        .0
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner);
                    with_buffer(&OWN, |own| {
                        let own = at_least(own, matmul_scratch_bytes(t, cols, columns.len())?);
                        let xq = quantize_activations(level, t, x.len(), x, own)?;
                        matmul_quantized(level, t, w, rows, cols, columns.len(), xq, &mut out)
                    })?;
                }
            }
            Ok(())
        },
    )
}

/// Runs `work(piece)` for every piece `0..count` on up to `threads` threads (the caller and
/// `threads - 1` pool workers, the pieces shared as a matmul's are); on the caller alone when
/// `threads` is 1 or the pool cannot be started. The first error is returned. For the forward
/// pass's work between the products (`crate::model::Threaded`'s attention).
pub fn for_each_piece(
    threads: usize,
    count: usize,
    work: impl Fn(usize) -> Result<(), Error> + Sync,
) -> Result<(), Error> {
    let threads = threads.min(count).max(1);
    match if threads > 1 { pool(threads - 1) } else { None } {
        Some(pool) => share(
            &pool,
            threads,
            OwnClaim::Halves,
            0,
            |_| Ok(()),
            || {},
            count,
            |_, next| {
                while let Some((_, claim)) = next() {
                    claim.into_iter().try_for_each(&work)?;
                }
                Ok(())
            },
        ),
        None => (0..count).try_for_each(work),
    }
}

/// How many row pieces a call's rows are cut into, the columns of a piece, and the multiple of rows
/// a piece is made of (`least_multiple`, [`PIECE_ROW_MULTIPLE`] or a packed matrix's
/// [`PACKED_PIECE_ROW_MULTIPLE`], for one column; [`TILE_PIECE_ROW_MULTIPLE`] for several when a
/// tile has that many rows, else `least_multiple`). The row pieces are whole groups of that many rows, as
/// even as that allows (see [`row_bound`]), and their count is a multiple of `threads` when there
/// are enough groups: every thread's share then has the same rows to within one group, so threads
/// of equal speed end together without stealing. (Pieces of a fixed size left one share up to a
/// piece larger than another, which stealing cannot even out: docs/kernel-experiments.md.) For
/// one column, pieces of about [`CHUNK_BYTES`] of weights. For several, at least `threads × 8`
/// pieces, each at most one tile of rows (`tile_rows`, the kernel call's: [`tile_rows`]), and the
/// columns cut as well when the row pieces alone are too few.
fn pieces(
    threads: usize,
    rows: usize,
    row_bytes: usize,
    tile_rows: usize,
    n: usize,
    least_multiple: usize,
) -> (usize, usize, usize) {
    let multiple = if n > 1 && tile_rows >= TILE_PIECE_ROW_MULTIPLE {
        TILE_PIECE_ROW_MULTIPLE
    } else {
        least_multiple
    };
    let groups = rows.div_ceil(multiple);
    let threads = threads.max(1);
    // The fewest row pieces of at most `most_rows` rows, at least `least` of them.
    let row_pieces = |most_rows: usize, least: usize| {
        let most_groups = (most_rows / multiple).max(1);
        let count = groups
            .div_ceil(most_groups)
            .max(least)
            .next_multiple_of(threads);
        if count <= groups {
            count
        } else {
            groups.max(1)
        }
    };
    if n == 1 {
        let chunk_rows = CHUNK_BYTES
            .div_ceil(row_bytes.max(1))
            .next_multiple_of(multiple);
        return (row_pieces(chunk_rows, 1), 1, multiple);
    }
    let wanted = threads * PIECES_PER_THREAD;
    let count = row_pieces(tile_rows, wanted);
    let column_ranges = wanted.div_ceil(count).min(n);
    (count, n.div_ceil(column_ranges), multiple)
}

/// The row pieces of one kernel call of a matmul whose `rows` rows are cut into `row_pieces`
/// pieces of whole columns: for several columns, whole pieces of at most about a tile of rows (at
/// least one), so that a call's outputs are copied into `y` while still in cache; for one column,
/// any claim in one call.
fn call_pieces(rows: usize, tile_rows: usize, row_pieces: usize, n: usize) -> usize {
    if n == 1 {
        return row_pieces.max(1);
    }
    let piece_rows = rows.div_ceil(row_pieces.max(1)).max(1);
    (tile_rows / piece_rows).max(1)
}

/// Rows per tile of a kernel call of `t` at `level` with rows of `row_bytes` bytes and `n`
/// columns (`layout`): the plain matmul's tiles
/// ([`miniquant::quant::matvec::matmul_tile_rows`]), a packed matrix's by their bytes.
fn tile_rows(level: Level, t: GgmlType, row_bytes: usize, n: usize, layout: Layout) -> usize {
    match layout {
        Layout::Plain => miniquant::quant::matvec::matmul_tile_rows(level, t, row_bytes, n),
        Layout::Packed => typed::matmul_tile_rows(row_bytes),
    }
}

/// The first row of row piece `i` of `rows` rows cut into `row_pieces` pieces of whole groups of
/// `multiple` rows (the last one may be short), as even as that allows: piece `i` starts at group
/// `⌊groups · i / row_pieces⌋`, so that any run of pieces has its share of the groups to within
/// one.
fn row_bound(rows: usize, row_pieces: usize, multiple: usize, i: usize) -> usize {
    let groups = rows.div_ceil(multiple);
    Shares::bound(groups, row_pieces, i)
        .saturating_mul(multiple)
        .min(rows)
}

/// A share's run of rows of every column of `y`, locked by its owner to split off the rows it
/// claims and by a thread that steals from it to copy its outputs in.
type ShareOutputs<'y> = Padded<Mutex<ShareColumns<'y>>>;

/// The rows of a share's columns that its owner has not claimed yet.
struct ShareColumns<'y> {
    /// Of every column, the rows from `front` to the share's end.
    rest: Vec<&'y mut [f32]>,
    /// The first row (of the matrix) in `rest`.
    front: usize,
    /// An empty vector of as many columns, which the owner fills with the rows it claims (its
    /// capacity kept from claim to claim).
    spare: Vec<&'y mut [f32]>,
}

/// What is left of one share of a [`Shares`], `start..end`.
type ShareLock = Padded<Mutex<(usize, usize)>>;

/// A value on its own cache lines, so that what one thread writes there does not move another
/// thread's data between cores.
#[repr(align(128))]
struct Padded<T>(T);

/// The pieces `0..count` dealt into `threads` contiguous shares. Each thread claims runs of pieces
/// from the front of its own share (as its [`OwnClaim`] says), then from the back of the others':
/// a thief takes half of what is left there (at most an eighth of a share for
/// [`OwnClaim::Halves`]), so the claims shrink as the shares empty and the threads end close
/// together.
struct Shares<'a> {
    /// The pieces not yet taken of each share, `start..end`.
    left: &'a [ShareLock],
    /// The largest claim of half of what is left.
    most: usize,
    /// How an owner claims from its own share.
    own: OwnClaim,
}

/// How a thread claims pieces of its own share of a [`Shares`].
#[derive(Clone, Copy, Debug)]
enum OwnClaim {
    /// All of it at once (pieces of equal cost, one kernel call whose every restart costs: its
    /// prefetching starts cold); another thread can then take only what an owner has not started.
    Whole,
    /// Runs of this many pieces (pieces of equal cost whose outputs go through a buffer: a run is
    /// a tile's worth, copied while in cache).
    Runs(usize),
    /// Half of what is left, at most an eighth of a share (pieces of unequal cost).
    Halves,
}

impl<'a> Shares<'a> {
    /// The shares of `count` pieces among `threads` threads, their locks kept in `locks` (reused
    /// from call to call).
    fn new(locks: &'a mut Vec<ShareLock>, count: usize, threads: usize, own: OwnClaim) -> Self {
        // New locks (none poisoned by an earlier call) in the buffer's kept capacity.
        locks.clear();
        locks.extend((0..threads).map(|i| {
            let bounds = (
                Self::bound(count, threads, i),
                Self::bound(count, threads, i + 1),
            );
            Padded(Mutex::new(bounds))
        }));
        Shares {
            left: locks,
            most: match own {
                OwnClaim::Halves => count.div_ceil(threads.max(1) * 8).max(1),
                OwnClaim::Whole | OwnClaim::Runs(_) => usize::MAX,
            },
            own,
        }
    }

    /// The first piece of share `i` of `count` pieces dealt into `threads` shares.
    fn bound(count: usize, threads: usize, i: usize) -> usize {
        // `count · i / threads` without overflow: the shares differ by at most one piece.
        let threads = threads.max(1);
        count / threads * i + count % threads * i / threads
    }

    /// The next pieces for the thread of share `mine` and the share they come from, `None` when
    /// every piece is taken.
    fn next(&self, mine: usize) -> Option<(usize, Range<usize>)> {
        let lock = |i: usize| {
            self.left[i]
                .0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
        };
        let claim = |left: usize| left.div_ceil(2).min(self.most);
        let mut own = lock(mine);
        if own.0 < own.1 {
            let first = own.0;
            own.0 = match self.own {
                OwnClaim::Whole => own.1,
                OwnClaim::Runs(run) => own.0 + run.clamp(1, own.1 - own.0),
                OwnClaim::Halves => own.0 + claim(own.1 - own.0),
            };
            return Some((mine, first..own.0));
        }
        drop(own);
        let others = (1..self.left.len()).map(|k| (mine + k) % self.left.len());
        for other in others {
            let mut theirs = lock(other);
            if theirs.0 < theirs.1 {
                let end = theirs.1;
                theirs.1 -= claim(theirs.1 - theirs.0);
                return Some((other, theirs.1..end));
            }
        }
        None
    }

    /// Takes every piece left, so that none is started after a failure.
    fn drain(&self) {
        for share in self.left {
            let mut share = share.0.lock().unwrap_or_else(PoisonError::into_inner);
            share.0 = share.1;
        }
    }
}

/// The claims of one thread of a [`share`] call: the next run of pieces and the share it comes
/// from, `None` when every piece is taken (or the call has failed).
type Claims<'a> = dyn FnMut() -> Option<(usize, Range<usize>)> + 'a;

/// Runs `prepare` on every part `0..parts`, then shares the pieces `0..count` between the caller
/// and `threads - 1` workers of `pool`: the parts taken one at a time as they come; then each
/// thread runs `work(mine, claims)` once, which computes the [`Shares`] claims that `claims()`
/// hands it until it returns `None` (thread `mine` owns share `mine`). No thread starts a piece
/// before every part is done. The caller runs `setup` once the workers' jobs are queued, before
/// its own parts: what only the claims need is made while the workers are being handed their jobs
/// (a worker that claims before it is done must wait for it). The first error is returned, and
/// nothing is claimed after it. The workers linger afterwards (see [`LINGER`]).
#[allow(clippy::too_many_arguments)]
fn share(
    pool: &Pool,
    threads: usize,
    own: OwnClaim,
    parts: usize,
    prepare: impl Fn(usize) -> Result<(), Error> + Sync,
    setup: impl FnOnce(),
    count: usize,
    work: impl Fn(usize, &mut Claims<'_>) -> Result<(), Error> + Sync,
) -> Result<(), Error> {
    with_buffer(&SHARE_LOCKS, |locks| {
        let shares = Shares::new(locks, count, threads, own);
        share_among(&shares, pool, threads, parts, prepare, setup, work)
    })
}

/// [`share`] of the pieces of `shares`.
fn share_among(
    shares: &Shares<'_>,
    pool: &Pool,
    threads: usize,
    parts: usize,
    prepare: impl Fn(usize) -> Result<(), Error> + Sync,
    setup: impl FnOnce(),
    work: impl Fn(usize, &mut Claims<'_>) -> Result<(), Error> + Sync,
) -> Result<(), Error> {
    let next_part = Padded(AtomicUsize::new(0));
    let parts_done = Padded(AtomicUsize::new(0));
    let failure: Mutex<Option<Error>> = Mutex::new(None);
    let finished = Padded(AtomicUsize::new(0));
    let failed = AtomicBool::new(false);
    let fail = |e: Error| {
        failed.store(true, Ordering::Release);
        shares.drain();
        failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(e);
    };
    let run = |mine: usize| {
        // (No part: the shared counters are not touched.)
        if parts > 0 {
            loop {
                let part = next_part.0.fetch_add(1, Ordering::AcqRel);
                if part >= parts {
                    break;
                }
                // Counted even if the part panics, so that no thread waits below forever.
                let _done = CountOnDrop(&parts_done.0);
                if !failed.load(Ordering::Acquire) {
                    if let Err(e) = prepare(part) {
                        fail(e);
                    }
                }
            }
            // Every part is taken: wait for those another thread is still making.
            wait_until(|| parts_done.0.load(Ordering::Acquire) >= parts);
        }
        if let Err(e) = work(mine, &mut || shares.next(mine)) {
            fail(e);
        }
    };
    // A panic in a worker is re-raised here once every spawned job has ended.
    pool.in_place_scope(|scope| {
        if pool.joined {
            // The lingering job first, on the joined thread's own queue: the workers steal from its
            // front (oldest first), so one takes the lingering job and then this call's jobs from
            // inside it, while this thread, which pops from the back when it waits at the end,
            // never finds the lingering job behind this call's (it would take it, and the worker
            // would sleep).
            linger_on(pool, threads - 1);
        }
        for mine in 1..threads {
            let run = &run;
            let finished = &finished;
            scope.spawn(move |_| {
                // Counted even if a piece panics, so the caller's wait below ends.
                let _finish = CountOnDrop(&finished.0);
                run(mine);
            });
        }
        // Workers that are not lingering get a lingering job behind the jobs above: they go from
        // their part of the call straight into lingering for the next one (an idle rayon worker
        // first yields its core, which on a busy machine loses it for a time slice).
        if !pool.joined {
            linger_on(pool, threads - 1);
        }
        setup();
        run(0);
        // Wait for the workers here, rather than sleep in the scope and be woken: the wake-up
        // waits for a time slice on a loaded machine, and the scheduler may queue the woken
        // caller behind a worker lingering on the same core. A worker on its last piece ends
        // within a piece's time; one not started yet has nothing left to do but must still run
        // its job before the scope can end (`wait_until` yields the core to it if it is queued
        // behind this thread).
        let spawned = threads - 1;
        wait_until(|| finished.0.load(Ordering::Acquire) == spawned);
    });
    if failed.load(Ordering::Acquire) {
        if let Some(e) = failure.into_inner().unwrap_or_else(PoisonError::into_inner) {
            return Err(e);
        }
    }
    Ok(())
}

/// Sets its cell to an empty `Vec` when dropped, unless it is set already.
struct SetOnDrop<'a, T>(&'a OnceLock<Vec<T>>);

impl<T> Drop for SetOnDrop<'_, T> {
    fn drop(&mut self) {
        let _ = self.0.set(Vec::new());
    }
}

/// Adds one to its counter when dropped (also when a panic unwinds through its scope).
struct CountOnDrop<'a>(&'a AtomicUsize);

impl Drop for CountOnDrop<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }
}

/// A worker pool and the count of its [`linger`] jobs queued or running.
struct Pool {
    threads: ThreadPool,
    lingering: Arc<AtomicUsize>,
    /// The threads the pool started.
    workers: usize,
    /// Whether the thread that built the pool is its thread 0 besides them ([`join_pool`]).
    joined: bool,
}

impl std::ops::Deref for Pool {
    type Target = ThreadPool;
    fn deref(&self) -> &ThreadPool {
        &self.threads
    }
}

/// Queues [`linger`] jobs on `pool` until `workers` of them are queued or running. Not from a
/// worker of the pool (its jobs would go to its own queue, behind the lingering), except from the
/// thread that joined it ([`join_pool`]), which never runs the main loop: a worker takes the job
/// from its queue.
fn linger_on(pool: &Pool, workers: usize) {
    match pool.current_thread_index() {
        Some(0) if pool.joined => {}
        Some(_) => return,
        None => {}
    }
    let count = &pool.lingering;
    let mut lingering = count.load(Ordering::Acquire);
    while lingering < workers {
        match count.compare_exchange_weak(
            lingering,
            lingering + 1,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => {
                let count = Arc::clone(count);
                let joined = pool.joined;
                pool.spawn(move || linger(&count, joined));
                lingering += 1;
            }
            Err(now) => lingering = now,
        }
    }
}

/// A worker's job between calls: runs the jobs queued on its pool as they come (the next call's
/// part reaches it in the time of a queue check, with no wake-up), and ends when it has found
/// none for [`LINGER`]. It spins for the first [`SPIN`] without a job, then yields its core
/// between checks, so that a thread queued behind it on the same core runs. `lingering` counts it.
fn linger(lingering: &AtomicUsize, joined: bool) {
    // The calling thread that joined the pool finds a lingering job in its queue only while it
    // waits at the end of a call: it must not linger itself.
    if joined && rayon_core::current_thread_index() == Some(0) {
        lingering.fetch_sub(1, Ordering::AcqRel);
        return;
    }
    let mut idle = Instant::now();
    let mut checks = 0u32;
    loop {
        if rayon_core::yield_now() == Some(rayon_core::Yield::Executed) {
            idle = Instant::now();
            checks = 0;
            continue;
        }
        checks = checks.wrapping_add(1);
        if checks.is_multiple_of(16) {
            let waited = idle.elapsed();
            if waited >= LINGER {
                break;
            }
            if waited >= SPIN {
                std::thread::yield_now();
            }
        }
        std::hint::spin_loop();
    }
    lingering.fetch_sub(1, Ordering::AcqRel);
}

/// Returns when `done()` holds, spinning for the first [`SPIN`], then yielding the core between
/// checks: a thread of this module that waits for another must not keep it from running when the
/// scheduler has put both on one core (as it does when the other cores are busy).
fn wait_until(done: impl Fn() -> bool) {
    let start = Instant::now();
    let mut spins = 0u32;
    while !done() {
        // One pause per check (a pause is up to about 65 cycles on AMD cores: a longer run of
        // them made every hand-off a microsecond late), the clock read every 64 checks.
        std::hint::spin_loop();
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(64) && start.elapsed() >= SPIN {
            std::thread::yield_now();
        }
    }
}

/// The pool kept for the process's calls from threads outside any pool (see [`pool`]).
static POOL: Mutex<Option<Arc<Pool>>> = Mutex::new(None);

thread_local! {
    /// The pool this thread is thread 0 of ([`join_pool`]), kept for the thread's life: no other
    /// thread's call replaces it.
    static JOINED: std::cell::OnceCell<Arc<Pool>> = const { std::cell::OnceCell::new() };
}

/// The worker pool, with at least `workers` threads: the one this thread joined if it has enough
/// workers, else the one kept for the process, or a larger one that replaces it (calls still
/// running keep the old one alive until they end). `None` if the threads cannot be started.
fn pool(workers: usize) -> Option<Arc<Pool>> {
    let joined = JOINED.with(|joined| joined.get().filter(|p| p.workers >= workers).cloned());
    if joined.is_some() {
        return joined;
    }
    let mut kept = POOL.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(pool) = kept.as_ref().filter(|p| p.workers >= workers) {
        return Some(Arc::clone(pool));
    }
    let threads = pool_builder(workers).build().ok()?;
    let pool = Pool {
        threads,
        lingering: Arc::new(AtomicUsize::new(0)),
        workers,
        joined: false,
    };
    Some(Arc::clone(kept.insert(Arc::new(pool))))
}

/// A builder of a pool of `threads` threads named for this module.
fn pool_builder(threads: usize) -> ThreadPoolBuilder {
    ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("miniquant-matvec-{i}"))
}

/// Makes the calling thread thread 0 of a worker pool of its own, beside `threads - 1` workers:
/// the multi-threaded calls it makes afterwards (with at most `threads` threads) hand their work
/// over and wait for it as a pool thread does (the jobs pushed on its own queue, its wait a check
/// of a flag), not as an outside thread (the jobs through the pool's shared queue, the end of the
/// call signalled through a lock and a system call): an empty two-thread call costs about half as
/// much (BENCHMARKS.md, "The caller as the pool's thread 0").
///
/// For the thread that makes a program's products, once, before them (the `miniquant` commands do).
/// It stays in the pool for the rest of its life: rayon work started on it afterwards
/// (`rayon::join`, parallel iterators) runs on this pool's threads rather than rayon's global
/// pool, so a program that uses rayon itself on that thread should not call this. Its workers end
/// when it does. Calls from other threads, and its own calls with more threads, use the pool
/// kept for the process as before.
///
/// Returns whether the thread is thread 0 of a pool with at least `threads - 1` workers: `false`,
/// and nothing changed, when `threads` is below 2, when the thread already belongs to a rayon pool
/// (another one, or an earlier joined pool of fewer workers), or when the threads cannot be
/// started.
pub fn join_pool(threads: usize) -> bool {
    let Some(workers) = threads.checked_sub(1).filter(|&w| w > 0) else {
        return false;
    };
    JOINED.with(|joined| match joined.get() {
        Some(pool) => pool.workers >= workers,
        None => joined_pool(workers).is_some_and(|pool| joined.set(Arc::new(pool)).is_ok()),
    })
}

/// A new pool of `workers` threads and this one as its thread 0; `None` if this thread belongs to
/// a pool already or the threads cannot be started.
fn joined_pool(workers: usize) -> Option<Pool> {
    let threads = pool_builder(workers + 1)
        .use_current_thread()
        .build()
        .ok()?;
    Some(Pool {
        threads,
        lingering: Arc::new(AtomicUsize::new(0)),
        workers,
        joined: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use miniquant::quant::matvec::matvec_scratch_bytes;
    use miniquant::quant::{self, level};
    use std::cell::Cell;

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
                for threads in [1, 2, 3, 4, 7, 64, usize::MAX] {
                    // Other activations every call, so that what one call leaves in the kept
                    // buffers cannot pass for the next call's.
                    let x = values(cols, 7 + threads.min(100) as u32);
                    let mut scratch = vec![0u8; matvec_scratch_bytes(t, cols).unwrap()];
                    let mut want = vec![0f32; rows];
                    quant::matvec::matvec_at(lvl, t, &w, rows, cols, &x, &mut scratch, &mut want)
                        .unwrap();
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

    /// A packed matrix split across threads by groups of 16 rows gives every row the bits of
    /// the plain one-call matvec (rows not a multiple of 16, so the plain tail is in a share).
    #[test]
    fn packed_rows_on_every_thread_count_give_the_plain_bits() {
        let (rows, cols) = (16 * 19 + 5, 2048);
        let x = values(cols, 11);
        for t in [GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0] {
            let w = matrix(t, rows, cols);
            let mut packed_w = vec![0u8; w.len()];
            quant::packed::pack(t, &w, rows, cols, &mut packed_w).unwrap();
            for lvl in level::available() {
                let mut scratch = vec![0u8; matvec_scratch_bytes(t, cols).unwrap()];
                let mut want = vec![0f32; rows];
                quant::matvec::matvec_at(lvl, t, &w, rows, cols, &x, &mut scratch, &mut want)
                    .unwrap();
                for threads in [1, 2, 3, 4, 7, 64] {
                    let mut y = vec![f32::NAN; rows];
                    matmul_packed(lvl, t, &packed_w, rows, cols, 1, &x, threads, &mut y).unwrap();
                    assert!(
                        y.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()),
                        "packed {t} at {lvl:?} on {threads} threads differs from plain"
                    );
                }
            }
        }
    }

    /// The same for several columns: every column of the packed matmul on any thread count has
    /// the plain matmul's bits.
    #[test]
    fn packed_matmul_on_every_thread_count_gives_the_plain_bits() {
        // Up to ALONE_VALUES activations every thread quantizes them itself; past it (4096 × 17)
        // they are quantized in shared parts, each with its blocks' starts.
        // `amx` among the levels where the CPU has it (its packed matmul: tiles from 16 columns).
        crate::amx::request();
        let rows = 16 * 11 + 7;
        for (cols, columns) in [(1024, &[2, 3, 8, 40][..]), (4096, &[17][..])] {
            for t in [GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0] {
                let w = matrix(t, rows, cols);
                let mut packed_w = vec![0u8; w.len()];
                quant::packed::pack(t, &w, rows, cols, &mut packed_w).unwrap();
                for &n in columns {
                    for lvl in level::available() {
                        for threads in [1, 2, 3, 7] {
                            // Other activations every call: what a call leaves in the kept
                            // buffers must not pass for the next call's.
                            let x = values(cols * n, 5 + threads as u32 + 10 * n as u32);
                            let mut want = vec![0f32; rows * n];
                            matmul(lvl, t, &w, rows, cols, n, &x, 1, &mut want).unwrap();
                            let mut y = vec![f32::NAN; rows * n];
                            matmul_packed(lvl, t, &packed_w, rows, cols, n, &x, threads, &mut y)
                                .unwrap();
                            assert!(
                                y.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()),
                                "packed {t} {cols} n {n} at {lvl:?} on {threads} threads differs"
                            );
                        }
                    }
                }
            }
        }
        const { assert!(4096 * 17 > ALONE_VALUES) };
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
        // 301 rows: neither the tiles, the groups of eight rows nor the pieces divide them. Up to
        // 32 columns are quantized by every thread for itself (at most ALONE_VALUES); 33 in parts
        // (up to 8 parts per thread, some parts across the end of a column).
        const { assert!(32 * 2048 <= ALONE_VALUES && 33 * 2048 > ALONE_VALUES) };
        let (rows, cols) = (301, 2048);
        for t in [
            GgmlType::Q8_0,
            GgmlType::Q4_0,
            GgmlType::Q4_K,
            GgmlType::Q5_0,
            GgmlType::Q6_K,
            GgmlType::Q3_K,
            GgmlType::IQ4_XS,
        ] {
            let w = matrix(t, rows, cols);
            for n in [1, 2, 3, 8, 17, 33] {
                let x = values(n * cols, n as u32);
                // Other activations of the same shape after each call: the scratch is reused
                // without being cleared, so a byte a call reads but does not quantize would be the
                // last call's.
                let other = values(n * cols, 1000 + n as u32);
                assert!(
                    x.len() >= 2 * PARALLEL_QUANTIZE_VALUES,
                    "the activations are quantized in several parts"
                );
                for lvl in level::available() {
                    let want = matvec_per_column(lvl, t, &w, rows, cols, &x);
                    let want_other = matvec_per_column(lvl, t, &w, rows, cols, &other);
                    for threads in [1, 2, 3, 4, 64] {
                        for (x, want) in [(&x, &want), (&other, &want_other)] {
                            let mut y = vec![f32::NAN; n * rows];
                            matmul(lvl, t, &w, rows, cols, n, x, threads, &mut y).unwrap();
                            let got: Vec<u32> = y.iter().map(|v| v.to_bits()).collect();
                            assert!(
                                got == *want,
                                "{t} at {lvl:?}, {n} columns on {threads} threads differs from \
                                 matvec"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn matmul_on_row_shares_gives_matvec_per_column() {
        // Enough rows for a row piece per thread and more (so the columns stay whole) and too
        // few columns for column shares: each thread claims runs of its own rows (801: the last
        // piece is short), one piece a kernel call for some types here, several for others,
        // through its buffer into `y`; the activations
        // quantized by each thread alone (2 and 8 columns) or in shared parts (40).
        let cols = 2048;
        let mut calls_seen = [false; 2];
        for (t, rows) in [
            (GgmlType::Q8_0, 801),
            (GgmlType::Q4_0, 801),
            (GgmlType::Q4_K, 801),
            (GgmlType::Q6_K, 801),
        ] {
            let w = matrix(t, rows, cols);
            let row_bytes = w.len() / rows;
            for n in [2, 8, 40] {
                let x = values(n * cols, 77 + n as u32);
                assert_eq!(n * cols > ALONE_VALUES, n == 40);
                for lvl in level::available() {
                    // A matmul kernel's tiles are longer than the rows kernel's (the scalar
                    // level's), so each level makes its own pieces.
                    let tile = tile_rows(lvl, t, row_bytes, n, Layout::Plain);
                    for threads in [2, 3] {
                        assert!(!column_shares_pay(threads, n));
                        let (row_pieces, piece_columns, _) =
                            pieces(threads, rows, row_bytes, tile, n, PIECE_ROW_MULTIPLE);
                        assert_eq!(piece_columns, n, "{t}: whole columns");
                        let several = call_pieces(rows, tile, row_pieces, n) > 1;
                        calls_seen[usize::from(several)] = true;
                    }
                    let want = matvec_per_column(lvl, t, &w, rows, cols, &x);
                    for threads in [2, 3] {
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
        assert_eq!(calls_seen, [true, true], "one piece a call, and several");
    }

    #[test]
    fn rows_a_busy_worker_leaves_to_the_caller_keep_their_bits() {
        // Every worker of the pool busy for a while: the caller takes the worker's share too, in
        // halves from its back (the thief's path: through its own buffer into the owner's rows).
        let cols = 2048;
        let lvl = level::current();
        // 301 rows: one column, three (cut into column pieces), 256 (a run of columns: the
        // caller takes the worker's run); 801 rows and 8 or 128 columns: row shares of whole
        // columns, the caller's claims of the worker's share longer than a run.
        for (rows, ns) in [(301, &[1, 3, 256][..]), (801, &[8, 128][..])] {
            for t in [GgmlType::Q8_0, GgmlType::Q4_K] {
                let w = matrix(t, rows, cols);
                for &n in ns {
                    let x = values(n * cols, 9);
                    assert_eq!(column_shares_pay(2, n), n == 256);
                    let want = matvec_per_column(lvl, t, &w, rows, cols, &x);
                    let workers = pool(1).expect("pool of 1");
                    for _ in 0..workers.workers {
                        workers.spawn(|| std::thread::sleep(Duration::from_millis(20)));
                    }
                    let mut y = vec![f32::NAN; n * rows];
                    matmul(lvl, t, &w, rows, cols, n, &x, 2, &mut y).unwrap();
                    let got: Vec<u32> = y.iter().map(|v| v.to_bits()).collect();
                    assert!(got == want, "{t}, {rows} rows, {n} columns, worker busy");
                }
            }
        }
    }

    #[test]
    fn matmul_on_column_shares_gives_matvec_per_column() {
        // Enough columns that each thread takes a run of whole columns: runs of unequal length
        // (257 columns on two threads, 400 on three), after a three-column call of the same
        // matrix (checked too) whose activations may be left in a thread's own buffer.
        let (rows, cols) = (301, 256);
        for t in [
            GgmlType::Q8_0,
            GgmlType::Q4_0,
            GgmlType::Q4_K,
            GgmlType::Q6_K,
        ] {
            let w = matrix(t, rows, cols);
            for (n, threads) in [(256, 2), (257, 2), (400, 3), (512, 2)] {
                assert!(
                    column_shares_pay(threads, n),
                    "{n} columns, {threads} threads"
                );
                let x = values(n * cols, n as u32);
                for lvl in level::available() {
                    let want = matvec_per_column(lvl, t, &w, rows, cols, &x);
                    let mut y = vec![f32::NAN; 3 * rows];
                    matmul(lvl, t, &w, rows, cols, 3, &x[..3 * cols], threads, &mut y).unwrap();
                    let got: Vec<u32> = y.iter().map(|v| v.to_bits()).collect();
                    assert!(got == want[..3 * rows], "{t} at {lvl:?}, 3 columns");
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

    #[test]
    fn columns_are_dealt_out_when_each_thread_has_enough() {
        assert!(!column_shares_pay(2, 255));
        assert!(column_shares_pay(2, 256));
        assert!(!column_shares_pay(3, 383));
        assert!(column_shares_pay(3, 384));
        assert!(column_shares_pay(4, 512));
        // One column never: the row pieces serve it.
        assert!(!column_shares_pay(1, 1));
        assert!(!column_shares_pay(2, 1));
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
        // Pieces within the rows kernel's tiles (a type without a matmul kernel).
        let plain = |threads, rows, row_bytes, n| {
            let tile = typed::matmul_tile_rows(row_bytes);
            pieces(threads, rows, row_bytes, tile, n, PIECE_ROW_MULTIPLE)
        };
        // Enough row pieces: whole columns, rows in groups of 32 (tiles of 64 rows here, 60 rounded
        // to whole 32-row strip pairs, so two groups a piece), as many pieces as wanted or more,
        // an even count for two threads.
        let tile = typed::matmul_tile_rows(2176);
        assert_eq!(tile, 64);
        assert_eq!(plain(2, 2048, 2176, 512), (32, 512, 32));
        // Few rows: the columns are cut so that two threads get 16 pieces.
        assert_eq!(plain(2, 3, 2176, 512), (1, 32, 32));
        // Rows of a megabyte: tiles of 32 rows (the fewest), so groups of 32 rows, two row pieces
        // and the columns cut into eight.
        assert_eq!(plain(2, 64, 1 << 20, 8), (2, 1, 32));
        // One column: pieces of about CHUNK_BYTES in groups of 8 rows, whatever the matrix.
        assert_eq!(plain(2, 64, 2176, 1), (8, 1, 8));
        assert_eq!(plain(2, 2048, 2176, 1), (256, 1, 8));
        assert_eq!(plain(2, 2048, 1152, 1), (128, 1, 8));
        assert_eq!(plain(2, 5, 1152, 1), (1, 1, 8));
        // Q4_0 (1152 bytes a row of 2048, tiles of 128 rows): pieces of a tile each, never a
        // partial 32-row strip pair (groups of 8 gave pieces of 96 and 104 rows).
        assert_eq!(plain(2, 2048, 1152, 8), (16, 8, 32));
        // IQ4_XS (1088 bytes, tiles of 128 rows) and Q6_K (1680, tiles of 64): the shares of two
        // threads are exactly half of 2048 rows (fixed 120-row pieces gave 1080 and 968).
        assert_eq!(plain(2, 2048, 1088, 32), (16, 32, 32));
        assert_eq!(row_bound(2048, 16, 32, 8), 1024);
        assert_eq!(plain(2, 2048, 1680, 8), (32, 8, 32));
        assert_eq!(row_bound(2048, 32, 32, 16), 1024);
        // A matmul kernel's tiles (Q8_0's rows of 2048 here): from 32 columns 128 rows on x86_64,
        // so pieces of 128 rows; below, the rows kernel's 64.
        let kernel_tile = typed::matmul_kernel_tile_rows(2176, 32);
        assert_eq!(
            kernel_tile,
            if cfg!(target_arch = "x86_64") {
                128
            } else {
                64
            }
        );
        assert_eq!(typed::matmul_kernel_tile_rows(2176, 31), 64);
        let kernel_pieces = pieces(2, 2048, 2176, kernel_tile, 32, PIECE_ROW_MULTIPLE);
        let expected_pieces = if cfg!(target_arch = "x86_64") { 16 } else { 32 };
        assert_eq!(kernel_pieces, (expected_pieces, 32, 32));
        for threads in 1..=5 {
            for rows in [1, 3, 8, 17, 40, 301, 2048, 2051] {
                let tiles = |row_bytes| {
                    [
                        typed::matmul_tile_rows(row_bytes),
                        typed::matmul_kernel_tile_rows(row_bytes, 32),
                    ]
                };
                for (row_bytes, tile) in [34, 1088, 1680, 2176, 1 << 20]
                    .into_iter()
                    .flat_map(|b| tiles(b).map(|tile| (b, tile)))
                {
                    for n in [1, 2, 8, 33, 512] {
                        let (count, columns, multiple) =
                            pieces(threads, rows, row_bytes, tile, n, PIECE_ROW_MULTIPLE);
                        assert!(count >= 1 && (1..=n).contains(&columns));
                        let starts: Vec<usize> = (0..=count)
                            .map(|i| row_bound(rows, count, multiple, i))
                            .collect();
                        assert_eq!((starts[0], starts[count]), (0, rows));
                        let most = if n == 1 {
                            CHUNK_BYTES.div_ceil(row_bytes) + multiple
                        } else {
                            tile
                        };
                        for (i, piece) in starts.windows(2).enumerate() {
                            let len = piece[1] - piece[0];
                            assert!(len > 0 && len <= most.max(multiple));
                            assert!(len % multiple == 0 || i == count - 1);
                        }
                        if count % threads == 0 {
                            // The shares' rows differ by at most one group of rows.
                            let share = |i: usize| starts[count / threads * i];
                            let lens: Vec<usize> =
                                (0..threads).map(|i| share(i + 1) - share(i)).collect();
                            let (least, most) = (lens.iter().min(), lens.iter().max());
                            assert!(most.unwrap() - least.unwrap() <= multiple);
                        }
                    }
                }
            }
        }
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
    fn shares_give_each_piece_once_own_rows_first() {
        // Shares of 10 pieces on 3 threads: 0..3, 3..6, 6..10. A thread's first claim is all of
        // its share; then it steals half of what is left of another's, from the back.
        let mut locks = Vec::new();
        let shares = Shares::new(&mut locks, 10, 3, OwnClaim::Whole);
        assert_eq!(
            shares.next(2),
            Some((2, 6..10)),
            "a thread's own share, whole"
        );
        assert_eq!(
            shares.next(2),
            Some((0, 1..3)),
            "then the back half of share 0"
        );
        assert_eq!(shares.next(2), Some((0, 0..1)));
        assert_eq!(shares.next(2), Some((1, 4..6)), "then of share 1");
        assert_eq!(
            shares.next(1),
            Some((1, 3..4)),
            "its owner takes what is left"
        );
        assert_eq!(
            (shares.next(0), shares.next(1), shares.next(2)),
            (None, None, None)
        );
        // A thread that finds another's share untouched takes halves of it, the owner the rest
        // when it starts; every piece once.
        let mut locks = Vec::new();
        let shares = Shares::new(&mut locks, 256, 2, OwnClaim::Whole);
        let mut claims = Vec::new();
        for _ in 0..3 {
            claims.extend(shares.next(0));
        }
        claims.extend(shares.next(1));
        assert_eq!(
            claims,
            [(0, 0..128), (1, 192..256), (1, 160..192), (1, 128..160)]
        );
        assert_eq!((shares.next(0), shares.next(1)), (None, None));
        // Uneven counts: the shares' bounds differ by at most one piece, without overflow.
        assert_eq!(
            (0..=4).map(|i| Shares::bound(10, 4, i)).collect::<Vec<_>>(),
            [0, 2, 5, 7, 10]
        );
        assert_eq!(Shares::bound(usize::MAX, 2, 2), usize::MAX);
        // After a failure nothing is left for anyone.
        let mut locks = Vec::new();
        let shares = Shares::new(&mut locks, 7, 2, OwnClaim::Whole);
        shares.drain();
        assert_eq!((shares.next(0), shares.next(1)), (None, None));
    }

    #[test]
    fn shares_in_runs_give_each_piece_once() {
        // Shares of 10 pieces on 2 threads, 0..5 and 5..10, claimed by their owners in runs of 3;
        // a thief takes half of what is left of another's share (rounded up).
        let mut locks = Vec::new();
        let shares = Shares::new(&mut locks, 10, 2, OwnClaim::Runs(3));
        assert_eq!(shares.next(0), Some((0, 0..3)), "a run of its own share");
        assert_eq!(
            shares.next(0),
            Some((0, 3..5)),
            "the rest, shorter than a run"
        );
        assert_eq!(
            shares.next(0),
            Some((1, 7..10)),
            "then the back half of share 1"
        );
        assert_eq!(shares.next(1), Some((1, 5..7)), "its owner, from the front");
        assert_eq!((shares.next(0), shares.next(1)), (None, None));
        // A run of 0 claims one piece at a time rather than none for ever.
        let mut locks = Vec::new();
        let shares = Shares::new(&mut locks, 3, 1, OwnClaim::Runs(0));
        let claims: Vec<_> = (0..4).map(|_| shares.next(0)).collect();
        assert_eq!(
            claims,
            [Some((0, 0..1)), Some((0, 1..2)), Some((0, 2..3)), None]
        );
    }

    #[test]
    fn shares_of_unequal_pieces_halve_down_to_one() {
        // Shares of 10 pieces on 3 threads: 0..3, 3..6, 6..10; claims of half of what is left,
        // at most 1 piece (10 / 24).
        let mut locks = Vec::new();
        let shares = Shares::new(&mut locks, 10, 3, OwnClaim::Halves);
        assert_eq!(shares.next(1), Some((1, 3..4)));
        let own: Vec<_> = (0..4).filter_map(|_| shares.next(2)).collect();
        assert_eq!(own, [(2, 6..7), (2, 7..8), (2, 8..9), (2, 9..10)]);
        assert_eq!(shares.next(2), Some((0, 2..3)));
        assert_eq!(shares.next(0), Some((0, 0..1)));
        assert_eq!(shares.next(2), Some((0, 1..2)));
        assert_eq!(shares.next(2), Some((1, 5..6)));
        assert_eq!(shares.next(0), Some((1, 4..5)));
        assert_eq!(
            (shares.next(0), shares.next(1), shares.next(2)),
            (None, None, None)
        );
        // Larger shares: at most an eighth of a share, then halving; every piece once.
        let mut locks = Vec::new();
        let shares = Shares::new(&mut locks, 256, 2, OwnClaim::Halves);
        let mut claims = Vec::new();
        while let Some((_, claim)) = shares.next(0) {
            claims.push(claim);
        }
        assert_eq!(claims[..5], [0..16, 16..32, 32..48, 48..64, 64..80]);
        assert_eq!(
            claims[7..12],
            [112..120, 120..124, 124..126, 126..127, 127..128]
        );
        assert_eq!(claims[12], 240..256, "then the back of share 1");
        let mut covered: Vec<usize> = claims.into_iter().flatten().collect();
        covered.sort_unstable();
        assert_eq!(covered, (0..256).collect::<Vec<_>>());
    }

    #[test]
    fn a_panicking_piece_ends_the_call_instead_of_hanging_it() {
        let (sent, received) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let pool = pool(1).expect("pool of 1");
            for panicking in [1, 3] {
                // Pieces 0 and 1 are the caller's share, 2 and 3 the worker's: the caller's slow
                // first piece leaves the worker time to start and take its own.
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    share(
                        &pool,
                        2,
                        OwnClaim::Halves,
                        1,
                        |_| Ok(()),
                        || {},
                        4,
                        |_, next| {
                            while let Some((_, claim)) = next() {
                                for piece in claim {
                                    if piece == 0 {
                                        std::thread::sleep(Duration::from_millis(200));
                                    }
                                    assert_ne!(piece, panicking, "piece {piece} fails");
                                }
                            }
                            Ok(())
                        },
                    )
                }));
                sent.send(outcome.is_err()).unwrap();
            }
        });
        for _ in 0..2 {
            let panicked = received
                .recv_timeout(Duration::from_secs(20))
                .expect("the call returned");
            assert!(panicked, "the piece's panic reaches the caller");
        }
    }

    #[test]
    fn matmul_from_the_pools_thread_0_gives_matvec_per_column() {
        std::thread::spawn(|| {
            assert!(join_pool(2), "a new thread joins");
            assert_eq!(rayon_core::current_thread_index(), Some(0));
            assert!(join_pool(2), "joined already, with enough workers");
            let cols = 2048;
            let lvl = level::current();
            // One column (whole shares), several (row shares in runs, column pieces), 128 (column
            // shares); two threads (its own pool), and three (the process's pool, as an outsider).
            for (rows, ns) in [(801, &[1, 8, 128][..]), (37, &[1, 3][..])] {
                for t in [GgmlType::Q8_0, GgmlType::Q4_K] {
                    let w = matrix(t, rows, cols);
                    for &n in ns {
                        let x = values(n * cols, 5);
                        let want = matvec_per_column(lvl, t, &w, rows, cols, &x);
                        for threads in [2, 3] {
                            for _ in 0..3 {
                                let mut y = vec![f32::NAN; n * rows];
                                matmul(lvl, t, &w, rows, cols, n, &x, threads, &mut y).unwrap();
                                let got: Vec<u32> = y.iter().map(|v| v.to_bits()).collect();
                                assert!(got == want, "{t}, {rows} rows, {n} columns, {threads}");
                            }
                        }
                    }
                }
            }
            assert!(join_pool(2), "still its pool's thread 0");
            assert!(!join_pool(3), "a thread joins one pool only");
        })
        .join()
        .unwrap();
    }

    /// One column on two threads from the joined thread goes through [`halves`]: every row, plain
    /// and packed, at every level, call after call (the worker lingering, taking the second half
    /// or leaving it to the caller), has the bits of the one-thread matvec; rows not a multiple
    /// of the shares' groups.
    #[test]
    fn one_column_on_two_threads_by_join_keeps_the_bits() {
        std::thread::spawn(|| {
            assert!(join_pool(2));
            let cols = 2048;
            let x = values(cols, 17);
            for rows in [16 * 19 + 5, 16 * 40 + 13] {
                for t in [
                    GgmlType::Q4_0,
                    GgmlType::Q4_1,
                    GgmlType::Q8_0,
                    GgmlType::Q6_K,
                ] {
                    let w = matrix(t, rows, cols);
                    assert!(w.len() / MIN_BYTES_PER_THREAD >= 2, "two threads' worth");
                    assert!(w.len() <= HALVES_BYTES, "cut in halves");
                    let mut packed_w = vec![0u8; w.len()];
                    let packs = quant::packed::pack(t, &w, rows, cols, &mut packed_w).is_ok();
                    for lvl in level::available() {
                        let want = matvec_per_column(lvl, t, &w, rows, cols, &x);
                        let taken = HALVES_TAKEN.with(Cell::get);
                        let calls = 20;
                        for call in 0..calls {
                            let mut y = vec![f32::NAN; rows];
                            if packs && call % 2 == 1 {
                                matmul_packed(lvl, t, &packed_w, rows, cols, 1, &x, 2, &mut y)
                            } else {
                                matvec(lvl, t, &w, rows, cols, &x, 2, &mut y)
                            }
                            .unwrap();
                            let got: Vec<u32> = y.iter().map(|v| v.to_bits()).collect();
                            assert!(got == want, "{t}, {rows} rows at {lvl:?}, call {call}");
                        }
                        let by_halves = HALVES_TAKEN.with(Cell::get) - taken;
                        assert_eq!(by_halves, calls, "{t}, {rows} rows at {lvl:?}");
                    }
                }
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn join_pool_refuses_a_thread_of_another_pool() {
        let other = ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        assert!(!other.install(|| join_pool(2)));
        std::thread::spawn(|| assert!(!join_pool(1), "one thread has no workers"))
            .join()
            .unwrap();
    }

    #[test]
    fn a_lingering_job_on_the_joined_thread_returns_at_once() {
        // The joined thread runs queued jobs only while it waits at the end of a call; a lingering
        // job it finds there must not keep it (it would spin for LINGER before returning). A pool
        // of the joined thread alone: a job queued on it runs only if the lingering loops.
        std::thread::spawn(|| {
            let alone = ThreadPoolBuilder::new()
                .num_threads(1)
                .use_current_thread()
                .build()
                .unwrap();
            let ran = Arc::new(AtomicBool::new(false));
            let flag = Arc::clone(&ran);
            alone.spawn(move || flag.store(true, Ordering::Release));
            let lingering = AtomicUsize::new(1);
            linger(&lingering, true);
            assert_eq!(lingering.load(Ordering::Acquire), 0, "counted out");
            assert!(
                !ran.load(Ordering::Acquire),
                "it lingered on the joined thread"
            );
            // A worker's lingering (not the joined thread's) does run it.
            lingering.store(1, Ordering::Release);
            linger(&lingering, false);
            assert!(ran.load(Ordering::Acquire));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn lingering_jobs_stay_one_per_worker_and_end() {
        let threads = ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let pool = Pool {
            threads,
            lingering: Arc::new(AtomicUsize::new(0)),
            workers: 2,
            joined: false,
        };
        for _ in 0..20 {
            share(
                &pool,
                3,
                OwnClaim::Halves,
                0,
                |_| Ok(()),
                || {},
                6,
                |_, next| {
                    while next().is_some() {}
                    Ok(())
                },
            )
            .unwrap();
            let queued = pool.lingering.load(Ordering::Acquire);
            assert!(queued <= 2, "{queued} lingering jobs for 2 workers");
        }
        // Each ends once it has found no job for LINGER: the workers give their cores back.
        let deadline = Instant::now() + Duration::from_secs(20);
        while pool.lingering.load(Ordering::Acquire) > 0 {
            assert!(Instant::now() < deadline, "the lingering jobs never ended");
            std::thread::sleep(Duration::from_millis(1));
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
