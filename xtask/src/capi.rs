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
    let start = crate::Timer::start();
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    eprintln!("  ({})", start.text());
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

/// Installs cbindgen (pinned) if that version is missing.
pub(crate) fn install_cbindgen() -> Result<(), String> {
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
    Ok(())
}

/// Regenerates the header into `capi/target/` and compares it with `include/miniquant.h`.
fn header_is_current() -> Result<(), String> {
    install_cbindgen()?;
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

/// The C firmware image: `firmware-example/c-m4f/main.c` built with `arm-none-eabi-gcc` against the
/// static library (size-optimised, only the kernel families the image uses), run in QEMU.
pub struct CImage {
    /// The ELF.
    pub elf: PathBuf,
    /// Its semihosting output.
    pub log: String,
    /// Whether it also links with the library's panic handler calling an undefined symbol (`Err`:
    /// the linker's lines naming it).
    pub no_panic_link: Result<(), String>,
}

const M4F: &str = "thumbv7em-none-eabihf";

/// Builds the static library for the M4F with `features`; returns its path. Both feature sets
/// share one target dir (the core's build is the same): link each library before building the next.
fn m4f_library(features: &str) -> Result<PathBuf, String> {
    succeed(
        capi_cargo(&[
            "build",
            "-q",
            "--profile",
            "firmware",
            "--target",
            M4F,
            "-p",
            "miniquant-capi",
            "--no-default-features",
            "--features",
            features,
        ]),
        "building the M4F static library",
    )?;
    Ok(capi_dir()
        .join("target")
        .join(M4F)
        .join("firmware/libminiquant_capi.a"))
}

/// `arm-none-eabi-gcc` of main.c against `lib` into `elf`; the linker's output on failure.
fn link_m4f(lib: &Path, inputs: &Path, elf: &Path) -> Result<(), String> {
    let dir = root().join("firmware-example/c-m4f");
    let out = Command::new("arm-none-eabi-gcc")
        .args([
            "-mcpu=cortex-m4",
            "-mthumb",
            "-mfpu=fpv4-sp-d16",
            "-mfloat-abi=hard",
            "-std=c11",
            "-Os",
            "-g",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-ffreestanding",
            "-nostdlib",
            "-ffunction-sections",
            "-fdata-sections",
            "-Wl,--gc-sections",
        ])
        .arg(format!("-DINPUTS=\"{}\"", inputs.display()))
        .arg("-I")
        .arg(root().join("include"))
        .arg("-T")
        .arg(dir.join("link.ld"))
        .arg(dir.join("main.c"))
        .arg(lib)
        .arg("-lgcc")
        .arg("-o")
        .arg(elf)
        .output()
        .map_err(|e| format!("cannot run arm-none-eabi-gcc: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

pub fn c_firmware(inputs: &Path) -> Result<CImage, String> {
    let out_dir = root().join("firmware-example/target/c-m4f");
    fs::create_dir_all(&out_dir).map_err(|e| e.to_string())?;
    let elf = out_dir.join("c-m4f.elf");
    eprintln!(
        "+ arm-none-eabi-gcc firmware-example/c-m4f/main.c libminiquant_capi.a (legacy, k-quants)"
    );
    link_m4f(&m4f_library("legacy,k-quants")?, inputs, &elf)?;
    eprintln!(
        "+ qemu-system-arm -machine mps2-an386 -icount shift=0 ... -kernel {}",
        elf.display()
    );
    let start = Instant::now();
    let out = Command::new("timeout")
        .args([
            "120",
            "qemu-system-arm",
            "-machine",
            "mps2-an386",
            "-cpu",
            "cortex-m4",
        ])
        .args(["-icount", "shift=0", "-nographic", "-semihosting-config"])
        .args(["enable=on,target=native", "-kernel"])
        .arg(&elf)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run qemu-system-arm: {e}"))?;
    // QEMU writes the semihosting console to stderr.
    let log =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    eprint!("{log}");
    eprintln!("  ({:.1} s)", start.elapsed().as_secs_f64());
    if !out.status.success() {
        return Err(format!("the C image exited with {}", out.status));
    }
    let no_panic_elf = out_dir.join("c-m4f-no-panic-link.elf");
    let no_panic_link = link_m4f(
        &m4f_library("legacy,k-quants,no-panic-link")?,
        inputs,
        &no_panic_elf,
    )
    .map_err(|stderr| {
        stderr
            .lines()
            .filter(|l| l.contains("undefined reference"))
            .take(4)
            .collect::<Vec<_>>()
            .join("\n")
    });
    Ok(CImage {
        elf,
        log,
        no_panic_link,
    })
}

/// The C image's line of the budgets: flash (without the `.inputs` section), static RAM, and the
/// stack figures it measured. Returns the budgets it exceeds: a linked panic path. (Its parse
/// stack holds `mq_catalog`'s catalog of 8 keys and 8 tensors and the caller's `mq_parser`, so the
/// Rust images' 1 KiB does not apply; the figures are printed.)
pub fn print_c_budget(image: &CImage) -> Result<Vec<String>, String> {
    let (flash, ram) = crate::firmware::flash_and_ram(&image.elf)?;
    let stack_of = |prefix: &str| {
        image
            .log
            .lines()
            .find(|l| l.starts_with(prefix))
            .and_then(|l| crate::firmware::figure(l, "stack "))
            .map_or("?".to_owned(), |v| format!("{v} B"))
    };
    let kernels: Vec<String> = image
        .log
        .lines()
        .filter(|l| l.starts_with("matvec "))
        .filter_map(|l| {
            let ggml_type = crate::firmware::figure(l, "type ")?;
            Some(format!(
                "type {ggml_type} {} B",
                crate::firmware::figure(l, "stack ")?
            ))
        })
        .collect();
    eprintln!(
        "{:<24} {:>8} {:>10} {:>11} {:>11} {:>10}  {}",
        "c-m4f (C, thumbv7em)",
        flash,
        ram,
        stack_of("parse &[u8]"),
        stack_of("parse Read"),
        "",
        kernels.join(", ")
    );
    eprintln!(
        "(c-m4f: the parse columns include mq_catalog and the caller's mq_parser of {} B)",
        8 * 48
    );
    match &image.no_panic_link {
        Ok(()) => {
            eprintln!(
                "C M4F image: links with the library's panic handler undefined: no panic path"
            );
            Ok(Vec::new())
        }
        Err(why) => {
            eprintln!(
                "C M4F image: a panic path of the library is reachable:\n    {}",
                why.replace('\n', "\n    ")
            );
            Ok(vec![
                "C M4F image: a panic path of the library is linked".into()
            ])
        }
    }
}
