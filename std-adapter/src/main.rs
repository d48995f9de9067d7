//! The `miniquant` binary: parses the command line and runs it (see [`miniquant_std::cli`]).

use std::io::{BufWriter, Write};
use std::process::ExitCode;

use clap::Parser;
use miniquant_std::cli::{run, Cli};

fn main() -> ExitCode {
    // Usage errors print clap's message and exit with 2.
    let cli = Cli::parse();
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut err = std::io::stderr().lock();
    let code = run(&cli, &mut out, &mut err);
    // `run` flushed already; a failure here (a closed pipe) has nowhere to be reported.
    let _ = out.flush();
    ExitCode::from(code)
}
