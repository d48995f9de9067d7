//! `miniquant --help` written for users, `miniquant completions bash|zsh|fish` and `miniquant man`.

use crate::common;

use common::{assert_no_panic, miniquant, scratch_file};

const COMMANDS: [&str; 10] = [
    "inspect",
    "validate",
    "dequant",
    "quantize-raw",
    "dequant-raw",
    "matvec",
    "extract",
    "requantize",
    "convert-endian",
    "make-example",
];

#[test]
fn help_says_what_the_tool_does_with_one_line_per_command_and_examples() {
    let run = miniquant(&["--help"]);
    assert_eq!(run.code, 0);
    let text = run.stdout_text();
    assert!(
        text.starts_with("Inspect, check, dequantize and requantize GGUF model files"),
        "{text}"
    );
    assert!(!text.contains("std adapter"), "{text}");
    for command in COMMANDS {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{command} ")))
            .unwrap_or_else(|| panic!("{command} missing:\n{text}"));
        assert!(
            line.len() <= 100,
            "{command}'s summary is not one short line: {line}"
        );
    }
    assert!(
        text.contains("Examples:\n  miniquant inspect model.gguf"),
        "{text}"
    );
    // The short help keeps to the summary too.
    let short = miniquant(&["-h"]).stdout_text();
    assert!(short.lines().count() < text.lines().count());
}

#[test]
fn completions_are_scripts_the_shells_accept() {
    for shell in ["bash", "zsh", "fish"] {
        let run = miniquant(&["completions", shell]);
        assert_no_panic(&run);
        assert_eq!(run.code, 0, "{shell}: {}", run.stderr);
        let script = run.stdout_text();
        for command in COMMANDS {
            assert!(script.contains(command), "{shell}: no {command}");
        }
        assert!(script.contains("allow-non-finite"), "{shell}");
        // Where the shell is installed, it parses the script without running it.
        let path = scratch_file(&format!("completion.{shell}"), script.as_bytes());
        match std::process::Command::new(shell)
            .arg("-n")
            .arg(&path)
            .output()
        {
            Ok(out) => assert!(
                out.status.success(),
                "{shell} -n: {}",
                String::from_utf8_lossy(&out.stderr)
            ),
            Err(e) => eprintln!("{shell} not installed ({e}): syntax not checked"),
        }
    }
    let run = miniquant(&["completions", "tcsh"]);
    assert_eq!(run.code, 2);
}

#[test]
fn man_page_is_roff_with_every_command() {
    let run = miniquant(&["man"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let page = run.stdout_text();
    assert!(page.contains(".TH miniquant 1"), "{page}");
    for command in COMMANDS {
        // roff writes a hyphen as `\-`.
        assert!(page.contains(&command.replace('-', "\\-")), "no {command}");
    }
    // Where man(1) is installed, it formats the page without warnings.
    let path = scratch_file("miniquant.1", page.as_bytes());
    if let Ok(out) = std::process::Command::new("man")
        .args(["--warnings", "-l", &path])
        .env("MANPAGER", "cat")
        .output()
    {
        if out.status.success() {
            assert!(
                String::from_utf8_lossy(&out.stdout).contains("Inspect, check, dequantize"),
                "{}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
    }
}
