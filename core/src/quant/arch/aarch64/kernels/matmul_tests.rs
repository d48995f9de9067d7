//! The matmul tiles (`matmul::dotprod`, `matmul::i8mm`) against the scalar vec_dot, output by
//! output, `to_bits` equal (two NaNs count as equal, see `tests::same`): rows 1 to 17 (around
//! the tiles' four) against columns 1 to 17 (around their four) for rows of one block, a sparser
//! grid for 2, 3 and longer rows; weight rows quantized from floats, of random bytes (NaN,
//! infinite and subnormal scales among them), with a special scale in one block, and of extreme
//! bytes with finite scales; activation columns likewise. Outputs land at a column stride larger
//! than the row count, whose gaps must stay untouched. The same matrices also go through
//! `typed::matmul_quantized_at` at every level the (emulated) CPU has, so the table's entries are
//! checked too. Under `-cpu max` both tile kinds run, under `cortex-a76` the `i8mm` entry falls
//! back to the `sdot` tiles, under `cortex-a72` both fall back to one vec_dot per output.

extern crate std;

use super::matmul::{self, Tiled};
use super::tests::{Rng, SPECIAL_F16};
use crate::quant::activation::{BlockQ8_0, BlockQ8_1, QK8_0};
use crate::quant::iq::iq4_nl::{self, BlockIq4Nl};
use crate::quant::legacy::{
    q4_0 as s_q4_0, q4_1 as s_q4_1, q5_0 as s_q5_0, q5_1 as s_q5_1, q8_0 as s_q8_0, q8_1 as s_q8_1,
    BlockQ4_1, BlockQ5_0, BlockQ5_1,
};
use crate::quant::level::Level;
use crate::quant::misc::mxfp4::{self, BlockMxfp4};
use crate::quant::table::Kernels;
use crate::quant::typed;
use crate::quant::OutputColumns;
use bytemuck::Pod;
use std::format;
use std::string::String;
use std::vec;
use std::vec::Vec;

/// A finite normal f16 with a full random mantissa, either sign.
fn finite_f16(rng: &mut Rng) -> [u8; 2] {
    let bits = (rng.next() as u16 & 0x83ff) | ((8 + rng.below(14) as u16) << 10);
    bits.to_le_bytes()
}

/// How a test type's blocks are made: the scalar quantizer of one block from `N` floats (32 by
/// default), and the byte offsets of its f16 fields (scales, mins, sums).
pub(super) struct Maker<B, const N: usize = QK8_0> {
    pub(super) quantize: fn(&[f32; N]) -> B,
    pub(super) f16_at: &'static [usize],
}

/// `blocks` blocks of kind `kind`: quantized, random bytes, quantized with one special f16 field,
/// or an extreme byte pattern with finite f16 fields.
pub(super) fn make<B: Pod, const N: usize>(
    rng: &mut Rng,
    maker: &Maker<B, N>,
    blocks: usize,
    kind: usize,
) -> Vec<B> {
    let quantized = |rng: &mut Rng| {
        let values: [f32; N] = core::array::from_fn(|_| rng.value_scaled(8, 16));
        (maker.quantize)(&values)
    };
    match kind % 4 {
        1 => (0..blocks).map(|_| rng.block()).collect(),
        2 if !maker.f16_at.is_empty() => {
            let mut row: Vec<B> = (0..blocks).map(|_| quantized(rng)).collect();
            let at = rng.below(blocks);
            let special = SPECIAL_F16[rng.below(SPECIAL_F16.len())].to_le_bytes();
            let field = maker.f16_at[rng.below(maker.f16_at.len())];
            bytemuck::bytes_of_mut(&mut row[at])[field..field + 2].copy_from_slice(&special);
            row
        }
        0 | 2 => (0..blocks).map(|_| quantized(rng)).collect(),
        _ => {
            let byte = [0x00, 0xff, 0x80, 0x7f, 0x88][rng.below(5)];
            (0..blocks)
                .map(|_| {
                    let mut b = B::zeroed();
                    bytemuck::bytes_of_mut(&mut b).fill(byte);
                    for &at in maker.f16_at {
                        let f = finite_f16(rng);
                        bytemuck::bytes_of_mut(&mut b)[at..at + 2].copy_from_slice(&f);
                    }
                    b
                })
                .collect()
        }
    }
}

/// Equal bits, or both NaN.
fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

pub(super) type MatmulFn<W, X> = fn(&[W], usize, &[X], usize, &mut OutputColumns<'_, '_>);

/// Sentinel left in the gaps of the output (between a column's rows and the next column).
const GAP: f32 = -1234.5;

/// One matrix of `rows × blocks` against `n` columns through each kernel and through the typed API
/// at each available level; returns the failures.
#[allow(clippy::too_many_arguments)]
fn check_shape<W: Tiled + Pod + Kernels<Activation = <W as Tiled>::X>>(
    rng: &mut Rng,
    name: &str,
    rows: usize,
    blocks: usize,
    n: usize,
    w_maker: &Maker<W>,
    x_maker: &Maker<<W as Tiled>::X>,
    scalar: fn(&[W], &[<W as Tiled>::X]) -> f32,
) -> Vec<String>
where
    <W as Tiled>::X: Pod,
{
    let mut w = Vec::new();
    for r in 0..rows {
        w.extend(make(rng, w_maker, blocks, r + n));
    }
    let mut x = Vec::new();
    for c in 0..n {
        x.extend(make(rng, x_maker, blocks, c * 3 + rows));
    }
    let kernels: [(&str, MatmulFn<W, <W as Tiled>::X>); 3] = [
        ("neon", matmul::neon::<W>),
        ("dotprod", matmul::dotprod::<W>),
        ("i8mm", matmul::i8mm::<W>),
    ];
    compare(name, (rows, blocks, n), QK8_0, (&w, &x), scalar, &kernels)
}

/// The scalar vec_dot of every row of `w` (`rows × blocks`) and column of `x` (`n × blocks`)
/// against each of `kernels` (outputs at a column stride whose gaps must stay untouched) and
/// against `typed::matmul_quantized_at` at every aarch64 level the (emulated) CPU has, blocks of
/// `block_values` values; returns the failures.
pub(super) fn compare<W: Pod + Kernels<Activation = X>, X: Pod>(
    name: &str,
    (rows, blocks, n): (usize, usize, usize),
    block_values: usize,
    (w, x): (&[W], &[X]),
    scalar: fn(&[W], &[X]) -> f32,
    kernels: &[(&str, MatmulFn<W, X>)],
) -> Vec<String> {
    let want: Vec<f32> = (0..n * rows)
        .map(|i| {
            let (c, r) = (i / rows, i % rows);
            scalar(
                &w[r * blocks..(r + 1) * blocks],
                &x[c * blocks..(c + 1) * blocks],
            )
        })
        .collect();
    let mut failures = Vec::new();
    let stride = rows + 3;
    for &(kernel_name, kernel) in kernels {
        let mut y = vec![GAP; n * stride];
        kernel(
            w,
            blocks,
            x,
            n,
            &mut OutputColumns::strided(&mut y, stride, rows),
        );
        let wrong = (0..n * stride).find(|&i| {
            let (c, r) = (i / stride, i % stride);
            let expected = if r < rows { want[c * rows + r] } else { GAP };
            !same(y[i], expected)
        });
        if let Some(i) = wrong {
            let (c, r) = (i / stride, i % stride);
            failures.push(format!(
                "{name} {kernel_name}: {rows} rows of {blocks} blocks, {n} columns: \
                 (column {c}, row {r}) {:e} ({:#x})",
                y[i],
                y[i].to_bits()
            ));
        }
    }
    let (w_bytes, x_bytes) = (bytemuck::cast_slice(w), bytemuck::cast_slice(x));
    for level in [Level::Neon, Level::Dotprod, Level::I8mm] {
        if !level.is_available() {
            continue;
        }
        let mut y = vec![GAP; n * rows];
        let cols = blocks * block_values;
        let result =
            typed::matmul_quantized_at::<W>(level, w_bytes, rows, cols, n, x_bytes, &mut y);
        if result.is_err() || y.iter().zip(&want).any(|(&a, &b)| !same(a, b)) {
            failures.push(format!(
                "{name} typed at {level}: {rows} rows of {blocks} blocks, {n} columns: {result:?}"
            ));
        }
    }
    failures
}

/// The shapes: every rows × columns up to 17 for one block; around the tiles' edges for 2, 3
/// and 9 blocks.
fn shapes() -> Vec<(usize, usize, usize)> {
    let mut out = Vec::new();
    for rows in 1..=17 {
        for n in 1..=17 {
            out.push((rows, 1, n));
        }
    }
    let edges = [1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17];
    for blocks in [2, 3] {
        for rows in edges {
            for n in edges {
                out.push((rows, blocks, n));
            }
        }
    }
    for (rows, n) in [(5, 7), (8, 8), (17, 9), (3, 17)] {
        out.push((rows, 9, n));
    }
    out
}

fn check_type<W: Tiled + Pod + Kernels<Activation = <W as Tiled>::X>>(
    seed: u64,
    name: &str,
    w_maker: Maker<W>,
    x_maker: Maker<<W as Tiled>::X>,
    scalar: fn(&[W], &[<W as Tiled>::X]) -> f32,
) where
    <W as Tiled>::X: Pod,
{
    let mut rng = Rng(seed);
    let mut failures = Vec::new();
    for (rows, blocks, n) in shapes() {
        failures.extend(check_shape(
            &mut rng, name, rows, blocks, n, &w_maker, &x_maker, scalar,
        ));
    }
    assert!(
        failures.is_empty(),
        "{} failures, the first ones:\n{}",
        failures.len(),
        failures[..failures.len().min(8)].join("\n")
    );
}

const Q8_0: Maker<BlockQ8_0> = Maker {
    quantize: s_q8_0::quantize_block,
    f16_at: &[0],
};
const Q8_1: Maker<BlockQ8_1> = Maker {
    quantize: s_q8_1::quantize_block,
    f16_at: &[0, 2],
};

#[test]
fn q8_0_matmul_tiles_match_scalar() {
    check_type(0x0808_0000_1111, "q8_0", Q8_0, Q8_0, s_q8_0::vec_dot);
}

#[cfg(feature = "legacy")]
#[test]
fn q4_0_matmul_tiles_match_scalar() {
    let w = Maker {
        quantize: s_q4_0::quantize_block,
        f16_at: &[0],
    };
    check_type(0x0400_0000_2222, "q4_0", w, Q8_0, s_q4_0::vec_dot);
}

#[cfg(feature = "legacy")]
#[test]
fn q4_1_matmul_tiles_match_scalar() {
    let w: Maker<BlockQ4_1> = Maker {
        quantize: s_q4_1::quantize_block,
        f16_at: &[0, 2],
    };
    check_type(0x0401_0000_3333, "q4_1", w, Q8_1, s_q4_1::vec_dot);
}

#[cfg(feature = "legacy")]
#[test]
fn q5_0_matmul_tiles_match_scalar() {
    let w: Maker<BlockQ5_0> = Maker {
        quantize: s_q5_0::quantize_block,
        f16_at: &[0],
    };
    check_type(0x0500_0000_4444, "q5_0", w, Q8_0, s_q5_0::vec_dot);
}

#[cfg(feature = "legacy")]
#[test]
fn q5_1_matmul_tiles_match_scalar() {
    let w: Maker<BlockQ5_1> = Maker {
        quantize: s_q5_1::quantize_block,
        f16_at: &[0, 2],
    };
    check_type(0x0501_0000_5555, "q5_1", w, Q8_1, s_q5_1::vec_dot);
}

#[cfg(feature = "iq")]
#[test]
fn iq4_nl_matmul_tiles_match_scalar() {
    let w: Maker<BlockIq4Nl> = Maker {
        quantize: iq4_nl::quantize_block,
        f16_at: &[0],
    };
    check_type(0x1401_0000_6666, "iq4_nl", w, Q8_0, iq4_nl::vec_dot);
}

#[cfg(feature = "misc")]
#[test]
fn mxfp4_matmul_tiles_match_scalar() {
    let w: Maker<BlockMxfp4> = Maker {
        quantize: mxfp4::quantize_block,
        f16_at: &[],
    };
    check_type(0x4004_0000_7777, "mxfp4", w, Q8_0, mxfp4::vec_dot);
}

#[test]
fn f16x4_matches_the_scalar_conversion_for_every_bit_pattern() {
    for bits in (0..=u16::MAX).step_by(4) {
        let h: [[u8; 2]; 4] = core::array::from_fn(|i| (bits + i as u16).to_le_bytes());
        let mut out = [0f32; 4];
        super::ops::store_f32(&mut out, matmul::f16x4([&h[0], &h[1], &h[2], &h[3]]));
        for (i, &o) in out.iter().enumerate() {
            let expected = crate::quant::cast::f16_le(h[i]);
            assert_eq!(o.to_bits(), expected.to_bits(), "{:#06x}", bits + i as u16);
        }
    }
}

#[test]
fn every_available_aarch64_level_has_the_tiles_in_its_matmul_slot() {
    for level in [Level::Neon, Level::Dotprod, Level::I8mm] {
        let has = BlockQ8_0::matmul_kernel(level).is_some();
        assert_eq!(has, level.is_available(), "Q8_0 matmul at {level}");
        #[cfg(feature = "legacy")]
        assert_eq!(
            crate::quant::legacy::BlockQ4_0::matmul_kernel(level).is_some(),
            level.is_available(),
            "Q4_0 matmul at {level}"
        );
    }
    // Scalar keeps today's path: no matmul kernel.
    assert!(BlockQ8_0::matmul_kernel(Level::Scalar).is_none());
}
