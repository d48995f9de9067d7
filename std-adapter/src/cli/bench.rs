//! `miniquant bench FILE [-p 512] [-n 128] [-t 1,2] [-r 5]`: prompt and generation tokens per
//! second of the forward pass, printed as llama.cpp's `llama-bench` prints its own (see
//! [`crate::bench`]). Each row is written once its test is complete.

use std::io::Write;
use std::num::NonZeroUsize;
use std::path::PathBuf;

use clap::Args as ClapArgs;
use miniquant::model::{Layout, Model, ModelError, Session};
use miniquant::quant::{level, Level};

use super::{level_arg, open_gguf, threads_arg, CliError};
use crate::bench::{
    bos_of, run_once, table_header, table_row, ModelSummary, Rates, Test, TokenIds,
};
use crate::model::{pack_budget, PackedWeights, Threaded, WithPacked};
use crate::working_memory::{human_bytes, WorkingMemory};

/// Most repetitions: far above any useful count, and a bound on what a typo can ask for.
const MAX_REPETITIONS: u32 = 10_000;

/// `bench`'s arguments (llama-bench's names and defaults).
#[derive(Debug, Clone, ClapArgs)]
pub struct Args {
    /// The GGUF model (an architecture `run` supports).
    pub file: PathBuf,
    /// Prompt tokens of the prompt test `ppN` (0: no prompt test).
    #[arg(
        short = 'p',
        long = "n-prompt",
        value_name = "N",
        default_value_t = 512
    )]
    pub n_prompt: usize,
    /// Tokens of the generation test `tgN` (0: no generation test).
    #[arg(short = 'n', long = "n-gen", value_name = "N", default_value_t = 128)]
    pub n_gen: usize,
    /// Thread counts, separated by commas: the tests run for each [default: all cores].
    #[arg(short = 't', long, value_name = "N,..", value_delimiter = ',')]
    #[arg(value_parser = threads_arg::parse)]
    pub threads: Vec<NonZeroUsize>,
    /// Timed runs of each test (after one untimed warm-up).
    #[arg(
        short = 'r',
        long = "repetitions",
        value_name = "N",
        default_value_t = 5
    )]
    #[arg(value_parser = clap::value_parser!(u32).range(1..=MAX_REPETITIONS as i64))]
    pub repetitions: u32,
    /// Prompt tokens per batch (one matmul per weight per batch), as llama-bench's `-ub`.
    #[arg(short = 'b', long, value_name = "N", default_value_t = 512)]
    #[arg(value_parser = clap::value_parser!(u64).range(1..))]
    pub batch: u64,
    /// Kernel level: auto, scalar, neon, dotprod, i8mm, avx2, avx512vnni or amx.
    /// [default: MINIQUANT_LEVEL, else auto]
    #[arg(long, value_name = "LEVEL", value_parser = level_arg::parse)]
    pub level: Option<Level>,
    /// Run every product on the weights as stored. By default, the matrices of the types this
    /// kernel level has a packed kernel for (Q4_0, Q4_1, Q5_0, Q8_0 at avx2, avx512vnni and amx;
    /// up to 64 MiB each, and in all up to half the memory available beside the run's own) are
    /// also packed once at load, 16 rows interleaved, for generation and for prompt batches under
    /// 16 (avx2) or 32 tokens (avx512vnni; at amx every batch of Q4_0, Q4_1, Q8_0): the same
    /// logits, faster, and as much memory again as those matrices take.
    #[arg(long)]
    pub no_pack: bool,
}

pub(super) fn run<O: Write>(args: &Args, out: &mut O) -> Result<(), CliError> {
    let tests: Vec<Test> = [Test::Prompt(args.n_prompt), Test::Generate(args.n_gen)]
        .into_iter()
        .filter(|t| t.tokens() > 0)
        .collect();
    if tests.is_empty() {
        return Err(CliError::Usage(
            "-p and -n are both 0: nothing to measure".into(),
        ));
    }
    let file = open_gguf(&args.file)?;
    let model_error = |e: ModelError| CliError::Message(e.to_string());
    let model: Model<'_> = Model::from_gguf(file.bytes()).map_err(model_error)?;
    let trained = model.config().context_length;
    let context = args.n_prompt.max(args.n_gen);
    if context > trained {
        return Err(CliError::Message(format!(
            "a test of {context} tokens does not fit the model's context of {trained}"
        )));
    }
    let batch = usize::try_from(args.batch)
        .unwrap_or(usize::MAX)
        .clamp(1, args.n_prompt.max(1));
    let threads = if args.threads.is_empty() {
        vec![crate::parallel::default_threads()]
    } else {
        args.threads.iter().map(|t| t.get()).collect()
    };
    let most = threads.iter().copied().max().unwrap_or(1);
    // This thread makes every product: as the pool's thread 0 its hand-offs cost less.
    crate::parallel::join_pool(most);
    let layout = Layout::with_threads(&model, context, batch, most).map_err(model_error)?;
    let reserved = layout.bytes();
    let mut memory = WorkingMemory::new(layout.floats, layout.scratch_bytes).map_err(|e| {
        CliError::Message(format!(
            "{e} for tests of {context} tokens ({} of it the KV cache): ask for shorter tests \
             (-p, -n)",
            human_bytes(layout.kv_cache_floats as u128 * 4)
        ))
    })?;
    let (floats, scratch) = memory.parts();
    let mut session = Session::new(&model, layout, floats, scratch).map_err(model_error)?;
    let mut logits = vec![0f32; model.config().vocab];
    let summary = ModelSummary::of(&file);
    let mut ids = TokenIds::new(model.config().vocab, bos_of(&file));
    let level = args.level.unwrap_or_else(level::current);
    let packed = if args.no_pack {
        PackedWeights::default()
    } else {
        PackedWeights::of_model(&model, level, most, pack_budget(reserved))
            .map_err(CliError::from)?
    };
    let io = |e| CliError::io("cannot write the output", e);
    out.write_all(table_header().as_bytes()).map_err(io)?;
    out.flush().map_err(io)?;
    for &threads in &threads {
        let mm = WithPacked {
            threaded: Threaded { level, threads },
            packed: &packed,
        };
        for &test in &tests {
            let warm_up = match test {
                Test::Prompt(_) => test,
                Test::Generate(_) => Test::Generate(1),
            };
            run_once(&mut session, &mm, warm_up, &mut ids, &mut logits).map_err(model_error)?;
            let mut rates = Rates::default();
            for _ in 0..args.repetitions {
                let time = run_once(&mut session, &mm, test, &mut ids, &mut logits)
                    .map_err(model_error)?;
                rates.push(test.tokens(), time);
            }
            // One write of a whole row, then flushed: an interrupted bench shows whole rows.
            out.write_all(table_row(&summary, threads, test, &rates).as_bytes())
                .map_err(io)?;
            out.flush().map_err(io)?;
        }
    }
    writeln!(
        out,
        "\nbuild: miniquant {} ({} kernels, {})",
        env!("CARGO_PKG_VERSION"),
        level.name(),
        match packed.len() {
            0 => "no matrix packed".to_string(),
            k => format!("{k} matrices packed"),
        }
    )
    .map_err(io)?;
    Ok(())
}
