//! `kernels`: an arbitrary type and bytes through dequantize, vec_dot and matvec, and arbitrary
//! f32 bit patterns (NaN, infinities, subnormals) through quantize: errors are fine, panics are
//! findings. Lengths come from the input too, so mismatched and partial lengths are exercised.
//!
//! Input: byte 0 picks the type (`GgmlType::ALL`), byte 1 the operation and a length skew, the
//! rest is the data.

use miniquant::quant::{self, matvec};
use miniquant::GgmlType;

/// The check.
pub fn check(data: &[u8]) {
    let [t, op, rest @ ..] = data else {
        return;
    };
    let t = GgmlType::ALL[usize::from(*t) % GgmlType::ALL.len()];
    // Low bits pick the operation; high bits skew a length by -2..=1 to hit the length checks.
    let skew = isize::from(op >> 6) - 2;
    let skewed = |n: usize| n.saturating_add_signed(skew);
    match op % 4 {
        0 => {
            let n = quant::elements_in(t, rest.len()).unwrap_or(rest.len());
            let mut out = vec![0f32; skewed(n).min(1 << 20)];
            let _ = quant::dequantize(t, rest, &mut out);
        }
        1 => {
            let floats: Vec<f32> = rest
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            let bytes = quant::bytes_for(t, floats.len()).unwrap_or(floats.len());
            let mut out = vec![0u8; skewed(bytes)];
            let _ = quant::quantize(t, &floats, &mut out);
        }
        2 => {
            // Weights first, activations (in the vec-dot type) after.
            let split = quant::vec_dot_type(t)
                .and_then(|vd| {
                    let x_per_block = vd.bytes_for(u64::from(t.block_size()))? as usize;
                    let per_block = t.block_bytes() as usize + x_per_block;
                    Some(rest.len() / per_block * t.block_bytes() as usize)
                })
                .unwrap_or(rest.len() / 2);
            let (w, x) = rest.split_at(skewed(split).min(rest.len()));
            let _ = quant::vec_dot(t, w, x);
        }
        _ => {
            let Some((&shape, rest)) = rest.split_first() else {
                return;
            };
            let cols = usize::from(shape & 0x0f) * t.block_size() as usize;
            let rows = usize::from(shape >> 4);
            let x: Vec<f32> = (0..skewed(cols))
                .map(|i| {
                    let b = rest.get(i % rest.len().max(1)).copied().unwrap_or(0);
                    f32::from_bits(u32::from(b).wrapping_mul(0x0101_0101))
                })
                .collect();
            let Ok(scratch_len) = matvec::matvec_scratch_bytes(t, cols) else {
                return;
            };
            let mut scratch = vec![0u8; scratch_len];
            let mut y = vec![0f32; rows];
            let _ = matvec::matvec(t, rest, rows, cols, &x, &mut scratch, &mut y);
        }
    }
}
