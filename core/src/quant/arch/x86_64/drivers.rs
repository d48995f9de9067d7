//! Level-independent loops the type modules fill in with their block arithmetic:
//! - [`legacy_rows`], the legacy types' (and Q2_K's) multi-row matvec: eight rows in the eight
//!   lanes of one vector. For block `k` the eight rows' integer sums are transposed into one
//!   vector (lane `r` = row `r`), the per-block float term is formed lane by lane, and added to an
//!   accumulator whose lane `r` is row `r`'s serial `sumf`: the serial chain of one add per block
//!   is shared by eight rows, and the activation block is loaded (and widened) once.
//! - [`prepared_rows`], the K-quants' multi-row matvec: one row at a time over an activation
//!   prepared once (its lane shuffles, and its bias products where the type has them).
//!
//! Rows left over (fewer than a group, or too long to prepare) run the single-row vec_dot.
//! Why these layouts and not others: docs/kernel-experiments.md.

use core::arch::x86_64::*;
use core::mem::MaybeUninit;

use super::vector::{prefetch_range_l2, transpose_sums};
use crate::quant::activation::BlockQ8K;

/// Rows per group of the legacy kernels (one per f32 lane).
pub(super) const LANES: usize = 8;

/// Activation blocks whose [`Summary`] a legacy rows call holds at once: rows of up to 32,768
/// values take one pass over the groups, longer ones a pass per window of this many blocks.
const SUMMARIZED_BLOCKS: usize = 1024;

/// What the legacy rows kernels take from an activation block besides its quants, the same for
/// every row: its scales as f32 (`d`, and `s` of a Q8_1 block) and `bias · Σ y` for kernels that
/// sum biased quants: made once per call instead of once per group of eight rows (a horizontal
/// sum and scalar f16 conversions per block).
#[derive(Clone, Copy)]
pub(super) struct Summary {
    pub(super) d: f32,
    pub(super) s: f32,
    pub(super) bias_sum: i32,
}

/// How far ahead of the group being summed the legacy rows kernels ask for weights, at least
/// (in whole groups, two or more). Into L2 (`prefetcht1`), not L1: the lines in flight for a
/// matvec at memory speed outnumber L1's miss buffers (distances measured:
/// docs/kernel-experiments.md).
const LEGACY_PREFETCH_BYTES: usize = 8 << 10;

/// The legacy (and Q2_K) rows driver: eight rows of a group side by side, row `r` in f32 lane
/// `r`. Each activation block's [`Summary`] is made once (`summarize`); `sums` gives the eight
/// rows' exact integer sums of their block against it, in row order; `term` forms the eight
/// float terms from those sums (as f32, exact), the blocks, the activation block and the
/// summary; the terms are added to the lanes' `sumf` in block order, so every row keeps its
/// scalar twin's serial sum (across windows too: a window's sums start from the last one's,
/// kept in `out`). Rows past the last whole group run `single`.
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn legacy_rows<W, X>(
    w: &[W],
    row_blocks: usize,
    x: &[X],
    out: &mut [f32],
    summarize: impl Fn(&X) -> Summary,
    sums: impl Fn([&W; LANES], &X, &Summary) -> __m256i,
    term: impl Fn(__m256, [&W; LANES], &X, &Summary) -> __m256,
    single: impl Fn(&[W], &[X]) -> f32,
) {
    let group_blocks = row_blocks.saturating_mul(LANES).max(1);
    let blocks = row_blocks.min(x.len());
    let x = x.get(..blocks).unwrap_or(&[]);
    let whole_groups = w.len() / group_blocks;
    // A group a few ahead is asked for while this one is summed: eight rows side by side are
    // eight short streams (a row of a small matrix is a few cache lines), too short for the
    // hardware prefetcher to follow, so a matrix larger than the cache would otherwise wait on
    // memory at every group. Each block step asks for its share of that group, in address order.
    let group_bytes = group_blocks.saturating_mul(core::mem::size_of::<W>());
    let groups_ahead = LEGACY_PREFETCH_BYTES.div_ceil(group_bytes.max(1)).max(2);
    let step_bytes = LANES * core::mem::size_of::<W>();
    let mut storage = [const { MaybeUninit::<Summary>::uninit() }; SUMMARIZED_BLOCKS];
    // At least one window, so that rows of no blocks still get their zero.
    let mut start = 0;
    while start == 0 || start < blocks {
        let window = x.get(start..blocks).unwrap_or(&[]);
        let window = window.get(..SUMMARIZED_BLOCKS).unwrap_or(window);
        for (slot, xb) in storage.iter_mut().zip(window) {
            slot.write(summarize(xb));
        }
        // SAFETY: the first `window.len()` slots were written just above, and
        // `MaybeUninit<Summary>` has the layout of `Summary`.
        let summaries = unsafe {
            core::slice::from_raw_parts(storage.as_ptr().cast::<Summary>(), window.len())
        };
        let groups = w.chunks_exact(group_blocks).take(whole_groups);
        for (group, out8) in groups.zip(out.chunks_exact_mut(LANES)) {
            let Some(out8) = out8.first_chunk_mut::<LANES>() else {
                continue;
            };
            // Row `r`'s block `start + i` is `window_base[r·row_blocks + i]`, addressed from one
            // base and one stride: eight row slices do not fit the general registers beside the
            // loop's own, and were reloaded from the stack at every block.
            let window_base = group.as_ptr().wrapping_add(start);
            let next_window = group
                .as_ptr()
                .cast::<i8>()
                .wrapping_add(group_bytes.saturating_mul(groups_ahead))
                .wrapping_add(start.saturating_mul(step_bytes));
            let mut sumf = if start == 0 {
                _mm256_setzero_ps()
            } else {
                // SAFETY: `out8` holds eight f32; `loadu` has no alignment requirement.
                unsafe { _mm256_loadu_ps(out8.as_ptr()) }
            };
            for (i, (xb, summary)) in window.iter().zip(summaries).enumerate() {
                // SAFETY: `group` holds `LANES · row_blocks` blocks (`chunks_exact`), `r < LANES`
                // and `start + i < x.len() <= row_blocks`, so the index is in bounds.
                let bs: [&W; LANES] =
                    core::array::from_fn(|r| unsafe { &*window_base.add(r * row_blocks + i) });
                let sumi = _mm256_cvtepi32_ps(sums(bs, xb, summary));
                sumf = _mm256_add_ps(sumf, term(sumi, bs, xb, summary));
                // Last in the step: placed first, LLVM schedules it among the step's loads.
                prefetch_range_l2(next_window.wrapping_add(i * step_bytes), step_bytes);
            }
            // SAFETY: `out8` holds eight f32; `storeu` has no alignment requirement.
            unsafe { _mm256_storeu_ps(out8.as_mut_ptr(), sumf) };
        }
        start += SUMMARIZED_BLOCKS;
    }
    let rest_rows = w.get(whole_groups * group_blocks..).unwrap_or(&[]);
    let rest_out = out.get_mut(whole_groups * LANES..).unwrap_or(&mut []);
    for (o, row) in rest_out
        .iter_mut()
        .zip(rest_rows.chunks_exact(row_blocks.max(1)))
    {
        *o = single(row, x);
    }
}

/// One f16 field of eight blocks as eight halves, each inserted into its word from memory
/// (`vpinsrw`): fewer instructions than packing them in general registers.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn lane_f16<W>(bs: [&W; LANES], field: impl Fn(&W) -> [u8; 2]) -> __m128i {
    let h = bs.map(|b| i32::from(i16::from_le_bytes(field(b))));
    let v = _mm_cvtsi32_si128(h[0]);
    let v = _mm_insert_epi16::<1>(v, h[1]);
    let v = _mm_insert_epi16::<2>(v, h[2]);
    let v = _mm_insert_epi16::<3>(v, h[3]);
    let v = _mm_insert_epi16::<4>(v, h[4]);
    let v = _mm_insert_epi16::<5>(v, h[5]);
    let v = _mm_insert_epi16::<6>(v, h[6]);
    _mm_insert_epi16::<7>(v, h[7])
}

/// The eight blocks' f16 `d` as f32.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn row_scales<W>(bs: [&W; LANES], field: impl Fn(&W) -> [u8; 2]) -> __m256 {
    _mm256_cvtph_ps(lane_f16(bs, field))
}

/// Eight rows' integer sums in row order from eight vectors of partial sums, less an
/// activation-only `correction`.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn transposed_less(partials: &[__m256i; LANES], correction: i32) -> __m256i {
    _mm256_sub_epi32(transpose_sums(partials), _mm256_set1_epi32(correction))
}

/// Activation super-blocks a K-quant rows call prepares (rows of up to 16,384 values; longer
/// rows run one vec_dot per row).
const PREPARED_BLOCKS: usize = 64;

/// The K-quant rows driver: `prepare` turns each activation super-block into what the dot needs
/// from it alone (its lane shuffles; for Q6_K also its bias products) once for all rows, into a
/// stack buffer that is written only as far as the row reaches (no zero fill: a threaded matvec
/// calls this once per chunk of a few rows); then `dot` runs each row over it, with the bits of
/// the single-row kernel. Rows longer than [`PREPARED_BLOCKS`] run `single` per row.
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn prepared_rows<W, P>(
    w: &[W],
    row_blocks: usize,
    x: &[BlockQ8K],
    out: &mut [f32],
    prepare: impl Fn(&BlockQ8K) -> P,
    dot: impl Fn(&[W], &[P]) -> f32,
    single: impl Fn(&[W], &[BlockQ8K]) -> f32,
) {
    let rows = w.chunks_exact(row_blocks.max(1));
    if row_blocks > PREPARED_BLOCKS {
        for (o, row) in out.iter_mut().zip(rows) {
            *o = single(row, x);
        }
        return;
    }
    let mut storage = [const { MaybeUninit::<P>::uninit() }; PREPARED_BLOCKS];
    let mut filled = 0;
    for (slot, xb) in storage.iter_mut().zip(x.iter().take(row_blocks)) {
        slot.write(prepare(xb));
        filled += 1;
    }
    // SAFETY: the first `filled` slots were written just above, and `MaybeUninit<P>` has the
    // layout of `P`.
    let prepared = unsafe { core::slice::from_raw_parts(storage.as_ptr().cast::<P>(), filled) };
    for (o, row) in out.iter_mut().zip(rows) {
        *o = dot(row, prepared);
    }
}
