//! What a misused [`GgufWriter`](super::GgufWriter) reports.

use crate::gguf::format::ValueType;

/// What the writer expected instead of the call it got, named in [`Misuse::OutOfOrder`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Expected {
    /// A metadata key.
    Key,
    /// A value (of a key or an array element).
    Value,
    /// The end of the innermost array.
    ArrayEnd,
    /// The rest of a string.
    StringRest,
    /// A tensor info (the directory).
    TensorInfo,
    /// Tensor data.
    TensorData,
    /// Nothing: the file is complete.
    Nothing,
}

impl Expected {
    /// Lower-case name for messages.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Key => "a metadata key",
            Self::Value => "a value",
            Self::ArrayEnd => "the end of an array",
            Self::StringRest => "the rest of a string",
            Self::TensorInfo => "the tensor directory",
            Self::TensorData => "tensor data",
            Self::Nothing => "nothing (the file is complete)",
        }
    }
}

/// How a [`GgufWriter`](super::GgufWriter) was misused, in
/// [`Error::WriterMisuse`](crate::Error::WriterMisuse).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Misuse {
    /// A call that cannot come now.
    OutOfOrder {
        /// What the format needs next.
        expected: Expected,
    },
    /// A value of another type than its key or array declared.
    WrongType {
        /// The declared type.
        expected: ValueType,
        /// The type given.
        found: ValueType,
    },
    /// A scalar run outside a scalar array.
    RunOutsideArray,
    /// More or fewer keys than declared.
    MetadataCount {
        /// Declared count.
        declared: u64,
        /// Keys written (or attempted).
        found: u64,
    },
    /// More tensor infos than the directory holds.
    TensorCount {
        /// Directory length.
        declared: u64,
        /// Infos given.
        found: u64,
    },
    /// An array given more or fewer elements than declared.
    ArrayLen {
        /// Declared length.
        declared: u64,
        /// Elements written (or attempted).
        found: u64,
    },
    /// A string piece that does not continue the string being written.
    StringPiece {
        /// Where the next piece must start.
        expected_at: u64,
        /// Where the given piece starts.
        found_at: u64,
        /// The string's length.
        len: u64,
    },
    /// Tensor data of the wrong size: a chunk longer than what is left of the tensor, or a tensor
    /// not complete at [`GgufWriter::finish`](super::GgufWriter::finish).
    DataSize {
        /// Index of the tensor in the directory.
        tensor: u64,
        /// Bytes left to write (or the tensor's size, at `finish`).
        expected: u64,
        /// Bytes given (or written, at `finish`).
        found: u64,
    },
    /// A tensor info that is not the next entry of the directory.
    DirectoryMismatch {
        /// Index of the expected entry.
        tensor: u64,
    },
    /// A `Header` or `End` event that does not describe the file being written.
    HeaderMismatch,
    /// Two directory entries with the same name.
    DuplicateTensor {
        /// Index of the first.
        first: u64,
        /// Index of the second.
        second: u64,
    },
    /// More keys than the duplicate check can hold ([`MAX_CHECKED_KEYS`](super::MAX_CHECKED_KEYS)).
    TooManyKeys {
        /// The table's size.
        max: u64,
        /// Keys declared.
        found: u64,
    },
    /// An earlier call failed: the output is incomplete and must be discarded.
    Failed,
}

impl core::fmt::Display for Misuse {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            Self::OutOfOrder { expected } => write!(f, "out of order: expected {}", expected.as_str()),
            Self::WrongType { expected, found } => {
                write!(f, "a {} value where a {} was declared", found.name(), expected.name())
            }
            Self::RunOutsideArray => write!(f, "a scalar run outside a scalar array"),
            Self::MetadataCount { declared, found } => {
                write!(f, "{found} keys written, {declared} declared")
            }
            Self::TensorCount { declared, found } => {
                write!(f, "{found} tensor infos given, the directory holds {declared}")
            }
            Self::ArrayLen { declared, found } => {
                write!(f, "array of {declared} elements given {found}")
            }
            Self::StringPiece { expected_at, found_at, len } => write!(
                f,
                "string piece at {found_at} does not continue the string of {len} bytes at {expected_at}"
            ),
            Self::DataSize { tensor, expected, found } => write!(
                f,
                "tensor {tensor}: {found} bytes of data where {expected} remain"
            ),
            Self::DirectoryMismatch { tensor } => {
                write!(f, "tensor info differs from directory entry {tensor}")
            }
            Self::HeaderMismatch => write!(f, "header or end event differs from the file written"),
            Self::DuplicateTensor { first, second } => {
                write!(f, "tensors {first} and {second} have the same name")
            }
            Self::TooManyKeys { max, found } => write!(
                f,
                "{found} keys declared; the duplicate-key check holds {max}"
            ),
            Self::Failed => write!(f, "an earlier write failed; the output is incomplete"),
        }
    }
}
