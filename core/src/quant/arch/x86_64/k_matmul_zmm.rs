//! The K-quant matmul tiles on 512-bit vectors (AVX-512 VNNI with VBMI): two weight rows side by
//! side in each vector (row `2i` in the low 256 bits, `2i + 1` in the high), against an
//! activation vector repeated in both halves, so each `maddubs` and `vpdpwssd` does two outputs'
//! work of the 256-bit tiles of [`k_matmul`](super::k_matmul) (same lane order, same integers,
//! same float steps, lane by lane). One `vpermb` puts 64 activation bytes in tile lane order and
//! repeats them.

use crate::quant::OutputColumns;
use core::arch::x86_64::*;
use core::mem::MaybeUninit;

use super::k_matmul::Decoded;
use super::tokens::Avx512Vbmi;
use super::vector::{add_lanes, load32, transpose_sums};
use crate::quant::activation::BlockQ8K;

/// Super-blocks per row the 512-bit tiles take (their decoded rows are twice as large); longer
/// rows take the 256-bit tiles.
pub(super) const ZMM_MAX_BLOCKS: usize = 16;

/// Two decoded rows side by side, one super-block.
#[derive(Clone, Copy)]
struct PairDecoded {
    quants: [__m512i; 8],
    /// Each row's scale pair in all eight lanes of its half.
    scales: [__m512i; 8],
    /// `d` in all lanes of each half.
    d: __m512,
    extra: __m512i,
    dmin: [f32; 2],
}

/// `vpdpwssd acc, a, b` on 512 bits, through `asm!` for the reason `primitives::dpwssd` gives (LLVM
/// splits a chain of them into `vpmaddwd` + `vpaddd`).
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
fn dpwssd512(mut acc: __m512i, a: __m512i, b: __m512i) -> __m512i {
    // SAFETY: one register-only instruction of an enabled feature (AVX-512 VNNI); it touches no
    // memory, stack or flags.
    unsafe {
        core::arch::asm!(
            "vpdpwssd {acc}, {a}, {b}",
            acc = inout(zmm_reg) acc,
            a = in(zmm_reg) a,
            b = in(zmm_reg) b,
            options(pure, nomem, nostack, preserves_flags),
        )
    };
    acc
}

/// `a` in the low half, `b` in the high one.
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
fn halves(a: __m256i, b: __m256i) -> __m512i {
    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(a), b)
}

#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
fn pair_of(a: &Decoded, b: &Decoded) -> PairDecoded {
    PairDecoded {
        quants: core::array::from_fn(|v| halves(a.quants[v], b.quants[v])),
        scales: core::array::from_fn(|v| {
            halves(
                _mm256_set1_epi32(a.scales[v]),
                _mm256_set1_epi32(b.scales[v]),
            )
        }),
        d: _mm512_castsi512_ps(halves(
            _mm256_castps_si256(_mm256_set1_ps(a.d)),
            _mm256_castps_si256(_mm256_set1_ps(b.d)),
        )),
        extra: halves(a.extra, b.extra),
        dmin: [a.dmin, b.dmin],
    }
}

/// The `vpermb` indices of a pair's two vectors, each repeated in both halves: byte `4l + k` of
/// the first is raw byte `l, l + 8, 32 + l, 40 + l` (for `k` = 0..3), of the second those plus 16.
const fn pair_order(second: bool) -> [u8; 64] {
    let mut order = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        let j = i % 32;
        let (l, k) = (j / 4, j % 4);
        let base = [0, 8, 32, 40][k] + l + if second { 16 } else { 0 };
        order[i] = base as u8;
        i += 1;
    }
    order
}

const FIRST_ORDER: [u8; 64] = pair_order(false);
const SECOND_ORDER: [u8; 64] = pair_order(true);

/// Four rows (two [`PairDecoded`] per super-block, one after another) against `C` columns.
#[allow(clippy::needless_range_loop)]
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
fn tile<const C: usize, const SIGNED: bool, const MINS: bool>(
    pairs: &[PairDecoded],
    blocks: usize,
    columns: [&[BlockQ8K]; C],
    zero_pair: &PairDecoded,
) -> [[f32; C]; 4] {
    const { assert!(C > 0 && C <= 4) };
    let zero_column = <BlockQ8K as bytemuck::Zeroable>::zeroed();
    // SAFETY: both tables are 64 bytes; `loadu` has no alignment requirement.
    let orders = unsafe {
        [
            _mm512_loadu_si512(FIRST_ORDER.as_ptr().cast()),
            _mm512_loadu_si512(SECOND_ORDER.as_ptr().cast()),
        ]
    };
    let flip = _mm512_set1_epi8(i8::MIN);
    let mut sums = [[_mm512_setzero_ps(); C]; 2];
    let mut sumf = [_mm256_setzero_ps(); 2];
    for k in 0..blocks {
        let w: [&PairDecoded; 2] =
            core::array::from_fn(|i| pairs.get(2 * k + i).unwrap_or(zero_pair));
        let x: [&BlockQ8K; C] = core::array::from_fn(|c| columns[c].get(k).unwrap_or(&zero_column));
        let mut acc = [[_mm512_setzero_si512(); C]; 2];
        for pair in 0..4 {
            let xv: [[__m512i; 2]; C] = core::array::from_fn(|c| {
                let qs = x[c].qs.get(64 * pair..).unwrap_or(&[]);
                let raw = match qs.first_chunk::<64>() {
                    // SAFETY: the chunk is 64 bytes; `loadu` has no alignment requirement.
                    Some(qs) => unsafe { _mm512_loadu_si512(qs.as_ptr().cast()) },
                    None => _mm512_setzero_si512(),
                };
                let raw = if SIGNED {
                    _mm512_xor_si512(raw, flip)
                } else {
                    raw
                };
                orders.map(|order| _mm512_permutexvar_epi8(order, raw))
            });
            for half in 0..2 {
                let v = 2 * pair + half;
                for i in 0..2 {
                    let quants = w[i].quants[v];
                    let scales = w[i].scales[v];
                    for c in 0..C {
                        // Pairs exact in i16, as in the 256-bit tiles.
                        let products = if SIGNED {
                            _mm512_maddubs_epi16(xv[c][half], quants)
                        } else {
                            _mm512_maddubs_epi16(quants, xv[c][half])
                        };
                        acc[i][c] = dpwssd512(acc[i][c], products, scales);
                    }
                }
            }
        }
        for i in 0..2 {
            for c in 0..C {
                let lanes = if SIGNED {
                    _mm512_sub_epi32(acc[i][c], w[i].extra)
                } else {
                    acc[i][c]
                };
                // `d·dx` per row, then `sums += (d·dx)·lane`: the scalar twin's steps, lane by lane.
                let scale = _mm512_mul_ps(w[i].d, _mm512_set1_ps(x[c].scale()));
                sums[i][c] =
                    _mm512_add_ps(sums[i][c], _mm512_mul_ps(scale, _mm512_cvtepi32_ps(lanes)));
            }
        }
        if MINS {
            let mut partials = [[_mm256_setzero_si256(); 8]; 2];
            let mut dmin_dx = [[0.0f32; 8]; 2];
            for c in 0..C {
                let bsums = load32(bytemuck::cast_ref::<_, [u8; 32]>(&x[c].bsums));
                let bsums = _mm512_broadcast_i64x4(bsums);
                for i in 0..2 {
                    let both = _mm512_madd_epi16(bsums, w[i].extra);
                    let halves = [
                        _mm512_castsi512_si256(both),
                        _mm512_extracti64x4_epi64::<1>(both),
                    ];
                    for (h, part) in halves.into_iter().enumerate() {
                        let o = (2 * i + h) * C + c;
                        partials[o / 8][o % 8] = part;
                        dmin_dx[o / 8][o % 8] = w[i].dmin[h] * x[c].scale();
                    }
                }
            }
            for g in 0..(4 * C).div_ceil(8) {
                let sumi = _mm256_cvtepi32_ps(transpose_sums(&partials[g]));
                // SAFETY: `dmin_dx[g]` holds eight f32; `loadu` has no alignment requirement.
                let scale = unsafe { _mm256_loadu_ps(dmin_dx[g].as_ptr()) };
                sumf[g] = _mm256_sub_ps(sumf[g], _mm256_mul_ps(scale, sumi));
            }
        }
    }
    let mut sumf_out = [[0.0f32; 8]; 2];
    for (out, v) in sumf_out.iter_mut().zip(sumf) {
        // SAFETY: `out` holds eight f32; `storeu` has no alignment requirement.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), v) };
    }
    let mut out = [[0.0f32; C]; 4];
    for (i, sums_i) in sums.iter().enumerate() {
        for (c, &both) in sums_i.iter().enumerate() {
            let halves = [
                _mm512_castps512_ps256(both),
                _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(both))),
            ];
            for (h, half) in halves.into_iter().enumerate() {
                let r = 2 * i + h;
                let sumf = sumf_out
                    .as_flattened()
                    .get(r * C + c)
                    .copied()
                    .unwrap_or(0.0);
                if let Some(o) = out.get_mut(r).and_then(|o| o.get_mut(c)) {
                    *o = add_lanes(sumf, half);
                }
            }
        }
    }
    out
}

/// Every whole group of four rows of `w` (`row_blocks` ≤ [`ZMM_MAX_BLOCKS`] each) against every
/// column of `x`, four columns at a time and the last few one at a time; returns the rows done.
#[allow(clippy::too_many_arguments)]
#[inline]
pub(super) fn four_row_groups<W, const SIGNED: bool, const MINS: bool>(
    t: Avx512Vbmi,
    w: &[W],
    row_blocks: usize,
    x: &[BlockQ8K],
    y: &mut OutputColumns<'_, '_>,
    decode: impl Fn(&W) -> Decoded,
) -> usize {
    // SAFETY: the token proves every feature the body enables.
    unsafe { four_row_groups_body::<W, SIGNED, MINS>(t, w, row_blocks, x, y, decode) }
}

#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
fn four_row_groups_body<W, const SIGNED: bool, const MINS: bool>(
    _t: Avx512Vbmi,
    w: &[W],
    row_blocks: usize,
    x: &[BlockQ8K],
    y: &mut OutputColumns<'_, '_>,
    decode: impl Fn(&W) -> Decoded,
) -> usize {
    if row_blocks == 0 || row_blocks > ZMM_MAX_BLOCKS {
        return 0;
    }
    let zero = Decoded::zero();
    let zero_pair = pair_of(&zero, &zero);
    let mut storage = [const { MaybeUninit::<PairDecoded>::uninit() }; 2 * ZMM_MAX_BLOCKS];
    let n = x.len() / row_blocks;
    let column = |c: usize| {
        let start = c.saturating_mul(row_blocks);
        x.get(start..start.saturating_add(row_blocks))
            .unwrap_or(&[])
    };
    let mut first_row = 0;
    for group in w.chunks_exact(4 * row_blocks) {
        let mut filled = 0;
        for (k, slots) in storage.chunks_exact_mut(2).take(row_blocks).enumerate() {
            let rows: [Decoded; 4] = core::array::from_fn(|r| {
                group.get(r * row_blocks + k).map(&decode).unwrap_or(zero)
            });
            for (i, slot) in slots.iter_mut().enumerate() {
                slot.write(pair_of(&rows[2 * i], &rows[2 * i + 1]));
                filled += 1;
            }
        }
        // SAFETY: the first `filled` slots were written just above, and
        // `MaybeUninit<PairDecoded>` has the layout of `PairDecoded`.
        let pairs = unsafe { core::slice::from_raw_parts(storage.as_ptr().cast(), filled) };
        let mut first = 0;
        while first + 4 <= n {
            let group: [&[BlockQ8K]; 4] = core::array::from_fn(|i| column(first + i));
            let out = tile::<4, SIGNED, MINS>(pairs, row_blocks, group, &zero_pair);
            y.store_tile(first, first_row, &out, 4);
            first += 4;
        }
        for c in first..n {
            let out = tile::<1, SIGNED, MINS>(pairs, row_blocks, [column(c)], &zero_pair);
            y.store_tile(c, first_row, &out, 1);
        }
        first_row += 4;
    }
    first_row
}
