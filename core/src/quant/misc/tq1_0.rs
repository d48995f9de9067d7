//! TQ1_0 (ternary, BitNet b1.58 / TriLM): 256 values in 54 bytes (1.6875 bits per weight).
//!
//! Values are trits `t ∈ {0, 1, 2}` standing for `d · (t - 1)`. Five trits share a byte, stored as
//! the fixed-point fraction `ceil(n · 256 / 243)` of their base-3 number `n` (first trit most
//! significant); trit `k` is recovered as `((byte · 3^k mod 256) · 3) >> 8`. Layout: `qs[0..32]`
//! hold values `32k + m` (trit `k` of byte `m`), `qs[32..48]` values `160 + 16k + m`, and the 4
//! `qh` bytes values `240 + 4k + m` (4 trits each, shifted up one trit). Then the f16 scale `d`.

use bytemuck::{Pod, Zeroable};

use crate::ggml_type::GgmlType;
use crate::quant::activation::{BlockQ8K, QK_K};
use crate::quant::cast::{f16_le, f16_to_le, Block};
use crate::quant::float::{c_max, fabsf, lroundf};

/// `block_tq1_0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockTq1_0 {
    /// 5 trits per byte.
    pub qs: [u8; 48],
    /// 4 trits per byte.
    pub qh: [u8; 4],
    /// Scale, f16 little-endian.
    pub d: [u8; 2],
}

impl Block for BlockTq1_0 {
    const TYPE: GgmlType = GgmlType::TQ1_0;
}

const POW3: [u8; 5] = [1, 3, 9, 27, 81];

/// Trit `k` (0 = most significant) of a packed byte, 0..=2.
#[inline(always)]
fn trit(byte: u8, k: usize) -> i32 {
    let shifted = byte.wrapping_mul(POW3[k % 5]);
    i32::from((u16::from(shifted) * 3) >> 8)
}

/// The block's 256 trits in value order.
fn trits(block: &BlockTq1_0) -> impl Iterator<Item = i32> + '_ {
    let (head, tail) = block.qs.split_at(32);
    let head = (0..5).flat_map(move |k| head.iter().map(move |&b| trit(b, k)));
    let tail = (0..5).flat_map(move |k| tail.iter().map(move |&b| trit(b, k)));
    let high = (0..4).flat_map(move |k| block.qh.iter().map(move |&b| trit(b, k)));
    head.chain(tail).chain(high)
}

/// `dequantize_row_tq1_0` for one block.
pub(crate) fn dequantize_block(block: &BlockTq1_0, out: &mut [f32; QK_K]) {
    let d = f16_le(block.d);
    for (y, t) in out.iter_mut().zip(trits(block)) {
        *y = (t - 1) as f32 * d;
    }
}

/// Packs the trits of `values` (each `lroundf(v · id) + 1`, most significant first) in base 3.
/// As in C, everything wraps modulo 256: only inputs that are NaN or infinite can produce digits
/// outside 0..=2, and they wrap the same way ggml's x86-64 build does.
fn base3(values: impl Iterator<Item = f32>, id: f32) -> u8 {
    let mut q = 0u8;
    for v in values {
        let digit = lroundf(v * id).wrapping_add(1) as u8;
        q = q.wrapping_mul(3).wrapping_add(digit);
    }
    q
}

/// `ceil(q · 256 / 243)` truncated to a byte, as ggml stores it.
fn to_fraction(q: u8) -> u8 {
    (u32::from(q) * 256).div_ceil(243) as u8
}

/// `quantize_row_tq1_0_ref` for one block: `d = max |x|`, trits `round(x / d) + 1`.
pub(crate) fn quantize_block(x: &[f32; QK_K]) -> BlockTq1_0 {
    let mut amax = 0.0f32;
    for &v in x {
        amax = c_max(amax, fabsf(v));
    }
    let d = amax;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut block = BlockTq1_0 {
        qs: [0; 48],
        qh: [0; 4],
        d: f16_to_le(d),
    };
    let (head, tail) = block.qs.split_at_mut(32);
    for (m, q) in head.iter_mut().enumerate() {
        *q = to_fraction(base3(x.iter().skip(m).step_by(32).take(5).copied(), id));
    }
    for (m, q) in tail.iter_mut().enumerate() {
        *q = to_fraction(base3(
            x.iter().skip(160 + m).step_by(16).take(5).copied(),
            id,
        ));
    }
    for (m, q) in block.qh.iter_mut().enumerate() {
        let digits = base3(x.iter().skip(240 + m).step_by(4).take(4).copied(), id);
        // The fifth (least significant) trit is an unused 0.
        *q = to_fraction(digits.wrapping_mul(3));
    }
    block
}

/// `ggml_vec_dot_tq1_0_q8_K_generic`.
pub(crate) fn vec_dot(xs: &[BlockTq1_0], ys: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    for (x, y) in xs.iter().zip(ys) {
        let mut sum = 0i32;
        for (t, &q) in trits(x).zip(&y.qs) {
            sum += (t - 1) * i32::from(q);
        }
        sumf += sum as f32 * (f16_le(x.d) * y.scale());
    }
    sumf
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Qs byte 0 and 33 hold the trits 2 0 1 1 0 (base 3: 174, stored as ceil(174 · 256 / 243) =
    /// 184); qh byte 2 holds 1 2 0 1 (base 3: 46, shifted one trit: 138, stored as
    /// ceil(138 · 256 / 243) = 146). Trit k of a byte is ((byte · 3^k) mod 256 · 3) >> 8:
    /// for 184: 552 >> 8 = 2; 40 · 3 >> 8 = 0; 120 · 3 >> 8 = 1; 104 · 3 >> 8 = 1; 56 · 3 >> 8 = 0.
    /// All other bytes are 0 (trits 0, value -d). d = 1.
    fn hand_built() -> BlockTq1_0 {
        let mut block = BlockTq1_0 {
            qs: [0; 48],
            qh: [0; 4],
            d: [0x00, 0x3c],
        };
        block.qs[0] = 184;
        block.qs[33] = 184;
        block.qh[2] = 146;
        block
    }

    #[test]
    fn dequantize_hand_built_block() {
        let mut out = [0.0f32; QK_K];
        dequantize_block(&hand_built(), &mut out);
        // qs[0]: values 0, 32, 64, 96, 128; qs[33] (tail byte 1): values 161, 177, 193, 209, 225;
        // qh[2]: values 242, 246, 250, 254. Value = trit - 1.
        let mut expected = [-1.0f32; QK_K];
        for (k, v) in [1.0, -1.0, 0.0, 0.0, -1.0].into_iter().enumerate() {
            expected[32 * k] = v;
            expected[161 + 16 * k] = v;
        }
        for (k, v) in [0.0, 1.0, -1.0, 0.0].into_iter().enumerate() {
            expected[242 + 4 * k] = v;
        }
        assert_eq!(out, expected);
    }

    #[test]
    fn quantize_inverts_dequantize_on_exact_trits() {
        // Values already in {-1, 0, 1} with max |x| = 1: d = 1 and every trit is exact, so the
        // encoder must reproduce the hand-built bytes (184, 146, zeros).
        let block = hand_built();
        let mut values = [0.0f32; QK_K];
        dequantize_block(&block, &mut values);
        assert_eq!(quantize_block(&values), block);
    }
}
