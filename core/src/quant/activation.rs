//! Block types of the activation formats that vec_dot takes its second operand in: Q8_0, Q8_1
//! (32 values) and Q8_K (256 values). Every kernel family uses them, so they live here.

use super::cast::Block;
use crate::ggml_type::GgmlType;
use bytemuck::{Pod, Zeroable};

/// Elements per Q8_0 / Q8_1 block.
pub const QK8_0: usize = 32;
/// Elements per K-quant super-block.
pub const QK_K: usize = 256;

/// `block_q8_0`: scale `d` (f16, little-endian bytes) and 32 signed quants; value = `q * d`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockQ8_0 {
    /// Scale, f16 little-endian.
    pub d: [u8; 2],
    /// Quants.
    pub qs: [i8; QK8_0],
}

/// `block_q8_1`: scale `d`, `s = d * sum(qs)` (both f16) and 32 signed quants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockQ8_1 {
    /// Scale, f16 little-endian.
    pub d: [u8; 2],
    /// `d * sum(qs)`, f16 little-endian.
    pub s: [u8; 2],
    /// Quants.
    pub qs: [i8; QK8_0],
}

/// `block_q8_K`: scale `d` (f32, little-endian bytes), 256 quants and the sums of each 16 quants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockQ8K {
    /// Scale, f32 little-endian.
    pub d: [u8; 4],
    /// Quants.
    pub qs: [i8; QK_K],
    /// Sum of each group of 16 quants, i16 little-endian.
    pub bsums: [[u8; 2]; QK_K / 16],
}

impl Block for BlockQ8_0 {
    const TYPE: GgmlType = GgmlType::Q8_0;
}
impl Block for BlockQ8_1 {
    const TYPE: GgmlType = GgmlType::Q8_1;
}
impl Block for BlockQ8K {
    const TYPE: GgmlType = GgmlType::Q8_K;
}

impl BlockQ8K {
    /// The scale as f32.
    pub fn scale(&self) -> f32 {
        f32::from_le_bytes(self.d)
    }

    /// The sum of quants `16*i .. 16*i+16`.
    pub fn bsum(&self, i: usize) -> i16 {
        self.bsums.get(i).map_or(0, |b| i16::from_le_bytes(*b))
    }
}
