//! `miniquant quantize-raw --type TYPE IN OUT`: little-endian f32 in (raw, or a `<f4` `.npy` whose
//! rows are whole blocks), raw blocks out (a `|u1` `.npy` if OUT is named `.npy`).
//!
//! NaN and infinities are refused (with the position of the first one) unless
//! `--allow-non-finite`: ggml's quantizers turn them into blocks whose scale is NaN or inf, which
//! poison every value of the block and every dot product using it.

use std::io::Write;
use std::path::PathBuf;

use miniquant::{quant, GgmlType};

use super::array_file::{self, F32Input};
use super::dequant::Format;
use super::{quoted, type_arg, CliError, Output};
use crate::npy::{self, Dtype};

/// About this many elements are quantized at a time.
const CHUNK_ELEMENTS: usize = 1 << 16;

/// `quantize-raw`'s arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The ggml type (`Q8_0`, `q4_k`, ...; case-insensitive).
    #[arg(long = "type", value_name = "TYPE", value_parser = type_arg::parse)]
    pub ggml_type: GgmlType,
    /// Quantize NaN and infinite inputs as ggml would (their blocks become NaN or inf).
    #[arg(long)]
    pub allow_non_finite: bool,
    /// Input format: `raw` f32 or `npy` (NumPy, `<f4`); default: `npy` for a file named `.npy`,
    /// else raw.
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Input: little-endian f32, a whole number of blocks (raw or `.npy`).
    pub input: PathBuf,
    /// Output: raw blocks (a `.npy` array of bytes if named `.npy`).
    pub output: PathBuf,
}

pub(super) fn run<E: Write>(args: &Args, err: &mut E) -> Result<(), CliError> {
    let (t, input, output) = (args.ggml_type, args.input.as_path(), args.output.as_path());
    let F32Input { shape, values } = array_file::read_f32(input, args.format)?;
    if !args.allow_non_finite {
        if let Some((i, v)) = values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(CliError::Message(format!(
                "{} holds {v} at value {i} (byte {}); quantizing it would give a block of \
                 NaN or inf (--allow-non-finite to do it anyway)",
                quoted(input),
                i * 4
            )));
        }
    }
    let block = t.block_size() as usize;
    // Blocks must not straddle the rows of a matrix.
    if let Some(&cols) = shape.as_deref().and_then(<[u64]>::last) {
        if shape.as_deref().is_some_and(|s| s.len() > 1) && cols % block as u64 != 0 {
            return Err(CliError::Message(format!(
                "{} has shape {}: rows of {cols} values are not whole {t} blocks ({block} values each)",
                quoted(input),
                npy::shape_text(shape.as_deref().unwrap_or_default())
            )));
        }
    }
    if values.len() % block != 0 {
        return Err(CliError::Message(format!(
            "{} holds {} f32 values, not a whole number of {t} blocks ({block} values each)",
            quoted(input),
            values.len()
        )));
    }
    // The output file is never stdout here, so the `out` writer is a sink.
    let mut unused = std::io::sink();
    let bytes = quant::bytes_for(t, values.len())?;
    let mut sink = Output::create(output, &mut unused, &[input])?;
    let mut blocks = Vec::new();
    let chunk = (CHUNK_ELEMENTS / block).max(1) * block;
    let out_format = Format::resolve(None, Some(output));
    let result = array_file::start_output(&mut sink, out_format, Dtype::U8, &[bytes as u64])
        .and_then(|()| {
            values.chunks(chunk).try_for_each(|part| {
                blocks.resize(quant::bytes_for(t, part.len())?, 0);
                quant::quantize(t, part, &mut blocks)?;
                sink.write_all(&blocks)
            })
        });
    let described = sink.describe();
    sink.finish(result)?;
    writeln!(
        err,
        "{} f32 values -> {} {t} blocks, {bytes} bytes -> {described}",
        values.len(),
        values.len() / block
    )
    .map_err(|e| CliError::io("cannot write stderr", e))
}
