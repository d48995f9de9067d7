//! The probe behind `cargo xtask aarch64 count` (instructions per block of the NEON kernels, ours
//! beside candle's, counted under qemu-aarch64). Ignored, and a no-op without `MINIQUANT_PROBE`:
//! it runs one vec_dot over `MINIQUANT_PROBE_BLOCKS` blocks of data prepared the same way for
//! every block count, so the difference of two runs' instruction counts is the kernel's alone.
//!
//! `MINIQUANT_PROBE` = `ours:TYPE:LEVEL` or `candle:TYPE`.

mod candle_common;

use candle_common::{blocks_from_bytes, with_candle_block, CandleBlock};
use miniquant::quant::{self, Level};
use miniquant::GgmlType;

/// The largest block count a probe runs.
const MAX_BLOCKS: usize = 512;

/// Blocks quantized from fixed pseudo-random values (few: the quantizers are slow under the
/// instruction log), repeated up to `MAX_BLOCKS`.
const DISTINCT_BLOCKS: usize = 4;

/// Weights and Q8 activations for `MAX_BLOCKS` blocks of `t`.
fn data(t: GgmlType) -> (Vec<u8>, Vec<u8>) {
    let n = DISTINCT_BLOCKS * t.block_size() as usize;
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let values: Vec<f32> = (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % 2001) as f32 / 1000.0 - 1.0
        })
        .collect();
    let mut w = vec![0u8; quant::bytes_for(t, n).unwrap()];
    quant::quantize(t, &values, &mut w).unwrap();
    let a = quant::vec_dot_type(t).unwrap();
    let mut x = vec![0u8; quant::bytes_for(a, n).unwrap()];
    quant::quantize(a, &values, &mut x).unwrap();
    let repeat = MAX_BLOCKS / DISTINCT_BLOCKS;
    (w.repeat(repeat), x.repeat(repeat))
}

fn candle_dot<T: CandleBlock>(w: &[u8], x: &[u8], blocks: usize) -> f32 {
    let w: Vec<T> = blocks_from_bytes(w);
    let x: Vec<T::VecDotType> = blocks_from_bytes(x);
    T::vec_dot(blocks * T::BLCK_SIZE, &w[..blocks], &x[..blocks])
}

#[test]
#[ignore = "run by `cargo xtask aarch64 count`"]
fn probe() {
    let Ok(spec) = std::env::var("MINIQUANT_PROBE") else {
        return;
    };
    let blocks: usize = std::env::var("MINIQUANT_PROBE_BLOCKS")
        .ok()
        .and_then(|b| b.parse().ok())
        .unwrap_or(0)
        .min(MAX_BLOCKS);
    let parts: Vec<&str> = spec.split(':').collect();
    let t = GgmlType::from_name(parts[1]).expect("TYPE");
    let (w, x) = data(t);
    let result = match parts[0] {
        "ours" => {
            let level: Level = parts[2].parse().expect("LEVEL");
            let (wb, xb) = (t.block_bytes() as usize, x.len() / MAX_BLOCKS);
            quant::vec_dot_at(level, t, &w[..blocks * wb], &x[..blocks * xb]).unwrap()
        }
        "candle" => with_candle_block!(t, candle_dot(&w, &x, blocks)),
        other => panic!("unknown probe {other}"),
    };
    println!("probe result {result}");
}
