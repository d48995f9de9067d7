//! Outputs never appear half-written, whatever stops the command: SIGINT, SIGTERM and SIGKILL in the
//! middle of a write leave no file under the output's name (and, but for SIGKILL on a named
//! temporary, no file at all); an input truncated while it is read is one clear error. Each test
//! signals only once the child has written at least 1 MiB of its output, which it finds through
//! /proc (an unnamed O_TMPFILE output has no name to wait for).

#![cfg(target_os = "linux")]

use crate::common;

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::scratch_dir;
use miniquant::GgmlType;
use miniquant_std::writer::GgufWriter;
use rustix::process::{kill_process, Pid, Signal};

/// Far above any of these runs (a second or two), far below a CI timeout.
const DEADLINE: Duration = Duration::from_secs(120);

/// Columns and rows of the big tensor: 32 Mi Q4_0 values, 18 MiB in, 128 MiB of f32 out, so the
/// 1 MiB mark comes long before the end.
const COLS: usize = 8192;
const ROWS: usize = 4096;

/// `dir/in/model.gguf` with one big Q4_0 tensor, and an empty `dir/out` (each test has its own
/// `dir`, so "nothing left" means an empty `out`).
fn workspace(name: &str) -> (PathBuf, PathBuf) {
    let dir = scratch_dir().join(format!("interrupt-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("in")).unwrap();
    std::fs::create_dir_all(dir.join("out")).unwrap();
    let model = dir.join("in/model.gguf");
    std::fs::write(&model, big_model()).unwrap();
    (model, dir.join("out"))
}

/// `big.weight`, then 4 tensors of a quarter of its size: `requantize` converts a whole tensor
/// before writing it, so while it writes the first one the others are still unread.
fn big_model() -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.kv("general.architecture", "llama");
    w.tensor(
        "big.weight",
        GgmlType::Q4_0,
        &[COLS as u64, ROWS as u64],
        q4_0_blocks(COLS * ROWS / 32),
    );
    for i in 0..4 {
        let name = format!("blk.{i}.ffn_up.weight");
        let shape = [COLS as u64, ROWS as u64 / 4];
        w.tensor(
            &name,
            GgmlType::Q4_0,
            &shape,
            q4_0_blocks(COLS * ROWS / 128),
        );
    }
    w.to_bytes()
}

/// Q4_0 blocks: an f16 scale of 1/16 and 16 bytes of nibbles that vary from block to block.
fn q4_0_blocks(blocks: usize) -> Vec<u8> {
    let mut data = Vec::with_capacity(blocks * 18);
    for b in 0..blocks {
        data.extend_from_slice(&0x2C00u16.to_le_bytes());
        data.extend((0..16u32).map(|i| (b as u32).wrapping_mul(31).wrapping_add(i * 7) as u8));
    }
    data
}

/// `miniquant args` in `dir`, stderr captured; `env` added.
fn start(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_miniquant"))
        .args(args)
        .current_dir(dir)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs")
}

/// Waits until `child` has written `bytes` into a file it has open in `dir` (named or not).
fn wait_until_written(child: &mut Child, dir: &Path, bytes: u64) {
    let dir = dir.canonicalize().unwrap();
    let start = Instant::now();
    loop {
        let written = std::fs::read_dir(format!("/proc/{}/fd", child.id()))
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .filter(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| t.starts_with(&dir)))
            .filter_map(|fd| std::fs::metadata(fd.path()).ok())
            .map(|m| m.len())
            .max()
            .unwrap_or(0);
        if written >= bytes {
            return;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("finished ({status}) before it could be interrupted: make the input bigger");
        }
        assert!(start.elapsed() < DEADLINE, "no output after {DEADLINE:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn signal(child: &Child, signal: Signal) {
    let pid = Pid::from_raw(child.id() as i32).unwrap();
    kill_process(pid, signal).expect("kill");
}

/// Waits for `child` (within the deadline); returns its status and stderr.
fn finish(mut child: Child) -> (ExitStatus, String) {
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            panic!("did not finish within {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (status, stderr)
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// `dequant` of the big tensor into `big.npy`, and `requantize` into `out.gguf`, on 2 threads.
fn dequant_args(model: &Path) -> Vec<String> {
    args_of(&format!(
        "dequant {} big.weight -o big.npy",
        model.display()
    ))
}

fn requantize_args(model: &Path) -> Vec<String> {
    args_of(&format!(
        "requantize {} out.gguf --type q8_0 --threads 2",
        model.display()
    ))
}

/// A command line split at spaces (the scratch paths have none).
fn args_of(line: &str) -> Vec<String> {
    line.split(' ').map(str::to_owned).collect()
}

fn as_strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// Waits for `child`, which must die of `sig` (the handlers re-raise SIGINT and SIGTERM).
fn assert_killed_by(child: Child, sig: Signal, args: &[String]) {
    let (status, stderr) = finish(child);
    assert_eq!(
        status.signal(),
        Some(sig.as_raw()),
        "{args:?}: {status}, stderr: {stderr}"
    );
}

#[test]
fn a_signal_during_a_write_leaves_no_file() {
    let (model, out) = workspace("unnamed");
    for sig in [Signal::INT, Signal::TERM, Signal::KILL] {
        for args in [dequant_args(&model), requantize_args(&model)] {
            let mut child = start(&out, &as_strs(&args), &[]);
            wait_until_written(&mut child, &out, 1 << 20);
            signal(&child, sig);
            assert_killed_by(child, sig, &args);
            assert_eq!(
                names_in(&out),
                Vec::<String>::new(),
                "{args:?} after {sig:?}"
            );
        }
    }
}

#[test]
fn named_temporaries_are_removed_on_sigint_and_sigterm() {
    let (model, out) = workspace("named");
    // Named temporaries (the path taken without O_TMPFILE) even where O_TMPFILE works.
    let env = [("MINIQUANT_NO_TMPFILE", "1")];
    for sig in [Signal::INT, Signal::TERM, Signal::KILL] {
        for args in [dequant_args(&model), requantize_args(&model)] {
            let mut child = start(&out, &as_strs(&args), &env);
            wait_until_written(&mut child, &out, 1 << 20);
            let temporaries = names_in(&out);
            let target = &args[if args[0] == "dequant" { 4 } else { 2 }];
            assert_eq!(
                temporaries,
                [format!(".{target}.{}.partial", child.id())],
                "{args:?}: the output is written under a hidden temporary name"
            );
            signal(&child, sig);
            assert_killed_by(child, sig, &args);
            if sig == Signal::KILL {
                // No handler runs on SIGKILL: the temporary stays, never the output's name.
                assert_eq!(names_in(&out), temporaries, "{args:?} after {sig:?}");
                std::fs::remove_file(out.join(&temporaries[0])).unwrap();
            } else {
                assert_eq!(
                    names_in(&out),
                    Vec::<String>::new(),
                    "{args:?} after {sig:?}"
                );
            }
        }
    }
}

/// Truncates `model` to its first 4 KiB while `child` is stopped, then lets it go on.
fn truncate_under(child: &Child, model: &Path) {
    signal(child, Signal::STOP);
    std::fs::OpenOptions::new()
        .write(true)
        .open(model)
        .unwrap()
        .set_len(4096)
        .unwrap();
    signal(child, Signal::CONT);
}

#[test]
fn an_input_truncated_while_mapped_is_a_clear_error() {
    for (i, named) in [false, true].into_iter().enumerate() {
        let (model, out) = workspace(&format!("shrink-{i}"));
        let env: &[(&str, &str)] = if named {
            &[("MINIQUANT_NO_TMPFILE", "1")]
        } else {
            &[]
        };
        for args in [dequant_args(&model), requantize_args(&model)] {
            std::fs::write(&model, big_model()).unwrap();
            let mut child = start(&out, &as_strs(&args), env);
            wait_until_written(&mut child, &out, 1 << 20);
            truncate_under(&child, &model);
            let (status, stderr) = finish(child);
            assert_eq!(
                status.code(),
                Some(1),
                "{args:?}: {status}, stderr: {stderr}"
            );
            let expected = format!(
                "error: input changed while reading \"{}\": it shrank or was rewritten while mapped",
                model.display()
            );
            assert!(
                stderr.starts_with(&expected) && stderr.lines().count() == 1,
                "{args:?}: {stderr:?}"
            );
            assert_eq!(names_in(&out), Vec::<String>::new(), "{args:?}");
        }
    }
}

#[test]
fn with_no_mmap_a_truncated_input_does_not_matter() {
    let (model, out) = workspace("no-mmap");
    let rows = ["--rows", "0..1024"];
    let mut reference = dequant_args(&model);
    reference[4] = "reference.f32".to_owned();
    reference.extend(rows.map(str::to_owned));
    let (status, stderr) = finish(start(&out, &as_strs(&reference), &[]));
    assert!(status.success(), "{stderr}");
    let expected = std::fs::read(out.join("reference.f32")).unwrap();
    assert_eq!(expected.len(), 1024 * COLS * 4);
    for (flag, env) in [
        (Some("--no-mmap"), None),
        (None, Some(("MINIQUANT_NO_MMAP", "1"))),
    ] {
        std::fs::write(&model, big_model()).unwrap();
        let mut args = dequant_args(&model);
        args[4] = "rows.f32".to_owned();
        args.extend(rows.map(str::to_owned));
        args.extend(flag.map(str::to_owned));
        let mut child = start(&out, &as_strs(&args), &Vec::from_iter(env));
        wait_until_written(&mut child, &out, 1 << 20);
        truncate_under(&child, &model);
        let (status, stderr) = finish(child);
        assert!(status.success(), "{args:?}: {status}, stderr: {stderr}");
        assert!(
            std::fs::read(out.join("rows.f32")).unwrap() == expected,
            "{args:?}: not the reference output"
        );
        std::fs::remove_file(out.join("rows.f32")).unwrap();
    }
    let run = common::miniquant_in(&out, &["--help"]);
    assert!(
        run.stdout_text().contains("--no-mmap"),
        "{}",
        run.stdout_text()
    );
    let bad = Command::new(env!("CARGO_BIN_EXE_miniquant"))
        .args(["inspect", model.to_str().unwrap()])
        .env("MINIQUANT_NO_MMAP", "yes")
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&bad.stderr),
        "error: MINIQUANT_NO_MMAP is \"yes\"; expected 0 or 1\n"
    );
}

/// `big.weight` (Q4_0, converted) then `kept.weight` (Q8_0): `requantize --type q8_0` copies the
/// second one as stored, straight from the map.
fn model_with_a_copied_tensor() -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.kv("general.architecture", "llama");
    let shape = [COLS as u64, ROWS as u64];
    w.tensor(
        "big.weight",
        GgmlType::Q4_0,
        &shape,
        q4_0_blocks(COLS * ROWS / 32),
    );
    // Q8_0 blocks: an f16 scale of 1/16 and 32 varying bytes.
    let kept = (0..COLS * ROWS / 32)
        .flat_map(|b| {
            let quants = (0..32u32).map(move |i| (b as u32).wrapping_mul(13).wrapping_add(i) as u8);
            0x2C00u16.to_le_bytes().into_iter().chain(quants)
        })
        .collect();
    w.tensor("kept.weight", GgmlType::Q8_0, &shape, kept);
    w.to_bytes()
}

#[test]
fn an_input_truncated_before_a_tensor_copied_as_stored_is_the_same_clear_error() {
    // Copying a tensor by write(2) straight from the map failed with EFAULT ("write failed: Other
    // at byte N") instead of the SIGBUS handler's message.
    let (model, out) = workspace("shrink-copied");
    std::fs::write(&model, model_with_a_copied_tensor()).unwrap();
    let args = requantize_args(&model);
    let mut child = start(&out, &as_strs(&args), &[]);
    wait_until_written(&mut child, &out, 1 << 20);
    truncate_under(&child, &model);
    let (status, stderr) = finish(child);
    assert_eq!(status.code(), Some(1), "{status}, stderr: {stderr}");
    let expected = format!(
        "error: input changed while reading \"{}\": it shrank or was rewritten while mapped",
        model.display()
    );
    assert!(
        stderr.starts_with(&expected) && stderr.lines().count() == 1,
        "{stderr:?}"
    );
    assert_eq!(names_in(&out), Vec::<String>::new());
}

/// `run` streams text and writes `--logits` only at the end: interrupted mid-generation (on two
/// threads, so its one-column products are cut in halves between the caller and a worker) it dies
/// of the signal and leaves no logits file, named or temporary.
#[test]
fn run_interrupted_while_generating_leaves_no_logits_file() {
    let Some(model) = common::cached_model("SmolLM2-135M-Instruct.Q4_1.gguf") else {
        return;
    };
    let dir = scratch_dir().join("interrupt-run");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let model = model.to_str().unwrap().to_owned();
    for sig in [Signal::INT, Signal::TERM, Signal::KILL] {
        let args: Vec<String> = args_of(&format!(
            "run {model} --prompt-ids 1 -n 4000 --threads 2 --logits logits.npy"
        ));
        let mut child = Command::new(env!("CARGO_BIN_EXE_miniquant"))
            .args(&args)
            .current_dir(&dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the binary runs");
        // The first streamed byte: generation is under way.
        let mut first = [0u8; 1];
        let mut stdout = child.stdout.take().unwrap();
        stdout.read_exact(&mut first).expect("run printed nothing");
        signal(&child, sig);
        assert_killed_by(child, sig, &args);
        drop(stdout);
        assert_eq!(
            names_in(&dir),
            Vec::<String>::new(),
            "{args:?} after {sig:?}"
        );
    }
}
