//! Header parsing time on the two real files: our `&[u8]` and `Read` drivers against candle-core
//! 0.11.0's `Content::read`, and the heap allocations each makes while parsing.
//!
//! `cargo bench -p miniquant-tests --bench header` (set `HEADER_BENCH_RUNS` to change the number of
//! runs per row, 15 by default). Our drivers only walk the events (each is passed to `black_box`);
//! candle builds its maps of owned keys, values and tensor infos, which is what its API returns.

use candle_core::quantized::gguf_file::Content;
use embedded_io_adapters::std::FromStd;
use miniquant::gguf::{Event, Limits, ReadParser, SliceParser};
use miniquant_tests::cache::model_path;
use std::alloc::{GlobalAlloc, Layout, System};
use std::fs::File;
use std::hint::black_box;
use std::io::{BufReader, Cursor};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Counts heap allocations while `COUNTING` is set.
struct CountingAllocator;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static ALLOCATED_BYTES: AtomicU64 = AtomicU64::new(0);

fn note(size: usize) {
    if COUNTING.load(Relaxed) {
        ALLOCATIONS.fetch_add(1, Relaxed);
        ALLOCATED_BYTES.fetch_add(size as u64, Relaxed);
    }
}

// SAFETY: every call is forwarded unchanged to `System`, which upholds `GlobalAlloc`'s contract;
// the counters are atomics and never allocate.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's obligations for `alloc` are passed on as they are.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: `ptr` and `layout` come from this allocator, which got them from `System`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` and `layout` come from this allocator, which got them from `System`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Heap allocations (calls, bytes) made while `f` runs.
fn allocations<T>(f: impl FnOnce() -> T) -> (T, u64, u64) {
    ALLOCATIONS.store(0, Relaxed);
    ALLOCATED_BYTES.store(0, Relaxed);
    COUNTING.store(true, Relaxed);
    let out = f();
    COUNTING.store(false, Relaxed);
    (
        out,
        ALLOCATIONS.load(Relaxed),
        ALLOCATED_BYTES.load(Relaxed),
    )
}

// ----- the parses --------------------------------------------------------------------------

/// Our slice driver over the file in memory; returns the number of events.
fn ours_slice(file: &[u8]) -> usize {
    let mut parser = SliceParser::new(file, Limits::DEFAULT);
    let mut events = 0;
    while let Some(event) = parser.next_event().expect("valid header") {
        black_box(&event);
        events += 1;
    }
    events
}

/// Our `Read` driver's loop over an already open reader and an already allocated buffer.
fn ours_read_loop<R: std::io::Read>(reader: R, buf: &mut [u8], file_len: u64) -> usize {
    let mut parser = ReadParser::new(FromStd::new(reader), buf, Limits::DEFAULT)
        .expect("buffer")
        .with_total_len(file_len);
    let mut events = 0;
    while let Some(event) = parser.next_event().expect("valid header") {
        black_box(&event);
        events += 1;
    }
    events
}

/// Our `Read` driver over the file already in memory (`&[u8]` implements `embedded_io::Read`):
/// the driver's own cost, without system calls.
fn ours_read_memory(file: &[u8], buf: &mut [u8]) -> usize {
    let mut parser = ReadParser::new(file, buf, Limits::DEFAULT)
        .expect("buffer")
        .with_total_len(file.len() as u64);
    let mut events = 0;
    while let Some(event) = parser.next_event().expect("valid header") {
        black_box(&event);
        events += 1;
    }
    events
}

/// Our `Read` driver from opening the file to the end of the header.
fn ours_read_file(path: &std::path::Path, buf: &mut [u8], buffered: bool) -> usize {
    let file = File::open(path).expect("open");
    let len = file.metadata().expect("metadata").len();
    if buffered {
        ours_read_loop(BufReader::new(file), buf, len)
    } else {
        ours_read_loop(file, buf, len)
    }
}

fn candle_cursor(file: &[u8]) -> usize {
    let content = Content::read(&mut Cursor::new(file)).expect("candle reads it");
    content.metadata.len() + content.tensor_infos.len()
}

fn candle_file(path: &std::path::Path) -> usize {
    let mut reader = BufReader::new(File::open(path).expect("open"));
    let content = Content::read(&mut reader).expect("candle reads it");
    content.metadata.len() + content.tensor_infos.len()
}

// ----- timing ------------------------------------------------------------------------------

struct Timing {
    min: Duration,
    median: Duration,
}

fn time(runs: usize, mut f: impl FnMut() -> usize) -> Timing {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            black_box(f());
            start.elapsed()
        })
        .collect();
    times.sort();
    Timing {
        min: times[0],
        median: times[runs / 2],
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let runs: usize = std::env::var("HEADER_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15);
    // `cargo bench` passes `--bench`; a plain `cargo test --benches` run passes nothing and
    // should stay short.
    let runs = if std::env::args().any(|a| a == "--bench") {
        runs
    } else {
        1
    };
    println!("header parse, {runs} runs per row (min / median), release build with debug info\n");
    println!(
        "{:<10} {:<40} {:>10} {:>10} {:>10} {:>12}",
        "file", "parser", "min ms", "median ms", "MB/s", "candle/ours"
    );
    let mut allocation_rows = Vec::new();
    for (label, name) in [
        ("SmolLM2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
        ("Gemma3", "gemma-3-270m-q4_k_m.gguf"),
    ] {
        let path = model_path(name);
        let file = std::fs::read(&path).expect("read the file");
        let header_len = {
            let mut parser = SliceParser::new(&file, Limits::DEFAULT);
            let mut data_offset = 0;
            while let Some(event) = parser.next_event().expect("valid") {
                if let Event::End(section) = event {
                    data_offset = section.data_offset;
                }
            }
            data_offset
        };
        let mut buf = vec![0u8; 4096];

        let slice = time(runs, || ours_slice(&file));
        let read = time(runs, || ours_read_file(&path, &mut buf, true));
        let read_unbuffered = time(runs, || ours_read_file(&path, &mut buf, false));
        let read_memory = time(runs, || ours_read_memory(&file, &mut buf));
        let mut big_buf = vec![0u8; 64 * 1024];
        let read_big = time(runs, || ours_read_file(&path, &mut big_buf, false));
        let candle_in_memory = time(runs, || candle_cursor(&file));
        let candle_buffered = time(runs, || candle_file(&path));

        let mb_per_s = |t: &Timing| header_len as f64 / 1e6 / t.min.as_secs_f64();
        let rows: [(&str, &Timing, Option<&Timing>); 7] = [
            ("ours SliceParser, file in memory", &slice, None),
            ("ours ReadParser(4 KiB), BufReader<File>", &read, None),
            ("ours ReadParser(4 KiB), File", &read_unbuffered, None),
            (
                "ours ReadParser(4 KiB), &[u8] in memory",
                &read_memory,
                None,
            ),
            ("ours ReadParser(64 KiB), File", &read_big, None),
            (
                "candle Content::read, Cursor<&[u8]>",
                &candle_in_memory,
                Some(&slice),
            ),
            (
                "candle Content::read, BufReader<File>",
                &candle_buffered,
                Some(&read),
            ),
        ];
        for (parser, t, ours) in rows {
            let ratio = ours.map_or(String::new(), |o| {
                format!("{:.1}x", t.median.as_secs_f64() / o.median.as_secs_f64())
            });
            println!(
                "{label:<10} {parser:<40} {:>10.3} {:>10.3} {:>10.0} {:>12}",
                ms(t.min),
                ms(t.median),
                mb_per_s(t),
                ratio
            );
        }
        println!("{label:<10} header: {header_len} bytes");

        // Allocations during the parse only: the file, the buffer and the reader exist before.
        let (events, calls, bytes) = allocations(|| ours_slice(&file));
        allocation_rows.push((label, "ours SliceParser", events, calls, bytes));
        let std_file = File::open(&path).expect("open");
        let file_len = std_file.metadata().expect("metadata").len();
        let reader = BufReader::new(std_file);
        let (events, calls, bytes) = allocations(|| ours_read_loop(reader, &mut buf, file_len));
        allocation_rows.push((
            label,
            "ours ReadParser loop (BufReader<File>)",
            events,
            calls,
            bytes,
        ));
        let (entries, calls, bytes) = allocations(|| candle_cursor(&file));
        allocation_rows.push((
            label,
            "candle Content::read (Cursor)",
            entries,
            calls,
            bytes,
        ));
    }

    println!("\nheap allocations while parsing (counting global allocator)");
    println!(
        "{:<10} {:<40} {:>14} {:>12} {:>14}",
        "file", "parser", "events/items", "allocs", "bytes"
    );
    for (label, parser, items, calls, bytes) in allocation_rows {
        println!("{label:<10} {parser:<40} {items:>14} {calls:>12} {bytes:>14}");
    }
}
