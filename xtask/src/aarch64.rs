//! `cargo xtask aarch64`: the AArch64 kernels' tests on an x86-64 host, under `qemu-aarch64`, once
//! per CPU model: `max` (NEON, dotprod, i8mm), `cortex-a76` (dotprod, no i8mm) and `cortex-a72`
//! (baseline NEON). Installs what it needs first (the cross linker and QEMU from apt, the Rust
//! target from rustup), skipping whatever is already there.
//!
//! `cargo xtask aarch64 real` also runs `miniquant-tests`' real-file test (`ggml_real_files`: every
//! tensor of both models dequantized, and matvec / matmul at every level on 1-3 threads, against
//! ggml's C pipeline cross-compiled for AArch64) under `QEMU_CPU=max`. It needs `cargo xtask
//! fetch` first and takes about 9 minutes here (candle-core is cross-compiled as a dev-dependency),
//! so CI does not run it.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

const TARGET: &str = "aarch64-unknown-linux-gnu";
const LINKER: &str = "aarch64-linux-gnu-gcc";
const SYSROOT: &str = "/usr/aarch64-linux-gnu";
const APT_PACKAGES: [&str; 3] = [
    "gcc-aarch64-linux-gnu",
    "libc6-dev-arm64-cross",
    "qemu-user",
];
/// QEMU CPU models and the kernel levels they exercise.
const CPUS: [(&str, &str); 3] = [
    ("max", "NEON + dotprod + i8mm"),
    ("cortex-a76", "NEON + dotprod"),
    ("cortex-a72", "NEON only"),
];

/// Installs, then runs `cargo test -p miniquant --release --target aarch64-unknown-linux-gnu` for
/// each CPU model.
pub fn cross_tests() -> Result<(), String> {
    let start = Instant::now();
    install()?;
    for (cpu, levels) in CPUS {
        eprintln!(
            "+ QEMU_CPU={cpu} cargo test -p miniquant --release --target {TARGET}  ({levels})"
        );
        let step = Instant::now();
        let status = Command::new("cargo")
            .args(["test", "-p", "miniquant", "--release", "--target", TARGET])
            .env("CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER", LINKER)
            .env(
                "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER",
                format!("qemu-aarch64 -L {SYSROOT}"),
            )
            .env("QEMU_CPU", cpu)
            .current_dir(super::root())
            .status()
            .map_err(|e| format!("cannot run cargo: {e}"))?;
        eprintln!("  ({:.1} s)", step.elapsed().as_secs_f64());
        if !status.success() {
            return Err(format!(
                "aarch64 tests with QEMU_CPU={cpu} failed: {status}"
            ));
        }
    }
    eprintln!(
        "aarch64: all CPU models passed ({:.1} s)",
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// apt packages (only when a tool is missing) and the rustup target.
fn install() -> Result<(), String> {
    let have_tools = on_path(LINKER)
        && on_path("qemu-aarch64")
        && Path::new(SYSROOT).join("lib/libc.so.6").exists();
    if !have_tools {
        // As root (CI containers) directly, otherwise through sudo.
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
        let apt = |args: &[&str]| {
            let (program, mut all) = if root {
                ("apt-get", Vec::new())
            } else {
                ("sudo", vec!["apt-get"])
            };
            all.extend_from_slice(args);
            run_quiet_apt(program, &all)
        };
        apt(&["update"])?;
        let mut args = vec!["install", "-y", "--no-install-recommends"];
        args.extend(APT_PACKAGES);
        apt(&args)?;
    }
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map_err(|e| format!("cannot run rustup: {e}"))?;
    if !String::from_utf8_lossy(&installed.stdout)
        .lines()
        .any(|l| l.trim() == TARGET)
    {
        super::run("rustup", &["target", "add", TARGET])?;
    }
    Ok(())
}

/// Whether `program` is an executable file in a `PATH` directory.
fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// Runs an apt command non-interactively, echoing it.
fn run_quiet_apt(program: &str, args: &[&str]) -> Result<(), String> {
    eprintln!("+ {program} {}", args.join(" "));
    let start = Instant::now();
    let status = Command::new(program)
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    eprintln!("  ({:.1} s)", start.elapsed().as_secs_f64());
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{program} {}` failed: {status}", args.join(" ")))
    }
}
