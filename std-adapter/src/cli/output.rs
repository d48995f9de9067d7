//! Where every command writes its output: one helper for all of them.
//!
//! - A file is written through [`OutputFile`]: unnamed (or under a hidden temporary name) until
//!   complete, then given its name at once; a failure, SIGINT or SIGTERM leaves nothing. A
//!   symlink is written through: the file it points to is replaced, the link stays.
//! - `-` streams to stdout (where a command allows it); so does an existing path that is no
//!   regular file (`/dev/stdout`, a FIFO, a device), written in place.
//! - An output that is the same file as one of the command's inputs (same device and inode, so
//!   through symlinks and hard links too) is refused before anything is created, as a usage error
//!   (exit 2): writing it would destroy the input while it is being read. Only `requantize` and
//!   `extract` may replace their input ([`Output::file`]): the input stays mapped while the
//!   new file is written aside, and the rename that replaces it is atomic.

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use super::progress::Progress;
use super::{quoted, CliError};
use crate::output_file::OutputFile;

/// An output that is always a file ([`Output::file`]).
pub(super) type FileOutput = Output<'static, io::Sink>;

/// Where a command writes its output (see the module docs).
pub(super) struct Output<'o, O: Write> {
    target: Target<'o, O>,
}

enum Target<'o, O: Write> {
    Stdout(&'o mut O),
    File {
        path: PathBuf,
        writer: BufWriter<OutputFile>,
    },
    /// A FIFO, a terminal or another device: nothing to name or remove.
    Stream {
        path: PathBuf,
        writer: BufWriter<std::fs::File>,
    },
}

impl<'o, O: Write> Output<'o, O> {
    /// The `out` writer for `-`, else a new file; refused if it is one of `inputs`.
    pub(super) fn create(path: &Path, out: &'o mut O, inputs: &[&Path]) -> Result<Self, CliError> {
        if path == Path::new("-") {
            refuse_stdout_onto_input(inputs)?;
            return Ok(Self {
                target: Target::Stdout(out),
            });
        }
        refuse_aliases(path, inputs)?;
        Self::file_unchecked(path)
    }

    fn file_unchecked(path: &Path) -> Result<Self, CliError> {
        let is_stream = std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir());
        if is_stream {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(|e| CliError::io(format!("cannot open {}", quoted(path)), e))?;
            return Ok(Self {
                target: Target::Stream {
                    path: path.to_owned(),
                    writer: BufWriter::new(file),
                },
            });
        }
        let file = OutputFile::create(path)
            .map_err(|e| CliError::io(format!("cannot create {}", quoted(path)), e))?;
        Ok(Self {
            target: Target::File {
                path: path.to_owned(),
                writer: BufWriter::new(file),
            },
        })
    }

    pub(super) fn describe(&self) -> String {
        match &self.target {
            Target::Stdout(_) => "stdout".to_owned(),
            Target::File { path, .. } | Target::Stream { path, .. } => quoted(path),
        }
    }

    pub(super) fn write_all(&mut self, bytes: &[u8]) -> Result<(), CliError> {
        Write::write_all(self, bytes)
            .map_err(|e| CliError::io(format!("cannot write {}", self.describe()), e))
    }

    pub(super) fn write_f32(
        &mut self,
        values: &[f32],
        scratch: &mut Vec<u8>,
    ) -> Result<(), CliError> {
        scratch.clear();
        scratch.extend(values.iter().flat_map(|v| v.to_le_bytes()));
        self.write_all(scratch)
    }

    /// Writes `bytes` with a progress bar (on a terminal, if it takes long).
    pub(super) fn write_with_progress(&mut self, bytes: &[u8]) -> Result<(), CliError> {
        const CHUNK: usize = 4 << 20;
        let mut progress = Progress::new(&self.describe(), bytes.len() as u64);
        let mut done = 0u64;
        for chunk in bytes.chunks(CHUNK) {
            self.write_all(chunk)?;
            done += chunk.len() as u64;
            progress.set(done);
        }
        progress.finish();
        Ok(())
    }

    /// Completes the output if the command succeeded: flushes stdout, or gives the file its name.
    /// On `Err(e)` the file is dropped unnamed (nothing remains) and `e` passed on.
    pub(super) fn finish<T>(self, result: Result<T, CliError>) -> Result<T, CliError> {
        match self.target {
            Target::Stdout(w) => {
                let flushed = w
                    .flush()
                    .map_err(|e| CliError::io("cannot write stdout", e));
                result.and_then(|v| flushed.map(|()| v))
            }
            Target::Stream { path, mut writer } => {
                let flushed = writer
                    .flush()
                    .map_err(|e| CliError::io(format!("cannot write {}", quoted(&path)), e));
                result.and_then(|v| flushed.map(|()| v))
            }
            Target::File { path, writer } => {
                let value = result?;
                let cannot_write = |e| CliError::io(format!("cannot write {}", quoted(&path)), e);
                let file = writer
                    .into_inner()
                    .map_err(|e| cannot_write(e.into_error()))?;
                file.persist().map_err(cannot_write)?;
                Ok(value)
            }
        }
    }
}

impl Output<'static, io::Sink> {
    /// A file (`-` is a file name here), not checked against inputs: for commands that have none,
    /// or whose output may replace their input (see the module docs).
    pub(super) fn file(path: &Path) -> Result<Self, CliError> {
        Self::file_unchecked(path)
    }
}

impl<O: Write> Write for Output<'_, O> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.target {
            Target::Stdout(w) => w.write(buf),
            Target::File { writer, .. } => writer.write(buf),
            Target::Stream { writer, .. } => writer.write(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match &mut self.target {
            Target::Stdout(w) => w.write_all(buf),
            Target::File { writer, .. } => writer.write_all(buf),
            Target::Stream { writer, .. } => writer.write_all(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.target {
            Target::Stdout(w) => w.flush(),
            Target::File { writer, .. } => writer.flush(),
            Target::Stream { writer, .. } => writer.flush(),
        }
    }
}

/// Refuses `output` if it is the same file as one of `inputs` (`-`: the file standard input is
/// redirected from, if any).
pub(super) fn refuse_aliases(output: &Path, inputs: &[&Path]) -> Result<(), CliError> {
    let is_output = |input: &&&Path| {
        if **input == Path::new("-") {
            is_stdin(output)
        } else {
            same_file(output, input)
        }
    };
    match inputs.iter().find(is_output) {
        Some(input) => Err(aliased(&quoted(output), input)),
        None => Ok(()),
    }
}

/// Whether standard input is redirected from the existing file `path` (`< model.gguf`).
#[cfg(unix)]
fn is_stdin(path: &Path) -> bool {
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    let stdin = io::stdin().as_fd().try_clone_to_owned();
    match (
        stdin.and_then(|fd| std::fs::File::from(fd).metadata()),
        std::fs::metadata(path),
    ) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}

#[cfg(not(unix))]
fn is_stdin(_path: &Path) -> bool {
    false
}

/// Refuses stdout when it is redirected to one of `inputs` (`>> model.gguf`).
fn refuse_stdout_onto_input(inputs: &[&Path]) -> Result<(), CliError> {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        use std::os::unix::fs::MetadataExt;
        let stdout = io::stdout().as_fd().try_clone_to_owned();
        if let Ok(written) = stdout.and_then(|fd| std::fs::File::from(fd).metadata()) {
            let files = inputs.iter().filter(|p| **p != Path::new("-"));
            for input in files {
                if std::fs::metadata(input)
                    .is_ok_and(|read| (read.dev(), read.ino()) == (written.dev(), written.ino()))
                {
                    return Err(aliased("stdout", input));
                }
            }
        }
    }
    let _ = inputs;
    Ok(())
}

fn aliased(output: &str, input: &Path) -> CliError {
    CliError::Usage(format!(
        "the output {output} is the input {} (the same file, maybe through a link): writing it \
         would destroy the input; choose another output",
        quoted(input)
    ))
}

/// Whether both paths name one existing file (a path that does not exist is no input).
#[cfg(unix)]
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}

#[cfg(not(unix))]
fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}
