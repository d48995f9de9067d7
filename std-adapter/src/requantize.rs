//! Converting a GGUF file's weight tensors to another type the way
//! `llama-quantize --pure --allow-requantize` does, keeping everything else ([`requantize`], or
//! [`Plan`] to check before creating the output).
//!
//! - Which tensors: those llama.cpp quantizes (at least 2 dimensions, a name ending in `weight`,
//!   not a norm, not one of its small or special tensors, see [`allows_quantization`]); the others
//!   (1-D norms and biases, ...) are copied unchanged.
//! - Which type: the target for all of them, except where the row length is not a multiple of its
//!   block size: then ggml's fallback (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K/Q3_K/TQ* ->
//!   Q4_0, IQ4_XS -> IQ4_NL), and F16 if even that does not fit ([`target_for`]).
//! - How: the source values (F32 as stored; F16, BF16 and quantized types dequantized) are quantized
//!   row by row with the core's quantizers, which are byte-identical to ggml's; rows are spread over
//!   [`Options::threads`] threads. A tensor already of its target type is copied.
//! - NaN and infinities in a converted tensor's source values are refused
//!   ([`RequantizeError::NonFinite`]: tensor, row and column of the first one) unless
//!   [`Options::allow_non_finite`]: ggml's quantizers turn them into blocks whose scale is NaN or
//!   inf, which poison every value of the block.
//! - Byte order: the output's is the input's. A big-endian file's rows are read in the kernels'
//!   layout ([`crate::GgufFile::rows_data`]) and the converted blocks turned back into big-endian
//!   ones ([`crate::GgufFile::native_to_file_order`]); a conversion from or to a type without a
//!   big-endian layout is refused before anything is written ([`BigEndianRefusal`]).
//! - Metadata: copied in order; `general.quantization_version` (2) and `general.file_type` (the
//!   llama.cpp file type of the target) are removed and appended last, as llama.cpp's gguf writer
//!   does.
//!
//! The output is any [`std::io::Write`]; a file that should get its name only when complete is the
//! caller's to create ([`crate::output_file::OutputFile`]).

use std::cell::Cell;
use std::fmt;
use std::io::{self, BufWriter, Write};
use std::num::NonZeroUsize;
use std::sync::{Mutex, PoisonError};

use miniquant::gguf::{ByteOrder, Scalar, TensorSpec, ValueType, WriteOptions};
use miniquant::quant::byte_order::big_endian_layout_known;
use miniquant::{quant, GgmlType};

use crate::file::GgufFile;
use crate::index::TensorEntry;
use crate::value::Value;
use crate::writer;

/// A target type and the llama.cpp file type written to `general.file_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// The tensor type.
    pub ggml_type: GgmlType,
    /// `llama_ftype` (for K-quants the `_M` mix, as llama-quantize names `Q4_K` and so on).
    pub file_type: u32,
}

impl Target {
    /// Every target, with its `llama_ftype`: the types ggml quantizes without an importance
    /// matrix.
    pub const ALL: [Target; 17] = [
        Target::new(GgmlType::F32, 0),
        Target::new(GgmlType::F16, 1),
        Target::new(GgmlType::BF16, 32),
        Target::new(GgmlType::Q4_0, 2),
        Target::new(GgmlType::Q4_1, 3),
        Target::new(GgmlType::Q5_0, 8),
        Target::new(GgmlType::Q5_1, 9),
        Target::new(GgmlType::Q8_0, 7),
        Target::new(GgmlType::Q2_K, 10),
        Target::new(GgmlType::Q3_K, 12),
        Target::new(GgmlType::Q4_K, 15),
        Target::new(GgmlType::Q5_K, 17),
        Target::new(GgmlType::Q6_K, 18),
        Target::new(GgmlType::IQ4_NL, 25),
        Target::new(GgmlType::IQ4_XS, 30),
        Target::new(GgmlType::TQ1_0, 36),
        Target::new(GgmlType::TQ2_0, 37),
    ];

    const fn new(ggml_type: GgmlType, file_type: u32) -> Self {
        Self {
            ggml_type,
            file_type,
        }
    }

    /// The target of type `t`, if ggml quantizes to it without an importance matrix.
    pub fn of(t: GgmlType) -> Option<Target> {
        Self::ALL.into_iter().find(|target| target.ggml_type == t)
    }
}

/// `general.quantization_version`: ggml's `GGML_QNT_VERSION`.
const QUANTIZATION_VERSION: u32 = 2;

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
/// either; `None` where ggml has no fallback.
pub fn target_for(t: GgmlType, ne0: u64) -> Option<GgmlType> {
    let fits = |u: GgmlType| ne0.is_multiple_of(u64::from(u.block_size()));
    if fits(t) {
        return Some(t);
    }
    let fallback = fallback_of(t)?;
    Some(if fits(fallback) {
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

/// What a conversion does (from [`Plan::summary`]) or did (from [`requantize`]).
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
    /// Output size in bytes (0 until written).
    pub bytes_out: u64,
}

impl Summary {
    /// Converted tensors that got the target type itself (not a fallback).
    pub fn to_target(&self) -> usize {
        self.converted - self.fallbacks.iter().map(|f| f.tensors).sum::<usize>()
    }
}

/// How [`requantize`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Threads that quantize rows.
    pub threads: NonZeroUsize,
    /// Quantize NaN and infinite source values as ggml would instead of refusing them.
    pub allow_non_finite: bool,
}

/// Every core, refusing non-finite values.
impl Default for Options {
    fn default() -> Self {
        Self {
            threads: std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN),
            allow_non_finite: false,
        }
    }
}

/// A conversion that cannot be done in a big-endian file (whose output would be big-endian too):
/// only the types `gguf-convert-endian` defines have a known big-endian layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BigEndianRefusal {
    /// A tensor to convert has a type whose big-endian layout is unknown: it cannot be read.
    Source {
        /// The tensor.
        tensor: String,
        /// Its type.
        ggml_type: GgmlType,
    },
    /// A tensor would become a type without a known big-endian layout.
    Target {
        /// The tensor.
        tensor: String,
        /// The type it would become.
        new_type: GgmlType,
        /// The requested target: `new_type` is ggml's fallback from it if they differ.
        target: GgmlType,
        /// The tensor's row length (ggml's `ne[0]`).
        row_length: u64,
    },
}

/// Says what cannot be done, after "the input is big-endian and ".
impl fmt::Display for BigEndianRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Source { tensor, ggml_type } => {
                let why = miniquant::Error::Unsupported {
                    ggml_type: *ggml_type,
                    op: miniquant::error::Op::FromBigEndian,
                };
                write!(f, "tensor {tensor:?} is {ggml_type}: {why}")
            }
            Self::Target {
                tensor,
                new_type,
                target,
                row_length,
            } => {
                let writable: Vec<&str> = Target::ALL
                    .iter()
                    .filter(|t| big_endian_layout_known(t.ggml_type))
                    .map(|t| t.ggml_type.name())
                    .collect();
                write!(f, "tensor {tensor:?} would become {new_type}")?;
                if new_type != target {
                    write!(
                        f,
                        " (ggml's fallback from {target} for rows of {row_length} values)"
                    )?;
                }
                write!(
                    f,
                    ", which has no big-endian layout (a big-endian output can be {}): choose one \
                     of those, or convert the file to little-endian first",
                    writable.join(", ")
                )
            }
        }
    }
}

/// Why a conversion failed.
#[derive(Debug)]
pub enum RequantizeError {
    /// A tensor's rows are not whole blocks of the target type, and ggml defines no fallback.
    NoFallback {
        /// The tensor.
        tensor: String,
        /// The target type.
        target: GgmlType,
        /// The tensor's row length (ggml's `ne[0]`).
        row_length: u64,
    },
    /// The input is big-endian and a conversion has no big-endian layout on one side.
    BigEndian(BigEndianRefusal),
    /// A converted tensor holds NaN or an infinity (the first one, in row order) and
    /// [`Options::allow_non_finite`] is off.
    NonFinite {
        /// The tensor.
        tensor: String,
        /// The type it was being converted to.
        new_type: GgmlType,
        /// The row (0-based, in ggml's row order: the slowest-varying index is the last of `ne`).
        row: u64,
        /// The column (0-based, within the row).
        column: u64,
        /// The value.
        value: f32,
    },
    /// Reading or converting a tensor's data failed (data outside the file, a type the kernels
    /// cannot convert, ...).
    Tensor {
        /// The tensor.
        tensor: String,
        /// What failed.
        error: miniquant::Error,
    },
    /// The GGUF writer refused the output or could not write it.
    Write(miniquant::Error),
    /// Flushing the output failed.
    Io(io::Error),
    /// A quantizer thread panicked.
    WorkerPanicked,
}

impl fmt::Display for RequantizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoFallback {
                tensor,
                target,
                row_length,
            } => write!(
                f,
                "tensor {tensor:?}: rows of {row_length} values are not whole {target} blocks \
                 and ggml defines no fallback for {target}"
            ),
            Self::BigEndian(refusal) => write!(f, "the input is big-endian and {refusal}"),
            Self::NonFinite {
                tensor,
                new_type,
                row,
                column,
                value,
            } => write!(
                f,
                "tensor {tensor:?} holds {value} at row {row}, column {column}; quantizing it to \
                 {new_type} would give a block of NaN or inf"
            ),
            Self::Tensor { tensor, error } => write!(f, "tensor {tensor:?}: {error}"),
            Self::Write(error) => error.fmt(f),
            Self::Io(error) => write!(f, "cannot write the output: {error}"),
            Self::WorkerPanicked => f.write_str("a quantizer thread panicked"),
        }
    }
}

impl std::error::Error for RequantizeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Tensor { error, .. } | Self::Write(error) => Some(error),
            Self::Io(error) => Some(error),
            _ => None,
        }
    }
}

/// Converts the tensors of `file` to `target` and writes the whole new file to `output` (see the
/// module docs); [`Plan::new`] then [`Plan::write`]. `progress(done, total)` is told the bytes of
/// tensor data written (see [`Plan::write`]).
///
/// Nothing is written if a tensor cannot be converted at all (no fallback, no big-endian layout);
/// a failure while writing (a non-finite value, an I/O error) leaves `output` partly written:
/// write to a file that gets its name only when complete ([`crate::output_file::OutputFile`]).
///
/// ```
/// use miniquant_std::miniquant::GgmlType;
/// use miniquant_std::requantize::{requantize, Options, Target};
///
/// let file = miniquant_std::GgufFile::from_reader(&miniquant_std::example::tiny_gguf()[..])?;
/// let target = Target::of(GgmlType::Q6_K).expect("a target");
/// let mut out = Vec::new();
/// let summary = requantize(&file, &mut out, target, &Options::default(), &|done, total| {
///     eprint!("\r{done}/{total} bytes");
/// })?;
/// // Q6_K needs rows of 256 values: a tensor of rows of 32 gets ggml's fallback, Q8_0.
/// assert_eq!((summary.to_target(), summary.fallbacks[0].ggml_type), (1, GgmlType::Q8_0));
/// let converted = miniquant_std::GgufFile::from_reader(&out[..])?;
/// let down = converted.index().tensor("blk.0.ffn_down.weight").expect("kept");
/// assert_eq!(down.ggml_type, GgmlType::Q6_K);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn requantize<W: Write>(
    file: &GgufFile,
    output: W,
    target: Target,
    options: &Options,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<Summary, RequantizeError> {
    Plan::new(file, target)?.write(output, options, progress)
}

/// A conversion checked and not yet written: each tensor's new type, the counts, and every refusal
/// that does not depend on the values ([`RequantizeError::NoFallback`],
/// [`RequantizeError::BigEndian`]), so that a caller creates its output only for a conversion
/// that can run.
#[derive(Debug)]
pub struct Plan<'f> {
    file: &'f GgufFile,
    target: Target,
    /// Each tensor's new type, in the file's order.
    types: Vec<GgmlType>,
    summary: Summary,
}

impl<'f> Plan<'f> {
    /// Chooses each tensor's type for `target` and refuses what cannot be done.
    pub fn new(file: &'f GgufFile, target: Target) -> Result<Self, RequantizeError> {
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
                target_for(target.ggml_type, ne0).ok_or_else(|| RequantizeError::NoFallback {
                    tensor: t.name.clone(),
                    target: target.ggml_type,
                    row_length: ne0,
                })?
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
        summary.fallbacks = fallbacks.into_values().collect();
        if index.byte_order() == Some(ByteOrder::Big) {
            refuse_unknown_big_endian_layouts(index.tensors(), &types, target.ggml_type)?;
        }
        Ok(Self {
            file,
            target,
            types,
            summary,
        })
    }

    /// Each tensor's new type, in the file's order.
    pub fn types(&self) -> &[GgmlType] {
        &self.types
    }

    /// The counts ([`Summary::bytes_out`] is 0).
    pub fn summary(&self) -> &Summary {
        &self.summary
    }

    /// Writes the whole output file into `output` and returns the summary.
    ///
    /// `progress(done, total)` counts bytes of tensor data (the header aside): called once with
    /// `done` 0 before any, then as copied tensors and batches of converted rows are done, from
    /// the quantizer threads too, one call at a time and with `done` never decreasing; on success
    /// the last call has `done == total`.
    pub fn write<W: Write>(
        self,
        output: W,
        options: &Options,
        progress: &(dyn Fn(u64, u64) + Sync),
    ) -> Result<Summary, RequantizeError> {
        let Self {
            file,
            target,
            types,
            mut summary,
        } = self;
        let specs: Vec<TensorSpec<'_>> = file
            .index()
            .tensors()
            .iter()
            .zip(&types)
            .map(|(t, &ggml_type)| TensorSpec {
                name: &t.name,
                ggml_type,
                ne: t.ne(),
            })
            .collect();
        let total = specs.iter().filter_map(TensorSpec::bytes).sum();
        let progress = Progress {
            done: Mutex::new(0),
            total,
            report: progress,
        };
        progress.advance(0);
        summary.bytes_out = write_output(file, output, target, &specs, options, &progress)?;
        Ok(summary)
    }
}

/// For a big-endian input: every converted tensor's source and target type must have a big-endian
/// layout (the output is big-endian too).
fn refuse_unknown_big_endian_layouts(
    tensors: &[TensorEntry],
    types: &[GgmlType],
    target: GgmlType,
) -> Result<(), RequantizeError> {
    let converted = tensors.iter().zip(types).filter(|(t, &u)| t.ggml_type != u);
    for (tensor, &new_type) in converted {
        let refusal = if !big_endian_layout_known(tensor.ggml_type) {
            BigEndianRefusal::Source {
                tensor: tensor.name.clone(),
                ggml_type: tensor.ggml_type,
            }
        } else if !big_endian_layout_known(new_type) {
            BigEndianRefusal::Target {
                tensor: tensor.name.clone(),
                new_type,
                target,
                row_length: tensor.cols(),
            }
        } else {
            continue;
        };
        return Err(RequantizeError::BigEndian(refusal));
    }
    Ok(())
}

/// The bytes of tensor data written so far, told to the caller's callback under a lock, so its
/// calls come one at a time and in order.
struct Progress<'p> {
    done: Mutex<u64>,
    total: u64,
    report: &'p (dyn Fn(u64, u64) + Sync),
}

impl Progress<'_> {
    fn advance(&self, bytes: u64) {
        // A callback that panicked poisons the lock; its thread's failure is reported on its own.
        let mut done = self.done.lock().unwrap_or_else(PoisonError::into_inner);
        *done += bytes;
        (self.report)(*done, self.total);
    }
}

/// Writes the whole output file into `output`; returns its size. A failed write is
/// [`RequantizeError::Io`] with the OS's error (the core writer keeps only its kind).
fn write_output<W: Write>(
    file: &GgufFile,
    output: W,
    target: Target,
    specs: &[TensorSpec<'_>],
    options: &Options,
    progress: &Progress<'_>,
) -> Result<u64, RequantizeError> {
    let write_error = Cell::new(None);
    let output = KeepWriteError {
        inner: output,
        error: &write_error,
    };
    write_through(file, output, target, specs, options, progress).map_err(|e| {
        match (e, write_error.take()) {
            (RequantizeError::Write(_) | RequantizeError::Io(_), Some(io)) => {
                RequantizeError::Io(io)
            }
            (e, _) => e,
        }
    })
}

/// A writer that keeps its last error for the caller of a writer that keeps only its kind.
struct KeepWriteError<'e, W> {
    inner: W,
    error: &'e Cell<Option<io::Error>>,
}

impl<W: Write> Write for KeepWriteError<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf).map_err(|e| self.keep(e))
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush().map_err(|e| self.keep(e))
    }
}

impl<W> KeepWriteError<'_, W> {
    fn keep(&self, e: io::Error) -> io::Error {
        let kind = e.kind();
        self.error.set(Some(e));
        kind.into()
    }
}

/// [`write_output`]'s work.
fn write_through<W: Write>(
    file: &GgufFile,
    output: W,
    target: Target,
    specs: &[TensorSpec<'_>],
    options: &Options,
    progress: &Progress<'_>,
) -> Result<u64, RequantizeError> {
    let index = file.index();
    const REPLACED: [&str; 2] = ["general.quantization_version", "general.file_type"];
    let kept: Vec<_> = index
        .metadata()
        .iter()
        .filter(|m| !REPLACED.contains(&m.key.as_str()))
        .collect();
    // The input's byte order (see the module docs).
    let options_out = WriteOptions {
        byte_order: index.byte_order().unwrap_or(ByteOrder::Little),
        ..WriteOptions::DEFAULT
    };
    let mut w = writer::stream(
        BufWriter::with_capacity(OUTPUT_BUFFER, output),
        options_out,
        kept.len() as u64 + 2,
        specs,
    )
    .map_err(RequantizeError::Write)?;
    for m in kept {
        w.key(&m.key, m.value.value_type())
            .map_err(RequantizeError::Write)?;
        writer::write_value(&mut w, &m.value).map_err(RequantizeError::Write)?;
    }
    let appended = [
        (
            REPLACED[0],
            Value::Scalar(Scalar::U32(QUANTIZATION_VERSION)),
        ),
        (REPLACED[1], Value::Scalar(Scalar::U32(target.file_type))),
    ];
    for (key, value) in &appended {
        w.key(key, ValueType::U32).map_err(RequantizeError::Write)?;
        writer::write_value(&mut w, value).map_err(RequantizeError::Write)?;
    }
    w.finish_header().map_err(RequantizeError::Write)?;
    let mut converted = Vec::new();
    for (t, spec) in index.tensors().iter().zip(specs) {
        let of_tensor = |error| RequantizeError::Tensor {
            tensor: t.name.clone(),
            error,
        };
        if spec.ggml_type == t.ggml_type {
            // As stored: already in the output's byte order.
            let data = file.data_of(t).map_err(of_tensor)?;
            // In pieces smaller than the buffer, so each is copied out of the map (a shrunk input
            // faults there, and the SIGBUS handler names it) rather than passed to write(2),
            // which fails with EFAULT ("write failed: Other").
            for piece in data.chunks(COPY_PIECE) {
                w.tensor_data(piece).map_err(RequantizeError::Write)?;
            }
            progress.advance(data.len() as u64);
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
                progress,
            )?;
            file.native_to_file_order(spec.ggml_type, &mut converted)
                .map_err(of_tensor)?;
            w.tensor_data(&converted).map_err(RequantizeError::Write)?;
        }
    }
    let written = w.written();
    let sink = w.finish().map_err(RequantizeError::Write)?.into_inner();
    sink.into_inner()
        .map_err(|e| RequantizeError::Io(e.into_error()))?;
    Ok(written)
}

/// The output's buffer, and the largest piece of a tensor copied as stored into it at once.
const OUTPUT_BUFFER: usize = 1 << 20;
const COPY_PIECE: usize = OUTPUT_BUFFER / 4;

/// Rows a quantizer thread reads (and reports progress for) at a time.
const BATCH_ROWS: usize = 64;

/// One tensor's conversion: its rows, read from `file`, to `dst_type`.
struct Conversion<'a> {
    file: &'a GgufFile,
    tensor: &'a TensorEntry,
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
    progress: &Progress<'_>,
) -> Result<(), RequantizeError> {
    let Conversion {
        file,
        tensor,
        dst_type,
    } = *job;
    let (name, src_type) = (&tensor.name, tensor.ggml_type);
    let of_tensor = |error| RequantizeError::Tensor {
        tensor: name.clone(),
        error,
    };
    let ne0 = tensor.cols() as usize;
    let src_row = quant::bytes_for(src_type, ne0).map_err(of_tensor)?;
    let dst_row = quant::bytes_for(dst_type, ne0).map_err(of_tensor)?;
    if src_row == 0 || dst_row == 0 {
        return Ok(());
    }
    let rows = dst.len() / dst_row;
    let rows_per_thread = rows.div_ceil(options.threads.get()).max(1);
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
                        }
                        progress.advance(dst.len() as u64);
                    }
                    Ok(())
                })
            })
            .collect();
        // Joined in row order, so the error reported is the tensor's first.
        workers.into_iter().try_for_each(|worker| {
            match worker.join().map_err(|_| RequantizeError::WorkerPanicked)? {
                Ok(()) => Ok(()),
                Err(RowError::Kernel(e)) => Err(of_tensor(e)),
                Err(RowError::NonFinite(row, column, value)) => Err(RequantizeError::NonFinite {
                    tensor: name.clone(),
                    new_type: dst_type,
                    row: row as u64,
                    column: column as u64,
                    value,
                }),
            }
        })
    })
}
