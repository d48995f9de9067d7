//! `overflow`: the core's tests with its default features (no `std`, the feature set a firmware
//! or library user gets) in the `ci` profile, whose overflow checks and debug assertions catch an
//! addition made before its guard, which a release build would let wrap silently. The rest of the
//! suite (the hostile-header suite included) gets the same checks in the `tests` step, from the
//! same profile; this step adds the build without `std`.
//!
//! The unit tests in `ci`; the doctests and `tests/detect_without_std.rs` in `ci-unopt` (the same
//! checks, unoptimised), since they need the core as a library of its own, which at `ci`'s
//! optimisation is a second compile of the whole crate (about 40 CPU seconds) for ten small tests.

use crate::{run, CI_PROFILE};

/// The profile of the tests that need the core built as a library: see Cargo.toml.
pub const UNOPT_PROFILE: &str = "ci-unopt";

pub(crate) fn tests() -> Result<(), String> {
    let core_tests = |profile: &str, which: &[&str]| {
        let args = [
            &["test", "-p", "miniquant", "--profile", profile][..],
            which,
        ]
        .concat();
        run("cargo", &args)
    };
    core_tests(CI_PROFILE, &["--lib"])?;
    core_tests(UNOPT_PROFILE, &["--test", "detect_without_std"])?;
    core_tests(UNOPT_PROFILE, &["--doc"])
}
