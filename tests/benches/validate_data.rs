//! `miniquant::quant::validate::first_invalid` against ggml's `ggml_validate_row_data` (compiled
//! by `build.rs` with `-O2 -march=x86-64-v3` on x86_64, so its F32/F16 loops are its AVX2 ones), on
//! the same clean buffers (the whole buffer is read: the worst case) in one process, alternated.
//! Prints the best and median GB/s of each and ggml's time / ours per type.
//!
//! Run: `cargo bench -p miniquant-tests --bench validate_data`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use miniquant::quant::validate::first_invalid;
use miniquant::GgmlType;

const BYTES: usize = 32 << 20;
const ROUNDS: usize = 9;

/// Clean blocks of `t`: random bytes whose 16-bit words have the top exponent bit cleared (no f16
/// or bf16 word is then NaN or inf, nor the f32 made of two of them).
fn clean(t: GgmlType) -> Vec<u8> {
    let block = t.block_bytes() as usize;
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut bytes: Vec<u8> = (0..BYTES / block * block)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    for word in bytes.chunks_exact_mut(2) {
        word[1] &= 0x3f;
    }
    if t == GgmlType::MXFP4 {
        for b in bytes.chunks_exact_mut(block) {
            b[0] = 0x7f;
        }
    }
    bytes
}

fn time(f: impl Fn() -> bool) -> Duration {
    let start = Instant::now();
    assert!(black_box(f()), "a clean buffer was refused");
    start.elapsed()
}

fn main() {
    println!("type     ours best/median GB/s   ggml best/median GB/s   ggml/ours (median)");
    for t in [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::BF16,
        GgmlType::Q4_0,
        GgmlType::Q8_0,
        GgmlType::Q4_K,
        GgmlType::Q6_K,
        GgmlType::IQ4_XS,
    ] {
        let data = clean(t);
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            ours.push(time(|| first_invalid(t, black_box(&data)) == Ok(None)));
            // ggml's wrapper copies the buffer into aligned memory first: time only its call.
            theirs.push(time_ggml(t, &data));
        }
        ours.sort();
        theirs.sort();
        let gbs = |d: Duration| data.len() as f64 / d.as_secs_f64() / 1e9;
        let (o_med, g_med) = (ours[ROUNDS / 2], theirs[ROUNDS / 2]);
        println!(
            "{:<8} {:>8.1} / {:<8.1}          {:>8.1} / {:<8.1}         {:.2}x",
            t.to_string(),
            gbs(ours[0]),
            gbs(o_med),
            gbs(theirs[0]),
            gbs(g_med),
            g_med.as_secs_f64() / o_med.as_secs_f64()
        );
    }
}

fn time_ggml(t: GgmlType, data: &[u8]) -> Duration {
    let mut took = Duration::ZERO;
    let ok = miniquant_tests::ggml::ggml_validate_timed(t, data, &mut took);
    assert!(ok, "ggml refused a clean buffer");
    took
}
