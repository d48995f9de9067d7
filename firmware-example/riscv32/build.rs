//! Puts `memory.x` where riscv-rt's `link.x` finds it, and passes the linker scripts here rather
//! than in rustflags (a RUSTFLAGS environment variable would silently replace them).

fn main() {
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    std::fs::write(out.join("memory.x"), include_bytes!("memory.x")).expect("write memory.x");
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rerun-if-changed=memory.x");
    // riscv-rt's link.x does not include memory.x itself.
    println!("cargo:rustc-link-arg-bins=-Tmemory.x");
    println!("cargo:rustc-link-arg-bins=-Tlink.x");
    // The minimal image has no defmt logger.
    println!("cargo:rustc-link-arg-bin=riscv32=-Tdefmt.x");
}
