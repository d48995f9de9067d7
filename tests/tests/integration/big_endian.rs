//! Big-endian GGUF files made by gguf-py's `gguf-convert-endian` (run from the cached venv at test
//! time) over a little-endian file that the project's writer makes: every tensor type the tool
//! converts (F32, F16, BF16, Q4_0, Q8_0, Q4_K, Q6_K, MXFP4, NVFP4) must read back as the
//! little-endian file's exact bytes and values, through the library and through `miniquant dequant`
//! and `matvec`. A big-endian file with a type the tool cannot convert is a clear error naming
//! tensor and type.
//!
//! Every command that reads a file gives the same results on both copies; `extract` and
//! `requantize` write in the input's byte order (their big-endian outputs are what the tool makes
//! of the little-endian ones, byte for byte); `convert-endian` writes what the tool writes, byte
//! for byte, and refuses what it refuses.

use clap::Parser;
use std::ffi::OsStr;
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
    convert_with_gguf_py(path, "big");
}

/// Runs `gguf-convert-endian FILE ORDER`, which converts FILE in place.
fn convert_with_gguf_py(path: &Path, order: &str) {
    let mut child = Command::new(gguf_py_python())
        .args([
            "-c",
            "import sys; from gguf.scripts.gguf_convert_endian import main; sys.exit(main())",
        ])
        .arg(path)
        .arg(order)
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
/// Runs the CLI in process on `args` (the words after `miniquant`), as a user types them.
fn run_cli(args: &[&OsStr]) -> (u8, Vec<u8>, String) {
    let argv = std::iter::once(OsStr::new("miniquant")).chain(args.iter().copied());
    let cli = Cli::try_parse_from(argv).expect("valid command line");
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = cli::run(&cli, &mut out, &mut err);
    (code, out, String::from_utf8(err).expect("UTF-8 stderr"))
}

fn dequant(file: &Path, tensor: &str) -> Vec<u8> {
    let (code, out, err) = run_cli(&[
        "dequant".as_ref(),
        file.as_os_str(),
        tensor.as_ref(),
        "-o".as_ref(),
        "-".as_ref(),
    ]);
    assert_eq!(code, 0, "dequant {tensor} of {}: {err}", file.display());
    out
}

fn matvec(file: &Path, tensor: &str, x: &Path) -> Vec<u8> {
    let (code, out, err) = run_cli(&[
        "matvec".as_ref(),
        file.as_os_str(),
        tensor.as_ref(),
        x.as_os_str(),
        "-o".as_ref(),
        "-".as_ref(),
    ]);
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
        let (code, out, err) = run_cli(&[
            "dequant".as_ref(),
            path.as_os_str(),
            "w".as_ref(),
            "-o".as_ref(),
            "-".as_ref(),
        ]);
        assert_eq!(code, 1);
        assert!(out.is_empty());
        assert_eq!(err, format!("error: tensor \"w\" ({t}): {expected}\n"));
    }
}

/// The file every command runs on, in both byte orders: a 2-D weight per type that
/// `gguf-convert-endian` converts (names that `requantize` converts), a 1-D F32 norm of 16.0 (as in
/// the issue) and metadata of every kind of value.
fn model_file() -> Vec<u8> {
    use miniquant_std::{Array, Value as Owned};
    let mut w = GgufWriter::new();
    w.kv("general.architecture", "test")
        .kv("general.name", "endian test")
        .kv("test.count", Scalar::U64(0x0102_0304_0506_0708))
        .kv("test.ratio", Scalar::F32(-1.25))
        .kv("test.flag", Scalar::Bool(true))
        .kv("test.small", Scalar::U16(0x0a0b))
        .kv("test.precise", Scalar::F64(1.0 / 3.0))
        .kv("test.offsets", Owned::from(Array::I32(vec![-1, 2, -3])))
        .kv(
            "tokenizer.ggml.tokens",
            Owned::from(["<s>", "a", "bc"].into_iter().collect::<Array>()),
        )
        .kv(
            "test.nested",
            Owned::from(Array::Array(vec![
                Array::U32(vec![1, 2]),
                Array::I64(vec![-5]),
            ])),
        );
    let mut norm = vec![0u8; COLS * 4];
    quant::quantize(GgmlType::F32, &[16.0; COLS], &mut norm).expect("f32");
    w.tensor("output_norm.weight", GgmlType::F32, &[COLS as u64], norm);
    for (i, t) in TYPES.into_iter().enumerate() {
        let mut blocks = vec![0u8; quant::bytes_for(t, COLS * ROWS).expect("whole blocks")];
        quant::quantize(t, &values(i), &mut blocks).expect("quantize");
        w.tensor(&weight_name(t), t, &[COLS as u64, ROWS as u64], blocks);
    }
    // More rows than a requantize thread reads at a time.
    let tall: Vec<f32> = (0..COLS * 150).map(|i| (i % 97) as f32 - 48.5).collect();
    let mut blocks = vec![0u8; quant::bytes_for(GgmlType::Q8_0, tall.len()).expect("blocks")];
    quant::quantize(GgmlType::Q8_0, &tall, &mut blocks).expect("quantize");
    w.tensor(
        "blk.1.ffn_down.weight",
        GgmlType::Q8_0,
        &[COLS as u64, 150],
        blocks,
    );
    // As ggml writes it: the last tensor padded too.
    w.to_checked_bytes().expect("a valid file")
}

fn weight_name(t: GgmlType) -> String {
    format!("blk.0.{}.weight", t.name().to_lowercase())
}

/// The same file written little-endian by the project's writer and big-endian by
/// `gguf-convert-endian`, in a scratch directory of its own.
struct Pair {
    little: PathBuf,
    big: PathBuf,
}

impl Pair {
    fn new(dir: &str) -> Self {
        let little = scratch(&format!("{dir}/little.gguf"));
        std::fs::create_dir_all(little.parent().expect("dir")).expect("scratch dir");
        let big = little.with_file_name("big.gguf");
        let bytes = model_file();
        std::fs::write(&little, &bytes).expect("write");
        std::fs::write(&big, &bytes).expect("write");
        convert_to_big_endian(&big);
        Self { little, big }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.little.with_file_name(name)
    }
}

fn os(s: &str) -> &OsStr {
    s.as_ref()
}

/// A copy of `path` converted by `gguf-convert-endian` to `order`.
fn converted_by_gguf_py(path: &Path, order: &str) -> Vec<u8> {
    let copy = path.with_extension(format!("{order}.gguf"));
    std::fs::copy(path, &copy).expect("copy");
    convert_with_gguf_py(&copy, order);
    std::fs::read(&copy).expect("read")
}

/// Every value of every tensor of a file, by name, through `miniquant dequant`.
fn all_values(path: &Path) -> Vec<(String, Vec<u8>)> {
    let file = GgufFile::open(path).expect("open");
    file.index()
        .tensors()
        .iter()
        .map(|t| (t.name.clone(), dequant(path, &t.name)))
        .collect()
}

/// `extract` keeps the input's byte order: with no selection the output is the input, byte for
/// byte; with a selection the big-endian output is what `gguf-convert-endian` makes of the
/// little-endian output.
#[test]
fn extract_keeps_the_byte_order() {
    let pair = Pair::new("extract");
    for (input, name) in [(&pair.little, "little"), (&pair.big, "big")] {
        let out = pair.path(&format!("all-{name}.gguf"));
        let (code, _, err) = run_cli(&[os("extract"), input.as_os_str(), out.as_os_str()]);
        assert_eq!(code, 0, "{err}");
        assert!(
            std::fs::read(&out).expect("output") == std::fs::read(input).expect("input"),
            "extract of the {name}-endian file with no selection is not the input"
        );
    }
    let selection = |input: &Path, out: &Path| {
        let (code, _, err) = run_cli(&[
            os("extract"),
            input.as_os_str(),
            out.as_os_str(),
            os("--tensor"),
            os("output_norm.weight"),
            os("blk.0.q6_k.weight"),
            os("blk.0.bf16.weight"),
            os("--key"),
            os("general.*"),
            os("test.*"),
            os("--max-array"),
            os("1"),
        ]);
        assert_eq!(code, 0, "{err}");
    };
    let (some_little, some_big) = (pair.path("some-little.gguf"), pair.path("some-big.gguf"));
    selection(&pair.little, &some_little);
    selection(&pair.big, &some_big);
    let big = std::fs::read(&some_big).expect("output");
    assert!(
        big == converted_by_gguf_py(&some_little, "big"),
        "extract of the big-endian file is not the big-endian form of the little-endian extract"
    );
    assert_eq!(all_values(&some_big), all_values(&some_little));
}

fn requantize(input: &Path, output: &Path, ty: &str) -> (u8, String) {
    let (code, _, err) = run_cli(&[
        os("requantize"),
        input.as_os_str(),
        output.as_os_str(),
        os("--type"),
        os(ty),
        os("--threads"),
        os("2"),
    ]);
    (code, err)
}

/// `requantize` reads a big-endian file's data in its order and writes its output in the same
/// order: the big-endian output is what `gguf-convert-endian` makes of the little-endian output,
/// byte for byte, and the copied F32 norm still reads 16.0.
#[test]
fn requantize_writes_in_the_input_byte_order() {
    let pair = Pair::new("requantize");
    for ty in ["q8_0", "q4_k", "q6_k", "f16", "bf16", "f32", "q4_0"] {
        let (out_little, out_big) = (
            pair.path(&format!("{ty}-little.gguf")),
            pair.path(&format!("{ty}-big.gguf")),
        );
        let (code, err) = requantize(&pair.little, &out_little, ty);
        assert_eq!(code, 0, "{ty} little: {err}");
        let (code, err) = requantize(&pair.big, &out_big, ty);
        assert_eq!(code, 0, "{ty} big: {err}");
        let norm = dequant(&out_big, "output_norm.weight");
        assert!(
            norm.chunks_exact(4).all(|v| v == 16f32.to_le_bytes()),
            "{ty}: the norm reads {:?}",
            f32::from_le_bytes(norm[..4].try_into().expect("4 bytes"))
        );
        let big = GgufFile::open(&out_big).expect("big output");
        assert_eq!(big.index().byte_order(), Some(ByteOrder::Big), "{ty}");
        assert!(
            std::fs::read(&out_big).expect("output") == converted_by_gguf_py(&out_little, "big"),
            "{ty}: the big-endian output is not the big-endian form of the little-endian output"
        );
    }
}

/// A target type without a big-endian layout is refused for a big-endian input, naming the type,
/// before any output exists; the little-endian input converts.
#[test]
fn requantize_refuses_a_type_without_a_big_endian_layout() {
    let pair = Pair::new("requantize-refused");
    for (ty, name) in [("q5_k", "Q5_K"), ("iq4_nl", "IQ4_NL"), ("q4_1", "Q4_1")] {
        let out = pair.path(&format!("{ty}.gguf"));
        let _ = std::fs::remove_file(&out);
        let (code, err) = requantize(&pair.big, &out, ty);
        assert_eq!(code, 1, "{ty}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("error: ") && err.contains(name) && err.contains("big-endian"),
            "{ty}: {err}"
        );
        assert!(!out.exists(), "{ty}: an output was written");
        let out = pair.path(&format!("{ty}-little.gguf"));
        let (code, err) = requantize(&pair.little, &out, ty);
        assert_eq!(code, 0, "{ty} little: {err}");
    }
    // A source type without a big-endian layout cannot be read, so it cannot be converted.
    let file = craft::GgufFile {
        endian: Endian::Big,
        metadata: vec![(b"general.architecture".to_vec(), Value::str("test"))],
        tensors: vec![Tensor {
            name: b"blk.0.ffn_up.weight".to_vec(),
            ne: vec![32, 2],
            type_code: GgmlType::Q4_1.code(),
            offset: 0,
        }],
        data: vec![0; 2 * GgmlType::Q4_1.block_bytes() as usize],
        ..craft::GgufFile::default()
    };
    let input = pair.path("q4_1-big.gguf");
    std::fs::write(&input, file.to_bytes()).expect("write");
    let out = pair.path("from-q4_1.gguf");
    let _ = std::fs::remove_file(&out);
    let (code, err) = requantize(&input, &out, "q8_0");
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("tensor \"blk.0.ffn_up.weight\" is Q4_1") && err.lines().count() == 1,
        "{err}"
    );
    assert!(!out.exists(), "an output was written");
}

fn convert_endian(input: &Path, output: &Path, order: &str) -> (u8, String) {
    let (code, out, err) = run_cli(&[
        os("convert-endian"),
        input.as_os_str(),
        output.as_os_str(),
        os("--order"),
        os(order),
    ]);
    assert!(out.is_empty());
    (code, err)
}

/// A version-2 file aligned to 64 with bytes that are neither header nor tensor data: non-zero
/// padding after the header, a gap between two tensors and bytes after the last one. The tool
/// leaves them as they are.
fn odd_layout_file() -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.format(2, ByteOrder::Little)
        .kv("general.architecture", "odd")
        .kv("general.alignment", Scalar::U32(64))
        .kv("odd.value", Scalar::I16(-2));
    let mut a = vec![0u8; quant::bytes_for(GgmlType::Q4_K, COLS).expect("blocks")];
    quant::quantize(GgmlType::Q4_K, &values(1)[..COLS], &mut a).expect("quantize");
    let mut b = vec![0u8; 2 * COLS];
    quant::quantize(GgmlType::F16, &values(2)[..COLS], &mut b).expect("quantize");
    let b_offset = (a.len() as u64).div_ceil(64) * 64 + 128;
    w.tensor_at("a", GgmlType::Q4_K.code(), &[COLS as u64], 0, a.clone())
        .tensor_at("b", GgmlType::F16.code(), &[COLS as u64], b_offset, b);
    let header_end = w.directory_bytes().len();
    let data_start = w.header_bytes().len();
    assert!(data_start > header_end, "some padding after the header");
    let mut bytes = w.to_bytes();
    bytes[header_end..data_start].fill(0xa5);
    bytes[data_start + a.len()..data_start + b_offset as usize].fill(0x5a);
    bytes.extend_from_slice(b"trailing bytes");
    bytes
}

/// The metadata of a real model (SmolLM2's 49,152-token vocabulary and merges) with its F32 norms.
fn real_header_file(dir: &Path) -> Vec<u8> {
    let model = miniquant_tests::cache::model_path(miniquant_tests::cache::SMOLLM2_Q4_1);
    let out = dir.join("smollm2-norms.gguf");
    let (code, _, err) = run_cli(&[
        os("extract"),
        model.as_os_str(),
        out.as_os_str(),
        os("--tensor"),
        os("output_norm.weight"),
        os("blk.0.attn_norm.weight"),
        os("blk.29.ffn_norm.weight"),
    ]);
    assert_eq!(code, 0, "{err}");
    std::fs::read(out).expect("read")
}

/// `convert-endian` to big and back gives what `gguf-convert-endian` gives, byte for byte, on files
/// with every converted tensor type and every kind of metadata, an odd layout, and a real
/// vocabulary.
#[test]
fn convert_endian_is_byte_identical_to_gguf_convert_endian() {
    let dir = scratch("convert-endian");
    std::fs::create_dir_all(&dir).expect("dir");
    let files = [
        ("model", model_file()),
        ("odd-layout", odd_layout_file()),
        ("real-header", real_header_file(&dir)),
    ];
    for (name, bytes) in files {
        let little = dir.join(format!("{name}.gguf"));
        std::fs::write(&little, &bytes).expect("write");
        let ours_big = dir.join(format!("{name}-ours-big.gguf"));
        let (code, err) = convert_endian(&little, &ours_big, "big");
        assert_eq!(code, 0, "{name}: {err}");
        let tools_big = converted_by_gguf_py(&little, "big");
        assert_ne!(tools_big, bytes, "{name}: the tool changed nothing");
        assert!(
            std::fs::read(&ours_big).expect("read") == tools_big,
            "{name}: convert-endian --order big differs from gguf-convert-endian"
        );
        let ours_little = dir.join(format!("{name}-ours-little.gguf"));
        let (code, err) = convert_endian(&ours_big, &ours_little, "little");
        assert_eq!(code, 0, "{name}: {err}");
        let ours_little = std::fs::read(&ours_little).expect("read");
        assert!(
            ours_little == converted_by_gguf_py(&ours_big, "little"),
            "{name}: convert-endian --order little differs from gguf-convert-endian"
        );
        assert!(
            ours_little == bytes,
            "{name}: the round trip changed the file"
        );
        // Already in the requested order: an identical copy.
        let native = dir.join(format!("{name}-native.gguf"));
        let (code, err) = convert_endian(&little, &native, "native");
        assert_eq!(code, 0, "{name}: {err}");
        if cfg!(target_endian = "little") {
            assert!(err.contains("already little-endian"), "{err}");
            assert!(std::fs::read(&native).expect("read") == bytes, "{name}");
        }
    }
}

/// Types `gguf-convert-endian` refuses are refused too, naming tensor and type, and nothing is
/// written; an output that is the input (by name or through a link) is refused before anything.
#[test]
fn convert_endian_refuses_what_gguf_convert_endian_refuses() {
    let dir = scratch("convert-endian-refused");
    std::fs::create_dir_all(&dir).expect("dir");
    for t in [GgmlType::Q5_K, GgmlType::Q4_1, GgmlType::I32, GgmlType::F64] {
        let mut w = GgufWriter::new();
        w.kv("general.architecture", "test")
            .tensor("ok", GgmlType::F32, &[4], vec![0; 16])
            .tensor(
                "w",
                t,
                &[t.block_size().into()],
                vec![0; t.block_bytes() as usize],
            );
        let path = dir.join(format!("{t}.gguf"));
        std::fs::write(&path, w.to_checked_bytes().expect("valid")).expect("write");
        let copy = dir.join(format!("{t}-copy.gguf"));
        std::fs::copy(&path, &copy).expect("copy");
        let tool = Command::new(gguf_py_python())
            .args([
                "-c",
                "import sys; from gguf.scripts.gguf_convert_endian import main; sys.exit(main())",
            ])
            .arg(&copy)
            .arg("big")
            .stdin(Stdio::null())
            .output()
            .expect("run gguf-convert-endian");
        let tool_err = String::from_utf8_lossy(&tool.stderr);
        assert!(
            !tool.status.success() && tool_err.contains("Cannot handle type"),
            "{t}: gguf-convert-endian did not refuse: {tool_err}"
        );
        let out = dir.join(format!("{t}-big.gguf"));
        let _ = std::fs::remove_file(&out);
        let (code, err) = convert_endian(&path, &out, "big");
        assert_eq!(code, 1, "{t}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("error: tensor \"w\"") && err.contains(&format!(" is {t},")),
            "{t}: {err}"
        );
        assert!(!out.exists(), "{t}: an output was written");
    }

    let input = dir.join("input.gguf");
    let bytes = little_endian_file();
    std::fs::write(&input, &bytes).expect("write");
    let link = dir.join("link.gguf");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&input, &link).expect("symlink");
    for output in [&input, &link] {
        let (code, err) = convert_endian(&input, output, "big");
        // A usage error, as for every command (cli/output.rs).
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("is the input"), "{err}");
        assert!(
            std::fs::read(&input).expect("read") == bytes,
            "input changed"
        );
    }
}

/// Runs `args` once per file of the pair, `FILE` standing for the file; the exit code, stdout and
/// stderr with the file's name and byte order replaced by placeholders.
fn on_both(pair: &Pair, args: &[&str]) -> [(u8, Vec<u8>, String); 2] {
    [(&pair.little, "little"), (&pair.big, "big")].map(|(path, order)| {
        let args: Vec<&OsStr> = args
            .iter()
            .map(|&a| if a == "FILE" { path.as_os_str() } else { os(a) })
            .collect();
        let (code, out, err) = run_cli(&args);
        let normal = |text: &str| {
            text.replace(&path.display().to_string(), "FILE")
                .replace(&format!("byte_order {order}"), "byte_order ORDER")
                .replace(
                    &format!("\"byte_order\":\"{order}\""),
                    "\"byte_order\":ORDER",
                )
                .replace(&format!("\"{}\"", order.to_uppercase()), "ORDER")
        };
        let out = match String::from_utf8(out) {
            Ok(text) => normal(&text).into_bytes(),
            Err(binary) => binary.into_bytes(),
        };
        (code, out, normal(&err))
    })
}

/// Every command that reads a file gives the same results on the little- and big-endian copies of
/// one file (extract, requantize and convert-endian have their own tests above).
#[test]
fn every_command_reads_both_byte_orders_alike() {
    let pair = Pair::new("every-command");
    let x = pair.path("x.f32");
    let xs: Vec<u8> = (0..COLS)
        .flat_map(|i| (i as f32 / 32.0 - 4.0).to_le_bytes())
        .collect();
    std::fs::write(&x, xs).expect("write x");
    let x = x.to_str().expect("UTF-8 path");
    let mut commands: Vec<Vec<&str>> = vec![
        vec!["inspect", "FILE"],
        vec!["inspect", "--json", "FILE"],
        vec!["inspect", "--json-format", "gguf-dump", "FILE"],
        vec!["inspect", "--key", "test.nested", "FILE"],
        vec!["inspect", "--key", "test.count", "FILE"],
        vec!["validate", "FILE"],
    ];
    let names: Vec<String> = TYPES.into_iter().map(weight_name).collect();
    commands.push(vec!["dequant", "FILE", "output_norm.weight", "-o", "-"]);
    for name in &names {
        commands.push(vec!["dequant", "FILE", name, "-o", "-"]);
        commands.push(vec![
            "dequant", "FILE", name, "--rows", "1..3", "--format", "npy", "-o", "-",
        ]);
        commands.push(vec!["matvec", "FILE", name, x, "-o", "-"]);
    }
    for args in &commands {
        let [little, big] = on_both(&pair, args);
        assert_eq!(little.0, 0, "{args:?}: {}", little.2);
        assert_eq!(big.1, little.1, "{args:?}: stdout");
        assert_eq!(big.2, little.2, "{args:?}: stderr");
        assert_eq!(big.0, little.0, "{args:?}: exit code");
        assert!(!little.1.is_empty(), "{args:?}: no output");
    }
}
