//! The library: `Index` from bytes and from a reader agree (strings reassembled from pieces), offsets
//! and lookups, partial indexes after errors, and zero-copy tensor data from `GgufFile`.

use crate::common;

use std::io::Read;

use miniquant::gguf::{Limits, Scalar};
use miniquant::{Error, GgmlType};
use miniquant_std::writer::GgufWriter;
use miniquant_std::{Array, ErrorKind, GgufFile, Index, ReaderOptions, Value};

/// A file whose string values are longer than the smallest reader buffer (64 bytes), with multi-byte
/// characters that the buffer boundaries cut through.
fn long_strings_file() -> Vec<u8> {
    let long = "ab€😀".repeat(40); // 4 + 3 + 4 bytes per repeat: boundaries fall inside characters
    let mut w = GgufWriter::new();
    w.kv("long", Value::String(long.clone()))
        .kv("n", Scalar::U32(7))
        .kv(
            "list",
            [long.as_str(), "", "x", long.as_str()]
                .into_iter()
                .collect::<Array>(),
        )
        .kv(
            "nested",
            Array::Array(vec![
                [long.as_str()].into_iter().collect::<Array>(),
                Array::F64(vec![0.5]),
            ]),
        )
        .kv("f", Array::F32(vec![f32::from_bits(0x7fc0_1234), -0.0]))
        .tensor("a", GgmlType::F32, &[4], vec![1; 16])
        .tensor("b", GgmlType::Q8_0, &[32, 2], vec![2; 68]);
    w.to_bytes()
}

/// A reader that hands out at most `step` bytes per call and is interrupted before every other read.
struct Trickle<'a> {
    bytes: &'a [u8],
    step: usize,
    interrupt: bool,
}

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.interrupt = !self.interrupt;
        if self.interrupt {
            return Err(std::io::ErrorKind::Interrupted.into());
        }
        let n = self.step.min(buf.len()).min(self.bytes.len());
        buf[..n].copy_from_slice(&self.bytes[..n]);
        self.bytes = &self.bytes[n..];
        Ok(n)
    }
}

fn assert_same_index(a: &Index, b: &Index) {
    assert_eq!(a.version(), b.version());
    assert_eq!(a.alignment(), b.alignment());
    assert_eq!(a.data_offset(), b.data_offset());
    assert_eq!(a.metadata().len(), b.metadata().len());
    for (x, y) in a.metadata().iter().zip(b.metadata()) {
        assert_eq!(
            (&x.key, x.key_offset, x.value_offset),
            (&y.key, y.key_offset, y.value_offset)
        );
        assert!(
            x.value.bits_eq(&y.value),
            "{}: {:?} vs {:?}",
            x.key,
            x.value,
            y.value
        );
    }
    assert_eq!(a.tensors(), b.tensors());
}

#[test]
fn reader_with_a_tiny_buffer_builds_the_same_index_as_bytes() {
    let bytes = long_strings_file();
    let from_bytes = Index::from_bytes(&bytes).unwrap();
    for (buffer_bytes, step) in [(64, 1), (64, 7), (100, 1000), (1 << 17, 1 << 20)] {
        let reader = Trickle {
            bytes: &bytes,
            step,
            interrupt: false,
        };
        let options = ReaderOptions {
            buffer_bytes,
            ..ReaderOptions::default()
        };
        let from_reader = Index::from_reader_with(reader, options).unwrap();
        assert_same_index(&from_bytes, &from_reader);
        assert_eq!(from_reader.file_size(), None);
    }
    let sized = ReaderOptions {
        total_len: Some(bytes.len() as u64),
        ..ReaderOptions::default()
    };
    let from_reader = Index::from_reader_with(&bytes[..], sized).unwrap();
    assert_eq!(from_reader.file_size(), Some(bytes.len() as u64));
    assert_same_index(&from_bytes, &Index::from_reader(&bytes[..]).unwrap());
}

#[test]
fn values_offsets_and_lookups() {
    let bytes = long_strings_file();
    let index = Index::from_bytes(&bytes).unwrap();
    let long = "ab€😀".repeat(40);
    assert_eq!(
        index.get("long").and_then(Value::as_str),
        Some(long.as_str())
    );
    assert_eq!(
        index.get("n").and_then(Value::as_scalar),
        Some(Scalar::U32(7))
    );
    let list = index.get("list").and_then(Value::as_array).unwrap();
    let Array::String(list) = list else {
        panic!("{list:?}")
    };
    assert_eq!(
        list.iter().collect::<Vec<_>>(),
        [long.as_str(), "", "x", long.as_str()]
    );
    // Offsets: header 24; "long" is 8 + 4 + 4 bytes before its value.
    let first = &index.metadata()[0];
    assert_eq!((first.key_offset, first.value_offset), (24, 24 + 8 + 4 + 4));
    let second = &index.metadata()[1];
    assert_eq!(
        second.key_offset,
        first.value_offset + 8 + long.len() as u64
    );
    assert_eq!(second.value_offset, second.key_offset + 8 + 1 + 4);
    let b = index.tensor("b").unwrap();
    assert_eq!(
        (b.ne(), b.shape(), b.bytes, b.elements),
        (&[32, 2][..], vec![2, 32], 68, 64)
    );
    assert_eq!(b.offset, 32);
    assert!(index.tensor("c").is_none() && index.get("c").is_none());
    assert!(index.duplicates().is_empty());
}

#[test]
fn duplicate_lookups_return_the_first_occurrence() {
    let mut w = GgufWriter::new();
    w.kv("k", Scalar::U8(1)).kv("k", Scalar::U8(2));
    let index = Index::from_bytes(&w.to_bytes()).unwrap();
    assert_eq!(
        index.get("k").and_then(Value::as_scalar),
        Some(Scalar::U8(1))
    );
    assert_eq!(index.metadata().len(), 2);
    assert_eq!(
        index.duplicates(),
        [Error::DuplicateKey { offset: 24 + 14 }]
    );
}

#[test]
fn a_parse_error_keeps_what_was_read() {
    let bytes = long_strings_file();
    let full = Index::from_bytes(&bytes).unwrap();
    let cut = full.metadata()[2].value_offset as usize + 3;
    let (partial, error) = Index::from_bytes_partial(&bytes[..cut], Limits::DEFAULT);
    assert!(!partial.is_complete());
    assert_eq!(
        partial
            .metadata()
            .iter()
            .map(|e| e.key.as_str())
            .collect::<Vec<_>>(),
        ["long", "n"]
    );
    assert!(
        matches!(
            error,
            Some(Error::Truncated { .. }) | Some(Error::ExceedsInput { .. })
        ),
        "{error:?}"
    );
    assert_eq!(
        Index::from_bytes(&bytes[..cut]).unwrap_err(),
        error.unwrap()
    );
}

#[test]
fn a_stream_claiming_a_huge_array_fails_without_allocating_for_it() {
    // No total length is known, so the parser cannot compare the count with the bytes left: the
    // index must not reserve 2^30 elements up front, only hold the few that arrive.
    let mut bytes = b"GGUF\x03\0\0\0".to_vec();
    bytes.extend_from_slice(&0u64.to_le_bytes());
    bytes.extend_from_slice(&1u64.to_le_bytes());
    bytes.extend_from_slice(&1u64.to_le_bytes());
    bytes.push(b'a');
    bytes.extend_from_slice(&9u32.to_le_bytes()); // array
    bytes.extend_from_slice(&10u32.to_le_bytes()); // of u64
    bytes.extend_from_slice(&(1u64 << 30).to_le_bytes());
    bytes.extend_from_slice(&[0; 100]);
    let err = Index::from_reader(&bytes[..]).unwrap_err();
    assert!(matches!(err, Error::Truncated { .. }), "{err}");
}

#[test]
fn tensor_data_is_borrowed_from_the_mapping() {
    let bytes = long_strings_file();
    let path = common::scratch_file("open.gguf", &bytes);
    let file = GgufFile::open(&path).unwrap();
    // The nested array is the one layout ggml would refuse.
    assert!(
        matches!(
            file.warnings(),
            [miniquant_std::Warning::NestedArray { .. }]
        ),
        "{:?}",
        file.warnings()
    );
    let index = file.index();
    assert_eq!(index.file_size(), Some(bytes.len() as u64));
    let b = file.tensor_data("b").unwrap();
    assert_eq!(b, &[2u8; 68][..]);
    let start = index.data_offset() as usize + 32;
    assert_eq!(b, &bytes[start..start + 68]);
    let mapped = file.bytes().as_ptr_range();
    assert!(
        mapped.contains(&b.as_ptr()),
        "zero copy: the slice points into the mapping"
    );
    let e = file.tensor_data("zzz").unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::NoSuchTensor(name) if name == "zzz"),
        "{e:?}"
    );
    assert_eq!(e.kind().to_string(), "no tensor named \"zzz\"");
}

#[test]
fn open_fails_with_every_error_and_open_unchecked_reports_them() {
    let mut w = GgufWriter::new();
    w.kv("k", Scalar::U8(1))
        .kv("k", Scalar::U8(2))
        .tensor("t", GgmlType::F32, &[64], vec![0; 4]);
    let path = common::scratch_file("open-bad.gguf", &w.to_bytes());
    match GgufFile::open(&path).map_err(|e| e.into_kind()) {
        Err(ErrorKind::Invalid(report)) => {
            assert_eq!(report.errors.len(), 2, "{:?}", report.errors);
            assert!(matches!(
                report.errors[0],
                Error::DuplicateKey { offset: 38 }
            ));
            assert!(matches!(report.errors[1], Error::TensorOutOfBounds { .. }));
        }
        other => panic!("{other:?}"),
    }
    let file = GgufFile::open_unchecked(&path).unwrap();
    assert_eq!(file.report().errors.len(), 2);
    // The data check still guards access to the truncated tensor, naming how much is there.
    let cut = file.tensor_data("t").unwrap_err();
    assert!(
        matches!(
            cut.kind(),
            ErrorKind::Cut { name, present: 4, bytes: 256 } if name == "t"
        ),
        "{cut:?}"
    );
    let missing = GgufFile::open("/nonexistent.gguf").unwrap_err();
    assert!(matches!(missing.kind(), ErrorKind::Io(_)), "{missing:?}");
    assert_eq!(
        missing.path(),
        Some(std::path::Path::new("/nonexistent.gguf"))
    );
}

#[test]
fn an_empty_file_is_an_error_not_a_mapping_failure() {
    let path = common::scratch_file("empty.gguf", &[]);
    match GgufFile::open(&path).map_err(|e| e.into_kind()) {
        Err(ErrorKind::Invalid(report)) => assert!(matches!(
            report.errors[..],
            [Error::Truncated { offset: 0, .. }]
        )),
        other => panic!("{other:?}"),
    }
}

/// One error type: an error about a tensor of a file opened by path names the path in its
/// message, and `source()` reaches the underlying error; a file read from a stream has no path.
#[test]
fn errors_name_the_file_and_chain_their_source() {
    use std::error::Error as _;
    let mut w = GgufWriter::new();
    w.tensor("t", GgmlType::F32, &[4], vec![0; 16]);
    let bytes = w.to_bytes();
    let path = common::scratch_file("errors-name-the-file.gguf", &bytes);
    let file = GgufFile::open(&path).unwrap();
    assert_eq!(file.path(), Some(std::path::Path::new(&path)));

    let e = file.matvec_tensor("t", &[1.0; 3], 1).unwrap_err();
    assert_eq!(e.path(), Some(std::path::Path::new(&path)));
    let core = e
        .source()
        .and_then(|s| s.downcast_ref::<Error>())
        .expect("the core error is the source");
    assert!(
        matches!(
            core,
            Error::LengthMismatch {
                expected: 4,
                found: 3
            }
        ),
        "{core:?}"
    );
    assert_eq!(e.to_string(), format!("{path:?}: {core}"));

    let e = file.dequantize_tensor("nope", 1).unwrap_err();
    assert_eq!(e.to_string(), format!("{path:?}: no tensor named \"nope\""));
    assert!(e.source().is_none());

    let missing = format!("{path}.missing");
    let e = GgufFile::open(&missing).unwrap_err();
    let io = e
        .source()
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .expect("the I/O error is the source");
    assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
    assert_eq!(e.to_string(), format!("{missing:?}: {io}"));

    let streamed = GgufFile::from_reader(&bytes[..]).unwrap();
    let e = streamed.tensor_data("nope").unwrap_err();
    assert_eq!(e.path(), None);
    assert_eq!(e.to_string(), "no tensor named \"nope\"");

    // `?` turns a core error into this one (without a path: no file is known).
    fn core_error() -> Result<(), miniquant_std::Error> {
        Err(Error::LevelUnknown)?
    }
    assert!(matches!(
        core_error().unwrap_err().kind(),
        ErrorKind::Gguf(Error::LevelUnknown)
    ));
}
