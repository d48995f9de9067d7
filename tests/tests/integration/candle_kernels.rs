//! Our scalar kernels against candle-core 0.11's CPU kernels, for the 15 types candle implements.
//!
//! Data: 256 Gaussian rows of 4096 values (random per-row scales, sparse outliers) from a fixed
//! seed, plus one row per special pattern (zeros, tiny, huge, inf, NaN, half-way values, exact
//! rounding ties, constant, ±amax ties, an outlier): 267 rows, 4272 super-blocks.
//!
//! What is asserted (see /work/shared/reference/kernels.md §0, §2.2, §3 for why):
//! - quantize: bytes identical for F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, and for Q8_1 except
//!   its `s` field; the K-quant quantizers are older ports in candle, so their differing block
//!   counts are only printed (our bytes are checked against ggml by the ggml harness);
//! - dequantize: bit-identical on candle's bytes, on our bytes and on random bytes, every type,
//!   except BF16 signaling NaNs, which candle (through `half`) quiets and ggml and we keep, and, in
//!   builds with AVX, Q4_1/Q5_1 blocks whose `d` and `m` are both NaN, where candle's codegen may
//!   return `m`'s NaN; ours must be `d`'s there, as ggml's ([`both_nan_scales`]);
//! - vec_dot, candle fed our quantized bytes on both sides: bit-identical to candle's
//!   `vec_dot_unopt` for Q4_0, Q2_K, Q3_K, Q6_K, whose float order is ggml's generic order; for the
//!   others (F32, F16, BF16, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K: other association) the differing
//!   count and largest relative differences are printed and |ours - candle| / Σ|w_i x_i| is
//!   bounded. Where candle's dispatching `vec_dot` is a SIMD kernel (candle picks them at compile
//!   time, so only in builds with e.g. `-C target-cpu=native`), ours is held to the same bound
//!   against it; elsewhere it must equal `vec_dot_unopt` ([`vec_dot_table`]). Once on realistic
//!   data, once on random blocks (large integer sums).

use crate::candle_common::{
    blocks_from_bytes, bytes_of_blocks, candle_simd_in_build, gaussian_rows, with_candle_block,
    CandleBlock, Rng, CANDLE_TYPES,
};
use miniquant::quant;
use miniquant::GgmlType;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

const COLS: usize = 4096;
const GAUSSIAN_ROWS: usize = 256;
const SPECIAL_LEN: usize = 256;

/// Where a special pattern sits in the test matrix.
struct SpecialRegion {
    name: &'static str,
    row: usize,
    first_col: usize,
}

/// The test matrix: row-major, `COLS` wide.
struct TestMatrix {
    values: Vec<f32>,
    rows: usize,
    special: Vec<SpecialRegion>,
}

impl TestMatrix {
    fn row_name(&self, row: usize) -> String {
        match self.special.iter().find(|s| s.row == row) {
            Some(s) => format!("row {row} (special '{}')", s.name),
            None => format!("gaussian row {row}"),
        }
    }

    /// The special pattern that covers column `col` of `row`, if any.
    fn special_at(&self, row: usize, col: usize) -> Option<&'static str> {
        self.special
            .iter()
            .find(|s| s.row == row && (s.first_col..s.first_col + SPECIAL_LEN).contains(&col))
            .map(|s| s.name)
    }
}

/// The special 256-value patterns.
fn special_patterns(rng: &mut Rng) -> Vec<(&'static str, Vec<f32>)> {
    let index = |i: usize| i as f32;
    let mut gaussian = |scale: f64| -> Vec<f32> {
        (0..SPECIAL_LEN)
            .map(|_| (rng.gaussian() * scale) as f32)
            .collect()
    };
    let mut with_inf = gaussian(1.0);
    with_inf[37] = f32::INFINITY;
    let mut with_nan = gaussian(1.0);
    with_nan[37] = f32::NAN;
    // In every 32 values the largest magnitude is ±2.5, held by two elements of opposite sign.
    let mut minus_first = gaussian(0.3);
    let mut plus_first = gaussian(0.3);
    for b in 0..SPECIAL_LEN / 32 {
        minus_first[32 * b + 3] = -2.5;
        minus_first[32 * b + 10] = 2.5;
        plus_first[32 * b + 3] = 2.5;
        plus_first[32 * b + 10] = -2.5;
    }
    let mut outlier = gaussian(0.01);
    outlier[100] = 1000.0;
    vec![
        ("zeros", vec![0.0; SPECIAL_LEN]),
        (
            "tiny 1e-9*i",
            (0..SPECIAL_LEN).map(|i| 1e-9 * index(i)).collect(),
        ),
        (
            "huge 1e7*i",
            (0..SPECIAL_LEN).map(|i| 1e7 * index(i)).collect(),
        ),
        ("one inf", with_inf),
        ("one NaN", with_nan),
        (
            "half-way i+0.5",
            (0..SPECIAL_LEN).map(|i| index(i) - 128.0 + 0.5).collect(),
        ),
        // amax 127 in every 32 values gives Q8 scale 1, so the other values x.5 are exact ties;
        // amax 8 (negative) gives Q4_0 scale 1, where x + 8.5 lands on integers.
        (
            "exact ties q8",
            (0..SPECIAL_LEN)
                .map(|i| {
                    if i % 32 == 0 {
                        127.0
                    } else {
                        ((i * 37) % 200) as f32 - 100.0 + 0.5
                    }
                })
                .collect(),
        ),
        (
            "exact ties q4",
            (0..SPECIAL_LEN)
                .map(|i| {
                    if i % 32 == 0 {
                        -8.0
                    } else {
                        ((i * 5) % 15) as f32 - 7.0 + 0.5
                    }
                })
                .collect(),
        ),
        ("constant", vec![0.75; SPECIAL_LEN]),
        ("+a/-a amax, minus first", minus_first),
        ("+a/-a amax, plus first", plus_first),
        ("outlier 1000", outlier),
    ]
}

fn test_matrix() -> &'static TestMatrix {
    static MATRIX: OnceLock<TestMatrix> = OnceLock::new();
    MATRIX.get_or_init(|| {
        let mut rng = Rng::new(0x6d69_6e69_7175_616e);
        let mut values = gaussian_rows(&mut rng, GAUSSIAN_ROWS, COLS);
        let mut special = Vec::new();
        for (k, (name, pattern)) in special_patterns(&mut rng).into_iter().enumerate() {
            // Each special pattern sits in its own Gaussian row, at a different column offset.
            let mut row = gaussian_rows(&mut rng, 1, COLS);
            let first_col = (k * SPECIAL_LEN) % COLS;
            row[first_col..first_col + SPECIAL_LEN].copy_from_slice(&pattern);
            special.push(SpecialRegion {
                name,
                row: GAUSSIAN_ROWS + k,
                first_col,
            });
            values.extend_from_slice(&row);
        }
        let rows = values.len() / COLS;
        TestMatrix {
            values,
            rows,
            special,
        }
    })
}

fn our_quantize(t: GgmlType, values: &[f32]) -> Vec<u8> {
    let mut out = vec![0u8; quant::bytes_for(t, values.len()).unwrap()];
    quant::quantize(t, values, &mut out).unwrap();
    out
}

fn our_dequantize(t: GgmlType, bytes: &[u8]) -> Vec<f32> {
    let mut out = vec![0f32; quant::elements_in(t, bytes.len()).unwrap()];
    quant::dequantize(t, bytes, &mut out).unwrap();
    out
}

/// candle's quantization of the matrix, row by row; rows where candle panicked stay `None`.
fn candle_quantize_rows<T: CandleBlock>(matrix: &TestMatrix) -> Vec<Option<Vec<u8>>> {
    matrix
        .values
        .chunks_exact(COLS)
        .map(|row| {
            catch_unwind(AssertUnwindSafe(|| {
                let mut blocks = vec![T::zeros(); COLS / T::BLCK_SIZE];
                T::from_float(row, &mut blocks);
                bytes_of_blocks(&blocks).to_vec()
            }))
            .ok()
        })
        .collect()
}

#[test]
fn block_layouts_match_candle() {
    for t in CANDLE_TYPES {
        let dtype = crate::candle_common::candle_dtype(t).unwrap();
        assert_eq!(
            dtype.block_size(),
            t.block_size() as usize,
            "{t} block size"
        );
        assert_eq!(
            dtype.type_size(),
            t.block_bytes() as usize,
            "{t} block bytes"
        );
        fn struct_size<T: CandleBlock>() -> usize {
            std::mem::size_of::<T>()
        }
        assert_eq!(
            with_candle_block!(t, struct_size()),
            t.block_bytes() as usize,
            "{t} candle block struct size"
        );
    }
}

/// Per type: how many blocks differ between candle's and our quantization.
struct QuantizeOutcome {
    blocks: usize,
    differing_blocks: usize,
    /// Differing blocks that also dequantize to different values (the rest differ only in bytes
    /// that do not change any value, e.g. quants under a zero sub-scale).
    differing_values: usize,
    /// Blocks that still differ once Q8_1's `s` field (bytes 2..4) is ignored.
    differing_outside_q8_1_s: usize,
    special_patterns_differing: Vec<&'static str>,
    candle_panicked: Vec<String>,
}

fn compare_quantize<T: CandleBlock>(t: GgmlType, matrix: &TestMatrix) -> QuantizeOutcome {
    let block_bytes = t.block_bytes() as usize;
    let block_size = t.block_size() as usize;
    let candle_rows = candle_quantize_rows::<T>(matrix);
    let mut outcome = QuantizeOutcome {
        blocks: 0,
        differing_blocks: 0,
        differing_values: 0,
        differing_outside_q8_1_s: 0,
        special_patterns_differing: Vec::new(),
        candle_panicked: Vec::new(),
    };
    for (r, (row, theirs)) in matrix
        .values
        .chunks_exact(COLS)
        .zip(&candle_rows)
        .enumerate()
    {
        let Some(theirs) = theirs else {
            outcome.candle_panicked.push(matrix.row_name(r));
            continue;
        };
        let ours = our_quantize(t, row);
        for (b, (a, c)) in ours
            .chunks_exact(block_bytes)
            .zip(theirs.chunks_exact(block_bytes))
            .enumerate()
        {
            outcome.blocks += 1;
            if a == c {
                continue;
            }
            outcome.differing_blocks += 1;
            let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
            if bits(our_dequantize(t, a)) != bits(our_dequantize(t, c)) {
                outcome.differing_values += 1;
            }
            if !(t == GgmlType::Q8_1 && a[..2] == c[..2] && a[4..] == c[4..]) {
                outcome.differing_outside_q8_1_s += 1;
            }
            if let Some(name) = matrix.special_at(r, b * block_size) {
                if !outcome.special_patterns_differing.contains(&name) {
                    outcome.special_patterns_differing.push(name);
                }
            }
        }
    }
    outcome
}

#[test]
fn quantize_against_candle() {
    let matrix = test_matrix();
    // candle's quantizers that follow ggml's `quantize_row_*_ref` formulas (kernels.md §2.2), and
    // the float conversions (round to nearest even, NaN kept quiet, in both).
    let must_match = [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::BF16,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
    ];
    println!(
        "quantize, ours vs candle 0.11 from_float ({} rows x {COLS}, the last {} with a special pattern)",
        matrix.rows,
        matrix.special.len()
    );
    println!("type    blocks  differing  values differ  special patterns with differing blocks");
    let mut failures = Vec::new();
    for t in CANDLE_TYPES {
        let outcome = with_candle_block!(t, compare_quantize(t, matrix));
        println!(
            "{:<6} {:>7}  {:>9}  {:>13}  {:?}",
            t.name(),
            outcome.blocks,
            outcome.differing_blocks,
            outcome.differing_values,
            outcome.special_patterns_differing
        );
        if !outcome.candle_panicked.is_empty() {
            println!("       candle panicked on: {:?}", outcome.candle_panicked);
        }
        if t == GgmlType::Q8_1 {
            println!(
                "       Q8_1 blocks differing outside the `s` field: {}",
                outcome.differing_outside_q8_1_s
            );
            if outcome.differing_outside_q8_1_s != 0 || !outcome.candle_panicked.is_empty() {
                failures.push(format!(
                    "Q8_1: {} blocks differ in d or qs",
                    outcome.differing_outside_q8_1_s
                ));
            }
        }
        if must_match.contains(&t) {
            assert!(
                outcome.blocks >= 4096,
                "{t}: only {} blocks",
                outcome.blocks
            );
            if outcome.differing_blocks != 0 || !outcome.candle_panicked.is_empty() {
                failures.push(format!(
                    "{t}: {} of {} blocks differ, candle panicked on {:?}",
                    outcome.differing_blocks, outcome.blocks, outcome.candle_panicked
                ));
            }
        }
    }
    println!(
        "asserted: 0 differing blocks for {must_match:?}; Q8_1 differs only in `s`; the K-quant counts are printed \
         (candle ports older quantizers, kernels.md §2.2)"
    );
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Values whose bits differ between our and candle's dequantization of the same bytes.
struct DequantizeOutcome {
    values: usize,
    differing: usize,
    /// Of `differing`: ours is a signaling NaN and candle's is the same NaN with the quiet bit set.
    quieted_nans: usize,
    /// Of `differing`: a Q4_1/Q5_1 block whose `d` and `m` are both NaN, where ours is `d`'s NaN
    /// (the product's, as ggml) and candle's is `m`'s (see [`both_nan_scales`]).
    addend_nans: usize,
    /// Values of such blocks where ours is not `d`'s NaN: always a failure.
    ours_not_product_nan: usize,
}

/// For Q4_1 and Q5_1 (value `q * d + m`): the block's `d` and `m` widened to f32, if both are NaN.
///
/// Then `q * d` is `d`'s NaN (quieted; x86 `mulss` returns the NaN operand) and the sum is one of
/// two NaNs. ggml's generic C code gives the product's: GCC emits `addss` with the product as the
/// first source, whose NaN x86 returns. Ours does the same on every level (bit-checked against
/// ggml in `ggml_kernels.rs`, and asserted below). Rust, though, leaves the payload open when both
/// operands are NaN, and LLVM treats `fadd` as commutative: with AVX's three-operand encoding it
/// may put the broadcast `m` first. It does so in candle's `BlockQ5_1::to_float` built with
/// `-C target-cpu=native` (`vmulps ymm0,ymm9,ymm0; vaddps ymm0,ymm10,ymm0`, ymm10 = `m`), so that
/// build returns `m`'s NaN; its Q4_1 code keeps the product first, as does the SSE2 build of both,
/// where `addps` overwrites the register holding the fresh product.
fn both_nan_scales(t: GgmlType, block: &[u8]) -> Option<(f32, f32)> {
    if !matches!(t, GgmlType::Q4_1 | GgmlType::Q5_1) {
        return None;
    }
    let f16_at = |at: usize| half::f16::from_le_bytes([block[at], block[at + 1]]).to_f32();
    let (d, m) = (f16_at(0), f16_at(2));
    (d.is_nan() && m.is_nan()).then_some((d, m))
}

/// Whether candle's codegen may have commuted the `+ m` of Q4_1/Q5_1 ([`both_nan_scales`]): where
/// AVX's non-destructive three-operand encoding is in use, which the same compile-time flags as
/// this crate's decide.
const CANDLE_MAY_COMMUTE_ADD: bool = cfg!(target_feature = "avx");

/// Whether `theirs` is `ours`, a signaling NaN, with only the quiet bit (mantissa MSB) added.
fn is_quieted_nan(ours: f32, theirs: f32) -> bool {
    const QUIET: u32 = 0x0040_0000;
    ours.is_nan() && ours.to_bits() & QUIET == 0 && theirs.to_bits() == ours.to_bits() | QUIET
}

fn compare_dequantize<T: CandleBlock>(t: GgmlType, bytes: &[u8]) -> DequantizeOutcome {
    let ours = our_dequantize(t, bytes);
    let blocks = blocks_from_bytes::<T>(bytes);
    let mut theirs = vec![0f32; ours.len()];
    T::to_float(&blocks, &mut theirs);
    let mut outcome = DequantizeOutcome {
        values: ours.len(),
        differing: 0,
        quieted_nans: 0,
        addend_nans: 0,
        ours_not_product_nan: 0,
    };
    let block_bytes = t.block_bytes() as usize;
    let block_size = t.block_size() as usize;
    for (i, (&a, &b)) in ours.iter().zip(&theirs).enumerate() {
        let block = &bytes[i / block_size * block_bytes..][..block_bytes];
        let nan_scales = both_nan_scales(t, block);
        if let Some((d, _)) = nan_scales {
            if a.to_bits() != d.to_bits() {
                outcome.ours_not_product_nan += 1;
            }
        }
        if a.to_bits() == b.to_bits() {
            continue;
        }
        if outcome.differing == 0 {
            println!(
                "       {t}: first difference at value {i} (block {}): ours {a:e} ({:#010x}), candle {b:e} ({:#010x})",
                i / t.block_size() as usize,
                a.to_bits(),
                b.to_bits()
            );
        }
        outcome.differing += 1;
        if is_quieted_nan(a, b) {
            outcome.quieted_nans += 1;
        }
        if let Some((d, m)) = nan_scales {
            if a.to_bits() == d.to_bits() && b.to_bits() == m.to_bits() {
                outcome.addend_nans += 1;
            }
        }
    }
    outcome
}

fn candle_bytes<T: CandleBlock>(matrix: &TestMatrix) -> Vec<u8> {
    candle_quantize_rows::<T>(matrix)
        .into_iter()
        .flatten()
        .flatten()
        .collect()
}

#[test]
fn dequantize_against_candle() {
    let matrix = test_matrix();
    let mut rng = Rng::new(0xdeca_f000);
    println!("dequantize, ours vs candle 0.11 to_float: values whose bits differ");
    println!(
        "type   source          values  differing  of which: sNaN quieted by candle  m's NaN for d's"
    );
    let mut failures = Vec::new();
    for t in CANDLE_TYPES {
        let ours = our_quantize(t, &matrix.values);
        let theirs = with_candle_block!(t, candle_bytes(matrix));
        // Random bytes reach every field value, including NaN and infinite scales.
        let mut random = vec![0u8; ours.len()];
        rng.fill_bytes(&mut random);
        for (source, bytes) in [
            ("candle-quant", &theirs),
            ("our-quant", &ours),
            ("random bytes", &random),
        ] {
            let outcome = with_candle_block!(t, compare_dequantize(t, bytes));
            println!(
                "{:<6} {source:<12} {:>8}  {:>9}  {:>30}  {:>15}",
                t.name(),
                outcome.values,
                outcome.differing,
                outcome.quieted_nans,
                outcome.addend_nans
            );
            // ggml widens bf16 by a bare shift (`ggml_compute_bf16_to_fp32`), so a signaling NaN
            // stays signaling, as in ours; candle's `half::bf16::to_f32` sets the quiet bit. That
            // difference is allowed, and only for BF16.
            let quieted = if t == GgmlType::BF16 {
                outcome.quieted_nans
            } else {
                0
            };
            // The other: Q4_1/Q5_1 blocks with NaN `d` and `m`, where candle's AVX codegen may
            // return `m`'s NaN ([`both_nan_scales`]); ours must still be `d`'s, as ggml's.
            let addend = if CANDLE_MAY_COMMUTE_ADD {
                outcome.addend_nans
            } else {
                0
            };
            if outcome.differing != quieted + addend {
                failures.push(format!(
                    "{t} on {source}: {} of {} values differ ({} are quieted NaNs, {} candle's m NaN \
                     where ours is d's)",
                    outcome.differing, outcome.values, outcome.quieted_nans, outcome.addend_nans
                ));
            }
            if outcome.ours_not_product_nan != 0 {
                failures.push(format!(
                    "{t} on {source}: {} values of blocks with NaN d and m are not d's NaN (ggml's \
                     q * d + m gives the product's)",
                    outcome.ours_not_product_nan
                ));
            }
        }
    }
    println!(
        "asserted: 0 differing values, except BF16 signaling NaNs that candle quiets{}; in Q4_1/Q5_1 \
         blocks with NaN d and m, ours is d's NaN",
        if CANDLE_MAY_COMMUTE_ADD {
            " and, in this AVX build, candle's m NaN where ours is d's in Q4_1/Q5_1"
        } else {
            ""
        }
    );
    assert!(failures.is_empty(), "{failures:#?}");
}

/// How our vec_dot results differ from one of candle's.
#[derive(Default)]
struct DotDiff {
    differing: usize,
    both_nan: usize,
    /// Largest |ours - candle| / |candle| over finite, non-zero results.
    max_relative: f64,
    /// Largest |ours - candle| / Σ|w_i x_i|: the difference on the scale of the rounding error a
    /// dot product can carry, which stays meaningful on rows that cancel.
    max_relative_to_terms: f64,
}

impl DotDiff {
    /// Records one result; `terms` gives the row's Σ|w_i x_i|.
    fn add(&mut self, ours: f32, theirs: f32, terms: impl FnOnce() -> f64) {
        if ours.is_nan() && theirs.is_nan() {
            self.both_nan += 1;
            return;
        }
        if ours.to_bits() == theirs.to_bits() {
            return;
        }
        self.differing += 1;
        if !(ours.is_finite() && theirs.is_finite()) {
            // A finite result against a non-finite one is never a rounding difference.
            self.max_relative = f64::INFINITY;
            self.max_relative_to_terms = f64::INFINITY;
            return;
        }
        let diff = (f64::from(ours) - f64::from(theirs)).abs();
        if theirs != 0.0 {
            self.max_relative = self.max_relative.max(diff / f64::from(theirs).abs());
        }
        let terms = terms();
        self.max_relative_to_terms = if terms > 0.0 {
            self.max_relative_to_terms.max(diff / terms)
        } else {
            f64::INFINITY
        };
    }
}

/// vec_dot of weight rows with activation vectors (both as bytes, shared by both sides): ours
/// against candle's `vec_dot_unopt` and against its dispatching `vec_dot`.
struct DotOutcome {
    dots: usize,
    /// Ours against `vec_dot_unopt`.
    unopt: DotDiff,
    /// Ours against `vec_dot`; where that is a SIMD kernel, on [`simd_domain`] activations.
    dispatched: DotDiff,
    /// Dots left out of `dispatched`: a SIMD kernel and a non-finite scale ([`scales_finite`]).
    dispatched_skipped: usize,
    /// Results where candle's `vec_dot` differs from its `vec_dot_unopt` (same inputs).
    candle_dispatch_differs: usize,
}

/// Whether every scale field of `bytes` (whole blocks of `t`) is finite.
fn scales_finite(t: GgmlType, bytes: &[u8]) -> bool {
    let block_bytes = t.block_bytes() as usize;
    bytes.chunks_exact(block_bytes).all(|block| {
        let f16_ok = f16_scale_offsets(t)
            .iter()
            .all(|&at| half::f16::from_le_bytes([block[at], block[at + 1]]).is_finite());
        let f32_ok = t != GgmlType::Q8_K
            || f32::from_le_bytes([block[0], block[1], block[2], block[3]]).is_finite();
        f16_ok && f32_ok
    })
}

/// Activation bytes moved into the domain where candle's SIMD vec_dots (candle-core
/// `quantized/avx.rs`; ggml's x86 `quants.c` kernels share these traits) are exact integer sums
/// followed by a reordered float sum. Outside it they compute something else, and a comparison
/// with them there would test candle, not us:
/// - Q8_0: `mul_sum_i8_pairs_float` (the Q4_0 and Q8_0 kernels) moves the weight's sign onto the
///   activation with `_mm256_sign_epi8(y, x)`, which leaves -128 at -128: that product changes
///   sign. ggml's Q8_0 quantizers only give -127..=127, so -128 becomes -127 here.
/// - Q8_K: the Q4_K and Q5_K kernels add pairs of `bsums` with `_mm_hadd_epi16`, which wraps for
///   random i16 values; real `bsums` are sums of 16 quants (at most 2048 in magnitude), so they are
///   recomputed from `qs`.
///
/// The third trait, a block's scale multiplied into eight per-lane partial sums, makes an infinite
/// scale give NaN (0·inf, or +inf and -inf across lanes) where the generic order's one block
/// total gives ±inf (seen: a Q4_0 row with `d` = -inf, ours and `vec_dot_unopt` -inf, candle's
/// AVX2 NaN). Rows with such scales are left out by [`scales_finite`]. The comparison against
/// `vec_dot_unopt` uses the bytes as they are.
fn simd_domain(vd: GgmlType, xq: &[u8]) -> Vec<u8> {
    let mut out = xq.to_vec();
    match vd {
        GgmlType::Q8_0 => {
            for block in out.chunks_exact_mut(vd.block_bytes() as usize) {
                for q in &mut block[2..] {
                    if *q == 0x80 {
                        *q = 0x81;
                    }
                }
            }
        }
        GgmlType::Q8_K => {
            for block in out.chunks_exact_mut(vd.block_bytes() as usize) {
                let (qs, bsums) = block[4..].split_at_mut(256);
                for (sum, group) in bsums.chunks_exact_mut(2).zip(qs.chunks_exact(16)) {
                    let s: i16 = group.iter().map(|&q| i16::from(q as i8)).sum();
                    sum.copy_from_slice(&s.to_le_bytes());
                }
            }
        }
        _ => {}
    }
    out
}

fn compare_vec_dot<T: CandleBlock>(
    t: GgmlType,
    weights: &[u8],
    activations: &[Vec<u8>],
) -> DotOutcome {
    let vd = quant::vec_dot_type(t).unwrap();
    let row_bytes = quant::bytes_for(t, COLS).unwrap();
    let weight_values = our_dequantize(t, weights);
    let simd = candle_vec_dot_simd(t).is_some();
    let mut outcome = DotOutcome {
        dots: 0,
        unopt: DotDiff::default(),
        dispatched: DotDiff::default(),
        dispatched_skipped: 0,
        candle_dispatch_differs: 0,
    };
    let terms = |w_values: &[f32], x_values: &[f32]| -> f64 {
        w_values
            .iter()
            .zip(x_values)
            .map(|(&w, &x)| (f64::from(w) * f64::from(x)).abs())
            .sum()
    };
    for xq in activations {
        let x_values = our_dequantize(vd, xq);
        let x_blocks = blocks_from_bytes::<T::VecDotType>(xq);
        // The activation for the comparison against candle's `vec_dot`.
        let xs = if simd {
            simd_domain(vd, xq)
        } else {
            xq.clone()
        };
        let xs_values = our_dequantize(vd, &xs);
        let xs_blocks = blocks_from_bytes::<T::VecDotType>(&xs);
        let xs_finite = scales_finite(vd, &xs);
        for (row, w_values) in weights
            .chunks_exact(row_bytes)
            .zip(weight_values.chunks_exact(COLS))
        {
            let w_blocks = blocks_from_bytes::<T>(row);
            let ours = quant::vec_dot(t, row, xq).unwrap();
            let unopt = T::vec_dot_unopt(COLS, &w_blocks, &x_blocks);
            let dispatched = T::vec_dot(COLS, &w_blocks, &x_blocks);
            outcome.dots += 1;
            if dispatched.to_bits() != unopt.to_bits() && !(dispatched.is_nan() && unopt.is_nan()) {
                outcome.candle_dispatch_differs += 1;
            }
            outcome
                .unopt
                .add(ours, unopt, || terms(w_values, &x_values));
            if simd && !(xs_finite && scales_finite(t, row)) {
                outcome.dispatched_skipped += 1;
                continue;
            }
            let ours = quant::vec_dot(t, row, &xs).unwrap();
            let dispatched = T::vec_dot(COLS, &w_blocks, &xs_blocks);
            outcome
                .dispatched
                .add(ours, dispatched, || terms(w_values, &xs_values));
        }
    }
    outcome
}

/// vec_dot types whose candle `vec_dot_unopt` has ggml's generic float order, operation for
/// operation. kernels.md §3 also lists Q4_1 and Q5_0, but there ggml computes `(dx*dy)*sumi` and
/// candle `(sumi*dx)*dy`: equal only while `sumi*dx` is exact in f32, which these tests show fails.
///
/// For these four, `vec_dot_unopt` is plain scalar Rust under every cfg, and rustc neither fuses
/// `a*b+c` into an FMA nor reassociates, so its bits do not depend on the target features: the
/// exact comparison holds in the `-C target-cpu=native` build too.
const DOT_SAME_ORDER: [GgmlType; 4] = [
    GgmlType::Q4_0,
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q6_K,
];

/// Bound on |ours - candle| / Σ|w_i x_i| where candle's float order differs from ggml's generic
/// one (which ours follows, bit for bit, in `ggml_kernels.rs`): other associations of the block
/// terms in `vec_dot_unopt`, and in candle's SIMD kernels ([`candle_vec_dot_simd`]) per-lane FMA
/// accumulation and a horizontal sum. Two summation orders of the same k = 4096 products differ
/// by rounding alone: measured at most 4.8e-7 (Q4_K against candle's AVX2 kernel, realistic
/// data). One wrong quant among the 4096 products already moves the result by several 1e-5 of
/// Σ|w_i x_i|, a wrong scale, sign or block by far more.
const DOT_MAX_RELATIVE_TO_TERMS: f64 = 1e-5;

/// The SIMD kernel candle's `vec_dot` calls for `t` in this build, or `None` where it calls its
/// `vec_dot_unopt`. candle 0.11 chooses at compile time, by `#[cfg(target_feature = ...)]` at each
/// call site (k_quants.rs), from the same flags this crate is built with: Q4_0, Q8_0, Q2_K, Q4_K
/// and Q6_K have AVX2, NEON and simd128 kernels, Q3_K and Q5_K AVX2 and NEON ones; Q4_1, Q5_0,
/// Q5_1, F32, F16 and BF16 always call `vec_dot_unopt`. (For F32, F16 and BF16 that one is itself
/// SIMD code under AVX2 and NEON, `candle_core::cpu::vec_dot_*`; they are compared within
/// [`DOT_MAX_RELATIVE_TO_TERMS`] in every build.)
fn candle_vec_dot_simd(t: GgmlType) -> Option<&'static str> {
    let avx2_or_neon = cfg!(target_feature = "avx2") || cfg!(target_feature = "neon");
    let simd = match t {
        GgmlType::Q4_0 | GgmlType::Q8_0 | GgmlType::Q2_K | GgmlType::Q4_K | GgmlType::Q6_K => {
            avx2_or_neon || cfg!(target_feature = "simd128")
        }
        GgmlType::Q3_K | GgmlType::Q5_K => avx2_or_neon,
        _ => false,
    };
    simd.then(candle_simd_in_build)
}

/// Runs [`compare_vec_dot`] for every type with a vec_dot, prints a table and returns failures.
///
/// Asserted in every build: ours against `vec_dot_unopt`, bit-identical for [`DOT_SAME_ORDER`] and
/// within [`DOT_MAX_RELATIVE_TO_TERMS`] for the others. Against candle's dispatching `vec_dot`:
/// where it is `vec_dot_unopt` ([`candle_vec_dot_simd`] is `None`, every type in a build without
/// SIMD target features), it must give the same bits as `vec_dot_unopt`, which checks this map of
/// candle's dispatch; where it is a SIMD kernel, whose float order is neither ggml's generic one
/// nor `vec_dot_unopt`'s (kernels.md §3), ours must be within [`DOT_MAX_RELATIVE_TO_TERMS`] of it,
/// on activations in its domain ([`simd_domain`]), rows with non-finite scales left out (at most
/// one dot in ten, so the check cannot fade away).
fn vec_dot_table(
    title: &str,
    weights_for: impl Fn(GgmlType) -> Vec<u8>,
    activations_for: impl Fn(GgmlType) -> Vec<Vec<u8>>,
) -> Vec<String> {
    println!(
        "{title}; candle SIMD kernels in this build: {}",
        candle_simd_in_build()
    );
    println!(
        "                   ours vs candle vec_dot_unopt                  | candle vec_dot   ours vs candle vec_dot"
    );
    println!(
        "type   dots  differing  both-NaN  max |d|/|candle|  max |d|/sum|w*x| | kernel  != unopt  skipped  differing  max |d|/sum|w*x|"
    );
    let mut failures = Vec::new();
    for t in CANDLE_TYPES {
        let Some(vd) = quant::vec_dot_type(t) else {
            println!(
                "{:<6} (activation-only type: ggml has no vec_dot; not compared)",
                t.name()
            );
            continue;
        };
        let weights = weights_for(t);
        let activations = activations_for(vd);
        let outcome = with_candle_block!(t, compare_vec_dot(t, &weights, &activations));
        let simd = candle_vec_dot_simd(t);
        println!(
            "{:<6} {:>5} {:>10} {:>9} {:>17.3e} {:>17.3e} | {:<6} {:>9} {:>8} {:>10} {:>17.3e}",
            t.name(),
            outcome.dots,
            outcome.unopt.differing,
            outcome.unopt.both_nan,
            outcome.unopt.max_relative,
            outcome.unopt.max_relative_to_terms,
            simd.unwrap_or("unopt"),
            outcome.candle_dispatch_differs,
            outcome.dispatched_skipped,
            outcome.dispatched.differing,
            outcome.dispatched.max_relative_to_terms,
        );
        if DOT_SAME_ORDER.contains(&t) {
            if outcome.unopt.differing != 0 {
                failures.push(format!(
                    "{t}: {} of {} dots differ from vec_dot_unopt",
                    outcome.unopt.differing, outcome.dots
                ));
            }
        } else if outcome.unopt.max_relative_to_terms >= DOT_MAX_RELATIVE_TO_TERMS {
            failures.push(format!(
                "{t}: max |d|/sum|w*x| against vec_dot_unopt {:e} >= {DOT_MAX_RELATIVE_TO_TERMS:e}",
                outcome.unopt.max_relative_to_terms
            ));
        }
        match simd {
            None if outcome.candle_dispatch_differs != 0 => failures.push(format!(
                "{t}: candle's vec_dot differs from its vec_dot_unopt in {} of {} dots, though this \
                 build should give it no SIMD kernel",
                outcome.candle_dispatch_differs, outcome.dots
            )),
            Some(kernel) => {
                if outcome.dispatched.max_relative_to_terms >= DOT_MAX_RELATIVE_TO_TERMS {
                    failures.push(format!(
                        "{t}: max |d|/sum|w*x| against candle's {kernel} vec_dot {:e} >= \
                         {DOT_MAX_RELATIVE_TO_TERMS:e}",
                        outcome.dispatched.max_relative_to_terms
                    ));
                }
                // Non-finite scales are rare in both data sets: the comparison must keep most dots.
                if outcome.dispatched_skipped * 10 > outcome.dots {
                    failures.push(format!(
                        "{t}: {} of {} dots left out of the comparison with candle's {kernel} vec_dot",
                        outcome.dispatched_skipped, outcome.dots
                    ));
                }
            }
            None => {}
        }
    }
    println!(
        "asserted: against vec_dot_unopt, bit-identical for {DOT_SAME_ORDER:?}, max |d|/sum|w*x| < \
         {DOT_MAX_RELATIVE_TO_TERMS:e} for the others; candle's vec_dot equal to vec_dot_unopt where \
         its kernel column says unopt, else ours within max |d|/sum|w*x| < \
         {DOT_MAX_RELATIVE_TO_TERMS:e} of it, on activations in its domain (no Q8_0 -128, true Q8_K \
         bsums), rows with non-finite scales skipped (at most 1 in 10) (|d|/|candle| is only \
         printed: it is large where a row cancels)"
    );
    failures
}

#[test]
fn vec_dot_against_candle_unopt() {
    let matrix = test_matrix();
    let mut rng = Rng::new(0x0ac7_1a7e);
    let activations: Vec<Vec<f32>> = (0..4).map(|_| gaussian_rows(&mut rng, 1, COLS)).collect();
    let failures = vec_dot_table(
        &format!(
            "vec_dot, ours vs candle 0.11 vec_dot_unopt, both on our quantized bytes ({} rows x {} activations, k = {COLS})",
            matrix.rows,
            activations.len()
        ),
        |t| our_quantize(t, &matrix.values),
        |vd| activations.iter().map(|x| our_quantize(vd, x)).collect(),
    );
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Byte offsets of the f16 scale fields in one block (`d`, and `m`/`dmin`/`s` where present).
fn f16_scale_offsets(t: GgmlType) -> &'static [usize] {
    match t {
        GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 => &[0],
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q8_1 | GgmlType::Q4_K | GgmlType::Q5_K => {
            &[0, 2]
        }
        GgmlType::Q2_K => &[80, 82],
        GgmlType::Q3_K => &[108],
        GgmlType::Q6_K => &[208],
        _ => &[],
    }
}

/// `rows` rows of random blocks: random quant bytes (every integer value reachable, so integer
/// sums get large), and finite random scales with all mantissa bits in use.
fn random_blocks(t: GgmlType, rows: usize, rng: &mut Rng) -> Vec<u8> {
    let elements = rows * COLS;
    match t {
        GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => {
            let values: Vec<f32> = (0..elements).map(|_| rng.gaussian() as f32).collect();
            return our_quantize(t, &values);
        }
        _ => {}
    }
    let mut bytes = vec![0u8; quant::bytes_for(t, elements).unwrap()];
    rng.fill_bytes(&mut bytes);
    for block in bytes.chunks_exact_mut(t.block_bytes() as usize) {
        if t == GgmlType::Q8_K {
            // f32 scale in [2^-10, 2^-9) with a random sign and mantissa.
            let bits = (rng.next_u64() as u32 & 0x807f_ffff) | (117 << 23);
            block[..4].copy_from_slice(&bits.to_le_bytes());
        }
        for &at in f16_scale_offsets(t) {
            // f16 in ±[0.25, 4) with a random 10-bit mantissa.
            let r = rng.next_u64() as u16;
            let bits = (r & 0x83ff) | ((13 + (r >> 10) % 4) << 10);
            block[at..at + 2].copy_from_slice(&bits.to_le_bytes());
        }
    }
    bytes
}

#[test]
fn vec_dot_random_blocks_against_candle_unopt() {
    let rows = 64;
    let failures = vec_dot_table(
        &format!(
            "vec_dot on random blocks (random quants, finite random scales; {rows} rows x 4 activations, k = {COLS})"
        ),
        |t| random_blocks(t, rows, &mut Rng::new(0xb10c + u64::from(t.code()))),
        |vd| {
            let mut rng = Rng::new(0xac71 + u64::from(vd.code()));
            (0..4).map(|_| random_blocks(vd, 1, &mut rng)).collect()
        },
    );
    assert!(failures.is_empty(), "{failures:#?}");
}
