//! Every kernel at every level this CPU has, held to the scalar twin's bits (`to_bits` equality;
//! a NaN only has to be a NaN, see [`same`]): random bytes (so NaN, infinity and subnormal scales, and -128 quants),
//! blocks quantized from noisy data with outliers, all-equal special blocks, and row lengths from
//! 0 to 19 blocks (the SIMD kernels work in groups of blocks and have tails). The one-value types
//! (F32, F16, BF16) also get rows up to 1,000 values (their kernels take 8, 16 or 64 values a
//! step) and values whose serial f64 sum rounds, or does not, or starts rounding mid-row.

extern crate std;

use super::cast::{blocks, blocks_mut, Block};
use super::level::{available, Level};
use super::output_columns::OutputColumns;
use super::table::{visit, Kernels, Visitor};
use super::typed;
use crate::ggml_type::GgmlType;
use std::format;
use std::string::String;
use std::vec;
use std::vec::Vec;

/// xorshift64*: deterministic test data without a dependency (the packed layout's tests use it
/// too).
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub(super) fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
    /// Roughly normal values with a random scale and sparse large outliers.
    pub(super) fn values(&mut self, n: usize) -> Vec<f32> {
        let scale = (self.next() % 1000) as f32 / 100.0 + 0.01;
        (0..n)
            .map(|_| {
                let sum: f32 = (0..4)
                    .map(|_| (self.next() % 2001) as f32 / 1000.0 - 1.0)
                    .sum();
                if self.next().is_multiple_of(97) {
                    sum * scale * 40.0
                } else {
                    sum * scale
                }
            })
            .collect()
    }
}

/// Byte patterns of whole rows that stress edge cases.
const SPECIAL_BYTES: [u8; 6] = [0x00, 0xff, 0x80, 0x7f, 0x01, 0x7c];

/// The row lengths (in blocks) each type is tested with: 0 to 19 blocks, and for the one-value
/// types also lengths around their vector widths and groups, up to 1,000.
fn block_counts<B: Kernels>() -> Vec<usize> {
    let mut counts: Vec<usize> = (0..20).collect();
    if B::VALUES == 1 {
        counts.extend([
            31, 32, 33, 47, 63, 64, 65, 79, 127, 128, 129, 192, 200, 255, 256, 257, 511, 1000,
        ]);
    }
    counts
}

/// Scalar-quantized rows of `values` in `B` (none if `B` has no quantizer).
fn quantized_rows<B: Kernels>(values: Vec<Vec<f32>>) -> Vec<Vec<u8>> {
    let Some(quantize) = B::quantize_kernel(Level::Scalar) else {
        return Vec::new();
    };
    values
        .iter()
        .map(|x| {
            let mut row = vec![0u8; core::mem::size_of::<B>() * (x.len() / B::VALUES)];
            if let Ok(out) = blocks_mut::<B>(&mut row) {
                quantize(x, out);
            }
            row
        })
        .collect()
}

/// Values for the one-value types' dot products: small integers (every f64 step of the serial
/// sum is exact), the same with one tiny value at element 70 (the sum starts rounding in the
/// second group of 64), a spread over 30 binary orders of magnitude (most steps round), and
/// noisy data with subnormal and huge values mixed in.
fn plain_value_rows(rng: &mut Rng, n: usize) -> Vec<Vec<f32>> {
    let integers: Vec<f32> = (0..n).map(|_| (rng.next() % 17) as f32 - 8.0).collect();
    let mut tiny_at_70 = integers.clone();
    if let Some(v) = tiny_at_70.get_mut(70) {
        *v = 3.0e-7;
    }
    let spread: Vec<f32> = (0..n)
        .map(|_| {
            let magnitude = f32::from_bits(((rng.next() % 30) as u32 + 112) << 23 | 0x12_3457);
            if rng.next().is_multiple_of(2) {
                magnitude
            } else {
                -magnitude
            }
        })
        .collect();
    let mut mixed = rng.values(n);
    for (i, v) in mixed.iter_mut().enumerate() {
        match i % 13 {
            3 => *v = 1e-41,
            7 => *v *= 1e30,
            _ => {}
        }
    }
    vec![integers, tiny_at_70, spread, mixed]
}

/// Rows of `blocks` blocks of `B`: random bytes, quantized data, and each special byte repeated.
fn weight_rows<B: Kernels>(rng: &mut Rng, n_blocks: usize) -> Vec<Vec<u8>> {
    let size = core::mem::size_of::<B>() * n_blocks;
    let mut rows = vec![rng.bytes(size), rng.bytes(size)];
    let values = rng.values(n_blocks * B::VALUES);
    rows.extend(quantized_rows::<B>(vec![values]));
    if B::VALUES == 1 {
        rows.extend(quantized_rows::<B>(plain_value_rows(rng, n_blocks)));
    }
    rows.extend(SPECIAL_BYTES.iter().map(|&b| vec![b; size]));
    rows
}

/// Equal bits, except that any NaN equals any NaN: Rust (like C and LLVM) leaves the payload and
/// sign of a NaN produced by arithmetic on NaN inputs unspecified (RFC 3514), so not even the scalar
/// twin's NaN bits are fixed across compilers; whether the result is NaN is.
fn same(x: f32, y: f32) -> bool {
    x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
}

fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(&x, &y)| same(x, y))
}

/// Runs every op of `B` at every available level against the scalar level; returns the failures.
struct Check {
    seed: u64,
}

impl Visitor for Check {
    type Out = Vec<String>;
    // Each input is made once and the scalar twin runs on it once; every other level is held to
    // that result (the scalar side is most of the cost, above all under qemu).
    fn visit<B: Kernels>(self) -> Vec<String> {
        let mut failures = Vec::new();
        let mut rng = Rng(self.seed);
        // A level whose kernel for an op is the scalar function itself runs the same code as the
        // scalar level: it is not run again.
        let own = |at: fn(Level) -> Option<usize>| -> Vec<Level> {
            available()
                .filter(|&l| l != Level::Scalar && at(l) != at(Level::Scalar))
                .collect()
        };
        let dequantize_levels = own(|l| Some(B::dequantize_kernel(l) as usize));
        let vec_dot_levels = own(|l| B::vec_dot_kernel(l).map(|k| k as usize));
        let quantize_levels = own(|l| B::quantize_kernel(l).map(|k| k as usize));
        for n_blocks in block_counts::<B>() {
            let n = n_blocks * B::VALUES;
            for (r, row) in weight_rows::<B>(&mut rng, n_blocks).iter().enumerate() {
                let what = |op: &str, level: Level| {
                    format!("{} {op} at {level}, {n_blocks} blocks, row {r}", B::TYPE)
                };
                // dequantize
                let mut want = vec![0f32; n];
                typed::dequantize_at::<B>(Level::Scalar, row, &mut want).unwrap();
                for &level in &dequantize_levels {
                    let mut got = vec![0f32; n];
                    typed::dequantize_at::<B>(level, row, &mut got).unwrap();
                    if !same_bits(&want, &got) {
                        failures.push(what("dequantize", level));
                    }
                }
                // vec_dot against random, quantized and extreme activations
                if B::vec_dot_kernel(Level::Scalar).is_some() && !vec_dot_levels.is_empty() {
                    for x in activation_rows::<B>(&mut rng, n_blocks) {
                        let want = typed::vec_dot_at::<B>(Level::Scalar, row, &x).unwrap();
                        for &level in &vec_dot_levels {
                            let got = typed::vec_dot_at::<B>(level, row, &x).unwrap();
                            if !same(want, got) {
                                failures.push(format!(
                                    "{}: {want:e} vs {got:e}",
                                    what("vec_dot", level)
                                ));
                            }
                        }
                    }
                }
            }
            // quantize: noisy data, specials, NaN and infinities
            if B::quantize_kernel(Level::Scalar).is_some() && !quantize_levels.is_empty() {
                let size = core::mem::size_of::<B>() * n_blocks;
                for (i, x) in value_rows(&mut rng, n).iter().enumerate() {
                    let mut want = vec![0u8; size];
                    typed::quantize_at::<B>(Level::Scalar, x, &mut want).unwrap();
                    for &level in &quantize_levels {
                        let mut got = vec![0u8; size];
                        typed::quantize_at::<B>(level, x, &mut got).unwrap();
                        if want != got {
                            failures.push(format!(
                                "{} quantize at {level}, {n_blocks} blocks, input {i}",
                                B::TYPE
                            ));
                        }
                    }
                }
            }
        }
        failures
    }
}

/// Activation rows for `n_blocks` blocks of `B`: random bytes, quantized data, -128 and 127 only.
fn activation_rows<B: Kernels>(rng: &mut Rng, n_blocks: usize) -> Vec<Vec<u8>> {
    let count = n_blocks * B::ACTIVATION_BLOCKS;
    let size = core::mem::size_of::<B::Activation>() * count;
    let mut rows = vec![rng.bytes(size)];
    if let Some(quantize) = <B::Activation as Kernels>::quantize_kernel(Level::Scalar) {
        let x = rng.values(count * <B::Activation as Kernels>::VALUES);
        let mut row = vec![0u8; size];
        if let Ok(out) = blocks_mut::<B::Activation>(&mut row) {
            quantize(&x, out);
        }
        // Extremes: every quant -128 (kept scale bytes), then every quant 127.
        let mut low = row.clone();
        set_quants::<B::Activation>(&mut low, 0x80);
        let mut high = row.clone();
        set_quants::<B::Activation>(&mut high, 0x7f);
        rows.extend([row, low, high]);
    }
    if B::VALUES == 1 {
        rows.extend(quantized_rows::<B::Activation>(plain_value_rows(
            rng, count,
        )));
    }
    rows
}

/// Sets the quant bytes of Q8 activation blocks (everything past the scale fields) to `byte`.
fn set_quants<A: Block>(row: &mut [u8], byte: u8) {
    set_quants_with::<A>(row, || byte);
}

/// Sets the quant bytes of Q8 activation blocks to the values of `byte()`, one call per quant.
fn set_quants_with<A: Block>(row: &mut [u8], mut byte: impl FnMut() -> u8) {
    let (skip, quants) = match A::TYPE {
        GgmlType::Q8_0 => (2, 32),
        GgmlType::Q8_1 => (4, 32),
        GgmlType::Q8_K => (4, 256),
        _ => return,
    };
    let size = core::mem::size_of::<A>();
    for block in row.chunks_exact_mut(size) {
        block[skip..skip + quants].fill_with(&mut byte);
    }
}

/// Inputs for the quantizers: noisy data, zeros, ties, a constant, NaN and infinities mixed in.
fn value_rows(rng: &mut Rng, n: usize) -> Vec<Vec<f32>> {
    let mut rows = vec![rng.values(n), vec![0.0; n], vec![-0.0; n], vec![2.5; n]];
    let mut ties = rng.values(n);
    for (i, v) in ties.iter_mut().enumerate() {
        *v = (i % 11) as f32 - 5.5;
    }
    rows.push(ties);
    // Ties after scaling: with 127 (or -127) the largest value, Q8_0's and Q8_K's scale is 1, so
    // the halves stay exact halves.
    for top in [127.0f32, -127.0] {
        let mut row: Vec<f32> = (0..n).map(|i| (i % 23) as f32 - 11.5).collect();
        for v in row.iter_mut().step_by(32) {
            *v = top;
        }
        rows.push(row);
    }
    for special in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1e38, 1e-40] {
        let mut row = rng.values(n);
        for v in row.iter_mut().step_by(7) {
            *v = special;
        }
        rows.push(row);
    }
    // Whole rows of small (or huge) magnitude, every block's largest `top`: scales that are f16
    // subnormals (1e-6, 2e-3), f32 subnormals with a finite inverse (6.5e-37, 1.2e-36) and with an
    // infinite one (1e-37, 1e-44), and the largest floats.
    for top in [2e-3f32, 1e-6, 6.5e-37, 1.2e-36, 1e-37, 1e-44, f32::MAX] {
        let mut row: Vec<f32> = (0..n)
            .map(|i| ((i * 37 % 101) as f32 / 101.0 - 0.5) * top)
            .collect();
        for v in row.iter_mut().step_by(32) {
            *v = top;
        }
        rows.push(row);
    }
    // Noisy data with one kind of special block each among ordinary ones (blocks of 32 values):
    // a NaN, an infinity, a scale whose inverse overflows, all zeros, a tie after scaling.
    let mut mixed = rng.values(n);
    let mut block = |b: usize, f: &dyn Fn(usize) -> f32| {
        for (i, v) in mixed.iter_mut().enumerate().skip(32 * b).take(32) {
            *v = f(i);
        }
    };
    block(3, &|i| if i % 32 == 5 { f32::NAN } else { 1.0 });
    block(5, &|i| if i % 32 == 9 { f32::NEG_INFINITY } else { -2.0 });
    block(7, &|i| (i % 5) as f32 * 1e-44);
    block(9, &|_| 0.0);
    block(12, &|i| {
        if i % 32 == 0 {
            127.0
        } else {
            (i % 9) as f32 - 4.5
        }
    });
    rows.push(mixed);
    rows
}

/// Runs the multi-row kernel of `B` (where a level has one) against the scalar vec_dot of each
/// row: several row counts (so whole groups and leftovers), matrices whose rows mix random,
/// quantized and special blocks (so each lane of a group sees a different kind), every activation
/// kind of [`activation_rows`].
struct CheckRows {
    seed: u64,
    /// Blocks per row.
    block_counts: &'static [usize],
    /// Rows per call.
    row_counts: &'static [usize],
}

/// Row counts of the rows-kernel checks: below, at and past the group sizes (4 and 8 rows).
const ROW_COUNTS: [usize; 9] = [1, 2, 3, 4, 5, 7, 8, 9, 17];

impl Visitor for CheckRows {
    type Out = (usize, Vec<String>);
    fn visit<B: Kernels>(self) -> (usize, Vec<String>) {
        let mut failures = Vec::new();
        let mut checked = 0;
        let mut rng = Rng(self.seed);
        let Some(scalar) = B::vec_dot_kernel(Level::Scalar) else {
            return (0, failures);
        };
        for level in available() {
            let Some(rows_kernel) = B::rows_kernel(level) else {
                continue;
            };
            for &n_blocks in self.block_counts {
                let kinds = weight_rows::<B>(&mut rng, n_blocks);
                let xs = activation_rows::<B>(&mut rng, n_blocks);
                for &rows in self.row_counts {
                    // Row r takes kind (r + rows) % kinds, so different counts shift the mix.
                    let matrix: Vec<u8> = (0..rows)
                        .flat_map(|r| kinds[(r + rows) % kinds.len()].iter().copied())
                        .collect();
                    let w = blocks::<B>(&matrix).unwrap();
                    for (xi, x) in xs.iter().enumerate() {
                        let x = blocks::<B::Activation>(x).unwrap();
                        let mut got = vec![f32::NAN; rows];
                        rows_kernel(w, n_blocks, x, &mut got);
                        checked += 1;
                        for (r, (row, &g)) in w.chunks_exact(n_blocks).zip(&got).enumerate() {
                            let want = scalar(row, x);
                            if !same(want, g) {
                                failures.push(format!(
                                    "{} rows at {level}, {rows} rows of {n_blocks} blocks, \
                                     activation {xi}, row {r}: {want:e} vs {g:e}",
                                    B::TYPE
                                ));
                            }
                        }
                    }
                }
            }
        }
        (checked, failures)
    }
}

#[test]
fn every_rows_kernel_gives_each_rows_scalar_bits() {
    check_rows_kernels(&[1, 2, 3, 7, 8, 9, 16], &ROW_COUNTS, 0x5eed_0000);
}

/// Rows longer than the kernels' activation buffers: the x86 legacy rows kernels summarize the
/// activation in windows of 1024 blocks, the K-quant ones prepare at most 64 super-blocks.
#[test]
fn every_rows_kernel_gives_each_rows_scalar_bits_on_long_rows() {
    check_rows_kernels(&[64, 65, 1025], &[8, 9], 0x1009_0000);
}

fn check_rows_kernels(block_counts: &'static [usize], row_counts: &'static [usize], seed: u64) {
    let mut failures = Vec::new();
    let mut checked = 0;
    for (i, t) in GgmlType::ALL.iter().enumerate() {
        if let Some((n, mut f)) = visit(
            *t,
            CheckRows {
                seed: seed + i as u64,
                block_counts,
                row_counts,
            },
        ) {
            checked += n;
            failures.append(&mut f);
        }
    }
    // On x86_64 with AVX2 every legacy type, IQ4_NL, MXFP4, IQ4_XS and Q2_K..Q6_K have rows
    // kernels.
    #[cfg(all(target_arch = "x86_64", not(miniquant_disable_simd)))]
    if Level::Avx2.is_available() {
        assert!(checked > 0, "no rows kernel was checked");
    }
    assert!(
        failures.is_empty(),
        "{} mismatches in {checked} calls, first: {:#?}",
        failures.len(),
        &failures[..failures.len().min(20)]
    );
}

#[test]
fn every_level_gives_the_scalar_bits_for_every_type() {
    let mut failures = Vec::new();
    for (i, t) in GgmlType::ALL.iter().enumerate() {
        if let Some(mut f) = visit(
            *t,
            Check {
                seed: 0x9e37_79b9 + i as u64,
            },
        ) {
            failures.append(&mut f);
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches, first: {:#?}",
        failures.len(),
        &failures[..failures.len().min(20)]
    );
}

/// The VNNI level's K-quant kernels also have a form without VBMI (`vpermd` + `vpshufb` where the
/// other uses `vpermb`); on a CPU with VBMI the tests above run the `vpermb` form, so this thread
/// runs the same checks with the other.
#[cfg(all(target_arch = "x86_64", not(miniquant_disable_simd)))]
#[test]
fn vnni_kernels_without_vbmi_give_the_scalar_bits() {
    use super::arch::x86_64::detect::{hide, Features};
    let _ = super::level::detect();
    hide(Features {
        avx2: false,
        avx512vnni: false,
        avx512vbmi: true,
    });
    every_level_gives_the_scalar_bits_for_every_type();
    every_rows_kernel_gives_each_rows_scalar_bits();
    every_rows_kernel_gives_each_rows_scalar_bits_on_long_rows();
    matmul_columns_equal_matvec_at_every_level();
    hide(Features {
        avx2: false,
        avx512vnni: false,
        avx512vbmi: false,
    });
}

#[test]
fn block_views_of_test_rows_are_whole() {
    // The helpers above rely on rows being whole blocks.
    let mut rng = Rng(1);
    for row in weight_rows::<super::activation::BlockQ8_0>(&mut rng, 3) {
        assert_eq!(
            blocks::<super::activation::BlockQ8_0>(&row).unwrap().len(),
            3
        );
    }
}

#[test]
fn matmul_columns_equal_matvec_at_every_level() {
    use super::matvec::{matmul, matmul_scratch_bytes, matvec_at, matvec_scratch_bytes};
    let mut rng = Rng(7);
    let (rows, cols, n) = (37usize, 512usize, 3usize);
    for t in [
        GgmlType::Q8_0,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
        GgmlType::IQ4_NL,
        GgmlType::F16,
    ] {
        let mut w = vec![0u8; super::bytes_for(t, rows * cols).unwrap()];
        super::quantize(t, &rng.values(rows * cols), &mut w).unwrap();
        let x = rng.values(n * cols);
        for level in available() {
            let mut scratch = vec![0u8; matmul_scratch_bytes(t, cols, n).unwrap()];
            let mut y = vec![f32::NAN; n * rows];
            matmul(level, t, &w, rows, cols, n, &x, &mut scratch, &mut y).unwrap();
            for (j, column) in x.chunks_exact(cols).enumerate() {
                let mut scratch = vec![0u8; matvec_scratch_bytes(t, cols).unwrap()];
                let mut want = vec![0f32; rows];
                matvec_at(
                    Level::Scalar,
                    t,
                    &w,
                    rows,
                    cols,
                    column,
                    &mut scratch,
                    &mut want,
                )
                .unwrap();
                assert!(
                    same_bits(&y[j * rows..(j + 1) * rows], &want),
                    "{t} at {level}, column {j}"
                );
            }
        }
    }
}

/// The multi-row kernels (`rows`, `vec_dot_2x2`) of every level against the scalar vec_dot of
/// each row and column; returns the failures.
struct TileCheck {
    seed: u64,
}

impl Visitor for TileCheck {
    type Out = Vec<String>;
    fn visit<B: Kernels>(self) -> Vec<String> {
        let mut failures = Vec::new();
        let Some(scalar) = B::vec_dot_kernel(Level::Scalar) else {
            return failures;
        };
        let mut rng = Rng(self.seed);
        for level in available().filter(|&l| l != Level::Scalar) {
            let (tile, rows_kernel) = (B::vec_dot_2x2_kernel(level), B::rows_kernel(level));
            if tile.is_none() && rows_kernel.is_none() {
                continue;
            }
            for n_blocks in [1, 2, 3, 8, 17] {
                let ws = weight_rows::<B>(&mut rng, n_blocks);
                let xs = activation_rows::<B>(&mut rng, n_blocks);
                let w: Vec<&[B]> = ws.iter().map(|r| blocks::<B>(r).unwrap()).collect();
                let x: Vec<&[B::Activation]> = xs
                    .iter()
                    .map(|r| blocks::<B::Activation>(r).unwrap())
                    .collect();
                let what = |op: &str, i: usize, j: usize| {
                    format!(
                        "{} {op} at {level}, {n_blocks} blocks, row {i}, column {j}",
                        B::TYPE
                    )
                };
                if let Some(tile) = tile {
                    for (i, pair) in w.windows(2).enumerate() {
                        for (j, cols) in x.windows(2).enumerate() {
                            let got = tile(pair[0], pair[1], cols[0], cols[1]);
                            let want = [
                                scalar(pair[0], cols[0]),
                                scalar(pair[0], cols[1]),
                                scalar(pair[1], cols[0]),
                                scalar(pair[1], cols[1]),
                            ];
                            if !same_bits(&got, &want) {
                                failures.push(what("vec_dot_2x2", i, j));
                            }
                        }
                    }
                }
                if let Some(rows_kernel) = rows_kernel {
                    let all: Vec<u8> = ws.concat();
                    let all = blocks::<B>(&all).unwrap();
                    for (j, column) in x.iter().enumerate() {
                        let want: Vec<f32> = w.iter().map(|row| scalar(row, column)).collect();
                        let mut got = vec![f32::NAN; w.len()];
                        rows_kernel(all, n_blocks, column, &mut got);
                        if !same_bits(&got, &want) {
                            failures.push(what("rows", 0, j));
                        }
                    }
                }
            }
        }
        failures
    }
}

#[test]
fn tile_and_rows_kernels_give_the_scalar_bits() {
    let mut failures = Vec::new();
    for (i, t) in GgmlType::ALL.iter().enumerate() {
        if let Some(mut f) = visit(
            *t,
            TileCheck {
                seed: 0x5eed_0007 + i as u64,
            },
        ) {
            failures.append(&mut f);
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches, first: {:#?}",
        failures.len(),
        &failures[..failures.len().min(20)]
    );
}

#[test]
fn matmul_of_odd_and_even_shapes_equals_matvec_per_column() {
    use super::matvec::{matmul, matmul_scratch_bytes, matvec_at, matvec_scratch_bytes};
    let mut rng = Rng(11);
    let cols = 64usize;
    for t in [
        GgmlType::Q8_0,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::IQ4_NL,
        GgmlType::MXFP4,
        GgmlType::Q4_K,
    ] {
        let cols = if t == GgmlType::Q4_K { 256 } else { cols };
        for rows in [1usize, 2, 3, 17, 34] {
            let mut w = vec![0u8; super::bytes_for(t, rows * cols).unwrap()];
            super::quantize(t, &rng.values(rows * cols), &mut w).unwrap();
            for n in [1usize, 2, 3, 5] {
                let x = rng.values(n * cols);
                let mut want = vec![0f32; n * rows];
                for (column, out) in x.chunks_exact(cols).zip(want.chunks_exact_mut(rows)) {
                    let mut scratch = vec![0u8; matvec_scratch_bytes(t, cols).unwrap()];
                    matvec_at(Level::Scalar, t, &w, rows, cols, column, &mut scratch, out).unwrap();
                }
                for level in available() {
                    let mut scratch = vec![0u8; matmul_scratch_bytes(t, cols, n).unwrap()];
                    let mut y = vec![f32::NAN; n * rows];
                    matmul(level, t, &w, rows, cols, n, &x, &mut scratch, &mut y).unwrap();
                    assert!(
                        same_bits(&y, &want),
                        "{t} at {level}: {rows} rows, {n} columns"
                    );
                }
            }
        }
    }
}

/// `typed::matmul_at` of every level against the scalar vec_dot of each row and each column
/// quantized by the scalar quantizer: shapes of 1 to 17 rows by 1 to 17 columns of two blocks,
/// and a matrix of two whole tiles and three rows (tiles and the row groups of the rows kernels
/// do not divide it) by 5 columns. Returns the failures.
struct MatmulCheck {
    seed: u64,
}

/// Rows of [`MatmulCheck`]'s matrices (two blocks each): quantized rows where the type has a
/// quantizer (else random bytes), and random bytes.
struct RowPool {
    quantized: Vec<Vec<u8>>,
    random: Vec<Vec<u8>>,
}

impl RowPool {
    fn of<B: Kernels>(rng: &mut Rng) -> RowPool {
        let row_bytes = core::mem::size_of::<B>() * MatmulCheck::ROW_BLOCKS;
        let random: Vec<Vec<u8>> = (0..5).map(|_| rng.bytes(row_bytes)).collect();
        let mut quantized: Vec<Vec<u8>> = (0..12)
            .filter_map(|_| {
                quantized_rows::<B>(vec![rng.values(MatmulCheck::ROW_BLOCKS * B::VALUES)]).pop()
            })
            .collect();
        if quantized.is_empty() {
            quantized = (0..12).map(|_| rng.bytes(row_bytes)).collect();
        }
        RowPool { quantized, random }
    }

    /// Row `r` of a matrix: every fifth of random bytes, the others quantized; which one of each
    /// kind also moves with `salt` (the shape), so that shapes differ.
    fn row(&self, r: usize, salt: usize) -> &[u8] {
        if r % 5 == 4 {
            &self.random[(r / 5 + salt) % self.random.len()]
        } else {
            &self.quantized[(r + 7 * salt) % self.quantized.len()]
        }
    }
}

impl MatmulCheck {
    /// Blocks a row of the checked matrices has.
    const ROW_BLOCKS: usize = 2;

    /// The failures of one `rows × (2 blocks)` matrix against `n` columns, at every level.
    fn shape<B: Kernels>(rng: &mut Rng, pool: &RowPool, rows: usize, n: usize) -> Vec<String> {
        let mut failures = Vec::new();
        let (Some(scalar), Some(quantize_x)) = (
            B::vec_dot_kernel(Level::Scalar),
            <B::Activation as Kernels>::quantize_kernel(Level::Scalar),
        ) else {
            return failures;
        };
        let row_blocks = Self::ROW_BLOCKS;
        let cols = row_blocks * B::VALUES;
        let w: Vec<u8> = (0..rows)
            .flat_map(|r| pool.row(r, rows * 31 + n).iter().copied())
            .collect();
        let x = rng.values(n * cols);
        let per_column = typed::matvec_scratch_bytes::<B>(cols).unwrap();
        let mut xq = vec![0u8; per_column * n];
        quantize_x(&x, blocks_mut::<B::Activation>(&mut xq).unwrap());
        let wb = blocks::<B>(&w).unwrap();
        let mut want = vec![0f32; n * rows];
        for (column, out) in xq.chunks_exact(per_column).zip(want.chunks_exact_mut(rows)) {
            let column = blocks::<B::Activation>(column).unwrap();
            for (o, row) in out.iter_mut().zip(wb.chunks_exact(row_blocks)) {
                *o = scalar(row, column);
            }
        }
        for level in available() {
            let mut scratch = vec![0u8; per_column * n];
            let mut y = vec![f32::NAN; n * rows];
            let result = typed::matmul_at::<B>(level, &w, rows, cols, n, &x, &mut scratch, &mut y);
            if result.is_err() || !same_bits(&y, &want) {
                failures.push(format!(
                    "{} at {level}: {rows} rows, {n} columns: {result:?}",
                    B::TYPE
                ));
            }
        }
        failures
    }
}

impl Visitor for MatmulCheck {
    type Out = Vec<String>;
    fn visit<B: Kernels>(self) -> Vec<String> {
        let mut failures = Vec::new();
        let mut rng = Rng(self.seed);
        let pool = RowPool::of::<B>(&mut rng);
        // On aarch64 (run under QEMU in CI) the tile edges only: its tiles' own tests
        // (`arch/aarch64/kernels/{matmul_tests,k_matmul_tests}`) cover every rows × columns in
        // 1..=17 against scalar.
        let sizes: &[usize] = if cfg!(target_arch = "aarch64") {
            &[1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 17]
        } else {
            &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]
        };
        for &rows in sizes {
            for &n in sizes {
                failures.append(&mut MatmulCheck::shape::<B>(&mut rng, &pool, rows, n));
            }
        }
        let tile_rows = typed::matmul_tile_rows(2 * core::mem::size_of::<B>());
        failures.append(&mut MatmulCheck::shape::<B>(
            &mut rng,
            &pool,
            2 * tile_rows + 3,
            5,
        ));
        failures
    }
}

#[test]
#[cfg_attr(miri, ignore)]
fn matmul_of_every_type_and_shape_equals_the_scalar_vec_dots() {
    let mut failures = Vec::new();
    let mut tested = 0;
    for (i, t) in GgmlType::ALL.iter().enumerate() {
        if super::vec_dot_type(*t).is_none() {
            continue;
        }
        let check = MatmulCheck {
            seed: 0x6e_0000 + i as u64,
        };
        if let Some(mut f) = visit(*t, check) {
            tested += 1;
            failures.append(&mut f);
        }
    }
    assert!(tested >= 20, "only {tested} types with a vec_dot");
    assert!(
        failures.is_empty(),
        "{} mismatches, first: {:#?}",
        failures.len(),
        &failures[..failures.len().min(20)]
    );
}

/// Weight rows whose blocks each hold random values of one sign and similar magnitude (0.5 to 1
/// times a random scale): quantized, the quants crowd one end of their range and the scales have
/// full mantissas, so against activations of one sign the integer sums have many significant
/// bits and any change in the order of the float steps rounds differently.
fn one_signed_rows<B: Kernels>(rng: &mut Rng, n_blocks: usize) -> Vec<Vec<u8>> {
    let mut values = Vec::with_capacity(n_blocks * B::VALUES);
    for _ in 0..n_blocks {
        let scale = (rng.next() % 1_000_000) as f32 / 1e5 + 0.1;
        let sign = if rng.next().is_multiple_of(2) {
            1.0
        } else {
            -1.0
        };
        values.extend(
            (0..B::VALUES).map(|_| sign * scale * (0.5 + (rng.next() % 1_000_000) as f32 / 2e6)),
        );
    }
    quantized_rows::<B>(vec![values])
}

/// Each level's matmul kernel called directly, as `typed` calls it, against the scalar vec_dot of
/// every row and column: row counts around the kernels' strips (8k ± 1, 16k ± 1), column counts
/// around their column tiles (4k ± 1, past a group of 32 and, on x86_64, of 128 columns), rows of
/// 1 to 33 blocks (past a chunk of blocks), weights of random bytes, quantized data, repeated
/// special bytes and one-signed blocks, activations of random bytes, quantized data, all quants
/// -128 or 127 and random quants of large magnitude; outputs `rows + 3` apart in one slice, and in
/// a slice per column from its third value, the gaps checked untouched. Returns the failures and
/// how many kernels ran.
struct MatmulKernelCheck {
    seed: u64,
}

impl Visitor for MatmulKernelCheck {
    type Out = (Vec<String>, usize);
    // The inputs are made once and each output's scalar vec_dot computed once; every level's
    // kernel is held to them.
    fn visit<B: Kernels>(self) -> (Vec<String>, usize) {
        const UNTOUCHED: f32 = -7.25;
        let mut failures = Vec::new();
        let Some(scalar) = B::vec_dot_kernel(Level::Scalar) else {
            return (failures, 0);
        };
        let kernels: Vec<_> = available()
            .filter_map(|level| B::matmul_kernel(level).map(|kernel| (level, kernel)))
            .collect();
        if kernels.is_empty() {
            return (failures, 0);
        }
        let mut rng = Rng(self.seed);
        // 17 and 33 blocks: past one and two of the x86_64 VNNI tiles' chunks of 16 blocks;
        // aarch64's tiles walk the blocks without chunks (and run under QEMU in CI).
        let row_block_counts: &[usize] = if cfg!(target_arch = "aarch64") {
            &[1, 3, 17]
        } else {
            &[1, 3, 17, 33]
        };
        // 131: past the x86_64 legacy tiles' group of 128 columns that share a decoded strip.
        let column_counts: &[usize] = if cfg!(target_arch = "aarch64") {
            &[1, 2, 5, 6, 7, 9, 13, 35]
        } else {
            &[1, 2, 5, 6, 7, 9, 13, 35, 131]
        };
        for &row_blocks in row_block_counts {
            let mut pool = weight_rows::<B>(&mut rng, row_blocks);
            pool.extend(one_signed_rows::<B>(&mut rng, row_blocks));
            pool.extend(one_signed_rows::<B>(&mut rng, row_blocks));
            let mut columns = activation_rows::<B>(&mut rng, row_blocks);
            // Random quants of one sign and large magnitude (64..=127, -128..=-65): integer
            // sums with many significant bits, so that products with the scales round.
            for high in [0x40u8, 0x80] {
                let mut row = columns[0].clone();
                set_quants_with::<B::Activation>(&mut row, || high | (rng.next() as u8 & 0x3f));
                columns.push(row);
            }
            for rows in [1usize, 7, 8, 9, 15, 16, 17, 33] {
                for &n in column_counts {
                    let w: Vec<u8> = (0..rows)
                        .flat_map(|r| pool[(r * 5 + n) % pool.len()].iter().copied())
                        .collect();
                    let x: Vec<u8> = (0..n)
                        .flat_map(|c| columns[(c + rows) % columns.len()].iter().copied())
                        .collect();
                    let (wb, xb) = (
                        blocks::<B>(&w).unwrap(),
                        blocks::<B::Activation>(&x).unwrap(),
                    );
                    let column_len = xb.len() / n;
                    let want: Vec<f32> = xb
                        .chunks_exact(column_len)
                        .flat_map(|column| {
                            wb.chunks_exact(row_blocks)
                                .map(move |row| scalar(row, column))
                        })
                        .collect();
                    // Outputs wrong in `columns` (each a column's rows from `first`, the rest of
                    // it a gap that must stay untouched), against `want`.
                    let wrong_in = |columns: &mut dyn Iterator<Item = &[f32]>, first: usize| {
                        let mut wrong = 0;
                        for (column, want) in columns.zip(want.chunks_exact(rows)) {
                            let (before, rest) = column.split_at(first);
                            let (got, after) = rest.split_at(rows);
                            wrong += got
                                .iter()
                                .zip(want)
                                .filter(|(g, w)| !same(**g, **w))
                                .count();
                            let mut gaps = before.iter().chain(after);
                            if gaps.any(|v| v.to_bits() != UNTOUCHED.to_bits()) {
                                wrong += 1;
                            }
                        }
                        wrong
                    };
                    let stride = rows + 3;
                    for &(level, kernel) in &kernels {
                        let mut y = vec![UNTOUCHED; n * stride];
                        kernel(
                            wb,
                            row_blocks,
                            xb,
                            n,
                            &mut OutputColumns::strided(&mut y, stride, rows),
                        );
                        let mut wrong = wrong_in(&mut y.chunks_exact(stride), 0);
                        // The same into a slice per column (as threads that split the rows
                        // hand it), the view's rows 2 from each slice's start and 3 before its
                        // end.
                        let mut split = vec![vec![UNTOUCHED; rows + 5]; n];
                        let mut columns: Vec<&mut [f32]> =
                            split.iter_mut().map(|c| &mut c[..]).collect();
                        let mut view = OutputColumns::split(&mut columns, 2, rows);
                        kernel(wb, row_blocks, xb, n, &mut view);
                        wrong += wrong_in(&mut split.iter().map(|c| &c[..]), 2);
                        if wrong > 0 {
                            failures.push(format!(
                                "{} matmul at {level}: {rows} rows of {row_blocks} blocks, {n} \
                                 columns: {wrong} wrong",
                                B::TYPE
                            ));
                        }
                    }
                }
            }
        }
        (failures, kernels.len())
    }
}

#[test]
#[cfg_attr(miri, ignore)]
fn every_matmul_kernel_gives_the_scalar_bits_on_tile_edges_and_extremes() {
    let mut failures = Vec::new();
    let mut kernels = 0;
    for (i, t) in GgmlType::ALL.iter().enumerate() {
        let check = MatmulKernelCheck {
            seed: 0x6d6b_0000 + i as u64,
        };
        if let Some((mut f, k)) = visit(*t, check) {
            failures.append(&mut f);
            kernels += k;
        }
    }
    // The x86_64 VNNI level has the legacy types' kernels; a CPU without it may have none.
    if cfg!(all(target_arch = "x86_64", not(miniquant_disable_simd)))
        && available().any(|l| l == Level::Avx512Vnni)
    {
        assert!(kernels >= 7, "only {kernels} matmul kernels ran");
    }
    assert!(
        failures.is_empty(),
        "{} mismatches, first: {:#?}",
        failures.len(),
        &failures[..failures.len().min(20)]
    );
}
