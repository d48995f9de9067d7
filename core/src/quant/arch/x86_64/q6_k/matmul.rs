//! Q6_K matmul: its weight blocks decoded for the K-quant tiles of
//! [`k_matmul`](super::super::k_matmul), which do the rest; and the tile choice of the signed
//! types without mins (Q6_K, Q3_K).

use crate::quant::OutputColumns;
use core::arch::x86_64::*;

use super::super::k_matmul::{block_lanes, k_matmul, pair_in_lanes, Decoded, TileLevel};
use super::super::k_matmul_busd::{signed_four_row_groups, within_32_bytes};
use super::super::primitives::Primitives;
use super::super::tokens::Avx512Vbmi;
use super::super::vector::{f16_le, load32, part};
use super::{q6_k_high_bits, q6_k_rows};
use crate::quant::activation::BlockQ8K;
use crate::quant::k_quants::BlockQ6K;

/// A Q6_K block in tile form: the signed quants (`q - 32`), half `h`'s groups of 32 values
/// `4h..4h + 4` as pairs `(0, 1)` and `(2, 3)`; pair `p`'s first vector holds 16-value sub-blocks
/// `4p` and `4p + 2` (scale pair `(sc[4p], sc[4p + 2])`), its second `4p + 1` and `4p + 3`. The
/// correction `128·Σ scale·q` per lane is the block's lanes against an activation of all 128.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn decode<P: Primitives>(p: P, b: &BlockQ6K) -> Decoded {
    let nibble = _mm256_set1_epi8(0x0f);
    let bias = _mm256_set1_epi8(32);
    let mut quants = [_mm256_setzero_si256(); 8];
    for (half, out) in quants.chunks_exact_mut(4).enumerate() {
        let a = load32(part(&b.ql, 64 * half));
        let c = load32(part(&b.ql, 64 * half + 32));
        let high_bits = q6_k_high_bits(load32(part(&b.qh, 32 * half)));
        let groups = [
            _mm256_or_si256(_mm256_and_si256(a, nibble), high_bits[0]),
            _mm256_or_si256(_mm256_and_si256(c, nibble), high_bits[1]),
            _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16::<4>(a), nibble),
                high_bits[2],
            ),
            _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16::<4>(c), nibble),
                high_bits[3],
            ),
        ]
        .map(|g| _mm256_sub_epi8(g, bias));
        let [g0, g1, g2, g3] = groups;
        let [v0, v1] = pair_in_lanes(p, g0, g1);
        let [v2, v3] = pair_in_lanes(p, g2, g3);
        out.copy_from_slice(&[v0, v1, v2, v3]);
    }
    let scale = |s: usize| i32::from(b.scales.get(s).copied().unwrap_or(0));
    let scales: [i32; 8] = core::array::from_fn(|v| {
        let (pair, second) = (v / 2, v % 2);
        let first = 4 * pair + second;
        (scale(first) & 0xffff) | scale(first + 2) << 16
    });
    let correction = block_lanes::<P, true>(p, &quants, &scales, _mm256_set1_epi8(i8::MIN));
    Decoded {
        quants,
        scales,
        extra: correction,
        d: f16_le(b.d),
        dmin: 0.0,
    }
}

/// The `vpermb` indices that put a pair of 32-value groups `A` (bytes 0..32) and `B` (32..64) in
/// tile lane order, both vectors of [`pair_in_lanes`] in one zmm: byte `4l + e` of vector `j`
/// takes `A[l + 16j]`, `A[l + 8 + 16j]`, `B[l + 16j]`, `B[l + 8 + 16j]` for `e` = 0..4.
const fn tile_pair_order() -> [u8; 64] {
    let mut order = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        let (j, l, e) = (i / 32, (i % 32) / 4, i % 4);
        order[i] = (32 * (e / 2) + 8 * (e % 2) + l + 16 * j) as u8;
        i += 1;
    }
    order
}

const TILE_PAIR_ORDER: [u8; 64] = tile_pair_order();

/// [`TILE_PAIR_ORDER`] for a pair whose groups `A` and `B` both take element `i`'s bits from
/// byte `i` of the same 32 bytes (Q6_K's `qh`; Q3_K's `qs` and `hmask`).
pub(in super::super) const SHARED_BYTES_ORDER: [u8; 64] = within_32_bytes(TILE_PAIR_ORDER);

/// Per 16-bit word of a dword of tile lane order (word 0: group `A`, word 1: `B`), the shifts that
/// bring a half's two high bits to bits 4-5: left 4 and 2 for groups 0 and 1 (`qh` bits 0-1, 2-3),
/// right 0 and 2 for groups 2 and 3 (bits 4-5, 6-7).
const fn word_shifts(a: u16, b: u16) -> [u16; 32] {
    let mut shifts = [0u16; 32];
    let mut i = 0;
    while i < 32 {
        shifts[i] = if i % 2 == 0 { a } else { b };
        i += 1;
    }
    shifts
}

const HIGH_BITS_LEFT: [u16; 32] = word_shifts(4, 2);
const HIGH_BITS_RIGHT: [u16; 32] = word_shifts(0, 2);

/// [`decode`] on 512 bits with `vpermb` (the same [`Decoded`], bit for bit): a half's 64 `ql`
/// bytes are put in tile lane order once, before the nibbles split (its groups 0 and 1 are the
/// low nibbles of `ql[0..32]` and `ql[32..64]`, groups 2 and 3 the high ones, so one order serves
/// both), its 32 `qh` bytes likewise; the correction by `vpdpwssd` on both vectors of a pair.
#[inline]
pub(in super::super) fn decode_vbmi(t: Avx512Vbmi, b: &BlockQ6K) -> Decoded {
    // SAFETY: the token proves every feature the body enables.
    unsafe { decode_vbmi_body(t, b) }
}

#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
fn decode_vbmi_body(_t: Avx512Vbmi, b: &BlockQ6K) -> Decoded {
    let [order, high_order] = [&TILE_PAIR_ORDER, &SHARED_BYTES_ORDER]
        // SAFETY: each table is 64 bytes; `loadu` has no alignment requirement.
        .map(|table| unsafe { _mm512_loadu_si512(table.as_ptr().cast()) });
    let [left, right] = [&HIGH_BITS_LEFT, &HIGH_BITS_RIGHT]
        // SAFETY: each table is 64 bytes; `loadu` has no alignment requirement.
        .map(|table| unsafe { _mm512_loadu_si512(table.as_ptr().cast()) });
    let nibble = _mm512_set1_epi8(0x0f);
    let bits45 = _mm512_set1_epi8(0x30);
    let bias = _mm512_set1_epi8(32);
    // SAFETY: `scales` is sixteen bytes; `loadu` has no alignment requirement.
    let scales = unsafe { _mm_loadu_si128(b.scales.as_ptr().cast()) };
    let mut vectors = [_mm512_setzero_si512(); 4];
    for (half, out) in vectors.chunks_exact_mut(2).enumerate() {
        let low: &[u8; 64] = part(&b.ql, 64 * half);
        // SAFETY: `low` is 64 bytes; `loadu` has no alignment requirement.
        let ql = unsafe { _mm512_loadu_si512(low.as_ptr().cast()) };
        let qh = _mm512_castsi256_si512(load32(part(&b.qh, 32 * half)));
        let ql = _mm512_permutexvar_epi8(order, ql);
        let qh = _mm512_permutexvar_epi8(high_order, qh);
        let first = _mm512_or_si512(
            _mm512_and_si512(ql, nibble),
            _mm512_and_si512(_mm512_sllv_epi16(qh, left), bits45),
        );
        let second = _mm512_or_si512(
            _mm512_and_si512(_mm512_srli_epi16::<4>(ql), nibble),
            _mm512_and_si512(_mm512_srlv_epi16(qh, right), bits45),
        );
        for (out, v) in out.iter_mut().zip([first, second]) {
            *out = _mm512_sub_epi8(v, bias);
        }
    }
    signed_decoded_body(vectors, scales, f16_le(b.d))
}

/// A signed type's [`Decoded`] block from its quants in tile lane order, two vectors a zmm
/// (`vectors[i]`: vectors `2i` and `2i + 1`), its sixteen sub-block scales (signed bytes, in
/// order) and `d`: the scales paired as the tiles read them, and the correction `128·Σ scale·q`
/// per lane by `vpdpwssd` over both vectors of a zmm at once. Q6_K's and Q3_K's decoders at VBMI
/// end here.
#[inline]
pub(in super::super) fn signed_decoded(
    _t: Avx512Vbmi,
    vectors: [__m512i; 4],
    scales: __m128i,
    d: f32,
) -> Decoded {
    // SAFETY: the token proves every feature the body enables.
    unsafe { signed_decoded_body(vectors, scales, d) }
}

#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
fn signed_decoded_body(vectors: [__m512i; 4], scales: __m128i, d: f32) -> Decoded {
    // Scale pair `v` is `(sc[4p + s], sc[4p + s + 2])` for `p = v / 2`, `s = v % 2`, as i16.
    let scale_order = _mm_setr_epi8(0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15);
    let scales = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, scale_order));
    let all_128 = _mm512_set1_epi8(i8::MIN);
    let mut correction = _mm512_setzero_si512();
    for (i, v) in vectors.into_iter().enumerate() {
        // Vector `2i` in the low half, the next in the high half.
        let low = 2 * i as i32;
        let high = low + 1;
        let s = _mm512_permutexvar_epi32(
            _mm512_set_epi32(
                high, high, high, high, high, high, high, high, low, low, low, low, low, low, low,
                low,
            ),
            _mm512_castsi256_si512(scales),
        );
        // Pairs below 2·128·32: exact in i16; the lanes' sums exact in i32.
        correction = _mm512_dpwssd_epi32(correction, _mm512_maddubs_epi16(all_128, v), s);
    }
    let correction = _mm256_add_epi32(
        _mm512_castsi512_si256(correction),
        _mm512_extracti64x4_epi64::<1>(correction),
    );
    let quants = core::array::from_fn(|j| {
        let v = vectors
            .get(j / 2)
            .copied()
            .unwrap_or(_mm512_setzero_si512());
        if j % 2 == 0 {
            _mm512_castsi512_si256(v)
        } else {
            _mm512_extracti64x4_epi64::<1>(v)
        }
    });
    let mut scale_pairs = [0i32; 8];
    // SAFETY: `scale_pairs` is 32 bytes; `storeu` has no alignment requirement.
    unsafe { _mm256_storeu_si256(scale_pairs.as_mut_ptr().cast(), scales) };
    Decoded {
        quants,
        scales: scale_pairs,
        extra: correction,
        d,
        dmin: 0.0,
    }
}

/// The matmul over [`k_matmul`] of a type whose blocks decode to signed tile quants with no mins
/// (Q6_K, Q3_K: the same scalar float steps), `decode` its blocks and `rows` its rows kernel
/// (for fewer columns and rows too long for the tiles).
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(in super::super) fn signed_k_matmul<P: Primitives + TileLevel, W>(
    p: P,
    w: &[W],
    row_blocks: usize,
    x: &[BlockQ8K],
    n: usize,
    y: &mut OutputColumns<'_, '_>,
    decode: impl Fn(&W) -> Decoded + Copy,
    rows: impl Fn(&[W], usize, &[BlockQ8K], &mut [f32]),
) {
    k_matmul::<P, W, true, false>(
        p,
        w,
        row_blocks,
        x,
        n,
        y,
        decode,
        rows,
        |t, w, row_blocks, x, y| signed_four_row_groups(t, w, row_blocks, x, y, decode),
    )
}

/// The Q6_K matmul over [`k_matmul`]; `single` is the vec_dot (for rows too long for the tiles).
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,f16c")]
pub(super) fn q6_k_matmul<P: Primitives + TileLevel>(
    p: P,
    w: &[BlockQ6K],
    row_blocks: usize,
    x: &[BlockQ8K],
    n: usize,
    y: &mut OutputColumns<'_, '_>,
    single: impl Fn(&[BlockQ6K], &[BlockQ8K]) -> f32 + Copy,
) {
    signed_k_matmul(
        p,
        w,
        row_blocks,
        x,
        n,
        y,
        move |b| match p.zmm() {
            Some(t) => decode_vbmi(t, b),
            None => decode(p.avx2(), b),
        },
        |w, row_blocks, x, out| q6_k_rows(p, w, row_blocks, x, out, single),
    )
}
