//! Family-level tests of the misc kernels through the public dispatch API: quantize -> dequantize
//! error and vec_dot against an f64 dot under ggml's test-quantize-fns thresholds, length errors,
//! and hostile blocks.

extern crate std;

use std::vec;
use std::vec::Vec;

use crate::error::Error;
use crate::ggml_type::GgmlType;
use crate::quant::iq::test_support::{activation_for, cos_data, dot_f64, ggml_rmse, Rng};
use crate::quant::{bytes_for, dequantize, quantize, vec_dot};

/// Each type with ggml's test-quantize-fns bounds: quantize -> dequantize "RMSE" (ternary and
/// Q2_0 0.01, binary 0.025, FP4 0.003) and |vec_dot - f64 dot| / n (ternary 0.15, binary 0.40,
/// FP4 0.03). Q2_0's quantizer never uses its fourth level (2d, above max |x|), so it is ternary
/// in effect and gets the ternary dot bound.
const TYPES: [(GgmlType, f64, f64); 6] = [
    (GgmlType::TQ1_0, 0.01, 0.15),
    (GgmlType::TQ2_0, 0.01, 0.15),
    (GgmlType::MXFP4, 0.003, 0.03),
    (GgmlType::NVFP4, 0.003, 0.03),
    (GgmlType::Q1_0, 0.025, 0.40),
    (GgmlType::Q2_0, 0.01, 0.15),
];

fn quantized(t: GgmlType, x: &[f32]) -> Vec<u8> {
    let mut q = vec![0u8; bytes_for(t, x.len()).unwrap()];
    quantize(t, x, &mut q).unwrap();
    q
}

fn dequantized(t: GgmlType, bytes: &[u8]) -> Vec<f32> {
    let n = bytes.len() / t.block_bytes() as usize * t.block_size() as usize;
    let mut out = vec![0.0; n];
    dequantize(t, bytes, &mut out).unwrap();
    out
}

fn uses_q8_k(t: GgmlType) -> bool {
    crate::quant::vec_dot_type(t) == Some(GgmlType::Q8_K)
}

#[test]
fn round_trip_error_is_under_ggml_threshold() {
    let x = cos_data(4096, 0.0);
    for (t, max_error, _) in TYPES {
        let err = ggml_rmse(&x, &dequantized(t, &quantized(t, &x)));
        std::println!("{t}: quantize -> dequantize error {err:.6}");
        assert!(err < max_error, "{t}: {err}");
        assert!(err > 1e-6, "{t}: {err}");
    }
}

#[test]
fn vec_dot_matches_an_f64_dot_of_the_operands() {
    let n = 4096;
    let activations = cos_data(n, 1.0);
    for (t, _, max_dot_error) in TYPES {
        let w = quantized(t, &cos_data(n, 0.0));
        let wf = dequantized(t, &w);
        let (x, xf) = activation_for(t, &activations);
        let got = f64::from(vec_dot(t, &w, &x).unwrap());
        let want = dot_f64(&wf, &xf);
        let magnitude: f64 = wf
            .iter()
            .zip(&xf)
            .map(|(&a, &b)| f64::from(a * b).abs())
            .sum();
        assert!(
            (got - want).abs() / n as f64 <= max_dot_error,
            "{t}: {got} vs {want}"
        );
        // Same operands on both sides: only float rounding may differ.
        assert!(
            (got - want).abs() <= 1e-5 * magnitude + 1e-9,
            "{t}: {got} vs {want}"
        );
        assert!(magnitude > 1.0, "{t}: degenerate test data");
        // And against the unquantized data, within ggml's end-to-end bound.
        let exact = dot_f64(&cos_data(n, 0.0), &activations);
        std::println!(
            "{t}: dot error vs exact {:.6}",
            (got - exact).abs() / n as f64
        );
        assert!(
            (got - exact).abs() / n as f64 <= max_dot_error,
            "{t}: {got} vs exact {exact}"
        );
    }
}

#[test]
fn partial_blocks_and_mismatched_lengths_are_errors() {
    for (t, _, _) in TYPES {
        let size = t.block_bytes() as usize;
        let qk = t.block_size() as usize;
        let bytes = vec![0u8; 2 * size];
        let mut out = vec![0.0f32; 2 * qk];
        assert!(matches!(
            dequantize(t, &bytes[..size + 1], &mut out),
            Err(Error::PartialBlock { .. })
        ));
        assert!(crate::quant::dequantize(t, &bytes[..size + 1], &mut out).is_err());
        assert!(crate::quant::dequantize(t, &bytes, &mut out[..qk]).is_err());
        assert!(quantize(t, &out[..qk - 1], &mut vec![0u8; size]).is_err());
        assert!(crate::quant::quantize(t, &out[..qk + 1], &mut vec![0u8; 2 * size]).is_err());
        let x_bytes = if uses_q8_k(t) {
            2 * 292
        } else {
            2 * qk / 32 * 34
        };
        let x = vec![0u8; x_bytes];
        assert!(crate::quant::vec_dot(t, &bytes, &x[..x_bytes - 34]).is_err());
        assert!(crate::quant::vec_dot(t, &bytes[..size], &x).is_err());
        assert!(vec_dot(t, &bytes, &x).is_ok());
    }
}

#[test]
fn hostile_blocks_do_not_panic() {
    let mut rng = Rng(11);
    for (t, _, _) in TYPES {
        let size = t.block_bytes() as usize;
        let qk = t.block_size() as usize;
        let x_bytes = if uses_q8_k(t) {
            3 * 292
        } else {
            3 * qk / 32 * 34
        };
        for fill in [
            vec![0xffu8; 3 * size],
            rng.bytes(3 * size),
            vec![0u8; 3 * size],
        ] {
            assert_eq!(dequantized(t, &fill).len(), 3 * qk);
            assert!(vec_dot(t, &fill, &vec![0xffu8; x_bytes]).is_ok());
            assert!(vec_dot(t, &fill, &rng.bytes(x_bytes)).is_ok());
        }
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
            x[200] = special;
            let _ = dequantized(t, &quantized(t, &x));
        }
        assert!(dequantized(t, &quantized(t, &[f32::NAN; 256])).len() == 256);
        // A zero row dequantizes to zeros (Q1_0: d = 0, so ±0).
        assert!(
            dequantized(t, &quantized(t, &[0.0; 256]))
                .iter()
                .all(|&v| v == 0.0),
            "{t}"
        );
    }
}
