//! IQ4_XS × Q8_K vec_dot (NEON and `sdot`), matmul tiles (NEON, `sdot`, `smmla`) and
//! dequantize: eight groups of 32 IQ4_NL-coded values per super-block, each with a 6-bit scale.
//!
//! The scalar twin sums each group in one exact integer and takes per group
//! `sumf += ((d · d_x) · (ls − 32)) · sumi`, serially over the groups of the super-blocks. The
//! matmul tiles are [`matmul`](super::matmul)'s 32-value tiles with a group as the block: four
//! weight rows × eight activation columns at `dotprod` and `i8mm`, × four at NEON (eight
//! spilled), the last columns in one narrower tile; each super-block's header (the rows' `d` and
//! the 32 group scales, lane = row) decoded once per tile, each group's weights once per tile's
//! columns (`sdot`: the packed bytes transposed by 32-bit words first, then split into nibbles
//! and looked up, so that eight `sdot` by element leave each row's group sum in its lane; NEON:
//! two products per i16 lane; `smmla`: row and column pairs, four `smmla` per pair of pairs, as
//! `matmul`'s), each activation group loaded once per four rows. Every output lane runs the
//! twin's float steps in its order, unfused: the bits of the scalar vec_dot of its column.
//! Instruction counts: docs/kernel-experiments.md.

use super::matmul::{
    column_pair_lanes, each_block, f16x4, f32x4, lane, pair_operands, problem, row_pair_lanes,
    sdot_lane, split_columns, transpose_words, ROWS,
};
use super::nibbles::{block_sum_neon, block_sum_sdot, iq4_levels, iq4_levels_of};
use super::ops::{f16_le, load_i8, load_u8, piece, smmla};
use super::{has_dotprod, has_i8mm};
use crate::quant::activation::{BlockQ8K, QK_K};
use crate::quant::iq::iq4_xs::BlockIq4Xs;
use crate::quant::OutputColumns;
use core::arch::aarch64::*;

/// The 6-bit scale of group `ib`, minus 32 (`ls - 32` in ggml).
#[inline(always)]
fn group_scale(block: &BlockIq4Xs, ib: usize) -> i32 {
    let low = (block.scales_l.get(ib / 2).copied().unwrap_or(0) >> (4 * (ib % 2))) & 0xf;
    let high = (u16::from_le_bytes(block.scales_h) >> (2 * ib)) & 3;
    (i32::from(low) | (i32::from(high) << 4)) - 32
}

/// The 32 quants of group `ib` of a Q8_K block.
#[inline(always)]
fn group_quants(block: &BlockQ8K, ib: usize) -> &[i8; 32] {
    const ZEROS: [i8; 32] = [0; 32];
    block
        .qs
        .get(32 * ib..32 * ib + 32)
        .and_then(|s| s.try_into().ok())
        .unwrap_or(&ZEROS)
}

/// Defines the NEON or `sdot` vec_dot: per group `dl = (d * dy) * (ls - 32)`, `sumf += dl * sumi`,
/// serially in group order (`ggml_vec_dot_iq4_xs_q8_K_generic`).
macro_rules! vec_dot_with {
    ($name:ident, $features:literal, $block_sum:ident) => {
        #[target_feature(enable = $features)]
        fn $name(w: &[BlockIq4Xs], x: &[BlockQ8K]) -> f32 {
            let mut sumf = 0.0f32;
            for (wb, xb) in w.iter().zip(x) {
                let d4d8 = f16_le(wb.d) * xb.scale();
                for (ib, qs) in wb.qs.iter().enumerate() {
                    let dl = d4d8 * group_scale(wb, ib) as f32;
                    let sumi = $block_sum(iq4_levels(qs), group_quants(xb, ib));
                    sumf += dl * sumi as f32;
                }
            }
            sumf
        }
    };
}

vec_dot_with!(vec_dot_neon, "neon", block_sum_neon);
vec_dot_with!(vec_dot_sdot, "neon,dotprod", block_sum_sdot);

/// `ggml_vec_dot_iq4_xs_q8_K_generic` with NEON (same bits).
pub fn vec_dot(w: &[BlockIq4Xs], x: &[BlockQ8K]) -> f32 {
    // SAFETY: this module is compiled only for targets with NEON (quant/arch).
    unsafe { vec_dot_neon(w, x) }
}

/// [`vec_dot`] with `sdot` where the CPU has it.
pub fn vec_dot_dotprod(w: &[BlockIq4Xs], x: &[BlockQ8K]) -> f32 {
    if has_dotprod() {
        // SAFETY: the CPU has dotprod (checked just above).
        unsafe { vec_dot_sdot(w, x) }
    } else {
        vec_dot(w, x)
    }
}

/// `dequantize_row_iq4_xs` for one block: `dl * level`, `dl = d * (ls - 32)`.
pub fn dequantize(block: &BlockIq4Xs, out: &mut [f32; QK_K]) {
    // SAFETY: this module is compiled only for targets with NEON (quant/arch).
    unsafe { dequantize_neon(block, out) }
}

#[target_feature(enable = "neon")]
fn dequantize_neon(block: &BlockIq4Xs, out: &mut [f32; QK_K]) {
    let d = f16_le(block.d);
    for (ib, (qs, values)) in block.qs.iter().zip(out.chunks_exact_mut(32)).enumerate() {
        let dl = vdupq_n_f32(d * group_scale(block, ib) as f32);
        let (l0, l1) = iq4_levels(qs);
        super::dequantize::store_levels(values, [l0, l1], |l| vmulq_f32(dl, l));
    }
}

/// Columns of a wide `sdot` tile.
const SDOT_WIDE: usize = 8;

/// Columns of a wide NEON tile.
const NEON_WIDE: usize = 4;

/// Where each group's scale code sits in a tile's four block headers, laid side by side as 32
/// bytes (row `r`'s `d`, `scales_h`, `scales_l` at bytes `8r..8r + 8`): for byte `4g + r` of
/// half `h` (group `4h + g`, row `r`), the header byte with the code's low four bits and the one
/// with its high two bits, and the shifts (`ushl`, negative = right) that put them at bits 0..4
/// and 4..6.
struct ScaleTables {
    low: [[u8; 16]; 2],
    high: [[u8; 16]; 2],
    low_shift: [i8; 16],
    high_shift: [i8; 16],
}

const fn scale_tables() -> ScaleTables {
    let mut t = ScaleTables {
        low: [[0; 16]; 2],
        high: [[0; 16]; 2],
        low_shift: [0; 16],
        high_shift: [0; 16],
    };
    let mut i = 0;
    while i < 16 {
        let (g, r) = (i / 4, i % 4);
        let mut h = 0;
        while h < 2 {
            let group = 4 * h + g;
            t.low[h][i] = (8 * r + 4 + group / 2) as u8;
            t.high[h][i] = (8 * r + 2 + group / 4) as u8;
            h += 1;
        }
        // Group 4h + g: low bits at bit 4 (g odd) of their byte, high bits at 2 (g % 4).
        t.low_shift[i] = -4 * (g % 2) as i8;
        t.high_shift[i] = 4 - 2 * (g % 4) as i8;
        i += 1;
    }
    t
}

static SCALE_TABLES: ScaleTables = scale_tables();

/// A block's first eight bytes (`d`, `scales_h`, `scales_l`) as a little-endian u64.
#[inline(always)]
fn header(b: &BlockIq4Xs) -> u64 {
    u64::from(u16::from_le_bytes(b.d))
        | (u64::from(u16::from_le_bytes(b.scales_h)) << 16)
        | (u64::from(u32::from_le_bytes(b.scales_l)) << 32)
}

/// Four rows' super-block scales, lane = row: `d` and each group's `ls − 32` as f32 (exact).
#[inline]
#[target_feature(enable = "neon")]
fn row_scales(b: [&BlockIq4Xs; ROWS]) -> (float32x4_t, [float32x4_t; 8]) {
    let h = b.map(header);
    let pair = |a: u64, b: u64| vreinterpretq_u8_u64(vcombine_u64(vcreate_u64(a), vcreate_u64(b)));
    let headers = uint8x16x2_t(pair(h[0], h[1]), pair(h[2], h[3]));
    let t = &SCALE_TABLES;
    // Bytes 4g + r: group 4·half + g's `ls − 32` of row r.
    let codes = |half: usize| {
        let part = |index: &[[u8; 16]; 2], shift: &[i8; 16], mask: u8| {
            let index = if half == 0 { &index[0] } else { &index[1] };
            let bytes = vqtbl2q_u8(headers, load_u8(index));
            vandq_u8(vshlq_u8(bytes, load_i8(shift)), vdupq_n_u8(mask))
        };
        let code = vorrq_u8(
            part(&t.low, &t.low_shift, 0x0f),
            part(&t.high, &t.high_shift, 0x30),
        );
        vreinterpretq_s8_u8(vsubq_u8(code, vdupq_n_u8(32)))
    };
    let (a, b2) = (codes(0), codes(1));
    let widen = |v: int8x16_t| {
        let (lo, hi) = (vmovl_s8(vget_low_s8(v)), vmovl_high_s8(v));
        [
            vmovl_s16(vget_low_s16(lo)),
            vmovl_high_s16(lo),
            vmovl_s16(vget_low_s16(hi)),
            vmovl_high_s16(hi),
        ]
        .map(|v| vcvtq_f32_s32(v))
    };
    let ([g0, g1, g2, g3], [g4, g5, g6, g7]) = (widen(a), widen(b2));
    (f16x4(b.map(|b| &b.d)), [g0, g1, g2, g3, g4, g5, g6, g7])
}

/// The packed bytes of group `g`.
#[inline(always)]
fn group_bytes(b: &BlockIq4Xs, g: usize) -> &[u8; 16] {
    b.qs.get(g).unwrap_or(&[0; 16])
}

/// The activation quants of group `g` as two vectors.
#[inline(always)]
fn group_activation(x: &BlockQ8K, g: usize) -> (int8x16_t, int8x16_t) {
    let q = group_quants(x, g);
    (load_i8(piece(q, 0)), load_i8(piece(q, 1)))
}

/// The twin's step for four rows' group sums `sumi` in one column: `d4d8 = d · d_x`,
/// `dl = d4d8 · (ls − 32)`, `sumf += dl · sumi`, unfused.
#[inline(always)]
fn group_step(
    sumf: &mut float32x4_t,
    d: float32x4_t,
    dx: float32x4_t,
    ls: float32x4_t,
    sumi: int32x4_t,
) {
    // SAFETY: this module is compiled only for targets with NEON (quant/arch).
    unsafe {
        let dl = vmulq_f32(vmulq_f32(d, dx), ls);
        *sumf = vaddq_f32(*sumf, vmulq_f32(dl, vcvtq_f32_s32(sumi)));
    }
}

/// The activation scales of the `C` columns in groups of four as lanes (the last column
/// repeated past the edge).
#[inline(always)]
fn column_scales<const C: usize>(xb: [&BlockQ8K; C]) -> [float32x4_t; 2] {
    let group = |k: usize| f32x4(core::array::from_fn(|j| xb[(4 * k + j).min(C - 1)].scale()));
    [group(0), group(1)]
}

/// Defines a tile: four rows against `C` columns, per super-block the rows' scales once, per
/// group the rows' weights once (`$weights`), then per column the activation group loaded and
/// the rows' exact group sums (`$sums`) taken through the twin's step. The columns in groups of
/// four are written out by a macro: as a loop over eight columns LLVM kept them rolled (sums and
/// `d4d8` in memory, 24 instructions per column and group instead of 15).
macro_rules! tile {
    ($(#[$doc:meta])* $features:literal, $name:ident, $weights:expr, $sums:expr) => {
        $(#[$doc])*
        #[target_feature(enable = $features)]
        fn $name<const C: usize>(
            w: [&[BlockIq4Xs]; ROWS],
            x: [&[BlockQ8K]; C],
        ) -> [float32x4_t; C] {
            let mut sumf = [vdupq_n_f32(0.0); C];
            each_block(w, x, |wb, xb| {
                let (d, ls) = row_scales(wb);
                let dx = column_scales(xb);
                for (g, &ls) in ls.iter().enumerate() {
                    let weights = $weights(wb, g);
                    macro_rules! group {
                        ($group:expr) => {{
                            let group: usize = $group;
                            for j in 0..4 {
                                let c = 4 * group + j;
                                if let (Some(sumf), Some(xb)) = (sumf.get_mut(c), xb.get(c)) {
                                    let (x0, x1) = group_activation(xb, g);
                                    let sumi = $sums(&weights, x0, x1);
                                    group_step(sumf, d, lane(dx[group], j), ls, sumi);
                                }
                            }
                        }};
                    }
                    group!(0);
                    if C > 4 {
                        group!(1);
                    }
                }
            });
            sumf
        }
    };
}

/// Group `g`'s weights for `sdot`: the rows' packed bytes transposed by words, then split and
/// looked up: low-nibble levels (elements 0..16) and high-nibble levels (16..32), vector `j`
/// holding word `j` of each row.
#[inline]
#[target_feature(enable = "neon")]
fn sdot_weights(wb: [&BlockIq4Xs; ROWS], g: usize) -> [int8x16_t; 8] {
    let q = transpose_words(wb.map(|b| vreinterpretq_s8_u8(load_u8(group_bytes(b, g)))));
    let [(l0, h0), (l1, h1), (l2, h2), (l3, h3)] = q.map(|v| iq4_levels_of(vreinterpretq_u8_s8(v)));
    [l0, l1, l2, l3, h0, h1, h2, h3]
}

/// Four rows' exact group sums with eight `sdot` by element.
#[inline]
#[target_feature(enable = "neon,dotprod")]
fn sdot_sums(t: &[int8x16_t; 8], x0: int8x16_t, x1: int8x16_t) -> int32x4_t {
    let mut acc = sdot_lane::<0>(vdupq_n_s32(0), t[0], x0);
    acc = sdot_lane::<1>(acc, t[1], x0);
    acc = sdot_lane::<2>(acc, t[2], x0);
    acc = sdot_lane::<3>(acc, t[3], x0);
    acc = sdot_lane::<0>(acc, t[4], x1);
    acc = sdot_lane::<1>(acc, t[5], x1);
    acc = sdot_lane::<2>(acc, t[6], x1);
    sdot_lane::<3>(acc, t[7], x1)
}

/// Group `g`'s levels of each row.
#[inline]
#[target_feature(enable = "neon")]
fn neon_weights(wb: [&BlockIq4Xs; ROWS], g: usize) -> [(int8x16_t, int8x16_t); ROWS] {
    wb.map(|b| iq4_levels(group_bytes(b, g)))
}

/// `Σ w·x` of a group (levels `w`, quants `x0`, `x1`) as four i32 partial sums: `smull` then
/// `smlal2` put two products in each i16 lane, exact since a level is at least −127 (the sum is
/// at most 2 · 127 · 128 = 32512 in magnitude; a Q8_0 weight of −128 could reach 2^15, so
/// `matmul`'s `block_lanes` widens each product right away), then pairwise-widened into i32.
#[inline]
#[target_feature(enable = "neon")]
fn group_lanes(w: (int8x16_t, int8x16_t), x0: int8x16_t, x1: int8x16_t) -> int32x4_t {
    let a = vmlal_high_s8(vmull_s8(vget_low_s8(w.0), vget_low_s8(x0)), w.0, x0);
    let b = vmlal_high_s8(vmull_s8(vget_low_s8(w.1), vget_low_s8(x1)), w.1, x1);
    vpadalq_s16(vpaddlq_s16(a), b)
}

/// Four rows' exact group sums with widening multiplies, folded by three `addp`.
#[inline]
#[target_feature(enable = "neon")]
fn neon_sums(w: &[(int8x16_t, int8x16_t); ROWS], x0: int8x16_t, x1: int8x16_t) -> int32x4_t {
    let acc = w.map(|w| group_lanes(w, x0, x1));
    vpaddq_s32(vpaddq_s32(acc[0], acc[1]), vpaddq_s32(acc[2], acc[3]))
}

tile!(
    /// Four rows against `C` columns with `sdot` by element on word-transposed weights.
    #[inline]
    "neon,dotprod",
    tile_sdot,
    sdot_weights,
    sdot_sums
);
tile!(
    /// Four rows against `C` columns with widening multiplies.
    #[inline]
    "neon",
    tile_neon,
    neon_weights,
    neon_sums
);

/// Four rows against `C` columns (`C` even) with `smmla`: per group the two row pairs' operands
/// once, per column pair four `smmla` per row pair (lanes `[r0·c0, r0·c1, r1·c0, r1·c1]`).
#[target_feature(enable = "neon,i8mm")]
fn tile_smmla<const C: usize>(w: [&[BlockIq4Xs]; ROWS], x: [&[BlockQ8K]; C]) -> [float32x4_t; C] {
    // sumf[q][p]: column pair q, row pair p.
    let mut sumf = [[vdupq_n_f32(0.0); 2]; C];
    each_block(w, x, |wb, xb| {
        let (d, ls) = row_scales(wb);
        let dx = column_scales(xb);
        let dp = row_pair_lanes(d);
        for (g, &ls) in ls.iter().enumerate() {
            let wv = wb.map(|b| iq4_levels(group_bytes(b, g)));
            let a = [pair_operands(wv[0], wv[1]), pair_operands(wv[2], wv[3])];
            let lp = row_pair_lanes(ls);
            macro_rules! group {
                ($group:expr) => {{
                    let group: usize = $group;
                    for half in 0..2 {
                        let q = 2 * group + half;
                        let (Some(c0), Some(c1)) = (xb.get(2 * q), xb.get(2 * q + 1)) else {
                            continue;
                        };
                        let b = pair_operands(group_activation(c0, g), group_activation(c1, g));
                        let xl = column_pair_lanes(dx[group], half == 1);
                        for p in 0..2 {
                            let mut acc = vdupq_n_s32(0);
                            for (&a, &b) in a[p].iter().zip(&b) {
                                acc = smmla(acc, a, b);
                            }
                            if let Some(s) = sumf.get_mut(q).and_then(|t| t.get_mut(p)) {
                                group_step(s, dp[p], xl, lp[p], acc);
                            }
                        }
                    }
                }};
            }
            group!(0);
            if C > 4 {
                group!(1);
            }
        }
    });
    core::array::from_fn(|c| {
        let [t0, t1] = sumf[c / 2];
        if c % 2 == 0 {
            vuzp1q_f32(t0, t1)
        } else {
            vuzp2q_f32(t0, t1)
        }
    })
}

/// A level's matmul driver: the problem checked, then `$tails` places the tiles.
macro_rules! driver {
    ($features:literal, $name:ident, |$m:ident, $n:ident, $y:ident| $tails:block) => {
        #[target_feature(enable = $features)]
        fn $name(
            w: &[BlockIq4Xs],
            row_blocks: usize,
            x: &[BlockQ8K],
            $n: usize,
            $y: &mut OutputColumns<'_, '_>,
        ) {
            let Some($m) = problem(w, row_blocks, x, $n) else {
                return;
            };
            $tails
        }
    };
}

// NEON: as `matmul`'s drivers, three columns left in a padded four-column tile, one or two in a
// two-column one. With a three-column tile beside it, LLVM inlined the four-column one into the
// driver and spilled (n = 16: 89.4 -> 93.5 instructions per output and super-block).
driver!("neon", matmul_neon_tiles, |m, n, y| {
    let (wide, four) = split_columns(n, NEON_WIDE);
    m.tiles::<NEON_WIDE>(0..wide, y, |w, x| tile_neon::<NEON_WIDE>(w, x));
    if four {
        m.tiles::<4>(wide..n, y, |w, x| tile_neon::<4>(w, x));
    } else {
        m.tiles::<2>(wide..n, y, |w, x| tile_neon::<2>(w, x));
    }
});

// `sdot`: the columns left in one tile as wide as they are, a single one padded to two (the
// vec_dot costs more than a two-column tile).
driver!("neon,dotprod", matmul_sdot_tiles, |m, n, y| {
    let wide = n - n % SDOT_WIDE;
    m.tiles::<SDOT_WIDE>(0..wide, y, |w, x| tile_sdot::<SDOT_WIDE>(w, x));
    let rest = wide..n;
    match n - wide {
        0 => {}
        1 | 2 => m.tiles::<2>(rest, y, |w, x| tile_sdot::<2>(w, x)),
        3 => m.tiles::<3>(rest, y, |w, x| tile_sdot::<3>(w, x)),
        4 => m.tiles::<4>(rest, y, |w, x| tile_sdot::<4>(w, x)),
        5 => m.tiles::<5>(rest, y, |w, x| tile_sdot::<5>(w, x)),
        6 => m.tiles::<6>(rest, y, |w, x| tile_sdot::<6>(w, x)),
        _ => m.tiles::<7>(rest, y, |w, x| tile_sdot::<7>(w, x)),
    }
});

// `smmla`: the columns left in one `smmla` tile of two or four, else in one `sdot` tile as wide
// as they are (the level has dotprod too): cheaper than padding (n = 3: 49.5 against 56.2
// instructions per output and super-block) and than a six-column `smmla` tile (46.4 against 49.1).
driver!("neon,dotprod,i8mm", matmul_smmla_tiles, |m, n, y| {
    let wide = n - n % SDOT_WIDE;
    m.tiles::<SDOT_WIDE>(0..wide, y, |w, x| tile_smmla::<SDOT_WIDE>(w, x));
    let rest = wide..n;
    match n - wide {
        0 => {}
        1 | 2 => m.tiles::<2>(rest, y, |w, x| tile_smmla::<2>(w, x)),
        3 => m.tiles::<3>(rest, y, |w, x| tile_sdot::<3>(w, x)),
        4 => m.tiles::<4>(rest, y, |w, x| tile_smmla::<4>(w, x)),
        5 => m.tiles::<5>(rest, y, |w, x| tile_sdot::<5>(w, x)),
        6 => m.tiles::<6>(rest, y, |w, x| tile_sdot::<6>(w, x)),
        _ => m.tiles::<7>(rest, y, |w, x| tile_sdot::<7>(w, x)),
    }
});

/// IQ4_XS's matmul at `i8mm`: `smmla` tiles (odd tails in `sdot` ones) where the CPU has i8mm
/// (and so dotprod), else [`matmul_dotprod`] (same bits).
pub fn matmul_i8mm(
    w: &[BlockIq4Xs],
    row_blocks: usize,
    x: &[BlockQ8K],
    n: usize,
    y: &mut OutputColumns<'_, '_>,
) {
    if has_i8mm() {
        // SAFETY: the CPU has i8mm, and with it dotprod (`Level::I8mm` requires both).
        unsafe { matmul_smmla_tiles(w, row_blocks, x, n, y) }
    } else {
        matmul_dotprod(w, row_blocks, x, n, y);
    }
}

/// IQ4_XS's matmul at NEON ([`MatmulFn`](crate::quant::table::MatmulFn)): tiles of widening
/// multiplies.
pub fn matmul_neon(
    w: &[BlockIq4Xs],
    row_blocks: usize,
    x: &[BlockQ8K],
    n: usize,
    y: &mut OutputColumns<'_, '_>,
) {
    // SAFETY: this module is compiled only for targets with NEON (quant/arch).
    unsafe { matmul_neon_tiles(w, row_blocks, x, n, y) }
}

/// IQ4_XS's matmul at `dotprod` and `i8mm`: `sdot` tiles where the CPU has dotprod, else
/// [`matmul_neon`] (same bits).
pub fn matmul_dotprod(
    w: &[BlockIq4Xs],
    row_blocks: usize,
    x: &[BlockQ8K],
    n: usize,
    y: &mut OutputColumns<'_, '_>,
) {
    if has_dotprod() {
        // SAFETY: the CPU has dotprod (checked just above).
        unsafe { matmul_sdot_tiles(w, row_blocks, x, n, y) }
    } else {
        matmul_neon(w, row_blocks, x, n, y);
    }
}
