//! `miniquant make-example OUT`: writes the small example GGUF file.

use std::io::Write;
use std::path::Path;

use super::{quoted, CliError};

pub(super) fn run<E: Write>(path: &Path, err: &mut E) -> Result<(), CliError> {
    let bytes = crate::example::tiny_gguf();
    std::fs::write(path, &bytes)
        .map_err(|e| CliError::io(format!("cannot write {}", quoted(path)), e))?;
    writeln!(err, "wrote {} ({} bytes)", quoted(path), bytes.len())
        .map_err(|e| CliError::io("cannot write stderr", e))
}
