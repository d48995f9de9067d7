//! AVX-512 form of the Q4_K search of `quantize_k.rs`: `qkx2_lanes.rs`'s lane-per-sub-block
//! `make_qkx2_quants` expanded on 16 lanes, which hold the 8 sub-blocks of two super-blocks, and
//! two such vectors interleaved (four super-blocks per pass). Compares give mask registers and
//! verdicts are masked blends; every float operation is the scalar twin's, in its order. Fewer than
//! four remaining blocks take the AVX2 kernel.

use core::arch::x86_64::*;

use super::qkx2_lanes::qkx2_lane_search;
use crate::quant::activation::QK_K;
use crate::quant::k_quants::common::Qkx2Search;
use crate::quant::k_quants::q4_k::{SubBlockFits, Q4K_SEARCH};
use crate::quant::k_quants::BlockQ4K;

/// Sub-blocks in a super-block.
const PER_BLOCK: usize = QK_K / SUB;
/// Lanes of a vector: the sub-blocks of two super-blocks.
const LANES: usize = 16;
/// Vectors interleaved per pass.
const GROUPS: usize = 2;
/// Super-blocks per pass.
const BLOCKS: usize = GROUPS * LANES / PER_BLOCK;

/// The lane vector of the search, its compare masks and its integer lanes.
type F = __m512;
type Mask = __mmask16;
type I = __m512i;

#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn splat(v: f32) -> F {
    _mm512_set1_ps(v)
}

#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn add(a: F, b: F) -> F {
    _mm512_add_ps(a, b)
}

#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn sub(a: F, b: F) -> F {
    _mm512_sub_ps(a, b)
}

#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn mul(a: F, b: F) -> F {
    _mm512_mul_ps(a, b)
}

#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn div(a: F, b: F) -> F {
    _mm512_div_ps(a, b)
}

#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn sqrt(a: F) -> F {
    _mm512_sqrt_ps(a)
}

/// `a < b ? a : b` (`b` when either is NaN).
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn min(a: F, b: F) -> F {
    _mm512_min_ps(a, b)
}

/// `a > b ? a : b` (`b` when either is NaN).
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn max(a: F, b: F) -> F {
    _mm512_max_ps(a, b)
}

#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn abs(a: F) -> F {
    _mm512_abs_ps(a)
}

#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn neg(a: F) -> F {
    _mm512_castsi512_ps(_mm512_xor_si512(
        _mm512_castps_si512(a),
        _mm512_set1_epi32(i32::MIN),
    ))
}

/// To the nearest integer, ties to even (`vrndscaleps` with no fraction bits kept).
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn round(a: F) -> F {
    _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(a)
}

#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn lt(a: F, b: F) -> Mask {
    _mm512_cmp_ps_mask::<_CMP_LT_OQ>(a, b)
}

#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn gt(a: F, b: F) -> Mask {
    _mm512_cmp_ps_mask::<_CMP_GT_OQ>(a, b)
}

#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn ge(a: F, b: F) -> Mask {
    _mm512_cmp_ps_mask::<_CMP_GE_OQ>(a, b)
}

#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn eq(a: F, b: F) -> Mask {
    _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(a, b)
}

#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn unordered(a: F, b: F) -> Mask {
    _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(a, b)
}

#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn and(a: Mask, b: Mask) -> Mask {
    a & b
}

#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn or(a: Mask, b: Mask) -> Mask {
    a | b
}

#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn any(m: Mask) -> bool {
    m != 0
}

#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn all(m: Mask) -> bool {
    m == Mask::MAX
}

/// `m ? if_true : if_false` in each lane.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn select(m: Mask, if_true: F, if_false: F) -> F {
    _mm512_mask_blend_ps(m, if_false, if_true)
}

#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn to_float(l: I) -> F {
    _mm512_cvtepi32_ps(l)
}

/// `l`, with 0 in the lanes of `m`.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn zero_where(m: Mask, l: I) -> I {
    _mm512_maskz_mov_epi32(!m, l)
}

/// `max(0, min(nmax, nearest_int(iscale · (x − min))))` by ggml's `nearest_int`:
/// `bits(v + 1.5·2²³) & 0x7fffff − 0x400000`.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn level_int(iscale: F, x: F, min: F, nmax: i32) -> I {
    let shifted = _mm512_add_ps(
        _mm512_mul_ps(iscale, _mm512_sub_ps(x, min)),
        _mm512_set1_ps(12_582_912.0),
    );
    let l = _mm512_sub_epi32(
        _mm512_and_si512(_mm512_castps_si512(shifted), _mm512_set1_epi32(0x007f_ffff)),
        _mm512_set1_epi32(0x0040_0000),
    );
    _mm512_max_epi32(
        _mm512_min_epi32(l, _mm512_set1_epi32(nmax)),
        _mm512_setzero_si512(),
    )
}

qkx2_lane_search!("avx2,avx512f,avx512bw,avx512vl,avx512vnni");

/// Two super-blocks by column: lane `8b + j` of vector `i` is value `i` of sub-block `j` of
/// super-block `b`.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn columns(x: [&[f32; QK_K]; 2]) -> Columns {
    let mut lanes = [[0.0f32; LANES]; SUB];
    for (b, x) in x.iter().enumerate() {
        for (j, sub) in x.chunks_exact(SUB).enumerate() {
            for (column, &v) in lanes.iter_mut().zip(sub) {
                if let Some(slot) = column.get_mut(PER_BLOCK * b + j) {
                    *slot = v;
                }
            }
        }
    }
    // SAFETY: each `column` holds sixteen f32; `loadu` has no alignment requirement.
    lanes.map(|column| unsafe { _mm512_loadu_ps(column.as_ptr()) })
}

/// The two super-blocks' results in the scalar twin's form.
#[inline]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn fits(search: Qkx2Search, s: &Lanes) -> [SubBlockFits; 2] {
    let (scale, neg_min, levels) = finish(search, s);
    let mut scales = [0.0f32; LANES];
    let mut mins = [0.0f32; LANES];
    // SAFETY: `scales` and `mins` hold sixteen f32; `storeu` has no alignment requirement.
    unsafe {
        _mm512_storeu_ps(scales.as_mut_ptr(), scale);
        _mm512_storeu_ps(mins.as_mut_ptr(), neg_min);
    }
    let mut out = [0, 1].map(|b| SubBlockFits {
        scales: scales
            .get(PER_BLOCK * b..)
            .and_then(|s| s.first_chunk().copied())
            .unwrap_or_default(),
        mins: mins
            .get(PER_BLOCK * b..)
            .and_then(|s| s.first_chunk().copied())
            .unwrap_or_default(),
        levels: [0; QK_K],
    });
    for (i, &l) in levels.iter().enumerate() {
        let mut lane = [0i32; LANES];
        // SAFETY: `lane` holds sixteen i32; `storeu` has no alignment requirement.
        unsafe { _mm512_storeu_si512(lane.as_mut_ptr().cast(), l) };
        for (k, &l) in lane.iter().enumerate() {
            let (block, j) = (k / PER_BLOCK, k % PER_BLOCK);
            if let Some(slot) = out
                .get_mut(block)
                .and_then(|f| f.levels.get_mut(SUB * j + i))
            {
                // The levels lie in 0..=nmax.
                *slot = l as u8;
            }
        }
    }
    out
}

/// `quantize_row_q4_K_ref`, four super-blocks at a time; the rest through the AVX2 kernel.
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl,avx512vnni")]
fn quantize_q4_k_impl(values: &[f32], blocks: &mut [BlockQ4K]) {
    let search = Q4K_SEARCH;
    let mut groups = values
        .chunks_exact(BLOCKS * QK_K)
        .zip(blocks.chunks_exact_mut(BLOCKS));
    for (x, out) in &mut groups {
        let Some(x) = x.first_chunk::<{ BLOCKS * QK_K }>() else {
            continue;
        };
        let xs: [&[f32; QK_K]; BLOCKS] = core::array::from_fn(|b| {
            x.get(b * QK_K..)
                .and_then(|s| s.first_chunk::<QK_K>())
                .unwrap_or(&[0.0; QK_K])
        });
        let [a, b, c, d] = xs;
        let mut lanes = [
            start(search, columns([a, b])),
            start(search, columns([c, d])),
        ];
        if search.nstep >= 1 {
            for is in 0..=search.nstep {
                trial(search, is, &mut lanes);
            }
        }
        let [[fa, fb], [fc, fd]] = lanes.map(|s| fits(search, &s));
        for ((out, x), f) in out.iter_mut().zip(xs).zip([fa, fb, fc, fd]) {
            *out = super::quantize_k::q4_k_block_from_fits(x, f);
        }
    }
    let done = blocks.len() / BLOCKS * BLOCKS;
    let rest = values.get(done * QK_K..).unwrap_or(&[]);
    if let Some(out) = blocks.get_mut(done..) {
        super::quantize_k::quantize_q4_k(rest, out);
    }
}

/// Safe entry of [`quantize_q4_k_impl`].
pub(super) fn quantize_q4_k(values: &[f32], blocks: &mut [BlockQ4K]) {
    // SAFETY: only handed out for an available AVX-512 VNNI level (as the kernels of
    // `avx512.rs`), which includes AVX2.
    unsafe { quantize_q4_k_impl(values, blocks) }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::quant::k_quants::q4_k;
    use bytemuck::Zeroable;
    use std::vec::Vec;

    #[test]
    fn avx512_q4_k_quantizer_gives_the_scalar_bytes() {
        if !(std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("avx512vl")
            && std::is_x86_feature_detected!("avx512vnni"))
        {
            return;
        }
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let specials = [0.0f32, -0.0, 1e-40, 3e37, f32::NAN, f32::INFINITY, 7.0];
        // Block counts around the four-block pass, so the AVX2 tail runs too.
        for n_blocks in [1usize, 4, 5, 7, 9] {
            for round in 0..30 {
                let values: Vec<f32> = (0..n_blocks * QK_K)
                    .map(|i| {
                        let r = next();
                        let sub = (i / SUB) as u64 + round;
                        match (sub % 9, r % 61) {
                            // A constant sub-block, then sub-blocks with a special value.
                            (0, _) => 0.25,
                            (1, 0) => specials[(r >> 8) as usize % specials.len()],
                            // All positive (the minimum clamps to 0).
                            (2, _) => (r >> 40) as f32 / 1e6 + 3.0,
                            // Values on a grid (ties between trials).
                            (3, _) => ((r >> 60) as f32 - 8.0) * 0.5,
                            _ => {
                                ((r >> 40) as f32 / (1u64 << 24) as f32 - 0.5)
                                    * (1 + sub % 5) as f32
                            }
                        }
                    })
                    .collect();
                let mut got = std::vec![BlockQ4K::zeroed(); n_blocks];
                quantize_q4_k(&values, &mut got);
                for (b, (x, got)) in values.chunks_exact(QK_K).zip(&got).enumerate() {
                    let want = q4_k::quantize_block(x.try_into().unwrap());
                    assert_eq!(*got, want, "block {b} of {n_blocks}, round {round}");
                }
            }
        }
    }
}
