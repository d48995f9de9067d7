//! Puts `memory.x` where cortex-m-rt's `link.x` finds it, and passes the linker scripts here rather
//! than in rustflags (a RUSTFLAGS environment variable would silently replace them).

fn main() {
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    std::fs::write(out.join("memory.x"), include_bytes!("memory.x")).expect("write memory.x");
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rerun-if-changed=memory.x");
    for arg in ["--nmagic", "-Tlink.x"] {
        println!("cargo:rustc-link-arg-bins={arg}");
    }
    // The minimal image has no defmt logger.
    for bin in ["cortex-m4f", "tiny-llama"] {
        println!("cargo:rustc-link-arg-bin={bin}=-Tdefmt.x");
    }
}
