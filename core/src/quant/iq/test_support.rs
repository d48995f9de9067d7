//! Test helpers shared by the `iq` and `misc` tests: ggml's test-quantize-fns data and error
//! measure, simple Q8_0 / Q8_K activation quantizers and an f64 reference dot product.

extern crate std;

use std::vec::Vec;

use crate::quant::activation::{BlockQ8K, BlockQ8_0, QK8_0, QK_K};

/// The vec-dot operand for weights of type `t`, made from `x`: its bytes (Q8_0 or Q8_K, as
/// [`vec_dot_type`](crate::quant::vec_dot_type) says) and the values they stand for.
pub(in crate::quant) fn activation_for(
    t: crate::ggml_type::GgmlType,
    x: &[f32],
) -> (Vec<u8>, Vec<f32>) {
    if crate::quant::vec_dot_type(t) == Some(crate::ggml_type::GgmlType::Q8_K) {
        let b = q8_k_blocks(x);
        (bytemuck::cast_slice(&b).to_vec(), q8_k_values(&b))
    } else {
        let b = q8_0_blocks(x);
        (bytemuck::cast_slice(&b).to_vec(), q8_0_values(&b))
    }
}

/// ggml's test-quantize-fns data: `0.1 + 2 cos(i + offset)`.
pub(in crate::quant) fn cos_data(n: usize, offset: f32) -> Vec<f32> {
    (0..n)
        .map(|i| 0.1 + 2.0 * (i as f32 + offset).cos())
        .collect()
}

/// ggml's test-quantize-fns "RMSE": `sqrt(sum (a - b)^2) / n`.
pub(in crate::quant) fn ggml_rmse(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len());
    let sum: f64 = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| f64::from(x - y) * f64::from(x - y))
        .sum();
    sum.sqrt() / a.len() as f64
}

/// Q8_0 activations for `x`: `d = amax / 127`, `q = round(x / d)` (a plain test quantizer).
pub(in crate::quant) fn q8_0_blocks(x: &[f32]) -> Vec<BlockQ8_0> {
    x.chunks_exact(QK8_0)
        .map(|c| {
            let amax = c.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let d = amax / 127.0;
            let d16 = half::f16::from_f32(d);
            let id = if d16.to_f32() != 0.0 {
                1.0 / d16.to_f32()
            } else {
                0.0
            };
            let mut qs = [0i8; QK8_0];
            for (q, &v) in qs.iter_mut().zip(c) {
                *q = (v * id).round().clamp(-127.0, 127.0) as i8;
            }
            BlockQ8_0 {
                d: d16.to_bits().to_le_bytes(),
                qs,
            }
        })
        .collect()
}

/// Q8_K activations for `x`, with correct block sums.
pub(in crate::quant) fn q8_k_blocks(x: &[f32]) -> Vec<BlockQ8K> {
    x.chunks_exact(QK_K)
        .map(|c| {
            let amax = c.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let d = amax / 127.0;
            let id = if d != 0.0 { 1.0 / d } else { 0.0 };
            let mut qs = [0i8; QK_K];
            for (q, &v) in qs.iter_mut().zip(c) {
                *q = (v * id).round().clamp(-127.0, 127.0) as i8;
            }
            let mut bsums = [[0u8; 2]; QK_K / 16];
            for (s, g) in bsums.iter_mut().zip(qs.chunks_exact(16)) {
                *s = g.iter().map(|&q| i16::from(q)).sum::<i16>().to_le_bytes();
            }
            BlockQ8K {
                d: d.to_le_bytes(),
                qs,
                bsums,
            }
        })
        .collect()
}

/// The values that Q8_0 blocks stand for.
pub(in crate::quant) fn q8_0_values(blocks: &[BlockQ8_0]) -> Vec<f32> {
    blocks
        .iter()
        .flat_map(|b| {
            let d = half::f16::from_bits(u16::from_le_bytes(b.d)).to_f32();
            b.qs.map(|q| f32::from(q) * d)
        })
        .collect()
}

/// The values that Q8_K blocks stand for.
pub(in crate::quant) fn q8_k_values(blocks: &[BlockQ8K]) -> Vec<f32> {
    blocks
        .iter()
        .flat_map(|b| b.qs.map(|q| f32::from(q) * b.scale()))
        .collect()
}

/// Dot product in f64.
pub(in crate::quant) fn dot_f64(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| f64::from(x) * f64::from(y))
        .sum()
}

/// A small deterministic generator (xorshift64*) for random blocks.
pub(in crate::quant) struct Rng(pub u64);

impl Rng {
    pub(in crate::quant) fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub(in crate::quant) fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| (self.next_u64() >> 32) as u8).collect()
    }
}
