//! Why two threads do or do not double a one-column matvec: per matrix, one thread against two
//! threads on disjoint halves of the same rows, for a plain read of the bytes and for the matvec,
//! with the two threads handed their halves by a spinning worker (no pool, no wake-up: the upper
//! bound of what two threads can gain), then `miniquant_std::parallel::matvec` itself, called
//! from the pool's thread 0 (`parallel::join_pool`, as the `miniquant` commands do).
//!
//! Every ratio is of figures timed in alternation in this process (round after round, best of
//! each), so both sides see the same phases of a shared machine; the pool's is also given for the
//! median calls, which the best calls hide when the two threads share one CPU for a while. "cached" runs the same matrix
//! call after call, as the matmul bench does; "beyond cache" cycles through copies of it that
//! add up to [`BEYOND_CACHE_BYTES`], so every call reads its weights from memory, as a model's
//! decode does.
//!
//! Run: `cargo bench -p miniquant-tests --bench threads` (`-- Q4_K 2048x2048` etc. picks types
//! and shapes).

use miniquant::quant::{self, level};
use miniquant::GgmlType;
use miniquant_std::parallel;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Total bytes of the copies a "beyond cache" case cycles through: above this VM's share of L3.
const BEYOND_CACHE_BYTES: usize = 768 << 20;

/// Alternation rounds per figure.
const ROUNDS: usize = 7;

/// Shapes (rows × cols): the square ones of the matmul bench, SmolLM2-135M's and Gemma 3 270M's.
const SHAPES: [(usize, usize); 7] = [
    (2048, 2048),
    (4096, 4096),
    (576, 576),
    (1536, 576),
    (576, 1536),
    (2048, 640),
    (640, 2048),
];

/// What the spinning worker runs on its half.
#[derive(Clone, Copy)]
enum Job {
    Nothing,
    Read,
    Matvec,
}

/// One matrix (or the copy of it this call reads) and its quantized activations.
#[derive(Clone, Copy)]
struct Operands<'a> {
    t: GgmlType,
    w: &'a [u8],
    rows: usize,
    cols: usize,
    xq: &'a [u8],
}

/// A worker thread that spins on `epoch`, runs `job` on the second half of `operands`, and
/// publishes the epoch it finished in `done`.
struct Spinner<'a> {
    epoch: AtomicUsize,
    done: AtomicUsize,
    stop: AtomicBool,
    work: Mutex<(Job, Option<Operands<'a>>)>,
    thread: std::sync::OnceLock<std::thread::Thread>,
}

fn read(bytes: &[u8]) -> u64 {
    let mut acc = [0u64; 8];
    for chunk in bytes.chunks_exact(64) {
        for (i, a) in acc.iter_mut().enumerate() {
            let word: [u8; 8] = chunk[i * 8..i * 8 + 8].try_into().unwrap();
            *a = a.wrapping_add(u64::from_le_bytes(word));
        }
    }
    acc.iter().fold(0, |a, &b| a ^ b)
}

/// Rows `range` of `op`: a read of their bytes, or their matvec into `y`.
fn run(job: Job, op: &Operands, range: std::ops::Range<usize>, y: &mut [f32]) {
    let row_bytes = op.w.len() / op.rows.max(1);
    let w = &op.w[range.start * row_bytes..range.end * row_bytes];
    match job {
        Job::Nothing => {}
        Job::Read => {
            black_box(read(black_box(w)));
        }
        Job::Matvec => quant::matvec::matvec_quantized(
            level::current(),
            op.t,
            w,
            range.len(),
            op.cols,
            op.xq,
            &mut y[..range.len()],
        )
        .unwrap(),
    }
}

impl<'a> Spinner<'a> {
    fn worker(&self) {
        let mut y = Vec::new();
        let mut seen = 0;
        let _ = self.thread.set(std::thread::current());
        loop {
            let idle = Instant::now();
            let epoch = loop {
                if self.stop.load(Ordering::Acquire) {
                    return;
                }
                let e = self.epoch.load(Ordering::Acquire);
                if e != seen {
                    break e;
                }
                // Spin for a millisecond after a job, then park: the other figures, timed in
                // alternation, then have the second core to themselves.
                if idle.elapsed() < Duration::from_millis(1) {
                    std::hint::spin_loop();
                } else {
                    std::thread::park_timeout(Duration::from_millis(1));
                }
            };
            seen = epoch;
            let work = self.work.lock().unwrap();
            if let (job, Some(op)) = &*work {
                let half = op.rows / 2;
                y.resize(op.rows - half, 0.0);
                run(*job, op, half..op.rows, &mut y);
            }
            drop(work);
            self.done.store(epoch, Ordering::Release);
        }
    }

    /// Both halves of `op`: the second on the worker, the first here; returns when both ended.
    fn both_halves(&self, job: Job, op: Operands<'a>, y: &mut [f32]) {
        let half = op.rows / 2;
        *self.work.lock().unwrap() = (job, Some(op));
        let epoch = self.epoch.fetch_add(1, Ordering::AcqRel) + 1;
        if let Some(thread) = self.thread.get() {
            thread.unpark();
        }
        run(job, &op, 0..half, y);
        while self.done.load(Ordering::Acquire) != epoch {
            std::hint::spin_loop();
        }
    }
}

/// The best and the median call of each `f`, in `ROUNDS` rounds of `k` calls, the functions
/// alternated per round. The median shows what the best hides: calls that lose their second core
/// for a while (docs/kernel-experiments.md, "two threads left on one CPU").
fn alternate_calls<const N: usize>(
    k: usize,
    fs: &mut [&mut dyn FnMut(usize); N],
) -> [(Duration, Duration); N] {
    let mut times: [Vec<Duration>; N] = std::array::from_fn(|_| Vec::with_capacity(ROUNDS * k));
    let mut call = 0;
    for _ in 0..ROUNDS {
        for (f, times) in fs.iter_mut().zip(&mut times) {
            for _ in 0..k {
                let start = Instant::now();
                f(call);
                times.push(start.elapsed());
                call += 1;
            }
        }
    }
    times.map(|mut times| {
        times.sort_unstable();
        (times[0], times[times.len() / 2])
    })
}

/// Best time of `f` in each of `ROUNDS` rounds of `k` calls, the functions alternated per round.
fn alternate<const N: usize>(k: usize, fs: &mut [&mut dyn FnMut(usize); N]) -> [Duration; N] {
    alternate_calls(k, fs).map(|(best, _)| best)
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let types: Vec<GgmlType> = [
        GgmlType::Q8_0,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q4_K,
        GgmlType::Q6_K,
    ]
    .into_iter()
    .filter(|t| {
        !args.iter().any(|a| GgmlType::from_name(a).is_some())
            || args.iter().any(|a| a.eq_ignore_ascii_case(t.name()))
    })
    .collect();
    println!("load average at start: {}", load());
    assert!(parallel::join_pool(2), "the bench's thread joins the pool");
    println!(
        "GB/s of weights; 1T one thread, 2T two threads on disjoint halves (spinning worker), \
         pool = parallel::matvec with 2 threads; ratios over 1T of the same kind (the kernel on \
         activations quantized beforehand), and pool 2T / 1T over parallel::matvec with 1 thread \
         (both quantizing the activations in the call), of the best calls and of the median calls"
    );
    // The round trip of an empty job: the hand-off cost with a worker that never sleeps.
    let empty = Operands {
        t: GgmlType::Q8_0,
        w: &[],
        rows: 0,
        cols: 0,
        xq: &[],
    };
    let [handoff] = with_spinner(|spinner| {
        alternate(
            2000,
            &mut [&mut |_| spinner.both_halves(Job::Nothing, empty, &mut [])],
        )
    });
    println!(
        "spinning worker, empty job round trip: {:.2} µs",
        handoff.as_secs_f64() * 1e6
    );
    // The same through the pool: rayon's scope, the shares, the lingering worker.
    let [pool_call] = alternate(
        2000,
        &mut [&mut |_| parallel::for_each_piece(2, 2, |_| Ok(())).unwrap()],
    );
    println!(
        "pool, empty two-thread call (parallel::for_each_piece): {:.2} µs",
        pool_call.as_secs_f64() * 1e6
    );
    println!(
        "| type | rows × cols | MB | where | read 1T | read 2T / 1T | matvec 1T | matvec 2T / 1T | pool / 1T | pool 2T / 1T | pool 2T / 1T, median calls | load |"
    );
    println!("|---|---|--:|---|--:|--:|--:|--:|--:|--:|--:|---|");
    for t in &types {
        // (The K-quants' 256-value blocks do not divide SmolLM2's 576 columns.)
        let shapes = SHAPES
            .iter()
            .filter(|(_, cols)| cols % t.block_size() as usize == 0)
            .filter(|(rows, cols)| {
                let name = format!("{rows}x{cols}");
                !args.iter().any(|a| {
                    a.contains('x') && a.chars().next().is_some_and(|c| c.is_ascii_digit())
                }) || args.contains(&name)
            });
        for &(rows, cols) in shapes {
            measure(*t, rows, cols);
        }
    }
}

/// `f` with a spinning worker running beside it.
fn with_spinner<'a, R>(f: impl FnOnce(&Spinner<'a>) -> R) -> R {
    let spinner = Spinner {
        epoch: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
        work: Mutex::new((Job::Nothing, None)),
        thread: std::sync::OnceLock::new(),
    };
    std::thread::scope(|scope| {
        scope.spawn(|| spinner.worker());
        let out = f(&spinner);
        spinner.stop.store(true, Ordering::Release);
        out
    })
}

fn measure(t: GgmlType, rows: usize, cols: usize) {
    let values: Vec<f32> = (0..rows * cols)
        .map(|i| (i as f32 * 0.618).sin() * 3.0)
        .collect();
    let mut w = vec![0u8; quant::bytes_for(t, rows * cols).unwrap()];
    quant::quantize(t, &values, &mut w).unwrap();
    drop(values);
    let x: Vec<f32> = (0..cols).map(|i| (i as f32 * 0.37).cos()).collect();
    let mut scratch = vec![0u8; quant::matvec::matvec_scratch_bytes(t, cols).unwrap()];
    let xq = quant::matvec::quantize_activations(level::current(), t, cols, &x, &mut scratch)
        .unwrap()
        .to_vec();
    for beyond_cache in [false, true] {
        let copies = if beyond_cache {
            BEYOND_CACHE_BYTES.div_ceil(w.len())
        } else {
            1
        };
        let all = w.repeat(copies);
        let bytes = w.len();
        let copy = |call: usize| &all[(call % copies) * bytes..][..bytes];
        let op = |call: usize| Operands {
            t,
            w: copy(call),
            rows,
            cols,
            xq: &xq,
        };
        let mut y = vec![0f32; rows];
        let mut y2 = vec![0f32; rows];
        // Calls per round: about 20 ms of work.
        let k = (20e-3 / (bytes as f64 / 20e9)).clamp(3.0, 2000.0) as usize;
        let mut y3 = vec![0f32; rows];
        let mut y4 = vec![0f32; rows];
        let [r1, r2, m1, m2, p2, p1] = with_spinner(|spinner| {
            alternate_calls(
                k,
                &mut [
                    &mut |c| run(Job::Read, &op(c), 0..rows, &mut []),
                    &mut |c| spinner.both_halves(Job::Read, op(c), &mut []),
                    &mut |c| run(Job::Matvec, &op(c), 0..rows, &mut y),
                    &mut |c| spinner.both_halves(Job::Matvec, op(c), &mut y2),
                    &mut |c| {
                        parallel::matvec(level::current(), t, copy(c), rows, cols, &x, 2, &mut y3)
                            .unwrap()
                    },
                    &mut |c| {
                        parallel::matvec(level::current(), t, copy(c), rows, cols, &x, 1, &mut y4)
                            .unwrap()
                    },
                ],
            )
        });
        let (p2_median, p1_median) = (p2.1, p1.1);
        let [r1, r2, m1, m2, p2, p1] = [r1, r2, m1, m2, p2, p1].map(|(best, _)| best);
        let gbps = |d: Duration| bytes as f64 / d.as_secs_f64() / 1e9;
        let ratio = |a: Duration, b: Duration| b.as_secs_f64() / a.as_secs_f64();
        println!(
            "| {} | {rows} × {cols} | {:.2} | {} | {:.1} | {:.2} | {:.1} | {:.2} | {:.2} | {:.2} | {:.2} | {} |",
            t.name(),
            bytes as f64 / 1e6,
            if beyond_cache {
                "beyond cache"
            } else {
                "cached"
            },
            gbps(r1),
            ratio(r2, r1),
            gbps(m1),
            ratio(m2, m1),
            ratio(p2, m1),
            ratio(p2, p1),
            ratio(p2_median, p1_median),
            load()
        );
    }
}
