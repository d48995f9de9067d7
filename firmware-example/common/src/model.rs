//! Greedy generation with the core's forward pass (`miniquant::model`) from fixed prompt ids, and
//! the digest of what it computed, which `cargo xtask firmware` compares with the host's: for each
//! step (the prompt, then each generated token) the FNV-1a hash of the f32 bits of that step's
//! logits, and the token chosen from them (the first largest logit, as the host CLI chooses).
//!
//! The working memory (KV cache, activations, quantized-activation scratch, logits) comes from a
//! caller region, of which [`work_words`] says how much is needed: the model's own
//! [`Layout`] plus the logits.

use miniquant::model::{Layout, MatMul, Model, ModelError, Session};

/// The most steps a run records (the prompt plus generated tokens).
pub const MAX_STEPS: usize = 8;

/// One step's outcome.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct Step {
    /// The token chosen from this step's logits.
    pub token: u32,
    /// FNV-1a (64-bit) of the logits' f32 bits, little-endian.
    pub digest: u64,
    /// Board ticks of the forward pass that produced the logits.
    pub ticks: u64,
}

/// FNV-1a, 64-bit, over the little-endian bytes of every value's bits: the same function as the
/// host's in `xtask/src/firmware_model.rs`.
pub fn fnv1a(values: &[f32]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for v in values {
        for byte in v.to_bits().to_le_bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    hash
}

/// The index of the first largest value (0 for an empty slice).
pub fn argmax(values: &[f32]) -> u32 {
    let mut best = 0usize;
    let mut best_value = f32::NEG_INFINITY;
    for (i, &v) in values.iter().enumerate() {
        if i == 0 || v > best_value {
            best = i;
            best_value = v;
        }
    }
    best as u32
}

/// f32 words of working memory [`generate`] needs for `layout`: its float buffer, the logits and
/// its scratch bytes rounded up to words. `None` if that overflows.
pub fn work_words<const L: usize>(model: &Model<'_, L>, layout: &Layout) -> Option<usize> {
    layout
        .floats
        .checked_add(model.config().vocab)?
        .checked_add(layout.scratch_bytes.div_ceil(4))
}

/// Runs `prompt` in one batch, then `steps.len() - 1` more tokens, each the greedy choice of the
/// previous logits; records each step. `work` must hold [`work_words`] words.
pub fn generate<const L: usize>(
    model: &Model<'_, L>,
    layout: Layout,
    mm: &impl MatMul,
    ticks: impl Fn() -> u64,
    prompt: &[u32],
    work: &mut [f32],
    steps: &mut [Step],
) -> Result<(), ModelError> {
    let needed = work_words(model, &layout).ok_or(ModelError::TooLarge)?;
    let too_small = ModelError::BufferTooSmall {
        buffer: "work",
        needed,
        found: work.len(),
    };
    let (floats, rest) = work
        .split_at_mut_checked(layout.floats)
        .ok_or(too_small.clone())?;
    let (logits, rest) = rest
        .split_at_mut_checked(model.config().vocab)
        .ok_or(too_small.clone())?;
    let scratch = bytemuck::cast_slice_mut::<f32, u8>(rest)
        .get_mut(..layout.scratch_bytes)
        .ok_or(too_small)?;
    let mut session = Session::new(model, layout, floats, scratch)?;
    let mut previous: Option<u32> = None;
    for step in steps.iter_mut() {
        let one;
        let input = match previous {
            None => prompt,
            Some(token) => {
                one = [token];
                &one[..]
            }
        };
        let start = ticks();
        session.forward(mm, input, logits)?;
        let elapsed = ticks().wrapping_sub(start);
        let token = argmax(logits);
        *step = Step {
            token,
            digest: fnv1a(logits),
            ticks: elapsed,
        };
        previous = Some(token);
    }
    Ok(())
}

/// The most prompt tokens an expected-run file holds.
pub const MAX_PROMPT: usize = 8;

/// A run as the host computed it (`cargo xtask firmware` writes it with the model's inputs):
/// the prompt ids and each step's token and digest.
pub struct Expected {
    prompt: [u32; MAX_PROMPT],
    prompt_len: usize,
    steps: [Step; MAX_STEPS],
    step_count: usize,
}

impl Expected {
    /// Reads the host's file: little-endian u32 words, the prompt length and ids, the step count,
    /// then per step the token and the digest's low and high halves. `None` if malformed or
    /// beyond [`MAX_PROMPT`] / [`MAX_STEPS`].
    pub fn parse(bytes: &[u8]) -> Option<Self> {
        let mut words = bytes
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
        let mut expected = Self {
            prompt: [0; MAX_PROMPT],
            prompt_len: usize::try_from(words.next()?).ok()?,
            steps: [Step::default(); MAX_STEPS],
            step_count: 0,
        };
        for id in expected.prompt.get_mut(..expected.prompt_len)? {
            *id = words.next()?;
        }
        expected.step_count = usize::try_from(words.next()?).ok()?;
        for step in expected.steps.get_mut(..expected.step_count)? {
            step.token = words.next()?;
            step.digest = u64::from(words.next()?) | u64::from(words.next()?) << 32;
        }
        (bytes.len().is_multiple_of(4) && words.next().is_none()).then_some(expected)
    }

    /// The prompt ids.
    pub fn prompt(&self) -> &[u32] {
        self.prompt.get(..self.prompt_len).unwrap_or_default()
    }

    /// The host's steps.
    pub fn steps(&self) -> &[Step] {
        self.steps.get(..self.step_count).unwrap_or_default()
    }

    /// Whether `got` has the host's tokens and digests (ticks aside), step for step.
    pub fn matches(&self, got: &[Step]) -> bool {
        got.len() == self.step_count
            && got
                .iter()
                .zip(self.steps())
                .all(|(g, e)| g.token == e.token && g.digest == e.digest)
    }
}
