//! Points the firmware at its build inputs: the GGUF extract, the input vectors and the host's
//! expected outputs that `cargo xtask firmware` generates (they come from a real model file, so they
//! are not in git). Default: `firmware-example/target/inputs`; override with
//! `MINIQUANT_FIRMWARE_INPUTS`.

use std::path::PathBuf;

const FILES: [&str; 10] = [
    "model.gguf",
    "tensors.txt",
    "x0.f32",
    "y0.f32",
    "x1.f32",
    "y1.f32",
    "x2.f32",
    "y2.f32",
    "x3.f32",
    "y3.f32",
];

fn main() {
    println!("cargo:rerun-if-env-changed=MINIQUANT_FIRMWARE_INPUTS");
    let dir = match std::env::var_os("MINIQUANT_FIRMWARE_INPUTS") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"))
            .join("../target/inputs"),
    };
    // The model images' inputs (feature `model`): the tiny llama and the host's runs.
    let model_files: &[&str] = if std::env::var_os("CARGO_FEATURE_MODEL").is_some() {
        &["tiny-llama.gguf", "tiny-llama.expected", "smollm2.expected"]
    } else {
        &[]
    };
    for file in FILES.iter().chain(model_files) {
        let path = dir.join(file);
        if !path.is_file() {
            panic!(
                "{} is missing: `cargo xtask firmware` generates the firmware's inputs from a real model",
                path.display()
            );
        }
        println!("cargo:rerun-if-changed={}", path.display());
    }
    println!("cargo:rustc-env=FIRMWARE_INPUTS={}", dir.display());
}
