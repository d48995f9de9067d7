//! Per-architecture SIMD kernels, each held to its scalar twin's bits by tests.

#[cfg(all(
    target_arch = "aarch64",
    target_endian = "little",
    target_feature = "neon"
))]
pub mod aarch64;
