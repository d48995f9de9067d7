//! `miniquant matvec FILE TENSOR X.f32 [-o Y.f32]`: y = W x with the quantized weights read in place
//! from the memory map.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use miniquant::quant::{level, Level};

use crate::parallel;

use super::{
    find_tensor, open_gguf_allowing_cut, quoted, read_f32_file, shape_text, CliError, Output,
};
use crate::stats::Stats;

/// How to run the product: threads and kernel level.
#[derive(Debug, Clone, Args)]
pub struct MatvecOptions {
    /// Threads to split the rows over [default: all cores]; a tensor gets at most one per 64 KiB
    /// of weights. Any count gives the same bytes.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub threads: Option<u16>,
    /// Kernel level: auto, scalar, neon, dotprod, i8mm, avx2 or avx512vnni (a level this CPU lacks
    /// is an error). Every level gives the same bytes. [default: MINIQUANT_LEVEL, else auto]
    #[arg(long, value_name = "LEVEL", value_parser = parse_level)]
    pub level: Option<Level>,
}

/// `--level`: a level name or `auto`, available on this CPU (else a usage error, exit 2).
fn parse_level(name: &str) -> Result<Level, String> {
    level::resolve(name).map_err(|e| e.to_string())
}

pub(super) fn run<O: Write, E: Write>(
    path: &Path,
    name: &str,
    x_path: &Path,
    output: Option<&Path>,
    options: &MatvecOptions,
    out: &mut O,
    err: &mut E,
) -> Result<(), CliError> {
    let file = open_gguf_allowing_cut(path)?;
    let tensor = find_tensor(&file, path, name)?;
    let shape = shape_text(&tensor.shape());
    let (cols, rows) = match tensor.ne() {
        &[cols, rows] if cols > 0 && rows > 0 => (cols, rows),
        _ => {
            return Err(CliError::Message(format!(
                "tensor {name:?} has shape {shape}: matvec needs a 2-D tensor [rows, cols] with no empty dimension"
            )))
        }
    };
    // Both fit: the tensor's data lies inside the mapped file, and a row holds at least one byte.
    let too_big = || {
        CliError::Message(format!(
            "tensor {name:?} of shape {shape} is too large for this platform"
        ))
    };
    let rows = usize::try_from(rows).map_err(|_| too_big())?;
    let cols = usize::try_from(cols).map_err(|_| too_big())?;
    let x = read_f32_file(x_path)?;
    if x.len() != cols {
        return Err(CliError::Message(format!(
            "{} holds {} f32 values but tensor {name:?} of shape {shape} has {cols} columns",
            quoted(x_path),
            x.len()
        )));
    }
    let w = file
        .native_data_of(tensor)
        .map_err(|e| CliError::Message(format!("tensor {name:?} ({}): {e}", tensor.ggml_type)))?;
    let level = options.level.unwrap_or_else(level::current);
    let threads = options
        .threads
        .map_or_else(parallel::default_threads, usize::from);
    let mut y = vec![0f32; rows];
    parallel::matvec(level, tensor.ggml_type, &w, rows, cols, &x, threads, &mut y)?;
    let mut stats = Stats::default();
    stats.add(&y);
    let destination = output.map_or_else(|| PathBuf::from("y.f32"), Path::to_path_buf);
    let mut sink = Output::create(&destination, out)?;
    let result = sink.write_f32(&y, &mut Vec::new());
    let described = sink.describe();
    sink.finish(result)?;
    writeln!(
        err,
        "{name}  {}  {shape} x [{cols}] -> y: {stats}  -> {described}",
        tensor.ggml_type
    )
    .map_err(|e| CliError::io("cannot write stderr", e))
}
