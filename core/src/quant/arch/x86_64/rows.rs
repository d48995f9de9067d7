//! Multi-row kernels (`Ops::rows`): several weight rows against one activation vector, for
//! matvec. Each row keeps its scalar twin's order of float operations exactly; what changes is
//! which rows run side by side:
//! - legacy types (32-value blocks): eight rows in the eight lanes of one vector. For block `k`
//!   the eight rows' integer sums are transposed into one vector (lane `r` = row `r`), the
//!   per-block float term is formed lane by lane, and added to an accumulator whose lane `r` is
//!   row `r`'s serial `sumf`. The serial chain of one add per block is then shared by eight rows
//!   instead of limiting each one, and the activation block is loaded (and widened) once.
//!   Q2_K runs the same way: its float steps are one scalar term per super-block, like a legacy
//!   block's, so eight rows share one transpose and one set of float steps instead of two
//!   horizontal sums and a scalar chain each.
//! - Q3_K, Q4_K, Q5_K, Q6_K: one row at a time over an activation prepared once (its lane
//!   shuffles, and its bias products where the type has them). Q3_K and Q6_K read quants and
//!   activation in `lane_groups` order at every level (one `madd` per 32 values adds a group's
//!   two sub-block sums to their lanes; `vpdpwssd` at VNNI); Q4_K and Q5_K do at the VNNI level
//!   (one `vpdpbusd` per sub-block, one `vpdpwssd` per scale pair), keeping `pair_lanes` and
//!   `LaneAcc` at AVX2, where `vpdpbusd` is missing. The VNNI entries of all four run a copy
//!   compiled with AVX-512 VBMI (`lane_groups` in one `vpermb`) where the CPU has it. The legacy
//!   types take their integer sums by `vpdpbusd` at VNNI; Q5_0 and Q5_1 there read one block a
//!   vector, so that their fifth bits are an AVX-512 byte mask loaded as stored.
//!
//! Why these layouts and not others (dropped multi-row and 512-bit variants, with figures):
//! docs/kernel-experiments.md.
//!
//! Rows left over (fewer than a group) run the single-row vec_dot kernel.

use core::arch::x86_64::*;
use core::mem::MaybeUninit;

use super::avx2::{
    dot_q6_k, dot_with_mins, q2_k_mins_products, q2_k_scaled_sums, q4_k_parts, q5_k_parts,
    q6_k_activation_group, MinsBlock,
};
use super::primitives::dpbusd;
use super::primitives::mins_layout;
use super::vector::{hsum_i32, load16, load32, opaque, part, prefetch_range_l2, transpose_sums};
use crate::quant::activation::{BlockQ8K, BlockQ8_0, BlockQ8_1};
use crate::quant::cast::f16_le;
use crate::quant::k_quants::{BlockQ2K, BlockQ3K, BlockQ4K, BlockQ5K, BlockQ6K};
use crate::quant::legacy::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1};

/// Rows per group of the legacy kernels (one per f32 lane).
const LANES: usize = 8;

/// Activation blocks whose [`Summary`] a legacy rows call holds at once: rows of up to 32,768
/// values take one pass over the groups, longer ones a pass per window of this many blocks.
const SUMMARIZED_BLOCKS: usize = 1024;

/// What the legacy rows kernels take from an activation block besides its quants, the same for
/// every row: its scales as f32 (`d`, and `s` of a Q8_1 block) and `bias · Σ y` for kernels that
/// sum biased quants. Made once per call instead of once per group of eight rows, it no longer
/// costs ~12 of the Q5_0 step's ~115 vector uops (a horizontal sum, scalar f16 conversions).
#[derive(Clone, Copy)]
struct Summary {
    d: f32,
    s: f32,
    bias_sum: i32,
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
fn legacy_rows<W, X>(
    w: &[W],
    row_blocks: usize,
    x: &[X],
    out: &mut [f32],
    summarize: impl Fn(&X) -> Summary,
    sums: impl Fn([&W; LANES], &X, &Summary) -> __m256i,
    term: impl Fn(__m256, [&W; LANES], &X, &Summary) -> __m256,
    single: fn(&[W], &[X]) -> f32,
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

/// The summary of a Q8_0 activation block: its `d`, and `bias · Σ y` (0 for no bias).
#[inline]
#[target_feature(enable = "avx2")]
fn summary_q8_0(xb: &BlockQ8_0, bias: i8) -> Summary {
    Summary {
        d: f16_le(xb.d),
        s: 0.0,
        bias_sum: bias_sum(&xb.qs, bias),
    }
}

/// The summary of a Q8_1 activation block: its `d` and `s`.
#[inline]
fn summary_q8_1(xb: &BlockQ8_1) -> Summary {
    Summary {
        d: f16_le(xb.d),
        s: f16_le(xb.s),
        bias_sum: 0,
    }
}

/// `bias · Σ y` of an activation block (exact: below 2^7 · 2^5 · 2^7 in magnitude).
#[inline]
#[target_feature(enable = "avx2")]
fn bias_sum(qs: &[i8; 32], bias: i8) -> i32 {
    if bias == 0 {
        return 0;
    }
    let by = _mm256_maddubs_epi16(_mm256_set1_epi8(bias), load32(qs));
    hsum_i32(_mm256_madd_epi16(by, _mm256_set1_epi16(1)))
}

/// The first four bytes of eight blocks (one per lane): the f16 `d` and `m` of Q4_1/Q5_1 blocks.
#[derive(Clone, Copy)]
struct Heads {
    /// The heads of rows 0, 1, 4, 5.
    first: __m128i,
    /// The heads of rows 2, 3, 6, 7.
    second: __m128i,
}

impl Heads {
    /// The heads of eight blocks, in vector registers (four-byte loads and unpacks: packing them
    /// in general registers spills the row pointers). The rows are taken in the order that
    /// [`Heads::halves`]' in-lane shuffles put back in row order.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn of<W>(bs: [&W; LANES]) -> Heads {
        const { assert!(core::mem::size_of::<W>() >= 4) };
        // SAFETY: each block has at least four bytes; `loadu_si32` has no alignment requirement.
        let v = bs.map(|b| unsafe { _mm_loadu_si32((b as *const W).cast()) });
        let quad =
            |a, b, c, d| _mm_unpacklo_epi64(_mm_unpacklo_epi32(a, b), _mm_unpacklo_epi32(c, d));
        Heads {
            first: quad(v[0], v[1], v[4], v[5]),
            second: quad(v[2], v[3], v[6], v[7]),
        }
    }

    /// The eight `d` and the eight `m` as f32 (F16C, exact), in row order.
    #[inline]
    #[target_feature(enable = "avx2,f16c")]
    fn halves(self) -> (__m256, __m256) {
        // [d0 m0 d1 m1 | d4 m4 d5 m5] and [d2 m2 d3 m3 | d6 m6 d7 m7]; one in-lane shuffle each
        // picks [d0 d1 d2 d3 | d4 d5 d6 d7] and the m likewise (before: a byte shuffle and two
        // two-uop `vpermq` on Zen 3).
        let first = _mm256_cvtph_ps(self.first);
        let second = _mm256_cvtph_ps(self.second);
        (
            _mm256_shuffle_ps::<0b10_00_10_00>(first, second),
            _mm256_shuffle_ps::<0b11_01_11_01>(first, second),
        )
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
fn row_scales<W>(bs: [&W; LANES], field: impl Fn(&W) -> [u8; 2]) -> __m256 {
    _mm256_cvtph_ps(lane_f16(bs, field))
}

/// Eight rows' integer sums in row order from eight vectors of partial sums, less an
/// activation-only `correction`.
#[inline]
#[target_feature(enable = "avx2")]
fn transposed_less(partials: &[__m256i; LANES], correction: i32) -> __m256i {
    _mm256_sub_epi32(transpose_sums(partials), _mm256_set1_epi32(correction))
}

/// The sixteen Q8 bytes at `start`, widened to i16.
#[inline]
#[target_feature(enable = "avx2")]
fn widen16(qs: &[i8; 32], start: usize) -> __m256i {
    _mm256_cvtepi8_epi16(load16(part(qs, start)))
}

#[target_feature(enable = "avx2,f16c")]
fn rows_q8_0_avx2_impl(w: &[BlockQ8_0], row_blocks: usize, x: &[BlockQ8_0], out: &mut [f32]) {
    legacy_rows(
        w,
        row_blocks,
        x,
        out,
        |xb| summary_q8_0(xb, 0),
        // The activation widened once per step; every row's products are exact i16 pairs
        // through madd.
        |bs, xb, _| {
            let (x_lo, x_hi) = (widen16(&xb.qs, 0), widen16(&xb.qs, 16));
            let partials = bs.map(|wb| {
                _mm256_add_epi32(
                    _mm256_madd_epi16(widen16(&wb.qs, 0), x_lo),
                    _mm256_madd_epi16(widen16(&wb.qs, 16), x_hi),
                )
            });
            transpose_sums(&partials)
        },
        // `sumi * (dx * dy)`, the scalar order.
        |sumi, bs, _, a| {
            let dx = _mm256_set1_ps(a.d);
            _mm256_mul_ps(sumi, _mm256_mul_ps(row_scales(bs, |b| b.d), dx))
        },
        super::avx2::vec_dot_q8_0,
    )
}

/// Q8_0 rows, AVX2.
pub(super) fn rows_q8_0_avx2(w: &[BlockQ8_0], row_blocks: usize, x: &[BlockQ8_0], out: &mut [f32]) {
    // SAFETY: the table only hands this kernel out for an available AVX2 level (`pick!` checks
    // `Level::is_available`, which requires avx2 and f16c).
    unsafe { rows_q8_0_avx2_impl(w, row_blocks, x, out) }
}

/// An activation block as [`pair_sums`] reads it: its bytes 0..16 in both 128-bit halves, and
/// its bytes 16..32 likewise.
#[derive(Clone, Copy)]
struct SplitActivation {
    low: __m256i,
    high: __m256i,
}

/// Splits an activation block for [`pair_sums`] (two broadcast loads).
#[inline]
#[target_feature(enable = "avx2")]
fn split_activation(qs: &[i8; 32]) -> SplitActivation {
    SplitActivation {
        low: _mm256_broadcastsi128_si256(load16(part(qs, 0))),
        high: _mm256_broadcastsi128_si256(load16(part(qs, 16))),
    }
}

/// The 4-bit quants of two blocks (`a` in the low 128-bit half, `b` in the high one), elements
/// `j` and `j + 16` of each as the low and high nibbles of byte `j` (the Q4_0/Q4_1/Q5 layout):
/// returns (elements 0..16, elements 16..32) of both blocks, as bytes below 16.
#[inline]
#[target_feature(enable = "avx2")]
fn nibble_pair(a: &[u8; 16], b: &[u8; 16]) -> (__m256i, __m256i) {
    let both = _mm256_set_m128i(load16(b), load16(a));
    let mask = _mm256_set1_epi8(0x0f);
    let low = _mm256_and_si256(both, mask);
    let high = _mm256_and_si256(_mm256_srli_epi16::<4>(both), mask);
    (low, high)
}

/// The fifth bits of two Q5 blocks in the layout of [`nibble_pair`]: `0x10` in each byte whose
/// element has its bit set in `qh` (bit `i` for element `i`).
#[inline]
#[target_feature(enable = "avx2")]
fn fifth_bit_pair(qh_a: [u8; 4], qh_b: [u8; 4]) -> (__m256i, __m256i) {
    let bits = _mm256_set_m128i(
        _mm_set1_epi32(i32::from_le_bytes(qh_b)),
        _mm_set1_epi32(i32::from_le_bytes(qh_a)),
    );
    // Byte i of the low vector tests bit i (qh byte i / 8); of the high vector bit 16 + i.
    let spread_low = _mm256_shuffle_epi8(
        bits,
        _mm256_setr_epi8(
            0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1,
            1, 1, 1,
        ),
    );
    let spread_high = _mm256_shuffle_epi8(
        bits,
        _mm256_setr_epi8(
            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3,
            3, 3, 3,
        ),
    );
    let mask = _mm256_set1_epi64x(0x8040_2010_0804_0201_u64 as i64);
    let fifth = _mm256_set1_epi8(0x10);
    let test = |spread| {
        _mm256_and_si256(
            _mm256_cmpeq_epi8(_mm256_and_si256(spread, mask), mask),
            fifth,
        )
    };
    (test(spread_low), test(spread_high))
}

/// Eight blocks' `Σ q·y − bias_sum` (exact), block `l` in lane `l`, for unsigned quants below 32
/// given as [`nibble_pair`]-layout vectors by `quants(a, b)`. Blocks `p` and `p + 4` share a
/// vector (its two halves), so one nibble split serves two rows and each row's products sit in
/// four i32 lanes; three `hadd` levels then leave block `l`'s total in lane `l`.
#[inline]
#[target_feature(enable = "avx2")]
fn pair_sums<const VNNI: bool, W>(
    bs: [&W; LANES],
    y: SplitActivation,
    bias_sum: i32,
    quants: impl Fn(&W, &W) -> (__m256i, __m256i),
) -> __m256i {
    let ones = _mm256_set1_epi16(1);
    let pair = |p: usize| {
        let (low, high) = quants(bs[p], bs[p + 4]);
        if VNNI {
            // Four u8·i8 products per i32 lane, summed without saturation: exact.
            // SAFETY: `VNNI` is true only in the `*_vnni` kernels, which the table hands out
            // only at an available AVX-512 VNNI level.
            unsafe {
                let low_sums = dpbusd(_mm256_setzero_si256(), low, y.low);
                dpbusd(low_sums, high, y.high)
            }
        } else {
            // Each maddubs pair is below 2·31·128, their sum below 2^15: exact in i16.
            let products = _mm256_add_epi16(
                _mm256_maddubs_epi16(low, y.low),
                _mm256_maddubs_epi16(high, y.high),
            );
            _mm256_madd_epi16(products, ones)
        }
    };
    let (p0, p1, p2, p3) = (pair(0), pair(1), pair(2), pair(3));
    // [b0 b0 b1 b1 | b4 b4 b5 b5], [b2 b2 b3 b3 | b6 b6 b7 b7], then [b0..b3 | b4..b7].
    let totals = _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
    _mm256_sub_epi32(totals, _mm256_set1_epi32(bias_sum))
}

/// Q4_0 rows over [`pair_sums`] (`VNNI`: its integer sums by `vpdpbusd`).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn rows_q4_0<const VNNI: bool>(
    w: &[BlockQ4_0],
    row_blocks: usize,
    x: &[BlockQ8_0],
    out: &mut [f32],
    single: fn(&[BlockQ4_0], &[BlockQ8_0]) -> f32,
) {
    legacy_rows(
        w,
        row_blocks,
        x,
        out,
        // Σ (q - 8)·y = Σ q·y - 8·Σ y: the second part is the activation's, once per block.
        |xb| summary_q8_0(xb, 8),
        |bs, xb, a| {
            pair_sums::<VNNI, _>(bs, split_activation(&xb.qs), a.bias_sum, |a, b| {
                nibble_pair(&a.qs, &b.qs)
            })
        },
        // `(sumi * dx) * dy`, the scalar order.
        |sumi, bs, _, a| {
            let dy = _mm256_set1_ps(a.d);
            _mm256_mul_ps(_mm256_mul_ps(sumi, row_scales(bs, |b| b.d)), dy)
        },
        single,
    )
}

/// `(dx * dy) * sumi + m * s`, the scalar order of the Q4_1 and Q5_1 terms.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn term_with_min<W>(sumi: __m256, bs: [&W; LANES], a: &Summary) -> __m256 {
    let (d, m) = Heads::of(bs).halves();
    let dd = _mm256_mul_ps(d, _mm256_set1_ps(a.d));
    let ms = _mm256_mul_ps(m, _mm256_set1_ps(a.s));
    _mm256_add_ps(_mm256_mul_ps(dd, sumi), ms)
}

/// Q4_1 rows over [`pair_sums`] (`VNNI`: its integer sums by `vpdpbusd`).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn rows_q4_1<const VNNI: bool>(
    w: &[BlockQ4_1],
    row_blocks: usize,
    x: &[BlockQ8_1],
    out: &mut [f32],
    single: fn(&[BlockQ4_1], &[BlockQ8_1]) -> f32,
) {
    legacy_rows(
        w,
        row_blocks,
        x,
        out,
        summary_q8_1,
        |bs, xb, _| {
            pair_sums::<VNNI, _>(bs, split_activation(&xb.qs), 0, |a, b| {
                nibble_pair(&a.qs, &b.qs)
            })
        },
        |sumi, bs, _, a| term_with_min(sumi, bs, a),
        single,
    )
}

/// Two Q5 blocks' 5-bit quants in the [`nibble_pair`] layout.
#[inline]
#[target_feature(enable = "avx2")]
fn q5_pair(qs: (&[u8; 16], &[u8; 16]), qh: ([u8; 4], [u8; 4])) -> (__m256i, __m256i) {
    let (low, high) = nibble_pair(qs.0, qs.1);
    let (bits_low, bits_high) = fifth_bit_pair(qh.0, qh.1);
    (
        _mm256_or_si256(low, bits_low),
        _mm256_or_si256(high, bits_high),
    )
}

/// The 32 quants of one Q5 block in element order (the low nibbles are elements 0..16, the
/// high ones 16..32), as bytes below 32: the fifth bits are added under an AVX-512 byte mask
/// that is `qh` itself (bit `i` for element `i`), loaded as it is stored.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl")]
fn q5_block_masked(qs: &[u8; 16], qh: [u8; 4]) -> __m256i {
    let both = _mm256_broadcastsi128_si256(load16(qs));
    // Words of the high half shifted by 4, of the low half not: one variable shift.
    let shifts = _mm256_setr_epi64x(0, 0, 0x0004_0004_0004_0004, 0x0004_0004_0004_0004);
    let nibbles = _mm256_and_si256(_mm256_srlv_epi16(both, shifts), _mm256_set1_epi8(0x0f));
    // `opaque`: knowing the bits disjoint, LLVM would make the masked add an `or` and a masked
    // move (AVX-512 has no byte-masked `or`), two instructions for one.
    _mm256_mask_add_epi8(
        nibbles,
        u32::from_le_bytes(qh),
        nibbles,
        opaque(_mm256_set1_epi8(0x10)),
    )
}

/// Eight Q5 blocks' `Σ q·y − bias_sum` (exact), block `l` in lane `l`: one block a vector
/// ([`q5_block_masked`]) against the activation block as it is, then [`transposed_less`].
/// (Two blocks a vector as [`pair_sums`] lays them out take the fifth bits' masks apart in general
/// registers, a third more instructions.)
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn q5_block_sums<W>(
    bs: [&W; LANES],
    y: &[i8; 32],
    bias_sum: i32,
    quants: impl Fn(&W) -> (&[u8; 16], [u8; 4]),
) -> __m256i {
    let y = load32(y);
    let partials = bs.map(|b| {
        let (qs, qh) = quants(b);
        dpbusd(_mm256_setzero_si256(), q5_block_masked(qs, qh), y)
    });
    transposed_less(&partials, bias_sum)
}

/// Q5_0 rows over [`pair_sums`] (`VNNI`: over [`q5_block_sums`]).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn rows_q5_0<const VNNI: bool>(
    w: &[BlockQ5_0],
    row_blocks: usize,
    x: &[BlockQ8_0],
    out: &mut [f32],
    single: fn(&[BlockQ5_0], &[BlockQ8_0]) -> f32,
) {
    legacy_rows(
        w,
        row_blocks,
        x,
        out,
        // Σ (q - 16)·y = Σ q·y - 16·Σ y, the second part once per activation block.
        |xb| summary_q8_0(xb, 16),
        |bs, xb, a| {
            if VNNI {
                // SAFETY: as in `pair_sums`: the VNNI level includes AVX-512 F, BW, VL, VNNI.
                unsafe { q5_block_sums(bs, &xb.qs, a.bias_sum, |b| (&b.qs, b.qh)) }
            } else {
                pair_sums::<false, _>(bs, split_activation(&xb.qs), a.bias_sum, |a, b| {
                    q5_pair((&a.qs, &b.qs), (a.qh, b.qh))
                })
            }
        },
        // `(dx * dy) * sumi`, the scalar order. The `d` from `Heads` (its second half, two qh
        // bytes, unused).
        |sumi, bs, _, a| {
            let dd = _mm256_mul_ps(Heads::of(bs).halves().0, _mm256_set1_ps(a.d));
            _mm256_mul_ps(dd, sumi)
        },
        single,
    )
}

/// Q5_1 rows over [`pair_sums`] (`VNNI`: over [`q5_block_sums`]).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn rows_q5_1<const VNNI: bool>(
    w: &[BlockQ5_1],
    row_blocks: usize,
    x: &[BlockQ8_1],
    out: &mut [f32],
    single: fn(&[BlockQ5_1], &[BlockQ8_1]) -> f32,
) {
    legacy_rows(
        w,
        row_blocks,
        x,
        out,
        summary_q8_1,
        |bs, xb, _| {
            if VNNI {
                // SAFETY: as in `pair_sums`: the VNNI level includes AVX-512 F, BW, VL, VNNI.
                unsafe { q5_block_sums(bs, &xb.qs, 0, |b| (&b.qs, b.qh)) }
            } else {
                pair_sums::<false, _>(bs, split_activation(&xb.qs), 0, |a, b| {
                    q5_pair((&a.qs, &b.qs), (a.qh, b.qh))
                })
            }
        },
        |sumi, bs, _, a| term_with_min(sumi, bs, a),
        single,
    )
}

/// The summary of a Q8_0 activation block for the VNNI kernels: `bias · Σ y` by `vpdpbusd`,
/// `bias` read as unsigned (-128 is 128).
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn summary_vnni(xb: &BlockQ8_0, bias: i8) -> Summary {
    let bias_y = dpbusd(
        _mm256_setzero_si256(),
        _mm256_set1_epi8(bias),
        load32(&xb.qs),
    );
    Summary {
        d: f16_le(xb.d),
        s: 0.0,
        bias_sum: hsum_i32(bias_y),
    }
}

#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn rows_q8_0_vnni_impl(w: &[BlockQ8_0], row_blocks: usize, x: &[BlockQ8_0], out: &mut [f32]) {
    legacy_rows(
        w,
        row_blocks,
        x,
        out,
        // Σ w·x = Σ (w + 128)·x − 128·Σ x, the second part once per activation block.
        |xb| summary_vnni(xb, -128),
        |bs, xb, a| {
            let y = load32(&xb.qs);
            let partials = bs.map(|wb| {
                let biased = _mm256_xor_si256(load32(&wb.qs), _mm256_set1_epi8(-128));
                dpbusd(_mm256_setzero_si256(), biased, y)
            });
            transposed_less(&partials, a.bias_sum)
        },
        |sumi, bs, _, a| {
            let dx = _mm256_set1_ps(a.d);
            _mm256_mul_ps(sumi, _mm256_mul_ps(row_scales(bs, |b| b.d), dx))
        },
        super::avx512::vec_dot_q8_0,
    )
}

/// Q8_0 rows, AVX-512 VNNI.
pub(super) fn rows_q8_0_vnni(w: &[BlockQ8_0], row_blocks: usize, x: &[BlockQ8_0], out: &mut [f32]) {
    // SAFETY: the table only hands this kernel out for an available AVX-512 VNNI level (avx2,
    // f16c, avx512f/bw/vl and avx512vnni, checked by `pick!`).
    unsafe { rows_q8_0_vnni_impl(w, row_blocks, x, out) }
}

#[target_feature(enable = "avx2,f16c")]
fn rows_q2_k_avx2_impl(w: &[BlockQ2K], row_blocks: usize, x: &[BlockQ8K], out: &mut [f32]) {
    // Q2_K's float steps are per super-block, as the legacy types' are per block: eight rows in
    // the lanes share one transpose of their integer sums and one set of float steps.
    legacy_rows(
        w,
        row_blocks,
        x,
        out,
        |xb| Summary {
            d: xb.scale(),
            s: 0.0,
            bias_sum: 0,
        },
        // Loops, not `bs.map`: through `map`'s closure LLVM did not inline the block sums.
        |bs, xb, _| {
            let mut sums = [_mm256_setzero_si256(); LANES];
            for (sum, wb) in sums.iter_mut().zip(bs) {
                *sum = q2_k_scaled_sums(wb, xb);
            }
            transpose_sums(&sums)
        },
        // `dall * isum - dmin * summs`, `dall = dx * d`, `dmin = dx * dmin`: the scalar order.
        |isum, bs, xb, a| {
            let mut products = [_mm256_setzero_si256(); LANES];
            for (p, wb) in products.iter_mut().zip(bs) {
                *p = q2_k_mins_products(wb, xb);
            }
            let summs = transpose_sums(&products);
            let dx = _mm256_set1_ps(a.d);
            let dall = _mm256_mul_ps(dx, row_scales(bs, |b| b.d));
            let dmin = _mm256_mul_ps(dx, row_scales(bs, |b| b.dmin));
            _mm256_sub_ps(
                _mm256_mul_ps(dall, isum),
                _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(summs)),
            )
        },
        super::avx2::vec_dot_q2_k,
    )
}

/// Q2_K rows, AVX2.
pub(super) fn rows_q2_k_avx2(w: &[BlockQ2K], row_blocks: usize, x: &[BlockQ8K], out: &mut [f32]) {
    // SAFETY: as `rows_q8_0_avx2`.
    unsafe { rows_q2_k_avx2_impl(w, row_blocks, x, out) }
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
fn prepared_rows<W, P>(
    w: &[W],
    row_blocks: usize,
    x: &[BlockQ8K],
    out: &mut [f32],
    prepare: impl Fn(&BlockQ8K) -> P,
    dot: impl Fn(&[W], &[P]) -> f32,
    single: fn(&[W], &[BlockQ8K]) -> f32,
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

/// An activation super-block as the Q4_K/Q5_K rows kernels read it.
#[derive(Clone, Copy)]
struct MinsActivation {
    /// The eight 32-byte groups through `mins_layout`.
    groups: [__m256i; 8],
    /// The even bsums (`bsums[2j]`) and the odd ones, as eight i16 each: min `j` multiplies
    /// `bsums[2j]` and `bsums[2j + 1]`. (Not their sums in i16: a Q8_K block's `bsums` are
    /// data, and two of them can add past i16.)
    even_bsums: __m128i,
    odd_bsums: __m128i,
}

impl MinsActivation {
    #[inline]
    #[target_feature(enable = "avx2")]
    fn of<const VNNI: bool, const VBMI: bool>(xb: &BlockQ8K) -> MinsActivation {
        let bsums: &[u8; 32] = bytemuck::cast_ref(&xb.bsums);
        // Per 128-bit half: the four even i16, then the four odd ones.
        let split = _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
        let first = _mm_shuffle_epi8(load16(part(bsums, 0)), split);
        let second = _mm_shuffle_epi8(load16(part(bsums, 16)), split);
        MinsActivation {
            groups: core::array::from_fn(|g| {
                mins_layout::<VNNI, VBMI>(load32(part(&xb.qs, 32 * g)))
            }),
            even_bsums: _mm_unpacklo_epi64(first, second),
            odd_bsums: _mm_unpackhi_epi64(first, second),
        }
    }

    /// Group `at / 32` (`at` is below 256 at every call).
    #[inline(always)]
    fn group_at(&self, at: usize) -> __m256i {
        self.groups.get(at / 32).copied().unwrap_or(self.groups[0])
    }

    /// `Σ bsums·mins` as four i32 partial sums: one 128-bit widening, two madds (exact: each
    /// product is below 2^21 in magnitude).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn mins_dot(&self, mins: [u8; 8]) -> __m128i {
        let mins = _mm_cvtepu8_epi16(_mm_set_epi64x(0, i64::from_le_bytes(mins)));
        _mm_add_epi32(
            _mm_madd_epi16(mins, self.even_bsums),
            _mm_madd_epi16(mins, self.odd_bsums),
        )
    }
}

/// The Q4_K/Q5_K rows kernels: [`prepared_rows`] over [`MinsActivation`], each row through
/// [`dot_with_mins`] (`parts` reads a block, `single` is the type's vec_dot).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn mins_rows<const VNNI: bool, const VBMI: bool, W>(
    w: &[W],
    row_blocks: usize,
    x: &[BlockQ8K],
    out: &mut [f32],
    parts: impl Fn(&W) -> MinsBlock<'_> + Copy,
    single: fn(&[W], &[BlockQ8K]) -> f32,
) {
    prepared_rows(
        w,
        row_blocks,
        x,
        out,
        |xb| MinsActivation::of::<VNNI, VBMI>(xb),
        |row, prepared| {
            dot_with_mins::<VNNI, VBMI, _, _>(
                row,
                x,
                prepared,
                parts,
                MinsActivation::group_at,
                |a, mins| a.mins_dot(mins),
            )
        },
        single,
    )
}

/// Q4_K rows: [`mins_rows`] over its blocks (`VNNI`: in `lane_groups` order, see `dot_with_mins`).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn rows_q4_k<const VNNI: bool, const VBMI: bool>(
    w: &[BlockQ4K],
    row_blocks: usize,
    x: &[BlockQ8K],
    out: &mut [f32],
    single: fn(&[BlockQ4K], &[BlockQ8K]) -> f32,
) {
    mins_rows::<VNNI, VBMI, _>(w, row_blocks, x, out, q4_k_parts, single)
}

/// Q5_K rows: [`mins_rows`] over its blocks (`VNNI`: in `lane_groups` order, see `dot_with_mins`).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn rows_q5_k<const VNNI: bool, const VBMI: bool>(
    w: &[BlockQ5K],
    row_blocks: usize,
    x: &[BlockQ8K],
    out: &mut [f32],
    single: fn(&[BlockQ5K], &[BlockQ8K]) -> f32,
) {
    mins_rows::<VNNI, VBMI, _>(w, row_blocks, x, out, q5_k_parts, single)
}

/// The two table entries of a rows kernel written once over `VNNI` (`$generic::<VNNI>(w,
/// row_blocks, x, out, single)`): `$avx2` compiled for AVX2 + F16C with `$avx2_single` for rows
/// past the last group, `$vnni` for the AVX-512 VNNI level with `$vnni_single`. With a trailing
/// `vbmi`, the kernel is generic over `<VNNI, VBMI>` and the VNNI entry holds a second copy,
/// compiled with AVX-512 VBMI, that runs where `vbmi()` finds it.
macro_rules! rows_entries {
    ($generic:ident, $w:ty, $x:ty, $avx2:ident($avx2_single:path), $vnni:ident($vnni_single:path)) => {
        rows_entries!(@avx2 $generic[false], $w, $x, $avx2($avx2_single));
        /// Rows kernel, AVX-512 VNNI.
        pub(super) fn $vnni(w: &[$w], row_blocks: usize, x: &[$x], out: &mut [f32]) {
            rows_entries!(@vnni_body body $generic[true], $w, $x, $vnni_single);
            // SAFETY: the table only hands this kernel out for an available AVX-512 VNNI level
            // (avx2, f16c, avx512f/bw/vl and avx512vnni, checked by `pick!`).
            unsafe { body(w, row_blocks, x, out) }
        }
    };
    ($generic:ident, $w:ty, $x:ty, $avx2:ident($avx2_single:path), $vnni:ident($vnni_single:path), vbmi) => {
        rows_entries!(@avx2 $generic[false, false], $w, $x, $avx2($avx2_single));
        /// Rows kernel, AVX-512 VNNI (with VBMI's `vpermb` where the CPU has it).
        pub(super) fn $vnni(w: &[$w], row_blocks: usize, x: &[$x], out: &mut [f32]) {
            rows_entries!(@vnni_body body $generic[true, false], $w, $x, $vnni_single);
            #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
            fn body_vbmi(w: &[$w], row_blocks: usize, x: &[$x], out: &mut [f32]) {
                $generic::<true, true>(w, row_blocks, x, out, $vnni_single)
            }
            if super::vbmi() {
                // SAFETY: an available AVX-512 VNNI level (`pick!`), and `vbmi()` found VBMI.
                unsafe { body_vbmi(w, row_blocks, x, out) }
            } else {
                // SAFETY: an available AVX-512 VNNI level (`pick!`).
                unsafe { body(w, row_blocks, x, out) }
            }
        }
    };
    (@avx2 $generic:ident[$($args:tt)*], $w:ty, $x:ty, $avx2:ident($avx2_single:path)) => {
        /// Rows kernel, AVX2.
        pub(super) fn $avx2(w: &[$w], row_blocks: usize, x: &[$x], out: &mut [f32]) {
            #[target_feature(enable = "avx2,f16c")]
            fn body(w: &[$w], row_blocks: usize, x: &[$x], out: &mut [f32]) {
                $generic::<$($args)*>(w, row_blocks, x, out, $avx2_single)
            }
            // SAFETY: the table only hands this kernel out for an available AVX2 level (`pick!`
            // checks `Level::is_available`, which requires avx2 and f16c).
            unsafe { body(w, row_blocks, x, out) }
        }
    };
    (@vnni_body $body:ident $generic:ident[$($args:tt)*], $w:ty, $x:ty, $single:path) => {
        #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
        fn $body(w: &[$w], row_blocks: usize, x: &[$x], out: &mut [f32]) {
            $generic::<$($args)*>(w, row_blocks, x, out, $single)
        }
    };
}

rows_entries!(
    rows_q4_0,
    BlockQ4_0,
    BlockQ8_0,
    rows_q4_0_avx2(super::avx2::vec_dot_q4_0),
    rows_q4_0_vnni(super::avx512::vec_dot_q4_0)
);
rows_entries!(
    rows_q4_1,
    BlockQ4_1,
    BlockQ8_1,
    rows_q4_1_avx2(super::avx2::vec_dot_q4_1),
    rows_q4_1_vnni(super::avx2::vec_dot_q4_1)
);
rows_entries!(
    rows_q5_0,
    BlockQ5_0,
    BlockQ8_0,
    rows_q5_0_avx2(super::avx2::vec_dot_q5_0),
    rows_q5_0_vnni(super::avx2::vec_dot_q5_0)
);
rows_entries!(
    rows_q5_1,
    BlockQ5_1,
    BlockQ8_1,
    rows_q5_1_avx2(super::avx2::vec_dot_q5_1),
    rows_q5_1_vnni(super::avx2::vec_dot_q5_1)
);
rows_entries!(
    rows_q4_k,
    BlockQ4K,
    BlockQ8K,
    rows_q4_k_avx2(super::avx2::vec_dot_q4_k),
    rows_q4_k_vnni(super::avx512::vec_dot_q4_k),
    vbmi
);
rows_entries!(
    rows_q3_k,
    BlockQ3K,
    BlockQ8K,
    rows_q3_k_avx2(super::q3_k::vec_dot),
    rows_q3_k_vnni(super::avx512::vec_dot_q3_k),
    vbmi
);
rows_entries!(
    rows_q6_k,
    BlockQ6K,
    BlockQ8K,
    rows_q6_k_avx2(super::avx2::vec_dot_q6_k),
    rows_q6_k_vnni(super::avx512::vec_dot_q6_k),
    vbmi
);
rows_entries!(
    rows_q5_k,
    BlockQ5K,
    BlockQ8K,
    rows_q5_k_avx2(super::avx2::vec_dot_q5_k),
    rows_q5_k_vnni(super::avx512::vec_dot_q5_k),
    vbmi
);

/// Q6_K rows: besides the shuffles, each group's `maddubs(32, x)` is prepared too (two of the
/// five vector steps per group that do not depend on the weights). `VNNI`: scale products by
/// `vpdpwssd`.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn rows_q6_k<const VNNI: bool, const VBMI: bool>(
    w: &[BlockQ6K],
    row_blocks: usize,
    x: &[BlockQ8K],
    out: &mut [f32],
    single: fn(&[BlockQ6K], &[BlockQ8K]) -> f32,
) {
    prepared_rows(
        w,
        row_blocks,
        x,
        out,
        |xb| -> [(__m256i, __m256i); 8] {
            core::array::from_fn(|g| q6_k_activation_group::<VBMI>(&xb.qs, g))
        },
        |row, paired| {
            dot_q6_k::<VNNI, VBMI, _>(row, x, paired, |groups, g| {
                groups.get(g).copied().unwrap_or(groups[0])
            })
        },
        single,
    )
}

/// Q3_K rows: the activation's lane shuffles and its `maddubs(4, x)` prepared once, as for Q6_K
/// (`VNNI`: scale products by `vpdpwssd`).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn rows_q3_k<const VNNI: bool, const VBMI: bool>(
    w: &[BlockQ3K],
    row_blocks: usize,
    x: &[BlockQ8K],
    out: &mut [f32],
    single: fn(&[BlockQ3K], &[BlockQ8K]) -> f32,
) {
    prepared_rows(
        w,
        row_blocks,
        x,
        out,
        |xb| -> [(__m256i, __m256i); 8] {
            core::array::from_fn(|g| super::q3_k::activation_group::<VBMI>(&xb.qs, g))
        },
        |row, paired| {
            super::q3_k::dot::<VNNI, VBMI, _>(row, x, paired, |groups, g| {
                groups.get(g).copied().unwrap_or(groups[0])
            })
        },
        single,
    )
}
