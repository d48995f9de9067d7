//! A partly downloaded file (cut inside its tensor data): the tensors wholly present can be
//! dequantized, multiplied and extracted; reading a cut one fails with one line that names it and
//! says how much of it is there; the commands that need every tensor refuse with the one
//! truncation line.

use crate::common;

use common::{assert_no_panic, f32_bytes, f32_values, miniquant, scratch_dir, scratch_file};
use miniquant::{quant, GgmlType};
use miniquant_std::writer::GgufWriter;
use miniquant_std::Index;

/// `early` (F32, wholly present) and `late` (Q8_0, cut after `kept` of its bytes).
fn partial_download(name: &str, kept: usize) -> (String, Vec<u8>, u64) {
    let early: Vec<f32> = (0..32).map(|i| i as f32 - 16.0).collect();
    let late: Vec<f32> = (0..4 * 64).map(|i| (i % 7) as f32).collect();
    let mut blocks = vec![0u8; quant::bytes_for(GgmlType::Q8_0, late.len()).unwrap()];
    quant::quantize(GgmlType::Q8_0, &late, &mut blocks).unwrap();
    let mut w = GgufWriter::new();
    w.kv("general.architecture", "llama")
        .tensor("early", GgmlType::F32, &[32, 1], f32_bytes(&early))
        .tensor("late", GgmlType::Q8_0, &[64, 4], blocks);
    let whole = w.to_bytes();
    let index = Index::from_bytes(&whole).unwrap();
    let late_start = index
        .data_range(index.tensor("late").unwrap())
        .unwrap()
        .start as usize;
    let cut = &whole[..late_start + kept];
    (scratch_file(name, cut), whole, 4 * 2 * 34)
}

#[test]
fn tensors_wholly_present_are_read_and_cut_ones_named() {
    let (path, _, late_bytes) = partial_download("partial.gguf", 100);

    let run = miniquant(&["dequant", &path, "early", "-o", "-"]);
    assert_no_panic(&run);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        f32_values(&run.stdout),
        (0..32).map(|i| i as f32 - 16.0).collect::<Vec<_>>()
    );

    let expected = format!(
        "error: tensor \"late\" is cut at byte 100 of {late_bytes}: the file is truncated (a \
         partial download?); the tensors wholly present can still be read\n"
    );
    let run = miniquant(&["dequant", &path, "late", "-o", "-"]);
    assert_eq!((run.code, run.stderr.as_str()), (1, expected.as_str()));
    assert!(run.stdout.is_empty());

    let x = scratch_file("partial-x.f32", &f32_bytes(&[1.0; 64]));
    let run = miniquant(&["matvec", &path, "late", &x, "-o", "-"]);
    assert_eq!((run.code, run.stderr.as_str()), (1, expected.as_str()));
    let x32 = scratch_file("partial-x32.f32", &f32_bytes(&[1.0; 32]));
    let run = miniquant(&["matvec", &path, "early", &x32, "-o", "-"]);
    assert_eq!(run.code, 0, "{}", run.stderr);

    // extract: the present tensor alone makes a valid file; every tensor names the cut one and
    // leaves no output.
    let dir = scratch_dir();
    let out = dir.join("partial-early.gguf");
    let run = miniquant(&["extract", &path, out.to_str().unwrap(), "--tensor", "early"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = miniquant(&["validate", out.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let all = dir.join("partial-all.gguf");
    let run = miniquant(&["extract", &path, all.to_str().unwrap()]);
    assert_eq!((run.code, run.stderr.as_str()), (1, expected.as_str()));
    assert!(!all.exists());

    // validate and requantize (which need every tensor) say it in one line.
    for args in [
        vec!["validate", path.as_str()],
        vec![
            "requantize",
            path.as_str(),
            "/nonexistent/o.gguf",
            "--type",
            "q8_0",
        ],
    ] {
        let run = miniquant(&args);
        assert_eq!(run.code, 1, "{args:?}");
        let lines = run.stderr_lines();
        assert_eq!(lines.len(), 1, "{args:?}: {}", run.stderr);
        assert!(
            lines[0].starts_with("error: file is truncated: it has "),
            "{args:?}: {}",
            lines[0]
        );
    }
}
