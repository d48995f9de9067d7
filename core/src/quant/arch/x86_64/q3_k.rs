//! Q3_K: vec_dot (`ggml_vec_dot_q3_K_q8_K_generic`), multi-row and dequantize.
//!
//! A quant is `u - 4` with `u = low2 | hbit << 2` in `0..8`. As in the Q6_K kernel, quants and
//! activation are read in `lane_groups` order, so `maddubs` gives `Σ u·x − Σ 4·x` of each 32-value
//! group as the two sub-block sums of lane `m` in 32-bit lane `m` (pairs below 2·7·128 and
//! 2·4·128: exact in i16), and one `madd` (`vpdpwssd` at VNNI) with the group's scale pair adds
//! them to lane `m` (the scalar `aux32`). The float steps are the scalar twin's: `sums[l] +=
//! (d·dx)·lane[l]` per block, the lanes added in order at the end.
//!
//! The dequantizer: a sub-block has eight values `dl·q`, `q = −4..4`, so its outputs are an
//! eight-entry table formed with the twin's float steps, and each eight outputs one `vpermps`
//! lookup of it by the quants: bits equal to the twin's by construction.

use crate::quant::OutputColumns;
use core::arch::x86_64::*;

use super::drivers::prepared_rows;
use super::k_matmul::{block_lanes, pair_in_lanes, Decoded, TileLevel};
use super::primitives::Primitives;
use super::q6_k::matmul::{signed_decoded, signed_k_matmul, SHARED_BYTES_ORDER};
use super::tokens::{every_level, kernel, Avx2, Avx512Vbmi};
use super::vector::{
    accumulate, add_lanes, f16_le, load16, load32, part, prefetch_block_ahead, scale_of, scaled8,
    store_at, ScalePairs,
};
use crate::quant::activation::{BlockQ8K, QK_K};
use crate::quant::k_quants::common::unpack_q3_scales;
use crate::quant::k_quants::BlockQ3K;

/// Activation group `g` (values `32·g..32·g + 32`) through `lane_groups`, and `maddubs(4, x)`: the
/// part of every row's `Σ (u - 4)·x` that depends on the activation alone.
#[inline]
#[target_feature(enable = "avx2")]
fn activation_group<P: Primitives>(p: P, qs: &[i8; 256], g: usize) -> (__m256i, __m256i) {
    let x = p.grouped(load32(part(qs, 32 * g)));
    (x, _mm256_maddubs_epi16(_mm256_set1_epi8(4), x))
}

/// The sixteen scales less 32, sign-extended to i16 in order (the layout [`ScalePairs`] stores).
#[inline]
#[target_feature(enable = "avx2")]
fn signed_scales(block: &BlockQ3K) -> __m256i {
    let s = unpack_q3_scales(&block.scales).map(|s| s as u8);
    let [low, high] = [0, 8].map(|at| {
        let mut eight = [0u8; 8];
        eight.copy_from_slice(&s[at..at + 8]);
        i64::from_le_bytes(eight)
    });
    _mm256_cvtepi8_epi16(_mm_sub_epi8(_mm_set_epi64x(high, low), _mm_set1_epi8(32)))
}

/// The four groups of 32 unsigned quants `u = q + 4` of half `half` of a block, in the
/// `lane_groups` order: group `c` takes bits `2c..2c + 2` of the half's 32 `qs` bytes and bit
/// `4·half + c` of the 32 `hmask` bytes. Both are shuffled before the bit extraction (bytewise,
/// so it commutes): `qs` once per half and `hmask` once per block, not once per group.
#[inline]
#[target_feature(enable = "avx2")]
fn half_quants(qs: __m256i, hmask: __m256i, half: usize) -> [__m256i; 4] {
    let three = _mm256_set1_epi8(3);
    let four = _mm256_set1_epi8(4);
    let lows = [
        qs,
        _mm256_srli_epi16::<2>(qs),
        _mm256_srli_epi16::<4>(qs),
        _mm256_srli_epi16::<6>(qs),
    ];
    // Bit `4·half + c` to bit 2. 16-bit shifts are fine: what crosses from the other byte lands
    // outside the mask (right shifts here are at most 5).
    let highs = if half == 0 {
        [
            _mm256_slli_epi16::<2>(hmask),
            _mm256_slli_epi16::<1>(hmask),
            hmask,
            _mm256_srli_epi16::<1>(hmask),
        ]
    } else {
        [
            _mm256_srli_epi16::<2>(hmask),
            _mm256_srli_epi16::<3>(hmask),
            _mm256_srli_epi16::<4>(hmask),
            _mm256_srli_epi16::<5>(hmask),
        ]
    };
    let mut groups = [_mm256_setzero_si256(); 4];
    for ((g, low), high) in groups.iter_mut().zip(lows).zip(highs) {
        *g = _mm256_or_si256(_mm256_and_si256(low, three), _mm256_and_si256(high, four));
    }
    groups
}

/// `ggml_vec_dot_q3_K_q8_K_generic`'s order over `paired`, whose block `k` gives activation group
/// `g` of `x[k]` as [`activation_group`] does (computed here, or prepared once for many rows).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn dot<P: Primitives, A>(
    p: P,
    w: &[BlockQ3K],
    x: &[BlockQ8K],
    paired: &[A],
    group: impl Fn(&A, usize) -> (__m256i, __m256i),
) -> f32 {
    let mut sums = _mm256_setzero_ps();
    // The previous block's lanes and `d·dx`, whose float steps run one block late, as in the
    // Q6_K kernel (starting from zeros adds `+0·0` to `+0`).
    let mut pending = (_mm256_setzero_si256(), 0.0);
    let mut scale_pairs = ScalePairs::new();
    for ((wb, xb), xp) in w.iter().zip(x).zip(paired) {
        prefetch_block_ahead(wb);
        scale_pairs.store(signed_scales(wb));
        let hmask = p.grouped(load32(&wb.hmask));
        let mut acc = _mm256_setzero_si256();
        for half in 0..2 {
            let qs = p.grouped(load32(part(&wb.qs, 32 * half)));
            for (quants, c) in half_quants(qs, hmask, half).into_iter().zip(0..) {
                // Group 4·half + c: sub-blocks 8·half + 2c and 8·half + 2c + 1.
                let k = 4 * half + c;
                let (x, bias_x) = group(xp, k);
                let pair_sums = _mm256_sub_epi16(_mm256_maddubs_epi16(quants, x), bias_x);
                acc = p.add_scaled_pair(acc, pair_sums, scale_pairs.get(k));
            }
        }
        let d = f16_le(wb.d) * xb.scale();
        let (lanes, d_before) = pending;
        sums = accumulate(sums, d_before, lanes);
        pending = (acc, d);
    }
    let (lanes, d) = pending;
    add_lanes(0.0, accumulate(sums, d, lanes))
}

every_level! {
    /// `ggml_vec_dot_q3_K_q8_K_generic`.
    fn vec_dot, vec_dot_vnni_only, vec_dot_vbmi => vec_dot_vnni(
        t,
        w: &[BlockQ3K],
        x: &[BlockQ8K],
    ) -> f32 {
        dot(t, w, x, x, |xb, g| activation_group(t, &xb.qs, g))
    }
}

/// Q3_K rows: the activation's lane shuffles and its `maddubs(4, x)` prepared once, as for Q6_K
/// (scale products by `vpdpwssd` at VNNI).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn q3_k_rows<P: Primitives>(
    p: P,
    w: &[BlockQ3K],
    row_blocks: usize,
    x: &[BlockQ8K],
    out: &mut [f32],
    single: impl Fn(&[BlockQ3K], &[BlockQ8K]) -> f32,
) {
    prepared_rows(
        w,
        row_blocks,
        x,
        out,
        |xb| -> [(__m256i, __m256i); 8] {
            core::array::from_fn(|g| activation_group(p, &xb.qs, g))
        },
        |row, paired| {
            dot(p, row, x, paired, |groups, g| {
                groups.get(g).copied().unwrap_or(groups[0])
            })
        },
        single,
    )
}

every_level! {
    /// Q3_K rows.
    fn rows, rows_vnni_only, rows_vbmi => rows_vnni(
        t,
        w: &[BlockQ3K],
        row_blocks: usize,
        x: &[BlockQ8K],
        out: &mut [f32],
    ); single = vec_dot, vec_dot_vnni_only, vec_dot_vbmi {
        q3_k_rows(t, w, row_blocks, x, out, single)
    }
}

/// A Q3_K block in the K-quant tiles' form, laid out as Q6_K's (`q6_k::matmul`): the signed
/// quants `u − 4` in element order paired into tile lanes, pair `p`'s first vector holding the
/// 16-value sub-blocks `4p` and `4p + 2` (scale pair `(sc[4p] − 32, sc[4p + 2] − 32)`), its second
/// `4p + 1` and `4p + 3`; the correction `128·Σ scale·q` per lane. Q3_K's float steps are Q6_K's
/// (`sums[l] += (d·dx)·lane`, no mins), so its tiles serve it unchanged.
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn tile_block<P: Primitives>(p: P, b: &BlockQ3K) -> Decoded {
    let four = _mm256_set1_epi8(4);
    // Unshuffled here: `pair_in_lanes` puts the groups in lane order.
    let hmask = load32(&b.hmask);
    let mut quants = [_mm256_setzero_si256(); 8];
    for (half, out) in quants.chunks_exact_mut(4).enumerate() {
        let qs = load32(part(&b.qs, 32 * half));
        let [g0, g1, g2, g3] = half_quants(qs, hmask, half).map(|g| _mm256_sub_epi8(g, four));
        let [v0, v1] = pair_in_lanes(p, g0, g1);
        let [v2, v3] = pair_in_lanes(p, g2, g3);
        out.copy_from_slice(&[v0, v1, v2, v3]);
    }
    let unpacked = unpack_q3_scales(&b.scales);
    let scale = |s: usize| unpacked.get(s).map_or(0, |&v| i32::from(v) - 32);
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

/// `vpmultishiftqb` bit offsets that bring a half's quant bits to where [`tile_block`] has them,
/// for the pair of groups `pair` (groups `2·pair` in the dwords' low words, `2·pair + 1` in the
/// high words) of bytes in tile lane order: byte `p` of each qword takes from bit `8p + 2c` (its
/// two low bits, `LOW`) or bit `8p + 4·half + c − 2` (its `hmask` bit at bit 2, `HIGH`), modulo
/// 64.
const fn bit_offsets(high: bool, half: usize, pair: usize) -> [u8; 64] {
    let mut offsets = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        let c = 2 * pair + (i % 4) / 2;
        let byte = 8 * (i % 8);
        offsets[i] = if high {
            ((byte + 4 * half + c + 62) % 64) as u8
        } else {
            ((byte + 2 * c) % 64) as u8
        };
        i += 1;
    }
    offsets
}

/// [`bit_offsets`] by half and pair: `[low, high]`.
const BIT_OFFSETS: [[[[u8; 64]; 2]; 2]; 2] = [
    [
        [bit_offsets(false, 0, 0), bit_offsets(true, 0, 0)],
        [bit_offsets(false, 0, 1), bit_offsets(true, 0, 1)],
    ],
    [
        [bit_offsets(false, 1, 0), bit_offsets(true, 1, 0)],
        [bit_offsets(false, 1, 1), bit_offsets(true, 1, 1)],
    ],
];

/// [`tile_block`] on 512 bits with VBMI (the same [`Decoded`], bit for bit): a half's 32 `qs`
/// bytes and the block's 32 `hmask` bytes put in tile lane order by one `vpermb` each (both
/// groups of a pair take element `i` from byte `i`), then each pair's two bits and high bit
/// moved into place by `vpmultishiftqb`.
#[inline]
fn tile_block_vbmi(t: Avx512Vbmi, b: &BlockQ3K) -> Decoded {
    // SAFETY: the token proves every feature the body enables.
    unsafe { tile_block_vbmi_body(t, b) }
}

#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
fn tile_block_vbmi_body(t: Avx512Vbmi, b: &BlockQ3K) -> Decoded {
    // SAFETY: the table is 64 bytes; `loadu` has no alignment requirement.
    let order = unsafe { _mm512_loadu_si512(SHARED_BYTES_ORDER.as_ptr().cast()) };
    let load = |table: &[u8; 64]| {
        // SAFETY: the table is 64 bytes; `loadu` has no alignment requirement.
        unsafe { _mm512_loadu_si512(table.as_ptr().cast()) }
    };
    let hmask = _mm512_permutexvar_epi8(order, _mm512_castsi256_si512(load32(&b.hmask)));
    let (three, four) = (_mm512_set1_epi8(3), _mm512_set1_epi8(4));
    let mut vectors = [_mm512_setzero_si512(); 4];
    for ((half, offsets), out) in BIT_OFFSETS
        .iter()
        .enumerate()
        .zip(vectors.chunks_exact_mut(2))
    {
        let qs = load32(part(&b.qs, 32 * half));
        let qs = _mm512_permutexvar_epi8(order, _mm512_castsi256_si512(qs));
        for (out, [low, high]) in out.iter_mut().zip(offsets) {
            let low = _mm512_multishift_epi64_epi8(load(low), qs);
            let high = _mm512_multishift_epi64_epi8(load(high), hmask);
            let u = _mm512_or_si512(_mm512_and_si512(low, three), _mm512_and_si512(high, four));
            *out = _mm512_sub_epi8(u, four);
        }
    }
    // The scales are `sc − 32`.
    let unpacked = unpack_q3_scales(&b.scales).map(|s| s as u8);
    let scales = _mm_sub_epi8(load16(&unpacked), _mm_set1_epi8(32));
    signed_decoded(t, vectors, scales, f16_le(b.d))
}

every_level! {
    /// Q3_K matmul: the signed K-quant tiles (as Q6_K's) over [`tile_block`].
    fn matmul, matmul_vnni_only, matmul_vbmi => matmul_vnni(
        t,
        w: &[BlockQ3K],
        row_blocks: usize,
        x: &[BlockQ8K],
        n: usize,
        y: &mut OutputColumns<'_, '_>,
    ); single = vec_dot, vec_dot_vnni_only, vec_dot_vbmi {
        signed_k_matmul(
            t,
            w,
            row_blocks,
            x,
            n,
            y,
            move |b| match t.zmm() {
                Some(vbmi) => tile_block_vbmi(vbmi, b),
                None => tile_block(t.avx2(), b),
            },
            |w, row_blocks, x, out| q3_k_rows(t, w, row_blocks, x, out, single),
        )
    }
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

kernel! {
    /// `dequantize_row_q3_K` at AVX2.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn dequantize(_t: Avx2, blocks: &[BlockQ3K], out: &mut [f32]) {
        for (block, values) in blocks.iter().zip(out.as_chunks_mut::<QK_K>().0) {
            dequantize_q3_k_block(block, values);
        }
    }
}
