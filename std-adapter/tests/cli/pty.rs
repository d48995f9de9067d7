//! Every command run as a user runs it: in a terminal (a pseudo-terminal whose slave side is the
//! child's stdin, stdout and stderr), with a deadline. Progress bars draw there (the quiet period
//! is set to 0), from worker threads for `requantize`: a command that hangs is killed and fails.

#![cfg(unix)]

use crate::common;

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::scratch_dir;
use miniquant::GgmlType;
use miniquant_std::writer::GgufWriter;
use rustix::process::{kill_process, Pid, Signal};
use rustix::pty::{grantpt, openpt, ptsname, unlockpt, OpenptFlags};
use rustix::termios::{tcsetwinsize, Winsize};

/// Far above what any of these runs takes (well under a second each), far below a CI timeout.
const DEADLINE: Duration = Duration::from_secs(60);

/// What a run under the pseudo-terminal printed (stdout and stderr together, as a terminal shows
/// them) and its exit code.
struct PtyRun {
    code: i32,
    screen: String,
}

/// Runs `miniquant args` in `dir` on a new 100x30 pseudo-terminal; kills it and fails if it has
/// not exited within [`DEADLINE`].
fn run_in_terminal(dir: &Path, args: &[&str]) -> PtyRun {
    let (status, screen) = terminal_session(dir, args, None);
    PtyRun {
        code: status.code().unwrap_or_else(|| {
            panic!(
                "killed by a signal: {status:?}; screen: {:?}",
                tail(&screen)
            )
        }),
        screen,
    }
}

/// [`run_in_terminal`] that sends `signal` once the screen shows `mark` (as a terminal's Ctrl-C
/// would send SIGINT); returns the exit status and the screen.
fn interrupt_in_terminal(
    dir: &Path,
    args: &[&str],
    mark: &str,
    signal: Signal,
) -> (std::process::ExitStatus, String) {
    terminal_session(dir, args, Some((mark, signal)))
}

fn terminal_session(
    dir: &Path,
    args: &[&str],
    interrupt: Option<(&str, Signal)>,
) -> (std::process::ExitStatus, String) {
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).expect("openpt");
    grantpt(&master).expect("grantpt");
    unlockpt(&master).expect("unlockpt");
    let size = Winsize {
        ws_row: 30,
        ws_col: 100,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    tcsetwinsize(&master, size).expect("window size");
    let slave_name = ptsname(&master, Vec::new()).expect("ptsname");
    let slave = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(rustix::fs::OFlags::NOCTTY.bits() as i32)
        .open(slave_name.to_str().expect("UTF-8 name"))
        .expect("open the slave side");
    let stdio = |f: &File| Stdio::from(f.try_clone().expect("dup"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_miniquant"))
        .args(args)
        .current_dir(dir)
        .env("MINIQUANT_PROGRESS_DELAY_MS", "0")
        .env("TERM", "xterm-256color")
        .env_remove("NO_COLOR")
        .stdin(stdio(&slave))
        .stdout(stdio(&slave))
        .stderr(stdio(&slave))
        .spawn()
        .expect("the binary runs");
    // Only the child holds the slave side now: the master reads EOF (EIO) once it exits.
    drop(slave);
    let mut master = File::from(master);
    let screen = Arc::new(Mutex::new(Vec::new()));
    let reader = {
        let screen = Arc::clone(&screen);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // Linux answers EIO once the slave side is closed.
            while let Ok(n @ 1..) = master.read(&mut buf) {
                screen.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        })
    };
    let shown = || String::from_utf8_lossy(&screen.lock().unwrap()).into_owned();
    let mut interrupt = interrupt;
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if let Some((mark, signal)) = interrupt {
            if shown().contains(mark) {
                let pid = Pid::from_raw(child.id() as i32).expect("a pid");
                kill_process(pid, signal).expect("kill");
                interrupt = None;
            }
        }
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            let _ = reader.join();
            panic!(
                "`miniquant {}` in a terminal did not finish in {DEADLINE:?}; its screen ends \
                 with: {:?}",
                args.join(" "),
                tail(&shown())
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    reader.join().expect("reader");
    if let Some((mark, _)) = interrupt {
        panic!("finished before {mark:?} showed: {:?}", tail(&shown()));
    }
    (status, shown())
}

fn tail(s: &str) -> &str {
    let start = s.len().saturating_sub(600);
    let start = (start..s.len())
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0);
    &s[start..]
}

/// A directory of its own for one test, holding a model of `tensors` F32 weights of 512x1024
/// (2 MiB each): enough rows that quantizer threads advance the bar many times.
fn workspace(name: &str, tensors: usize) -> PathBuf {
    let dir = scratch_dir().join(format!("pty-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut w = GgufWriter::new();
    w.kv("general.architecture", "llama");
    for i in 0..tensors {
        let data: Vec<u8> = (0..512 * 1024u32)
            .flat_map(|j| {
                (((j ^ i as u32).wrapping_mul(2_654_435_761) >> 8) as f32 / 1e6).to_le_bytes()
            })
            .collect();
        w.tensor(
            &format!("blk.{i}.ffn_up.weight"),
            GgmlType::F32,
            &[1024, 512],
            data,
        );
    }
    w.tensor("output_norm.weight", GgmlType::F32, &[1024], vec![0; 4096]);
    std::fs::write(dir.join("model.gguf"), w.to_bytes()).unwrap();
    dir
}

fn assert_ok(run: &PtyRun, summary: &str) {
    assert_eq!(run.code, 0, "screen: {:?}", tail(&run.screen));
    assert!(
        run.screen.contains(summary),
        "no {summary:?} on the screen: {:?}",
        tail(&run.screen)
    );
    assert!(!run.screen.contains("panicked"), "{}", run.screen);
}

/// Whether indicatif drew a bar: its frames are redrawn with a line clear (`ESC [2K`).
fn drew_a_bar(run: &PtyRun) -> bool {
    run.screen.contains("\x1b[2K")
}

#[test]
fn requantize_in_a_terminal_finishes_with_any_thread_count() {
    let dir = workspace("requantize", 8);
    for threads in [None, Some("1"), Some("2"), Some("3")] {
        let mut args = vec!["requantize", "model.gguf", "out.gguf", "--type", "q8_0"];
        args.extend(threads.iter().flat_map(|n| ["--threads", n]));
        let run = run_in_terminal(&dir, &args);
        assert_ok(&run, "8 tensors to Q8_0");
        assert!(drew_a_bar(&run), "no bar: {:?}", tail(&run.screen));
        let out = miniquant_std::GgufFile::open(dir.join("out.gguf")).expect("valid output");
        assert_eq!(out.index().tensors()[0].ggml_type, GgmlType::Q8_0);
    }
}

/// Interrupted while its bar is drawn (from worker threads), `requantize` clears the bar's line,
/// leaves nothing in the directory but its input, and dies of the signal.
#[test]
fn requantize_interrupted_in_a_terminal_clears_its_bar_and_leaves_no_output() {
    let dir = workspace("requantize-interrupted", 48);
    let args = [
        "requantize",
        "model.gguf",
        "out.gguf",
        "--type",
        "q4_k",
        "--threads",
        "2",
    ];
    for sig in [Signal::INT, Signal::TERM] {
        let (status, screen) = interrupt_in_terminal(&dir, &args, "B/", sig);
        assert_eq!(status.signal(), Some(sig.as_raw()), "{:?}", tail(&screen));
        assert!(
            screen.ends_with("\r\x1b[2K"),
            "the bar stays: {:?}",
            tail(&screen)
        );
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["model.gguf"]);
    }
}

/// The model the hang was reported with, when the cache has it (`cargo xtask fetch`).
#[test]
fn requantize_of_a_real_model_in_a_terminal_finishes() {
    let cache = std::env::var_os("MINIQUANT_CACHE").map_or_else(
        || Path::new(&std::env::var_os("HOME").unwrap_or_default()).join(".cache/miniquant"),
        PathBuf::from,
    );
    let model = cache.join("SmolLM2-135M-Instruct.Q4_1.gguf");
    if !model.exists() {
        eprintln!(
            "skipped: {} is not there (cargo xtask fetch)",
            model.display()
        );
        return;
    }
    let dir = scratch_dir().join("pty-smollm2");
    std::fs::create_dir_all(&dir).unwrap();
    let run = run_in_terminal(
        &dir,
        &[
            "requantize",
            model.to_str().unwrap(),
            "out.gguf",
            "--type",
            "q8_0",
        ],
    );
    assert_ok(&run, "tensors to Q8_0");
    assert!(drew_a_bar(&run), "no bar: {:?}", tail(&run.screen));
    std::fs::remove_file(dir.join("out.gguf")).unwrap();
}

#[test]
fn dequant_and_dequant_raw_draw_their_bar_and_finish() {
    let dir = workspace("dequant", 1);
    let run = run_in_terminal(
        &dir,
        &[
            "dequant",
            "model.gguf",
            "blk.0.ffn_up.weight",
            "-o",
            "w.npy",
        ],
    );
    assert_ok(&run, "-> \"w.npy\"");
    assert!(drew_a_bar(&run), "no bar: {:?}", tail(&run.screen));
    assert_eq!(
        std::fs::metadata(dir.join("w.npy")).unwrap().len(),
        128 + 512 * 1024 * 4
    );

    let run = run_in_terminal(&dir, &["quantize-raw", "--type", "q8_0", "w.npy", "w.q8"]);
    // w.npy read as raw f32 (its 128-byte header too) is still a whole number of Q8_0 blocks.
    assert_ok(&run, "Q8_0 blocks");
    let run = run_in_terminal(&dir, &["dequant-raw", "--type", "q8_0", "w.q8", "back.f32"]);
    assert_ok(&run, "-> \"back.f32\"");
    assert!(drew_a_bar(&run), "no bar: {:?}", tail(&run.screen));
}

#[test]
fn extract_draws_its_bar_and_finishes() {
    let dir = workspace("extract", 2);
    let run = run_in_terminal(&dir, &["extract", "model.gguf", "copy.gguf"]);
    assert_ok(&run, "wrote \"copy.gguf\"");
    assert!(drew_a_bar(&run), "no bar: {:?}", tail(&run.screen));
    assert_eq!(
        std::fs::read(dir.join("copy.gguf")).unwrap(),
        std::fs::read(dir.join("model.gguf")).unwrap()
    );
}

#[test]
fn matvec_inspect_validate_and_make_example_finish() {
    let dir = workspace("others", 1);
    let x: Vec<u8> = (0..1024)
        .flat_map(|i| (i as f32 / 1024.0).to_le_bytes())
        .collect();
    std::fs::write(dir.join("x.f32"), x).unwrap();
    let run = run_in_terminal(
        &dir,
        &[
            "matvec",
            "model.gguf",
            "blk.0.ffn_up.weight",
            "x.f32",
            "-o",
            "y.f32",
        ],
    );
    assert_ok(&run, "-> \"y.f32\"");
    assert_eq!(std::fs::metadata(dir.join("y.f32")).unwrap().len(), 512 * 4);
    assert_ok(
        &run_in_terminal(&dir, &["inspect", "model.gguf"]),
        "blk.0.ffn_up.weight",
    );
    assert_ok(&run_in_terminal(&dir, &["validate", "model.gguf"]), "ok: ");
    assert_ok(
        &run_in_terminal(&dir, &["make-example", "tiny.gguf"]),
        "wrote \"tiny.gguf\"",
    );
}

/// `-` (standard input) on a terminal is a usage error at once: the command used to wait silently
/// for a GGUF file to be typed, which looked like a hang.
#[test]
fn reading_a_gguf_from_a_terminal_is_refused() {
    let dir = workspace("stdin-terminal", 1);
    for args in [
        &["inspect", "-"][..],
        &["validate", "-"],
        &["dequant", "-", "blk.0.ffn_up.weight", "-o", "y.f32"],
        &["convert-endian", "-", "out.gguf", "--order", "big"],
    ] {
        let run = run_in_terminal(&dir, args);
        assert_eq!(run.code, 2, "{args:?}: {:?}", tail(&run.screen));
        assert!(
            run.screen
                .starts_with("error: standard input is a terminal")
                && run.screen.trim_end().lines().count() == 1,
            "{args:?}: {:?}",
            run.screen
        );
    }
}

/// `tokenize` and `run` on the real llama-family file, in a terminal: both finish and print.
#[test]
fn tokenize_and_run_in_a_terminal_finish() {
    let Some(model) = common::cached_model("SmolLM2-135M-Instruct.Q4_1.gguf") else {
        return;
    };
    let dir = scratch_dir().join("pty-run");
    std::fs::create_dir_all(&dir).unwrap();
    let model = model.to_str().unwrap();
    // The ids llama.cpp's llama-tokenize gives for "Hello world" with this file.
    assert_ok(
        &run_in_terminal(&dir, &["tokenize", model, "Hello world"]),
        "19556 905",
    );
    let run = run_in_terminal(
        &dir,
        &[
            "run",
            model,
            "--prompt-ids",
            "19556 905",
            "-n",
            "4",
            "--tokens",
        ],
    );
    assert_ok(&run, "19556 905");
}

/// A context the machine cannot hold, asked of `run` and `bench` in a terminal: one error line,
/// exit 1, nothing else on the screen.
#[test]
fn a_context_the_machine_cannot_hold_is_one_line_in_a_terminal() {
    use crate::run::{long_context_llama, refuses_maps_past, LONG_CONTEXT_KV_BYTES};
    if !refuses_maps_past(LONG_CONTEXT_KV_BYTES) {
        eprintln!("NOT RUN: this system would map {LONG_CONTEXT_KV_BYTES} bytes");
        return;
    }
    let model = long_context_llama(64);
    let dir = scratch_dir().join("pty-no-memory");
    std::fs::create_dir_all(&dir).unwrap();
    for args in [
        &["run", &model, "--prompt-ids", "1 2 3", "-n", "16777216"][..],
        &["bench", &model, "-p", "16777216", "-n", "0"],
    ] {
        let run = run_in_terminal(&dir, args);
        assert_eq!(run.code, 1, "{args:?}: {:?}", tail(&run.screen));
        assert!(
            run.screen.starts_with("error: cannot reserve ")
                && run.screen.contains("512.0 GiB of it the KV cache")
                && run.screen.trim_end().lines().count() == 1,
            "{args:?}: {:?}",
            run.screen
        );
    }
}

/// `bench` in a terminal prints llama-bench's table; interrupted (SIGINT, as Ctrl-C sends it)
/// once the header is out, on two threads (its generated tokens' products cut in halves between
/// the caller and a worker), it dies of the signal with nothing but whole lines on the screen.
#[test]
fn bench_in_a_terminal_prints_its_table_and_stops_on_sigint() {
    let Some(model) = common::cached_model("SmolLM2-135M-Instruct.Q4_1.gguf") else {
        return;
    };
    let dir = scratch_dir().join("pty-bench");
    std::fs::create_dir_all(&dir).unwrap();
    let model = model.to_str().unwrap();
    let run = run_in_terminal(&dir, &["bench", model, "-p", "8", "-n", "2", "-r", "1"]);
    assert_ok(&run, " pp8 |");
    assert!(run.screen.contains(" tg2 |"), "{}", run.screen);
    for sig in [Signal::INT, Signal::TERM] {
        let args = [
            "bench", model, "-p", "16", "-n", "4", "-r", "10000", "-t", "2",
        ];
        let (status, screen) = interrupt_in_terminal(&dir, &args, "| -----", sig);
        assert_eq!(status.signal(), Some(sig.as_raw()), "{screen:?}");
        // A terminal turns each newline into CR LF.
        assert!(screen.ends_with("|\r\n"), "{screen:?}");
        assert!(!screen.contains("panicked"), "{screen}");
    }
}

/// A long prompt shows a bar on a terminal while it is processed, and the bar is gone before the
/// text; interrupted while the bar is drawn, `run` clears its line and dies of the signal.
#[test]
fn run_shows_prompt_progress_on_a_terminal_and_clears_it_when_interrupted() {
    let Some(model) = common::cached_model("SmolLM2-135M-Instruct.Q4_1.gguf") else {
        return;
    };
    let dir = scratch_dir().join("pty-run-progress");
    std::fs::create_dir_all(&dir).unwrap();
    let model = model.to_str().unwrap();
    let ids = vec!["100"; 48].join(" ");
    let args = [
        "run",
        model,
        "--prompt-ids",
        &ids,
        "--batch",
        "4",
        "-n",
        "2",
    ];
    let run = run_in_terminal(&dir, &args);
    assert_eq!(run.code, 0, "{:?}", tail(&run.screen));
    assert!(run.screen.contains("prompt ["), "no bar: {:?}", run.screen);
    // The bar is cleared before the generated text, which stands alone on its line.
    let text_start = run.screen.rfind("\x1b[2K").unwrap() + "\x1b[2K".len();
    assert!(
        !run.screen[text_start..].contains("prompt ["),
        "{:?}",
        run.screen
    );
    // In a pipe: no bar, nothing on stderr, the same text.
    let piped = common::miniquant_in(&dir, &args);
    assert_eq!((piped.code, piped.stderr.as_str()), (0, ""));
    let text = String::from_utf8(piped.stdout).unwrap();
    assert!(
        run.screen.ends_with(&text.replace('\n', "\r\n")),
        "{:?}",
        run.screen
    );

    let long = vec!["100"; 2000].join(" ");
    for sig in [Signal::INT, Signal::TERM] {
        let args = ["run", model, "--prompt-ids", &long, "--batch", "8"];
        let (status, screen) = interrupt_in_terminal(&dir, &args, "prompt [", sig);
        assert_eq!(status.signal(), Some(sig.as_raw()), "{screen:?}");
        assert!(
            screen.ends_with("\r\x1b[2K"),
            "the bar stays: {:?}",
            tail(&screen)
        );
    }
}
