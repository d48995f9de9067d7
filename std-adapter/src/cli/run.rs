//! `miniquant run FILE -p PROMPT [-n N]`: generation with the core's forward pass
//! (`miniquant::model`), greedy unless `--temp` asks for a seeded draw, the rows of every product
//! split over threads, the text streamed as it is generated. `--prompt-ids` takes the prompt as
//! token ids instead.

use std::io::Write;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};

use clap::Args as ClapArgs;
use miniquant::model::{Layout, Model, Session};
use miniquant::quant::{level, Level};

use super::output::{refuse_aliases, FileOutput, Output};
use super::progress::Progress;
use super::{level_arg, open_gguf, threads_arg, CliError};
use crate::model::{pack_budget, PackedWeights, Threaded, WithPacked};
use crate::npy;
use crate::sampling::Sampler;
use crate::tokenizer::{TextStream, Tokenizer};
use crate::working_memory::{human_bytes, WorkingMemory};

/// `run`'s arguments.
#[derive(Debug, Clone, ClapArgs)]
pub struct Args {
    /// The GGUF model (architecture llama or gemma3).
    pub file: PathBuf,
    /// The prompt, tokenized with the file's tokenizer (BOS as the file says, special tokens such
    /// as `<|im_start|>` parsed).
    #[arg(short = 'p', long, value_name = "TEXT", allow_hyphen_values = true)]
    #[arg(required_unless_present = "prompt_ids", conflicts_with = "prompt_ids")]
    pub prompt: Option<String>,
    /// Wrap the prompt in the file's chat template as one user turn followed by the assistant's
    /// (the two simple templates: ChatML `<|im_start|>` as SmolLM2's, and Gemma's
    /// `<start_of_turn>`).
    #[arg(long, conflicts_with = "prompt_ids")]
    pub chat: bool,
    /// The prompt as token ids, separated by spaces or commas.
    #[arg(long, value_name = "IDS")]
    pub prompt_ids: Option<String>,
    /// Tokens to generate (greedy unless --temp: the most likely one each time); generation also
    /// stops when the model's context (`context_length`) is full.
    #[arg(short = 'n', long, value_name = "N", default_value_t = 32)]
    pub n_predict: usize,
    /// Sampling temperature: 0 is greedy (the default, deterministic); above 0 each token is
    /// drawn from the softmax of logits / X over the --top-k largest, by a generator seeded with
    /// --seed.
    #[arg(long = "temp", value_name = "X", default_value_t = 0.0, value_parser = parse_temperature)]
    pub temperature: f32,
    /// With --temp: draw among the K largest logits only (0: the whole vocabulary).
    #[arg(long, value_name = "K", default_value_t = 40)]
    pub top_k: usize,
    /// With --temp: the generator's seed; the same seed gives the same tokens [default: from the
    /// clock, printed on stderr so that a run can be repeated].
    #[arg(long, value_name = "S")]
    pub seed: Option<u64>,
    /// Threads to split each product's rows over [default: all cores]. Any count gives the same
    /// tokens and logits.
    #[arg(long, value_name = "N", value_parser = threads_arg::parse)]
    pub threads: Option<NonZeroUsize>,
    /// Kernel level: auto, scalar, neon, dotprod, i8mm, avx2, avx512vnni or amx. Every level
    /// gives the same tokens and logits. [default: MINIQUANT_LEVEL, else auto]
    #[arg(long, value_name = "LEVEL", value_parser = level_arg::parse)]
    pub level: Option<Level>,
    /// Prompt tokens per batch (one matmul per weight per batch). Any size gives the same logits.
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub batch: usize,
    /// Run every product on the weights as stored. By default, the matrices of the types this
    /// kernel level has a packed kernel for (Q4_0, Q4_1, Q5_0, Q8_0 at avx2, avx512vnni and amx;
    /// up to 64 MiB each, and in all up to half the memory available beside the run's own) are
    /// also packed once at load, 16 rows interleaved, for generation and for prompt batches under
    /// 16 (avx2) or 32 tokens (avx512vnni; at amx every batch of Q4_0, Q4_1, Q8_0): the same
    /// logits, faster, and as much memory again as those matrices take.
    #[arg(long)]
    pub no_pack: bool,
    /// After the text, print the prompt's token ids on one line and the generated ones on another.
    #[arg(long)]
    pub tokens: bool,
    /// Write the logits of the last position computed (after the prompt with `-n 0`; else those
    /// the last generated token was chosen from): `.npy` for a name ending so, else raw
    /// little-endian f32. Written only once complete.
    #[arg(long, value_name = "FILE")]
    pub logits: Option<PathBuf>,
}

/// Parses `"1 2, 3"` into ids.
/// A seed for a run without --seed: the clock's nanoseconds.
fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn parse_temperature(text: &str) -> Result<f32, String> {
    match text.parse::<f32>() {
        Ok(t) if t.is_finite() && t >= 0.0 => Ok(t),
        Ok(_) => Err("a finite number of 0 or more".into()),
        Err(e) => Err(e.to_string()),
    }
}

fn parse_ids(text: &str) -> Result<Vec<u32>, CliError> {
    text.split(|c: char| c.is_whitespace() || c == ',')
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<u32>()
                .map_err(|_| CliError::Usage(format!("--prompt-ids: {s:?} is not a token id")))
        })
        .collect()
}

/// `text` as one user turn and the start of the assistant's, in the template
/// `tokenizer.chat_template` is; a file without one (Gemma 3 270M's) by the turn tokens its
/// vocabulary has.
fn chat_turn(
    file: &crate::GgufFile,
    tokenizer: &Tokenizer,
    text: &str,
) -> Result<String, CliError> {
    let template = file
        .index()
        .get("tokenizer.chat_template")
        .and_then(|v| v.as_str());
    let (chatml, gemma) = match template {
        Some(t) => (t.contains("<|im_start|>"), t.contains("<start_of_turn>")),
        None => (
            tokenizer.token_id("<|im_start|>").is_some(),
            tokenizer.token_id("<start_of_turn>").is_some()
                && tokenizer.token_id("<end_of_turn>").is_some(),
        ),
    };
    if chatml {
        Ok(format!(
            "<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"
        ))
    } else if gemma {
        Ok(format!(
            "<start_of_turn>user\n{text}<end_of_turn>\n<start_of_turn>model\n"
        ))
    } else if template.is_some() {
        Err(CliError::Message(
            "--chat: the file's tokenizer.chat_template is neither ChatML nor Gemma's".into(),
        ))
    } else {
        Err(CliError::Message(
            "--chat: the file has no tokenizer.chat_template and no ChatML or Gemma turn tokens"
                .into(),
        ))
    }
}

pub(super) fn run<O: Write, E: Write>(
    args: &Args,
    out: &mut O,
    err: &mut E,
) -> Result<(), CliError> {
    let given_ids = args.prompt_ids.as_deref().map(parse_ids).transpose()?;
    // Before any work: the logits file is written only at the end, and never onto the model.
    if let Some(path) = &args.logits {
        refuse_aliases(path, &[&args.file])?;
    }
    let file = open_gguf(&args.file)?;
    let tokenizer = Tokenizer::from_gguf(&file);
    let prompt = match (given_ids, &args.prompt) {
        (Some(ids), _) => ids,
        (None, text) => {
            let tokenizer = tokenizer
                .as_ref()
                .map_err(|e| CliError::Message(format!("{}: use --prompt-ids", e.kind())))?;
            let text = text.as_deref().unwrap_or_default();
            let text = if args.chat {
                chat_turn(&file, tokenizer, text)?
            } else {
                text.to_owned()
            };
            tokenizer.encode(&text, true, true)
        }
    };
    if prompt.is_empty() {
        return Err(CliError::Usage("the prompt has no tokens".into()));
    }
    let model_error = |e: miniquant::model::ModelError| CliError::Message(e.to_string());
    let model: Model<'_> = Model::from_gguf(file.bytes()).map_err(model_error)?;
    // The KV cache is sized for the whole run, but never beyond the context the model was trained
    // for: a huge -n must not ask for gigabytes it would never use well.
    let trained = model.config().context_length;
    if prompt.len() > trained {
        return Err(CliError::Message(format!(
            "the prompt has {} tokens; the model's context is {trained}",
            prompt.len()
        )));
    }
    let n_predict = args.n_predict.min(trained - prompt.len() + 1);
    let context = (prompt.len() + n_predict).min(trained);
    let batch = args.batch.clamp(1, prompt.len());
    let threads = args
        .threads
        .map_or_else(crate::parallel::default_threads, NonZeroUsize::get);
    // This thread makes every product: as the pool's thread 0 its hand-offs cost less.
    crate::parallel::join_pool(threads);
    let layout = Layout::with_threads(&model, context, batch, threads).map_err(model_error)?;
    let reserved = layout.bytes();
    let mut memory = WorkingMemory::new(layout.floats, layout.scratch_bytes).map_err(|e| {
        CliError::Message(format!(
            "{e} for a context of {context} tokens ({} of it the KV cache): ask for fewer \
             tokens (-n) or give a shorter prompt",
            human_bytes(layout.kv_cache_floats as u128 * 4)
        ))
    })?;
    let (floats, scratch) = memory.parts();
    let mut session = Session::new(&model, layout, floats, scratch).map_err(model_error)?;
    let threaded = Threaded {
        level: args.level.unwrap_or_else(level::current),
        threads,
    };
    let packed = if args.no_pack {
        PackedWeights::default()
    } else {
        PackedWeights::of_model(&model, threaded.level, threads, pack_budget(reserved))
            .map_err(CliError::from)?
    };
    let mm = WithPacked {
        threaded,
        packed: &packed,
    };
    let io = |e| CliError::io("cannot write the output", e);
    let mut logits = vec![0f32; model.config().vocab];
    run_prompt(&mut session, &mm, &prompt, batch, &mut logits).map_err(model_error)?;
    let seed = args.seed.unwrap_or_else(clock_seed);
    let mut sampler = Sampler::new(args.temperature, args.top_k, seed);
    if !sampler.is_greedy() && args.seed.is_none() {
        // On stderr, so stdout stays the model's text; with it the run can be repeated.
        writeln!(err, "sampling with --seed {seed}").map_err(io)?;
    }
    let mut generated = Vec::new();
    let tokenizer = tokenizer.as_ref().ok();
    let mut text = tokenizer.map(TextStream::new);
    for i in 0..n_predict {
        let next = sampler.choose(&logits);
        if tokenizer.is_some_and(|t| t.is_end_of_generation(next)) {
            break;
        }
        generated.push(next);
        match &mut text {
            // The bytes this token settles: a character cut in two or a space that the next
            // token may clean away waits for it (the whole text is `decode` of all the ids).
            Some(text) => out.write_all(&text.push(next)).map_err(io)?,
            None => write!(out, "{}{next}", if i == 0 { "" } else { " " }).map_err(io)?,
        }
        out.flush().map_err(io)?;
        if i + 1 < n_predict {
            session
                .forward(&mm, &[next], &mut logits)
                .map_err(model_error)?;
        }
    }
    if let Some(text) = text {
        out.write_all(&text.finish()).map_err(io)?;
    }
    writeln!(out).map_err(io)?;
    if args.tokens {
        for ids in [&prompt, &generated] {
            let line: Vec<String> = ids.iter().map(u32::to_string).collect();
            writeln!(out, "{}", line.join(" ")).map_err(io)?;
        }
    }
    if let Some(path) = &args.logits {
        let mut file = Output::file(path)?;
        let written = write_logits(&mut file, path, &logits);
        file.finish(written)?;
    }
    Ok(())
}

/// Runs the prompt a batch at a time (the same logits as one call: every batch split gives the
/// same bits), showing a bar on a terminal once a long prompt has taken a while.
fn run_prompt(
    session: &mut Session<'_, '_, '_>,
    mm: &WithPacked<'_>,
    prompt: &[u32],
    batch: usize,
    logits: &mut [f32],
) -> Result<(), miniquant::model::ModelError> {
    let mut progress = (prompt.len() > batch).then(|| Progress::new("prompt", prompt.len() as u64));
    let mut done = 0;
    for chunk in prompt.chunks(batch) {
        session.forward(mm, chunk, logits)?;
        done += chunk.len();
        if let Some(progress) = &mut progress {
            progress.set(done as u64);
        }
    }
    if let Some(progress) = progress {
        progress.finish();
    }
    Ok(())
}

fn write_logits(file: &mut FileOutput, path: &Path, logits: &[f32]) -> Result<(), CliError> {
    if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("npy"))
    {
        file.write_all(&npy::f32_header(&[logits.len() as u64]))?;
    }
    file.write_f32(logits, &mut Vec::new())
}
