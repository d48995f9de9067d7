//! `cargo xtask fuzz [SECONDS]`: runs every cargo-fuzz target for SECONDS (default 30) each,
//! starting from the committed corpus, and fails on the first finding (a crash, a failed check,
//! a timeout or a memory blow-up; libFuzzer saves the input under `fuzz/artifacts/<target>/`).
//!
//! Installs what it needs when missing: the nightly toolchain (libFuzzer's sanitizer flags need
//! it; only `fuzz/` uses it) and cargo-fuzz. New inputs the fuzzer finds go to a scratch corpus in
//! `fuzz/target/`, so the committed corpus stays as it is.

use std::path::Path;
use std::process::Command;

/// The fuzz targets, in the order they run.
pub const TARGETS: [&str; 5] = ["header", "validate", "roundtrip", "kernels", "model"];

/// Seconds per target when none are given.
pub const DEFAULT_SECONDS: u64 = 30;

/// Seconds per target in `ci`: every run first replays the whole committed corpus (under ASan, as
/// `tests/tests/integration/fuzz_corpus.rs` replays it on stable without), then mutates for the
/// rest. The replay is the part that guards against regressions, and it is done within the first
/// second of each run (libFuzzer's `INITED` line; 18 to 1180 inputs per target); the mutation
/// that follows only adds what a few seconds of fuzzing find, and its finds are not kept (the
/// scratch corpus of a fresh checkout is empty), so 8 s a target (40 s for the 5) instead of the
/// 16 s before: the long campaigns are `cargo xtask fuzz [SECONDS]`.
pub const CI_SECONDS: u64 = 8;

fn succeeds(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Installs nightly (minimal profile) and cargo-fuzz if they are missing.
pub(crate) fn install() -> Result<(), String> {
    if !succeeds("rustc", &["+nightly", "--version"]) {
        crate::run(
            "rustup",
            &["toolchain", "install", "nightly", "--profile", "minimal"],
        )?;
    }
    if !succeeds("cargo", &["fuzz", "--version"]) {
        // A debug build of the tool installs in a third of the time and runs as well.
        crate::run("cargo", &["install", "cargo-fuzz", "--locked", "--debug"])?;
    }
    Ok(())
}

/// The optimisation of `ci`'s sanitizer build (`CARGO_PROFILE_RELEASE_OPT_LEVEL`; the campaigns of
/// `cargo xtask fuzz` keep the release profile's 3): measured 2026-12-05 under load 7, the build
/// 162 CPU s instead of 183, the `kernels` target 15.7k runs in 8 s (the opt-level 3 build 12.0k
/// in the ci run beside it), each corpus still replayed within the first second.
const CI_OPT_LEVEL: &str = "1";

/// Runs each target for `seconds`; `ci`: built at [`CI_OPT_LEVEL`].
pub fn fuzz(seconds: u64, ci: bool) -> Result<(), String> {
    install()?;
    let opt_level = ci.then_some(CI_OPT_LEVEL);
    let fuzz_dir = crate::root().join("fuzz");
    // Every target in one cargo invocation (shared dependencies, links in parallel); the runs
    // below then find them built.
    if !cargo_fuzz(&fuzz_dir, &["+nightly", "fuzz", "build"], opt_level)? {
        return Err("cargo fuzz build failed".into());
    }
    let max_time = format!("-max_total_time={seconds}");
    for target in TARGETS {
        let scratch = fuzz_dir.join("target").join("corpus").join(target);
        std::fs::create_dir_all(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
        let committed = fuzz_dir.join("corpus").join(target);
        let args = [
            "+nightly",
            "fuzz",
            "run",
            target,
            path_str(&scratch)?,
            path_str(&committed)?,
            "--",
            &max_time,
            "-rss_limit_mb=2048",
            "-timeout=20",
            "-print_final_stats=1",
        ];
        // The same profile as the build, or cargo would build the target again.
        if !cargo_fuzz(&fuzz_dir, &args, opt_level)? {
            return Err(format!(
                "fuzz target `{target}` found a failing input (see fuzz/artifacts/{target}/)"
            ));
        }
    }
    Ok(())
}

/// Runs `cargo ARGS` in `fuzz_dir` (with the release profile's opt-level set when given),
/// echoing it and its time; whether it succeeded.
fn cargo_fuzz(fuzz_dir: &Path, args: &[&str], opt_level: Option<&str>) -> Result<bool, String> {
    let mut command = Command::new("cargo");
    let mut shown = String::new();
    if let Some(level) = opt_level {
        command.env("CARGO_PROFILE_RELEASE_OPT_LEVEL", level);
        shown = format!("CARGO_PROFILE_RELEASE_OPT_LEVEL={level} ");
    }
    eprintln!("+ (in fuzz/) {shown}cargo {}", args.join(" "));
    let start = crate::Timer::start();
    let status = command
        .args(args)
        .current_dir(fuzz_dir)
        // The fuzz workspace keeps its own target directory (sanitizer builds).
        .env("CARGO_TARGET_DIR", fuzz_dir.join("target"))
        .status()
        .map_err(|e| format!("cannot run cargo fuzz: {e}"))?;
    eprintln!("  ({}, {status})", start.text());
    Ok(status.success())
}

fn path_str(p: &Path) -> Result<&str, String> {
    p.to_str()
        .ok_or_else(|| format!("{} is not UTF-8", p.display()))
}
