//! `miniquant run` on the real SmolLM2 file (skipped with a reason when the cache lacks it) and its
//! errors on files and arguments it cannot run.

use crate::common;

use std::path::Path;

use common::{miniquant, scratch_dir};
use miniquant::GgmlType;

fn smollm2() -> Option<String> {
    common::cached_model("SmolLM2-135M-Instruct.Q4_1.gguf").map(|p| p.to_str().unwrap().to_owned())
}

/// The `counting` prompt of tests/data/llama-cpp/prompts.txt: its ids and llama.cpp's greedy
/// continuation.
fn counting() -> (String, String) {
    let list = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/llama-cpp/prompts.txt"),
    )
    .unwrap();
    let line = list.lines().find(|l| l.starts_with("counting ")).unwrap();
    let fields: Vec<&str> = line.split('|').map(str::trim).collect();
    (fields[2].to_owned(), fields[3].to_owned())
}

#[test]
fn text_prompt_streams_llama_cpp_s_continuation_and_its_ids() {
    let Some(model) = smollm2() else { return };
    let run = miniquant(&[
        "run",
        &model,
        "-p",
        "1, 2, 3, 4, 5,",
        "-n",
        "12",
        "--tokens",
        "--threads",
        "2",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let text = run.stdout_text();
    let lines: Vec<&str> = text.lines().collect();
    let (prompt_ids, continuation) = counting();
    let first_12: Vec<&str> = continuation.split(' ').take(12).collect();
    assert_eq!(lines, [" 6, 7, 8, 9,", &prompt_ids, &first_12.join(" ")]);
}

#[test]
fn ids_threads_levels_and_batches_give_the_same_output() {
    let Some(model) = smollm2() else { return };
    let (ids, _) = counting();
    let run = |extra: &[&str]| {
        let mut args = vec!["run", &model, "--prompt-ids", &ids, "-n", "6"];
        args.extend_from_slice(extra);
        let run = miniquant(&args);
        assert_eq!(run.code, 0, "{extra:?}: {}", run.stderr);
        run.stdout
    };
    let want = run(&[]);
    assert_eq!(String::from_utf8_lossy(&want), " 6, 7,\n");
    for extra in [
        &["--threads", "1", "--level", "scalar", "--batch", "1"][..],
        &["--threads", "3", "--batch", "5"],
        // A batch beyond the prompt is the prompt: no buffer sized by the flag alone.
        &["--batch", "1000000000000"],
    ] {
        assert_eq!(run(extra), want, "{extra:?}");
    }
}

#[test]
fn temperature_draws_repeat_with_their_seed_and_zero_is_greedy() {
    let Some(model) = smollm2() else { return };
    let (ids, _) = counting();
    let run = |extra: &[&str]| {
        let mut args = vec!["run", &model, "--prompt-ids", &ids, "-n", "8", "--tokens"];
        args.extend_from_slice(extra);
        let run = miniquant(&args);
        assert_eq!(run.code, 0, "{extra:?}: {}", run.stderr);
        let stdout = String::from_utf8(run.stdout).unwrap();
        let generated = stdout.lines().last().unwrap_or_default().to_owned();
        (generated, run.stderr)
    };
    let (greedy, _) = run(&[]);
    assert_eq!(run(&["--temp", "0", "--seed", "5"]).0, greedy);
    assert_eq!(run(&["--temp", "1.5", "--top-k", "1"]).0, greedy);
    let hot = ["--temp", "1.5", "--top-k", "0"];
    let (a, a_err) = run(&[&hot[..], &["--seed", "7"]].concat());
    assert!(a_err.is_empty(), "{a_err}");
    assert_eq!(
        run(&[&hot[..], &["--seed", "7", "--threads", "1"]].concat()).0,
        a
    );
    assert_ne!(a, greedy, "a hot draw of 8 tokens took the greedy ones");
    assert_ne!(run(&[&hot[..], &["--seed", "8"]].concat()).0, a);
    // Without --seed the seed is on stderr, and passing it repeats the run.
    let (b, b_err) = run(&hot);
    let seed = b_err
        .trim()
        .strip_prefix("sampling with --seed ")
        .unwrap_or_else(|| panic!("{b_err}"));
    assert_eq!(run(&[&hot[..], &["--seed", seed]].concat()).0, b);
    for bad in ["-1", "nan", "inf", "warm"] {
        let flag = format!("--temp={bad}");
        let r = miniquant(&["run", &model, "--prompt-ids", &ids, &flag]);
        assert_eq!(r.code, 2, "--temp {bad}: {}", r.stderr);
        assert!(r.stderr.contains("--temp"), "{}", r.stderr);
    }
}

#[test]
fn chat_wraps_the_prompt_in_chatml() {
    let Some(model) = smollm2() else { return };
    let chat = miniquant(&[
        "run",
        &model,
        "--chat",
        "-p",
        "What is the capital of France?",
        "-n",
        "40",
        "--tokens",
    ]);
    assert_eq!(chat.code, 0, "{}", chat.stderr);
    // The `chat` prompt of tests/data/llama-cpp/prompts.txt lacks the template's last newline
    // (the script's shell dropped it), which llama.cpp then generates first: our ids are its
    // ids and 198 ("\n"), and our continuation is its continuation after that 198, up to its
    // end-of-turn token 2 (where run stops).
    let list = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/llama-cpp/prompts.txt"),
    )
    .unwrap();
    let line = list.lines().find(|l| l.starts_with("chat ")).unwrap();
    let fields: Vec<&str> = line.split('|').map(str::trim).collect();
    let text = chat.stdout_text();
    let lines: Vec<&str> = text.lines().collect();
    let prompt = format!("{} 198", fields[2]);
    assert_eq!(lines[..2], ["The capital of France is Paris.", &prompt]);
    assert!(
        fields[3].starts_with(&format!("198 {} 2 ", lines[2])),
        "{text}"
    );
}

#[test]
fn chat_wraps_the_prompt_in_gemmas_turns_without_a_template_key() {
    // Gemma 3 270M's file has no tokenizer.chat_template: its turn tokens choose the template.
    let Some(model) = common::cached_model("gemma-3-270m-q4_k_m.gguf") else {
        return;
    };
    let model = model.to_str().unwrap();
    let question = "What is the capital of France?";
    let chat = miniquant(&[
        "run", model, "--chat", "-p", question, "-n", "32", "--tokens",
    ]);
    assert_eq!(chat.code, 0, "{}", chat.stderr);
    // As for SmolLM2: llama.cpp's prompt lacks the last "\n" (107), which it generates first.
    let list = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/llama-cpp-gemma3/prompts.txt"),
    )
    .unwrap();
    let line = list.lines().find(|l| l.starts_with("chat ")).unwrap();
    let fields: Vec<&str> = line.split('|').map(str::trim).collect();
    let text = chat.stdout_text();
    let lines: Vec<&str> = text.lines().collect();
    let n = lines.len();
    assert!(n >= 3, "{text}");
    assert_eq!(lines[n - 2], format!("{} 107", fields[2]));
    assert_eq!(lines[n - 1].split(' ').count(), 32, "{text}");
    assert!(
        fields[3].starts_with(&format!("107 {} ", lines[n - 1])),
        "{text}"
    );
}

#[test]
fn logits_file_is_written_as_npy_or_raw() {
    let Some(model) = smollm2() else { return };
    let dir = scratch_dir();
    let (npy, raw) = (dir.join("run-logits.npy"), dir.join("run-logits.f32"));
    for path in [&npy, &raw] {
        let _ = std::fs::remove_file(path);
        let run = miniquant(&[
            "run",
            &model,
            "--prompt-ids",
            "1 2 3",
            "-n",
            "0",
            "--logits",
            path.to_str().unwrap(),
        ]);
        assert_eq!(run.code, 0, "{}", run.stderr);
    }
    let (npy, raw) = (std::fs::read(npy).unwrap(), std::fs::read(raw).unwrap());
    assert_eq!(raw.len(), 49152 * 4);
    assert!(npy.starts_with(b"\x93NUMPY"));
    assert!(npy.ends_with(&raw));
}

/// Packing the weights (the default where the level has packed kernels) changes no bit of the
/// logits of a generated token's step (a one-column product of every matrix) after a prompt of
/// 20 tokens (a 20-column product: the packed matmul at avx512vnni, the tiles at amx), at every
/// level with packed kernels (amx where this CPU has it and Linux grants it) and on one and two
/// threads: SmolLM2's Q4_1 matrices, and Gemma 3's 81 Q5_0 and 9 Q8_0 ones (its K-quant
/// matrices and its 180 MB head stay plain).
#[test]
fn packed_and_plain_weights_give_the_same_logits() {
    if let Some(model) = smollm2() {
        same_logits_packed_and_plain(&model, GgmlType::Q4_1, 49152, "211 matrices packed");
    }
    if let Some(model) = gemma3() {
        same_logits_packed_and_plain(&model, GgmlType::Q5_0, 262144, "90 matrices packed");
    }
}

fn gemma3() -> Option<String> {
    common::cached_model("gemma-3-270m-q4_k_m.gguf").map(|p| p.to_str().unwrap().to_owned())
}

/// [`packed_and_plain_weights_give_the_same_logits`] for one model, at the levels with a packed
/// kernel for `packed`, with as many matrices packed as `packed_note` says.
fn same_logits_packed_and_plain(model: &str, packed: GgmlType, vocab: usize, packed_note: &str) {
    // So that `available()` below lists `amx` where the CPU has it (the binary asks itself).
    miniquant_std::amx::request();
    let dir = scratch_dir();
    let prompt: Vec<String> = (1..=20).map(|i| i.to_string()).collect();
    let prompt = prompt.join(" ");
    let logits = |extra: &[&str]| {
        let path = dir.join("run-logits-pack.f32");
        let _ = std::fs::remove_file(&path);
        let mut args = vec![
            "run",
            model,
            "--prompt-ids",
            &prompt,
            "-n",
            "3",
            "--logits",
            path.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let run = miniquant(&args);
        assert_eq!(run.code, 0, "{extra:?}: {}", run.stderr);
        std::fs::read(&path).unwrap()
    };
    let want = logits(&["--no-pack", "--threads", "1"]);
    assert_eq!(want.len(), vocab * 4);
    // The levels with packed kernels for the type (the others pack nothing: the plain run above
    // covers them, and the level tests hold every level to the scalar bits).
    let levels: Vec<_> = miniquant::quant::level::available()
        .filter(|&l| miniquant::quant::packed::has_packed_kernel(l, packed))
        .collect();
    eprintln!("{packed} packed logits checked at {levels:?}");
    for level in levels {
        // Packed indeed: every matrix of the type (`bench` says how many).
        let bench = miniquant(&[
            "bench",
            model,
            "-p",
            "0",
            "-n",
            "1",
            "-r",
            "1",
            "--level",
            level.name(),
        ]);
        assert_eq!(bench.code, 0, "{}", bench.stderr);
        assert!(
            bench.stdout_text().contains(packed_note),
            "{}",
            bench.stdout_text()
        );
        for threads in ["1", "2"] {
            let extra = ["--level", level.name(), "--threads", threads];
            assert!(
                logits(&extra) == want,
                "{extra:?} differs from the plain run"
            );
        }
    }
}

#[test]
fn bad_tokens_files_and_arguments_are_errors() {
    let tiny = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/tiny.gguf");
    let tiny = tiny.to_str().unwrap();
    let run = miniquant(&["run", tiny, "--prompt-ids", "1"]);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr_lines(),
        ["error: architecture \"tiny\" is not supported (supported: llama, gemma3)"]
    );
    let run = miniquant(&["run", tiny, "--prompt-ids", "1 x"]);
    assert_eq!(run.code, 2);
    assert_eq!(
        run.stderr_lines(),
        ["error: --prompt-ids: \"x\" is not a token id"]
    );
    let run = miniquant(&["run", tiny]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let Some(model) = smollm2() else { return };
    let run = miniquant(&["run", &model, "--prompt-ids", "1 49152"]);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr_lines(),
        ["error: token 49152 is not below the vocabulary size 49152"]
    );
    let run = miniquant(&["run", &model, "--prompt-ids", " , "]);
    assert_eq!(run.code, 2);
    assert_eq!(run.stderr_lines(), ["error: the prompt has no tokens"]);
}

/// The KV cache of [`long_context_llama`]`(64)` over its whole context of 2^24 tokens: 2 · 64
/// layers · 2^24 · 64 floats, 512 GiB.
pub(crate) const LONG_CONTEXT_KV_BYTES: u128 = 2 * 64 * (1 << 24) * 64 * 4;

/// A llama of `layers` layers of width 64 (one head, one KV head) with zero Q8_0 weights, trained
/// for the longest context the loader takes (2^24 tokens).
pub(crate) fn long_context_llama(layers: u64) -> String {
    use miniquant::gguf::Scalar;
    use miniquant::GgmlType;
    use miniquant_std::writer::GgufWriter;
    const D: u64 = 64;
    const VOCAB: u64 = 32;
    let mut w = GgufWriter::new();
    w.kv("general.architecture", "llama");
    for (key, value) in [
        ("llama.block_count", layers as u32),
        ("llama.context_length", 1 << 24),
        ("llama.embedding_length", D as u32),
        ("llama.feed_forward_length", D as u32),
        ("llama.attention.head_count", 1),
        ("llama.attention.head_count_kv", 1),
        ("llama.rope.dimension_count", D as u32),
        ("llama.vocab_size", VOCAB as u32),
    ] {
        w.kv(key, Scalar::U32(value));
    }
    w.kv("llama.attention.layer_norm_rms_epsilon", Scalar::F32(1e-5));
    let q8_0 = |rows: u64| vec![0u8; (rows * D / 32 * 34) as usize];
    let ones = || 1f32.to_le_bytes().repeat(D as usize);
    w.tensor(
        "token_embd.weight",
        GgmlType::Q8_0,
        &[D, VOCAB],
        q8_0(VOCAB),
    );
    w.tensor("output_norm.weight", GgmlType::F32, &[D], ones());
    w.tensor("output.weight", GgmlType::Q8_0, &[D, VOCAB], q8_0(VOCAB));
    for l in 0..layers {
        for norm in ["attn_norm", "ffn_norm"] {
            w.tensor(
                &format!("blk.{l}.{norm}.weight"),
                GgmlType::F32,
                &[D],
                ones(),
            );
        }
        for matrix in [
            "attn_q",
            "attn_k",
            "attn_v",
            "attn_output",
            "ffn_gate",
            "ffn_up",
            "ffn_down",
        ] {
            let name = format!("blk.{l}.{matrix}.weight");
            w.tensor(&name, GgmlType::Q8_0, &[D, D], q8_0(D));
        }
    }
    common::scratch_file(&format!("long-context-{layers}.gguf"), &w.to_bytes())
}

/// The bytes the system could give at most (RAM and swap), and whether Linux refuses a map past
/// them (its heuristic and strict overcommit modes; mode 1 maps anything and faults later).
pub(crate) fn refuses_maps_past(bytes: u128) -> bool {
    let overcommit = std::fs::read_to_string("/proc/sys/vm/overcommit_memory").unwrap_or_default();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let kib = |key: &str| -> u128 {
        meminfo
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
            .unwrap_or(u128::MAX / 4096)
    };
    matches!(overcommit.trim(), "0" | "2") && (kib("MemTotal:") + kib("SwapTotal:")) * 1024 < bytes
}

#[test]
fn a_context_the_machine_cannot_hold_is_an_error_not_an_abort() {
    let model = long_context_llama(64);
    // The run works while its context fits.
    let fits = miniquant(&[
        "run",
        &model,
        "--prompt-ids",
        "1 2 3",
        "-n",
        "2",
        "--tokens",
    ]);
    assert_eq!(fits.code, 0, "{}", fits.stderr);
    let kv_bytes = LONG_CONTEXT_KV_BYTES;
    if !refuses_maps_past(kv_bytes) {
        eprintln!("NOT RUN: this system would map {kv_bytes} bytes (overcommit or memory)");
        return;
    }
    for args in [
        &["run", &model, "--prompt-ids", "1 2 3", "-n", "16777216"][..],
        &["bench", &model, "-p", "16777216", "-n", "0"][..],
    ] {
        let refused = miniquant(args);
        common::assert_no_panic(&refused);
        assert_eq!(refused.code, 1, "{args:?}: {}", refused.stderr);
        let lines = refused.stderr_lines();
        assert_eq!(lines.len(), 1, "{args:?}: {}", refused.stderr);
        assert!(
            lines[0].starts_with("error: cannot reserve ")
                && lines[0].contains(" of working memory (")
                && lines[0].contains("512.0 GiB of it the KV cache"),
            "{args:?}: {}",
            lines[0]
        );
        assert!(refused.stdout.is_empty() || args[0] == "bench");
    }
}
