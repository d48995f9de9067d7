//! The model images' logged run (both boards): load the model with the core's `Model::from_gguf`,
//! size its working memory with its `Layout`, generate greedily from the host's prompt ids, log
//! each step's token and logits digest (which `cargo xtask firmware` compares with the host's), the
//! working memory and the stack, and compare the steps with the host's.

use defmt::{error, info};
use miniquant::model::{Layout, Model, SingleThread};

use crate::model::{generate, work_words, Expected, Step, MAX_STEPS};
use crate::stack::{measure, WINDOW};
use crate::Board;

/// Runs `file` and checks it against `expected`; `take_work(words)` lends the working memory
/// (`None` if the board has less). Logs everything; returns whether every step matched the host's.
pub fn run<B: Board, const L: usize>(
    board: &B,
    file: &[u8],
    expected: &Expected,
    take_work: impl FnOnce(usize) -> Option<&'static mut [f32]>,
) -> bool {
    let (loaded, load_stack) = measure(|| Model::<L>::from_gguf(file));
    let model = match loaded {
        Ok(m) => m,
        Err(e) => {
            error!("loading the model: {}", e);
            return false;
        }
    };
    let c = *model.config();
    info!(
        "model: {=usize} layers, d_model {=usize}, d_ff {=usize}, {=usize} heads ({=usize} KV) of {=usize}, vocab {=usize}; load stack {=usize} B",
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
        "working memory (context {=usize}, batch {=usize}): {=usize} B = KV cache {=usize} B + activations {=usize} B + scratch {=usize} B + logits {=usize} B",
        layout.max_context,
        layout.max_batch,
        words * 4,
        layout.kv_cache_floats * 4,
        (layout.floats - layout.kv_cache_floats) * 4,
        layout.scratch_bytes,
        c.vocab * 4
    );
    let Some(work) = take_work(words) else {
        error!("the board has less than {=usize} B of free RAM", words * 4);
        return false;
    };
    work.fill(0.0);
    let mm = SingleThread {
        level: miniquant::quant::level::current(),
    };
    let mut all = [Step::default(); MAX_STEPS];
    let Some(got) = all.get_mut(..=steps) else {
        error!("more than {=usize} steps", MAX_STEPS);
        return false;
    };
    let (ran, stack) =
        measure(|| generate(&model, layout, &mm, || board.ticks(), prompt, work, got));
    if let Err(e) = ran {
        error!("forward pass: {}", e);
        return false;
    }
    let ns_per_tick = 1_000_000_000 / u64::from(B::TICK_HZ).max(1);
    for (i, s) in got.iter().enumerate() {
        info!(
            "step {=usize}: token {=u32}, logits fnv1a {=u64:016x}, {=u64} ticks = {=u64} ns",
            i,
            s.token,
            s.digest,
            s.ticks,
            s.ticks.saturating_mul(ns_per_tick)
        );
    }
    let at = if stack >= WINDOW { "at least " } else { "" };
    info!(
        "generate: prompt of {=usize} tokens, {=usize} generated, stack {=str}{=usize} B",
        prompt.len(),
        steps,
        at,
        stack
    );
    if expected.matches(got) {
        info!("all steps equal the host's");
        true
    } else {
        for (i, e) in expected.steps().iter().enumerate() {
            error!(
                "host step {=usize}: token {=u32}, logits fnv1a {=u64:016x}",
                i, e.token, e.digest
            );
        }
        error!("the tokens or logits differ from the host's");
        false
    }
}
