//! Where the real GGUF files fetched by `scripts/fetch-models.sh` live.

use std::path::PathBuf;

/// `$MINIQUANT_CACHE`, or `~/.cache/miniquant`.
pub fn cache_dir() -> PathBuf {
    match std::env::var_os("MINIQUANT_CACHE") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let home = std::env::var_os("HOME").expect("HOME is not set (or set MINIQUANT_CACHE)");
            PathBuf::from(home).join(".cache").join("miniquant")
        }
    }
}

/// The path of a fetched file.
///
/// # Panics
/// If the file is absent: the tests need it, so they fail (never skip) and say how to get it.
pub fn model_path(file_name: &str) -> PathBuf {
    let path = cache_dir().join(file_name);
    assert!(
        path.is_file(),
        "{} is missing: run scripts/fetch-models.sh",
        path.display()
    );
    path
}
