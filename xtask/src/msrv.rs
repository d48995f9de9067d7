//! The declared `rust-version` (1.89) accepts the two published crates (the CLI included):
//! `cargo check`, which type-checks every item as a build does but skips code generation, the
//! bulk of a from-scratch build of the CLI's dependencies with a second toolchain. The doctests
//! need no task of their own: `cargo test --workspace` of the `test` task runs them.

use crate::run;

/// The workspace's `rust-version`.
const MSRV: &str = "1.89";

/// Installs the toolchain if missing (minimal profile).
pub fn install() -> Result<(), String> {
    let installed = std::process::Command::new("rustup")
        .args(["run", MSRV, "rustc", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !installed {
        run(
            "rustup",
            &["toolchain", "install", MSRV, "--profile", "minimal"],
        )?;
    }
    Ok(())
}

/// `cargo +1.89 check` of the library crates and the CLI, installing the toolchain first.
pub fn msrv_build() -> Result<(), String> {
    install()?;
    let toolchain = format!("+{MSRV}");
    run(
        "cargo",
        &[
            &toolchain,
            "check",
            "-p",
            "miniquant",
            "-p",
            "miniquant-std",
        ],
    )
}
