//! Tests across the legacy and K-quant kernels through the public dispatch API: ggml's
//! `test-quantize-fns` accuracy thresholds, vec_dot against an f64 dot of the dequantized operands,
//! length errors, and hostile inputs (special values, random bytes) that must not panic.
//!
//! Byte-exactness against ggml's C code is checked outside this crate (it needs the C sources).

extern crate std;

use super::{bytes_for, dequantize, quantize, vec_dot, vec_dot_type};
use crate::error::Error;
use crate::ggml_type::GgmlType::{self, *};
use std::vec;
use std::vec::Vec;

/// Every quantized type of the two families.
const QUANTIZED: [GgmlType; 12] = [
    Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K,
];
/// The types with a vec_dot.
const WITH_VEC_DOT: [GgmlType; 13] = [
    F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
];

const TEST_SIZE: usize = 4096;

/// ggml's test data: `0.1 + 2 cos(i + offset)`.
fn cosine_data(offset: f32) -> Vec<f32> {
    (0..TEST_SIZE)
        .map(|i| 0.1 + 2.0 * libm_free_cos(i as f32 + offset))
        .collect()
}

/// `cos` for test data without libm: the std one, available in tests.
fn libm_free_cos(x: f32) -> f32 {
    std::primitive::f32::cos(x)
}

/// ggml's "RMSE": `sqrt(sum of squared differences) / n`.
fn total_error(a: &[f32], b: &[f32]) -> f64 {
    let sum: f64 = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| (f64::from(x) - f64::from(y)).powi(2))
        .sum();
    sum.sqrt() / a.len() as f64
}

fn quantized(t: GgmlType, x: &[f32]) -> Vec<u8> {
    let mut out = vec![0u8; bytes_for(t, x.len()).unwrap()];
    quantize(t, x, &mut out).unwrap();
    out
}

fn dequantized(t: GgmlType, bytes: &[u8], n: usize) -> Vec<f32> {
    let mut out = vec![0f32; n];
    dequantize(t, bytes, &mut out).unwrap();
    out
}

/// Quantize-dequantize error limits of ggml's `test-quantize-fns`.
fn max_total_error(t: GgmlType) -> f64 {
    match t {
        Q2_K => 0.0075,
        Q3_K => 0.0040,
        _ => 0.002,
    }
}

#[test]
fn round_trip_error_within_ggml_thresholds() {
    let x = cosine_data(0.0);
    for t in QUANTIZED.into_iter().chain([F16, BF16, F32]) {
        let y = dequantized(t, &quantized(t, &x), x.len());
        let err = total_error(&x, &y);
        assert!(err < max_total_error(t), "{t}: error {err}");
        // The error must also be real: only F32 is lossless on this data.
        assert_eq!(err == 0.0, t == F32, "{t}: error {err}");
    }
}

#[test]
fn vec_dot_error_within_ggml_thresholds() {
    let w = cosine_data(0.0);
    let x = cosine_data(1.0);
    let exact: f64 = w
        .iter()
        .zip(&x)
        .map(|(&a, &b)| f64::from(a) * f64::from(b))
        .sum();
    for t in WITH_VEC_DOT {
        let vd = vec_dot_type(t).unwrap();
        let got = vec_dot(t, &quantized(t, &w), &quantized(vd, &x)).unwrap();
        let err = (f64::from(got) - exact).abs() / TEST_SIZE as f64;
        let limit = if t == Q2_K { 0.04 } else { 0.02 };
        assert!(err < limit, "{t}: dot error {err}");
    }
}

/// vec_dot must be the dot product of what the two operands dequantize to, up to f32 rounding.
#[test]
fn vec_dot_matches_f64_dot_of_dequantized_operands() {
    let mut rng = Rng(0x5eed);
    for t in WITH_VEC_DOT {
        let vd = vec_dot_type(t).unwrap();
        for _ in 0..4 {
            let w: Vec<f32> = (0..TEST_SIZE).map(|_| rng.signed() * 3.0).collect();
            let x: Vec<f32> = (0..TEST_SIZE).map(|_| rng.signed() + 0.25).collect();
            let (wq, xq) = (quantized(t, &w), quantized(vd, &x));
            let (wd, xd) = (dequantized(t, &wq, w.len()), dequantized(vd, &xq, x.len()));
            let exact: f64 = wd
                .iter()
                .zip(&xd)
                .map(|(&a, &b)| f64::from(a) * f64::from(b))
                .sum();
            let magnitude: f64 = wd
                .iter()
                .zip(&xd)
                .map(|(&a, &b)| (f64::from(a) * f64::from(b)).abs())
                .sum();
            let exact = exact + q8_1_sum_correction(t, &wq, &xq);
            let got = f64::from(vec_dot(t, &wq, &xq).unwrap());
            assert!(
                (got - exact).abs() <= 2e-5 * magnitude,
                "{t}: {got} vs {exact}"
            );
        }
    }
}

/// Q4_1 and Q5_1 dot their minimum `m` with Q8_1's stored `s` (an f16 of `d * sum(q)` taken with
/// the f32 `d`), not with the sum of the dequantized activations: the exact dot of the stored
/// operands differs from the dot of the dequantized ones by `sum over blocks of m * (s - d * sum(q))`.
fn q8_1_sum_correction(t: GgmlType, w: &[u8], x: &[u8]) -> f64 {
    if !matches!(t, Q4_1 | Q5_1) {
        return 0.0;
    }
    let half = |b: &[u8], at: usize| f64::from(super::cast::f16_le([b[at], b[at + 1]]));
    w.chunks_exact(t.block_bytes() as usize)
        .zip(x.chunks_exact(Q8_1.block_bytes() as usize))
        .map(|(wb, xb)| {
            let sum_q: f64 = xb[4..].iter().map(|&q| f64::from(q as i8)).sum();
            half(wb, 2) * (half(xb, 2) - half(xb, 0) * sum_q)
        })
        .sum()
}

#[test]
fn plain_vec_dot_on_awkward_lengths() {
    let mut rng = Rng(7);
    for n in [1usize, 2, 3, 5, 17, 31, 33, 255, 257, 1023] {
        let a: Vec<f32> = (0..n).map(|_| rng.signed()).collect();
        let b: Vec<f32> = (0..n).map(|_| rng.signed()).collect();
        for t in [F32, F16, BF16] {
            let (aq, bq) = (quantized(t, &a), quantized(t, &b));
            let (ad, bd) = (dequantized(t, &aq, n), dequantized(t, &bq, n));
            let exact: f64 = ad
                .iter()
                .zip(&bd)
                .map(|(&x, &y)| f64::from(x) * f64::from(y))
                .sum();
            let got = f64::from(vec_dot(t, &aq, &bq).unwrap());
            // Each product is exact or rounded once, the sum is f64: only the final f32 rounding
            // and one rounding per f32 product remain.
            assert!(
                (got - exact).abs() / n as f64 <= 1e-6,
                "{t} n={n}: {got} vs {exact}"
            );
        }
    }
}

#[test]
fn plain_types_convert_known_values() {
    let cases: [(GgmlType, &[u8], f32); 11] = [
        (I8, &[0x80], -128.0),
        (I16, &[0x00, 0x80], -32768.0),
        (I32, &[0xff, 0xff, 0xff, 0x7f], 2_147_483_648.0), // rounds to nearest f32
        (I64, &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff], -1.0),
        (F64, &0.1f64.to_le_bytes(), 0.1),
        (F64, &1e300f64.to_le_bytes(), f32::INFINITY),
        (F16, &[0x00, 0x3c], 1.0),
        (F16, &[0x01, 0x00], 5.960_464_5e-8), // smallest f16 subnormal, 2^-24
        (BF16, &[0xc0, 0x3f], 1.5),
        (BF16, &[0x80, 0xff], f32::NEG_INFINITY),
        (F32, &(-2.5f32).to_le_bytes(), -2.5),
    ];
    for (t, bytes, want) in cases {
        let mut y = [0f32];
        dequantize(t, bytes, &mut y).unwrap();
        assert_eq!(y[0], want, "{t} {bytes:02x?}");
    }
    // F32 quantize is a bit copy, NaN payload included.
    let nan = f32::from_bits(0x7fa0_0001);
    assert_eq!(quantized(F32, &[nan]), 0x7fa0_0001u32.to_le_bytes());
    // Integer and F64 targets have no quantize.
    for t in [I8, I16, I32, I64, F64] {
        let mut out = vec![0u8; t.block_bytes() as usize];
        assert!(
            matches!(
                quantize(t, &[1.0], &mut out),
                Err(Error::Unsupported { .. })
            ),
            "{t}"
        );
    }
}

#[test]
fn q8_k_known_block_by_hand() {
    // x = i - 128: max by magnitude is x[0] = -128, iscale = -127/-128 = 0.9921875 (exact), so
    // q[i] = nearest_int(0.9921875 * (i - 128)). q[64] = -63.5 -> -64 and q[192] = 63.5 -> 64 (ties
    // to even); q[255] = 126.0078 -> 126. First 16: -127 + k for k < 16, sum = 16*(-127) + 120.
    let x: Vec<f32> = (0..256).map(|i| i as f32 - 128.0).collect();
    let bytes = quantized(Q8_K, &x);
    let block: &super::activation::BlockQ8K = bytemuck::from_bytes(&bytes);
    assert_eq!(block.scale(), 1.0 / 0.9921875);
    assert_eq!((block.qs[0], block.qs[1], block.qs[15]), (-127, -126, -112));
    assert_eq!(
        (block.qs[64], block.qs[192], block.qs[128], block.qs[255]),
        (-64, 64, 0, 126)
    );
    assert_eq!(block.bsum(0), -1912);
    let total: i32 = (0..16).map(|j| i32::from(block.bsum(j))).sum();
    assert_eq!(total, block.qs.iter().map(|&q| i32::from(q)).sum::<i32>());
}

/// Special blocks that must go through every kernel without panicking; zeros must stay zeros.
#[test]
fn special_blocks_do_not_panic() {
    let n = 256;
    let mut blocks: Vec<(&str, Vec<f32>)> = vec![
        ("zeros", vec![0.0; n]),
        ("tiny", (0..n).map(|i| 1e-9 * i as f32).collect()),
        ("huge", (0..n).map(|i| 1e7 * i as f32).collect()),
        (
            "max",
            (0..n)
                .map(|i| if i % 2 == 0 { f32::MAX } else { -f32::MAX })
                .collect(),
        ),
        (
            "subnormal",
            (0..n).map(|i| 1e-40 * (i as f32 - 128.0)).collect(),
        ),
    ];
    let base: Vec<f32> = (0..n).map(|i| libm_free_cos(i as f32)).collect();
    for (name, special) in [
        ("inf", f32::INFINITY),
        ("neg inf", f32::NEG_INFINITY),
        ("nan", f32::NAN),
    ] {
        let mut v = base.clone();
        v[17] = special;
        blocks.push((name, v));
        blocks.push((name, vec![special; n]));
    }
    for (name, x) in &blocks {
        for t in QUANTIZED.into_iter().chain([F32, F16, BF16]) {
            let q = quantized(t, x);
            let y = dequantized(t, &q, n);
            if *name == "zeros" {
                assert!(y.iter().all(|&v| v == 0.0), "{t} {name}");
            }
            if let Some(vd) = vec_dot_type(t) {
                let got = vec_dot(t, &q, &quantized(vd, x)).unwrap();
                if *name == "zeros" {
                    assert_eq!(got, 0.0, "{t} {name}");
                }
            }
        }
    }
    // ggml stores an all-zero Q6_K block as zero bytes, with d = +0.
    assert!(quantized(Q6_K, &vec![0.0; n]).iter().all(|&b| b == 0));
}

/// Arbitrary bytes (NaN/inf scales, out-of-range fields) must dequantize and dot without panicking.
#[test]
fn random_bytes_do_not_panic() {
    let mut rng = Rng(99);
    for t in QUANTIZED
        .into_iter()
        .chain([F32, F16, BF16, F64, I8, I16, I32, I64])
    {
        let blocks = 4;
        let bytes: Vec<u8> = (0..blocks * t.block_bytes() as usize)
            .map(|_| rng.byte())
            .collect();
        let n = blocks * t.block_size() as usize;
        dequantized(t, &bytes, n);
        if let Some(vd) = vec_dot_type(t) {
            let x: Vec<u8> = (0..bytes_for(vd, n).unwrap()).map(|_| rng.byte()).collect();
            vec_dot(t, &bytes, &x).unwrap();
        }
    }
}

#[test]
fn partial_blocks_and_mismatched_lengths_are_errors() {
    for t in QUANTIZED {
        let bb = t.block_bytes() as usize;
        let bs = t.block_size() as usize;
        let partial_bytes = vec![0u8; bb + 1];
        let mut out = vec![0f32; bs];
        assert!(matches!(
            dequantize(t, &partial_bytes, &mut out),
            Err(Error::PartialBlock { .. })
        ));
        let mut wrong_out = vec![0f32; bs + 1];
        assert!(matches!(
            dequantize(t, &vec![0u8; bb], &mut wrong_out),
            Err(Error::LengthMismatch { .. })
        ));
        let mut dst = vec![0u8; bb];
        assert!(matches!(
            quantize(t, &vec![0f32; bs - 1], &mut dst),
            Err(Error::PartialBlock { .. })
        ));
        assert!(matches!(
            quantize(t, &vec![0f32; bs], &mut vec![0u8; bb + 1]),
            Err(Error::LengthMismatch { .. })
        ));
        if let Some(vd) = vec_dot_type(t) {
            let x = vec![0u8; vd.block_bytes() as usize * (bs / vd.block_size() as usize) + 1];
            assert!(matches!(
                vec_dot(t, &vec![0u8; bb], &x),
                Err(Error::LengthMismatch { .. })
            ));
        }
    }
    assert!(matches!(
        vec_dot(F16, &[0; 4], &[0; 6]),
        Err(Error::LengthMismatch { .. })
    ));
    assert!(matches!(
        vec_dot(Q8_1, &[0; 36], &[0; 36]),
        Err(Error::Unsupported { .. })
    ));
    assert!(matches!(
        vec_dot(Q8_K, &[0; 292], &[0; 292]),
        Err(Error::Unsupported { .. })
    ));
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn byte(&mut self) -> u8 {
        (self.next() >> 56) as u8
    }

    /// Uniform in [-1, 1).
    fn signed(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config::with_cases(64))]

    /// Any f32 values (NaN, infinities, subnormals, extremes) quantize, dequantize and dot without
    /// panicking, in every type.
    #[test]
    fn arbitrary_floats_never_panic(x in proptest::collection::vec(proptest::num::f32::ANY, 256)) {
        for t in QUANTIZED.into_iter().chain([F32, F16, BF16]) {
            let q = quantized(t, &x);
            dequantized(t, &q, x.len());
            if let Some(vd) = vec_dot_type(t) {
                vec_dot(t, &q, &quantized(vd, &x)).unwrap();
            }
        }
    }
}
