//! `miniquant make-example OUT`: writes the small example GGUF file.

use std::io::Write;
use std::path::Path;

use super::{quoted, CliError, Output};

pub(super) fn run<E: Write>(path: &Path, err: &mut E) -> Result<(), CliError> {
    let bytes = crate::example::tiny_gguf();
    let mut sink = Output::file(path)?;
    let result = sink.write_all(&bytes);
    sink.finish(result)?;
    writeln!(err, "wrote {} ({} bytes)", quoted(path), bytes.len())
        .map_err(|e| CliError::io("cannot write stderr", e))
}
