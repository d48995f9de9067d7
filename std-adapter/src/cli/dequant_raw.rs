//! `miniquant dequant-raw --type TYPE IN OUT`: raw blocks in (or a `|u1` `.npy` of them, as
//! `quantize-raw` writes to a `.npy` name), little-endian f32 out (raw or `.npy`); the twin of
//! `quantize-raw`.

use std::io::Write;
use std::path::PathBuf;

use miniquant::GgmlType;

use super::dequant::{dequantize_to, Format};
use super::{array_file, quoted, type_arg, CliError, Output};
use crate::npy::Dtype;

/// `dequant-raw`'s arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The ggml type of the blocks (`Q8_0`, `q4_k`, ...; case-insensitive).
    #[arg(long = "type", value_name = "TYPE", value_parser = type_arg::parse)]
    pub ggml_type: GgmlType,
    /// Output format: `raw` f32 or `npy`; default: `npy` if OUT ends in `.npy`, else raw.
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Input: raw blocks, a whole number of them (a `.npy` array of bytes if named `.npy`).
    pub input: PathBuf,
    /// Output (`-` for stdout).
    pub output: PathBuf,
}

pub(super) fn run<O: Write, E: Write>(
    args: &Args,
    out: &mut O,
    err: &mut E,
) -> Result<(), CliError> {
    let (t, input) = (args.ggml_type, args.input.as_path());
    let blocks = array_file::read_blocks(input)?;
    let block_bytes = t.block_bytes() as usize;
    if blocks.len() % block_bytes != 0 {
        return Err(CliError::Message(format!(
            "{} is {} bytes, not a whole number of {t} blocks ({block_bytes} bytes each)",
            quoted(input),
            blocks.len()
        )));
    }
    let elements = blocks.len() / block_bytes * t.block_size() as usize;
    let format = Format::resolve(args.format, Some(&args.output));
    let mut sink = Output::create(&args.output, out, &[input])?;
    let result = (|| {
        array_file::start_output(&mut sink, format, Dtype::F32, &[elements as u64])?;
        dequantize_to(t, &blocks, &mut sink, &input.display().to_string())
    })();
    let described = sink.describe();
    let stats = sink.finish(result)?;
    writeln!(
        err,
        "{} {t} blocks -> {stats}  -> {described}",
        blocks.len() / block_bytes
    )
    .map_err(|e| CliError::io("cannot write stderr", e))
}
