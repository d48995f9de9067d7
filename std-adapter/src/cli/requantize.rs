//! `miniquant requantize IN.gguf OUT.gguf --type TYPE [--threads N] [--allow-non-finite]`: the
//! library's [`crate::requantize`] (which tensors, which types, byte order, metadata) as a command.
//!
//! - `--threads` defaults to all cores; `--allow-non-finite` is [`Options::allow_non_finite`].
//! - The output is created only once the conversion is known to be possible (no missing fallback,
//!   no big-endian refusal), through the commands' one [`Output`](super::output::Output), and gets
//!   its name only when complete ([`crate::output_file`]): on Linux it is written unnamed
//!   (`O_TMPFILE`) so a killed run leaves nothing; elsewhere under `.OUT.<pid>.partial`, removed on
//!   failure, SIGINT or SIGTERM. So OUT may be IN: the input stays mapped while the new file is
//!   written, and replaces it atomically.
//! - A progress bar over the output's bytes on a terminal; the summary (tensors per type,
//!   fallbacks and why) on stderr.

use std::io::{IsTerminal, Write};
use std::num::NonZeroUsize;
use std::path::Path;
use std::time::Instant;

use super::output::FileOutput;
use super::{open_gguf, progress, quoted, type_arg, CliError};
use crate::requantize::{BigEndianRefusal, Options, Plan, RequantizeError, Target};

/// Parses `--type` (case-insensitive) as every command does, keeping the types requantize can
/// produce ([`Target::ALL`]); the error lists them.
pub(super) fn parse_target(name: &str) -> Result<Target, String> {
    let types = Target::ALL.map(|t| t.ggml_type);
    let t = type_arg::parse_among(
        name,
        &types,
        "ggml quantizes it only with an importance matrix, or it is not a type for weights",
    )?;
    Target::of(t).ok_or_else(|| format!("{t} is not a requantize type"))
}

pub(super) fn run<E: Write>(
    input: &Path,
    output: &Path,
    target: Target,
    threads: Option<NonZeroUsize>,
    allow_non_finite: bool,
    err: &mut E,
) -> Result<(), CliError> {
    let options = Options {
        threads: threads
            .or_else(|| std::thread::available_parallelism().ok())
            .unwrap_or(NonZeroUsize::MIN),
        allow_non_finite,
    };
    let threads = options.threads;
    let start = Instant::now();
    let file = open_gguf(input)?;
    let plan = Plan::new(&file, target).map_err(|e| cli_error(e, input))?;
    // The bar draws on the process's stderr, so only when that is a terminal.
    let bar = progress::byte_bar(std::io::stderr().is_terminal());
    let mut out = FileOutput::file(output)?;
    let result = plan.write(&mut out, &options, &|done, total| {
        bar.set_length(total);
        bar.set_position(done);
    });
    progress::clear(&bar);
    let summary = result.map_err(|e| match e {
        RequantizeError::Io(e) => CliError::io(format!("cannot write {}", quoted(output)), e),
        e => cli_error(e, input),
    })?;
    out.finish(Ok(()))?;
    let t = target.ggml_type;
    let mut converted = format!("{} tensors to {t}", summary.to_target());
    for f in &summary.fallbacks {
        converted.push_str(&format!(", {} to {} (fallback)", f.tensors, f.ggml_type));
    }
    let mut text = format!(
        "{} -> {}: {converted}, {} copied; {:.1} MB -> {:.1} MB in {:.2} s on {threads} thread{}\n",
        quoted(input),
        quoted(output),
        summary.copied,
        summary.bytes_in as f64 / 1e6,
        summary.bytes_out as f64 / 1e6,
        start.elapsed().as_secs_f64(),
        if threads.get() == 1 { "" } else { "s" }
    );
    for f in &summary.fallbacks {
        text.push_str(&format!(
            "  {} tensors to {}: {}\n",
            f.tensors,
            f.ggml_type,
            f.reason(t)
        ));
    }
    err.write_all(text.as_bytes())
        .map_err(|e| CliError::io("cannot write stderr", e))
}

/// The command's message for a library error: the input named, the flag or command that helps.
fn cli_error(e: RequantizeError, input: &Path) -> CliError {
    let message = match e {
        RequantizeError::BigEndian(refusal) => {
            let hint = match refusal {
                BigEndianRefusal::Target { .. } => {
                    " (miniquant convert-endian IN OUT --order little)"
                }
                BigEndianRefusal::Source { .. } => "",
            };
            format!("{} is big-endian and {refusal}{hint}", quoted(input))
        }
        e @ RequantizeError::NonFinite { .. } => {
            format!("{e} (--allow-non-finite to do it anyway)")
        }
        // The core's message alone, as the command printed it before the library named tensors.
        RequantizeError::Tensor { error, .. } | RequantizeError::Write(error) => error.to_string(),
        RequantizeError::Io(e) => return CliError::io("cannot write the output file", e),
        e @ (RequantizeError::NoFallback { .. } | RequantizeError::WorkerPanicked) => e.to_string(),
    };
    CliError::Message(message)
}
