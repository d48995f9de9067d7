//! `miniquant validate FILE`: every problem in a GGUF file, one line each.

use std::io::Write;
use std::path::Path;

use super::{print_warnings, quoted, CliError};
use crate::file::GgufFile;

pub(super) fn run<O: Write, E: Write>(
    path: &Path,
    out: &mut O,
    err: &mut E,
) -> Result<(), CliError> {
    let file = GgufFile::open_unchecked(path)
        .map_err(|e| CliError::io(format!("cannot open {}", quoted(path)), e))?;
    let report = file.report();
    if !report.is_valid() {
        return Err(CliError::Gguf(report.clone()));
    }
    print_warnings(report, err).map_err(|e| CliError::io("cannot write the output", e))?;
    let index = file.index();
    writeln!(
        out,
        "ok: {} metadata keys, {} tensors, {} warnings",
        index.metadata().len(),
        index.tensors().len(),
        report.warnings.len()
    )
    .map_err(|e| CliError::io("cannot write the output", e))
}
