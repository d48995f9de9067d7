//! A tiny llama written by the crate's own writer: loading, errors that name what is wrong, and
//! the same bits for any batch size and kernel level.

// Tests index and add freely: a panic here is a failed test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use super::*;
use crate::gguf::{GgufWriter, Scalar, TensorSpec, ValueType, WriteOptions};
use crate::quant::{level, quantize};
use std::format;
use std::string::{String, ToString};
use std::vec;
use std::vec::Vec;

#[derive(Default)]
struct Sink(Vec<u8>);

impl embedded_io::ErrorType for Sink {
    type Error = core::convert::Infallible;
}

impl embedded_io::Write for Sink {
    fn write(&mut self, buf: &[u8]) -> Result<usize, Self::Error> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

const D: u64 = 64;
const FF: u64 = 96;
const HEADS: u32 = 4;
const KV_HEADS: u32 = 2;
const LAYERS: u32 = 2;
const VOCAB: u64 = 40;

/// What to change in the tiny model.
#[derive(Default, Clone)]
struct Tweak {
    arch: Option<&'static str>,
    drop_key: Option<&'static str>,
    drop_tensor: Option<&'static str>,
    /// A tensor given `[cols + 32, rows]` instead.
    widen_tensor: Option<&'static str>,
    untie: bool,
    /// A `gemma3` model (its extra norms; `sliding_window` if not 0, every second layer local).
    gemma: bool,
    sliding_window: u32,
}

fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| libm::sinf((i * 7 + seed * 13) as f32 * 0.011) * 0.5)
        .collect()
}

/// A 2-layer llama with 4 heads of 16 over 2 KV heads, Q8_0 matrices and F32 norms.
fn tiny(tweak: &Tweak) -> Vec<u8> {
    let mut names: Vec<(String, GgmlType, [u64; 2])> = vec![
        ("token_embd.weight".into(), GgmlType::Q8_0, [D, VOCAB]),
        ("output_norm.weight".into(), GgmlType::F32, [D, 1]),
    ];
    if tweak.untie {
        names.push(("output.weight".into(), GgmlType::Q8_0, [D, VOCAB]));
    }
    let head = D / u64::from(HEADS);
    let kv = head * u64::from(KV_HEADS);
    for l in 0..LAYERS {
        if tweak.gemma {
            for (stem, ne) in [
                ("attn_q_norm", [head, 1]),
                ("attn_k_norm", [head, 1]),
                ("post_attention_norm", [D, 1]),
                ("post_ffw_norm", [D, 1]),
            ] {
                names.push((format!("blk.{l}.{stem}.weight"), GgmlType::F32, ne));
            }
        }
        for (stem, t, ne) in [
            ("attn_norm", GgmlType::F32, [D, 1]),
            ("attn_q", GgmlType::Q8_0, [D, D]),
            ("attn_k", GgmlType::Q8_0, [D, kv]),
            ("attn_v", GgmlType::Q8_0, [D, kv]),
            ("attn_output", GgmlType::Q8_0, [D, D]),
            ("ffn_norm", GgmlType::F32, [D, 1]),
            ("ffn_gate", GgmlType::Q8_0, [D, FF]),
            ("ffn_up", GgmlType::Q8_0, [D, FF]),
            ("ffn_down", GgmlType::Q8_0, [FF, D]),
        ] {
            names.push((format!("blk.{l}.{stem}.weight"), t, ne));
        }
    }
    names.retain(|(n, _, _)| Some(n.as_str()) != tweak.drop_tensor);
    for (n, _, ne) in &mut names {
        if Some(n.as_str()) == tweak.widen_tensor {
            ne[0] += 32;
        }
    }
    let shapes: Vec<[u64; 2]> = names.iter().map(|(_, _, ne)| *ne).collect();
    let specs: Vec<TensorSpec<'_>> = names
        .iter()
        .zip(&shapes)
        .map(|((name, t, _), ne)| TensorSpec {
            name,
            ggml_type: *t,
            ne: if ne[1] == 1 { &ne[..1] } else { &ne[..] },
        })
        .collect();
    let arch = tweak
        .arch
        .unwrap_or(if tweak.gemma { "gemma3" } else { "llama" });
    let mut keys: Vec<(String, Scalar)> = [
        ("block_count", Scalar::U32(LAYERS)),
        ("context_length", Scalar::U32(64)),
        ("embedding_length", Scalar::U32(D as u32)),
        ("feed_forward_length", Scalar::U32(FF as u32)),
        ("attention.head_count", Scalar::U32(HEADS)),
        ("attention.head_count_kv", Scalar::U32(KV_HEADS)),
        ("rope.freq_base", Scalar::F32(10000.0)),
        ("attention.layer_norm_rms_epsilon", Scalar::F32(1e-5)),
    ]
    .into_iter()
    .map(|(k, v)| (format!("{arch}.{k}"), v))
    .collect();
    if tweak.sliding_window > 0 {
        keys.push((
            format!("{arch}.attention.sliding_window"),
            Scalar::U32(tweak.sliding_window),
        ));
        keys.push((
            format!("{arch}.attention.sliding_window_pattern"),
            Scalar::U32(2),
        ));
        keys.push((format!("{arch}.rope.freq_base_swa"), Scalar::F32(100.0)));
    }
    keys.retain(|(k, _)| Some(k.as_str()) != tweak.drop_key);
    let mut w = GgufWriter::new(
        Sink::default(),
        WriteOptions::DEFAULT,
        keys.len() as u64 + 1,
        &specs,
    )
    .unwrap();
    w.key("general.architecture", ValueType::String).unwrap();
    w.string(arch).unwrap();
    for (k, v) in &keys {
        w.key(k.as_str(), v.value_type()).unwrap();
        w.scalar(*v).unwrap();
    }
    w.finish_header().unwrap();
    for (i, spec) in specs.iter().enumerate() {
        let n = spec.elements().unwrap() as usize;
        let mut v = values(n, i);
        if spec.ggml_type == GgmlType::F32 {
            // Norm weights near 1, as trained models have them.
            v.iter_mut().for_each(|x| *x += 1.0);
        }
        let mut bytes = vec![0u8; spec.bytes().unwrap() as usize];
        quantize(spec.ggml_type, &v, &mut bytes).unwrap();
        w.tensor_data(&bytes).unwrap();
    }
    w.finish().unwrap().0
}

fn load(file: &[u8]) -> Result<Model<'_>, ModelError> {
    Model::from_gguf(file)
}

/// Logits after `tokens` run in batches of `batch` at `level`.
fn logits(model: &Model<'_>, tokens: &[u32], batch: usize, level: Level) -> Vec<f32> {
    let layout = Layout::new(model, tokens.len(), batch).unwrap();
    let mut floats = vec![f32::NAN; layout.floats];
    let mut scratch = vec![0u8; layout.scratch_bytes];
    let mut session = Session::new(model, layout, &mut floats, &mut scratch).unwrap();
    let mut out = vec![0f32; model.config().vocab];
    session
        .forward(&SingleThread { level }, tokens, &mut out)
        .unwrap();
    out
}

#[test]
fn loads_the_configuration_and_ties_the_head() {
    let file = tiny(&Tweak::default());
    let model = load(&file).unwrap();
    let c = model.config();
    assert_eq!(
        (c.n_layers, c.d_model, c.d_ff, c.n_heads, c.n_kv_heads),
        (2, 64, 96, 4, 2)
    );
    assert_eq!(
        (c.head_dim, c.rope_dims, c.vocab, c.context_length),
        (16, 16, 40, 64)
    );
    assert_eq!(model.output(), model.embedding());
    let untied = tiny(&Tweak {
        untie: true,
        ..Tweak::default()
    });
    let model = load(&untied).unwrap();
    assert_ne!(model.output(), model.embedding());
}

#[test]
fn batch_sizes_and_levels_give_the_same_bits() {
    let file = tiny(&Tweak::default());
    let model = load(&file).unwrap();
    let tokens = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5];
    let want = logits(&model, &tokens, 1, Level::Scalar);
    assert!(want.iter().all(|v| v.is_finite()));
    // Not a constant function of its input: another prompt gives other logits.
    assert_ne!(want, logits(&model, &tokens[1..], 1, Level::Scalar));
    for level in level::available() {
        for batch in [1, 2, 4, tokens.len()] {
            let got = logits(&model, &tokens, batch, level);
            assert!(
                got.iter()
                    .zip(&want)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{level:?} batch {batch}"
            );
        }
    }
}

#[test]
fn a_session_continues_where_it_stopped() {
    let file = tiny(&Tweak::default());
    let model = load(&file).unwrap();
    let mm = SingleThread {
        level: Level::Scalar,
    };
    let tokens = [7u32, 8, 9, 10, 11];
    let want = logits(&model, &tokens, 8, Level::Scalar);
    let layout = Layout::new(&model, 8, 8).unwrap();
    let mut floats = vec![0f32; layout.floats];
    let mut scratch = vec![0u8; layout.scratch_bytes];
    let mut session = Session::new(&model, layout, &mut floats, &mut scratch).unwrap();
    let mut out = vec![0f32; 40];
    session.forward(&mm, &tokens[..2], &mut out).unwrap();
    session.forward(&mm, &tokens[2..], &mut out).unwrap();
    assert_eq!(session.position(), 5);
    assert_eq!(out, want);
    session.reset();
    session.forward(&mm, &tokens, &mut out).unwrap();
    assert_eq!(out, want);
}

fn gemma(sliding_window: u32) -> Tweak {
    Tweak {
        gemma: true,
        sliding_window,
        ..Tweak::default()
    }
}

#[test]
fn gemma3_is_configured_from_its_keys() {
    let file = tiny(&gemma(3));
    let model = load(&file).unwrap();
    let c = model.config();
    assert_eq!(c.arch, Arch::Gemma3);
    assert_eq!(
        (c.activation, c.rope_style),
        (Activation::GeluTanh, RopeStyle::Neox)
    );
    assert_eq!((c.sliding_window, c.sliding_window_pattern), (3, 2));
    // Pattern 2: even layers local (rope base 100, the file's freq_base_swa), odd ones global.
    assert!(c.is_local(0) && !c.is_local(1));
    assert_eq!((c.rope_of(0), c.rope_of(1)), ((100.0, 1.0), (10000.0, 1.0)));
    assert_eq!((c.first_seen(0, 5), c.first_seen(1, 5)), (3, 0));
    assert_eq!((c.embedding_scale, c.query_scale), (8.0, 0.25));
    assert!(model.layers().iter().all(|l| l.qk_norm.is_some()));
    // Without the window key every layer is global.
    let file = tiny(&gemma(0));
    let model = load(&file).unwrap();
    assert!(!model.config().is_local(0));
}

#[test]
fn gemma3_batch_sizes_and_levels_give_the_same_bits_across_the_window() {
    let file = tiny(&gemma(3));
    let model = load(&file).unwrap();
    let tokens = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5];
    let want = logits(&model, &tokens, 1, Level::Scalar);
    assert!(want.iter().all(|v| v.is_finite()));
    for level in level::available() {
        for batch in [1, 2, 4, tokens.len()] {
            let got = logits(&model, &tokens, batch, level);
            assert!(
                got.iter()
                    .zip(&want)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{level:?} batch {batch}"
            );
        }
    }
}

#[test]
fn a_window_changes_nothing_until_the_context_outgrows_it() {
    let (windowed, global) = (tiny(&gemma(3)), tiny(&gemma(0)));
    let (windowed, global) = (load(&windowed).unwrap(), load(&global).unwrap());
    let tokens = [7u32, 3, 9, 1, 4];
    // Within the window the local layers see what a global one sees; the rope base of the local
    // layers still differs, so compare a windowed model with itself at another window size.
    let wide = tiny(&gemma(5));
    let wide = load(&wide).unwrap();
    for n in 1..=3 {
        assert_eq!(
            logits(&windowed, &tokens[..n], 1, Level::Scalar),
            logits(&wide, &tokens[..n], 1, Level::Scalar),
            "{n} tokens"
        );
    }
    assert_ne!(
        logits(&windowed, &tokens, 1, Level::Scalar),
        logits(&wide, &tokens, 1, Level::Scalar)
    );
    assert_ne!(
        logits(&windowed, &tokens, 1, Level::Scalar),
        logits(&global, &tokens, 1, Level::Scalar)
    );
}

#[test]
fn gemma3_errors_name_its_tensors_and_keys() {
    let cases: [(Tweak, &str); 2] = [
        (
            Tweak {
                drop_tensor: Some("blk.1.post_ffw_norm.weight"),
                ..gemma(3)
            },
            "tensor blk.1.post_ffw_norm.weight is missing",
        ),
        (
            Tweak {
                drop_tensor: Some("blk.0.attn_k_norm.weight"),
                ..gemma(3)
            },
            "tensor blk.0.attn_k_norm.weight is missing",
        ),
    ];
    for (tweak, message) in cases {
        let file = tiny(&tweak);
        assert_eq!(error_text(&load(&file).unwrap_err()), message);
    }
}

fn error_text(e: &ModelError) -> String {
    e.to_string()
}

#[test]
fn errors_name_what_is_missing_or_wrong() {
    let cases: [(Tweak, &str); 5] = [
        (
            Tweak {
                drop_tensor: Some("blk.1.ffn_up.weight"),
                ..Tweak::default()
            },
            "tensor blk.1.ffn_up.weight is missing",
        ),
        (
            Tweak {
                drop_tensor: Some("output_norm.weight"),
                ..Tweak::default()
            },
            "tensor output_norm.weight is missing",
        ),
        (
            Tweak {
                arch: Some("mamba"),
                ..Tweak::default()
            },
            "architecture \"mamba\" is not supported (supported: llama, gemma3)",
        ),
        (
            Tweak {
                drop_key: Some("llama.attention.layer_norm_rms_epsilon"),
                ..Tweak::default()
            },
            "metadata key llama.attention.layer_norm_rms_epsilon is missing or not a number",
        ),
        (
            Tweak {
                widen_tensor: Some("blk.0.attn_k.weight"),
                ..Tweak::default()
            },
            "tensor blk.0.attn_k.weight has ne [96, 32, 1, 1], expected [64, 32]",
        ),
    ];
    for (tweak, message) in cases {
        let file = tiny(&tweak);
        assert_eq!(error_text(&load(&file).unwrap_err()), message);
    }
    let file = tiny(&Tweak::default());
    let small: Result<Model<'_, 1>, _> = Model::from_gguf(&file);
    assert_eq!(
        small.unwrap_err(),
        ModelError::TooManyLayers {
            layers: 2,
            capacity: 1
        }
    );
}

#[test]
fn buffers_context_and_tokens_are_checked() {
    let file = tiny(&Tweak::default());
    let model = load(&file).unwrap();
    let layout = Layout::new(&model, 4, 2).unwrap();
    assert_eq!(layout.kv_cache_floats, 2 * 2 * 4 * 32);
    let mut floats = vec![0f32; layout.floats];
    let mut scratch = vec![0u8; layout.scratch_bytes];
    let short = Session::new(&model, layout, &mut floats[1..], &mut scratch);
    assert!(matches!(
        short.unwrap_err(),
        ModelError::BufferTooSmall {
            buffer: "floats",
            ..
        }
    ));
    let short = Session::new(&model, layout, &mut floats, &mut scratch[1..]);
    assert!(matches!(
        short.unwrap_err(),
        ModelError::BufferTooSmall {
            buffer: "scratch",
            ..
        }
    ));
    let mut session = Session::new(&model, layout, &mut floats, &mut scratch).unwrap();
    let mm = SingleThread {
        level: Level::Scalar,
    };
    let mut out = vec![0f32; 40];
    assert_eq!(
        session.forward(&mm, &[1, 40], &mut out).unwrap_err(),
        ModelError::TokenOutOfRange {
            token: 40,
            vocab: 40
        }
    );
    assert!(matches!(
        session.forward(&mm, &[1], &mut out[..39]).unwrap_err(),
        ModelError::BufferTooSmall {
            buffer: "logits",
            ..
        }
    ));
    session.forward(&mm, &[1, 2, 3], &mut out).unwrap();
    assert_eq!(
        session.forward(&mm, &[4, 5], &mut out).unwrap_err(),
        ModelError::ContextFull {
            position: 3,
            tokens: 2,
            max_context: 4
        }
    );
    // Nothing ran: the position is unchanged and the last slot still takes a token.
    assert_eq!(session.position(), 3);
    session.forward(&mm, &[4], &mut out).unwrap();
}

#[test]
fn every_truncation_and_corruption_is_an_error_not_a_panic() {
    let file = tiny(&Tweak::default());
    for cut in (0..file.len()).step_by(7) {
        assert!(load(&file[..cut]).is_err(), "cut at {cut}");
    }
    // Any single corrupted header byte: an error or a model, never a panic.
    let header_end = 1200.min(file.len());
    for i in 0..header_end {
        let mut bad = file.clone();
        bad[i] ^= 0x5a;
        if let Ok(model) = load(&bad) {
            if let Ok(layout) = Layout::new(&model, 3, 2) {
                if layout.floats < 1 << 24 && layout.scratch_bytes < 1 << 24 {
                    let mut floats = vec![0f32; layout.floats];
                    let mut scratch = vec![0u8; layout.scratch_bytes];
                    let mut s = Session::new(&model, layout, &mut floats, &mut scratch).unwrap();
                    let mut out = vec![0f32; model.config().vocab];
                    let _ = s.forward(
                        &SingleThread {
                            level: Level::Scalar,
                        },
                        &[1, 2, 3],
                        &mut out,
                    );
                }
            }
        };
    }
}

/// FNV-1a over the logits' bits.
fn digest(logits: &[f32]) -> u64 {
    logits
        .iter()
        .flat_map(|v| v.to_bits().to_le_bytes())
        .fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
}

/// The digest of the tiny model's logits as this test computed it on x86_64 (every level there
/// gives it). Not an oracle: a cross-check that another architecture (`cargo xtask aarch64` runs
/// this test under qemu on three CPU models) and its kernel levels compute the same bits as
/// x86_64 — libm's transcendentals, the serial sums and the kernels' bit-exactness together.
const TINY_LOGITS_DIGEST_X86_64: u64 = 0x9ba0_76db_a871_1a5d;

/// The same for the tiny Gemma 3 (window 3): GELU's tanh, the f16 rounding around it, NeoX rope.
const TINY_GEMMA3_LOGITS_DIGEST_X86_64: u64 = 0x0508_c99f_636a_f2f0;

#[test]
fn logits_have_the_bits_recorded_on_x86_64() {
    let file = tiny(&Tweak {
        untie: true,
        ..Tweak::default()
    });
    let model = load(&file).unwrap();
    let tokens = [2, 7, 1, 8, 2, 8, 1, 8, 2, 8, 4, 5, 9, 0];
    for level in level::available() {
        for batch in [1, 5] {
            let got = digest(&logits(&model, &tokens, batch, level));
            assert_eq!(
                got, TINY_LOGITS_DIGEST_X86_64,
                "{level:?} batch {batch}: {got:#x}"
            );
        }
    }
}

#[test]
fn gemma3_logits_have_the_bits_recorded_on_x86_64() {
    let file = tiny(&gemma(3));
    let model = load(&file).unwrap();
    let tokens = [2, 7, 1, 8, 2, 8, 1, 8, 2, 8, 4, 5, 9, 0];
    for level in level::available() {
        for batch in [1, 5] {
            let got = digest(&logits(&model, &tokens, batch, level));
            assert_eq!(
                got, TINY_GEMMA3_LOGITS_DIGEST_X86_64,
                "{level:?} batch {batch}: {got:#x}"
            );
        }
    }
}

/// A [`MatMul`] that runs `for_each_chunk`'s chunks last first, each with the next of three lanes
/// (whose old contents it poisons with NaN), as threads would in any order: the logits must keep
/// their bits.
struct Shuffled(SingleThread);

impl MatMul for Shuffled {
    fn level(&self) -> Level {
        self.0.level
    }

    fn matmul(
        &self,
        t: GgmlType,
        w: &[u8],
        rows: usize,
        cols: usize,
        n: usize,
        x: &[f32],
        scratch: &mut [u8],
        y: &mut [f32],
    ) -> crate::Result<()> {
        self.0.matmul(t, w, rows, cols, n, x, scratch, y)
    }

    fn threads(&self) -> usize {
        3
    }

    fn for_each_chunk(
        &self,
        out: &mut [f32],
        chunk: usize,
        lanes: &mut [f32],
        lane_len: usize,
        _cost: usize,
        work: &ChunkWork<'_>,
    ) -> crate::Result<()> {
        let count = out.len().div_ceil(chunk);
        let mut chunks: Vec<(usize, &mut [f32])> = out.chunks_mut(chunk).enumerate().collect();
        chunks.reverse();
        let lane_count = lanes.len().checked_div(lane_len).unwrap_or(1);
        assert!(lane_count >= 3 || lane_len == 0);
        for (k, (i, c)) in chunks.into_iter().enumerate() {
            assert!(i < count);
            let lane = &mut lanes[(k % lane_count) * lane_len..][..lane_len];
            lane.fill(f32::NAN);
            work(i, c, lane)?;
        }
        Ok(())
    }
}

#[test]
fn chunks_in_any_order_on_any_lane_give_the_same_bits() {
    for tweak in [Tweak::default(), gemma(3)] {
        let file = tiny(&tweak);
        let model = load(&file).unwrap();
        let tokens = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5];
        let want = logits(&model, &tokens, tokens.len(), Level::Scalar);
        for batch in [tokens.len(), 4] {
            let layout = Layout::with_threads(&model, tokens.len(), batch, 3).unwrap();
            let mut floats = vec![f32::NAN; layout.floats];
            let mut scratch = vec![0u8; layout.scratch_bytes];
            let mut session = Session::new(&model, layout, &mut floats, &mut scratch).unwrap();
            let mut out = vec![0f32; model.config().vocab];
            let mm = Shuffled(SingleThread {
                level: Level::Scalar,
            });
            session.forward(&mm, &tokens, &mut out).unwrap();
            assert!(
                out.iter()
                    .zip(&want)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "batch {batch}"
            );
        }
    }
}
