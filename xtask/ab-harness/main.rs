//! The `cargo xtask ab` harness (built by xtask in `target/ab/`, not part of the workspace): one
//! matvec through this checkout's core (`new`) and another revision's (`old`, the crate renamed
//! `miniquant_old`) in one process, alternated round by round, with the read bandwidth measured
//! first. On a shared machine whose speed moves in phases, two separate processes disagree by more
//! than two kernels differ; alternating in one process keeps both in the same phase. Every call's
//! output must have the same bits as the first one's, or the run stops (unless `AB_NO_BITS` is
//! set: for ablations, where the new side leaves work out on purpose and only its time counts).
//!
//! Arguments: TYPE COLS VARIANTS [ROUNDS] [KIB], VARIANTS a comma list of `old:LEVEL` and
//! `new:LEVEL` (LEVEL as `MINIQUANT_LEVEL` takes it, or `auto`); ROUNDS (default 20) rounds, the
//! best time of each variant kept; KIB (default 2048) the weight matrix's size, random bytes with
//! small scales.

use std::hint::black_box;
use std::time::{Duration, Instant};

use miniquant::quant::{level, matvec, Level};
use miniquant::GgmlType;

/// One side of the comparison and the level it runs at.
struct Variant {
    old: bool,
    level: Level,
}

impl Variant {
    fn parse(text: &str) -> Result<Variant, String> {
        let (side, level) = text.split_once(':').unwrap_or((text, "auto"));
        let old = match side {
            "old" => true,
            "new" => false,
            _ => return Err(format!("variant `{text}`: expected old:LEVEL or new:LEVEL")),
        };
        let level = if level == "auto" {
            level::detect()
        } else {
            Level::parse(level).ok_or_else(|| format!("unknown level `{level}`"))?
        };
        Ok(Variant { old, level })
    }

    fn name(&self) -> String {
        format!("{}:{}", if self.old { "old" } else { "new" }, self.level.name())
    }
}

/// xorshift64: reproducible weights without a dependency.
fn random_bytes(len: usize) -> Vec<u8> {
    let mut state = 0x1234_5678_9abc_def0u64;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// Overwrites every f16 scale of every block with 2^-7 · (1 + small), so that random quants give
/// finite sums: the scales' byte offsets per type (the rest of a block is quants).
fn tame_scales(t: GgmlType, weights: &mut [u8]) {
    let block = t.block_bytes() as usize;
    let scale_offsets: &[usize] = match t {
        GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 | GgmlType::IQ4_NL => &[0],
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4_K | GgmlType::Q5_K => &[0, 2],
        GgmlType::Q2_K => &[block - 4, block - 2],
        GgmlType::Q3_K | GgmlType::Q6_K => &[block - 2],
        _ => &[],
    };
    for b in weights.chunks_exact_mut(block) {
        for &at in scale_offsets {
            b[at] = 0;
            b[at + 1] = 0x20;
        }
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: TYPE COLS VARIANTS [ROUNDS] [KIB]";
    let type_name = args.first().ok_or(usage)?;
    let t = GgmlType::from_name(type_name).ok_or(format!("unknown type {type_name}"))?;
    let old_t = miniquant_old::GgmlType::from_name(type_name).ok_or("type unknown to old")?;
    let cols: usize = args.get(1).ok_or(usage)?.parse().map_err(|e| format!("COLS: {e}"))?;
    let variants = args
        .get(2)
        .ok_or(usage)?
        .split(',')
        .map(Variant::parse)
        .collect::<Result<Vec<_>, _>>()?;
    let rounds: usize = args.get(3).map_or(Ok(20), |r| r.parse()).map_err(|e| format!("{e}"))?;
    let kib: usize = args.get(4).map_or(Ok(2048), |k| k.parse()).map_err(|e| format!("{e}"))?;

    let row_bytes = miniquant::quant::bytes_for(t, cols).map_err(|e| format!("{e}"))?;
    let rows = ((kib << 10) / row_bytes).max(1);
    let mut weights = random_bytes(rows * row_bytes);
    tame_scales(t, &mut weights);
    let x: Vec<f32> = (0..cols).map(|i| ((i * 7919) % 113) as f32 / 50.0 - 1.1).collect();
    let scratch_bytes = matvec::matvec_scratch_bytes(t, cols).map_err(|e| format!("{e}"))?;
    let mut scratch = vec![0u8; scratch_bytes];
    let mut y = vec![0f32; rows];

    let buffer = vec![1u64; 64 << 20];
    let read_pass = || {
        let start = Instant::now();
        let sum = black_box(&buffer).iter().fold(0u64, |a, &v| a.wrapping_add(v));
        black_box(sum);
        start.elapsed()
    };
    let bandwidth_time = (0..3).map(|_| read_pass()).min().unwrap_or(Duration::MAX);

    let check_bits = std::env::var_os("AB_NO_BITS").is_none();
    let mut best = vec![Duration::MAX; variants.len()];
    let mut first_bits: Option<Vec<u32>> = None;
    for _ in 0..rounds {
        for (variant, best) in variants.iter().zip(&mut best) {
            let start = Instant::now();
            if variant.old {
                let level = miniquant_old::quant::Level::parse(variant.level.name())
                    .ok_or("level unknown to old")?;
                miniquant_old::quant::matvec::matvec_at(
                    level, old_t, black_box(&weights), rows, cols, &x, &mut scratch, &mut y,
                )
                .map_err(|e| format!("old: {e}"))?;
            } else {
                matvec::matvec_at(
                    variant.level, t, black_box(&weights), rows, cols, &x, &mut scratch, &mut y,
                )
                .map_err(|e| format!("new: {e}"))?;
            }
            *best = (*best).min(start.elapsed());
            let bits: Vec<u32> = y.iter().map(|v| v.to_bits()).collect();
            match &first_bits {
                None => first_bits = Some(bits),
                Some(first) if check_bits && *first != bits => {
                    return Err(format!("{} gave other bits than the first call", variant.name()))
                }
                Some(_) => {}
            }
        }
    }
    let rate = |d: Duration, bytes: usize| bytes as f64 / d.as_secs_f64() / 1e9;
    let bandwidth = rate(bandwidth_time, buffer.len() * 8);
    println!("{type_name} {rows}x{cols} ({kib} KiB), best of {rounds}; read bandwidth {bandwidth:.2} GB/s");
    for (variant, best) in variants.iter().zip(&best) {
        let gbs = rate(*best, weights.len());
        println!("  {:<16} {gbs:7.2} GB/s  {:5.1}% of bw", variant.name(), 100.0 * gbs / bandwidth);
    }
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("ab: {e}");
        std::process::exit(2);
    }
}
