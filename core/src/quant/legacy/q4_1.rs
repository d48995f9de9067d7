//! Q4_1: 32 values per block, f16 scale `d` and minimum `m`, 4-bit quants `q`; value = `q * d + m`.
//! Its vec_dot partner is Q8_1, whose `s = d * sum(q)` carries the `m` term.

use crate::ggml_type::GgmlType;
use crate::quant::activation::BlockQ8_1;
use crate::quant::arrays::map;
use crate::quant::cast::{f16_le, f16_to_le, Block};
use crate::quant::float::c_cast_i32_each;
use bytemuck::{Pod, Zeroable};

/// Elements per block.
pub const QK: usize = 32;

/// `block_q4_1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockQ4_1 {
    /// Scale, f16 little-endian.
    pub d: [u8; 2],
    /// Minimum, f16 little-endian.
    pub m: [u8; 2],
    /// Quants: low nibble = element `j`, high nibble = element `j + 16`.
    pub qs: [u8; QK / 2],
}

impl Block for BlockQ4_1 {
    const TYPE: GgmlType = GgmlType::Q4_1;
}

/// `dequantize_row_q4_1` for one block.
pub fn dequantize_block(block: &BlockQ4_1, out: &mut [f32; QK]) {
    let d = f16_le(block.d);
    let m = f16_le(block.m);
    let (low, high) = out.split_at_mut(QK / 2);
    for ((&q, lo), hi) in block.qs.iter().zip(low).zip(high) {
        *lo = (q & 0x0f) as f32 * d + m;
        *hi = (q >> 4) as f32 * d + m;
    }
}

/// `quantize_row_q4_1_ref` for one block: `d = (max - min) / 15`, `q = min(15, (int8_t)((x - min) / d
/// + 0.5))`.
pub fn quantize_block(x: &[f32; QK]) -> BlockQ4_1 {
    let mut min = f32::MAX;
    let mut max = -f32::MAX;
    for &v in x {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    let d = (max - min) / 15.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };

    let mut block = BlockQ4_1 {
        d: f16_to_le(d),
        m: f16_to_le(min),
        qs: [0; QK / 2],
    };
    let mut shifted = [0.0f32; QK];
    for (s, &v) in shifted.iter_mut().zip(x) {
        *s = (v - min) * id + 0.5;
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

/// `ggml_vec_dot_q4_1_q8_1_generic`: per block `sumf += (dx * dy) * sumi + mx * sy`.
pub fn vec_dot(w: &[BlockQ4_1], x: &[BlockQ8_1]) -> f32 {
    let mut sumf = 0.0f32;
    for (wb, xb) in w.iter().zip(x) {
        let (x_low, x_high) = xb.qs.split_at(QK / 2);
        let mut sumi0 = 0i32;
        let mut sumi1 = 0i32;
        for ((&q, &y0), &y1) in wb.qs.iter().zip(x_low).zip(x_high) {
            sumi0 += (q & 0x0f) as i32 * y0 as i32;
            sumi1 += (q >> 4) as i32 * y1 as i32;
        }
        let sumi = sumi0 + sumi1;
        sumf += (f16_le(wb.d) * f16_le(xb.d)) * sumi as f32 + f16_le(wb.m) * f16_le(xb.s);
    }
    sumf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_block_by_hand() {
        // min = -1, max = 14: d = 15 / 15 = 1, id = 1, m = -1.
        // x[0] = 3: (3 + 1) + 0.5 = 4.5 -> 4.  x[16] = 14: 15.5 -> 15.  x[1] = -1: 0.5 -> 0.
        // x[17] = 0.6: 1.6 + 0.5 = 2.1 -> 2.  zeros: 1.5 -> 1.
        let mut x = [0.0f32; QK];
        x[0] = 3.0;
        x[1] = -1.0;
        x[16] = 14.0;
        x[17] = 0.6;
        let block = quantize_block(&x);
        assert_eq!(block.d, [0x00, 0x3c]); // f16 1.0
        assert_eq!(block.m, [0x00, 0xbc]); // f16 -1.0
        assert_eq!(block.qs[0], 4 | (15 << 4));
        assert_eq!(block.qs[1], 2 << 4);
        assert_eq!(block.qs[2], 1 | (1 << 4));
        let mut y = [0.0f32; QK];
        dequantize_block(&block, &mut y);
        assert_eq!(
            (y[0], y[1], y[2], y[16], y[17]),
            (3.0, -1.0, 0.0, 14.0, 1.0)
        );
    }
}
