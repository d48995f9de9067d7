//! The forward pass on a real model (SmolLM2-135M Q4_1, when `cargo xtask fetch` has put it in the
//! cache): the same logit bits at every kernel level, thread count and batch size.

use std::path::{Path, PathBuf};

use miniquant::model::{Layout, MatMul, Model, Session, SingleThread};
use miniquant::quant::level::{self, Level};
use miniquant_std::model::Threaded;
use miniquant_std::GgufFile;

fn smollm2() -> Option<GgufFile> {
    let cache = std::env::var_os("MINIQUANT_CACHE").map_or_else(
        || Path::new(&std::env::var_os("HOME").unwrap_or_default()).join(".cache/miniquant"),
        PathBuf::from,
    );
    let path = cache.join("SmolLM2-135M-Instruct.Q4_1.gguf");
    if !path.exists() {
        eprintln!(
            "skipped: {} is not there (cargo xtask fetch)",
            path.display()
        );
        return None;
    }
    Some(GgufFile::open(&path).expect("the cached model opens"))
}

/// Runs `prompt` in batches of `batch`, then greedily `generate` more tokens one at a time;
/// returns the logits after the prompt and after each generated token.
fn run(
    model: &Model<'_>,
    mm: &impl MatMul,
    prompt: &[u32],
    batch: usize,
    generate: usize,
) -> Vec<Vec<f32>> {
    let layout = Layout::new(model, prompt.len() + generate, batch).unwrap();
    let mut floats = vec![0f32; layout.floats];
    let mut scratch = vec![0u8; layout.scratch_bytes];
    let mut session = Session::new(model, layout, &mut floats, &mut scratch).unwrap();
    let mut logits = vec![0f32; model.config().vocab];
    session.forward(mm, prompt, &mut logits).unwrap();
    let mut all = vec![logits.clone()];
    for _ in 0..generate {
        let next = argmax(&logits);
        session.forward(mm, &[next], &mut logits).unwrap();
        all.push(logits.clone());
    }
    all
}

fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in logits.iter().enumerate() {
        if v > logits[best] {
            best = i;
        }
    }
    best as u32
}

fn same_bits(a: &[Vec<f32>], b: &[Vec<f32>]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits()))
}

/// Token ids of a short English prompt in SmolLM2's vocabulary (any valid ids would do: the
/// property holds for every input).
const PROMPT: [u32; 11] = [504, 3575, 282, 4649, 314, 7042, 30, 378, 3575, 282, 2892];

#[test]
fn logits_have_the_same_bits_at_every_level_thread_count_and_batch_size() {
    let Some(file) = smollm2() else { return };
    let model: Model<'_> = Model::from_gguf(file.bytes()).unwrap();
    let reference = run(
        &model,
        &SingleThread {
            level: Level::Scalar,
        },
        &PROMPT,
        1,
        3,
    );
    assert!(reference[0].iter().all(|v| v.is_finite()));
    for level in level::available() {
        for batch in [1, 4, PROMPT.len()] {
            let got = run(&model, &SingleThread { level }, &PROMPT, batch, 3);
            assert!(same_bits(&got, &reference), "{level:?} batch {batch}");
            for threads in [2, 3] {
                let got = run(&model, &Threaded { level, threads }, &PROMPT, batch, 3);
                assert!(
                    same_bits(&got, &reference),
                    "{level:?} batch {batch} on {threads} threads"
                );
            }
        }
    }
}
