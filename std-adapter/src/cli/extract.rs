//! `miniquant extract IN OUT [--tensor NAME]... [--key PATTERN]... [--max-array N]`: writes a
//! smaller valid GGUF file holding the chosen tensors (data copied byte for byte) and metadata.
//!
//! - No `--tensor`: every tensor is kept. No `--key`: every key is kept. Both take the globs of
//!   `inspect --tensor` (`*` any run of characters, `?` one: `blk.0.*`, `tokenizer.ggml.*`); a
//!   pattern that matches nothing is an error (with a "did you mean" for a plain name), and a
//!   selection that leaves out `general.architecture` (or every key) is warned about.
//! - `--max-array N` cuts every metadata array to its first N elements (the tokenizer's tokens,
//!   scores, token types and merges alike, so that they stay the same length).
//! - Keys and tensors keep their file order; tensor data is laid out one tensor after the other,
//!   each padded with zeros to the file's alignment, as ggml writes it. So with no selection at all
//!   a file written by ggml, llama.cpp or gguf-py comes out byte-identical.
//! - The output keeps the input's byte order: a big-endian file's header is written big-endian and
//!   its tensor data copied as stored (so a file from `gguf-convert-endian` comes out identical too).
//!
//! The output goes through the project's [`GgufWriter`] into an [`Output`] file, named `OUT` only
//! once complete: a failure never leaves a partial `OUT`.

use std::io::Write;
use std::path::Path;

use super::patterns::{glob_match, is_glob, suggestion};
use super::{open_gguf_allowing_cut, quoted, whole, CliError, Output};
use crate::index::Index;
use crate::value::{Array, Value};
use crate::writer::GgufWriter;

/// What to keep.
pub(super) struct Selection<'a> {
    /// Tensor name globs; empty: all.
    pub tensors: &'a [String],
    /// Key globs; empty: all.
    pub keys: &'a [String],
    /// Cut every array to this many elements.
    pub max_array: Option<usize>,
}

impl Selection<'_> {
    fn keeps_tensor(&self, name: &str) -> bool {
        self.tensors.is_empty() || self.tensors.iter().any(|p| glob_match(p, name))
    }

    fn keeps_key(&self, key: &str) -> bool {
        self.keys.is_empty() || self.keys.iter().any(|p| glob_match(p, key))
    }

    /// An error for the first pattern that selects nothing in `index` (read from `input`).
    fn check(&self, index: &Index, input: &Path) -> Result<(), CliError> {
        let tensor_names: Vec<&str> = index.tensors().iter().map(|t| t.name.as_str()).collect();
        let key_names: Vec<&str> = index.metadata().iter().map(|e| e.key.as_str()).collect();
        // Worded as `inspect` and the other commands word them.
        let lists = [
            (
                ("no tensor matches", "no tensor named"),
                self.tensors,
                tensor_names,
            ),
            (("no key matches", "no metadata key"), self.keys, key_names),
        ];
        for ((no_match, no_name), patterns, names) in lists {
            for p in patterns {
                if names.iter().any(|n| glob_match(p, n)) {
                    continue;
                }
                let (what, hint) = if is_glob(p) {
                    (no_match, String::new())
                } else {
                    (no_name, suggestion(p, names.iter().copied()))
                };
                return Err(CliError::Message(format!(
                    "{what} {p:?} in {}{hint}",
                    quoted(input)
                )));
            }
        }
        Ok(())
    }
}

pub(super) fn run<E: Write>(
    input: &Path,
    output: &Path,
    selection: &Selection<'_>,
    err: &mut E,
) -> Result<(), CliError> {
    let file = open_gguf_allowing_cut(input)?;
    let index = file.index();
    selection.check(index, input)?;

    let mut writer = GgufWriter::new();
    // The input's byte order: its tensor data is copied as stored.
    writer.format(
        3,
        index
            .byte_order()
            .unwrap_or(miniquant::gguf::ByteOrder::Little),
    );
    let mut kept_keys = 0usize;
    for entry in index.metadata() {
        if !selection.keeps_key(&entry.key) {
            continue;
        }
        let value = match (&entry.value, selection.max_array) {
            (Value::Array(a), Some(n)) if a.len() > n => Value::from(truncated(a, n)),
            (v, _) => v.clone(),
        };
        writer.kv(&entry.key, value);
        kept_keys += 1;
    }

    let alignment = u64::from(writer.alignment());
    let mut kept_tensors = 0usize;
    for tensor in index.tensors() {
        if !selection.keeps_tensor(&tensor.name) {
            continue;
        }
        whole(&file, tensor)?;
        let mut data = file.data_of(tensor)?.to_vec();
        // Pad like ggml so that the last tensor, too, ends on the alignment.
        let padded = (data.len() as u64).div_ceil(alignment) * alignment;
        data.resize(padded as usize, 0);
        writer.tensor(&tensor.name, tensor.ggml_type, tensor.ne(), data);
        kept_tensors += 1;
    }

    warn_about_dropped_keys(index, selection, kept_keys, err)?;
    let bytes = writer.to_bytes();
    write_atomically(output, &bytes)?;
    writeln!(
        err,
        "wrote {} ({} bytes): {kept_keys} of {} keys, {kept_tensors} of {} tensors",
        quoted(output),
        bytes.len(),
        index.metadata().len(),
        index.tensors().len()
    )
    .map_err(|e| CliError::io("cannot write stderr", e))
}

/// A `warning:` line if the selection leaves out every key or `general.architecture`, which
/// llama.cpp needs to load a model.
fn warn_about_dropped_keys<E: Write>(
    index: &Index,
    selection: &Selection<'_>,
    kept_keys: usize,
    err: &mut E,
) -> Result<(), CliError> {
    const ARCHITECTURE: &str = "general.architecture";
    // (Every --key pattern matches some key, so a selection keeps at least one when the file has
    // any; the check stays so that a selection changed later cannot empty the metadata unsaid.)
    let warning = if kept_keys == 0 && !index.metadata().is_empty() {
        Some(format!(
            "the selection keeps none of the {} keys: the output has no metadata",
            index.metadata().len()
        ))
    } else if index.entry(ARCHITECTURE).is_some() && !selection.keeps_key(ARCHITECTURE) {
        Some(format!(
            "the --key selection leaves out {ARCHITECTURE}: llama.cpp cannot load the output \
             (add --key {ARCHITECTURE})"
        ))
    } else {
        None
    };
    match warning {
        Some(w) => {
            writeln!(err, "warning: {w}").map_err(|e| CliError::io("cannot write stderr", e))
        }
        None => Ok(()),
    }
}

/// Writes `bytes` to `path` through an [`Output`]: the name appears only once complete (so `path`
/// may be the input: it is replaced atomically).
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    let mut out = Output::file(path)?;
    let result = out.write_with_progress(bytes);
    out.finish(result)
}

/// The first `n` elements of `a` (n < a.len()).
fn truncated(a: &Array, n: usize) -> Array {
    fn first<T: Clone>(v: &[T], n: usize) -> Vec<T> {
        v.iter().take(n).cloned().collect()
    }
    match a {
        Array::U8(v) => Array::U8(first(v, n)),
        Array::I8(v) => Array::I8(first(v, n)),
        Array::U16(v) => Array::U16(first(v, n)),
        Array::I16(v) => Array::I16(first(v, n)),
        Array::U32(v) => Array::U32(first(v, n)),
        Array::I32(v) => Array::I32(first(v, n)),
        Array::F32(v) => Array::F32(first(v, n)),
        Array::Bool(v) => Array::Bool(first(v, n)),
        Array::U64(v) => Array::U64(first(v, n)),
        Array::I64(v) => Array::I64(first(v, n)),
        Array::F64(v) => Array::F64(first(v, n)),
        Array::String(s) => s.iter().take(n).collect(),
        Array::Array(v) => Array::Array(first(v, n)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_keeps_the_first_elements() {
        let tokens: Array = ["a", "b", "c"].into_iter().collect();
        let cut = truncated(&tokens, 2);
        assert_eq!(
            cut.iter().collect::<Vec<_>>(),
            tokens.iter().take(2).collect::<Vec<_>>()
        );
        assert_eq!(
            truncated(&Array::F32(vec![1.0, 2.0]), 0),
            Array::F32(vec![])
        );
    }
}
