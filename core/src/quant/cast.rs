//! Zero-copy views of byte slices as block slices.
//!
//! Every block type is `#[repr(C)]` with alignment 1 (f16 fields are kept as `[u8; 2]`), so any
//! `&[u8]` whose length is a whole number of blocks is a valid `&[Block]`, at any address.

use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;

/// A block of a ggml type: plain bytes, alignment 1, any bit pattern valid.
pub trait Block: bytemuck::Pod {
    /// The type this block belongs to.
    const TYPE: GgmlType;
}

/// Views `bytes` as blocks of `B`, or fails if the length is not a whole number of blocks.
pub fn blocks<B: Block>(bytes: &[u8]) -> Result<&[B]> {
    bytemuck::try_cast_slice(bytes).map_err(|_| Error::PartialBlock {
        ggml_type: B::TYPE,
        len: bytes.len() as u64,
    })
}

/// Views `bytes` as mutable blocks of `B`, or fails if the length is not a whole number of blocks.
pub fn blocks_mut<B: Block>(bytes: &mut [u8]) -> Result<&mut [B]> {
    let len = bytes.len() as u64;
    bytemuck::try_cast_slice_mut(bytes).map_err(|_| Error::PartialBlock {
        ggml_type: B::TYPE,
        len,
    })
}

/// Reads a little-endian IEEE half stored as two bytes.
#[inline(always)]
pub fn f16_le(bytes: [u8; 2]) -> f32 {
    half::f16::from_bits(u16::from_le_bytes(bytes)).to_f32()
}

/// Encodes an f32 as a little-endian IEEE half (round to nearest even, like `GGML_FP32_TO_FP16`).
#[inline(always)]
pub fn f16_to_le(x: f32) -> [u8; 2] {
    half::f16::from_f32(x).to_bits().to_le_bytes()
}
