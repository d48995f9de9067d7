//! The build with no SIMD at all (`--cfg miniquant_disable_simd`): core's tests must pass on the
//! scalar kernels alone. Built for the host as an explicit `--target`, so that the flag reaches only
//! the target's crates: the build scripts and proc macros are the `build` step's, and the flagged
//! crates live apart under `target/x86_64-unknown-linux-gnu/` without invalidating its cache.

use std::process::Command;

use crate::CI_PROFILE;

/// `cargo test -p miniquant --profile ci --lib` with SIMD compiled out.
pub fn run() -> Result<(), String> {
    let host = host_triple()?;
    eprintln!(
        "+ RUSTFLAGS=\"--cfg miniquant_disable_simd\" cargo test -p miniquant --profile {CI_PROFILE} --lib --target {host}"
    );
    let start = crate::Timer::start();
    let status = Command::new("cargo")
        .args(["test", "-p", "miniquant", "--profile", CI_PROFILE, "--lib"])
        .args(["--target", &host])
        .env("RUSTFLAGS", "--cfg miniquant_disable_simd")
        .current_dir(super::root())
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    eprintln!("  ({})", start.text());
    if status.success() {
        Ok(())
    } else {
        Err(format!("the scalar-only build's tests failed: {status}"))
    }
}

/// The host's target triple, from `rustc -vV`.
fn host_triple() -> Result<String, String> {
    let out = Command::new("rustc")
        .arg("-vV")
        .output()
        .map_err(|e| format!("cannot run rustc: {e}"))?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .map(str::to_owned)
        .ok_or_else(|| "rustc -vV names no host".to_string())
}
