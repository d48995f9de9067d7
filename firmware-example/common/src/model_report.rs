//! The model images' logged run (both boards): load the model with the core's `Model::from_gguf`,
//! size its working memory with its `Layout`, generate greedily from the host's prompt ids, log
//! each step's token and logits digest (which `cargo xtask firmware` compares with the host's), the
//! working memory and the stack, and compare the steps with the host's.

use defmt::{error, info};
use miniquant::model::{Layout, Model, ModelError, SingleThread};
use miniquant::quant::Level;

use crate::model::{generate, work_words, Expected, Step, MAX_STEPS};
use crate::stack::{measure, WINDOW};
use crate::Board;

/// Runs `file` (`name` in the log) with the kernels of `level` and checks it against `expected`,
/// with its working memory at the start of `free` (the board's free RAM). Logs everything; returns
/// whether every step matched the host's.
pub fn run<B: Board, const L: usize>(
    board: &B,
    name: &str,
    level: Level,
    file: &[u8],
    expected: &Expected,
    free: &mut [f32],
) -> bool {
    let (loaded, load_stack) = measure(|| load::<L>(file));
    let model = match loaded {
        Ok(m) => m,
        Err(e) => {
            error!("loading {=str}: {}", name, e);
            return false;
        }
    };
    let c = *model.config();
    info!(
        "{=str}: {=usize} layers, d_model {=usize}, d_ff {=usize}, {=usize} heads ({=usize} KV) of {=usize}, vocab {=usize}; load stack {=usize} B",
        name,
        c.n_layers, c.d_model, c.d_ff, c.n_heads, c.n_kv_heads, c.head_dim, c.vocab, load_stack
    );
    let prompt = expected.prompt();
    let Some(steps) = expected.steps().len().checked_sub(1) else {
        error!("the host ran no step");
        return false;
    };
    // The prompt in one batch, then one position per generated token.
    let layout = match Layout::new(&model, prompt.len() + steps, prompt.len()) {
        Ok(l) => l,
        Err(e) => {
            error!("layout: {}", e);
            return false;
        }
    };
    let Some(words) = work_words(&model, &layout) else {
        error!("the working memory overflows usize");
        return false;
    };
    info!(
        "{=str} working memory (context {=usize}, batch {=usize}): {=usize} B = KV cache {=usize} B + activations {=usize} B + scratch {=usize} B + logits {=usize} B",
        name,
        layout.max_context,
        layout.max_batch,
        words * 4,
        layout.kv_cache_floats * 4,
        (layout.floats - layout.kv_cache_floats) * 4,
        layout.scratch_bytes,
        c.vocab * 4
    );
    let free_bytes = free.len() * 4;
    let Some(work) = free.get_mut(..words) else {
        error!(
            "{=str} needs {=usize} B of working memory; the board has {=usize} B of free RAM",
            name,
            words * 4,
            free_bytes
        );
        return false;
    };
    work.fill(0.0);
    let mm = SingleThread { level };
    let mut all = [Step::default(); MAX_STEPS];
    let Some(got) = all.get_mut(..=steps) else {
        error!("more than {=usize} steps", MAX_STEPS);
        return false;
    };
    let ticks = || board.ticks();
    let (ran, stack) =
        measure(|| generate_out_of_line(&model, layout, &mm, &ticks, prompt, work, got));
    if let Err(e) = ran {
        error!("forward pass: {}", e);
        return false;
    }
    let ns_per_tick = 1_000_000_000 / u64::from(B::TICK_HZ).max(1);
    for (i, s) in got.iter().enumerate() {
        info!(
            "{=str} step {=usize}: token {=u32}, logits fnv1a {=u64:016x}, {=u64} ticks = {=u64} ns",
            name,
            i,
            s.token,
            s.digest,
            s.ticks,
            s.ticks.saturating_mul(ns_per_tick)
        );
    }
    let at = if stack >= WINDOW { "at least " } else { "" };
    info!(
        "{=str} generate ({=str}): prompt of {=usize} tokens, {=usize} generated, stack {=str}{=usize} B",
        name,
        level.name(),
        prompt.len(),
        steps,
        at,
        stack
    );
    if expected.matches(got) {
        info!("{=str}: all steps equal the host's", name);
        true
    } else {
        for (i, e) in expected.steps().iter().enumerate() {
            error!(
                "{=str} host step {=usize}: token {=u32}, logits fnv1a {=u64:016x}",
                name, i, e.token, e.digest
            );
        }
        error!("{=str}: the tokens or logits differ from the host's", name);
        false
    }
}

/// `Model::from_gguf`, out of line so that its frame is below the point where `measure` starts
/// (inlined into `measure`, its locals would not count).
#[inline(never)]
fn load<const L: usize>(file: &[u8]) -> Result<Model<'_, L>, ModelError> {
    Model::from_gguf(file)
}

/// [`generate`], out of line for the same reason.
#[inline(never)]
fn generate_out_of_line<const L: usize>(
    model: &Model<'_, L>,
    layout: Layout,
    mm: &SingleThread,
    ticks: &dyn Fn() -> u64,
    prompt: &[u32],
    work: &mut [f32],
    steps: &mut [Step],
) -> Result<(), ModelError> {
    generate(model, layout, mm, ticks, prompt, work, steps)
}
