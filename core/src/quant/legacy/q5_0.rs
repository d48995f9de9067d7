//! Q5_0: 32 values per block, an f16 scale `d` and 5-bit quants `q`; value = `(q - 16) * d`.
//! The low 4 bits sit in `qs` (as in Q4_0); bit 4 of element `j` is bit `j` of the little-endian u32
//! `qh`.

use crate::ggml_type::GgmlType;
use crate::quant::activation::BlockQ8_0;
use crate::quant::arrays::map;
use crate::quant::cast::{f16_le, f16_to_le, Block};
use crate::quant::float::{c_cast_i32_each, first_largest_magnitude};
use bytemuck::{Pod, Zeroable};

/// Elements per block.
pub const QK: usize = 32;

/// `block_q5_0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockQ5_0 {
    /// Scale, f16 little-endian.
    pub d: [u8; 2],
    /// Fifth bits, u32 little-endian: bit `j` belongs to element `j`.
    pub qh: [u8; 4],
    /// Low 4 bits: low nibble = element `j`, high nibble = element `j + 16`.
    pub qs: [u8; QK / 2],
}

impl Block for BlockQ5_0 {
    const TYPE: GgmlType = GgmlType::Q5_0;
}

/// The 5-bit quants of elements `j` and `j + 16` (for `j < 16`).
#[inline(always)]
pub(crate) fn quant_pair(qs: u8, qh: u32, j: usize) -> (i32, i32) {
    let high0 = ((qh >> j) << 4) & 0x10;
    let high1 = (qh >> (j + 12)) & 0x10;
    (
        (qs & 0x0f) as i32 | high0 as i32,
        (qs >> 4) as i32 | high1 as i32,
    )
}

/// `dequantize_row_q5_0` for one block.
pub fn dequantize_block(block: &BlockQ5_0, out: &mut [f32; QK]) {
    let d = f16_le(block.d);
    let qh = u32::from_le_bytes(block.qh);
    let (low, high) = out.split_at_mut(QK / 2);
    for (j, ((&q, lo), hi)) in block.qs.iter().zip(low).zip(high).enumerate() {
        let (q0, q1) = quant_pair(q, qh, j);
        *lo = (q0 - 16) as f32 * d;
        *hi = (q1 - 16) as f32 * d;
    }
}

/// `quantize_row_q5_0_ref` for one block: `d = max / -16` (`max` = first element of largest
/// magnitude), `q = min(31, (int8_t)(x / d + 16.5))`.
pub fn quantize_block(x: &[f32; QK]) -> BlockQ5_0 {
    let (max, _) = first_largest_magnitude(x);
    let d = max / -16.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };

    let mut block = BlockQ5_0 {
        d: f16_to_le(d),
        qh: [0; 4],
        qs: [0; QK / 2],
    };
    let mut qh = 0u32;
    let mut shifted = [0.0f32; QK];
    for (s, &v) in shifted.iter_mut().zip(x) {
        *s = v * id + 16.5;
    }
    let levels = map(&c_cast_i32_each(&shifted), |l| {
        (l as i8 as i32).min(31) as u8
    });
    let (low, high) = levels.split_at(QK / 2);
    for (j, ((q, &xi0), &xi1)) in block.qs.iter_mut().zip(low).zip(high).enumerate() {
        *q = (xi0 & 0x0f) | ((xi1 & 0x0f) << 4);
        qh |= u32::from((xi0 & 0x10) >> 4) << j;
        qh |= u32::from((xi1 & 0x10) >> 4) << (j + QK / 2);
    }
    block.qh = qh.to_le_bytes();
    block
}

/// `ggml_vec_dot_q5_0_q8_0_generic`: per block `sumf += (dx * dy) * sumi`.
pub fn vec_dot(w: &[BlockQ5_0], x: &[BlockQ8_0]) -> f32 {
    let mut sumf = 0.0f32;
    for (wb, xb) in w.iter().zip(x) {
        let qh = u32::from_le_bytes(wb.qh);
        let (x_low, x_high) = xb.qs.split_at(QK / 2);
        let mut sumi0 = 0i32;
        let mut sumi1 = 0i32;
        for (j, ((&q, &y0), &y1)) in wb.qs.iter().zip(x_low).zip(x_high).enumerate() {
            let (q0, q1) = quant_pair(q, qh, j);
            sumi0 += (q0 - 16) * y0 as i32;
            sumi1 += (q1 - 16) * y1 as i32;
        }
        let sumi = sumi0 + sumi1;
        sumf += (f16_le(wb.d) * f16_le(xb.d)) * sumi as f32;
    }
    sumf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_block_by_hand() {
        // max by magnitude is x[2] = -32: d = -32 / -16 = 2, id = 0.5.
        // x[0] = 3: 1.5 + 16.5 = 18.  x[2]: -16 + 16.5 = 0.5 -> 0.  x[16] = 31: 15.5 + 16.5 = 32 -> 31.
        // x[17] = -3: -1.5 + 16.5 = 15.  zeros: 16.5 -> 16.
        let mut x = [0.0f32; QK];
        x[0] = 3.0;
        x[2] = -32.0;
        x[16] = 31.0;
        x[17] = -3.0;
        let block = quantize_block(&x);
        assert_eq!(block.d, [0x00, 0x40]); // f16 2.0
        assert_eq!(block.qs[0], 0x2 | 0xf0); // 18 & 15, 31 & 15
        assert_eq!(block.qs[1], 0xf0); // 16 & 15, 15
        assert_eq!(block.qs[2], 0x00); // 0, 16 & 15
                                       // Fifth bits: set for q = 16..31, i.e. every element but x[2] (q 0) and x[17] (q 15).
        assert_eq!(u32::from_le_bytes(block.qh), !((1 << 2) | (1 << 17)));
        let mut y = [0.0f32; QK];
        dequantize_block(&block, &mut y);
        assert_eq!(
            (y[0], y[1], y[2], y[16], y[17]),
            (4.0, 0.0, -32.0, 30.0, -2.0)
        );
    }
}
