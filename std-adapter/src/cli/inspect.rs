//! `miniquant inspect [OPTIONS] FILE`: the header as text or as one JSON object.
//!
//! Text: a header block (version, counts, alignment, data offset, file size, the shape order), the
//! metadata one line per key (long strings and arrays previewed; `--key` prints one value in full),
//! the tensor directory with element counts, and totals per type and overall. A file cut short
//! still prints what its header holds, marked truncated, and the command fails.
//!
//! Every flag does what it says in text and in JSON, or the combination is a usage error (exit 2):
//! `--tensor GLOB` shows only the matching tensors (no header block, no metadata) and fails if none
//! match; `--no-metadata` and `--no-tensors` leave their part out; `--key KEY` prints one value
//! (`--raw`: bare, for scripts; `--json`: its JSON object) and takes no other selection.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use miniquant::GgmlType;

use super::patterns::{glob_match, is_glob, suggestion};
use super::{one_line, open_gguf_unchecked, quoted, shape_text, CliError};
use crate::diagnose::{problem_lines, truncation};
use crate::file::GgufFile;
use crate::index::{Index, TensorEntry};
use crate::value::{Array, Element, Value};
use crate::{format, gguf_dump, json};

/// Keys are padded to the longest one, up to this width.
const MAX_KEY_COLUMN: usize = 48;

/// `inspect`'s arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// The JSON layout: `miniquant` (metadata and tensors as arrays in file order) or `gguf-dump`
    /// (the layout of gguf-py's `gguf-dump --json --json-array`, the whole header; with
    /// `--no-tensors`, without tensors). Implies `--json`.
    #[arg(long, value_enum, value_name = "FORMAT", conflicts_with_all = ["tensor", "key", "no_metadata"])]
    pub json_format: Option<JsonFormat>,
    /// Leave out the tensor directory (in JSON, the `tensors` field).
    #[arg(long, conflicts_with = "tensor")]
    pub no_tensors: bool,
    /// Leave out the metadata (in JSON, the `metadata` field).
    #[arg(long)]
    pub no_metadata: bool,
    /// Show only the tensors whose name matches GLOB (`*` any run of characters, `?` one) and
    /// their totals, without the header block and metadata; none matching is an error.
    #[arg(long, value_name = "GLOB")]
    pub tensor: Option<String>,
    /// Print only the value of KEY, in full (strings unquoted, arrays one element per line; with
    /// `--json`, the key's JSON object).
    #[arg(long, value_name = "KEY", conflicts_with_all = ["tensor", "no_tensors", "no_metadata"])]
    pub key: Option<String>,
    /// With `--key`: the bare value for scripts (`8192`, not `8192u32`; arrays one bare element
    /// per line, strings unquoted).
    #[arg(long, requires = "key", conflicts_with = "json")]
    pub raw: bool,
    /// Print the time taken to read the header on stderr.
    #[arg(long)]
    pub time: bool,
    /// The GGUF file (`-` for standard input).
    pub file: PathBuf,
}

/// The layouts of `inspect --json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum JsonFormat {
    /// miniquant's own layout (see the README).
    Miniquant,
    /// gguf-py's `gguf-dump --json --json-array` layout.
    GgufDump,
}

pub(super) fn run<O: Write, E: Write>(
    args: &Args,
    out: &mut O,
    err: &mut E,
) -> Result<(), CliError> {
    let started = Instant::now();
    let file = open_gguf_unchecked(&args.file)?;
    let elapsed = started.elapsed();
    let write_error = |e| CliError::io("cannot write the output", e);
    if args.time {
        writeln!(err, "header read in {elapsed:.3?}")
            .map_err(|e| CliError::io("cannot write stderr", e))?;
    }
    let problems = problem_lines(&file);
    let truncated = is_truncated(&file);
    if !file.report().is_valid() && !truncated {
        return Err(CliError::Problems(problems));
    }
    let index = file.index();
    let json = args.json || args.json_format.is_some();
    if let Some(key) = &args.key {
        let entry = index.entry(key).ok_or_else(|| {
            let keys = index.metadata().iter().map(|e| e.key.as_str());
            CliError::Message(format!(
                "no metadata key {key:?} in {}{}",
                quoted(&args.file),
                suggestion(key, keys)
            ))
        })?;
        if json {
            json::write_entry(entry, out)
                .and_then(|()| writeln!(out))
                .map_err(write_error)?;
        } else if args.raw {
            write_bare_value(&entry.value, out).map_err(write_error)?;
        } else {
            write_full_value(&entry.value, out).map_err(write_error)?;
        }
    } else {
        let tensors = selected_tensors(index, args.tensor.as_deref(), &args.file)?;
        let with_tensors = !args.no_tensors;
        // A tensor filter shows only what it selects.
        let with_metadata = !args.no_metadata && args.tensor.is_none();
        if json {
            if truncated {
                return Err(CliError::Problems(problems));
            }
            match args.json_format.unwrap_or(JsonFormat::Miniquant) {
                JsonFormat::Miniquant => json::write_parts(
                    index,
                    with_metadata,
                    with_tensors.then_some(&tensors[..]),
                    out,
                ),
                JsonFormat::GgufDump => {
                    let name = args.file.to_string_lossy();
                    gguf_dump::write_json(index, &name, with_tensors, out)
                }
            }
            .map_err(write_error)?;
        } else {
            let parts = Parts {
                header: args.tensor.is_none(),
                metadata: with_metadata,
                tensors: with_tensors,
            };
            write_text(&file, truncated, parts, &tensors, out).map_err(write_error)?;
        }
    }
    if truncated {
        return Err(CliError::Problems(problems));
    }
    for line in &problems {
        writeln!(err, "{line}").map_err(|e| CliError::io("cannot write stderr", e))?;
    }
    Ok(())
}

/// A file whose header parse ran out of input, or whose tensors end past its end: what there is
/// of the header is still worth printing (if its counts were read: else there is nothing).
fn is_truncated(file: &GgufFile) -> bool {
    if file.index().byte_order().is_none() {
        return false;
    }
    let cut_header = file.report().errors.iter().any(|e| {
        matches!(
            e,
            miniquant::Error::Truncated { .. } | miniquant::Error::ExceedsInput { .. }
        )
    });
    cut_header || truncation(file.index()).is_some()
}

/// The tensors `glob` selects (all without one); a glob that selects none is an error.
fn selected_tensors<'i>(
    index: &'i Index,
    glob: Option<&str>,
    path: &std::path::Path,
) -> Result<Vec<&'i TensorEntry>, CliError> {
    let tensors: Vec<&TensorEntry> = index
        .tensors()
        .iter()
        .filter(|t| glob.is_none_or(|g| glob_match(g, &t.name)))
        .collect();
    match glob {
        Some(g) if tensors.is_empty() => {
            let (what, hint) = if is_glob(g) {
                ("no tensor matches", String::new())
            } else {
                let names = index.tensors().iter().map(|t| t.name.as_str());
                ("no tensor named", suggestion(g, names))
            };
            Err(CliError::Message(format!(
                "{what} {g:?} in {}{hint}",
                quoted(path)
            )))
        }
        _ => Ok(tensors),
    }
}

/// The parts of the text form shown.
#[derive(Clone, Copy)]
struct Parts {
    /// Version, counts, alignment, offsets.
    header: bool,
    metadata: bool,
    /// The tensor rows (the totals are always shown).
    tensors: bool,
}

fn write_text<O: Write>(
    file: &GgufFile,
    truncated: bool,
    parts: Parts,
    tensors: &[&TensorEntry],
    out: &mut O,
) -> std::io::Result<()> {
    let index = file.index();
    if truncated {
        let how = match truncation(index) {
            Some(t) => t.to_string(),
            None => format!(
                "file is truncated inside its header ({} bytes): what follows is what could be read",
                file.bytes().len()
            ),
        };
        writeln!(out, "TRUNCATED: {how}")?;
    }
    if parts.header {
        write_header_block(index, out)?;
    }
    if parts.metadata {
        write_metadata(index, out)?;
    }
    if parts.tensors {
        writeln!(
            out,
            "--- tensors (shape row-major, slowest-varying first: ggml's ne reversed; offset relative to the data section)"
        )?;
        write_tensor_rows(index, tensors, out)?;
    }
    write_totals(tensors, out)
}

fn write_header_block<O: Write>(index: &Index, out: &mut O) -> std::io::Result<()> {
    writeln!(
        out,
        "version {}  byte_order {}  kv {}  tensors {}",
        index.version(),
        index.byte_order().map_or("unknown", |b| b.name()),
        index.declared_metadata_count(),
        index.declared_tensor_count()
    )?;
    write!(out, "alignment {}  data_offset ", index.alignment())?;
    if index.is_complete() {
        write!(out, "{}", index.data_offset())?;
    } else {
        write!(out, "unknown")?;
    }
    if let Some(size) = index.file_size() {
        write!(out, "  file_size {size}")?;
    }
    writeln!(out)
}

fn write_metadata<O: Write>(index: &Index, out: &mut O) -> std::io::Result<()> {
    writeln!(out, "--- metadata")?;
    let key_width = index
        .metadata()
        .iter()
        .map(|e| e.key.len())
        .max()
        .unwrap_or(0)
        .min(MAX_KEY_COLUMN);
    for e in index.metadata() {
        writeln!(
            out,
            "{:<key_width$}  {}",
            one_line(&e.key),
            format::value(&e.value)
        )?;
    }
    Ok(())
}

/// One row per tensor; a tensor whose data runs past the end of the file is marked `(cut)`.
fn write_tensor_rows<O: Write>(
    index: &Index,
    tensors: &[&TensorEntry],
    out: &mut O,
) -> std::io::Result<()> {
    let cut = |t: &TensorEntry| match (index.data_range(t), index.file_size()) {
        (Ok(range), Some(size)) => range.end > size,
        _ => false,
    };
    let rows: Vec<[String; 6]> = tensors
        .iter()
        .map(|t| {
            [
                one_line(&t.name).into_owned(),
                t.ggml_type.name().to_owned(),
                shape_text(&t.shape()),
                t.elements.to_string(),
                t.offset.to_string(),
                t.bytes.to_string(),
            ]
        })
        .collect();
    let width = |col: usize| {
        rows.iter()
            .filter_map(|r| r.get(col))
            .map(String::len)
            .max()
            .unwrap_or(0)
    };
    let (nw, tw, sw, ew, ow, bw) = (width(0), width(1), width(2), width(3), width(4), width(5));
    for ([name, ty, shape, elements, offset, bytes], t) in rows.iter().zip(tensors) {
        write!(
            out,
            "{name:<nw$}  {ty:<tw$}  {shape:<sw$}  {elements:>ew$} elements  offset {offset:>ow$}  {bytes:>bw$} B"
        )?;
        writeln!(out, "{}", if cut(t) { "  (cut)" } else { "" })?;
    }
    Ok(())
}

/// One line per type, then the overall parameter count and bytes.
fn write_totals<O: Write>(tensors: &[&TensorEntry], out: &mut O) -> std::io::Result<()> {
    #[derive(Default)]
    struct Total {
        tensors: u64,
        elements: u64,
        bytes: u64,
    }
    let mut per_type: BTreeMap<GgmlType, Total> = BTreeMap::new();
    let mut all = Total::default();
    for t in tensors {
        for total in [per_type.entry(t.ggml_type).or_default(), &mut all] {
            total.tensors += 1;
            total.elements = total.elements.saturating_add(t.elements);
            total.bytes = total.bytes.saturating_add(t.bytes);
        }
    }
    writeln!(out, "--- totals")?;
    let rows: Vec<[String; 4]> = per_type
        .iter()
        .map(|(t, total)| (t.name(), total))
        .chain([("all", &all)])
        .map(|(name, total)| {
            [
                name.to_owned(),
                total.tensors.to_string(),
                total.elements.to_string(),
                total.bytes.to_string(),
            ]
        })
        .collect();
    let width = |col: usize| {
        rows.iter()
            .filter_map(|r| r.get(col))
            .map(String::len)
            .max()
            .unwrap_or(0)
    };
    let (tw, cw, ew, bw) = (width(0), width(1), width(2), width(3));
    for [name, count, elements, bytes] in &rows {
        writeln!(
            out,
            "{name:<tw$}  {count:>cw$} tensors  {elements:>ew$} parameters  {bytes:>bw$} B"
        )?;
    }
    Ok(())
}

/// `--key`: a scalar as `inspect` shows it, a string as its raw text, an array one element per
/// line (nested arrays previewed on their line).
fn write_full_value<O: Write>(value: &Value, out: &mut O) -> std::io::Result<()> {
    match value {
        Value::Scalar(_) => writeln!(out, "{}", format::value(value)),
        Value::String(s) => writeln!(out, "{s}"),
        Value::Array(a) => write_array_lines(a, out),
    }
}

/// `--key --raw`: a scalar bare (`8192`, `0.5`, `true`), a string as its raw text, an array one
/// bare element per line (strings with control characters escaped, so that each stays on its
/// line; nested arrays previewed on their line).
fn write_bare_value<O: Write>(value: &Value, out: &mut O) -> std::io::Result<()> {
    match value {
        Value::Scalar(s) => writeln!(out, "{}", bare_scalar(*s)),
        Value::String(s) => writeln!(out, "{s}"),
        Value::Array(a) => {
            for element in a.iter() {
                match element {
                    Element::Scalar(s) => writeln!(out, "{}", bare_scalar(s))?,
                    Element::Str(s) => writeln!(out, "{}", one_line(s))?,
                    Element::Array(inner) => {
                        let mut text = String::new();
                        format::array(&mut text, inner);
                        writeln!(out, "{text}")?;
                    }
                }
            }
            Ok(())
        }
    }
}

/// A scalar without its type suffix.
fn bare_scalar(s: miniquant::gguf::Scalar) -> String {
    use miniquant::gguf::Scalar;
    match s {
        Scalar::U8(v) => v.to_string(),
        Scalar::I8(v) => v.to_string(),
        Scalar::U16(v) => v.to_string(),
        Scalar::I16(v) => v.to_string(),
        Scalar::U32(v) => v.to_string(),
        Scalar::I32(v) => v.to_string(),
        Scalar::U64(v) => v.to_string(),
        Scalar::I64(v) => v.to_string(),
        Scalar::Bool(v) => v.to_string(),
        Scalar::F32(v) => bare_float(v, f64::from(v)),
        Scalar::F64(v) => bare_float(v, v),
    }
}

/// Shortest round-trip digits; in exponent notation where `inspect` uses it (below 1e-5, from
/// 1e16), which scripts parse as well.
fn bare_float<F: std::fmt::Display + std::fmt::LowerExp>(v: F, wide: f64) -> String {
    if wide.is_finite() && wide != 0.0 && !(1e-5..1e16).contains(&wide.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

fn write_array_lines<O: Write>(a: &Array, out: &mut O) -> std::io::Result<()> {
    for element in a.iter() {
        match element {
            Element::Scalar(s) => {
                let mut text = String::new();
                format::scalar(&mut text, s);
                writeln!(out, "{text}")?;
            }
            Element::Str(s) => writeln!(out, "{}", one_line(s))?,
            Element::Array(inner) => {
                let mut text = String::new();
                format::array(&mut text, inner);
                writeln!(out, "{text}")?;
            }
        }
    }
    Ok(())
}
