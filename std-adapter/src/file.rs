//! A GGUF file opened from disk: memory-mapped, its header indexed and checked, tensor data
//! borrowed straight from the mapping. Pipes, FIFOs and other streams cannot be mapped: they are
//! read into memory instead ([`GgufFile::from_reader`]).

use std::borrow::Cow;
use std::fmt;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use memmap2::Mmap;
use miniquant::gguf::{ByteOrder, Limits};
use miniquant::quant::byte_order;
use miniquant::{GgmlType, Result};

use crate::error::{Error, ErrorKind};
use crate::index::{Index, TensorEntry};
use crate::signals::WatchedMap;
use crate::validate::{self, Report};

/// Whether regular files are memory-mapped (the default) or read into memory, for the whole
/// process.
static MAP_FILES: AtomicBool = AtomicBool::new(true);

/// Whether [`GgufFile`] memory-maps regular files (`true`, the default) or reads them into memory
/// (`false`), from now on and for the whole process. Reading costs memory and time but cannot
/// fail later: a mapped file that another process truncates while it is read raises SIGBUS
/// (which [`crate::signals::install`] turns into an error message).
pub fn set_memory_mapping(enabled: bool) {
    MAP_FILES.store(enabled, Ordering::Relaxed);
}

/// The bytes of a file: a read-only memory map; or what was read from a stream; or nothing for an
/// empty file (which cannot be mapped on every platform).
enum Bytes {
    Mapped(Mapped),
    Read(Vec<u8>),
    Empty,
}

/// A memory map, watched by the SIGBUS handler while it lives.
struct Mapped {
    // Dropped first: the handler stops watching the range before it is unmapped.
    _watch: WatchedMap,
    map: Mmap,
}

impl Bytes {
    fn as_slice(&self) -> &[u8] {
        match self {
            Self::Mapped(m) => &m.map,
            Self::Read(v) => v,
            Self::Empty => &[],
        }
    }
}

/// A memory-mapped GGUF file with its [`Index`].
///
/// ```
/// use miniquant_std::GgufFile;
/// # let path = std::env::temp_dir().join(format!("miniquant-doc-{}.gguf", std::process::id()));
/// # std::fs::write(&path, miniquant_std::example::tiny_gguf())?;
/// let file = GgufFile::open(&path)?; // maps, indexes and checks the whole file
/// assert_eq!(
///     file.index().get("general.architecture").and_then(|v| v.as_str()),
///     Some("tiny")
/// );
/// let t = file.index().tensor("blk.0.attn_q.weight").expect("listed");
/// println!("{} {} shape {:?} (row-major)", t.name, t.ggml_type, t.shape());
/// let blocks: &[u8] = file.tensor_data(&t.name)?; // borrowed from the mapping, no copy
/// assert_eq!(blocks.len() as u64, t.bytes);
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct GgufFile {
    bytes: Bytes,
    index: Index,
    report: Report,
    /// Where it was opened from, for errors to name (`None`: read from a stream).
    path: Option<PathBuf>,
}

/// Short: the size and counts, not the index (a vocabulary would print for pages).
impl fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GgufFile")
            .field("path", &self.path)
            .field("len", &self.bytes.as_slice().len())
            .field("version", &self.index.version())
            .field("metadata", &self.index.metadata().len())
            .field("tensors", &self.index.tensors().len())
            .field("errors", &self.report.errors.len())
            .field("warnings", &self.report.warnings.len())
            .finish()
    }
}

impl GgufFile {
    /// Maps the file, parses its header and runs the whole-file checks ([`validate::check`]).
    /// Any error fails the open with the full [`Report`] ([`ErrorKind::Invalid`]); warnings are
    /// kept in [`warnings`](Self::warnings). Every error names `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, Error> {
        Self::open_unchecked(path)?.checked()
    }

    /// Reads a whole GGUF file from a stream (standard input, a pipe, a socket) into memory, then
    /// checks it like [`open`](Self::open). Its errors have no path.
    pub fn from_reader(reader: impl Read) -> Result<Self, Error> {
        Self::from_reader_unchecked(reader)?.checked()
    }

    /// Like [`from_reader`](Self::from_reader), but without failing on GGUF errors (as
    /// [`open_unchecked`](Self::open_unchecked)): only I/O errors ([`ErrorKind::Io`]) fail.
    pub fn from_reader_unchecked(reader: impl Read) -> Result<Self, Error> {
        Ok(Self::from_bytes(Bytes::Read(read_stream(reader)?), None))
    }

    fn checked(self) -> Result<Self, Error> {
        if self.report.is_valid() {
            Ok(self)
        } else {
            Err(Error::new(ErrorKind::Invalid(self.report), self.path))
        }
    }

    /// Runs every check of [`open`](Self::open) on the file without building an index
    /// ([`validate::check_bytes`]): the lean path of `miniquant validate`. Only I/O errors
    /// ([`ErrorKind::Io`], naming `path`) fail.
    pub fn validate(path: impl AsRef<Path>) -> Result<Report, Error> {
        let path = path.as_ref();
        let bytes = Self::load(path).map_err(|e| io_error(e, path))?;
        Ok(validate::check_bytes(bytes.as_slice()))
    }

    /// Maps and parses the file as far as it goes, without failing on GGUF errors: the index may be
    /// partial, and [`report`](Self::report) says what is wrong. Only I/O errors
    /// ([`ErrorKind::Io`], naming `path`) fail.
    pub fn open_unchecked(path: impl AsRef<Path>) -> Result<Self, Error> {
        let path = path.as_ref();
        let bytes = Self::load(path).map_err(|e| io_error(e, path))?;
        Ok(Self::from_bytes(bytes, Some(path.to_owned())))
    }

    fn from_bytes(bytes: Bytes, path: Option<PathBuf>) -> Self {
        let (index, parse_error) = Index::from_bytes_partial(bytes.as_slice(), Limits::DEFAULT);
        let report = validate::check(&index, parse_error);
        Self {
            bytes,
            index,
            report,
            path,
        }
    }

    /// The path the file was opened from (`None`: read from a stream).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// An error about this file: it names the file's path.
    pub(crate) fn error(&self, kind: ErrorKind) -> Error {
        Error::new(kind, self.path.clone())
    }

    /// Maps a regular file; reads anything else that is not a directory (a FIFO, `/dev/stdin`).
    fn load(path: impl AsRef<Path>) -> Result<Bytes, std::io::Error> {
        let path = path.as_ref();
        let mut file = File::open(path)?;
        let metadata = file.metadata()?;
        if metadata.is_dir() {
            // Opening a directory succeeds on Unix; mapping it fails with an obscure ENODEV.
            return Err(std::io::Error::new(
                std::io::ErrorKind::IsADirectory,
                "is a directory",
            ));
        }
        if !metadata.is_file() {
            return Ok(Bytes::Read(read_stream(file)?));
        }
        if !MAP_FILES.load(Ordering::Relaxed) {
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes)?;
            return Ok(Bytes::Read(bytes));
        }
        let len = metadata.len();
        Ok(if len == 0 {
            Bytes::Empty
        } else {
            // SAFETY: the mapping is read-only and private to this process. Another process
            // truncating or rewriting the file while it is mapped would change or unmap the bytes
            // under us; like every mmap-based loader (ggml, candle, safetensors) we accept that the
            // model file is not modified while in use. A shrunk file faults with SIGBUS, which
            // the handler of `crate::signals` reports for the path watched here.
            let map = unsafe { Mmap::map(&file)? };
            Bytes::Mapped(Mapped {
                _watch: WatchedMap::watch(&map, path),
                map,
            })
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
    pub fn tensor_data(&self, name: &str) -> Result<&[u8], Error> {
        let tensor = self
            .index
            .tensor(name)
            .ok_or_else(|| self.error(ErrorKind::NoSuchTensor(name.to_owned())))?;
        if let Some(cut) = self.cut(tensor) {
            return Err(cut);
        }
        self.data_of(tensor)
            .map_err(|e| self.error(ErrorKind::Gguf(e)))
    }

    /// The data of `tensor` in the layout the kernels read ([`miniquant::quant`] takes ggml's
    /// blocks as a little-endian file stores them): borrowed from the mapping for a little-endian
    /// file, converted into a new buffer for a big-endian one
    /// ([`miniquant::quant::byte_order`]).
    ///
    /// # Errors
    /// As [`data_of`](Self::data_of); for a big-endian file, [`miniquant::Error::Unsupported`] if the type
    /// has no big-endian layout (only those `gguf-convert-endian` defines are known).
    pub fn native_data_of(&self, tensor: &TensorEntry) -> Result<Cow<'_, [u8]>> {
        self.native(tensor.ggml_type, self.data_of(tensor)?)
    }

    /// `stored` (whole blocks of `t` from this file) in the kernels' little-endian layout.
    pub(crate) fn native<'a>(&self, t: GgmlType, stored: &'a [u8]) -> Result<Cow<'a, [u8]>> {
        match self.index.byte_order() {
            Some(ByteOrder::Big) => {
                let mut native = vec![0u8; stored.len()];
                byte_order::big_endian_to_native(t, stored, &mut native)?;
                Ok(Cow::Owned(native))
            }
            Some(ByteOrder::Little) | None => Ok(Cow::Borrowed(stored)),
        }
    }

    /// `Some` if the file ends before the end of `tensor`'s data (a truncated file): how much of
    /// it is there, as [`ErrorKind::Cut`]. `None` if the data is wholly inside the file.
    pub fn cut(&self, tensor: &TensorEntry) -> Option<Error> {
        let range = self.index.data_range(tensor).ok()?;
        let file_size = self.bytes.as_slice().len() as u64;
        (range.end > file_size).then(|| {
            self.error(ErrorKind::Cut {
                name: tensor.name.clone(),
                present: file_size.saturating_sub(range.start),
                bytes: tensor.bytes,
            })
        })
    }

    /// Whether the only errors of the file are tensors cut by its end (a partial download): the
    /// header is whole, and the tensors wholly present can be read (open it with
    /// [`open_unchecked`](Self::open_unchecked); [`cut`](Self::cut) says which are not).
    pub fn is_only_truncated(&self) -> bool {
        self.report.truncation.is_some()
            && self.index.is_complete()
            && self
                .report
                .errors
                .iter()
                .all(|e| matches!(e, miniquant::Error::TensorOutOfBounds { .. }))
    }

    /// The data of `tensor` (an entry of this file's index), borrowed from the mapping: the bytes
    /// as stored, in the file's byte order ([`Index::byte_order`]). The kernels need them in
    /// little-endian layout: see [`native_data_of`](Self::native_data_of).
    pub fn data_of(&self, tensor: &TensorEntry) -> Result<&[u8]> {
        let range = self.index.data_range(tensor)?;
        let file_size = self.bytes.as_slice().len() as u64;
        let out_of_bounds = miniquant::Error::TensorOutOfBounds {
            end: range.end,
            file_size,
            offset: tensor.info_offset,
        };
        let start = usize::try_from(range.start).map_err(|_| out_of_bounds)?;
        let end = usize::try_from(range.end).map_err(|_| out_of_bounds)?;
        self.bytes.as_slice().get(start..end).ok_or(out_of_bounds)
    }
}

/// Reads a stream whole, but only its first 4 bytes if they are not GGUF's magic: the parser stops
/// there anyway, and an endless stream (`/dev/zero`, `yes |`) must not fill memory first.
fn read_stream(mut reader: impl Read) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    reader.by_ref().take(4).read_to_end(&mut bytes)?;
    if bytes == miniquant::gguf::GGUF_MAGIC {
        reader.read_to_end(&mut bytes)?;
    }
    Ok(bytes)
}

/// An I/O error about the file at `path`.
fn io_error(e: std::io::Error, path: &Path) -> Error {
    Error::new(ErrorKind::Io(e), Some(path.to_owned()))
}
