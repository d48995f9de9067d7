//! Throughput of our kernels (auto-detected level and each level forced) against candle-core
//! 0.11's, for each quantized type candle has: quantize, dequantize, vec_dot (k = 4096, one call
//! per row, cache-resident) and matvec (rows x 4096); then one-row matvec on the largest real
//! tensor of Q8_0, Q4_0, Q4_K, Q6_K, Q4_1 and Q5_0 in the two model files (1 and 2 threads), as a
//! fraction of the memory read bandwidth measured in the same run.
//!
//! For Q4_K and Q6_K a kernel that adds in any order (`free_order`, not ggml's bits, only here)
//! runs beside them, so the summary can say what keeping ggml's order costs.
//!
//! Both sides work on the same bytes (ours quantized). candle runs single-threaded
//! (`CANDLE_NUM_THREADS=1`) and, unless this crate is built with SIMD target features, on its
//! scalar kernels; the header says which (build with `RUSTFLAGS="-C target-cpu=native"` for its AVX2
//! path). Each figure is the best of N runs (`MINIQUANT_BENCH_RUNS`, default 5) after one warm-up.
//! The figures that the summary and the one-row matvec ratios compare (cached rows, dequantize
//! into L2, one-thread matvec at the detected level) time ours and candle's runs alternately, so
//! that both sides see the same phases of a shared machine.
//!
//! Run: `cargo bench -p miniquant-tests --bench kernels` (append `-- Q4_K Q6_K` for some types only).

#[path = "../tests/candle_common/mod.rs"]
mod candle_common;
mod free_order;

use candle_common::{
    blocks_from_bytes, bytes_of_blocks, candle_dtype, candle_simd_in_build, gaussian_rows,
    single_threaded_candle, with_candle_block, CandleBlock, Rng,
};
use candle_core::quantized::{QMatMul, QStorage, QTensor};
use candle_core::{Device, Module, Tensor};
use miniquant::quant::level::{self, Level};
use miniquant::{quant, GgmlType};
use miniquant_std::{parallel, GgufFile, TensorEntry};
use std::borrow::Cow;
use std::hint::black_box;
use std::time::{Duration, Instant};

const COLS: usize = 4096;
const ROWS: usize = 2048;
/// Rows of the cache-resident vec_dot section (128 x 4096: 0.3-0.6 MB of weights, in L2).
const CACHED_ROWS: usize = 128;
/// Rows of the cache-resident dequantize figure (64 x 4096 f32 = 1 MiB out).
const CACHED_DEQUANT_ROWS: usize = 64;
/// Passes over those rows per timing.
const REPEAT: usize = 20;

const QUANTIZED_TYPES: [GgmlType; 15] = [
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q8_1,
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::Q8_K,
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
];

/// Best wall time of `runs` calls of `f`, after one warm-up call.
fn best_of(runs: usize, mut f: impl FnMut()) -> Duration {
    f();
    (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .min()
        .unwrap_or_default()
}

/// Best wall times of `runs` calls each of `ours` and `anchor`, the calls alternated (after one
/// warm-up each) so that both see the same machine: on a shared machine whose speed drifts over
/// seconds, timing one side's runs and then the other's moves the ratio by more than the kernels
/// differ.
fn best_of_alternated(
    runs: usize,
    mut ours: impl FnMut(),
    mut anchor: impl FnMut(),
) -> (Duration, Duration) {
    ours();
    anchor();
    let time = |f: &mut dyn FnMut()| {
        let start = Instant::now();
        f();
        start.elapsed()
    };
    (0..runs)
        .map(|_| (time(&mut ours), time(&mut anchor)))
        .fold((Duration::MAX, Duration::MAX), |(a, b), (x, y)| {
            (a.min(x), b.min(y))
        })
}

/// Best wall times of `runs` rounds in which every call of `calls` runs once, in order (after one
/// warm-up each): [`best_of_alternated`] for any number of sides.
fn best_of_rotated(runs: usize, calls: &mut [&mut dyn FnMut()]) -> Vec<Duration> {
    for call in calls.iter_mut() {
        call();
    }
    let mut best = vec![Duration::MAX; calls.len()];
    for _ in 0..runs {
        for (call, best) in calls.iter_mut().zip(&mut best) {
            let start = Instant::now();
            call();
            *best = (*best).min(start.elapsed());
        }
    }
    best
}

/// One measured operation: the amount of work per call, its unit, and the best times.
struct Row {
    op: String,
    unit: &'static str,
    /// Work per call, in the unit's base (elements, or bytes of weight blocks).
    work: f64,
    ours: Duration,
    candle: Duration,
}

impl Row {
    fn rate(&self, d: Duration) -> f64 {
        self.work / d.as_secs_f64() / 1e6
    }

    /// candle's time over ours: above 1 when ours is faster.
    fn ratio(&self) -> f64 {
        self.candle.as_secs_f64() / self.ours.as_secs_f64()
    }
}

struct Inputs {
    values: Vec<f32>,
    x: Vec<f32>,
}

fn bench_type<T: CandleBlock>(t: GgmlType, inputs: &Inputs, runs: usize) -> Vec<Row> {
    let elements = inputs.values.len();
    let weight_bytes = quant::bytes_for(t, elements).unwrap();
    let mut ours_q = vec![0u8; weight_bytes];
    let mut rows = Vec::new();

    // quantize: f32 -> blocks.
    let ours = best_of(runs, || {
        quant::quantize(t, black_box(&inputs.values), &mut ours_q).unwrap();
    });
    let mut candle_blocks = vec![T::zeros(); elements / T::BLCK_SIZE];
    let candle = best_of(runs, || {
        T::from_float(black_box(&inputs.values), &mut candle_blocks);
    });
    rows.push(Row {
        op: "quantize".into(),
        unit: "Melem/s",
        work: elements as f64,
        ours,
        candle,
    });

    // dequantize: our blocks -> f32, on both sides.
    let blocks = blocks_from_bytes::<T>(&ours_q);
    let mut out = vec![0f32; elements];
    let ours = best_of(runs, || {
        quant::dequantize(t, black_box(&ours_q), &mut out).unwrap();
    });
    let candle = best_of(runs, || {
        T::to_float(black_box(&blocks), &mut out);
    });
    rows.push(Row {
        op: "dequantize".into(),
        unit: "Melem/s",
        work: elements as f64,
        ours,
        candle,
    });
    for level in level::available() {
        let ours = best_of(runs, || {
            quant::dequantize_at(level, t, black_box(&ours_q), &mut out).unwrap();
        });
        rows.push(Row {
            op: format!("dequantize {level}"),
            unit: "Melem/s",
            work: elements as f64,
            ours,
            candle,
        });
    }

    // dequantize into a cache-resident buffer: the first CACHED_DEQUANT_ROWS rows (1 MiB of f32
    // out), `REPEAT` passes per timing. The 2048-row figures above write 32 MiB, so they
    // measure the memory's write bandwidth as much as the kernels.
    let cached_elements = CACHED_DEQUANT_ROWS * COLS;
    let cached_q = &ours_q[..quant::bytes_for(t, cached_elements).unwrap()];
    let cached_blocks = &blocks[..cached_elements / T::BLCK_SIZE];
    let cached_out = &mut out[..cached_elements];
    // Timed alternately (see `best_of_alternated`), each side into its own buffer.
    let mut candle_out = vec![0f32; cached_elements];
    let (ours, candle) = best_of_alternated(
        runs,
        || {
            for _ in 0..REPEAT {
                quant::dequantize(t, black_box(cached_q), cached_out).unwrap();
            }
        },
        || {
            for _ in 0..REPEAT {
                T::to_float(black_box(cached_blocks), &mut candle_out);
            }
        },
    );
    rows.push(Row {
        op: "dequantize L2".into(),
        unit: "Melem/s",
        work: (cached_elements * REPEAT) as f64,
        ours,
        candle,
    });

    let Some(vd) = quant::vec_dot_type(t) else {
        return rows;
    };

    // vec_dot: one call per row against the same quantized activation.
    let mut xq = vec![0u8; quant::bytes_for(vd, COLS).unwrap()];
    quant::quantize(vd, &inputs.x, &mut xq).unwrap();
    let x_blocks = blocks_from_bytes::<T::VecDotType>(&xq);
    let row_bytes = weight_bytes / ROWS;
    let row_blocks = COLS / T::BLCK_SIZE;
    let ours = best_of(runs, || {
        for row in ours_q.chunks_exact(row_bytes) {
            black_box(quant::vec_dot(t, black_box(row), &xq).unwrap());
        }
    });
    let candle = best_of(runs, || {
        for row in blocks.chunks_exact(row_blocks) {
            black_box(T::vec_dot(COLS, black_box(row), &x_blocks));
        }
    });
    rows.push(Row {
        op: "vec_dot".into(),
        unit: "GB/s",
        work: weight_bytes as f64 / 1e3,
        ours,
        candle,
    });
    for level in level::available() {
        let ours = best_of(runs, || {
            for row in ours_q.chunks_exact(row_bytes) {
                black_box(quant::vec_dot_at(level, t, black_box(row), &xq).unwrap());
            }
        });
        rows.push(Row {
            op: format!("vec_dot {level}"),
            unit: "GB/s",
            work: weight_bytes as f64 / 1e3,
            ours,
            candle,
        });
    }

    // vec_dot over cache-resident rows: the first CACHED_ROWS rows (L2-resident), `REPEAT`
    // passes per timing, against one quantized activation. Ours one vec_dot per row (the
    // single-pair kernel: its serial float sum is one dependent add per block) and through
    // matvec_quantized (the `rows` kernel where the level has one: several rows' serial sums
    // side by side, same bits); candle's vec_dot per row, which is what its matmul does for one
    // column.
    let cached = &ours_q[..CACHED_ROWS * row_bytes];
    let cached_blocks = &blocks[..CACHED_ROWS * row_blocks];
    let mut y_cached = vec![0f32; CACHED_ROWS];
    let work = (cached.len() * REPEAT) as f64 / 1e3;
    // Candle's time is taken alternately with each of ours (see `best_of_alternated`).
    let candle = || {
        for _ in 0..REPEAT {
            for row in cached_blocks.chunks_exact(row_blocks) {
                black_box(T::vec_dot(COLS, black_box(row), &x_blocks));
            }
        }
    };
    // The price of ggml's order: a kernel that sums in any order (not our bits; see
    // `free_order`), one call per row as candle's, timed alternately with candle.
    if free_order::has_kernel(t) {
        let free = |row: &[u8]| free_order::dot(t, row, &xq).unwrap_or(f32::NAN);
        // A sanity bound, not a bit check: the free order may round differently, but not by
        // more than a few units in the last place of the row's magnitude.
        for row in cached.chunks_exact(row_bytes).take(8) {
            let exact = quant::vec_dot(t, row, &xq).unwrap();
            let loose = free(row);
            assert!(
                (exact - loose).abs() <= 1e-4 * exact.abs().max(1.0),
                "{t} free-order kernel off: {loose} vs {exact}"
            );
        }
        let (ours, candle) = best_of_alternated(
            runs,
            || {
                for _ in 0..REPEAT {
                    for row in cached.chunks_exact(row_bytes) {
                        black_box(free(black_box(row)));
                    }
                }
            },
            candle,
        );
        rows.push(Row {
            op: format!("1-row {CACHED_ROWS}x free order"),
            unit: "GB/s",
            work,
            ours,
            candle,
        });
    }
    let named_levels = [("auto".to_string(), level::detect())]
        .into_iter()
        .chain(level::available().map(|l| (l.to_string(), l)));
    for (name, level) in named_levels {
        let (single, candle_single) = best_of_alternated(
            runs,
            || {
                for _ in 0..REPEAT {
                    for row in cached.chunks_exact(row_bytes) {
                        black_box(quant::vec_dot_at(level, t, black_box(row), &xq).unwrap());
                    }
                }
            },
            candle,
        );
        rows.push(Row {
            op: format!("1-row {CACHED_ROWS}x {name}"),
            unit: "GB/s",
            work,
            ours: single,
            candle: candle_single,
        });
        let (multi, candle) = best_of_alternated(
            runs,
            || {
                for _ in 0..REPEAT {
                    quant::matvec::matvec_quantized(
                        level,
                        t,
                        black_box(cached),
                        CACHED_ROWS,
                        COLS,
                        &xq,
                        &mut y_cached,
                    )
                    .unwrap();
                }
            },
            candle,
        );
        rows.push(Row {
            op: format!("rows {CACHED_ROWS}x {name}"),
            unit: "GB/s",
            work,
            ours: multi,
            candle,
        });
    }

    // matvec: y = W x from f32 x, activation quantization included on both sides.
    let mut scratch = vec![0u8; quant::matvec::matvec_scratch_bytes(t, COLS).unwrap()];
    let mut y = vec![0f32; ROWS];
    let ours = best_of(runs, || {
        quant::matvec::matvec(
            t,
            &ours_q,
            ROWS,
            COLS,
            black_box(&inputs.x),
            &mut scratch,
            &mut y,
        )
        .unwrap();
    });
    let dtype = candle_dtype(t).unwrap();
    // From candle-aligned blocks: candle's loader checks the alignment of the bytes it is given.
    let storage =
        QStorage::from_data(Cow::Borrowed(bytes_of_blocks(&blocks)), &Device::Cpu, dtype).unwrap();
    let qmatmul = QMatMul::from_qtensor(QTensor::new(storage, (ROWS, COLS)).unwrap()).unwrap();
    let input = Tensor::from_slice(&inputs.x, (1, COLS), &Device::Cpu).unwrap();
    let candle = best_of(runs, || {
        black_box(qmatmul.forward(black_box(&input)).unwrap());
    });
    rows.push(Row {
        op: "matvec".into(),
        unit: "GB/s",
        work: weight_bytes as f64 / 1e3,
        ours,
        candle,
    });
    rows
}

fn main() {
    single_threaded_candle();
    let runs = std::env::var("MINIQUANT_BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or(5);
    let mut rng = Rng::new(0xbe7c_4000);
    let inputs = Inputs {
        values: gaussian_rows(&mut rng, ROWS, COLS),
        x: gaussian_rows(&mut rng, 1, COLS),
    };
    println!(
        "kernels bench: {ROWS} rows x {COLS}, best of {runs} runs; target {}; candle SIMD kernels in this build: {}; \
         CANDLE_NUM_THREADS={}",
        std::env::consts::ARCH,
        candle_simd_in_build(),
        std::env::var("CANDLE_NUM_THREADS").unwrap_or_default()
    );
    println!(
        "ratio = candle time / our time (> 1: ours is faster); rates are per second, best run"
    );
    // Type names on the command line (`cargo bench ... -- Q4_K Q6_K`) pick types; cargo itself
    // passes `--bench`.
    let picked: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let mut summary = Vec::new();
    for t in QUANTIZED_TYPES {
        if !picked.is_empty() && !picked.iter().any(|p| p.eq_ignore_ascii_case(t.name())) {
            continue;
        }
        let rows = with_candle_block!(t, bench_type(t, &inputs, runs));
        println!();
        println!("{t}");
        println!(
            "  {:<24} {:<8} {:>9} {:>9} {:>7}",
            "op", "unit", "ours", "candle", "ratio"
        );
        for row in &rows {
            println!(
                "  {:<24} {:<8} {:>9.2} {:>9.2} {:>7.2}",
                row.op,
                row.unit,
                row.rate(row.ours),
                row.rate(row.candle),
                row.ratio()
            );
        }
        summary.push((t, rows));
    }

    println!();
    println!(
        "summary, ratio candle time / our time (n/a: ggml has no vec_dot for activation types)"
    );
    println!(
        "  {:<6} {:>9} {:>11} {:>8} {:>8} {:>11} {:>11} {:>7}",
        "type", "quantize", "dequantize", "deq L2", "vec_dot", "1-row L2", "rows L2", "matvec"
    );
    for (t, rows) in &summary {
        let ratio = |op: &str| {
            rows.iter()
                .find(|r| r.op == op)
                .map_or("n/a".to_string(), |r| format!("{:.2}", r.ratio()))
        };
        println!(
            "  {:<6} {:>9} {:>11} {:>8} {:>8} {:>11} {:>11} {:>7}",
            t.name(),
            ratio("quantize"),
            ratio("dequantize"),
            ratio("dequantize L2"),
            ratio("vec_dot"),
            ratio(&format!("1-row {CACHED_ROWS}x auto")),
            ratio(&format!("rows {CACHED_ROWS}x auto")),
            ratio("matvec")
        );
    }

    // Each figure is a ratio to candle timed alternately with it, so dividing two of them
    // compares ours with ours across the VM's slow and fast phases.
    let free_label = format!("1-row {CACHED_ROWS}x free order");
    for (t, rows) in &summary {
        let ratio = |op: &str| rows.iter().find(|r| r.op == op).map(Row::ratio);
        if let (Some(free), Some(single), Some(multi)) = (
            ratio(&free_label),
            ratio(&format!("1-row {CACHED_ROWS}x auto")),
            ratio(&format!("rows {CACHED_ROWS}x auto")),
        ) {
            println!(
                "  {:<6} price of ggml's order: a free-order kernel is {free:.2}x candle; ours \
                 1-row {single:.2}x ({:.2}x slower than it), rows {multi:.2}x ({:.2}x)",
                t.name(),
                free / single,
                free / multi
            );
        }
    }

    real_tensors(runs, &picked);
}

/// The real model files the last section reads.
const MODEL_FILES: [&str; 2] = [
    "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma-3-270m-q4_k_m.gguf",
];

/// Types of the real-tensor matvec section.
const REAL_TYPES: [GgmlType; 6] = [
    GgmlType::Q8_0,
    GgmlType::Q4_0,
    GgmlType::Q4_K,
    GgmlType::Q6_K,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
];

/// One pass of a memory read over `buffer` on `threads` threads: each sums its share as one
/// wrapping reduction, which LLVM vectorizes. (An eight-lane array accumulator was compiled for
/// Zen 4 with `-C target-cpu=native` into a loop that ran at 5 GB/s where this one reads 28: a
/// bandwidth figure must not depend on such codegen, or every "% of bw" is inflated.)
fn read_pass(buffer: &[u64], threads: usize) {
    let share = buffer.len().div_ceil(threads);
    std::thread::scope(|scope| {
        for part in buffer.chunks(share) {
            scope.spawn(move || {
                let sum = black_box(part)
                    .iter()
                    .fold(0u64, |acc, &v| acc.wrapping_add(v));
                black_box(sum);
            });
        }
    });
}

/// Best memory read bandwidth in GB/s over `threads` threads, on a buffer far beyond the
/// last-level cache.
fn read_bandwidth(buffer: &[u64], threads: usize, runs: usize) -> f64 {
    let time = best_of(runs, || read_pass(buffer, threads));
    (buffer.len() * 8) as f64 / time.as_secs_f64() / 1e9
}

/// One-row matvec on the largest tensor of each type in the real files: ours at each level and
/// thread count against candle (one thread), in GB/s of weights and as a fraction of bandwidth.
fn real_tensors(runs: usize, picked: &[String]) {
    let buffer = vec![1u64; 64 << 20];
    let bandwidth = [
        read_bandwidth(&buffer, 1, runs),
        read_bandwidth(&buffer, 2, runs),
    ];
    drop(buffer);
    println!();
    println!(
        "memory read bandwidth (512 MiB, best of {runs}): 1 thread {:.2} GB/s, 2 threads {:.2} GB/s",
        bandwidth[0], bandwidth[1]
    );
    let files: Vec<GgufFile> = MODEL_FILES
        .iter()
        .filter_map(|name| {
            let path = candle_common::model_file(name);
            GgufFile::open(&path)
                .map_err(|e| println!("skipping {name}: {e:?}"))
                .ok()
        })
        .collect();
    println!("one-row matvec on the largest real tensor of each type (x: Gaussian, quantized once per call)");
    println!(
        "  {:<5} {:<28} {:>14} {:<12} {:>7} {:>9} {:>10} {:>13}",
        "type", "tensor", "shape", "ours", "threads", "GB/s", "% of bw", "vs candle x1"
    );
    for t in REAL_TYPES {
        if !picked.is_empty() && !picked.iter().any(|p| p.eq_ignore_ascii_case(t.name())) {
            continue;
        }
        let largest = files
            .iter()
            .flat_map(|f| f.index().tensors().iter().map(move |e| (f, e)))
            .filter(|(_, e)| e.ggml_type == t && TensorEntry::ne(e).len() == 2)
            .max_by_key(|(_, e)| TensorEntry::ne(e).iter().product::<u64>());
        // A type with no tensor in the files (Q4_0) gets the largest 2-D tensor of them all,
        // dequantized and quantized to it: real weights, our quantizer's bytes.
        let requantized;
        let (weights, rows, cols, tensor_name) = match largest {
            Some((file, entry)) => {
                let ne = TensorEntry::ne(entry);
                let (cols, rows) = (ne[0] as usize, ne[1] as usize);
                (file.data_of(entry).unwrap(), rows, cols, entry.name.clone())
            }
            None => {
                let Some((file, entry)) = files
                    .iter()
                    .flat_map(|f| f.index().tensors().iter().map(move |e| (f, e)))
                    .filter(|(_, e)| {
                        let ne = TensorEntry::ne(e);
                        ne.len() == 2 && ne[0].is_multiple_of(u64::from(t.block_size()))
                    })
                    .max_by_key(|(_, e)| TensorEntry::ne(e).iter().product::<u64>())
                else {
                    println!("  {:<5} (no 2-D tensor in the files)", t.name());
                    continue;
                };
                let ne = TensorEntry::ne(entry);
                let (cols, rows) = (ne[0] as usize, ne[1] as usize);
                let mut values = vec![0f32; rows * cols];
                quant::dequantize(entry.ggml_type, file.data_of(entry).unwrap(), &mut values)
                    .unwrap();
                let mut bytes = vec![0u8; quant::bytes_for(t, rows * cols).unwrap()];
                quant::quantize(t, &values, &mut bytes).unwrap();
                requantized = bytes;
                let name = format!("{} as {}", entry.name, t.name());
                (&requantized[..], rows, cols, name)
            }
        };
        let mut rng = Rng::new(0x7ea1 + t.code() as u64);
        let x = gaussian_rows(&mut rng, 1, cols);
        let mut candle_run = with_candle_block!(t, candle_matvec(t, weights, rows, cols, &x));
        let gbps = |d: Duration| weights.len() as f64 / d.as_secs_f64() / 1e9;
        let mut y = vec![0f32; rows];
        // Ours at the detected level on one thread is timed alternately with candle (the ratio
        // the targets read); the other configurations after.
        let (auto_one, candle) = best_of_alternated(
            runs,
            || {
                parallel::matvec(
                    level::detect(),
                    t,
                    weights,
                    rows,
                    cols,
                    black_box(&x),
                    1,
                    &mut y,
                )
                .unwrap();
            },
            &mut candle_run,
        );
        let mut configs: Vec<(String, Level, usize)> = vec![("auto".into(), level::detect(), 1)];
        configs.extend(level::available().map(|l| (l.name().to_string(), l, 1)));
        configs.push(("auto".into(), level::detect(), 2));
        for (i, (name, lvl, threads)) in configs.into_iter().enumerate() {
            let ours = if i == 0 {
                auto_one
            } else {
                best_of(runs, || {
                    parallel::matvec(lvl, t, weights, rows, cols, black_box(&x), threads, &mut y)
                        .unwrap();
                })
            };
            println!(
                "  {:<5} {:<28} {:>14} {:<12} {:>7} {:>9.2} {:>9.0}% {:>13.2}",
                t.name(),
                tensor_name,
                format!("{rows}x{cols}"),
                name,
                threads,
                gbps(ours),
                100.0 * gbps(ours) / bandwidth[threads - 1],
                candle.as_secs_f64() / ours.as_secs_f64()
            );
        }
        println!(
            "  {:<5} {:<28} {:>14} {:<12} {:>7} {:>9.2} {:>9.0}%",
            t.name(),
            tensor_name,
            format!("{rows}x{cols}"),
            "candle",
            1,
            gbps(candle),
            100.0 * gbps(candle) / bandwidth[0]
        );
        beyond_cache(t, weights, rows, cols, &x, runs, &bandwidth);
    }
}

/// Bytes of the "larger than the last-level cache" matvec: the size of the bandwidth buffer.
const BEYOND_CACHE_BYTES: usize = 512 << 20;

/// One-row matvec on a tensor larger than the last-level cache: the real tensor's rows repeated
/// up to [`BEYOND_CACHE_BYTES`], ours at the detected level with 1 and 2 threads and candle with
/// one thread. The read bandwidth of these rows' second share is measured in the same rotation
/// as the matvecs (bandwidth, ours, candle; then bandwidth and ours on two threads), so that
/// both sides of the share see the same phase of a shared machine; the first share is of
/// `bandwidth`, measured once at the start.
fn beyond_cache(
    t: GgmlType,
    weights: &[u8],
    rows: usize,
    cols: usize,
    x: &[f32],
    runs: usize,
    bandwidth: &[f64; 2],
) {
    let copies = BEYOND_CACHE_BYTES.div_ceil(weights.len());
    let big: Vec<u8> = weights.repeat(copies);
    let big_rows = rows * copies;
    let gbps = |d: Duration| big.len() as f64 / d.as_secs_f64() / 1e9;
    let mut candle_run = with_candle_block!(t, candle_matvec(t, &big, big_rows, cols, x));
    let mut y = vec![0f32; big_rows];
    let name = format!("(x{copies}, {} MiB)", big.len() >> 20);
    let buffer = vec![1u64; BEYOND_CACHE_BYTES / 8];
    let buffer_gbps = |d: Duration| BEYOND_CACHE_BYTES as f64 / d.as_secs_f64() / 1e9;
    let mut ours_at = |threads: usize| {
        parallel::matvec(
            level::detect(),
            t,
            &big,
            big_rows,
            cols,
            black_box(x),
            threads,
            &mut y,
        )
        .unwrap();
    };
    let one = best_of_rotated(
        runs,
        &mut [
            &mut || read_pass(&buffer, 1),
            &mut || ours_at(1),
            &mut *candle_run,
        ],
    );
    let two = best_of_rotated(
        runs,
        &mut [&mut || read_pass(&buffer, 2), &mut || ours_at(2)],
    );
    let candle = one[2];
    for (threads, times) in [(1, &one), (2, &two)] {
        let (bw, ours) = (buffer_gbps(times[0]), times[1]);
        println!(
            "  {:<5} {:<28} {:>14} {:<12} {:>7} {:>9.2} {:>9.0}% {:>13.2}   (bw in rotation {:.2} GB/s: {:.0}%)",
            t.name(),
            name,
            format!("{big_rows}x{cols}"),
            "auto",
            threads,
            gbps(ours),
            100.0 * gbps(ours) / bandwidth[threads - 1],
            candle.as_secs_f64() / ours.as_secs_f64(),
            bw,
            100.0 * gbps(ours) / bw
        );
    }
    println!(
        "  {:<5} {:<28} {:>14} {:<12} {:>7} {:>9.2} {:>9.0}% {:>13}   (bw in rotation {:.2} GB/s: {:.0}%)",
        t.name(),
        name,
        format!("{big_rows}x{cols}"),
        "candle",
        1,
        gbps(candle),
        100.0 * gbps(candle) / bandwidth[0],
        "",
        buffer_gbps(one[0]),
        100.0 * gbps(candle) / buffer_gbps(one[0])
    );
}

/// candle's QMatMul forward on the same bytes (copied into candle-aligned blocks), one thread, as
/// a call to time.
fn candle_matvec<T: CandleBlock>(
    t: GgmlType,
    bytes: &[u8],
    rows: usize,
    cols: usize,
    x: &[f32],
) -> Box<dyn FnMut()> {
    let blocks = blocks_from_bytes::<T>(bytes);
    let dtype = candle_dtype(t).unwrap();
    let storage =
        QStorage::from_data(Cow::Borrowed(bytes_of_blocks(&blocks)), &Device::Cpu, dtype).unwrap();
    let qmatmul = QMatMul::from_qtensor(QTensor::new(storage, (rows, cols)).unwrap()).unwrap();
    let input = Tensor::from_slice(x, (1, cols), &Device::Cpu).unwrap();
    Box::new(move || {
        black_box(qmatmul.forward(black_box(&input)).unwrap());
    })
}
