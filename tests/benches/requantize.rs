//! Throughput of `miniquant requantize`'s quantizers against candle-core 0.11's
//! `QTensor::quantize`, on the same values: the 2-D weight tensors of the real SmolLM2 file
//! (dequantized once), for Q4_0, Q8_0, Q4_K and Q6_K (for the K-quants, the tensors whose rows are
//! whole 256-value blocks: candle cannot quantize the others). Figures are MB of quantized output
//! per second, best of `MINIQUANT_BENCH_RUNS` (default 3) after a warm-up; candle runs
//! single-threaded (`CANDLE_NUM_THREADS=1`). Ours runs on 1 thread and on all cores (rows split
//! over `std::thread::scope` threads, as the command does). Then the whole command (read, convert,
//! write) on 1 thread and all cores for Q8_0 and Q4_K.
//!
//! llama.cpp's `llama-quantize` is not built here (the cached llama.cpp sources hold only ggml), so
//! two stand-ins from ggml's C code as this crate compiles it: a `ggml ref` column (ggml's
//! `quantize_row_*_ref`, which `llama-quantize` runs when given no importance matrix), and the
//! whole file's conversion the way `llama-quantize --pure` computes it (ggml's dequantization of
//! each source tensor, then its reference quantizer, one thread) without the file I/O.
//!
//! `cpu/candle` and `cpu/ggml` are the same 1-thread ratios from the time the benchmark's thread
//! ran on a CPU (Linux), which a shared, loaded machine does not inflate the way it does wall time.
//!
//! Run: `cargo bench -p miniquant-tests --bench requantize`.

#[path = "../tests/candle_common/mod.rs"]
mod candle_common;

use candle_common::{candle_dtype, single_threaded_candle};
use candle_core::quantized::QTensor;
use candle_core::{Device, Tensor};
use clap::Parser;
use miniquant::{quant, GgmlType};
use miniquant_std::cli::{self, Cli};
use miniquant_std::requantize::{allows_quantization, target_for};
use miniquant_std::GgufFile;
use miniquant_tests::cache::{model_path, SMOLLM2_Q4_1};
use miniquant_tests::ggml;
use std::hint::black_box;
use std::time::{Duration, Instant};

fn best_of(runs: usize, f: impl FnMut()) -> Duration {
    best_of_both(runs, f).0
}

/// Nanoseconds the calling thread has run on a CPU (Linux: /proc/thread-self/schedstat), or
/// `None` elsewhere. On a shared machine the wall time of a run includes the time it waited for
/// a core; this does not.
fn thread_cpu_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().next()?.parse().ok()
}

/// CPU time of the whole process, all threads (Linux: utime + stime of /proc/self/stat, in the
/// kernel's 100 Hz clock ticks), or `None` elsewhere.
fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name (which may hold spaces) start at field 3; utime and stime
    // are fields 14 and 15.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 10))
}

/// The best wall time and the best on-CPU time of the calling thread (for work done on this
/// thread only) over `runs` runs after a warm-up.
fn best_of_both(runs: usize, mut f: impl FnMut()) -> (Duration, Option<Duration>) {
    f();
    let mut wall = Duration::MAX;
    let mut cpu: Option<Duration> = None;
    for _ in 0..runs.max(1) {
        let (start, start_cpu) = (Instant::now(), thread_cpu_ns());
        f();
        wall = wall.min(start.elapsed());
        if let (Some(a), Some(b)) = (start_cpu, thread_cpu_ns()) {
            let d = Duration::from_nanos(b.saturating_sub(a));
            cpu = Some(cpu.map_or(d, |c| c.min(d)));
        }
    }
    (wall, cpu)
}

/// `a / b` as a ratio, or "-" when a CPU time is missing.
fn ratio(a: Option<Duration>, b: Option<Duration>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if !b.is_zero() => format!("{:.2}x", a.as_secs_f64() / b.as_secs_f64()),
        _ => "-".to_owned(),
    }
}

/// A source tensor: rows of `cols` values.
struct Source {
    cols: usize,
    values: Vec<f32>,
}

fn quantize_rows(t: GgmlType, src: &Source, out: &mut [u8], threads: usize) {
    let row_bytes = quant::bytes_for(t, src.cols).unwrap();
    let rows = src.values.len() / src.cols;
    if threads <= 1 {
        // On the calling thread, so its CPU time can be read.
        for (xr, yr) in src
            .values
            .chunks_exact(src.cols)
            .zip(out.chunks_exact_mut(row_bytes))
        {
            quant::quantize(t, xr, yr).unwrap();
        }
        return;
    }
    let per_thread = rows.div_ceil(threads).max(1);
    std::thread::scope(|s| {
        for (x, y) in src
            .values
            .chunks(per_thread * src.cols)
            .zip(out.chunks_mut(per_thread * row_bytes))
        {
            s.spawn(move || {
                for (xr, yr) in x.chunks_exact(src.cols).zip(y.chunks_exact_mut(row_bytes)) {
                    quant::quantize(t, xr, yr).unwrap();
                }
            });
        }
    });
}

fn mb_per_s(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / 1e6 / d.as_secs_f64()
}

fn main() {
    single_threaded_candle();
    let runs: usize = std::env::var("MINIQUANT_BENCH_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let path = model_path(SMOLLM2_Q4_1);
    let file = GgufFile::open(&path).unwrap();
    let sources: Vec<Source> = file
        .index()
        .tensors()
        .iter()
        .filter(|t| allows_quantization(&t.name, t.n_dims as usize))
        .map(|t| {
            let mut values = vec![0f32; t.elements as usize];
            quant::dequantize(t.ggml_type, file.data_of(t).unwrap(), &mut values).unwrap();
            Source {
                cols: t.ne()[0] as usize,
                values,
            }
        })
        .collect();
    println!(
        "requantize quantizers vs candle 0.11 QTensor::quantize, SmolLM2 2-D weights ({cores} cores)"
    );
    println!(
        "{:<6} {:>9} {:>12} {:>12} {:>12} {:>10} {:>10} {:>10} {:>10} {:>11} {:>9}",
        "type",
        "MB out",
        "candle MB/s",
        "ours 1t",
        "ours all",
        "1t/candle",
        "all/candle",
        "ggml ref",
        "1t/ggml",
        "cpu/candle",
        "cpu/ggml"
    );
    for t in [
        GgmlType::Q4_0,
        GgmlType::Q8_0,
        GgmlType::Q4_K,
        GgmlType::Q6_K,
    ] {
        let chosen: Vec<&Source> = sources
            .iter()
            .filter(|s| s.cols % t.block_size() as usize == 0)
            .collect();
        let mut outputs: Vec<Vec<u8>> = chosen
            .iter()
            .map(|s| vec![0u8; quant::bytes_for(t, s.values.len()).unwrap()])
            .collect();
        let bytes: usize = outputs.iter().map(Vec::len).sum();
        let tensors: Vec<Tensor> = chosen
            .iter()
            .map(|s| {
                Tensor::from_slice(&s.values, (s.values.len() / s.cols, s.cols), &Device::Cpu)
                    .unwrap()
            })
            .collect();
        let dtype = candle_dtype(t).unwrap();
        let (candle, candle_cpu) = best_of_both(runs, || {
            for x in &tensors {
                black_box(QTensor::quantize(x, dtype).unwrap());
            }
        });
        let mut ours = |threads: usize| {
            best_of_both(runs, || {
                for (s, out) in chosen.iter().zip(outputs.iter_mut()) {
                    quantize_rows(t, s, out, threads);
                }
                black_box(&outputs);
            })
        };
        let (one, one_cpu) = ours(1);
        let (all, _) = ours(cores);
        let (reference, reference_cpu) = best_of_both(runs, || {
            for s in &chosen {
                black_box(ggml::ggml_quantize_ref(t, &s.values));
            }
        });
        println!(
            "{:<6} {:>9.1} {:>12.1} {:>12.1} {:>12.1} {:>9.2}x {:>9.2}x {:>10.1} {:>9.2}x {:>11} {:>9}",
            t.name(),
            bytes as f64 / 1e6,
            mb_per_s(bytes, candle),
            mb_per_s(bytes, one),
            mb_per_s(bytes, all),
            candle.as_secs_f64() / one.as_secs_f64(),
            candle.as_secs_f64() / all.as_secs_f64(),
            mb_per_s(bytes, reference),
            reference.as_secs_f64() / one.as_secs_f64(),
            ratio(candle_cpu, one_cpu),
            ratio(reference_cpu, one_cpu),
        );
    }

    println!(
        "\nggml's conversion of the whole file (dequantize + quantize_row_*_ref, 1 thread, no I/O)"
    );
    for target in [GgmlType::Q8_0, GgmlType::Q4_K] {
        let (d, cpu) = best_of_both(runs, || {
            for t in file.index().tensors() {
                if !allows_quantization(&t.name, t.n_dims as usize) {
                    continue;
                }
                let to = target_for(target, t.ne()[0]).unwrap();
                if to == t.ggml_type {
                    continue;
                }
                let values = ggml::ggml_dequantize(t.ggml_type, file.data_of(t).unwrap()).unwrap();
                black_box(ggml::ggml_quantize_ref(to, &values));
            }
        });
        let cpu = cpu.map_or("-".to_owned(), |c| format!("{:.2} s", c.as_secs_f64()));
        println!(
            "{:<6} {:.2} s wall, {cpu} on CPU",
            target.name(),
            d.as_secs_f64()
        );
    }

    println!(
        "\nwhole command: miniquant requantize SmolLM2 (Q4_1) --type T, best wall time and best \
         CPU time of the process (all threads, user + system)"
    );
    let out = std::env::temp_dir().join(format!("miniquant-bench-{}.gguf", std::process::id()));
    for ty in ["q8_0", "q4_k"] {
        for threads in [1, cores] {
            let threads_arg = threads.to_string();
            let cli = Cli::try_parse_from([
                "miniquant",
                "requantize",
                path.to_str().unwrap(),
                out.to_str().unwrap(),
                "--type",
                ty,
                "--threads",
                &threads_arg,
            ])
            .unwrap();
            let mut cpu: Option<Duration> = None;
            let d = best_of(runs, || {
                let before = process_cpu();
                let (mut o, mut e) = (Vec::new(), Vec::new());
                assert_eq!(cli::run(&cli, &mut o, &mut e), 0);
                if let (Some(a), Some(b)) = (before, process_cpu()) {
                    cpu = Some(cpu.map_or(b - a, |c| c.min(b - a)));
                }
            });
            let cpu = cpu.map_or("-".to_owned(), |c| format!("{:.2} s", c.as_secs_f64()));
            println!(
                "{ty:<6} {threads} thread(s): {:.2} s wall, {cpu} CPU",
                d.as_secs_f64()
            );
        }
    }
    let _ = std::fs::remove_file(&out);
}
