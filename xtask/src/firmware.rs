//! `cargo xtask firmware`: builds the firmware images of `firmware-example/` (Cortex-M4F, Cortex-A,
//! RISC-V rv32imac, and the C image of `capi.rs`), runs them in QEMU, and prints their flash, static
//! RAM and stack budgets.
//!
//! 1. Installs what is missing (idempotent): apt's `qemu-system-arm` (which holds
//!    `qemu-system-aarch64` too) and `binutils-arm-none-eabi`, the rustup targets, `llvm-tools`
//!    (for `llvm-size`), and `defmt-print`.
//! 2. Generates the images' inputs on the host with the CLI, into `firmware-example/target/inputs`
//!    (from a real model, so never committed): `miniquant extract` of two tensors of Gemma 3 (Q8_0
//!    and Q4_K) with the metadata and a 32-entry tokenizer slice, an input vector per tensor, and
//!    `miniquant matvec`'s output for it, whose bits the firmware must reproduce.
//!    For the model images (`firmware_model.rs`): the tiny llama the M4F image embeds (written with
//!    the core's GGUF writer) and, for it and SmolLM2 (which QEMU loads into the Cortex-A image's
//!    RAM), the host's greedy run: each forward pass's token and logits digest.
//! 3. Builds both images in release mode, runs each in QEMU under a timeout through
//!    `firmware-example/qemu-run.sh` (defmt-print decodes the log), and fails on a non-zero exit;
//!    then the model images (`smollm2` on the Cortex-A, `tiny-llama` on the M4F), whose logged
//!    steps must equal the host's.
//! 4. Prints the budgets: flash (text + rodata + data, without the embedded inputs) and static RAM
//!    per image from `llvm-size`, the stack figures the firmware measured by painting, and whether
//!    the minimal images and the C image link with a panic handler that may not be referenced.
//! 5. Fails when a budget is exceeded: on the Cortex-M4F and RISC-V images, parser + `Catalog`
//!    flash under [`FLASH_BUDGET`] and each parse's stack under [`PARSE_STACK_BUDGET`], and no panic
//!    path linked in any minimal image or the C image.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::firmware_model::{self, ModelRun, Step, SMOLLM2, SMOLLM2_FILE, TINY_LLAMA};
use crate::{root, run};

/// The real model the images' extract comes from, in the cache `cargo xtask fetch` fills.
const MODEL: &str = "gemma-3-270m-q4_k_m.gguf";
/// Its tensors the images run, one of each weight type the file uses (as it stores them): Q8_0,
/// Q4_K, Q5_0, Q6_K. The firmware's `common/build.rs` expects four.
const TENSORS: [&str; 4] = [
    "blk.0.attn_v.weight",
    "blk.0.attn_output.weight",
    "blk.0.attn_k.weight",
    "blk.0.ffn_down.weight",
];
/// Metadata arrays (the tokenizer's) are cut to this many entries.
const MAX_ARRAY: &str = "32";

/// Flash of the minimal parser + `Catalog` images (the budget for microcontrollers).
pub(crate) const FLASH_BUDGET: u64 = 16 * 1024;
/// Stack of a whole header parse, either driver (the `Read` one's includes its 256 B buffer).
pub(crate) const PARSE_STACK_BUDGET: u64 = 1024;

struct Image {
    package: &'static str,
    bin: &'static str,
    target: &'static str,
    /// Held to [`PARSE_STACK_BUDGET`] (the microcontroller images).
    microcontroller: bool,
}

const IMAGES: [Image; 3] = [
    Image {
        package: "cortex-m4f",
        bin: "cortex-m4f",
        target: "thumbv7em-none-eabihf",
        microcontroller: true,
    },
    Image {
        package: "cortex-a",
        bin: "cortex-a",
        target: "aarch64-unknown-none",
        microcontroller: false,
    },
    Image {
        package: "riscv32",
        bin: "riscv32",
        target: "riscv32imac-unknown-none-elf",
        microcontroller: true,
    },
];

pub fn firmware() -> Result<(), String> {
    let start = Instant::now();
    readme_holds_the_snippet()?;
    // The root workspace's `cargo fmt --all` does not reach this separate workspace.
    let fmt = fw_cargo(&["fmt", "--all", "--", "--check"])
        .status()
        .map_err(|e| format!("cannot run cargo fmt: {e}"))?;
    if !fmt.success() {
        return Err(
            "firmware-example is not formatted (cd firmware-example && cargo fmt --all)".into(),
        );
    }
    install()?;
    let inputs = generate_inputs()?;
    let mut reports = Vec::new();
    for image in &IMAGES {
        let elf = build(image, &[])?;
        let log = run_in_qemu(&elf)?;
        reports.push((image, elf, log));
    }
    let mut model_reports = Vec::new();
    // The Cortex-A image runs the tiny llama after SmolLM2: the same file on all three machines.
    for (image, model_run, checked) in [
        (&SMOLLM2_IMAGE, &SMOLLM2, [&SMOLLM2, &TINY_LLAMA].as_slice()),
        (&TINY_LLAMA_IMAGE, &TINY_LLAMA, [&TINY_LLAMA].as_slice()),
    ] {
        let elf = build(image, &[])?;
        let started = Instant::now();
        let log = run_in_qemu(&elf)?;
        let seconds = started.elapsed().as_secs_f64();
        for run in checked {
            let host = if run.stem == SMOLLM2.stem {
                &inputs.smollm2
            } else {
                &inputs.tiny_llama
            };
            firmware_model::compare(&log, host, run, image.bin)?;
        }
        model_reports.push(ModelReport {
            image,
            run: model_run,
            elf,
            log,
            seconds,
        });
    }
    let minimal = minimal_images(&inputs)?;
    let c_image = crate::capi::c_firmware(&inputs.dir)?;
    let mut exceeded = print_budgets(&reports, &inputs, &minimal)?;
    print_model_budgets(&model_reports, &inputs)?;
    exceeded.extend(crate::capi::print_c_budget(&c_image)?);
    // The nightly cross-check rebuilds the image (about 2.5 minutes here): on request only.
    if std::env::args().any(|a| a == "--frames") {
        compiler_stack_frames();
    } else {
        eprintln!("compiler frame sizes: skipped (`cargo xtask firmware --frames` adds them)");
    }
    if !exceeded.is_empty() {
        return Err(format!(
            "firmware budgets exceeded:\n  {}",
            exceeded.join("\n  ")
        ));
    }
    eprintln!(
        "xtask firmware: all images passed ({:.1} s)",
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The README's firmware snippet must be the code the images compile
/// (`firmware-example/common/src/readme.rs`, between its markers).
fn readme_holds_the_snippet() -> Result<(), String> {
    let source =
        fs::read_to_string(fw_dir().join("common/src/readme.rs")).map_err(|e| e.to_string())?;
    let readme = fs::read_to_string(root().join("README.md")).map_err(|e| e.to_string())?;
    let snippet = source
        .split("// --- README snippet begins\n")
        .nth(1)
        .and_then(|rest| rest.split("// --- README snippet ends").next())
        .ok_or("readme.rs has no snippet markers")?;
    if readme.contains(snippet) {
        Ok(())
    } else {
        Err(
            "README.md's firmware snippet differs from firmware-example/common/src/readme.rs"
                .into(),
        )
    }
}

fn fw_dir() -> PathBuf {
    root().join("firmware-example")
}

fn found(program: &str, arg: &str) -> bool {
    Command::new(program)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

pub(crate) fn install() -> Result<(), String> {
    let have_qemu =
        found("qemu-system-arm", "--version") && found("qemu-system-aarch64", "--version");
    let have_qemu = have_qemu && found("qemu-system-riscv32", "--version");
    if !have_qemu
        || !found("arm-none-eabi-size", "--version")
        || !found("arm-none-eabi-gcc", "--version")
    {
        let sudo = !Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
        let apt = |args: &[&str]| {
            let mut all = vec!["DEBIAN_FRONTEND=noninteractive", "apt-get"];
            all.extend_from_slice(args);
            if sudo {
                run("sudo", &all)
            } else {
                run("env", &all)
            }
        };
        apt(&["update"])?;
        apt(&[
            "install",
            "-y",
            "--no-install-recommends",
            "qemu-system-arm",
            "binutils-arm-none-eabi",
            // The C image (see capi.rs) and the RISC-V image's QEMU.
            "gcc-arm-none-eabi",
            "qemu-system-misc",
        ])?;
    }
    let mut targets = vec!["target", "add"];
    targets.extend(IMAGES.iter().map(|i| i.target));
    run("rustup", &targets)?;
    run("rustup", &["component", "add", "llvm-tools"])?;
    if !found("defmt-print", "--version") {
        run(
            "cargo",
            &[
                "install",
                "defmt-print",
                "--locked",
                "--debug",
                "--version",
                "1.2.0",
            ],
        )?;
    }
    Ok(())
}

/// The files the images embed, with their sizes (subtracted from the flash figures where the image
/// links them).
struct Inputs {
    dir: PathBuf,
    files: Vec<PathBuf>,
    /// The host's runs of the model images' models.
    tiny_llama: Vec<Step>,
    smollm2: Vec<Step>,
}

pub(crate) fn cache_dir() -> PathBuf {
    match std::env::var_os("MINIQUANT_CACHE").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/miniquant")
        }
    }
}

fn generate_inputs() -> Result<Inputs, String> {
    let model = cache_dir().join(MODEL);
    if !model.is_file() {
        return Err(format!(
            "{} is missing: run `cargo xtask fetch` first",
            model.display()
        ));
    }
    let dir = fw_dir().join("target/inputs");
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let scratch = dir.join("scratch");
    fs::create_dir_all(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
    let path = |p: &Path| {
        p.to_str()
            .map(str::to_owned)
            .ok_or("non-UTF-8 path".to_owned())
    };
    let model_s = path(&model)?;

    let extract = scratch.join("model.gguf");
    let extract_s = path(&extract)?;
    let mut args = vec![
        "extract",
        model_s.as_str(),
        extract_s.as_str(),
        "--max-array",
        MAX_ARRAY,
        "--tensor",
    ];
    args.extend(TENSORS);
    miniquant(&args)?;
    miniquant(&["validate", &extract_s])?;
    update(&dir.join("model.gguf"), &read(&extract)?)?;
    update(&dir.join("tensors.txt"), TENSORS.join("\n").as_bytes())?;

    for (i, (name, cols)) in TENSORS.iter().zip(columns(&extract)?).enumerate() {
        let x_path = scratch.join(format!("x{i}.f32"));
        let y_path = scratch.join(format!("y{i}.f32"));
        let x: Vec<u8> = activations(cols, i as u32)
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        fs::write(&x_path, &x).map_err(|e| format!("{}: {e}", x_path.display()))?;
        // The host's answer, from the original file (the extract must carry the same bytes).
        let (x_s, y_s) = (path(&x_path)?, path(&y_path)?);
        miniquant(&["matvec", &model_s, name, &x_s, "-o", &y_s])?;
        update(&dir.join(format!("x{i}.f32")), &x)?;
        update(&dir.join(format!("y{i}.f32")), &read(&y_path)?)?;
    }
    let (tiny_llama, smollm2) = model_inputs(&dir, &scratch)?;
    let files = fs::read_dir(&dir)
        .map_err(|e| e.to_string())?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    Ok(Inputs {
        dir,
        files,
        tiny_llama,
        smollm2,
    })
}

/// The model images' inputs: the tiny llama (checked by `miniquant validate`) and the host's runs
/// of it and of SmolLM2, as `{stem}.expected`.
fn model_inputs(dir: &Path, scratch: &Path) -> Result<(Vec<Step>, Vec<Step>), String> {
    let started = Instant::now();
    let tiny = scratch.join("tiny-llama.gguf");
    fs::write(&tiny, firmware_model::tiny_llama()?)
        .map_err(|e| format!("{}: {e}", tiny.display()))?;
    let tiny_s = tiny.to_str().ok_or("non-UTF-8 path")?;
    miniquant(&["validate", tiny_s])?;
    update(&dir.join("tiny-llama.gguf"), &read(&tiny)?)?;
    let smollm2 = cache_dir().join(SMOLLM2_FILE);
    if !smollm2.is_file() {
        return Err(format!(
            "{} is missing: run `cargo xtask fetch` first",
            smollm2.display()
        ));
    }
    let mut runs = Vec::new();
    for (model, run) in [(&tiny, &TINY_LLAMA), (&smollm2, &SMOLLM2)] {
        let steps = firmware_model::host_steps(model, run, scratch, miniquant_output)?;
        update(
            &dir.join(format!("{}.expected", run.stem)),
            &firmware_model::expected_file(run, &steps),
        )?;
        runs.push(steps);
    }
    eprintln!("  (model inputs: {:.1} s)", started.elapsed().as_secs_f64());
    let smollm2_steps = runs.pop().unwrap_or_default();
    Ok((runs.pop().unwrap_or_default(), smollm2_steps))
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    fs::read(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// Writes `bytes` unless the file already holds them, so that an unchanged input does not rebuild
/// the images.
fn update(path: &Path, bytes: &[u8]) -> Result<(), String> {
    if fs::read(path).is_ok_and(|old| old == bytes) {
        return Ok(());
    }
    fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// Each tensor's first dimension (its columns), from `miniquant inspect --json` of the extract.
fn columns(extract: &Path) -> Result<Vec<usize>, String> {
    let out = host_cli()
        .args(["inspect", "--json"])
        .arg(extract)
        .current_dir(root())
        .output()
        .map_err(|e| format!("cannot run miniquant inspect: {e}"))?;
    let json = String::from_utf8_lossy(&out.stdout);
    TENSORS
        .iter()
        .map(|name| {
            // `"name": "<name>", ... "shape": [rows, cols]` (row-major: cols last).
            let at = json
                .find(&format!("\"{name}\""))
                .ok_or(format!("{name} not in the extract"))?;
            let shape = &json[at..];
            let open = shape.find("\"shape\"").ok_or("no shape")?;
            let list = &shape[open..];
            let (start, end) = (list.find('[').ok_or("no [")?, list.find(']').ok_or("no ]")?);
            list[start + 1..end]
                .split(',')
                .next_back()
                .and_then(|c| c.trim().parse().ok())
                .ok_or(format!("cannot read {name}'s shape"))
        })
        .collect()
}

/// Deterministic activations in about [-2, 2], exact in f32 (a multiplicative hash of the index).
fn activations(n: usize, seed: u32) -> Vec<f32> {
    (0..n as u32)
        .map(|i| {
            let h = i
                .wrapping_add(seed.wrapping_mul(0x9E37_79B9))
                .wrapping_mul(2_654_435_761);
            (h >> 8) as f32 / (1u32 << 22) as f32 - 2.0
        })
        .collect()
}

/// The host's `miniquant` command, built from this checkout: `$MINIQUANT` when set (`ci` sets it to
/// the binary its test build made), otherwise through `cargo run --release`.
fn host_cli() -> Command {
    let mut cmd = match std::env::var_os("MINIQUANT").filter(|p| !p.is_empty()) {
        Some(binary) => Command::new(binary),
        None => {
            let mut cargo = Command::new("cargo");
            cargo.args([
                "run",
                "--release",
                "-q",
                "-p",
                "miniquant-std",
                "--bin",
                "miniquant",
                "--",
            ]);
            cargo
        }
    };
    cmd.current_dir(root());
    cmd
}

/// The host's `miniquant` command with `args`, echoed; fails if it fails.
fn miniquant(args: &[&str]) -> Result<(), String> {
    let mut cmd = host_cli();
    cmd.args(args);
    eprintln!("+ {cmd:?}");
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run miniquant: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`miniquant {}` failed: {status}", args.join(" ")))
    }
}

/// The host's `miniquant` command with `args`, echoed; its standard output, or an error if it fails.
fn miniquant_output(args: &[&str]) -> Result<String, String> {
    let mut cmd = host_cli();
    cmd.args(args).stderr(Stdio::inherit());
    eprintln!("+ {cmd:?}");
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run miniquant: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "`miniquant {}` failed: {}",
            args.join(" "),
            out.status
        ))
    }
}

/// `cargo build --release` of one image in `firmware-example/` (its own workspace and target dir).
fn build(image: &Image, extra: &[&str]) -> Result<PathBuf, String> {
    let mut args = vec![
        "build",
        "--release",
        "-p",
        image.package,
        "--bin",
        image.bin,
        "--target",
        image.target,
    ];
    args.extend_from_slice(extra);
    eprintln!("+ (cd firmware-example && cargo {})", args.join(" "));
    let start = crate::Timer::start();
    let status = fw_cargo(&args)
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    eprintln!("  ({})", start.text());
    if !status.success() {
        return Err(format!("building {} failed", image.bin));
    }
    Ok(elf_path(image))
}

/// Where `build` puts an image's ELF.
fn elf_path(image: &Image) -> PathBuf {
    fw_dir()
        .join("target")
        .join(image.target)
        .join("release")
        .join(image.bin)
}

/// A cargo command for the firmware workspace: its own target dir, and no RUSTFLAGS (they would
/// replace the per-target rustflags of its `.cargo/config.toml`).
fn fw_cargo(args: &[&str]) -> Command {
    let mut cmd = Command::new("cargo");
    cmd.args(args)
        .current_dir(fw_dir())
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET");
    cmd
}

/// Runs an image through `qemu-run.sh`; echoes and returns its decoded log.
fn run_in_qemu(elf: &Path) -> Result<String, String> {
    eprintln!("+ firmware-example/qemu-run.sh {}", elf.display());
    let start = Instant::now();
    let out = Command::new("bash")
        .arg(fw_dir().join("qemu-run.sh"))
        .arg(elf)
        .current_dir(fw_dir())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run qemu-run.sh: {e}"))?;
    let log = String::from_utf8_lossy(&out.stdout).into_owned();
    eprint!("{log}");
    eprintln!("  ({:.1} s)", start.elapsed().as_secs_f64());
    match out.status.code() {
        Some(0) => Ok(log),
        Some(124) => Err(format!("{} hung (killed by timeout)", elf.display())),
        other => Err(format!("{} exited with {other:?}", elf.display())),
    }
}

/// The model images: SmolLM2 loaded into the Cortex-A image's RAM, the tiny llama in the M4F's
/// flash.
const SMOLLM2_IMAGE: Image = Image {
    package: "cortex-a",
    bin: "smollm2",
    target: "aarch64-unknown-none",
    microcontroller: false,
};
const TINY_LLAMA_IMAGE: Image = Image {
    package: "cortex-m4f",
    bin: "tiny-llama",
    target: "thumbv7em-none-eabihf",
    microcontroller: true,
};

/// A model image's run.
struct ModelReport {
    image: &'static Image,
    run: &'static ModelRun,
    elf: PathBuf,
    log: String,
    /// Wall time of the QEMU run (TCG on this host).
    seconds: f64,
}

const MINIMAL_M4F: Image = Image {
    package: "cortex-m4f",
    bin: "minimal",
    target: "thumbv7em-none-eabihf",
    microcontroller: true,
};
const MINIMAL_RISCV: Image = Image {
    package: "riscv32",
    bin: "riscv32-minimal",
    target: "riscv32imac-unknown-none-elf",
    microcontroller: true,
};

/// The minimal M4F and RISC-V images (no logging): what each costs in flash, and whether it links with a
/// panic handler that may not be referenced (`Err` holds the linker's lines naming the reference).
struct Minimal {
    what: &'static str,
    flash: u64,
    /// The flash budget the image is held to (the parser + `Catalog` ones).
    budget: Option<u64>,
    no_panic_link: Result<(), String>,
}

const PARSER_M4F: &str = "M4F: parser + Catalog";
const PARSER_RISCV: &str = "RISC-V: parser + Catalog";

/// Builds `minimal` without and with the kernels (and with the tiny llama), each with
/// `no-panic-link` first, and runs each in QEMU (exit 0: the parse succeeded and, with kernels,
/// every output matched the host's bits; with the model, every step matched the host's).
fn minimal_images(inputs: &Inputs) -> Result<Vec<Minimal>, String> {
    let mut out = Vec::new();
    for (image, what, features) in [
        (MINIMAL_M4F, PARSER_M4F, ""),
        (
            MINIMAL_M4F,
            "M4F: parser + Catalog + Q8_0/Q4_K matvec",
            "kernels",
        ),
        (
            MINIMAL_M4F,
            "M4F: tiny llama forward pass (Q8_0, Q4_K; the model aside)",
            "model",
        ),
        (MINIMAL_RISCV, PARSER_RISCV, ""),
        (
            MINIMAL_RISCV,
            "RISC-V: parser + Catalog + Q8_0/Q4_K matvec",
            "kernels",
        ),
    ] {
        // Built first with the undefined panic handler: if it links, no panic is reachable, the
        // handler is gone, and that image is the one to run and measure (one build, not two);
        // if not, the linker's lines name the reference and the ordinary build is run instead.
        let with_check = format!("{features} no-panic-link");
        let args = [
            "build",
            "--release",
            "-p",
            image.package,
            "--bin",
            image.bin,
            "--target",
            image.target,
            "--features",
            &with_check,
        ];
        eprintln!("+ (cd firmware-example && cargo {})", args.join(" "));
        let started = crate::Timer::start();
        let built = fw_cargo(&args)
            .output()
            .map_err(|e| format!("cannot run cargo: {e}"))?;
        eprintln!("  ({})", started.text());
        let (elf, no_panic_link) = if built.status.success() {
            (elf_path(&image), Ok(()))
        } else {
            let stderr = String::from_utf8_lossy(&built.stderr);
            let lines: Vec<&str> = stderr
                .lines()
                .filter(|l| l.contains("undefined symbol") || l.contains(">>> referenced by"))
                .take(4)
                .collect();
            (
                build(&image, &["--features", features])?,
                Err(lines.join("\n")),
            )
        };
        run_silent(&elf, image.target)?;
        let flash = flash_without_inputs(&elf, inputs)?;
        out.push(Minimal {
            what,
            flash,
            budget: features.is_empty().then_some(FLASH_BUDGET),
            no_panic_link,
        });
    }
    Ok(out)
}

/// Functions whose own stack frames the cross-check prints: the measured steps, the parser's
/// out-of-line steps (a painted parse figure is a driver loop's frame plus `next_raw` plus the
/// deepest of these) and the kernels.
const FRAMES_OF: [&str; 9] = [
    "checks::parse_slice",
    "checks::parse_reader",
    "Parser<8>>::next_raw",
    "Parser<8>>::header_event",
    "Parser<8>>::key",
    "Parser<8>>::string_rest",
    "Parser<8>>::array_start",
    "checks::run_matvec",
    "typed::matvec_at",
];

/// Cross-check of the painted stack figures: the compiler's own frame size of each measured function
/// (`-Z emit-stack-sizes`, so nightly; skipped with a note when the nightly toolchain is absent;
/// `cargo xtask firmware --frames` runs it, `ci` does not).
/// Built into its own target dir; informational, never fails the task.
fn compiler_stack_frames() {
    let target = "thumbv7em-none-eabihf";
    let has_nightly = Command::new("rustup")
        .args(["run", "nightly", "rustc", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has_nightly || run("rustup", &["+nightly", "target", "add", target]).is_err() {
        eprintln!("compiler frame sizes: skipped (no nightly toolchain for -Z emit-stack-sizes)");
        return;
    }
    let args = [
        "+nightly",
        "rustc",
        "--release",
        "-q",
        "-p",
        "cortex-m4f",
        "--bin",
        "cortex-m4f",
        "--target",
        target,
        "--",
        "-Z",
        "emit-stack-sizes",
    ];
    eprintln!(
        "+ (cd firmware-example && CARGO_TARGET_DIR=target/stack-sizes cargo {})",
        args.join(" ")
    );
    let start = Instant::now();
    let built = fw_cargo(&args)
        .env("CARGO_TARGET_DIR", fw_dir().join("target/stack-sizes"))
        .status()
        .is_ok_and(|s| s.success());
    eprintln!("  ({:.1} s)", start.elapsed().as_secs_f64());
    let elf = fw_dir()
        .join("target/stack-sizes")
        .join(target)
        .join("release/cortex-m4f");
    let listing = llvm_tool("llvm-readobj")
        .ok()
        .filter(|_| built)
        .and_then(|tool| {
            Command::new(tool)
                .args(["--stack-sizes", "--demangle"])
                .arg(&elf)
                .output()
                .ok()
        });
    let Some(listing) = listing else {
        eprintln!("compiler frame sizes: the nightly build failed (see above)");
        return;
    };
    // `Functions: [name]` then `Size: 0x..` lines.
    let text = String::from_utf8_lossy(&listing.stdout);
    let mut function = String::new();
    let mut frames = Vec::new();
    for line in text.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix("Functions: [") {
            function = name.trim_end_matches(']').to_owned();
        } else if let Some(size) = line.strip_prefix("Size: 0x") {
            if let (Some(key), Ok(size)) = (
                FRAMES_OF.iter().find(|k| function.contains(*k)),
                u64::from_str_radix(size, 16),
            ) {
                let short = function.split("::<").next().unwrap_or(&function);
                frames.push(format!("{key} {size} B ({short})"));
            }
        }
    }
    eprintln!(
        "compiler's own frame per function (nightly -Z emit-stack-sizes, M4F image; painted figures add callees): {}",
        frames.join(", ")
    );
}

/// Runs a minimal image (it logs nothing, so no defmt-print) in QEMU under a timeout.
fn run_silent(elf: &Path, target: &str) -> Result<(), String> {
    let machine: &[&str] = if target.starts_with("riscv32") {
        &["qemu-system-riscv32", "-machine", "virt", "-bios", "none"]
    } else {
        &[
            "qemu-system-arm",
            "-machine",
            "mps2-an386",
            "-cpu",
            "cortex-m4",
        ]
    };
    eprintln!("+ {} ... -kernel {}", machine.join(" "), elf.display());
    let status = Command::new("timeout")
        .arg("60")
        .args(machine)
        .args([
            "-nographic",
            "-semihosting-config",
            "enable=on,target=native",
            "-kernel",
        ])
        .arg(elf)
        .stdin(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run {}: {e}", machine[0]))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{} exited with {status}", elf.display()))
    }
}

/// Flash of an ELF minus the embedded inputs it links: each input file whose bytes appear in the
/// ELF (the linker drops the ones the image does not use).
fn flash_without_inputs(elf: &Path, inputs: &Inputs) -> Result<u64, String> {
    let (flash, _) = flash_and_ram(elf)?;
    let image = read(elf)?;
    let mut embedded = 0;
    for input in &inputs.files {
        let needle = read(input)?;
        if contains(&image, &needle) {
            embedded += needle.len() as u64;
        }
    }
    Ok(flash.saturating_sub(embedded))
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    let Some(&first) = needle.first() else {
        return true;
    };
    haystack
        .iter()
        .enumerate()
        .filter(|&(_, &b)| b == first)
        .any(|(i, _)| haystack.get(i..i + needle.len()) == Some(needle))
}

/// (flash, static RAM) of an ELF: flash = every allocated, non-writable section plus `.data`'s load
/// image; static RAM = `.data` + `.bss` + `.uninit` (without a `.stack` section).
pub(crate) fn flash_and_ram(elf: &Path) -> Result<(u64, u64), String> {
    let sections = sections(elf)?;
    let size = |name: &str| -> u64 {
        sections
            .iter()
            .filter(|(n, _)| n == name || n.starts_with(&format!("{name}.")))
            .map(|(_, s)| s)
            .sum()
    };
    let flash = size(".vector_table")
        + size(".text")
        + size(".rodata")
        + size(".data")
        + size(".init")
        + size(".ARM.exidx");
    let ram = size(".data") + size(".bss") + size(".uninit");
    Ok((flash, ram))
}

/// `llvm-size -A` of an ELF: (section, bytes).
fn sections(elf: &Path) -> Result<Vec<(String, u64)>, String> {
    let out = Command::new(llvm_tool("llvm-size")?)
        .arg("-A")
        .arg(elf)
        .output()
        .map_err(|e| format!("cannot run llvm-size: {e}"))?;
    if !out.status.success() {
        return Err(format!("llvm-size {} failed", elf.display()));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut cols = l.split_whitespace();
            let name = cols.next()?;
            let size = cols.next()?.parse().ok()?;
            name.starts_with('.').then(|| (name.to_owned(), size))
        })
        .collect())
}

/// A tool from rustup's `llvm-tools` component.
fn llvm_tool(name: &str) -> Result<PathBuf, String> {
    let sysroot = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .map_err(|e| format!("cannot run rustc: {e}"))?;
    let version = Command::new("rustc")
        .arg("-vV")
        .output()
        .map_err(|e| format!("cannot run rustc: {e}"))?;
    let host = String::from_utf8_lossy(&version.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_owned))
        .ok_or("rustc -vV names no host")?;
    let sysroot = String::from_utf8_lossy(&sysroot.stdout).trim().to_owned();
    Ok(Path::new(&sysroot)
        .join("lib/rustlib")
        .join(host)
        .join("bin")
        .join(name))
}

/// The numbers after `key` in a log line, e.g. `stack 712 B`.
pub(crate) fn figure(line: &str, key: &str) -> Option<u64> {
    let at = line.find(key)? + key.len();
    line[at..]
        .trim_start()
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

fn print_budgets(
    reports: &[(&Image, PathBuf, String)],
    inputs: &Inputs,
    minimal: &[Minimal],
) -> Result<Vec<String>, String> {
    let mut exceeded = Vec::new();
    eprintln!();
    eprintln!(
        "budgets (flash = code + read-only data + .data image, without the embedded inputs of {}):",
        inputs.dir.display()
    );
    eprintln!(
        "{:<24} {:>8} {:>10} {:>11} {:>11} {:>10}  matvec stack per tensor",
        "image", "flash B", "static RAM", "parse [u8]", "parse Read", "Read/slice"
    );
    for (image, elf, log) in reports {
        let (_, ram) = flash_and_ram(elf)?;
        let flash = flash_without_inputs(elf, inputs)?;
        let stack_of = |prefix: &str| {
            log.lines()
                .find(|l| l.contains(prefix))
                .and_then(|l| figure(l, "stack "))
        };
        if image.microcontroller {
            for parse in ["parse &[u8]", "parse Read"] {
                match stack_of(parse) {
                    Some(b) if b < PARSE_STACK_BUDGET => {}
                    Some(b) => exceeded.push(format!(
                        "{}: {parse} stack {b} B, budget < {PARSE_STACK_BUDGET} B",
                        image.bin
                    )),
                    None => exceeded.push(format!("{}: no `{parse}` stack figure", image.bin)),
                }
            }
        }
        let stack_of = |prefix: &str| stack_of(prefix).map_or("?".to_owned(), |v| format!("{v} B"));
        let ticks_of = |prefix: &str| {
            log.lines()
                .find(|l| l.contains(prefix))
                .and_then(|l| figure(l, "events, "))
        };
        let ratio = match (ticks_of("parse &[u8]"), ticks_of("parse Read")) {
            (Some(s), Some(r)) if s > 0 => format!("{:.2}x", r as f64 / s as f64),
            _ => "?".to_owned(),
        };
        // `matvec <name> <type> [..]: ... stack N B`
        let kernels: Vec<String> = log
            .lines()
            .filter_map(|l| {
                let rest = &l[l.find("matvec ")? + "matvec ".len()..];
                let ggml_type = rest.split_whitespace().nth(1)?;
                Some(format!("{ggml_type} {} B", figure(l, "stack ")?))
            })
            .collect();
        eprintln!(
            "{:<24} {:>8} {:>10} {:>11} {:>11} {:>10}  {}",
            format!(
                "{} ({})",
                image.bin,
                image.target.split('-').next().unwrap_or("")
            ),
            flash,
            ram,
            stack_of("parse &[u8]"),
            stack_of("parse Read"),
            ratio,
            kernels.join(", ")
        );
    }
    eprintln!("(stack columns: high-water marks measured by painting in the firmware; static RAM excludes the stack)");
    eprintln!(
        "(held to: parse stacks of the M4F and RISC-V images < {PARSE_STACK_BUDGET} B; parser + Catalog flash < {FLASH_BUDGET} B; no panic path)"
    );
    for m in minimal {
        let link = match &m.no_panic_link {
            Ok(()) => "links with an undefined panic handler: no panic path".to_owned(),
            Err(why) => {
                exceeded.push(format!("minimal image, {}: a panic path is linked", m.what));
                format!(
                    "a panic path is reachable (target not met):\n    {}",
                    why.replace('\n', "\n    ")
                )
            }
        };
        let budget = match m.budget {
            Some(budget) if m.flash >= budget => {
                exceeded.push(format!(
                    "minimal image, {}: flash {} B, budget < {budget} B",
                    m.what, m.flash
                ));
                format!(" (budget < {budget} B: EXCEEDED)")
            }
            Some(budget) => format!(" (budget < {budget} B)"),
            None => String::new(),
        };
        eprintln!(
            "minimal image, {}: flash {} B{budget}; {link}",
            m.what, m.flash
        );
    }
    Ok(exceeded)
}

/// The model images' figures: flash (code without the embedded model), the model file, static RAM,
/// the working memory and stack they logged, and the instructions and QEMU wall time per forward
/// pass.
fn print_model_budgets(reports: &[ModelReport], inputs: &Inputs) -> Result<(), String> {
    eprintln!();
    eprintln!("model images (flash without the embedded model; working memory = the model's Layout + logits):");
    eprintln!(
        "{:<26} {:>8} {:>10} {:>10} {:>12} {:>11} {:>12}  M instructions per pass; QEMU wall time",
        "image", "flash B", "model B", "static RAM", "working mem", "load stack", "gen. stack"
    );
    for r in reports {
        let (_, ram) = flash_and_ram(&r.elf)?;
        let flash = flash_without_inputs(&r.elf, inputs)?;
        // The image's own model's lines (`{stem} ...`).
        let stem = r.run.stem;
        let line_with = |key: &str| {
            let key = format!("{stem}{key}");
            r.log.lines().find(move |l| l.contains(&key))
        };
        let model_bytes = r
            .log
            .lines()
            .find(|l| l.contains(" B in flash") || l.contains("SmolLM2 file"))
            .and_then(|l| figure(l, "tiny llama ").or_else(|| figure(l, "SmolLM2 file ")));
        let work = line_with(" working memory").and_then(|l| figure(l, "): "));
        let load = line_with(": ").and_then(|l| figure(l, "load stack "));
        let generate = line_with(" generate (").and_then(|l| {
            let at = l.find("stack ")? + "stack ".len();
            figure(&l[at..].replace("at least ", ""), "")
        });
        // `{stem} step i: ..., N ticks = T ns`: millions of instructions (1 ns each under -icount).
        let per_pass: Vec<String> = r
            .log
            .lines()
            .filter(|l| l.contains(&format!("{stem} step ")))
            .filter_map(|l| figure(l, "ticks = "))
            .map(|ns| format!("{:.1}", ns as f64 / 1e6))
            .collect();
        let shown = |v: Option<u64>| v.map_or("?".to_owned(), |v| v.to_string());
        eprintln!(
            "{:<26} {:>8} {:>10} {:>10} {:>12} {:>11} {:>12}  {}; {:.1} s for {} passes",
            format!(
                "{} ({})",
                r.image.bin,
                r.image.target.split('-').next().unwrap_or("")
            ),
            flash,
            shown(model_bytes),
            ram,
            shown(work),
            shown(load),
            shown(generate),
            per_pass.join(", "),
            r.seconds,
            r.run.steps
        );
    }
    eprintln!("(per forward pass, the prompt's first: millions of instructions, 1 ns of QEMU's virtual time each under -icount shift=0)");
    Ok(())
}
