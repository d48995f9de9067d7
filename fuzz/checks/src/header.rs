//! `header`: arbitrary bytes through the three parser drivers must give the same events (string
//! pieces joined) and the same error, with no panic, hang or stall.
//!
//! Input: four option bytes, then the file. Byte 0 sets the small streaming buffer
//! (64 + 4 * b bytes); bytes 1..=3 are the read and push chunk sizes (1 + b each, cycled).
//!
//! Agreement rules (those of `tests/tests/integration/stream_equivalence.rs`): drivers that know the input
//! length (slice; `Read` and push told it) agree exactly; drivers that do not agree among
//! themselves, and with the first group except after an `ExceedsInput` error, which they cannot
//! see and must follow with a later error after the same events; a small buffer may stop early
//! with `BufferTooSmall`, after a prefix of the same events.

use crate::drive::{self, Outcome};
use miniquant::gguf::Limits;
use miniquant::Error;

const LIMITS: Limits = Limits::DEFAULT;

/// Splits the input into (small buffer length, chunk sizes, file).
pub fn options(data: &[u8]) -> (usize, Vec<usize>, &[u8]) {
    match data {
        [b, c1, c2, c3, file @ ..] => (
            64 + 4 * usize::from(*b),
            vec![
                1 + usize::from(*c1),
                1 + usize::from(*c2),
                1 + usize::from(*c3),
            ],
            file,
        ),
        _ => (64, vec![1], &[]),
    }
}

/// Builds an input of this target from option bytes and a file (for seeds).
pub fn input(options: [u8; 4], file: &[u8]) -> Vec<u8> {
    let mut v = options.to_vec();
    v.extend_from_slice(file);
    v
}

fn same(a: &Outcome, b: &Outcome, what: &str) {
    assert_eq!(a.result(), b.result(), "{what}");
}

/// The check.
pub fn check(data: &[u8]) {
    let (small, sizes, bytes) = options(data);
    let total = Some(bytes.len() as u64);
    let big = bytes.len() + 64;
    let reference = drive::slice(bytes, LIMITS);

    let told_read = drive::read_chunked(bytes, sizes.clone(), big, total, LIMITS);
    same(
        &told_read,
        &reference,
        "Read driver told the length vs slice",
    );
    let told_push = drive::push(bytes, &sizes, big, total, LIMITS);
    same(
        &told_push,
        &reference,
        "push driver told the length vs slice",
    );

    let untold = drive::read_chunked(bytes, vec![big], big, None, LIMITS);
    let untold_read = drive::read_chunked(bytes, sizes.clone(), big, None, LIMITS);
    same(
        &untold_read,
        &untold,
        "Read driver untold, chunked vs whole",
    );
    let untold_push = drive::push(bytes, &sizes, big, None, LIMITS);
    same(&untold_push, &untold, "push driver untold vs Read untold");
    match reference.error {
        Some(Error::ExceedsInput { offset, .. }) => {
            let later = untold
                .error
                .expect("an input too short for a count is an error for every driver");
            assert!(
                later.offset().is_some_and(|o| o >= offset),
                "untold error {later:?} before the slice's {:?}",
                reference.error
            );
            assert!(untold.events.starts_with(&reference.events));
        }
        _ => same(&untold, &reference, "untold drivers vs slice"),
    }

    for (name, outcome) in [
        (
            "Read, small buffer",
            drive::read_chunked(bytes, sizes.clone(), small, total, LIMITS),
        ),
        (
            "push, small buffer",
            drive::push(bytes, &sizes, small, total, LIMITS),
        ),
    ] {
        if outcome.result() != reference.result() {
            assert!(
                matches!(outcome.error, Some(Error::BufferTooSmall { .. })),
                "{name} ({small} bytes): {:?} vs slice {:?}",
                outcome.error,
                reference.error
            );
            assert!(
                reference.events.starts_with(&outcome.events),
                "{name}: events differ before BufferTooSmall"
            );
        }
    }
}
