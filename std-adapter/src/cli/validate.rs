//! `miniquant validate FILE [--data]`: every problem in a GGUF file, one line each; with `--data`,
//! also every tensor whose values or block scales ggml's `ggml_validate_row_data` refuses.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::{open_gguf_unchecked, print_warnings, quoted, CliError};
use crate::diagnose::{problem_lines, report_lines};
use crate::file::GgufFile;
use crate::parallel::default_threads;
use crate::validate;

/// `validate`'s arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The GGUF file (`-` reads standard input).
    pub file: PathBuf,
    /// Also read every tensor's data and check it as llama.cpp's `--check-tensors` does
    /// (ggml_validate_row_data): no NaN or infinite F32/F16/BF16 value, no NaN or infinite block
    /// scale. Reports the tensor, row and block of the first bad one in each tensor.
    #[arg(long)]
    pub data: bool,
    /// Threads that check tensors with `--data` [default: all cores].
    #[arg(long, value_name = "N", requires = "data", value_parser = super::threads_arg::parse)]
    pub threads: Option<std::num::NonZeroUsize>,
}

pub(super) fn run<O: Write, E: Write>(
    args: &Args,
    out: &mut O,
    err: &mut E,
) -> Result<(), CliError> {
    let path = args.file.as_path();
    let stdin = path == Path::new("-");
    // The data check needs the file's index; so does standard input, which can be read once.
    let opened = if stdin || args.data {
        Some(open_gguf_unchecked(path)?)
    } else {
        None
    };
    let report = match &opened {
        Some(file) => {
            if !file.report().is_valid() {
                return Err(CliError::Problems(problem_lines(file)));
            }
            file.report().clone()
        }
        // The lean path: no index unless there is something to explain.
        None => GgufFile::validate(path)
            .map_err(|e| CliError::of_file(format!("cannot open {}", quoted(path)), e))?,
    };
    if !report.is_valid() {
        // The index and bytes give the messages their context (the key, the truncation).
        let context = GgufFile::open_unchecked(path).ok();
        return Err(CliError::Problems(report_lines(&report, context.as_ref())));
    }
    let data_note = match &opened {
        Some(file) if args.data => {
            let threads = args.threads.map_or_else(default_threads, |n| n.get());
            let problems = validate::check_data(file, threads);
            if !problems.is_empty() {
                let mut lines: Vec<String> =
                    problems.iter().map(|p| format!("error: {p}")).collect();
                lines.extend(report.warnings.iter().map(|w| format!("warning: {w}")));
                return Err(CliError::Problems(lines));
            }
            let bytes: u64 = file.index().tensors().iter().map(|t| t.bytes).sum();
            format!("; data: {bytes} bytes, no NaN or infinite value or scale")
        }
        _ => String::new(),
    };
    print_warnings(&report, err).map_err(|e| CliError::io("cannot write the output", e))?;
    writeln!(
        out,
        "ok: {} metadata keys, {} tensors, {} warnings{data_note}",
        report.keys,
        report.tensors,
        report.warnings.len()
    )
    .map_err(|e| CliError::io("cannot write the output", e))
}
