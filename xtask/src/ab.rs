//! `cargo xtask ab REV [--native] TYPE COLS VARIANTS [ROUNDS] [KIB]`: times one matvec through
//! this checkout's core and through revision REV's, in one process (the harness in
//! `xtask/ab-harness/`), so that a kernel change is measured against what it replaces on the same
//! machine at the same moment. `--native` builds both with `-C target-cpu=native`.
//!
//! Both cores are built with one codegen unit and loops aligned to 64 bytes, so that the two
//! copies of unchanged code compile to the same instructions at equally aligned addresses (A/A
//! runs then agree within 0.5-3% on the Zen 4 VM). One run in four or five still put a ratio ~20%
//! off the others: repeat a run before believing it.
//!
//! REV's `core/` is taken with `git archive` into `target/ab/old/`, beside a workspace manifest
//! holding REV's `[workspace.package]` and `[workspace.dependencies]`, and its package renamed
//! `miniquant_old`; the harness crate in `target/ab/harness/` depends on both cores.

use std::path::Path;
use std::process::Command;

/// The sections of a workspace manifest that member crates inherit from.
const INHERITED: [&str; 2] = ["[workspace.package]", "[workspace.dependencies]"];

pub fn ab(args: &[String]) -> Result<(), String> {
    let usage = "usage: cargo xtask ab REV [--native] TYPE COLS VARIANTS [ROUNDS] [KIB]";
    let (rev, rest) = args.split_first().ok_or(usage)?;
    let native = rest.first().is_some_and(|a| a == "--native");
    let harness_args = if native { &rest[1..] } else { rest };
    if harness_args.len() < 3 {
        return Err(usage.into());
    }
    let root = crate::root();
    let ab_dir = root.join("target/ab");
    let old_dir = ab_dir.join("old");
    let harness_dir = ab_dir.join("harness");
    // A clean copy every time: REV may have changed since the last run.
    let _ = std::fs::remove_dir_all(&old_dir);
    std::fs::create_dir_all(&old_dir).map_err(|e| format!("{}: {e}", old_dir.display()))?;
    std::fs::create_dir_all(harness_dir.join("src")).map_err(|e| format!("harness dir: {e}"))?;

    let archive = format!(
        "git archive --format=tar {rev} core | tar -x -C '{}'",
        old_dir.display()
    );
    crate::run("bash", &["-c", &archive])?;
    let manifest = git_show(&root, &format!("{rev}:Cargo.toml"))?;
    write(
        &old_dir.join("Cargo.toml"),
        &format!(
            "[workspace]\nmembers = [\"core\"]\n\n{}",
            inherited_sections(&manifest)
        ),
    )?;
    let core_manifest = old_dir.join("core/Cargo.toml");
    let text = std::fs::read_to_string(&core_manifest).map_err(|e| format!("{e}"))?;
    write(
        &core_manifest,
        &text.replacen("name = \"miniquant\"", "name = \"miniquant_old\"", 1),
    )?;

    write(
        &harness_dir.join("Cargo.toml"),
        &format!(
            "[package]\nname = \"ab\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n\
             [dependencies]\nminiquant = {{ path = \"{}\", features = [\"std\"] }}\n\
             miniquant_old = {{ path = \"{}\", features = [\"std\"] }}\n\n\
             [profile.release]\ndebug = 1\ncodegen-units = 1\n\n[workspace]\n",
            root.join("core").display(),
            old_dir.join("core").display()
        ),
    )?;
    write(
        &harness_dir.join("src/main.rs"),
        include_str!("../ab-harness/main.rs"),
    )?;

    let target_dir = ab_dir.join(if native { "target-native" } else { "target" });
    let mut build = Command::new("cargo");
    build
        .args(["build", "--release", "--quiet"])
        .current_dir(&harness_dir)
        .env("CARGO_TARGET_DIR", &target_dir);
    // Loops aligned to 64 bytes in both cores: where a hot loop starts otherwise follows from
    // everything linked before it, and on Zen 4 that alone moved the same Q6_K loop by 13-18%
    // between the two copies (an A/A run); aligned, A/A runs agree within 0.5%.
    let mut rustflags = String::from("-C llvm-args=-align-loops=64");
    if native {
        rustflags.push_str(" -C target-cpu=native");
    }
    build.env("RUSTFLAGS", rustflags);
    eprintln!(
        "+ cargo build --release (target/ab/harness{})",
        if native { ", native" } else { "" }
    );
    let status = build.status().map_err(|e| format!("cargo: {e}"))?;
    if !status.success() {
        return Err(format!("building the harness failed: {status}"));
    }
    let binary = target_dir.join("release/ab");
    let status = Command::new(&binary)
        .args(harness_args)
        .status()
        .map_err(|e| format!("{}: {e}", binary.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("the harness failed: {status}"))
    }
}

fn git_show(root: &Path, object: &str) -> Result<String, String> {
    let out = Command::new("git")
        .args(["show", object])
        .current_dir(root)
        .output()
        .map_err(|e| format!("git: {e}"))?;
    if !out.status.success() {
        return Err(format!("git show {object} failed"));
    }
    String::from_utf8(out.stdout).map_err(|e| format!("{object}: {e}"))
}

/// The `[workspace.package]` and `[workspace.dependencies]` sections of a workspace manifest,
/// each up to the next section header.
fn inherited_sections(manifest: &str) -> String {
    let mut out = String::new();
    let mut keep = false;
    for line in manifest.lines() {
        if line.starts_with('[') {
            keep = INHERITED.contains(&line.trim());
        }
        if keep {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}
