//! The one error type of the std adapter: what went wrong ([`ErrorKind`]) and the file it
//! concerns, so that a message read far from the call still names the file.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::validate::Report;

/// Why opening a file or reading one of its tensors failed, with the path of the file (`None`
/// for one read from a stream or built in memory, [`GgufFile::from_reader`](crate::GgufFile::from_reader)).
///
/// `Display` is `"PATH": WHAT` (just `WHAT` without a path); [`kind`](Self::kind) alone prints
/// `WHAT`. `Debug` is the same one line as `Display` (a `?` in `main` prints it), however many
/// errors an invalid file's report holds. [`source`](std::error::Error::source) is the
/// underlying [`std::io::Error`] or [`miniquant::Error`].
///
/// ```
/// # let path = std::env::temp_dir().join(format!("miniquant-doc-err-{}.gguf", std::process::id()));
/// # std::fs::write(&path, miniquant_std::example::tiny_gguf())?;
/// use miniquant_std::{ErrorKind, GgufFile};
/// let file = GgufFile::open(&path)?;
/// let e = file.tensor_data("no.such.tensor").unwrap_err();
/// assert_eq!(e.path(), Some(path.as_path()));
/// assert!(matches!(e.kind(), ErrorKind::NoSuchTensor(name) if name == "no.such.tensor"));
/// assert!(e.to_string().ends_with(": no tensor named \"no.such.tensor\""));
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Error(Box<Inner>);

/// Boxed: a report is large, and `Result<T, Error>` stays one pointer wide for the `Ok` path.
struct Inner {
    path: Option<PathBuf>,
    kind: ErrorKind,
}

/// What went wrong, without the path (see [`Error`]).
#[derive(Debug)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The file could not be opened, mapped or read.
    Io(std::io::Error),
    /// The file is not a valid GGUF file: every error found, and any warnings. For every message
    /// with its context (the key an error is in, a hint when a count is off), open with
    /// [`GgufFile::open_unchecked`](crate::GgufFile::open_unchecked) and use
    /// [`diagnose::problem_lines`](crate::diagnose::problem_lines).
    Invalid(Report),
    /// The index has no tensor of this name.
    NoSuchTensor(String),
    /// The file ends inside or before the tensor's data (a partial download): it holds `present`
    /// of its `bytes` bytes. The tensors wholly present can still be read.
    Cut {
        /// The tensor.
        name: String,
        /// Bytes of its data the file holds.
        present: u64,
        /// Bytes of its data.
        bytes: u64,
    },
    /// The tensor's data is not inside the file, or cannot be converted or computed.
    Gguf(miniquant::Error),
    /// The file's tokenizer metadata cannot be used ([`crate::tokenizer`]).
    Tokenizer(crate::tokenizer::TokenizerError),
}

impl Error {
    /// An error about the file at `path` (`None`: a stream or bytes in memory).
    pub fn new(kind: ErrorKind, path: Option<PathBuf>) -> Self {
        Self(Box::new(Inner { path, kind }))
    }

    /// The path of the file the error concerns, if it was opened by path.
    pub fn path(&self) -> Option<&Path> {
        self.0.path.as_deref()
    }

    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.0.kind
    }

    /// What went wrong, by value.
    pub fn into_kind(self) -> ErrorKind {
        self.0.kind
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io(e) => write!(f, "{e}"),
            Self::Invalid(Report {
                truncation: Some(t),
                ..
            }) => write!(f, "{t}"),
            Self::Invalid(report) => match report.errors.first() {
                Some(first) if report.errors.len() > 1 => {
                    write!(f, "{first} (and {} more errors)", report.errors.len() - 1)
                }
                Some(first) => write!(f, "{first}"),
                None => write!(f, "invalid GGUF file"),
            },
            Self::NoSuchTensor(name) => write!(f, "no tensor named {name:?}"),
            Self::Cut {
                name,
                present,
                bytes,
            } => write!(
                f,
                "tensor {name:?} is cut at byte {present} of {bytes}: the file is truncated (a \
                 partial download?); the tensors wholly present can still be read"
            ),
            Self::Gguf(e) => write!(f, "{e}"),
            Self::Tokenizer(e) => write!(f, "{e}"),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(path) = self.path() {
            // Quoted and escaped as the CLI quotes paths.
            write!(f, "{:?}: ", path.display().to_string())?;
        }
        self.kind().fmt(f)
    }
}

/// The same line as `Display`: `fn main() -> Result<(), Box<dyn Error>>` prints the `Debug` of an
/// error, and a user reading it wants the message, not a report's fields.
impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self.kind() {
            ErrorKind::Io(e) => Some(e),
            ErrorKind::Gguf(e) => Some(e),
            ErrorKind::Tokenizer(e) => Some(e),
            // The error `Display` shows first (a truncated file's is the truncation summary).
            ErrorKind::Invalid(report) => report
                .errors
                .first()
                .map(|e| e as &(dyn std::error::Error + 'static)),
            ErrorKind::NoSuchTensor(_) | ErrorKind::Cut { .. } => None,
        }
    }
}

/// Without a path: an I/O error not yet tied to a file.
impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Self::new(ErrorKind::Io(e), None)
    }
}

/// Without a path: a core error not yet tied to a file.
impl From<miniquant::Error> for Error {
    fn from(e: miniquant::Error) -> Self {
        Self::new(ErrorKind::Gguf(e), None)
    }
}

impl From<ErrorKind> for Error {
    fn from(kind: ErrorKind) -> Self {
        Self::new(kind, None)
    }
}
