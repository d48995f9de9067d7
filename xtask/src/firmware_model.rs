//! The model images' host side, for `cargo xtask firmware`: writes the tiny llama the M4F image
//! embeds (the core's GGUF writer, weights from a fixed seed), runs each model's prompt on the host
//! with the CLI (`miniquant run --prompt-ids ... --logits`, x86_64 at its best kernel level), and
//! turns that into the steps the images must reproduce: per forward pass, the greedy token and the
//! FNV-1a digest of the logits' f32 bits. The images embed them (`*.expected`) and check
//! themselves; [`compare`] checks the steps they log against them again.

use std::fs;
use std::path::Path;

use miniquant::gguf::{GgufWriter, Scalar, TensorSpec, ValueType, WriteOptions};
use miniquant::GgmlType;

/// A model the images run and what they run on it.
pub(crate) struct ModelRun {
    /// The inputs' file stem (`{stem}.expected`, and `{stem}.gguf` for the tiny llama).
    pub stem: &'static str,
    pub prompt: &'static [u32],
    /// Forward passes: the prompt, then one per generated token fed back.
    pub steps: usize,
}

/// SmolLM2-135M-Instruct Q4_1 on the Cortex-A image: "The capital of" (the host continues it
/// with " the United States"); QEMU's TCG makes each forward pass cost seconds, so three.
pub(crate) const SMOLLM2: ModelRun = ModelRun {
    stem: "smollm2",
    prompt: &[504, 3575, 282],
    steps: 3,
};

/// The tiny llama on the M4F image.
pub(crate) const TINY_LLAMA: ModelRun = ModelRun {
    stem: "tiny-llama",
    prompt: &[1, 17, 300],
    steps: 6,
};

/// The real model the Cortex-A image runs (in the cache `cargo xtask fetch` fills).
pub(crate) const SMOLLM2_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// One forward pass as the host computed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Step {
    pub token: u32,
    pub digest: u64,
}

/// FNV-1a, 64-bit, over bytes: over a logits file's little-endian f32 bits it is
/// `firmware-example/common/src/model.rs`'s `fnv1a`.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// The host's steps for `run` on `model`: `miniquant run -n k --logits` writes the logits the
/// k-th generated token is chosen from, so k = 1..=steps gives every forward pass's logits.
pub(crate) fn host_steps(
    model: &Path,
    run: &ModelRun,
    scratch: &Path,
    cli: impl Fn(&[&str]) -> Result<String, String>,
) -> Result<Vec<Step>, String> {
    let ids: Vec<String> = run.prompt.iter().map(u32::to_string).collect();
    let ids = ids.join(" ");
    let model = model.to_str().ok_or("non-UTF-8 path")?;
    let mut steps = Vec::new();
    for k in 1..=run.steps {
        let logits = scratch.join(format!("{}-logits-{k}.f32", run.stem));
        let logits_s = logits.to_str().ok_or("non-UTF-8 path")?;
        let n = k.to_string();
        let out = cli(&[
            "run",
            model,
            "--prompt-ids",
            &ids,
            "-n",
            &n,
            "--tokens",
            "--logits",
            logits_s,
        ])?;
        // `--tokens`: the last line holds the generated ids.
        let generated: Vec<u32> = out
            .lines()
            .last()
            .unwrap_or_default()
            .split_whitespace()
            .map(|t| t.parse().map_err(|_| format!("`{t}` is not a token id")))
            .collect::<Result<_, _>>()?;
        let token = *generated
            .get(k - 1)
            .ok_or(format!("miniquant run -n {k} generated {generated:?}"))?;
        let bytes = fs::read(&logits).map_err(|e| format!("{}: {e}", logits.display()))?;
        steps.push(Step {
            token,
            digest: fnv1a(&bytes),
        });
    }
    Ok(steps)
}

/// The `{stem}.expected` file the images embed: little-endian u32 words, the prompt length and
/// ids, the step count, then per step the token and the digest's low and high halves.
pub(crate) fn expected_file(run: &ModelRun, steps: &[Step]) -> Vec<u8> {
    let mut words = vec![run.prompt.len() as u32];
    words.extend_from_slice(run.prompt);
    words.push(steps.len() as u32);
    for s in steps {
        words.extend([s.token, s.digest as u32, (s.digest >> 32) as u32]);
    }
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// The steps an image logged for `run` (`{stem} step i: token t, logits fnv1a <hex>, ...`)
/// against the host's.
pub(crate) fn compare(log: &str, host: &[Step], run: &ModelRun, image: &str) -> Result<(), String> {
    let marker = format!("{} step ", run.stem);
    let logged: Vec<Step> = log
        .lines()
        .filter_map(|l| {
            let rest = &l[l.find(&marker)?..];
            let token = crate::firmware::figure(rest, "token ")?;
            let hex = rest.split("logits fnv1a ").nth(1)?.split(',').next()?;
            Some(Step {
                token: u32::try_from(token).ok()?,
                digest: u64::from_str_radix(hex.trim(), 16).ok()?,
            })
        })
        .collect();
    if logged == host {
        eprintln!(
            "{image}: the {} steps of {} (tokens {:?}) have the host's logits digests",
            host.len(),
            run.stem,
            host.iter().map(|s| s.token).collect::<Vec<_>>()
        );
        Ok(())
    } else {
        Err(format!(
            "{image}: the steps of {} logged {logged:x?} differ from the host's {host:x?}",
            run.stem
        ))
    }
}

/// The tiny llama's shape: llama-architecture, Q8_0 matrices over `D` columns and Q4_K for
/// `ffn_down` (over `FF` columns: Q4_K needs multiples of 256), untied output head, F32 norms.
const VOCAB: u64 = 512;
const D: u64 = 128;
const FF: u64 = 256;
const LAYERS: u32 = 4;
const HEADS: u32 = 4;
const KV_HEADS: u32 = 2;
const CONTEXT: u32 = 64;
/// The weights' seed.
const SEED: u64 = 26;

/// splitmix64: a fixed, portable stream of weights.
struct Weights(u64);

impl Weights {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [-scale, scale).
    fn uniform(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n)
            .map(|_| ((self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale)
            .collect()
    }
}

/// The tiny llama's GGUF file, through the core's checked writer.
pub(crate) fn tiny_llama() -> Result<Vec<u8>, String> {
    let kv = D / u64::from(HEADS) * u64::from(KV_HEADS);
    let mut tensors: Vec<(String, GgmlType, Vec<u64>)> = vec![
        ("token_embd.weight".into(), GgmlType::Q8_0, vec![D, VOCAB]),
        ("output_norm.weight".into(), GgmlType::F32, vec![D]),
        ("output.weight".into(), GgmlType::Q8_0, vec![D, VOCAB]),
    ];
    for l in 0..LAYERS {
        for (stem, t, ne) in [
            ("attn_norm", GgmlType::F32, vec![D]),
            ("attn_q", GgmlType::Q8_0, vec![D, D]),
            ("attn_k", GgmlType::Q8_0, vec![D, kv]),
            ("attn_v", GgmlType::Q8_0, vec![D, kv]),
            ("attn_output", GgmlType::Q8_0, vec![D, D]),
            ("ffn_norm", GgmlType::F32, vec![D]),
            ("ffn_gate", GgmlType::Q8_0, vec![D, FF]),
            ("ffn_up", GgmlType::Q8_0, vec![D, FF]),
            ("ffn_down", GgmlType::Q4_K, vec![FF, D]),
        ] {
            tensors.push((format!("blk.{l}.{stem}.weight"), t, ne));
        }
    }
    let specs: Vec<TensorSpec<'_>> = tensors
        .iter()
        .map(|(name, ggml_type, ne)| TensorSpec {
            name,
            ggml_type: *ggml_type,
            ne,
        })
        .collect();
    let keys = [
        ("llama.block_count", Scalar::U32(LAYERS)),
        ("llama.context_length", Scalar::U32(CONTEXT)),
        ("llama.embedding_length", Scalar::U32(D as u32)),
        ("llama.feed_forward_length", Scalar::U32(FF as u32)),
        ("llama.attention.head_count", Scalar::U32(HEADS)),
        ("llama.attention.head_count_kv", Scalar::U32(KV_HEADS)),
        (
            "llama.rope.dimension_count",
            Scalar::U32((D as u32) / HEADS),
        ),
        ("llama.rope.freq_base", Scalar::F32(10000.0)),
        ("llama.attention.layer_norm_rms_epsilon", Scalar::F32(1e-5)),
        ("llama.vocab_size", Scalar::U32(VOCAB as u32)),
    ];
    let err = |e: miniquant::Error| format!("writing the tiny llama: {e}");
    let mut w = GgufWriter::new(
        Vec::new(),
        WriteOptions::DEFAULT,
        keys.len() as u64 + 2,
        &specs,
    )
    .map_err(err)?;
    for (key, text) in [
        ("general.architecture", "llama"),
        ("general.name", "miniquant tiny llama (seed 26)"),
    ] {
        w.key(key, ValueType::String).map_err(err)?;
        w.string(text).map_err(err)?;
    }
    for (key, value) in keys {
        w.key(key, value.value_type()).map_err(err)?;
        w.scalar(value).map_err(err)?;
    }
    w.finish_header().map_err(err)?;
    let mut weights = Weights(SEED);
    for spec in &specs {
        let cols = spec.ne[0] as usize;
        let n = spec.elements().ok_or("tiny llama: tensor size overflows")? as usize;
        let values = if spec.ggml_type == GgmlType::F32 {
            // Norm weights near 1, as trained models have them.
            weights
                .uniform(n, 0.25)
                .into_iter()
                .map(|v| v + 1.0)
                .collect()
        } else {
            // About unit-variance outputs for unit-variance inputs.
            weights.uniform(n, (3.0 / cols as f32).sqrt())
        };
        let bytes = spec.bytes().ok_or("tiny llama: tensor size overflows")?;
        let mut bytes = vec![0u8; bytes as usize];
        miniquant::quant::quantize(spec.ggml_type, &values, &mut bytes).map_err(err)?;
        w.tensor_data(&bytes).map_err(err)?;
    }
    w.finish().map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_has_the_published_values() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn compare_takes_the_logged_steps_and_nothing_else() {
        let host = [
            Step {
                token: 260,
                digest: 0xea62_b901_8e8c_9034,
            },
            Step {
                token: 1797,
                digest: 0x7cd1_9515_72f3_fb22,
            },
        ];
        let line = |i, token, digest| {
            format!("INFO  smollm2 step {i}: token {token}, logits fnv1a {digest:016x}, 85 ticks = 1360 ns")
        };
        let log = format!(
            "INFO  model: 30 layers\n{}\n{}\nINFO  all steps equal the host's\n",
            line(0, 260, 0xea62_b901_8e8c_9034u64),
            line(1, 1797, 0x7cd1_9515_72f3_fb22u64)
        );
        assert!(compare(&log, &host, &SMOLLM2, "image").is_ok());
        // Another model's steps in the same log are not this one's.
        let tiny = format!("{log}{}", line(2, 7, 7).replace("smollm2", "tiny-llama"));
        assert!(compare(&tiny, &host, &SMOLLM2, "image").is_ok());
        assert!(compare(&tiny, &host, &TINY_LLAMA, "image").is_err());
        let one_bit = log.replace("7cd1951572f3fb22", "7cd1951572f3fb23");
        assert!(compare(&one_bit, &host, &SMOLLM2, "image").is_err());
        let other_token = log.replace("token 1797", "token 1798");
        assert!(compare(&other_token, &host, &SMOLLM2, "image").is_err());
        let cut = log.replace(&line(1, 1797, 0x7cd1_9515_72f3_fb22u64), "");
        assert!(compare(&cut, &host, &SMOLLM2, "image").is_err());
    }

    #[test]
    fn the_tiny_llama_parses_and_is_the_same_file_every_time() {
        let file = tiny_llama().unwrap();
        assert_eq!(file, tiny_llama().unwrap());
        let mut parser = miniquant::gguf::SliceParser::new(&file, miniquant::gguf::Limits::DEFAULT);
        let mut tensors = 0;
        while let Some(event) = parser.next_event().unwrap() {
            tensors += usize::from(matches!(event, miniquant::gguf::Event::Tensor(_)));
        }
        assert_eq!(tensors, 3 + 9 * LAYERS as usize);
    }
}
