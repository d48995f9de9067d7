//! The `miniquant` command line. Arguments are parsed by clap (a usage error exits with 2); each
//! command is a function that writes to the `out` and `err` writers it is given, so that tests can
//! capture what it prints. [`run()`] returns the exit code: 0 on success, 1 on any failure.
//!
//! Failures print one line per problem on `err`: `error: <what>`, where a problem in a GGUF file
//! ends with `at byte <offset>`; layouts ggml would refuse print `warning: ...` lines.

mod array_file;
mod bench;
mod convert_endian;
mod dequant;
mod dequant_raw;
mod docs;
mod extract;
mod inspect;
mod level_arg;
mod make_example;
mod matvec;
mod output;
mod patterns;
mod progress;
mod quantize_raw;
mod requantize;
mod run;
mod threads_arg;
mod tokenize;
mod type_arg;
mod validate;

use std::fmt;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};

use crate::file::GgufFile;
use crate::index::TensorEntry;
use crate::validate::Report;
use output::Output;

/// Exit code of a command that succeeded.
pub const EXIT_OK: u8 = 0;
/// Exit code of a command that failed (usage errors exit with clap's 2).
pub const EXIT_FAILURE: u8 = 1;
/// Exit code of a usage error found after parsing (clap's own usage errors use the same code).
pub const EXIT_USAGE: u8 = 2;

/// The `miniquant` command line.
#[derive(Debug, Parser)]
#[command(
    name = "miniquant",
    version,
    about = "Inspect, check, dequantize and requantize GGUF model files (llama.cpp's format) with \
             ggml's own quantization kernels, bit for bit.",
    long_about = "Inspect, check, dequantize and requantize GGUF model files (llama.cpp's format) \
                  with ggml's own quantization kernels, bit for bit.\n\n\
                  Every command checks the file's header first; a problem is one `error:` line \
                  that ends with the byte offset it points at. Outputs appear only when \
                  complete. Exit codes: 0 success, 1 failure, 2 usage error.",
    after_help = "Examples:\n  \
        miniquant inspect model.gguf                   metadata, tensors, totals per type\n  \
        miniquant validate --data model.gguf           every problem, NaN scales included\n  \
        miniquant dequant model.gguf output_norm.weight -o norm.npy\n  \
        miniquant requantize model.gguf model-q8_0.gguf --type q8_0\n  \
        miniquant extract model.gguf small.gguf --tensor token_embd.weight\n\n\
        `miniquant help COMMAND` tells more about a command; `miniquant completions bash` and \
        `miniquant man` give shell completions and a man page."
)]
pub struct Cli {
    /// The command.
    #[command(subcommand)]
    pub command: Command,
    /// Read input files into memory instead of mapping them (also MINIQUANT_NO_MMAP=1): slower
    /// and bigger, but a file another process truncates meanwhile cannot stop the command.
    #[arg(long, global = true)]
    pub no_mmap: bool,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print a GGUF file's header: metadata and tensors in file order, totals per type.
    Inspect(inspect::Args),
    /// Check a file, one line per problem; `--data` also checks values and scales.
    ///
    /// Exits 0 if the file is valid (warnings allowed), 1 with one line per problem if not.
    /// `--data` also reads every tensor as llama.cpp's `--check-tensors` does.
    Validate(validate::Args),
    /// Write a tensor (or rows of it) as f32, raw or `.npy`; statistics go to stderr.
    ///
    /// Little-endian f32, row-major.
    Dequant(dequant::Args),
    /// Quantize little-endian f32 (raw or `.npy`) into raw blocks of a ggml type.
    QuantizeRaw(quantize_raw::Args),
    /// Dequantize a file of raw blocks of a ggml type into f32 (raw or `.npy`).
    DequantRaw(dequant_raw::Args),
    /// Multiply a 2-D tensor by a vector: y = W x, as ggml computes it.
    ///
    /// W has shape [rows, cols] as `inspect` prints it; x is an f32 vector of cols values (raw or
    /// `.npy`); y (rows values) is written as little-endian f32 (raw or `.npy`).
    Matvec {
        /// The GGUF file.
        file: PathBuf,
        /// The tensor W.
        tensor: String,
        /// x: little-endian f32 (raw, or a 1-D `.npy`), cols values: the last number of the shape
        /// `inspect` prints (ggml's `ne[0]`, the first stored dimension).
        x: PathBuf,
        /// Output file (`-` for stdout) [default: y.f32, or y.npy with `--format npy`, in the
        /// current directory].
        #[arg(short, long, value_name = "OUT")]
        output: Option<PathBuf>,
        /// Threads and kernel level.
        #[command(flatten)]
        options: matvec::MatvecOptions,
    },
    /// Write a smaller GGUF file with the chosen tensors and keys.
    ///
    /// All by default: then the output is byte-identical to a file ggml wrote. Written through a
    /// temporary file renamed into place, so OUTPUT may be INPUT (replaced atomically once
    /// complete).
    Extract {
        /// The GGUF file to read.
        input: PathBuf,
        /// The GGUF file to write.
        output: PathBuf,
        /// Keep this tensor (repeatable); default: every tensor.
        #[arg(long = "tensor", value_name = "NAME", num_args = 1..)]
        tensors: Vec<String>,
        /// Keep the keys matching this pattern, `*` matching any characters (repeatable); default: every key.
        #[arg(long = "key", value_name = "PATTERN", num_args = 1..)]
        keys: Vec<String>,
        /// Cut every metadata array (tokens, scores, merges, ...) to its first N elements.
        #[arg(long, value_name = "N")]
        max_array: Option<usize>,
    },
    /// Convert the weight tensors to TYPE, byte-identical to `llama-quantize --pure`.
    ///
    /// Keeps the metadata and tensor order; written to a temporary file renamed into place, so
    /// OUTPUT may be INPUT (replaced atomically once complete).
    Requantize {
        /// The source GGUF file.
        input: PathBuf,
        /// The output GGUF file.
        output: PathBuf,
        /// Target type (`q4_k`, `Q8_0`, ...; any case).
        #[arg(long = "type", value_name = "TYPE", value_parser = requantize::parse_target)]
        target: crate::requantize::Target,
        /// Threads that quantize rows [default: all cores].
        #[arg(long, value_name = "N", value_parser = threads_arg::parse)]
        threads: Option<std::num::NonZeroUsize>,
        /// Quantize NaN and infinite source values as ggml would (their blocks become NaN or inf).
        #[arg(long)]
        allow_non_finite: bool,
    },
    /// Generate tokens greedily from a prompt with the model's forward pass (llama or gemma3).
    ///
    /// Streams the generated text (the ids, for a file without a tokenizer); stops early at an
    /// end-of-generation token. Every thread count, kernel level and batch size gives the same
    /// tokens. On a terminal, a prompt of more than one batch that takes over a second shows a
    /// progress bar on stderr while it is processed (nothing in a pipe).
    Run(run::Args),
    /// Prompt and generation tokens per second, in llama-bench's table (`pp512`, `tg128`).
    ///
    /// The same columns as llama.cpp's `llama-bench` (model, size, params, backend, threads,
    /// test, t/s as mean ± standard deviation over the repetitions), so that the two tables can
    /// be read side by side. The prompt test runs N token ids (BOS if the file adds one, then
    /// ids from a fixed-seed generator) through an empty context in batches; the generation test
    /// runs N tokens one at a time from an empty context. Each test runs once untimed first.
    Bench(bench::Args),
    /// Write a GGUF file in another byte order, as gguf-py's `gguf-convert-endian` does.
    ConvertEndian(convert_endian::Args),
    /// Print the token ids of TEXT under FILE's tokenizer, as llama.cpp's llama-tokenize --ids.
    ///
    /// One line of ids separated by spaces. The BOS token is added if the file asks for it, and
    /// special tokens written in the text (`<|im_start|>`, `<start_of_turn>`) are recognised,
    /// as llama.cpp does by default.
    Tokenize(tokenize::Args),
    /// Write the small example GGUF file (the repository ships it as examples/tiny.gguf).
    MakeExample {
        /// Where to write it.
        output: PathBuf,
    },
    /// Print a shell completion script: `source <(miniquant completions bash)`.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: docs::Shell,
    },
    /// Print the man page (roff): `miniquant man > miniquant.1`.
    Man,
}

/// Runs a parsed command line and returns the exit code.
///
/// `err` must not hold the stderr lock for the whole run (pass `std::io::stderr()`, not its
/// `lock()`): progress bars draw on stderr from worker threads, which would wait forever.
pub fn run<O: Write, E: Write>(cli: &Cli, out: &mut O, err: &mut E) -> u8 {
    // MINIQUANT_LEVEL forces the kernel level of every command; a bad one is a usage error.
    if let Err(e) = miniquant::quant::level::env_level() {
        let _ = writeln!(err, "error: MINIQUANT_LEVEL: {e}");
        return EXIT_USAGE;
    }
    // MINIQUANT_NO_MMAP=1 is --no-mmap for every command; anything but 0 or 1 is a usage error.
    let no_mmap_env = std::env::var_os("MINIQUANT_NO_MMAP");
    match no_mmap_env.as_ref().map(|v| v.to_str()) {
        None | Some(Some("" | "0")) => crate::file::set_memory_mapping(!cli.no_mmap),
        Some(Some("1")) => crate::file::set_memory_mapping(false),
        Some(_) => {
            let value = no_mmap_env.unwrap_or_default();
            let _ = writeln!(
                err,
                "error: MINIQUANT_NO_MMAP is {value:?}; expected 0 or 1"
            );
            return EXIT_USAGE;
        }
    }
    let result = match &cli.command {
        Command::Inspect(args) => inspect::run(args, out, err),
        Command::Validate(args) => validate::run(args, out, err),
        Command::Dequant(args) => dequant::run(args, out, err),
        Command::QuantizeRaw(args) => quantize_raw::run(args, err),
        Command::DequantRaw(args) => dequant_raw::run(args, out, err),
        Command::Matvec {
            file,
            tensor,
            x,
            output,
            options,
        } => matvec::run(file, tensor, x, output.as_deref(), options, out, err),
        Command::Extract {
            input,
            output,
            tensors,
            keys,
            max_array,
        } => extract::run(
            input,
            output,
            &extract::Selection {
                tensors,
                keys,
                max_array: *max_array,
            },
            err,
        ),
        Command::ConvertEndian(args) => convert_endian::run(args, out, err),
        Command::Run(args) => run::run(args, out, err),
        Command::Bench(args) => bench::run(args, out),
        Command::MakeExample { output } => make_example::run(output, err),
        Command::Tokenize(args) => tokenize::run(args, out),
        Command::Completions { shell } => docs::completions(*shell, out),
        Command::Man => docs::man(out),
        Command::Requantize {
            input,
            output,
            target,
            threads,
            allow_non_finite,
        } => requantize::run(input, output, *target, *threads, *allow_non_finite, err),
    };
    let flushed = out
        .flush()
        .map_err(|e| CliError::io("cannot write the output", e));
    match result.and(flushed) {
        Ok(()) => EXIT_OK,
        // A reader that stopped early (`miniquant inspect x.gguf | head`) is not worth a message
        // nor a failure: it got what it wanted.
        Err(CliError::Io { source, .. }) if source.kind() == io::ErrorKind::BrokenPipe => EXIT_OK,
        Err(e @ CliError::Usage(_)) => {
            let _ = e.print(err);
            EXIT_USAGE
        }
        Err(e) => {
            // Nothing more can be done if stderr itself is gone.
            let _ = e.print(err);
            EXIT_FAILURE
        }
    }
}

/// Why a command failed.
#[derive(Debug)]
pub enum CliError {
    /// An I/O error, with what was being done.
    Io {
        /// What failed, e.g. "cannot open 'x.gguf'".
        what: String,
        /// The I/O error.
        source: io::Error,
    },
    /// Problems in a GGUF file, one line each.
    Gguf(Report),
    /// Any other failure, one line.
    Message(String),
    /// Problems in a GGUF file, as complete `error:` / `warning:` lines.
    Problems(Vec<String>),
    /// A usage error found after parsing (an output that is an input), one line: exit 2.
    Usage(String),
}

impl CliError {
    fn io(what: impl Into<String>, source: io::Error) -> Self {
        Self::Io {
            what: what.into(),
            source,
        }
    }

    /// An error of the library about a file: its I/O error after `what` (the CLI names the path
    /// its own way, in `what`); any other kind's message without the path.
    fn of_file(what: impl Into<String>, e: crate::Error) -> Self {
        match e.into_kind() {
            crate::ErrorKind::Io(source) => Self::io(what, source),
            other => Self::Message(other.to_string()),
        }
    }

    fn print<E: Write>(&self, err: &mut E) -> io::Result<()> {
        match self {
            Self::Gguf(report) => print_report(report, err),
            Self::Problems(lines) => lines.iter().try_for_each(|l| writeln!(err, "{l}")),
            other => writeln!(err, "error: {other}"),
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io { what, source } => write!(f, "{what}: {source}"),
            Self::Gguf(report) => match report.errors.first() {
                Some(e) => write!(f, "{e}"),
                None => write!(f, "invalid GGUF file"),
            },
            Self::Message(m) | Self::Usage(m) => f.write_str(m),
            Self::Problems(lines) => {
                let first = lines.first().map_or("invalid GGUF file", String::as_str);
                f.write_str(first.strip_prefix("error: ").unwrap_or(first))
            }
        }
    }
}

impl From<miniquant::Error> for CliError {
    fn from(e: miniquant::Error) -> Self {
        Self::Message(e.to_string())
    }
}

/// `error:` lines, then `warning:` lines.
fn print_report<E: Write>(report: &Report, err: &mut E) -> io::Result<()> {
    for e in &report.errors {
        writeln!(err, "error: {e}")?;
    }
    print_warnings(report, err)
}

fn print_warnings<E: Write>(report: &Report, err: &mut E) -> io::Result<()> {
    for w in &report.warnings {
        writeln!(err, "warning: {w}")?;
    }
    Ok(())
}

/// Opens, maps and checks a GGUF file (`-`: reads standard input); any error in it fails the
/// command.
fn open_gguf(path: &Path) -> Result<GgufFile, CliError> {
    let file = open_gguf_unchecked(path)?;
    if file.report().is_valid() {
        Ok(file)
    } else {
        Err(CliError::Problems(crate::diagnose::problem_lines(&file)))
    }
}

/// [`open_gguf`] for the commands that read chosen tensors (`dequant`, `matvec`, `extract`): a
/// file cut short (a partial download) opens too, and only reading a cut tensor fails, naming it
/// ([`find_tensor`], [`whole`]).
fn open_gguf_allowing_cut(path: &Path) -> Result<GgufFile, CliError> {
    let file = open_gguf_unchecked(path)?;
    if file.report().is_valid() || file.is_only_truncated() {
        Ok(file)
    } else {
        Err(CliError::Problems(crate::diagnose::problem_lines(&file)))
    }
}

/// Fails, naming the tensor and how much of it the file holds, if the file ends inside `tensor`.
fn whole(file: &GgufFile, tensor: &TensorEntry) -> Result<(), CliError> {
    match file.cut(tensor) {
        // The kind alone: the CLI's messages name the file their own way.
        Some(cut) => Err(CliError::Message(cut.kind().to_string())),
        None => Ok(()),
    }
}

/// Opens a GGUF file (`-`: reads standard input) without failing on problems in it.
fn open_gguf_unchecked(path: &Path) -> Result<GgufFile, CliError> {
    if path == Path::new("-") {
        use std::io::IsTerminal;
        if io::stdin().is_terminal() {
            // Nobody types a GGUF file: waiting for one looks like a hang.
            return Err(CliError::Usage(
                "standard input is a terminal: pipe a GGUF file into it (cat model.gguf | \
                 miniquant ...) or name the file"
                    .into(),
            ));
        }
        GgufFile::from_reader_unchecked(io::stdin().lock())
            .map_err(|e| CliError::of_file("cannot read standard input", e))
    } else {
        GgufFile::open_unchecked(path)
            .map_err(|e| CliError::of_file(format!("cannot open {}", quoted(path)), e))
    }
}

/// The entry of tensor `name` in `file` (opened from `path`), or the error that names both; an
/// error too if the file ends inside its data (a truncated file).
fn find_tensor<'f>(
    file: &'f GgufFile,
    path: &Path,
    name: &str,
) -> Result<&'f TensorEntry, CliError> {
    let tensor = file.index().tensor(name).ok_or_else(|| {
        let names = file.index().tensors().iter().map(|t| t.name.as_str());
        CliError::Message(format!(
            "no tensor named {name:?} in {}{}",
            quoted(path),
            patterns::suggestion(name, names)
        ))
    })?;
    whole(file, tensor)?;
    Ok(tensor)
}

fn quoted(path: &Path) -> String {
    format!("{:?}", path.display().to_string())
}

/// A name as printed on one line: control characters escaped.
fn one_line(s: &str) -> std::borrow::Cow<'_, str> {
    if s.chars().any(char::is_control) {
        s.chars()
            .flat_map(|c| c.escape_debug())
            .collect::<String>()
            .into()
    } else {
        s.into()
    }
}

fn shape_text(shape: &[u64]) -> String {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    format!("[{}]", dims.join(", "))
}
