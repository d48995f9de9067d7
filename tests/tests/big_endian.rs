//! Big-endian GGUF files made by gguf-py's `gguf-convert-endian` (run from the cached venv at test
//! time) over a little-endian file that the project's writer makes: every tensor type the tool
//! converts (F32, F16, BF16, Q4_0, Q8_0, Q4_K, Q6_K, MXFP4, NVFP4) must read back as the little-endian file's
//! exact bytes and values, through the library and through `miniquant dequant` and `matvec`. A
//! big-endian file with a type the tool cannot convert is a clear error naming tensor and type.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use miniquant::error::Op;
use miniquant::gguf::{ByteOrder, Scalar};
use miniquant::{quant, Error, GgmlType};
use miniquant_std::cli::{self, Cli};
use miniquant_std::writer::GgufWriter;
use miniquant_std::GgufFile;
use miniquant_tests::cache::gguf_py_python;
use miniquant_tests::craft::{self, Endian, Tensor, Value};

/// Every type `gguf-convert-endian` converts.
const TYPES: [GgmlType; 9] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q4_0,
    GgmlType::Q8_0,
    GgmlType::Q4_K,
    GgmlType::Q6_K,
    GgmlType::MXFP4,
    GgmlType::NVFP4,
];
const COLS: usize = 256;
const ROWS: usize = 3;

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("big-endian");
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir.join(name)
}

/// Values 0..63 and some fractions, as in the file.
fn values(seed: usize) -> Vec<f32> {
    (0..COLS * ROWS)
        .map(|i| ((i * 7 + seed) % 64) as f32 + if i % 3 == 0 { 0.25 } else { -0.5 })
        .collect()
}

/// A little-endian file with one [COLS, ROWS] tensor per type and a little metadata.
fn little_endian_file() -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.kv("general.architecture", "test")
        .kv("test.count", Scalar::U64(0x0102_0304_0506_0708))
        .kv("test.ratio", Scalar::F32(-1.25));
    for (i, t) in TYPES.into_iter().enumerate() {
        let mut blocks = vec![0u8; quant::bytes_for(t, COLS * ROWS).expect("whole blocks")];
        quant::quantize(t, &values(i), &mut blocks).expect("quantize");
        w.tensor(&format!("w.{t}"), t, &[COLS as u64, ROWS as u64], blocks);
    }
    w.to_bytes()
}

/// Runs `gguf-convert-endian FILE big` (it asks for a typed YES).
fn convert_to_big_endian(path: &Path) {
    let mut child = Command::new(gguf_py_python())
        .args([
            "-c",
            "import sys; from gguf.scripts.gguf_convert_endian import main; sys.exit(main())",
        ])
        .arg(path)
        .arg("big")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run gguf-py's gguf-convert-endian");
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(b"YES\n").expect("answer YES");
    }
    let out = child.wait_with_output().expect("gguf-convert-endian");
    assert!(
        out.status.success(),
        "gguf-convert-endian failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs a CLI command; its exit code, stdout and stderr.
fn run_cli(command: cli::Command) -> (u8, Vec<u8>, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = cli::run(&Cli { command }, &mut out, &mut err);
    (code, out, String::from_utf8(err).expect("UTF-8 stderr"))
}

fn dequant(file: &Path, tensor: &str) -> Vec<u8> {
    let (code, out, err) = run_cli(cli::Command::Dequant {
        file: file.to_owned(),
        tensor: tensor.to_owned(),
        output: Some(PathBuf::from("-")),
    });
    assert_eq!(code, 0, "dequant {tensor} of {}: {err}", file.display());
    out
}

fn matvec(file: &Path, tensor: &str, x: &Path) -> Vec<u8> {
    let (code, out, err) = run_cli(cli::Command::Matvec {
        file: file.to_owned(),
        tensor: tensor.to_owned(),
        x: x.to_owned(),
        output: Some(PathBuf::from("-")),
    });
    assert_eq!(code, 0, "matvec {tensor} of {}: {err}", file.display());
    out
}

#[test]
fn files_converted_by_gguf_convert_endian_read_like_the_little_endian_file() {
    let little_path = scratch("little.gguf");
    let big_path = scratch("big.gguf");
    let bytes = little_endian_file();
    std::fs::write(&little_path, &bytes).expect("write");
    std::fs::write(&big_path, &bytes).expect("write");
    convert_to_big_endian(&big_path);
    let x_path = scratch("x.f32");
    let x: Vec<u8> = (0..COLS)
        .flat_map(|i| (i as f32 / 64.0 - 1.0).to_le_bytes())
        .collect();
    std::fs::write(&x_path, &x).expect("write x");

    let little = GgufFile::open(&little_path).expect("little-endian file");
    let big = GgufFile::open(&big_path).expect("big-endian file");
    assert_eq!(little.index().byte_order(), Some(ByteOrder::Little));
    assert_eq!(big.index().byte_order(), Some(ByteOrder::Big));
    assert_eq!(big.index().metadata(), little.index().metadata());
    for t in TYPES {
        let name = format!("w.{t}");
        let le = little.index().tensor(&name).expect("tensor");
        let be = big.index().tensor(&name).expect("tensor");
        assert_eq!(be.ggml_type, t);
        let stored_le = little.data_of(le).expect("data");
        let stored_be = big.data_of(be).expect("data");
        // The tool changed the bytes of every type with a multi-byte field (MXFP4 and NVFP4 have
        // none)...
        let single_byte_fields = matches!(t, GgmlType::MXFP4 | GgmlType::NVFP4);
        assert_eq!(
            stored_be == stored_le,
            single_byte_fields,
            "{name}: bytes changed by the conversion"
        );
        // ...and the conversion gives them back exactly.
        let native = big.native_data_of(be).expect("known layout");
        assert_eq!(&*native, stored_le, "{name}: bytes");
        assert_eq!(&*little.native_data_of(le).expect("le"), stored_le);

        let le_values = dequant(&little_path, &name);
        assert_eq!(le_values.len(), COLS * ROWS * 4);
        assert_eq!(dequant(&big_path, &name), le_values, "{name}: dequant");
        let le_y = matvec(&little_path, &name, &x_path);
        assert_eq!(le_y.len(), ROWS * 4);
        assert_eq!(matvec(&big_path, &name, &x_path), le_y, "{name}: matvec");
    }
}

/// gguf-convert-endian defines no big-endian layout for Q5_K, Q4_1, IQ4_NL...: such a tensor in a
/// big-endian file is an error naming the tensor and its type, never garbage.
#[test]
fn other_types_in_a_big_endian_file_are_a_clear_error() {
    for t in [GgmlType::Q5_K, GgmlType::Q4_1, GgmlType::IQ4_NL] {
        let file = craft::GgufFile {
            endian: Endian::Big,
            metadata: vec![(b"general.architecture".to_vec(), Value::str("test"))],
            tensors: vec![Tensor {
                name: b"w".to_vec(),
                ne: vec![t.block_size().into(), 2],
                type_code: t.code(),
                offset: 0,
            }],
            data: vec![0; 2 * t.block_bytes() as usize],
            ..craft::GgufFile::default()
        };
        let path = scratch(&format!("big-{t}.gguf"));
        std::fs::write(&path, file.to_bytes()).expect("write");
        let opened = GgufFile::open(&path).expect("a valid header");
        let tensor = opened.index().tensor("w").expect("tensor");
        let expected = Error::Unsupported {
            ggml_type: t,
            op: Op::FromBigEndian,
        };
        assert_eq!(opened.native_data_of(tensor).unwrap_err(), expected);
        let (code, out, err) = run_cli(cli::Command::Dequant {
            file: path.clone(),
            tensor: "w".to_owned(),
            output: Some(PathBuf::from("-")),
        });
        assert_eq!(code, 1);
        assert!(out.is_empty());
        assert_eq!(err, format!("error: tensor \"w\" ({t}): {expected}\n"));
    }
}
