//! Q8_K: the activation type of the K-quants (block type in
//! [`activation`](crate::quant::activation)): an f32 scale, 256 signed 8-bit quants and the sums of
//! each 16 quants. ggml has no vec_dot with Q8_K weights.

use super::common::sub_blocks;
use crate::quant::activation::{BlockQ8K, QK_K};
use crate::quant::float::{first_largest_magnitude, nearest_int};

/// `dequantize_row_q8_K` for one block.
pub fn dequantize_block(block: &BlockQ8K, out: &mut [f32; QK_K]) {
    let d = block.scale();
    for (y, &q) in out.iter_mut().zip(&block.qs) {
        *y = d * q as f32;
    }
}

/// `quantize_row_q8_K_ref` for one block: `iscale = -127 / max` with `max` the first element of
/// largest magnitude, `q = min(127, nearest_int(iscale * x))`, `d = 1 / iscale` in f32.
///
/// An all-zero block gets `d = 0` and zero quants. ggml leaves that block's `bsums` unwritten (they
/// keep whatever the output buffer held); here they are zero, which is what ggml gives on a zeroed
/// buffer.
pub fn quantize_block(x: &[f32; QK_K]) -> BlockQ8K {
    let (max, amax) = first_largest_magnitude(x);
    let mut block = BlockQ8K {
        d: [0; 4],
        qs: [0; QK_K],
        bsums: [[0; 2]; QK_K / 16],
    };
    if amax == 0.0 {
        return block;
    }
    let iscale = -127.0 / max;
    for (q, &v) in block.qs.iter_mut().zip(x) {
        *q = nearest_int(iscale * v).min(127) as i8;
    }
    for (sum, qs) in block.bsums.iter_mut().zip(sub_blocks::<16, _>(&block.qs)) {
        let mut total = 0i32;
        for &q in qs {
            total += q as i32;
        }
        *sum = (total as i16).to_le_bytes();
    }
    block.d = (1.0 / iscale).to_le_bytes();
    block
}
