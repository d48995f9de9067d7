//! Where the test inputs that are not in git live: the cache directory (`$MINIQUANT_CACHE`, else
//! `~/.cache/miniquant`), the real GGUF files that `scripts/fetch-models.sh` puts there and the ggml
//! sources that `scripts/fetch-ggml.sh` unpacks there (or `$MINIQUANT_GGML_DIR`).
//!
//! Also compiled into `build.rs` (through `#[path]`), so it uses nothing but `std`.

use std::path::{Path, PathBuf};

/// The llama-cpp-python sdist version whose vendored ggml `scripts/fetch-ggml.sh` unpacks.
pub const GGML_SDIST: &str = "llama_cpp_python-0.3.36";

/// SmolLM2 135M in Q4_1 (tensor types F32, Q8_0, Q4_1).
pub const SMOLLM2_Q4_1: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// Gemma 3 270M in Q4_K_M (tensor types F32, Q8_0, Q5_0, Q4_K, Q6_K).
pub const GEMMA3_Q4_K_M: &str = "gemma-3-270m-q4_k_m.gguf";
/// Every real file the tests read.
pub const MODEL_FILES: [&str; 2] = [SMOLLM2_Q4_1, GEMMA3_Q4_K_M];

/// The cache directory: `$MINIQUANT_CACHE`, else `$HOME/.cache/miniquant`.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("MINIQUANT_CACHE").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").unwrap_or_default();
    Path::new(&home).join(".cache").join("miniquant")
}

/// ggml's source directory (the one holding `src/ggml-quants.c`): `$MINIQUANT_GGML_DIR`, else
/// where `scripts/fetch-ggml.sh` unpacks it under the cache directory.
pub fn ggml_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("MINIQUANT_GGML_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    cache_dir()
        .join(GGML_SDIST)
        .join("vendor")
        .join("llama.cpp")
        .join("ggml")
}

/// The path of the real GGUF file `name` in the cache directory, or an error that says how to get it.
pub fn find_model(name: &str) -> Result<PathBuf, String> {
    let path = cache_dir().join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "real GGUF file {} is missing: run scripts/fetch-models.sh (it downloads and \
             sha256-checks it into $MINIQUANT_CACHE or ~/.cache/miniquant)",
            path.display()
        ))
    }
}

/// The path of a fetched file.
///
/// # Panics
/// If the file is absent: the tests need it, so they fail (never skip) and say how to get it.
pub fn model_path(name: &str) -> PathBuf {
    find_model(name).unwrap_or_else(|message| panic!("{message}"))
}

/// The python of the gguf-py venv that `python3 scripts/gguf_py_dequant.py --setup` makes.
///
/// # Panics
/// If the venv is absent, saying how to make it.
pub fn gguf_py_python() -> PathBuf {
    let python = cache_dir().join("gguf-py-venv").join("bin").join("python");
    assert!(
        python.is_file(),
        "{} is missing: run `python3 scripts/gguf_py_dequant.py --setup` (it installs the pinned \
         gguf package into a venv under $MINIQUANT_CACHE or ~/.cache/miniquant)",
        python.display()
    );
    python
}
