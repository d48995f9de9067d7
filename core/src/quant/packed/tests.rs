//! The packed layout against the plain one: packing is a reordering that unpacks to the plain
//! blocks, and every level's packed product gives every row the scalar plain matvec's bits, on
//! row counts around the group size and random bytes (NaN and infinite scales, -128 quants).

extern crate std;

use super::*;
use crate::quant::level::available;
use crate::quant::level_tests::Rng;
use crate::quant::matvec::{matvec_at, matvec_quantized};
use std::vec;
use std::vec::Vec;

const TYPES: [GgmlType; 4] = [
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q8_0,
];
const ROWS: [usize; 14] = [0, 1, 15, 16, 17, 31, 32, 33, 47, 48, 64, 65, 80, 100];
// 65 and 130: past the kernels' chunks of 64 activation blocks.
const BLOCKS: [usize; 8] = [0, 1, 2, 3, 7, 9, 65, 130];

fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
}

/// Weights that are real blocks (quantized from values) or random bytes.
fn weights(rng: &mut Rng, t: GgmlType, rows: usize, cols: usize, random: bool) -> Vec<u8> {
    let bytes = bytes_for(t, cols).unwrap() * rows;
    if random {
        return rng.bytes(bytes);
    }
    let mut w = vec![0u8; bytes];
    crate::quant::quantize(t, &rng.values(rows * cols), &mut w).unwrap();
    w
}

#[test]
fn packing_reorders_the_blocks_and_keeps_the_tail() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for t in TYPES {
        let g = geometry(t).unwrap();
        let bb = g.block_bytes();
        for rows in ROWS {
            for blocks in BLOCKS {
                let cols = blocks * 32;
                let w = rng.bytes(rows * blocks * bb);
                let mut packed = vec![0u8; w.len()];
                pack(t, &w, rows, cols, &mut packed).unwrap();
                let whole = rows - rows % GROUP_ROWS;
                for r in 0..whole {
                    let group = &packed[(r / GROUP_ROWS) * GROUP_ROWS * blocks * bb..];
                    for b in 0..blocks {
                        let group_block = &group[b * g.group_block_bytes()..];
                        let block = unpack_block(g, group_block, r % GROUP_ROWS);
                        let plain = &w[(r * blocks + b) * bb..][..bb];
                        assert_eq!(&block[..bb], plain, "{t} row {r} block {b}");
                    }
                }
                assert_eq!(packed[whole * blocks * bb..], w[whole * blocks * bb..]);
                // A permutation of the bytes (Q8_0's quants flipped back first, Q5_0's fifth
                // bits put back in order).
                let mut sorted: Vec<u8> = packed.clone();
                if g.flip != 0 || g.fifth_bits {
                    sorted = (0..whole)
                        .flat_map(|r| {
                            let group = &packed[(r / GROUP_ROWS) * GROUP_ROWS * blocks * bb..];
                            (0..blocks).flat_map(move |b| {
                                unpack_block(g, &group[b * g.group_block_bytes()..], r % 16)
                                    .into_iter()
                                    .take(bb)
                            })
                        })
                        .chain(packed[whole * blocks * bb..].iter().copied())
                        .collect();
                }
                let mut plain = w.clone();
                sorted.sort_unstable();
                plain.sort_unstable();
                assert_eq!(sorted, plain, "{t} {rows}x{cols}");
            }
        }
    }
}

#[test]
fn every_level_gives_the_plain_scalar_bits() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let levels: Vec<Level> = available().collect();
    for t in TYPES {
        for rows in ROWS {
            for blocks in BLOCKS {
                for random in [false, true] {
                    let cols = blocks * 32;
                    let w = weights(&mut rng, t, rows, cols, random);
                    let mut packed = vec![0u8; w.len()];
                    pack(t, &w, rows, cols, &mut packed).unwrap();
                    let x = rng.values(cols);
                    let mut scratch = vec![0u8; matvec_scratch_bytes(t, cols).unwrap()];
                    let mut expected = vec![0.0f32; rows];
                    matvec_at(
                        Level::Scalar,
                        t,
                        &w,
                        rows,
                        cols,
                        &x,
                        &mut scratch,
                        &mut expected,
                    )
                    .unwrap();
                    // Activations as random bytes too (-128 quants, NaN scales).
                    let xq = rng.bytes(scratch.len());
                    let mut expected_q = vec![0.0f32; rows];
                    matvec_quantized(Level::Scalar, t, &w, rows, cols, &xq, &mut expected_q)
                        .unwrap();
                    for &level in &levels {
                        let mut y = vec![f32::NAN; rows];
                        packed_matvec_at(level, t, &packed, rows, cols, &x, &mut scratch, &mut y)
                            .unwrap();
                        assert!(
                            same_bits(&y, &expected),
                            "{t} {rows}x{cols} random {random} at {level}"
                        );
                        let mut y = vec![f32::NAN; rows];
                        packed_matvec_quantized(level, t, &packed, rows, cols, &xq, &mut y)
                            .unwrap();
                        assert!(
                            same_bits(&y, &expected_q),
                            "{t} {rows}x{cols} random {random}, random activations, at {level}"
                        );
                    }
                }
            }
        }
    }
    std::eprintln!("packed rows: levels run {levels:?}");
}

#[test]
fn groups_split_anywhere_on_a_group_boundary_give_the_same_bits() {
    let mut rng = Rng(7);
    let (rows, cols) = (16 * 5 + 3, 96);
    for t in TYPES {
        let w = weights(&mut rng, t, rows, cols, false);
        let mut packed = vec![0u8; w.len()];
        pack(t, &w, rows, cols, &mut packed).unwrap();
        let x = rng.values(cols);
        let mut scratch = vec![0u8; matvec_scratch_bytes(t, cols).unwrap()];
        let xq = quantize_activations(Level::Scalar, t, cols, &x, &mut scratch)
            .unwrap()
            .to_vec();
        let row_bytes = bytes_for(t, cols).unwrap();
        for level in available() {
            let mut whole = vec![0.0f32; rows];
            packed_matvec_quantized(level, t, &packed, rows, cols, &xq, &mut whole).unwrap();
            for split in (0..rows).step_by(GROUP_ROWS) {
                let mut parts = vec![0.0f32; rows];
                let (p0, p1) = packed.split_at(split * row_bytes);
                let (y0, y1) = parts.split_at_mut(split);
                packed_matvec_quantized(level, t, p0, split, cols, &xq, y0).unwrap();
                packed_matvec_quantized(level, t, p1, rows - split, cols, &xq, y1).unwrap();
                assert!(same_bits(&parts, &whole), "{t} split at {split}, {level}");
            }
        }
    }
}

#[test]
fn bad_arguments_are_errors() {
    let t = GgmlType::Q4_1;
    let (rows, cols) = (17, 64);
    let w = vec![0u8; rows * 2 * 20];
    let mut out = vec![0u8; w.len()];
    assert!(matches!(
        pack(GgmlType::Q5_1, &w, rows, cols, &mut out),
        Err(Error::Unsupported { op: Op::Pack, .. })
    ));
    assert!(!packable(GgmlType::Q4_K) && packable(t));
    let mismatch = |r: Result<()>| matches!(r, Err(Error::LengthMismatch { .. }));
    assert!(matches!(
        pack(t, &w, rows, 48, &mut out),
        Err(Error::PartialBlock { .. })
    ));
    assert!(mismatch(pack(t, &w, rows + 1, cols, &mut out)));
    assert!(mismatch(pack(t, &w, rows, cols, &mut out[1..])));
    assert!(mismatch(pack(t, &w, usize::MAX, cols, &mut out)));
    pack(t, &w, rows, cols, &mut out).unwrap();
    let x = vec![1.0f32; cols];
    let mut scratch = vec![0u8; matvec_scratch_bytes(t, cols).unwrap()];
    let mut y = vec![0.0f32; rows];
    let run = |packed: &[u8], x: &[f32], scratch: &mut [u8], y: &mut [f32]| {
        packed_matvec_at(Level::Scalar, t, packed, rows, cols, x, scratch, y)
    };
    assert!(mismatch(run(&out, &x, &mut scratch, &mut y[1..])));
    assert!(mismatch(run(&out, &x[1..], &mut scratch, &mut y)));
    assert!(mismatch(run(&out[20..], &x, &mut scratch, &mut y)));
    assert!(mismatch(run(&out, &x, &mut scratch[1..], &mut y)));
    assert!(!has_packed_kernel(Level::Scalar, t));
    assert!(!has_packed_kernel(
        crate::quant::level::current(),
        GgmlType::Q4_K
    ));
}

#[test]
fn packed_matmul_gives_every_column_the_plain_scalar_bits() {
    let mut rng = Rng(0x5851_f42d_4c95_7f2d);
    let levels: Vec<Level> = available().collect();
    for t in TYPES {
        // A level without a packed matmul kernel quantizes the columns with its own quantizer and
        // runs the scalar twin: it takes one shape of each size class here, the scalar level and
        // the kernels every shape (the scalar side is slow under qemu, where aarch64 runs this).
        let all_shapes =
            |level: &Level| *level == Level::Scalar || has_packed_matmul_kernel(*level, t);
        for rows in [0, 1, 16, 17, 33, 64, 80] {
            for blocks in [0, 1, 3, 9, 65] {
                for n in [1, 2, 3, 4, 5, 8, 9, 12, 13, 17, 33] {
                    let few = rows == 17 && blocks == 3 && matches!(n, 1 | 17);
                    let random = rng.next().is_multiple_of(2);
                    let cols = blocks * 32;
                    let w = weights(&mut rng, t, rows, cols, random);
                    let mut packed = vec![0u8; w.len()];
                    pack(t, &w, rows, cols, &mut packed).unwrap();
                    let x = rng.values(cols * n);
                    let column_bytes = matvec_scratch_bytes(t, cols).unwrap();
                    let mut scratch = vec![0u8; column_bytes];
                    let mut expected = vec![0.0f32; rows * n];
                    for (xc, yc) in x.chunks(cols.max(1)).zip(expected.chunks_mut(rows.max(1))) {
                        matvec_at(Level::Scalar, t, &w, rows, cols, xc, &mut scratch, yc).unwrap();
                    }
                    // Random activation bytes too, their starts computed for them.
                    let quantized = column_bytes * n;
                    let mut xqs = rng.bytes(packed_activation_bytes(t, cols, n).unwrap());
                    let (xq, starts) = xqs.split_at_mut(quantized);
                    activation_starts(t, xq, starts).unwrap();
                    let mut expected_q = vec![0.0f32; rows * n];
                    for (c, yc) in expected_q.chunks_mut(rows.max(1)).enumerate() {
                        let xc = &xq[c * column_bytes..(c + 1) * column_bytes];
                        matvec_quantized(Level::Scalar, t, &w, rows, cols, xc, yc).unwrap();
                    }
                    let mut big = vec![0u8; packed_activation_bytes(t, cols, n).unwrap()];
                    for level in levels.iter().filter(|l| few || all_shapes(l)) {
                        let level = *level;
                        let mut y = vec![f32::NAN; rows * n];
                        packed_matmul_at(level, t, &packed, rows, cols, n, &x, &mut big, &mut y)
                            .unwrap();
                        assert!(
                            same_bits(&y, &expected),
                            "{t} {rows}x{cols} n {n} random {random} at {level}"
                        );
                        let mut y = vec![f32::NAN; rows * n];
                        packed_matmul_quantized(level, t, &packed, rows, cols, n, &xqs, &mut y)
                            .unwrap();
                        assert!(
                            same_bits(&y, &expected_q),
                            "{t} {rows}x{cols} n {n}, random activations, at {level}"
                        );
                    }
                }
            }
        }
    }
    std::eprintln!(
        "packed matmul: levels run {levels:?}, with a matmul kernel: {:?}",
        levels
            .iter()
            .filter(|&&l| has_packed_matmul_kernel(l, GgmlType::Q4_0))
            .collect::<Vec<_>>()
    );
}

#[test]
fn packed_matmul_lengths_are_checked() {
    let (t, rows, cols, n) = (GgmlType::Q8_0, 20, 64, 3);
    let packed = vec![0u8; rows * 2 * 34];
    let x = vec![0.5f32; cols * n];
    let mut scratch = vec![0u8; packed_activation_bytes(t, cols, n).unwrap()];
    let mut y = vec![0.0f32; rows * n];
    let run = |x: &[f32], scratch: &mut [u8], y: &mut [f32]| {
        packed_matmul_at(Level::Scalar, t, &packed, rows, cols, n, x, scratch, y)
    };
    let mismatch = |r: Result<()>| matches!(r, Err(Error::LengthMismatch { .. }));
    run(&x, &mut scratch, &mut y).unwrap();
    let short = scratch.len() - 1;
    assert!(mismatch(run(&x, &mut scratch[..short], &mut y)));
    assert!(mismatch(run(&x[1..], &mut scratch, &mut y)));
    assert!(mismatch(run(&x, &mut scratch, &mut y[1..])));
    assert!(mismatch(packed_matmul_quantized(
        Level::Scalar,
        t,
        &packed,
        rows,
        cols,
        n,
        &scratch[1..],
        &mut y
    )));
    assert!(matches!(
        packed_activation_bytes(GgmlType::Q4_K, 256, 1),
        Err(Error::Unsupported { op: Op::Pack, .. })
    ));
    assert!(mismatch(
        packed_activation_bytes(t, 64, usize::MAX).map(|_| ())
    ));
}

/// Each activation block's start is its weight type's bias (the offset the packed weights are
/// stored with: ggml's Q4_0 nibbles are `q + 8`, Q5_0's five bits `q + 16`, Q8_0's bytes here
/// `q + 128`, Q4_1's nibbles unsigned as they are) times minus the sum of its 32 signed quants, its last 32 bytes.
#[test]
fn activation_starts_are_minus_the_bias_times_the_quants_sum() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for (t, bias, block_bytes) in [
        (GgmlType::Q4_0, 8, 34),
        (GgmlType::Q4_1, 0, 36),
        (GgmlType::Q5_0, 16, 34),
        (GgmlType::Q8_0, 128, 34),
    ] {
        for blocks in [0, 1, 2, 17, 100] {
            let mut xq = rng.bytes(blocks * block_bytes);
            if let Some(first) = xq.get_mut(block_bytes - 32..block_bytes) {
                first.fill(0x7f);
            }
            let mut starts = vec![0xa5u8; 4 * blocks];
            activation_starts(t, &xq, &mut starts).unwrap();
            for (block, start) in xq.chunks(block_bytes).zip(starts.chunks(4)) {
                let sum: i32 = block[block_bytes - 32..]
                    .iter()
                    .map(|&q| i32::from(q as i8))
                    .sum();
                let start = i32::from_le_bytes(start.try_into().unwrap());
                assert_eq!(start, -bias * sum, "{t:?}, {blocks} blocks");
            }
        }
    }
}

/// Q5_0's stored fifth bits: each of the 32 bits goes where the kernels' shifts find it (the
/// fifth bit of value `4j + b` at bit 4 of byte `b` after a shift left by `4 - j`, of value
/// `16 + 4j + b` after a shift right by `j`), and packing keeps every `qh`.
#[test]
fn q5_0_fifth_bits_are_where_the_kernels_shift_them_from() {
    for v in 0..32u32 {
        let stored = spread_fifth_bits(1 << v);
        assert_eq!(stored.count_ones(), 1, "value {v}");
        let (j, b) = ((v % 16) / 4, v % 4);
        let moved = if v < 16 {
            stored << (4 - j)
        } else {
            stored >> j
        };
        assert_eq!(moved, 1 << (8 * b + 4), "value {v}");
    }
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    for _ in 0..1000 {
        let qh = rng.next() as u32;
        assert_eq!(gather_fifth_bits(spread_fifth_bits(qh)), qh);
    }
}

/// The largest integer sums the kernels can meet: every weight quant at its largest (or, for
/// Q8_0, its smallest) stored value against activations all -128 or all 127, one and several
/// columns, at every level (the AVX2 kernels sum products in i16 lanes before widening them).
#[test]
fn extreme_quants_give_the_plain_scalar_bits() {
    let (rows, blocks, n) = (33, 9, 5);
    let cols = blocks * 32;
    let levels: Vec<Level> = available().collect();
    for t in TYPES {
        let g = geometry(t).unwrap();
        for weight_quants in [0xffu8, 0x80, 0x7f, 0x00] {
            // Scales (and Q4_1's `m`) 1.0 in f16; Q5_0's fifth bits all set.
            let mut block = vec![weight_quants; g.block_bytes()];
            for field in block[..g.head].chunks_exact_mut(2) {
                field.copy_from_slice(&[0x00, 0x3c]);
            }
            if g.fifth_bits {
                block[FIFTH_BITS].fill(0xff);
            }
            let w: Vec<u8> = block.repeat(rows * blocks);
            let mut packed = vec![0u8; w.len()];
            pack(t, &w, rows, cols, &mut packed).unwrap();
            let column_bytes = matvec_scratch_bytes(t, cols).unwrap();
            let activation_block = column_bytes / blocks;
            for x_quant in [0x80u8, 0x7f] {
                // `d` (and Q8_1's `s`) 1.0, then the 32 quants.
                let mut xb = vec![x_quant; activation_block];
                for field in xb[..activation_block - 32].chunks_exact_mut(2) {
                    field.copy_from_slice(&[0x00, 0x3c]);
                }
                let mut xqs = xb.repeat(blocks * n);
                let mut expected = vec![0.0f32; rows];
                matvec_quantized(
                    Level::Scalar,
                    t,
                    &w,
                    rows,
                    cols,
                    &xqs[..column_bytes],
                    &mut expected,
                )
                .unwrap();
                assert!(expected.iter().all(|y| y.is_finite()));
                let quantized = xqs.len();
                xqs.resize(packed_activation_bytes(t, cols, n).unwrap(), 0);
                let (xq, starts) = xqs.split_at_mut(quantized);
                activation_starts(t, xq, starts).unwrap();
                for &level in &levels {
                    let mut y = vec![f32::NAN; rows];
                    packed_matvec_quantized(
                        level,
                        t,
                        &packed,
                        rows,
                        cols,
                        &xqs[..column_bytes],
                        &mut y,
                    )
                    .unwrap();
                    assert!(
                        same_bits(&y, &expected),
                        "{t} {weight_quants:#x} x {x_quant:#x} at {level}"
                    );
                    let mut y = vec![f32::NAN; rows * n];
                    packed_matmul_quantized(level, t, &packed, rows, cols, n, &xqs, &mut y)
                        .unwrap();
                    for column in y.chunks(rows) {
                        assert!(
                            same_bits(column, &expected),
                            "{t} {weight_quants:#x} x {x_quant:#x}, {n} columns, at {level}"
                        );
                    }
                }
            }
        }
    }
}

/// The packed matmul runs on AMX tiles only at the `amx` level, where the CPU has it, and only for
/// the types with an AMX kernel (Q5_0 has none: it runs the VNNI one there).
#[test]
fn only_the_amx_level_has_tile_kernels_and_not_for_q5_0() {
    for level in available() {
        for t in TYPES {
            let expected = level == Level::Amx && t != GgmlType::Q5_0;
            assert_eq!(has_tile_kernel(level, t), expected, "{t} at {level}");
        }
        assert!(!has_tile_kernel(level, GgmlType::Q4_K));
    }
    assert!(!has_tile_kernel(Level::Avx512Vnni, GgmlType::Q8_0));
}
