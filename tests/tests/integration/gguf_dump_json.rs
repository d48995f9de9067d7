//! `miniquant inspect --json-format gguf-dump` on both real files equals gguf-py's own
//! `gguf-dump --json --json-array` output, key for key and value for value (floats exactly, as
//! both write an f32 as the f64 of the same value), apart from `filename`. The comparison runs in
//! the gguf-py venv's python, whose `json` module reads both documents the same way.

use miniquant_std::file::GgufFile;
use miniquant_tests::cache;
use std::process::Command;

/// Loads both documents, drops `filename`, and prints the first differences.
const COMPARE: &str = r#"
import json, subprocess, sys
model, ours_path, gguf_dump = sys.argv[1:]
ours = json.load(open(ours_path))
run = subprocess.run([gguf_dump, "--json", "--json-array", model], capture_output=True, check=True)
theirs = json.loads(run.stdout)
for doc in (ours, theirs):
    doc.pop("filename")
diffs = []
for section in ("metadata", "tensors"):
    a, b = ours.get(section, {}), theirs.get(section, {})
    if list(a) != list(b):
        diffs.append(f"{section}: keys differ: ours {len(a)}, gguf-dump {len(b)}")
    for k in b:
        if a.get(k) != b[k]:
            diffs.append(f"{section}[{k!r}]: ours {str(a.get(k))[:200]} gguf-dump {str(b[k])[:200]}")
if {k: v for k, v in ours.items() if k not in ("metadata", "tensors")} != {k: v for k, v in theirs.items() if k not in ("metadata", "tensors")}:
    diffs.append("top-level fields differ")
print("\n".join(diffs[:10]))
print(f"{len(theirs['metadata'])} keys, {len(theirs['tensors'])} tensors compared; {len(diffs)} differences")
sys.exit(1 if diffs else 0)
"#;

fn check(file_name: &str) {
    let path = cache::model_path(file_name);
    let file = GgufFile::open(&path).expect("the real file is valid");
    let json_path = std::env::temp_dir().join(format!(
        "miniquant-gguf-dump-{}-{file_name}.json",
        std::process::id()
    ));
    let mut out = std::io::BufWriter::new(std::fs::File::create(&json_path).expect("temp file"));
    miniquant_std::gguf_dump::write_json(file.index(), &path.to_string_lossy(), true, &mut out)
        .expect("write the JSON");
    drop(out);
    let python = cache::gguf_py_python();
    let gguf_dump = python.with_file_name("gguf-dump");
    let run = Command::new(&python)
        .args(["-c", COMPARE])
        .arg(&path)
        .arg(&json_path)
        .arg(&gguf_dump)
        .output()
        .expect("python runs");
    let _ = std::fs::remove_file(&json_path);
    let stdout = String::from_utf8_lossy(&run.stdout);
    println!("{stdout}{}", String::from_utf8_lossy(&run.stderr));
    assert!(run.status.success(), "{file_name}: {stdout}");
    assert!(stdout.contains(" 0 differences"), "{stdout}");
}

#[test]
fn smollm2_gguf_dump_json_is_gguf_pys() {
    check("SmolLM2-135M-Instruct.Q4_1.gguf");
}

#[test]
fn gemma3_gguf_dump_json_is_gguf_pys() {
    check("gemma-3-270m-q4_k_m.gguf");
}
