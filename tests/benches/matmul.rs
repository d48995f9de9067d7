//! Prefill throughput: `Y = W X` for `n` activation columns, in GFLOP/s (2 · rows · cols · n per
//! call), ours against candle-core 0.11 and ggml's CPU backend, one and two threads.
//!
//! Per shape, type and `n`: ours `matmul` at the detected level and at each SIMD level (one
//! thread: `quant::matvec::matmul`; two: `miniquant_std::parallel::matmul`), ours `n` ×
//! `matvec` (one call per column), candle's `QMatMul::forward` with an `(n, cols)` input, and
//! ggml's `MUL_MAT` timed by its own `test-backend-ops perf` (built by `scripts/build-llama.sh`;
//! `MINIQUANT_TEST_BACKEND_OPS` names another binary), the shapes and types passed in a test file.
//! Ours runs on a thread that has joined the pool as its thread 0 (`parallel::join_pool`, as the
//! `miniquant` commands' main thread does), candle on another. Both sides of every figure quantize
//! the activations inside the timed call. Weights are
//! quantized by us from Gaussian rows; ggml fills its own with random values (the speed of these
//! kernels does not depend on the values).
//!
//! Threads: candle reads its thread count once per process, so each thread count runs in a child
//! process of this bench (`CANDLE_NUM_THREADS`); `test-backend-ops` runs its CPU backend on half
//! of `std::thread::hardware_concurrency()`, so for `t` threads it runs with `get_nprocs()`
//! answering `2t` (a shim preloaded with `LD_PRELOAD`, compiled here with `cc`). ggml's weights
//! sit in the CPU backend's default buffer there: no repacked layout (that needs the `CPU_REPACK`
//! buffer type, the "ggml repack" column below) and no AMX buffer. The path each ggml figure took (tinyBLAS, its tiled K-quant
//! kernel or its own mul_mat) is in its row, from the type, `n` and the build's `CMakeCache.txt`;
//! where the tiled kernel ran, ggml runs a second time with it switched off ("ggml untiled"), as
//! that kernel gives a column other bits in a batch than alone (`scripts/ggml-batch-bits.sh`). ggml's lines are
//! matched to the cases by the shapes and type they print, and a case without a timing is an
//! error, so a figure is never attributed to another case.
//!
//! "ggml repack": the same `MUL_MAT` with the weights in the CPU backend's `CPU_REPACK` buffer
//! type, where ggml interleaves 8 rows when the tensor is set and runs its repacked GEMM (GEMV
//! below 4 columns; x86: Q4_0, IQ4_NL, MXFP4, Q4_K from AVX2, Q2_K from AVX-512; other types
//! are not repacked), timed by `scripts/ggml-repack-gemm.c` (built by its `.sh` against the same
//! llama.cpp build), which alternates it in rounds with the default buffer in one process
//! ("repack / default"). `--no-repack` leaves it out, `--ggml-repack-only` leaves out
//! `test-backend-ops` (a shorter run: the harness's own default-buffer figure stays in the
//! ratio); `--repack-bits` also runs ggml on our
//! weight bytes and activations (repack and default buffer) and counts the outputs whose bits
//! differ from our `matvec`.
//!
//! `--ggml-amx` (a CPU with AMX only): also ggml's AMX kernels, "ggml amx": the same harness built
//! against a second ggml build that has them (`LLAMA_AMX=1 scripts/build-llama.sh`), the weights
//! in the CPU backend's `AMX` buffer type (Q4_0, Q4_1, Q8_0, Q4_K, Q5_K, Q6_K, IQ4_XS with rows a
//! multiple of 32; other cases show "–"), beside ours and our `amx` level.
//!
//! Run: `cargo bench -p miniquant-tests --bench matmul` (a short grid: 2048², Q8_0 and Q4_K, n =
//! 1, 32, 512, one and two threads); `-- --full` for every shape, type and n. Narrow either with
//! comma-separated lists: `--type Q4_0,Q6_K` (or bare type names), `--shape 576x1536,2048x2048`,
//! `--n 1,32`, `--threads 2`; `--no-candle` and `--no-ggml` leave those sides out. Build with
//! `RUSTFLAGS="-C target-cpu=native"` for candle's AVX2 kernels (the header says which).
//!
//! Two threads over one is printed per case from the child processes and alternated in one
//! process, beside a bound: one thread over the same work split between plain threads started
//! together with no pool (`time_split_at_once`), what the cores give before any hand-off.

#[path = "../tests/candle_common/mod.rs"]
mod candle_common;

use candle_common::{
    blocks_from_bytes, bytes_of_blocks, candle_dtype, candle_simd_in_build, gaussian_rows,
    with_candle_block, CandleBlock, Rng,
};
use candle_core::quantized::{QMatMul, QStorage, QTensor};
use candle_core::{Device, Module, Tensor};
use miniquant::quant::level::{self, Level};
use miniquant::{quant, GgmlType};
use miniquant_std::parallel;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Set in the child processes: the thread count they measure.
const THREADS_VAR: &str = "MINIQUANT_MATMUL_BENCH_THREADS";

/// Weight shapes (rows × cols): square matrices, then SmolLM2-135M's (hidden 576, FFN 1536) and
/// Gemma 3 270M's (hidden 640, FFN 2048, query 1024).
const FULL_SHAPES: [(usize, usize); 9] = [
    (2048, 2048),
    (4096, 4096),
    (576, 576),
    (1536, 576),
    (576, 1536),
    (1024, 640),
    (640, 1024),
    (2048, 640),
    (640, 2048),
];
const FULL_TYPES: [GgmlType; 6] = [
    GgmlType::Q8_0,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q4_K,
    GgmlType::Q6_K,
];
const FULL_NS: [usize; 5] = [1, 8, 32, 128, 512];
const QUICK_SHAPES: [(usize, usize); 1] = [(2048, 2048)];
const QUICK_TYPES: [GgmlType; 2] = [GgmlType::Q8_0, GgmlType::Q4_K];
const QUICK_NS: [usize; 3] = [1, 32, 512];

/// One measured configuration.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
struct Case {
    t: GgmlType,
    rows: usize,
    cols: usize,
    n: usize,
}

impl Case {
    fn flop(&self) -> f64 {
        2.0 * (self.rows * self.cols * self.n) as f64
    }
}

struct Grid {
    shapes: Vec<(usize, usize)>,
    types: Vec<GgmlType>,
    ns: Vec<usize>,
    threads: Vec<usize>,
    no_candle: bool,
}

/// The values of `--name a,b` (or `--name=a,b`) in `args`, each parsed by `parse`; `None` if the
/// option is absent. An unparsable value stops the bench with a message.
fn option_values<T>(
    args: &[String],
    name: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Option<Vec<T>> {
    let mut found: Option<Vec<T>> = None;
    let mut words = args.iter();
    while let Some(word) = words.next() {
        let list = if word == name {
            words.next().map(String::as_str).unwrap_or("")
        } else if let Some(list) = word.strip_prefix(name).and_then(|w| w.strip_prefix('=')) {
            list
        } else {
            continue;
        };
        for value in list.split(',').filter(|v| !v.is_empty()) {
            let parsed = parse(value)
                .unwrap_or_else(|| panic!("{name}: cannot read {value:?} (see the module docs)"));
            found.get_or_insert_with(Vec::new).push(parsed);
        }
    }
    found
}

impl Grid {
    /// The grid of `args`: `--full` or the short grid, narrowed by `--type`, `--shape`, `--n` and
    /// `--threads` (comma-separated lists; a bare type name also picks a type).
    fn from_args(args: &[String]) -> Grid {
        let full = args.iter().any(|a| a == "--full");
        let mut types = option_values(args, "--type", GgmlType::from_name).unwrap_or_default();
        for t in args.iter().filter_map(|a| GgmlType::from_name(a)) {
            if !types.contains(&t) {
                types.push(t);
            }
        }
        let shapes = option_values(args, "--shape", |v| {
            let (rows, cols) = v.split_once(['x', 'X', '×'])?;
            Some((rows.trim().parse().ok()?, cols.trim().parse().ok()?))
        });
        let ns = option_values(args, "--n", |v| v.parse().ok());
        let threads = option_values(args, "--threads", |v| v.parse().ok().filter(|&t| t > 0));
        let (all_shapes, all_types, all_ns): (&[_], &[_], &[_]) = if full {
            (&FULL_SHAPES, &FULL_TYPES, &FULL_NS)
        } else {
            (&QUICK_SHAPES, &QUICK_TYPES, &QUICK_NS)
        };
        Grid {
            shapes: shapes.unwrap_or_else(|| all_shapes.to_vec()),
            types: if types.is_empty() {
                all_types.to_vec()
            } else {
                types
            },
            ns: ns.unwrap_or_else(|| all_ns.to_vec()),
            threads: threads.unwrap_or_else(|| vec![1, 2]),
            no_candle: args.iter().any(|a| a == "--no-candle"),
        }
    }

    /// Every case of the grid a type can run: the K-quants' 256-value blocks must divide the
    /// columns (they do not divide SmolLM2's 576 or Gemma 3's 640, whose files use other types
    /// there).
    fn cases(&self) -> Vec<Case> {
        let mut cases = Vec::new();
        for &(rows, cols) in &self.shapes {
            for &t in &self.types {
                if cols % t.block_size() as usize != 0 {
                    continue;
                }
                for &n in &self.ns {
                    cases.push(Case { t, rows, cols, n });
                }
            }
        }
        cases
    }
}

/// Best wall time of calls of `f` after one warm-up: as many calls as fit in about 0.3 s (at
/// least 3, at most 10,000: a two-thread call at n = 1 takes tens of µs, and 30 of them were
/// over before the scheduler had moved the pool's worker off the caller's CPU).
fn best_time(mut f: impl FnMut()) -> Duration {
    let start = Instant::now();
    f();
    let first = start.elapsed().max(Duration::from_micros(1));
    let runs = (0.3 / first.as_secs_f64()).clamp(3.0, 10_000.0) as usize;
    (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .min()
        .unwrap_or(first)
}

fn main() {
    // Where the CPU has AMX: the OS's permission, so the `amx` level is timed too.
    miniquant_std::amx::request();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let grid = Grid::from_args(&args);
    if let Some(threads) = std::env::var(THREADS_VAR)
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        measure_ours_and_candle(&grid, threads);
        return;
    }
    let build = GgmlBuild::read(&test_backend_ops());
    print_header(&build);
    let no_ggml = args.iter().any(|a| a == "--no-ggml");
    let no_repack = args.iter().any(|a| a == "--no-repack");
    let repack_only = args.iter().any(|a| a == "--ggml-repack-only");
    let ggml_amx = args.iter().any(|a| a == "--ggml-amx");
    if ggml_amx {
        println!(
            "ggml amx: the same harness against ggml built with its AMX kernels \
             (LLAMA_AMX=1 scripts/build-llama.sh), weights in the AMX buffer type (converted to its \
             tile layout when set; Q4_0, Q4_1, Q8_0, Q4_K, Q5_K, Q6_K, IQ4_XS, rows a multiple of \
             32, other cases \"–\"), alternated with that build's default buffer\n"
        );
    }
    let mut figures: BTreeMap<(Case, usize), BTreeMap<String, f64>> = BTreeMap::new();
    for &threads in &grid.threads {
        // Ours and candle in a child process per thread count (candle's count is per process).
        let exe = std::env::current_exe().expect("bench executable");
        let output = Command::new(exe)
            .args(&args)
            .env(THREADS_VAR, threads.to_string())
            .env("CANDLE_NUM_THREADS", threads.to_string())
            .env("RAYON_NUM_THREADS", threads.to_string())
            .output()
            .expect("run the bench's child process");
        assert!(
            output.status.success(),
            "child for {threads} threads failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            if let Some((case, name, seconds)) = parse_result(line) {
                figures
                    .entry((case, threads))
                    .or_default()
                    .insert(name, case.flop() / seconds / 1e9);
            }
        }
        if no_ggml {
            continue;
        }
        let extras = [(Extra::Repack, !no_repack), (Extra::Amx, ggml_amx)];
        for extra in extras
            .into_iter()
            .filter_map(|(e, asked)| asked.then_some(e))
        {
            let label = extra.label();
            println!(
                "ggml {label} harness, {threads} thread(s): load average {}",
                load_average()
            );
            match ggml_extra_times(&grid.cases(), threads, extra) {
                Ok(times) => {
                    for (case, buffer, seconds) in times {
                        // The AMX build's own default-buffer figure is not the tools' build's.
                        let name = match extra {
                            Extra::Amx if buffer == "ggml default" => {
                                "ggml default (amx build)".to_string()
                            }
                            _ => buffer,
                        };
                        figures
                            .entry((case, threads))
                            .or_default()
                            .insert(name, case.flop() / seconds / 1e9);
                    }
                }
                Err(why) => println!("ggml {label}, {threads} thread(s): not run ({why})"),
            }
        }
        if repack_only {
            continue;
        }
        println!("ggml, {threads} thread(s): load average {}", load_average());
        match ggml_times(&grid.cases(), threads, true) {
            Ok(times) => {
                for (case, seconds) in times {
                    figures
                        .entry((case, threads))
                        .or_default()
                        .insert("ggml".into(), case.flop() / seconds / 1e9);
                }
            }
            Err(why) => println!("ggml, {threads} thread(s): not run ({why})"),
        }
        // ggml's tiled K-quant kernel gives a column other bits than its vec_dot does
        // (scripts/ggml-batch-bits.sh), so those cases also run with it switched off: ggml's
        // fastest path that keeps one order per output.
        let tiled: Vec<Case> = grid
            .cases()
            .into_iter()
            .filter(|c| ggml_tiled(c.t, c.n))
            .collect();
        if !tiled.is_empty() {
            match ggml_times(&tiled, threads, false) {
                Ok(times) => {
                    for (case, seconds) in times {
                        figures
                            .entry((case, threads))
                            .or_default()
                            .insert("ggml untiled".into(), case.flop() / seconds / 1e9);
                    }
                }
                Err(why) => println!("ggml untiled, {threads} thread(s): not run ({why})"),
            }
        }
    }
    if args.iter().any(|a| a == "--repack-bits") {
        repack_bits(&grid, ggml_amx);
    }
    print_table(&figures, &build);
    println!("load average at the end: {}", load_average());
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn print_header(build: &GgmlBuild) {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| {
        cpuinfo
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split(':').nth(1))
            .map(|v| v.trim().to_string())
            .unwrap_or_default()
    };
    let flags = field("flags");
    let wanted = [
        "avx2",
        "avx512f",
        "avx512_vnni",
        "avx512vbmi",
        "avx_vnni",
        "amx_int8",
        "amx_tile",
    ];
    let has: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|f| flags.split_whitespace().any(|g| g == *f))
        .collect();
    println!("CPU: {} ({} logical CPUs)", field("model name"), {
        cpuinfo
            .lines()
            .filter(|l| l.starts_with("processor"))
            .count()
    });
    println!("flags of interest: {}", has.join(" "));
    println!("load average at start: {}", load_average());
    println!(
        "ours: detected level {}; candle 0.11 kernels in this build: {}",
        level::current(),
        candle_simd_in_build()
    );
    println!(
        "ggml: {} perf -o MUL_MAT -b CPU --test-file; build: {}",
        test_backend_ops().display(),
        build.summary
    );
    println!(
        "ggml repack: scripts/ggml-repack-gemm.c, weights in the CPU_REPACK buffer type (its \
         repacked GEMM, GEMV below 4 columns; types it does not repack on this CPU show \"–\"), \
         alternated in {REPACK_ROUNDS} rounds with the default buffer in the same process \
         (\"repack / default\"); ggml's thread count set by the harness"
    );
    println!(
        "ggml (test-backend-ops): weights in the default CPU buffer, so neither its repacked GEMMs \
         (CPU_REPACK buffer type) nor AMX (its own buffer type) run; it quantizes the F32 activations to the \
         vec_dot type inside the op, then takes the path in the \"ggml path\" column: its tiled \
         K-quant kernel (\"tiled\": Q2_K-Q6_K, IQ4_XS, IQ1-IQ3 from n = 8; also run switched off, \
         \"ggml untiled\"), tinyBLAS (llamafile's sgemm: Q8_0, Q4_0, Q5_0, IQ4_NL from n = 2, \
         when built with GGML_LLAMAFILE), else its own mul_mat (\"vec_dot 16×16\": 16 × 16 \
         blocks of outputs, each one SIMD vec_dot; \"vec_dot\" for n = 1)"
    );
    println!("GFLOP/s = 2 · rows · cols · n / best time of a call\n");
}

/// A child's result line: `RESULT <type> <rows> <cols> <n> <name> <seconds>`.
fn parse_result(line: &str) -> Option<(Case, String, f64)> {
    let mut fields = line.strip_prefix("RESULT ")?.split_whitespace();
    let t = GgmlType::from_name(fields.next()?)?;
    let rows = fields.next()?.parse().ok()?;
    let cols = fields.next()?.parse().ok()?;
    let n = fields.next()?.parse().ok()?;
    let name = fields.next()?.to_string();
    let seconds = fields.next()?.parse().ok()?;
    Some((Case { t, rows, cols, n }, name, seconds))
}

/// In a child process: times ours and candle on every case with `threads` threads and prints one
/// `RESULT` line per figure.
fn measure_ours_and_candle(grid: &Grid, threads: usize) {
    // Ours on a thread that joins the pool as its thread 0 (as the `miniquant` commands' main
    // thread does), candle on this one, which stays out of it: candle's rayon work started on a
    // joined thread would run in our pool instead of rayon's global one.
    std::thread::scope(|scope| {
        scope.spawn(|| {
            if threads > 1 {
                assert!(
                    parallel::join_pool(threads),
                    "the bench thread joins the pool"
                );
            }
            for_each_case(grid, |case, w, x| measure_ours(case, w, x, threads));
        });
    });
    if !grid.no_candle {
        for_each_case(grid, |case, w, x| {
            if candle_dtype(case.t).is_some() {
                let Case { t, rows, cols, n } = *case;
                let mut run = with_candle_block!(t, candle_forward(t, w, rows, cols, n, x));
                report(case, "candle", best_time(&mut *run));
            }
        });
    }
}

/// `measure(case, weights, activations)` for every case of `grid`, with the same data on every
/// call of this function.
fn for_each_case(grid: &Grid, mut measure: impl FnMut(&Case, &[u8], &[f32])) {
    let mut rng = Rng::new(0x6e_3d);
    for &(rows, cols) in &grid.shapes {
        let values = gaussian_rows(&mut rng, rows, cols);
        for &t in &grid.types {
            let cases: Vec<Case> = grid
                .cases()
                .into_iter()
                .filter(|c| (c.t, c.rows, c.cols) == (t, rows, cols))
                .collect();
            if cases.is_empty() {
                continue;
            }
            let mut w = vec![0u8; quant::bytes_for(t, rows * cols).unwrap()];
            quant::quantize(t, &values, &mut w).unwrap();
            for case in cases {
                let x = gaussian_rows(&mut rng, case.n, cols);
                measure(&case, &w, &x);
            }
        }
    }
}

/// Prints one figure for the parent process.
fn report(case: &Case, name: &str, time: Duration) {
    let Case { t, rows, cols, n } = *case;
    println!(
        "RESULT {} {rows} {cols} {n} {name} {:e}",
        t.name(),
        time.as_secs_f64()
    );
}

/// Ours on `case`: `matmul` at the detected level and each SIMD level, alternated with one thread
/// and against the no-pool split when `threads > 1`, and n × `matvec`.
fn measure_ours(case: &Case, w: &[u8], x: &[f32], threads: usize) {
    let mut y = vec![0f32; case.n * case.rows];
    report(
        case,
        "matmul",
        time_matmul(level::current(), case, w, x, threads, &mut y),
    );
    if threads > 1 {
        let (one, many) = time_paired(case, w, x, threads, &mut y);
        report(case, "matmul-paired-1", one);
        report(case, "matmul-paired", many);
        report(
            case,
            "split-at-once",
            time_split_at_once(case, w, x, threads),
        );
    }
    for lvl in level::available().filter(|&l| l != Level::Scalar) {
        let time = time_matmul(lvl, case, w, x, threads, &mut y);
        report(case, &format!("matmul@{lvl}"), time);
    }
    report(
        case,
        "n×matvec",
        time_matvecs(level::current(), case, w, x, threads, &mut y),
    );
}

fn time_matmul(
    lvl: Level,
    case: &Case,
    w: &[u8],
    x: &[f32],
    threads: usize,
    y: &mut [f32],
) -> Duration {
    let Case { t, rows, cols, n } = *case;
    let mut scratch = vec![0u8; quant::matvec::matmul_scratch_bytes(t, cols, n).unwrap()];
    best_time(|| {
        if threads == 1 {
            quant::matvec::matmul(lvl, t, w, rows, cols, n, black_box(x), &mut scratch, y)
        } else {
            parallel::matmul(lvl, t, w, rows, cols, n, black_box(x), threads, y)
        }
        .unwrap();
    })
}

/// Ours at one thread and at `threads`, alternated in rounds in this process (the VM's speed
/// drifts between the child processes of different thread counts): the best time of each.
fn time_paired(
    case: &Case,
    w: &[u8],
    x: &[f32],
    threads: usize,
    y: &mut [f32],
) -> (Duration, Duration) {
    let lvl = level::current();
    let mut best = (Duration::MAX, Duration::MAX);
    for _ in 0..4 {
        best.0 = best.0.min(time_matmul(lvl, case, w, x, 1, y));
        best.1 = best.1.min(time_matmul(lvl, case, w, x, threads, y));
    }
    best
}

/// One thread's part of a split: `(thread, its activation buffer, its outputs)`.
type SplitWork<'a> = dyn Fn(usize, &mut Vec<u8>, &mut Vec<f32>) + Sync + 'a;

/// What `threads` threads could do with no pool: the faster of two splits, each thread started by
/// itself (no hand-off) on its part at the same moment as the others, the time of a round that of
/// the slowest thread, the best round kept. Rows: each thread quantizes its part of the activations
/// (as if the parts were shared with no barrier) and runs its rows against all of them (quantized
/// before the rounds), into its own outputs (no copy). Columns: each thread quantizes its columns
/// and runs every row against them. The bound two-thread `matmul` is measured against.
fn time_split_at_once(case: &Case, w: &[u8], x: &[f32], threads: usize) -> Duration {
    let Case { t, rows, cols, n } = *case;
    let lvl = level::current();
    let row_bytes = quant::bytes_for(t, cols).unwrap();
    let block = t.block_size() as usize;
    let values = n * cols;
    let mut all = vec![0u8; quant::matvec::matmul_scratch_bytes(t, cols, n).unwrap()];
    quant::matvec::quantize_activations(lvl, t, values, x, &mut all).unwrap();
    let part = |count: usize, k: usize| count * k / threads..count * (k + 1) / threads;
    // Thread `k`'s work in the rows split and in the columns split.
    let by_rows = |k: usize, own: &mut Vec<u8>, y: &mut Vec<f32>| {
        let blocks = part(values / block, k);
        let mine = &x[blocks.start * block..blocks.end * block];
        own.resize(
            quant::matvec::matvec_scratch_bytes(t, mine.len()).unwrap(),
            0,
        );
        quant::matvec::quantize_activations(lvl, t, mine.len(), mine, own).unwrap();
        let my_rows = part(rows, k);
        y.resize(my_rows.len() * n, 0.0);
        let w = &w[my_rows.start * row_bytes..my_rows.end * row_bytes];
        quant::matvec::matmul_quantized(lvl, t, w, my_rows.len(), cols, n, &all, y).unwrap();
    };
    let by_columns = |k: usize, own: &mut Vec<u8>, y: &mut Vec<f32>| {
        let columns = part(n, k);
        let mine = &x[columns.start * cols..columns.end * cols];
        own.resize(
            quant::matvec::matmul_scratch_bytes(t, cols, columns.len()).unwrap(),
            0,
        );
        let xq = quant::matvec::quantize_activations(lvl, t, mine.len(), mine, own).unwrap();
        y.resize(rows * columns.len(), 0.0);
        quant::matvec::matmul_quantized(lvl, t, w, rows, cols, columns.len(), xq, y).unwrap();
    };
    let at_once = |work: &SplitWork| {
        // The threads meet between rounds by spinning, not sleeping: a vCPU that halts is given
        // back to the host, and a round timed after its wake-up reads slow.
        let arrived = AtomicUsize::new(0);
        let round = AtomicUsize::new(0);
        let go = AtomicBool::new(true);
        let meet = |seen: &mut usize| {
            if arrived.fetch_add(1, Ordering::AcqRel) + 1 == threads {
                arrived.store(0, Ordering::Release);
                round.fetch_add(1, Ordering::AcqRel);
            } else {
                while round.load(Ordering::Acquire) == *seen {
                    std::hint::spin_loop();
                }
            }
            *seen += 1;
        };
        let times: Vec<std::sync::Mutex<Vec<Duration>>> =
            (0..threads).map(|_| Default::default()).collect();
        let start = Instant::now();
        std::thread::scope(|scope| {
            for (k, times) in times.iter().enumerate() {
                let (meet, go) = (&meet, &go);
                scope.spawn(move || {
                    let (mut own, mut y) = (Vec::new(), Vec::new());
                    work(k, &mut own, &mut y);
                    let mut seen = 0;
                    loop {
                        // Thread 0 ends the rounds after about 0.3 s: it clears `go` before it
                        // meets the others, who read it after.
                        if k == 0 && start.elapsed().as_secs_f64() >= 0.3 {
                            go.store(false, Ordering::Release);
                        }
                        meet(&mut seen);
                        if !go.load(Ordering::Acquire) {
                            break;
                        }
                        let t0 = Instant::now();
                        work(k, &mut own, &mut y);
                        times.lock().unwrap().push(t0.elapsed());
                        meet(&mut seen);
                    }
                });
            }
        });
        let times: Vec<Vec<Duration>> =
            times.into_iter().map(|t| t.into_inner().unwrap()).collect();
        let rounds = times.iter().map(Vec::len).min().unwrap_or(0);
        (0..rounds)
            .map(|round| times.iter().map(|t| t[round]).max().unwrap())
            .min()
            .unwrap_or(Duration::MAX)
    };
    at_once(&by_rows).min(at_once(&by_columns))
}

fn time_matvecs(
    lvl: Level,
    case: &Case,
    w: &[u8],
    x: &[f32],
    threads: usize,
    y: &mut [f32],
) -> Duration {
    let Case { t, rows, cols, .. } = *case;
    let mut scratch = vec![0u8; quant::matvec::matvec_scratch_bytes(t, cols).unwrap()];
    best_time(|| {
        for (column, out) in x.chunks_exact(cols).zip(y.chunks_exact_mut(rows)) {
            if threads == 1 {
                quant::matvec::matvec_at(
                    lvl,
                    t,
                    w,
                    rows,
                    cols,
                    black_box(column),
                    &mut scratch,
                    out,
                )
            } else {
                parallel::matvec(lvl, t, w, rows, cols, black_box(column), threads, out)
            }
            .unwrap();
        }
    })
}

/// candle's `QMatMul::forward` of an `(n, cols)` input on the same weight bytes, as a call to time.
fn candle_forward<T: CandleBlock>(
    t: GgmlType,
    bytes: &[u8],
    rows: usize,
    cols: usize,
    n: usize,
    x: &[f32],
) -> Box<dyn FnMut()> {
    let blocks = blocks_from_bytes::<T>(bytes);
    let dtype = candle_dtype(t).unwrap();
    let storage =
        QStorage::from_data(Cow::Borrowed(bytes_of_blocks(&blocks)), &Device::Cpu, dtype).unwrap();
    let qmatmul = QMatMul::from_qtensor(QTensor::new(storage, (rows, cols)).unwrap()).unwrap();
    let input = Tensor::from_slice(x, (n, cols), &Device::Cpu).unwrap();
    Box::new(move || {
        black_box(qmatmul.forward(black_box(&input)).unwrap());
    })
}

/// ggml's type code (`enum ggml_type`) for the types of the grid.
fn ggml_type_code(t: GgmlType) -> u32 {
    t.code()
}

/// `GGML_OP_MUL_MAT` in ggml's `enum ggml_op` of the llama-cpp-python 0.3.36 sdist.
const GGML_OP_MUL_MAT: u32 = 29;

/// The `test-backend-ops` binary: `$MINIQUANT_TEST_BACKEND_OPS`, else the one
/// `scripts/build-llama.sh` builds into the cache.
fn test_backend_ops() -> PathBuf {
    if let Some(path) = std::env::var_os("MINIQUANT_TEST_BACKEND_OPS") {
        return PathBuf::from(path);
    }
    candle_common::model_cache_dir().join("llama-build-0.3.36/bin/test-backend-ops")
}

/// One line of a `test-backend-ops --test-file`: the output tensor (F32, `rows × n`), no op
/// parameters, then its two sources with their shapes and byte strides (weights `cols × rows` of
/// `t`, activations `cols × n` of F32).
fn test_file_line(case: &Case) -> String {
    let Case { t, rows, cols, n } = *case;
    let row_bytes = quant::bytes_for(t, cols).unwrap();
    let block_bytes = t.block_bytes();
    format!(
        "{GGML_OP_MUL_MAT} 0 {rows} {n} 1 1 0 2 {} {cols} {rows} 1 1 {block_bytes} {row_bytes} {} {} \
         0 {cols} {n} 1 1 4 {} {} {} -",
        ggml_type_code(t),
        row_bytes * rows,
        row_bytes * rows,
        4 * cols,
        4 * cols * n,
        4 * cols * n,
    )
}

/// A shared object whose `get_nprocs` answers `$MINIQUANT_NPROCS`, for `test-backend-ops` (which
/// runs on half of `hardware_concurrency()`).
fn nprocs_shim() -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("miniquant-matmul-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let source = dir.join("nprocs.c");
    let object = dir.join("nprocs.so");
    std::fs::write(
        &source,
        "#include <stdlib.h>\nint get_nprocs(void) { const char *n = getenv(\"MINIQUANT_NPROCS\"); \
         return n ? atoi(n) : 1; }\nint get_nprocs_conf(void) { return get_nprocs(); }\n",
    )
    .map_err(|e| e.to_string())?;
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&object)
        .arg(&source)
        .status()
        .map_err(|e| format!("cc: {e}"))?;
    if !status.success() {
        return Err("cc failed to build the get_nprocs shim".into());
    }
    Ok(object)
}

/// ggml's time per call for every case with `threads` threads, from `test-backend-ops perf`;
/// `tiled: false` switches its tiled K-quant kernel off (`GGML_CPU_TILED_MM=0`).
fn ggml_times(cases: &[Case], threads: usize, tiled: bool) -> Result<Vec<(Case, f64)>, String> {
    let binary = test_backend_ops();
    if !binary.exists() {
        return Err(format!(
            "{} missing: run scripts/build-llama.sh",
            binary.display()
        ));
    }
    let shim = nprocs_shim()?;
    let dir = shim.parent().unwrap_or(Path::new("."));
    let file = dir.join(format!("mul_mat_{threads}.txt"));
    let lines: Vec<String> = cases.iter().map(test_file_line).collect();
    std::fs::write(&file, lines.join("\n") + "\n").map_err(|e| e.to_string())?;
    let output = Command::new(&binary)
        .args(["perf", "-o", "MUL_MAT", "-b", "CPU", "--test-file"])
        .arg(&file)
        .env("LD_PRELOAD", &shim)
        .env("MINIQUANT_NPROCS", (2 * threads).to_string())
        .env("GGML_CPU_TILED_MM", if tiled { "1" } else { "0" })
        .output()
        .map_err(|e| format!("{}: {e}", binary.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let measured: BTreeMap<Case, f64> = stdout.lines().filter_map(parse_ggml_line).collect();
    let missing: Vec<String> = cases
        .iter()
        .filter(|c| !measured.contains_key(c))
        .map(|c| format!("{} {}x{} n={}", c.t.name(), c.rows, c.cols, c.n))
        .collect();
    if !output.status.success() || !missing.is_empty() {
        return Err(format!(
            "{} exited with {}, no timing for {}; output:\n{stdout}{}",
            binary.display(),
            output.status,
            missing.join(", "),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let _ = std::fs::remove_dir_all(dir);
    Ok(cases.iter().map(|c| (*c, measured[c] / 1e6)).collect())
}

/// The buffer type the harness puts ggml's weights in besides the default one.
#[derive(Clone, Copy, PartialEq)]
enum Extra {
    /// `CPU_REPACK`: the repacked GEMM/GEMV, in the tools' build.
    Repack,
    /// `AMX`: ggml's AMX kernels, in a build of ggml's libraries with them.
    Amx,
    /// `AMX` from the build whose fused multiply-adds are a product and a sum
    /// (`LLAMA_AMX=unfused scripts/build-llama.sh`).
    AmxUnfused,
}

impl Extra {
    /// The word the bench's lines and columns use for it.
    fn label(self) -> &'static str {
        match self {
            Extra::Repack => "repack",
            Extra::Amx => "amx",
            Extra::AmxUnfused => "amx unfused",
        }
    }

    /// The harness's `GGML_EXTRA_BUFFER` and the build it is linked against.
    fn buffer_and_build(self) -> (&'static str, &'static str) {
        match self {
            Extra::Repack => ("CPU_REPACK", "llama-build-0.3.36/bin/test-backend-ops"),
            Extra::Amx => ("AMX", "llama-build-amx-0.3.36/bin/libggml-cpu.so"),
            Extra::AmxUnfused => ("AMX", "llama-build-amx-unfused-0.3.36/bin/libggml-cpu.so"),
        }
    }

    /// The harness's `GGML_AMX_UNFUSED` (which AMX build it runs against).
    fn unfused(self) -> &'static str {
        if self == Extra::AmxUnfused {
            "1"
        } else {
            ""
        }
    }
}

/// `scripts/ggml-repack-gemm.sh --build`: the harness that runs ggml's `MUL_MAT` with the weights
/// in the CPU backend's `CPU_REPACK` buffer type (its repacked GEMM/GEMV), or its `AMX` one, and in
/// the default buffer, built against the same llama.cpp build as `test-backend-ops` (AMX: the build
/// with ggml's AMX kernels).
fn ggml_extra_harness(extra: Extra) -> Result<PathBuf, String> {
    // The script would build llama.cpp first if it were missing (scripts/build-llama.sh): the
    // bench only uses a build that is there.
    let (buffer, build) = extra.buffer_and_build();
    let built = candle_common::model_cache_dir().join(build);
    if !built.exists() {
        let how = match extra {
            Extra::Repack => "scripts/build-llama.sh",
            Extra::Amx => "LLAMA_AMX=1 scripts/build-llama.sh (a CPU with AMX only)",
            Extra::AmxUnfused => "LLAMA_AMX=unfused scripts/build-llama.sh (a CPU with AMX only)",
        };
        return Err(format!("{} missing: run {how}", built.display()));
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/ggml-repack-gemm.sh");
    let output = Command::new(&script)
        .arg("--build")
        .env("GGML_EXTRA_BUFFER", buffer)
        .env("GGML_AMX_UNFUSED", extra.unfused())
        .output()
        .map_err(|e| format!("{}: {e}", script.display()))?;
    if !output.status.success() {
        return Err(format!(
            "{} --build failed: {}",
            script.display(),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let path = String::from_utf8_lossy(&output.stdout).trim().to_string();
    Ok(PathBuf::from(path))
}

/// Rounds in which the harness alternates ggml's default and repack buffers per case.
const REPACK_ROUNDS: usize = 3;

/// ggml's best time per call with the weights in the `CPU_REPACK` buffer ("ggml repack") or the
/// `AMX` one ("ggml amx") and, in the same process alternated with it, in the default buffer
/// ("ggml default"), `threads` threads (the harness sets ggml's thread count itself). Cases the
/// extra buffer's kernels do not take on this CPU (repack: Q8_0 on x86, the K-quants but Q4_K and
/// Q2_K, ...) give only the default figure.
fn ggml_extra_times(
    cases: &[Case],
    threads: usize,
    extra: Extra,
) -> Result<Vec<(Case, String, f64)>, String> {
    let harness = ggml_extra_harness(extra)?;
    let specs: Vec<String> = cases
        .iter()
        .map(|c| format!("{}:{}x{}:{}", c.t.name(), c.rows, c.cols, c.n))
        .collect();
    let output = Command::new(&harness)
        .args(["perf", &threads.to_string(), &REPACK_ROUNDS.to_string()])
        .args(&specs)
        .env("GGML_EXTRA_BUFFER", extra.buffer_and_build().0)
        .env("GGML_AMX_UNFUSED", extra.unfused())
        .output()
        .map_err(|e| format!("{}: {e}", harness.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "{} exited with {}: {stdout}{}",
            harness.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let mut times = Vec::new();
    for line in stdout.lines() {
        let Some(rest) = line.strip_prefix("GGML_BUF ") else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        let [t, rows, cols, n, _threads, buffer, seconds] = f[..] else {
            continue;
        };
        let (Some(t), Ok(rows), Ok(cols), Ok(n)) = (
            GgmlType::from_name(t),
            rows.parse(),
            cols.parse(),
            n.parse(),
        ) else {
            continue;
        };
        if let Ok(seconds) = seconds.parse::<f64>() {
            times.push((Case { t, rows, cols, n }, format!("ggml {buffer}"), seconds));
        }
    }
    Ok(times)
}

/// ggml's repacked kernel for a type on x86 with AVX2 (Q2_K: AVX-512), from
/// `ggml_repack_get_optimal_repack_type` and `forward_mul_mat_one_chunk` in the 0.3.36 sdist: GEMM
/// over groups of 4 columns, GEMV for n < 4 and the n mod 4 last columns.
fn ggml_repack_kernel(t: GgmlType, n: usize) -> &'static str {
    let gemm = n >= 4;
    match t {
        GgmlType::Q4_0 if gemm => "gemm q4_0 8x8",
        GgmlType::Q4_0 => "gemv q4_0 8x8",
        GgmlType::IQ4_NL if gemm => "gemm iq4_nl 8x8",
        GgmlType::IQ4_NL => "gemv iq4_nl 8x8",
        GgmlType::MXFP4 if gemm => "gemm mxfp4 8x8",
        GgmlType::MXFP4 => "gemv mxfp4 8x8",
        GgmlType::Q4_K if gemm => "gemm q4_K 8x8",
        GgmlType::Q4_K => "gemv q4_K 8x8",
        GgmlType::Q2_K if gemm => "gemm q2_K 8x8",
        GgmlType::Q2_K => "gemv q2_K 8x8",
        _ => "?",
    }
}

/// `--repack-bits`: for every case of the grid (one thread and each thread count asked for), ggml's
/// `MUL_MAT` of our weight bytes and activations with the weights in the repack buffer and in the
/// default buffer (with `--ggml-amx`, also in the AMX buffer), against our `matvec` of each column:
/// how many outputs have other bits.
fn repack_bits(grid: &Grid, amx: bool) {
    let mut buffers = Vec::new();
    match ggml_extra_harness(Extra::Repack) {
        Ok(h) => {
            buffers.push(("repack", "repack", h.clone(), Extra::Repack));
            buffers.push(("default", "default", h, Extra::Repack));
        }
        Err(why) => println!("repack bits: not run ({why})"),
    }
    if amx {
        for extra in [Extra::Amx, Extra::AmxUnfused] {
            let label = extra.label();
            match ggml_extra_harness(extra) {
                Ok(h) => buffers.push((label, "amx", h, extra)),
                Err(why) => println!("{label} bits: not run ({why})"),
            }
        }
    }
    if buffers.is_empty() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("miniquant-repack-bits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch directory");
    println!(
        "\nggml's outputs against ours (`matvec` per column at {}; matmul has the same bits), \
         same weight bytes and activations:",
        level::current()
    );
    println!("| type | rows × cols | n | threads | buffer | outputs with other bits | largest relative difference |");
    println!("|---|---|--:|--:|---|--:|--:|");
    let mut rng = Rng::new(0x5eed_b175);
    for case in grid.cases() {
        let Case { t, rows, cols, n } = case;
        let values = gaussian_rows(&mut rng, rows, cols);
        let mut w = vec![0u8; quant::bytes_for(t, rows * cols).unwrap()];
        quant::quantize(t, &values, &mut w).unwrap();
        let x = gaussian_rows(&mut rng, n, cols);
        let mut ours = vec![0f32; rows * n];
        let mut scratch = vec![0u8; quant::matvec::matvec_scratch_bytes(t, cols).unwrap()];
        for (column, out) in x.chunks_exact(cols).zip(ours.chunks_exact_mut(rows)) {
            quant::matvec::matvec_at(
                level::current(),
                t,
                &w,
                rows,
                cols,
                column,
                &mut scratch,
                out,
            )
            .unwrap();
        }
        let (wf, xf, yf) = (dir.join("w.bin"), dir.join("x.bin"), dir.join("y.bin"));
        std::fs::write(&wf, &w).unwrap();
        std::fs::write(
            &xf,
            x.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>(),
        )
        .unwrap();
        for &threads in &grid.threads {
            for (label, buffer, harness, extra) in &buffers {
                let _ = std::fs::remove_file(&yf);
                let output = Command::new(harness)
                    .arg("run")
                    .arg(t.name())
                    .args([rows, cols, n, threads].map(|v| v.to_string()))
                    .arg(buffer)
                    .args([&wf, &xf, &yf])
                    .env("GGML_EXTRA_BUFFER", extra.buffer_and_build().0)
                    .env("GGML_AMX_UNFUSED", extra.unfused())
                    .output()
                    .expect("run the repack harness");
                let said = String::from_utf8_lossy(&output.stdout);
                let verdict = if !output.status.success() {
                    format!("failed: {}", String::from_utf8_lossy(&output.stderr).trim())
                } else if said.trim() == "none" {
                    format!("no {buffer} kernel for this case on this CPU | –")
                } else {
                    let y: Vec<f32> = std::fs::read(&yf)
                        .unwrap()
                        .chunks_exact(4)
                        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                        .collect();
                    let mut differ = 0;
                    let mut worst = 0f64;
                    for (a, b) in y.iter().zip(&ours) {
                        if a.to_bits() != b.to_bits() {
                            differ += 1;
                            let rel = (f64::from(*a) - f64::from(*b)).abs()
                                / f64::from(b.abs()).max(1e-30);
                            worst = worst.max(rel);
                        }
                    }
                    format!("{differ} of {} | {worst:.3e}", y.len())
                };
                println!(
                    "| {} | {rows} × {cols} | {n} | {threads} | {label} | {verdict} |",
                    t.name()
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// A `test-backend-ops perf` line of a `MUL_MAT` case: the case it timed, read from its own
/// shapes (`sources=<type>[cols,rows,1,1]...,f32[cols,n,1,1]`), and its microseconds per run.
/// Lines of other ops, unsupported cases and anything else give `None`.
fn parse_ggml_line(line: &str) -> Option<(Case, f64)> {
    let line = line.trim_start();
    let rest = line.strip_prefix("MUL_MAT(")?;
    let sources = rest.split_once("sources=")?.1;
    let (type_name, after) = sources.split_once('[')?;
    let (weight_dims, after) = after.split_once(']')?;
    let (_, activation) = after.split_once("f32[")?;
    let (activation_dims, after) = activation.split_once(']')?;
    let dims =
        |d: &str| -> Option<Vec<usize>> { d.split(',').map(|v| v.trim().parse().ok()).collect() };
    let (w, a) = (dims(weight_dims)?, dims(activation_dims)?);
    let (cols, rows, n) = (*w.first()?, *w.get(1)?, *a.get(1)?);
    if a.first() != Some(&cols) {
        return None;
    }
    let t = GgmlType::from_name(type_name.trim())?;
    let (before_unit, _) = after.split_once(" us/run")?;
    let us: f64 = before_unit.rsplit(' ').next()?.trim().parse().ok()?;
    (us > 0.0).then_some((Case { t, rows, cols, n }, us))
}

/// Whether ggml's tiled K-quant matmul (`ggml-cpu/tiled/`, on unless `GGML_CPU_TILED_MM=0`;
/// `ggml_tiled_supported` and `ggml_tiled_min_batch` in the 0.3.36 sdist) takes a case: its
/// types, from 8 activation columns, on x86 with AVX or later.
fn ggml_tiled(t: GgmlType, n: usize) -> bool {
    use GgmlType::*;
    let tiled_type = matches!(
        t,
        Q2_K | Q3_K
            | Q4_K
            | Q5_K
            | Q6_K
            | IQ4_XS
            | IQ2_XXS
            | IQ2_XS
            | IQ2_S
            | IQ3_XXS
            | IQ3_S
            | IQ1_S
            | IQ1_M
    );
    tiled_type && n >= 8
}

/// The path ggml's CPU backend takes for a case, from its source (`ggml_compute_forward_mul_mat`,
/// `ggml_compute_forward_mul_mat_tiled` and `llamafile_sgemm` in the 0.3.36 sdist) and the
/// build: its tiled kernel takes the K-quants (and IQ4_XS, IQ1-IQ3) from n = 8 (it sums each
/// super-block in integers before one float step, so a column's bits depend on the batch: the
/// "untiled" columns run it switched off); with `GGML_LLAMAFILE` on, llamafile's tinyBLAS takes
/// Q8_0, Q4_0, Q5_0 and IQ4_NL (against Q8_0 activations) from n = 2 on x86; everything else is
/// ggml's own mul_mat, outputs in 16 × 16 blocks each one SIMD vec_dot (for n = 1 a row of
/// vec_dots). Weights in the default CPU buffer: neither the repacked GEMMs (`CPU_REPACK` buffer
/// type) nor AMX (its own buffer type) can run.
fn ggml_path(t: GgmlType, n: usize, build: &GgmlBuild) -> &'static str {
    let tinyblas_type = matches!(
        t,
        GgmlType::Q8_0 | GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::IQ4_NL
    );
    if ggml_tiled(t, n) {
        "tiled"
    } else if build.llamafile && tinyblas_type && n >= 2 {
        "tinyBLAS"
    } else if n == 1 {
        "vec_dot"
    } else {
        "vec_dot 16×16"
    }
}

/// What the `test-backend-ops` build was configured with (its `CMakeCache.txt`, two directories
/// up from the binary).
struct GgmlBuild {
    llamafile: bool,
    summary: String,
}

impl GgmlBuild {
    fn read(binary: &Path) -> GgmlBuild {
        let cache = binary
            .parent()
            .and_then(Path::parent)
            .map(|d| d.join("CMakeCache.txt"))
            .and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default();
        let option = |name: &str| {
            cache.lines().find_map(|l| {
                let (key, value) = l.split_once('=')?;
                (key.split(':').next()? == name).then(|| value.trim().to_string())
            })
        };
        let names = [
            "GGML_NATIVE",
            "GGML_LLAMAFILE",
            "GGML_OPENMP",
            "GGML_CPU_REPACK",
            "GGML_AMX_TILE",
            "GGML_AMX_INT8",
        ];
        let summary = if cache.is_empty() {
            "build configuration unknown (no CMakeCache.txt beside the binary)".to_string()
        } else {
            names
                .iter()
                .map(|n| format!("{n}={}", option(n).unwrap_or_else(|| "?".into())))
                .collect::<Vec<_>>()
                .join(" ")
        };
        GgmlBuild {
            // LLAMAFILE defaults to on in ggml's CMake.
            llamafile: option("GGML_LLAMAFILE").is_none_or(|v| v != "OFF"),
            summary,
        }
    }
}

fn print_table(figures: &BTreeMap<(Case, usize), BTreeMap<String, f64>>, build: &GgmlBuild) {
    let level_names: Vec<String> = level::available()
        .filter(|&l| l != Level::Scalar)
        .map(|l| format!("matmul@{l}"))
        .collect();
    // ggml's AMX columns, when `--ggml-amx` ran (a CPU with AMX).
    let amx = figures
        .values()
        .any(|f| f.contains_key("ggml default (amx build)"));
    let amx_head = if amx {
        " ggml amx | ours / ggml amx | @amx / ggml amx |"
    } else {
        ""
    };
    print!("| type | rows × cols | n | threads | ours matmul |");
    for name in &level_names {
        print!(" {} |", name.trim_start_matches("matmul"));
    }
    println!(
        " ours n × matvec | candle | ggml | ggml path | ours / ggml | ggml untiled | ours / ggml untiled | ggml repack | repack kernel | ggml default (harness) | repack / default | ours / ggml repack | ours / candle | matmul / n×matvec |{amx_head}"
    );
    print!("|---|---|--:|--:|--:|");
    for _ in &level_names {
        print!("--:|");
    }
    println!(
        "--:|--:|--:|---|--:|--:|--:|--:|---|--:|--:|--:|--:|--:|{}",
        if amx { "--:|--:|--:|" } else { "" }
    );
    let mut by_row: Vec<_> = figures.iter().collect();
    by_row.sort_by_key(|((case, threads), _)| {
        (case.rows, case.cols, case.t.code(), *threads, case.n)
    });
    for ((case, threads), f) in by_row {
        let get = |name: &str| f.get(name).copied();
        let show = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.1}"));
        let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => format!("{:.2}", a / b),
            _ => "–".into(),
        };
        let ours = get("matmul");
        print!(
            "| {} | {} × {} | {} | {threads} | {} |",
            case.t.name(),
            case.rows,
            case.cols,
            case.n,
            show(ours)
        );
        for name in &level_names {
            print!(" {} |", show(get(name)));
        }
        let amx_cells = if amx {
            format!(
                " {} | {} | {} |",
                show(get("ggml amx")),
                ratio(ours, get("ggml amx")),
                ratio(get("matmul@amx"), get("ggml amx")),
            )
        } else {
            String::new()
        };
        println!(
            " {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |{amx_cells}",
            show(get("n×matvec")),
            show(get("candle")),
            show(get("ggml")),
            get("ggml").map_or("–", |_| ggml_path(case.t, case.n, build)),
            ratio(ours, get("ggml")),
            show(get("ggml untiled")),
            ratio(ours, get("ggml untiled")),
            show(get("ggml repack")),
            get("ggml repack").map_or("–", |_| ggml_repack_kernel(case.t, case.n)),
            show(get("ggml default")),
            ratio(get("ggml repack"), get("ggml default")),
            ratio(ours, get("ggml repack")),
            ratio(ours, get("candle")),
            ratio(ours, get("n×matvec")),
        );
    }
    // Thread scaling of ours: two threads over one, per case.
    println!(
        "\nours, two threads / one thread (matmul): from the two child processes, and alternated \
         in one process (best of four rounds each); the bound: one thread (alternated) over the \
         two threads' split with no pool (each thread's half of the rows, or of the columns, \
         started at once; see `time_split_at_once`)"
    );
    for ((case, threads), f) in figures {
        if *threads != 2 {
            continue;
        }
        let one = figures.get(&(*case, 1)).and_then(|f| f.get("matmul"));
        let separate = match (f.get("matmul"), one) {
            (Some(two), Some(one)) => format!("{:.2}x", two / one),
            _ => "–".into(),
        };
        let paired = match (f.get("matmul-paired"), f.get("matmul-paired-1")) {
            (Some(two), Some(one)) => format!("{:.2}x", two / one),
            _ => "–".into(),
        };
        let bound = match (f.get("split-at-once"), f.get("matmul-paired-1")) {
            (Some(split), Some(one)) => format!("{:.2}x", split / one),
            _ => "–".into(),
        };
        println!(
            "  {} {} × {} n = {}: {separate} (separate), {paired} (alternated), bound {bound}",
            case.t.name(),
            case.rows,
            case.cols,
            case.n,
        );
    }
}
