//! AVX2 dequantizers of Q2_K, Q3_K, Q4_K and Q5_K (`dequantize_row_q2_K`, `_q3_K`, `_q4_K`,
//! `_q5_K`).
//!
//! Q2_K and Q3_K have at most eight quant values per sub-block (`q` in `0..4`, `-4..4`), so each
//! sub-block's outputs are an eight-entry table, `dl·q − ml` (Q2_K) or `dl·q` (Q3_K) for every `q`,
//! formed with the scalar twin's float steps (the same multiply and subtract, once per entry), and
//! each eight outputs are one `vpermps` lookup of that table by the quants' index: no per-value
//! conversion or arithmetic, and bits equal to the twin's by construction. Q4_K and Q5_K (16 and 32
//! levels per sub-block) take the twin's per-value steps (`u8 → f32`, multiply, subtract) eight
//! at a time, on bytes widened to 32-bit lanes as they are loaded.

use core::arch::x86_64::*;

use super::vector::{f16_le, load32, part};
use crate::quant::activation::QK_K;
use crate::quant::k_quants::common::unpack_q3_scales;
use crate::quant::k_quants::q4_k::scales_and_mins;
use crate::quant::k_quants::{BlockQ2K, BlockQ3K, BlockQ4K, BlockQ5K};

/// Eight bytes, each zero-extended to a 32-bit lane.
#[inline]
#[target_feature(enable = "avx2")]
fn widen8(bytes: &[u8; 8]) -> __m256i {
    // SAFETY: the array holds eight bytes, exactly what `loadl_epi64` reads; it has no alignment
    // requirement.
    _mm256_cvtepu8_epi32(unsafe { _mm_loadl_epi64(bytes.as_ptr().cast()) })
}

/// Eight bytes (`u8` or `i8` as `signed`) to f32 times `d`: `d * x`, one rounding each.
#[inline]
#[target_feature(enable = "avx2")]
fn scaled8(bytes: &[u8; 8], signed: bool, d: __m256) -> __m256 {
    // SAFETY: as `widen8`.
    let raw = unsafe { _mm_loadl_epi64(bytes.as_ptr().cast()) };
    let lanes = if signed {
        _mm256_cvtepi8_epi32(raw)
    } else {
        _mm256_cvtepu8_epi32(raw)
    };
    _mm256_mul_ps(d, _mm256_cvtepi32_ps(lanes))
}

/// Stores eight f32 at `out[at..at + 8]` (the callers' offsets are constants inside the array,
/// so the range check folds away; a range outside would store nothing).
#[inline]
#[target_feature(enable = "avx2")]
fn store_at<const N: usize>(out: &mut [f32; N], at: usize, v: __m256) {
    if let Some(eight) = out
        .get_mut(at..)
        .and_then(|rest| rest.first_chunk_mut::<8>())
    {
        // SAFETY: `eight` holds eight f32; `storeu` has no alignment requirement.
        unsafe { _mm256_storeu_ps(eight.as_mut_ptr(), v) };
    }
}

/// `scales[k]` (every caller's `k` is inside the array; the zero fallback keeps the kernels free
/// of panics).
#[inline(always)]
fn scale_of<const N: usize>(scales: &[f32; N], k: usize) -> f32 {
    scales.get(k).copied().unwrap_or(0.0)
}

/// Q2_K's sixteen `dl = d·(sc & 15)` and `ml = dmin·(sc >> 4)`, the scalar twin's products.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn q2_k_scales(block: &BlockQ2K) -> ([f32; 16], [f32; 16]) {
    let d = _mm256_set1_ps(f16_le(block.d));
    let min = _mm256_set1_ps(f16_le(block.dmin));
    let mut low = [0u8; 16];
    let mut high = [0u8; 16];
    for ((l, h), &sc) in low.iter_mut().zip(&mut high).zip(&block.scales) {
        (*l, *h) = (sc & 0x0f, sc >> 4);
    }
    let mut dl = [0.0f32; 16];
    let mut ml = [0.0f32; 16];
    store_at(&mut dl, 0, scaled8(part(&low, 0), false, d));
    store_at(&mut dl, 8, scaled8(part(&low, 8), false, d));
    store_at(&mut ml, 0, scaled8(part(&high, 0), false, min));
    store_at(&mut ml, 8, scaled8(part(&high, 8), false, min));
    (dl, ml)
}

/// `dequantize_row_q2_K` for one block. Sub-block `k` (16 values) is the table `dl·q − ml`,
/// `q = 0, 1, 2, 3` (repeated in lanes 4..8, so that an index's third bit, which belongs to the
/// next quant, picks the same entry). Half `h` of the block reads the 32 `qs` bytes at `32h`; its
/// 32-value chunk `c` takes bits `2c..2c+2` of them, bytes `0..16` in sub-block `8h + 2c`,
/// `16..32` in the next.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn dequantize_q2_k_block(block: &BlockQ2K, out: &mut [f32; QK_K]) {
    let levels = _mm256_setr_ps(0.0, 1.0, 2.0, 3.0, 0.0, 1.0, 2.0, 3.0);
    let (dl, ml) = q2_k_scales(block);
    let table = |k: usize| {
        let scaled = _mm256_mul_ps(_mm256_set1_ps(scale_of(&dl, k)), levels);
        _mm256_sub_ps(scaled, _mm256_set1_ps(scale_of(&ml, k)))
    };
    for half in 0..2 {
        let qs: &[u8; 32] = part(&block.qs, 32 * half);
        // Lane i of word g: byte 8g + i, shifted right by 2c for chunk c.
        let mut w0 = widen8(part(qs, 0));
        let mut w1 = widen8(part(qs, 8));
        let mut w2 = widen8(part(qs, 16));
        let mut w3 = widen8(part(qs, 24));
        for chunk in 0..4 {
            let (first, second) = (table(8 * half + 2 * chunk), table(8 * half + 2 * chunk + 1));
            let at = 128 * half + 32 * chunk;
            store_at(out, at, _mm256_permutevar8x32_ps(first, w0));
            store_at(out, at + 8, _mm256_permutevar8x32_ps(first, w1));
            store_at(out, at + 16, _mm256_permutevar8x32_ps(second, w2));
            store_at(out, at + 24, _mm256_permutevar8x32_ps(second, w3));
            w0 = _mm256_srli_epi32::<2>(w0);
            w1 = _mm256_srli_epi32::<2>(w1);
            w2 = _mm256_srli_epi32::<2>(w2);
            w3 = _mm256_srli_epi32::<2>(w3);
        }
    }
}

#[target_feature(enable = "avx2,f16c")]
fn dequantize_q2_k_impl(blocks: &[BlockQ2K], out: &mut [f32]) {
    for (block, values) in blocks.iter().zip(out.as_chunks_mut::<QK_K>().0) {
        dequantize_q2_k_block(block, values);
    }
}

/// `dequantize_row_q2_K` at AVX2.
pub(super) fn dequantize_q2_k(blocks: &[BlockQ2K], out: &mut [f32]) {
    // SAFETY: the table only hands this kernel out for an available AVX2 level (`pick!` checks
    // `Level::is_available`, which requires avx2 and f16c).
    unsafe { dequantize_q2_k_impl(blocks, out) }
}

/// Q4_K's and Q5_K's eight `dl = d·sc_j` and `ml = dmin·m_j` (the scalar twin's products) from
/// the 12 packed scale bytes.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn k4_scales(packed: &[u8; 12], d: [u8; 2], dmin: [u8; 2]) -> ([f32; 8], [f32; 8]) {
    let (scales, mins) = scales_and_mins(packed);
    let mut dl = [0.0f32; 8];
    let mut ml = [0.0f32; 8];
    store_at(
        &mut dl,
        0,
        scaled8(&scales, false, _mm256_set1_ps(f16_le(d))),
    );
    store_at(
        &mut ml,
        0,
        scaled8(&mins, false, _mm256_set1_ps(f16_le(dmin))),
    );
    (dl, ml)
}

/// Sub-block pair `pair`'s `[dl, ml]` of its first and second sub-block, broadcast.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn pair_scales(dl: &[f32; 8], ml: &[f32; 8], pair: usize) -> [__m256; 4] {
    [
        _mm256_set1_ps(scale_of(dl, 2 * pair)),
        _mm256_set1_ps(scale_of(ml, 2 * pair)),
        _mm256_set1_ps(scale_of(dl, 2 * pair + 1)),
        _mm256_set1_ps(scale_of(ml, 2 * pair + 1)),
    ]
}

/// `dequantize_row_q5_K` for one block: sub-block `j` (32 values) is `dl·q − ml` with
/// One Q4_K or Q5_K block (`dequantize_row_q{4,5}_K`): `dl = d·sc_j`, `ml = dmin·m_j`, and
/// `dl·q − ml` with `q` the nibble, or for Q5_K (`FIFTH`) `nibble | fifth bit << 4`. Pair `p`
/// of sub-blocks reads the 32 `qs` bytes at `32p`, low nibbles for `2p`, high for `2p + 1`;
/// sub-block `j` takes bit `j` of the 32 `qh` bytes. Bytes are widened to 32-bit lanes straight
/// from memory (the `qh` ones once per block), and give eight values of both sub-blocks.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn dequantize_with_mins_block<const FIFTH: bool>(
    (scales, d, dmin): (&[u8; 12], [u8; 2], [u8; 2]),
    qs: &[u8; 128],
    qh: &[u8; 32],
    out: &mut [f32; QK_K],
) {
    let nibble = _mm256_set1_epi32(0x0f);
    let fifth = _mm256_set1_epi32(0x10);
    let (dl, ml) = k4_scales(scales, d, dmin);
    // Lane i of `high_bits[g]`: qh byte 8g + i, shifted right by 2 per pair so that bits 2p and
    // 2p + 1 sit at bits 0 and 1.
    // (A const parameter, not an `Option`: each type gets its own loop, without a run-time test.)
    let mut high_bits = [0, 8, 16, 24].map(|at| widen8(part(qh, at)));
    for pair in 0..4 {
        let [d1, m1, d2, m2] = pair_scales(&dl, &ml, pair);
        for g in 0..4 {
            let q = widen8(part(qs, 32 * pair + 8 * g));
            let mut low = _mm256_and_si256(q, nibble);
            let mut high = _mm256_srli_epi32::<4>(q);
            if let (true, Some(h)) = (FIFTH, high_bits.get_mut(g)) {
                low = _mm256_or_si256(low, _mm256_and_si256(_mm256_slli_epi32::<4>(*h), fifth));
                high = _mm256_or_si256(high, _mm256_and_si256(_mm256_slli_epi32::<3>(*h), fifth));
                *h = _mm256_srli_epi32::<2>(*h);
            }
            let at = 64 * pair + 8 * g;
            let low = _mm256_cvtepi32_ps(low);
            let high = _mm256_cvtepi32_ps(high);
            store_at(out, at, _mm256_sub_ps(_mm256_mul_ps(d1, low), m1));
            store_at(out, at + 32, _mm256_sub_ps(_mm256_mul_ps(d2, high), m2));
        }
    }
}

#[target_feature(enable = "avx2,f16c")]
fn dequantize_q5_k_impl(blocks: &[BlockQ5K], out: &mut [f32]) {
    for (block, values) in blocks.iter().zip(out.as_chunks_mut::<QK_K>().0) {
        let head = (&block.scales, block.d, block.dmin);
        dequantize_with_mins_block::<true>(head, &block.qs, &block.qh, values);
    }
}

/// `dequantize_row_q5_K` at AVX2.
pub(super) fn dequantize_q5_k(blocks: &[BlockQ5K], out: &mut [f32]) {
    // SAFETY: as `dequantize_q2_k`.
    unsafe { dequantize_q5_k_impl(blocks, out) }
}

#[target_feature(enable = "avx2,f16c")]
fn dequantize_q4_k_impl(blocks: &[BlockQ4K], out: &mut [f32]) {
    for (block, values) in blocks.iter().zip(out.as_chunks_mut::<QK_K>().0) {
        let head = (&block.scales, block.d, block.dmin);
        dequantize_with_mins_block::<false>(head, &block.qs, &[0; 32], values);
    }
}

/// `dequantize_row_q4_K` at AVX2.
pub(super) fn dequantize_q4_k(blocks: &[BlockQ4K], out: &mut [f32]) {
    // SAFETY: as `dequantize_q2_k`.
    unsafe { dequantize_q4_k_impl(blocks, out) }
}

/// Q3_K's sixteen `dl = d·(sc − 32)`, the scalar twin's products.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn q3_k_scales(block: &BlockQ3K) -> [f32; 16] {
    let d = _mm256_set1_ps(f16_le(block.d));
    let signed = unpack_q3_scales(&block.scales).map(|s| (s - 32) as u8);
    let mut dl = [0.0f32; 16];
    store_at(&mut dl, 0, scaled8(part(&signed, 0), true, d));
    store_at(&mut dl, 8, scaled8(part(&signed, 8), true, d));
    dl
}

/// `dequantize_row_q3_K` for one block. Sub-block `k` (16 values) is the table `dl·q`,
/// `q = −4..4`, indexed by `u = q + 4 = low2 | hbit << 2`: half `h`'s 32-value chunk `c` takes
/// `low2` from bits `2c..2c+2` of the half's 32 `qs` bytes and `hbit` from bit `4h + c` of the 32
/// `hmask` bytes.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn dequantize_q3_k_block(block: &BlockQ3K, out: &mut [f32; QK_K]) {
    let levels = _mm256_setr_ps(-4.0, -3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0);
    let three = _mm256_set1_epi8(3);
    let four = _mm256_set1_epi8(4);
    let dl = q3_k_scales(block);
    let table = |k: usize| _mm256_mul_ps(_mm256_set1_ps(scale_of(&dl, k)), levels);
    // Bit 4h + c of every byte, moved to bit 0 by the (4h + c)-th shift (as Q5_K's `qh`).
    let mut hmask = load32(&block.hmask);
    for half in 0..2 {
        let mut qs = load32(part(&block.qs, 32 * half));
        for chunk in 0..4 {
            let high = _mm256_and_si256(_mm256_slli_epi16::<2>(hmask), four);
            let u = _mm256_or_si256(_mm256_and_si256(qs, three), high);
            qs = _mm256_srli_epi16::<2>(qs);
            hmask = _mm256_srli_epi16::<1>(hmask);
            let (first, second) = (table(8 * half + 2 * chunk), table(8 * half + 2 * chunk + 1));
            let (low, high) = (_mm256_castsi256_si128(u), _mm256_extracti128_si256::<1>(u));
            let at = 128 * half + 32 * chunk;
            let lookup = |t: __m256, bytes: __m128i| {
                _mm256_permutevar8x32_ps(t, _mm256_cvtepu8_epi32(bytes))
            };
            store_at(out, at, lookup(first, low));
            store_at(out, at + 8, lookup(first, _mm_srli_si128::<8>(low)));
            store_at(out, at + 16, lookup(second, high));
            store_at(out, at + 24, lookup(second, _mm_srli_si128::<8>(high)));
        }
    }
}

#[target_feature(enable = "avx2,f16c")]
fn dequantize_q3_k_impl(blocks: &[BlockQ3K], out: &mut [f32]) {
    for (block, values) in blocks.iter().zip(out.as_chunks_mut::<QK_K>().0) {
        dequantize_q3_k_block(block, values);
    }
}

/// `dequantize_row_q3_K` at AVX2.
pub(super) fn dequantize_q3_k(blocks: &[BlockQ3K], out: &mut [f32]) {
    // SAFETY: as `dequantize_q2_k`.
    unsafe { dequantize_q3_k_impl(blocks, out) }
}
