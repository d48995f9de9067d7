//! `cargo xtask aarch64`: the AArch64 kernels' tests on an x86-64 host, under `qemu-aarch64`, once
//! per CPU model: `max` (NEON, dotprod, i8mm), `cortex-a76` (dotprod, no i8mm) and `cortex-a72`
//! (baseline NEON). Installs what it needs first (the cross linker and QEMU from apt, the Rust
//! target from rustup), skipping whatever is already there.
//!
//! `cargo xtask aarch64 count [TYPE...]` prints the instructions per block of each vec_dot, ours
//! at the NEON and dotprod levels beside candle 0.11's NEON build, counted dynamically: the probe
//! `miniquant-tests --test neon_counts` runs one vec_dot under `qemu-aarch64 -singlestep -d
//! nochain,exec` (one log line per executed instruction) over 256 and over 512 blocks; the
//! difference of the two counts over 256 is the kernel's cost per block, call overhead excluded.
//! Not in CI (it cross-compiles candle-core).

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use crate::core_tests::UNOPT_PROFILE;
use crate::CI_PROFILE;

const TARGET: &str = "aarch64-unknown-linux-gnu";
const LINKER: &str = "aarch64-linux-gnu-gcc";
const SYSROOT: &str = "/usr/aarch64-linux-gnu";
const APT_PACKAGES: [&str; 3] = [
    "gcc-aarch64-linux-gnu",
    "libc6-dev-arm64-cross",
    "qemu-user",
];
/// The tests run under `cpu`, after `--`: all of them under `max`, whose tests already run every
/// aarch64 level side by side; under the smaller models only what depends on the CPU the process
/// starts on (the level detected and the kernels the public API then picks: no instruction the CPU
/// lacks).
fn filter(cpu: &str) -> &'static [&'static str] {
    if cpu == "max" {
        &[]
    } else {
        &["--", "quant::kernel_tests", "quant::level::tests"]
    }
}

/// The test targets each run builds, with their profile: the unit tests in `ci` (the kernels need
/// optimised code under QEMU); under `max` also the doctests and `tests/detect_without_std.rs`,
/// in `ci-unopt` (see Cargo.toml: they need the core as a library of its own, which at `ci`'s
/// optimisation is a second compile of the whole crate); the smaller models run none of those
/// (their filter matches no doctest or integration test).
fn targets(cpu: &str) -> Vec<(&'static str, &'static [&'static str])> {
    let mut all: Vec<(&'static str, &'static [&'static str])> = vec![(CI_PROFILE, &["--lib"])];
    if cpu == "max" {
        all.push((UNOPT_PROFILE, &["--test", "detect_without_std"]));
        all.push((UNOPT_PROFILE, &["--doc"]));
    }
    all
}

/// QEMU CPU models and the kernel levels they exercise.
const CPUS: [(&str, &str); 3] = [
    ("max", "NEON + dotprod + i8mm"),
    ("cortex-a76", "NEON + dotprod"),
    ("cortex-a72", "NEON only"),
];

/// Installs, then runs `cargo test -p miniquant --profile ci --features model --target
/// aarch64-unknown-linux-gnu` for each CPU model: the `ci` profile (release with overflow checks) of
/// the host test build, whose build scripts and proc macros this build then shares; `model`: the
/// forward pass's logits are checked against the bits recorded on x86_64. The doctests and the
/// integration test in `ci-unopt` ([`targets`]).
pub fn cross_tests() -> Result<(), String> {
    if std::env::args().nth(2).as_deref() == Some("count") {
        let types: Vec<String> = std::env::args().skip(3).collect();
        return count(&types);
    }
    let start = Instant::now();
    install()?;
    for (cpu, levels) in CPUS {
        for (profile, selection) in targets(cpu) {
            eprintln!(
                "+ QEMU_CPU={cpu} cargo test -p miniquant --profile {profile} --features model --target {TARGET} {} {}  ({levels})",
                selection.join(" "),
                filter(cpu).join(" ")
            );
            let step = crate::Timer::start();
            let status = Command::new("cargo")
                .args(["test", "-p", "miniquant", "--profile", profile])
                .args(["--features", "model", "--target", TARGET])
                .args(selection)
                .args(filter(cpu))
                .env("CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER", LINKER)
                .env(
                    "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER",
                    format!("qemu-aarch64 -L {SYSROOT}"),
                )
                .env("QEMU_CPU", cpu)
                .current_dir(super::root())
                .status()
                .map_err(|e| format!("cannot run cargo: {e}"))?;
            eprintln!("  ({})", step.text());
            if !status.success() {
                return Err(format!(
                    "aarch64 tests with QEMU_CPU={cpu} failed: {status}"
                ));
            }
        }
    }
    eprintln!(
        "aarch64: all CPU models passed ({:.1} s)",
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// apt packages (only when a tool is missing) and the rustup target.
pub(crate) fn install() -> Result<(), String> {
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

/// Types with a NEON kernel of ours, and whether candle 0.11 has one in `neon.rs`.
const COUNTED: [(&str, bool); 13] = [
    ("q8_0", true),
    ("q4_0", true),
    ("q4_1", false),
    ("q5_0", false),
    ("q5_1", false),
    ("iq4_nl", false),
    ("mxfp4", false),
    ("q2_K", true),
    ("q3_K", true),
    ("q4_K", true),
    ("q5_K", true),
    ("q6_K", true),
    ("iq4_xs", false),
];
/// Block counts of the two probe runs.
const PROBE_BLOCKS: (u64, u64) = (256, 512);

/// `cargo xtask aarch64 count`: see the module docs.
fn count(only: &[String]) -> Result<(), String> {
    install()?;
    let probe = build_probe()?;
    println!("instructions per block (vec_dot; ours NEON on cortex-a72, dotprod on cortex-a76; candle NEON build on cortex-a72)");
    println!(
        "{:<8} {:>10} {:>10} {:>10}",
        "type", "ours neon", "dotprod", "candle"
    );
    for (t, candle) in COUNTED {
        if !only.is_empty() && !only.iter().any(|o| o.eq_ignore_ascii_case(t)) {
            continue;
        }
        let neon = per_block(&probe, &format!("ours:{t}:neon"), "cortex-a72")?;
        let dotprod = per_block(&probe, &format!("ours:{t}:dotprod"), "cortex-a76")?;
        let candle = if candle {
            format!(
                "{:.1}",
                per_block(&probe, &format!("candle:{t}"), "cortex-a72")?
            )
        } else {
            "scalar".to_string()
        };
        println!("{t:<8} {neon:>10.1} {dotprod:>10.1} {candle:>10}");
    }
    Ok(())
}

/// Builds the probe test binary for AArch64 and returns its path.
fn build_probe() -> Result<String, String> {
    let out = Command::new("cargo")
        .args([
            "test",
            "-p",
            "miniquant-tests",
            "--release",
            "--target",
            TARGET,
            "--test",
            "neon_counts",
            "--no-run",
            "--message-format=json",
        ])
        .env("CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER", LINKER)
        .current_dir(super::root())
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!("building the probe failed: {}", out.status));
    }
    // The compiler-artifact message of the test target carries `"executable":"PATH"`.
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("neon_counts"))
        .find_map(|l| {
            let start = l.find("\"executable\":\"")? + "\"executable\":\"".len();
            let end = start + l[start..].find('"')?;
            Some(l[start..end].to_string())
        })
        .ok_or_else(|| "cargo did not report the probe executable".to_string())
}

/// Instructions per block of `spec` on `cpu`: the difference between the two probe runs.
fn per_block(probe: &str, spec: &str, cpu: &str) -> Result<f64, String> {
    let (few, many) = PROBE_BLOCKS;
    let a = executed(probe, spec, cpu, few)?;
    let b = executed(probe, spec, cpu, many)?;
    Ok((b as f64 - a as f64) / (many - few) as f64)
}

/// Instructions the probe executes (one `-d exec` line each under `-singlestep -d nochain`).
fn executed(probe: &str, spec: &str, cpu: &str, blocks: u64) -> Result<u64, String> {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new("qemu-aarch64")
        .args([
            "-L",
            SYSROOT,
            "-cpu",
            cpu,
            "-singlestep",
            "-d",
            "nochain,exec",
            "-D",
            "/dev/stderr",
        ])
        .args([
            probe,
            "--ignored",
            "--exact",
            "probe",
            "--test-threads=1",
            "-q",
        ])
        .env("MINIQUANT_PROBE", spec)
        .env("MINIQUANT_PROBE_BLOCKS", blocks.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run qemu-aarch64: {e}"))?;
    let mut lines = 0u64;
    if let Some(log) = child.stderr.take() {
        for line in BufReader::new(log).split(b'\n') {
            let line = line.map_err(|e| format!("reading the QEMU log: {e}"))?;
            if line.starts_with(b"Trace ") {
                lines += 1;
            }
        }
    }
    let status = child.wait().map_err(|e| format!("qemu-aarch64: {e}"))?;
    if !status.success() {
        return Err(format!("probe {spec} on {cpu} failed: {status}"));
    }
    Ok(lines)
}
