//! AVX2 multi-row kernels (`Ops::rows`) of Q4_K and Q6_K: four weight rows per Q8_K activation
//! block, the activation's share of the work done once for all four. That share is what the
//! single-row kernels repeat per row: the `pair_lanes` shuffle of every activation byte (so that
//! `maddubs` pairs two products of the same lane), and for Q6_K the `maddubs(32, x)` bias sums.
//! Each row keeps its own state and its scalar twin's float order; the integer sums per block are
//! the single-row kernels' (exact), only taken against the prepared activation.

use core::arch::x86_64::*;

use super::avx2::{add_lanes, load32, part, q6_k_scale_pairs, scales_and_mins};
use crate::quant::activation::BlockQ8K;
use crate::quant::k_quants::{BlockQ4K, BlockQ6K};

/// Like `pair_lanes` (element `k` next to element `k + 8` in each 16-byte half), but the high
/// half starts with lanes 4..7: then `unpacklo` of two such sums holds lanes 0..3 in its low half
/// and 4..7 in its high half (`unpackhi` the other way round), and the eight lanes come out of
/// [`HalfSwappedAcc`] with one cross-half move instead of two.
#[inline]
#[target_feature(enable = "avx2")]
fn pair_lanes_swapped(v: __m256i) -> __m256i {
    let order = _mm256_setr_epi8(
        0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15, 4, 12, 5, 13, 6, 14, 7, 15, 0, 8, 1,
        9, 2, 10, 3, 11,
    );
    _mm256_shuffle_epi8(v, order)
}

/// The eight-lane integer accumulator of one row's block for sums in the
/// [`pair_lanes_swapped`] layout (the counterpart of `LaneAcc`).
struct HalfSwappedAcc {
    /// Lanes 0..3 (low half) and 4..7 (high half).
    straight: __m256i,
    /// Lanes 4..7 (low half) and 0..3 (high half).
    swapped: __m256i,
}

impl HalfSwappedAcc {
    #[inline]
    #[target_feature(enable = "avx2")]
    fn new() -> HalfSwappedAcc {
        HalfSwappedAcc {
            straight: _mm256_setzero_si256(),
            swapped: _mm256_setzero_si256(),
        }
    }

    /// Adds `scale_a · a + scale_b · b` lane by lane; each 32-bit element of `scales` holds
    /// `(scale_a, scale_b)` as two i16.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn add_pair_scaled(&mut self, a: __m256i, b: __m256i, scales: __m256i) {
        let straight = _mm256_madd_epi16(_mm256_unpacklo_epi16(a, b), scales);
        let swapped = _mm256_madd_epi16(_mm256_unpackhi_epi16(a, b), scales);
        self.straight = _mm256_add_epi32(self.straight, straight);
        self.swapped = _mm256_add_epi32(self.swapped, swapped);
    }

    /// The eight lanes in order.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn lanes(&self) -> __m256i {
        let swapped = _mm256_permute2x128_si256::<0x01>(self.swapped, self.swapped);
        _mm256_add_epi32(self.straight, swapped)
    }
}

/// Rows per group of the K-quant kernels here.
const ROWS: usize = 4;

/// A Q8_K block prepared for the Q4_K sums: its eight 32-byte pieces through
/// [`pair_lanes_swapped`], and its sixteen `bsums` split into the even ones and the odd ones
/// (each eight i16, repeated in both halves) for the four rows' `Σ bsums·mins` at once.
struct Q4Prepared {
    x: [__m256i; 8],
    bsums_even: __m256i,
    bsums_odd: __m256i,
}

#[inline]
#[target_feature(enable = "avx2")]
fn prepare_q4_k(xb: &BlockQ8K) -> Q4Prepared {
    let bsums: &[u8; 32] = bytemuck::cast_ref(&xb.bsums);
    // Per half: the words 0, 2, 4, 6 then 1, 3, 5, 7; then the halves' even (odd) quads joined.
    let split = _mm256_shuffle_epi8(
        load32(bsums),
        _mm256_setr_epi8(
            0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15, 0, 1, 4, 5, 8, 9, 12, 13, 2, 3,
            6, 7, 10, 11, 14, 15,
        ),
    );
    Q4Prepared {
        x: core::array::from_fn(|i| pair_lanes_swapped(load32(part(&xb.qs, 32 * i)))),
        bsums_even: _mm256_permute4x64_epi64::<0b10_00_10_00>(split),
        bsums_odd: _mm256_permute4x64_epi64::<0b11_01_11_01>(split),
    }
}

/// One Q4_K block's eight lane sums against a prepared activation; `scales` its eight sub-block
/// scales (bytes of a little-endian u64).
#[inline]
#[target_feature(enable = "avx2")]
fn q4_k_lanes(wb: &BlockQ4K, scales: u64, xp: &Q4Prepared) -> __m256i {
    // Words s0..s7 in both halves; dword `p` is the pair (scale 2p, scale 2p + 1) for `madd`.
    let scales = _mm256_cvtepu8_epi16(_mm_set1_epi64x(scales as i64));
    let pairs = [
        _mm256_shuffle_epi32::<0x00>(scales),
        _mm256_shuffle_epi32::<0x55>(scales),
        _mm256_shuffle_epi32::<0xaa>(scales),
        _mm256_shuffle_epi32::<0xff>(scales),
    ];
    let nibble = _mm256_set1_epi8(0x0f);
    let mut acc = HalfSwappedAcc::new();
    let pieces = wb.qs.chunks_exact(32).zip(xp.x.chunks_exact(2));
    for ((qs, x), pair) in pieces.zip(pairs) {
        // Low nibbles are sub-block 2p (elements 0..32 of the 64), high ones 2p + 1 (32..64).
        // maddubs of unsigned quants (< 16) and Q8_K bytes: pairs below 2·15·128, exact.
        let q = pair_lanes_swapped(load32(part(qs, 0)));
        let low = _mm256_and_si256(q, nibble);
        let high = _mm256_and_si256(_mm256_srli_epi16::<4>(q), nibble);
        if let [x0, x1] = *x {
            let s0 = _mm256_maddubs_epi16(low, x0);
            let s1 = _mm256_maddubs_epi16(high, x1);
            acc.add_pair_scaled(s0, s1, pair);
        }
    }
    acc.lanes()
}

/// Four rows' `Σ bsums·mins` (i32 lane `r` = row `r`): each row's eight mins (`mins[r]`, bytes
/// of a little-endian u64) against the even and the odd bsums, products exact in i32.
#[inline]
#[target_feature(enable = "avx2")]
fn q4_k_min_sums(mins: &[u64; ROWS], xp: &Q4Prepared) -> __m128i {
    let rows = |r: usize| {
        let pair: &[u64; 2] = part_u64(mins, r);
        // SAFETY: `pair` is 16 bytes; `loadu` has no alignment requirement.
        _mm256_cvtepu8_epi16(unsafe { _mm_loadu_si128(pair.as_ptr().cast()) })
    };
    let (rows01, rows23) = (rows(0), rows(2));
    let sums01 = _mm256_add_epi32(
        _mm256_madd_epi16(rows01, xp.bsums_even),
        _mm256_madd_epi16(rows01, xp.bsums_odd),
    );
    let sums23 = _mm256_add_epi32(
        _mm256_madd_epi16(rows23, xp.bsums_even),
        _mm256_madd_epi16(rows23, xp.bsums_odd),
    );
    // [r0 r0 r2 r2 | r1 r1 r3 r3] partial sums, then [r0 r2 r0 r2 | r1 r3 r1 r3].
    let quads = _mm256_hadd_epi32(sums01, sums23);
    let totals = _mm256_hadd_epi32(quads, quads);
    _mm_unpacklo_epi32(
        _mm256_castsi256_si128(totals),
        _mm256_extracti128_si256::<1>(totals),
    )
}

/// Rows `r` and `r + 1` of `mins`.
#[inline(always)]
fn part_u64(mins: &[u64; ROWS], r: usize) -> &[u64; 2] {
    mins.get(r..)
        .and_then(|rest| rest.first_chunk::<2>())
        .unwrap_or(&[0; 2])
}

/// `_mm256_permutevar8x32_ps` indices picking element `2r` (row `r`'s `d·dx`) into every lane.
const D_OF_ROW: [[i32; 8]; ROWS] = [[0; 8], [2; 8], [4; 8], [6; 8]];

/// One activation block for four Q4_K rows, each in its scalar twin's float order:
/// `sums += (d·dx)·lanes`, then `sumf -= (dmin·dx)·sumi` (the four `sumf` in one vector).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn q4_k_group_step(
    sums: &mut [__m256; ROWS],
    sumf: &mut __m128,
    blocks: [&BlockQ4K; ROWS],
    xb: &BlockQ8K,
    xp: &Q4Prepared,
) {
    let [b0, b1, b2, b3] = blocks.map(|b| {
        let [d0, d1] = b.d;
        let [m0, m1] = b.dmin;
        i32::from_le_bytes([d0, d1, m0, m1])
    });
    // [d0, dmin0, d1, dmin1, ...], each times dx as the scalar twin's `f16 · dx`.
    let scaled = _mm256_mul_ps(
        _mm256_cvtph_ps(_mm_setr_epi32(b0, b1, b2, b3)),
        _mm256_set1_ps(xb.scale()),
    );
    let mut mins = [0u64; ROWS];
    let rows = sums.iter_mut().zip(&mut mins).zip(blocks).zip(&D_OF_ROW);
    for (((sum, row_mins), b), d_index) in rows {
        let (scales, m) = scales_and_mins(&b.scales);
        *row_mins = u64::from_le_bytes(m);
        let lanes = q4_k_lanes(b, u64::from_le_bytes(scales), xp);
        // SAFETY: `d_index` is eight i32; `loadu` has no alignment requirement.
        let d_index = unsafe { _mm256_loadu_si256(d_index.as_ptr().cast()) };
        let d = _mm256_permutevar8x32_ps(scaled, d_index);
        *sum = _mm256_add_ps(*sum, _mm256_mul_ps(d, _mm256_cvtepi32_ps(lanes)));
    }
    let sumi = q4_k_min_sums(&mins, xp);
    let dmin = _mm256_castps256_ps128(_mm256_permutevar8x32_ps(
        scaled,
        _mm256_setr_epi32(1, 3, 5, 7, 1, 3, 5, 7),
    ));
    *sumf = _mm_sub_ps(*sumf, _mm_mul_ps(dmin, _mm_cvtepi32_ps(sumi)));
}

/// The rows driver: `ROWS` rows at a time, their states side by side (`init`); `step` adds one
/// activation block to the four rows' states, `finish` gives their results. Rows past the last
/// whole group run `single`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn group_rows<W, S: Copy>(
    w: &[W],
    row_blocks: usize,
    x: &[BlockQ8K],
    out: &mut [f32],
    init: S,
    step: impl Fn(&mut S, [&W; ROWS], &BlockQ8K),
    finish: impl Fn(S) -> [f32; ROWS],
    single: fn(&[W], &[BlockQ8K]) -> f32,
) {
    let group_blocks = row_blocks.saturating_mul(ROWS).max(1);
    let mut groups = w.chunks_exact(group_blocks);
    let mut outs = out.chunks_exact_mut(ROWS);
    for (group, out4) in (&mut groups).zip(&mut outs) {
        let mut it = group.chunks_exact(row_blocks.max(1));
        let rows: [&[W]; ROWS] = core::array::from_fn(|_| it.next().unwrap_or(&[]));
        let mut state = init;
        for (k, xb) in x.iter().enumerate().take(row_blocks) {
            // Every row has `row_blocks` blocks: the `else` is never taken.
            let [Some(b0), Some(b1), Some(b2), Some(b3)] = rows.map(|row| row.get(k)) else {
                break;
            };
            step(&mut state, [b0, b1, b2, b3], xb);
        }
        out4.copy_from_slice(&finish(state));
    }
    let rest = groups.remainder().chunks_exact(row_blocks.max(1));
    for (o, row) in outs.into_remainder().iter_mut().zip(rest) {
        *o = single(row, x);
    }
}

#[target_feature(enable = "avx2,f16c")]
fn rows_q4_k_avx2_impl(w: &[BlockQ4K], row_blocks: usize, x: &[BlockQ8K], out: &mut [f32]) {
    group_rows(
        w,
        row_blocks,
        x,
        out,
        ([_mm256_setzero_ps(); ROWS], _mm_setzero_ps()),
        |(sums, sumf), blocks, xb| {
            q4_k_group_step(sums, sumf, blocks, xb, &prepare_q4_k(xb));
        },
        |(sums, sumf)| {
            let mut sumf4 = [0.0f32; ROWS];
            // SAFETY: `sumf4` holds four f32; `storeu` has no alignment requirement.
            unsafe { _mm_storeu_ps(sumf4.as_mut_ptr(), sumf) };
            core::array::from_fn(|r| add_lanes(sumf4[r], sums[r]))
        },
        super::avx2::vec_dot_q4_k,
    )
}

/// Q4_K rows, AVX2.
pub(super) fn rows_q4_k_avx2(w: &[BlockQ4K], row_blocks: usize, x: &[BlockQ8K], out: &mut [f32]) {
    // SAFETY: the table only hands this kernel out for an available AVX2 level (`pick!` checks
    // `Level::is_available`, which requires avx2 and f16c).
    unsafe { rows_q4_k_avx2_impl(w, row_blocks, x, out) }
}

/// A Q8_K block prepared for the Q6_K sums: per half of the block, its four 32-byte groups
/// through [`pair_lanes_swapped`], and their `maddubs(32, x)` (the `-32` offset of the quants).
struct Q6Prepared {
    x: [[__m256i; 4]; 2],
    bias: [[__m256i; 4]; 2],
}

#[inline]
#[target_feature(enable = "avx2")]
fn prepare_q6_k(xb: &BlockQ8K) -> Q6Prepared {
    // Plain loops: `array::map` of these closures is not inlined (a call per block).
    let mut prepared = Q6Prepared {
        x: [[_mm256_setzero_si256(); 4]; 2],
        bias: [[_mm256_setzero_si256(); 4]; 2],
    };
    let thirty_two = _mm256_set1_epi8(32);
    let halves = prepared.x.iter_mut().zip(&mut prepared.bias);
    for ((x, bias), qs) in halves.zip(xb.qs.chunks_exact(128)) {
        for ((x, bias), qs) in x.iter_mut().zip(bias).zip(qs.chunks_exact(32)) {
            *x = pair_lanes_swapped(load32(part(qs, 0)));
            *bias = _mm256_maddubs_epi16(thirty_two, *x);
        }
    }
    prepared
}

/// One Q6_K block's eight lane sums against a prepared activation (the single-row kernel's
/// integer steps, in the [`pair_lanes_swapped`] layout).
#[inline]
#[target_feature(enable = "avx2")]
fn q6_k_lanes(wb: &BlockQ6K, xp: &Q6Prepared) -> __m256i {
    let low2 = _mm256_set1_epi8(0x03);
    let nibble = _mm256_set1_epi8(0x0f);
    let mut acc = HalfSwappedAcc::new();
    let halves = wb.ql.chunks_exact(64).zip(wb.qh.chunks_exact(32));
    let halves = halves
        .zip(xp.x.iter().zip(&xp.bias))
        .zip(wb.scales.chunks_exact(8));
    for (((ql, qh), (xh, bh)), half_scales) in halves {
        let a = pair_lanes_swapped(load32(part(ql, 0)));
        let b = pair_lanes_swapped(load32(part(ql, 32)));
        let h = pair_lanes_swapped(load32(part(qh, 0)));
        // (h >> shift) & 3, moved to bits 4..5 (16-bit shifts are fine: the mask comes after).
        let high_bits = [
            _mm256_slli_epi16::<4>(_mm256_and_si256(h, low2)),
            _mm256_slli_epi16::<4>(_mm256_and_si256(_mm256_srli_epi16::<2>(h), low2)),
            _mm256_slli_epi16::<4>(_mm256_and_si256(_mm256_srli_epi16::<4>(h), low2)),
            _mm256_slli_epi16::<4>(_mm256_and_si256(_mm256_srli_epi16::<6>(h), low2)),
        ];
        let a_high = _mm256_and_si256(_mm256_srli_epi16::<4>(a), nibble);
        let b_high = _mm256_and_si256(_mm256_srli_epi16::<4>(b), nibble);
        // Four groups of 32 values (each two sub-blocks of 16) as unsigned q + 32 (0..63).
        let groups = [
            _mm256_or_si256(_mm256_and_si256(a, nibble), high_bits[0]),
            _mm256_or_si256(_mm256_and_si256(b, nibble), high_bits[1]),
            _mm256_or_si256(a_high, high_bits[2]),
            _mm256_or_si256(b_high, high_bits[3]),
        ];
        // Σ (u - 32)·x per lane = maddubs(u, x) - maddubs(32, x): pairs below 2·63·128, exact.
        let [g0, g1, g2, g3] = core::array::from_fn(|g| {
            _mm256_sub_epi16(_mm256_maddubs_epi16(groups[g], xh[g]), bh[g])
        });
        // The halves of a group are its two sub-blocks; `unpacklo` pairs the low halves, so the
        // scale pairs are the single-row kernel's.
        let (pairs_01, pairs_23) = q6_k_scale_pairs(part::<i8, 8>(half_scales, 0));
        acc.add_pair_scaled(g0, g1, pairs_01);
        acc.add_pair_scaled(g2, g3, pairs_23);
    }
    acc.lanes()
}

/// `_mm256_permutevar8x32_ps` indices picking element `r` into every lane.
const ROW_INDEX: [[i32; 8]; ROWS] = [[0; 8], [1; 8], [2; 8], [3; 8]];

#[target_feature(enable = "avx2,f16c")]
fn rows_q6_k_avx2_impl(w: &[BlockQ6K], row_blocks: usize, x: &[BlockQ8K], out: &mut [f32]) {
    group_rows(
        w,
        row_blocks,
        x,
        out,
        [_mm256_setzero_ps(); ROWS],
        |sums, blocks, xb| {
            let xp = prepare_q6_k(xb);
            let [d0, d1, d2, d3] = blocks.map(|b| u16::from_le_bytes(b.d) as i16);
            // The four rows' `f16 · dx`, in lanes 0..3.
            let d = _mm_mul_ps(
                _mm_cvtph_ps(_mm_setr_epi16(d0, d1, d2, d3, 0, 0, 0, 0)),
                _mm_set1_ps(xb.scale()),
            );
            let d = _mm256_castps128_ps256(d);
            for ((sum, b), index) in sums.iter_mut().zip(blocks).zip(&ROW_INDEX) {
                // SAFETY: `index` is eight i32; `loadu` has no alignment requirement.
                let index = unsafe { _mm256_loadu_si256(index.as_ptr().cast()) };
                let d = _mm256_permutevar8x32_ps(d, index);
                let lanes = _mm256_cvtepi32_ps(q6_k_lanes(b, &xp));
                *sum = _mm256_add_ps(*sum, _mm256_mul_ps(d, lanes));
            }
        },
        |sums| sums.map(|s| add_lanes(0.0, s)),
        super::avx2::vec_dot_q6_k,
    )
}

/// Q6_K rows, AVX2.
pub(super) fn rows_q6_k_avx2(w: &[BlockQ6K], row_blocks: usize, x: &[BlockQ8K], out: &mut [f32]) {
    // SAFETY: as `rows_q4_k_avx2`.
    unsafe { rows_q6_k_avx2_impl(w, row_blocks, x, out) }
}
