//! The packed-rows kernels (`Ops::packed_rows` at AVX2 and AVX-512 VNNI, `Ops::packed_matmul` at
//! AVX-512 VNNI: Q4_0, Q4_1, Q5_0 and Q8_0 in the layout of `quant::packed`):
//! 16 rows' outputs in the lanes of one AVX-512 vector (two AVX2 vectors), the quant dwords of a
//! group's block multiplied against the broadcast activation dwords, so no sum is ever reduced
//! across lanes.
//!
//! Integer sums are exact for every byte: AVX-512 `vpdpbusd` of the unsigned nibbles (Q4_0,
//! Q4_1), of Q5_0's nibbles with their fifth bits (`q + 16`), or of Q8_0's quants stored `+ 128`,
//! against the signed activations, with `-8 · Σ x` (Q4_0), `-16 · Σ x` (Q5_0) or `-128 · Σ x`
//! (Q8_0) as the sum's start; AVX2 `maddubs` of 4-bit values (Q8_0's stored byte split into its
//! two nibbles), at most 8 · 2 · 15 · 128 in an i16 lane, then one `madd` into each row's i32
//! lane (Q5_0's 5-bit values: two lanes of at most 4 · 2 · 31 · 128). The float steps are the
//! scalar twin's, lane by lane, blocks in order, unfused.

// The matmul entries take the token and `PackedMatmulFn`'s seven arguments.
#![allow(clippy::too_many_arguments)]

use crate::quant::OutputColumns;
use core::arch::x86_64::*;

use crate::quant::activation::{BlockQ8_0, BlockQ8_1};
use crate::quant::arch::x86_64::tokens::{kernel, Avx2, Avx512Vnni};
use crate::quant::arch::x86_64::vector::{f16_le as f16c, load16, load32, part, prefetch_range};
use crate::quant::cast::f16_le;
use crate::quant::packed::GROUP_ROWS;

/// The packed types, as the kernels' const parameter.
pub(in crate::quant::arch::x86_64) const Q4_0: u8 = 0;
pub(in crate::quant::arch::x86_64) const Q4_1: u8 = 1;
pub(in crate::quant::arch::x86_64) const Q8_0: u8 = 2;
pub(in crate::quant::arch::x86_64) const Q5_0: u8 = 3;

/// Bytes of one packed block of a group's 16 rows, by type.
pub(in crate::quant::arch::x86_64) const Q4_0_GROUP_BLOCK: usize = GROUP_ROWS * 18;
pub(in crate::quant::arch::x86_64) const Q4_1_GROUP_BLOCK: usize = GROUP_ROWS * 20;
pub(in crate::quant::arch::x86_64) const Q8_0_GROUP_BLOCK: usize = GROUP_ROWS * 34;
pub(in crate::quant::arch::x86_64) const Q5_0_GROUP_BLOCK: usize = GROUP_ROWS * 22;

/// Where the rows' f16 `d` start in a group's block (after the quant dwords), and their `m`.
pub(in crate::quant::arch::x86_64) const fn scales_at(kind: u8) -> usize {
    if kind == Q8_0 {
        GROUP_ROWS * 32
    } else {
        GROUP_ROWS * 16
    }
}
pub(in crate::quant::arch::x86_64) const MINS_AT: usize = GROUP_ROWS * 18;
/// Where Q5_0's stored fifth bits start: the rows' low halves, then their high halves.
const FIFTH_BITS_AT: usize = GROUP_ROWS * 18;

/// An activation block as the kernels read it.
pub(in crate::quant::arch::x86_64) trait Column:
    bytemuck::Pod
{
    /// `d`, f16 little-endian.
    fn d_half(&self) -> [u8; 2];
    /// Q8_1's `s` (0 for Q8_0, unused).
    fn s_half(&self) -> [u8; 2];
    fn qs(&self) -> &[i8; 32];
    fn d(&self) -> f32 {
        f16_le(self.d_half())
    }
    fn s(&self) -> f32 {
        f16_le(self.s_half())
    }
}

impl Column for BlockQ8_0 {
    fn d_half(&self) -> [u8; 2] {
        self.d
    }
    fn s_half(&self) -> [u8; 2] {
        [0, 0]
    }
    fn qs(&self) -> &[i8; 32] {
        &self.qs
    }
}

impl Column for BlockQ8_1 {
    fn d_half(&self) -> [u8; 2] {
        self.d
    }
    fn s_half(&self) -> [u8; 2] {
        self.s
    }
    fn qs(&self) -> &[i8; 32] {
        &self.qs
    }
}

/// The integer sum's start for an activation block: the exact `-bias · Σ x` that turns the stored
/// unsigned weights' dot into the signed quants' one (Q4_0's nibbles are `q + 8`, Q8_0's bytes
/// `q + 128`; Q4_1's nibbles are its quants).
#[inline(always)]
fn start<const KIND: u8>(qs: &[i8; 32]) -> i32 {
    let bias = match KIND {
        Q4_0 => 8,
        Q5_0 => 16,
        Q8_0 => 128,
        _ => return 0,
    };
    -bias * qs.iter().map(|&q| i32::from(q)).sum::<i32>()
}

/// The activation block's quants as eight dwords.
#[inline(always)]
fn dwords(qs: &[i8; 32]) -> [i32; 8] {
    bytemuck::cast(*qs)
}

/// The scalar twin's float step on 16 rows' lanes: `sumf` plus the block's term from its exact
/// integer sum `sumi` (as f32), the rows' `d_w`, `m_w` and the activation block's `d_x`, `s_x`
/// (broadcast), in the twin's order, unfused.
#[inline]
#[target_feature(enable = "avx512f")]
pub(in crate::quant::arch::x86_64) fn step<const KIND: u8>(
    sumf: __m512,
    sumi: __m512,
    dw: __m512,
    mw: __m512,
    dx: __m512,
    sx: __m512,
) -> __m512 {
    let term = match KIND {
        // `(d_w · d_x) · sumi + m_w · s_x`
        Q4_1 => _mm512_add_ps(
            _mm512_mul_ps(_mm512_mul_ps(dw, dx), sumi),
            _mm512_mul_ps(mw, sx),
        ),
        // `sumi · (d_w · d_x)` (Q5_0's `(d_w · d_x) · sumi`: the same product)
        Q8_0 | Q5_0 => _mm512_mul_ps(sumi, _mm512_mul_ps(dw, dx)),
        // `sumi · d_w · d_x`
        _ => _mm512_mul_ps(_mm512_mul_ps(sumi, dw), dx),
    };
    _mm512_add_ps(sumf, term)
}

/// The 16 rows' stored Q5_0 fifth bits (`quant::packed`'s spread order), a row a lane.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn fifth_bits(bytes: &[u8; Q5_0_GROUP_BLOCK]) -> __m512i {
    // Low half `r` at word `r`, high half at word `16 + r`: interleave them into dword `r`.
    const HALVES: [i16; 32] = {
        let mut words = [0i16; 32];
        let mut r = 0;
        while r < 16 {
            words[2 * r] = r as i16;
            words[2 * r + 1] = 16 + r as i16;
            r += 1;
        }
        words
    };
    // SAFETY: the array holds 32 words; `loadu` has no alignment requirement.
    let order = unsafe { _mm512_loadu_si512(HALVES.as_ptr().cast()) };
    _mm512_permutexvar_epi16(order, load64(part(bytes, FIFTH_BITS_AT)))
}

/// The stored Q5_0 fifth bits of rows `8 · half ..` of a group, a row a lane (AVX2).
#[inline]
#[target_feature(enable = "avx2")]
fn fifth_bits_ymm<const GBB: usize>(bytes: &[u8; GBB], half: usize) -> __m256i {
    let at = FIFTH_BITS_AT + 16 * half;
    let low = _mm256_cvtepu16_epi32(load16(part(bytes, at)));
    let high = _mm256_cvtepu16_epi32(load16(part(bytes, at + 32)));
    _mm256_or_si256(low, _mm256_slli_epi32::<16>(high))
}

/// Q5_0's quant dword `j` of 16 rows (`v`) as its eight unsigned 5-bit weights a row: the low
/// nibbles (activation dword `j`) and the high ones (dword `4 + j`), each byte's fifth bit from
/// `fifth` ([`fifth_bits`]) put at bit 4.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn q5_0_weights<const J: u32>(v: __m512i, fifth: __m512i) -> (__m512i, __m512i) {
    let nibble = _mm512_set1_epi8(0x0f);
    let bit4 = _mm512_set1_epi8(0x10);
    let low_bits = _mm512_and_si512(
        _mm512_sll_epi32(fifth, _mm_cvtsi32_si128(4 - J as i32)),
        bit4,
    );
    let high_bits = _mm512_and_si512(_mm512_srl_epi32(fifth, _mm_cvtsi32_si128(J as i32)), bit4);
    // `(a & b) | c`, bit by bit.
    const AND_OR: i32 = 0xea;
    (
        _mm512_ternarylogic_epi32::<AND_OR>(v, nibble, low_bits),
        _mm512_ternarylogic_epi32::<AND_OR>(_mm512_srli_epi16::<4>(v), nibble, high_bits),
    )
}

/// A block's eight weight vectors of 16 rows, vector `i` for activation dword `i`: Q4_0's and
/// Q4_1's nibbles, Q5_0's 5-bit weights, or Q8_0's stored bytes.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn weight_vectors<const KIND: u8, const GBB: usize>(bytes: &[u8; GBB]) -> [__m512i; 8] {
    if KIND == Q8_0 {
        return core::array::from_fn(|i| load64(part(bytes, 64 * i)));
    }
    let v: [__m512i; 4] = core::array::from_fn(|j| load64(part(bytes, 64 * j)));
    if KIND == Q5_0 {
        let fifth = fifth_bits(part(bytes, 0));
        let (l0, h0) = q5_0_weights::<0>(v[0], fifth);
        let (l1, h1) = q5_0_weights::<1>(v[1], fifth);
        let (l2, h2) = q5_0_weights::<2>(v[2], fifth);
        let (l3, h3) = q5_0_weights::<3>(v[3], fifth);
        return [l0, l1, l2, l3, h0, h1, h2, h3];
    }
    let nibble = _mm512_set1_epi8(0x0f);
    core::array::from_fn(|i| {
        if i < 4 {
            _mm512_and_si512(v[i], nibble)
        } else {
            _mm512_and_si512(_mm512_srli_epi16::<4>(v[i - 4]), nibble)
        }
    })
}

/// How far ahead in its group's run of blocks a kernel asks for weights.
const PREFETCH_BYTES: usize = 2048;

/// Activation blocks whose terms [`Terms`] holds at once.
const CHUNK: usize = 64;

/// The scalar terms of up to [`CHUNK`] activation blocks, computed once for all groups: `d`, `s`
/// (Q4_1) and the integer sum's start.
struct Terms {
    d: [f32; CHUNK],
    s: [f32; CHUNK],
    start: [i32; CHUNK],
}

impl Terms {
    #[inline(always)]
    fn of<X: Column, const KIND: u8>(x: &[X]) -> Terms {
        let mut terms = Terms {
            d: [0.0; CHUNK],
            s: [0.0; CHUNK],
            start: [0; CHUNK],
        };
        for (i, xb) in x.iter().take(CHUNK).enumerate() {
            terms.d[i] = xb.d();
            terms.s[i] = xb.s();
            terms.start[i] = start::<KIND>(xb.qs());
        }
        terms
    }
}

/// 64 bytes as a vector.
#[inline]
#[target_feature(enable = "avx512f")]
fn load64(bytes: &[u8; 64]) -> __m512i {
    // SAFETY: the array holds 64 bytes; `loadu` has no alignment requirement.
    unsafe { _mm512_loadu_si512(bytes.as_ptr().cast()) }
}

/// A run of activation blocks: the first block's index, the blocks, their terms, and whether
/// the outputs already hold the sums of the blocks before it.
struct Run<'a, X> {
    first: usize,
    x: &'a [X],
    terms: &'a Terms,
    resume: bool,
}

/// Whole groups of `packed` against `x`, [`CHUNK`] activation blocks at a time (their terms
/// computed once), through `quad` (four groups) and then `single` (one).
#[inline(always)]
fn each_group<X: Column, const KIND: u8, const GBB: usize>(
    packed: &[u8],
    row_blocks: usize,
    x: &[X],
    out: &mut [f32],
    mut quad: impl FnMut(&[u8], &mut [f32], &Run<'_, X>),
    mut single: impl FnMut(&[u8], &mut [f32], &Run<'_, X>),
) {
    let group_bytes = GBB * row_blocks;
    let Some(x) = x.get(..row_blocks).filter(|_| group_bytes != 0) else {
        out.fill(0.0);
        return;
    };
    for (c, chunk) in x.chunks(CHUNK).enumerate() {
        let terms = Terms::of::<X, KIND>(chunk);
        let run = Run {
            first: c * CHUNK,
            x: chunk,
            terms: &terms,
            resume: c > 0,
        };
        let mut packed_quads = packed.chunks_exact(4 * group_bytes);
        let mut out_quads = out.chunks_exact_mut(4 * GROUP_ROWS);
        for (p, o) in packed_quads.by_ref().zip(out_quads.by_ref()) {
            quad(p, o, &run);
        }
        let (packed, out) = (packed_quads.remainder(), out_quads.into_remainder());
        for (p, o) in packed
            .chunks_exact(group_bytes)
            .zip(out.chunks_exact_mut(GROUP_ROWS))
        {
            single(p, o, &run);
        }
    }
}

/// Groups `0..G` of `groups` (each `GBB · row_blocks` bytes) at AVX-512 VNNI: each activation
/// dword broadcast once for all of them, one vector of 16 sums a group.
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn groups_zmm<X: Column, const KIND: u8, const G: usize, const GBB: usize>(
    groups: &[u8],
    row_blocks: usize,
    run: &Run<'_, X>,
    out: &mut [f32],
) {
    let group_bytes = GBB * row_blocks;
    let mut sumf = [_mm512_setzero_ps(); G];
    if run.resume {
        for (sumf, out) in sumf.iter_mut().zip(out.chunks_exact(GROUP_ROWS)) {
            if let Some(out) = out.first_chunk::<16>() {
                // SAFETY: `out` holds 16 f32; `loadu` has no alignment requirement.
                *sumf = unsafe { _mm512_loadu_ps(out.as_ptr()) };
            }
        }
    }
    let terms = run.terms;
    for (i, xb) in run.x.iter().enumerate().take(CHUNK) {
        let b = run.first + i;
        let xv = dwords(xb.qs()).map(|w| _mm512_set1_epi32(w));
        let (dx, sx) = (terms.d[i], terms.s[i]);
        let start = _mm512_set1_epi32(terms.start[i]);
        for (k, sumf) in sumf.iter_mut().enumerate() {
            let bytes: &[u8; GBB] = part(groups, k * group_bytes + b * GBB);
            prefetch_range(
                bytes.as_ptr().cast::<i8>().wrapping_add(PREFETCH_BYTES),
                GBB,
            );
            // Two chains (integer sums: any split is exact), joined after.
            let (mut even, mut odd) = (start, _mm512_setzero_si512());
            let w = weight_vectors::<KIND, GBB>(bytes);
            for j in 0..4 {
                even = _mm512_dpbusd_epi32(even, w[2 * j], xv[2 * j]);
                odd = _mm512_dpbusd_epi32(odd, w[2 * j + 1], xv[2 * j + 1]);
            }
            let sumi = _mm512_cvtepi32_ps(_mm512_add_epi32(even, odd));
            // f16 to f32 is exact.
            let dw = _mm512_cvtph_ps(load32(part(bytes, scales_at(KIND))));
            let mw = if KIND == Q4_1 {
                _mm512_cvtph_ps(load32(part(bytes, MINS_AT)))
            } else {
                _mm512_setzero_ps()
            };
            let (dx, sx) = (_mm512_set1_ps(dx), _mm512_set1_ps(sx));
            *sumf = step::<KIND>(*sumf, sumi, dw, mw, dx, sx);
        }
    }
    for (out, sumf) in out.chunks_exact_mut(GROUP_ROWS).zip(sumf) {
        if let Some(out) = out.first_chunk_mut::<16>() {
            // SAFETY: `out` holds 16 f32; `storeu` has no alignment requirement.
            unsafe { _mm512_storeu_ps(out.as_mut_ptr(), sumf) };
        }
    }
}

/// One group at AVX2: rows 0..8 and 8..16 of it in the lanes of two vectors.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn group_ymm<X: Column, const KIND: u8, const GBB: usize>(
    group: &[u8],
    run: &Run<'_, X>,
    out: &mut [f32],
) {
    let nibble = _mm256_set1_epi8(0x0f);
    let ones = _mm256_set1_epi16(1);
    let mut sumf = [_mm256_setzero_ps(); 2];
    if run.resume {
        for (sumf, out) in sumf.iter_mut().zip(out.chunks_exact(8)) {
            if let Some(out) = out.first_chunk::<8>() {
                // SAFETY: `out` holds 8 f32; `loadu` has no alignment requirement.
                *sumf = unsafe { _mm256_loadu_ps(out.as_ptr()) };
            }
        }
    }
    let terms = run.terms;
    for (i, xb) in run.x.iter().enumerate().take(CHUNK) {
        let b = run.first + i;
        let xv = dwords(xb.qs()).map(|w| _mm256_set1_epi32(w));
        let (dx, sx) = (terms.d[i], terms.s[i]);
        let start = _mm256_set1_epi32(terms.start[i]);
        let bytes: &[u8; GBB] = part(group, b * GBB);
        prefetch_range(
            bytes.as_ptr().cast::<i8>().wrapping_add(PREFETCH_BYTES),
            GBB,
        );
        for (half, sumf) in sumf.iter_mut().enumerate() {
            let sumi = if KIND == Q5_0 {
                // Four 5-bit products a pair sum at most 4 · 2 · 31 · 128 in an i16 lane.
                let fifth = fifth_bits_ymm(bytes, half);
                let bit4 = _mm256_set1_epi8(0x10);
                let (mut low_pairs, mut high_pairs) =
                    (_mm256_setzero_si256(), _mm256_setzero_si256());
                for j in 0..4 {
                    let v = load32(part(bytes, 64 * j + 32 * half));
                    let low_bits = _mm256_sll_epi32(fifth, _mm_cvtsi32_si128(4 - j as i32));
                    let high_bits = _mm256_srl_epi32(fifth, _mm_cvtsi32_si128(j as i32));
                    let low = _mm256_or_si256(
                        _mm256_and_si256(v, nibble),
                        _mm256_and_si256(low_bits, bit4),
                    );
                    let high = _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16::<4>(v), nibble),
                        _mm256_and_si256(high_bits, bit4),
                    );
                    low_pairs = _mm256_add_epi16(low_pairs, _mm256_maddubs_epi16(low, xv[j]));
                    high_pairs =
                        _mm256_add_epi16(high_pairs, _mm256_maddubs_epi16(high, xv[4 + j]));
                }
                let low = _mm256_madd_epi16(low_pairs, ones);
                let high = _mm256_madd_epi16(high_pairs, ones);
                _mm256_add_epi32(_mm256_add_epi32(low, high), start)
            } else if KIND == Q8_0 {
                // Each stored byte `q + 128` as `16 · high + low`, both 4-bit.
                let (mut low_pairs, mut high_pairs) =
                    (_mm256_setzero_si256(), _mm256_setzero_si256());
                for (j, &xj) in xv.iter().enumerate() {
                    let v = load32(part(bytes, 64 * j + 32 * half));
                    let low = _mm256_and_si256(v, nibble);
                    let high = _mm256_and_si256(_mm256_srli_epi16::<4>(v), nibble);
                    low_pairs = _mm256_add_epi16(low_pairs, _mm256_maddubs_epi16(low, xj));
                    high_pairs = _mm256_add_epi16(high_pairs, _mm256_maddubs_epi16(high, xj));
                }
                let low = _mm256_madd_epi16(low_pairs, ones);
                let high = _mm256_slli_epi32::<4>(_mm256_madd_epi16(high_pairs, ones));
                _mm256_add_epi32(_mm256_add_epi32(low, high), start)
            } else {
                let mut pairs = _mm256_setzero_si256();
                for j in 0..4 {
                    let v = load32(part(bytes, 64 * j + 32 * half));
                    let low = _mm256_and_si256(v, nibble);
                    let high = _mm256_and_si256(_mm256_srli_epi16::<4>(v), nibble);
                    pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(low, xv[j]));
                    pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(high, xv[4 + j]));
                }
                _mm256_add_epi32(_mm256_madd_epi16(pairs, ones), start)
            };
            let sumi = _mm256_cvtepi32_ps(sumi);
            let dw = _mm256_cvtph_ps(load16(part(bytes, scales_at(KIND) + 16 * half)));
            let term = match KIND {
                Q4_1 => {
                    let mw = _mm256_cvtph_ps(load16(part(bytes, MINS_AT + 16 * half)));
                    _mm256_add_ps(
                        _mm256_mul_ps(_mm256_mul_ps(dw, _mm256_set1_ps(dx)), sumi),
                        _mm256_mul_ps(mw, _mm256_set1_ps(sx)),
                    )
                }
                Q8_0 | Q5_0 => _mm256_mul_ps(sumi, _mm256_mul_ps(dw, _mm256_set1_ps(dx))),
                _ => _mm256_mul_ps(_mm256_mul_ps(sumi, dw), _mm256_set1_ps(dx)),
            };
            *sumf = _mm256_add_ps(*sumf, term);
        }
    }
    for (out, sumf) in out.chunks_exact_mut(8).zip(sumf) {
        if let Some(out) = out.first_chunk_mut::<8>() {
            // SAFETY: `out` holds 8 f32; `storeu` has no alignment requirement.
            unsafe { _mm256_storeu_ps(out.as_mut_ptr(), sumf) };
        }
    }
}

/// The AVX-512 entry body: four groups at a time (64 rows, four independent chains), then one.
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn rows_zmm<X: Column, const KIND: u8, const GBB: usize>(
    packed: &[u8],
    row_blocks: usize,
    x: &[X],
    out: &mut [f32],
) {
    each_group::<X, KIND, GBB>(
        packed,
        row_blocks,
        x,
        out,
        |p, o, run| groups_zmm::<X, KIND, 4, GBB>(p, row_blocks, run, o),
        |p, o, run| groups_zmm::<X, KIND, 1, GBB>(p, row_blocks, run, o),
    );
}

/// The AVX2 entry body: one group at a time.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn rows_ymm<X: Column, const KIND: u8, const GBB: usize>(
    packed: &[u8],
    row_blocks: usize,
    x: &[X],
    out: &mut [f32],
) {
    let group_bytes = GBB * row_blocks;
    let single = |p: &[u8], o: &mut [f32], run: &Run<'_, X>| group_ymm::<X, KIND, GBB>(p, run, o);
    each_group::<X, KIND, GBB>(
        packed,
        row_blocks,
        x,
        out,
        |p, o, run| {
            for (p, o) in p
                .chunks_exact(group_bytes)
                .zip(o.chunks_exact_mut(GROUP_ROWS))
            {
                single(p, o, run);
            }
        },
        single,
    );
}

/// The AVX-512 packed matmul body: for each group, its columns eight at a time, then four, then
/// one (eight: each block's weight vectors split once for eight columns' `vpdpbusd`s, about one
/// a cycle, the instruction's throughput).
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn matmul_zmm<X: Column, const KIND: u8, const GBB: usize>(
    packed: &[u8],
    row_blocks: usize,
    x: &[X],
    starts: &[[u8; 4]],
    n: usize,
    y: &mut OutputColumns<'_, '_>,
) {
    // (No blocks: no group's size to count them by; the caller fills such outputs.)
    let group_bytes = GBB * row_blocks;
    if group_bytes == 0 {
        return;
    }
    for (g, group) in packed.chunks_exact(group_bytes).enumerate() {
        let mut c = 0;
        while c + 8 <= n {
            tile_zmm::<X, KIND, 8, GBB>(group, row_blocks, x, starts, c, g, y);
            c += 8;
        }
        if c + 4 <= n {
            tile_zmm::<X, KIND, 4, GBB>(group, row_blocks, x, starts, c, g, y);
            c += 4;
        }
        while c < n {
            tile_zmm::<X, KIND, 1, GBB>(group, row_blocks, x, starts, c, g, y);
            c += 1;
        }
    }
}

/// Group `g` (its bytes `group`) against columns `first..first + C`: each block's weight
/// vectors loaded and split into nibbles once for the `C` columns.
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn tile_zmm<X: Column, const KIND: u8, const C: usize, const GBB: usize>(
    group: &[u8],
    row_blocks: usize,
    x: &[X],
    starts: &[[u8; 4]],
    first: usize,
    g: usize,
    y: &mut OutputColumns<'_, '_>,
) {
    let mut sumf = [_mm512_setzero_ps(); C];
    for b in 0..row_blocks {
        let bytes: &[u8; GBB] = part(group, b * GBB);
        // Weight vector `i` goes with activation dword `i`.
        let w = weight_vectors::<KIND, GBB>(bytes);
        let dw = _mm512_cvtph_ps(load32(part(bytes, scales_at(KIND))));
        let mw = if KIND == Q4_1 {
            _mm512_cvtph_ps(load32(part(bytes, MINS_AT)))
        } else {
            _mm512_setzero_ps()
        };
        for (k, sumf) in sumf.iter_mut().enumerate() {
            let at = (first + k) * row_blocks + b;
            let Some(xb) = x.get(at) else {
                continue;
            };
            let start = match KIND {
                Q4_1 => 0,
                _ => starts.get(at).map_or(0, |s| i32::from_le_bytes(*s)),
            };
            let xv = dwords(xb.qs()).map(|w| _mm512_set1_epi32(w));
            let (mut even, mut odd) = (_mm512_set1_epi32(start), _mm512_setzero_si512());
            for j in 0..4 {
                even = _mm512_dpbusd_epi32(even, w[2 * j], xv[2 * j]);
                odd = _mm512_dpbusd_epi32(odd, w[2 * j + 1], xv[2 * j + 1]);
            }
            let sumi = _mm512_cvtepi32_ps(_mm512_add_epi32(even, odd));
            let dx = _mm512_set1_ps(f16c(xb.d_half()));
            let sx = if KIND == Q4_1 {
                _mm512_set1_ps(f16c(xb.s_half()))
            } else {
                _mm512_setzero_ps()
            };
            *sumf = step::<KIND>(*sumf, sumi, dw, mw, dx, sx);
        }
    }
    for (k, sumf) in sumf.into_iter().enumerate() {
        let out = y.run(first + k, g * GROUP_ROWS, 16);
        if let Some(out) = out.and_then(|o| o.first_chunk_mut::<16>()) {
            // SAFETY: `out` holds 16 f32; `storeu` has no alignment requirement.
            unsafe { _mm512_storeu_ps(out.as_mut_ptr(), sumf) };
        }
    }
}

kernel! {
    /// Packed Q4_0 rows against Q8_0 activations, AVX2.
    #[target_feature(enable = "avx2,f16c")]
    pub(crate) fn packed_q4_0(_token: Avx2, packed: &[u8], row_blocks: usize, x: &[BlockQ8_0], out: &mut [f32]) {
        rows_ymm::<_, Q4_0, Q4_0_GROUP_BLOCK>(packed, row_blocks, x, out)
    }

    /// Packed Q4_1 rows against Q8_1 activations, AVX2.
    #[target_feature(enable = "avx2,f16c")]
    pub(crate) fn packed_q4_1(_token: Avx2, packed: &[u8], row_blocks: usize, x: &[BlockQ8_1], out: &mut [f32]) {
        rows_ymm::<_, Q4_1, Q4_1_GROUP_BLOCK>(packed, row_blocks, x, out)
    }

    /// Packed Q8_0 rows against Q8_0 activations, AVX2.
    #[target_feature(enable = "avx2,f16c")]
    pub(crate) fn packed_q8_0(_token: Avx2, packed: &[u8], row_blocks: usize, x: &[BlockQ8_0], out: &mut [f32]) {
        rows_ymm::<_, Q8_0, Q8_0_GROUP_BLOCK>(packed, row_blocks, x, out)
    }

    /// Packed Q4_0 rows against Q8_0 activations, AVX-512 VNNI.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(crate) fn packed_q4_0_vnni(_token: Avx512Vnni, packed: &[u8], row_blocks: usize, x: &[BlockQ8_0], out: &mut [f32]) {
        rows_zmm::<_, Q4_0, Q4_0_GROUP_BLOCK>(packed, row_blocks, x, out)
    }

    /// Packed Q4_1 rows against Q8_1 activations, AVX-512 VNNI.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(crate) fn packed_q4_1_vnni(_token: Avx512Vnni, packed: &[u8], row_blocks: usize, x: &[BlockQ8_1], out: &mut [f32]) {
        rows_zmm::<_, Q4_1, Q4_1_GROUP_BLOCK>(packed, row_blocks, x, out)
    }

    /// Packed Q8_0 rows against Q8_0 activations, AVX-512 VNNI.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(crate) fn packed_q8_0_vnni(_token: Avx512Vnni, packed: &[u8], row_blocks: usize, x: &[BlockQ8_0], out: &mut [f32]) {
        rows_zmm::<_, Q8_0, Q8_0_GROUP_BLOCK>(packed, row_blocks, x, out)
    }

    /// Packed Q4_0 rows against many Q8_0 activation columns, AVX-512 VNNI.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(crate) fn packed_matmul_q4_0_vnni(_token: Avx512Vnni, packed: &[u8], row_blocks: usize, x: &[BlockQ8_0], starts: &[[u8; 4]], n: usize, y: &mut OutputColumns<'_, '_>) {
        matmul_zmm::<_, Q4_0, Q4_0_GROUP_BLOCK>(packed, row_blocks, x, starts, n, y)
    }

    /// Packed Q4_1 rows against many Q8_1 activation columns, AVX-512 VNNI.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(crate) fn packed_matmul_q4_1_vnni(_token: Avx512Vnni, packed: &[u8], row_blocks: usize, x: &[BlockQ8_1], starts: &[[u8; 4]], n: usize, y: &mut OutputColumns<'_, '_>) {
        matmul_zmm::<_, Q4_1, Q4_1_GROUP_BLOCK>(packed, row_blocks, x, starts, n, y)
    }

    /// Packed Q5_0 rows against Q8_0 activations, AVX2.
    #[target_feature(enable = "avx2,f16c")]
    pub(crate) fn packed_q5_0(_token: Avx2, packed: &[u8], row_blocks: usize, x: &[BlockQ8_0], out: &mut [f32]) {
        rows_ymm::<_, Q5_0, Q5_0_GROUP_BLOCK>(packed, row_blocks, x, out)
    }

    /// Packed Q5_0 rows against Q8_0 activations, AVX-512 VNNI.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(crate) fn packed_q5_0_vnni(_token: Avx512Vnni, packed: &[u8], row_blocks: usize, x: &[BlockQ8_0], out: &mut [f32]) {
        rows_zmm::<_, Q5_0, Q5_0_GROUP_BLOCK>(packed, row_blocks, x, out)
    }

    /// Packed Q5_0 rows against many Q8_0 activation columns, AVX-512 VNNI.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(crate) fn packed_matmul_q5_0_vnni(_token: Avx512Vnni, packed: &[u8], row_blocks: usize, x: &[BlockQ8_0], starts: &[[u8; 4]], n: usize, y: &mut OutputColumns<'_, '_>) {
        matmul_zmm::<_, Q5_0, Q5_0_GROUP_BLOCK>(packed, row_blocks, x, starts, n, y)
    }

    /// Packed Q8_0 rows against many Q8_0 activation columns, AVX-512 VNNI.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(crate) fn packed_matmul_q8_0_vnni(_token: Avx512Vnni, packed: &[u8], row_blocks: usize, x: &[BlockQ8_0], starts: &[[u8; 4]], n: usize, y: &mut OutputColumns<'_, '_>) {
        matmul_zmm::<_, Q8_0, Q8_0_GROUP_BLOCK>(packed, row_blocks, x, starts, n, y)
    }
}
