//! The build with no SIMD at all (`--cfg miniquant_disable_simd`): core's tests must pass on the
//! scalar kernels alone. It gets its own target directory so that changing RUSTFLAGS does not
//! invalidate the main build's cache.

use std::process::Command;
use std::time::Instant;

/// `cargo test -p miniquant --release --lib` with SIMD compiled out.
pub fn run() -> Result<(), String> {
    let target_dir = super::root().join("target").join("scalar-only");
    eprintln!(
        "+ RUSTFLAGS=\"--cfg miniquant_disable_simd\" CARGO_TARGET_DIR={} cargo test -p miniquant --release --lib",
        target_dir.display()
    );
    let start = Instant::now();
    let status = Command::new("cargo")
        .args(["test", "-p", "miniquant", "--release", "--lib"])
        .env("RUSTFLAGS", "--cfg miniquant_disable_simd")
        .env("CARGO_TARGET_DIR", &target_dir)
        .current_dir(super::root())
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    eprintln!("  ({:.1} s)", start.elapsed().as_secs_f64());
    if status.success() {
        Ok(())
    } else {
        Err(format!("the scalar-only build's tests failed: {status}"))
    }
}
