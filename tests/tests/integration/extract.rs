//! `miniquant extract` on the real files:
//! - with no selection, the output is byte-identical to the input (both files);
//! - a two-tensor extract with filtered keys and cut arrays passes `miniquant validate`, keeps the
//!   chosen tensors' bytes and the kept keys' values, and opens in gguf-py (every key and tensor
//!   compared with our reading by `scripts/compare_json_gguf_py.py`) and in candle (same header,
//!   same dequantized tensors as candle reads from the original file).

use candle_core::quantized::gguf_file;
use candle_core::Device;
use clap::Parser;
use miniquant_std::cli::{run, Cli};
use miniquant_std::{GgufFile, Value};
use miniquant_tests::cache;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::Command;

const TENSORS: [&str; 2] = ["blk.0.attn_output.weight", "blk.0.attn_v.weight"];

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("extract");
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir.join(name)
}

/// Runs the CLI in process; returns (exit code, stderr).
fn miniquant(args: &[&str]) -> (u8, String) {
    let cli = Cli::try_parse_from(std::iter::once("miniquant").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = run(&cli, &mut out, &mut err);
    (code, String::from_utf8(err).expect("UTF-8 stderr"))
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

fn assert_identical_copy(model: &str) {
    let input = cache::model_path(model);
    let output = scratch(&format!("all-{model}"));
    let (code, err) = miniquant(&["extract", path_str(&input), path_str(&output)]);
    assert_eq!(code, 0, "{err}");
    let (a, b) = (
        std::fs::read(&input).unwrap(),
        std::fs::read(&output).unwrap(),
    );
    assert_eq!(a.len(), b.len(), "{model}: lengths");
    let first_difference = a.iter().zip(&b).position(|(x, y)| x != y);
    assert_eq!(first_difference, None, "{model}: first differing byte");
    std::fs::remove_file(&output).unwrap();
    // The temporary file is `.<name>.<pid>.tmp` next to the output.
    let leftovers: Vec<_> = std::fs::read_dir(output.parent().unwrap())
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!(".all-{model}")))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

#[test]
fn no_selection_copies_smollm2_byte_for_byte() {
    assert_identical_copy(cache::SMOLLM2_Q4_1);
}

#[test]
fn no_selection_copies_gemma3_byte_for_byte() {
    assert_identical_copy(cache::GEMMA3_Q4_K_M);
}

#[test]
fn unknown_tensor_fails_and_writes_nothing() {
    let input = cache::model_path(cache::GEMMA3_Q4_K_M);
    let output = scratch("missing.gguf");
    let _ = std::fs::remove_file(&output);
    let (code, err) = miniquant(&[
        "extract",
        path_str(&input),
        path_str(&output),
        "--tensor",
        "no.such.weight",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("no tensor named \"no.such.weight\""), "{err}");
    assert!(!output.exists());
}

#[test]
fn subset_is_valid_and_opens_in_gguf_py_and_candle() {
    let input = cache::model_path(cache::GEMMA3_Q4_K_M);
    let output = scratch("subset.gguf");
    let (code, err) = miniquant(&[
        "extract",
        path_str(&input),
        path_str(&output),
        "--tensor",
        TENSORS[0],
        TENSORS[1],
        "--key",
        "general.*",
        "gemma3.*",
        "tokenizer.ggml.tokens",
        "tokenizer.ggml.scores",
        "--max-array",
        "16",
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, err) = miniquant(&["validate", path_str(&output)]);
    assert_eq!(code, 0, "validate: {err}");

    let original = GgufFile::open(&input).expect("original opens");
    let small = GgufFile::open(&output).expect("extract opens");
    let names: Vec<&str> = small
        .index()
        .tensors()
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(names, TENSORS, "tensors in file order");
    for name in TENSORS {
        assert_eq!(
            small.tensor_data(name).unwrap(),
            original.tensor_data(name).unwrap(),
            "{name}: data"
        );
        assert_eq!(
            small.index().tensor(name).unwrap().ne(),
            original.index().tensor(name).unwrap().ne()
        );
    }
    for entry in small.index().metadata() {
        let keep = entry.key.starts_with("general.")
            || entry.key.starts_with("gemma3.")
            || entry.key == "tokenizer.ggml.tokens"
            || entry.key == "tokenizer.ggml.scores";
        assert!(keep, "{} should have been dropped", entry.key);
        let before = original.index().get(&entry.key).unwrap();
        match (before, &entry.value) {
            (Value::Array(a), Value::Array(b)) => {
                assert_eq!(b.len(), a.len().min(16), "{}", entry.key);
                assert!(a.iter().zip(b.iter()).all(|(x, y)| x == y), "{}", entry.key);
            }
            (a, b) => assert!(a.bits_eq(b), "{}", entry.key),
        }
    }
    let kept_everywhere = original
        .index()
        .metadata()
        .iter()
        .filter(|e| e.key.starts_with("general.") || e.key.starts_with("gemma3."))
        .count();
    assert_eq!(small.index().metadata().len(), kept_everywhere + 2);

    check_with_gguf_py(&small, &output);
    check_with_candle(&input, &output);
    std::fs::remove_file(&output).unwrap();
}

/// gguf-py's `GGUFReader` reads every key and tensor of the extract as we do.
fn check_with_gguf_py(file: &GgufFile, path: &Path) {
    let json_path = scratch("subset.json");
    let mut out = std::io::BufWriter::new(File::create(&json_path).expect("json file"));
    miniquant_std::json::write_index(file.index(), &mut out).expect("write the JSON");
    drop(out);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/compare_json_gguf_py.py");
    let run = Command::new(cache::gguf_py_python())
        .arg(script)
        .arg(path)
        .arg(&json_path)
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(stdout.contains("identical to gguf-py"), "{stdout}");
}

/// candle reads the extract's header, and dequantizes its tensors to the same values as the
/// original file's.
fn check_with_candle(original: &Path, extract: &Path) {
    let read = |p: &Path| {
        let mut reader = BufReader::new(File::open(p).unwrap());
        let content = gguf_file::Content::read(&mut reader)
            .unwrap_or_else(|e| panic!("candle reads {}: {e}", p.display()));
        (content, reader)
    };
    let (before, mut before_reader) = read(original);
    let (after, mut after_reader) = read(extract);
    assert_eq!(after.tensor_infos.len(), TENSORS.len());
    assert_eq!(
        after.metadata["gemma3.embedding_length"].to_u32().unwrap(),
        640
    );
    for name in TENSORS {
        let a = before
            .tensor(&mut before_reader, name, &Device::Cpu)
            .unwrap();
        let b = after.tensor(&mut after_reader, name, &Device::Cpu).unwrap();
        assert_eq!(a.dtype(), b.dtype(), "{name}");
        let a = a.dequantize(&Device::Cpu).unwrap().flatten_all().unwrap();
        let b = b.dequantize(&Device::Cpu).unwrap().flatten_all().unwrap();
        let (a, b) = (a.to_vec1::<f32>().unwrap(), b.to_vec1::<f32>().unwrap());
        assert_eq!(a.len(), b.len(), "{name}");
        assert!(
            a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()),
            "{name}: candle dequantizes the extract differently"
        );
    }
}
