//! `miniquant matvec --level LEVEL --threads N` and `MINIQUANT_LEVEL`: every level this CPU has and
//! every thread count write the same bytes, equal to the core's scalar matvec; a level that is
//! unknown or missing on this CPU is a usage error (exit 2).

use crate::common;

use common::{assert_no_panic, f32_bytes, f32_values, miniquant, scratch_dir, scratch_file};
use miniquant::quant::{self, level, Level};
use miniquant::GgmlType;
use miniquant_std::writer::GgufWriter;
use std::process::Command;

const TYPES: [GgmlType; 6] = [
    GgmlType::Q8_0,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q4_K,
    GgmlType::Q6_K,
    GgmlType::F16,
];

fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            ((i as f32 * 0.71 + seed as f32).sin() * 3.0) + if i % 53 == 0 { 20.0 } else { 0.0 }
        })
        .collect()
}

#[test]
fn every_level_and_thread_count_writes_the_scalar_bytes() {
    let (rows, cols) = (37usize, 512usize);
    let mut w = GgufWriter::new();
    let mut weights = Vec::new();
    for t in TYPES {
        let mut q = vec![0u8; quant::bytes_for(t, rows * cols).unwrap()];
        quant::quantize(t, &values(rows * cols, t.code()), &mut q).unwrap();
        w.tensor(t.name(), t, &[cols as u64, rows as u64], q.clone());
        weights.push(q);
    }
    let gguf = scratch_file("levels.gguf", &w.to_bytes());
    let x = values(cols, 99);
    let x_path = scratch_file("levels-x.f32", &f32_bytes(&x));
    for (t, q) in TYPES.into_iter().zip(&weights) {
        let mut scratch = vec![0u8; quant::matvec::matvec_scratch_bytes(t, cols).unwrap()];
        let mut want = vec![0f32; rows];
        quant::matvec::matvec_at(Level::Scalar, t, q, rows, cols, &x, &mut scratch, &mut want)
            .unwrap();
        let levels = level::available().map(|l| l.name()).chain(["auto"]);
        for name in levels {
            for threads in ["1", "2", "3"] {
                let y_path = scratch_dir().join(format!("levels-y-{t}-{name}-{threads}.f32"));
                let run = miniquant(&[
                    "matvec",
                    &gguf,
                    t.name(),
                    &x_path,
                    "--level",
                    name,
                    "--threads",
                    threads,
                    "-o",
                    y_path.to_str().unwrap(),
                ]);
                assert_no_panic(&run);
                assert_eq!(run.code, 0, "{t} {name} {threads}: {}", run.stderr);
                let got = f32_values(&std::fs::read(&y_path).unwrap());
                let same = got.len() == want.len()
                    && got
                        .iter()
                        .zip(&want)
                        .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(
                    same,
                    "{t} at {name} on {threads} threads differs from scalar"
                );
            }
        }
    }
}

#[test]
fn unknown_or_missing_levels_are_usage_errors() {
    let gguf = scratch_file("levels-tiny.gguf", &{
        let mut w = GgufWriter::new();
        w.tensor("w", GgmlType::F32, &[4, 1], f32_bytes(&[1.0; 4]));
        w.to_bytes()
    });
    let x_path = scratch_file("levels-tiny-x.f32", &f32_bytes(&[1.0; 4]));
    let run = miniquant(&["matvec", &gguf, "w", &x_path, "--level", "turbo"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("unknown kernel level"),
        "{}",
        run.stderr
    );
    let missing = Level::ALL.into_iter().find(|l| !l.is_available());
    if let Some(missing) = missing {
        let run = miniquant(&["matvec", &gguf, "w", &x_path, "--level", missing.name()]);
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert!(run.stderr.contains("not available"), "{}", run.stderr);
    }
    let run = miniquant(&["matvec", &gguf, "w", &x_path, "--threads", "0"]);
    assert_eq!(run.code, 2, "{}", run.stderr);

    // The environment variable, for every command.
    for (value, code) in [("turbo", 2), ("scalar", 0), ("auto", 0), ("", 0)] {
        let output = Command::new(env!("CARGO_BIN_EXE_miniquant"))
            .args(["inspect", &gguf])
            .env("MINIQUANT_LEVEL", value)
            .output()
            .unwrap();
        assert_eq!(
            output.status.code(),
            Some(code),
            "MINIQUANT_LEVEL={value:?}"
        );
        if code == 2 {
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(stderr.starts_with("error: MINIQUANT_LEVEL: "), "{stderr}");
        }
    }
}
