//! The build inputs `cargo xtask firmware` generates on the host (see `build.rs`): a GGUF extract of
//! a real model, the names of its tensors to check, and for tensor `i` an input vector `x{i}` and the
//! host's `miniquant matvec` output `y{i}` (raw little-endian f32).

/// The GGUF extract, in flash.
pub static MODEL: &[u8] = include_bytes!(concat!(env!("FIRMWARE_INPUTS"), "/model.gguf"));

/// One tensor name per line.
pub static TENSOR_NAMES: &str = include_str!(concat!(env!("FIRMWARE_INPUTS"), "/tensors.txt"));

/// Number of tensors the images check.
pub const TENSORS: usize = 4;

/// Input vectors, one per tensor.
pub static X: [&[u8]; TENSORS] = [
    include_bytes!(concat!(env!("FIRMWARE_INPUTS"), "/x0.f32")),
    include_bytes!(concat!(env!("FIRMWARE_INPUTS"), "/x1.f32")),
    include_bytes!(concat!(env!("FIRMWARE_INPUTS"), "/x2.f32")),
    include_bytes!(concat!(env!("FIRMWARE_INPUTS"), "/x3.f32")),
];

/// The host's outputs for them.
pub static Y: [&[u8]; TENSORS] = [
    include_bytes!(concat!(env!("FIRMWARE_INPUTS"), "/y0.f32")),
    include_bytes!(concat!(env!("FIRMWARE_INPUTS"), "/y1.f32")),
    include_bytes!(concat!(env!("FIRMWARE_INPUTS"), "/y2.f32")),
    include_bytes!(concat!(env!("FIRMWARE_INPUTS"), "/y3.f32")),
];

/// The tensor names of `tensors.txt` (its first `TENSORS` lines).
pub fn tensor_names() -> [&'static str; TENSORS] {
    let mut names = [""; TENSORS];
    for (slot, line) in names.iter_mut().zip(TENSOR_NAMES.lines()) {
        // ASCII trimming: `trim` would link the Unicode whitespace table into every image.
        *slot = line.trim_ascii();
    }
    names
}

/// The tiny llama `cargo xtask firmware` writes with the core's GGUF writer (the M4F model
/// image's model), in flash.
#[cfg(feature = "model")]
pub static TINY_LLAMA: &[u8] = include_bytes!(concat!(env!("FIRMWARE_INPUTS"), "/tiny-llama.gguf"));

/// The layer table the images keep for the tiny llama (it has 4 blocks).
#[cfg(feature = "model")]
pub const TINY_LLAMA_MAX_LAYERS: usize = 8;

/// The host's run of the tiny llama (see [`crate::model::Expected`]).
#[cfg(feature = "model")]
pub static TINY_LLAMA_EXPECTED: &[u8] =
    include_bytes!(concat!(env!("FIRMWARE_INPUTS"), "/tiny-llama.expected"));

/// The host's run of SmolLM2-135M Q4_1, whose file QEMU loads into the Cortex-A image's RAM.
#[cfg(feature = "model")]
pub static SMOLLM2_EXPECTED: &[u8] =
    include_bytes!(concat!(env!("FIRMWARE_INPUTS"), "/smollm2.expected"));
