//! `overflow`: the parser's no-panic tests with overflow checks on (the debug profile), as firmware,
//! `cargo test` and fuzzing build it. The main test run is in release, where arithmetic wraps
//! silently, so an addition made before its guard would go unnoticed there.
//!
//! Runs the core's unit, property and doc tests and the hostile-header suite (about a minute
//! including the debug build).

use crate::run;

pub(crate) fn tests() -> Result<(), String> {
    run("cargo", &["test", "-p", "miniquant"])?;
    run(
        "cargo",
        &["test", "-p", "miniquant-tests", "--test", "hostile_headers"],
    )
}
