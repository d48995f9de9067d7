//! Accuracy backstop in the manner of ggml's `tests/test-quantize-fns.cpp`: on `0.1 + 2cos(i)`
//! (n = 4096) each type's quantize→dequantize error and vec_dot error (against an f64 dot with
//! `0.1 + 2cos(i + 1)`) stay under ggml's thresholds. ggml's "RMSE" is `sqrt(Σ d²) / n`, and the dot
//! error is `|dot - exact| / n`. ggml's own figures are printed beside ours.
//!
//! Thresholds are those of upstream `test-quantize-fns.cpp` (the llama-cpp-python sdist does not
//! ship ggml's tests): quantization 0.002, 2-bit (Q2_K, IQ2_S) 0.0075, 3-bit (Q3_K, IQ3_S) 0.004,
//! IQ3_XXS 0.005, ternary (TQ1_0, TQ2_0, Q2_0) 0.01, binary (Q1_0) 0.025, NVFP4 0.003; dot 0.02,
//! low-bit (Q2_K, IQ2_*, IQ3_*) 0.04, ternary 0.15, binary 0.40, NVFP4 0.03. As there, the
//! quantize→dequantize result must also agree with ggml's reference to 1e-4 (same metric).

use miniquant::quant::{dequantize, quantize, vec_dot, vec_dot_type};
use miniquant::GgmlType;
use miniquant_tests::data::cosine_data;
use miniquant_tests::ggml;
use miniquant_tests::report::Report;

const N: usize = 4096;
const MAX_REFERENCE_ERROR: f64 = 1e-4;

fn max_quantization_error(t: GgmlType) -> f64 {
    use GgmlType::*;
    match t {
        Q1_0 => 0.025,
        TQ1_0 | TQ2_0 | Q2_0 => 0.01,
        Q2_K | IQ2_S => 0.0075,
        Q3_K | IQ3_S => 0.0040,
        IQ3_XXS => 0.0050,
        NVFP4 => 0.0030,
        _ => 0.002,
    }
}

fn max_dot_error(t: GgmlType) -> f64 {
    use GgmlType::*;
    match t {
        Q2_K | IQ2_XS | IQ2_XXS | IQ3_XXS | IQ3_S | IQ2_S => 0.04,
        Q1_0 => 0.40,
        TQ1_0 | TQ2_0 | Q2_0 => 0.15,
        NVFP4 => 0.03,
        _ => 0.02,
    }
}

/// ggml's metric: `sqrt(Σ (a-b)²) / n`, summed in f64.
fn rmse_over_n(a: &[f32], b: &[f32]) -> f64 {
    let sum: f64 = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| (f64::from(x) - f64::from(y)).powi(2))
        .sum();
    sum.sqrt() / a.len() as f64
}

fn exact_dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| f64::from(x) * f64::from(y))
        .sum()
}

/// Our quantize→dequantize of `x` in `t`.
fn our_round_trip(t: GgmlType, x: &[f32]) -> Result<(Vec<u8>, Vec<f32>), miniquant::Error> {
    let mut q = vec![0u8; miniquant::quant::bytes_for(t, x.len())?];
    quantize(t, x, &mut q)?;
    let mut y = vec![0f32; x.len()];
    dequantize(t, &q, &mut y)?;
    Ok((q, y))
}

/// Our dot error on the test data, or the error our kernels returned.
fn our_dot_error(
    t: GgmlType,
    w: &[u8],
    y: &[f32],
    exact: f64,
) -> Result<Option<f64>, miniquant::Error> {
    let Some(vd) = vec_dot_type(t) else {
        return Ok(None);
    };
    let mut yq = vec![0u8; miniquant::quant::bytes_for(vd, y.len())?];
    quantize(vd, y, &mut yq)?;
    let got = vec_dot(t, w, &yq)?;
    Ok(Some((f64::from(got) - exact).abs() / N as f64))
}

fn ggml_figures(t: GgmlType, x: &[f32], y: &[f32], exact: f64) -> Option<(Vec<f32>, Option<f64>)> {
    let q = ggml::ggml_quantize_ref(t, x)?;
    let back = ggml::ggml_dequantize(t, &q)?;
    let dot = match (ggml::ggml_vec_dot_type(t), ggml::has_vec_dot(t)) {
        (Some(vd), true) => {
            let yq = ggml::ggml_quantize_activation(vd, y);
            ggml::ggml_vec_dot(t, &q, &yq).map(|d| (f64::from(d) - exact).abs() / N as f64)
        }
        _ => None,
    };
    Some((back, dot))
}

fn show(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_string(), |v| format!("{v:.6}"))
}

#[test]
fn quantization_and_dot_errors_within_ggml_thresholds() {
    let x = cosine_data(N, 0.0);
    let y = cosine_data(N, 1.0);
    let exact = exact_dot(&x, &y);
    let mut report = Report::new(
        "error table on 0.1+2cos(i), n=4096: quant err (ggml) / max | vs ggml ref | dot err (ggml) / max",
    );
    for t in GgmlType::ALL {
        let Some((ggml_back, ggml_dot)) = ggml_figures(t, &x, &y, exact) else {
            report.skip(
                t,
                "ggml has no reference quantize + dequantize pair for this type",
            );
            continue;
        };
        let ggml_quant = rmse_over_n(&x, &ggml_back);
        let required = ggml::REQUIRED_QUANTIZERS.contains(&t);
        let (w, ours_back) = match our_round_trip(t, &x) {
            Ok(r) => r,
            Err(e) if required => {
                report.fail(t, format!("miniquant returned an error: {e}"));
                continue;
            }
            Err(e) => {
                report.skip(t, format!("optional, miniquant: {e}"));
                continue;
            }
        };
        let quant = rmse_over_n(&x, &ours_back);
        let vs_reference = rmse_over_n(&ours_back, &ggml_back);
        let dot = match our_dot_error(t, &w, &y, exact) {
            Ok(dot) => dot,
            Err(e) => {
                report.fail(t, format!("miniquant vec_dot path returned an error: {e}"));
                continue;
            }
        };
        let (max_quant, max_dot) = (max_quantization_error(t), max_dot_error(t));
        // Written as `error < max` so that a NaN error fails, as in ggml's test.
        let passed = quant < max_quant
            && vs_reference < MAX_REFERENCE_ERROR
            && dot.is_none_or(|d| d < max_dot);
        report.check(
            t,
            passed,
            format!(
                "quant {quant:.6} ({ggml_quant:.6}) / {max_quant} | {vs_reference:.2e} | dot {} ({}) / {max_dot}",
                show(dot),
                show(ggml_dot)
            ),
            None,
        );
    }
    report.finish();
}

/// ggml's `test_vec_dot_f32`: the F32 dot on awkward lengths is within 1e-4 · n of the exact dot.
#[test]
fn f32_vec_dot_on_awkward_lengths() {
    let mut report = Report::new("F32 vec_dot on awkward lengths: |dot - exact| / n < 1e-4");
    for n in [
        1usize, 2, 3, 5, 7, 8, 15, 16, 17, 31, 33, 63, 67, 127, 129, 193, 255, 1023,
    ] {
        let a = cosine_data(n, 0.0);
        let b = cosine_data(n, 1.0);
        let as_bytes = |v: &[f32]| v.iter().flat_map(|f| f.to_le_bytes()).collect::<Vec<u8>>();
        let exact = exact_dot(&a, &b);
        let label = format!("F32 n={n}");
        match vec_dot(GgmlType::F32, &as_bytes(&a), &as_bytes(&b)) {
            Err(e) => report.check_labelled(
                label,
                false,
                format!("miniquant returned an error: {e}"),
                None,
            ),
            Ok(got) => {
                let error = (f64::from(got) - exact).abs() / n as f64;
                report.check_labelled(
                    label,
                    error < 1e-4,
                    format!("error {error:.2e} (dot {got}, exact {exact})"),
                    None,
                );
            }
        }
    }
    report.finish();
}

/// A check of the oracle and of the thresholds, not of miniquant: ggml's own reference meets
/// them on the same data (as ggml's test asserts for its CPU kernels).
#[test]
fn harness_ggml_itself_meets_the_thresholds() {
    let x = cosine_data(N, 0.0);
    let y = cosine_data(N, 1.0);
    let exact = exact_dot(&x, &y);
    let mut report =
        Report::new("ggml's own errors on 0.1+2cos(i), n=4096: quant / max | dot / max");
    for t in GgmlType::ALL {
        let Some((back, dot)) = ggml_figures(t, &x, &y, exact) else {
            report.skip(
                t,
                "ggml has no reference quantize + dequantize pair for this type",
            );
            continue;
        };
        let quant = rmse_over_n(&x, &back);
        let (max_quant, max_dot) = (max_quantization_error(t), max_dot_error(t));
        report.check(
            t,
            quant < max_quant && dot.is_none_or(|d| d < max_dot),
            format!(
                "quant {quant:.6} / {max_quant} | dot {} / {max_dot}",
                show(dot)
            ),
            None,
        );
    }
    report.finish();
}
