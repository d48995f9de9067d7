//! Row forms of the per-block dequantize and quantize kernels, with the table's signatures
//! (`fn(&[B], &mut [f32])`, `fn(&[f32], &mut [B])`): each applies its block kernel to every block,
//! as the scalar twins do. (Not the table's `rows`, the multi-row matvec kernels.)

use super::{dequantize, iq4_xs, q2_k, q3_k, q5_k, q8_0, q8_k};
use crate::quant::activation::{BlockQ8K, BlockQ8_0, BlockQ8_1, QK8_0, QK_K};
use crate::quant::iq::iq4_nl::BlockIq4Nl;
use crate::quant::iq::iq4_xs::BlockIq4Xs;
use crate::quant::k_quants::{BlockQ2K, BlockQ3K, BlockQ4K, BlockQ5K, BlockQ6K};
use crate::quant::legacy::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1};
use crate::quant::misc::mxfp4::BlockMxfp4;
use crate::quant::table::{dequantize_each, quantize_each};

/// Q8_0 blocks to f32.
pub fn dequantize_q8_0(blocks: &[BlockQ8_0], out: &mut [f32]) {
    dequantize_each::<_, QK8_0>(blocks, out, dequantize::q8_0);
}

/// Q4_0 blocks to f32.
pub fn dequantize_q4_0(blocks: &[BlockQ4_0], out: &mut [f32]) {
    dequantize_each::<_, QK8_0>(blocks, out, dequantize::q4_0);
}

/// Q4_K blocks to f32.
pub fn dequantize_q4_k(blocks: &[BlockQ4K], out: &mut [f32]) {
    dequantize_each::<_, QK_K>(blocks, out, dequantize::q4_k);
}

/// Q6_K blocks to f32.
pub fn dequantize_q6_k(blocks: &[BlockQ6K], out: &mut [f32]) {
    dequantize_each::<_, QK_K>(blocks, out, dequantize::q6_k);
}

/// f32 to Q8_0 blocks (`quantize_row_q8_0_ref`).
pub fn quantize_q8_0(values: &[f32], blocks: &mut [BlockQ8_0]) {
    quantize_each::<_, QK8_0>(values, blocks, q8_0::quantize_block);
}

/// f32 to Q8_K blocks (`quantize_row_q8_K_ref`).
pub fn quantize_q8_k(values: &[f32], blocks: &mut [BlockQ8K]) {
    quantize_each::<_, QK_K>(values, blocks, q8_k::quantize_block);
}

/// Q4_1 blocks to f32.
pub fn dequantize_q4_1(blocks: &[BlockQ4_1], out: &mut [f32]) {
    dequantize_each::<_, QK8_0>(blocks, out, dequantize::q4_1);
}

/// Q5_0 blocks to f32.
pub fn dequantize_q5_0(blocks: &[BlockQ5_0], out: &mut [f32]) {
    dequantize_each::<_, QK8_0>(blocks, out, dequantize::q5_0);
}

/// Q5_1 blocks to f32.
pub fn dequantize_q5_1(blocks: &[BlockQ5_1], out: &mut [f32]) {
    dequantize_each::<_, QK8_0>(blocks, out, dequantize::q5_1);
}

/// IQ4_NL blocks to f32.
pub fn dequantize_iq4_nl(blocks: &[BlockIq4Nl], out: &mut [f32]) {
    dequantize_each::<_, QK8_0>(blocks, out, dequantize::iq4_nl);
}

/// f32 to Q8_1 blocks (`quantize_row_q8_1_ref`).
pub fn quantize_q8_1(values: &[f32], blocks: &mut [BlockQ8_1]) {
    quantize_each::<_, QK8_0>(values, blocks, q8_0::quantize_block_q8_1);
}

/// Q5_K blocks to f32.
pub fn dequantize_q5_k(blocks: &[BlockQ5K], out: &mut [f32]) {
    dequantize_each::<_, QK_K>(blocks, out, q5_k::dequantize_block);
}

/// IQ4_XS blocks to f32.
pub fn dequantize_iq4_xs(blocks: &[BlockIq4Xs], out: &mut [f32]) {
    dequantize_each::<_, QK_K>(blocks, out, iq4_xs::dequantize);
}

/// MXFP4 blocks to f32.
pub fn dequantize_mxfp4(blocks: &[BlockMxfp4], out: &mut [f32]) {
    dequantize_each::<_, QK8_0>(blocks, out, dequantize::mxfp4);
}

/// Q2_K blocks to f32.
pub fn dequantize_q2_k(blocks: &[BlockQ2K], out: &mut [f32]) {
    dequantize_each::<_, QK_K>(blocks, out, q2_k::dequantize);
}

/// Q3_K blocks to f32.
pub fn dequantize_q3_k(blocks: &[BlockQ3K], out: &mut [f32]) {
    dequantize_each::<_, QK_K>(blocks, out, q3_k::dequantize);
}
