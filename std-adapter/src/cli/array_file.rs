//! The commands' array inputs and outputs: raw little-endian f32 (or raw ggml blocks), or NumPy
//! `.npy`, chosen by `--format` or else by the file's extension. A `.npy` input must hold exactly
//! what the command reads (`<f4` or `|u1`, C order, data as long as its shape says); a file not
//! named `.npy` that starts with NumPy's magic is refused rather than read as numbers.

use std::path::Path;

use super::dequant::Format;
use super::{quoted, CliError, Output};
use crate::npy::{self, Dtype};

/// An f32 input: its values, and its shape if the file has one (`.npy`).
pub(super) struct F32Input {
    /// The shape, slowest-varying first (`None`: a raw file, a flat run of values).
    pub shape: Option<Vec<u64>>,
    /// The values in C order.
    pub values: Vec<f32>,
}

/// Reads the f32 input `path` in the `explicit` format, else the one its extension says.
pub(super) fn read_f32(path: &Path, explicit: Option<Format>) -> Result<F32Input, CliError> {
    let bytes = read(path)?;
    match format_of(path, explicit, &bytes)? {
        Format::Npy => {
            let (shape, values) = npy::read_f32(&bytes).map_err(|e| npy_error(path, &e))?;
            Ok(F32Input {
                shape: Some(shape),
                values,
            })
        }
        Format::Raw => {
            if bytes.len() % 4 != 0 {
                return Err(CliError::Message(format!(
                    "{} is {} bytes, not a whole number of f32 values (4 bytes each)",
                    quoted(path),
                    bytes.len()
                )));
            }
            let values = bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            Ok(F32Input {
                shape: None,
                values,
            })
        }
    }
}

/// Reads raw ggml blocks from `path`: the file itself, or the data of a `|u1` `.npy` array if it is
/// named `.npy`.
pub(super) fn read_blocks(path: &Path) -> Result<Vec<u8>, CliError> {
    let mut bytes = read(path)?;
    if Format::resolve(None, Some(path)) == Format::Npy {
        let (_, data) = npy::read(&bytes, Dtype::U8).map_err(|e| npy_error(path, &e))?;
        let start = bytes.len() - data.len();
        bytes.drain(..start);
    }
    Ok(bytes)
}

/// Writes the `.npy` header of an array of `dtype` and `shape` if the output's format is npy.
pub(super) fn start_output<O: std::io::Write>(
    sink: &mut Output<'_, O>,
    format: Format,
    dtype: Dtype,
    shape: &[u64],
) -> Result<(), CliError> {
    match format {
        Format::Npy => sink.write_all(&npy::header(dtype, shape)),
        Format::Raw => Ok(()),
    }
}

/// The input's format: `explicit`, else by extension; a file named otherwise that starts with
/// NumPy's magic is refused (reading its header as numbers would silently give wrong values).
fn format_of(path: &Path, explicit: Option<Format>, bytes: &[u8]) -> Result<Format, CliError> {
    let format = Format::resolve(explicit, Some(path));
    if explicit.is_none() && format == Format::Raw && npy::has_magic(bytes) {
        return Err(CliError::Message(format!(
            "{} starts with NumPy's magic but is not named .npy: pass --format npy to read it as \
             .npy (or --format raw to read its bytes as f32)",
            quoted(path)
        )));
    }
    Ok(format)
}

/// A stream input (a pipe, a FIFO, a device) is read up to this many bytes: a regular file's size
/// bounds its read, a stream's nothing does (`/dev/zero` would fill memory).
const MAX_STREAM_BYTES: u64 = 256 << 20;

fn read(path: &Path) -> Result<Vec<u8>, CliError> {
    use std::io::Read;
    let cannot_read = |e| CliError::io(format!("cannot read {}", quoted(path)), e);
    let file = std::fs::File::open(path).map_err(cannot_read)?;
    if file.metadata().map_err(cannot_read)?.is_file() {
        return std::fs::read(path).map_err(cannot_read);
    }
    let mut bytes = Vec::new();
    file.take(MAX_STREAM_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot_read)?;
    if bytes.len() as u64 > MAX_STREAM_BYTES {
        return Err(CliError::Message(format!(
            "{} is a stream longer than {} MiB, the most read from a pipe or device: save it to a \
             file and pass that",
            quoted(path),
            MAX_STREAM_BYTES >> 20
        )));
    }
    Ok(bytes)
}

fn npy_error(path: &Path, e: &npy::NpyError) -> CliError {
    CliError::Message(format!("{} {e}", quoted(path)))
}
