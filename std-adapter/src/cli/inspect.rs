//! `miniquant inspect [OPTIONS] FILE`: the header as text or as one JSON object.
//!
//! Text: a header block (version, counts, alignment, data offset, file size, the shape order), the
//! metadata one line per key (long strings and arrays previewed; `--key` prints one value in full),
//! the tensor directory with element counts, and totals per type and overall. A file cut short
//! still prints what its header holds, marked truncated, and the command fails.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use miniquant::GgmlType;

use super::{one_line, open_gguf_unchecked, shape_text, CliError};
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
    /// (the layout of gguf-py's `gguf-dump --json --json-array`). Implies `--json`.
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub json_format: Option<JsonFormat>,
    /// Leave out the tensor directory.
    #[arg(long)]
    pub no_tensors: bool,
    /// List only tensors whose name matches GLOB (`*` any run of characters, `?` one).
    #[arg(long, value_name = "GLOB")]
    pub tensor: Option<String>,
    /// Print only the value of KEY, in full (strings unquoted, arrays one element per line).
    #[arg(long, value_name = "KEY")]
    pub key: Option<String>,
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
    if let Some(key) = &args.key {
        let entry = index
            .entry(key)
            .ok_or_else(|| CliError::Message(format!("no metadata key {key:?}")))?;
        write_full_value(&entry.value, out).map_err(write_error)?;
    } else if args.json || args.json_format.is_some() {
        if truncated {
            return Err(CliError::Problems(problems));
        }
        match args.json_format.unwrap_or(JsonFormat::Miniquant) {
            JsonFormat::Miniquant => json::write_index(index, out),
            JsonFormat::GgufDump => {
                let name = args.file.to_string_lossy();
                gguf_dump::write_json(index, &name, !args.no_tensors, out)
            }
        }
        .map_err(write_error)?;
    } else {
        let filter = args.tensor.as_deref();
        write_text(&file, truncated, !args.no_tensors, filter, out).map_err(write_error)?;
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
/// of the header is still worth printing.
fn is_truncated(file: &GgufFile) -> bool {
    let cut_header = file.report().errors.iter().any(|e| {
        matches!(
            e,
            miniquant::Error::Truncated { .. } | miniquant::Error::ExceedsInput { .. }
        )
    });
    cut_header || truncation(file.index()).is_some()
}

fn write_text<O: Write>(
    file: &GgufFile,
    truncated: bool,
    with_tensors: bool,
    filter: Option<&str>,
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
    writeln!(out)?;

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

    let tensors: Vec<&TensorEntry> = index
        .tensors()
        .iter()
        .filter(|t| filter.is_none_or(|glob| glob_match(glob, &t.name)))
        .collect();
    if with_tensors {
        writeln!(
            out,
            "--- tensors (shape row-major, slowest-varying first: ggml's ne reversed; offset relative to the data section)"
        )?;
        write_tensor_rows(index, &tensors, out)?;
    }
    write_totals(&tensors, out)
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

/// Shell-style glob: `*` matches any run of characters, `?` one character; everything else
/// itself. Iterative with one backtrack point, so linear-ish and without recursion.
fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(&c) if c == '?' || Some(&c) == t.get(ti) => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p.get(pi..)
        .is_some_and(|rest| rest.iter().all(|&c| c == '*'))
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn globs_match_like_a_shell() {
        assert!(glob_match("blk.*.attn_q.weight", "blk.12.attn_q.weight"));
        assert!(glob_match("*", ""));
        assert!(glob_match("blk.?.ffn_*", "blk.3.ffn_up.weight"));
        assert!(!glob_match("blk.?.ffn_*", "blk.13.ffn_up.weight"));
        assert!(glob_match("*weight", "output.weight"));
        assert!(!glob_match("*weight", "output.bias"));
        assert!(glob_match("a*b*c", "aXbYbZc"));
        assert!(!glob_match("a*b*c", "aXbYbZ"));
        assert!(glob_match("token_embd.weight", "token_embd.weight"));
        assert!(!glob_match("token_embd", "token_embd.weight"));
    }
}
