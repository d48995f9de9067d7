//! The 32-value block types' multi-row kernels (`Ops::rows`: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
//! IQ4_NL, MXFP4): [`legacy_rows`] with eight rows in the lanes, each row keeping its scalar
//! twin's order of float operations. The integer sums are `vpdpbusd`'s at the VNNI level; Q5_0
//! and Q5_1 there read one block a vector, so that their fifth bits are an AVX-512 byte mask
//! loaded as stored. IQ4_NL and MXFP4 decode their codes through their level tables by
//! `vpshufb`, two blocks a vector as Q4_0.

use core::arch::x86_64::*;

use crate::quant::activation::{BlockQ8_0, BlockQ8_1};
use crate::quant::arch::x86_64::drivers::{
    legacy_rows, row_scales, transposed_less, Summary, LANES,
};
use crate::quant::arch::x86_64::primitives::{dpbusd, Primitives};
use crate::quant::arch::x86_64::tokens::{kernel, Avx2, Avx512Vnni};
use crate::quant::arch::x86_64::vector::{hsum_i32, load16, load32, opaque, part, transpose_sums};
use crate::quant::cast::f16_le;
use crate::quant::iq::iq4_nl::BlockIq4Nl;
use crate::quant::iq::tables::KVALUES_IQ4NL;
use crate::quant::legacy::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1};
use crate::quant::misc::fp4::{e8m0_to_f32_half, KVALUES_FP4};
use crate::quant::misc::mxfp4::BlockMxfp4;

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
        // picks [d0 d1 d2 d3 | d4 d5 d6 d7] and the m likewise (no cross-lane shuffle).
        let first = _mm256_cvtph_ps(self.first);
        let second = _mm256_cvtph_ps(self.second);
        (
            _mm256_shuffle_ps::<0b10_00_10_00>(first, second),
            _mm256_shuffle_ps::<0b11_01_11_01>(first, second),
        )
    }
}

/// The sixteen Q8 bytes at `start`, widened to i16.
#[inline]
#[target_feature(enable = "avx2")]
fn widen16(qs: &[i8; 32], start: usize) -> __m256i {
    _mm256_cvtepi8_epi16(load16(part(qs, start)))
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
fn pair_sums<P: Primitives, W>(
    p: P,
    bs: [&W; LANES],
    y: SplitActivation,
    bias_sum: i32,
    quants: impl Fn(&W, &W) -> (__m256i, __m256i),
) -> __m256i {
    let pair = |k: usize| {
        let (low, high) = quants(bs[k], bs[k + 4]);
        p.nibble_pair_sums(low, high, [y.low, y.high])
    };
    let (p0, p1, p2, p3) = (pair(0), pair(1), pair(2), pair(3));
    // [b0 b0 b1 b1 | b4 b4 b5 b5], [b2 b2 b3 b3 | b6 b6 b7 b7], then [b0..b3 | b4..b7].
    let totals = _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
    _mm256_sub_epi32(totals, _mm256_set1_epi32(bias_sum))
}

/// Q4_0 rows over [`pair_sums`].
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn q4_0_rows<P: Primitives>(
    p: P,
    w: &[BlockQ4_0],
    row_blocks: usize,
    x: &[BlockQ8_0],
    out: &mut [f32],
    single: impl Fn(&[BlockQ4_0], &[BlockQ8_0]) -> f32,
) {
    legacy_rows(
        w,
        row_blocks,
        x,
        out,
        // Σ (q - 8)·y = Σ q·y - 8·Σ y: the second part is the activation's, once per block.
        |xb| summary_q8_0(xb, 8),
        |bs, xb, a| {
            pair_sums(p, bs, split_activation(&xb.qs), a.bias_sum, |a, b| {
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

/// Q4_1 rows over [`pair_sums`].
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn q4_1_rows<P: Primitives>(
    p: P,
    w: &[BlockQ4_1],
    row_blocks: usize,
    x: &[BlockQ8_1],
    out: &mut [f32],
    single: impl Fn(&[BlockQ4_1], &[BlockQ8_1]) -> f32,
) {
    legacy_rows(
        w,
        row_blocks,
        x,
        out,
        summary_q8_1,
        |bs, xb, _| {
            pair_sums(p, bs, split_activation(&xb.qs), 0, |a, b| {
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
pub(super) fn q5_block_masked(qs: &[u8; 16], qh: [u8; 4]) -> __m256i {
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

/// Q5_0 rows, `block_sums(bs, y, bias_sum)` the eight rows' `Σ q·y − bias_sum` against
/// activation quants `y` ([`pair_sums`] at AVX2, [`q5_block_sums`] at VNNI).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn q5_0_rows(
    w: &[BlockQ5_0],
    row_blocks: usize,
    x: &[BlockQ8_0],
    out: &mut [f32],
    block_sums: impl Fn([&BlockQ5_0; LANES], &[i8; 32], i32) -> __m256i,
    single: impl Fn(&[BlockQ5_0], &[BlockQ8_0]) -> f32,
) {
    legacy_rows(
        w,
        row_blocks,
        x,
        out,
        // Σ (q - 16)·y = Σ q·y - 16·Σ y, the second part once per activation block.
        |xb| summary_q8_0(xb, 16),
        |bs, xb, a| block_sums(bs, &xb.qs, a.bias_sum),
        // `(dx * dy) * sumi`, the scalar order. The `d` from `Heads` (its second half, two qh
        // bytes, unused).
        |sumi, bs, _, a| {
            let dd = _mm256_mul_ps(Heads::of(bs).halves().0, _mm256_set1_ps(a.d));
            _mm256_mul_ps(dd, sumi)
        },
        single,
    )
}

/// Q5_1 rows, `block_sums` as for [`q5_0_rows`].
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn q5_1_rows(
    w: &[BlockQ5_1],
    row_blocks: usize,
    x: &[BlockQ8_1],
    out: &mut [f32],
    block_sums: impl Fn([&BlockQ5_1; LANES], &[i8; 32], i32) -> __m256i,
    single: impl Fn(&[BlockQ5_1], &[BlockQ8_1]) -> f32,
) {
    legacy_rows(
        w,
        row_blocks,
        x,
        out,
        summary_q8_1,
        |bs, xb, _| block_sums(bs, &xb.qs, 0),
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

/// A 16-entry table of levels plus `bias` (wrapping: `bias = -128` flips the sign bit, giving
/// the levels + 128 as unsigned bytes), in both 128-bit halves for `vpshufb`.
#[inline]
#[target_feature(enable = "avx2")]
fn biased_table(table: &[i8; 16], bias: i8) -> __m256i {
    let t = load16(table);
    let t = _mm_add_epi8(t, _mm_set1_epi8(bias));
    _mm256_set_m128i(t, t)
}

/// Two blocks' codes looked up in `table` (a [`biased_table`]), in the [`nibble_pair`] layout.
#[inline]
#[target_feature(enable = "avx2")]
fn level_pair(a: &[u8; 16], b: &[u8; 16], table: __m256i) -> (__m256i, __m256i) {
    let (low, high) = nibble_pair(a, b);
    (
        _mm256_shuffle_epi8(table, low),
        _mm256_shuffle_epi8(table, high),
    )
}

/// Eight IQ4_NL blocks' `Σ level·y` (exact), block `l` in lane `l`, AVX2: the signed levels of
/// two blocks a vector ([`level_pair`], unbiased), multiplied as `maddubs(|y|, sign(level, y))`.
/// Exact for every activation byte: `|y|` of -128 is 128 as an unsigned byte, and no level is
/// -128, so `sign` never wraps; a pair is at most 2 · 128 · 127 < 2^15, so no saturation. Each
/// half is widened by `madd` on its own (two halves' pairs together could pass 2^15).
#[inline]
#[target_feature(enable = "avx2")]
fn iq4_nl_signed_sums(bs: [&BlockIq4Nl; LANES], y: SplitActivation) -> __m256i {
    let table = biased_table(&KVALUES_IQ4NL, 0);
    let (abs_low, abs_high) = (_mm256_abs_epi8(y.low), _mm256_abs_epi8(y.high));
    let ones = _mm256_set1_epi16(1);
    let pair = |k: usize| {
        let (low, high) = level_pair(&bs[k].qs, &bs[k + 4].qs, table);
        let low = _mm256_maddubs_epi16(abs_low, _mm256_sign_epi8(low, y.low));
        let high = _mm256_maddubs_epi16(abs_high, _mm256_sign_epi8(high, y.high));
        _mm256_add_epi32(_mm256_madd_epi16(low, ones), _mm256_madd_epi16(high, ones))
    };
    let (p0, p1, p2, p3) = (pair(0), pair(1), pair(2), pair(3));
    // As in `pair_sums`: [b0..b3 | b4..b7] after three `hadd` levels.
    _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3))
}

/// `(dy * dx) * sumi`, the scalar order of the IQ4_NL term.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn iq4_nl_term(sumi: __m256, bs: [&BlockIq4Nl; LANES], a: &Summary) -> __m256 {
    let d = _mm256_mul_ps(_mm256_set1_ps(a.d), row_scales(bs, |b| b.d));
    _mm256_mul_ps(d, sumi)
}

/// `(dy * scale) * sumi`, the scalar order of the MXFP4 term, `scale` half the E8M0 value
/// (`e8m0_to_f32_half`). The eight scales are formed in general registers and stored: built in
/// the lanes from inserted bytes they were slower, the inserts competing with the lookups' shuffles
/// (figures: docs/kernel-experiments.md, "IQ4_NL and MXFP4 rows kernels").
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn mxfp4_term(sumi: __m256, bs: [&BlockMxfp4; LANES], a: &Summary) -> __m256 {
    let mut scales = [0.0f32; LANES];
    for (s, b) in scales.iter_mut().zip(bs) {
        *s = e8m0_to_f32_half(b.e);
    }
    // SAFETY: `scales` holds eight f32; `loadu` has no alignment requirement.
    let scale = unsafe { _mm256_loadu_ps(scales.as_ptr()) };
    _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(a.d), scale), sumi)
}

/// MXFP4 rows over [`pair_sums`]: the E2M1 levels (|level| ≤ 12) plus 12 are below 32, so the
/// unsigned-quant sums apply, less `12 · Σ y` from the summary.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn mxfp4_rows<P: Primitives>(
    p: P,
    w: &[BlockMxfp4],
    row_blocks: usize,
    x: &[BlockQ8_0],
    out: &mut [f32],
    summarize: impl Fn(&BlockQ8_0) -> Summary,
    single: impl Fn(&[BlockMxfp4], &[BlockQ8_0]) -> f32,
) {
    legacy_rows(
        w,
        row_blocks,
        x,
        out,
        summarize,
        |bs, xb, a| {
            let table = biased_table(&KVALUES_FP4, MXFP4_BIAS);
            pair_sums(p, bs, split_activation(&xb.qs), a.bias_sum, |a, b| {
                level_pair(&a.qs, &b.qs, table)
            })
        },
        |sumi, bs, _, a| mxfp4_term(sumi, bs, a),
        single,
    )
}

/// The bias that makes the MXFP4 levels unsigned (and below 32, for `maddubs` pairs).
const MXFP4_BIAS: i8 = 12;

kernel! {
    /// Q8_0 rows, AVX2.
    #[target_feature(enable = "avx2,f16c")]
    pub(in super::super) fn rows_q8_0(
        t: Avx2,
        w: &[BlockQ8_0],
        row_blocks: usize,
        x: &[BlockQ8_0],
        out: &mut [f32],
    ) {
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
            |w, x| super::vec_dot_q8_0(t, w, x),
        )
    }

    /// Q8_0 rows, AVX-512 VNNI.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(in super::super) fn rows_q8_0_vnni(
        t: Avx512Vnni,
        w: &[BlockQ8_0],
        row_blocks: usize,
        x: &[BlockQ8_0],
        out: &mut [f32],
    ) {
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
            |w, x| super::vec_dot_q8_0_vnni(t, w, x),
        )
    }

    /// Q4_0 rows, AVX2.
    #[target_feature(enable = "avx2,f16c")]
    pub(in super::super) fn rows_q4_0(
        t: Avx2,
        w: &[BlockQ4_0],
        row_blocks: usize,
        x: &[BlockQ8_0],
        out: &mut [f32],
    ) {
        q4_0_rows(t, w, row_blocks, x, out, |w, x| {
            super::vec_dot_q4_0(t, w, x)
        })
    }

    /// Q4_0 rows, AVX-512 VNNI (integer sums by `vpdpbusd`).
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(in super::super) fn rows_q4_0_vnni(
        t: Avx512Vnni,
        w: &[BlockQ4_0],
        row_blocks: usize,
        x: &[BlockQ8_0],
        out: &mut [f32],
    ) {
        q4_0_rows(t, w, row_blocks, x, out, |w, x| {
            super::vec_dot_q4_0_vnni(t, w, x)
        })
    }

    /// Q4_1 rows, AVX2.
    #[target_feature(enable = "avx2,f16c")]
    pub(in super::super) fn rows_q4_1(
        t: Avx2,
        w: &[BlockQ4_1],
        row_blocks: usize,
        x: &[BlockQ8_1],
        out: &mut [f32],
    ) {
        q4_1_rows(t, w, row_blocks, x, out, |w, x| {
            super::vec_dot_q4_1(t, w, x)
        })
    }

    /// Q4_1 rows, AVX-512 VNNI (integer sums by `vpdpbusd`).
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(in super::super) fn rows_q4_1_vnni(
        t: Avx512Vnni,
        w: &[BlockQ4_1],
        row_blocks: usize,
        x: &[BlockQ8_1],
        out: &mut [f32],
    ) {
        q4_1_rows(t, w, row_blocks, x, out, |w, x| {
            super::vec_dot_q4_1(t.avx2(), w, x)
        })
    }

    /// Q5_0 rows, AVX2: two blocks a vector ([`pair_sums`]).
    #[target_feature(enable = "avx2,f16c")]
    pub(in super::super) fn rows_q5_0(
        t: Avx2,
        w: &[BlockQ5_0],
        row_blocks: usize,
        x: &[BlockQ8_0],
        out: &mut [f32],
    ) {
        let block_sums = |bs: [&BlockQ5_0; LANES], y: &[i8; 32], bias_sum| {
            pair_sums(t, bs, split_activation(y), bias_sum, |a, b| {
                q5_pair((&a.qs, &b.qs), (a.qh, b.qh))
            })
        };
        q5_0_rows(w, row_blocks, x, out, block_sums, |w, x| {
            super::vec_dot_q5_0(t, w, x)
        })
    }

    /// Q5_0 rows, AVX-512 VNNI: one block a vector ([`q5_block_sums`]).
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(in super::super) fn rows_q5_0_vnni(
        t: Avx512Vnni,
        w: &[BlockQ5_0],
        row_blocks: usize,
        x: &[BlockQ8_0],
        out: &mut [f32],
    ) {
        let block_sums = |bs: [&BlockQ5_0; LANES], y: &[i8; 32], bias_sum| {
            q5_block_sums(bs, y, bias_sum, |b| (&b.qs, b.qh))
        };
        q5_0_rows(w, row_blocks, x, out, block_sums, |w, x| {
            super::vec_dot_q5_0(t.avx2(), w, x)
        })
    }

    /// Q5_1 rows, AVX2: two blocks a vector ([`pair_sums`]).
    #[target_feature(enable = "avx2,f16c")]
    pub(in super::super) fn rows_q5_1(
        t: Avx2,
        w: &[BlockQ5_1],
        row_blocks: usize,
        x: &[BlockQ8_1],
        out: &mut [f32],
    ) {
        let block_sums = |bs: [&BlockQ5_1; LANES], y: &[i8; 32], bias_sum| {
            pair_sums(t, bs, split_activation(y), bias_sum, |a, b| {
                q5_pair((&a.qs, &b.qs), (a.qh, b.qh))
            })
        };
        q5_1_rows(w, row_blocks, x, out, block_sums, |w, x| {
            super::vec_dot_q5_1(t, w, x)
        })
    }

    /// Q5_1 rows, AVX-512 VNNI: one block a vector ([`q5_block_sums`]).
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(in super::super) fn rows_q5_1_vnni(
        t: Avx512Vnni,
        w: &[BlockQ5_1],
        row_blocks: usize,
        x: &[BlockQ8_1],
        out: &mut [f32],
    ) {
        let block_sums = |bs: [&BlockQ5_1; LANES], y: &[i8; 32], bias_sum| {
            q5_block_sums(bs, y, bias_sum, |b| (&b.qs, b.qh))
        };
        q5_1_rows(w, row_blocks, x, out, block_sums, |w, x| {
            super::vec_dot_q5_1(t.avx2(), w, x)
        })
    }
    /// IQ4_NL rows, AVX2: signed levels by `vpshufb`, products by the sign trick on the
    /// activation side ([`iq4_nl_signed_sums`]).
    #[target_feature(enable = "avx2,f16c")]
    pub(in super::super) fn rows_iq4_nl(
        t: Avx2,
        w: &[BlockIq4Nl],
        row_blocks: usize,
        x: &[BlockQ8_0],
        out: &mut [f32],
    ) {
        legacy_rows(
            w,
            row_blocks,
            x,
            out,
            |xb| summary_q8_0(xb, 0),
            |bs, xb, _| iq4_nl_signed_sums(bs, split_activation(&xb.qs)),
            |sumi, bs, _, a| iq4_nl_term(sumi, bs, a),
            |w, x| super::vec_dot_iq4_nl(t, w, x),
        )
    }

    /// IQ4_NL rows, AVX-512 VNNI: the levels + 128 by `vpshufb` as unsigned bytes, `vpdpbusd`,
    /// less `128 · Σ y` once per activation block.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(in super::super) fn rows_iq4_nl_vnni(
        t: Avx512Vnni,
        w: &[BlockIq4Nl],
        row_blocks: usize,
        x: &[BlockQ8_0],
        out: &mut [f32],
    ) {
        legacy_rows(
            w,
            row_blocks,
            x,
            out,
            |xb| summary_vnni(xb, -128),
            |bs, xb, a| {
                let table = biased_table(&KVALUES_IQ4NL, -128);
                pair_sums(t, bs, split_activation(&xb.qs), a.bias_sum, |a, b| {
                    level_pair(&a.qs, &b.qs, table)
                })
            },
            |sumi, bs, _, a| iq4_nl_term(sumi, bs, a),
            |w, x| super::vec_dot_iq4_nl(t.avx2(), w, x),
        )
    }

    /// MXFP4 rows, AVX2 ([`mxfp4_rows`]).
    #[target_feature(enable = "avx2,f16c")]
    pub(in super::super) fn rows_mxfp4(
        t: Avx2,
        w: &[BlockMxfp4],
        row_blocks: usize,
        x: &[BlockQ8_0],
        out: &mut [f32],
    ) {
        mxfp4_rows(
            t,
            w,
            row_blocks,
            x,
            out,
            |xb| summary_q8_0(xb, MXFP4_BIAS),
            |w, x| super::vec_dot_mxfp4(t, w, x),
        )
    }

    /// MXFP4 rows, AVX-512 VNNI ([`mxfp4_rows`], integer sums by `vpdpbusd`).
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(in super::super) fn rows_mxfp4_vnni(
        t: Avx512Vnni,
        w: &[BlockMxfp4],
        row_blocks: usize,
        x: &[BlockQ8_0],
        out: &mut [f32],
    ) {
        mxfp4_rows(
            t,
            w,
            row_blocks,
            x,
            out,
            |xb| summary_vnni(xb, MXFP4_BIAS),
            |w, x| super::vec_dot_mxfp4(t.avx2(), w, x),
        )
    }
}
