//! IQ4_XS × Q8_K vec_dot (NEON and `sdot`) and dequantize: eight groups of 32 IQ4_NL-coded
//! values per super-block, each with a 6-bit scale.

use super::has_dotprod;
use super::nibbles::{block_sum_neon, block_sum_sdot, iq4_levels};
use super::ops::f16_le;
use crate::quant::activation::{BlockQ8K, QK_K};
use crate::quant::iq::iq4_xs::BlockIq4Xs;
use core::arch::aarch64::*;

/// The 6-bit scale of group `ib`, minus 32 (`ls - 32` in ggml).
#[inline(always)]
fn group_scale(block: &BlockIq4Xs, ib: usize) -> i32 {
    let low = (block.scales_l.get(ib / 2).copied().unwrap_or(0) >> (4 * (ib % 2))) & 0xf;
    let high = (u16::from_le_bytes(block.scales_h) >> (2 * ib)) & 3;
    (i32::from(low) | (i32::from(high) << 4)) - 32
}

/// The 32 quants of group `ib` of a Q8_K block.
#[inline(always)]
fn group_quants(block: &BlockQ8K, ib: usize) -> &[i8; 32] {
    const ZEROS: [i8; 32] = [0; 32];
    block
        .qs
        .get(32 * ib..32 * ib + 32)
        .and_then(|s| s.try_into().ok())
        .unwrap_or(&ZEROS)
}

/// Defines the NEON or `sdot` vec_dot: per group `dl = (d * dy) * (ls - 32)`, `sumf += dl * sumi`,
/// serially in group order (`ggml_vec_dot_iq4_xs_q8_K_generic`).
macro_rules! vec_dot_with {
    ($name:ident, $features:literal, $block_sum:ident) => {
        #[target_feature(enable = $features)]
        fn $name(w: &[BlockIq4Xs], x: &[BlockQ8K]) -> f32 {
            let mut sumf = 0.0f32;
            for (wb, xb) in w.iter().zip(x) {
                let d4d8 = f16_le(wb.d) * xb.scale();
                for (ib, qs) in wb.qs.iter().enumerate() {
                    let dl = d4d8 * group_scale(wb, ib) as f32;
                    let sumi = $block_sum(iq4_levels(qs), group_quants(xb, ib));
                    sumf += dl * sumi as f32;
                }
            }
            sumf
        }
    };
}

vec_dot_with!(vec_dot_neon, "neon", block_sum_neon);
vec_dot_with!(vec_dot_sdot, "neon,dotprod", block_sum_sdot);

/// `ggml_vec_dot_iq4_xs_q8_K_generic` with NEON (same bits).
pub fn vec_dot(w: &[BlockIq4Xs], x: &[BlockQ8K]) -> f32 {
    // SAFETY: this module is compiled only for targets with NEON (quant/arch).
    unsafe { vec_dot_neon(w, x) }
}

/// [`vec_dot`] with `sdot` where the CPU has it.
pub fn vec_dot_dotprod(w: &[BlockIq4Xs], x: &[BlockQ8K]) -> f32 {
    if has_dotprod() {
        // SAFETY: the CPU has dotprod (checked just above).
        unsafe { vec_dot_sdot(w, x) }
    } else {
        vec_dot(w, x)
    }
}

/// `dequantize_row_iq4_xs` for one block: `dl * level`, `dl = d * (ls - 32)`.
pub fn dequantize(block: &BlockIq4Xs, out: &mut [f32; QK_K]) {
    // SAFETY: this module is compiled only for targets with NEON (quant/arch).
    unsafe { dequantize_neon(block, out) }
}

#[target_feature(enable = "neon")]
fn dequantize_neon(block: &BlockIq4Xs, out: &mut [f32; QK_K]) {
    let d = f16_le(block.d);
    for (ib, (qs, values)) in block.qs.iter().zip(out.chunks_exact_mut(32)).enumerate() {
        let dl = vdupq_n_f32(d * group_scale(block, ib) as f32);
        let (l0, l1) = iq4_levels(qs);
        super::dequantize::store_levels(values, [l0, l1], |l| vmulq_f32(dl, l));
    }
}
