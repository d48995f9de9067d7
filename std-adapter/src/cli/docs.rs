//! `miniquant completions SHELL` and `miniquant man`: shell completion scripts and the roff man
//! page, generated from the same clap definition as the parser (so they list exactly the real
//! commands and flags) and written to standard output.
//!
//! The man page is produced at run time rather than by a build script: the binary is then the one
//! source (`miniquant man > miniquant.1` always matches it), and the build needs no second copy of
//! the CLI definition.

use std::io::Write;

use clap::CommandFactory;

use super::{Cli, CliError};

/// The shells `completions` writes scripts for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Shell {
    /// Bash: `source <(miniquant completions bash)`.
    Bash,
    /// Zsh: write it as `_miniquant` into a directory of `$fpath`.
    Zsh,
    /// Fish: write it to `~/.config/fish/completions/miniquant.fish`.
    Fish,
}

pub(super) fn completions<O: Write>(shell: Shell, out: &mut O) -> Result<(), CliError> {
    let generator = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    let mut bytes = Vec::new();
    clap_complete::generate(generator, &mut Cli::command(), "miniquant", &mut bytes);
    out.write_all(&bytes)
        .map_err(|e| CliError::io("cannot write the output", e))
}

pub(super) fn man<O: Write>(out: &mut O) -> Result<(), CliError> {
    let mut bytes = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut bytes)
        .map_err(|e| CliError::io("cannot render the man page", e))?;
    out.write_all(&bytes)
        .map_err(|e| CliError::io("cannot write the output", e))
}
