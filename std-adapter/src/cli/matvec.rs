//! `miniquant matvec FILE TENSOR X [-o Y]`: y = W x with the quantized weights read in place from
//! the memory map; x and y raw little-endian f32 or `.npy` (x a 1-D `<f4` array).

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use miniquant::quant::{level, Level};

use crate::parallel;

use super::array_file::{self, F32Input};
use super::dequant::Format;
use super::{
    find_tensor, level_arg, open_gguf_allowing_cut, quoted, shape_text, threads_arg, CliError,
    Output,
};
use crate::npy::{self, Dtype};
use crate::stats::Stats;

/// How to run the product: threads, kernel level, and the format of x and y.
#[derive(Debug, Clone, Args)]
pub struct MatvecOptions {
    /// Threads to split the rows over [default: all cores]; a tensor gets at most one per 64 KiB
    /// of weights. Any count gives the same bytes.
    #[arg(long, value_name = "N", value_parser = threads_arg::parse)]
    pub threads: Option<std::num::NonZeroUsize>,
    /// Kernel level: auto, scalar, neon, dotprod, i8mm, avx2, avx512vnni or amx (a level this
    /// CPU lacks is an error). Every level gives the same bytes.
    /// [default: MINIQUANT_LEVEL, else auto]
    #[arg(long, value_name = "LEVEL", value_parser = level_arg::parse)]
    pub level: Option<Level>,
    /// Format of x and y: `raw` f32 or `npy` (NumPy, `<f4`); default: `npy` for a file named
    /// `.npy`, else raw.
    #[arg(long, value_enum)]
    pub format: Option<Format>,
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
    let F32Input {
        shape: x_shape,
        values: x,
    } = array_file::read_f32(x_path, options.format)?;
    if let Some(x_shape) = x_shape.filter(|s| s.len() != 1) {
        return Err(CliError::Message(format!(
            "{} has shape {}: matvec needs a 1-D vector of {cols} values (x.reshape(-1))",
            quoted(x_path),
            npy::shape_text(&x_shape)
        )));
    }
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
        .map_or_else(parallel::default_threads, std::num::NonZeroUsize::get);
    let mut y = vec![0f32; rows];
    parallel::matvec(level, tensor.ggml_type, &w, rows, cols, &x, threads, &mut y)?;
    let mut stats = Stats::default();
    stats.add(&y);
    let format = Format::resolve(options.format, output);
    let destination = output.map_or_else(
        || PathBuf::from(format!("y.{}", format.extension())),
        Path::to_path_buf,
    );
    let mut sink = Output::create(&destination, out, &[path, x_path])?;
    let result = array_file::start_output(&mut sink, format, Dtype::F32, &[rows as u64])
        .and_then(|()| sink.write_f32(&y, &mut Vec::new()));
    let described = sink.describe();
    sink.finish(result)?;
    writeln!(
        err,
        "{name}  {}  {shape} x [{cols}] -> y: {stats}  -> {described}",
        tensor.ggml_type
    )
    .map_err(|e| CliError::io("cannot write stderr", e))
}
