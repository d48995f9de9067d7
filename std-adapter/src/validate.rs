//! Whole-file checks over an [`Index`]: what the streaming core parser cannot see by itself.
//!
//! Errors (the file is unusable or ambiguous): duplicate keys and tensor names (found with hash maps
//! while the index is built), tensor data past the end of the file, and overlapping tensors (found
//! by sorting the tensors by offset: O(n log n)). Warnings (the spec allows it, ggml refuses it):
//! gaps between tensors, tensor offsets out of file order, tensor names of 64 bytes or more, and
//! nested arrays. Every problem is collected, not just the first.

use std::fmt;

use miniquant::Error;

use crate::index::Index;
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
            warnings: Vec::new(),
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
    nested_arrays(index, &mut report);
    long_names(index, &mut report);
    if index.is_complete() {
        bounds(index, &mut report);
        overlaps_and_gaps(index, &mut report);
        file_order(index, &mut report);
    }
    report
        .errors
        .sort_by_key(|e| e.offset().unwrap_or(u64::MAX));
    report.warnings.sort_by_key(Warning::offset);
    report
}

fn bounds(index: &Index, report: &mut Report) {
    let Some(file_size) = index.file_size() else {
        return;
    };
    for t in index.tensors() {
        match index.data_range(t) {
            Ok(range) if range.end > file_size => report.errors.push(Error::TensorOutOfBounds {
                end: range.end,
                file_size,
                offset: t.info_offset,
            }),
            Ok(_) => {}
            Err(e) => report.errors.push(e),
        }
    }
}

/// Sorts the tensors by data offset, then walks them once: a tensor starting before the furthest
/// end seen so far overlaps; one starting after that end rounded up to the alignment leaves a gap.
fn overlaps_and_gaps(index: &Index, report: &mut Report) {
    let tensors = index.tensors();
    let mut order: Vec<usize> = (0..tensors.len()).collect();
    order.sort_unstable_by_key(|&i| tensors.get(i).map(|t| (t.offset, i)));
    let alignment = u64::from(index.alignment());
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
                    name: t.name.clone(),
                    gap: t.offset - expected,
                    info_offset: t.info_offset,
                });
            }
        }
        furthest_end = furthest_end.max(end);
    }
}

fn file_order(index: &Index, report: &mut Report) {
    for pair in index.tensors().windows(2) {
        if let [previous, t] = pair {
            if t.offset < previous.offset {
                report.warnings.push(Warning::OutOfOrder {
                    name: t.name.clone(),
                    data_offset: t.offset,
                    previous: previous.offset,
                    info_offset: t.info_offset,
                });
            }
        }
    }
}

fn long_names(index: &Index, report: &mut Report) {
    for t in index.tensors() {
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
