//! The default feature set (no `std`) detects the same kernel level as the standard library's
//! feature detection on this machine: run `cargo test -p miniquant --test detect_without_std`
//! without `--features std` (`cargo xtask ci` does). x86_64 only: aarch64 detects at run time
//! only under `std`, and a `--cfg miniquant_disable_simd` build has no levels to detect.
#![cfg(all(target_arch = "x86_64", not(miniquant_disable_simd)))]

use miniquant::quant::level::{detect, Level};

/// The best level by the standard library's detection, named as the core names them.
fn std_best() -> Level {
    use std::is_x86_feature_detected as has;
    let avx2 = has!("avx2") && has!("f16c");
    let vnni =
        avx2 && has!("avx512f") && has!("avx512bw") && has!("avx512vl") && has!("avx512vnni");
    if vnni {
        Level::Avx512Vnni
    } else if avx2 {
        Level::Avx2
    } else {
        Level::Scalar
    }
}

#[test]
fn default_features_detect_the_std_level() {
    // Integration tests see the package's features: this one is about the build without `std`.
    if cfg!(feature = "std") {
        eprintln!("built with `std`: this test is about the default features, nothing to compare");
        return;
    }
    let best = std_best();
    eprintln!("detected {} (std says {best})", detect());
    assert_eq!(detect(), best);
    assert!(best.is_available());
}
