//! The declared `rust-version` (1.89) builds the two published crates (the CLI included). The
//! doctests need no task of their own: `cargo test --workspace` of the `test` task runs them.

use crate::run;

/// The workspace's `rust-version`.
const MSRV: &str = "1.89";

/// Installs the toolchain if missing (minimal profile), then `cargo +1.89 build` of the library
/// crates and the CLI.
pub fn msrv_build() -> Result<(), String> {
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
    let toolchain = format!("+{MSRV}");
    run(
        "cargo",
        &[
            &toolchain,
            "build",
            "-p",
            "miniquant",
            "-p",
            "miniquant-std",
        ],
    )
}
