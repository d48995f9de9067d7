//! `cargo xtask miri`: the core's unit tests under Miri (undefined behaviour, out-of-bounds and
//! misaligned accesses, invalid values) on the scalar paths.
//!
//! The build has no SIMD at all (`--cfg miniquant_disable_simd`: Miri cannot run the vendor
//! intrinsics, and the scalar kernels are the reference the SIMD ones are held to). Tests whose
//! work is a large loop ([`SKIPPED`]: 2 ms or more as a native debug build, plus one parser test)
//! are skipped: under Miri each takes many minutes and checks nothing the smaller tests do not
//! run through. The parser and writer tests, the zero-copy casts, and every kernel family's
//! hand-built blocks, hostile lengths and float helpers still run (113 tests).
//!
//! Measured on the 2-core machine shared with five other builds (load average 16-19): the cold
//! Miri build (sysroot and crate) took 21 minutes, the test run 20 minutes (one 7-minute test,
//! since skipped). On a quiet Zen 3 (2026-12-02), warm: 6 minutes, 189 s of it the tests. Not
//! part of `ci`.
//!
//! Installs what it needs when missing: the nightly toolchain (minimal profile) and its `miri`
//! component. It gets its own target directory (Miri builds differ from normal ones).

use std::process::Command;
use std::time::Instant;

/// Tests skipped under Miri (libtest `--skip` filters): every test that takes 2 ms or more as a
/// native debug build (Miri runs such a test for minutes; one of 16 ms took over 9 minutes).
pub const SKIPPED: [&str; 27] = [
    "gguf::tests::depth_limit_is_enforced_without_recursion",
    "gguf::tests::drivers_agree_on_every_buffer_and_chunk_size",
    "gguf::tests::every_truncation_is_an_error_in_every_driver",
    "gguf::tests::one_bad_string_among_many_costs_linear_utf8_work",
    "gguf::tests::push_driver_agrees_for_random_chunks",
    "gguf::tests::push_loop_over_a_whole_file_ends",
    "gguf::writer::tests::written_files_parse_back_to_the_same_events",
    "quant::cast::tests::f16_conversion_matches_half_for_every_bit_pattern",
    "quant::float::tests::blockwise_and_branchless_casts_match_the_scalar_forms",
    "quant::float::tests::first_largest_magnitude_matches_the_scan",
    "quant::float::tests::sqrt_is_correctly_rounded",
    "quant::iq::tests::hostile_blocks_do_not_panic",
    "quant::iq::tests::iq4_round_trip_error_is_under_ggml_threshold",
    "quant::iq::tests::vec_dot_matches_an_f64_dot_of_the_operands",
    "quant::kernel_tests::arbitrary_floats_never_panic",
    "quant::kernel_tests::round_trip_error_within_ggml_thresholds",
    "quant::kernel_tests::special_blocks_do_not_panic",
    "quant::kernel_tests::vec_dot_error_within_ggml_thresholds",
    "quant::kernel_tests::vec_dot_matches_f64_dot_of_dequantized_operands",
    "quant::level_tests::matmul_columns_equal_matvec_at_every_level",
    // 40 matrices quantized (five Q4_K: its scale search), 160 matmuls and 440 matvecs: killed
    // after more than 20 minutes under Miri, beside a build.
    "quant::level_tests::matmul_of_odd_and_even_shapes_equals_matvec_per_column",
    "quant::matvec::tests::equals_quantize_then_vec_dot_per_row",
    "quant::misc::mxfp4::tests::floor_log2_rounds_up_just_below_powers_of_two",
    "quant::misc::tests::hostile_blocks_do_not_panic",
    "quant::misc::tests::round_trip_error_is_under_ggml_threshold",
    "quant::misc::tests::vec_dot_matches_an_f64_dot_of_the_operands",
    "result:",
];

fn succeeds(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Installs nightly (minimal profile) and its miri component if they are missing.
fn install() -> Result<(), String> {
    if !succeeds("rustc", &["+nightly", "--version"]) {
        crate::run(
            "rustup",
            &["toolchain", "install", "nightly", "--profile", "minimal"],
        )?;
    }
    if !succeeds("cargo", &["+nightly", "miri", "--version"]) {
        crate::run(
            "rustup",
            &["+nightly", "component", "add", "miri", "rust-src"],
        )?;
    }
    Ok(())
}

/// `cargo +nightly miri test -p miniquant --lib` on the scalar build, minus [`SKIPPED`].
pub fn run() -> Result<(), String> {
    install()?;
    let target_dir = crate::root().join("target").join("miri");
    let mut args = vec!["+nightly", "miri", "test", "-p", "miniquant", "--lib", "--"];
    for skipped in SKIPPED {
        args.extend(["--skip", skipped]);
    }
    eprintln!(
        "+ RUSTFLAGS=\"--cfg miniquant_disable_simd\" CARGO_TARGET_DIR={} cargo {}",
        target_dir.display(),
        args.join(" ")
    );
    let start = Instant::now();
    let status = Command::new("cargo")
        .args(&args)
        .env("RUSTFLAGS", "--cfg miniquant_disable_simd")
        .env("CARGO_TARGET_DIR", &target_dir)
        .current_dir(crate::root())
        .status()
        .map_err(|e| format!("cannot run cargo miri: {e}"))?;
    eprintln!("  ({:.1} s)", start.elapsed().as_secs_f64());
    if status.success() {
        Ok(())
    } else {
        Err(format!("Miri found a problem or a test failed: {status}"))
    }
}
