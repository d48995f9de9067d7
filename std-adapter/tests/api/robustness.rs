//! Mutated copies of the example file through everything the library does with a header: index from
//! bytes and from a reader, whole-file checks, JSON and text output. Nothing may panic; every input
//! either fails with an error or gives an index whose JSON parses back with the same counts.

use miniquant::gguf::Limits;
use miniquant_std::{format, json, validate, Index, ReaderOptions};

/// A deterministic generator (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn mutate(base: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut bytes = base.to_vec();
    for _ in 0..1 + rng.below(4) {
        match rng.below(4) {
            // Flip a byte.
            0 => {
                let i = rng.below(bytes.len().max(1));
                if let Some(b) = bytes.get_mut(i) {
                    *b ^= 1 << rng.below(8);
                }
            }
            // Write an extreme value over a length or count field.
            1 => {
                let i = rng.below(bytes.len().max(1));
                let value = [0u64, 1, 0xff, u64::MAX, 1 << 62, 1 << 31][rng.below(6)].to_le_bytes();
                for (b, v) in bytes.iter_mut().skip(i).zip(value) {
                    *b = v;
                }
            }
            // Truncate.
            2 => {
                let n = rng.below(bytes.len() + 1);
                bytes.truncate(n);
            }
            // Duplicate a span (keys or tensor infos twice).
            _ => {
                let start = rng.below(bytes.len().max(1));
                let len = rng.below(64);
                let span: Vec<u8> = bytes.iter().skip(start).take(len).copied().collect();
                let at = rng.below(bytes.len() + 1);
                bytes.splice(at..at, span);
            }
        }
    }
    bytes
}

#[test]
fn mutated_headers_never_panic_and_valid_ones_print_valid_json() {
    let base = miniquant_std::example::tiny_gguf();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut failed, mut parsed) = (0, 0);
    for case in 0..3000 {
        let bytes = mutate(&base, &mut rng);
        let (index, error) = Index::from_bytes_partial(&bytes, Limits::DEFAULT);
        let report = validate::check(&index, error);
        // The streaming driver agrees on whether the header parses.
        let options = ReaderOptions {
            buffer_bytes: 64,
            total_len: Some(bytes.len() as u64),
            ..Default::default()
        };
        let streamed = Index::from_reader_with(&bytes[..], options);
        assert_eq!(
            streamed.is_ok(),
            error.is_none(),
            "case {case}: {error:?} vs {:?}",
            streamed.err()
        );
        for e in index.metadata() {
            assert!(!format::value(&e.value).is_empty());
        }
        if error.is_some() {
            assert!(!report.errors.is_empty(), "case {case}");
            failed += 1;
            continue;
        }
        parsed += 1;
        let mut out = Vec::new();
        json::write_index(&index, &mut out).unwrap();
        let back: serde_json::Value =
            serde_json::from_slice(&out).unwrap_or_else(|e| panic!("case {case}: {e}"));
        assert_eq!(
            back["metadata"].as_array().map(Vec::len),
            Some(index.metadata().len()),
            "case {case}"
        );
        assert_eq!(
            back["tensors"].as_array().map(Vec::len),
            Some(index.tensors().len()),
            "case {case}"
        );
    }
    // Both kinds of input were exercised.
    assert!(
        failed > 100 && parsed > 100,
        "failed {failed}, parsed {parsed}"
    );
}
