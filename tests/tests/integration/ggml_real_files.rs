//! Real GGUF files against ggml's C reference: every tensor of both files dequantizes
//! bit-identically, and matvec (at every kernel level this CPU has, on 1, 2 and 3 threads) and
//! matmul (3 and 13 columns, 13 also on two threads) over one real tensor of each type in each file match ggml's pipeline (`quantize_row_<vec_dot_type>_ref` of the input, then the generic
//! `ggml_vec_dot_*` per row) bit for bit.
//!
//! The files come from `scripts/fetch-models.sh` (found through `miniquant_tests::cache`); a missing
//! file fails the tests with that instruction, it never skips them. The headers are parsed with
//! miniquant's own `SliceParser`. Run with `-- --nocapture` to see the per-type tables.

use miniquant::gguf::{Event, Limits, SliceParser};
use miniquant::quant::matvec::{matmul, matmul_scratch_bytes};
use miniquant::quant::{bytes_for, dequantize, quantize};
use miniquant::GgmlType;
use miniquant_std::parallel;
use miniquant_tests::cache;
use miniquant_tests::data;
use miniquant_tests::diff::{compare_bytes, compare_floats, describe_float, nan_note, FloatDiff};
use miniquant_tests::ggml;
use miniquant_tests::report::Report;
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// Elements dequantized per step, so a large tensor never needs two full f32 copies at once.
const CHUNK_ELEMENTS: usize = 1 << 20;

/// Columns of the larger matmul check: past every x86_64 and aarch64 tile's minimum column count
/// (Q4_1's is 12), three tiles of four and one column left.
const TILE_COLUMNS: usize = 13;

/// One tensor of a file: where its bytes are and what they hold.
#[derive(Debug, Clone)]
struct Tensor {
    name: String,
    ggml_type: GgmlType,
    ne: Vec<u64>,
    /// Absolute byte range in the file.
    start: usize,
    len: usize,
}

impl Tensor {
    fn elements(&self) -> usize {
        self.ne.iter().product::<u64>() as usize
    }

    fn row_len(&self) -> usize {
        self.ne.first().copied().unwrap_or(1) as usize
    }
}

/// A file read whole, with its tensor directory.
struct Model {
    name: &'static str,
    bytes: Vec<u8>,
    tensors: Vec<Tensor>,
}

impl Model {
    fn load(name: &'static str) -> Self {
        let path = cache::model_path(name);
        let bytes =
            std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let mut parser = SliceParser::new(&bytes, Limits::DEFAULT);
        let mut infos = Vec::new();
        let mut data_offset = None;
        while let Some(event) = parser
            .next_event()
            .unwrap_or_else(|e| panic!("{name}: miniquant's parser rejected the header: {e}"))
        {
            match event {
                Event::Tensor(info) => infos.push((
                    info.name.to_string(),
                    info.ggml_type,
                    info.ne().to_vec(),
                    info.offset,
                    info.bytes,
                )),
                Event::End(section) => data_offset = Some(section.data_offset),
                _ => {}
            }
        }
        let data_offset = data_offset.unwrap_or_else(|| panic!("{name}: header has no end"));
        let tensors = infos
            .into_iter()
            .map(|(name, ggml_type, ne, offset, len)| {
                let start = (data_offset + offset) as usize;
                let len = len as usize;
                assert!(
                    start + len <= bytes.len(),
                    "{name}: tensor data past the end of the file"
                );
                Tensor {
                    name,
                    ggml_type,
                    ne,
                    start,
                    len,
                }
            })
            .collect();
        Self {
            name,
            bytes,
            tensors,
        }
    }

    fn data(&self, t: &Tensor) -> &[u8] {
        &self.bytes[t.start..t.start + t.len]
    }

    /// The types present, in code order.
    fn types(&self) -> Vec<GgmlType> {
        let mut types: Vec<GgmlType> = self.tensors.iter().map(|t| t.ggml_type).collect();
        types.sort();
        types.dedup();
        types
    }
}

fn models() -> &'static [Model] {
    static MODELS: OnceLock<Vec<Model>> = OnceLock::new();
    MODELS.get_or_init(|| {
        cache::MODEL_FILES
            .iter()
            .map(|name| Model::load(name))
            .collect()
    })
}

#[test]
fn both_files_have_the_expected_tensor_types() {
    let expected: BTreeMap<&str, Vec<GgmlType>> = BTreeMap::from([
        (
            cache::SMOLLM2_Q4_1,
            vec![GgmlType::F32, GgmlType::Q4_1, GgmlType::Q8_0],
        ),
        (
            cache::GEMMA3_Q4_K_M,
            vec![
                GgmlType::F32,
                GgmlType::Q5_0,
                GgmlType::Q8_0,
                GgmlType::Q4_K,
                GgmlType::Q6_K,
            ],
        ),
    ]);
    for model in models() {
        assert_eq!(model.types(), expected[model.name], "{}", model.name);
    }
}

#[test]
fn every_tensor_dequantizes_like_ggml() {
    let mut report = Report::new("real files: dequantize every tensor, ours vs ggml (f32 bits)");
    for model in models() {
        for t in model.types() {
            let tensors: Vec<&Tensor> = model.tensors.iter().filter(|x| x.ggml_type == t).collect();
            let label = format!("{} {t}", model.name);
            let mut total = FloatDiff::default();
            let (mut first, mut error) = (None, None);
            let chunk_bytes = bytes_for(t, CHUNK_ELEMENTS).expect("chunk is whole blocks");
            'tensors: for tensor in &tensors {
                for (c, chunk) in model.data(tensor).chunks(chunk_bytes).enumerate() {
                    let reference = ggml::ggml_dequantize(t, chunk).expect("ggml to_float");
                    let mut ours = vec![0f32; reference.len()];
                    if let Err(e) = dequantize(t, chunk, &mut ours) {
                        error = Some(e);
                        break 'tensors;
                    }
                    let diff = compare_floats(&ours, &reference);
                    total.absorb(&diff);
                    if first.is_none() {
                        first = diff.first.or(diff.first_nan).map(|(i, a, b)| {
                            let at = (c * CHUNK_ELEMENTS + i, a, b);
                            format!(
                                "{}: {}",
                                tensor.name,
                                describe_float(at, t.block_size() as usize)
                            )
                        });
                    }
                }
            }
            match error {
                Some(e) => report.check_labelled(
                    label,
                    false,
                    format!("miniquant returned an error: {e}"),
                    None,
                ),
                None => report.check_labelled(
                    label,
                    // Real weights hold no NaN, so NaN bits are compared strictly here.
                    total.is_identical(true) && total.values > 0,
                    format!(
                        "{} tensors, {} values compared, {} differ{}",
                        tensors.len(),
                        total.values,
                        total.differing,
                        nan_note(total.nan_bits, true)
                    ),
                    first,
                ),
            }
        }
    }
    report.finish();
}

/// The tensor of type `t` a matvec runs on: the smallest matrix, or the smallest tensor if the
/// type only has vectors.
fn matvec_tensor(model: &Model, t: GgmlType) -> &Tensor {
    let of_type = || model.tensors.iter().filter(move |x| x.ggml_type == t);
    of_type()
        .filter(|x| x.ne.iter().skip(1).any(|&d| d > 1))
        .min_by_key(|x| (x.len, x.name.clone()))
        .or_else(|| of_type().min_by_key(|x| (x.len, x.name.clone())))
        .expect("the type is present")
}

#[test]
fn one_matvec_per_type_matches_ggml_pipeline() {
    let mut report =
        Report::new("real files: matvec, ours vs ggml (activation bytes, f32 bits per row)");
    for (m, model) in models().iter().enumerate() {
        for t in model.types() {
            let tensor = matvec_tensor(model, t);
            let label = format!("{} {t} {}", model.name, tensor.name);
            let vd = ggml::ggml_vec_dot_type(t).expect("every type in these files has a dot");
            if !ggml::has_vec_dot(t) {
                report.skip_labelled(
                    label,
                    "no ggml scalar float dot on this target (see build.rs)",
                );
                continue;
            }
            let cols = tensor.row_len();
            let rows = tensor.elements() / cols;
            let x = data::gaussian_rows(0x5eed_0000 + m as u64 * 64 + t.code() as u64, 1, cols);

            // ggml's pipeline.
            let xq_ggml = ggml::ggml_quantize_activation(vd, &x);
            let row_bytes = tensor.len / rows;
            let weights = model.data(tensor);

            // Ours: the activation alone first (to tell an activation difference from a dot
            // difference), then `matvec`.
            let mut xq = vec![0u8; xq_ggml.len()];
            if let Err(e) = quantize(vd, &x, &mut xq) {
                report.check_labelled(
                    label,
                    false,
                    format!("miniquant quantize({vd}) returned an error: {e}"),
                    None,
                );
                continue;
            }
            let activation =
                compare_bytes(&xq, &xq_ggml, vd.block_bytes() as usize, |block, byte| {
                    let n = vd.block_size() as usize;
                    ggml::reference_byte_is_defined(vd, &x[block * n..(block + 1) * n], byte)
                });
            if activation.bytes != 0 {
                report.check_labelled(
                    label,
                    false,
                    format!("activation {vd}: {} bytes differ", activation.bytes),
                    activation
                        .first
                        .map(|f| format!("first (block, byte, ours, ggml) = {f:?}")),
                );
                continue;
            }
            // Every kernel level this CPU has, 1, 2 and 3 threads, and matmul over three and
            // over `TILE_COLUMNS` columns (the first being x; enough for every type's tiles,
            // with columns left over for the narrower ones) on one and two threads: all must
            // give ggml's bits.
            let x3: Vec<f32> = x
                .iter()
                .copied()
                .chain(data::gaussian_rows(
                    0x3c01 + t.code() as u64,
                    TILE_COLUMNS - 1,
                    cols,
                ))
                .collect();
            let expected3: Vec<f32> = x3
                .chunks_exact(cols)
                .flat_map(|column| {
                    let xq = ggml::ggml_quantize_activation(vd, column);
                    weights
                        .chunks_exact(row_bytes)
                        .map(move |row| ggml::ggml_vec_dot(t, row, &xq).expect("ggml dot"))
                        .collect::<Vec<f32>>()
                })
                .collect();
            for level in miniquant::quant::level::available() {
                let mut runs: Vec<(String, Result<Vec<f32>, miniquant::Error>)> = Vec::new();
                for threads in 1..=3 {
                    let mut ours = vec![0f32; rows];
                    let result =
                        parallel::matvec(level, t, weights, rows, cols, &x, threads, &mut ours);
                    runs.push((format!("matvec {threads} threads"), result.map(|()| ours)));
                }
                for n in [3, TILE_COLUMNS] {
                    let mut scratch =
                        vec![0u8; matmul_scratch_bytes(t, cols, n).expect("scratch size")];
                    let mut y = vec![0f32; n * rows];
                    let xn = &x3[..n * cols];
                    let result = matmul(level, t, weights, rows, cols, n, xn, &mut scratch, &mut y);
                    runs.push((format!("matmul {n} columns"), result.map(|()| y)));
                }
                let mut y = vec![0f32; TILE_COLUMNS * rows];
                let result =
                    parallel::matmul(level, t, weights, rows, cols, TILE_COLUMNS, &x3, 2, &mut y);
                runs.push((
                    format!("matmul {TILE_COLUMNS} columns, 2 threads"),
                    result.map(|()| y),
                ));
                for (what, result) in runs {
                    let label = format!("{label} {level} {what}");
                    let ours = match result {
                        Ok(ours) => ours,
                        Err(e) => {
                            report.check_labelled(label, false, format!("error: {e}"), None);
                            continue;
                        }
                    };
                    let expected = &expected3[..ours.len()];
                    let diff = compare_floats(&ours, expected);
                    report.check_labelled(
                        label,
                        diff.is_identical(true),
                        format!(
                            "{rows} rows x {cols} ({vd} activation), {} outputs differ",
                            diff.differing
                        ),
                        diff.first.map(|(r, a, b)| {
                            format!(
                                "first at output {r}: ours {:e} ({a:#010x}), ggml {:e} ({b:#010x})",
                                f32::from_bits(a),
                                f32::from_bits(b)
                            )
                        }),
                    );
                }
            }
        }
    }
    report.finish();
}

#[test]
fn harness_ggml_matvec_agrees_with_dequantized_f64_dot() {
    let mut checked = 0;
    for model in models() {
        for t in model.types() {
            let tensor = matvec_tensor(model, t);
            let (Some(vd), true) = (ggml::ggml_vec_dot_type(t), ggml::has_vec_dot(t)) else {
                continue;
            };
            let cols = tensor.row_len();
            let rows = tensor.elements() / cols;
            let x = data::gaussian_rows(0x4a55, 1, cols);
            let xq = ggml::ggml_quantize_activation(vd, &x);
            let xd = match vd {
                // ggml has no Q8_1 to_float: q*d, with d through ggml's f16 conversion.
                GgmlType::Q8_1 => xq
                    .chunks_exact(36)
                    .flat_map(|b| {
                        let d = ggml::ggml_dequantize(GgmlType::F16, &b[..2]).unwrap()[0];
                        b[4..].iter().map(move |&q| f32::from(q as i8) * d)
                    })
                    .collect(),
                _ => ggml::ggml_dequantize(vd, &xq).unwrap(),
            };
            // Every 97th row keeps the check quick on the large embedding matrices.
            for row in model
                .data(tensor)
                .chunks_exact(tensor.len / rows)
                .step_by(97)
            {
                let w = ggml::ggml_dequantize(t, row).unwrap();
                let exact: f64 = w
                    .iter()
                    .zip(&xd)
                    .map(|(&a, &b)| f64::from(a) * f64::from(b))
                    .sum();
                let magnitude: f64 = w
                    .iter()
                    .zip(&xd)
                    .map(|(&a, &b)| (f64::from(a) * f64::from(b)).abs())
                    .sum();
                let got = f64::from(ggml::ggml_vec_dot(t, row, &xq).unwrap());
                assert!(
                    (got - exact).abs() <= 1e-3 * magnitude + 1e-6,
                    "{} {t} {}: ggml dot {got}, f64 dot {exact}",
                    model.name,
                    tensor.name
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 50, "only {checked} rows checked");
}
