//! `miniquant_std::requantize` as a library user meets it (no `cli` feature needed): progress
//! reaches the total in order, the output parses with the expected types, refusals and non-finite
//! values are typed errors naming the tensor (and row and column), nothing is written for a
//! conversion refused up front, and the output has the bytes the `miniquant requantize` command
//! writes.

use std::io::{self, Write};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use miniquant::gguf::ByteOrder;
use miniquant::GgmlType;
use miniquant_std::requantize::{
    requantize, BigEndianRefusal, Fallback, Options, RequantizeError, Summary, Target,
};
use miniquant_std::writer::GgufWriter;
use miniquant_std::GgufFile;

fn tiny_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/tiny.gguf")
}

fn target(t: GgmlType) -> Target {
    Target::of(t).expect("a requantize target")
}

fn options(threads: usize, allow_non_finite: bool) -> Options {
    Options {
        threads: NonZeroUsize::new(threads).expect("not 0"),
        allow_non_finite,
    }
}

/// What [`run`] returns: the result, the bytes written and every progress call.
type Run = (Result<Summary, RequantizeError>, Vec<u8>, Vec<(u64, u64)>);

/// Runs [`requantize`] into memory, recording every progress call.
fn run(file: &GgufFile, t: GgmlType, options: &Options) -> Run {
    let calls = Mutex::new(Vec::new());
    let mut out = Vec::new();
    let result = requantize(file, &mut out, target(t), options, &|done, total| {
        calls.lock().expect("no panic").push((done, total));
    });
    (result, out, calls.into_inner().expect("no panic"))
}

/// Progress starts at 0, never goes back, keeps one total, and ends at it.
fn assert_progress_complete(calls: &[(u64, u64)]) -> u64 {
    let total = calls.first().expect("at least one call").1;
    assert_eq!(calls.first(), Some(&(0, total)), "{calls:?}");
    assert_eq!(calls.last(), Some(&(total, total)), "{calls:?}");
    assert!(calls.iter().all(|&(_, t)| t == total), "{calls:?}");
    assert!(calls.windows(2).all(|w| w[0].0 <= w[1].0), "{calls:?}");
    total
}

#[test]
fn tiny_to_q6_k_reports_progress_to_the_total_and_parses() {
    let file = GgufFile::open(tiny_path()).expect("tiny.gguf");
    let (result, out, calls) = run(&file, GgmlType::Q6_K, &options(2, false));
    let summary = result.expect("converted");
    let total = assert_progress_complete(&calls);

    let converted = GgufFile::from_reader(&out[..]).expect("the output parses and validates");
    let data_bytes: u64 = converted.index().tensors().iter().map(|t| t.bytes).sum();
    assert_eq!(
        total, data_bytes,
        "progress counts the output's tensor data"
    );
    let types: Vec<(&str, GgmlType)> = converted
        .index()
        .tensors()
        .iter()
        .map(|t| (t.name.as_str(), t.ggml_type))
        .collect();
    assert_eq!(
        types,
        [
            // Rows of 8: not whole Q6_K nor Q8_0 blocks, F16 already.
            ("token_embd.weight", GgmlType::F16),
            ("output_norm.weight", GgmlType::F32),
            // Rows of 64: ggml's fallback, Q8_0, is its type already.
            ("blk.0.attn_q.weight", GgmlType::Q8_0),
            // Rows of 32: Q8_0 (fallback), from Q4_0.
            ("blk.0.ffn_up.weight", GgmlType::Q8_0),
            ("blk.0.ffn_down.weight", GgmlType::Q6_K),
        ]
    );
    assert_eq!(
        (summary.converted, summary.copied, summary.to_target()),
        (2, 3, 1)
    );
    assert_eq!(
        summary.fallbacks,
        [Fallback {
            ggml_type: GgmlType::Q8_0,
            tensors: 1,
            row_lengths: vec![32],
        }]
    );
    assert_eq!(
        summary.fallbacks[0].reason(GgmlType::Q6_K),
        "rows of 32 values are not a multiple of 256 (Q6_K's block size)"
    );
    assert_eq!(summary.bytes_out, out.len() as u64);
    assert_eq!(
        summary.bytes_in,
        std::fs::metadata(tiny_path()).unwrap().len()
    );
}

/// The command is this library function behind an `Output`: the same bytes (from another thread
/// count, which must not matter either).
#[cfg(feature = "cli")]
#[test]
fn the_command_writes_the_library_bytes() {
    use miniquant_std::cli::{self, Cli, Command};
    let file = GgufFile::open(tiny_path()).expect("tiny.gguf");
    for t in [GgmlType::Q6_K, GgmlType::IQ4_XS, GgmlType::BF16] {
        let (result, library_bytes, _) = run(&file, t, &options(3, false));
        result.expect("converted");
        let path = std::env::temp_dir().join(format!(
            "miniquant-requantize-lib-{}-{t}.gguf",
            std::process::id()
        ));
        let command = Cli {
            command: Command::Requantize {
                input: tiny_path(),
                output: path.clone(),
                target: target(t),
                threads: NonZeroUsize::new(1),
                allow_non_finite: false,
            },
            no_mmap: false,
        };
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = cli::run(&command, &mut out, &mut err);
        assert_eq!(code, 0, "{}", String::from_utf8_lossy(&err));
        let command_bytes = std::fs::read(&path).expect("the command's output");
        std::fs::remove_file(&path).expect("remove");
        assert!(command_bytes == library_bytes, "{t}: the bytes differ");
    }
}

#[test]
fn rows_without_a_fallback_are_refused_before_anything_is_written() {
    let file = GgufFile::open(tiny_path()).expect("tiny.gguf");
    let (result, out, calls) = run(&file, GgmlType::Q8_0, &options(2, false));
    let e = result.expect_err("token_embd.weight has rows of 8 values");
    assert!(
        matches!(&e, RequantizeError::NoFallback { tensor, target: GgmlType::Q8_0, row_length: 8 }
            if tensor == "token_embd.weight"),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "tensor \"token_embd.weight\": rows of 8 values are not whole Q8_0 blocks and ggml \
         defines no fallback for Q8_0"
    );
    assert!(
        out.is_empty() && calls.is_empty(),
        "{} bytes, {calls:?}",
        out.len()
    );
}

/// An F32 weight of 300 rows of 64 values, `i * 1e-3` at flat index `i`, with NaN at row 200,
/// column 5 and -inf at row 250, column 0.
fn weights_with_non_finite(byte_order: ByteOrder) -> GgufFile {
    let mut values: Vec<f32> = (0..300 * 64).map(|i| i as f32 * 1e-3).collect();
    values[200 * 64 + 5] = f32::NAN;
    values[250 * 64] = f32::NEG_INFINITY;
    let bytes: Vec<u8> = match byte_order {
        ByteOrder::Big => values.iter().flat_map(|v| v.to_be_bytes()).collect(),
        _ => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
    };
    let mut w = GgufWriter::new();
    w.format(3, byte_order);
    w.kv("general.architecture", "llama");
    w.tensor("blk.0.ffn_up.weight", GgmlType::F32, &[64, 300], bytes);
    GgufFile::from_reader(&w.to_bytes()[..]).expect("a valid file")
}

#[test]
fn a_non_finite_value_is_named_by_tensor_row_and_column() {
    let file = weights_with_non_finite(ByteOrder::Little);
    // 3 threads of 100 rows: the NaN is the first row of the third.
    for threads in [1, 3] {
        let (result, _, _) = run(&file, GgmlType::Q8_0, &options(threads, false));
        let e = result.expect_err("NaN refused");
        match &e {
            RequantizeError::NonFinite {
                tensor,
                new_type: GgmlType::Q8_0,
                row: 200,
                column: 5,
                value,
            } if tensor == "blk.0.ffn_up.weight" && value.is_nan() => {}
            other => panic!("{threads} threads: {other:?}"),
        }
        assert_eq!(
            e.to_string(),
            "tensor \"blk.0.ffn_up.weight\" holds NaN at row 200, column 5; quantizing it to Q8_0 \
             would give a block of NaN or inf"
        );
    }
    let (result, out, calls) = run(&file, GgmlType::Q8_0, &options(3, true));
    result.expect("allowed");
    assert_progress_complete(&calls);
    let converted = GgufFile::from_reader(&out[..]).expect("parses");
    assert_eq!(converted.index().tensors()[0].ggml_type, GgmlType::Q8_0);
}

#[test]
fn a_big_endian_file_keeps_its_order_or_is_refused_up_front() {
    let little = weights_with_non_finite(ByteOrder::Little);
    let big = weights_with_non_finite(ByteOrder::Big);
    let allow = options(2, true);
    let (little_result, little_out, _) = run(&little, GgmlType::Q8_0, &allow);
    let (big_result, big_out, _) = run(&big, GgmlType::Q8_0, &allow);
    little_result.expect("little");
    big_result.expect("big");
    let (little_out, big_out) = (
        GgufFile::from_reader(&little_out[..]).expect("parses"),
        GgufFile::from_reader(&big_out[..]).expect("parses"),
    );
    assert_eq!(big_out.index().byte_order(), Some(ByteOrder::Big));
    assert_eq!(
        big_out
            .native_data_of(&big_out.index().tensors()[0])
            .expect("Q8_0 reads"),
        little_out
            .data_of(&little_out.index().tensors()[0])
            .expect("data"),
        "the big-endian output holds the little-endian output's blocks in big-endian layout"
    );

    for (t, new_type) in [
        (GgmlType::Q4_1, GgmlType::Q4_1),
        (GgmlType::Q4_K, GgmlType::Q5_0),
    ] {
        let (result, out, calls) = run(&big, t, &allow);
        let e = result.expect_err("no big-endian layout");
        let expected = BigEndianRefusal::Target {
            tensor: "blk.0.ffn_up.weight".into(),
            new_type,
            target: t,
            row_length: 64,
        };
        assert!(
            matches!(&e, RequantizeError::BigEndian(r) if *r == expected),
            "{e:?}"
        );
        assert!(
            out.is_empty() && calls.is_empty(),
            "{t}: something was written"
        );
    }
}

/// An output that fails every write.
struct Broken;

impl Write for Broken {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        Err(io::Error::other("disk on fire"))
    }
    fn flush(&mut self) -> io::Result<()> {
        Err(io::Error::other("disk on fire"))
    }
}

#[test]
fn a_failing_output_is_an_error() {
    let file = GgufFile::open(tiny_path()).expect("tiny.gguf");
    let progress = |_, _| {};
    let e = requantize(
        &file,
        Broken,
        target(GgmlType::F16),
        &options(2, false),
        &progress,
    )
    .expect_err("nothing can be written");
    assert!(
        matches!(&e, RequantizeError::Io(io) if io.to_string() == "disk on fire")
            || matches!(&e, RequantizeError::Write(_)),
        "{e:?}"
    );
}
