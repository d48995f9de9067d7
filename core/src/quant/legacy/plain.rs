//! The plain numeric types F32, F16, BF16, F64, I8, I16, I32 and I64 (little-endian, one element
//! per "block").
//!
//! F32, F16 and BF16 are block types of the kernel table like the quantized ones ([`BlockF32`],
//! [`BlockF16`], [`BlockBf16`]: one value, alignment 1), so they get per-level kernels; ggml's
//! vec_dot type for each is the type itself. Their scalar kernels:
//! - dequantize converts each element to f32 exactly (an f16 NaN is made quiet, payload kept);
//! - quantize is a bit copy (F32), `GGML_FP32_TO_FP16` (F16) or `ggml_compute_fp32_to_bf16` (BF16);
//! - vec_dot follows ggml's scalar `ggml_vec_dot_f32/f16/bf16`: each product in f32, summed in f64
//!   one element after the other, rounded to f32 once. That serial f64 sum is the canonical order
//!   the SIMD twins keep.
//!
//! F64 and the integer types are only dequantized ([`crate::quant::dequantize`]): ggml has no
//! quantizer or vec_dot for them. F64 and I32/I64 round to nearest.

use crate::error::{Error, Op, Result};
use crate::ggml_type::GgmlType;
use crate::quant::blockwise::scalars;
use crate::quant::cast::{f16_le, f32_to_f16_bits, Block};
use crate::quant::float::{bf16_bits_to_f32, f32_to_bf16_bits};
use bytemuck::{Pod, Zeroable};

/// One F32 value, little-endian bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[repr(transparent)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockF32(pub [u8; 4]);

/// One IEEE half value, little-endian bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[repr(transparent)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockF16(pub [u8; 2]);

/// One bfloat16 value (the top half of an f32), little-endian bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[repr(transparent)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockBf16(pub [u8; 2]);

impl Block for BlockF32 {
    const TYPE: GgmlType = GgmlType::F32;
}
impl Block for BlockF16 {
    const TYPE: GgmlType = GgmlType::F16;
}
impl Block for BlockBf16 {
    const TYPE: GgmlType = GgmlType::BF16;
}

impl BlockF32 {
    /// The value.
    #[inline(always)]
    pub fn value(self) -> f32 {
        f32::from_le_bytes(self.0)
    }
}
impl BlockF16 {
    /// The value as f32 (exact).
    #[inline(always)]
    pub fn value(self) -> f32 {
        f16_le(self.0)
    }
}
impl BlockBf16 {
    /// The value as f32 (exact).
    #[inline(always)]
    pub fn value(self) -> f32 {
        bf16_bits_to_f32(u16::from_le_bytes(self.0))
    }
}

/// F32 dequantize of one value: the value itself.
#[inline(always)]
pub fn dequantize_f32(block: &BlockF32, out: &mut [f32; 1]) {
    out[0] = block.value();
}

/// F16 dequantize of one value.
#[inline(always)]
pub fn dequantize_f16(block: &BlockF16, out: &mut [f32; 1]) {
    out[0] = block.value();
}

/// BF16 dequantize of one value.
#[inline(always)]
pub fn dequantize_bf16(block: &BlockBf16, out: &mut [f32; 1]) {
    out[0] = block.value();
}

/// F32 "quantize": a bit copy (NaN payloads included).
#[inline(always)]
pub fn quantize_f32(x: &[f32; 1]) -> BlockF32 {
    BlockF32(x[0].to_le_bytes())
}

/// `GGML_FP32_TO_FP16`: round to nearest even; every NaN becomes the quiet NaN `0x7E00` with its sign.
#[inline(always)]
pub fn quantize_f16(x: &[f32; 1]) -> BlockF16 {
    BlockF16(f32_to_f16_bits(x[0]).to_le_bytes())
}

/// `ggml_compute_fp32_to_bf16`: round to nearest even; a NaN keeps its top bits and is made quiet.
#[inline(always)]
pub fn quantize_bf16(x: &[f32; 1]) -> BlockBf16 {
    BlockBf16(f32_to_bf16_bits(x[0]).to_le_bytes())
}

/// ggml's scalar dot of the plain float types: `sumf += (double)(a * b)` with the product in f32,
/// in element order, then rounded to f32.
#[inline(always)]
fn serial_f64_dot<T: Copy>(w: &[T], x: &[T], value: impl Fn(T) -> f32) -> f32 {
    let mut sum = 0.0f64;
    for (&a, &b) in w.iter().zip(x) {
        sum += f64::from(value(a) * value(b));
    }
    sum as f32
}

/// `ggml_vec_dot_f32` (scalar form).
pub fn vec_dot_f32(w: &[BlockF32], x: &[BlockF32]) -> f32 {
    serial_f64_dot(w, x, BlockF32::value)
}

/// `ggml_vec_dot_f16` (scalar form).
pub fn vec_dot_f16(w: &[BlockF16], x: &[BlockF16]) -> f32 {
    serial_f64_dot(w, x, BlockF16::value)
}

/// `ggml_vec_dot_bf16` (scalar form).
pub fn vec_dot_bf16(w: &[BlockBf16], x: &[BlockBf16]) -> f32 {
    serial_f64_dot(w, x, BlockBf16::value)
}

/// Converts each `N`-byte element of `src` with `convert`.
fn convert<const N: usize>(
    t: GgmlType,
    src: &[u8],
    dst: &mut [f32],
    convert: impl Fn([u8; N]) -> f32,
) -> Result<()>
where
    [u8; N]: Pod,
{
    let src = scalars::<N>(t, src)?;
    if src.len() != dst.len() {
        return Err(Error::LengthMismatch {
            expected: src.len() as u64,
            found: dst.len() as u64,
        });
    }
    for (y, &bytes) in dst.iter_mut().zip(src) {
        *y = convert(bytes);
    }
    Ok(())
}

/// Dequantize of the types without a block type: F64 and the integers.
pub(crate) fn dequantize(t: GgmlType, src: &[u8], dst: &mut [f32]) -> Result<()> {
    match t {
        GgmlType::F64 => convert(t, src, dst, |b| f64::from_le_bytes(b) as f32),
        GgmlType::I8 => convert(t, src, dst, |b| i8::from_le_bytes(b) as f32),
        GgmlType::I16 => convert(t, src, dst, |b| i16::from_le_bytes(b) as f32),
        GgmlType::I32 => convert(t, src, dst, |b| i32::from_le_bytes(b) as f32),
        GgmlType::I64 => convert(t, src, dst, |b| i64::from_le_bytes(b) as f32),
        _ => Err(Error::Unsupported {
            ggml_type: t,
            op: Op::Dequantize,
        }),
    }
}
