//! Passes the linker scripts (aarch64-rt's `image.ld`, ours, defmt's) here rather than in
//! rustflags, which a RUSTFLAGS environment variable would silently replace.

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo");
    println!("cargo:rustc-link-search={dir}");
    println!("cargo:rerun-if-changed=memory.ld");
    for arg in ["-Timage.ld", "-Tmemory.ld", "-Tdefmt.x"] {
        println!("cargo:rustc-link-arg-bins={arg}");
    }
}
