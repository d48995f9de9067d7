//! What a user meets when something is wrong: directories, standard input and FIFOs, files cut
//! short (a partial download), errors inside a key's value, readers that stop early, and the
//! `inspect` options that narrow the output.

use crate::common;

use common::{assert_no_panic, miniquant, miniquant_with_stdin, scratch_dir, scratch_file};
use miniquant::gguf::Scalar;
use miniquant::GgmlType;
use miniquant_std::writer::GgufWriter;
use miniquant_std::Array;

/// Two keys (the second a string array) and three F32 tensors of 64 values (256 bytes) each.
fn model() -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.kv("general.architecture", "test").kv(
        "tokenizer.ggml.tokens",
        ["<s>", "</s>", "hello"].into_iter().collect::<Array>(),
    );
    for (i, name) in [
        "blk.0.attn_q.weight",
        "blk.0.attn_k.weight",
        "output.weight",
    ]
    .into_iter()
    .enumerate()
    {
        w.tensor(name, GgmlType::F32, &[16, 4], vec![i as u8; 256]);
    }
    w.to_bytes()
}

#[test]
fn a_directory_is_reported_as_one() {
    let dir = scratch_dir();
    for command in ["inspect", "validate", "dequant"] {
        let mut args = vec![command, dir.to_str().unwrap()];
        if command == "dequant" {
            args.push("w");
        }
        let run = miniquant(&args);
        assert_no_panic(&run);
        assert_eq!(run.code, 1);
        assert_eq!(
            run.stderr,
            format!(
                "error: cannot open {:?}: is a directory\n",
                dir.to_str().unwrap()
            ),
            "{command}"
        );
    }
}

#[test]
fn dash_reads_standard_input() {
    let bytes = model();
    let from_file = miniquant(&["inspect", &scratch_file("stdin-model.gguf", &bytes)]);
    let from_stdin = miniquant_with_stdin(&["inspect", "-"], &bytes);
    assert_eq!(from_stdin.code, 0, "{}", from_stdin.stderr);
    assert_eq!(from_stdin.stdout, from_file.stdout);
    let run = miniquant_with_stdin(&["validate", "-"], &bytes);
    assert_eq!(
        run.stdout_text(),
        "ok: 2 metadata keys, 3 tensors, 0 warnings\n"
    );
    let run = miniquant_with_stdin(&["dequant", "-", "output.weight", "-o", "-"], &bytes);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stdout,
        (0..64)
            .flat_map(|_| f32::from_bits(0x0202_0202).to_le_bytes())
            .collect::<Vec<_>>()
    );
    // An empty stream is an empty file, reported as such.
    let run = miniquant_with_stdin(&["validate", "-"], &[]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.starts_with("error: "), "{}", run.stderr);
}

#[cfg(unix)]
#[test]
fn a_fifo_is_read_not_mapped() {
    let path = scratch_dir().join("model.fifo");
    let _ = std::fs::remove_file(&path);
    let made = std::process::Command::new("mkfifo")
        .arg(&path)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    let bytes = model();
    let fifo = path.clone();
    let writer = std::thread::spawn(move || std::fs::write(fifo, bytes));
    let run = miniquant(&["validate", path.to_str().unwrap()]);
    writer.join().unwrap().unwrap();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stdout_text(),
        "ok: 2 metadata keys, 3 tensors, 0 warnings\n"
    );
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_file_cut_in_its_data_is_one_line_and_inspect_still_shows_the_header() {
    let bytes = model();
    let index = miniquant_std::Index::from_bytes(&bytes).unwrap();
    let data = index.data_offset();
    // Cut 100 bytes into the second tensor: it and the third are cut.
    let cut = data + 256 + 100;
    let path = scratch_file("cut-model.gguf", &bytes[..cut as usize]);
    let second_info = index.tensor("blk.0.attn_k.weight").unwrap().info_offset;
    let expected = format!(
        "error: file is truncated: it has {cut} of the {} bytes its header and tensors need; the \
         first tensor cut is \"blk.0.attn_k.weight\" (its data starts at offset {}) at byte {second_info}\n",
        bytes.len(),
        data + 256
    );
    let run = miniquant(&["validate", &path]);
    assert_eq!((run.code, run.stderr.as_str()), (1, expected.as_str()));

    let run = miniquant(&["inspect", &path]);
    assert_no_panic(&run);
    assert_eq!((run.code, run.stderr.as_str()), (1, expected.as_str()));
    let text = run.stdout_text();
    assert!(
        text.starts_with("TRUNCATED: file is truncated: it has "),
        "{text}"
    );
    assert!(text.contains("\n--- metadata\n"), "{text}");
    // The cut tensors are marked, the whole one is not.
    let marked: Vec<(&str, bool)> = text
        .lines()
        .filter(|l| l.contains(" elements  offset "))
        .map(|l| (l.split_whitespace().next().unwrap(), l.ends_with("  (cut)")))
        .collect();
    assert_eq!(
        marked,
        [
            ("blk.0.attn_q.weight", false),
            ("blk.0.attn_k.weight", true),
            ("output.weight", true)
        ]
    );

    // A tensor wholly present is read; a cut one is named (tests/cli/truncated.rs has more).
    let run = miniquant(&["dequant", &path, "blk.0.attn_q.weight", "-o", "-"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = miniquant(&["dequant", &path, "blk.0.attn_k.weight", "-o", "-"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .starts_with("error: tensor \"blk.0.attn_k.weight\" is cut at byte "),
        "{}",
        run.stderr
    );
}

#[test]
fn a_file_cut_inside_a_value_names_the_key() {
    let bytes = model();
    let index = miniquant_std::Index::from_bytes(&bytes).unwrap();
    let tokens = index.entry("tokenizer.ggml.tokens").unwrap();
    // Cut inside the second token's 8-byte length: after the array's type (4) and count (8),
    // "<s>" (8 + 3), then 5 of the next length's 8 bytes. The parser sees first that 3 strings
    // (at least 8 bytes each) cannot fit in the 16 bytes left after the array header.
    let cut = tokens.value_offset + 4 + 8 + 8 + 3 + 5;
    let path = scratch_file("cut-in-tokens.gguf", &bytes[..cut as usize]);
    let expected = format!(
        "error: key \"tokenizer.ggml.tokens\": array header 3 needs at least 24 bytes but only 16 \
         remain at byte {}\n",
        tokens.value_offset
    );
    let run = miniquant(&["validate", &path]);
    assert_eq!((run.code, run.stderr.as_str()), (1, expected.as_str()));
    let run = miniquant(&["inspect", &path]);
    assert_eq!((run.code, run.stderr.as_str()), (1, expected.as_str()));
    let text = run.stdout_text();
    assert!(
        text.starts_with("TRUNCATED: file is truncated inside its header"),
        "{text}"
    );
    assert!(text.contains("general.architecture  \"test\""), "{text}");
    assert!(text.contains("data_offset unknown"), "{text}");
}

#[test]
fn a_reader_that_stops_early_is_not_an_error() {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let mut w = GgufWriter::new();
    // Far more text than a pipe buffers.
    for i in 0..20_000u32 {
        w.kv(&format!("key.{i:05}"), Scalar::U32(i));
    }
    let path = scratch_file("many-keys.gguf", &w.to_bytes());
    let mut child = Command::new(env!("CARGO_BIN_EXE_miniquant"))
        .args(["inspect", &path])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 100];
    stdout.read_exact(&mut first).unwrap();
    drop(stdout); // like `| head -c 100`
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&output.stderr), "");
}

#[test]
fn inspect_narrows_to_tensors_keys_or_nothing() {
    let path = scratch_file("narrow-model.gguf", &model());
    let run = miniquant(&["inspect", "--no-tensors", &path]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let text = run.stdout_text();
    assert!(!text.contains("--- tensors"), "{text}");
    assert!(!text.contains("attn_q"), "{text}");
    // The totals stay.
    assert!(
        text.ends_with("all  3 tensors  192 parameters  768 B\n"),
        "{text}"
    );

    let run = miniquant(&["inspect", "--tensor", "blk.*.attn_?.weight", &path]);
    let text = run.stdout_text();
    let listed: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("--- tensors"))
        .skip(1)
        .take_while(|l| !l.starts_with("--- "))
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(listed, ["blk.0.attn_q.weight", "blk.0.attn_k.weight"]);
    assert!(
        text.ends_with("all  2 tensors  128 parameters  512 B\n"),
        "{text}"
    );

    let run = miniquant(&["inspect", "--key", "tokenizer.ggml.tokens", &path]);
    assert_eq!(run.stdout_text(), "<s>\n</s>\nhello\n");
    let run = miniquant(&["inspect", "--key", "general.architecture", &path]);
    assert_eq!(run.stdout_text(), "test\n");
    let run = miniquant(&["inspect", "--key", "nope", &path]);
    assert_eq!(
        (run.code, run.stderr),
        (1, format!("error: no metadata key \"nope\" in {path:?}\n"))
    );

    let run = miniquant(&["inspect", "--time", &path]);
    assert!(run.stderr.starts_with("header read in "), "{}", run.stderr);
    assert_eq!(run.stdout, miniquant(&["inspect", &path]).stdout);
}

#[test]
fn error_debug_is_short() {
    // A `?` in a user's `main` prints Debug: it must not dump the whole report or index.
    let bytes = model();
    let path = scratch_file("debug-cut.gguf", &bytes[..bytes.len() - 600]);
    let e = miniquant_std::GgufFile::open(&path).unwrap_err();
    // It is the file's path and the one line the CLI prints for a truncated file, not the
    // report's fields.
    let debug = format!("{e:?}");
    assert_eq!(debug, e.to_string());
    assert!(
        debug.starts_with(&format!("{path:?}: file is truncated: it has "))
            && !debug.contains('\n'),
        "{debug}"
    );
    assert!(debug.len() < 300, "{debug}");
    let file = miniquant_std::GgufFile::open(scratch_file("debug-ok.gguf", &bytes)).unwrap();
    let debug = format!("{file:?}");
    assert!(!debug.contains("hello"), "{debug}");
    let e = file.tensor_data("nope").unwrap_err();
    assert!(
        matches!(e.kind(), miniquant_std::ErrorKind::NoSuchTensor(name) if name == "nope"),
        "{e:?}"
    );
}

/// A GGUF input that is an endless stream of something else (`/dev/zero`, `yes |`) is refused at
/// its first bytes. It used to be read whole into memory first: gigabytes a second until the
/// machine ran out, and never an answer.
#[cfg(target_os = "linux")]
#[test]
fn an_endless_stream_that_is_not_gguf_is_refused_at_once() {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    const DEADLINE: Duration = Duration::from_secs(20);
    let out = scratch_dir().join("endless-out.gguf");
    let out = out.to_str().unwrap();
    let raw_out = scratch_dir().join("endless-out.bin");
    let raw_out = raw_out.to_str().unwrap();
    let tiny = scratch_dir().join("endless-tiny.gguf");
    std::fs::write(&tiny, miniquant_std::example::tiny_gguf()).unwrap();
    let tiny = tiny.to_str().unwrap();
    // The array inputs (f32 values, raw blocks) read a stream up to a bound, then say so.
    let too_long = "is a stream longer than 256 MiB";
    for (args, expected) in [
        (&["inspect", "/dev/zero"][..], "magic"),
        (&["validate", "/dev/zero"], "magic"),
        (&["dequant", "/dev/zero", "x", "-o", "-"], "magic"),
        (&["extract", "/dev/zero", out], "magic"),
        (&["inspect", "-"], "magic"),
        (
            &["quantize-raw", "/dev/zero", raw_out, "--type", "q8_0"],
            too_long,
        ),
        (
            &["dequant-raw", "/dev/zero", "--type", "q8_0", raw_out],
            too_long,
        ),
        (
            &[
                "matvec",
                tiny,
                "blk.0.ffn_up.weight",
                "/dev/zero",
                "-o",
                raw_out,
            ],
            too_long,
        ),
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_miniquant"))
            .args(args)
            .stdin(std::fs::File::open("/dev/zero").unwrap())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            // The bug filled memory at gigabytes a second: stop it at 1 GiB.
            let status = std::fs::read_to_string(format!("/proc/{}/status", child.id()));
            let rss_kib = status.ok().and_then(|s| {
                let line = s.lines().find(|l| l.starts_with("VmRSS:"))?.to_owned();
                line.split_whitespace().nth(1)?.parse::<u64>().ok()
            });
            if start.elapsed() > DEADLINE || rss_kib.is_some_and(|kib| kib > 1 << 20) {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "{args:?}: still reading after {:?}, {rss_kib:?} KiB",
                    start.elapsed()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
        assert_eq!(status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}
