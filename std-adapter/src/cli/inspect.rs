//! `miniquant inspect [--json] FILE`: the header as text or as one JSON object.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::time::Instant;

use miniquant::GgmlType;

use super::{one_line, open_gguf, print_warnings, shape_text, CliError};
use crate::index::Index;
use crate::{format, json};

/// Keys are padded to the longest one, up to this width.
const MAX_KEY_COLUMN: usize = 48;

pub(super) fn run<O: Write, E: Write>(
    path: &Path,
    as_json: bool,
    out: &mut O,
    err: &mut E,
) -> Result<(), CliError> {
    let started = Instant::now();
    let file = open_gguf(path)?;
    let elapsed = started.elapsed();
    let write_error = |e| CliError::io("cannot write the output", e);
    print_warnings(file.report(), err).map_err(write_error)?;
    if as_json {
        json::write_index(file.index(), out).map_err(write_error)
    } else {
        write_text(file.index(), elapsed, out).map_err(write_error)
    }
}

fn write_text<O: Write>(
    index: &Index,
    elapsed: std::time::Duration,
    out: &mut O,
) -> std::io::Result<()> {
    writeln!(
        out,
        "version {}  byte_order {}  kv {}  tensors {}",
        index.version(),
        index.byte_order().map_or("unknown", |b| b.name()),
        index.metadata().len(),
        index.tensors().len()
    )?;
    write!(
        out,
        "alignment {}  data_offset {}",
        index.alignment(),
        index.data_offset()
    )?;
    if let Some(size) = index.file_size() {
        write!(out, "  file_size {size}")?;
    }
    writeln!(out, "  header read in {elapsed:.3?}")?;

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

    writeln!(out, "--- tensors")?;
    let rows: Vec<[String; 5]> = index
        .tensors()
        .iter()
        .map(|t| {
            [
                one_line(&t.name).into_owned(),
                t.ggml_type.name().to_owned(),
                shape_text(&t.shape()),
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
    let (nw, tw, sw, ow, bw) = (width(0), width(1), width(2), width(3), width(4));
    for [name, ty, shape, offset, bytes] in &rows {
        writeln!(
            out,
            "{name:<nw$}  {ty:<tw$}  {shape:<sw$}  offset {offset:>ow$}  {bytes:>bw$} B"
        )?;
    }

    let mut totals: BTreeMap<GgmlType, (u64, u64)> = BTreeMap::new();
    for t in index.tensors() {
        let total = totals.entry(t.ggml_type).or_default();
        total.0 += 1;
        total.1 = total.1.saturating_add(t.bytes);
    }
    let tw = totals.keys().map(|t| t.name().len()).max().unwrap_or(0);
    let cw = totals
        .values()
        .map(|(n, _)| n.to_string().len())
        .max()
        .unwrap_or(0);
    let bw = totals
        .values()
        .map(|(_, b)| b.to_string().len())
        .max()
        .unwrap_or(0);
    for (t, (count, bytes)) in &totals {
        writeln!(
            out,
            "{:<tw$}  {count:>cw$} tensors  {bytes:>bw$} B",
            t.name()
        )?;
    }
    Ok(())
}
