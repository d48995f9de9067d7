//! A GGUF file opened from disk: memory-mapped, its header indexed and checked, tensor data
//! borrowed straight from the mapping.

use std::borrow::Cow;
use std::fmt;
use std::fs::File;
use std::path::Path;

use memmap2::Mmap;
use miniquant::gguf::{ByteOrder, Limits};
use miniquant::quant::byte_order;
use miniquant::{Error, Result};

use crate::index::{Index, TensorEntry};
use crate::validate::{self, Report};

/// Why a file could not be opened.
#[derive(Debug)]
pub enum OpenError {
    /// The file could not be opened or mapped.
    Io(std::io::Error),
    /// The file is not a valid GGUF file: every error found, and any warnings.
    Invalid(Report),
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io(e) => write!(f, "{e}"),
            Self::Invalid(report) => match report.errors.first() {
                Some(first) if report.errors.len() > 1 => {
                    write!(f, "{first} (and {} more errors)", report.errors.len() - 1)
                }
                Some(first) => write!(f, "{first}"),
                None => write!(f, "invalid GGUF file"),
            },
        }
    }
}

impl std::error::Error for OpenError {}

impl From<std::io::Error> for OpenError {
    fn from(e: std::io::Error) -> Self {
        Self::Io(e)
    }
}

/// The bytes of a file: a read-only memory map, or nothing for an empty file (which cannot be
/// mapped on every platform).
enum Bytes {
    Mapped(Mmap),
    Empty,
}

impl Bytes {
    fn as_slice(&self) -> &[u8] {
        match self {
            Self::Mapped(m) => m,
            Self::Empty => &[],
        }
    }
}

/// A memory-mapped GGUF file with its [`Index`].
pub struct GgufFile {
    bytes: Bytes,
    index: Index,
    report: Report,
}

impl fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GgufFile")
            .field("len", &self.bytes.as_slice().len())
            .field("index", &self.index)
            .finish()
    }
}

impl GgufFile {
    /// Maps the file, parses its header and runs the whole-file checks ([`validate::check`]).
    /// Any error fails the open with the full [`Report`]; warnings are kept in
    /// [`warnings`](Self::warnings).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, OpenError> {
        let file = Self::open_unchecked(path)?;
        if file.report.is_valid() {
            Ok(file)
        } else {
            Err(OpenError::Invalid(file.report))
        }
    }

    /// Runs every check of [`open`](Self::open) on the file without building an index
    /// ([`validate::check_bytes`]): the lean path of `miniquant validate`.
    pub fn validate(path: impl AsRef<Path>) -> Result<Report, std::io::Error> {
        let bytes = Self::map(path)?;
        Ok(validate::check_bytes(bytes.as_slice()))
    }

    /// Maps and parses the file as far as it goes, without failing on GGUF errors: the index may be
    /// partial, and [`report`](Self::report) says what is wrong. Only I/O errors fail.
    pub fn open_unchecked(path: impl AsRef<Path>) -> Result<Self, std::io::Error> {
        let bytes = Self::map(path)?;
        let (index, parse_error) = Index::from_bytes_partial(bytes.as_slice(), Limits::DEFAULT);
        let report = validate::check(&index, parse_error);
        Ok(Self {
            bytes,
            index,
            report,
        })
    }

    fn map(path: impl AsRef<Path>) -> Result<Bytes, std::io::Error> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        Ok(if len == 0 {
            Bytes::Empty
        } else {
            // SAFETY: the mapping is read-only and private to this process. Another process
            // truncating or rewriting the file while it is mapped would change or unmap the bytes
            // under us; like every mmap-based loader (ggml, candle, safetensors) we accept that the
            // model file is not modified while in use.
            Bytes::Mapped(unsafe { Mmap::map(&file)? })
        })
    }

    /// The header's index.
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// The problems found when opening (no errors after a successful [`open`](Self::open)).
    pub fn report(&self) -> &Report {
        &self.report
    }

    /// Layouts ggml would refuse, found when opening.
    pub fn warnings(&self) -> &[validate::Warning] {
        &self.report.warnings
    }

    /// The whole file.
    pub fn bytes(&self) -> &[u8] {
        self.bytes.as_slice()
    }

    /// The data of the tensor called `name`, borrowed from the mapping, as stored (see
    /// [`data_of`](Self::data_of)).
    pub fn tensor_data(&self, name: &str) -> Result<&[u8], TensorDataError> {
        let tensor = self
            .index
            .tensor(name)
            .ok_or(TensorDataError::NoSuchTensor)?;
        self.data_of(tensor).map_err(TensorDataError::Gguf)
    }

    /// The data of `tensor` in the layout the kernels read ([`miniquant::quant`] takes ggml's
    /// blocks as a little-endian file stores them): borrowed from the mapping for a little-endian
    /// file, converted into a new buffer for a big-endian one
    /// ([`miniquant::quant::byte_order`]).
    ///
    /// # Errors
    /// As [`data_of`](Self::data_of); for a big-endian file, [`Error::Unsupported`] if the type
    /// has no big-endian layout (only those `gguf-convert-endian` defines are known).
    pub fn native_data_of(&self, tensor: &TensorEntry) -> Result<Cow<'_, [u8]>> {
        let data = self.data_of(tensor)?;
        match self.index.byte_order() {
            Some(ByteOrder::Big) => {
                let mut native = vec![0u8; data.len()];
                byte_order::big_endian_to_native(tensor.ggml_type, data, &mut native)?;
                Ok(Cow::Owned(native))
            }
            Some(ByteOrder::Little) | None => Ok(Cow::Borrowed(data)),
        }
    }

    /// The data of `tensor` (an entry of this file's index), borrowed from the mapping: the bytes
    /// as stored, in the file's byte order ([`Index::byte_order`]). The kernels need them in
    /// little-endian layout: see [`native_data_of`](Self::native_data_of).
    pub fn data_of(&self, tensor: &TensorEntry) -> Result<&[u8]> {
        let range = self.index.data_range(tensor)?;
        let file_size = self.bytes.as_slice().len() as u64;
        let out_of_bounds = Error::TensorOutOfBounds {
            end: range.end,
            file_size,
            offset: tensor.info_offset,
        };
        let start = usize::try_from(range.start).map_err(|_| out_of_bounds)?;
        let end = usize::try_from(range.end).map_err(|_| out_of_bounds)?;
        self.bytes.as_slice().get(start..end).ok_or(out_of_bounds)
    }
}

/// Why [`GgufFile::tensor_data`] failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TensorDataError {
    /// The index has no tensor of that name.
    NoSuchTensor,
    /// The tensor's data is not inside the file.
    Gguf(Error),
}

impl fmt::Display for TensorDataError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoSuchTensor => write!(f, "no tensor of that name"),
            Self::Gguf(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for TensorDataError {}
