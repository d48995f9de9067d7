//! `miniquant bench` in a pipe: llama-bench's table (its model, size and params cells checked
//! against llama-bench itself when the cache has it), whole rows only when interrupted, and clear
//! errors for bad arguments. (In a terminal: tests/cli/pty.rs.)

#![cfg(unix)]

use crate::common;

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{miniquant, scratch_dir};
use miniquant::quant::{level, Level};
use rustix::process::{kill_process, Pid, Signal};

fn smollm2() -> Option<String> {
    common::cached_model("SmolLM2-135M-Instruct.Q4_1.gguf").map(|p| p.to_str().unwrap().to_owned())
}

/// The cells of a table row, trimmed.
fn cells(line: &str) -> Vec<&str> {
    let inner = line.trim_end().strip_prefix('|').unwrap();
    let inner = inner.strip_suffix('|').unwrap();
    inner.split('|').map(str::trim).collect()
}

/// llama-bench's header, as it prints it for a CPU run.
const HEADER: [&str; 2] = [
    "| model                          |       size |     params | backend    | threads |            test |                  t/s |",
    "| ------------------------------ | ---------: | ---------: | ---------- | ------: | --------------: | -------------------: |",
];

/// `mean ± stddev`, both finite, the mean positive.
fn rate(cell: &str) -> (f64, f64) {
    let (mean, stddev) = cell.split_once(" ± ").expect("mean ± stddev");
    let (mean, stddev): (f64, f64) = (mean.parse().unwrap(), stddev.parse().unwrap());
    assert!(mean > 0.0 && mean.is_finite() && stddev >= 0.0, "{cell}");
    (mean, stddev)
}

#[test]
fn prints_llama_bench_s_table_for_each_thread_count() {
    let Some(model) = smollm2() else { return };
    let run = miniquant(&[
        "bench", &model, "-p", "8", "-n", "4", "-r", "2", "-t", "1,2",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stderr, "");
    let text = run.stdout_text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[..2], HEADER, "{text}");
    let rows: Vec<Vec<&str>> = lines[2..6].iter().map(|l| cells(l)).collect();
    for (row, (threads, test)) in
        rows.iter()
            .zip([("1", "pp8"), ("1", "tg4"), ("2", "pp8"), ("2", "tg4")])
    {
        assert_eq!(
            row[..6],
            [
                "llama 256M Q4_1",
                "92.10 MiB",
                "134.52 M",
                "CPU",
                threads,
                test
            ]
        );
        rate(row[6]);
        // The same display width as the header's (± is one column).
        assert_eq!(lines[2].chars().count(), HEADER[0].chars().count());
    }
    assert_eq!(lines[6], "");
    // The kernels are the automatic level's: `amx` wherever the CPU has it and Linux grants the
    // tiles (the binary asks first thing, as this process does here), else the best the CPU has.
    let automatic = if miniquant_std::amx::request() {
        Level::Amx
    } else {
        level::detect()
    };
    let expected = level::env_level().ok().flatten().unwrap_or(automatic);
    let build = format!(
        "build: miniquant {} ({expected} kernels",
        env!("CARGO_PKG_VERSION")
    );
    assert!(lines[7].starts_with(&build), "{text}");
    assert_eq!(lines.len(), 8);
}

/// llama-bench (built by scripts/build-llama.sh), when the cache has it.
fn llama_bench() -> Option<PathBuf> {
    let cache = std::env::var_os("MINIQUANT_CACHE").map_or_else(
        || Path::new(&std::env::var_os("HOME").unwrap_or_default()).join(".cache/miniquant"),
        PathBuf::from,
    );
    let path = cache.join("llama-build-0.3.36/bin/llama-bench");
    if !path.exists() {
        eprintln!("skipped: {} is not there", path.display());
        return None;
    }
    Some(path)
}

#[test]
fn model_size_and_params_are_llama_bench_s() {
    let Some(model) = smollm2() else { return };
    let Some(llama_bench) = llama_bench() else {
        return;
    };
    let theirs = Command::new(llama_bench)
        .args(["-m", &model, "-p", "4", "-n", "0", "-r", "1", "-t", "1"])
        .output()
        .unwrap();
    assert!(theirs.status.success());
    let theirs = String::from_utf8(theirs.stdout).unwrap();
    let ours = miniquant(&["bench", &model, "-p", "4", "-n", "0", "-r", "1", "-t", "1"]);
    assert_eq!(ours.code, 0, "{}", ours.stderr);
    let ours = ours.stdout_text();
    let (theirs, ours): (Vec<&str>, Vec<&str>) = (theirs.lines().collect(), ours.lines().collect());
    // The header and every cell but the rate.
    assert_eq!(ours[..2], theirs[..2]);
    assert_eq!(cells(ours[2])[..6], cells(theirs[2])[..6]);
}

#[test]
fn bad_arguments_and_files_are_clear_errors() {
    let tiny = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/tiny.gguf");
    let tiny = tiny.to_str().unwrap();
    let run = miniquant(&["bench", tiny, "-p", "0", "-n", "0"]);
    assert_eq!(run.code, 2);
    assert_eq!(
        run.stderr_lines(),
        ["error: -p and -n are both 0: nothing to measure"]
    );
    for (flag, value, message) in [
        ("-t", "0", "is not a thread count"),
        ("-t", "1,x", "is not a thread count"),
        ("-r", "0", "0 is not in 1..=10000"),
        ("-p", "x", "invalid digit"),
        ("-b", "0", "0 is not in 1.."),
        ("--level", "avx9", "avx9"),
    ] {
        let run = miniquant(&["bench", tiny, flag, value]);
        assert_eq!(run.code, 2, "{flag} {value}: {}", run.stderr);
        assert!(
            run.stderr.starts_with("error: ") && run.stderr.contains(message),
            "{flag} {value}: {}",
            run.stderr
        );
        assert_eq!(run.stdout, b"");
    }
    let run = miniquant(&["bench", tiny]);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr_lines(),
        ["error: architecture \"tiny\" is not supported (supported: llama, gemma3)"]
    );
    assert_eq!(run.stdout, b"", "no table for a model that cannot run");
    let missing = scratch_dir().join("no-such-model.gguf");
    let run = miniquant(&["bench", missing.to_str().unwrap()]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.starts_with("error: cannot open"),
        "{}",
        run.stderr
    );
    let Some(model) = smollm2() else { return };
    let run = miniquant(&["bench", &model, "-p", "100000"]);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr_lines(),
        ["error: a test of 100000 tokens does not fit the model's context of 8192"]
    );
}

/// Interrupted by SIGINT or SIGTERM once the header is out, bench dies of the signal and what it
/// printed is whole lines: the header and whole rows.
#[test]
fn interrupted_it_leaves_whole_rows() {
    let Some(model) = smollm2() else { return };
    for sig in [Signal::INT, Signal::TERM] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_miniquant"))
            .args(["bench", &model, "-p", "16", "-n", "4", "-r", "10000"])
            .args(["-t", "1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut header = String::new();
        for _ in 0..2 {
            stdout.read_line(&mut header).unwrap();
        }
        assert_eq!(header, format!("{}\n{}\n", HEADER[0], HEADER[1]));
        kill_process(Pid::from_raw(child.id() as i32).unwrap(), sig).unwrap();
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            assert!(start.elapsed() < Duration::from_secs(60), "still running");
            std::thread::sleep(Duration::from_millis(5));
        };
        assert_eq!(status.signal(), Some(sig.as_raw()), "{status}");
        let mut rest = String::new();
        stdout.read_to_string(&mut rest).unwrap();
        assert!(rest.is_empty() || rest.ends_with('\n'), "{rest:?}");
        for line in rest.lines() {
            assert_eq!(cells(line).len(), 7, "{line:?}");
        }
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        assert_eq!(stderr, "");
    }
}
