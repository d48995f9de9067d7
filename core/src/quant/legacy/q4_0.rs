//! Q4_0: 32 values per block, an f16 scale `d` and 4-bit quants `q`; value = `(q - 8) * d`.
//! Byte `j` of `qs` holds element `j` in its low nibble and element `j + 16` in its high nibble.

use crate::ggml_type::GgmlType;
use crate::quant::activation::BlockQ8_0;
use crate::quant::arrays::map;
use crate::quant::cast::{f16_le, f16_to_le, Block};
use crate::quant::float::{c_cast_i32_each, first_largest_magnitude};
use bytemuck::{Pod, Zeroable};

/// Elements per block.
pub const QK: usize = 32;

/// `block_q4_0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockQ4_0 {
    /// Scale, f16 little-endian.
    pub d: [u8; 2],
    /// Quants: low nibble = element `j`, high nibble = element `j + 16`.
    pub qs: [u8; QK / 2],
}

impl Block for BlockQ4_0 {
    const TYPE: GgmlType = GgmlType::Q4_0;
}

/// `dequantize_row_q4_0` for one block.
pub fn dequantize_block(block: &BlockQ4_0, out: &mut [f32; QK]) {
    let d = f16_le(block.d);
    let (low, high) = out.split_at_mut(QK / 2);
    for ((&q, lo), hi) in block.qs.iter().zip(low).zip(high) {
        *lo = ((q & 0x0f) as i32 - 8) as f32 * d;
        *hi = ((q >> 4) as i32 - 8) as f32 * d;
    }
}

/// `quantize_row_q4_0_ref` for one block: `d = max / -8` where `max` is the first element of largest
/// magnitude (sign kept), then `q = min(15, (int8_t)(x / d + 8.5))`.
pub fn quantize_block(x: &[f32; QK]) -> BlockQ4_0 {
    let (max, _) = first_largest_magnitude(x);
    let d = max / -8.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };

    let mut block = BlockQ4_0 {
        d: f16_to_le(d),
        qs: [0; QK / 2],
    };
    let mut shifted = [0.0f32; QK];
    for (s, &v) in shifted.iter_mut().zip(x) {
        *s = v * id + 8.5;
    }
    let levels = map(&c_cast_i32_each(&shifted), |l| {
        (l as i8 as i32).min(15) as u8
    });
    let (low, high) = levels.split_at(QK / 2);
    for ((q, &l0), &l1) in block.qs.iter_mut().zip(low).zip(high) {
        *q = l0 | (l1 << 4);
    }
    block
}

/// `ggml_vec_dot_q4_0_q8_0_generic`: per block `sumf += sumi * dx * dy`.
pub fn vec_dot(w: &[BlockQ4_0], x: &[BlockQ8_0]) -> f32 {
    let mut sumf = 0.0f32;
    for (wb, xb) in w.iter().zip(x) {
        let (x_low, x_high) = xb.qs.split_at(QK / 2);
        let mut sumi0 = 0i32;
        let mut sumi1 = 0i32;
        for ((&q, &y0), &y1) in wb.qs.iter().zip(x_low).zip(x_high) {
            sumi0 += ((q & 0x0f) as i32 - 8) * y0 as i32;
            sumi1 += ((q >> 4) as i32 - 8) * y1 as i32;
        }
        let sumi = sumi0 + sumi1;
        sumf += sumi as f32 * f16_le(wb.d) * f16_le(xb.d);
    }
    sumf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_block_by_hand() {
        // max by magnitude is x[3] = -16 (first of the ties -16 / +16), so d = -16 / -8 = 2 and
        // id = 0.5. x[0] = 3: 3*0.5 + 8.5 = 10 -> q 10. x[16] = 16: 8 + 8.5 = 16.5 -> 16 -> min 15.
        // x[1] = -1.1: -0.55 + 8.5 = 7.95 -> 7. x[17] = 0.9: 0.45 + 8.5 = 8.95 -> 8.
        let mut x = [0.0f32; QK];
        x[0] = 3.0;
        x[1] = -1.1;
        x[3] = -16.0;
        x[16] = 16.0;
        x[17] = 0.9;
        let block = quantize_block(&x);
        assert_eq!(block.d, [0x00, 0x40]); // f16 2.0
        assert_eq!(block.qs[0], 10 | (15 << 4));
        assert_eq!(block.qs[1], 7 | (8 << 4));
        assert_eq!(block.qs[3], 8 << 4); // -16*0.5 + 8.5 = 0.5 -> 0 (low); zero -> 8 (high)
        assert_eq!(block.qs[2], 8 | (8 << 4));
        let mut y = [0.0f32; QK];
        dequantize_block(&block, &mut y);
        assert_eq!(
            (y[0], y[1], y[3], y[16], y[17]),
            (4.0, -2.0, -16.0, 14.0, 0.0)
        );
    }
}
