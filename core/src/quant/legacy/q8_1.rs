//! Q8_1: Q8_0 plus `s = d * sum(q)`, both f16. ggml only uses it as the activation type of Q4_1 and
//! Q5_1 (its `s` carries their minimum term) and has no dequantize for it; ours is the obvious
//! `q * d`. The block type lives in [`activation`](crate::quant::activation).

use super::q8_0::{scale_of, scaled};
use crate::quant::activation::{BlockQ8_1, QK8_0 as QK};
use crate::quant::cast::f16_le;
use crate::quant::cast::f16_to_le;
use crate::quant::float::c_round_i32_each;

/// `q * d` for one block (ggml has no `dequantize_row_q8_1`).
pub fn dequantize_block(block: &BlockQ8_1, out: &mut [f32; QK]) {
    let d = f16_le(block.d);
    for (y, &q) in out.iter_mut().zip(&block.qs) {
        *y = q as f32 * d;
    }
}

/// `quantize_row_q8_1_ref` for one block: as Q8_0, then `s = f16(sum(q) * d)` with `d` still in f32.
pub fn quantize_block(x: &[f32; QK]) -> BlockQ8_1 {
    let (d, id) = scale_of(x);
    let mut qs = [0i8; QK];
    for (q, r) in qs.iter_mut().zip(c_round_i32_each(&scaled(x, id))) {
        *q = r as i8;
    }
    let sum: i32 = qs.iter().map(|&q| i32::from(q)).sum();
    BlockQ8_1 {
        d: f16_to_le(d),
        s: f16_to_le(sum as f32 * d),
        qs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_block_by_hand() {
        // amax = 127: d = 1. Quants 127, -3, 1, -127, 1 (roundf ties away) sum to -1, so s = -1.
        let mut x = [0.0f32; QK];
        x[..5].copy_from_slice(&[127.0, -2.5, 0.5, -127.0, 1.49]);
        let block = quantize_block(&x);
        assert_eq!(block.d, [0x00, 0x3c]);
        assert_eq!(block.s, [0x00, 0xbc]); // f16 -1.0
        assert_eq!(block.qs[..6], [127, -3, 1, -127, 1, 0]);
    }

    #[test]
    fn constant_negative_block() {
        // amax = 1: d = 1/127, every x / d = -127 (x * id rounds to exactly -127), sum = -4064 and
        // s = -4064 / 127 = -32 (to f16 precision).
        let block = quantize_block(&[-1.0f32; QK]);
        assert_eq!(block.qs, [-127; QK]);
        assert_eq!(f16_le(block.s), -32.0);
        assert_eq!(f16_le(block.d), 0.007873535); // f16 nearest to 1/127
    }
}
