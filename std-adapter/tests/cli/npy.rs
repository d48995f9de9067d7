//! `.npy` inputs and outputs of every command that reads or writes f32 (`matvec` x and y,
//! `quantize-raw`, `dequant-raw`, `dequant`), checked against NumPy itself: arrays made by
//! `numpy.save` are read as the same values as their raw twins, and what the commands write
//! `numpy.load` reads with the right dtype and shape. Anything else is refused in one line that names
//! the file and what it holds, leaving no output behind.

use crate::common;

#[allow(dead_code)]
#[path = "../../../tests/src/cache.rs"]
mod cache;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{assert_no_panic, f32_bytes, f32_values, miniquant, scratch_dir, scratch_file};

fn tiny() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/tiny.gguf")
        .to_str()
        .unwrap()
        .to_owned()
}

fn scratch(name: &str) -> PathBuf {
    let path = scratch_dir().join(name);
    let _ = std::fs::remove_file(&path);
    path
}

fn text(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Runs `script` (with `numpy as np` imported and the paths as `sys.argv[1:]`) in the gguf-py venv.
fn numpy(script: &str, paths: &[&Path]) {
    let output = Command::new(cache::gguf_py_python())
        .arg("-c")
        .arg(format!("import sys\nimport numpy as np\n{script}"))
        .args(paths)
        .output()
        .expect("python runs");
    assert!(
        output.status.success(),
        "numpy script failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Deterministic values in [-2, 2), exact in f32.
fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n as u32)
        .map(|i| ((i.wrapping_mul(2654435761) ^ seed) >> 8) as f32 / (1u32 << 22) as f32 - 2.0)
        .collect()
}

/// `np.load(npy)` has `dtype` and `shape`; its bytes are written to `raw` for comparison.
fn numpy_load(npy: &Path, dtype: &str, shape: &str, raw: &Path) {
    numpy(
        &format!(
            "a = np.load(sys.argv[1])\n\
             assert a.dtype == np.dtype('{dtype}'), a.dtype\n\
             assert a.shape == {shape}, a.shape\n\
             open(sys.argv[2], 'wb').write(a.tobytes())"
        ),
        &[npy, raw],
    );
}

#[test]
fn matvec_reads_x_saved_by_numpy_and_writes_y_numpy_loads() {
    let x = values(64, 7);
    let x_raw = scratch_file("npy-mv-x.f32", &f32_bytes(&x));
    let x_npy = scratch("npy-mv-x.npy");
    numpy(
        "np.save(sys.argv[2], np.fromfile(sys.argv[1], dtype='<f4'))",
        &[Path::new(&x_raw), &x_npy],
    );
    let y_raw = scratch("npy-mv-y.f32");
    let run = miniquant(&[
        "matvec",
        &tiny(),
        "blk.0.attn_q.weight",
        &x_raw,
        "-o",
        text(&y_raw),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let expected = std::fs::read(&y_raw).unwrap();
    assert_eq!(expected.len(), 2 * 4);

    // x.npy read as the same 64 values, y.npy by extension, and y.npy by --format to stdout.
    let y_npy = scratch("npy-mv-y.npy");
    let run = miniquant(&[
        "matvec",
        &tiny(),
        "blk.0.attn_q.weight",
        text(&x_npy),
        "-o",
        text(&y_npy),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let loaded = scratch("npy-mv-y-loaded.f32");
    numpy_load(&y_npy, "<f4", "(2,)", &loaded);
    assert_eq!(std::fs::read(&loaded).unwrap(), expected);

    let run = miniquant(&[
        "matvec",
        &tiny(),
        "blk.0.attn_q.weight",
        text(&x_npy),
        "--format",
        "npy",
        "-o",
        "-",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, std::fs::read(&y_npy).unwrap());
}

#[test]
fn quantize_raw_and_dequant_raw_round_trip_through_numpy() {
    let x = values(1536, 3);
    let x_raw = scratch_file("npy-q-x.f32", &f32_bytes(&x));
    let x_npy = scratch("npy-q-x.npy");
    let x_matrix = scratch("npy-q-x-3x512.npy");
    numpy(
        "a = np.fromfile(sys.argv[1], dtype='<f4')\n\
         np.save(sys.argv[2], a)\n\
         np.save(sys.argv[3], a.reshape(3, 512))",
        &[Path::new(&x_raw), &x_npy, &x_matrix],
    );
    let q_raw = scratch("npy-q.bin");
    let run = miniquant(&["quantize-raw", "--type", "q8_0", &x_raw, text(&q_raw)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let blocks = std::fs::read(&q_raw).unwrap();
    assert_eq!(blocks.len(), 1536 / 32 * 34);

    // The same blocks from the 1-D and the 2-D array; to a .npy name, a uint8 array of them.
    for input in [&x_npy, &x_matrix] {
        let q = scratch("npy-q-from-npy.bin");
        let run = miniquant(&["quantize-raw", "--type", "q8_0", text(input), text(&q)]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert_eq!(
            run.stderr.lines().next().unwrap().split(" -> ").next(),
            Some("1536 f32 values")
        );
        assert_eq!(std::fs::read(&q).unwrap(), blocks, "{}", input.display());
    }
    let q_npy = scratch("npy-q.npy");
    let run = miniquant(&["quantize-raw", "--type", "q8_0", text(&x_npy), text(&q_npy)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let loaded = scratch("npy-q-loaded.bin");
    numpy_load(&q_npy, "|u1", &format!("({},)", blocks.len()), &loaded);
    assert_eq!(std::fs::read(&loaded).unwrap(), blocks);

    // dequant-raw reads the .npy of blocks and writes a .npy numpy loads.
    let y_raw = scratch("npy-dq.f32");
    let run = miniquant(&["dequant-raw", "--type", "q8_0", text(&q_raw), text(&y_raw)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let y_npy = scratch("npy-dq.npy");
    let run = miniquant(&["dequant-raw", "--type", "q8_0", text(&q_npy), text(&y_npy)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let loaded = scratch("npy-dq-loaded.f32");
    numpy_load(&y_npy, "<f4", "(1536,)", &loaded);
    let y = std::fs::read(&y_raw).unwrap();
    assert_eq!(std::fs::read(&loaded).unwrap(), y);
    // Q8_0 is close to its input: the values were read as the values, not the header.
    let err = f32_values(&y)
        .iter()
        .zip(&x)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(err < 0.02, "max error {err}");
}

#[test]
fn dequant_npy_output_loads_in_numpy() {
    let out = scratch("npy-dequant.npy");
    let run = miniquant(&[
        "dequant",
        &tiny(),
        "blk.0.ffn_down.weight",
        "-o",
        text(&out),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let raw = scratch("npy-dequant.f32");
    let run = miniquant(&[
        "dequant",
        &tiny(),
        "blk.0.ffn_down.weight",
        "-o",
        text(&raw),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let loaded = scratch("npy-dequant-loaded.f32");
    numpy_load(&out, "<f4", "(2, 256)", &loaded);
    assert_eq!(
        std::fs::read(&loaded).unwrap(),
        std::fs::read(&raw).unwrap()
    );
}

/// A refused input: exit 1, one `error:` line holding `expected`, no output file.
fn assert_refused(args: &[&str], output: &Path, expected: &str) {
    let run = miniquant(args);
    assert_no_panic(&run);
    assert_eq!(run.code, 1, "{args:?}: {}", run.stderr);
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    assert!(run.stderr.starts_with("error: "), "{}", run.stderr);
    assert!(
        run.stderr.contains(expected),
        "{:?} lacks {expected:?}",
        run.stderr
    );
    assert!(!output.exists(), "{} left behind", output.display());
}

#[test]
fn npy_of_another_dtype_shape_or_order_is_refused_by_name() {
    let dir = scratch_dir();
    let made: Vec<PathBuf> = [
        "npy-bad-f64.npy",
        "npy-bad-be.npy",
        "npy-bad-i32.npy",
        "npy-bad-2d.npy",
        "npy-bad-fortran.npy",
        "npy-bad-rows.npy",
        "npy-bad-named.f32",
    ]
    .iter()
    .map(|n| dir.join(n))
    .collect();
    let paths: Vec<&Path> = made.iter().map(PathBuf::as_path).collect();
    numpy(
        "x = np.linspace(-1, 1, 64)\n\
         np.save(sys.argv[1], x)\n\
         np.save(sys.argv[2], x.astype('>f4'))\n\
         np.save(sys.argv[3], np.arange(64, dtype='<i4'))\n\
         np.save(sys.argv[4], x.astype('<f4').reshape(1, 64))\n\
         np.save(sys.argv[5], np.asfortranarray(np.linspace(-1, 1, 96, dtype='<f4').reshape(3, 32)))\n\
         np.save(sys.argv[6], np.linspace(-1, 1, 96, dtype='<f4').reshape(6, 16))\n\
         np.save(sys.argv[7], x.astype('<f4'))\n\
         import os; os.rename(sys.argv[7] + '.npy', sys.argv[7])",
        &paths,
    );
    let [f64, be, i32, two_d, fortran, rows, named] = &made[..] else {
        unreachable!()
    };
    let y = scratch("npy-bad-y.f32");
    let mv = |x: &Path| -> Vec<String> {
        [
            "matvec",
            &tiny(),
            "blk.0.attn_q.weight",
            text(x),
            "-o",
            text(&y),
        ]
        .map(str::to_owned)
        .to_vec()
    };
    let refused = |args: Vec<String>, expected: String| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_refused(&args, &y, &expected);
    };
    refused(
        mv(f64),
        format!(
            "{:?} holds float64 ('<f8'), not float32 ('<f4'): save a.astype('<f4')",
            text(f64)
        ),
    );
    refused(
        mv(be),
        format!("{:?} holds big-endian float32 ('>f4')", text(be)),
    );
    refused(mv(i32), format!("{:?} holds int32 ('<i4')", text(i32)));
    refused(
        mv(two_d),
        format!(
            "{:?} has shape (1, 64): matvec needs a 1-D vector of 64 values",
            text(two_d)
        ),
    );
    refused(
        mv(named),
        format!(
            "{:?} starts with NumPy's magic but is not named .npy",
            text(named)
        ),
    );
    let quantize = |x: &Path| -> Vec<String> {
        ["quantize-raw", "--type", "q8_0", text(x), text(&y)]
            .map(str::to_owned)
            .to_vec()
    };
    refused(
        quantize(fortran),
        format!("{:?} is in Fortran order (shape (3, 32))", text(fortran)),
    );
    refused(
        quantize(rows),
        format!(
            "{:?} has shape (6, 16): rows of 16 values are not whole Q8_0 blocks",
            text(rows)
        ),
    );
    // With --format raw, a file is read as raw f32 whatever it starts with.
    let run = miniquant(&[
        "quantize-raw",
        "--type",
        "f32",
        "--format",
        "raw",
        text(named),
        text(&y),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(std::fs::read(&y).unwrap(), std::fs::read(named).unwrap());
    let _ = std::fs::remove_file(&y);
    // dequant-raw's .npy input holds bytes.
    refused(
        ["dequant-raw", "--type", "q8_0", text(f64), text(&y)]
            .map(str::to_owned)
            .to_vec(),
        format!("{:?} holds float64 ('<f8'), not uint8 ('|u1')", text(f64)),
    );
}

#[test]
fn hostile_npy_headers_are_one_line_errors() {
    let y = scratch("npy-hostile-y.f32");
    let dict = |d: &str| {
        let mut f = b"\x93NUMPY\x01\x00".to_vec();
        f.extend((d.len() as u16).to_le_bytes());
        f.extend(d.as_bytes());
        f
    };
    let cases: [(&str, Vec<u8>, &str); 5] = [
        (
            "npy-h-short.npy",
            b"\x93NUMPY\x01".to_vec(),
            "cut short after its magic",
        ),
        (
            "npy-h-long.npy",
            b"\x93NUMPY\x01\x00\xff\x7f{'descr'".to_vec(),
            "header of 32767 bytes but only 8",
        ),
        (
            "npy-h-huge.npy",
            dict("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 8), }"),
            "too large",
        ),
        (
            "npy-h-nested.npy",
            dict(&format!(
                "{{'descr': '<f4', 'fortran_order': False, 'shape': {}, }}",
                "(".repeat(10_000)
            )),
            "expected a dimension",
        ),
        (
            "npy-h-pickle.npy",
            dict("{'descr': '|O', 'fortran_order': False, 'shape': (64,), }"),
            "holds type |O",
        ),
    ];
    for (name, bytes, expected) in cases {
        let x = scratch_file(name, &bytes);
        assert_refused(
            &["matvec", &tiny(), "blk.0.attn_q.weight", &x, "-o", text(&y)],
            &y,
            expected,
        );
    }
}
