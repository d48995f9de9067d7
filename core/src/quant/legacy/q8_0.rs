//! Q8_0: 32 values per block, an f16 scale `d` and signed 8-bit quants `q`; value = `q * d`. It is
//! also the activation type that Q4_0, Q5_0 and Q8_0 weights are dotted with. The block type lives in
//! [`activation`](crate::quant::activation).

use crate::quant::activation::{BlockQ8_0, QK8_0 as QK};
use crate::quant::cast::f16_le;
use crate::quant::cast::f16_to_le;
use crate::quant::float::{c_max, c_round_i32_each};

/// `dequantize_row_q8_0` for one block.
pub fn dequantize_block(block: &BlockQ8_0, out: &mut [f32; QK]) {
    let d = f16_le(block.d);
    for (y, &q) in out.iter_mut().zip(&block.qs) {
        *y = q as f32 * d;
    }
}

/// `quantize_row_q8_0_ref` for one block: `d = amax / 127`, `q = roundf(x / d)` (ties away from zero).
pub fn quantize_block(x: &[f32; QK]) -> BlockQ8_0 {
    let (d, id) = scale_of(x);
    let mut block = BlockQ8_0 {
        d: f16_to_le(d),
        qs: [0; QK],
    };
    for (q, r) in block.qs.iter_mut().zip(c_round_i32_each(&scaled(x, id))) {
        *q = r as i8;
    }
    block
}

/// `x * id` for each value.
#[inline(always)]
pub(crate) fn scaled(x: &[f32; QK], id: f32) -> [f32; QK] {
    let mut out = [0.0f32; QK];
    for (o, &v) in out.iter_mut().zip(x) {
        *o = v * id;
    }
    out
}

/// The f32 scale `amax / 127` and its inverse (0 when the scale is 0), as Q8_0 and Q8_1 compute them.
pub(crate) fn scale_of(x: &[f32; QK]) -> (f32, f32) {
    let mut amax = 0.0f32;
    for &v in x {
        amax = c_max(amax, v.abs());
    }
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    (d, id)
}

/// `ggml_vec_dot_q8_0_q8_0_generic`: per block `sumf += sumi * (dx * dy)`.
pub fn vec_dot(w: &[BlockQ8_0], x: &[BlockQ8_0]) -> f32 {
    let mut sumf = 0.0f32;
    for (wb, xb) in w.iter().zip(x) {
        let mut sumi = 0i32;
        for (&a, &b) in wb.qs.iter().zip(&xb.qs) {
            sumi += a as i32 * b as i32;
        }
        sumf += sumi as f32 * (f16_le(wb.d) * f16_le(xb.d));
    }
    sumf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_block_by_hand() {
        // amax = 127: d = 1, id = 1. roundf: -2.5 -> -3 and 0.5 -> 1 (ties away), 1.49 -> 1.
        let mut x = [0.0f32; QK];
        x[..5].copy_from_slice(&[127.0, -2.5, 0.5, -127.0, 1.49]);
        let block = quantize_block(&x);
        assert_eq!(block.d, [0x00, 0x3c]); // f16 1.0
        assert_eq!(block.qs[..6], [127, -3, 1, -127, 1, 0]);
        let mut y = [0.0f32; QK];
        dequantize_block(&block, &mut y);
        assert_eq!(y[..5], [127.0, -3.0, 1.0, -127.0, 1.0]);
    }

    #[test]
    fn scale_follows_c_max_with_nan() {
        // MAX(amax, NaN) is NaN, and the next MAX(NaN, |x|) drops it again, so a NaN that is not
        // last does not poison the scale.
        let mut x = [0.0f32; QK];
        x[0] = f32::NAN;
        x[1] = 2.54;
        assert_eq!(scale_of(&x).0, 2.54 / 127.0);
        x[QK - 1] = f32::NAN;
        assert!(scale_of(&x).0.is_nan());
    }
}
