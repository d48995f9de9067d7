//! Compiles ggml's C reference (quantizers, dequantizers, generic vec_dot kernels, the data check
//! `ggml_validate_row_data`) into a static library for the oracle tests. Nothing of ggml is
//! committed: the sources come from the cache that `scripts/fetch-ggml.sh` fills, or from
//! `$MINIQUANT_GGML_DIR`.
//!
//! Flags are fixed, not taken from the cargo profile: `-O2 -ffp-contract=off`, plus
//! `-march=x86-64-v3` on x86_64. FMA contraction changes the reference quantizers' output bytes, so
//! it must stay off; `-march=native` with GCC 12 was seen to miscompile the generic Q4_0/Q5_0 dots.
//! `GGML_CPU_GENERIC` makes `ggml-cpu/quants.c` export its portable `*_generic` functions under the
//! plain names (`ggml_vec_dot_q4_0_q8_0`, …), so no architecture-specific kernel is linked.

#[allow(dead_code)]
#[path = "src/cache.rs"]
mod cache;

use std::path::Path;

fn main() {
    for var in [
        "MINIQUANT_GGML_DIR",
        "MINIQUANT_CACHE",
        "HOME",
        "CFLAGS",
        "CXXFLAGS",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/cache.rs");
    println!("cargo:rerun-if-changed=csrc/ggml_shim.c");
    println!("cargo::rustc-check-cfg=cfg(ggml_float_dot)");

    let ggml = cache::ggml_dir();
    let quants = ggml.join("src").join("ggml-quants.c");
    if !quants.is_file() {
        panic!(
            "ggml's C sources are not at {}: run scripts/fetch-ggml.sh (it unpacks them into \
             $MINIQUANT_CACHE or ~/.cache/miniquant), or set MINIQUANT_GGML_DIR to a ggml directory \
             holding src/ggml-quants.c",
            ggml.display()
        );
    }
    for var in ["CFLAGS", "CXXFLAGS"] {
        if std::env::var_os(var).is_some_and(|v| !v.is_empty()) {
            println!(
                "cargo:warning={var} is set: the cc crate appends it to the ggml oracle's flags, \
                 which may change the reference bytes"
            );
        }
    }

    let cpu = ggml.join("src").join("ggml-cpu");
    let sources = [quants.clone(), cpu.join("quants.c")];
    for file in &sources {
        println!("cargo:rerun-if-changed={}", file.display());
    }
    let x86_64 = std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("x86_64");

    let mut c = base_build(&ggml, &cpu);
    c.flag("-std=gnu11");
    if x86_64 {
        c.flag("-march=x86-64-v3");
    }
    c.flag("-ffp-contract=off");
    c.files(&sources).file("csrc/ggml_shim.c");
    c.compile("miniquant_ggml_oracle");

    // The F32/F16/BF16 dots live in vec.cpp, whose portable loop is used only when no SIMD
    // extension is enabled. Baseline x86-64 (SSE2) is such a target; elsewhere (NEON is always on
    // for AArch64) the float dots have no oracle.
    if x86_64 {
        let vec = cpu.join("vec.cpp");
        println!("cargo:rerun-if-changed={}", vec.display());
        let mut cpp = base_build(&ggml, &cpu);
        cpp.cpp(true)
            .cpp_link_stdlib(None)
            .flag("-std=c++17")
            .flag("-march=x86-64")
            .flag("-ffp-contract=off")
            .file(vec)
            .compile("miniquant_ggml_oracle_vec");
        println!("cargo:rustc-cfg=ggml_float_dot");
    }
}

/// A cc build with only the flags we choose (no profile opt-level, no debug info, no -Wall on
/// code that is not ours).
fn base_build(ggml: &Path, cpu: &Path) -> cc::Build {
    let mut build = cc::Build::new();
    build
        .no_default_flags(true)
        .warnings(false)
        .extra_warnings(false)
        .cargo_warnings(false)
        .flag("-O2")
        .flag("-fPIC")
        .define("GGML_CPU_GENERIC", None)
        // As in ggml's release builds: `assert` off (`nearest_int` asserts |x| <= 2^22, which NaN,
        // inf and huge edge blocks break); GGML_ASSERT stays on.
        .define("NDEBUG", None)
        .include(ggml.join("include"))
        .include(ggml.join("src"))
        .include(cpu);
    build
}
