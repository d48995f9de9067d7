//! Every flag does what its words say or is a usage error (exit 2): `inspect`'s selections in text
//! and JSON, `--key --raw`, one `--type` and one `--threads` parser for every command, `extract`'s
//! globs, "did you mean" for a wrong name, and `requantize`'s account of its fallback types.

use crate::common;

use common::{assert_no_panic, miniquant, scratch_dir, scratch_file, Run};
use miniquant::gguf::Scalar;
use miniquant::GgmlType;
use miniquant_std::writer::GgufWriter;
use miniquant_std::{Array, Index};
use serde_json::Value as Json;

/// A small model: keys of several types, three "blk" tensors and two others.
fn model(name: &str) -> String {
    let mut w = GgufWriter::new();
    w.kv("general.architecture", "llama");
    w.kv("llama.context_length", Scalar::U32(8192));
    w.kv("f.small", Scalar::F32(1e-6));
    w.kv("f.half", Scalar::F64(0.5));
    w.kv(
        "tokenizer.ggml.tokens",
        Array::from_iter(["<s>", "a\nb", "ü"]),
    );
    w.kv("tokenizer.ggml.scores", Array::F32(vec![0.0, -1.5, 2.25]));
    w.tensor("token_embd.weight", GgmlType::F32, &[64, 2], vec![0; 512]);
    w.tensor("blk.0.attn_q.weight", GgmlType::F32, &[64, 2], vec![0; 512]);
    w.tensor("blk.0.attn_k.weight", GgmlType::F32, &[64, 2], vec![0; 512]);
    w.tensor("blk.1.attn_q.weight", GgmlType::F32, &[64, 2], vec![0; 512]);
    w.tensor("output_norm.weight", GgmlType::F32, &[64], vec![0; 256]);
    scratch_file(name, &w.to_bytes())
}

fn json(run: &Run) -> Json {
    assert_eq!(run.code, 0, "{}", run.stderr);
    serde_json::from_slice(&run.stdout).expect("stdout is one JSON value")
}

fn tensor_names(j: &Json) -> Vec<&str> {
    j["tensors"]
        .as_array()
        .expect("a tensors array")
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect()
}

/// A usage error: exit 2 and clap's message naming `flag`.
fn assert_usage_error(args: &[&str], flag: &str) {
    let run = miniquant(args);
    assert_no_panic(&run);
    assert_eq!(run.code, 2, "{args:?} was accepted: {}", run.stdout_text());
    assert!(
        run.stdout.is_empty(),
        "{args:?} printed {}",
        run.stdout_text()
    );
    assert!(
        run.stderr.starts_with("error: ") && run.stderr.contains(flag),
        "{args:?}: {}",
        run.stderr
    );
}

#[test]
fn inspect_json_honours_tensor_key_and_part_flags() {
    let path = model("flags-json.gguf");
    let j = json(&miniquant(&[
        "inspect", "--json", "--tensor", "blk.0.*", &path,
    ]));
    assert_eq!(
        tensor_names(&j),
        ["blk.0.attn_q.weight", "blk.0.attn_k.weight"]
    );
    assert!(
        j.get("metadata").is_none(),
        "a filter shows only what it selects: {j}"
    );

    let j = json(&miniquant(&[
        "inspect",
        "--json",
        "--key",
        "llama.context_length",
        &path,
    ]));
    assert_eq!(
        j,
        serde_json::json!({"key": "llama.context_length", "type": "u32", "value": 8192})
    );

    let j = json(&miniquant(&["inspect", "--json", "--no-tensors", &path]));
    assert!(j.get("tensors").is_none(), "{j}");
    assert_eq!(j["metadata"].as_array().map(Vec::len), Some(6));
    let j = json(&miniquant(&["inspect", "--json", "--no-metadata", &path]));
    assert!(j.get("metadata").is_none(), "{j}");
    assert_eq!(tensor_names(&j).len(), 5);
    // Everything still agrees with the library's index of the same file.
    let index = Index::from_bytes(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(j["data_offset"], index.data_offset());
}

#[test]
fn contradictory_inspect_flags_are_usage_errors() {
    let path = model("flags-usage.gguf");
    for (args, flag) in [
        (&["--tensor", "blk.*", "--no-tensors"][..], "--no-tensors"),
        (
            &["--key", "general.architecture", "--tensor", "blk.*"],
            "--tensor",
        ),
        (
            &["--key", "general.architecture", "--no-metadata"],
            "--no-metadata",
        ),
        (
            &["--key", "general.architecture", "--no-tensors"],
            "--no-tensors",
        ),
        (&["--raw"], "--key"),
        (
            &["--key", "general.architecture", "--raw", "--json"],
            "--json",
        ),
        (
            &["--json-format", "gguf-dump", "--tensor", "blk.*"],
            "--tensor",
        ),
        (
            &[
                "--json-format",
                "gguf-dump",
                "--key",
                "general.architecture",
            ],
            "--key",
        ),
        (
            &["--json-format", "gguf-dump", "--no-metadata"],
            "--no-metadata",
        ),
    ] {
        let mut all = vec!["inspect"];
        all.extend_from_slice(args);
        all.push(&path);
        assert_usage_error(&all, flag);
    }
}

#[test]
fn inspect_tensor_filter_shows_only_what_it_selects() {
    let path = model("flags-filter.gguf");
    let run = miniquant(&["inspect", "--tensor", "blk.0.attn_q.weight", &path]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let text = run.stdout_text();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("--- tensors"), "{text}");
    assert!(
        lines[1].starts_with("blk.0.attn_q.weight  F32  [2, 64]"),
        "{text}"
    );
    assert_eq!(lines[2], "--- totals");
    assert_eq!(lines.len(), 5, "{text}");
    assert!(!text.contains("general.architecture"), "{text}");

    // --no-metadata keeps the header block and the whole directory.
    let run = miniquant(&["inspect", "--no-metadata", &path]);
    let text = run.stdout_text();
    assert!(text.starts_with("version 3"), "{text}");
    assert!(!text.contains("--- metadata"), "{text}");
    assert_eq!(text.matches(".weight").count(), 5, "{text}");

    // A glob that matches nothing fails; a near miss of a plain name gets a suggestion.
    let run = miniquant(&["inspect", "--tensor", "x*", &path]);
    assert_no_panic(&run);
    assert_eq!(run.code, 1, "{}", run.stdout_text());
    assert_eq!(
        run.stderr,
        format!("error: no tensor matches \"x*\" in {path:?}\n")
    );
    let run = miniquant(&[
        "inspect",
        "--json",
        "--tensor",
        "blk.0.attn_q.weigth",
        &path,
    ]);
    assert_eq!(run.code, 1);
    assert!(run.stdout.is_empty());
    assert_eq!(
        run.stderr,
        format!(
            "error: no tensor named \"blk.0.attn_q.weigth\" in {path:?}; did you mean \"blk.0.attn_q.weight\"?\n"
        )
    );
}

#[test]
fn inspect_key_raw_prints_bare_values_for_scripts() {
    let path = model("flags-raw.gguf");
    for (key, plain, raw) in [
        ("llama.context_length", "8192u32\n", "8192\n"),
        ("f.small", "1e-6f32\n", "1e-6\n"),
        ("f.half", "0.5f64\n", "0.5\n"),
        ("general.architecture", "llama\n", "llama\n"),
        (
            "tokenizer.ggml.tokens",
            "<s>\na\\nb\nü\n",
            "<s>\na\\nb\nü\n",
        ),
        (
            "tokenizer.ggml.scores",
            "0f32\n-1.5f32\n2.25f32\n",
            "0\n-1.5\n2.25\n",
        ),
    ] {
        let run = miniquant(&["inspect", "--key", key, &path]);
        assert_eq!((run.code, run.stdout_text().as_str()), (0, plain), "{key}");
        let run = miniquant(&["inspect", "--key", key, "--raw", &path]);
        assert_eq!((run.code, run.stdout_text().as_str()), (0, raw), "{key}");
    }
    let run = miniquant(&["inspect", "--key", "llama.context_lenght", &path]);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr,
        format!(
            "error: no metadata key \"llama.context_lenght\" in {path:?}; did you mean \"llama.context_length\"?\n"
        )
    );
}

#[test]
fn type_and_threads_are_parsed_once_for_every_command() {
    let path = model("flags-type.gguf");
    let out = scratch_dir().join("flags-type-out.gguf");
    let x = scratch_file("flags-type-x.f32", &[0; 64 * 4]);
    let q = scratch_dir().join("flags-type-q.bin");
    let (out, q) = (out.to_str().unwrap(), q.to_str().unwrap());
    // The recipe explanation wherever --type is taken.
    for args in [
        &["requantize", &path, out, "--type", "Q4_K_M"][..],
        &["quantize-raw", "--type", "Q4_K_M", &x, q],
        &["dequant-raw", "--type", "Q4_K_M", &x, q],
    ] {
        let run = miniquant(args);
        assert_eq!(run.code, 2, "{args:?}");
        assert!(
            run.stderr.contains(
                "Q4_K_M is a llama-quantize recipe (a mix of types chosen per tensor), not a ggml \
                 type; the nearest type is Q4_K."
            ),
            "{args:?}: {}",
            run.stderr
        );
    }
    let run = miniquant(&["requantize", &path, out, "--type", "iq2_xxs"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains(
            "IQ2_XXS cannot be used here: ggml quantizes it only with an importance matrix"
        ),
        "{}",
        run.stderr
    );
    // One --threads message everywhere.
    let first_line = |args: &[&str]| {
        let run = miniquant(args);
        assert_eq!(run.code, 2, "{args:?}");
        run.stderr.lines().next().unwrap_or_default().to_owned()
    };
    for bad in ["0", "100000", "two"] {
        let requantize =
            first_line(&["requantize", &path, out, "--type", "q8_0", "--threads", bad]);
        let matvec = first_line(&["matvec", &path, "blk.0.attn_q.weight", &x, "--threads", bad]);
        let validate = first_line(&["validate", &path, "--data", "--threads", bad]);
        assert_eq!(requantize, matvec);
        assert_eq!(requantize, validate);
        assert!(
            requantize.ends_with("is not a thread count: give a whole number from 1 to 1024"),
            "{requantize}"
        );
    }
}

#[test]
fn a_wrong_tensor_name_gets_a_suggestion_in_every_command() {
    let path = model("flags-mean.gguf");
    let x = scratch_file("flags-mean-x.f32", &[0; 64 * 4]);
    let expected = format!(
        "error: no tensor named \"blk.0.attn_q.weigth\" in {path:?}; did you mean \"blk.0.attn_q.weight\"?\n"
    );
    for args in [
        &["dequant", &path, "blk.0.attn_q.weigth", "-o", "-"][..],
        &["matvec", &path, "blk.0.attn_q.weigth", &x, "-o", "-"],
    ] {
        let run = miniquant(args);
        assert_eq!(
            (run.code, run.stderr.as_str()),
            (1, expected.as_str()),
            "{args:?}"
        );
    }
    // Far from every name: no suggestion.
    let run = miniquant(&["dequant", &path, "zzz", "-o", "-"]);
    assert_eq!(
        run.stderr,
        format!("error: no tensor named \"zzz\" in {path:?}\n")
    );
}

#[test]
fn extract_takes_inspects_globs_and_says_what_a_selection_drops() {
    let path = model("flags-extract.gguf");
    let out = scratch_dir().join("flags-extract-out.gguf");
    let out_text = out.to_str().unwrap();
    let _ = std::fs::remove_file(&out);
    let run = miniquant(&["extract", &path, out_text, "--tensor", "blk.0.*"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let kept = Index::from_bytes(&std::fs::read(&out).unwrap()).unwrap();
    let names: Vec<&str> = kept.tensors().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["blk.0.attn_q.weight", "blk.0.attn_k.weight"]);
    assert_eq!(kept.metadata().len(), 6);
    assert!(!run.stderr.contains("warning"), "{}", run.stderr);

    // Dropping general.architecture is warned about (the output is still written).
    let run = miniquant(&["extract", &path, out_text, "--key", "tokenizer.ggml.*"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stderr.lines().next(),
        Some(
            "warning: the --key selection leaves out general.architecture: llama.cpp cannot load \
             the output (add --key general.architecture)"
        )
    );
    let kept = Index::from_bytes(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(kept.metadata().len(), 2);

    // A pattern that matches nothing is an error, and nothing is written.
    std::fs::remove_file(&out).unwrap();
    for (args, message) in [
        (
            &["--tensor", "blk.9.*"][..],
            format!("error: no tensor matches \"blk.9.*\" in {path:?}\n"),
        ),
        (
            &["--tensor", "blk.0.*", "--tensor", "output_norm.wieght"],
            format!(
                "error: no tensor named \"output_norm.wieght\" in {path:?}; did you mean \"output_norm.weight\"?\n"
            ),
        ),
        (
            &["--key", "nothing.*"],
            format!("error: no key matches \"nothing.*\" in {path:?}\n"),
        ),
        (
            &["--key", "general.architectre"],
            format!(
                "error: no metadata key \"general.architectre\" in {path:?}; did you mean \"general.architecture\"?\n"
            ),
        ),
    ] {
        let mut all = vec!["extract", &path, out_text];
        all.extend_from_slice(args);
        let run = miniquant(&all);
        assert_eq!((run.code, run.stderr.as_str()), (1, message.as_str()));
        assert!(!out.exists());
    }
}

#[test]
fn requantize_names_each_fallback_type_and_why() {
    let mut w = GgufWriter::new();
    w.kv("general.architecture", "llama");
    // Rows of 576 values: not whole Q4_K blocks (256), whole Q5_0 blocks (32): ggml's fallback.
    for i in 0..3 {
        w.tensor(
            &format!("blk.{i}.ffn_up.weight"),
            GgmlType::F32,
            &[576, 2],
            vec![0; 576 * 8],
        );
    }
    // Rows of 48 values: whole blocks of neither: F16.
    w.tensor(
        "blk.0.attn_k.weight",
        GgmlType::F32,
        &[48, 2],
        vec![0; 48 * 8],
    );
    w.tensor(
        "blk.0.attn_q.weight",
        GgmlType::F32,
        &[512, 2],
        vec![0; 512 * 8],
    );
    w.tensor(
        "output_norm.weight",
        GgmlType::F32,
        &[512],
        vec![0; 512 * 4],
    );
    let path = scratch_file("flags-fallback.gguf", &w.to_bytes());
    let out = scratch_dir().join("flags-fallback-out.gguf");
    let run = miniquant(&["requantize", &path, out.to_str().unwrap(), "--type", "q4_k"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines = run.stderr_lines();
    assert!(
        lines[0]
            .contains(": 1 tensors to Q4_K, 1 to F16 (fallback), 3 to Q5_0 (fallback), 1 copied;"),
        "{}",
        run.stderr
    );
    assert_eq!(
        lines[1..],
        [
            "  1 tensors to F16: rows of 48 values are not a multiple of 256 (Q4_K's block size) \
             nor of 32 (Q5_0's, ggml's fallback for Q4_K)",
            "  3 tensors to Q5_0: rows of 576 values are not a multiple of 256 (Q4_K's block size)",
        ]
    );
    let written = Index::from_bytes(&std::fs::read(&out).unwrap()).unwrap();
    let types: Vec<GgmlType> = written.tensors().iter().map(|t| t.ggml_type).collect();
    use GgmlType::*;
    assert_eq!(types, [Q5_0, Q5_0, Q5_0, F16, Q4_K, F32]);
}
