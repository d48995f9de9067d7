//! `miniquant requantize` on the real SmolLM2 file (Q4_1, Q8_0 and F32 tensors) to Q4_K and Q8_0:
//! the tensor types follow llama-quantize --pure (2-D weights converted, Q4_K falling back to Q5_0
//! for rows of 576 values; 1-D norms kept), every converted tensor is byte-identical to ggml's
//! reference quantizer applied to ggml's own dequantization of the source, metadata is kept in order
//! with `general.quantization_version` and `general.file_type` appended, and candle opens the
//! output and reads every tensor to the values ggml reads.

use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use candle_core::quantized::gguf_file;
use candle_core::Device;
use clap::Parser;
use miniquant::gguf::Scalar;
use miniquant::GgmlType;
use miniquant_std::cli::{self, Cli};
use miniquant_std::writer::GgufWriter;
use miniquant_std::{GgufFile, Value};
use miniquant_tests::cache::{model_path, SMOLLM2_Q4_1};
use miniquant_tests::ggml;

fn requantize(input: &Path, output: &Path, ty: &str) -> (u8, String) {
    requantize_with(input, output, ty, &[])
}

fn requantize_with(input: &Path, output: &Path, ty: &str, more: &[&str]) -> (u8, String) {
    let args = [
        "miniquant".as_ref(),
        "requantize".as_ref(),
        input.as_os_str(),
        output.as_os_str(),
        "--type".as_ref(),
        ty.as_ref(),
    ];
    let cli = Cli::try_parse_from(args.into_iter().chain(more.iter().map(|a| a.as_ref()))).unwrap();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = cli::run(&cli, &mut out, &mut err);
    (code, String::from_utf8(err).unwrap())
}

/// A fresh directory for one test's files, removed when the guard drops.
fn scratch_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("miniquant-requantize-")
        .tempdir()
        .unwrap()
}

/// The type llama-quantize --pure gives a SmolLM2 tensor for `target` (ggml's fallback table for
/// the two targets tested: Q4_K -> Q5_0 when a row is not whole 256-value blocks).
fn expected_type(name: &str, ne: &[u64], source: GgmlType, target: GgmlType) -> GgmlType {
    let quantized = ne.len() >= 2 && name.ends_with("weight") && !name.contains("_norm.weight");
    if !quantized {
        return source;
    }
    match target {
        GgmlType::Q4_K if !ne[0].is_multiple_of(256) => GgmlType::Q5_0,
        t => t,
    }
}

fn check(target: GgmlType, type_arg: &str, file_type: u32) {
    let input = model_path(SMOLLM2_Q4_1);
    let dir = scratch_dir();
    let output = dir.path().join(format!("smollm2-{type_arg}.gguf"));
    let (code, err) = requantize(&input, &output, type_arg);
    assert_eq!(code, 0, "{err}");
    println!("{}", err.trim());
    let source = GgufFile::open(&input).unwrap();
    let result = GgufFile::open(&output).unwrap();

    // Metadata: the source's in order, the two llama.cpp keys last.
    let keys = |f: &GgufFile| -> Vec<String> {
        f.index().metadata().iter().map(|m| m.key.clone()).collect()
    };
    let mut expected_keys: Vec<String> = keys(&source)
        .into_iter()
        .filter(|k| k != "general.quantization_version" && k != "general.file_type")
        .collect();
    expected_keys.push("general.quantization_version".into());
    expected_keys.push("general.file_type".into());
    assert_eq!(keys(&result), expected_keys);
    for (a, b) in source
        .index()
        .metadata()
        .iter()
        .zip(result.index().metadata())
    {
        if a.key == b.key {
            assert!(a.value.bits_eq(&b.value), "{}", a.key);
        }
    }
    let last = &result.index().metadata()[expected_keys.len() - 1];
    assert!(last.value.bits_eq(&Value::Scalar(Scalar::U32(file_type))));

    // Tensors: same names and shapes in order; types per llama-quantize --pure; bytes per ggml.
    let mut converted = 0;
    for (s, r) in source
        .index()
        .tensors()
        .iter()
        .zip(result.index().tensors())
    {
        assert_eq!((&s.name, s.ne()), (&r.name, r.ne()));
        let want = expected_type(&s.name, s.ne(), s.ggml_type, target);
        assert_eq!(r.ggml_type, want, "{}: type", s.name);
        let ours = result.data_of(r).unwrap();
        if want == s.ggml_type {
            assert!(
                ours == source.data_of(s).unwrap(),
                "{}: copied bytes",
                s.name
            );
            continue;
        }
        let values = ggml::ggml_dequantize(s.ggml_type, source.data_of(s).unwrap()).unwrap();
        let reference = ggml::ggml_quantize_ref(want, &values).unwrap();
        if let Some(at) = (0..ours.len()).find(|&i| ours[i] != reference[i]) {
            panic!("{}: {want} byte {at} differs from ggml's reference", s.name);
        }
        converted += 1;
    }
    assert!(converted > 200, "{converted} tensors converted");

    // candle reads every tensor, to the values ggml reads from the same bytes.
    let mut reader = BufReader::new(File::open(&output).unwrap());
    let content = gguf_file::Content::read(&mut reader).unwrap();
    let mut checked = std::collections::BTreeSet::new();
    for entry in result.index().tensors() {
        let q = content
            .tensor(&mut reader, &entry.name, &Device::Cpu)
            .unwrap();
        // One tensor of each type is dequantized and compared (all would take minutes).
        if checked.insert(entry.ggml_type.name()) {
            let theirs: Vec<f32> = q
                .dequantize(&Device::Cpu)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap();
            let reference =
                ggml::ggml_dequantize(entry.ggml_type, result.data_of(entry).unwrap()).unwrap();
            assert!(
                theirs
                    .iter()
                    .map(|v| v.to_bits())
                    .eq(reference.iter().map(|v| v.to_bits())),
                "{}: candle reads other values",
                entry.name
            );
        }
    }
    println!("candle read all tensors; dequantized one each of {checked:?}");
    std::fs::remove_file(&output).unwrap();
}

#[test]
fn smollm2_to_q4_k_matches_ggml_and_opens_in_candle() {
    check(GgmlType::Q4_K, "q4_k", 15);
}

#[test]
fn smollm2_to_q8_0_matches_ggml_and_opens_in_candle() {
    check(GgmlType::Q8_0, "Q8_0", 7);
}

#[test]
fn a_failed_conversion_leaves_no_file() {
    // Rows of 16 values fit no Q8_0 block, and ggml defines no fallback for Q8_0.
    let mut w = GgufWriter::new();
    w.kv("general.architecture", "llama");
    w.tensor("blk.0.a.weight", GgmlType::F32, &[32, 2], vec![0; 256]);
    w.tensor("blk.0.b.weight", GgmlType::F32, &[16, 2], vec![0; 128]);
    let dir = scratch_dir();
    let input = dir.path().join("bad-rows.gguf");
    std::fs::write(&input, w.to_bytes()).unwrap();
    let output = dir.path().join("bad-rows-q8_0.gguf");
    let (code, err) = requantize(&input, &output, "q8_0");
    assert_eq!(code, 1);
    assert!(
        err.contains("blk.0.b.weight") && err.contains("no fallback"),
        "{err}"
    );
    assert!(!output.exists());
    let leftovers: Vec<_> = std::fs::read_dir(output.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().contains("bad-rows-q8_0"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_non_finite_source_value_is_refused_unless_allowed() {
    // Two rows of 64 values; the second row's value 37 is NaN (later ones inf) in the second tensor.
    let mut values = vec![0.25f32; 128];
    values[64 + 37] = f32::NAN;
    values[64 + 40] = f32::INFINITY;
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut w = GgufWriter::new();
    w.kv("general.architecture", "llama");
    w.tensor("blk.0.a.weight", GgmlType::F32, &[64, 2], vec![0; 512]);
    w.tensor("blk.0.b.weight", GgmlType::F32, &[64, 2], bytes);
    let dir = scratch_dir();
    let input = dir.path().join("nan.gguf");
    std::fs::write(&input, w.to_bytes()).unwrap();

    let output = dir.path().join("nan-q8_0.gguf");
    let (code, err) = requantize(&input, &output, "q8_0");
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("\"blk.0.b.weight\" holds NaN at row 1, column 37")
            && err.contains("--allow-non-finite"),
        "{err}"
    );
    assert!(!output.exists());

    // Allowed: the blocks without a non-finite value are ggml's bytes; the one with the NaN and
    // the inf gets ggml's scale amax / 127 = inf (its quants are NaN -> int8 in C: undefined).
    let (code, err) = requantize_with(&input, &output, "q8_0", &["--allow-non-finite"]);
    assert_eq!(code, 0, "{err}");
    let file = GgufFile::open(&output).unwrap();
    let tensor = file.index().tensor("blk.0.b.weight").unwrap();
    let data = file.data_of(tensor).unwrap();
    let expected = ggml::ggml_quantize_ref(GgmlType::Q8_0, &values).unwrap();
    assert_eq!(data.len(), 4 * 34);
    assert_eq!(data[..3 * 34], expected[..3 * 34]);
    let scale = half::f16::from_le_bytes([data[3 * 34], data[3 * 34 + 1]]);
    assert!(scale.is_infinite(), "{scale}");
}
