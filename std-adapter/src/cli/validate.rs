//! `miniquant validate FILE`: every problem in a GGUF file, one line each.

use std::io::Write;
use std::path::Path;

use super::{open_gguf_unchecked, print_warnings, quoted, CliError};
use crate::diagnose::{problem_lines, report_lines};
use crate::file::GgufFile;

pub(super) fn run<O: Write, E: Write>(
    path: &Path,
    out: &mut O,
    err: &mut E,
) -> Result<(), CliError> {
    let report = if path == Path::new("-") {
        // Standard input can be read once: index it right away.
        let file = open_gguf_unchecked(path)?;
        if !file.report().is_valid() {
            return Err(CliError::Problems(problem_lines(&file)));
        }
        file.report().clone()
    } else {
        // The lean path: no index unless there is something to explain.
        GgufFile::validate(path)
            .map_err(|e| CliError::io(format!("cannot open {}", quoted(path)), e))?
    };
    if !report.is_valid() {
        // The index and bytes give the messages their context (the key, the truncation).
        let context = GgufFile::open_unchecked(path).ok();
        return Err(CliError::Problems(report_lines(&report, context.as_ref())));
    }
    print_warnings(&report, err).map_err(|e| CliError::io("cannot write the output", e))?;
    writeln!(
        out,
        "ok: {} metadata keys, {} tensors, {} warnings",
        report.keys,
        report.tensors,
        report.warnings.len()
    )
    .map_err(|e| CliError::io("cannot write the output", e))
}
