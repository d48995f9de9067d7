//! Every AArch64 kernel against its scalar twin, `to_bits` equality, on random, special and edge
//! blocks (NaN / infinite / subnormal scales, extreme quants, ties, out-of-range inputs). Under
//! QEMU the suite runs with `-cpu max` (dotprod, i8mm), `cortex-a76` (dotprod) and `cortex-a72`
//! (neither); the dotprod / i8mm entry points then fall back to NEON, which is also held to the
//! scalar bits. Dequantized values and quantized blocks are compared strictly; vec_dot results
//! treat any two NaNs as equal (see [`same`]).

extern crate std;

use super::*;
use crate::quant::activation::BlockQ8_1;
use crate::quant::activation::{BlockQ8K, BlockQ8_0, QK8_0, QK_K};
use crate::quant::iq::iq4_nl::{self, BlockIq4Nl};
use crate::quant::k_quants::{
    q4_k as s_q4_k, q5_k as s_q5_k, q6_k as s_q6_k, q8_k as s_q8_k, BlockQ4K, BlockQ5K, BlockQ6K,
};
use crate::quant::legacy::{
    q4_0 as s_q4_0, q4_1 as s_q4_1, q5_0 as s_q5_0, q5_1 as s_q5_1, q8_0 as s_q8_0, q8_1 as s_q8_1,
    BlockQ4_0,
};
use bytemuck::Zeroable;
use std::vec::Vec;

/// xorshift64*: deterministic test data (also the matmul tests').
pub(super) struct Rng(pub(super) u64);
impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub(super) fn below(&mut self, n: usize) -> usize {
        (self.next() >> 33) as usize % n
    }
    /// Roughly normal, times a random power of two from `2^-12` to `2^11`.
    fn value(&mut self) -> f32 {
        self.value_scaled(12, 24)
    }
    /// Roughly normal, times a random power of two from `2^-lowest` (`exponents` of them).
    pub(super) fn value_scaled(&mut self, lowest: u32, exponents: usize) -> f32 {
        let sum: f32 = (0..4)
            .map(|_| (self.next() >> 40) as f32 / (1u64 << 24) as f32)
            .sum();
        let scale = f32::from_bits((127 - lowest + self.below(exponents) as u32) << 23);
        (sum - 2.0) * scale
    }
    pub(super) fn block<B: bytemuck::Pod>(&mut self) -> B {
        let mut b = B::zeroed();
        for byte in bytemuck::bytes_of_mut(&mut b) {
            *byte = self.next() as u8;
        }
        b
    }
}

/// f16 scales that stress the float steps: zeros, NaNs (quiet, signalling, negative),
/// infinities, subnormals, the largest finite, ordinary values.
pub(super) const SPECIAL_F16: [u16; 12] = [
    0x0000, 0x8000, 0x7e00, 0x7c01, 0xfe00, 0x7c00, 0xfc00, 0x0001, 0x8001, 0x7bff, 0x3c00, 0xb555,
];
/// The same for Q8_K's f32 scale.
const SPECIAL_F32: [u32; 10] = [
    0,
    0x8000_0000,
    0x7fc0_0000,
    0x7f80_0001,
    0xffc0_0000,
    0x7f80_0000,
    0xff80_0000,
    1,
    0x7f7f_ffff,
    0x3b80_0000,
];

fn input_floats(rng: &mut Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.value()).collect()
}

/// Rows of `n` blocks: realistic (quantized from floats), random bytes, and random bytes with a
/// special scale written over `d` via `set_d`.
fn rows<B: bytemuck::Pod>(
    rng: &mut Rng,
    n: usize,
    quantize: impl Fn(&mut Rng) -> B,
    set_special: impl Fn(&mut B, usize),
    specials: usize,
) -> Vec<Vec<B>> {
    let mut out = Vec::new();
    for _ in 0..4 {
        out.push((0..n).map(|_| quantize(rng)).collect());
        out.push((0..n).map(|_| rng.block()).collect());
    }
    for s in 0..specials {
        let mut row: Vec<B> = (0..n).map(|_| quantize(rng)).collect();
        if n > 0 {
            let at = rng.below(n);
            set_special(&mut row[at], s);
        }
        out.push(row);
    }
    out
}

fn q8_0_row(rng: &mut Rng, n: usize) -> Vec<Vec<BlockQ8_0>> {
    let mut r = rows(
        rng,
        n,
        |rng| s_q8_0::quantize_block(&to_array(&input_floats(rng, QK8_0))),
        |b: &mut BlockQ8_0, s| b.d = SPECIAL_F16[s].to_le_bytes(),
        SPECIAL_F16.len(),
    );
    // Extreme quants: -128 everywhere (the largest products), 127 everywhere.
    for q in [-128i8, 127] {
        r.push(
            (0..n)
                .map(|_| BlockQ8_0 {
                    d: [0x00, 0x3c],
                    qs: [q; QK8_0],
                })
                .collect(),
        );
    }
    // Large sums with many significant bits and scales with full mantissas: there
    // `sumi * (dx * dy)` and `(sumi * dx) * dy` round differently, so the tests see the order.
    for _ in 0..2 {
        r.push(
            (0..n)
                .map(|_| BlockQ8_0 {
                    d: full_mantissa_f16(rng),
                    qs: core::array::from_fn(|_| 100 + rng.below(28) as i8),
                })
                .collect(),
        );
    }
    r
}

/// A normal f16 in [0.5, 2) with a random 10-bit mantissa.
fn full_mantissa_f16(rng: &mut Rng) -> [u8; 2] {
    (0x3800 | rng.below(0x800) as u16).to_le_bytes()
}

fn q8_k_row(rng: &mut Rng, n: usize) -> Vec<Vec<BlockQ8K>> {
    let mut r = rows(
        rng,
        n,
        |rng| s_q8_k::quantize_block(&to_array(&input_floats(rng, QK_K))),
        |b: &mut BlockQ8K, s| b.d = SPECIAL_F32[s].to_le_bytes(),
        SPECIAL_F32.len(),
    );
    let mut extreme = BlockQ8K::zeroed();
    extreme.d = 1.0f32.to_le_bytes();
    extreme.qs = [-128; QK_K];
    extreme.bsums = [i16::MIN.to_le_bytes(); 16];
    r.push(std::vec![extreme; n]);
    r
}

fn to_array<const N: usize>(x: &[f32]) -> [f32; N] {
    core::array::from_fn(|i| x[i])
}

const LENGTHS: [usize; 6] = [0, 1, 2, 3, 8, 17];

/// Asserts `to_bits` equality of two vec_dot results, where two NaNs count as equal whatever
/// their sign and payload: when two NaNs meet in a commutative add or multiply, which one survives
/// depends on the operand order LLVM picks (Rust leaves arithmetic NaN bits unspecified), on the
/// scalar side as much as here (see `strict_nan` in the tests crate's `diff.rs`). NaN-ness counts.
#[track_caller]
fn same(found: f32, expected: f32, what: &str) {
    if found.is_nan() && expected.is_nan() {
        return;
    }
    assert_eq!(
        found.to_bits(),
        expected.to_bits(),
        "{what}: {found:e} != {expected:e}"
    );
}

/// Strict `to_bits` equality, NaNs included: each dequantized value is a chain with at most one
/// NaN input (its scale), which the hardware passes through unchanged.
#[track_caller]
fn same_strict(found: f32, expected: f32, what: &str) {
    assert_eq!(
        found.to_bits(),
        expected.to_bits(),
        "{what}: {found:e} != {expected:e}"
    );
}

#[test]
fn f16_conversion_matches_the_scalar_one_for_every_bit_pattern() {
    for bits in 0..=u16::MAX {
        let b = bits.to_le_bytes();
        let what = std::format!("{bits:#06x}");
        same_strict(ops::f16_le(b), crate::quant::cast::f16_le(b), &what);
    }
}

#[test]
fn q8_0_vec_dot_kernels_match_scalar() {
    // Which paths this run exercises depends on the (emulated) CPU.
    std::eprintln!(
        "aarch64 kernels: dotprod={} i8mm={}",
        has_dotprod(),
        has_i8mm()
    );
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    for n in LENGTHS {
        let ws = q8_0_row(&mut rng, n);
        let xs = q8_0_row(&mut rng, n);
        for (i, w) in ws.iter().enumerate() {
            for x in &xs {
                let expected = s_q8_0::vec_dot(w, x);
                same(
                    q8_0::vec_dot(w, x),
                    expected,
                    &std::format!("neon n={n} row {i}"),
                );
                same(
                    q8_0::vec_dot_dotprod(w, x),
                    expected,
                    &std::format!("dotprod n={n} row {i}"),
                );
            }
        }
        for pair in ws.chunks_exact(2) {
            for xp in xs.chunks_exact(2) {
                let out = mmla::q8_0_2x2(&pair[0], &pair[1], &xp[0], &xp[1]);
                for r in 0..2 {
                    for c in 0..2 {
                        same(out[2 * r + c], s_q8_0::vec_dot(&pair[r], &xp[c]), "2x2");
                    }
                }
            }
        }
    }
}

fn q4_0_row(rng: &mut Rng, n: usize) -> Vec<Vec<BlockQ4_0>> {
    let mut r = rows(
        rng,
        n,
        |rng| s_q4_0::quantize_block(&to_array(&input_floats(rng, QK8_0))),
        |b: &mut BlockQ4_0, s| b.d = SPECIAL_F16[s].to_le_bytes(),
        SPECIAL_F16.len(),
    );
    for q in [0x00u8, 0xff, 0x0f] {
        r.push(
            (0..n)
                .map(|_| BlockQ4_0 {
                    d: [0x00, 0x3c],
                    qs: [q; 16],
                })
                .collect(),
        );
    }
    // Quants -8 / -7 only: against the large activation rows the sums have many significant bits.
    for _ in 0..2 {
        r.push(
            (0..n)
                .map(|_| BlockQ4_0 {
                    d: full_mantissa_f16(rng),
                    qs: core::array::from_fn(|_| (rng.below(2) * 0x10 + rng.below(2)) as u8),
                })
                .collect(),
        );
    }
    r
}

#[test]
fn q4_0_vec_dot_kernels_match_scalar() {
    let mut rng = Rng(0x5555_0123_dead_beef);
    for n in LENGTHS {
        let ws = q4_0_row(&mut rng, n);
        let xs = q8_0_row(&mut rng, n);
        for (i, w) in ws.iter().enumerate() {
            for x in &xs {
                let expected = s_q4_0::vec_dot(w, x);
                same(
                    q4_0::vec_dot(w, x),
                    expected,
                    &std::format!("neon n={n} row {i}"),
                );
                same(
                    q4_0::vec_dot_dotprod(w, x),
                    expected,
                    &std::format!("dotprod n={n} row {i}"),
                );
            }
        }
        for pair in ws.chunks_exact(2) {
            for xp in xs.chunks_exact(2) {
                let out = mmla::q4_0_2x2(&pair[0], &pair[1], &xp[0], &xp[1]);
                for r in 0..2 {
                    for c in 0..2 {
                        same(out[2 * r + c], s_q4_0::vec_dot(&pair[r], &xp[c]), "2x2");
                    }
                }
            }
        }
    }
    // Mismatched lengths take the one-pair kernels, with the scalar zip semantics.
    let ws = q4_0_row(&mut rng, 5);
    let xs = q8_0_row(&mut rng, 3);
    let out = mmla::q4_0_2x2(&ws[0], &ws[1][..4], &xs[0], &xs[1]);
    same(
        out[2],
        s_q4_0::vec_dot(&ws[1][..4], &xs[0]),
        "2x2 mismatched",
    );
}

fn q4_k_rows(rng: &mut Rng, n: usize) -> Vec<Vec<BlockQ4K>> {
    let mut r = rows(
        rng,
        n,
        |rng| s_q4_k::quantize_block(&to_array(&input_floats(rng, QK_K))),
        |b: &mut BlockQ4K, s| {
            b.d = SPECIAL_F16[s].to_le_bytes();
            b.dmin = SPECIAL_F16[SPECIAL_F16.len() - 1 - s].to_le_bytes();
        },
        SPECIAL_F16.len(),
    );
    let mut extreme = BlockQ4K::zeroed();
    extreme.d = [0x00, 0x3c];
    extreme.dmin = [0x00, 0x3c];
    extreme.scales = [0xff; 12];
    extreme.qs = [0xff; QK_K / 2];
    r.push(std::vec![extreme; n]);
    r
}

fn q6_k_rows(rng: &mut Rng, n: usize) -> Vec<Vec<BlockQ6K>> {
    let mut r = rows(
        rng,
        n,
        |rng| s_q6_k::quantize_block(&to_array(&input_floats(rng, QK_K))),
        |b: &mut BlockQ6K, s| b.d = SPECIAL_F16[s].to_le_bytes(),
        SPECIAL_F16.len(),
    );
    for (q, sc) in [(0x00u8, -128i8), (0xff, 127)] {
        let mut extreme = BlockQ6K::zeroed();
        extreme.d = [0x00, 0x3c];
        extreme.scales = [sc; 16];
        extreme.ql = [q; QK_K / 2];
        extreme.qh = [q; QK_K / 4];
        r.push(std::vec![extreme; n]);
    }
    r
}

#[test]
fn q4_k_vec_dot_matches_scalar() {
    let mut rng = Rng(0x0f0f_1234_5678_9abc);
    for n in LENGTHS {
        let ws = q4_k_rows(&mut rng, n);
        let xs = q8_k_row(&mut rng, n);
        for (i, w) in ws.iter().enumerate() {
            for x in &xs {
                let expected = s_q4_k::vec_dot(w, x);
                same(
                    q4_k::vec_dot(w, x),
                    expected,
                    &std::format!("n={n} row {i}"),
                );
            }
        }
    }
}

#[test]
fn q6_k_vec_dot_matches_scalar() {
    let mut rng = Rng(0x6666_1234_5678_9abc);
    for n in LENGTHS {
        let ws = q6_k_rows(&mut rng, n);
        let xs = q8_k_row(&mut rng, n);
        for (i, w) in ws.iter().enumerate() {
            for x in &xs {
                let expected = s_q6_k::vec_dot(w, x);
                same(
                    q6_k::vec_dot(w, x),
                    expected,
                    &std::format!("n={n} row {i}"),
                );
            }
        }
    }
}

#[track_caller]
fn same_values(found: &[f32], expected: &[f32], what: &str) {
    for (i, (a, b)) in found.iter().zip(expected).enumerate() {
        same_strict(*a, *b, &std::format!("{what}[{i}]"));
    }
}

#[test]
fn dequantize_kernels_match_scalar() {
    let mut rng = Rng(0xdead_0000_beef_1111);
    let (mut a, mut b) = ([0f32; QK8_0], [0f32; QK8_0]);
    for row in q8_0_row(&mut rng, 4) {
        for block in &row {
            dequantize::q8_0(block, &mut a);
            s_q8_0::dequantize_block(block, &mut b);
            same_values(&a, &b, "q8_0");
        }
    }
    for row in q4_0_row(&mut rng, 4) {
        for block in &row {
            dequantize::q4_0(block, &mut a);
            s_q4_0::dequantize_block(block, &mut b);
            same_values(&a, &b, "q4_0");
        }
    }
    let (mut a, mut b) = ([0f32; QK_K], [0f32; QK_K]);
    for row in q4_k_rows(&mut rng, 3) {
        for block in &row {
            dequantize::q4_k(block, &mut a);
            s_q4_k::dequantize_block(block, &mut b);
            same_values(&a, &b, "q4_k");
        }
    }
    for row in q6_k_rows(&mut rng, 3) {
        for block in &row {
            dequantize::q6_k(block, &mut a);
            s_q6_k::dequantize_block(block, &mut b);
            same_values(&a, &b, "q6_k");
        }
    }
}

/// Float blocks for the quantizers: random at many scales, exact ties, NaN and infinities at
/// various positions, zeros, subnormals (whose scale's inverse overflows), huge values, ±amax ties.
fn quantizer_inputs<const N: usize>(rng: &mut Rng) -> Vec<[f32; N]> {
    let mut out = Vec::new();
    for _ in 0..200 {
        let x = input_floats(rng, N);
        out.push(to_array(&x));
    }
    // Ties: amax 127 (d = 1 for Q8_0) and halves in between; integers + 0.5 for Q8_K's scale too.
    let mut ties: [f32; N] = core::array::from_fn(|i| (i % 64) as f32 - 31.5);
    ties[0] = 127.0;
    out.push(ties);
    ties[0] = -127.0;
    out.push(ties);
    let first_negative: [f32; N] = core::array::from_fn(|i| if i % 2 == 0 { -3.0 } else { 3.0 });
    out.push(first_negative);
    out.push([0.0; N]);
    out.push([-0.0; N]);
    out.push([1e-42; N]);
    out.push(core::array::from_fn(|i| if i == 5 { 3e-39 } else { 1e-45 }));
    out.push(core::array::from_fn(|i| {
        3e38 * if i % 3 == 0 { -1.0 } else { 0.5 }
    }));
    for special in [f32::NAN, -f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        for at in [0, 1, N / 2, N - 1] {
            let mut x: [f32; N] = to_array(&input_floats(rng, N));
            x[at] = special;
            out.push(x);
        }
    }
    out
}

#[test]
fn q8_0_quantizer_matches_scalar() {
    let mut rng = Rng(0x0808_0808_1234_4321);
    for x in quantizer_inputs::<QK8_0>(&mut rng) {
        assert_eq!(
            q8_0::quantize_block(&x),
            s_q8_0::quantize_block(&x),
            "{x:?}"
        );
    }
}

#[test]
fn q8_k_quantizer_matches_scalar() {
    let mut rng = Rng(0x0808_0808_5678_8765);
    for x in quantizer_inputs::<QK_K>(&mut rng) {
        assert_eq!(
            q8_k::quantize_block(&x),
            s_q8_k::quantize_block(&x),
            "{x:?}"
        );
    }
}

/// Rows of any 32-value block type: random bytes (all nibble and bit patterns, NaN / infinite
/// scales now and then) with each special f16 written over the first two bytes (`d`) and, via
/// `second`, over another f16 field (a min or a sum) of some block.
fn byte_rows<B: bytemuck::Pod>(rng: &mut Rng, n: usize, second: Option<usize>) -> Vec<Vec<B>> {
    let mut out: Vec<Vec<B>> = (0..6)
        .map(|_| (0..n).map(|_| rng.block()).collect())
        .collect();
    for (s, &special) in SPECIAL_F16.iter().enumerate() {
        let mut row: Vec<B> = (0..n).map(|_| rng.block()).collect();
        if let Some(block) = row.get_mut(s % n.max(1)) {
            let bytes = bytemuck::bytes_of_mut(block);
            bytes[..2].copy_from_slice(&special.to_le_bytes());
            if let Some(at) = second {
                let other = SPECIAL_F16[SPECIAL_F16.len() - 1 - s];
                bytes[at..at + 2].copy_from_slice(&other.to_le_bytes());
            }
        }
        out.push(row);
    }
    out
}

fn q8_1_rows(rng: &mut Rng, n: usize) -> Vec<Vec<BlockQ8_1>> {
    let mut r = byte_rows(rng, n, Some(2));
    r.push(
        (0..n)
            .map(|_| s_q8_1::quantize_block(&to_array(&input_floats(rng, QK8_0))))
            .collect(),
    );
    r
}

type VecDot<W, X> = fn(&[W], &[X]) -> f32;

/// Every pair of weight and activation rows, each length, through the NEON and dotprod kernels.
fn check_vec_dots<W: bytemuck::Pod, X: bytemuck::Pod>(
    rng: &mut Rng,
    name: &str,
    weights: impl Fn(&mut Rng, usize) -> Vec<Vec<W>>,
    activations: impl Fn(&mut Rng, usize) -> Vec<Vec<X>>,
    scalar: VecDot<W, X>,
    kernels: [VecDot<W, X>; 2],
) {
    for n in LENGTHS {
        let ws = weights(rng, n);
        let xs = activations(rng, n);
        for (i, w) in ws.iter().enumerate() {
            for x in &xs {
                let expected = scalar(w, x);
                for kernel in kernels {
                    same(
                        kernel(w, x),
                        expected,
                        &std::format!("{name} n={n} row {i}"),
                    );
                }
            }
        }
    }
}

#[test]
fn other_32_value_vec_dots_match_scalar() {
    let mut rng = Rng(0x4155_0101_2020_3030);
    check_vec_dots(
        &mut rng,
        "q4_1",
        |r, n| byte_rows(r, n, Some(2)),
        q8_1_rows,
        s_q4_1::vec_dot,
        [nibbles::vec_dot_q4_1, nibbles::vec_dot_q4_1_dotprod],
    );
    check_vec_dots(
        &mut rng,
        "q5_1",
        |r, n| byte_rows(r, n, Some(2)),
        q8_1_rows,
        s_q5_1::vec_dot,
        [nibbles::vec_dot_q5_1, nibbles::vec_dot_q5_1_dotprod],
    );
    check_vec_dots(
        &mut rng,
        "q5_0",
        |r, n| byte_rows(r, n, None),
        q8_0_row,
        s_q5_0::vec_dot,
        [nibbles::vec_dot_q5_0, nibbles::vec_dot_q5_0_dotprod],
    );
    check_vec_dots(
        &mut rng,
        "iq4_nl",
        |r, n| byte_rows(r, n, None),
        q8_0_row,
        iq4_nl::vec_dot,
        [nibbles::vec_dot_iq4_nl, nibbles::vec_dot_iq4_nl_dotprod],
    );
}

/// A dequantize kernel against its scalar twin on every block of `rows`, strictly.
fn check_dequantize<B: bytemuck::Pod>(
    name: &str,
    rows: Vec<Vec<B>>,
    scalar: fn(&B, &mut [f32; QK8_0]),
    kernel: fn(&B, &mut [f32; QK8_0]),
) {
    let (mut a, mut b) = ([0f32; QK8_0], [0f32; QK8_0]);
    for block in rows.iter().flatten() {
        kernel(block, &mut a);
        scalar(block, &mut b);
        same_values(&a, &b, name);
    }
}

#[test]
fn other_32_value_dequantizers_match_scalar() {
    let mut rng = Rng(0xdede_0101_2020_3030);
    let q4_1 = byte_rows(&mut rng, 8, Some(2));
    check_dequantize("q4_1", q4_1, s_q4_1::dequantize_block, dequantize::q4_1);
    let q5_0 = byte_rows(&mut rng, 8, None);
    check_dequantize("q5_0", q5_0, s_q5_0::dequantize_block, dequantize::q5_0);
    let q5_1 = byte_rows(&mut rng, 8, Some(2));
    check_dequantize("q5_1", q5_1, s_q5_1::dequantize_block, dequantize::q5_1);
    let iq4 = byte_rows(&mut rng, 8, None);
    check_dequantize("iq4_nl", iq4, iq4_nl::dequantize_block, dequantize::iq4_nl);
    // Every IQ4_NL code in both nibbles, so the level table is checked entry by entry.
    let every_code: Vec<BlockIq4Nl> = (0..16u8)
        .map(|c| BlockIq4Nl {
            d: [0x00, 0x3c],
            qs: core::array::from_fn(|j| (j as u8) | (c << 4)),
        })
        .collect();
    check_dequantize(
        "iq4_nl codes",
        std::vec![every_code],
        iq4_nl::dequantize_block,
        dequantize::iq4_nl,
    );
}

#[test]
fn q8_1_quantizer_matches_scalar() {
    let mut rng = Rng(0x0808_0101_5678_8765);
    for x in quantizer_inputs::<QK8_0>(&mut rng) {
        assert_eq!(
            q8_0::quantize_block_q8_1(&x),
            s_q8_1::quantize_block(&x),
            "{x:?}"
        );
    }
}

#[test]
fn q5_k_kernels_match_scalar() {
    let mut rng = Rng(0x5555_0505_1234_9abc);
    let q5_k_rows = |rng: &mut Rng, n: usize| {
        let mut r = rows(
            rng,
            n,
            |rng| s_q5_k::quantize_block(&to_array(&input_floats(rng, QK_K))),
            |b: &mut BlockQ5K, s| {
                b.d = SPECIAL_F16[s].to_le_bytes();
                b.dmin = SPECIAL_F16[SPECIAL_F16.len() - 1 - s].to_le_bytes();
            },
            SPECIAL_F16.len(),
        );
        let mut extreme = BlockQ5K::zeroed();
        (extreme.d, extreme.dmin) = ([0x00, 0x3c], [0x00, 0x3c]);
        (extreme.scales, extreme.qh, extreme.qs) = ([0xff; 12], [0xff; 32], [0xff; 128]);
        r.push(std::vec![extreme; n]);
        r
    };
    for n in LENGTHS {
        let ws = q5_k_rows(&mut rng, n);
        let xs = q8_k_row(&mut rng, n);
        for (i, w) in ws.iter().enumerate() {
            for x in &xs {
                let what = std::format!("n={n} row {i}");
                same(q5_k::vec_dot(w, x), s_q5_k::vec_dot(w, x), &what);
            }
        }
    }
    let (mut a, mut b) = ([0f32; QK_K], [0f32; QK_K]);
    for block in q5_k_rows(&mut rng, 3).iter().flatten() {
        q5_k::dequantize_block(block, &mut a);
        s_q5_k::dequantize_block(block, &mut b);
        same_values(&a, &b, "q5_k");
    }
}

#[test]
fn the_emulated_cpu_reaches_the_kernels_of_its_level() {
    use crate::quant::level::Level;
    use crate::quant::table::Kernels;
    // `cargo xtask aarch64` sets QEMU_CPU; a model with dotprod / i8mm must take those paths.
    let cpu = std::env::var("QEMU_CPU").unwrap_or_default();
    if cpu == "max" {
        assert!(has_dotprod() && has_i8mm(), "-cpu max without dotprod/i8mm");
    }
    if cpu == "cortex-a76" {
        assert!(has_dotprod() && !has_i8mm(), "cortex-a76: dotprod, no i8mm");
    }
    if cpu == "cortex-a72" {
        assert!(!has_dotprod() && !has_i8mm(), "cortex-a72: baseline NEON");
    }
    let tile = BlockQ8_0::vec_dot_2x2_kernel(Level::I8mm);
    assert_eq!(tile.is_some(), has_i8mm(), "Q8_0 2x2 kernel at i8mm");
    #[cfg(feature = "legacy")]
    assert_eq!(
        BlockQ4_0::vec_dot_2x2_kernel(Level::I8mm).is_some(),
        has_i8mm()
    );
    // Below i8mm no level has a 2x2 kernel: matmul runs vec_dot per output.
    assert!(BlockQ8_0::vec_dot_2x2_kernel(Level::Dotprod).is_none());
}
