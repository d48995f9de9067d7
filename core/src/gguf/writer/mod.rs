//! A streaming GGUF writer: no heap, no recursion, straight into an [`embedded_io::Write`].
//!
//! Two layers:
//! - [`Encoder`] puts the format's primitives (numbers in the file's byte order, length-prefixed
//!   strings, scalars, array headers) and checks nothing: tests use it to build broken files.
//! - [`GgufWriter`] is the checked writer. It takes the tensor directory up front (a slice of
//!   [`TensorSpec`]), then the metadata as a sequence of calls that mirrors the parser's
//!   [`Event`]s, computes each tensor's aligned offset, writes the padding, and takes the tensor data
//!   in directory order. Every misuse (a wrong count, a value of the wrong type, data of the wrong
//!   size, data before the directory, a duplicate key or tensor name, a name the parser would
//!   reject) is an [`Error`] returned before the offending bytes are written. After any error the
//!   writer refuses further calls ([`Misuse::Failed`]): the caller discards the output.
//!
//! Duplicate checks without a heap: tensor names are compared exactly against the directory slice
//! (quadratic in the tensor count: 500k name comparisons for 1000 tensors); keys are remembered as
//! 64-bit FNV-1a hashes in a fixed table of [`MAX_CHECKED_KEYS`] entries, so a file may declare at
//! most that many keys (real models carry 20 to 60), and two distinct keys whose hashes collide
//! (odds about 2^-49 for 256 keys) would be reported as a duplicate, never written as one.

use super::event::{ByteOrder, Event, StrPiece, TensorInfo};
use super::limits::Limits;

use super::format::DEFAULT_ALIGNMENT;
use super::value::{Scalar, ScalarRun, ValueType};
use crate::error::{AlignmentProblem, Error, Field, Limit, Result};
use crate::ggml_type::GgmlType;

/// Arrays the writer nests at most this deep, whatever the limits say (a parser reads them with a
/// nesting capacity, its `DEPTH`, at least as large).
const MAX_DEPTH_CAPACITY: usize = 32;

mod encoder;
mod misuse;
#[cfg(test)]
mod tests;

pub use encoder::Encoder;
pub use misuse::{Expected, Misuse};

pub use super::format::{ALIGNMENT_KEY, GGUF_MAGIC};

/// How many keys [`GgufWriter`] can check for duplicates, and so the most keys a file it writes
/// may declare.
pub const MAX_CHECKED_KEYS: usize = 256;

/// Format options of a written file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct WriteOptions {
    /// 2 or 3 (the layout is the same; version 3 is the one that declares big-endian files).
    pub version: u32,
    /// Byte order of every number.
    pub byte_order: ByteOrder,
    /// The written file must parse under these limits: a key, string, array, depth or count beyond
    /// them is an error.
    pub limits: Limits,
}

impl WriteOptions {
    /// Version 3, little-endian, the parser's default limits: what llama.cpp writes.
    pub const DEFAULT: Self = Self {
        version: 3,
        byte_order: ByteOrder::Little,
        limits: Limits::DEFAULT,
    };
}

impl Default for WriteOptions {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// One entry of the tensor directory handed to [`GgufWriter::new`]; the writer computes the offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TensorSpec<'a> {
    /// Name (non-empty, no NUL).
    pub name: &'a str,
    /// Element type.
    pub ggml_type: GgmlType,
    /// Dimensions in ggml's order (fastest-varying first), at most four.
    pub ne: &'a [u64],
}

impl<'a> TensorSpec<'a> {
    /// The spec of a tensor info read by the parser (its offset is not kept: the writer lays the
    /// data out itself).
    pub fn from_info(info: &'a TensorInfo<'a>) -> Self {
        Self {
            name: info.name,
            ggml_type: info.ggml_type,
            ne: info.ne(),
        }
    }

    /// Number of elements, or `None` on overflow.
    pub fn elements(&self) -> Option<u64> {
        self.ne.iter().try_fold(1u64, |n, &d| n.checked_mul(d))
    }

    /// Size of the data in bytes, or `None` on overflow or a partial block.
    pub fn bytes(&self) -> Option<u64> {
        self.ggml_type.bytes_for(self.elements()?)
    }
}

/// 64-bit FNV-1a: a fixed, dependency-free hash for the duplicate-key table.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Frame {
    element_type: ValueType,
    declared: u64,
    remaining: u64,
}

const EMPTY_FRAME: Frame = Frame {
    element_type: ValueType::U8,
    declared: 0,
    remaining: 0,
};

/// Where the writer is in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Keys and values.
    Metadata,
    /// Tensor infos; `next` is the index of the next one.
    Directory { next: usize },
    /// Tensor data; `tensor` is the index being written, `left` its bytes still to come.
    Data { tensor: usize, left: u64 },
    /// Everything written.
    Done,
    /// An error happened: the output is abandoned.
    Failed,
}

/// What must come next inside the metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    /// A key, an array element or an array end, depending on the stack.
    Nothing,
    /// The value of the key just written.
    Value(ValueType),
    /// The rest of a string begun with [`GgufWriter::string_piece`].
    StrRest { at: u64, len: u64 },
}

/// The checked streaming GGUF writer into an [`embedded_io::Write`], without a heap.
///
/// Give it the tensor directory up front ([`TensorSpec`]s) and the number of keys; then write each
/// key and its value ([`key`](Self::key), [`scalar`](Self::scalar), [`string`](Self::string),
/// [`array_start`](Self::array_start) ... [`array_end`](Self::array_end), or parser events through
/// [`event`](Self::event)); [`finish_header`](Self::finish_header) writes the tensor infos with
/// their aligned offsets and the padding; then [`tensor_data`](Self::tensor_data) in directory
/// order, and [`finish`](Self::finish). Any misuse is an error returned before the bad call writes
/// anything, and the writer then refuses further calls. Tensor names are checked for duplicates
/// exactly (quadratic in their number); keys by 64-bit hashes in a table of [`MAX_CHECKED_KEYS`].
///
/// ```
/// use miniquant::gguf::{GgufWriter, Scalar, TensorSpec, WriteOptions};
/// use miniquant::GgmlType;
/// let dir = [TensorSpec { name: "w", ggml_type: GgmlType::F32, ne: &[4] }];
/// let mut out = [0u8; 256];
/// let mut w = GgufWriter::new(&mut out[..], WriteOptions::DEFAULT, 1, &dir)?;
/// w.key("general.architecture", miniquant::gguf::ValueType::String)?;
/// w.string("llama")?;
/// w.finish_header()?;
/// w.tensor_data(&[0; 16])?;
/// let written = w.written() as usize;
/// w.finish()?;
/// assert_eq!(written, 160); // header padded to 128, then 16 bytes of data padded to 32
/// assert_eq!(&out[..miniquant::gguf::example_header().len()], miniquant::gguf::example_header());
/// # Ok::<(), miniquant::Error>(())
/// ```
#[derive(Debug)]
pub struct GgufWriter<'t, W> {
    enc: Encoder<W>,
    version: u32,
    limits: Limits,
    tensors: &'t [TensorSpec<'t>],
    metadata_count: u64,
    keys_written: u64,
    key_hashes: [u64; MAX_CHECKED_KEYS],
    stack: [Frame; MAX_DEPTH_CAPACITY],
    depth: usize,
    pending: Pending,
    alignment: Option<u32>,
    reading_alignment: bool,
    phase: Phase,
    /// Offset of the next tensor's data, relative to the data section.
    next_offset: u64,
}

impl<'t, W: embedded_io::Write> GgufWriter<'t, W> {
    /// Checks the directory and the counts, then writes the fixed header (magic, version, tensor
    /// and metadata counts). `metadata_count` keys must follow, then the directory is written.
    pub fn new(
        sink: W,
        options: WriteOptions,
        metadata_count: u64,
        tensors: &'t [TensorSpec<'t>],
    ) -> Result<Self> {
        if !(2..=3).contains(&options.version) {
            return Err(Error::UnsupportedVersion {
                version: options.version,
            });
        }
        let limits = options.limits;
        let tensor_count = tensors.len() as u64;
        if tensor_count > limits.max_tensors {
            return Err(Error::LimitExceeded {
                limit: Limit::TensorCount,
                max: limits.max_tensors,
                found: tensor_count,
                offset: 8,
            });
        }
        if metadata_count > limits.max_metadata {
            return Err(Error::LimitExceeded {
                limit: Limit::MetadataCount,
                max: limits.max_metadata,
                found: metadata_count,
                offset: 16,
            });
        }
        if metadata_count > MAX_CHECKED_KEYS as u64 {
            return Err(misuse(
                Misuse::TooManyKeys {
                    max: MAX_CHECKED_KEYS as u64,
                    found: metadata_count,
                },
                16,
            ));
        }
        for (i, t) in tensors.iter().enumerate() {
            if let Some(first) = tensors.iter().take(i).position(|u| u.name == t.name) {
                return Err(misuse(
                    Misuse::DuplicateTensor {
                        first: first as u64,
                        second: i as u64,
                    },
                    0,
                ));
            }
        }
        let mut enc = Encoder::new(sink, options.version, options.byte_order);
        // The version is written in the file's byte order: a big-endian file is one whose
        // version reads byte-swapped.
        enc.bytes(&GGUF_MAGIC)?;
        enc.u32(options.version)?;
        enc.len(tensor_count)?;
        enc.len(metadata_count)?;
        Ok(Self {
            enc,
            version: options.version,
            limits,
            tensors,
            metadata_count,
            keys_written: 0,
            key_hashes: [0; MAX_CHECKED_KEYS],
            stack: [EMPTY_FRAME; MAX_DEPTH_CAPACITY],
            depth: 0,
            pending: Pending::Nothing,
            alignment: None,
            reading_alignment: false,
            phase: Phase::Metadata,
            next_offset: 0,
        })
    }
}

impl<'t, W: embedded_io::Write> GgufWriter<'t, W> {
    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.enc.written
    }

    /// The data alignment: the `general.alignment` written so far, or 32.
    pub fn alignment(&self) -> u32 {
        self.alignment.unwrap_or(DEFAULT_ALIGNMENT)
    }

    /// What the writer needs next.
    pub fn expected(&self) -> Expected {
        match self.phase {
            Phase::Metadata => match self.pending {
                Pending::Value(_) => Expected::Value,
                Pending::StrRest { .. } => Expected::StringRest,
                Pending::Nothing => match self.top() {
                    Some(frame) if frame.remaining > 0 => Expected::Value,
                    Some(_) => Expected::ArrayEnd,
                    None if self.keys_written < self.metadata_count => Expected::Key,
                    None => Expected::TensorInfo,
                },
            },
            Phase::Directory { .. } => Expected::TensorInfo,
            Phase::Data { tensor, .. } if tensor < self.tensors.len() => Expected::TensorData,
            Phase::Data { .. } | Phase::Done | Phase::Failed => Expected::Nothing,
        }
    }

    /// Runs one step; any error leaves the writer failed.
    fn step<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        if self.phase == Phase::Failed {
            return Err(misuse(Misuse::Failed, self.enc.written));
        }
        let result = f(self);
        if result.is_err() {
            self.phase = Phase::Failed;
        }
        result
    }

    fn out_of_order(&self) -> Error {
        misuse(
            Misuse::OutOfOrder {
                expected: self.expected(),
            },
            self.enc.written,
        )
    }

    fn top(&self) -> Option<&Frame> {
        self.depth.checked_sub(1).and_then(|d| self.stack.get(d))
    }

    fn top_mut(&mut self) -> Option<&mut Frame> {
        self.depth
            .checked_sub(1)
            .and_then(|d| self.stack.get_mut(d))
    }

    /// Checks that a value of type `found` may come next.
    fn check_value(&self, found: ValueType) -> Result<()> {
        if self.expected() != Expected::Value {
            return Err(self.out_of_order());
        }
        let expected = match (self.pending, self.top()) {
            (Pending::Value(t), _) => t,
            (_, Some(frame)) => frame.element_type,
            (_, None) => return Err(self.out_of_order()),
        };
        if expected != found {
            return Err(misuse(
                Misuse::WrongType { expected, found },
                self.enc.written,
            ));
        }
        Ok(())
    }

    /// Marks one value as written (the key's value, or one element of the innermost array).
    fn begin_value(&mut self) {
        if let Pending::Value(_) = self.pending {
            self.pending = Pending::Nothing;
        } else if let Some(frame) = self.top_mut() {
            frame.remaining = frame.remaining.saturating_sub(1);
        }
    }

    /// A metadata key and the type of its value, which must follow.
    pub fn key(&mut self, key: &str, value_type: ValueType) -> Result<()> {
        self.step(|w| {
            if w.expected() != Expected::Key {
                if w.expected() == Expected::TensorInfo {
                    return Err(misuse(
                        Misuse::MetadataCount {
                            declared: w.metadata_count,
                            found: w.keys_written.saturating_add(1),
                        },
                        w.enc.written,
                    ));
                }
                return Err(w.out_of_order());
            }
            let at = w.enc.written;
            check_name(key, Field::Key, &w.limits, at, w.enc.len_width)?;
            let hash = fnv1a(key.as_bytes());
            let seen = w.key_hashes.get(..w.keys_written as usize).unwrap_or(&[]);
            if seen.contains(&hash) {
                return Err(Error::DuplicateKey { offset: at });
            }
            let is_alignment = key == ALIGNMENT_KEY;
            if is_alignment && value_type != ValueType::U32 {
                return Err(Error::BadAlignment {
                    problem: AlignmentProblem::NotU32(value_type),
                    offset: at,
                });
            }
            w.enc.str(key)?;
            w.enc.u32(value_type.code())?;
            if let Some(slot) = w.key_hashes.get_mut(w.keys_written as usize) {
                *slot = hash;
            }
            w.keys_written = w.keys_written.saturating_add(1);
            w.reading_alignment = is_alignment;
            w.pending = Pending::Value(value_type);
            Ok(())
        })
    }

    /// A scalar: the value of the key just written, or one element of a scalar array.
    pub fn scalar(&mut self, value: Scalar) -> Result<()> {
        self.step(|w| {
            w.check_value(value.value_type())?;
            let at = w.enc.written;
            let alignment = match (w.reading_alignment, value) {
                (true, Scalar::U32(a)) => {
                    let problem = match a {
                        0 => Some(AlignmentProblem::Zero),
                        a if !a.is_power_of_two() => Some(AlignmentProblem::NotPowerOfTwo(a)),
                        _ => None,
                    };
                    if let Some(problem) = problem {
                        return Err(Error::BadAlignment {
                            problem,
                            offset: at,
                        });
                    }
                    Some(a)
                }
                _ => None,
            };
            w.enc.scalar(value)?;
            if alignment.is_some() {
                w.alignment = alignment;
                w.reading_alignment = false;
            }
            w.begin_value();
            Ok(())
        })
    }

    /// Consecutive elements of the innermost (numeric or bool) array, as a parser yields them;
    /// converted to this file's byte order if the run is in the other one.
    pub fn scalars(&mut self, run: ScalarRun<'_>) -> Result<()> {
        self.step(|w| {
            let t = run.element_type();
            let size = t.scalar_size().unwrap_or(1);
            match (w.pending, w.top()) {
                (Pending::Nothing, Some(frame)) if frame.remaining > 0 || run.is_empty() => {
                    if frame.element_type != t {
                        return Err(misuse(
                            Misuse::WrongType {
                                expected: frame.element_type,
                                found: t,
                            },
                            w.enc.written,
                        ));
                    }
                }
                _ if w.expected() == Expected::Value => {
                    return Err(misuse(Misuse::RunOutsideArray, w.enc.written))
                }
                _ => return Err(w.out_of_order()),
            }
            let count = run.len() as u64;
            let (declared, remaining) = w.top().map_or((0, 0), |f| (f.declared, f.remaining));
            if count > remaining {
                return Err(misuse(
                    Misuse::ArrayLen {
                        declared,
                        found: declared.saturating_sub(remaining).saturating_add(count),
                    },
                    w.enc.written,
                ));
            }
            let raw = run.raw();
            if t == ValueType::Bool {
                if let Some(at) = raw.iter().position(|&b| b > 1) {
                    return Err(Error::InvalidBool {
                        value: raw.get(at).copied().unwrap_or(0),
                        offset: w.enc.written.saturating_add(at as u64),
                    });
                }
            }
            if run.byte_order() == w.enc.order || size == 1 {
                w.enc.bytes(raw)?;
            } else {
                // Swap each element through a small buffer.
                let mut buf = [0u8; 256];
                for chunk in raw.chunks(buf.len()) {
                    let out = buf.get_mut(..chunk.len()).unwrap_or(&mut []);
                    out.copy_from_slice(chunk);
                    for element in out.chunks_exact_mut(size) {
                        element.reverse();
                    }
                    w.enc.bytes(out)?;
                }
            }
            if let Some(frame) = w.top_mut() {
                frame.remaining = frame.remaining.saturating_sub(count);
            }
            Ok(())
        })
    }

    /// A whole string: the value of the key just written, or one element of a string array.
    pub fn string(&mut self, text: &str) -> Result<()> {
        self.string_piece(StrPiece {
            text,
            at: 0,
            len: text.len() as u64,
        })
    }

    /// A string, or a piece of one, as a streaming parser yields it: the first piece (`at == 0`)
    /// writes the length `len`, the next ones must continue it exactly.
    pub fn string_piece(&mut self, piece: StrPiece<'_>) -> Result<()> {
        self.step(|w| {
            let (at, len) = match w.pending {
                Pending::StrRest { at, len } => (at, len),
                _ => {
                    w.check_value(ValueType::String)?;
                    if piece.len > w.limits.max_string_bytes {
                        return Err(Error::LimitExceeded {
                            limit: Limit::StringBytes,
                            max: w.limits.max_string_bytes,
                            found: piece.len,
                            offset: w.enc.written,
                        });
                    }
                    (0, piece.len)
                }
            };
            let end = piece.at.checked_add(piece.text.len() as u64);
            if piece.at != at || piece.len != len || end.is_none_or(|end| end > len) {
                return Err(misuse(
                    Misuse::StringPiece {
                        expected_at: at,
                        found_at: piece.at,
                        len,
                    },
                    w.enc.written,
                ));
            }
            let end = end.unwrap_or(len);
            if at == 0 {
                w.enc.len(len)?;
                w.begin_value();
            }
            w.enc.bytes(piece.text.as_bytes())?;
            w.pending = if end == len {
                Pending::Nothing
            } else {
                Pending::StrRest { at: end, len }
            };
            Ok(())
        })
    }

    /// The start of an array of `len` elements of `element_type`; the elements and
    /// [`array_end`](Self::array_end) follow.
    pub fn array_start(&mut self, element_type: ValueType, len: u64) -> Result<()> {
        self.step(|w| {
            w.check_value(ValueType::Array)?;
            let at = w.enc.written;
            let depth = (w.depth as u64).saturating_add(1);
            let max_depth = u64::from(w.limits.max_depth.min(MAX_DEPTH_CAPACITY as u32));
            if depth > max_depth {
                return Err(Error::LimitExceeded {
                    limit: Limit::Depth,
                    max: max_depth,
                    found: depth,
                    offset: at,
                });
            }
            if len > w.limits.max_array_len {
                return Err(Error::LimitExceeded {
                    limit: Limit::ArrayLen,
                    max: w.limits.max_array_len,
                    found: len,
                    offset: at.saturating_add(4),
                });
            }
            w.enc.array_header(element_type, len)?;
            w.begin_value();
            if let Some(frame) = w.stack.get_mut(w.depth) {
                *frame = Frame {
                    element_type,
                    declared: len,
                    remaining: len,
                };
                w.depth = w.depth.saturating_add(1);
            }
            Ok(())
        })
    }

    /// The end of the innermost array, once all its elements are written.
    pub fn array_end(&mut self) -> Result<()> {
        self.step(|w| match (w.pending, w.top()) {
            (Pending::Nothing, Some(frame)) if frame.remaining == 0 => {
                w.depth = w.depth.saturating_sub(1);
                Ok(())
            }
            (Pending::Nothing, Some(frame)) => Err(misuse(
                Misuse::ArrayLen {
                    declared: frame.declared,
                    found: frame.declared.saturating_sub(frame.remaining),
                },
                w.enc.written,
            )),
            _ => Err(w.out_of_order()),
        })
    }

    /// Moves from the metadata to the directory once every key is written.
    fn start_directory(&mut self) -> Result<()> {
        if self.phase != Phase::Metadata {
            return Ok(());
        }
        match self.expected() {
            Expected::TensorInfo => {
                self.phase = Phase::Directory { next: 0 };
                Ok(())
            }
            Expected::Key => Err(misuse(
                Misuse::MetadataCount {
                    declared: self.metadata_count,
                    found: self.keys_written,
                },
                self.enc.written,
            )),
            _ => Err(self.out_of_order()),
        }
    }

    /// Writes the next tensor info of the directory, with its offset.
    fn write_info(&mut self, index: usize) -> Result<()> {
        let Some(spec) = self.tensors.get(index).copied() else {
            return Err(self.out_of_order());
        };
        let at = self.enc.written;
        check_name(
            spec.name,
            Field::TensorName,
            &self.limits,
            at,
            self.enc.len_width,
        )?;
        let max_dims = self
            .limits
            .max_dims
            .min(super::limits::MAX_DIMS_CAPACITY as u32);
        let n_dims = spec.ne.len() as u64;
        if n_dims > u64::from(max_dims) {
            return Err(Error::LimitExceeded {
                limit: Limit::Dims,
                max: max_dims.into(),
                found: n_dims,
                offset: at,
            });
        }
        if let Some(&d) = spec.ne.iter().find(|&&d| d > i64::MAX as u64) {
            return Err(Error::DimensionTooLarge {
                value: d,
                offset: at,
            });
        }
        let ne0 = spec.ne.first().copied().unwrap_or(1);
        if ne0.checked_rem(u64::from(spec.ggml_type.block_size())) != Some(0) {
            return Err(Error::NotWholeBlocks {
                ggml_type: spec.ggml_type,
                ne0,
                offset: at,
            });
        }
        let offset = self.next_offset;
        let next = spec
            .bytes()
            .and_then(|b| b.checked_next_multiple_of(u64::from(self.alignment())))
            .and_then(|padded| offset.checked_add(padded))
            .ok_or(Error::ShapeOverflow { offset: at })?;
        self.enc.str(spec.name)?;
        self.enc.u32(n_dims as u32)?;
        for &d in spec.ne {
            self.enc.len(d)?;
        }
        self.enc.u32(spec.ggml_type.code())?;
        self.enc.u64(offset)?;
        self.next_offset = next;
        self.phase = Phase::Directory {
            next: index.saturating_add(1),
        };
        Ok(())
    }

    /// A tensor info as a parser yields it: it must match the next entry of the directory given
    /// to [`new`](Self::new) (name, type, dimensions); its offset is the writer's own.
    pub fn tensor_info(&mut self, info: &TensorInfo<'_>) -> Result<()> {
        self.step(|w| {
            w.start_directory()?;
            let Phase::Directory { next } = w.phase else {
                return Err(w.out_of_order());
            };
            let Some(spec) = w.tensors.get(next) else {
                return Err(misuse(
                    Misuse::TensorCount {
                        declared: w.tensors.len() as u64,
                        found: (next as u64).saturating_add(1),
                    },
                    w.enc.written,
                ));
            };
            if spec.name != info.name || spec.ggml_type != info.ggml_type || spec.ne != info.ne() {
                return Err(misuse(
                    Misuse::DirectoryMismatch {
                        tensor: next as u64,
                    },
                    w.enc.written,
                ));
            }
            w.write_info(next)
        })
    }

    /// Ends the header: writes the tensor infos not yet written and the padding up to the data
    /// section. Every key must have been written.
    pub fn finish_header(&mut self) -> Result<super::event::DataSection> {
        self.step(|w| {
            w.start_directory()?;
            let Phase::Directory { mut next } = w.phase else {
                return Err(w.out_of_order());
            };
            while next < w.tensors.len() {
                w.write_info(next)?;
                next = next.saturating_add(1);
            }
            w.enc.pad_to(w.alignment())?;
            let data_offset = w.enc.written;
            w.phase = Phase::Data { tensor: 0, left: 0 };
            w.skip_empty_tensors(0)?;
            Ok(super::event::DataSection {
                alignment: w.alignment(),
                data_offset,
            })
        })
    }

    /// Sets the data phase on tensor `from`, skipping tensors without data.
    fn skip_empty_tensors(&mut self, mut from: usize) -> Result<()> {
        loop {
            let left = match self.tensors.get(from) {
                Some(spec) => spec.bytes().ok_or(Error::ShapeOverflow {
                    offset: self.enc.written,
                })?,
                None => 0,
            };
            if left > 0 || from >= self.tensors.len() {
                self.phase = Phase::Data { tensor: from, left };
                return Ok(());
            }
            from = from.saturating_add(1);
        }
    }

    /// The next bytes of tensor data, in directory order; a chunk may be any size up to what is
    /// left of the current tensor. The padding after each tensor is written when it is complete.
    pub fn tensor_data(&mut self, chunk: &[u8]) -> Result<()> {
        self.step(|w| {
            let Phase::Data { tensor, left } = w.phase else {
                return Err(w.out_of_order());
            };
            let n = chunk.len() as u64;
            if n > left {
                return Err(misuse(
                    Misuse::DataSize {
                        tensor: tensor as u64,
                        expected: left,
                        found: n,
                    },
                    w.enc.written,
                ));
            }
            w.enc.bytes(chunk)?;
            if n == left && n > 0 {
                w.enc.pad_to(w.alignment())?;
                w.skip_empty_tensors(tensor.saturating_add(1))
            } else {
                w.phase = Phase::Data {
                    tensor,
                    left: left.saturating_sub(n),
                };
                Ok(())
            }
        })
    }

    /// Checks that every tensor's data is complete, flushes and returns the writer. Ends the header
    /// first if that was not done (a file whose tensors have no data needs nothing more).
    pub fn finish(mut self) -> Result<W> {
        if matches!(self.phase, Phase::Metadata | Phase::Directory { .. }) {
            self.finish_header()?;
        }
        self.step(|w| match w.phase {
            Phase::Data { tensor, left } if tensor < w.tensors.len() => {
                let expected = w
                    .tensors
                    .get(tensor)
                    .and_then(TensorSpec::bytes)
                    .unwrap_or(0);
                Err(misuse(
                    Misuse::DataSize {
                        tensor: tensor as u64,
                        expected,
                        found: expected.saturating_sub(left),
                    },
                    w.enc.written,
                ))
            }
            Phase::Data { .. } => {
                w.enc.flush()?;
                w.phase = Phase::Done;
                Ok(())
            }
            _ => Err(w.out_of_order()),
        })?;
        Ok(self.enc.into_inner())
    }

    /// Writes one parser event: the way to copy a header event by event. `Header` must match the
    /// header written by [`new`](Self::new); `Tensor` goes through
    /// [`tensor_info`](Self::tensor_info); `End` is [`finish_header`](Self::finish_header) and must
    /// declare the same alignment.
    pub fn event(&mut self, event: &Event<'_>) -> Result<()> {
        match *event {
            Event::Header(h) => self.step(|w| {
                let same = h.version == w.version
                    && h.byte_order == w.enc.order
                    && h.tensor_count == w.tensors.len() as u64
                    && h.metadata_count == w.metadata_count;
                if !same || w.keys_written > 0 || w.phase != Phase::Metadata {
                    return Err(misuse(Misuse::HeaderMismatch, w.enc.written));
                }
                Ok(())
            }),
            Event::Key { key, value_type } => self.key(key, value_type),
            Event::Scalar(s) => self.scalar(s),
            Event::Scalars(run) => self.scalars(run),
            Event::String(piece) => self.string_piece(piece),
            Event::ArrayStart { element_type, len } => self.array_start(element_type, len),
            Event::ArrayEnd => self.array_end(),
            Event::Tensor(ref info) => self.tensor_info(info),
            Event::End(section) => {
                let written = self.finish_header()?;
                self.step(|w| {
                    if written.alignment != section.alignment {
                        return Err(misuse(Misuse::HeaderMismatch, w.enc.written));
                    }
                    Ok(())
                })
            }
        }
    }
}

/// Checks a key or tensor name the way the parser will: not empty, no NUL, within the key limit.
fn check_name(name: &str, field: Field, limits: &Limits, at: u64, width: usize) -> Result<()> {
    if name.is_empty() {
        return Err(Error::EmptyName { field, offset: at });
    }
    let len = name.len() as u64;
    if len > limits.max_key_bytes {
        return Err(Error::LimitExceeded {
            limit: Limit::KeyBytes,
            max: limits.max_key_bytes,
            found: len,
            offset: at,
        });
    }
    if let Some(nul) = name.bytes().position(|b| b == 0) {
        return Err(Error::NulInName {
            field,
            offset: at.saturating_add(width as u64).saturating_add(nul as u64),
        });
    }
    Ok(())
}

fn misuse(problem: Misuse, offset: u64) -> Error {
    Error::WriterMisuse { problem, offset }
}
