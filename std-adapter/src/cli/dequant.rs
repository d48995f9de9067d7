//! `miniquant dequant FILE TENSOR [-o OUT]`: a tensor as raw little-endian f32, row-major.
//!
//! The tensor is dequantized in chunks of whole blocks straight from the memory map, so memory stays
//! small whatever the tensor's size (a big-endian file's tensor is first converted whole to the
//! kernels' little-endian layout).

use std::io::Write;
use std::path::{Path, PathBuf};

use miniquant::quant;

use super::{find_tensor, open_gguf, shape_text, CliError, Output};
use crate::stats::Stats;

/// About this many elements are dequantized at a time.
const CHUNK_ELEMENTS: usize = 1 << 16;

pub(super) fn run<O: Write, E: Write>(
    path: &Path,
    name: &str,
    output: Option<&Path>,
    out: &mut O,
    err: &mut E,
) -> Result<(), CliError> {
    let file = open_gguf(path)?;
    let tensor = find_tensor(&file, path, name)?;
    let t = tensor.ggml_type;
    let data = file
        .native_data_of(tensor)
        .map_err(|e| CliError::Message(format!("tensor {name:?} ({t}): {e}")))?;
    let destination = output.map_or_else(|| default_output(name), Path::to_path_buf);
    let mut sink = Output::create(&destination, out)?;
    let blocks_per_chunk = (CHUNK_ELEMENTS / t.block_size() as usize).max(1);
    let chunk_bytes = blocks_per_chunk * t.block_bytes() as usize;
    let mut stats = Stats::default();
    let mut values = Vec::new();
    let mut bytes = Vec::new();
    let result = data.chunks(chunk_bytes).try_for_each(|chunk| {
        values.resize(quant::elements_in(t, chunk.len())?, 0.0);
        quant::dequantize(t, chunk, &mut values)?;
        stats.add(&values);
        sink.write_f32(&values, &mut bytes)
    });
    let described = sink.describe();
    sink.finish(result)?;
    writeln!(
        err,
        "{name}  {t}  {}  {stats}  -> {described}",
        shape_text(&tensor.shape())
    )
    .map_err(|e| CliError::io("cannot write stderr", e))
}

/// `<TENSOR>.f32` in the current directory, with path separators in the name replaced.
fn default_output(name: &str) -> PathBuf {
    let safe: String = name
        .chars()
        .map(|c| if c == '/' || c == '\\' { '_' } else { c })
        .collect();
    PathBuf::from(format!("{safe}.f32"))
}
