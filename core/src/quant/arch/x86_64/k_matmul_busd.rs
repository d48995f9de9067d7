//! The Q4_K/Q5_K matmul tiles on 512-bit vectors with `vpdpbusd` (AVX-512 VNNI with VBMI): eight
//! (or four) weight rows × four activation columns, each output with its vec_dot's bits. Eight rows
//! share each column's activations in dword order and its bsum pairs, the tile's shuffles that do
//! not depend on the weights.
//!
//! Layout ("dword order"): a pair of 32-value sub-blocks `A` (values `64v..64v+32`) and `B` (the
//! next 32) is one zmm; 128-bit lane `k` holds the dwords `A[2k], B[2k], A[2k+1], B[2k+1]`, where
//! dword `X[l]` is the four bytes `X[l], X[l+8], X[l+16], X[l+24]`: the four values of reference
//! lane `l` (element index mod 8) in sub-block `X`. One `vpdpbusd` (weights unsigned, activations
//! signed) leaves each dword's four products summed: the exact lane sum of one sub-block (below
//! 4·31·128 in magnitude, so exact in i16). For two columns `c1`, `c2` of one row, `vpackssdw`
//! of their two results gives, per 128-bit lane, the i16 pairs `(A[2k], B[2k])`, `(A[2k+1],
//! B[2k+1])` of `c1`, then the same of `c2`; one `vpdpwssd` with the row's scale pair
//! `(s_A, s_B)` adds `s_A·A[l] + s_B·B[l]` into the dword of lane `l`. The accumulator of a row
//! and a column pair is then, per 128-bit lane `k`: `c1`'s lanes `2k`, `2k+1`, `c2`'s lanes `2k`,
//! `2k+1`: the reference's exact `aux32` lanes, two outputs per zmm, ready for the float step
//! (`sums[l] += (d·dx)·aux32[l]`, lane by lane, as the scalar twin). Per output and super-block:
//! four `vpdpbusd`, two `vpackssdw`, two `vpdpwssd` (against four `vpmaddubsw` and four
//! `vpdpwssd` through `maddubs`).
//!
//! The mins: `Σ bsums·mins` of a group of four rows' 16 outputs in one zmm (output `4r + c` in
//! dword `4r + c`), eight `vpdpwssd` of the columns' bsum pairs (gathered by `vpermt2d`, once for
//! both groups of an eight-row tile) against the rows' doubled mins (laid out when the rows are
//! decoded), exact in i32; then `sumf -= (dmin·dx)·sumi` for the 16 outputs at once.

use crate::quant::output_columns::{ColumnStore, Stores};
use crate::quant::OutputColumns;
use core::arch::x86_64::*;
use core::mem::MaybeUninit;
use core::ops::Range;

use super::k_matmul::{chunk_blocks, column_part, in_chunks};
use super::tokens::Avx512Vbmi;
use super::vector::{load32, part, prefetch_range_l2};
use crate::quant::activation::BlockQ8K;
use crate::quant::k_quants::q4_k::scales_and_mins;

/// Super-blocks of decoded rows the stack buffer holds (about 1.9 KB per super-block of four
/// rows): one group of rows this long, or two of half the length, at once; longer rows in chunks
/// ([`in_chunks`]).
pub(super) const BUSD_MAX_BLOCKS: usize = 40;

/// The `vpermb` indices that put 64 raw bytes (`A` then `B`) in dword order (module docs).
const fn dword_order() -> [u8; 64] {
    let mut order = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        let (dword, e) = (i / 4, i % 4);
        let (k, m) = (dword / 4, dword % 4);
        let (sub, l) = (m % 2, 2 * k + m / 2);
        order[i] = (32 * sub + l + 8 * e) as u8;
        i += 1;
    }
    order
}

/// [`dword_order`] as a table (64 bytes, for `vpermb`).
pub(super) const DWORD_ORDER: [u8; 64] = dword_order();

/// `vpermt2d` indices: for bsum pair `q`, dword `4r + c` takes column `c`'s pair `q` from the
/// columns' bsums laid out as `[c0 | c1]`, `[c2 | c3]` (32 bytes each).
const fn bsum_indices() -> [[u32; 16]; 8] {
    let mut idx = [[0u32; 16]; 8];
    let mut q = 0;
    while q < 8 {
        let mut o = 0;
        while o < 16 {
            idx[q][o] = (8 * (o % 4) + q) as u32;
            o += 1;
        }
        q += 1;
    }
    idx
}

const BSUM_INDICES: [[u32; 16]; 8] = bsum_indices();

/// A Q4_K/Q5_K block's parts: packed scales, `qs`, Q5_K's `qh`, `d` and `dmin` bytes.
pub(super) type MinsParts<'a> = (
    &'a [u8; 12],
    &'a [u8; 128],
    Option<&'a [u8; 32]>,
    &'a [u8; 4],
);

/// Four rows' super-block `k`, as the tile reads it.
#[derive(Clone, Copy)]
struct GroupBlock {
    quants: [[__m512i; 4]; 4],
    scales: [[i32; 4]; 4],
    d: [f32; 4],
    /// For bsum pair `q`: dword `4r + c` is `(m_q, m_q)` of row `r`.
    mins: [__m512i; 8],
    /// Dword `4r + c` is row `r`'s `dmin`.
    dmin: __m512,
}

/// `vpermb` indices into 64 bytes of two 32-byte halves `A`, `B` turned into indices into one
/// 32-byte array whose byte `i` holds both `A[i]` and `B[i]` (as nibbles or bits).
pub(super) const fn within_32_bytes(order: [u8; 64]) -> [u8; 64] {
    let mut order = order;
    let mut i = 0;
    while i < 64 {
        order[i] %= 32;
        i += 1;
    }
    order
}

/// [`DWORD_ORDER`] over one pair's 32 quant bytes (`qs` or `qh`) instead of 64 split values: byte
/// `i` of dword order takes byte `DWORD_ORDER[i] mod 32`, whose low nibble (even dwords, sub-block
/// `A`) or high nibble (odd dwords, `B`) is its value.
const PACKED_DWORD_ORDER: [u8; 64] = within_32_bytes(DWORD_ORDER);

/// Per pair `v`, the left rotation of each dword of Q5_K's `qh` in dword order that brings the
/// fifth bit of its sub-block (bit `b` = `2v` for `A`, `2v + 1` for `B`) to bit 4 of every byte:
/// rotated by `4 - b` (mod 32), bit `8k + 4` of a dword is bit `8k + b` of byte `k`'s source.
const fn fifth_bit_rotations() -> [[u32; 16]; 4] {
    let mut counts = [[0u32; 16]; 4];
    let mut v = 0;
    while v < 4 {
        let mut dword = 0;
        while dword < 16 {
            let bit = 2 * v + dword % 2;
            counts[v][dword] = ((36 - bit) % 32) as u32;
            dword += 1;
        }
        v += 1;
    }
    counts
}

const FIFTH_BIT_ROTATIONS: [[u32; 16]; 4] = fifth_bit_rotations();

/// A Q4_K/Q5_K block's quants in dword order: pair `v` is sub-blocks `2v` (low nibbles of
/// `qs[32v..]`, fifth bit `2v` of `qh`) and `2v + 1` (high nibbles, bit `2v + 1`). One `vpermb`
/// puts the pair's packed bytes in dword order ([`PACKED_DWORD_ORDER`]); the odd dwords then
/// shift their high nibbles down.
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
fn decode_quants(qs: &[u8; 128], qh: Option<&[u8; 32]>, out: &mut [__m512i; 4]) {
    // SAFETY: the table is 64 bytes; `loadu` has no alignment requirement.
    let order = unsafe { _mm512_loadu_si512(PACKED_DWORD_ORDER.as_ptr().cast()) };
    let nibble = _mm512_set1_epi8(0x0f);
    let fifth_bits = qh.map(|h| _mm512_permutexvar_epi8(order, _mm512_castsi256_si512(load32(h))));
    for (pair, out) in out.iter_mut().enumerate() {
        let q = _mm512_castsi256_si512(load32(part(qs, 32 * pair)));
        let bytes = _mm512_permutexvar_epi8(order, q);
        let values = _mm512_mask_srli_epi32::<4>(bytes, 0xaaaa, bytes);
        *out = _mm512_and_si512(values, nibble);
        if let (Some(h), Some(counts)) = (fifth_bits, FIFTH_BIT_ROTATIONS.get(pair)) {
            // SAFETY: the table holds sixteen u32; `loadu` has no alignment requirement.
            let counts = unsafe { _mm512_loadu_si512(counts.as_ptr().cast()) };
            let fifth = _mm512_and_si512(_mm512_rolv_epi32(h, counts), _mm512_set1_epi8(0x10));
            *out = _mm512_or_si512(*out, fifth);
        }
    }
}

/// One row's super-block for [`GroupBlock::from_rows`]: its quants and scale pairs into the
/// group, its eight mins (bytes) and its `d`, `dmin` bits returned.
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
fn decode_row(
    (packed, qs, qh, d_dmin): MinsParts<'_>,
    quants_out: &mut [__m512i; 4],
    scales_out: &mut [i32; 4],
) -> (i64, i32) {
    decode_quants(qs, qh, quants_out);
    let (scales, mins) = scales_and_mins(packed);
    // Scale pair `v` is `scales[2v] | scales[2v + 1] << 16`: the bytes widened to words.
    let pairs = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(i64::from_le_bytes(scales)));
    // SAFETY: `scales_out` is sixteen bytes; `storeu` has no alignment requirement.
    unsafe { _mm_storeu_si128(scales_out.as_mut_ptr().cast(), pairs) };
    (i64::from_le_bytes(mins), i32::from_le_bytes(*d_dmin))
}

impl GroupBlock {
    #[inline]
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
    fn zero() -> GroupBlock {
        GroupBlock {
            quants: [[_mm512_setzero_si512(); 4]; 4],
            scales: [[0; 4]; 4],
            d: [0.0; 4],
            mins: [_mm512_setzero_si512(); 8],
            dmin: _mm512_setzero_ps(),
        }
    }

    /// Four rows' super-blocks laid out for the tile. Straight-line per row, so that the mins and
    /// `d`, `dmin` reach their vectors in registers (a loop left them in an array whose 8-byte
    /// stores a 16-byte load could not forward from).
    #[inline]
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
    fn from_rows<W>(rows: [&W; 4], parts: &impl Fn(&W) -> MinsParts<'_>) -> GroupBlock {
        let mut block = GroupBlock::zero();
        let [quants0, quants1, quants2, quants3] = &mut block.quants;
        let [scales0, scales1, scales2, scales3] = &mut block.scales;
        let (mins0, dd0) = decode_row(parts(rows[0]), quants0, scales0);
        let (mins1, dd1) = decode_row(parts(rows[1]), quants1, scales1);
        let (mins2, dd2) = decode_row(parts(rows[2]), quants2, scales2);
        let (mins3, dd3) = decode_row(parts(rows[3]), quants3, scales3);
        // Row `r`'s mins as dwords `(m_q, m_q)` at `8r + q` of `[rows 0, 1]` and `[rows 2, 3]`.
        let doubled = |low: i64, high: i64| {
            let v = _mm512_cvtepu8_epi32(_mm_set_epi64x(high, low));
            _mm512_or_si512(v, _mm512_slli_epi32::<16>(v))
        };
        let (first, second) = (doubled(mins0, mins1), doubled(mins2, mins3));
        for (q, m) in block.mins.iter_mut().enumerate() {
            let q = q as i32;
            let idx = _mm512_set_epi32(
                24 + q,
                24 + q,
                24 + q,
                24 + q,
                16 + q,
                16 + q,
                16 + q,
                16 + q,
                8 + q,
                8 + q,
                8 + q,
                8 + q,
                q,
                q,
                q,
                q,
            );
            *m = _mm512_permutex2var_epi32(first, idx, second);
        }
        // `d0, dmin0, d1, dmin1, ...`: the halves are exact in f32.
        let d_dmin = _mm256_cvtph_ps(_mm_set_epi32(dd3, dd2, dd1, dd0));
        let d = _mm256_castps256_ps128(_mm256_permutevar8x32_ps(
            d_dmin,
            _mm256_set_epi32(7, 5, 3, 1, 6, 4, 2, 0),
        ));
        // SAFETY: `block.d` is four f32; `storeu` has no alignment requirement.
        unsafe { _mm_storeu_ps(block.d.as_mut_ptr(), d) };
        let idx = _mm512_set_epi32(7, 7, 7, 7, 5, 5, 5, 5, 3, 3, 3, 3, 1, 1, 1, 1);
        block.dmin = _mm512_permutexvar_ps(idx, _mm512_castps256_ps512(d_dmin));
        block
    }
}

/// `acc + (s_A, s_B)·packs(w·x1, w·x2)`: one row against two columns, one pair of sub-blocks
/// (module docs). One `asm!` block: LLVM splits `vpdpwssd` chains into `vpmaddwd` + `vpaddd`.
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
fn pair_step(acc: __m512i, w: __m512i, x1: __m512i, x2: __m512i, s: __m512i) -> __m512i {
    let mut acc = acc;
    let _p1: __m512i;
    let _p2: __m512i;
    // SAFETY: register-only instructions of enabled features (AVX-512 F/BW/VNNI); they touch no
    // memory, stack or flags. `p1` and `p2` are scratch outputs distinct from every input.
    unsafe {
        core::arch::asm!(
            "vpxord {p1}, {p1}, {p1}",
            "vpxord {p2}, {p2}, {p2}",
            "vpdpbusd {p1}, {w}, {x1}",
            "vpdpbusd {p2}, {w}, {x2}",
            "vpackssdw {p1}, {p1}, {p2}",
            "vpdpwssd {acc}, {p1}, {s}",
            acc = inout(zmm_reg) acc,
            w = in(zmm_reg) w,
            x1 = in(zmm_reg) x1,
            x2 = in(zmm_reg) x2,
            s = in(zmm_reg) s,
            p1 = out(zmm_reg) _p1,
            p2 = out(zmm_reg) _p2,
            options(pure, nomem, nostack, preserves_flags),
        )
    };
    acc
}

/// `vpdpwssd acc, a, b` on 512 bits (in `asm!` for the reason [`pair_step`] gives).
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
fn dpwssd(mut acc: __m512i, a: __m512i, b: __m512i) -> __m512i {
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

/// 64 bytes from `bytes` (zeros past its end).
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
fn load64(bytes: &[i8]) -> __m512i {
    match bytes.first_chunk::<64>() {
        // SAFETY: the chunk is 64 bytes; `loadu` has no alignment requirement.
        Some(b) => unsafe { _mm512_loadu_si512(b.as_ptr().cast()) },
        None => _mm512_setzero_si512(),
    }
}

/// A column's 16 bsums (32 bytes).
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
fn bsums(x: &BlockQ8K) -> __m256i {
    // SAFETY: `bsums` is 32 bytes; `loadu` has no alignment requirement.
    unsafe { _mm256_loadu_si256(x.bsums.as_ptr().cast()) }
}

/// `G` groups of four rows (`groups[i][k]` is group `i`'s super-block `k`) against the columns
/// `columns`: all four for `CP = 2`, the first two for `CP = 1` (the others then repeat those and
/// their outputs are not used). `out[i][r][c]` has the bits of row `4i + r`'s vec_dot with
/// column `c`. Two groups share each column's activations in dword order and bsum pairs.
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
fn tile<const CP: usize, const G: usize>(
    groups: [&[GroupBlock]; G],
    columns: [&[BlockQ8K]; 4],
    zero_group: &GroupBlock,
) -> [[[f32; 4]; 4]; G] {
    let mut state = MinsSums::zero();
    tile_blocks::<CP, G, false>(&mut state, groups, columns, zero_group);
    tile_outputs(state)
}

/// The float state of a [`tile`] between runs of super-blocks: per group, row and column pair
/// the lane sums (in the accumulators' order), per group the serial `sumf`s (dword `4r + c`).
#[derive(Clone, Copy)]
struct MinsSums<const CP: usize, const G: usize> {
    sums: [[[__m512; CP]; 4]; G],
    sumf: [__m512; G],
}

impl<const CP: usize, const G: usize> MinsSums<CP, G> {
    #[inline]
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
    fn zero() -> MinsSums<CP, G> {
        MinsSums {
            sums: [[[_mm512_setzero_ps(); CP]; 4]; G],
            sumf: [_mm512_setzero_ps(); G],
        }
    }
}

/// [`tile`]'s float steps over the groups' super-blocks, from `state` on (the rest of the rows'
/// super-blocks may follow in another call: the same steps in the same order). `CHUNKED` as in
/// [`k_matmul`](super::k_matmul)'s tiles: an instance per caller.
#[allow(clippy::needless_range_loop)]
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
fn tile_blocks<const CP: usize, const G: usize, const CHUNKED: bool>(
    state: &mut MinsSums<CP, G>,
    groups: [&[GroupBlock]; G],
    columns: [&[BlockQ8K]; 4],
    zero_group: &GroupBlock,
) {
    const { assert!((CP == 1 || CP == 2) && (G == 1 || G == 2)) };
    let zero_column = <BlockQ8K as bytemuck::Zeroable>::zeroed();
    // SAFETY: the tables are 64 bytes each; `loadu` has no alignment requirement.
    let order = unsafe { _mm512_loadu_si512(DWORD_ORDER.as_ptr().cast()) };
    // Copied in and out once, as in the 256-bit tiles.
    let MinsSums { mut sums, mut sumf } = *state;
    let blocks = groups.iter().map(|g| g.len()).min().unwrap_or(0);
    for k in 0..blocks {
        let g: [&GroupBlock; G] = core::array::from_fn(|i| groups[i].get(k).unwrap_or(zero_group));
        let x: [&BlockQ8K; 4] = core::array::from_fn(|c| columns[c].get(k).unwrap_or(&zero_column));
        let mut acc = [[[_mm512_setzero_si512(); CP]; 4]; G];
        for v in 0..4 {
            let xv: [__m512i; 4] = core::array::from_fn(|c| {
                if c < 2 * CP {
                    let qs = x[c].qs.get(64 * v..).unwrap_or(&[]);
                    _mm512_permutexvar_epi8(order, load64(qs))
                } else {
                    _mm512_setzero_si512()
                }
            });
            for (i, group) in g.iter().enumerate() {
                for r in 0..4 {
                    let w = group.quants[r][v];
                    let s = _mm512_set1_epi32(group.scales[r][v]);
                    for cp in 0..CP {
                        acc[i][r][cp] = pair_step(acc[i][r][cp], w, xv[2 * cp], xv[2 * cp + 1], s);
                    }
                }
            }
        }
        let dx = _mm_set_ps(x[3].scale(), x[2].scale(), x[1].scale(), x[0].scale());
        // Per column pair: `dx1, dx1, dx2, dx2` in every 128-bit lane (the accumulators' order).
        let dx_pairs = [
            _mm512_broadcast_f32x4(_mm_unpacklo_ps(dx, dx)),
            _mm512_broadcast_f32x4(_mm_unpackhi_ps(dx, dx)),
        ];
        for (i, group) in g.iter().enumerate() {
            for r in 0..4 {
                let d = _mm512_set1_ps(group.d[r]);
                for cp in 0..CP {
                    // `d·dx` per output, then `sums += (d·dx)·lane`: the scalar twin's steps.
                    let scale = _mm512_mul_ps(d, dx_pairs[cp]);
                    let lanes = _mm512_cvtepi32_ps(acc[i][r][cp]);
                    sums[i][r][cp] = _mm512_add_ps(sums[i][r][cp], _mm512_mul_ps(scale, lanes));
                }
            }
        }
        // `Σ bsums·mins`, exact, for each group's 16 outputs (dword `4r + c`).
        let low = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(bsums(x[0])), bsums(x[1]));
        let high = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(bsums(x[2])), bsums(x[3]));
        let mut sumi = [_mm512_setzero_si512(); G];
        for q in 0..8 {
            // SAFETY: each index table holds sixteen u32; `loadu` has no alignment requirement.
            let idx = unsafe { _mm512_loadu_si512(BSUM_INDICES[q].as_ptr().cast()) };
            let pairs = _mm512_permutex2var_epi32(low, idx, high);
            for (i, group) in g.iter().enumerate() {
                sumi[i] = dpwssd(sumi[i], pairs, group.mins[q]);
            }
        }
        let dx4 = _mm512_broadcast_f32x4(dx);
        for (i, group) in g.iter().enumerate() {
            let dmin_dx = _mm512_mul_ps(group.dmin, dx4);
            sumf[i] = _mm512_sub_ps(sumf[i], _mm512_mul_ps(dmin_dx, _mm512_cvtepi32_ps(sumi[i])));
        }
    }
    *state = MinsSums { sums, sumf };
}

/// A [`tile`]'s outputs from its final state: `sumf`, then the eight lane sums in lane order.
#[allow(clippy::needless_range_loop)]
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
fn tile_outputs<const CP: usize, const G: usize>(state: MinsSums<CP, G>) -> [[[f32; 4]; 4]; G] {
    let MinsSums { sums, sumf } = state;
    let mut out = [[[0.0f32; 4]; 4]; G];
    for i in 0..G {
        let mut sumf_out = [0.0f32; 16];
        // SAFETY: `sumf_out` holds sixteen f32; `storeu` has no alignment requirement.
        unsafe { _mm512_storeu_ps(sumf_out.as_mut_ptr(), sumf[i]) };
        for r in 0..4 {
            for cp in 0..CP {
                let mut lanes = [0.0f32; 16];
                // SAFETY: `lanes` holds sixteen f32; `storeu` has no alignment requirement.
                unsafe { _mm512_storeu_ps(lanes.as_mut_ptr(), sums[i][r][cp]) };
                for half in 0..2 {
                    let c = 2 * cp + half;
                    let mut total = sumf_out[4 * r + c];
                    for l in 0..8 {
                        total += lanes[4 * (l / 2) + 2 * half + l % 2];
                    }
                    out[i][r][c] = total;
                }
            }
        }
    }
    out
}

/// Every whole group of four rows of `w` (`row_blocks` each, every column of `x` that long)
/// against every column of `x`, four columns at a time (then two, then one), two groups at once
/// (the last alone), rows longer than the decoded rows' buffer holds in chunks; returns the rows
/// done.
#[allow(clippy::too_many_arguments)]
#[inline]
pub(super) fn mins_four_row_groups<W>(
    t: Avx512Vbmi,
    w: &[W],
    row_blocks: usize,
    x: &[BlockQ8K],
    y: &mut OutputColumns<'_, '_>,
    parts: impl Fn(&W) -> MinsParts<'_>,
) -> usize {
    // SAFETY: the token proves every feature the body enables.
    unsafe { mins_four_row_groups_body(t, w, row_blocks, x, y, parts) }
}

/// A tile's outputs into `y`: group `i`'s `[r][c]` to row `first_row + 4i + r` of column
/// `first + c`, for the first `columns` columns, the view's form matched once. Out of line, so
/// that the signed tile loop keeps one caller and stays inlined (docs/kernel-experiments.md,
/// "Row shares straight into `y`").
#[inline(never)]
fn store_tiles<const G: usize>(
    y: &mut OutputColumns<'_, '_>,
    first: usize,
    first_row: usize,
    out: &[[[f32; 4]; 4]; G],
    columns: usize,
) {
    fn each<const G: usize>(
        y: &mut impl ColumnStore,
        first: usize,
        first_row: usize,
        out: &[[[f32; 4]; 4]; G],
        columns: usize,
    ) {
        for (i, out_i) in out.iter().enumerate() {
            for (r, out_r) in out_i.iter().enumerate() {
                for (c, &v) in out_r.iter().take(columns).enumerate() {
                    y.set(first + c, first_row + 4 * i + r, v);
                }
            }
        }
    }
    match y.stores() {
        Stores::Strided(mut y) => each(&mut y, first, first_row, out, columns),
        Stores::Split(mut y) => each(&mut y, first, first_row, out, columns),
    }
}

/// [`groups_against_columns`] with `y`'s form matched once for the groups (each form's column
/// loop then stores as into a plain slice).
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
fn groups_into_view<const G: usize>(
    zero_group: &GroupBlock,
    groups: [&[GroupBlock]; G],
    row_blocks: usize,
    x: &[BlockQ8K],
    y: &mut OutputColumns<'_, '_>,
    first_row: usize,
    ahead: Ahead,
) {
    match y.stores() {
        Stores::Strided(mut y) => {
            groups_against_columns(zero_group, groups, row_blocks, x, &mut y, first_row, ahead)
        }
        Stores::Split(mut y) => {
            groups_against_columns(zero_group, groups, row_blocks, x, &mut y, first_row, ahead)
        }
    }
}

/// The raw bytes of the rows the next call decodes, asked for (into L2) a part per tile of
/// columns while this call's tiles run: the decode reads a group's rows in one burst, which
/// otherwise waits on memory where the matrix is larger than the cache. An address, never read.
#[derive(Clone, Copy)]
struct Ahead {
    start: *const i8,
    bytes: usize,
}

impl Ahead {
    /// Nothing to ask for.
    const NONE: Ahead = Ahead {
        start: core::ptr::null(),
        bytes: 0,
    };

    /// Asks for part `part` of `parts` (into L2).
    #[inline(always)]
    fn ask(self, part: usize, parts: usize) {
        let share = self.bytes.div_ceil(parts.max(1)).next_multiple_of(64);
        let offset = part.saturating_mul(share).min(self.bytes);
        let bytes = share.min(self.bytes - offset);
        prefetch_range_l2(self.start.wrapping_add(offset), bytes);
    }
}

/// `G` groups of decoded rows (the first is row `first_row` of `y`) against every column of `x`
/// (`zero_group`: a zeroed block, which the tiles need only to index without a panic path).
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
fn groups_against_columns<const G: usize, S: ColumnStore>(
    zero_group: &GroupBlock,
    groups: [&[GroupBlock]; G],
    row_blocks: usize,
    x: &[BlockQ8K],
    y: &mut S,
    first_row: usize,
    ahead: Ahead,
) {
    let n = x.len() / row_blocks.max(1);
    let column = |c: usize| column_part(x, row_blocks, c, &(0..row_blocks));
    let tiles = n.div_ceil(4);
    let mut first = 0;
    while first + 4 <= n {
        let cols: [&[BlockQ8K]; 4] = core::array::from_fn(|i| column(first + i));
        let out = tile::<2, G>(groups, cols, zero_group);
        ahead.ask(first / 4, tiles);
        for (i, out_i) in out.iter().enumerate() {
            for (r, out_r) in out_i.iter().enumerate() {
                for (c, &v) in out_r.iter().enumerate() {
                    y.set(first + c, first_row + 4 * i + r, v);
                }
            }
        }
        first += 4;
    }
    while first < n {
        let (a, b) = (column(first), column((first + 1).min(n - 1)));
        let out = tile::<1, G>(groups, [a, b, a, b], zero_group);
        ahead.ask(first / 4, tiles);
        let count = (n - first).min(2);
        for (i, out_i) in out.iter().enumerate() {
            for (r, out_r) in out_i.iter().enumerate() {
                for (c, &v) in out_r.iter().take(count).enumerate() {
                    y.set(first + c, first_row + 4 * i + r, v);
                }
            }
        }
        first += count;
    }
}

#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
fn mins_four_row_groups_body<W>(
    _t: Avx512Vbmi,
    w: &[W],
    row_blocks: usize,
    x: &[BlockQ8K],
    y: &mut OutputColumns<'_, '_>,
    parts: impl Fn(&W) -> MinsParts<'_>,
) -> usize {
    if row_blocks == 0 {
        return 0;
    }
    // Not zeroed: each call writes the slots it reads (zeroing all of them cost about 0.4 µs a
    // call, which the pool's shorter calls pay again and again).
    let mut storage = [const { MaybeUninit::<GroupBlock>::uninit() }; BUSD_MAX_BLOCKS];
    let zero = GroupBlock::zero();
    // Two groups at once, their rows whole where the stack buffer holds both, else in chunks.
    let chunk = chunk_blocks(row_blocks, BUSD_MAX_BLOCKS / 2);
    let pair_rows = 8 * row_blocks;
    let (paired, rest) = w
        .split_at_checked(w.len() / pair_rows * pair_rows)
        .unwrap_or((&[], w));
    let mut first_row = 0;
    for pair in paired.chunks_exact(pair_rows) {
        let Some((a, b)) = pair.split_at_checked(4 * row_blocks) else {
            break;
        };
        let groups = [a, b];
        // The next pair's rows (or the lone group's) follow this pair's.
        let ahead = Ahead {
            start: pair.as_ptr_range().end.cast(),
            bytes: core::mem::size_of_val(pair),
        };
        groups_in_chunks::<W, 2>(
            &zero,
            &mut storage,
            groups,
            row_blocks,
            chunk,
            x,
            y,
            first_row,
            &parts,
            ahead,
        );
        first_row += 8;
    }
    // A last group alone has the whole buffer.
    let lone_chunk = chunk_blocks(row_blocks, BUSD_MAX_BLOCKS);
    for group in rest.chunks_exact(4 * row_blocks) {
        groups_in_chunks::<W, 1>(
            &zero,
            &mut storage,
            [group],
            row_blocks,
            lone_chunk,
            x,
            y,
            first_row,
            &parts,
            Ahead::NONE,
        );
        first_row += 4;
    }
    first_row
}

/// `G` groups of four rows (`groups`, the first is row `first_row` of `y`) decoded into `storage`
/// (`chunk` slots per group) and run against every column of `x`: at once where `chunk` covers
/// the rows, else in chunks of `chunk` super-blocks ([`in_chunks`]).
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
fn groups_in_chunks<W, const G: usize>(
    zero: &GroupBlock,
    storage: &mut [MaybeUninit<GroupBlock>],
    groups: [&[W]; G],
    row_blocks: usize,
    chunk: usize,
    x: &[BlockQ8K],
    y: &mut OutputColumns<'_, '_>,
    first_row: usize,
    parts: &impl Fn(&W) -> MinsParts<'_>,
    ahead: Ahead,
) {
    // Writes each group's super-blocks `blocks` into its `chunk` slots of `storage` and returns
    // how many slots of each it wrote (the first `blocks.len()`, as many as it has).
    let fill = |storage: &mut [MaybeUninit<GroupBlock>], blocks: Range<usize>| {
        let mut filled = [0; G];
        for ((group, part), filled) in groups
            .iter()
            .zip(storage.chunks_mut(chunk))
            .zip(&mut filled)
        {
            for (k, slot) in blocks.clone().zip(part.iter_mut()) {
                let rows: [Option<&W>; 4] = core::array::from_fn(|r| group.get(r * row_blocks + k));
                slot.write(match rows {
                    [Some(a), Some(b), Some(c), Some(d)] => {
                        GroupBlock::from_rows([a, b, c, d], parts)
                    }
                    _ => *zero,
                });
                *filled += 1;
            }
        }
        filled
    };
    // The groups' decoded super-blocks: `filled[i]` slots of part `i`.
    let decoded = |storage: &[MaybeUninit<GroupBlock>], filled: [usize; G]| -> [&[GroupBlock]; G] {
        core::array::from_fn(|i| {
            let part = storage.chunks(chunk).nth(i).unwrap_or(&[]);
            let part = part.get(..filled[i]).unwrap_or(&[]);
            // SAFETY: `fill` wrote the first `filled[i]` slots of part `i` (and `get` kept no
            // more than the part has); `MaybeUninit<GroupBlock>` has the layout of `GroupBlock`.
            unsafe { core::slice::from_raw_parts(part.as_ptr().cast(), part.len()) }
        })
    };
    if chunk >= row_blocks {
        let filled = fill(storage, 0..row_blocks);
        let groups = decoded(storage, filled);
        groups_into_view::<G>(zero, groups, row_blocks, x, y, first_row, ahead);
        return;
    }
    let n = x.len() / row_blocks;
    // Every tile of columns runs once per chunk: the next rows are asked for a part per tile and
    // chunk.
    let tiles = n.div_ceil(4);
    let parts = tiles * row_blocks.div_ceil(chunk.max(1));
    in_chunks::<_, [usize; G], MinsSums<2, G>, 4>(
        storage,
        n,
        row_blocks,
        chunk,
        || MinsSums::zero(),
        fill,
        |storage, filled, state, tile_columns, blocks| {
            let part = blocks.start / chunk.max(1) * tiles + tile_columns[0] / 4;
            let columns = tile_columns.map(|c| column_part(x, row_blocks, c, &blocks));
            tile_blocks::<2, G, true>(state, decoded(storage, filled), columns, zero);
            ahead.ask(part, parts);
        },
        |state, first, count| store_tiles(y, first, first_row, &tile_outputs(state), count),
    );
}

/// The `vpermt2b` indices of Q6_K's column-pair tiles: the low 256 bits take a pair's vector
/// (`second`: its second vector) in tile lane order (see [`k_matmul`](super::k_matmul)) from the
/// first column's 64 raw bytes, the high 256 bits the same from the second column's (indices
/// plus 64).
const fn column_pair_order(second: bool) -> [u8; 64] {
    let mut order = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        let (h, j) = (i / 32, i % 32);
        let (l, k) = (j / 4, j % 4);
        let base = [0, 8, 32, 40][k] + l + if second { 16 } else { 0 };
        order[i] = (base + 64 * h) as u8;
        i += 1;
    }
    order
}

const COLUMN_PAIR_ORDERS: [[u8; 64]; 2] = [column_pair_order(false), column_pair_order(true)];

/// `vpdpwssd acc, maddubs(x, w), s`: Q6_K's products of two columns (`x`, activation plus 128,
/// one column per 256-bit half) against one row (`w`, signed, repeated in both halves), pairs
/// exact in i16 (below 2·255·32), scaled by the row's scale pairs `s`.
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
fn signed_step(acc: __m512i, x: __m512i, w: __m512i, s: __m512i) -> __m512i {
    let mut acc = acc;
    let _p: __m512i;
    // SAFETY: register-only instructions of enabled features (AVX-512 BW/VNNI); they touch no
    // memory, stack or flags. `p` is a scratch output distinct from every input.
    unsafe {
        core::arch::asm!(
            "vpmaddubsw {p}, {x}, {w}",
            "vpdpwssd {acc}, {p}, {s}",
            acc = inout(zmm_reg) acc,
            x = in(zmm_reg) x,
            w = in(zmm_reg) w,
            s = in(zmm_reg) s,
            p = out(zmm_reg) _p,
            options(pure, nomem, nostack, preserves_flags),
        )
    };
    acc
}

/// Four decoded Q6_K rows (`rows[4k + r]` is row `r`'s super-block `k`) against four columns
/// (`CP = 2`) or the first two (`CP = 1`): two columns per zmm (one per 256-bit half, so each
/// 256-bit half is the 256-bit tiles' computation, lane for lane), each row's quant vector
/// repeated in both halves.
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
fn signed_tile<const CP: usize>(
    rows: &[super::k_matmul::Decoded],
    blocks: usize,
    columns: [&[BlockQ8K]; 4],
) -> [[f32; 4]; 4] {
    let mut sums = [[_mm512_setzero_ps(); CP]; 4];
    signed_tile_blocks::<CP, false>(&mut sums, rows, blocks, columns);
    signed_tile_outputs(sums)
}

/// [`signed_tile`]'s float steps over `blocks` super-blocks, from the lane sums `sums` on (the
/// rest of the rows' super-blocks may follow in another call: the same steps in the same order).
/// `CHUNKED`: an instance per caller, as [`tile_blocks`]'s.
#[allow(clippy::needless_range_loop)]
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
fn signed_tile_blocks<const CP: usize, const CHUNKED: bool>(
    state: &mut [[__m512; CP]; 4],
    rows: &[super::k_matmul::Decoded],
    blocks: usize,
    columns: [&[BlockQ8K]; 4],
) {
    const { assert!(CP == 1 || CP == 2) };
    let zero_column = <BlockQ8K as bytemuck::Zeroable>::zeroed();
    // SAFETY: the tables are 64 bytes each; `loadu` has no alignment requirement.
    let orders = COLUMN_PAIR_ORDERS.map(|o| unsafe { _mm512_loadu_si512(o.as_ptr().cast()) });
    let flip = _mm512_set1_epi8(i8::MIN);
    // Copied in and out once, as in the 256-bit tiles.
    let mut sums = *state;
    for k in 0..blocks {
        let w: [Option<&super::k_matmul::Decoded>; 4] =
            core::array::from_fn(|r| rows.get(4 * k + r));
        let [Some(w0), Some(w1), Some(w2), Some(w3)] = w else {
            break;
        };
        let w = [w0, w1, w2, w3];
        let x: [&BlockQ8K; 4] = core::array::from_fn(|c| columns[c].get(k).unwrap_or(&zero_column));
        let mut acc = [[_mm512_setzero_si512(); CP]; 4];
        for pair in 0..4 {
            let raw: [__m512i; 4] = core::array::from_fn(|c| {
                if c < 2 * CP {
                    _mm512_xor_si512(load64(x[c].qs.get(64 * pair..).unwrap_or(&[])), flip)
                } else {
                    _mm512_setzero_si512()
                }
            });
            for half in 0..2 {
                let v = 2 * pair + half;
                let xv: [__m512i; CP] = core::array::from_fn(|cp| {
                    _mm512_permutex2var_epi8(raw[2 * cp], orders[half], raw[2 * cp + 1])
                });
                for r in 0..4 {
                    let q = _mm512_broadcast_i64x4(w[r].quants[v]);
                    let s = _mm512_set1_epi32(w[r].scales[v]);
                    for cp in 0..CP {
                        acc[r][cp] = signed_step(acc[r][cp], xv[cp], q, s);
                    }
                }
            }
        }
        let halves = |a: f32, b: f32| {
            _mm512_castsi512_ps(_mm512_inserti64x4::<1>(
                _mm512_castsi256_si512(_mm256_castps_si256(_mm256_set1_ps(a))),
                _mm256_castps_si256(_mm256_set1_ps(b)),
            ))
        };
        let dx = [
            halves(x[0].scale(), x[1].scale()),
            halves(x[2].scale(), x[3].scale()),
        ];
        for r in 0..4 {
            let d = _mm512_set1_ps(w[r].d);
            let correction = _mm512_broadcast_i64x4(w[r].extra);
            for cp in 0..CP {
                let lanes = _mm512_sub_epi32(acc[r][cp], correction);
                // `d·dx` per output, then `sums += (d·dx)·lane`: the scalar twin's steps.
                let scale = _mm512_mul_ps(d, dx[cp]);
                sums[r][cp] =
                    _mm512_add_ps(sums[r][cp], _mm512_mul_ps(scale, _mm512_cvtepi32_ps(lanes)));
            }
        }
    }
    *state = sums;
}

/// A [`signed_tile`]'s outputs from its final lane sums, added in lane order.
#[allow(clippy::needless_range_loop)]
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
fn signed_tile_outputs<const CP: usize>(sums: [[__m512; CP]; 4]) -> [[f32; 4]; 4] {
    let mut out = [[0.0f32; 4]; 4];
    for r in 0..4 {
        for cp in 0..CP {
            let mut lanes = [0.0f32; 16];
            // SAFETY: `lanes` holds sixteen f32; `storeu` has no alignment requirement.
            unsafe { _mm512_storeu_ps(lanes.as_mut_ptr(), sums[r][cp]) };
            for half in 0..2 {
                let mut total = 0.0f32;
                for l in 0..8 {
                    total += lanes[8 * half + l];
                }
                out[r][2 * cp + half] = total;
            }
        }
    }
    out
}

/// Every whole group of four Q6_K (or Q3_K) rows of `w` (`row_blocks` each) against every column
/// of `x`, four columns at a time (then two, then one), two columns per zmm, rows longer than
/// [`BUSD_MAX_BLOCKS`] in chunks; returns the rows done.
#[allow(clippy::too_many_arguments)]
#[inline]
pub(super) fn signed_four_row_groups<W>(
    t: Avx512Vbmi,
    w: &[W],
    row_blocks: usize,
    x: &[BlockQ8K],
    y: &mut OutputColumns<'_, '_>,
    decode: impl Fn(&W) -> super::k_matmul::Decoded,
) -> usize {
    // SAFETY: the token proves every feature the body enables.
    unsafe { signed_four_row_groups_body(t, w, row_blocks, x, y, decode) }
}

#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
fn signed_four_row_groups_body<W>(
    _t: Avx512Vbmi,
    w: &[W],
    row_blocks: usize,
    x: &[BlockQ8K],
    y: &mut OutputColumns<'_, '_>,
    decode: impl Fn(&W) -> super::k_matmul::Decoded,
) -> usize {
    if row_blocks == 0 {
        return 0;
    }
    // Not zeroed, as in `mins_four_row_groups_body`.
    let mut storage =
        [const { MaybeUninit::<super::k_matmul::Decoded>::uninit() }; 4 * BUSD_MAX_BLOCKS];
    let chunk = chunk_blocks(row_blocks, BUSD_MAX_BLOCKS);
    let n = x.len() / row_blocks;
    let mut first_row = 0;
    for group in w.chunks_exact(4 * row_blocks) {
        // Writes the rows' super-blocks `blocks` block-major (slot `4k + r` is row `r`'s
        // super-block `k` of the chunk) and returns how many slots it wrote.
        let fill = |storage: &mut [MaybeUninit<super::k_matmul::Decoded>], blocks: Range<usize>| {
            let mut filled = 0;
            for (i, slot) in storage.iter_mut().take(4 * blocks.len()).enumerate() {
                slot.write(
                    match group.get((i % 4) * row_blocks + blocks.start + i / 4) {
                        Some(b) => decode(b),
                        None => super::k_matmul::Decoded::zero(),
                    },
                );
                filled += 1;
            }
            filled
        };
        if chunk >= row_blocks {
            let filled = fill(&mut storage, 0..row_blocks);
            // SAFETY: the first `filled` slots were written just above, and
            // `MaybeUninit<Decoded>` has the layout of `Decoded`.
            let rows = unsafe { core::slice::from_raw_parts(storage.as_ptr().cast(), filled) };
            let column = |c: usize| column_part(x, row_blocks, c, &(0..row_blocks));
            let mut first = 0;
            while first + 4 <= n {
                let cols: [&[BlockQ8K]; 4] = core::array::from_fn(|i| column(first + i));
                let out = signed_tile::<2>(rows, row_blocks, cols);
                store_tiles(y, first, first_row, &[out], 4);
                first += 4;
            }
            while first < n {
                let (a, b) = (column(first), column((first + 1).min(n - 1)));
                let out = signed_tile::<1>(rows, row_blocks, [a, b, a, b]);
                let count = (n - first).min(2);
                store_tiles(y, first, first_row, &[out], count);
                first += count;
            }
        } else {
            in_chunks::<_, usize, [[__m512; 2]; 4], 4>(
                &mut storage[..],
                n,
                row_blocks,
                chunk,
                || [[_mm512_setzero_ps(); 2]; 4],
                fill,
                |storage, filled, sums, columns, blocks| {
                    let rows = storage.get(..filled).unwrap_or(&[]);
                    // SAFETY: `fill` wrote the first `filled` slots for this chunk (`get` kept
                    // no more than there are); `MaybeUninit<Decoded>` has `Decoded`'s layout.
                    let rows =
                        unsafe { core::slice::from_raw_parts(rows.as_ptr().cast(), rows.len()) };
                    let columns = columns.map(|c| column_part(x, row_blocks, c, &blocks));
                    signed_tile_blocks::<2, true>(sums, rows, blocks.len(), columns);
                },
                |sums, first, count| {
                    store_tiles(y, first, first_row, &[signed_tile_outputs(sums)], count)
                },
            );
        }
        first_row += 4;
    }
    first_row
}
