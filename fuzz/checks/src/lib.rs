//! The checks the fuzz targets run, one module per target, each with a `check(data: &[u8])` that
//! panics on a finding. The fuzz targets call them under libFuzzer; `tests/tests/integration/fuzz_corpus.rs`
//! replays the committed corpus through the same functions on stable.

/// The parser drivers run side by side (the tests crate's module, compiled here too).
#[path = "../../../tests/src/drive.rs"]
pub mod drive;

pub mod header;
pub mod kernels;
pub mod model;
pub mod roundtrip;
pub mod validate;

/// A target's check: panics on a finding.
pub type Check = fn(&[u8]);

/// The fuzz targets, by name, with their checks.
pub const TARGETS: [(&str, Check); 5] = [
    ("header", header::check),
    ("validate", validate::check),
    ("roundtrip", roundtrip::check),
    ("kernels", kernels::check),
    ("model", model::check),
];
