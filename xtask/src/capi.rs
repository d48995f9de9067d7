//! `cargo xtask capi`: the C API (`capi/`, its own workspace) from C.
//!
//! 1. fmt and clippy of the `capi/` workspace (the root's `cargo fmt --all` and clippy do not reach
//!    it); clippy per package, since building the no_std static library together with `capi-check`
//!    (which enables the core's `std`) would unify the core's features.
//! 2. Regenerates `include/miniquant.h` with cbindgen (installed by cargo, pinned) into `target/`
//!    and fails if the committed header differs.
//! 3. Builds the static library for the host, compiles `capi/check/c/capi_test.c` against it with
//!    `cc -fsanitize=address,undefined`, and runs `capi-check`, which runs the C program over the
//!    hostile headers, the fuzz corpus, truncations and both real models and compares its output
//!    with the Rust API's.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::{root, run};

/// The cbindgen the header is generated with (its output can change between versions).
const CBINDGEN_VERSION: &str = "0.29.2";

/// The real models the C program reads, in the cache `cargo xtask fetch` fills.
const MODELS: [&str; 2] = [
    "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma-3-270m-q4_k_m.gguf",
];

pub fn capi_dir() -> PathBuf {
    root().join("capi")
}

/// A cargo command in the `capi/` workspace (its own target dir, no RUSTFLAGS).
pub fn capi_cargo(args: &[&str]) -> Command {
    eprintln!("+ (cd capi && cargo {})", args.join(" "));
    let mut cmd = Command::new("cargo");
    cmd.args(args)
        .current_dir(capi_dir())
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET");
    cmd
}

fn succeed(mut cmd: Command, what: &str) -> Result<(), String> {
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{what} failed ({status})"))
    }
}

pub fn capi() -> Result<(), String> {
    let start = Instant::now();
    succeed(
        capi_cargo(&["fmt", "--all", "--", "--check"]),
        "cargo fmt in capi/ (cd capi && cargo fmt --all)",
    )?;
    for package in ["miniquant-capi", "capi-check"] {
        succeed(
            capi_cargo(&[
                "clippy",
                "--release",
                "-q",
                "-p",
                package,
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ]),
            &format!("clippy of {package}"),
        )?;
    }
    header_is_current()?;

    succeed(
        capi_cargo(&["build", "--release", "-q", "-p", "miniquant-capi"]),
        "building the static library",
    )?;
    succeed(
        capi_cargo(&["build", "--release", "-q", "-p", "capi-check"]),
        "building capi-check",
    )?;
    let target = capi_dir().join("target");
    let program = target.join("c/capi_test");
    fs::create_dir_all(target.join("c")).map_err(|e| e.to_string())?;
    let lib = target.join("release/libminiquant_capi.a");
    let include = root().join("include");
    let source = capi_dir().join("check/c/capi_test.c");
    let mut cc = Command::new("cc");
    cc.args([
        "-std=c11",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-g",
        "-O1",
        "-fsanitize=address,undefined",
        "-fno-sanitize-recover=all",
        "-fno-omit-frame-pointer",
    ])
    .arg("-I")
    .arg(&include)
    .arg(&source)
    .arg(&lib)
    .arg("-o")
    .arg(&program);
    eprintln!("+ cc -fsanitize=address,undefined capi/check/c/capi_test.c libminiquant_capi.a");
    succeed(cc, "compiling capi_test.c")?;

    let cache = crate::firmware::cache_dir();
    let models: Vec<PathBuf> = MODELS.iter().map(|m| cache.join(m)).collect();
    if let Some(missing) = models.iter().find(|m| !m.is_file()) {
        return Err(format!(
            "{} is missing: run `cargo xtask fetch` first",
            missing.display()
        ));
    }
    let mut check = Command::new(target.join("release/capi-check"));
    check
        .arg(&program)
        .arg(target.join("check-work"))
        .args(&models)
        // ASan's leak checker needs ptrace, which some containers forbid; the program frees what
        // it allocates anyway.
        .env("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=1")
        .env("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1");
    eprintln!("+ capi/target/release/capi-check capi/target/c/capi_test ...");
    succeed(check, "capi-check (the C API against the Rust API)")?;
    eprintln!(
        "xtask capi: header current, C tests passed ({:.1} s)",
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Regenerates the header into `capi/target/` and compares it with `include/miniquant.h`.
fn header_is_current() -> Result<(), String> {
    let have = Command::new("cbindgen")
        .arg("--version")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(CBINDGEN_VERSION));
    if !have {
        run(
            "cargo",
            &[
                "install",
                "cbindgen",
                "--locked",
                "--version",
                CBINDGEN_VERSION,
            ],
        )?;
    }
    let fresh = capi_dir().join("target/miniquant.h");
    fs::create_dir_all(capi_dir().join("target")).map_err(|e| e.to_string())?;
    let mut gen = Command::new("cbindgen");
    gen.current_dir(capi_dir())
        .args([
            "--config",
            "cbindgen.toml",
            "--crate",
            "miniquant-capi",
            "--quiet",
            "--output",
        ])
        .arg(&fresh);
    eprintln!("+ (cd capi && cbindgen --config cbindgen.toml --output target/miniquant.h)");
    succeed(gen, "cbindgen")?;
    let committed = root().join("include/miniquant.h");
    if read(&fresh)? != read(&committed)? {
        return Err(format!(
            "include/miniquant.h is stale: regenerate it with `cd capi && cbindgen --config cbindgen.toml --crate miniquant-capi --output ../include/miniquant.h` (fresh copy: {})",
            fresh.display()
        ));
    }
    Ok(())
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    fs::read(path).map_err(|e| format!("{}: {e}", path.display()))
}
