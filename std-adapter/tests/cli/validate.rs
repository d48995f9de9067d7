//! `miniquant validate` (and `inspect` on broken files): exit codes 0 / 1 / 2 and the exact
//! `error:` / `warning:` lines. Expected byte offsets are worked out by hand from the GGUF layout:
//! a v3 header is 24 bytes; a metadata pair is 8 (key length) + key + 4 (type) + value; a tensor
//! info is 8 (name length) + name + 4 (n_dims) + 8 per dimension + 4 (type) + 8 (offset).

use crate::common;

use common::{assert_no_panic, miniquant, scratch_file};
use miniquant::gguf::Scalar;
use miniquant::GgmlType;
use miniquant_std::writer::GgufWriter;

const HEADER: u64 = 24;
/// A pair with a 1-byte key and a u32 value.
const KV_1_U32: u64 = 8 + 1 + 4 + 4;
/// A tensor info with a 1-byte name and one dimension.
const INFO_1_1D: u64 = 8 + 1 + 4 + 8 + 4 + 8;

fn validate(name: &str, bytes: &[u8]) -> common::Run {
    let path = scratch_file(name, bytes);
    let run = miniquant(&["validate", &path]);
    assert_no_panic(&run);
    run
}

#[test]
fn valid_file_exits_0_with_one_ok_line() {
    let mut w = GgufWriter::new();
    w.kv("a", Scalar::U32(1))
        .tensor("t", GgmlType::F32, &[8], vec![0; 32]);
    let run = validate("valid.gguf", &w.to_bytes());
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stdout_text(),
        "ok: 1 metadata keys, 1 tensors, 0 warnings\n"
    );
    assert_eq!(run.stderr, "");
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        &[][..],
        &["validate"][..],
        &["frobnicate", "x"][..],
        &["quantize-raw", "a", "b"][..],
    ] {
        let run = miniquant(args);
        assert_no_panic(&run);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
    }
}

#[test]
fn missing_file_exits_1() {
    let run = miniquant(&["validate", "/nonexistent/x.gguf"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .starts_with("error: cannot open \"/nonexistent/x.gguf\": "),
        "{}",
        run.stderr
    );
    assert_eq!(run.stderr.lines().count(), 1);
}

#[test]
fn truncated_file_names_the_field_and_offset() {
    let mut w = GgufWriter::new();
    w.kv("a", "hello");
    let bytes = w.to_bytes();
    // Header 24, key "a" (8 + 1 + 4) ends at 37 where the string's 8-byte length starts; keep 3 of them.
    let run = validate("truncated.gguf", &bytes[..40]);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr_lines(),
        // The error is inside the value of key "a": the message names it.
        ["error: key \"a\": input ends inside the string: it needs 8 bytes, 3 remain at byte 37"]
    );
    assert_eq!(run.stdout_text(), "");
}

#[test]
fn every_truncation_of_a_file_is_an_error_line_not_a_panic() {
    let bytes = miniquant_std::example::tiny_gguf();
    let index = miniquant_std::Index::from_bytes(&bytes).unwrap();
    // Cut inside the header and inside the tensor data; each must give error lines only.
    let cuts = [
        0,
        3,
        8,
        23,
        24,
        100,
        500,
        900,
        index.data_offset() as usize - 1,
        index.data_offset() as usize + 10,
        bytes.len() - 1,
    ];
    for cut in cuts {
        let run = validate(&format!("cut-{cut}.gguf"), &bytes[..cut]);
        assert_eq!(run.code, 1, "cut at {cut}: {}", run.stderr);
        assert!(!run.stderr.is_empty());
        for line in run.stderr.lines().filter(|l| !l.starts_with("warning: ")) {
            let (head, offset) = line
                .rsplit_once(" at byte ")
                .unwrap_or_else(|| panic!("cut {cut}: {line}"));
            assert!(head.starts_with("error: "), "cut {cut}: {line}");
            // The offset is not doubled ("... at byte 5 at byte 5").
            let doubled = head
                .rsplit_once(" at byte ")
                .is_some_and(|(_, n)| n.parse::<u64>().is_ok());
            assert!(!doubled, "cut {cut}: {line}");
            assert!(offset.parse::<u64>().is_ok(), "cut {cut}: {line}");
        }
    }
}

#[test]
fn duplicate_key_is_reported_at_its_second_occurrence() {
    let mut w = GgufWriter::new();
    w.kv("a", Scalar::U32(1))
        .kv("b", Scalar::U32(2))
        .kv("a", Scalar::U32(3));
    let run = validate("dup-key.gguf", &w.to_bytes());
    assert_eq!(run.code, 1);
    let second_a = HEADER + 2 * KV_1_U32;
    assert_eq!(
        run.stderr_lines(),
        [format!(
            "error: key \"a\": duplicate metadata key at byte {second_a}"
        )]
    );
}

#[test]
fn duplicate_tensor_name_is_reported() {
    let mut w = GgufWriter::new();
    w.tensor("t", GgmlType::F32, &[8], vec![0; 32])
        .tensor("t", GgmlType::F32, &[8], vec![0; 32]);
    let run = validate("dup-tensor.gguf", &w.to_bytes());
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr_lines(),
        [format!(
            "error: duplicate tensor name at byte {}",
            HEADER + INFO_1_1D
        )]
    );
}

#[test]
fn overlapping_tensors_are_an_error() {
    let mut w = GgufWriter::new();
    w.tensor_at("a", 0, &[16], 0, vec![1; 64])
        .tensor_at("b", 0, &[16], 32, vec![2; 64]);
    let run = validate("overlap.gguf", &w.to_bytes());
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr_lines(),
        [format!(
            "error: tensor data overlaps another tensor's at byte {}",
            HEADER + INFO_1_1D
        )]
    );
}

#[test]
fn tensor_past_the_end_of_the_file_is_an_error() {
    let mut w = GgufWriter::new();
    // 16 f32 = 64 bytes declared, 32 written. Header 24 + info 33 = 57, padded: data at 64.
    w.tensor("a", GgmlType::F32, &[16], vec![0; 32]);
    let bytes = w.to_bytes();
    assert_eq!(bytes.len(), 96);
    let run = validate("past-eof.gguf", &bytes);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr_lines(),
        ["error: file is truncated: it has 96 of the 128 bytes its header and tensors need; the first tensor cut is \"a\" (its data starts at offset 64) at byte 24"]
    );
}

#[test]
fn tensor_offset_near_u64_max_does_not_wrap() {
    let mut w = GgufWriter::new();
    // The parser accepts offset + bytes < 2^64; adding the data section offset would wrap.
    let offset = u64::MAX - 64 - 31;
    w.tensor_at("a", 0, &[8], offset & !31, Vec::new());
    let run = validate("wrap.gguf", &w.to_bytes());
    assert_eq!(run.code, 1);
    let errors: Vec<_> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("error: "))
        .collect();
    assert_eq!(
        errors,
        [format!(
            "error: tensor element count, byte count or end offset overflows u64 at byte {HEADER}"
        )]
    );
}

#[test]
fn all_problems_are_reported_in_offset_order() {
    let mut w = GgufWriter::new();
    w.kv("a", Scalar::U32(1)).kv("a", Scalar::U32(2));
    w.tensor_at("x", 0, &[16], 0, vec![1; 64]); // 0..64
    w.tensor_at("y", 0, &[16], 32, vec![2; 64]); // overlaps x
    w.tensor_at("z", 0, &[16], 4096, Vec::new()); // past the end
    let run = validate("many.gguf", &w.to_bytes());
    assert_eq!(run.code, 1);
    let errors: Vec<_> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("error: "))
        .collect();
    let infos = HEADER + 2 * KV_1_U32;
    let data_offset = (infos + 3 * INFO_1_1D).div_ceil(32) * 32;
    let file_len = data_offset + 32 + 64;
    assert_eq!(
        errors,
        [
            format!("error: key \"a\": duplicate metadata key at byte {}", HEADER + KV_1_U32),
            format!("error: tensor data overlaps another tensor's at byte {}", infos + INFO_1_1D),
            format!(
                "error: file is truncated: it has {file_len} of the {} bytes its header and tensors need; the first tensor cut is \"z\" (its data starts at offset {}) at byte {}",
                data_offset + 4096 + 64,
                data_offset + 4096,
                infos + 2 * INFO_1_1D
            ),
        ]
    );
}

#[test]
fn duplicates_before_a_parse_error_are_still_reported() {
    let mut w = GgufWriter::new();
    w.kv("a", Scalar::U32(1))
        .kv("a", Scalar::U32(2))
        .tensor("t", GgmlType::F32, &[8], vec![0; 32]);
    let bytes = w.to_bytes();
    // Cut inside the tensor info's dimension (after 8 + 1 + 4 bytes of length, name and n_dims),
    // late enough that the header's counts still fit the remaining bytes.
    let info = (HEADER + 2 * KV_1_U32) as usize;
    let run = validate("dup-then-cut.gguf", &bytes[..info + 20]);
    assert_eq!(run.code, 1);
    let lines = run.stderr_lines();
    assert_eq!(lines.len(), 2, "{}", run.stderr);
    assert_eq!(
        lines[0],
        format!(
            "error: key \"a\": duplicate metadata key at byte {}",
            HEADER + KV_1_U32
        )
    );
    assert!(
        lines[1].starts_with("error: input ends inside the ")
            && lines[1].ends_with(&format!(" at byte {info}")),
        "{}",
        lines[1]
    );
}

#[test]
fn gaps_and_out_of_order_offsets_are_warnings_with_exit_0() {
    let mut w = GgufWriter::new();
    w.tensor_at("a", 0, &[8], 64, vec![1; 32]); // leaves 0..64 unused
    w.tensor_at("b", 0, &[8], 0, vec![2; 32]); // before a: out of order; a then starts 32 after b's end
    let run = validate("gaps.gguf", &w.to_bytes());
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stdout_text(),
        "ok: 0 metadata keys, 2 tensors, 2 warnings\n"
    );
    assert_eq!(
        run.stderr_lines(),
        [
            format!(
                "warning: 32 unused bytes before the data of tensor \"a\" (ggml requires contiguous tensors) at byte {HEADER}"
            ),
            format!(
                "warning: tensor \"b\" has data offset 0, below the previous tensor's 64 (ggml requires data in directory order) at byte {}",
                HEADER + INFO_1_1D
            ),
        ]
    );
}

#[test]
fn inspect_on_a_broken_file_prints_the_same_error_and_exits_1() {
    let mut w = GgufWriter::new();
    w.kv("a", Scalar::U32(1)).kv("a", Scalar::U32(3));
    let path = scratch_file("dup-inspect.gguf", &w.to_bytes());
    for args in [&["inspect", &path][..], &["inspect", "--json", &path][..]] {
        let run = miniquant(args);
        assert_no_panic(&run);
        assert_eq!(run.code, 1);
        assert_eq!(run.stdout_text(), "");
        assert_eq!(
            run.stderr_lines(),
            [format!(
                "error: key \"a\": duplicate metadata key at byte {}",
                HEADER + KV_1_U32
            )]
        );
    }
}

#[test]
fn two_hundred_thousand_keys_with_one_duplicate() {
    let mut w = GgufWriter::new();
    for i in 0..200_000u32 {
        w.kv(&format!("k{i:06}"), Scalar::U8(i as u8));
    }
    w.kv("k100000", Scalar::U8(0));
    // Each pair: 8 + 7 + 4 + 1 = 20 bytes.
    let run = validate("200k.gguf", &w.to_bytes());
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr_lines(),
        [format!(
            "error: key \"k100000\": duplicate metadata key at byte {}",
            HEADER + 200_000 * 20
        )]
    );
}

#[test]
fn hostile_headers_give_one_error_line() {
    let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
    // Counts far beyond the file.
    let mut huge_counts = b"GGUF\x03\0\0\0".to_vec();
    huge_counts.extend_from_slice(&(1u64 << 40).to_le_bytes());
    huge_counts.extend_from_slice(&(1u64 << 62).to_le_bytes());
    cases.push(("huge-counts", huge_counts));
    // A u8 array claiming 2^62 elements.
    let mut huge_array = b"GGUF\x03\0\0\0".to_vec();
    huge_array.extend_from_slice(&0u64.to_le_bytes());
    huge_array.extend_from_slice(&1u64.to_le_bytes());
    huge_array.extend_from_slice(&1u64.to_le_bytes());
    huge_array.push(b'a');
    huge_array.extend_from_slice(&9u32.to_le_bytes());
    huge_array.extend_from_slice(&0u32.to_le_bytes());
    huge_array.extend_from_slice(&(1u64 << 62).to_le_bytes());
    cases.push(("huge-array", huge_array));
    // Arrays nested 100000 deep.
    let mut deep = b"GGUF\x03\0\0\0".to_vec();
    deep.extend_from_slice(&0u64.to_le_bytes());
    deep.extend_from_slice(&1u64.to_le_bytes());
    deep.extend_from_slice(&1u64.to_le_bytes());
    deep.push(b'a');
    deep.extend_from_slice(&9u32.to_le_bytes());
    for _ in 0..100_000 {
        deep.extend_from_slice(&9u32.to_le_bytes());
        deep.extend_from_slice(&1u64.to_le_bytes());
    }
    cases.push(("deep", deep));
    cases.push(("empty", Vec::new()));
    cases.push(("not-gguf", b"hello world, this is not a model".to_vec()));
    for (name, bytes) in cases {
        let run = validate(&format!("hostile-{name}.gguf"), &bytes);
        assert_eq!(run.code, 1, "{name}: {}", run.stderr);
        let lines = run.stderr_lines();
        assert_eq!(lines.len(), 1, "{name}: {}", run.stderr);
        assert!(
            lines[0].starts_with("error: ") && lines[0].contains(" at byte "),
            "{name}: {}",
            lines[0]
        );
    }
}

/// The case: a Q8_0 tensor whose f16 scale is NaN passes the header checks; `--data`
/// names the tensor, row and block, and the byte where the block starts.
#[test]
fn data_check_names_the_tensor_row_and_block_of_a_nan_scale() {
    let mut q8_0 = vec![0u8; 4 * 34]; // 2 rows of 64 values: 2 blocks per row
    q8_0[3 * 34..3 * 34 + 2].copy_from_slice(&0x7e00u16.to_le_bytes());
    let mut w = GgufWriter::new();
    w.tensor("clean", GgmlType::F32, &[4], vec![0; 16])
        .tensor("w", GgmlType::Q8_0, &[64, 2], q8_0);
    let bytes = w.to_bytes();
    let path = scratch_file("nan-scale.gguf", &bytes);
    let plain = miniquant(&["validate", &path]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);

    let run = miniquant(&["validate", "--data", &path]);
    assert_no_panic(&run);
    assert_eq!(run.code, 1, "{}", run.stdout_text());
    let index = miniquant_std::Index::from_bytes(&bytes).unwrap();
    let w = index.tensor("w").unwrap();
    let block_offset = index.data_range(w).unwrap().start + 3 * 34;
    assert_eq!(
        run.stderr,
        format!(
            "error: tensor \"w\" (Q8_0): row 1, block 1 (columns 32..=63): d is NaN \
             (ggml_validate_row_data refuses it) at byte {block_offset}\n"
        )
    );

    // An F32 infinity: row and column.
    let mut values = vec![0u8; 4 * 6];
    values[4 * 4..4 * 5].copy_from_slice(&f32::NEG_INFINITY.to_le_bytes());
    let mut w = GgufWriter::new();
    w.tensor("norm", GgmlType::F32, &[3, 2], values);
    let run = miniquant(&[
        "validate",
        "--data",
        &scratch_file("inf.gguf", &w.to_bytes()),
    ]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .starts_with("error: tensor \"norm\" (F32): row 1, column 1: value is infinite"),
        "{}",
        run.stderr
    );

    // A clean file says what was read.
    let mut w = GgufWriter::new();
    w.tensor("t", GgmlType::F32, &[8], vec![0; 32]);
    let run = miniquant(&[
        "validate",
        "--data",
        &scratch_file("clean.gguf", &w.to_bytes()),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stdout_text(),
        "ok: 0 metadata keys, 1 tensors, 0 warnings; data: 32 bytes, no NaN or infinite value or \
         scale\n"
    );
}

/// A tensor or key count off by one makes the parser read data or a tensor info as something else,
/// and the error alone ("limit max_key_bytes exceeded: found <huge>") does not say why: the hint
/// line names the count and the value with which the header parses.
#[test]
fn a_count_off_by_one_is_named_in_a_hint() {
    let mut w = GgufWriter::new();
    w.kv("general.architecture", "llama")
        .kv("a", Scalar::U32(7))
        .tensor("w", GgmlType::F32, &[8], vec![0xab; 32])
        .tensor("v", GgmlType::F32, &[4], vec![0xcd; 16]);
    let bytes = w.to_bytes();
    for (at, declared, fits, noun, field) in [
        (8, 3, 2, "tensors", "tensor"),
        (16, 3, 2, "metadata keys", "metadata key"),
        (16, 1, 2, "metadata keys", "metadata key"),
    ] {
        let mut wrong = bytes.clone();
        wrong[at..at + 8].copy_from_slice(&(declared as u64).to_le_bytes());
        let run = validate("count.gguf", &wrong);
        assert_eq!(run.code, 1, "{}", run.stderr);
        let lines = run.stderr_lines();
        assert!(lines[0].starts_with("error: "), "{lines:?}");
        assert_eq!(
            lines[1..],
            [format!(
                "hint: the header declares {declared} {noun}, but with {fits} the whole header \
                 parses and the tensors' data ends where the file does: the {field} count (byte \
                 {at}) is probably off by 1, and the error above is where the parser read past \
                 the real end of the {}",
                if at == 8 {
                    "tensor directory"
                } else {
                    "metadata"
                }
            )],
            "{lines:?}"
        );
    }
}
