//! Which kernel levels this machine's tests actually run. The level tests, the real-file tests
//! and the `kernels` fuzz target hold every level *the CPU has* to the scalar bits; a level it
//! lacks is compiled and linted but never executed, and nothing emulates AVX-512 here
//! (qemu-x86_64 7.2's TCG stops at AVX2). So a green run on an AVX2-only host (seen: a Zen 3
//! CI machine) says nothing about the AVX-512 VNNI kernels; `ci` prints that before its tests
//! and at its end. Availability is the core's own (`Level::is_available`), except for `amx`,
//! which needs the OS's permission besides the CPU: the core's test build asks for it itself, so
//! its tests run `amx` wherever the CPU has AMX (`level::amx_supported`). Where it does not, the
//! AMX kernels were checked on emulated tiles only (their instruction encodings not at all).

use miniquant::quant::level::{self, Level};

/// The levels of this host's architecture, lowest first (what the native tests can run).
const HOST_LEVELS: &[Level] = if cfg!(target_arch = "x86_64") {
    &[Level::Scalar, Level::Avx2, Level::Avx512Vnni, Level::Amx]
} else if cfg!(target_arch = "aarch64") {
    &[Level::Scalar, Level::Neon, Level::Dotprod, Level::I8mm]
} else {
    &[Level::Scalar]
};

/// One line naming the levels run natively and those skipped.
pub fn report() -> String {
    // `amx` is never available in this process (nothing here asks the OS), but the core's tests
    // ask for themselves: they run it where the CPU has AMX.
    let runs = |l: &Level| l.is_available() || (*l == Level::Amx && level::amx_supported());
    let (run, skipped): (Vec<Level>, Vec<Level>) = HOST_LEVELS.iter().partition(|l| runs(l));
    let names = |levels: &[Level]| {
        levels
            .iter()
            .map(|l| l.name())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let amx_runs = run.contains(&Level::Amx);
    let mut run = names(&run);
    // The VNNI kernels' second copies, compiled with AVX-512 VBMI, run only where it is present
    // (Cascade Lake has VNNI without it).
    #[cfg(target_arch = "x86_64")]
    if Level::Avx512Vnni.is_available() {
        let vbmi = std::is_x86_feature_detected!("avx512vbmi");
        run += if vbmi {
            " (with its VBMI copies)"
        } else {
            " (not its VBMI copies)"
        };
    }
    if amx_runs {
        run += " (amx: the packed matmul on tiles, the rest avx512vnni's)";
    }
    let amx_note = if skipped.contains(&Level::Amx) {
        "; amx checked on emulated tiles only"
    } else {
        ""
    };
    let skipped = if skipped.is_empty() {
        "none".to_string()
    } else {
        format!(
            "{} (this CPU lacks them: not tested here{amx_note})",
            names(&skipped)
        )
    };
    format!(
        "xtask: {} kernel levels run natively: {run}; skipped: {skipped}",
        std::env::consts::ARCH
    )
}

/// Prints [`report`] on stderr, beside the commands' output.
pub fn print() {
    eprintln!("{}", report());
}
