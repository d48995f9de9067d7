//! `miniquant tokenize FILE TEXT`: the ids llama.cpp's `llama-tokenize` prints (the expected
//! ids are the oracle's, `tests/data/tokenizer/expected`), from an argument or standard input,
//! and clear errors for a file without a tokenizer, bad flags and non-UTF-8 input.

use crate::common;

use std::path::{Path, PathBuf};

use common::{assert_no_panic, miniquant, miniquant_with_stdin};

fn model(name: &str) -> Option<String> {
    let cache = std::env::var_os("MINIQUANT_CACHE").map_or_else(
        || Path::new(&std::env::var_os("HOME").unwrap_or_default()).join(".cache/miniquant"),
        PathBuf::from,
    );
    let path = cache.join(name);
    if path.exists() {
        Some(path.to_str().expect("UTF-8 path").to_owned())
    } else {
        eprintln!(
            "skipped: {} is not there (cargo xtask fetch)",
            path.display()
        );
        None
    }
}

/// llama.cpp's ids for a case and mode, as one line.
fn expected_line(model: &str, case: &str, mode: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/tokenizer/expected")
        .join(format!("{model}.tsv"));
    let table = std::fs::read_to_string(&path).expect("expected ids");
    let ids = table
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{case}\t{mode}\t")))
        .expect("the case is there");
    format!("{ids}\n")
}

fn text(case: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/data/tokenizer/texts")
            .join(format!("{case}.txt")),
    )
    .expect("the text")
}

#[test]
fn prints_llama_cpps_ids_from_an_argument_and_from_stdin() {
    for (file, name) in [
        ("SmolLM2-135M-Instruct.Q4_1.gguf", "smollm2-135m"),
        ("gemma-3-270m-q4_k_m.gguf", "gemma3-270m"),
    ] {
        let Some(path) = model(file) else {
            continue;
        };
        for case in ["17-chatml", "18-gemma-turns", "07-numbers"] {
            let t = text(case);
            let run = miniquant(&["tokenize", &path, &t]);
            assert_eq!(run.code, 0, "{}", run.stderr);
            assert_eq!(
                run.stdout_text(),
                expected_line(name, case, "default"),
                "{case}"
            );
            let plain = miniquant(&["tokenize", "--no-bos", "--no-special", &path, &t]);
            assert_eq!(
                plain.stdout_text(),
                expected_line(name, case, "plain"),
                "{case}"
            );
            let piped = miniquant_with_stdin(&["tokenize", &path, "-"], t.as_bytes());
            assert_eq!(
                piped.stdout_text(),
                expected_line(name, case, "default"),
                "{case}"
            );
        }
        // An empty text: the BOS alone if the file adds one, else an empty line.
        let empty = miniquant(&["tokenize", &path, ""]);
        assert_eq!(
            empty.stdout_text(),
            expected_line(name, "20-empty", "default")
        );
    }
}

#[test]
fn a_text_starting_with_a_dash_is_a_text() {
    let Some(path) = model("SmolLM2-135M-Instruct.Q4_1.gguf") else {
        return;
    };
    let run = miniquant(&["tokenize", &path, "-x"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stdout_text().trim().is_empty());
}

#[test]
fn errors_are_one_clear_line() {
    let tiny = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/tiny.gguf");
    let tiny = tiny.to_str().unwrap();
    let run = miniquant(&["tokenize", tiny, "hello"]);
    assert_no_panic(&run);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr,
        "error: tokenizer: the file has no tokenizer.ggml.model\n"
    );
    assert!(run.stdout.is_empty());

    let both = miniquant_with_stdin(&["tokenize", "-", "-"], b"");
    assert_eq!(both.code, 2);
    assert!(both.stderr.contains("cannot both come from standard input"));

    if let Some(path) = model("SmolLM2-135M-Instruct.Q4_1.gguf") {
        let bad = miniquant_with_stdin(&["tokenize", &path, "-"], b"ok\xff");
        assert_no_panic(&bad);
        assert_eq!(bad.code, 1);
        assert_eq!(
            bad.stderr,
            "error: standard input is not UTF-8 text (invalid byte at offset 2)\n"
        );
        assert!(bad.stdout.is_empty());
    }
}
