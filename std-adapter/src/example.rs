//! The small example GGUF file that `miniquant make-example` writes (the repository ships it as
//! `examples/tiny.gguf`): metadata of every value type, a string array, and five small tensors
//! (F32, F16, Q8_0, Q4_0, Q4_K) with deterministic data. Nothing in it draws a warning (nested
//! arrays, which ggml refuses, are shown by the tests' own files).
//!
//! Tensor values come from a fixed linear congruential generator whose outputs are exact in f32, so
//! the file is the same on every platform. Quantized tensors go through `miniquant::quant::quantize`.

use miniquant::gguf::Scalar;
use miniquant::quant;
use miniquant::GgmlType;

use crate::value::Array;
use crate::writer::GgufWriter;

/// The example file's bytes.
pub fn tiny_gguf() -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.kv("general.architecture", "tiny")
        .kv("general.name", "miniquant tiny example")
        .kv("general.alignment", Scalar::U32(32))
        .kv(
            "general.description",
            "A tiny GGUF v3 file written by `miniquant make-example`: five small tensors and metadata of every value type.",
        )
        .kv("tiny.block_count", Scalar::U32(1))
        .kv("tiny.context_length", Scalar::U64(128))
        .kv("tiny.embedding_length", Scalar::U32(8))
        .kv("tiny.rope.freq_base", Scalar::F32(10000.0))
        .kv("tiny.attention.layer_norm_rms_epsilon", Scalar::F32(1e-5))
        .kv("example.u8", Scalar::U8(200))
        .kv("example.i8", Scalar::I8(-100))
        .kv("example.u16", Scalar::U16(60000))
        .kv("example.i16", Scalar::I16(-30000))
        .kv("example.i32", Scalar::I32(-2_000_000_000))
        // Not representable in f64: readers must keep 64-bit integers exact.
        .kv("example.i64", Scalar::I64(-9_007_199_254_740_993))
        .kv("example.u64", Scalar::U64(u64::MAX))
        .kv("example.f64", Scalar::F64(0.1))
        .kv("example.bool", Scalar::Bool(true))
        .kv(
            "tokenizer.ggml.tokens",
            ["<unk>", "<s>", "</s>", "hello", "world", "tiny"].into_iter().collect::<Array>(),
        )
        .kv("tokenizer.ggml.scores", Array::F32(vec![0.0, 0.0, 0.0, -1.5, -2.25, -3.0]));

    let tensors: [(&str, GgmlType, [u64; 2]); 5] = [
        ("token_embd.weight", GgmlType::F16, [8, 6]),
        ("output_norm.weight", GgmlType::F32, [8, 1]),
        ("blk.0.attn_q.weight", GgmlType::Q8_0, [64, 2]),
        ("blk.0.ffn_up.weight", GgmlType::Q4_0, [32, 4]),
        ("blk.0.ffn_down.weight", GgmlType::Q4_K, [256, 2]),
    ];
    for (seed, (name, t, ne)) in (1u64..).zip(tensors) {
        let values = pseudo_random(seed, (ne[0] * ne[1]) as usize);
        // The norm weight is 1-D.
        let dims: &[u64] = if ne[1] == 1 { &ne[..1] } else { &ne };
        w.tensor(name, t, dims, encode(t, &values));
    }
    w.to_bytes()
}

/// `n` values in [-1, 1), each a multiple of 2^-23: exact in f32 everywhere.
fn pseudo_random(seed: u64, n: usize) -> Vec<f32> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state = lcg(state);
            (state >> 40) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

fn lcg(state: u64) -> u64 {
    state
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407)
}

fn encode(t: GgmlType, values: &[f32]) -> Vec<u8> {
    match t {
        GgmlType::F32 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        GgmlType::F16 => values
            .iter()
            .flat_map(|&v| quant::cast::f16_to_le(v))
            .collect(),
        _ => {
            // The example's types and shapes are fixed: whole blocks of types with a quantizer.
            let mut out = vec![0u8; quant::bytes_for(t, values.len()).expect("whole blocks")];
            quant::quantize(t, values, &mut out).expect("the example's types have quantizers");
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Index;
    use crate::validate;

    #[test]
    fn the_example_parses_and_has_what_the_docs_say() {
        let bytes = tiny_gguf();
        let index = Index::from_bytes(&bytes).unwrap();
        assert_eq!(index.version(), 3);
        let types: Vec<_> = index.tensors().iter().map(|t| t.ggml_type).collect();
        assert_eq!(
            types,
            [
                GgmlType::F16,
                GgmlType::F32,
                GgmlType::Q8_0,
                GgmlType::Q4_0,
                GgmlType::Q4_K
            ]
        );
        assert_eq!(
            index.tensor("blk.0.ffn_down.weight").map(|t| t.bytes),
            Some(2 * 144)
        );
        let report = validate::check(&index, None);
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        // Nothing ggml would refuse: a newcomer's first `inspect` prints no warning.
        assert_eq!(report.warnings, []);
        assert!(bytes.len() < 4096);
    }

    #[test]
    fn quantized_tensors_are_the_quantization_of_the_values() {
        let bytes = tiny_gguf();
        let index = Index::from_bytes(&bytes).unwrap();
        for (seed, t) in (1u64..).zip(index.tensors()) {
            let n = t.elements as usize;
            let start = (index.data_offset() + t.offset) as usize;
            let data = &bytes[start..start + t.bytes as usize];
            let mut back = vec![0f32; n];
            quant::dequantize(t.ggml_type, data, &mut back).unwrap();
            let values = pseudo_random(seed, n);
            let worst = values
                .iter()
                .zip(&back)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            // Values are in [-1, 1): 4-bit types err by at most about 1/8 of the range.
            assert!(worst < 0.15, "{}: {worst}", t.name);
        }
    }

    #[test]
    fn generator_values_are_in_range_and_exact() {
        let v = pseudo_random(7, 1000);
        assert!(v.iter().all(|x| (-1.0..1.0).contains(x)));
        assert!(v.iter().all(|x| (x * (1u32 << 23) as f32).fract() == 0.0));
    }
}
