//! `overflow`: the core's tests with its default features (no `std`, the feature set a firmware
//! or library user gets) in the `ci` profile, whose overflow checks and debug assertions catch an
//! addition made before its guard, which a release build would let wrap silently. The rest of the
//! suite (the hostile-header suite included) gets the same checks in the `tests` step, from the
//! same profile; this step adds the build without `std`.

use crate::{run, CI_PROFILE};

pub(crate) fn tests() -> Result<(), String> {
    run(
        "cargo",
        &["test", "-p", "miniquant", "--profile", CI_PROFILE],
    )
}
