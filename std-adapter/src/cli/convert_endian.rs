//! `miniquant convert-endian IN OUT --order big|little|native`: writes IN in another byte order,
//! byte-identical to what gguf-py's `gguf-convert-endian IN ORDER` makes of a copy of IN, but into
//! a new file (the tool converts in place and asks for a typed YES).
//!
//! - What changes, as in the tool: every number of the header (version, counts, lengths, values,
//!   dimensions, types, offsets); the tensor data of the types the tool converts (F32, F16 and BF16
//!   element by element, the f16 fields of Q4_0, Q8_0, Q4_K and Q6_K blocks, nothing in MXFP4 and
//!   NVFP4: [`miniquant::quant::byte_order`]). The padding, any bytes between or after tensors and
//!   the magic stay as they are.
//! - A tensor of any other type (I8 to F64 included, which the tool refuses too) is an error naming
//!   tensor and type, before anything is written; so is a version-1 file (the tool reads versions 2
//!   and 3 only) and a tensor sharing bytes with another.
//! - A file already in the requested order is copied unchanged.
//! - The header is re-encoded from the index in the new order; it must first re-encode in the old
//!   order to the input's exact bytes, so nothing the index does not hold (a non-canonical
//!   encoding) can be lost.
//! - The output goes through the commands' one [`Output`]: named only when complete, never an
//!   input (exit 2), `-` for stdout.

use std::io::Write;
use std::path::{Path, PathBuf};

use miniquant::gguf::ByteOrder;
use miniquant::quant::byte_order::big_endian_to_native_in_place;
use miniquant::GgmlType;

use super::{open_gguf, quoted, CliError, Output};
use crate::file::GgufFile;
use crate::index::Index;
use crate::writer::GgufWriter;

/// `convert-endian`'s arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The GGUF file to read (`-` for standard input).
    pub input: PathBuf,
    /// The GGUF file to write (not the input).
    pub output: PathBuf,
    /// Byte order of the output: `big`, `little` or `native` (this machine's).
    #[arg(long, value_enum)]
    pub order: Order,
}

/// The byte orders `--order` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Order {
    /// Big-endian (s390x, POWER in big-endian mode).
    Big,
    /// Little-endian (what llama.cpp writes, and what x86-64 and most ARM machines run).
    Little,
    /// This machine's byte order.
    Native,
}

impl Order {
    fn byte_order(self) -> ByteOrder {
        match self {
            Self::Big => ByteOrder::Big,
            Self::Little => ByteOrder::Little,
            Self::Native if cfg!(target_endian = "big") => ByteOrder::Big,
            Self::Native => ByteOrder::Little,
        }
    }
}

/// The tensor types `gguf-convert-endian` converts; it refuses every other.
const CONVERTED: [GgmlType; 9] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q4_0,
    GgmlType::Q8_0,
    GgmlType::Q4_K,
    GgmlType::Q6_K,
    GgmlType::MXFP4,
    GgmlType::NVFP4,
];

/// About this many bytes of tensor data are converted at a time.
const CHUNK_BYTES: usize = 1 << 20;

pub(super) fn run<O: Write, E: Write>(
    args: &Args,
    out: &mut O,
    err: &mut E,
) -> Result<(), CliError> {
    let (input, output) = (args.input.as_path(), args.output.as_path());
    let file = open_gguf(input)?;
    let index = file.index();
    let from = index.byte_order().unwrap_or(ByteOrder::Little);
    let to = args.order.byte_order();
    let name = |order: ByteOrder| order.name();
    // Everything that can refuse the file is checked before the output exists.
    let conversion = if from == to {
        None
    } else {
        Some((headers(&file, input, to)?, tensor_regions(index, input)?))
    };
    let mut sink = Output::create(output, out, &[input])?;
    let written = match &conversion {
        None => sink.write_all(file.bytes()),
        Some((header, regions)) => write_converted(&file, header, regions, &mut sink)
            .map_err(|e| CliError::io(format!("cannot write {}", sink.describe()), e)),
    };
    let described = sink.describe();
    sink.finish(written)?;
    let done = match &conversion {
        None => format!("already {}-endian: copied unchanged", name(to)),
        Some((_, regions)) => format!(
            "{}-endian to {}-endian, {} tensors",
            name(from),
            name(to),
            regions.len()
        ),
    };
    writeln!(
        err,
        "wrote {described} ({} bytes): {done}",
        file.bytes().len()
    )
    .map_err(|e| CliError::io("cannot write stderr", e))
}

/// The header in byte order `to`, up to the end of the tensor infos (the padding after them is
/// copied from the input). Errors: a version the tool does not read, a tensor type it does not
/// convert, or a header the index does not re-encode exactly.
fn headers(file: &GgufFile, input: &Path, to: ByteOrder) -> Result<Vec<u8>, CliError> {
    let index = file.index();
    let version = index.version();
    if !(2..=3).contains(&version) {
        return Err(CliError::Message(format!(
            "{} is a GGUF version {version} file; gguf-convert-endian converts versions 2 and 3 \
             only",
            quoted(input)
        )));
    }
    if let Some(t) = index
        .tensors()
        .iter()
        .find(|t| !CONVERTED.contains(&t.ggml_type))
    {
        let names: Vec<&str> = CONVERTED.iter().map(|t| t.name()).collect();
        return Err(CliError::Message(format!(
            "tensor {:?} of {} is {}, whose byte order gguf-convert-endian does not define (it \
             converts {} only)",
            t.name,
            quoted(input),
            t.ggml_type,
            names.join(", ")
        )));
    }
    let mut writer = GgufWriter::new();
    for entry in index.metadata() {
        writer.kv(&entry.key, entry.value.clone());
    }
    for t in index.tensors() {
        writer.tensor_at(&t.name, t.ggml_type.code(), t.ne(), t.offset, Vec::new());
    }
    let from = index.byte_order().unwrap_or(ByteOrder::Little);
    let original = writer.format(version, from).directory_bytes();
    if file.bytes().get(..original.len()) != Some(original.as_slice()) {
        return Err(CliError::Message(format!(
            "the header of {} does not re-encode to its own bytes, so it cannot be converted \
             exactly",
            quoted(input)
        )));
    }
    Ok(writer.format(version, to).directory_bytes())
}

/// A tensor's data: absolute byte range in the file, and type.
struct Region {
    start: usize,
    end: usize,
    ggml_type: GgmlType,
}

/// The tensors' data ranges in file order; an error if two share bytes (their bytes would be
/// swapped twice by the tool, so no output could match it).
fn tensor_regions(index: &Index, input: &Path) -> Result<Vec<Region>, CliError> {
    let mut regions = Vec::with_capacity(index.tensors().len());
    for t in index.tensors() {
        let range = index.data_range(t)?;
        let too_big = || CliError::Message(format!("tensor {:?} lies beyond memory", t.name));
        regions.push((
            Region {
                start: usize::try_from(range.start).map_err(|_| too_big())?,
                end: usize::try_from(range.end).map_err(|_| too_big())?,
                ggml_type: t.ggml_type,
            },
            &t.name,
        ));
    }
    regions.sort_by_key(|(r, _)| r.start);
    for pair in regions.windows(2) {
        let [(a, a_name), (b, b_name)] = pair else {
            continue;
        };
        if b.start < a.end {
            return Err(CliError::Message(format!(
                "tensors {a_name:?} and {b_name:?} of {} share bytes, so their byte order is \
                 ambiguous",
                quoted(input)
            )));
        }
    }
    Ok(regions.into_iter().map(|(r, _)| r).collect())
}

/// Writes `header`, then the rest of the file with each tensor's data converted.
fn write_converted(
    file: &GgufFile,
    header: &[u8],
    regions: &[Region],
    w: &mut impl Write,
) -> std::io::Result<()> {
    let bytes = file.bytes();
    w.write_all(header)?;
    let mut at = header.len();
    let mut buffer = Vec::with_capacity(CHUNK_BYTES);
    for region in regions.iter().filter(|r| r.end > r.start) {
        w.write_all(bytes.get(at..region.start).unwrap_or_default())?;
        let block = region.ggml_type.block_bytes().max(1) as usize;
        let data = bytes.get(region.start..region.end).unwrap_or_default();
        for chunk in data.chunks((CHUNK_BYTES / block).max(1) * block) {
            buffer.clear();
            buffer.extend_from_slice(chunk);
            // Each swap is its own inverse: the same one converts either way.
            big_endian_to_native_in_place(region.ggml_type, &mut buffer)
                .map_err(std::io::Error::other)?;
            w.write_all(&buffer)?;
        }
        at = region.end;
    }
    w.write_all(bytes.get(at..).unwrap_or_default())
}
