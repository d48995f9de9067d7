//! `cargo xtask <task>`: the project's one-command build and test orchestration, identical on a
//! developer machine and in CI.
//!
//! - `ci`: install what the tests need (rustup target, model files, ggml's C sources, a gguf-py
//!   venv), then run fmt, clippy, rustdoc, `cargo check` with the declared `rust-version` (1.89),
//!   the no_std build of `core` for `thumbv7em-none-eabihf`, and every test (doctests included);
//!   which kernel levels this CPU let the tests run is printed before them and at the end (see
//!   `levels.rs`).
//! - `new-user`: `scripts/new-user.sh` against the release binary (part of `ci`, after the tests).
//! - `fetch`: only the installs and downloads.
//! - `bench`: the header and kernel benchmarks against candle (prints tables; not a test).
//! - `fuzz [SECONDS]`: every cargo-fuzz target for SECONDS each (see `fuzz.rs`).
//! - `overflow`: the core's tests and the hostile-header suite with overflow checks on (part of
//!   `ci`).
//! - `capi`: the C API: header current with cbindgen's, a C test program under ASan and UBSan
//!   compared with the Rust API (see `capi.rs`; part of `ci`).
//! - `firmware`: build the Cortex-M4F and Cortex-A images, run them in QEMU, print their budgets
//!   (also the last step of `ci`).
//! - `scalar-only`: the core's tests built with no SIMD at all (`--cfg miniquant_disable_simd`;
//!   part of `ci`).
//! - `levels`: which kernel levels this CPU runs (and so tests); `ci` and `test` print it.
//! - `miri`: the core's unit tests under Miri on the scalar build (see `miri.rs`; not in `ci`).
//! - `aarch64`: the core's tests (NEON, dotprod, i8mm kernels against their scalar twins) under
//!   qemu-aarch64 for CPU models max, cortex-a76 and cortex-a72 (part of `ci`); `aarch64 count`
//!   prints NEON instructions per block beside candle's.
//! - `ab REV [--native] TYPE COLS VARIANTS [ROUNDS] [KIB]`: one matvec through this checkout's
//!   kernels and revision REV's, alternated in one process (see `ab.rs`; not in `ci`).

mod aarch64;
mod ab;
mod capi;
mod firmware;
mod miri;
mod msrv;
mod overflow;
mod scalar_only;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

mod fuzz;
mod levels;

const NO_STD_TARGET: &str = "thumbv7em-none-eabihf";

fn main() -> ExitCode {
    let task = std::env::args().nth(1).unwrap_or_default();
    let result = match task.as_str() {
        "ci" => {
            let steps: [(&str, Step); 10] = [
                ("fetch", fetch),
                ("checks", checks),
                ("tests", tests),
                ("new-user", new_user),
                ("overflow", overflow::tests),
                ("scalar-only", scalar_only::run),
                ("aarch64", aarch64::cross_tests),
                ("capi", capi::capi),
                ("firmware", firmware::firmware),
                ("fuzz", || fuzz::fuzz(fuzz::DEFAULT_SECONDS)),
            ];
            let result = timed_steps(&steps);
            // `tests()` prints the levels before the tests; again here, next to the summary.
            levels::print();
            result
        }
        "fetch" => fetch(),
        "check" => checks(),
        "test" => tests(),
        "new-user" => new_user(),
        "bench" => bench(),
        "overflow" => overflow::tests(),
        "capi" => capi::capi(),
        "firmware" => firmware::firmware(),
        "scalar-only" => scalar_only::run(),
        "aarch64" => aarch64::cross_tests(),
        "miri" => miri::run(),
        "levels" => {
            levels::print();
            Ok(())
        }
        "ab" => ab::ab(&std::env::args().skip(2).collect::<Vec<_>>()),
        "fuzz" => match std::env::args().nth(2).map(|s| s.parse::<u64>()) {
            None => fuzz::fuzz(fuzz::DEFAULT_SECONDS),
            Some(Ok(seconds)) => fuzz::fuzz(seconds),
            Some(Err(e)) => Err(format!("SECONDS: {e}")),
        },
        _ => {
            eprintln!("usage: cargo xtask <ci|fetch|check|test|new-user|bench|overflow|scalar-only|aarch64 [count]|miri|levels|capi|firmware|fuzz [SECONDS]|ab REV ...>");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask {task}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One step of `ci`.
type Step = fn() -> Result<(), String>;

/// Runs `steps` in order until one fails, then prints each step's time and the total (the
/// budget is 15 minutes on a fresh 2-core machine).
fn timed_steps(steps: &[(&str, Step)]) -> Result<(), String> {
    let start = Instant::now();
    let mut times = Vec::new();
    let mut result = Ok(());
    for (name, step) in steps {
        let step_start = Instant::now();
        result = step();
        times.push((*name, step_start.elapsed().as_secs_f64()));
        if result.is_err() {
            break;
        }
    }
    let total = start.elapsed().as_secs_f64();
    let each: Vec<String> = times
        .iter()
        .map(|(name, s)| format!("{name} {s:.0}"))
        .collect();
    eprintln!(
        "xtask: ci step times (s): {}; total {:.0} s ({:.1} min)",
        each.join(", "),
        total,
        total / 60.0
    );
    result
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// Runs a command from the workspace root, echoing it, and fails if it fails.
fn run(program: &str, args: &[&str]) -> Result<(), String> {
    eprintln!("+ {program} {}", args.join(" "));
    let start = Instant::now();
    let status = Command::new(program)
        .args(args)
        .current_dir(root())
        .status()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    eprintln!("  ({:.1} s)", start.elapsed().as_secs_f64());
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{program} {}` failed: {status}", args.join(" ")))
    }
}

/// Rustup targets and components, the real GGUF files (PyPI) and ggml's sources (PyPI sdist).
fn fetch() -> Result<(), String> {
    run("rustup", &["target", "add", NO_STD_TARGET])?;
    run("rustup", &["component", "add", "clippy", "rustfmt"])?;
    run("bash", &["scripts/fetch-models.sh"])?;
    run("bash", &["scripts/fetch-ggml.sh"])?;
    run("python3", &["scripts/gguf_py_dequant.py", "--setup"])
}

fn checks() -> Result<(), String> {
    run("cargo", &["fmt", "--all", "--", "--check"])?;
    run(
        "cargo",
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    )?;
    docs()?;
    msrv::msrv_build()?;
    no_std_build()
}

/// The API docs build without warnings (broken links, unclosed tags).
fn docs() -> Result<(), String> {
    eprintln!("+ RUSTDOCFLAGS=\"-D warnings\" cargo doc --no-deps -p miniquant -p miniquant-std");
    let status = Command::new("cargo")
        .args(["doc", "--no-deps", "-p", "miniquant", "-p", "miniquant-std"])
        .env("RUSTDOCFLAGS", "-D warnings")
        .current_dir(root())
        .status()
        .map_err(|e| format!("cannot run cargo doc: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("cargo doc failed: {status}"))
    }
}

/// `core` must build for a bare-metal target without `std` or `alloc`, with and without defmt.
fn no_std_build() -> Result<(), String> {
    let lib = std::fs::read_to_string(root().join("core/src/lib.rs")).map_err(|e| e.to_string())?;
    if lib.contains("extern crate alloc") {
        return Err("core/src/lib.rs must not use `alloc`".into());
    }
    run(
        "cargo",
        &["build", "-p", "miniquant", "--target", NO_STD_TARGET],
    )?;
    run(
        "cargo",
        &[
            "build",
            "-p",
            "miniquant",
            "--target",
            NO_STD_TARGET,
            "--features",
            "defmt",
        ],
    )
}

fn tests() -> Result<(), String> {
    levels::print();
    run(
        "cargo",
        &["test", "--workspace", "--release", "--no-fail-fast"],
    )
}

/// `scripts/new-user.sh`: what a new user types, mistakes included, against the release binary
/// the test step built (the script builds it when it is missing).
fn new_user() -> Result<(), String> {
    let binary = root().join("target/release/miniquant");
    eprintln!("+ bash scripts/new-user.sh");
    let start = Instant::now();
    let mut command = Command::new("bash");
    command.arg("scripts/new-user.sh").current_dir(root());
    if binary.is_file() {
        command.env("MINIQUANT", &binary);
    }
    let status = command
        .status()
        .map_err(|e| format!("cannot run scripts/new-user.sh: {e}"))?;
    eprintln!("  ({:.1} s)", start.elapsed().as_secs_f64());
    if status.success() {
        Ok(())
    } else {
        Err(format!("scripts/new-user.sh failed: {status}"))
    }
}

fn bench() -> Result<(), String> {
    run("cargo", &["bench", "-p", "miniquant-tests"])
}
