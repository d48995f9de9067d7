//! The `miniquant` binary: parses the command line and runs it (see [`miniquant_std::cli`]).

use std::io::{BufWriter, Write};
use std::process::ExitCode;

use clap::Parser;
use miniquant_std::cli::{run, Cli};

fn main() -> ExitCode {
    // First, so that no output can be interrupted before its temporary is watched.
    miniquant_std::signals::install();
    // Before `--level` is read and any level is detected: the OS's permission for the AMX tiles,
    // where the CPU has them (the `amx` level is then available, and the automatic choice).
    miniquant_std::amx::request();
    // Usage errors print clap's message and exit with 2.
    let cli = Cli::parse();
    // Neither stream is locked for the whole run: a progress bar draws on stderr from worker
    // threads, and would wait forever for a lock this thread holds while it waits for them.
    let mut out = BufWriter::new(std::io::stdout());
    let mut err = std::io::stderr();
    let code = run(&cli, &mut out, &mut err);
    // `run` flushed already; a failure here (a closed pipe) has nowhere to be reported.
    let _ = out.flush();
    ExitCode::from(code)
}
