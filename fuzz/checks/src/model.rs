//! `model`: [`Model::from_gguf`] over arbitrary bytes (hostile headers: counts, shapes, types and
//! offsets of a llama's keys and tensors) returns a model or an error with a message, never a
//! panic; a model it accepts runs: its buffers are sized by [`Layout::new`] (or refused as too
//! large), and two tokens give the same logits bits in one batch as one at a time.
//!
//! [`seeds`] are small llamas written with the std adapter's writer, valid and each with one
//! thing wrong, for `fuzz/corpus/model/` (written by the tests crate's `fuzz_seeds` example).

use miniquant::model::{Layout, Model, Session, SingleThread};
use miniquant::quant::{level, quantize};
use miniquant::GgmlType;
use miniquant_std::writer::GgufWriter;
use miniquant_std::Value;

/// Layers the checked models may have (a small table: the fuzzer's models are small).
const MAX_LAYERS: usize = 8;

/// Buffers above this are not allocated: a header may ask for any size, and the limit is
/// libFuzzer's memory, not a property of the model code.
const MAX_BUFFER_BYTES: usize = 64 << 20;

/// The check.
pub fn check(data: &[u8]) {
    let model = match Model::<'_, MAX_LAYERS>::from_gguf(data) {
        Ok(model) => model,
        Err(e) => {
            assert!(!e.to_string().is_empty(), "an error without a message");
            return;
        }
    };
    let c = *model.config();
    let layout = match Layout::new(&model, 2, 2) {
        Ok(layout) => layout,
        Err(e) => {
            assert!(!e.to_string().is_empty(), "an error without a message");
            return;
        }
    };
    if layout.bytes() > MAX_BUFFER_BYTES {
        return;
    }
    let tokens = [0, (c.vocab.saturating_sub(1)) as u32];
    let mm = SingleThread {
        level: level::current(),
    };
    let mut batch = vec![0f32; c.vocab];
    let mut one_by_one = vec![0f32; c.vocab];
    let mut floats = vec![0f32; layout.floats];
    let mut scratch = vec![0u8; layout.scratch_bytes];
    let mut session = Session::new(&model, layout, &mut floats, &mut scratch)
        .expect("buffers of the layout's sizes");
    let batched = session.forward(&mm, &tokens, &mut batch);
    session.reset();
    let sequential = session
        .forward(&mm, &tokens[..1], &mut one_by_one)
        .and_then(|()| session.forward(&mm, &tokens[1..], &mut one_by_one));
    match (batched, sequential) {
        (Ok(()), Ok(())) => {
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
            assert_eq!(bits(&batch), bits(&one_by_one), "batch vs one at a time");
            // Past the context: an error, not a write beyond the cache.
            assert!(session.forward(&mm, &tokens, &mut batch).is_err());
        }
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
        (a, b) => panic!("batch {a:?} vs one at a time {b:?}"),
    }
}

/// What to change in a seed model.
#[derive(Debug, Clone, Copy, Default)]
struct Tweak {
    key: Option<(&'static str, u32)>,
    drop_tensor: Option<&'static str>,
    untie: bool,
    rope_freqs: bool,
    arch: Option<&'static str>,
}

const D: u64 = 32;
const VOCAB: u64 = 8;

/// A one-layer llama: 2 heads of 16 over 1 KV head, `d_ff` 32, vocabulary 8; Q8_0 attention,
/// Q4_0 feed-forward, F32 norms.
fn tiny(tweak: Tweak) -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.kv("general.architecture", tweak.arch.unwrap_or("llama"));
    let keys = [
        ("llama.block_count", 1u32),
        ("llama.context_length", 16),
        ("llama.embedding_length", D as u32),
        ("llama.feed_forward_length", 32),
        ("llama.attention.head_count", 2),
        ("llama.attention.head_count_kv", 1),
    ];
    for (key, value) in keys {
        let value = match tweak.key {
            Some((k, v)) if k == key => v,
            _ => value,
        };
        w.kv(key, Value::from(miniquant::gguf::Scalar::U32(value)));
    }
    w.kv(
        "llama.attention.layer_norm_rms_epsilon",
        Value::from(miniquant::gguf::Scalar::F32(1e-5)),
    );
    let mut tensors: Vec<(String, GgmlType, Vec<u64>)> = vec![
        ("token_embd.weight".into(), GgmlType::Q8_0, vec![D, VOCAB]),
        ("output_norm.weight".into(), GgmlType::F32, vec![D]),
    ];
    if tweak.untie {
        tensors.push(("output.weight".into(), GgmlType::Q4_0, vec![D, VOCAB]));
    }
    if tweak.rope_freqs {
        tensors.push(("rope_freqs.weight".into(), GgmlType::F32, vec![8]));
    }
    for (stem, t, ne) in [
        ("attn_norm", GgmlType::F32, vec![D]),
        ("attn_q", GgmlType::Q8_0, vec![D, D]),
        ("attn_k", GgmlType::Q8_0, vec![D, 16]),
        ("attn_v", GgmlType::Q8_0, vec![D, 16]),
        ("attn_output", GgmlType::Q8_0, vec![D, D]),
        ("ffn_norm", GgmlType::F32, vec![D]),
        ("ffn_gate", GgmlType::Q4_0, vec![D, 32]),
        ("ffn_up", GgmlType::Q4_0, vec![D, 32]),
        ("ffn_down", GgmlType::Q4_0, vec![32, D]),
    ] {
        tensors.push((format!("blk.0.{stem}.weight"), t, ne));
    }
    for (i, (name, t, ne)) in tensors.iter().enumerate() {
        if Some(name.as_str()) == tweak.drop_tensor {
            continue;
        }
        let n: u64 = ne.iter().product();
        let values: Vec<f32> = (0..n)
            .map(|j| {
                let v = ((j * 7 + i as u64 * 13) as f32 * 0.011).sin() * 0.5;
                // Norm weights near 1, as trained models have them.
                if *t == GgmlType::F32 {
                    v + 1.0
                } else {
                    v
                }
            })
            .collect();
        let bytes = miniquant::quant::bytes_for(*t, n as usize).expect("whole blocks");
        let mut data = vec![0u8; bytes];
        quantize(*t, &values, &mut data).expect("quantizes");
        w.tensor(name, *t, ne, data);
    }
    w.to_bytes()
}

/// Seed inputs: the valid tiny llama in a few forms, and one with each kind of problem.
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let t = Tweak::default();
    let mut seeds = vec![
        ("llama".to_owned(), tiny(t)),
        ("llama-untied".to_owned(), tiny(Tweak { untie: true, ..t })),
        (
            "llama-rope-freqs".to_owned(),
            tiny(Tweak {
                rope_freqs: true,
                ..t
            }),
        ),
        (
            "arch-unknown".to_owned(),
            tiny(Tweak {
                arch: Some("mamba"),
                ..t
            }),
        ),
        (
            "missing-ffn-down".to_owned(),
            tiny(Tweak {
                drop_tensor: Some("blk.0.ffn_down.weight"),
                ..t
            }),
        ),
        (
            "missing-embedding".to_owned(),
            tiny(Tweak {
                drop_tensor: Some("token_embd.weight"),
                ..t
            }),
        ),
    ];
    for (name, key, value) in [
        ("heads-0", "llama.attention.head_count", 0),
        ("heads-3", "llama.attention.head_count", 3),
        ("kv-heads-0", "llama.attention.head_count_kv", 0),
        ("kv-heads-2", "llama.attention.head_count_kv", 2),
        ("layers-0", "llama.block_count", 0),
        ("layers-2", "llama.block_count", 2),
        ("layers-huge", "llama.block_count", u32::MAX),
        ("context-0", "llama.context_length", 0),
        ("context-1", "llama.context_length", 1),
        ("width-64", "llama.embedding_length", 64),
        ("ff-huge", "llama.feed_forward_length", 1 << 30),
    ] {
        let tweak = Tweak {
            key: Some((key, value)),
            ..t
        };
        seeds.push((name.to_owned(), tiny(tweak)));
    }
    seeds
}
