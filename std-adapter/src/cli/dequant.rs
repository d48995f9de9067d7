//! `miniquant dequant FILE TENSOR [--rows A..B] [--format raw|npy] [-o OUT]`: a tensor (or some of
//! its rows) as little-endian f32, row-major: raw, or a NumPy `.npy` file.
//!
//! The tensor is dequantized in chunks of whole blocks straight from the memory map, so memory stays
//! small whatever the tensor's size (a big-endian file's rows are first converted to the kernels'
//! little-endian layout); a progress bar appears on a terminal if it takes over a second.

use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};

use miniquant::{quant, GgmlType};

use super::progress::Progress;
use super::{find_tensor, one_line, open_gguf_allowing_cut, shape_text, CliError, Output};
use crate::npy;
use crate::stats::Stats;

/// About this many elements are dequantized at a time.
const CHUNK_ELEMENTS: usize = 1 << 16;

/// `dequant`'s arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The GGUF file (`-` for standard input).
    pub file: PathBuf,
    /// The tensor's name.
    pub tensor: String,
    /// Only rows A to B (B excluded; `A..` to the end, `..B` from the start). A row is the first
    /// stored dimension (the last of the shape `inspect` prints); every other dimension is rows.
    #[arg(long, value_name = "A..B", value_parser = parse_rows)]
    pub rows: Option<RowRange>,
    /// Output format: `raw` f32 or `npy` (NumPy); default: `npy` if OUT ends in `.npy`, else raw.
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Output file (`-` for stdout); default: `<TENSOR>.f32` (or `.npy`) in the current directory.
    #[arg(short, long, value_name = "OUT")]
    pub output: Option<PathBuf>,
}

/// The f32 output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Raw little-endian f32, no header.
    Raw,
    /// A NumPy `.npy` file (`<f4`, C order, the tensor's shape).
    Npy,
}

impl Format {
    /// The explicit format, else what the output's extension says.
    pub(super) fn resolve(explicit: Option<Format>, output: Option<&Path>) -> Format {
        explicit.unwrap_or_else(|| {
            let npy_name = output
                .and_then(Path::extension)
                .is_some_and(|e| e.eq_ignore_ascii_case("npy"));
            if npy_name {
                Format::Npy
            } else {
                Format::Raw
            }
        })
    }

    pub(super) fn extension(self) -> &'static str {
        match self {
            Format::Raw => "f32",
            Format::Npy => "npy",
        }
    }
}

/// `A..B`, `A..` or `..B`: a half-open range of rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowRange {
    /// First row.
    pub start: u64,
    /// One past the last row (`None`: to the end).
    pub end: Option<u64>,
}

fn parse_rows(text: &str) -> Result<RowRange, String> {
    let usage = || format!("{text:?} is not a row range: write A..B, A.. or ..B (B excluded)");
    let (a, b) = text.split_once("..").ok_or_else(usage)?;
    let number = |s: &str| s.trim().parse::<u64>().map_err(|_| usage());
    let start = if a.trim().is_empty() { 0 } else { number(a)? };
    let end = if b.trim().is_empty() {
        None
    } else {
        Some(number(b)?)
    };
    if end.is_some_and(|end| end < start) {
        return Err(format!("row range {text:?} ends before it starts"));
    }
    Ok(RowRange { start, end })
}

pub(super) fn run<O: Write, E: Write>(
    args: &Args,
    out: &mut O,
    err: &mut E,
) -> Result<(), CliError> {
    let (path, name) = (args.file.as_path(), args.tensor.as_str());
    let file = open_gguf_allowing_cut(path)?;
    let tensor = find_tensor(&file, path, name)?;
    let t = tensor.ggml_type;
    let all_rows = tensor.rows();
    let rows = match args.rows {
        None => 0..all_rows,
        Some(RowRange { start, end }) => {
            let end = end.unwrap_or(all_rows);
            if end > all_rows || start > end {
                return Err(CliError::Message(format!(
                    "rows {start}..{end} are outside tensor {:?}, which has {all_rows} rows of {} \
                     elements (shape {})",
                    one_line(name),
                    tensor.cols(),
                    shape_text(&tensor.shape())
                )));
            }
            start..end
        }
    };
    let data = file
        .rows_data(tensor, rows.clone())
        .map_err(|e| CliError::Message(format!("tensor {:?} ({t}): {e}", one_line(name))))?;
    // The output's shape: the tensor's, or rows x cols for a row range.
    let shape = if args.rows.is_some() {
        vec![rows.end - rows.start, tensor.cols()]
    } else {
        tensor.shape()
    };
    let format = Format::resolve(args.format, args.output.as_deref());
    let destination = args
        .output
        .clone()
        .unwrap_or_else(|| default_output(name, format));
    let mut sink = Output::create(&destination, out, &[path])?;
    let result = (|| {
        if format == Format::Npy {
            sink.write_all(&npy::f32_header(&shape))?;
        }
        dequantize_to(t, &data, &mut sink, name)
    })();
    let described = sink.describe();
    let stats = sink.finish(result)?;
    writeln!(
        err,
        "{}  {t}  {}{}  {stats}  -> {described}",
        one_line(name),
        shape_text(&tensor.shape()),
        rows_note(&rows, all_rows)
    )
    .map_err(|e| CliError::io("cannot write stderr", e))
}

/// Dequantizes `data` (whole blocks of `t`) chunk by chunk into `sink`; returns the statistics.
pub(super) fn dequantize_to<O: Write>(
    t: GgmlType,
    data: &[u8],
    sink: &mut Output<'_, O>,
    label: &str,
) -> Result<Stats, CliError> {
    let blocks_per_chunk = (CHUNK_ELEMENTS / t.block_size() as usize).max(1);
    let chunk_bytes = blocks_per_chunk * t.block_bytes() as usize;
    let mut stats = Stats::default();
    let mut values = Vec::new();
    let mut bytes = Vec::new();
    let mut progress = Progress::new(label, data.len() as u64);
    let mut done = 0u64;
    for chunk in data.chunks(chunk_bytes) {
        values.resize(quant::elements_in(t, chunk.len())?, 0.0);
        quant::dequantize(t, chunk, &mut values)?;
        stats.add(&values);
        sink.write_f32(&values, &mut bytes)?;
        done += chunk.len() as u64;
        progress.set(done);
    }
    progress.finish();
    Ok(stats)
}

fn rows_note(rows: &Range<u64>, all_rows: u64) -> String {
    if rows.start == 0 && rows.end == all_rows {
        String::new()
    } else {
        format!(" rows {}..{}", rows.start, rows.end)
    }
}

/// `<TENSOR>.f32` (or `.npy`) in the current directory, with path separators in the name replaced.
fn default_output(name: &str, format: Format) -> PathBuf {
    let safe: String = name
        .chars()
        .map(|c| if c == '/' || c == '\\' { '_' } else { c })
        .collect();
    PathBuf::from(format!("{safe}.{}", format.extension()))
}
