//! `miniquant inspect --json` on both real files, checked against gguf-py's `GGUFReader` (an
//! independent reader) by `scripts/compare_json_gguf_py.py`: every key, type and value (floats by
//! bits, arrays in full), every tensor's type, shape, offset and size, and the data offset.
//! Needs the gguf-py venv that `cargo xtask fetch` sets up.

use miniquant_std::file::GgufFile;
use miniquant_tests::cache;
use std::path::Path;
use std::process::Command;

fn check(file_name: &str) {
    let path = cache::model_path(file_name);
    let file = GgufFile::open(&path).expect("the real file is valid");
    let json_path =
        std::env::temp_dir().join(format!("miniquant-{}-{file_name}.json", std::process::id()));
    let mut out = std::io::BufWriter::new(std::fs::File::create(&json_path).expect("temp file"));
    miniquant_std::json::write_index(file.index(), &mut out).expect("write the JSON");
    drop(out);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/compare_json_gguf_py.py");
    let run = Command::new(cache::gguf_py_python())
        .arg(script)
        .arg(&path)
        .arg(&json_path)
        .output()
        .expect("python runs");
    let _ = std::fs::remove_file(&json_path);
    let stdout = String::from_utf8_lossy(&run.stdout);
    println!("{stdout}{}", String::from_utf8_lossy(&run.stderr));
    assert!(run.status.success(), "{file_name}: {stdout}");
    assert!(stdout.contains("identical to gguf-py"), "{stdout}");
}

#[test]
fn smollm2_json_matches_gguf_py() {
    check("SmolLM2-135M-Instruct.Q4_1.gguf");
}

#[test]
fn gemma3_json_matches_gguf_py() {
    check("gemma-3-270m-q4_k_m.gguf");
}
