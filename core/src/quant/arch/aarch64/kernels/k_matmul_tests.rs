//! The K-quant matmul tiles (`k_matmul`) and IQ4_XS's (`iq4_xs`) against the scalar vec_dot, output by output, `to_bits`
//! equal (two NaNs count as equal): every rows × columns in 1..=17 (around the tiles' four columns
//! and the three, two or one left) for rows of one super-block, an edge grid for two and three;
//! weight rows quantized from floats, of random bytes (NaN, infinite and subnormal scales, any
//! scales, mins and quants), quantized with a special `d` or `dmin` in one block, and of extreme bytes with finite
//! scales; activation columns likewise (random bytes: bsums unrelated to the quants; extremes:
//! all quants -128 or 127 with the bsums of i16's ends). Outputs land at a column stride larger
//! than the row count, whose gaps must stay untouched. The kernels run directly (Q2_K's `dotprod`
//! entry runs the NEON tiles, and says so, where the CPU lacks dotprod), and the same matrices go
//! through `typed::matmul_quantized_at` at every level the (emulated) CPU has.

extern crate std;

use super::matmul_tests::{compare, make};
use super::tests::Rng;
use super::{iq4_xs, k_matmul};
use crate::quant::activation::{BlockQ8K, QK_K};
use crate::quant::iq::iq4_xs::{self as s_iq4_xs, BlockIq4Xs};
use crate::quant::k_quants::q2_k::{self as s_q2_k, BlockQ2K};
use crate::quant::k_quants::q3_k::{self as s_q3_k, BlockQ3K};
use crate::quant::k_quants::q4_k::{self as s_q4_k, BlockQ4K};
use crate::quant::k_quants::q5_k::{self as s_q5_k, BlockQ5K};
use crate::quant::k_quants::q6_k::{self as s_q6_k, BlockQ6K};
use crate::quant::k_quants::q8_k as s_q8_k;
use crate::quant::level::Level;
use crate::quant::table::Kernels;
use bytemuck::{Pod, Zeroable};
use std::string::String;
use std::vec::Vec;

/// How a test type's super-blocks are made (the scalar quantizer of one and its f16 fields).
type Maker<B> = super::matmul_tests::Maker<B, QK_K>;

/// Q8_K's f32 scales that stress the float steps (zeros, NaNs, infinities, subnormal, largest).
const SPECIAL_F32: [u32; 8] = [
    0,
    0x8000_0000,
    0x7fc0_0000,
    0xffc0_0000,
    0x7f80_0000,
    1,
    0x7f7f_ffff,
    0x3b80_0000,
];

/// `blocks` activation super-blocks of kind `kind`: quantized, random bytes, quantized with one
/// special scale, or extreme quants.
fn activations(rng: &mut Rng, blocks: usize, kind: usize) -> Vec<BlockQ8K> {
    let quantized = |rng: &mut Rng| {
        let values: [f32; QK_K] = core::array::from_fn(|_| rng.value_scaled(8, 16));
        s_q8_k::quantize_block(&values)
    };
    match kind % 4 {
        0 => (0..blocks).map(|_| quantized(rng)).collect(),
        1 => (0..blocks).map(|_| rng.block()).collect(),
        2 => {
            let mut col: Vec<BlockQ8K> = (0..blocks).map(|_| quantized(rng)).collect();
            let at = rng.below(blocks);
            col[at].d = SPECIAL_F32[rng.below(SPECIAL_F32.len())].to_le_bytes();
            col
        }
        _ => {
            let (q, bsum) = [(-128i8, i16::MIN), (127, i16::MAX)][rng.below(2)];
            (0..blocks)
                .map(|_| {
                    let mut b = BlockQ8K::zeroed();
                    b.d = (1.0f32 + rng.below(1 << 20) as f32 / (1 << 20) as f32).to_le_bytes();
                    b.qs = [q; QK_K];
                    b.bsums = [bsum.to_le_bytes(); 16];
                    b
                })
                .collect()
        }
    }
}

type MatmulFn<W> = super::matmul_tests::MatmulFn<W, BlockQ8K>;

/// One matrix of `rows × blocks` against `n` columns through each kernel and through the typed API
/// at each available level; returns the failures.
#[allow(clippy::too_many_arguments)]
fn check_shape<W: Pod + Kernels<Activation = BlockQ8K>>(
    rng: &mut Rng,
    name: &str,
    (rows, blocks, n): (usize, usize, usize),
    maker: &Maker<W>,
    scalar: fn(&[W], &[BlockQ8K]) -> f32,
    kernels: &[(&str, MatmulFn<W>)],
) -> Vec<String> {
    let mut w = Vec::new();
    for r in 0..rows {
        w.extend(make(rng, maker, blocks, r + n));
    }
    let mut x = Vec::new();
    for c in 0..n {
        x.extend(activations(rng, blocks, c * 3 + rows));
    }
    compare(name, (rows, blocks, n), QK_K, (&w, &x), scalar, kernels)
}

/// The shapes: every rows × columns up to 17 for one super-block; around the tiles' edges for two
/// and three.
fn shapes() -> Vec<(usize, usize, usize)> {
    let mut out = Vec::new();
    for rows in 1..=17 {
        for n in 1..=17 {
            out.push((rows, 1, n));
        }
    }
    let edges = [1, 2, 3, 4, 5, 7, 9, 17];
    for blocks in [2, 3] {
        for rows in edges {
            for n in edges {
                out.push((rows, blocks, n));
            }
        }
    }
    out
}

/// Every shape through `kernel`.
fn check_type<W: Pod + Kernels<Activation = BlockQ8K>>(
    seed: u64,
    name: &str,
    maker: Maker<W>,
    scalar: fn(&[W], &[BlockQ8K]) -> f32,
    kernels: &[(&str, MatmulFn<W>)],
) {
    if kernels.iter().any(|k| k.0 == "dotprod") && !Level::Dotprod.is_available() {
        std::eprintln!("{name}: no dotprod on this CPU: its entry runs the NEON tiles");
    }
    let mut rng = Rng(seed);
    let mut failures = Vec::new();
    for shape in shapes() {
        failures.extend(check_shape(&mut rng, name, shape, &maker, scalar, kernels));
    }
    assert!(
        failures.is_empty(),
        "{} failures, the first ones:\n{}",
        failures.len(),
        failures[..failures.len().min(8)].join("\n")
    );
}

#[test]
fn q4_k_matmul_tiles_match_scalar() {
    let maker = Maker {
        quantize: s_q4_k::quantize_block,
        f16_at: &[0, 2],
    };
    check_type(
        0x0404_0000_8888,
        "q4_k",
        maker,
        s_q4_k::vec_dot,
        &[("neon", k_matmul::q4_k_neon)],
    );
}

#[test]
fn q5_k_matmul_tiles_match_scalar() {
    let maker = Maker {
        quantize: s_q5_k::quantize_block,
        f16_at: &[0, 2],
    };
    check_type(
        0x0505_0000_9999,
        "q5_k",
        maker,
        s_q5_k::vec_dot,
        &[("neon", k_matmul::q5_k_neon)],
    );
}

#[test]
fn q6_k_matmul_tiles_match_scalar() {
    let maker = Maker {
        quantize: s_q6_k::quantize_block,
        f16_at: &[core::mem::offset_of!(BlockQ6K, d)],
    };
    check_type(
        0x0606_0000_aaaa,
        "q6_k",
        maker,
        s_q6_k::vec_dot,
        &[("neon", k_matmul::q6_k_neon)],
    );
}

#[test]
fn q3_k_matmul_tiles_match_scalar() {
    let maker = Maker {
        quantize: s_q3_k::quantize_block,
        f16_at: &[core::mem::offset_of!(BlockQ3K, d)],
    };
    check_type(
        0x0303_0000_bbbb,
        "q3_k",
        maker,
        s_q3_k::vec_dot,
        &[("neon", k_matmul::q3_k_neon)],
    );
}

#[test]
fn q2_k_matmul_tiles_match_scalar() {
    let maker = Maker {
        quantize: s_q2_k::quantize_block,
        f16_at: &[
            core::mem::offset_of!(BlockQ2K, d),
            core::mem::offset_of!(BlockQ2K, dmin),
        ],
    };
    check_type(
        0x0202_0000_cccc,
        "q2_k",
        maker,
        s_q2_k::vec_dot,
        &[
            ("neon", k_matmul::q2_k_neon),
            ("dotprod", k_matmul::q2_k_dotprod),
        ],
    );
}

#[test]
fn iq4_xs_matmul_tiles_match_scalar() {
    let maker = Maker {
        quantize: s_iq4_xs::quantize_block,
        f16_at: &[core::mem::offset_of!(BlockIq4Xs, d)],
    };
    check_type(
        0x1404_0000_dddd,
        "iq4_xs",
        maker,
        s_iq4_xs::vec_dot,
        &[
            ("neon", iq4_xs::matmul_neon),
            ("dotprod", iq4_xs::matmul_dotprod),
            ("i8mm", iq4_xs::matmul_i8mm),
        ],
    );
}

#[test]
fn every_available_aarch64_level_has_the_k_quant_and_iq4_xs_tiles_in_its_matmul_slot() {
    for level in [Level::Neon, Level::Dotprod, Level::I8mm] {
        let available = level.is_available();
        assert_eq!(
            BlockQ4K::matmul_kernel(level).is_some(),
            available,
            "Q4_K {level}"
        );
        assert_eq!(
            BlockQ5K::matmul_kernel(level).is_some(),
            available,
            "Q5_K {level}"
        );
        assert_eq!(
            BlockQ6K::matmul_kernel(level).is_some(),
            available,
            "Q6_K {level}"
        );
        assert_eq!(
            BlockIq4Xs::matmul_kernel(level).is_some(),
            available,
            "IQ4_XS {level}"
        );
    }
    assert!(BlockQ4K::matmul_kernel(Level::Scalar).is_none());
}
