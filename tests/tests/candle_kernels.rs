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
//!   except BF16 signaling NaNs, which candle (through `half`) quiets and ggml and we keep;
//! - vec_dot, candle fed our quantized bytes on both sides: bit-identical to candle's
//!   `vec_dot_unopt` for Q4_0, Q2_K, Q3_K, Q6_K, whose float order is ggml's generic order; for the
//!   others (F32, F16, BF16, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K: other association) the differing
//!   count and largest relative differences are printed and |ours - candle| / Σ|w_i x_i| is
//!   bounded. Once on realistic data, once on random blocks (large integer sums).

mod candle_common;

use candle_common::{
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
        let dtype = candle_common::candle_dtype(t).unwrap();
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
}

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
    };
    for (i, (&a, &b)) in ours.iter().zip(&theirs).enumerate() {
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
    println!("type   source          values  differing  of which sNaN quieted by candle");
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
                "{:<6} {source:<12} {:>8}  {:>9}  {:>8}",
                t.name(),
                outcome.values,
                outcome.differing,
                outcome.quieted_nans
            );
            // ggml widens bf16 by a bare shift (`ggml_compute_bf16_to_fp32`), so a signaling NaN
            // stays signaling, as in ours; candle's `half::bf16::to_f32` sets the quiet bit. That is
            // the one difference allowed, and only for BF16.
            let allowed = if t == GgmlType::BF16 {
                outcome.quieted_nans
            } else {
                0
            };
            if outcome.differing != allowed {
                failures.push(format!(
                    "{t} on {source}: {} of {} values differ ({} are quieted NaNs)",
                    outcome.differing, outcome.values, outcome.quieted_nans
                ));
            }
        }
    }
    println!("asserted: 0 differing values, except BF16 signaling NaNs that candle quiets");
    assert!(failures.is_empty(), "{failures:#?}");
}

/// vec_dot of weight rows with activation vectors (both as bytes, shared by both sides): ours
/// against candle's `vec_dot_unopt`.
struct DotOutcome {
    dots: usize,
    differing: usize,
    both_nan: usize,
    /// Largest |ours - candle| / |candle| over finite, non-zero results.
    max_relative: f64,
    /// Largest |ours - candle| / Σ|w_i x_i|: the difference on the scale of the rounding error a
    /// dot product can carry, which stays meaningful on rows that cancel.
    max_relative_to_terms: f64,
    /// Results where candle's dispatching `vec_dot` differs from its `vec_dot_unopt` (0 when the
    /// build has no SIMD kernels).
    candle_dispatch_differs: usize,
}

fn compare_vec_dot<T: CandleBlock>(
    t: GgmlType,
    weights: &[u8],
    activations: &[Vec<u8>],
) -> DotOutcome {
    let vd = quant::vec_dot_type(t).unwrap();
    let row_bytes = quant::bytes_for(t, COLS).unwrap();
    let weight_values = our_dequantize(t, weights);
    let mut outcome = DotOutcome {
        dots: 0,
        differing: 0,
        both_nan: 0,
        max_relative: 0.0,
        max_relative_to_terms: 0.0,
        candle_dispatch_differs: 0,
    };
    for xq in activations {
        let x_values = our_dequantize(vd, xq);
        let x_blocks = blocks_from_bytes::<T::VecDotType>(xq);
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
            if ours.is_nan() && unopt.is_nan() {
                outcome.both_nan += 1;
                continue;
            }
            if ours.to_bits() == unopt.to_bits() {
                continue;
            }
            outcome.differing += 1;
            if !(ours.is_finite() && unopt.is_finite()) {
                // A finite result against a non-finite one is never a rounding difference.
                outcome.max_relative = f64::INFINITY;
                outcome.max_relative_to_terms = f64::INFINITY;
                continue;
            }
            let diff = (f64::from(ours) - f64::from(unopt)).abs();
            if unopt != 0.0 {
                outcome.max_relative = outcome.max_relative.max(diff / f64::from(unopt).abs());
            }
            let terms: f64 = w_values
                .iter()
                .zip(&x_values)
                .map(|(&w, &x)| (f64::from(w) * f64::from(x)).abs())
                .sum();
            outcome.max_relative_to_terms = if terms > 0.0 {
                outcome.max_relative_to_terms.max(diff / terms)
            } else {
                f64::INFINITY
            };
        }
    }
    outcome
}

/// vec_dot types whose candle `vec_dot_unopt` has ggml's generic float order, operation for
/// operation. kernels.md §3 also lists Q4_1 and Q5_0, but there ggml computes `(dx*dy)*sumi` and
/// candle `(sumi*dx)*dy`: equal only while `sumi*dx` is exact in f32, which these tests show fails.
const DOT_SAME_ORDER: [GgmlType; 4] = [
    GgmlType::Q4_0,
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q6_K,
];

/// Bound on |ours - candle| / Σ|w_i x_i| for the types whose order differs.
const DOT_MAX_RELATIVE_TO_TERMS: f64 = 1e-5;

/// Runs [`compare_vec_dot`] for every type with a vec_dot, prints a table and returns failures.
fn vec_dot_table(
    title: &str,
    weights_for: impl Fn(GgmlType) -> Vec<u8>,
    activations_for: impl Fn(GgmlType) -> Vec<Vec<u8>>,
) -> Vec<String> {
    println!(
        "{title}; candle SIMD kernels in this build: {}",
        candle_simd_in_build()
    );
    println!("type   dots  differing  both-NaN  max |d|/|candle|  max |d|/sum|w*x|  candle vec_dot != unopt");
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
        println!(
            "{:<6} {:>5} {:>10} {:>9} {:>17.3e} {:>17.3e} {:>24}",
            t.name(),
            outcome.dots,
            outcome.differing,
            outcome.both_nan,
            outcome.max_relative,
            outcome.max_relative_to_terms,
            outcome.candle_dispatch_differs
        );
        if outcome.candle_dispatch_differs != 0 {
            failures.push(format!(
                "{t}: candle's vec_dot is not its scalar vec_dot_unopt in this build"
            ));
        }
        if DOT_SAME_ORDER.contains(&t) {
            if outcome.differing != 0 {
                failures.push(format!(
                    "{t}: {} of {} dots differ from vec_dot_unopt",
                    outcome.differing, outcome.dots
                ));
            }
        } else if outcome.max_relative_to_terms >= DOT_MAX_RELATIVE_TO_TERMS {
            failures.push(format!(
                "{t}: max |d|/sum|w*x| {:e} >= {DOT_MAX_RELATIVE_TO_TERMS:e}",
                outcome.max_relative_to_terms
            ));
        }
    }
    println!(
        "asserted: bit-identical for {DOT_SAME_ORDER:?}; max |d|/sum|w*x| < {DOT_MAX_RELATIVE_TO_TERMS:e} for the others \
         (|d|/|candle| is only printed: it is large where a row cancels)"
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
