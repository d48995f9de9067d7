//! `miniquant extract IN OUT [--tensor NAME]... [--key PATTERN]... [--max-array N]`: writes a
//! smaller valid GGUF file holding the chosen tensors (data copied byte for byte) and metadata.
//!
//! - No `--tensor`: every tensor is kept. No `--key`: every key is kept. A `--key` pattern is a key
//!   name in which `*` stands for any run of characters (`tokenizer.ggml.*`).
//! - `--max-array N` cuts every metadata array to its first N elements (the tokenizer's tokens,
//!   scores, token types and merges alike, so that they stay the same length).
//! - Keys and tensors keep their file order; tensor data is laid out one tensor after the other,
//!   each padded with zeros to the file's alignment, as ggml writes it. So with no selection at all
//!   a file written by ggml, llama.cpp or gguf-py comes out byte-identical.
//!
//! The output goes through the project's [`GgufWriter`] into an [`OutputFile`], named `OUT` only
//! once complete: a failure never leaves a partial `OUT`.

use std::io::Write;
use std::path::Path;

use super::{open_gguf_allowing_cut, quoted, whole, CliError};
use crate::output_file::OutputFile;
use crate::value::{Array, Value};
use crate::writer::GgufWriter;

/// What to keep.
pub(super) struct Selection<'a> {
    /// Tensor names; empty: all.
    pub tensors: &'a [String],
    /// Key patterns; empty: all.
    pub keys: &'a [String],
    /// Cut every array to this many elements.
    pub max_array: Option<usize>,
}

pub(super) fn run<E: Write>(
    input: &Path,
    output: &Path,
    selection: &Selection<'_>,
    err: &mut E,
) -> Result<(), CliError> {
    let file = open_gguf_allowing_cut(input)?;
    let index = file.index();
    for name in selection.tensors {
        if index.tensor(name).is_none() {
            return Err(CliError::Message(format!(
                "no tensor named {name:?} in {}",
                quoted(input)
            )));
        }
    }

    let mut writer = GgufWriter::new();
    let mut kept_keys = 0usize;
    for entry in index.metadata() {
        let wanted =
            selection.keys.is_empty() || selection.keys.iter().any(|p| matches(p, &entry.key));
        if !wanted {
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
        if !selection.tensors.is_empty() && !selection.tensors.contains(&tensor.name) {
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

/// Writes `bytes` to `path` through an [`OutputFile`]: the name appears only once complete.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    let mut out = OutputFile::create(path)
        .map_err(|e| CliError::io(format!("cannot create {}", quoted(path)), e))?;
    out.write_all(bytes)
        .and_then(|()| out.persist())
        .map_err(|e| CliError::io(format!("cannot write {}", quoted(path)), e))
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

/// Whether `text` matches `pattern`, where `*` matches any run of characters (including none).
/// Greedy with one backtrack point: linear in practice, no recursion.
fn matches(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut pi, mut ti) = (0, 0);
    // Position after the last `*` seen, and where in `text` it started matching.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some(b'*') => {
                star = Some((pi + 1, ti));
                pi += 1;
            }
            Some(&c) if c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((after, from)) => {
                    pi = after;
                    ti = from + 1;
                    star = Some((after, from + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        assert!(matches("general.name", "general.name"));
        assert!(!matches("general.name", "general.names"));
        assert!(!matches("general.names", "general.name"));
        assert!(matches("tokenizer.ggml.*", "tokenizer.ggml.tokens"));
        assert!(matches("*", ""));
        assert!(matches("*.weight", "blk.0.attn_q.weight"));
        assert!(matches("a*b*c", "aXbYbZc"));
        assert!(!matches("a*b*c", "aXbYbZ"));
        assert!(matches("**x", "yyx"));
        assert!(!matches("", "x"));
    }

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
