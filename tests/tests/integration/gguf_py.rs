//! A second dequantization oracle: gguf-py (PyPI `gguf`, numpy) through
//! `scripts/gguf_py_dequant.py`, compared with ours by `to_bits` for every type it can
//! dequantize, on ggml-quantized data and on raw blocks with sane and arbitrary scale fields.
//! How many values gguf-py and ggml disagree on is printed too, for information.
//!
//! Needs the venv that `python3 scripts/gguf_py_dequant.py --setup` creates under the cache
//! (`cargo xtask fetch` / `cargo xtask ci` run it); without it the test fails and says so.

use miniquant::quant::dequantize;
use miniquant::GgmlType;
use miniquant_tests::cache;
use miniquant_tests::data::{self, Rng, Scales};
use miniquant_tests::diff::{compare_floats, describe_float, nan_note, strict_nan, FloatDiff};
use miniquant_tests::ggml;
use miniquant_tests::report::Report;
use std::path::{Path, PathBuf};
use std::process::Command;

const SEED: u64 = 0x0067_6775_662d_7079;
const ROWS: usize = 64;
const COLS: usize = 4096;
const RAW_BLOCKS: usize = 2048;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/gguf_py_dequant.py")
}

/// ggml's blocks for `x`, through the reference or (IQ2_XXS, IQ2_XS, IQ1_S, IQ1_M) the imatrix
/// quantizer with uniform importance.
fn ggml_blocks(t: GgmlType, x: &[f32]) -> Option<Vec<u8>> {
    ggml::ggml_quantize_ref(t, x).or_else(|| {
        let n = t.block_size() as usize;
        ggml::ggml_quantize_imatrix(t, x, n, &vec![1.0; n])
    })
}

/// A set of blocks to dequantize, with the file names it travels through.
struct Job {
    t: GgmlType,
    set: &'static str,
    bytes: Vec<u8>,
    input: PathBuf,
    output: PathBuf,
}

fn read_f32(path: &Path) -> Vec<f32> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

#[test]
fn dequantize_matches_gguf_py() {
    let python = cache::gguf_py_python();
    let dir = std::env::temp_dir().join(format!("miniquant-gguf-py-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let gaussian = data::gaussian_rows(SEED, ROWS, COLS);
    let mut rng = Rng::new(SEED ^ 0x5eed);

    let mut jobs = Vec::new();
    for t in GgmlType::ALL {
        let mut sets = vec![
            (
                "raw blocks, sane scales",
                data::raw_blocks(t, RAW_BLOCKS, Scales::Sane, &mut rng),
            ),
            (
                "raw blocks, arbitrary scales",
                data::raw_blocks(t, RAW_BLOCKS / 4, Scales::Arbitrary, &mut rng),
            ),
        ];
        if let Some(blocks) = ggml_blocks(t, &gaussian) {
            sets.insert(0, ("ggml-quantized data", blocks));
        }
        for (i, (set, bytes)) in sets.into_iter().enumerate() {
            let input = dir.join(format!("{}-{i}.in", t.name()));
            let output = dir.join(format!("{}-{i}.out", t.name()));
            std::fs::write(&input, &bytes).expect("writing blocks");
            jobs.push(Job {
                t,
                set,
                bytes,
                input,
                output,
            });
        }
    }
    let mut command = Command::new(&python);
    command.arg(script());
    for job in &jobs {
        command.arg(job.t.name()).arg(&job.input).arg(&job.output);
    }
    let status = command.status().expect("running gguf_py_dequant.py");
    assert!(status.success(), "gguf_py_dequant.py failed: {status}");

    let mut report = Report::new("dequantize: ours vs gguf-py 0.19.0 (f32 bits)");
    for t in GgmlType::ALL {
        let of_type: Vec<&Job> = jobs.iter().filter(|j| j.t == t).collect();
        let unsupported = of_type[0].output.with_extension("out.unsupported");
        if let Ok(reason) = std::fs::read_to_string(&unsupported) {
            report.skip(t, format!("gguf-py: {}", reason.trim()));
            continue;
        }
        let (mut ours_vs_py, mut ggml_vs_py) = (FloatDiff::default(), FloatDiff::default());
        let (mut first, mut error) = (None, None);
        for job in of_type {
            let reference = read_f32(&job.output);
            let mut ours = vec![0f32; reference.len()];
            if let Err(e) = dequantize(t, &job.bytes, &mut ours) {
                error = Some(e);
                break;
            }
            let diff = compare_floats(&ours, &reference);
            if first.is_none() {
                first = diff.first.or(diff.first_nan).map(|f| {
                    format!(
                        "{}: {}",
                        job.set,
                        describe_float(f, t.block_size() as usize)
                    )
                });
            }
            ours_vs_py.absorb(&diff);
            if let Some(by_ggml) = ggml::ggml_dequantize(t, &job.bytes) {
                ggml_vs_py.absorb(&compare_floats(&by_ggml, &reference));
            }
        }
        let strict = matches!(t, GgmlType::F32 | GgmlType::BF16) || strict_nan();
        match error {
            Some(e) => report.fail(t, format!("miniquant returned an error: {e}")),
            None => report.check(
                t,
                ours_vs_py.is_identical(strict),
                format!(
                    "{} values compared, {} differ{} [ggml vs gguf-py: {} differ, {} NaN bits]",
                    ours_vs_py.values,
                    ours_vs_py.differing,
                    nan_note(ours_vs_py.nan_bits, strict),
                    ggml_vs_py.differing,
                    ggml_vs_py.nan_bits
                ),
                first,
            ),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    report.finish();
}
