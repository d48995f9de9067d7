//! `miniquant tokenize FILE TEXT`: the token ids of TEXT under FILE's tokenizer, as llama.cpp's
//! `llama-tokenize --ids` gives them (BOS as the file says, special tokens parsed), on one line
//! separated by spaces.

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use super::{open_gguf, CliError};
use crate::tokenizer::Tokenizer;

/// `tokenize`'s arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The GGUF file whose tokenizer to use (`-` reads standard input).
    pub file: PathBuf,
    /// The text, taken as is (no escapes); `-` reads it from standard input.
    #[arg(allow_hyphen_values = true)]
    pub text: String,
    /// Do not add the BOS (and EOS) token the file asks for.
    #[arg(long)]
    pub no_bos: bool,
    /// Tokenize special tokens written in the text (`<|im_start|>`) as plain text.
    #[arg(long)]
    pub no_special: bool,
}

pub(super) fn run<O: Write>(args: &Args, out: &mut O) -> Result<(), CliError> {
    if args.text == "-" && args.file == Path::new("-") {
        return Err(CliError::Usage(
            "the file and the text cannot both come from standard input".into(),
        ));
    }
    let file = open_gguf(&args.file)?;
    let tokenizer =
        Tokenizer::from_gguf(&file).map_err(|e| CliError::Message(e.kind().to_string()))?;
    let read;
    let text = if args.text == "-" {
        read = read_stdin_text()?;
        read.as_str()
    } else {
        args.text.as_str()
    };
    let ids = tokenizer.encode(text, !args.no_bos, !args.no_special);
    let line: Vec<String> = ids.iter().map(u32::to_string).collect();
    writeln!(out, "{}", line.join(" ")).map_err(|e| CliError::io("cannot write the output", e))
}

/// Standard input as UTF-8 text.
fn read_stdin_text() -> Result<String, CliError> {
    let mut bytes = Vec::new();
    io::stdin()
        .lock()
        .read_to_end(&mut bytes)
        .map_err(|e| CliError::io("cannot read standard input", e))?;
    String::from_utf8(bytes).map_err(|e| {
        CliError::Message(format!(
            "standard input is not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ))
    })
}
