//! `cargo xtask <task>`: the project's one-command build and test orchestration, identical on a
//! developer machine and in CI.
//!
//! - `ci`: every step below as one dependency graph, two steps at a time (see `pipeline.rs`):
//!   install what the tests need (rustup target, model files, ggml's C sources, a gguf-py venv),
//!   fmt, clippy, rustdoc, `cargo check` with the declared `rust-version` (1.89), the no_std build
//!   of `core` for `thumbv7em-none-eabihf`, one build of every test but the core's in the `ci`
//!   profile (release with overflow checks) and its run (doctests included), then core,
//!   new-user, aarch64, capi, firmware, scalar-only and fuzz; which kernel levels this CPU let the tests run is
//!   printed before them and at the end (see `levels.rs`), and each step's wall and CPU time with
//!   the totals.
//! - `test`: the test runs of `ci` alone (`tests`, then `core`).
//! - `new-user`: `scripts/new-user.sh` against the CLI of the test build (part of `ci`).
//! - `fetch`: only the installs and downloads.
//! - `bench`: the header and kernel benchmarks against candle (prints tables; not a test).
//! - `fuzz [SECONDS]`: every cargo-fuzz target for SECONDS each (see `fuzz.rs`).
//! - `core`: the core's tests without `std` and with overflow checks on (see `core_tests.rs`;
//!   part of `ci`).
//! - `capi`: the C API: header current with cbindgen's, a C test program under ASan and UBSan
//!   compared with the Rust API (see `capi.rs`; part of `ci`).
//! - `firmware`: build the Cortex-M4F, Cortex-A and RISC-V images, run them in QEMU, print their
//!   budgets; run SmolLM2 on the Cortex-A and a tiny llama on the M4F and compare their logits'
//!   digests with the host's (part of `ci`).
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
mod core_tests;
mod firmware;
mod firmware_model;
mod miri;
mod msrv;
mod pipeline;
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
            let result = pipeline::run(&CI_STEPS);
            // The `tests` step prints the levels before its tests; again here, by the summary.
            levels::print();
            result
        }
        "ci-step" => {
            let name = std::env::args().nth(2).unwrap_or_default();
            match CI_STEPS.iter().find(|s| s.name == name) {
                Some(step) => (step.run)(),
                None => Err(format!("no ci step named `{name}`")),
            }
        }
        "fetch" => fetch(),
        "check" => checks().and_then(|()| lints()),
        "test" => tests().and_then(|()| core_tests::tests()),
        "new-user" => new_user(),
        "bench" => bench(),
        "core" => core_tests::tests(),
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
            None => fuzz::fuzz(fuzz::DEFAULT_SECONDS, false),
            Some(Ok(seconds)) => fuzz::fuzz(seconds, false),
            Some(Err(e)) => Err(format!("SECONDS: {e}")),
        },
        _ => {
            eprintln!("usage: cargo xtask <ci|fetch|check|test|new-user|bench|core|scalar-only|aarch64 [count]|miri|levels|capi|firmware|fuzz [SECONDS]|ab REV ...>");
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

/// The steps of `ci`, in the order their logs are printed and, when two are ready at once, started
/// (see `pipeline.rs`; the budget is 15 minutes on a fresh 2-core machine). Beside `build`, the
/// steps that need only the tools: fuzzing (its runs use one core, the build the other), capi and
/// the checks that build nothing `build` builds (fmt, the MSRV and no_std checks).
const CI_STEPS: [pipeline::Step; 13] = [
    step("fetch", fetch, &[]),
    step("build", build, &["fetch"]),
    // Every step that installs with apt, rustup or cargo install waits for this one, so no two
    // installs run at once (apt's lock; rustup has none); beside `build` it costs no time.
    step("tools", tools, &["fetch"]),
    step("fuzz", || fuzz::fuzz(fuzz::CI_SECONDS, true), &["tools"]),
    step("capi", capi::capi, &["tools"]),
    step("checks", checks, &["tools"]),
    step("tests", tests, &["build"]),
    // clippy and rustdoc in the `ci` profile, after `build`: its build scripts (ggml's and
    // oniguruma's C among them) and proc macros are then already built. Beside `tests`, which
    // builds nothing (the `ci` target directory's lock is free). The steps that build in that
    // directory start after it (`~`: whether it passed or not).
    step("lints", lints, &["build", "tools"]),
    step("new-user", new_user, &["build"]),
    step("core", core_tests::tests, &["build", "~lints"]),
    // The host CLI from `build` makes the images' inputs. Before aarch64: the two longest last
    // steps, the longer first, so that the run does not end on one step alone.
    step("firmware", firmware::firmware, &["build", "tools"]),
    step(
        "aarch64",
        aarch64::cross_tests,
        &["build", "tools", "~lints"],
    ),
    // Shares `build`'s build scripts and proc macros (and so its target directory's lock).
    step("scalar-only", scalar_only::run, &["build", "~lints"]),
];

const fn step(
    name: &'static str,
    run: fn() -> Result<(), String>,
    after: &'static [&'static str],
) -> pipeline::Step {
    pipeline::Step { name, run, after }
}

/// The cargo profile of the test build: release with overflow checks and debug assertions in this
/// workspace's crates (see Cargo.toml), so one build serves the tests, the overflow checks, the
/// new-user script and the firmware's host inputs.
pub const CI_PROFILE: &str = "ci";

/// The CLI binary the test build makes.
pub fn ci_cli() -> PathBuf {
    root().join("target").join(CI_PROFILE).join("miniquant")
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// Wall and CPU time since it started: the CPU seconds of the child processes waited for since
/// (all of a step's commands are run to completion one after another, so these are theirs).
pub struct Timer {
    wall: Instant,
    cpu: Option<f64>,
}

impl Timer {
    pub fn start() -> Self {
        Self {
            wall: Instant::now(),
            cpu: pipeline::children_cpu_seconds(),
        }
    }

    /// `12.3 s, 20.1 s cpu`.
    pub fn text(&self) -> String {
        let cpu = pipeline::children_cpu_seconds()
            .zip(self.cpu)
            .map_or(String::new(), |(now, then)| {
                format!(", {:.1} s cpu", now - then)
            });
        format!("{:.1} s{cpu}", self.wall.elapsed().as_secs_f64())
    }
}

/// Runs a command from the workspace root, echoing it, and fails if it fails.
fn run(program: &str, args: &[&str]) -> Result<(), String> {
    eprintln!("+ {program} {}", args.join(" "));
    let start = Timer::start();
    let status = Command::new(program)
        .args(args)
        .current_dir(root())
        .status()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    eprintln!("  ({})", start.text());
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

/// What the later steps install (each step's own install then finds it there): the MSRV and
/// nightly toolchains, the cross linkers and QEMU from apt, rustup targets, cargo-fuzz, cbindgen
/// and defmt-print.
fn tools() -> Result<(), String> {
    msrv::install()?;
    fuzz::install()?;
    capi::install_cbindgen()?;
    aarch64::install()?;
    firmware::install()
}

/// What builds nothing `build` builds: fmt, the MSRV check and the no_std build of the core.
fn checks() -> Result<(), String> {
    run("cargo", &["fmt", "--all", "--", "--check"])?;
    msrv::msrv_build()?;
    no_std_build()
}

/// clippy (warnings denied) and the API docs, in the `ci` profile (the lints do not depend on it:
/// debug assertions are on in this workspace's crates there too), so that the build scripts and
/// proc macros are the `build` step's.
fn lints() -> Result<(), String> {
    run(
        "cargo",
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--profile",
            CI_PROFILE,
            "--",
            "-D",
            "warnings",
        ],
    )?;
    docs()
}

/// The API docs build without warnings (broken links, unclosed tags).
fn docs() -> Result<(), String> {
    eprintln!("+ RUSTDOCFLAGS=\"-D warnings\" cargo doc --no-deps -p miniquant -p miniquant-std --profile {CI_PROFILE}");
    let start = Timer::start();
    let status = Command::new("cargo")
        .args(["doc", "--no-deps", "-p", "miniquant", "-p", "miniquant-std"])
        .args(["--profile", CI_PROFILE])
        .env("RUSTDOCFLAGS", "-D warnings")
        .current_dir(root())
        .status()
        .map_err(|e| format!("cannot run cargo doc: {e}"))?;
    eprintln!("  ({})", start.text());
    if status.success() {
        Ok(())
    } else {
        Err(format!("cargo doc failed: {status}"))
    }
}

/// `core` must build for a bare-metal target without `std` or `alloc`, with and without defmt:
/// `cargo check` (the compiler's every check but code generation), since the `firmware` step builds
/// the core's code for the same target both ways (the Rust Cortex-M4F image with `defmt`, the C
/// image's static library without).
fn no_std_build() -> Result<(), String> {
    let lib = std::fs::read_to_string(root().join("core/src/lib.rs")).map_err(|e| e.to_string())?;
    if lib.contains("extern crate alloc") {
        return Err("core/src/lib.rs must not use `alloc`".into());
    }
    run(
        "cargo",
        &["check", "-p", "miniquant", "--target", NO_STD_TARGET],
    )?;
    run(
        "cargo",
        &[
            "check",
            "-p",
            "miniquant",
            "--target",
            NO_STD_TARGET,
            "--features",
            "defmt",
        ],
    )
}

/// `cargo test` over every crate but the core (`core_tests.rs` tests it) in the `ci` profile,
/// with `last` (`--no-run` or `--no-fail-fast`).
fn workspace_tests(last: &str) -> Result<(), String> {
    let args = [
        "test",
        "--workspace",
        "--exclude",
        "miniquant",
        "--profile",
        CI_PROFILE,
        last,
    ];
    run("cargo", &args)
}

/// Builds every test but the core's, and the CLI, which the CLI tests run, without running them.
fn build() -> Result<(), String> {
    workspace_tests("--no-run")
}

fn tests() -> Result<(), String> {
    levels::print();
    workspace_tests("--no-fail-fast")
}

/// `scripts/new-user.sh`: what a new user types, mistakes included, against the CLI the test
/// build made (the script builds a release one when it is missing).
fn new_user() -> Result<(), String> {
    let binary = ci_cli();
    eprintln!("+ bash scripts/new-user.sh");
    let start = Timer::start();
    let mut command = Command::new("bash");
    command.arg("scripts/new-user.sh").current_dir(root());
    if binary.is_file() {
        command.env("MINIQUANT", &binary);
    }
    let status = command
        .status()
        .map_err(|e| format!("cannot run scripts/new-user.sh: {e}"))?;
    eprintln!("  ({})", start.text());
    if status.success() {
        Ok(())
    } else {
        Err(format!("scripts/new-user.sh failed: {status}"))
    }
}

fn bench() -> Result<(), String> {
    run("cargo", &["bench", "-p", "miniquant-tests"])
}
