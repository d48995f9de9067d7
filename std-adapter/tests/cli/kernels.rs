//! `dequant`, `quantize-raw` and `matvec` through the binary.
//!
//! The kernels live in the core crate and answer `Unsupported` until they are written. Each round
//! trip therefore asks the core first whether the type's kernel runs: if it does, the command's
//! output is checked (exactly for F32, within the quantization error for Q8_0); if it does not, the
//! command must fail cleanly with exit 1, the kernel's error on one line, and no output file left.

use crate::common;

use common::{
    assert_no_panic, f32_bytes, f32_values, miniquant, miniquant_in, scratch_dir, scratch_file,
};
use miniquant::error::Op;
use miniquant::{quant, Error, GgmlType};
use miniquant_std::writer::GgufWriter;

fn quantize_runs(t: GgmlType) -> bool {
    let n = t.block_size() as usize;
    quant::quantize(t, &vec![0.5; n], &mut vec![0; t.block_bytes() as usize]).is_ok()
}

fn dequantize_runs(t: GgmlType) -> bool {
    let n = t.block_size() as usize;
    quant::dequantize(t, &vec![0; t.block_bytes() as usize], &mut vec![0.0; n]).is_ok()
}

/// Deterministic values in [-2, 2), exact in f32.
fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n as u32)
        .map(|i| ((i.wrapping_mul(2654435761) ^ seed) >> 8) as f32 / (1u32 << 22) as f32 - 2.0)
        .collect()
}

fn assert_unsupported(run: &common::Run, op: Op, t: GgmlType, leftover: &std::path::Path) {
    assert_no_panic(run);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let expected = Error::Unsupported { ggml_type: t, op };
    assert_eq!(run.stderr, format!("error: {expected}\n"));
    assert!(!leftover.exists(), "{} left behind", leftover.display());
}

#[test]
fn f32_round_trip_is_exact() {
    let mut input = values(96, 1);
    input[5] = f32::NAN;
    let in_path = scratch_file("rt-f32-in.f32", &f32_bytes(&input));
    let out_path = scratch_dir().join("rt-f32-out.bin");
    let _ = std::fs::remove_file(&out_path);
    let run = miniquant(&[
        "quantize-raw",
        "--type",
        "f32",
        "--allow-non-finite",
        &in_path,
        out_path.to_str().unwrap(),
    ]);
    if quantize_runs(GgmlType::F32) {
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert_eq!(std::fs::read(&out_path).unwrap(), f32_bytes(&input));
    } else {
        assert_unsupported(&run, Op::Quantize, GgmlType::F32, &out_path);
    }

    let mut w = GgufWriter::new();
    w.tensor("w", GgmlType::F32, &[32, 3], f32_bytes(&input));
    let gguf = scratch_file("rt-f32.gguf", &w.to_bytes());
    let out_path = scratch_dir().join("rt-f32-dequant.f32");
    let _ = std::fs::remove_file(&out_path);
    let run = miniquant(&["dequant", &gguf, "w", "-o", out_path.to_str().unwrap()]);
    if dequantize_runs(GgmlType::F32) {
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert_eq!(std::fs::read(&out_path).unwrap(), f32_bytes(&input));
        let stats = run.stderr.trim_end();
        assert!(
            stats.starts_with("w  F32  [3, 32]  96 elements  min "),
            "{stats}"
        );
        assert!(stats.contains("  NaN 1  -> "), "{stats}");
    } else {
        assert_unsupported(&run, Op::Dequantize, GgmlType::F32, &out_path);
    }
}

#[test]
fn q8_0_round_trip_stays_within_the_quantization_error() {
    let input = values(4 * 32, 2);
    let in_path = scratch_file("rt-q8-in.f32", &f32_bytes(&input));
    let blocks_path = scratch_dir().join("rt-q8.blocks");
    let _ = std::fs::remove_file(&blocks_path);
    let run = miniquant(&[
        "quantize-raw",
        "--type",
        "q8_0",
        &in_path,
        blocks_path.to_str().unwrap(),
    ]);
    if !quantize_runs(GgmlType::Q8_0) {
        assert_unsupported(&run, Op::Quantize, GgmlType::Q8_0, &blocks_path);
        return;
    }
    assert_eq!(run.code, 0, "{}", run.stderr);
    let blocks = std::fs::read(&blocks_path).unwrap();
    assert_eq!(blocks.len(), 4 * 34);
    assert_eq!(
        run.stderr,
        format!(
            "128 f32 values -> 4 Q8_0 blocks, 136 bytes -> \"{}\"\n",
            blocks_path.display()
        )
    );

    let mut w = GgufWriter::new();
    w.tensor("q", GgmlType::Q8_0, &[64, 2], blocks);
    let gguf = scratch_file("rt-q8.gguf", &w.to_bytes());
    // Default output name: <TENSOR>.f32 in the current directory.
    let dir = scratch_dir().join("dequant-default");
    std::fs::create_dir_all(&dir).unwrap();
    let _ = std::fs::remove_file(dir.join("q.f32"));
    let run = miniquant_in(&dir, &["dequant", &gguf, "q"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let back = f32_values(&std::fs::read(dir.join("q.f32")).unwrap());
    assert_eq!(back.len(), input.len());
    for (block_in, block_out) in input.chunks(32).zip(back.chunks(32)) {
        let amax = block_in.iter().fold(0f32, |m, x| m.max(x.abs()));
        // Half a quantization step, plus the f16 rounding of the scale (relative 2^-11 of amax).
        let tolerance = amax / 127.0 * 0.5 + amax / 2048.0;
        for (x, y) in block_in.iter().zip(block_out) {
            assert!(
                (x - y).abs() <= tolerance,
                "{x} -> {y} (tolerance {tolerance})"
            );
        }
    }
    // `-o -` writes the same bytes to stdout.
    let run = miniquant(&["dequant", &gguf, "q", "-o", "-"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(f32_values(&run.stdout), back);
}

#[test]
fn quantize_raw_rejects_partial_blocks_and_bad_input() {
    let path33 = scratch_file("q-33.f32", &f32_bytes(&values(33, 3)));
    let run = miniquant(&["quantize-raw", "--type", "Q8_0", &path33, "unused.bin"]);
    assert_no_panic(&run);
    assert_eq!(run.code, 1);
    assert_eq!(run.stderr, format!("error: \"{path33}\" holds 33 f32 values, not a whole number of Q8_0 blocks (32 values each)\n"));

    let path5 = scratch_file("q-5.f32", &[0; 5]);
    let run = miniquant(&["quantize-raw", "--type", "f32", &path5, "unused.bin"]);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr,
        format!("error: \"{path5}\" is 5 bytes, not a whole number of f32 values (4 bytes each)\n")
    );

    // A wrong type is a usage error (exit 2) that lists the valid types.
    let run = miniquant(&["quantize-raw", "--type", "Q9_9", &path33, "unused.bin"]);
    assert_no_panic(&run);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.starts_with(
            "error: invalid value 'Q9_9' for '--type <TYPE>': unknown ggml type \"Q9_9\". Valid types (case-insensitive): F32, F16, Q4_0,"
        ),
        "{}",
        run.stderr
    );
    // llama.cpp's file-type names are explained, not just refused.
    let run = miniquant(&["quantize-raw", "--type", "Q4_K_M", &path33, "unused.bin"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains(
            "Q4_K_M is a llama-quantize recipe (a mix of types chosen per tensor), not a ggml type; the nearest type is Q4_K."
        ),
        "{}",
        run.stderr
    );
    assert!(!scratch_dir().join("unused.bin").exists());

    // NaN and inf are refused with their position, unless asked for.
    let mut input = values(64, 4);
    input[37] = f32::INFINITY;
    let path_inf = scratch_file("q-inf.f32", &f32_bytes(&input));
    let run = miniquant(&["quantize-raw", "--type", "q8_0", &path_inf, "unused.bin"]);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr,
        format!(
            "error: \"{path_inf}\" holds inf at value 37 (byte 148); quantizing it would give a block of NaN or inf (--allow-non-finite to do it anyway)\n"
        )
    );
    assert!(!scratch_dir().join("unused.bin").exists());
    let out = scratch_dir().join("q-inf.q8_0");
    let run = miniquant(&[
        "quantize-raw",
        "--type",
        "Q8_0",
        "--allow-non-finite",
        &path_inf,
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(std::fs::read(&out).unwrap().len(), 2 * 34);
}

#[test]
fn dequant_of_a_missing_tensor_fails() {
    let gguf = scratch_file("dq-missing.gguf", &miniquant_std::example::tiny_gguf());
    let run = miniquant(&["dequant", &gguf, "nope"]);
    assert_no_panic(&run);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr,
        format!("error: no tensor named \"nope\" in \"{gguf}\"\n")
    );
}

#[test]
fn matvec_f32_matches_a_float64_reference() {
    let (rows, cols) = (3usize, 32usize);
    let w_values = values(rows * cols, 4);
    let x = values(cols, 5);
    let mut w = GgufWriter::new();
    w.tensor(
        "w",
        GgmlType::F32,
        &[cols as u64, rows as u64],
        f32_bytes(&w_values),
    );
    w.tensor("norm", GgmlType::F32, &[cols as u64], f32_bytes(&x));
    let gguf = scratch_file("mv.gguf", &w.to_bytes());
    let x_path = scratch_file("mv-x.f32", &f32_bytes(&x));
    let y_path = scratch_dir().join("mv-y.f32");
    let _ = std::fs::remove_file(&y_path);
    let run = miniquant(&[
        "matvec",
        &gguf,
        "w",
        &x_path,
        "-o",
        y_path.to_str().unwrap(),
    ]);
    assert_no_panic(&run);
    let available = quantize_runs(GgmlType::F32)
        && quant::vec_dot(GgmlType::F32, &f32_bytes(&x), &f32_bytes(&x)).is_ok();
    if available {
        assert_eq!(run.code, 0, "{}", run.stderr);
        let y = f32_values(&std::fs::read(&y_path).unwrap());
        assert_eq!(y.len(), rows);
        for (r, got) in y.iter().enumerate() {
            let row = &w_values[r * cols..(r + 1) * cols];
            let want: f64 = row
                .iter()
                .zip(&x)
                .map(|(a, b)| f64::from(*a) * f64::from(*b))
                .sum();
            assert!(
                (f64::from(*got) - want).abs() <= 1e-5 * (1.0 + want.abs()),
                "row {r}: {got} vs {want}"
            );
        }
    } else {
        assert_eq!(run.code, 1);
        assert!(
            run.stderr.starts_with("error: ") && run.stderr.contains(" is not available for F32"),
            "{}",
            run.stderr
        );
        assert_eq!(run.stderr.lines().count(), 1);
        assert!(!y_path.exists());
    }

    // Shape errors come before any kernel runs.
    let run = miniquant(&["matvec", &gguf, "norm", &x_path]);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr,
        "error: tensor \"norm\" has shape [32]: matvec needs a 2-D tensor [rows, cols] with no empty dimension\n"
    );
    let short_x = scratch_file("mv-x-short.f32", &f32_bytes(&x[..31]));
    let run = miniquant(&["matvec", &gguf, "w", &short_x]);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr,
        format!("error: \"{short_x}\" holds 31 f32 values but tensor \"w\" of shape [3, 32] has 32 columns\n")
    );
}
