//! `miniquant requantize IN.gguf OUT.gguf --type TYPE [--threads N]`: converts the weight tensors
//! to another type the way `llama-quantize --pure --allow-requantize` does, keeping everything else.
//!
//! - Which tensors: those llama.cpp quantizes (at least 2 dimensions, a name ending in `weight`,
//!   not a norm, not one of its small or special tensors, see [`allows_quantization`]); the others
//!   (1-D norms and biases, ...) are copied unchanged.
//! - Which type: `TYPE` for all of them, except where the row length is not a multiple of its block
//!   size: then ggml's fallback (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K/Q3_K/TQ* -> Q4_0,
//!   IQ4_XS -> IQ4_NL), and F16 if even that does not fit ([`target_for`]).
//! - How: the source values (F32 as stored; F16, BF16 and quantized types dequantized) are quantized
//!   row by row with the core's quantizers, which are byte-identical to ggml's; rows are spread over
//!   `--threads` threads (default: all cores). A tensor already of its target type is copied.
//! - NaN and infinities in a converted tensor's source values are refused (naming the tensor, row
//!   and column of the first one) unless `--allow-non-finite`: ggml's quantizers turn them into
//!   blocks whose scale is NaN or inf, which poison every value of the block.
//! - Byte order: the output's is the input's. A big-endian file's rows are read in the kernels'
//!   layout ([`crate::GgufFile::rows_data`]) and the converted blocks turned back into big-endian
//!   ones; a conversion from or to a type without a big-endian layout is refused before anything
//!   is written (convert the file to little-endian first with `convert-endian`).
//! - Metadata: copied in order; `general.quantization_version` (2) and `general.file_type` (the
//!   llama.cpp file type of TYPE) are removed and appended last, as llama.cpp's gguf writer does.
//! - The file gets its name only when complete ([`crate::output_file`]): on Linux it is written
//!   unnamed (`O_TMPFILE`) so a killed run leaves nothing; elsewhere under `.OUT.<pid>.partial`,
//!   removed on failure, SIGINT or SIGTERM. So OUT may be IN: the input stays mapped while the new
//!   file is written, and replaces it atomically.

use std::cell::Cell;
use std::io::{BufWriter, IsTerminal, Write};
use std::num::NonZeroUsize;
use std::path::Path;
use std::time::Instant;

use indicatif::ProgressBar;
use miniquant::gguf::{Scalar, TensorSpec, ValueType, WriteOptions};
use miniquant::{quant, GgmlType};

use super::output::FileOutput;
use super::{open_gguf, progress, quoted, type_arg, CliError};
use crate::value::Value;
use crate::writer;

/// A target of `--type`: the tensor type and the llama.cpp file type written to
/// `general.file_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// The tensor type.
    pub ggml_type: GgmlType,
    /// `llama_ftype` (for K-quants the `_M` mix, as llama-quantize names `Q4_K` and so on).
    pub file_type: u32,
}

/// Every `--type` accepted, with its `llama_ftype`: the types ggml quantizes without an importance
/// matrix.
const TARGETS: [(GgmlType, u32); 17] = [
    (GgmlType::F32, 0),
    (GgmlType::F16, 1),
    (GgmlType::BF16, 32),
    (GgmlType::Q4_0, 2),
    (GgmlType::Q4_1, 3),
    (GgmlType::Q5_0, 8),
    (GgmlType::Q5_1, 9),
    (GgmlType::Q8_0, 7),
    (GgmlType::Q2_K, 10),
    (GgmlType::Q3_K, 12),
    (GgmlType::Q4_K, 15),
    (GgmlType::Q5_K, 17),
    (GgmlType::Q6_K, 18),
    (GgmlType::IQ4_NL, 25),
    (GgmlType::IQ4_XS, 30),
    (GgmlType::TQ1_0, 36),
    (GgmlType::TQ2_0, 37),
];

/// `general.quantization_version`: ggml's `GGML_QNT_VERSION`.
const QUANTIZATION_VERSION: u32 = 2;

/// Parses `--type` (case-insensitive) as every command does, keeping the types requantize can
/// produce; the error lists them.
pub fn parse_target(name: &str) -> Result<Target, String> {
    let types = TARGETS.map(|(t, _)| t);
    let t = type_arg::parse_among(
        name,
        &types,
        "ggml quantizes it only with an importance matrix, or it is not a type for weights",
    )?;
    TARGETS
        .iter()
        .find(|(u, _)| *u == t)
        .map(|&(ggml_type, file_type)| Target {
            ggml_type,
            file_type,
        })
        .ok_or_else(|| format!("{t} is not a requantize type"))
}

/// Whether llama.cpp's quantizer converts a tensor of this name and dimension count.
pub fn allows_quantization(name: &str, n_dims: usize) -> bool {
    // The tensors llama.cpp leaves alone: small, special, or read by position rather than as
    // weights (from `tensor_allows_quantization` in llama-quant.cpp).
    const KEEP: [&str; 31] = [
        "_norm.weight",
        "ffn_gate_inp.weight",
        "ffn_gate_tid2eid.weight",
        "altup",
        "laurel",
        "per_layer_model_proj",
        "ssm_conv1d",
        "shortconv.conv.weight",
        "indexer.k_proj.weight",
        "indexer.q_proj.weight",
        "time_mix_first.weight",
        "time_mix_w0.weight",
        "time_mix_w1.weight",
        "time_mix_w2.weight",
        "time_mix_v0.weight",
        "time_mix_v1.weight",
        "time_mix_v2.weight",
        "time_mix_a0.weight",
        "time_mix_a1.weight",
        "time_mix_a2.weight",
        "time_mix_g1.weight",
        "time_mix_g2.weight",
        "time_mix_decay_w1.weight",
        "time_mix_decay_w2.weight",
        "time_mix_lerp_fused.weight",
        "attn_rel_b.weight",
        ".position_embd",
        ".rel_pos",
        ".patch_embd",
        ".patch_merger",
        "a.rvq.codebook",
    ];
    const KEEP_MORE: [&str; 4] = ["sam.pos_embd", "sam.neck.", "sam.net_", "mm.a.code_embd"];
    n_dims >= 2
        && name.ends_with("weight")
        && name != "position_embd.weight"
        && name != "token_types.weight"
        && !KEEP.iter().chain(&KEEP_MORE).any(|k| name.contains(k))
}

/// The type a quantizable tensor with rows of `ne0` values gets for target `t`: `t`, or ggml's
/// fallback when `ne0` is not a multiple of `t`'s block size, or F16 when the fallback does not fit
/// either; an error where ggml has no fallback.
pub fn target_for(t: GgmlType, ne0: u64) -> Result<GgmlType, String> {
    let fits = |u: GgmlType| ne0.is_multiple_of(u64::from(u.block_size()));
    if fits(t) {
        return Ok(t);
    }
    let Some(fallback) = fallback_of(t) else {
        return Err(format!(
            "rows of {ne0} values are not whole {t} blocks and ggml defines no fallback for {t}"
        ));
    };
    Ok(if fits(fallback) {
        fallback
    } else {
        GgmlType::F16
    })
}

/// ggml's fallback for a tensor whose rows are not whole blocks of `t` (`llama_tensor_get_type`).
fn fallback_of(t: GgmlType) -> Option<GgmlType> {
    match t {
        GgmlType::IQ4_XS => Some(GgmlType::IQ4_NL),
        GgmlType::Q2_K | GgmlType::Q3_K | GgmlType::TQ1_0 | GgmlType::TQ2_0 => Some(GgmlType::Q4_0),
        GgmlType::Q4_K => Some(GgmlType::Q5_0),
        GgmlType::Q5_K => Some(GgmlType::Q5_1),
        GgmlType::Q6_K => Some(GgmlType::Q8_0),
        _ => None,
    }
}

/// Converted tensors that got a fallback type instead of the target, grouped by that type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fallback {
    /// The type they got.
    pub ggml_type: GgmlType,
    /// How many tensors.
    pub tensors: usize,
    /// Their row lengths (ggml's `ne[0]`), ascending, each once.
    pub row_lengths: Vec<u64>,
}

impl Fallback {
    /// Why, for target `t`: `rows of 576 values are not a multiple of 256 (Q4_K's block size)`.
    pub fn reason(&self, t: GgmlType) -> String {
        let lengths: Vec<String> = self.row_lengths.iter().map(u64::to_string).collect();
        let rows = match lengths.as_slice() {
            [one] => format!("rows of {one} values are"),
            _ => format!("rows of {} values are", lengths.join(", ")),
        };
        let mut why = format!(
            "{rows} not a multiple of {} ({t}'s block size)",
            t.block_size()
        );
        if let Some(f) = fallback_of(t).filter(|&f| f != self.ggml_type) {
            why.push_str(&format!(
                " nor of {} ({f}'s, ggml's fallback for {t})",
                f.block_size()
            ));
        }
        why
    }
}

/// What was done, for the summary line.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Tensors converted.
    pub converted: usize,
    /// Of those, the tensors that got a fallback type, per type (in type order).
    pub fallbacks: Vec<Fallback>,
    /// Tensors copied unchanged.
    pub copied: usize,
    /// Input size in bytes.
    pub bytes_in: u64,
    /// Output size in bytes.
    pub bytes_out: u64,
}

pub(super) fn run<E: Write>(
    input: &Path,
    output: &Path,
    target: Target,
    threads: Option<NonZeroUsize>,
    allow_non_finite: bool,
    err: &mut E,
) -> Result<(), CliError> {
    let threads = threads
        .or_else(|| std::thread::available_parallelism().ok())
        .map_or(1, NonZeroUsize::get);
    let start = Instant::now();
    let options = Options {
        threads,
        // The bar draws on the process's stderr, so only when that is a terminal.
        progress: std::io::stderr().is_terminal(),
        allow_non_finite,
    };
    let summary = requantize(input, output, target, &options)?;
    let t = target.ggml_type;
    let by_fallback: usize = summary.fallbacks.iter().map(|f| f.tensors).sum();
    let mut converted = format!("{} tensors to {t}", summary.converted - by_fallback);
    for f in &summary.fallbacks {
        converted.push_str(&format!(", {} to {} (fallback)", f.tensors, f.ggml_type));
    }
    let mut text = format!(
        "{} -> {}: {converted}, {} copied; {:.1} MB -> {:.1} MB in {:.2} s on {threads} threads\n",
        quoted(input),
        quoted(output),
        summary.copied,
        summary.bytes_in as f64 / 1e6,
        summary.bytes_out as f64 / 1e6,
        start.elapsed().as_secs_f64()
    );
    for f in &summary.fallbacks {
        text.push_str(&format!(
            "  {} tensors to {}: {}\n",
            f.tensors,
            f.ggml_type,
            f.reason(t)
        ));
    }
    err.write_all(text.as_bytes())
        .map_err(|e| CliError::io("cannot write stderr", e))
}

/// How [`requantize`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Threads that quantize rows (0 counts as 1).
    pub threads: usize,
    /// Draw a progress bar on stderr.
    pub progress: bool,
    /// Quantize NaN and infinite source values as ggml would instead of refusing them.
    pub allow_non_finite: bool,
}

/// Converts `input` into `output` (see the module docs).
pub fn requantize(
    input: &Path,
    output: &Path,
    target: Target,
    options: &Options,
) -> Result<Summary, CliError> {
    let file = open_gguf(input)?;
    let index = file.index();
    let mut types = Vec::with_capacity(index.tensors().len());
    let mut summary = Summary {
        bytes_in: file.bytes().len() as u64,
        ..Summary::default()
    };
    let mut fallbacks: std::collections::BTreeMap<GgmlType, Fallback> = Default::default();
    for t in index.tensors() {
        let ne0 = t.ne().first().copied().unwrap_or(1);
        let new_type = if allows_quantization(&t.name, t.ne().len()) {
            target_for(target.ggml_type, ne0)
                .map_err(|m| CliError::Message(format!("tensor {:?}: {m}", t.name)))?
        } else {
            t.ggml_type
        };
        if new_type == t.ggml_type {
            summary.copied += 1;
        } else {
            summary.converted += 1;
            if new_type != target.ggml_type {
                let f = fallbacks.entry(new_type).or_insert_with(|| Fallback {
                    ggml_type: new_type,
                    tensors: 0,
                    row_lengths: Vec::new(),
                });
                f.tensors += 1;
                if let Err(at) = f.row_lengths.binary_search(&ne0) {
                    f.row_lengths.insert(at, ne0);
                }
            }
        }
        types.push(new_type);
    }
    if index.byte_order() == Some(miniquant::gguf::ByteOrder::Big) {
        refuse_unknown_big_endian_layouts(input, index.tensors(), &types)?;
    }
    summary.fallbacks = fallbacks.into_values().collect();
    let specs: Vec<TensorSpec<'_>> = index
        .tensors()
        .iter()
        .zip(&types)
        .map(|(t, &ggml_type)| TensorSpec {
            name: &t.name,
            ggml_type,
            ne: t.ne(),
        })
        .collect();
    let total_out: u64 = specs.iter().filter_map(TensorSpec::bytes).sum();
    let bar = progress::byte_bar(total_out, options.progress);
    let out = FileOutput::file(output)?;
    let write_error = Cell::new(None);
    let out = KeepWriteError {
        inner: out,
        error: &write_error,
    };
    let result = write_output(&file, out, target, &specs, options, &bar);
    bar.finish_and_clear();
    // The core writer keeps only an error's kind ("write failed: Other"): say what the OS said.
    let (out, bytes_out) = result.map_err(|e| match write_error.take() {
        Some(io) => CliError::io(format!("cannot write {}", quoted(output)), io),
        None => e,
    })?;
    out.finish(Ok(()))?;
    summary.bytes_out = bytes_out;
    Ok(summary)
}

/// For a big-endian input: every converted tensor's source and target type must have a big-endian
/// layout (the output is big-endian too).
fn refuse_unknown_big_endian_layouts(
    input: &Path,
    tensors: &[crate::TensorEntry],
    types: &[GgmlType],
) -> Result<(), CliError> {
    use miniquant::quant::byte_order::big_endian_layout_known as known;
    let converted = tensors.iter().zip(types).filter(|(t, &u)| t.ggml_type != u);
    for (tensor, &new_type) in converted {
        let problem = if !known(tensor.ggml_type) {
            let why = miniquant::Error::Unsupported {
                ggml_type: tensor.ggml_type,
                op: miniquant::error::Op::FromBigEndian,
            };
            format!("is {}: {why}", tensor.ggml_type)
        } else if !known(new_type) {
            let writable: Vec<&str> = TARGETS
                .iter()
                .filter(|(t, _)| known(*t))
                .map(|(t, _)| t.name())
                .collect();
            format!(
                "would become {new_type}, which has no big-endian layout (a big-endian output can \
                 be {}): choose one of those, or convert the file to little-endian first \
                 (miniquant convert-endian IN OUT --order little)",
                writable.join(", ")
            )
        } else {
            continue;
        };
        return Err(CliError::Message(format!(
            "{} is big-endian and tensor {:?} {problem}",
            quoted(input),
            tensor.name,
        )));
    }
    Ok(())
}

/// Writes the whole output file into `out`; returns it (flushed, not yet named) and its size.
/// A writer that keeps its last error for the caller of a writer that keeps only its kind.
struct KeepWriteError<'e, W> {
    inner: W,
    error: &'e Cell<Option<std::io::Error>>,
}

impl<W: Write> Write for KeepWriteError<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.inner.write(buf).map_err(|e| self.keep(e))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush().map_err(|e| self.keep(e))
    }
}

impl<W> KeepWriteError<'_, W> {
    fn keep(&self, e: std::io::Error) -> std::io::Error {
        let kind = e.kind();
        self.error.set(Some(e));
        kind.into()
    }
}

fn write_output(
    file: &crate::GgufFile,
    out: KeepWriteError<'_, FileOutput>,
    target: Target,
    specs: &[TensorSpec<'_>],
    options: &Options,
    bar: &ProgressBar,
) -> Result<(FileOutput, u64), CliError> {
    let index = file.index();
    const REPLACED: [&str; 2] = ["general.quantization_version", "general.file_type"];
    let kept: Vec<_> = index
        .metadata()
        .iter()
        .filter(|m| !REPLACED.contains(&m.key.as_str()))
        .collect();
    // The input's byte order (see the module docs).
    let options_out = WriteOptions {
        byte_order: index
            .byte_order()
            .unwrap_or(miniquant::gguf::ByteOrder::Little),
        ..WriteOptions::DEFAULT
    };
    let mut w = writer::stream(
        BufWriter::with_capacity(OUTPUT_BUFFER, out),
        options_out,
        kept.len() as u64 + 2,
        specs,
    )?;
    for m in kept {
        w.key(&m.key, m.value.value_type())?;
        writer::write_value(&mut w, &m.value)?;
    }
    let appended = [
        (
            REPLACED[0],
            Value::Scalar(Scalar::U32(QUANTIZATION_VERSION)),
        ),
        (REPLACED[1], Value::Scalar(Scalar::U32(target.file_type))),
    ];
    for (key, value) in &appended {
        w.key(key, ValueType::U32)?;
        writer::write_value(&mut w, value)?;
    }
    w.finish_header()?;
    let mut converted = Vec::new();
    for (t, spec) in index.tensors().iter().zip(specs) {
        if spec.ggml_type == t.ggml_type {
            // As stored: already in the output's byte order.
            let data = file.data_of(t)?;
            // In pieces smaller than the buffer, so each is copied out of the map (a shrunk input
            // faults there, and the SIGBUS handler names it) rather than passed to write(2),
            // which fails with EFAULT ("write failed: Other").
            for piece in data.chunks(COPY_PIECE) {
                w.tensor_data(piece)?;
            }
            bar.inc(data.len() as u64);
        } else {
            let bytes = spec.bytes().unwrap_or(0) as usize;
            converted.resize(bytes, 0);
            convert(
                &Conversion {
                    file,
                    tensor: t,
                    dst_type: spec.ggml_type,
                },
                &mut converted,
                options,
                bar,
            )?;
            file.native_to_file_order(spec.ggml_type, &mut converted)?;
            w.tensor_data(&converted)?;
        }
    }
    let written = w.written();
    let sink = w.finish()?.into_inner();
    let out = sink
        .into_inner()
        .map_err(|e| CliError::io("cannot write the output file", e.into_error()))?;
    Ok((out.inner, written))
}

/// The output's buffer, and the largest piece of a tensor copied as stored into it at once.
const OUTPUT_BUFFER: usize = 1 << 20;
const COPY_PIECE: usize = OUTPUT_BUFFER / 4;

/// Rows a quantizer thread reads at a time.
const BATCH_ROWS: usize = 64;

/// One tensor's conversion: its rows, read from `file`, to `dst_type`.
struct Conversion<'a> {
    file: &'a crate::GgufFile,
    tensor: &'a crate::TensorEntry,
    dst_type: GgmlType,
}

/// Why a quantizer thread stopped.
enum RowError {
    Kernel(miniquant::Error),
    /// The first non-finite source value of the thread's rows: row, column, value.
    NonFinite(usize, usize, f32),
}

/// Converts a tensor's rows into `dst` (in the kernels' little-endian layout), split into
/// `options.threads` contiguous runs, each thread reading and dequantizing one row at a time into
/// its own buffer.
fn convert(
    job: &Conversion<'_>,
    dst: &mut [u8],
    options: &Options,
    bar: &ProgressBar,
) -> Result<(), CliError> {
    let Conversion {
        file,
        tensor,
        dst_type,
    } = *job;
    let (name, src_type) = (&tensor.name, tensor.ggml_type);
    let ne0 = tensor.cols() as usize;
    let src_row = quant::bytes_for(src_type, ne0)?;
    let dst_row = quant::bytes_for(dst_type, ne0)?;
    if src_row == 0 || dst_row == 0 {
        return Ok(());
    }
    let rows = dst.len() / dst_row;
    let rows_per_thread = rows.div_ceil(options.threads.max(1)).max(1);
    let check_finite = !options.allow_non_finite;
    std::thread::scope(|scope| {
        let workers: Vec<_> = dst
            .chunks_mut(dst_row * rows_per_thread)
            .enumerate()
            .map(|(run, dst)| {
                scope.spawn(move || -> Result<(), RowError> {
                    let mut values = vec![0f32; ne0];
                    let first = run * rows_per_thread;
                    // A batch of rows at a time: for a big-endian file, converted into a buffer
                    // of that size.
                    for (b, dst) in dst.chunks_mut(dst_row * BATCH_ROWS).enumerate() {
                        let start = first + b * BATCH_ROWS;
                        let end = start + dst.len() / dst_row;
                        let src = file
                            .rows_data(tensor, start as u64..end as u64)
                            .map_err(RowError::Kernel)?;
                        let rows = src.chunks_exact(src_row).zip(dst.chunks_exact_mut(dst_row));
                        for (i, (s, d)) in rows.enumerate() {
                            quant::dequantize(src_type, s, &mut values)
                                .map_err(RowError::Kernel)?;
                            if check_finite {
                                if let Some(column) = values.iter().position(|v| !v.is_finite()) {
                                    let row = start + i;
                                    return Err(RowError::NonFinite(row, column, values[column]));
                                }
                            }
                            quant::quantize(dst_type, &values, d).map_err(RowError::Kernel)?;
                            bar.inc(dst_row as u64);
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        // Joined in row order, so the error reported is the tensor's first.
        workers.into_iter().try_for_each(|worker| {
            match worker
                .join()
                .map_err(|_| CliError::Message("a quantizer thread panicked".into()))?
            {
                Ok(()) => Ok(()),
                Err(RowError::Kernel(e)) => Err(CliError::from(e)),
                Err(RowError::NonFinite(row, column, v)) => Err(CliError::Message(format!(
                    "tensor {name:?} holds {v} at row {row}, column {column}; quantizing it to \
                     {dst_type} would give a block of NaN or inf (--allow-non-finite to do it anyway)"
                ))),
            }
        })
    })
}
