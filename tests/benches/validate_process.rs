//! Whole-process comparison: `miniquant validate FILE` against a program that reads the same header
//! with candle's `Content::read` over `BufReader<File>` (`examples/candle_header.rs`). Each command
//! runs N times alternately; the table shows the minimum and median wall time and candle / ours.
//!
//! Run: `cargo bench -p miniquant-tests --bench validate_process` (builds both binaries in release).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const RUNS: usize = 15;

fn release_binary(name: &str, args: &[&str]) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let status = Command::new(env!("CARGO"))
        .args(["build", "--release", "--quiet"])
        .args(args)
        .current_dir(&root)
        .status()
        .expect("cargo build runs");
    assert!(status.success(), "building {name} failed");
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    target.join("release").join(name)
}

fn time_once(program: &Path, args: &[&Path]) -> Duration {
    let start = Instant::now();
    let out = Command::new(program)
        .args(args)
        .output()
        .expect("process runs");
    let took = start.elapsed();
    assert!(
        out.status.success(),
        "{} failed: {}",
        program.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    took
}

fn min_median(mut runs: Vec<Duration>) -> (Duration, Duration) {
    runs.sort();
    (runs[0], runs[runs.len() / 2])
}

fn main() {
    let ours = release_binary("miniquant", &["-p", "miniquant-std", "--bin", "miniquant"]);
    let candle = release_binary(
        "examples/candle_header",
        &["-p", "miniquant-tests", "--example", "candle_header"],
    );
    let validate = Path::new("validate");
    println!(
        "{:<34} {:>12} {:>12} {:>12} {:>12} {:>8}",
        "file", "ours min", "ours median", "candle min", "candle med", "ratio"
    );
    for name in [
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "gemma-3-270m-q4_k_m.gguf",
    ] {
        let file = miniquant_tests::cache::model_path(name);
        // Warm the page cache for both, then alternate so that load changes hit both alike.
        time_once(&ours, &[validate, &file]);
        time_once(&candle, &[&file]);
        let (mut ours_runs, mut candle_runs) = (Vec::new(), Vec::new());
        for _ in 0..RUNS {
            ours_runs.push(time_once(&ours, &[validate, &file]));
            candle_runs.push(time_once(&candle, &[&file]));
        }
        let (om, od) = min_median(ours_runs);
        let (cm, cd) = min_median(candle_runs);
        println!(
            "{:<34} {:>10.1}ms {:>10.1}ms {:>10.1}ms {:>10.1}ms {:>7.1}x",
            name,
            om.as_secs_f64() * 1e3,
            od.as_secs_f64() * 1e3,
            cm.as_secs_f64() * 1e3,
            cd.as_secs_f64() * 1e3,
            cd.as_secs_f64() / od.as_secs_f64()
        );
    }
}
