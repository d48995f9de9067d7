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
