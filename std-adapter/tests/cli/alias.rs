//! An output that is one of the command's inputs (by name, through a symlink or a hard link, or
//! stdout redirected onto it) is refused before anything is written: exit 2, one clear line, the
//! input untouched. `requantize` and `extract` may replace their input: atomically.

#![cfg(unix)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{assert_no_panic, miniquant_in, scratch_dir, Run};

/// A directory of its own holding `m.gguf` (the example model), `x.f32` (256 values, a vector
/// for `blk.0.ffn_down.weight`) and `b.q8`
/// (one Q8_0 block).
fn workspace(name: &str) -> PathBuf {
    let dir = scratch_dir().join(format!("alias-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("m.gguf"), miniquant_std::example::tiny_gguf()).unwrap();
    let x: Vec<u8> = (0..256).flat_map(|i| (i as f32).to_le_bytes()).collect();
    std::fs::write(dir.join("x.f32"), x).unwrap();
    std::fs::write(dir.join("b.q8"), [0u8; 34]).unwrap();
    dir
}

fn assert_refused(run: &Run, output: &str, input: &str) {
    assert_no_panic(run);
    assert_eq!(run.code, 2, "stderr: {}", run.stderr);
    let expected = format!("error: the output {output} is the input \"{input}\"");
    assert!(
        run.stderr.starts_with(&expected) && run.stderr.lines().count() == 1,
        "expected one line starting {expected:?}, got {:?}",
        run.stderr
    );
}

/// Every file in `dir` with its content, to prove nothing changed.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let content = std::fs::read(e.path()).unwrap_or_default();
            (e.file_name().to_string_lossy().into_owned(), content)
        })
        .collect();
    files.sort();
    files
}

/// Runs each command line (split at spaces) in `dir`: each must be refused as writing `output`
/// onto `input`, and leave every file of `dir` as it was.
fn assert_all_refused(dir: &Path, cases: &[(&str, &str, &str)]) {
    let before = snapshot(dir);
    for (line, output, input) in cases {
        let args: Vec<&str> = line.split(' ').collect();
        let run = miniquant_in(dir, &args);
        assert_refused(&run, &format!("{output:?}"), input);
        assert_eq!(snapshot(dir), before, "`{line}` changed a file");
    }
}

#[test]
fn every_writing_command_refuses_its_input_as_output() {
    let dir = workspace("by-name");
    assert_all_refused(
        &dir,
        &[
            (
                "dequant m.gguf blk.0.attn_q.weight -o m.gguf",
                "m.gguf",
                "m.gguf",
            ),
            (
                "dequant m.gguf blk.0.attn_q.weight --format npy -o ./m.gguf",
                "./m.gguf",
                "m.gguf",
            ),
            (
                "matvec m.gguf blk.0.ffn_down.weight x.f32 -o m.gguf",
                "m.gguf",
                "m.gguf",
            ),
            (
                "matvec m.gguf blk.0.ffn_down.weight x.f32 -o x.f32",
                "x.f32",
                "x.f32",
            ),
            ("quantize-raw --type q8_0 x.f32 x.f32", "x.f32", "x.f32"),
            ("dequant-raw --type q8_0 b.q8 b.q8", "b.q8", "b.q8"),
        ],
    );
}

#[test]
fn links_to_the_input_are_refused_too() {
    let dir = workspace("links");
    std::os::unix::fs::symlink("m.gguf", dir.join("sym.gguf")).unwrap();
    std::fs::hard_link(dir.join("m.gguf"), dir.join("hard.gguf")).unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    std::os::unix::fs::symlink("../x.f32", dir.join("sub/x-link.f32")).unwrap();
    assert_all_refused(
        &dir,
        &[
            (
                "dequant m.gguf blk.0.attn_q.weight -o sym.gguf",
                "sym.gguf",
                "m.gguf",
            ),
            (
                "dequant sym.gguf blk.0.attn_q.weight -o m.gguf",
                "m.gguf",
                "sym.gguf",
            ),
            (
                "dequant m.gguf blk.0.attn_q.weight -o hard.gguf",
                "hard.gguf",
                "m.gguf",
            ),
            (
                "matvec hard.gguf blk.0.ffn_down.weight x.f32 -o sym.gguf",
                "sym.gguf",
                "hard.gguf",
            ),
            (
                "quantize-raw --type q8_0 sub/x-link.f32 x.f32",
                "x.f32",
                "sub/x-link.f32",
            ),
        ],
    );
}

#[test]
fn stdout_appended_to_the_input_is_refused() {
    let dir = workspace("stdout");
    let before = std::fs::read(dir.join("m.gguf")).unwrap();
    let appending = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.join("m.gguf"))
        .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_miniquant"))
        .args(["dequant", "m.gguf", "blk.0.attn_q.weight", "-o", "-"])
        .current_dir(&dir)
        .stdout(Stdio::from(appending))
        .output()
        .unwrap();
    let run = Run {
        code: output.status.code().expect("exited"),
        stdout: output.stdout,
        stderr: String::from_utf8(output.stderr).unwrap(),
    };
    assert_refused(&run, "stdout", "m.gguf");
    assert_eq!(std::fs::read(dir.join("m.gguf")).unwrap(), before);
}

#[test]
fn requantize_and_extract_replace_their_input_atomically() {
    let dir = workspace("in-place");
    let original = std::fs::read(dir.join("m.gguf")).unwrap();
    // Extract with no selection is byte-identical, so in place it changes nothing.
    let run = miniquant_in(&dir, &["extract", "m.gguf", "m.gguf"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(std::fs::read(dir.join("m.gguf")).unwrap(), original);
    let run = miniquant_in(
        &dir,
        &[
            "extract",
            "m.gguf",
            "m.gguf",
            "--tensor",
            "blk.0.attn_q.weight",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let kept = miniquant_std::GgufFile::open(dir.join("m.gguf")).expect("valid");
    assert_eq!(kept.index().tensors().len(), 1);

    std::fs::write(dir.join("m.gguf"), &original).unwrap();
    let run = miniquant_in(&dir, &["requantize", "m.gguf", "m.gguf", "--type", "f16"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let requantized = miniquant_std::GgufFile::open(dir.join("m.gguf")).expect("valid");
    assert!(requantized
        .index()
        .tensors()
        .iter()
        .all(|t| t.ggml_type == miniquant::GgmlType::F16 || t.ne().len() == 1));
    // No temporary left beside it.
    let names: Vec<_> = snapshot(&dir).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["b.q8", "m.gguf", "x.f32"]);

    for command in ["requantize", "extract"] {
        let help = miniquant_in(&dir, &[command, "--help"]);
        assert!(
            help.stdout_text()
                .contains("OUTPUT may be INPUT (replaced atomically"),
            "{command} --help: {}",
            help.stdout_text()
        );
    }
}

/// An output path that exists and is no regular file (`/dev/stdout`, a FIFO) is written in place,
/// as `-` is: there is nothing to write aside and rename (which would replace a FIFO by a file).
#[test]
fn dev_stdout_and_fifos_are_written_like_a_dash() {
    let dir = workspace("dev-stdout");
    let dequant_to = |output: &str| {
        let run = Command::new(env!("CARGO_BIN_EXE_miniquant"))
            .args(["dequant", "m.gguf", "blk.0.attn_q.weight", "-o", output])
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(run.status.success(), "{output}: {run:?}");
        run.stdout
    };
    let values = dequant_to("-");
    assert_eq!(values.len(), 128 * 4);
    assert_eq!(dequant_to("/dev/stdout"), values);
    let names: Vec<_> = snapshot(&dir).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["b.q8", "m.gguf", "x.f32"]);

    // `requantize` into a FIFO: a reader gets the file, and the FIFO stays a FIFO.
    let fifo = dir.join("fifo");
    let (fifo_type, mode) = (rustix::fs::FileType::Fifo, rustix::fs::Mode::from(0o644));
    rustix::fs::mknodat(rustix::fs::CWD, &fifo, fifo_type, mode, 0).unwrap();
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    let run = miniquant_in(&dir, &["requantize", "m.gguf", "fifo", "--type", "f16"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // Checked first: were it replaced by a file, the reader would wait for a writer forever.
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    let streamed = reader.join().unwrap();
    let run = miniquant_in(
        &dir,
        &["requantize", "m.gguf", "file.gguf", "--type", "f16"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(streamed, std::fs::read(dir.join("file.gguf")).unwrap());
}

/// An output path that is a symlink is written through it, as a shell's `>` would: the file it
/// points to gets the output and the link stays a link. (The output used to be renamed over the
/// link, turning it into a file and leaving the file it pointed to as it was; so `requantize m.gguf
/// link-to-m.gguf` left m.gguf unchanged, and `requantize m.gguf /proc/self/fd/N` failed with
/// "cannot create": no such file.)
#[test]
fn an_output_through_a_symlink_replaces_the_file_it_points_to() {
    let dir = workspace("through-symlink");
    let original = std::fs::read(dir.join("m.gguf")).unwrap();
    std::os::unix::fs::symlink("m.gguf", dir.join("to-m.gguf")).unwrap();
    std::fs::create_dir(dir.join("store")).unwrap();
    std::fs::write(dir.join("store/old.f32"), b"old").unwrap();
    std::os::unix::fs::symlink("store/old.f32", dir.join("to-old.f32")).unwrap();

    let run = miniquant_in(
        &dir,
        &["requantize", "m.gguf", "to-m.gguf", "--type", "f16"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(dir.join("to-m.gguf").is_symlink(), "the link became a file");
    let requantized = std::fs::read(dir.join("m.gguf")).unwrap();
    assert_ne!(
        requantized, original,
        "the file the link points to is unchanged"
    );

    let run = miniquant_in(
        &dir,
        &[
            "dequant",
            "m.gguf",
            "blk.0.attn_q.weight",
            "-o",
            "to-old.f32",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        dir.join("to-old.f32").is_symlink(),
        "the link became a file"
    );
    assert_eq!(
        std::fs::read(dir.join("store/old.f32")).unwrap().len(),
        128 * 4
    );
    let names: Vec<_> = snapshot(&dir).into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "b.q8",
            "m.gguf",
            "store",
            "to-m.gguf",
            "to-old.f32",
            "x.f32"
        ]
    );
}

/// An input read from standard input (`-`) redirected from the output's file is refused too: the
/// command used to read the model from stdin, then replace it with its output (`dequant - T -o
/// m.gguf < m.gguf` left 192 bytes of f32 where the model was, exit 0).
#[test]
fn stdin_redirected_from_the_output_is_refused() {
    let dir = workspace("stdin");
    let before = snapshot(&dir);
    for args in [
        &["dequant", "-", "blk.0.attn_q.weight", "-o", "m.gguf"][..],
        &["convert-endian", "-", "m.gguf", "--order", "big"],
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_miniquant"))
            .args(args)
            .current_dir(&dir)
            .stdin(std::fs::File::open(dir.join("m.gguf")).unwrap())
            .output()
            .unwrap();
        let run = Run {
            code: output.status.code().expect("exited"),
            stdout: output.stdout,
            stderr: String::from_utf8(output.stderr).unwrap(),
        };
        assert_refused(&run, "\"m.gguf\"", "-");
        assert!(snapshot(&dir) == before, "{args:?} changed a file");
    }
}

/// `run --logits` onto the model it reads (by name or through a hard link) is refused before it
/// loads anything, and the model is untouched.
#[test]
fn run_refuses_its_model_as_the_logits_file() {
    let Some(model) = common::cached_model("SmolLM2-135M-Instruct.Q4_1.gguf") else {
        return;
    };
    let dir = scratch_dir().join("alias-run");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    if std::fs::hard_link(&model, dir.join("m.gguf")).is_err() {
        std::fs::copy(&model, dir.join("m.gguf")).unwrap();
    }
    let before = std::fs::read(dir.join("m.gguf")).unwrap();
    for output in ["m.gguf", "./m.gguf"] {
        let run = miniquant_in(
            &dir,
            &[
                "run",
                "m.gguf",
                "--prompt-ids",
                "1",
                "-n",
                "1",
                "--logits",
                output,
            ],
        );
        assert_refused(&run, &format!("{output:?}"), "m.gguf");
    }
    assert!(
        std::fs::read(dir.join("m.gguf")).unwrap() == before,
        "the model changed"
    );
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        1,
        "a file appeared"
    );
}
