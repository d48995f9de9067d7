//! Whole-file checks over an [`Index`]: what the streaming core parser cannot see by itself.
//!
//! Errors (the file is unusable or ambiguous): duplicate keys and tensor names (found with hash maps
//! while the index is built), tensor data past the end of the file, and overlapping tensors (found
//! by sorting the tensors by offset: O(n log n)). Warnings (the spec allows it, ggml refuses it):
//! gaps between tensors, tensor offsets out of file order, tensor names of 64 bytes or more, and
//! nested arrays. Every problem is collected, not just the first.
//!
//! [`check_data`] reads the tensors' data too: ggml's `ggml_validate_row_data` rules (no NaN or
//! infinite value or block scale), one line per bad tensor.

use std::collections::HashSet;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use miniquant::gguf::{Event, Limits, SliceParser, ValueType};
use miniquant::quant::{self, validate::Invalid};
use miniquant::{Error, GgmlType};

use crate::diagnose::{CutTensor, Truncation};
use crate::file::GgufFile;
use crate::index::{Index, TensorEntry};
use crate::value::{Array, Value};

/// ggml's `GGML_MAX_NAME`: it refuses tensor names of this many bytes or more.
const GGML_MAX_NAME: usize = 64;

/// A layout that the GGUF spec allows but ggml's loader refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Warning {
    /// A tensor's data starts after the previous tensor's padded end (ggml requires the tensors
    /// to be contiguous).
    Gap {
        /// The tensor.
        name: String,
        /// Unused bytes before it.
        gap: u64,
        /// Absolute offset of its tensor info.
        info_offset: u64,
    },
    /// A tensor's data offset is below the previous tensor's in file order (ggml requires data in
    /// the order of the tensor directory).
    OutOfOrder {
        /// The tensor.
        name: String,
        /// Its data offset.
        data_offset: u64,
        /// The previous tensor's data offset.
        previous: u64,
        /// Absolute offset of its tensor info.
        info_offset: u64,
    },
    /// A tensor name of 64 bytes or more (the spec allows 64; ggml requires fewer).
    LongTensorName {
        /// The name's length in bytes.
        len: usize,
        /// Absolute offset of the tensor info.
        info_offset: u64,
    },
    /// A metadata array whose elements are arrays (ggml rejects every nested array).
    NestedArray {
        /// The key.
        key: String,
        /// Absolute offset of the value.
        value_offset: u64,
    },
}

impl Warning {
    /// The byte offset the warning points at.
    pub fn offset(&self) -> u64 {
        match *self {
            Self::Gap { info_offset, .. }
            | Self::OutOfOrder { info_offset, .. }
            | Self::LongTensorName { info_offset, .. } => info_offset,
            Self::NestedArray { value_offset, .. } => value_offset,
        }
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Gap { name, gap, .. } => write!(
                f,
                "{gap} unused bytes before the data of tensor {name:?} (ggml requires contiguous tensors)"
            )?,
            Self::OutOfOrder { name, data_offset, previous, .. } => write!(
                f,
                "tensor {name:?} has data offset {data_offset}, below the previous tensor's {previous} \
                 (ggml requires data in directory order)"
            )?,
            Self::LongTensorName { len, .. } => {
                write!(f, "tensor name of {len} bytes (ggml requires fewer than {GGML_MAX_NAME})")?
            }
            Self::NestedArray { key, .. } => {
                write!(f, "metadata {key:?} is an array of arrays (ggml rejects nested arrays)")?
            }
        }
        write!(f, " at byte {}", self.offset())
    }
}

/// Every problem found in a file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    /// Errors, sorted by byte offset.
    pub errors: Vec<Error>,
    /// Warnings, sorted by byte offset.
    pub warnings: Vec<Warning>,
    /// Metadata keys checked.
    pub keys: u64,
    /// Tensor infos checked.
    pub tensors: u64,
    /// The file ends before the data its header describes (a partial download): how much is
    /// there and the first tensor cut. The [`errors`](Self::errors) then hold one "past the end"
    /// error per cut tensor; this is the one line to show instead.
    pub truncation: Option<Truncation>,
}

impl Report {
    /// Whether there are no errors (warnings allowed).
    pub fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }

    /// A report of one error.
    pub fn from_error(e: Error) -> Self {
        Self {
            errors: vec![e],
            ..Self::default()
        }
    }
}

/// Checks an index (possibly partial, after `parse_error`) against the file it came from.
///
/// Tensor bounds need [`Index::file_size`]; the layout checks need a complete index. Duplicates are
/// reported however far the parse got.
pub fn check(index: &Index, parse_error: Option<Error>) -> Report {
    let mut report = Report::default();
    report.errors.extend(parse_error);
    report.errors.extend_from_slice(index.duplicates());
    report.keys = index.metadata().len() as u64;
    report.tensors = index.tensors().len() as u64;
    nested_arrays(index, &mut report);
    let tensors: Vec<Placement<'_>> = index
        .tensors()
        .iter()
        .map(|t| Placement {
            name: &t.name,
            offset: t.offset,
            bytes: t.bytes,
            info_offset: t.info_offset,
        })
        .collect();
    let layout = Layout {
        data_offset: index.data_offset(),
        alignment: index.alignment(),
        file_size: index.file_size(),
    };
    tensor_checks(&tensors, index.is_complete().then_some(layout), &mut report);
    report.finish()
}

/// The same checks as [`check`], streamed over the file's bytes without building an [`Index`]:
/// names are borrowed from `bytes` and only what the checks need is kept (a hash set of names and
/// one small record per tensor), so memory stays a fraction of the header's size.
pub fn check_bytes(bytes: &[u8]) -> Report {
    let mut report = Report::default();
    let mut parser = SliceParser::new(bytes, Limits::DEFAULT);
    let mut keys: HashSet<&str> = HashSet::new();
    let mut names: HashSet<&str> = HashSet::new();
    let mut tensors: Vec<Placement<'_>> = Vec::new();
    let mut current_key: Option<&str> = None;
    let mut depth = 0usize;
    // A nested array is reported once it is complete, like a finished index entry.
    let mut nested: Option<Warning> = None;
    let mut layout = None;
    loop {
        let event = match parser.next_event() {
            Ok(Some(event)) => event,
            Ok(None) => break,
            Err(e) => {
                report.errors.push(e);
                break;
            }
        };
        let offset = parser.event_offset();
        match event {
            Event::Key { key, .. } => {
                if !keys.insert(key) {
                    report.errors.push(Error::DuplicateKey { offset });
                }
                current_key = Some(key);
            }
            Event::ArrayStart { element_type, .. } => {
                depth += 1;
                if let (1, ValueType::Array, Some(key)) = (depth, element_type, current_key) {
                    nested = Some(Warning::NestedArray {
                        key: key.to_owned(),
                        value_offset: offset,
                    });
                }
            }
            Event::ArrayEnd => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    report.warnings.extend(nested.take());
                    report.keys += 1;
                }
            }
            // Like an index entry, a key counts once its value is complete.
            Event::Scalar(_) if depth == 0 => report.keys += 1,
            Event::String(piece) if depth == 0 && piece.is_last() => report.keys += 1,
            Event::Tensor(t) => {
                report.tensors += 1;
                if !names.insert(t.name) {
                    report.errors.push(Error::DuplicateTensor { offset });
                }
                tensors.push(Placement {
                    name: t.name,
                    offset: t.offset,
                    bytes: t.bytes,
                    info_offset: offset,
                });
            }
            Event::End(d) => {
                layout = Some(Layout {
                    data_offset: d.data_offset,
                    alignment: d.alignment,
                    file_size: Some(bytes.len() as u64),
                })
            }
            Event::Header(_) | Event::Scalar(_) | Event::Scalars(_) | Event::String(_) => {}
        }
    }
    tensor_checks(&tensors, layout, &mut report);
    report.finish()
}

impl Report {
    fn finish(mut self) -> Self {
        self.errors.sort_by_key(|e| e.offset().unwrap_or(u64::MAX));
        self.warnings.sort_by_key(Warning::offset);
        self
    }
}

/// Where a tensor's data lies, as the checks need it.
struct Placement<'a> {
    name: &'a str,
    offset: u64,
    bytes: u64,
    info_offset: u64,
}

/// What the placement checks need of a complete header.
#[derive(Clone, Copy)]
struct Layout {
    data_offset: u64,
    alignment: u32,
    file_size: Option<u64>,
}

/// Name lengths always; bounds, overlaps, gaps and order when the header is complete.
fn tensor_checks(tensors: &[Placement<'_>], layout: Option<Layout>, report: &mut Report) {
    long_names(tensors, report);
    if let Some(layout) = layout {
        bounds(tensors, layout, report);
        overlaps_and_gaps(tensors, layout, report);
        file_order(tensors, report);
    }
}

fn bounds(tensors: &[Placement<'_>], layout: Layout, report: &mut Report) {
    let Some(file_size) = layout.file_size else {
        return;
    };
    let mut needed = layout.data_offset;
    let mut first_cut: Option<CutTensor> = None;
    for t in tensors {
        let start = layout.data_offset.checked_add(t.offset);
        if let Some((start, end)) = start.and_then(|s| Some((s, s.checked_add(t.bytes)?))) {
            needed = needed.max(end);
            let earlier = first_cut.as_ref().is_none_or(|c| start < c.data_start);
            if end > file_size && earlier {
                first_cut = Some(CutTensor {
                    name: t.name.to_owned(),
                    info_offset: t.info_offset,
                    data_start: start,
                });
            }
        }
    }
    report.truncation = first_cut.map(|first_cut| Truncation {
        file_size,
        needed,
        first_cut,
    });
    for t in tensors {
        let end = layout
            .data_offset
            .checked_add(t.offset)
            .and_then(|start| start.checked_add(t.bytes));
        match end {
            Some(end) if end > file_size => report.errors.push(Error::TensorOutOfBounds {
                end,
                file_size,
                offset: t.info_offset,
            }),
            Some(_) => {}
            None => report.errors.push(Error::ShapeOverflow {
                offset: t.info_offset,
            }),
        }
    }
}

/// Sorts the tensors by data offset, then walks them once: a tensor starting before the furthest
/// end seen so far overlaps; one starting after that end rounded up to the alignment leaves a gap.
fn overlaps_and_gaps(tensors: &[Placement<'_>], layout: Layout, report: &mut Report) {
    let mut order: Vec<usize> = (0..tensors.len()).collect();
    order.sort_unstable_by_key(|&i| tensors.get(i).map(|t| (t.offset, i)));
    let alignment = u64::from(layout.alignment);
    let mut furthest_end: u64 = 0;
    for t in order.iter().filter_map(|&i| tensors.get(i)) {
        let end = t.offset.saturating_add(t.bytes);
        // Empty tensors occupy nothing: they can neither overlap nor end a run.
        if t.bytes > 0 && t.offset < furthest_end {
            report.errors.push(Error::TensorOverlap {
                offset: t.info_offset,
            });
        } else if let Some(expected) = furthest_end.checked_next_multiple_of(alignment) {
            if t.offset > expected {
                report.warnings.push(Warning::Gap {
                    name: t.name.to_owned(),
                    gap: t.offset - expected,
                    info_offset: t.info_offset,
                });
            }
        }
        furthest_end = furthest_end.max(end);
    }
}

fn file_order(tensors: &[Placement<'_>], report: &mut Report) {
    for pair in tensors.windows(2) {
        if let [previous, t] = pair {
            if t.offset < previous.offset {
                report.warnings.push(Warning::OutOfOrder {
                    name: t.name.to_owned(),
                    data_offset: t.offset,
                    previous: previous.offset,
                    info_offset: t.info_offset,
                });
            }
        }
    }
}

fn long_names(tensors: &[Placement<'_>], report: &mut Report) {
    for t in tensors {
        if t.name.len() >= GGML_MAX_NAME {
            report.warnings.push(Warning::LongTensorName {
                len: t.name.len(),
                info_offset: t.info_offset,
            });
        }
    }
}

fn nested_arrays(index: &Index, report: &mut Report) {
    for e in index.metadata() {
        if matches!(&e.value, Value::Array(a) if matches!(**a, Array::Array(_))) {
            report.warnings.push(Warning::NestedArray {
                key: e.key.clone(),
                value_offset: e.value_offset,
            });
        }
    }
}

/// A tensor whose data ggml's `ggml_validate_row_data` refuses (what llama.cpp checks when asked
/// to check tensors), or whose data cannot be read: see [`check_data`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataProblem {
    /// The tensor.
    pub tensor: String,
    /// Its type.
    pub ggml_type: GgmlType,
    /// Absolute offset of its tensor info.
    pub info_offset: u64,
    /// What is wrong.
    pub kind: DataProblemKind,
}

/// What [`DataProblem`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataProblemKind {
    /// The first bad value or block, as ggml stops at the first.
    Invalid {
        /// The row (of [`cols`](TensorEntry::cols) elements) it is in.
        row: u64,
        /// The block's index in its row (the column, for F32, F16, BF16 and F64).
        block: u64,
        /// Absolute offset of the block in the file.
        offset: u64,
        /// The bad field and what is wrong with it.
        invalid: Invalid,
    },
    /// The data could not be read (outside the file, or a big-endian type with no known layout).
    Unreadable(Error),
}

impl fmt::Display for DataProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (name, t) = (&self.tensor, self.ggml_type);
        match &self.kind {
            DataProblemKind::Invalid {
                row,
                block,
                offset,
                invalid,
            } => {
                let what = invalid.problem.as_str();
                if t.block_size() == 1 {
                    write!(
                        f,
                        "tensor {name:?} ({t}): row {row}, column {block}: value is {what}"
                    )?;
                } else {
                    let size = u64::from(t.block_size());
                    let first = block * size;
                    let last = first + size - 1;
                    write!(
                        f,
                        "tensor {name:?} ({t}): row {row}, block {block} (columns {first}..={last}): \
                         {} is {what}",
                        invalid.field
                    )?;
                }
                write!(f, " (ggml_validate_row_data refuses it) at byte {offset}")
            }
            DataProblemKind::Unreadable(e) => {
                write!(f, "tensor {name:?} ({t}): cannot check its data: {e}")
            }
        }
    }
}

/// Runs ggml's data check ([`miniquant::quant::validate`]) on every tensor of `file`, on up to
/// `threads` threads (tensors shared out as they finish): the first bad value or block of each bad
/// tensor, in file order. Big-endian data is checked in the kernels' layout, like every read.
pub fn check_data(file: &GgufFile, threads: usize) -> Vec<DataProblem> {
    let tensors = file.index().tensors();
    let next = AtomicUsize::new(0);
    let found = Mutex::new(Vec::new());
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(t) = tensors.get(i) else { break };
        if let Some(p) = check_tensor(file, t) {
            found
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((i, p));
        }
    };
    let threads = threads.clamp(1, tensors.len().max(1));
    std::thread::scope(|s| {
        for _ in 1..threads {
            s.spawn(work);
        }
        work();
    });
    let mut found = found.into_inner().unwrap_or_else(PoisonError::into_inner);
    found.sort_unstable_by_key(|&(i, _)| i);
    found.into_iter().map(|(_, p)| p).collect()
}

fn check_tensor(file: &GgufFile, t: &TensorEntry) -> Option<DataProblem> {
    let problem = |kind| DataProblem {
        tensor: t.name.clone(),
        ggml_type: t.ggml_type,
        info_offset: t.info_offset,
        kind,
    };
    let data = match file.native_data_of(t) {
        Ok(data) => data,
        Err(e) => return Some(problem(DataProblemKind::Unreadable(e))),
    };
    let invalid = match quant::validate::first_invalid(t.ggml_type, &data) {
        Ok(found) => found?,
        Err(e) => return Some(problem(DataProblemKind::Unreadable(e))),
    };
    let blocks_per_row = (t.cols() / u64::from(t.ggml_type.block_size())).max(1);
    let block = invalid.block as u64;
    let start = file.index().data_range(t).map_or(0, |r| r.start);
    Some(problem(DataProblemKind::Invalid {
        row: block / blocks_per_row,
        block: block % blocks_per_row,
        offset: start + block * u64::from(t.ggml_type.block_bytes()),
        invalid,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::writer::GgufWriter;
    use miniquant::gguf::Scalar;
    use miniquant::GgmlType;

    /// Duplicate keys (one whose value is an array that a truncation or mutation can break in the
    /// middle), a nested array, duplicate and overlapping tensors.
    fn sample() -> Vec<u8> {
        let mut strings = crate::value::Strings::new();
        for s in ["x", "yy", "zzz", "w"] {
            strings.push(s);
        }
        let nested = Array::Array(vec![
            Array::empty(ValueType::U8),
            Array::from(strings.clone()),
        ]);
        let mut w = GgufWriter::new();
        w.kv("a", Scalar::U32(1))
            .kv("b", nested)
            .kv("a", Array::from(strings))
            .kv("c", "text")
            .kv("a", "again");
        w.tensor("t", GgmlType::F32, &[4], vec![0; 16])
            .tensor("t", GgmlType::F32, &[4], vec![0; 16])
            .tensor_at("u", GgmlType::F32.code(), &[8], 0, vec![0; 32]);
        w.to_bytes()
    }

    fn assert_same(case: &str, bytes: &[u8]) {
        let (index, parse_error) = Index::from_bytes_partial(bytes, Limits::DEFAULT);
        let indexed = check(&index, parse_error);
        let streamed = check_bytes(bytes);
        assert_eq!(indexed, streamed, "{case}");
    }

    /// `check` (over an index) and `check_bytes` (streamed) give one answer for the same bytes:
    /// every truncation and many one-byte changes of a file full of duplicates. A duplicate key
    /// whose value fails to parse used to be reported only by `check_bytes`.
    #[test]
    fn both_validators_give_the_same_report() {
        let bytes = sample();
        let full = check_bytes(&bytes);
        let duplicate_keys = full
            .errors
            .iter()
            .filter(|e| matches!(e, Error::DuplicateKey { .. }))
            .count();
        assert_eq!(duplicate_keys, 2, "{full:?}");
        assert!(full
            .errors
            .iter()
            .any(|e| matches!(e, Error::DuplicateTensor { .. })));
        assert_eq!(full.warnings.len(), 2, "{full:?}");
        for len in 0..=bytes.len() {
            assert_same(&format!("first {len} bytes"), &bytes[..len]);
        }
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for round in 0..4000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let mut changed = bytes.clone();
            let at = (state % changed.len() as u64) as usize;
            changed[at] = (state >> 32) as u8;
            assert_same(
                &format!("round {round}: byte {at} set to {}", changed[at]),
                &changed,
            );
        }
    }

    /// The reported case: the second `a`'s value (an array of strings) is cut inside a string.
    #[test]
    fn duplicate_key_whose_value_fails_is_reported_by_both() {
        let bytes = sample();
        let streamed = check_bytes(&bytes);
        let Some(&Error::DuplicateKey { offset }) = streamed.errors.first() else {
            panic!("{streamed:?}")
        };
        // Cut a few bytes after the second `a`: inside its array of strings.
        let cut = &bytes[..offset as usize + 40];
        let (index, parse_error) = Index::from_bytes_partial(cut, Limits::DEFAULT);
        let indexed = check(&index, parse_error);
        assert!(
            indexed.errors.contains(&Error::DuplicateKey { offset }),
            "{indexed:?}"
        );
        assert_eq!(indexed, check_bytes(cut));
    }
}
