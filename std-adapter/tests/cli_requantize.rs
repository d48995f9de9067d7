//! `miniquant requantize` as a process: usage errors, and a run killed mid-way leaves no output
//! file (the output is written under a temporary name and renamed only when complete).

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{miniquant, scratch_dir, scratch_file};
use miniquant::GgmlType;
use miniquant_std::writer::GgufWriter;

#[test]
fn an_unknown_type_is_a_usage_error_listing_the_valid_ones() {
    let run = miniquant(&["requantize", "in.gguf", "out.gguf", "--type", "q9_9"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    for name in ["Q4_0", "Q8_0", "Q4_K", "Q6_K"] {
        assert!(run.stderr.contains(name), "{}", run.stderr);
    }
}

#[test]
fn type_names_are_case_insensitive() {
    let mut w = GgufWriter::new();
    w.kv("general.architecture", "llama");
    let values: Vec<u8> = (0..64 * 4)
        .flat_map(|i| (i as f32 * 0.1).to_le_bytes())
        .collect();
    w.tensor("blk.0.ffn_up.weight", GgmlType::F32, &[64, 4], values);
    let input = scratch_file("case-in.gguf", &w.to_bytes());
    for ty in ["q8_0", "Q8_0", "q8_0"] {
        let out = scratch_dir().join(format!("case-{ty}.gguf"));
        let run = miniquant(&["requantize", &input, out.to_str().unwrap(), "--type", ty]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let file = miniquant_std::GgufFile::open(&out).unwrap();
        assert_eq!(file.index().tensors()[0].ggml_type, GgmlType::Q8_0);
    }
}

#[test]
fn a_killed_run_leaves_no_output_file() {
    // 64 MiB of F32 weights to Q4_K: long enough to be caught mid-way.
    let mut w = GgufWriter::new();
    w.kv("general.architecture", "llama");
    for i in 0..16 {
        let data: Vec<u8> = (0..1024 * 1024u32)
            .flat_map(|j| ((j.wrapping_mul(2_654_435_761) >> 8) as f32 / 1e6).to_le_bytes())
            .collect();
        w.tensor(
            &format!("blk.{i}.ffn_up.weight"),
            GgmlType::F32,
            &[1024, 1024],
            data,
        );
    }
    let input = scratch_file("kill-in.gguf", &w.to_bytes());
    let output = scratch_dir().join("kill-out.gguf");
    let partial = scratch_dir().join(".kill-out.gguf.partial");
    let _ = std::fs::remove_file(&output);
    let mut child = Command::new(env!("CARGO_BIN_EXE_miniquant"))
        .args([
            "requantize",
            &input,
            output.to_str().unwrap(),
            "--type",
            "q4_k",
        ])
        .spawn()
        .unwrap();
    // Wait until the partial file has data (the header is written, tensors are under way).
    let start = Instant::now();
    while std::fs::metadata(&partial).map_or(true, |m| m.len() < 1 << 20) {
        assert!(
            child.try_wait().unwrap().is_none(),
            "finished before it could be interrupted"
        );
        assert!(start.elapsed() < Duration::from_secs(120), "no progress");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!output.exists(), "a killed run left {}", output.display());
    let _ = std::fs::remove_file(&partial);
}
