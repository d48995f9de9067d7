//! Family-level tests of the IQ kernels through the public dispatch API: quantize -> dequantize
//! error and vec_dot against an f64 dot under ggml's test-quantize-fns thresholds, length errors,
//! and hostile blocks.

extern crate std;

use std::vec;
use std::vec::Vec;

use super::test_support::{activation_for, cos_data, dot_f64, ggml_rmse, Rng};
use crate::error::{Error, Op};
use crate::ggml_type::GgmlType;
use crate::quant::{dequantize, quantize, vec_dot};

const TYPES: [GgmlType; 9] = [
    GgmlType::IQ2_XXS,
    GgmlType::IQ2_XS,
    GgmlType::IQ2_S,
    GgmlType::IQ3_XXS,
    GgmlType::IQ3_S,
    GgmlType::IQ1_S,
    GgmlType::IQ1_M,
    GgmlType::IQ4_NL,
    GgmlType::IQ4_XS,
];

/// Random blocks of `t` whose scales are a finite f16 (0.01), so every value is finite.
fn random_blocks(t: GgmlType, blocks: usize, rng: &mut Rng) -> Vec<u8> {
    let size = t.block_bytes() as usize;
    let mut bytes = rng.bytes(blocks * size);
    let scale = half::f16::from_f32(0.01).to_bits();
    for block in bytes.chunks_exact_mut(size) {
        if t == GgmlType::IQ1_M {
            // The f16 scale lives in the top nibbles of the four u16 scale words (bytes 48..56).
            for (k, word) in block[48..56].chunks_exact_mut(2).enumerate() {
                let nibble = ((scale >> (4 * k)) & 0xf) as u8;
                word[1] = (word[1] & 0x0f) | (nibble << 4);
            }
        } else {
            block[..2].copy_from_slice(&scale.to_le_bytes());
        }
    }
    bytes
}

fn dequantized(t: GgmlType, bytes: &[u8]) -> Vec<f32> {
    let n = bytes.len() / t.block_bytes() as usize * t.block_size() as usize;
    let mut out = vec![0.0; n];
    dequantize(t, bytes, &mut out).unwrap();
    out
}

#[test]
fn iq4_round_trip_error_is_under_ggml_threshold() {
    // test-quantize-fns: data 0.1 + 2 cos(i + offset), n = 4096, "RMSE" sqrt(sum d^2) / n < 0.002.
    let x = cos_data(4096, 0.0);
    for t in [GgmlType::IQ4_NL, GgmlType::IQ4_XS] {
        let mut q = vec![0u8; crate::quant::bytes_for(t, x.len()).unwrap()];
        quantize(t, &x, &mut q).unwrap();
        let err = ggml_rmse(&x, &dequantized(t, &q));
        std::println!("{t}: quantize -> dequantize error {err:.6}");
        assert!(err < 0.002, "{t}: {err}");
        // It is a real quantizer, not the identity: the error is not zero.
        assert!(err > 1e-6, "{t}: {err}");
    }
}

#[test]
fn vec_dot_matches_an_f64_dot_of_the_operands() {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let n = 4096;
    let activations = cos_data(n, 1.0);
    for t in TYPES {
        let w = if t == GgmlType::IQ4_NL || t == GgmlType::IQ4_XS {
            let mut q = vec![0u8; crate::quant::bytes_for(t, n).unwrap()];
            quantize(t, &cos_data(n, 0.0), &mut q).unwrap();
            q
        } else {
            random_blocks(t, n / 256, &mut rng)
        };
        let wf = dequantized(t, &w);
        let (x, xf) = activation_for(t, &activations);
        let got = f64::from(vec_dot(t, &w, &x).unwrap());
        let want = dot_f64(&wf, &xf);
        let magnitude: f64 = wf
            .iter()
            .zip(&xf)
            .map(|(&a, &b)| f64::from(a * b).abs())
            .sum();
        // ggml's bound (|diff| / n < 0.02, 0.04 for the 2- and 3-bit grids) allows for activation
        // quantization; here both sides use the same operands, so only float rounding differs.
        assert!(
            (got - want).abs() / n as f64 <= 0.02,
            "{t}: {got} vs {want}"
        );
        assert!(
            (got - want).abs() <= 1e-5 * magnitude + 1e-9,
            "{t}: {got} vs {want} (sum |w x| {magnitude})"
        );
        assert!(magnitude > 1.0, "{t}: degenerate test data");
    }
}

#[test]
fn only_iq4_can_be_quantized() {
    let x = [0.5f32; 256];
    for t in TYPES {
        let mut q = vec![0u8; t.block_bytes() as usize * (256 / t.block_size() as usize)];
        let result = quantize(t, &x, &mut q);
        if t == GgmlType::IQ4_NL || t == GgmlType::IQ4_XS {
            assert!(result.is_ok(), "{t}");
        } else {
            assert_eq!(
                result,
                Err(Error::Unsupported {
                    ggml_type: t,
                    op: Op::Quantize
                })
            );
        }
    }
}

#[test]
fn partial_blocks_and_mismatched_lengths_are_errors() {
    for t in TYPES {
        let size = t.block_bytes() as usize;
        let qk = t.block_size() as usize;
        let bytes = vec![0u8; 2 * size];
        let mut out = vec![0.0f32; 2 * qk];
        // Through the public API (which checks first) and through the family dispatcher directly.
        assert!(matches!(
            dequantize(t, &bytes[..size + 1], &mut out),
            Err(Error::PartialBlock { .. })
        ));
        assert!(crate::quant::dequantize(t, &bytes[..size + 1], &mut out).is_err());
        assert!(crate::quant::dequantize(t, &bytes, &mut out[..qk]).is_err());
        assert!(crate::quant::quantize(t, &out[..qk + 1], &mut vec![0u8; 2 * size]).is_err());
        let x_block = if t == GgmlType::IQ4_NL { 34 } else { 292 };
        let x = vec![0u8; 2 * x_block];
        assert!(crate::quant::vec_dot(t, &bytes, &x[..x_block]).is_err());
        assert!(crate::quant::vec_dot(t, &bytes[..size - 1], &x).is_err());
        assert!(crate::quant::vec_dot(t, &bytes, &x).is_ok());
    }
}

#[test]
fn hostile_blocks_do_not_panic() {
    let mut rng = Rng(7);
    for t in TYPES {
        let size = t.block_bytes() as usize;
        let qk = t.block_size() as usize;
        let x_block = if t == GgmlType::IQ4_NL { 34 } else { 292 };
        // All ones bytes: NaN f16 scales, every index and sign bit set; random bytes; zeros.
        for fill in [
            vec![0xffu8; 3 * size],
            rng.bytes(3 * size),
            vec![0u8; 3 * size],
        ] {
            let values = dequantized(t, &fill);
            assert_eq!(values.len(), 3 * qk);
            // One activation block per weight block (Q8_0 for IQ4_NL, Q8_K for the rest).
            let x = vec![0xffu8; 3 * x_block];
            assert!(vec_dot(t, &fill, &x).is_ok());
        }
    }
    for t in [GgmlType::IQ4_NL, GgmlType::IQ4_XS] {
        let size = t.block_bytes() as usize;
        for special in [
            0.0,
            -0.0,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MAX,
            1e-40,
        ] {
            let mut x = cos_data(256, 0.0);
            x[3] = special;
            let mut q = vec![0u8; 256 / t.block_size() as usize * size];
            quantize(t, &x, &mut q).unwrap();
            let _ = dequantized(t, &q);
        }
        // An all-zero row quantizes to zero scales and dequantizes to zeros.
        let mut q = vec![0xaau8; 256 / t.block_size() as usize * size];
        quantize(t, &[0.0; 256], &mut q).unwrap();
        assert!(dequantized(t, &q).iter().all(|&v| v == 0.0));
    }
}
