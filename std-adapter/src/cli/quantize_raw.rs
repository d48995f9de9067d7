//! `miniquant quantize-raw --type TYPE IN.f32 OUT`: raw little-endian f32 in, raw blocks out.
//!
//! NaN and infinities are refused (with the position of the first one) unless
//! `--allow-non-finite`: ggml's quantizers turn them into blocks whose scale is NaN or inf, which
//! poison every value of the block and every dot product using it.

use std::io::Write;
use std::path::PathBuf;

use miniquant::{quant, GgmlType};

use super::{quoted, read_f32_file, type_arg, CliError, Output};

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
    /// Input: raw little-endian f32, a whole number of blocks.
    pub input: PathBuf,
    /// Output: raw blocks.
    pub output: PathBuf,
}

pub(super) fn run<E: Write>(args: &Args, err: &mut E) -> Result<(), CliError> {
    let (t, input, output) = (args.ggml_type, args.input.as_path(), args.output.as_path());
    let values = read_f32_file(input)?;
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
    if values.len() % block != 0 {
        return Err(CliError::Message(format!(
            "{} holds {} f32 values, not a whole number of {t} blocks ({block} values each)",
            quoted(input),
            values.len()
        )));
    }
    let mut stdout = std::io::stdout();
    let mut sink = Output::create(output, &mut stdout, &[input])?;
    let mut blocks = Vec::new();
    let chunk = (CHUNK_ELEMENTS / block).max(1) * block;
    let result = values.chunks(chunk).try_for_each(|part| {
        blocks.resize(quant::bytes_for(t, part.len())?, 0);
        quant::quantize(t, part, &mut blocks)?;
        sink.write_all(&blocks)
    });
    let described = sink.describe();
    sink.finish(result)?;
    let bytes = quant::bytes_for(t, values.len())?;
    writeln!(
        err,
        "{} f32 values -> {} {t} blocks, {bytes} bytes -> {described}",
        values.len(),
        values.len() / block
    )
    .map_err(|e| CliError::io("cannot write stderr", e))
}
