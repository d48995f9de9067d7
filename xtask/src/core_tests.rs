//! `core`: the core's own tests (unit tests, doctests, `tests/detect_without_std.rs`) as a
//! firmware or library user builds it: without `std`, with the `model` feature (as the aarch64
//! step builds it), in the `ci` profile, whose overflow checks and debug assertions catch an
//! addition made before its guard. The `tests` step runs every other crate's tests; the core's
//! run here alone, so its test binary (the largest of the suite) is compiled once, not once with
//! the workspace's features (`std`) and once without. No kernel depends on `std`.
//!
//! The unit tests in `ci`; the doctests and `tests/detect_without_std.rs` in `ci-unopt` (the same
//! checks, unoptimised), since they need the core as a library of its own, which at `ci`'s
//! optimisation is a second compile of the whole crate (about 40 CPU seconds) for ten small tests.

use crate::{run, CI_PROFILE};

/// The profile of the tests that need the core built as a library: see Cargo.toml.
pub const UNOPT_PROFILE: &str = "ci-unopt";

/// The core's features in this step (besides its defaults).
pub const FEATURES: &str = "model";

pub(crate) fn tests() -> Result<(), String> {
    let core_tests = |profile: &str, which: &[&str]| {
        let args = [
            &[
                "test",
                "-p",
                "miniquant",
                "--profile",
                profile,
                "--features",
                FEATURES,
            ][..],
            which,
        ]
        .concat();
        run("cargo", &args)
    };
    core_tests(CI_PROFILE, &["--lib"])?;
    core_tests(UNOPT_PROFILE, &["--test", "detect_without_std"])?;
    core_tests(UNOPT_PROFILE, &["--doc"])
}
