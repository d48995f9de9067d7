//! Q5_1: 32 values per block, f16 scale `d` and minimum `m`, 5-bit quants `q`; value = `q * d + m`.
//! Bits are laid out as in Q5_0. Its vec_dot partner is Q8_1.

use super::q5_0::quant_pair;
use crate::ggml_type::GgmlType;
use crate::quant::activation::BlockQ8_1;
use crate::quant::arrays::map;
use crate::quant::cast::{f16_le, f16_to_le, Block};
use crate::quant::float::c_cast_i32_each;
use bytemuck::{Pod, Zeroable};

/// Elements per block.
pub const QK: usize = 32;

/// `block_q5_1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockQ5_1 {
    /// Scale, f16 little-endian.
    pub d: [u8; 2],
    /// Minimum, f16 little-endian.
    pub m: [u8; 2],
    /// Fifth bits, u32 little-endian: bit `j` belongs to element `j`.
    pub qh: [u8; 4],
    /// Low 4 bits: low nibble = element `j`, high nibble = element `j + 16`.
    pub qs: [u8; QK / 2],
}

impl Block for BlockQ5_1 {
    const TYPE: GgmlType = GgmlType::Q5_1;
}

/// `dequantize_row_q5_1` for one block.
pub fn dequantize_block(block: &BlockQ5_1, out: &mut [f32; QK]) {
    let d = f16_le(block.d);
    let m = f16_le(block.m);
    let qh = u32::from_le_bytes(block.qh);
    let (low, high) = out.split_at_mut(QK / 2);
    for (j, ((&q, lo), hi)) in block.qs.iter().zip(low).zip(high).enumerate() {
        let (q0, q1) = quant_pair(q, qh, j);
        *lo = q0 as f32 * d + m;
        *hi = q1 as f32 * d + m;
    }
}

/// `quantize_row_q5_1_ref` for one block: `d = (max - min) / 31`, `q = (uint8_t)((x - min) / d +
/// 0.5)`. Unlike Q4_1 there is no clamp; only the low 5 bits are stored.
pub fn quantize_block(x: &[f32; QK]) -> BlockQ5_1 {
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
    let d = (max - min) / 31.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };

    let mut block = BlockQ5_1 {
        d: f16_to_le(d),
        m: f16_to_le(min),
        qh: [0; 4],
        qs: [0; QK / 2],
    };
    let mut qh = 0u32;
    let mut shifted = [0.0f32; QK];
    for (s, &v) in shifted.iter_mut().zip(x) {
        *s = (v - min) * id + 0.5;
    }
    let levels = map(&c_cast_i32_each(&shifted), |l| l as u8);
    let (low, high) = levels.split_at(QK / 2);
    for (j, ((q, &xi0), &xi1)) in block.qs.iter_mut().zip(low).zip(high).enumerate() {
        *q = (xi0 & 0x0f) | ((xi1 & 0x0f) << 4);
        qh |= u32::from((xi0 & 0x10) >> 4) << j;
        qh |= u32::from((xi1 & 0x10) >> 4) << (j + QK / 2);
    }
    block.qh = qh.to_le_bytes();
    block
}

/// `ggml_vec_dot_q5_1_q8_1_generic`: per block `sumf += (dx * dy) * sumi + mx * sy`.
pub fn vec_dot(w: &[BlockQ5_1], x: &[BlockQ8_1]) -> f32 {
    let mut sumf = 0.0f32;
    for (wb, xb) in w.iter().zip(x) {
        let qh = u32::from_le_bytes(wb.qh);
        let (x_low, x_high) = xb.qs.split_at(QK / 2);
        let mut sumi0 = 0i32;
        let mut sumi1 = 0i32;
        for (j, ((&q, &y0), &y1)) in wb.qs.iter().zip(x_low).zip(x_high).enumerate() {
            let (q0, q1) = quant_pair(q, qh, j);
            sumi0 += q0 * y0 as i32;
            sumi1 += q1 * y1 as i32;
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
        // min = -2, max = 29: d = 31 / 31 = 1, id = 1, m = -2.
        // x[0] = 29: 31 + 0.5 -> 31 (0x1f).  x[1] = -2: 0.5 -> 0.  x[16] = 14.4: 16.4 + 0.5 -> 16.
        // zeros: 2.5 -> 2.
        let mut x = [0.0f32; QK];
        x[0] = 29.0;
        x[1] = -2.0;
        x[16] = 14.4;
        let block = quantize_block(&x);
        assert_eq!(block.d, [0x00, 0x3c]); // f16 1.0
        assert_eq!(block.m, [0x00, 0xc0]); // f16 -2.0
        assert_eq!(block.qs[0], 0x0f); // 31 & 15, 16 & 15
        assert_eq!(block.qs[1], 0x20); // 0, 2
        assert_eq!(u32::from_le_bytes(block.qh), (1 << 0) | (1 << 16));
        let mut y = [0.0f32; QK];
        dequantize_block(&block, &mut y);
        assert_eq!((y[0], y[1], y[2], y[16]), (29.0, -2.0, 0.0, 14.0));
    }
}
