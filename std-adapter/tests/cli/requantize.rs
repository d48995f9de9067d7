//! `miniquant requantize` as a process: usage errors, and a run SIGKILLed mid-way leaves no file
//! in the output directory (on Linux the output has no name until complete).

use crate::common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{miniquant, scratch_dir, scratch_file};
use miniquant::GgmlType;
use miniquant_std::writer::GgufWriter;

#[test]
fn an_unknown_type_is_a_usage_error_listing_the_valid_ones() {
    let run = miniquant(&["requantize", "in.gguf", "out.gguf", "--type", "q9_9"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    for name in ["Q4_0", "Q8_0", "Q4_K", "Q6_K"] {
        assert!(run.stderr.contains(name), "{}", run.stderr);
    }
}

#[test]
fn type_names_are_case_insensitive() {
    let mut w = GgufWriter::new();
    w.kv("general.architecture", "llama");
    let values: Vec<u8> = (0..64 * 4)
        .flat_map(|i| (i as f32 * 0.1).to_le_bytes())
        .collect();
    w.tensor("blk.0.ffn_up.weight", GgmlType::F32, &[64, 4], values);
    let input = scratch_file("case-in.gguf", &w.to_bytes());
    for ty in ["q8_0", "Q8_0", "q8_0"] {
        let out = scratch_dir().join(format!("case-{ty}.gguf"));
        let run = miniquant(&["requantize", &input, out.to_str().unwrap(), "--type", ty]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let file = miniquant_std::GgufFile::open(&out).unwrap();
        assert_eq!(file.index().tensors()[0].ggml_type, GgmlType::Q8_0);
    }
}

#[test]
fn a_killed_run_leaves_no_file_behind() {
    // 64 MiB of F32 weights to Q4_K: long enough to be caught mid-way.
    let mut w = GgufWriter::new();
    w.kv("general.architecture", "llama");
    for i in 0..16 {
        let data: Vec<u8> = (0..1024 * 1024u32)
            .flat_map(|j| ((j.wrapping_mul(2_654_435_761) >> 8) as f32 / 1e6).to_le_bytes())
            .collect();
        w.tensor(
            &format!("blk.{i}.ffn_up.weight"),
            GgmlType::F32,
            &[1024, 1024],
            data,
        );
    }
    let input = scratch_file("kill-in.gguf", &w.to_bytes());
    // The output goes to a directory of its own, so "nothing left" means an empty directory.
    let dir = scratch_dir().join("kill-out");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let output = dir.join("out.gguf");
    let mut child = Command::new(env!("CARGO_BIN_EXE_miniquant"))
        .args([
            "requantize",
            &input,
            output.to_str().unwrap(),
            "--type",
            "q4_k",
            "--threads",
            "1",
        ])
        .spawn()
        .unwrap();
    // Wait until the output (named or not) holds at least 1 MiB: the header is out and tensors are
    // under way.
    let start = Instant::now();
    while written_into(child.id(), &dir) < 1 << 20 {
        assert!(
            child.try_wait().unwrap().is_none(),
            "finished before it could be interrupted"
        );
        assert!(start.elapsed() < Duration::from_secs(300), "no progress");
        std::thread::sleep(Duration::from_millis(5));
    }
    // `kill` is SIGKILL on Unix: no handler, no cleanup runs in the process.
    child.kill().unwrap();
    child.wait().unwrap();
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    if cfg!(target_os = "linux") {
        assert!(left.is_empty(), "a killed run left {left:?}");
    } else {
        // Without O_TMPFILE a hidden `.out.gguf.<pid>.partial` remains, never OUT itself.
        assert!(!output.exists(), "a killed run left {}", output.display());
    }
}

/// The size of the largest file process `pid` has open in `dir` (on Linux through /proc, which also
/// sees an unnamed O_TMPFILE file), else of the largest file in `dir`.
fn written_into(pid: u32, dir: &std::path::Path) -> u64 {
    let dir = dir.canonicalize().unwrap();
    let from_proc = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .ok()
        .map(|fds| {
            fds.filter_map(Result::ok)
                .filter(|fd| {
                    std::fs::read_link(fd.path()).is_ok_and(|target| target.starts_with(&dir))
                })
                .filter_map(|fd| std::fs::metadata(fd.path()).ok())
                .map(|m| m.len())
                .max()
                .unwrap_or(0)
        });
    from_proc.unwrap_or_else(|| {
        std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok()?.metadata().ok())
            .map(|m| m.len())
            .max()
            .unwrap_or(0)
    })
}

/// A failed write names the output and the OS's reason: the core writer keeps only the error's
/// kind, and a full disk read "write failed: Other at byte 2976".
#[cfg(target_os = "linux")]
#[test]
fn a_full_disk_is_reported_as_such() {
    let model = common::scratch_file(
        "requantize-full-disk.gguf",
        &miniquant_std::example::tiny_gguf(),
    );
    let run = common::miniquant(&["requantize", &model, "/dev/full", "--type", "f16"]);
    common::assert_no_panic(&run);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(
        run.stderr,
        "error: cannot write \"/dev/full\": No space left on device (os error 28)\n"
    );
}
