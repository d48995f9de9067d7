//! Writes the fuzz targets' seed inputs into `fuzz/corpus/<target>/`: hostile headers built with
//! the test crate's byte-level writer (the shapes of the hostile-header suite), the example file,
//! truncated real headers, and valid files from the core writer.
//!
//! `cargo run -p miniquant-tests --example fuzz_seeds [DIR]` (default `fuzz/corpus`); the fuzz
//! task runs it before a campaign, and `cargo fuzz cmin` keeps the seeds that add coverage.

use std::path::{Path, PathBuf};

use miniquant_tests::cache::{find_model, MODEL_FILES};
use miniquant_tests::craft::{code, Endian, Value, Writer};

fn file(tensors: u64, kvs: u64) -> Writer {
    let mut w = Writer::new();
    w.header(3, tensors, kvs);
    w
}

/// Hostile headers: one per kind of problem the hostile suite covers.
fn hostile() -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = Vec::new();
    let mut add = |name: &str, w: &Writer| out.push((name.to_owned(), w.bytes().to_vec()));
    for (name, t, v) in [
        ("alignment-u32-0", code::U32, Value::U32(0)),
        ("alignment-u32-3", code::U32, Value::U32(3)),
        ("alignment-u8-0", code::U8, Value::U8(0)),
        ("alignment-u64-64", code::U64, Value::U64(64)),
        ("alignment-string", code::STRING, Value::str("32")),
    ] {
        let mut w = file(0, 1);
        w.string(b"general.alignment").u32(t).value(&v);
        add(name, &w);
    }
    let mut w = file(0, 2);
    w.kv(b"general.alignment", &Value::U32(32))
        .kv(b"general.alignment", &Value::U32(0));
    add("alignment-duplicate", &w);
    add("metadata-count-2-62", &file(0, 1 << 62));
    add("tensor-count-2-40", &file(1 << 40, 0));
    let mut w = file(0, 1);
    w.key(b"k", code::STRING).lying_string(1 << 40, b"abc");
    add("string-length-lies", &w);
    for (name, et, len) in [
        ("u8-array-2-62", code::U8, 1u64 << 62),
        ("u64-array-2-61", code::U64, 1 << 61),
        ("string-array-2-61", code::STRING, 1 << 61),
        ("array-type-13", 13, 1),
    ] {
        let mut w = file(0, 1);
        w.key(b"k", code::ARRAY).array_header(et, len).raw(&[0; 16]);
        add(name, &w);
    }
    let mut w = file(0, 1);
    w.key(b"k", 13).raw(&[0; 8]);
    add("value-type-13", &w);
    let mut w = file(0, 1);
    w.key(b"k", code::ARRAY)
        .nested_arrays(40, code::U8, 1)
        .u8(1);
    add("nested-40", &w);
    let mut w = file(0, 1);
    w.key(b"k", code::ARRAY)
        .array_header(code::STRING, 3)
        .string(b"a")
        .lying_string(u64::MAX, b"b");
    add("string-array-lying-length", &w);
    for (name, ne, t, offset) in [
        ("shape-overflow", vec![1u64 << 32; 3], 0u32, 0u64),
        ("dimension-u64-max", vec![u64::MAX], 0, 0),
        ("five-dims", vec![1; 5], 0, 0),
        ("misaligned", vec![4], 0, 4),
        ("offset-near-2-64", vec![32], 0, u64::MAX - 31),
        ("removed-type-4", vec![32], 4, 0),
        ("unknown-type-99", vec![32], 99, 0),
        ("partial-block", vec![31], 2, 0),
        ("scalar-tensor", vec![], 0, 0),
    ] {
        let mut w = file(1, 0);
        w.tensor_info(b"t", &ne, t, offset)
            .pad_to(32, 0)
            .raw(&[0; 64]);
        add(name, &w);
    }
    let mut w = file(2, 0);
    w.tensor_info(b"t", &[8], 0, 0)
        .tensor_info(b"t", &[8], 0, 0)
        .pad_to(32, 0)
        .raw(&[0; 64]);
    add("duplicate-tensor-overlap", &w);
    let mut w = file(0, 2);
    w.kv(b"k", &Value::U8(1)).kv(b"k", &Value::U8(2));
    add("duplicate-key", &w);
    let mut w = file(0, 1);
    w.key(b"", code::U8).u8(1);
    add("empty-key", &w);
    let mut w = file(0, 1);
    w.key(b"a\0b", code::U8).u8(1);
    add("nul-key", &w);
    let mut w = file(0, 1);
    w.key(b"k", code::BOOL).u8(2);
    add("bool-2", &w);
    let mut w = file(0, 1);
    w.key(b"k", code::STRING).string(&[0xff, 0xfe]);
    add("bad-utf8", &w);
    let mut w = Writer::with(Endian::Big, true);
    w.header(3, 1, 1)
        .kv(b"k", &Value::array(vec![Value::U16(1), Value::U16(2)]))
        .tensor_info(b"t", &[4], 0, 0)
        .pad_to(32, 0)
        .raw(&[0; 16]);
    add("big-endian", &w);
    let mut w = Writer::for_version(1, Endian::Little);
    w.header(1, 1, 1)
        .kv(b"k", &Value::str("v1"))
        .tensor_info(b"t", &[4], 0, 0)
        .pad_to(32, 0)
        .raw(&[0; 16]);
    add("version-1", &w);
    out
}

fn real_headers() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for name in MODEL_FILES {
        let Ok(path) = find_model(name) else {
            eprintln!("{name} is not in the cache: no truncated real headers from it");
            continue;
        };
        let bytes = std::fs::read(path).expect("readable model file");
        for len in [512usize, 4096, 16384] {
            out.push((format!("{name}-{len}"), bytes[..len].to_vec()));
        }
    }
    out
}

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::create_dir_all(dir).expect("corpus directory");
    std::fs::write(dir.join(format!("seed-{name}")), bytes).expect("seed written");
}

fn main() {
    let root = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../fuzz/corpus")));
    let tiny = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/tiny.gguf"
    ))
    .expect("examples/tiny.gguf");
    let mut files = hostile();
    files.push(("tiny".into(), tiny));
    files.extend(real_headers());
    for (name, bytes) in &files {
        // header: four option bytes (small buffer, three chunk sizes), then the file.
        let mut input = vec![0u8, 0, 6, 63];
        input.extend_from_slice(bytes);
        write(&root.join("header"), name, &input);
        write(&root.join("validate"), name, bytes);
    }
    // kernels: a type index, an operation, then data; one per type and operation.
    for t in 0..35u8 {
        for op in 0..4u8 {
            let data: Vec<u8> = (0..300u32).map(|i| (i * 37 + u32::from(t)) as u8).collect();
            let mut input = vec![t, op | 0x80, 0x21];
            input.extend_from_slice(&data);
            write(&root.join("kernels"), &format!("t{t}-op{op}"), &input);
        }
    }
    // roundtrip: structure is drawn from the bytes; a few patterns give varied content.
    for seed in 0..8u32 {
        let data: Vec<u8> = (0..512u32)
            .map(|i| (i.wrapping_mul(2_654_435_761).rotate_left(seed) >> 24) as u8)
            .collect();
        write(&root.join("roundtrip"), &format!("pattern-{seed}"), &data);
    }
    // model: small llamas, valid and each with one thing wrong.
    for (name, bytes) in miniquant_fuzz_checks::model::seeds() {
        write(&root.join("model"), &name, &bytes);
    }
    println!("seeds written under {}", root.display());
}
