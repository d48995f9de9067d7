//! The K-quant (and IQ4_XS) matmul tiles against the scalar vec_dot, output by output, bit for bit, at every
//! x86_64 level (and at VNNI without VBMI): rows of 1 to 81 super-blocks (decoded at once up to
//! 20, the 256-bit tiles and a lone group up to 40; in chunks beyond, some with more columns than
//! a chunked pass keeps), row counts around the tiles' 4 and 8 (the `vpdpbusd` tiles take eight
//! rows at once, four for the last group),
//! column counts of 8 (the fewest the tiles take) and more around its 2 and 4 (and fewer: the
//! fallback), quantized rows, random-byte rows, rows of extreme bytes with finite scales, and activations of
//! all -128, all 127, alternating extremes and extreme `bsums`.

extern crate std;

use std::format;
use std::string::String;
use std::vec;
use std::vec::Vec;

use super::detect::{hide, Features};
use crate::quant::activation::{BlockQ8K, QK_K};
use crate::quant::cast::{blocks, blocks_mut};
use crate::quant::iq::iq4_xs::BlockIq4Xs;
use crate::quant::k_quants;
use crate::quant::level::{self, available, Level};
use crate::quant::table::Kernels;
use crate::quant::typed;

/// xorshift64*: deterministic test data without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }

    /// Roughly normal values with a random scale.
    fn values(&mut self, n: usize) -> Vec<f32> {
        let scale = (self.next() % 1000) as f32 / 100.0 + 0.01;
        (0..n)
            .map(|_| {
                let sum: f32 = (0..4)
                    .map(|_| (self.next() % 2001) as f32 / 1000.0 - 1.0)
                    .sum();
                sum * scale
            })
            .collect()
    }
}

/// A finite f16 scale of either sign (at most about ±2^7).
fn finite_f16(rng: &mut Rng) -> [u8; 2] {
    let exponent = 8 + rng.next() % 14;
    let bits = (rng.next() as u16 & 0x83ff) | (exponent as u16) << 10;
    bits.to_le_bytes()
}

/// One row of `row_blocks` blocks of kind `kind`: quantized values, random bytes, random bytes
/// with finite scales, or one of four extreme byte patterns with finite scales.
fn weight_row<B: Kernels>(
    rng: &mut Rng,
    row_blocks: usize,
    kind: usize,
    scale_offsets: &[usize],
) -> Vec<u8> {
    let size = core::mem::size_of::<B>();
    let mut row = match kind % 7 {
        0 => {
            let mut row = vec![0u8; size * row_blocks];
            let quantize = B::quantize_kernel(Level::Scalar).expect("a scalar quantizer");
            quantize(
                &rng.values(row_blocks * B::VALUES),
                blocks_mut::<B>(&mut row).unwrap(),
            );
            return row;
        }
        1 => return rng.bytes(size * row_blocks),
        2 => rng.bytes(size * row_blocks),
        k => vec![[0x00, 0xff, 0x80, 0x7f][k - 3]; size * row_blocks],
    };
    for block in row.chunks_exact_mut(size) {
        for &at in scale_offsets {
            block[at..at + 2].copy_from_slice(&finite_f16(rng));
        }
    }
    row
}

/// One activation column of `row_blocks` Q8_K blocks of kind `kind`: quantized values, all -128,
/// all 127, alternating -128/127 with random `bsums`, or random quants with `bsums` of ±32767.
fn activation_column(rng: &mut Rng, row_blocks: usize, kind: usize) -> Vec<u8> {
    let mut column = vec![0u8; row_blocks * core::mem::size_of::<BlockQ8K>()];
    let xs = blocks_mut::<BlockQ8K>(&mut column).unwrap();
    if kind.is_multiple_of(5) {
        let quantize = BlockQ8K::quantize_kernel(Level::Scalar).expect("Q8_K quantizer");
        quantize(&rng.values(row_blocks * QK_K), xs);
        return column;
    }
    for xb in xs.iter_mut() {
        let d = (rng.next() % 1000) as f32 / 997.0 + 1e-3;
        xb.d = d.to_le_bytes();
        for (i, q) in xb.qs.iter_mut().enumerate() {
            *q = match kind % 5 {
                1 => -128,
                2 => 127,
                3 => [-128, 127][(i + i / 7) % 2],
                _ => rng.next() as i8,
            };
        }
        for (i, bsum) in xb.bsums.iter_mut().enumerate() {
            let sum: i32 = xb.qs[16 * i..16 * i + 16]
                .iter()
                .map(|&q| i32::from(q))
                .sum();
            let value = match kind % 5 {
                3 => rng.next() as i16,
                4 => [i16::MIN + 1, i16::MAX][rng.next() as usize % 2],
                _ => sum as i16,
            };
            *bsum = value.to_le_bytes();
        }
    }
    column
}

/// The failures of every level's matmul of a `rows × row_blocks` matrix against `n` columns.
fn check<B: Kernels<Activation = BlockQ8K>>(
    rng: &mut Rng,
    rows: usize,
    row_blocks: usize,
    n: usize,
    scale_offsets: &[usize],
) -> Vec<String> {
    let scalar = B::vec_dot_kernel(Level::Scalar).expect("a scalar vec_dot");
    let mut w = Vec::new();
    for r in 0..rows {
        w.extend(weight_row::<B>(rng, row_blocks, r + n, scale_offsets));
    }
    let mut xq = Vec::new();
    for c in 0..n {
        xq.extend(activation_column(rng, row_blocks, c + rows));
    }
    let wb = blocks::<B>(&w).unwrap();
    let xb = blocks::<BlockQ8K>(&xq).unwrap();
    let mut want = vec![0f32; rows * n];
    for (column, out) in xb.chunks_exact(row_blocks).zip(want.chunks_exact_mut(rows)) {
        for (o, row) in out.iter_mut().zip(wb.chunks_exact(row_blocks)) {
            *o = scalar(row, column);
        }
    }
    let mut failures = Vec::new();
    for level in available().filter(|&l| l != Level::Scalar) {
        let mut y = vec![f32::NAN; rows * n];
        let cols = row_blocks * QK_K;
        let result = typed::matmul_quantized_at::<B>(level, &w, rows, cols, n, &xq, &mut y);
        let wrong: Vec<usize> = (0..y.len())
            .filter(|&i| {
                y[i].to_bits() != want[i].to_bits() && !(y[i].is_nan() && want[i].is_nan())
            })
            .collect();
        if result.is_err() || !wrong.is_empty() {
            failures.push(format!(
                "{} at {level}: {rows} rows of {row_blocks} blocks, {n} columns: {result:?}, \
                 {} wrong, first (column, row) {:?}: {:?} != {:?}",
                B::TYPE,
                wrong.len(),
                wrong.first().map(|&i| (i / rows, i % rows)),
                wrong.first().map(|&i| y[i]),
                wrong.first().map(|&i| want[i]),
            ));
        }
    }
    failures
}

/// Every shape of the grid for type `B`.
fn check_type<B: Kernels<Activation = BlockQ8K>>(
    seed: u64,
    scale_offsets: &[usize],
) -> Vec<String> {
    let mut rng = Rng(seed);
    let mut failures = Vec::new();
    for (rows, row_blocks, n) in [
        (1, 1, 9),
        (3, 2, 3),
        (3, 2, 11),
        (4, 3, 8),
        (5, 1, 13),
        (7, 8, 15),
        (8, 2, 9),
        (9, 5, 8),
        (13, 3, 17),
        (17, 1, 15),
        (12, 16, 9),
        (6, 17, 10),
        (4, 40, 9),
        (5, 40, 3),
        (3, 41, 11),
        (21, 24, 8),
        (6, 3, 33),
        (5, 2, 4),
        (7, 3, 5),
        (4, 18, 6),
        (9, 17, 35),
        (20, 20, 9),
        (16, 21, 8),
        // Rows in chunks: pairs of groups from 21 super-blocks, a lone group or row from 41;
        // more columns than a chunked pass keeps at once (128 in 512-bit tiles, 64 in 256-bit).
        (9, 41, 70),
        (12, 81, 9),
        (6, 25, 133),
        (8, 21, 130),
        (16, 30, 7),
        (5, 44, 2),
        (11, 43, 5),
    ] {
        failures.append(&mut check::<B>(
            &mut rng,
            rows,
            row_blocks,
            n,
            scale_offsets,
        ));
    }
    failures
}

fn check_all() -> Vec<String> {
    let mut failures = Vec::new();
    failures.append(&mut check_type::<k_quants::BlockQ4K>(0x4b_0004, &[0, 2]));
    failures.append(&mut check_type::<k_quants::BlockQ5K>(0x4b_0005, &[0, 2]));
    failures.append(&mut check_type::<k_quants::BlockQ6K>(0x4b_0006, &[208]));
    failures.append(&mut check_type::<k_quants::BlockQ3K>(0x4b_0003, &[108]));
    failures.append(&mut check_type::<k_quants::BlockQ2K>(0x4b_0002, &[80, 82]));
    failures.append(&mut check_type::<BlockIq4Xs>(0x49_0004, &[0]));
    failures
}

#[test]
fn k_quant_matmul_tiles_give_each_outputs_scalar_bits() {
    let failures = check_all();
    assert!(
        failures.is_empty(),
        "{} failures: {:#?}",
        failures.len(),
        &failures[..failures.len().min(12)]
    );
}

/// The same at the VNNI level without VBMI (`vpermd` + `vpshufb` for the lane order).
#[test]
fn k_quant_matmul_tiles_without_vbmi_give_each_outputs_scalar_bits() {
    let _ = level::detect();
    if !Level::Avx512Vnni.is_available() {
        return;
    }
    hide(Features {
        avx2: false,
        avx512vnni: false,
        avx512vbmi: true,
    });
    let failures = check_all();
    hide(Features {
        avx2: false,
        avx512vnni: false,
        avx512vbmi: false,
    });
    assert!(
        failures.is_empty(),
        "{} failures: {:#?}",
        failures.len(),
        &failures[..failures.len().min(12)]
    );
}
