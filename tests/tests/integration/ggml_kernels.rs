//! Our scalar kernels against ggml's C reference (compiled by `build.rs`), bit for bit, for every
//! ggml type: quantized bytes, dequantized values (compared by `to_bits`, NaN and inf included) and
//! vec_dot results.
//!
//! Data: 256 rows × 4096 Gaussian values with random per-row scales and sparse outliers (4096
//! super-blocks of 256, 32768 blocks of 32), followed by the edge blocks of
//! [`data::edge_blocks`]; raw random blocks (sane and arbitrary scale fields) for dequantize and
//! vec_dot; a proptest on random blocks for a few types. Run with `-- --nocapture` to see the
//! per-type tables.
//!
//! Where ggml's reference is not a function of the input, the comparison says so:
//! - bytes ggml leaves unwritten or stale are not compared ([`ggml::reference_byte_is_defined`]:
//!   `qs` of an all-zero IQ4_NL block, `bsums` of an all-zero Q8_K block); the `harness_*` tests
//!   check that these are the only places where ggml's bytes depend on anything but the block;
//! - ggml's grid-search IQ quantizers abort on NaN, inf and overflowing blocks, so those edge
//!   blocks are left out for them ([`in_reference_domain`]);
//! - dequantized values are compared strictly, NaN sign and payload included. A vec_dot result
//!   that is NaN only has to be NaN: its sign and payload are counted apart and tolerated unless
//!   `MINIQUANT_STRICT_NAN=1` ([`miniquant_tests::diff::strict_nan`] says why).

use miniquant::quant::{dequantize, quantize, vec_dot, vec_dot_type};
use miniquant::GgmlType;
use miniquant_tests::data::{self, Rng, Scales};
use miniquant_tests::diff::{
    compare_bytes, compare_floats, describe_float, nan_note, strict_nan, FloatDiff,
};
use miniquant_tests::ggml;
use miniquant_tests::report::Report;
use std::sync::OnceLock;

const SEED: u64 = 0x6d71_2d6f_7261_636c;
const ROWS: usize = 256;
const COLS: usize = 4096;
/// Raw blocks per type for dequantize, with sane scale fields (a quarter as many arbitrary ones).
const RAW_BLOCKS: usize = 4096;
/// Rows of raw weight blocks per type for vec_dot.
const RAW_ROWS: usize = 32;

/// A run of values with a name, for failure messages.
#[derive(Debug, Clone)]
struct Segment {
    start: usize,
    len: usize,
    name: &'static str,
}

/// Test values made of named segments: the Gaussian rows, then one segment per edge block.
#[derive(Debug, Clone)]
struct Dataset {
    values: Vec<f32>,
    segments: Vec<Segment>,
}

impl Dataset {
    fn push(&mut self, name: &'static str, values: &[f32]) {
        self.segments.push(Segment {
            start: self.values.len(),
            len: values.len(),
            name,
        });
        self.values.extend_from_slice(values);
    }

    /// Where element `i` comes from.
    fn locate(&self, i: usize) -> String {
        match self
            .segments
            .iter()
            .find(|s| (s.start..s.start + s.len).contains(&i))
        {
            Some(s) if s.name == GAUSSIAN => {
                let at = i - s.start;
                format!("Gaussian row {} col {}", at / COLS, at % COLS)
            }
            Some(s) => format!("edge block \"{}\" element {}", s.name, i - s.start),
            None => format!("element {i}"),
        }
    }

    /// The segments ggml's reference quantizer for `t` accepts (see [`in_reference_domain`]).
    fn restricted_to(&self, t: GgmlType) -> Dataset {
        let mut out = Dataset {
            values: Vec::new(),
            segments: Vec::new(),
        };
        for s in &self.segments {
            let values = &self.values[s.start..s.start + s.len];
            if in_reference_domain(t, values) {
                out.push(s.name, values);
            }
        }
        out
    }
}

const GAUSSIAN: &str = "Gaussian rows";

/// ggml's grid-search IQ quantizers (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S) abort through
/// `GGML_ASSERT(grid_index >= 0)` when no grid point has a finite distance: on NaN, inf, or values
/// whose squares overflow (measured on the edge blocks). Their domain is finite, moderate values.
fn in_reference_domain(t: GgmlType, values: &[f32]) -> bool {
    use GgmlType::*;
    !matches!(t, IQ2_XXS | IQ2_XS | IQ2_S | IQ3_XXS | IQ3_S)
        || values.iter().all(|v| v.is_finite() && v.abs() < 1e18)
}

/// The shared inputs, generated once per test binary.
struct Inputs {
    /// `ROWS × COLS` Gaussian values, then the edge blocks.
    data: Dataset,
    /// The edge blocks alone.
    edges: Dataset,
    /// `ROWS × COLS` activation values for vec_dot, one row per weight row.
    activations: Vec<f32>,
}

impl Inputs {
    fn gaussian(&self) -> &[f32] {
        &self.data.values[..ROWS * COLS]
    }
}

fn inputs() -> &'static Inputs {
    static INPUTS: OnceLock<Inputs> = OnceLock::new();
    INPUTS.get_or_init(|| {
        let mut data = Dataset {
            values: Vec::new(),
            segments: Vec::new(),
        };
        data.push(GAUSSIAN, &data::gaussian_rows(SEED, ROWS, COLS));
        let mut edges = Dataset {
            values: Vec::new(),
            segments: Vec::new(),
        };
        for block in data::edge_blocks(SEED ^ 0xed6e) {
            data.push(block.name, &block.values);
            edges.push(block.name, &block.values);
        }
        let activations = data::gaussian_rows(SEED ^ 0xac71, ROWS, COLS);
        Inputs {
            data,
            edges,
            activations,
        }
    })
}

fn is_required_quantizer(t: GgmlType) -> bool {
    ggml::REQUIRED_QUANTIZERS.contains(&t)
}

/// ggml's blocks for `x`: the reference quantizer, or for the IQ types that only have an imatrix
/// quantizer, that quantizer with uniform importance (one 256-value row at a time).
fn ggml_blocks(t: GgmlType, x: &[f32]) -> Option<Vec<u8>> {
    ggml::ggml_quantize_ref(t, x).or_else(|| {
        let n_per_row = t.block_size() as usize;
        ggml::ggml_quantize_imatrix(t, x, n_per_row, &vec![1.0; n_per_row])
    })
}

/// Whether byte `byte` of quantized block `block` is defined by ggml's reference for `x`.
fn byte_is_defined(t: GgmlType, x: &[f32], block: usize, byte: usize) -> bool {
    let n = t.block_size() as usize;
    ggml::reference_byte_is_defined(t, &x[block * n..(block + 1) * n], byte)
}

#[test]
fn quantize_matches_ggml_reference() {
    let input = inputs();
    let mut report = Report::new("quantize: ours vs ggml quantize_row_*_ref (bytes)");
    for t in GgmlType::ALL {
        let data = input.data.restricted_to(t);
        let Some(reference) = ggml::ggml_quantize_ref(t, &data.values) else {
            report.skip(
                t,
                match t {
                    GgmlType::IQ2_XXS | GgmlType::IQ2_XS | GgmlType::IQ1_S | GgmlType::IQ1_M => {
                        "ggml quantizes it only with an importance matrix (no _ref)"
                    }
                    _ => "ggml has no quantizer for this type",
                },
            );
            continue;
        };
        let mut ours = vec![0u8; reference.len()];
        if let Err(e) = quantize(t, &data.values, &mut ours) {
            if is_required_quantizer(t) {
                report.fail(t, format!("miniquant returned an error: {e}"));
            } else {
                report.skip(t, format!("optional (ggml has a _ref), miniquant: {e}"));
            }
            continue;
        }
        let block_bytes = t.block_bytes() as usize;
        let diff = compare_bytes(&ours, &reference, block_bytes, |block, byte| {
            byte_is_defined(t, &data.values, block, byte)
        });
        let detail = diff.first.map(|(block, byte, a, b)| {
            format!(
                "first at block {block} ({}), byte {byte}: ours {a:#04x}, ggml {b:#04x}",
                data.locate(block * t.block_size() as usize)
            )
        });
        report.check(
            t,
            diff.bytes == 0,
            format!(
                "{} blocks compared, {} bytes differ in {} blocks{}",
                diff.blocks,
                diff.bytes,
                diff.blocks_differing,
                domain_note(t, &data)
            ),
            detail,
        );
    }
    report.finish();
}

/// Notes the edge blocks left out of a restricted type's data.
fn domain_note(t: GgmlType, data: &Dataset) -> String {
    let all = inputs().data.segments.len();
    let kept = data.segments.len();
    if kept == all {
        String::new()
    } else {
        format!(
            " ({} non-finite/overflowing edge blocks left out: ggml {t} aborts on them)",
            all - kept
        )
    }
}

/// What a type's dequantization is compared with.
enum DequantReference {
    Ggml,
    /// ggml has no `to_float`; the format's definition, written out in this file.
    Formula(&'static str),
}

/// Dequantization by the format's definition, for types ggml cannot dequantize: Q8_1 is `q*d`
/// (d through ggml's f16 conversion); the integers and F64 convert with Rust's `as f32`.
fn formula_dequantize(t: GgmlType, bytes: &[u8]) -> Option<Vec<f32>> {
    Some(match t {
        GgmlType::Q8_1 => bytes
            .chunks_exact(36)
            .flat_map(|block| {
                let d =
                    ggml::ggml_dequantize(GgmlType::F16, &block[0..2]).expect("F16 to_float")[0];
                block[4..].iter().map(move |&q| f32::from(q as i8) * d)
            })
            .collect(),
        GgmlType::I8 => bytes.iter().map(|&b| f32::from(b as i8)).collect(),
        GgmlType::I16 => bytes
            .chunks_exact(2)
            .map(|b| f32::from(i16::from_le_bytes([b[0], b[1]])))
            .collect(),
        GgmlType::I32 => bytes
            .chunks_exact(4)
            .map(|b| i32::from_le_bytes(b.try_into().unwrap()) as f32)
            .collect(),
        GgmlType::I64 => bytes
            .chunks_exact(8)
            .map(|b| i64::from_le_bytes(b.try_into().unwrap()) as f32)
            .collect(),
        GgmlType::F64 => bytes
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().unwrap()) as f32)
            .collect(),
        _ => return None,
    })
}

#[test]
fn dequantize_matches_ggml() {
    let input = inputs();
    let mut rng = Rng::new(SEED ^ 0xde9);
    let mut report = Report::new("dequantize: ours vs ggml dequantize_row_* (f32 bits)");
    for t in GgmlType::ALL {
        let reference_kind = if ggml::has_dequantize(t) {
            DequantReference::Ggml
        } else {
            DequantReference::Formula("no ggml to_float; compared with the format's formula")
        };
        let mut sets: Vec<(&str, Vec<u8>)> = Vec::new();
        if let Some(blocks) = ggml_blocks(t, &input.data.restricted_to(t).values) {
            sets.push(("ggml-quantized data", blocks));
        }
        sets.push((
            "raw blocks, sane scales",
            data::raw_blocks(t, RAW_BLOCKS, Scales::Sane, &mut rng),
        ));
        sets.push((
            "raw blocks, arbitrary scales",
            data::raw_blocks(t, RAW_BLOCKS / 4, Scales::Arbitrary, &mut rng),
        ));

        let mut total = FloatDiff::default();
        let (mut first, mut first_nan, mut error) = (None, None, None);
        let describe =
            |set: &str, f| format!("{set}: {}", describe_float(f, t.block_size() as usize));
        for (set, bytes) in &sets {
            let reference = match reference_kind {
                DequantReference::Ggml => ggml::ggml_dequantize(t, bytes).expect("ggml to_float"),
                DequantReference::Formula(_) => formula_dequantize(t, bytes).expect("formula"),
            };
            let mut ours = vec![0f32; reference.len()];
            if let Err(e) = dequantize(t, bytes, &mut ours) {
                error = Some(e);
                break;
            }
            let diff = compare_floats(&ours, &reference);
            first = first.or(diff.first.map(|f| describe(set, f)));
            first_nan = first_nan.or(diff.first_nan.map(|f| describe(set, f)));
            total.absorb(&diff);
        }
        // Strict for every type: each dequantized value is one chain of multiplies and adds with
        // at most one NaN input (a NaN scale), which the hardware passes through (quieted) on
        // x86-64 and AArch64, so its bits are the same on both sides. (Rust would also allow a
        // canonical NaN there; this test is what shows LLVM does not produce one.) The one step
        // whose NaN sign C leaves to its compiler, the IQ types' `x * ±1`, is written in the
        // oracle's form, see `apply_sign` in core's `quant/iq/tables.rs`.
        let strict = true;
        match (error, &reference_kind) {
            (Some(e), DequantReference::Ggml) => {
                report.fail(t, format!("miniquant returned an error: {e}"))
            }
            (Some(e), DequantReference::Formula(_)) => {
                report.skip(t, format!("optional (no ggml to_float), miniquant: {e}"))
            }
            (None, kind) => {
                let note = match kind {
                    DequantReference::Ggml => String::new(),
                    DequantReference::Formula(note) => format!(" ({note})"),
                };
                report.check(
                    t,
                    total.is_identical(strict),
                    format!(
                        "{} values compared, {} differ{}{note}",
                        total.values,
                        total.differing,
                        nan_note(total.nan_bits, strict)
                    ),
                    first.or(first_nan),
                );
            }
        }
    }
    report.finish();
}

/// One vec_dot case: a label, the weight row and the activation row (in the vec-dot type).
struct DotCase {
    label: String,
    w: Vec<u8>,
    x: Vec<u8>,
}

fn dot_cases(t: GgmlType, vd: GgmlType, rng: &mut Rng) -> Vec<DotCase> {
    let input = inputs();
    let mut cases = Vec::new();
    let row_bytes = ggml_row_bytes(t, COLS);
    if let Some(weights) = ggml_blocks(t, input.gaussian()) {
        for (r, (w, x)) in weights
            .chunks_exact(row_bytes)
            .zip(input.activations.chunks_exact(COLS))
            .enumerate()
        {
            cases.push(DotCase {
                label: format!("quantized row {r}"),
                w: w.to_vec(),
                x: ggml::ggml_quantize_activation(vd, x),
            });
        }
    }
    let edges = input.edges.restricted_to(t).values;
    if let Some(w) = ggml_blocks(t, &edges) {
        let x = ggml::ggml_quantize_activation(vd, &input.activations[..edges.len()]);
        cases.push(DotCase {
            label: "edge blocks row".into(),
            w,
            x,
        });
    }
    let raw_x = |rng: &mut Rng, extremes: bool| match vd {
        GgmlType::Q8_0 | GgmlType::Q8_1 => data::raw_q8_blocks(vd, COLS / 32, extremes, rng),
        GgmlType::Q8_K => data::raw_q8k_blocks(COLS / 256, extremes, rng),
        _ => data::raw_blocks(vd, COLS, Scales::Sane, rng),
    };
    let blocks_per_row = COLS / t.block_size() as usize;
    for r in 0..RAW_ROWS {
        let extremes = r % 2 == 0;
        cases.push(DotCase {
            label: format!(
                "raw row {r}{}",
                if extremes {
                    " (activation quants -128/127)"
                } else {
                    ""
                }
            ),
            w: data::raw_blocks(t, blocks_per_row, Scales::Sane, rng),
            x: raw_x(rng, extremes),
        });
    }
    for r in 0..RAW_ROWS / 4 {
        cases.push(DotCase {
            label: format!("raw row {r}, arbitrary scales"),
            w: data::raw_blocks(t, blocks_per_row, Scales::Arbitrary, rng),
            x: raw_x(rng, false),
        });
    }
    cases
}

fn ggml_row_bytes(t: GgmlType, n: usize) -> usize {
    n / t.block_size() as usize * t.block_bytes() as usize
}

#[test]
fn vec_dot_matches_ggml_generic() {
    let mut rng = Rng::new(SEED ^ 0xd07);
    let mut report = Report::new("vec_dot: ours vs ggml_vec_dot_*_generic (f32 bits)");
    for t in GgmlType::ALL {
        let Some(vd) = ggml::ggml_vec_dot_type(t) else {
            report.skip(t, "ggml has no vec_dot for this type");
            continue;
        };
        if !ggml::has_vec_dot(t) {
            report.skip(t, "no ggml scalar float dot on this target (see build.rs)");
            continue;
        }
        if vec_dot_type(t) != Some(vd) {
            report.fail(
                t,
                format!("vec_dot_type is {:?}, ggml's is {vd}", vec_dot_type(t)),
            );
            continue;
        }
        let cases = dot_cases(t, vd, &mut rng);
        let mut total = FloatDiff::default();
        let (mut first, mut first_nan, mut error) = (None, None, None);
        for case in &cases {
            let reference = ggml::ggml_vec_dot(t, &case.w, &case.x).expect("ggml vec_dot");
            let ours = match vec_dot(t, &case.w, &case.x) {
                Ok(ours) => ours,
                Err(e) => {
                    error = Some(e);
                    break;
                }
            };
            let diff = compare_floats(&[ours], &[reference]);
            let describe = || {
                format!(
                    "first at {}: ours {ours:e} ({:#010x}), ggml {reference:e} ({:#010x})",
                    case.label,
                    ours.to_bits(),
                    reference.to_bits()
                )
            };
            if diff.differing > 0 && first.is_none() {
                first = Some(describe());
            }
            if diff.nan_bits > 0 && first_nan.is_none() {
                first_nan = Some(describe());
            }
            total.absorb(&diff);
        }
        // A dot result may meet several NaNs (NaN scales in different blocks, inf * 0): which
        // one survives depends on operand order and instruction choice, see `strict_nan`.
        let strict = strict_nan();
        match error {
            Some(e) => report.fail(t, format!("miniquant returned an error: {e}")),
            None => report.check(
                t,
                total.is_identical(strict),
                format!(
                    "{} rows x {vd} compared, {} differ{}",
                    cases.len(),
                    total.differing,
                    nan_note(total.nan_bits, strict)
                ),
                first.or(first_nan),
            ),
        }
    }
    report.finish();
}

mod random_blocks {
    //! A proptest over random 256-value blocks: quantize, dequantize and vec_dot for a few types.

    use super::*;
    use proptest::prelude::*;

    const TYPES: [GgmlType; 8] = {
        use GgmlType::*;
        [Q4_0, Q5_1, Q8_0, Q3_K, Q4_K, Q6_K, IQ4_NL, TQ2_0]
    };

    fn value() -> impl Strategy<Value = f32> {
        prop_oneof![
            8 => -4.0f32..4.0,
            1 => -1e-6f32..1e-6,
            1 => (-64i32..64).prop_map(|i| i as f32 * 0.5),
            1 => Just(0.0f32),
        ]
    }

    fn block() -> impl Strategy<Value = Vec<f32>> {
        (prop::collection::vec(value(), 256), 1e-3f32..1e3)
            .prop_map(|(v, scale)| v.into_iter().map(|x| x * scale).collect())
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 128,
            // Failures print their minimal input; no regression files in the source tree.
            failure_persistence: None,
            ..ProptestConfig::default()
        })]
        #[test]
        fn random_blocks_match_ggml(x in block(), y in block()) {
            for t in TYPES {
                let reference = ggml::ggml_quantize_ref(t, &x).expect("reference quantizer");
                let mut ours = vec![0u8; reference.len()];
                quantize(t, &x, &mut ours).map_err(|e| TestCaseError::fail(format!("{t} quantize: {e}")))?;
                let diff = compare_bytes(&ours, &reference, t.block_bytes() as usize, |block, byte| {
                    byte_is_defined(t, &x, block, byte)
                });
                prop_assert!(diff.bytes == 0, "{t} quantize: {} bytes differ, first {:?} (block, byte, ours, ggml)", diff.bytes, diff.first);

                let reference_values = ggml::ggml_dequantize(t, &reference).expect("to_float");
                let mut values = vec![0f32; reference_values.len()];
                dequantize(t, &reference, &mut values).map_err(|e| TestCaseError::fail(format!("{t} dequantize: {e}")))?;
                let diff = compare_floats(&values, &reference_values);
                prop_assert!(diff.is_identical(true), "{t} dequantize: {}", describe_float(diff.first.or(diff.first_nan).unwrap(), t.block_size() as usize));

                let vd = ggml::ggml_vec_dot_type(t).expect("dot type");
                let xq = ggml::ggml_quantize_activation(vd, &y);
                let expected = ggml::ggml_vec_dot(t, &reference, &xq).expect("ggml dot");
                let got = vec_dot(t, &reference, &xq).map_err(|e| TestCaseError::fail(format!("{t} vec_dot: {e}")))?;
                prop_assert!(got.to_bits() == expected.to_bits(), "{t} vec_dot: ours {got:e}, ggml {expected:e}");
            }
        }
    }
}

mod harness {
    //! Checks of the oracle itself, not of miniquant: that the FFI reaches the right C functions
    //! with the right lengths, and that ggml's reference depends only on each block's own values.

    use super::*;

    /// Q8_0 and Q4_0 dequantization through the FFI equals the formulas `q*d` and `(q-8)*d`, with
    /// `d` converted by the `half` crate.
    #[test]
    fn harness_q8_0_and_q4_0_dequantize_follow_their_formulas() {
        let mut rng = Rng::new(SEED ^ 0x4a);
        let q8 = data::raw_blocks(GgmlType::Q8_0, 512, Scales::Sane, &mut rng);
        let expected: Vec<f32> = q8
            .chunks_exact(34)
            .flat_map(|b| {
                let d = half::f16::from_le_bytes([b[0], b[1]]).to_f32();
                b[2..].iter().map(move |&q| f32::from(q as i8) * d)
            })
            .collect();
        let got = ggml::ggml_dequantize(GgmlType::Q8_0, &q8).unwrap();
        assert!(compare_floats(&got, &expected).is_identical(true));

        let q4 = data::raw_blocks(GgmlType::Q4_0, 512, Scales::Sane, &mut rng);
        let expected: Vec<f32> = q4
            .chunks_exact(18)
            .flat_map(|b| {
                let d = half::f16::from_le_bytes([b[0], b[1]]).to_f32();
                let low = b[2..].iter().map(move |&q| (f32::from(q & 15) - 8.0) * d);
                let high = b[2..].iter().map(move |&q| (f32::from(q >> 4) - 8.0) * d);
                low.chain(high).collect::<Vec<_>>()
            })
            .collect();
        let got = ggml::ggml_dequantize(GgmlType::Q4_0, &q4).unwrap();
        assert!(compare_floats(&got, &expected).is_identical(true));
    }

    /// ggml's f16 conversions agree with the `half` crate: every f16 bit pattern to f32 (NaNs
    /// only as NaN: `half` quiets signalling NaNs), and round-to-nearest-even from f32.
    #[test]
    fn harness_f16_conversions_agree_with_half() {
        let all: Vec<u8> = (0..=u16::MAX).flat_map(|h| h.to_le_bytes()).collect();
        let got = ggml::ggml_dequantize(GgmlType::F16, &all).unwrap();
        for (h, v) in (0..=u16::MAX).zip(&got) {
            let expected = half::f16::from_bits(h).to_f32();
            if expected.is_nan() {
                assert!(v.is_nan(), "f16 {h:#06x}");
            } else {
                assert_eq!(v.to_bits(), expected.to_bits(), "f16 {h:#06x}");
            }
        }
        let mut rng = Rng::new(SEED ^ 0xf16);
        let x: Vec<f32> = (0..1 << 16)
            .map(|_| f32::from_bits(rng.next_u64() as u32))
            .filter(|v| !v.is_nan())
            .collect();
        let got = ggml::ggml_quantize_ref(GgmlType::F16, &x).unwrap();
        for (v, h) in x.iter().zip(got.chunks_exact(2)) {
            let expected = half::f16::from_f32(*v).to_bits();
            assert_eq!(u16::from_le_bytes([h[0], h[1]]), expected, "f32 {v:e}");
        }
    }

    /// Every ggml dot agrees, to rounding, with an f64 dot of ggml's own dequantized operands:
    /// this would catch a kernel wired to the wrong C function or given the wrong lengths.
    #[test]
    fn harness_vec_dots_agree_with_dequantized_f64_dot() {
        let input = inputs();
        let mut checked = 0;
        for t in GgmlType::ALL {
            let (Some(vd), true) = (ggml::ggml_vec_dot_type(t), ggml::has_vec_dot(t)) else {
                continue;
            };
            let w_all = ggml_blocks(t, &input.gaussian()[..8 * COLS]).expect("ggml blocks");
            let row_bytes = ggml_row_bytes(t, COLS);
            for (r, (w, y)) in w_all
                .chunks_exact(row_bytes)
                .zip(input.activations.chunks_exact(COLS))
                .enumerate()
            {
                let x = ggml::ggml_quantize_activation(vd, y);
                let wd = ggml::ggml_dequantize(t, w).unwrap();
                let xd = match vd {
                    GgmlType::Q8_1 => formula_dequantize(vd, &x).unwrap(),
                    _ => ggml::ggml_dequantize(vd, &x).unwrap(),
                };
                let exact: f64 = wd
                    .iter()
                    .zip(&xd)
                    .map(|(&a, &b)| f64::from(a) * f64::from(b))
                    .sum();
                let magnitude: f64 = wd
                    .iter()
                    .zip(&xd)
                    .map(|(&a, &b)| (f64::from(a) * f64::from(b)).abs())
                    .sum();
                let got = f64::from(ggml::ggml_vec_dot(t, w, &x).unwrap());
                // Q4_1/Q5_1 use the activation's f16 `s`, rounded from d*sum(q): allow for it.
                let tolerance = 1e-3 * magnitude + 1e-6;
                assert!(
                    (got - exact).abs() <= tolerance,
                    "{t} row {r}: ggml dot {got}, f64 dot {exact}"
                );
                checked += 1;
            }
        }
        assert!(checked >= 8 * 25, "only {checked} dots checked");
    }

    /// ggml writes every byte of its output except the documented ones: quantizing into buffers
    /// pre-filled with 0x00 and with 0xff gives the same defined bytes.
    #[test]
    fn harness_reference_writes_every_defined_byte() {
        let input = inputs();
        for t in GgmlType::ALL {
            let mut x = input.edges.restricted_to(t).values;
            x.extend_from_slice(&input.gaussian()[..2 * COLS]);
            let (Some(zeros), Some(ones)) = (
                ggml::ggml_quantize_ref_over(t, &x, 0x00),
                ggml::ggml_quantize_ref_over(t, &x, 0xff),
            ) else {
                continue;
            };
            let diff = compare_bytes(&zeros, &ones, t.block_bytes() as usize, |block, byte| {
                byte_is_defined(t, &x, block, byte)
            });
            assert_eq!(
                diff.bytes, 0,
                "{t}: ggml leaves bytes unwritten: {:?}",
                diff.first
            );
        }
    }

    /// ggml's reference output for a block depends only on that block, except the documented
    /// IQ4_NL all-zero case: quantizing blocks one at a time gives the same bytes as a whole row.
    #[test]
    fn harness_reference_is_per_block() {
        let input = inputs();
        // Every edge block plus two Gaussian rows' worth of blocks.
        for t in GgmlType::ALL {
            let mut x = input.edges.restricted_to(t).values;
            x.extend_from_slice(&input.gaussian()[..2 * COLS]);
            let Some(whole) = ggml::ggml_quantize_ref(t, &x) else {
                continue;
            };
            let n = t.block_size() as usize;
            let single: Vec<u8> = x
                .chunks_exact(n)
                .flat_map(|block| ggml::ggml_quantize_ref(t, block).unwrap())
                .collect();
            let diff = compare_bytes(&single, &whole, t.block_bytes() as usize, |block, byte| {
                byte_is_defined(t, &x, block, byte)
            });
            assert_eq!(
                diff.bytes, 0,
                "{t}: ggml's bytes depend on neighbouring blocks: {:?}",
                diff.first
            );
        }
    }
}
