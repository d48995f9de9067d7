//! The plain numeric types F32, F16, BF16, F64, I8, I16, I32 and I64 (little-endian, one element
//! per "block").
//!
//! Dequantize converts each element to f32 (F64 and I32/I64 round to nearest). Quantize exists for
//! F32 (a copy), F16 (`GGML_FP32_TO_FP16`) and BF16 (`ggml_compute_fp32_to_bf16`). vec_dot follows
//! ggml's scalar `ggml_vec_dot_f32/f16/bf16`: each product in f32, summed in f64, rounded to f32 once.

use crate::error::{Error, Op, Result};
use crate::ggml_type::GgmlType;
use crate::quant::blockwise::{scalars, scalars_mut};
use crate::quant::cast::f16_le;
use crate::quant::float::{bf16_bits_to_f32, f32_to_bf16_bits, f32_to_f16_bits};
use bytemuck::Pod;

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

pub(crate) fn dequantize(t: GgmlType, src: &[u8], dst: &mut [f32]) -> Result<()> {
    match t {
        GgmlType::F32 => convert(t, src, dst, f32::from_le_bytes),
        GgmlType::F16 => convert(t, src, dst, f16_le),
        GgmlType::BF16 => convert(t, src, dst, |b| bf16_bits_to_f32(u16::from_le_bytes(b))),
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

/// Writes `encode(x)` for each element of `src`.
fn encode<const N: usize>(
    t: GgmlType,
    src: &[f32],
    dst: &mut [u8],
    encode: impl Fn(f32) -> [u8; N],
) -> Result<()>
where
    [u8; N]: Pod,
{
    let dst = scalars_mut::<N>(t, dst)?;
    if src.len() != dst.len() {
        return Err(Error::LengthMismatch {
            expected: src.len() as u64,
            found: dst.len() as u64,
        });
    }
    for (bytes, &x) in dst.iter_mut().zip(src) {
        *bytes = encode(x);
    }
    Ok(())
}

pub(crate) fn quantize(t: GgmlType, src: &[f32], dst: &mut [u8]) -> Result<()> {
    match t {
        GgmlType::F32 => encode(t, src, dst, f32::to_le_bytes),
        GgmlType::F16 => encode(t, src, dst, |x| f32_to_f16_bits(x).to_le_bytes()),
        GgmlType::BF16 => encode(t, src, dst, |x| f32_to_bf16_bits(x).to_le_bytes()),
        _ => Err(Error::Unsupported {
            ggml_type: t,
            op: Op::Quantize,
        }),
    }
}

/// `sum += (f64)(a * b)` over the pairs, then rounded to f32.
fn dot<const N: usize>(
    t: GgmlType,
    w: &[u8],
    x: &[u8],
    decode: impl Fn([u8; N]) -> f32,
) -> Result<f32>
where
    [u8; N]: Pod,
{
    let w = scalars::<N>(t, w)?;
    let x = scalars::<N>(t, x)?;
    if w.len() != x.len() {
        return Err(Error::LengthMismatch {
            expected: w.len() as u64,
            found: x.len() as u64,
        });
    }
    let mut sum = 0.0f64;
    for (&a, &b) in w.iter().zip(x) {
        sum += f64::from(decode(a) * decode(b));
    }
    Ok(sum as f32)
}

pub(crate) fn vec_dot(t: GgmlType, w: &[u8], x: &[u8]) -> Result<f32> {
    match t {
        GgmlType::F32 => dot(t, w, x, f32::from_le_bytes),
        GgmlType::F16 => dot(t, w, x, f16_le),
        GgmlType::BF16 => dot(t, w, x, |b| bf16_bits_to_f32(u16::from_le_bytes(b))),
        _ => Err(Error::Unsupported {
            ggml_type: t,
            op: Op::VecDot,
        }),
    }
}
