//! `dequant --rows`, `.npy` output, `-o -`, `dequant-raw`, and the library helpers they share
//! with (`GgufFile::dequantize_tensor`, `matvec_tensor`, `TensorEntry::rows/cols`).

use crate::common;

use common::{assert_no_panic, f32_bytes, f32_values, miniquant, scratch_dir, scratch_file};
use miniquant::{quant, GgmlType};
use miniquant_std::writer::GgufWriter;
use miniquant_std::GgufFile;

/// `n` values in [-1, 1) from a small generator.
fn values(n: usize, seed: u32) -> Vec<f32> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (state >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

/// One Q8_0 tensor of shape [6, 64] (6 rows of 64) made from known values, in a scratch file
/// of its own per test (tests run in parallel).
fn q8_model(file_name: &str) -> (String, Vec<u8>) {
    let x = values(6 * 64, 9);
    let mut blocks = vec![0u8; quant::bytes_for(GgmlType::Q8_0, x.len()).unwrap()];
    quant::quantize(GgmlType::Q8_0, &x, &mut blocks).unwrap();
    let mut w = GgufWriter::new();
    w.tensor("w", GgmlType::Q8_0, &[64, 6], blocks.clone());
    (scratch_file(file_name, &w.to_bytes()), blocks)
}

#[test]
fn rows_are_a_slice_of_the_whole_and_stdout_works() {
    let (gguf, _) = q8_model("dq-rows.gguf");
    let whole = miniquant(&["dequant", &gguf, "w", "-o", "-"]);
    assert_eq!(whole.code, 0, "{}", whole.stderr);
    let whole = f32_values(&whole.stdout);
    assert_eq!(whole.len(), 6 * 64);
    for (range, rows) in [("2..5", 2..5), ("4..", 4..6), ("..1", 0..1), ("3..3", 3..3)] {
        let run = miniquant(&["dequant", &gguf, "w", "--rows", range, "-o", "-"]);
        assert_eq!(run.code, 0, "{range}: {}", run.stderr);
        assert_eq!(
            f32_values(&run.stdout),
            whole[rows.start * 64..rows.end * 64],
            "{range}"
        );
        assert!(
            run.stderr.starts_with(&format!(
                "w  Q8_0  [6, 64] rows {}..{}  {} elements  ",
                rows.start,
                rows.end,
                (rows.end - rows.start) * 64
            )),
            "{range}: {}",
            run.stderr
        );
    }
    let run = miniquant(&["dequant", &gguf, "w", "--rows", "5..7", "-o", "-"]);
    assert_no_panic(&run);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr,
        "error: rows 5..7 are outside tensor \"w\", which has 6 rows of 64 elements (shape [6, 64])\n"
    );
    assert!(run.stdout.is_empty());
    let run = miniquant(&["dequant", &gguf, "w", "--rows", "4..2"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
}

/// Parses a version-1.0 `.npy` of `<f4`: the shape as written and the values.
fn read_npy(bytes: &[u8]) -> (String, Vec<f32>) {
    assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
    let header_len = usize::from(u16::from_le_bytes([bytes[8], bytes[9]]));
    let data_start = 10 + header_len;
    assert_eq!(data_start % 64, 0);
    let dict = std::str::from_utf8(&bytes[10..data_start]).unwrap();
    assert!(
        dict.starts_with("{'descr': '<f4', 'fortran_order': False, 'shape': ("),
        "{dict}"
    );
    let shape = dict.split("'shape': ").nth(1).unwrap();
    let shape = shape[..shape.find(')').unwrap() + 1].to_owned();
    (shape, f32_values(&bytes[data_start..]))
}

#[test]
fn npy_by_extension_or_flag_holds_the_shape_and_the_same_values() {
    let (gguf, _) = q8_model("dq-npy.gguf");
    let raw = f32_values(&miniquant(&["dequant", &gguf, "w", "-o", "-"]).stdout);
    let out = scratch_dir().join("dq-w.npy");
    let run = miniquant(&["dequant", &gguf, "w", "-o", out.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        read_npy(&std::fs::read(&out).unwrap()),
        ("(6, 64)".to_owned(), raw.clone())
    );
    let run = miniquant(&[
        "dequant", &gguf, "w", "--rows", "1..2", "--format", "npy", "-o", "-",
    ]);
    assert_eq!(
        read_npy(&run.stdout),
        ("(1, 64)".to_owned(), raw[64..128].to_vec())
    );
}

#[test]
fn dequant_raw_is_dequant_of_the_same_blocks() {
    let (gguf, blocks) = q8_model("dq-raw.gguf");
    let from_gguf = miniquant(&["dequant", &gguf, "w", "-o", "-"]).stdout;
    let blocks_path = scratch_file("dq-raw.q8_0", &blocks);
    let run = miniquant(&["dequant-raw", "--type", "q8_0", &blocks_path, "-"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, from_gguf);
    assert!(
        run.stderr
            .starts_with("12 Q8_0 blocks -> 384 elements  min "),
        "{}",
        run.stderr
    );
    let out = scratch_dir().join("dq-raw.npy");
    let run = miniquant(&[
        "dequant-raw",
        "--type",
        "Q8_0",
        &blocks_path,
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let (shape, npy_values) = read_npy(&std::fs::read(&out).unwrap());
    assert_eq!(
        (shape.as_str(), npy_values),
        ("(384,)", f32_values(&from_gguf))
    );
    // A partial block and a wrong type are refused.
    let cut = scratch_file("dq-raw-cut.q8_0", &blocks[..40]);
    let run = miniquant(&["dequant-raw", "--type", "Q8_0", &cut, "-"]);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr,
        format!(
            "error: \"{cut}\" is 40 bytes, not a whole number of Q8_0 blocks (34 bytes each)\n"
        )
    );
    let run = miniquant(&["dequant-raw", "--type", "Q4_K_M", &cut, "-"]);
    assert_eq!(run.code, 2);
}

#[test]
fn library_helpers_agree_with_the_cli() {
    let (gguf, _) = q8_model("dq-lib.gguf");
    let file = GgufFile::open(&gguf).unwrap();
    let w = file.index().tensor("w").unwrap();
    assert_eq!((w.rows(), w.cols(), w.row_bytes()), (6, 64, 68));
    let cli = f32_values(&miniquant(&["dequant", &gguf, "w", "-o", "-"]).stdout);
    assert_eq!(file.dequantize_tensor("w", 2).unwrap(), cli);
    assert_eq!(file.rows_data(w, 1..3).unwrap().len(), 2 * 68);
    assert!(file.rows_data(w, 5..7).is_err());

    let x = values(64, 3);
    let x_path = scratch_file("dq-x.f32", &f32_bytes(&x));
    let run = miniquant(&["matvec", &gguf, "w", &x_path, "-o", "-"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        file.matvec_tensor("w", &x, 2).unwrap(),
        f32_values(&run.stdout)
    );
    assert!(file.matvec_tensor("w", &x[..32], 1).is_err());
    // The library's error names the file it was opened from.
    assert_eq!(
        file.dequantize_tensor("nope", 1).unwrap_err().to_string(),
        format!("{gguf:?}: no tensor named \"nope\"")
    );
}
