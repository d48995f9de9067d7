//! Helpers shared by the integration tests: run the `miniquant` binary, make scratch files.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// What a run of the binary produced.
pub struct Run {
    pub code: i32,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Run {
    pub fn stdout_text(&self) -> String {
        String::from_utf8(self.stdout.clone()).expect("stdout is UTF-8")
    }

    pub fn stderr_lines(&self) -> Vec<&str> {
        self.stderr.lines().collect()
    }
}

/// Runs `miniquant` with `args` in `dir`.
pub fn miniquant_in(dir: &std::path::Path, args: &[&str]) -> Run {
    let output = Command::new(env!("CARGO_BIN_EXE_miniquant"))
        .args(args)
        .current_dir(dir)
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("the binary runs");
    Run {
        code: output
            .status
            .code()
            .expect("exited, not killed by a signal"),
        stdout: output.stdout,
        stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
    }
}

/// Runs `miniquant` with `args` in the scratch directory.
pub fn miniquant(args: &[&str]) -> Run {
    miniquant_in(&scratch_dir(), args)
}

/// The tests' scratch directory.
pub fn scratch_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("miniquant-std-tests");
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Writes `bytes` to a scratch file called `name` and returns its path as a string.
pub fn scratch_file(name: &str, bytes: &[u8]) -> String {
    let path = scratch_dir().join(name);
    std::fs::write(&path, bytes).expect("write scratch file");
    path.to_str().expect("UTF-8 path").to_owned()
}

pub fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

pub fn f32_values(bytes: &[u8]) -> Vec<f32> {
    assert_eq!(bytes.len() % 4, 0, "not whole f32 values");
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// No run may panic or print a backtrace, whatever the input.
pub fn assert_no_panic(run: &Run) {
    assert!(!run.stderr.contains("panicked"), "panic: {}", run.stderr);
    assert!(
        !run.stderr.contains("stack backtrace"),
        "backtrace: {}",
        run.stderr
    );
    assert_ne!(run.code, 101, "exit code of a panic: {}", run.stderr);
}

/// Runs `miniquant` with `args` in the scratch directory, `stdin` on its standard input.
pub fn miniquant_with_stdin(args: &[&str], stdin: &[u8]) -> Run {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_miniquant"))
        .args(args)
        .current_dir(scratch_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let mut input = child.stdin.take().expect("stdin is piped");
    let bytes = stdin.to_vec();
    // Written from another thread: the child may fill its stdout before it reads all of stdin.
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&bytes);
    });
    let output = child.wait_with_output().expect("the binary finishes");
    writer.join().expect("the writer thread ends");
    Run {
        code: output
            .status
            .code()
            .expect("exited, not killed by a signal"),
        stdout: output.stdout,
        stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
    }
}

/// A real model from the cache (`MINIQUANT_CACHE`, else `~/.cache/miniquant`; `cargo xtask fetch`
/// puts them there), or `None` after printing why the test is skipped.
pub fn cached_model(name: &str) -> Option<PathBuf> {
    let cache = std::env::var_os("MINIQUANT_CACHE").map_or_else(
        || {
            std::path::Path::new(&std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/miniquant")
        },
        PathBuf::from,
    );
    let path = cache.join(name);
    if !path.exists() {
        eprintln!(
            "skipped: {} is not there (cargo xtask fetch)",
            path.display()
        );
        return None;
    }
    Some(path)
}
