//! The packed one-column product (`quant::packed`: rows interleaved by 16) against the plain
//! matvec, at every x86_64 level this CPU has, and against ggml's AMX buffer type (whose
//! one-column path runs AVX-512 VNNI over rows interleaved the same way).
//!
//! Each case quantizes Gaussian weights, packs them, times `packed_matvec_at` and `matvec_at`
//! (activations quantized inside every call) alternated in rounds, best call of each, and counts
//! the outputs whose bits differ from the plain matvec's (it must be 0). With `--ggml`, also
//! `scripts/ggml-repack-gemm.sh` with `GGML_EXTRA_BUFFER=AMX` on the same shapes (a CPU with AMX
//! and the AMX build of `scripts/build-llama.sh`). With `--ggml-unfused` too, the several-column
//! table also runs ggml's AMX buffer from the build whose fused multiply-adds are a product and a
//! sum (`LLAMA_AMX=unfused scripts/build-llama.sh`): ggml's AMX kernels with the float steps our
//! bits need (for Q8_0 those steps are vec_dot's own; for Q4_0 and Q4_1 as many, in another order).
//!
//! Run: `RUSTFLAGS="-C target-cpu=native" cargo bench -p miniquant-tests --bench packed [-- --ggml]`
//! (a plain build measures each kernel as shipped: compiled for its own level only).

use miniquant::quant::{self, level, packed, Level};
use miniquant::GgmlType;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Shapes (rows × cols): 2048², SmolLM2-135M's, Gemma 3 270M's, and SmolLM2's output head.
const SHAPES: [(usize, usize); 7] = [
    (2048, 2048),
    (576, 576),
    (1536, 576),
    (576, 1536),
    (2048, 640),
    (640, 2048),
    (49152, 576),
];

/// `len` bytes of `buffer` (grown to fit) starting on a cache line, as the std adapter's packed
/// copies do.
fn on_a_line(buffer: &mut Vec<u8>, len: usize) -> &mut [u8] {
    buffer.resize(len + 63, 0);
    let skip = buffer.as_ptr().align_offset(64).min(63);
    &mut buffer[skip..skip + len]
}

/// Calls `f` for 50 ms and keeps its fastest call in `best`.
fn best_call(f: &mut dyn FnMut(), best: &mut Duration) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(50) {
        let t = Instant::now();
        f();
        *best = (*best).min(t.elapsed());
    }
}

/// ggml's best seconds per call with the weights in its AMX buffer, one thread, per shape (`None`
/// where it has no kernel or the harness cannot run); `unfused`: from the build whose fused
/// multiply-adds are a product and a sum.
fn ggml_amx(t: GgmlType, shapes: &[(usize, usize)], n: usize, unfused: bool) -> Vec<Option<f64>> {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/ggml-repack-gemm.sh");
    let name = t.name().to_lowercase();
    let cases: Vec<String> = shapes
        .iter()
        .map(|(r, c)| format!("{name}:{r}x{c}:{n}"))
        .collect();
    let output = std::process::Command::new(script)
        .args(["perf", "1", "3"])
        .args(&cases)
        .env("GGML_EXTRA_BUFFER", "AMX")
        .env("GGML_AMX_UNFUSED", if unfused { "1" } else { "" })
        .output();
    let Ok(output) = output else {
        return vec![None; shapes.len()];
    };
    let text = String::from_utf8_lossy(&output.stdout);
    shapes
        .iter()
        .map(|(r, c)| {
            let head = format!("GGML_BUF {name} {r} {c} {n} 1 amx ");
            text.lines()
                .find_map(|l| l.strip_prefix(&head)?.trim().parse().ok())
        })
        .collect()
}

/// Shapes of the several-column table.
const MATMUL_SHAPES: [(usize, usize); 4] = [(2048, 2048), (1536, 576), (576, 1536), (640, 2048)];

/// Columns of the several-column table.
const COLUMNS: [usize; 5] = [8, 16, 32, 128, 512];

/// Our plain `matmul` against `packed_matmul_at` at the detected level, several columns (the
/// activations quantized inside every call on both sides), with ggml's AMX buffer.
fn matmul_table(with_ggml: bool, with_unfused: bool, gaussian: &mut dyn FnMut() -> f32) {
    let lvl = level::current();
    println!(
        "\none thread, n columns, GFLOP/s = 2 · rows · cols · n / best call, at {lvl}; plain = \
         quant::matvec::matmul, packed = quant::packed::packed_matmul_at; bits = outputs whose \
         bits differ from n × matvec's"
    );
    // The `amx` level's packed matmul (AMX tiles from 16 columns) where the CPU has it.
    let amx = Level::Amx.is_available();
    println!(
        "packed amx = packed_matmul_at at the amx level: {}",
        if amx {
            "run"
        } else {
            "NOT RUN (no AMX, or not granted)"
        }
    );
    println!("| type | rows × cols | n | plain matmul | packed matmul | packed / plain | packed amx | amx / plain | bits | ggml amx | packed / ggml amx | packed amx / ggml amx | ggml amx unfused | packed amx / ggml unfused |");
    println!("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    // `--type NAME` and `--columns N` narrow the table (for profiling one case).
    let arg = |name: &str| {
        let args: Vec<String> = std::env::args().collect();
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let only_type = arg("--type");
    let only_n: Option<usize> = arg("--columns").and_then(|n| n.parse().ok());
    let types = [
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q8_0,
    ];
    for t in types.into_iter().filter(|t| {
        only_type
            .as_ref()
            .is_none_or(|o| o.eq_ignore_ascii_case(t.name()))
    }) {
        for n in COLUMNS
            .into_iter()
            .filter(|&n| only_n.is_none_or(|o| o == n))
        {
            let ggml = if with_ggml {
                ggml_amx(t, &MATMUL_SHAPES, n, false)
            } else {
                vec![None; MATMUL_SHAPES.len()]
            };
            let unfused = if with_unfused {
                ggml_amx(t, &MATMUL_SHAPES, n, true)
            } else {
                vec![None; MATMUL_SHAPES.len()]
            };
            let shapes = MATMUL_SHAPES.iter().zip(ggml.into_iter().zip(unfused));
            for (&(rows, cols), (ggml, unfused)) in shapes {
                let values: Vec<f32> = (0..rows * cols).map(|_| gaussian()).collect();
                let mut w = vec![0u8; quant::bytes_for(t, rows * cols).unwrap()];
                quant::quantize(t, &values, &mut w).unwrap();
                let mut packed_buffer = Vec::new();
                let packed_w = on_a_line(&mut packed_buffer, w.len());
                packed::pack(t, &w, rows, cols, packed_w).unwrap();
                let packed_w = &*packed_w;
                let x: Vec<f32> = (0..cols * n).map(|_| gaussian()).collect();
                // n × matvec: the bits every column must have.
                let mut want = vec![0f32; rows * n];
                let mut scratch = vec![0u8; quant::matvec::matvec_scratch_bytes(t, cols).unwrap()];
                for (xc, yc) in x.chunks(cols).zip(want.chunks_mut(rows)) {
                    quant::matvec::matvec_at(lvl, t, &w, rows, cols, xc, &mut scratch, yc).unwrap();
                }
                let mut plain_scratch =
                    vec![0u8; quant::matvec::matmul_scratch_bytes(t, cols, n).unwrap()];
                let mut packed_scratch =
                    vec![0u8; packed::packed_activation_bytes(t, cols, n).unwrap()];
                let (mut plain_y, mut packed_y) = (vec![0f32; rows * n], vec![0f32; rows * n]);
                let mut amx_y = vec![0f32; rows * n];
                let (mut plain_best, mut packed_best) = (Duration::MAX, Duration::MAX);
                let mut amx_best = Duration::MAX;
                for round in 0..6 {
                    let mut plain = || {
                        quant::matvec::matmul(
                            lvl,
                            t,
                            &w,
                            rows,
                            cols,
                            n,
                            black_box(&x),
                            &mut plain_scratch,
                            &mut plain_y,
                        )
                        .unwrap()
                    };
                    if round == 0 {
                        plain();
                    } else {
                        best_call(&mut plain, &mut plain_best);
                    }
                    let mut packed_call = || {
                        packed::packed_matmul_at(
                            lvl,
                            t,
                            packed_w,
                            rows,
                            cols,
                            n,
                            black_box(&x),
                            &mut packed_scratch,
                            &mut packed_y,
                        )
                        .unwrap()
                    };
                    if round == 0 {
                        packed_call();
                    } else {
                        best_call(&mut packed_call, &mut packed_best);
                    }
                    if !amx {
                        continue;
                    }
                    let mut amx_call = || {
                        packed::packed_matmul_at(
                            Level::Amx,
                            t,
                            packed_w,
                            rows,
                            cols,
                            n,
                            black_box(&x),
                            &mut packed_scratch,
                            &mut amx_y,
                        )
                        .unwrap()
                    };
                    if round == 0 {
                        amx_call();
                    } else {
                        best_call(&mut amx_call, &mut amx_best);
                    }
                }
                let differ = |y: &[f32]| {
                    want.iter()
                        .zip(y)
                        .filter(|(a, b)| a.to_bits() != b.to_bits())
                        .count()
                };
                let flops = 2.0 * (rows * cols * n) as f64;
                let (p, q) = (
                    flops / plain_best.as_secs_f64() / 1e9,
                    flops / packed_best.as_secs_f64() / 1e9,
                );
                let a = flops / amx_best.as_secs_f64() / 1e9;
                let (amx_figures, amx_differ) = if amx {
                    (format!("{a:.1} | {:.2}", a / p), differ(&amx_y))
                } else {
                    ("– | –".to_string(), 0)
                };
                let ggml = match ggml {
                    Some(s) => {
                        let g = flops / s / 1e9;
                        let amx_ratio = if amx {
                            format!("{:.2}", a / g)
                        } else {
                            "–".into()
                        };
                        format!("{g:.1} | {:.2} | {amx_ratio}", q / g)
                    }
                    None => "– | – | –".to_string(),
                };
                let unfused = match unfused {
                    Some(s) if amx => {
                        let g = flops / s / 1e9;
                        format!("{g:.1} | {:.2}", a / g)
                    }
                    Some(s) => format!("{:.1} | –", flops / s / 1e9),
                    None => "– | –".to_string(),
                };
                println!(
                    "| {} | {rows} × {cols} | {n} | {p:.1} | {q:.1} | {:.2} | {amx_figures} | {} of {} | {ggml} | {unfused} |",
                    t.name(),
                    q / p,
                    differ(&plain_y) + differ(&packed_y) + amx_differ,
                    rows * n,
                );
            }
        }
    }
}

/// One timed side: its level, whether it runs packed, its buffers and best call.
struct Side {
    level: Level,
    packed: bool,
    scratch: Vec<u8>,
    y: Vec<f32>,
    best: Duration,
}

fn main() {
    miniquant_std::amx::request();
    let with_ggml = std::env::args().any(|a| a == "--ggml");
    let with_unfused = std::env::args().any(|a| a == "--ggml-unfused");
    let only_matmul = std::env::args().any(|a| a == "--matmul");
    let levels: Vec<Level> = level::available()
        .filter(|&l| l != Level::Scalar && l != Level::Amx)
        .collect();
    let ran: Vec<Level> = levels
        .iter()
        .copied()
        .filter(|&l| packed::has_packed_kernel(l, GgmlType::Q4_0))
        .collect();
    println!(
        "one thread, one column, GFLOP/s = 2 · rows · cols / best call, activations quantized in \
         every call; plain = quant::matvec::matvec_at, packed = quant::packed::packed_matvec_at \
         (rows interleaved by 16); bits = outputs whose bits differ from plain's; levels with a \
         packed kernel: {ran:?}; ggml amx = scripts/ggml-repack-gemm.sh, GGML_EXTRA_BUFFER=AMX"
    );
    println!("| type | rows × cols | level | plain | packed | packed / plain | bits | ggml amx | packed / ggml amx |");
    println!("|---|---|---|--:|--:|--:|--:|--:|--:|");
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut gaussian = move || -> f32 {
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            ((seed >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        let (u, v) = (next(), next());
        ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
    };
    for t in [
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q8_0,
    ]
    .into_iter()
    .filter(|_| !only_matmul)
    {
        let ggml = if with_ggml {
            ggml_amx(t, &SHAPES, 1, false)
        } else {
            vec![None; SHAPES.len()]
        };
        for (&(rows, cols), ggml) in SHAPES.iter().zip(ggml) {
            let values: Vec<f32> = (0..rows * cols).map(|_| gaussian()).collect();
            let mut w = vec![0u8; quant::bytes_for(t, rows * cols).unwrap()];
            quant::quantize(t, &values, &mut w).unwrap();
            let mut packed_buffer = Vec::new();
            let packed_w = on_a_line(&mut packed_buffer, w.len());
            packed::pack(t, &w, rows, cols, packed_w).unwrap();
            let packed_w = &*packed_w;
            let x: Vec<f32> = (0..cols).map(|_| gaussian()).collect();
            let scratch_bytes = quant::matvec::matvec_scratch_bytes(t, cols).unwrap();
            // Only the levels with a packed kernel for `t` (AVX2 has none for Q5_0).
            let mut sides: Vec<Side> = ran
                .iter()
                .filter(|&&level| packed::has_packed_kernel(level, t))
                .flat_map(|&level| [(level, false), (level, true)])
                .map(|(level, packed)| Side {
                    level,
                    packed,
                    scratch: vec![0u8; scratch_bytes],
                    y: vec![f32::NAN; rows],
                    best: Duration::MAX,
                })
                .collect();
            for round in 0..6 {
                for side in &mut sides {
                    let (level, is_packed) = (side.level, side.packed);
                    let (scratch, y) = (&mut side.scratch, &mut side.y);
                    let mut call = || {
                        if is_packed {
                            packed::packed_matvec_at(
                                level,
                                t,
                                packed_w,
                                rows,
                                cols,
                                black_box(&x),
                                scratch,
                                y,
                            )
                        } else {
                            quant::matvec::matvec_at(
                                level,
                                t,
                                &w,
                                rows,
                                cols,
                                black_box(&x),
                                scratch,
                                y,
                            )
                        }
                        .unwrap();
                    };
                    if round == 0 {
                        // A first call outside the timing.
                        call();
                    } else {
                        best_call(&mut call, &mut side.best);
                    }
                }
            }
            let gflops = |d: Duration| 2.0 * (rows * cols) as f64 / d.as_secs_f64() / 1e9;
            let want = &sides[0].y;
            for pair in sides.chunks_exact(2) {
                let (plain, packed_side) = (&pair[0], &pair[1]);
                let differ = |y: &[f32]| {
                    want.iter()
                        .zip(y)
                        .filter(|(a, b)| a.to_bits() != b.to_bits())
                        .count()
                };
                let differ = differ(&plain.y) + differ(&packed_side.y);
                let (p, q) = (gflops(plain.best), gflops(packed_side.best));
                // ggml's AMX buffer runs AVX-512 VNNI at one column: beside that level only.
                let ggml = match ggml.filter(|_| plain.level == level::current()) {
                    Some(s) => {
                        let g = 2.0 * (rows * cols) as f64 / s / 1e9;
                        format!("{g:.1} | {:.2}", q / g)
                    }
                    None => "– | –".to_string(),
                };
                println!(
                    "| {} | {rows} × {cols} | {} | {p:.1} | {q:.1} | {:.2} | {differ} of {rows} | {ggml} |",
                    t.name(),
                    plain.level,
                    q / p,
                );
            }
        }
    }
    matmul_table(with_ggml, with_unfused, &mut gaussian);
}
