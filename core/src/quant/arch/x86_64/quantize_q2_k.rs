//! The AVX2 Q2_K quantizer: `quantize_row_q2_K_ref`'s sixteen `make_qkx2_quants` searches
//! (sub-blocks of 16, levels to 3, weights `|x|`) run eight side by side, one sub-block per lane,
//! by the lane search of `qkx2_lanes.rs` over the primitives of `quantize_k.rs`; the two halves of
//! a super-block interleaved so that the serial in-order sums of one hide the add latency of the
//! other. The rest (the 4-bit scales and the re-quantization) is the scalar twin's
//! `q2_k::block_from_fits`. Same bytes as the scalar `q2_k::quantize_block`.

use super::qkx2_lanes::qkx2_lane_search;
use super::quantize_k::{
    abs, add, all, and, any, div, eq, ge, gt, lane_ints, level_int, load_lanes, lt, max, min, mul,
    neg, or, round, select, splat, sub, to_float, unordered, zero_where, Mask, F, I,
};
use crate::quant::activation::QK_K;
use crate::quant::k_quants::common::Qkx2Search;
use crate::quant::k_quants::q2_k::{self, BlockQ2K, Q2K_SEARCH};
use core::arch::x86_64::*;

/// Sub-blocks in half a super-block, one per lane.
const LANES: usize = 8;

/// Q2_K's weights: `|x|`.
#[inline]
#[target_feature(enable = "avx2")]
fn abs_weights(x: &Columns) -> Columns {
    let mut w = *x;
    for v in &mut w {
        *v = abs(*v);
    }
    w
}

qkx2_lane_search!("avx2", 16, abs_weights);

/// One super-block: both halves' searches interleaved, then the scalar twin's assembly.
#[inline]
#[target_feature(enable = "avx2")]
fn quantize_block(x: &[f32; QK_K]) -> BlockQ2K {
    let search = Q2K_SEARCH;
    let (first, second) = x.split_at(QK_K / 2);
    let mut lanes = [
        start(search, columns(first)),
        start(search, columns(second)),
    ];
    if search.nstep >= 1 {
        for is in 0..=search.nstep {
            trial(search, is, &mut lanes);
        }
    }
    let mut scales = [0.0f32; QK_K / 16];
    let mut mins = [0.0f32; QK_K / 16];
    let mut levels = [0u8; QK_K];
    let halves = lanes
        .iter()
        .zip(scales.chunks_exact_mut(LANES))
        .zip(mins.chunks_exact_mut(LANES))
        .zip(levels.chunks_exact_mut(QK_K / 2));
    for (((s, scales), mins), levels) in halves {
        let (scale, neg_min, columns) = finish(search, s);
        // SAFETY: `scales` and `mins` hold eight f32 (`chunks_exact_mut`); `storeu` has no
        // alignment requirement.
        unsafe {
            _mm256_storeu_ps(scales.as_mut_ptr(), scale);
            _mm256_storeu_ps(mins.as_mut_ptr(), neg_min);
        }
        scatter_levels(&columns, levels);
    }
    q2_k::block_from_fits(x, &scales, &mins, levels)
}

#[target_feature(enable = "avx2")]
fn quantize_q2_k_impl(values: &[f32], blocks: &mut [BlockQ2K]) {
    for (x, out) in values.chunks_exact(QK_K).zip(blocks) {
        if let Ok(x) = <&[f32; QK_K]>::try_from(x) {
            *out = quantize_block(x);
        }
    }
}

/// `quantize_row_q2_K_ref` at AVX2.
pub(super) fn quantize_q2_k(values: &[f32], blocks: &mut [BlockQ2K]) {
    // SAFETY: only handed out for an available AVX2 level (as the AVX2 kernels of `avx2.rs`).
    unsafe { quantize_q2_k_impl(values, blocks) }
}
