//! `miniquant quantize-raw --type TYPE IN.f32 OUT`: raw little-endian f32 in, raw blocks out.

use std::io::Write;
use std::path::Path;

use miniquant::{quant, GgmlType};

use super::{quoted, read_f32_file, CliError, Output};

/// About this many elements are quantized at a time.
const CHUNK_ELEMENTS: usize = 1 << 16;

pub(super) fn run<E: Write>(
    type_name: &str,
    input: &Path,
    output: &Path,
    err: &mut E,
) -> Result<(), CliError> {
    let t = GgmlType::from_name(type_name)
        .ok_or_else(|| CliError::Message(format!("unknown ggml type {type_name:?}")))?;
    let values = read_f32_file(input)?;
    let block = t.block_size() as usize;
    if values.len() % block != 0 {
        return Err(CliError::Message(format!(
            "{} holds {} f32 values, not a whole number of {t} blocks ({block} values each)",
            quoted(input),
            values.len()
        )));
    }
    // The output file is never stdout here, so the `out` writer is a sink.
    let mut unused = std::io::sink();
    let mut sink = Output::create(output, &mut unused)?;
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
