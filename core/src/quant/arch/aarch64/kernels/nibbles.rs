//! Vec_dots of the other 32-value nibble types (Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4) with NEON and `sdot`,
//! and the unpacking they share with their dequantize kernels.

use super::has_dotprod;
use super::ops::{f16_le, load_i8, load_u8, piece, sdot};
use crate::quant::activation::{BlockQ8_0, BlockQ8_1};
use crate::quant::iq::iq4_nl::BlockIq4Nl;
use crate::quant::legacy::{BlockQ4_1, BlockQ5_0, BlockQ5_1};
use crate::quant::misc::fp4::{e8m0_to_f32_half, KVALUES_FP4};
use crate::quant::misc::mxfp4::BlockMxfp4;
use core::arch::aarch64::*;

/// ggml's `kvalues_iq4nl` (the iq module keeps its copy private; the tests compare every code's
/// dequantized value with the scalar kernel's).
static IQ4NL_LEVELS: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// Low nibbles (elements 0..16) and high nibbles (16..32) of 16 packed bytes.
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn nibbles(qs: &[u8; 16]) -> (uint8x16_t, uint8x16_t) {
    let q = load_u8(qs);
    (vandq_u8(q, vdupq_n_u8(0x0f)), vshrq_n_u8::<4>(q))
}

/// The fifth bits of a Q5 block as 0x10 per element: bit `j` of the little-endian `qh` for element
/// `j` (elements 0..16 in the first vector, 16..32 in the second).
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn fifth_bits(qh: [u8; 4]) -> (uint8x16_t, uint8x16_t) {
    static BYTE_OF: [[u8; 16]; 2] = [
        [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1],
        [2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3],
    ];
    static BIT: [u8; 16] = [1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128];
    let bytes = vreinterpretq_u8_u32(vdupq_n_u32(u32::from_le_bytes(qh)));
    let bit = load_u8(&BIT);
    let sixteen = vdupq_n_u8(0x10);
    let spread = |which: &[u8; 16]| {
        let replicated = vqtbl1q_u8(bytes, load_u8(which));
        vandq_u8(vtstq_u8(replicated, bit), sixteen)
    };
    (spread(&BYTE_OF[0]), spread(&BYTE_OF[1]))
}

/// The 32 levels of an IQ4_NL block (elements 0..16, then 16..32).
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn iq4_levels(qs: &[u8; 16]) -> (int8x16_t, int8x16_t) {
    iq4_levels_of(load_u8(qs))
}

/// The levels of the low nibbles and of the high nibbles of 16 packed bytes, byte for byte.
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn iq4_levels_of(q: uint8x16_t) -> (int8x16_t, int8x16_t) {
    let table = load_i8(&IQ4NL_LEVELS);
    let (low, high) = (vandq_u8(q, vdupq_n_u8(0x0f)), vshrq_n_u8::<4>(q));
    (vqtbl1q_s8(table, low), vqtbl1q_s8(table, high))
}

/// `Σ w·x` over a block whose 32 weights are `w` (elements 0..16, 16..32), each i16 product at
/// most 2^14 in magnitude: pairwise-widened into i32 right away.
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn block_sum_neon(w: (int8x16_t, int8x16_t), x: &[i8; 32]) -> i32 {
    let (x0, x1) = (load_i8(piece(x, 0)), load_i8(piece(x, 1)));
    let mut acc = vpaddlq_s16(vmull_s8(vget_low_s8(w.0), vget_low_s8(x0)));
    acc = vpadalq_s16(acc, vmull_high_s8(w.0, x0));
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(w.1), vget_low_s8(x1)));
    acc = vpadalq_s16(acc, vmull_high_s8(w.1, x1));
    vaddvq_s32(acc)
}

/// The same sum with `sdot`.
#[inline]
#[target_feature(enable = "neon,dotprod")]
pub(super) fn block_sum_sdot(w: (int8x16_t, int8x16_t), x: &[i8; 32]) -> i32 {
    let mut acc = vdupq_n_s32(0);
    acc = sdot(acc, w.0, load_i8(piece(x, 0)));
    acc = sdot(acc, w.1, load_i8(piece(x, 1)));
    vaddvq_s32(acc)
}

/// Signed view of two unsigned vectors.
#[inline]
#[target_feature(enable = "neon")]
fn signed(v: (uint8x16_t, uint8x16_t)) -> (int8x16_t, int8x16_t) {
    (vreinterpretq_s8_u8(v.0), vreinterpretq_s8_u8(v.1))
}

/// The weights of each type as two vectors of signed bytes.
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn q4_1_weights(b: &BlockQ4_1) -> (int8x16_t, int8x16_t) {
    signed(nibbles(&b.qs))
}

#[inline]
#[target_feature(enable = "neon")]
pub(super) fn q5_0_weights(b: &BlockQ5_0) -> (int8x16_t, int8x16_t) {
    let (low, high) = nibbles(&b.qs);
    let (h0, h1) = fifth_bits(b.qh);
    let sixteen = vdupq_n_s8(16);
    let (q0, q1) = signed((vorrq_u8(low, h0), vorrq_u8(high, h1)));
    (vsubq_s8(q0, sixteen), vsubq_s8(q1, sixteen))
}

#[inline]
#[target_feature(enable = "neon")]
pub(super) fn q5_1_weights(b: &BlockQ5_1) -> (int8x16_t, int8x16_t) {
    let (low, high) = nibbles(&b.qs);
    let (h0, h1) = fifth_bits(b.qh);
    signed((vorrq_u8(low, h0), vorrq_u8(high, h1)))
}

/// Defines a type's NEON vec_dot, its `sdot` form and the safe `dotprod` entry point, from the
/// weights unpacker and the per-block float step (`$step(sumf, wb, xb, sumi) -> sumf`).
macro_rules! vec_dots {
    ($W:ty, $X:ty, $weights:ident, $step:ident,
     $neon:ident, $sdot:ident, $public:ident, $dotprod:ident) => {
        #[target_feature(enable = "neon")]
        fn $neon(w: &[$W], x: &[$X]) -> f32 {
            let mut sumf = 0.0f32;
            for (wb, xb) in w.iter().zip(x) {
                let sumi = block_sum_neon($weights(wb), &xb.qs);
                sumf = $step(sumf, wb, xb, sumi);
            }
            sumf
        }

        #[target_feature(enable = "neon,dotprod")]
        fn $sdot(w: &[$W], x: &[$X]) -> f32 {
            let mut sumf = 0.0f32;
            for (wb, xb) in w.iter().zip(x) {
                let sumi = block_sum_sdot($weights(wb), &xb.qs);
                sumf = $step(sumf, wb, xb, sumi);
            }
            sumf
        }

        /// The scalar twin's vec_dot with NEON (same bits).
        pub fn $public(w: &[$W], x: &[$X]) -> f32 {
            // SAFETY: this module is compiled only for targets with NEON (quant/arch).
            unsafe { $neon(w, x) }
        }

        /// The scalar twin's vec_dot with `sdot` where the CPU has it, else NEON (same bits).
        pub fn $dotprod(w: &[$W], x: &[$X]) -> f32 {
            if has_dotprod() {
                // SAFETY: the CPU has dotprod (checked just above).
                unsafe { $sdot(w, x) }
            } else {
                $public(w, x)
            }
        }
    };
}

/// Q4_1 / Q5_1: `sumf += (dx * dy) * sumi + m * s`.
#[inline(always)]
fn with_min_step<W: MinBlock>(sumf: f32, wb: &W, xb: &BlockQ8_1, sumi: i32) -> f32 {
    sumf + ((f16_le(wb.d()) * f16_le(xb.d)) * sumi as f32 + f16_le(wb.m()) * f16_le(xb.s))
}

/// Q5_0: `sumf += (dx * dy) * sumi`.
#[inline(always)]
fn q5_0_step(sumf: f32, wb: &BlockQ5_0, xb: &BlockQ8_0, sumi: i32) -> f32 {
    sumf + (f16_le(wb.d) * f16_le(xb.d)) * sumi as f32
}

/// IQ4_NL: `d = dy * dx`, `sumf += d * sumi`.
#[inline(always)]
fn iq4_nl_step(sumf: f32, wb: &BlockIq4Nl, xb: &BlockQ8_0, sumi: i32) -> f32 {
    let d = f16_le(xb.d) * f16_le(wb.d);
    sumf + d * sumi as f32
}

/// The scale and min of Q4_1 / Q5_1 blocks.
trait MinBlock {
    fn d(&self) -> [u8; 2];
    fn m(&self) -> [u8; 2];
}
impl MinBlock for BlockQ4_1 {
    fn d(&self) -> [u8; 2] {
        self.d
    }
    fn m(&self) -> [u8; 2] {
        self.m
    }
}
impl MinBlock for BlockQ5_1 {
    fn d(&self) -> [u8; 2] {
        self.d
    }
    fn m(&self) -> [u8; 2] {
        self.m
    }
}

#[inline]
#[target_feature(enable = "neon")]
pub(super) fn iq4_nl_weights(b: &BlockIq4Nl) -> (int8x16_t, int8x16_t) {
    iq4_levels(&b.qs)
}

/// The 32 doubled E2M1 levels of an MXFP4 block (elements 0..16, then 16..32).
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn mxfp4_weights(b: &BlockMxfp4) -> (int8x16_t, int8x16_t) {
    let table = load_i8(&KVALUES_FP4);
    let (low, high) = nibbles(&b.qs);
    (vqtbl1q_s8(table, low), vqtbl1q_s8(table, high))
}

/// MXFP4: `d = dy * e8m0_half(e)`, `sumf += d * sumi`.
#[inline(always)]
fn mxfp4_step(sumf: f32, wb: &BlockMxfp4, xb: &BlockQ8_0, sumi: i32) -> f32 {
    let d = f16_le(xb.d) * e8m0_to_f32_half(wb.e);
    sumf + d * sumi as f32
}

vec_dots!(
    BlockQ4_1,
    BlockQ8_1,
    q4_1_weights,
    with_min_step,
    q4_1_neon,
    q4_1_sdot,
    vec_dot_q4_1,
    vec_dot_q4_1_dotprod
);
vec_dots!(
    BlockQ5_0,
    BlockQ8_0,
    q5_0_weights,
    q5_0_step,
    q5_0_neon,
    q5_0_sdot,
    vec_dot_q5_0,
    vec_dot_q5_0_dotprod
);
vec_dots!(
    BlockQ5_1,
    BlockQ8_1,
    q5_1_weights,
    with_min_step,
    q5_1_neon,
    q5_1_sdot,
    vec_dot_q5_1,
    vec_dot_q5_1_dotprod
);
vec_dots!(
    BlockIq4Nl,
    BlockQ8_0,
    iq4_nl_weights,
    iq4_nl_step,
    iq4_nl_neon,
    iq4_nl_sdot,
    vec_dot_iq4_nl,
    vec_dot_iq4_nl_dotprod
);
vec_dots!(
    BlockMxfp4,
    BlockQ8_0,
    mxfp4_weights,
    mxfp4_step,
    mxfp4_neon,
    mxfp4_sdot,
    vec_dot_mxfp4,
    vec_dot_mxfp4_dotprod
);
