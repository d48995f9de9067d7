//! Unit tests of the state machine and its drivers on small hand-built headers.

#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)] // test code: a panic is a failure

use super::*;
use crate::error::{AlignmentProblem, Error, Field, Limit};
use crate::ggml_type::GgmlType;
use proptest::prelude::*;
use std::string::String;
use std::vec::Vec;

/// A little-endian (or big-endian) GGUF byte builder for these tests.
struct Bytes {
    out: Vec<u8>,
    big: bool,
    v1: bool,
}

impl Bytes {
    fn new(version: u32, tensors: u64, kv: u64) -> Self {
        let mut b = Self {
            out: b"GGUF".to_vec(),
            big: false,
            v1: version == 1,
        };
        b.u32(version);
        b.len(tensors);
        b.len(kv);
        b
    }
    fn big(version: u32, tensors: u64, kv: u64) -> Self {
        let mut b = Self {
            out: b"GGUF".to_vec(),
            big: true,
            v1: false,
        };
        b.u32(version);
        b.len(tensors);
        b.len(kv);
        b
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        let bytes = if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        self.out.extend_from_slice(&bytes);
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        let bytes = if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        self.out.extend_from_slice(&bytes);
        self
    }
    fn len(&mut self, v: u64) -> &mut Self {
        if self.v1 {
            self.u32(v as u32)
        } else {
            self.u64(v)
        }
    }
    fn str(&mut self, s: &[u8]) -> &mut Self {
        self.len(s.len() as u64);
        self.out.extend_from_slice(s);
        self
    }
    fn key(&mut self, k: &str, t: ValueType) -> &mut Self {
        self.str(k.as_bytes()).u32(t.code())
    }
    fn tensor(&mut self, name: &str, ne: &[u64], t: u32, offset: u64) -> &mut Self {
        self.str(name.as_bytes()).u32(ne.len() as u32);
        for &d in ne {
            self.len(d);
        }
        self.u32(t).u64(offset)
    }
}

/// An owned, normalised event: string pieces are joined so streams from different drivers compare.
#[derive(Debug, Clone, PartialEq)]
enum Owned {
    Header(Header),
    Key(String, ValueType),
    Scalar(Scalar),
    /// Floats by bits, so that NaN compares equal to itself.
    Float(u64),
    Str(String),
    ArrayStart(ValueType, u64),
    ArrayEnd,
    Tensor(String, Vec<u64>, GgmlType, u64, u64),
    End(DataSection),
}

fn push_event(out: &mut Vec<Owned>, e: &Event<'_>) {
    match *e {
        Event::Header(h) => out.push(Owned::Header(h)),
        Event::Key { key, value_type } => out.push(Owned::Key(key.into(), value_type)),
        Event::Scalar(Scalar::F32(f)) => out.push(Owned::Float(f.to_bits().into())),
        Event::Scalar(Scalar::F64(f)) => out.push(Owned::Float(f.to_bits())),
        Event::Scalar(s) => out.push(Owned::Scalar(s)),
        Event::Scalars(run) => {
            for s in run.iter() {
                push_event(out, &Event::Scalar(s));
            }
        }
        Event::String(p) => {
            if p.at == 0 {
                out.push(Owned::Str(String::new()));
            }
            if let Some(Owned::Str(s)) = out.last_mut() {
                assert_eq!(s.len() as u64, p.at, "pieces arrive in order");
                s.push_str(p.text);
            }
        }
        Event::ArrayStart { element_type, len } => out.push(Owned::ArrayStart(element_type, len)),
        Event::ArrayEnd => out.push(Owned::ArrayEnd),
        Event::Tensor(t) => out.push(Owned::Tensor(
            t.name.into(),
            t.shape().dims().to_vec(),
            t.ggml_type,
            t.offset,
            t.bytes,
        )),
        Event::End(d) => out.push(Owned::End(d)),
    }
}

fn slice_events(data: &[u8]) -> Result<Vec<Owned>, Error> {
    let mut out = Vec::new();
    for e in SliceParser::new(data, Limits::default()) {
        push_event(&mut out, &e?);
    }
    Ok(out)
}

fn push_events(data: &[u8], chunks: &[usize], buf_len: usize) -> Result<Vec<Owned>, Error> {
    let mut buf = std::vec![0u8; buf_len];
    let mut p = PushParser::new(&mut buf, Limits::default())?.with_total_len(data.len() as u64);
    let mut out = Vec::new();
    let mut rest = data;
    let mut sizes = chunks.iter().cycle();
    while !rest.is_empty() {
        let want = (*sizes.next().unwrap_or(&1)).clamp(1, rest.len());
        let mut chunk = &rest[..want];
        rest = &rest[want..];
        while !chunk.is_empty() {
            let n = p.feed(chunk);
            chunk = &chunk[n..];
            while let Some(e) = p.next_event()? {
                push_event(&mut out, &e);
            }
        }
    }
    p.finish();
    while let Some(e) = p.next_event()? {
        push_event(&mut out, &e);
    }
    Ok(out)
}

/// A reader that returns at most `step` bytes per call.
struct Trickle<'a> {
    data: &'a [u8],
    step: usize,
}
impl embedded_io::ErrorType for Trickle<'_> {
    type Error = core::convert::Infallible;
}
impl embedded_io::Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Self::Error> {
        let n = self.step.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

fn read_events(data: &[u8], step: usize, buf_len: usize) -> Result<Vec<Owned>, Error> {
    let mut buf = std::vec![0u8; buf_len];
    let mut p = ReadParser::new(Trickle { data, step }, &mut buf, Limits::default())?
        .with_total_len(data.len() as u64);
    let mut out = Vec::new();
    while let Some(e) = p.next_event()? {
        push_event(&mut out, &e);
    }
    Ok(out)
}

/// A header with every value type, a nested array, a long multi-byte string and three tensors.
fn rich_header() -> Vec<u8> {
    let mut b = Bytes::new(3, 3, 8);
    b.key("general.architecture", ValueType::String)
        .str(b"llama");
    b.key("a.u8", ValueType::U8).out.push(7);
    b.key("a.f32", ValueType::F32).u32(f32::NAN.to_bits());
    b.key("a.bool", ValueType::Bool).out.push(1);
    let long: String = "日本語テキスト-é-".repeat(20);
    b.key("a.long", ValueType::String).str(long.as_bytes());
    b.key("a.nested", ValueType::Array)
        .u32(ValueType::Array.code())
        .u64(2);
    b.u32(ValueType::U8.code()).u64(1).out.push(1);
    b.u32(ValueType::String.code())
        .u64(2)
        .str(b"x")
        .str(long.as_bytes());
    b.key("general.alignment", ValueType::U32).u32(64);
    b.key("a.i64s", ValueType::Array)
        .u32(ValueType::I64.code())
        .u64(3);
    b.u64(u64::MAX).u64(0).u64(5);
    b.tensor("w", &[64, 3], GgmlType::Q8_0.code(), 0);
    b.tensor("b", &[3], GgmlType::F32.code(), 128);
    b.tensor("s", &[], GgmlType::F32.code(), 192);
    b.out
}

#[test]
fn rich_header_events_in_order() {
    let events = slice_events(&rich_header()).unwrap();
    assert!(matches!(
        events[0],
        Owned::Header(Header {
            version: 3,
            tensor_count: 3,
            metadata_count: 8,
            ..
        })
    ));
    assert!(events.contains(&Owned::Key("general.alignment".into(), ValueType::U32)));
    assert!(events.contains(&Owned::Scalar(Scalar::I64(-1))));
    let tensors: Vec<_> = events
        .iter()
        .filter(|e| matches!(e, Owned::Tensor(..)))
        .collect();
    assert_eq!(
        tensors[0],
        &Owned::Tensor("w".into(), std::vec![3, 64], GgmlType::Q8_0, 0, 2 * 34 * 3)
    );
    assert_eq!(
        tensors[2],
        &Owned::Tensor("s".into(), std::vec![], GgmlType::F32, 192, 4)
    );
    let Some(Owned::End(end)) = events.last() else {
        panic!("no End")
    };
    assert_eq!(end.alignment, 64);
    assert_eq!(end.data_offset % 64, 0);
    // The nested array: [[1u8], ["x", long]].
    let at = events
        .iter()
        .position(|e| *e == Owned::Key("a.nested".into(), ValueType::Array))
        .unwrap();
    assert_eq!(events[at + 1], Owned::ArrayStart(ValueType::Array, 2));
    assert_eq!(events[at + 2], Owned::ArrayStart(ValueType::U8, 1));
    assert_eq!(events[at + 3], Owned::Scalar(Scalar::U8(1)));
    assert_eq!(events[at + 4], Owned::ArrayEnd);
    assert_eq!(events[at + 5], Owned::ArrayStart(ValueType::String, 2));
    assert_eq!(events[at + 6], Owned::Str("x".into()));
    assert_eq!(events[at + 8], Owned::ArrayEnd);
    assert_eq!(events[at + 9], Owned::ArrayEnd);
}

#[test]
fn drivers_agree_on_every_buffer_and_chunk_size() {
    let data = rich_header();
    let expected = slice_events(&data).unwrap();
    for buf_len in [MIN_BUFFER, 100, 4096] {
        for step in [1, 7, 64, data.len()] {
            assert_eq!(
                read_events(&data, step, buf_len).unwrap(),
                expected,
                "read buf {buf_len} step {step}"
            );
            assert_eq!(
                push_events(&data, &[step], buf_len).unwrap(),
                expected,
                "push buf {buf_len} step {step}"
            );
        }
    }
}

proptest! {
    #[test]
    fn push_driver_agrees_for_random_chunks(chunks in proptest::collection::vec(1usize..300, 1..20), buf_len in 64usize..700) {
        let data = rich_header();
        prop_assert_eq!(push_events(&data, &chunks, buf_len).unwrap(), slice_events(&data).unwrap());
    }

    #[test]
    fn every_truncation_is_an_error_in_every_driver(cut in 0usize..1000) {
        let data = rich_header();
        let cut = cut % data.len();
        let prefix = &data[..cut];
        let slice = slice_events(prefix).unwrap_err();
        prop_assert_eq!(read_events(prefix, 7, 256).unwrap_err(), slice);
        prop_assert_eq!(push_events(prefix, &[5], 256).unwrap_err(), slice);
    }
}

#[test]
fn long_strings_arrive_in_pieces_cut_at_char_boundaries() {
    let data = rich_header();
    let mut buf = std::vec![0u8; MIN_BUFFER];
    let mut p = ReadParser::new(
        Trickle {
            data: &data,
            step: 3,
        },
        &mut buf,
        Limits::default(),
    )
    .unwrap();
    let mut pieces = 0;
    while let Some(e) = p.next_event().unwrap() {
        if let Event::String(piece) = e {
            if !piece.is_whole() {
                pieces += 1;
                assert!(piece.text.len() <= MIN_BUFFER);
            }
        }
    }
    assert!(
        pieces > 10,
        "the long strings must be split, got {pieces} pieces"
    );
}

#[test]
fn version_1_uses_32_bit_lengths() {
    let mut b = Bytes::new(1, 1, 1);
    b.key("k", ValueType::String).str(b"v");
    b.tensor("t", &[32], GgmlType::Q4_0.code(), 0);
    let events = slice_events(&b.out).unwrap();
    assert_eq!(events[1], Owned::Key("k".into(), ValueType::String));
    assert_eq!(events[2], Owned::Str("v".into()));
    assert_eq!(
        events[3],
        Owned::Tensor("t".into(), std::vec![32], GgmlType::Q4_0, 0, 18)
    );
}

#[test]
fn big_endian_parses_like_little_endian() {
    let build = |mut b: Bytes| {
        b.key("k", ValueType::U32).u32(0x0102_0304);
        b.tensor("t", &[4, 2], GgmlType::F32.code(), 0);
        b.out
    };
    let le = slice_events(&build(Bytes::new(3, 1, 1))).unwrap();
    let be = slice_events(&build(Bytes::big(3, 1, 1))).unwrap();
    let Owned::Header(h) = be[0] else { panic!() };
    assert_eq!(h.byte_order, ByteOrder::Big);
    assert_eq!(le[1..], be[1..]);
}

#[test]
fn depth_limit_is_enforced_without_recursion() {
    let levels = 100_000u64;
    let mut b = Bytes::new(3, 0, 1);
    b.key("deep", ValueType::Array);
    for _ in 0..levels {
        b.u32(ValueType::Array.code()).u64(1);
    }
    let err = slice_events(&b.out).unwrap_err();
    let first_array = 24 + 8 + 4 + 4;
    let max = Limits::default().max_depth as u64;
    assert_eq!(
        err,
        Error::LimitExceeded {
            limit: Limit::Depth,
            max,
            found: max + 1,
            offset: first_array as u64 + 12 * max
        }
    );
}

/// A header with one key whose value is `levels` arrays nested in each other, the innermost holding
/// one `u8`; returns it and the offset of the first array header.
fn nested(levels: u64) -> (Vec<u8>, u64) {
    let mut b = Bytes::new(3, 0, 1);
    b.key("deep", ValueType::Array);
    for _ in 1..levels {
        b.u32(ValueType::Array.code()).u64(1);
    }
    b.u32(ValueType::U8.code()).u64(1);
    b.out.push(7);
    (b.out, 24 + 8 + 4 + 4)
}

#[test]
fn the_nesting_capacity_is_a_type_parameter_and_caps_the_depth_limit() {
    // Each level of capacity is one `u64` (the elements left); the element type is stored once.
    assert_eq!(
        core::mem::size_of::<Parser<16>>() - core::mem::size_of::<Parser<8>>(),
        8 * 8
    );
    let deep = Limits {
        max_depth: 12,
        ..Limits::DEFAULT
    };
    let (bytes, first) = nested(12);
    // The default capacity (8) caps a limit of 12: the error names 8 and the ninth array.
    let err = SliceParser::new(&bytes, deep)
        .find_map(Result::err)
        .expect("nine arrays deep is too deep for the default capacity");
    assert_eq!(
        err,
        Error::LimitExceeded {
            limit: Limit::Depth,
            max: DEFAULT_DEPTH_CAPACITY as u64,
            found: DEFAULT_DEPTH_CAPACITY as u64 + 1,
            offset: first + 12 * DEFAULT_DEPTH_CAPACITY as u64,
        }
    );
    // A capacity of 16 reads it whole, in every driver.
    let by_slice = SliceParser::<16>::with_depth_capacity(&bytes, deep)
        .filter(|e| matches!(e, Ok(Event::ArrayEnd)))
        .count();
    assert_eq!(by_slice, 12);
    let mut buf = [0u8; 64];
    let mut reader = ReadParser::<_, 16>::with_depth_capacity(&bytes[..], &mut buf, deep).unwrap();
    let mut ends = 0;
    while let Some(e) = reader.next_event().unwrap() {
        ends += usize::from(e == Event::ArrayEnd);
        assert!(reader.parser().depth() <= 12);
    }
    assert_eq!(ends, 12);
    let mut buf = [0u8; 256];
    let mut push = PushParser::<16>::with_depth_capacity(&mut buf, deep).unwrap();
    assert_eq!(push.feed(&bytes), bytes.len());
    push.finish();
    let mut ends = 0;
    while let Some(e) = push.next_event().unwrap() {
        ends += usize::from(e == Event::ArrayEnd);
    }
    assert_eq!(ends, 12);
    // A lower limit than the capacity is the one in force.
    let shallow = Limits {
        max_depth: 3,
        ..Limits::DEFAULT
    };
    let err = SliceParser::<16>::with_depth_capacity(&bytes, shallow)
        .find_map(Result::err)
        .unwrap();
    assert!(matches!(
        err,
        Error::LimitExceeded { limit: Limit::Depth, max: 3, found: 4, offset } if offset == first + 36
    ));
}

/// The sizes of the parser's types on this host, printed (`--nocapture`) and held to a budget: the
/// firmware logs the same figures for the Cortex-M4F, where the parser's stack must stay under
/// 1 KiB.
#[test]
fn parser_types_stay_small() {
    use core::mem::size_of;
    let sizes = [
        ("Parser", size_of::<Parser>()),
        ("SliceParser", size_of::<SliceParser<'_>>()),
        ("ReadParser<&[u8]>", size_of::<ReadParser<'_, &[u8]>>()),
        ("PushParser", size_of::<PushParser<'_>>()),
        ("Event", size_of::<Event<'_>>()),
        ("Error", size_of::<Error>()),
        ("Step<Event>", size_of::<Step<Event<'_>>>()),
        ("RawStep", size_of::<RawStep>()),
        ("Result<RawStep>", size_of::<crate::Result<RawStep>>()),
        (
            "Result<Option<Event>>",
            size_of::<crate::Result<Option<Event<'_>>>>(),
        ),
    ];
    for (name, size) in sizes {
        std::eprintln!("size_of {name}: {size} B");
    }
    // 64-bit host budgets (a third above today's figures; the nesting stack was 512 B alone).
    assert!(size_of::<Parser>() <= 256, "{sizes:?}");
    assert!(size_of::<SliceParser<'_>>() <= 320, "{sizes:?}");
}

#[test]
fn hostile_lengths_fail_before_sizing_anything() {
    let mut b = Bytes::new(3, 0, 1);
    b.key("s", ValueType::String).u64(1 << 40);
    assert!(matches!(
        slice_events(&b.out).unwrap_err(),
        Error::LimitExceeded {
            limit: Limit::StringBytes,
            ..
        }
    ));

    let mut b = Bytes::new(3, 0, 1);
    b.key("s", ValueType::String).u64(100);
    assert_eq!(
        slice_events(&b.out).unwrap_err(),
        Error::ExceedsInput {
            field: Field::String,
            found: 100,
            needed: 100,
            available: 0,
            offset: 37
        }
    );

    let b = Bytes::new(3, 1 << 40, 0);
    assert!(matches!(
        slice_events(&b.out).unwrap_err(),
        Error::LimitExceeded {
            limit: Limit::TensorCount,
            ..
        }
    ));

    let mut b = Bytes::new(3, 0, 1);
    b.key("a", ValueType::Array)
        .u32(ValueType::U64.code())
        .u64(1 << 29);
    assert!(matches!(
        slice_events(&b.out).unwrap_err(),
        Error::ExceedsInput {
            field: Field::ArrayHeader,
            ..
        }
    ));
}

#[test]
fn a_cut_header_names_the_field_that_is_cut() {
    let whole = Bytes::new(3, 0, 0).out;
    // (field, where it starts, its size): magic 4, version 4, two 8-byte counts.
    let fields = [
        (Field::Magic, 0, 4),
        (Field::Version, 4, 4),
        (Field::TensorCount, 8, 8),
        (Field::MetadataCount, 16, 8),
    ];
    for cut in 0..whole.len() {
        let (field, start, size) = fields
            .into_iter()
            .find(|&(_, start, size)| cut < start + size)
            .unwrap();
        let expected = Error::Truncated {
            field,
            offset: start as u64,
            needed: size as u64,
            available: (cut - start) as u64,
        };
        assert_eq!(slice_events(&whole[..cut]), Err(expected), "cut at {cut}");
        assert_eq!(
            read_events(&whole[..cut], 1, 64),
            Err(expected),
            "cut at {cut}"
        );
    }
    let three = std::format!("{}", slice_events(b"GGU").unwrap_err());
    assert_eq!(
        three,
        "input ends inside the magic: it needs 4 bytes, 3 remain at byte 0"
    );
    // A key cut inside its value type code names the type code (the key is long enough for the
    // slice driver's check of the smallest possible pair to pass).
    let mut b = Bytes::new(3, 0, 1);
    b.str(b"long_key").u32(ValueType::U8.code());
    let cut = &b.out[..b.out.len() - 1];
    let expected = Error::Truncated {
        field: Field::ValueType,
        offset: 24 + 8 + 8,
        needed: 4,
        available: 3,
    };
    assert_eq!(slice_events(cut), Err(expected));
    assert_eq!(read_events(cut, 3, 64), Err(expected));
    // A wrong magic is the error even when the version after it is missing.
    assert_eq!(
        slice_events(b"GGML\x03"),
        Err(Error::BadMagic { found: *b"GGML" })
    );
}

#[test]
fn alignment_must_be_a_power_of_two_u32_once() {
    let with = |t: ValueType, v: u32| {
        let mut b = Bytes::new(3, 0, 1);
        b.key("general.alignment", t).u32(v);
        slice_events(&b.out)
    };
    assert!(matches!(
        with(ValueType::U32, 0),
        Err(Error::BadAlignment {
            problem: AlignmentProblem::Zero,
            ..
        })
    ));
    assert!(matches!(
        with(ValueType::U32, 3),
        Err(Error::BadAlignment {
            problem: AlignmentProblem::NotPowerOfTwo(3),
            ..
        })
    ));
    assert!(matches!(
        with(ValueType::I32, 32),
        Err(Error::BadAlignment {
            problem: AlignmentProblem::NotU32(ValueType::I32),
            ..
        })
    ));
    let mut b = Bytes::new(3, 0, 2);
    b.key("general.alignment", ValueType::U32).u32(32);
    b.key("general.alignment", ValueType::U32).u32(0);
    assert!(matches!(
        slice_events(&b.out),
        Err(Error::BadAlignment {
            problem: AlignmentProblem::Duplicate,
            ..
        })
    ));
}

#[test]
fn buffer_too_small_for_a_key_is_a_clear_error() {
    let mut b = Bytes::new(3, 0, 1);
    let key = "k".repeat(200);
    b.key(&key, ValueType::U8).out.push(0);
    assert!(matches!(
        read_events(&b.out, 1000, MIN_BUFFER),
        Err(Error::BufferTooSmall {
            needed: 212,
            capacity: 64,
            offset: 24
        })
    ));
    assert_eq!(
        read_events(&b.out, 1000, 256).unwrap(),
        slice_events(&b.out).unwrap()
    );
}

/// An array of strings mixing short, long (128+ bytes, which end a checked run) and multi-byte
/// strings, in both byte orders and version 1: the slice driver (checks runs of strings at once)
/// and the push driver (checks each string) agree.
#[test]
fn string_arrays_checked_in_runs_match_string_by_string() {
    let strings: Vec<String> = (0..300)
        .map(|i| match i % 7 {
            0 => "é".repeat(i % 50),
            1 => "x".repeat(128 + i),
            2 => String::new(),
            _ => std::format!("tok{i}-日本"),
        })
        .collect();
    for mut b in [
        Bytes::new(3, 0, 1),
        Bytes::big(3, 0, 1),
        Bytes::new(1, 0, 1),
    ] {
        b.key("tokenizer.ggml.tokens", ValueType::Array)
            .u32(ValueType::String.code());
        b.len(strings.len() as u64);
        for s in &strings {
            b.str(s.as_bytes());
        }
        let events = slice_events(&b.out).unwrap();
        assert_eq!(events, push_events(&b.out, &[1000], 4096).unwrap());
        let got: Vec<&Owned> = events
            .iter()
            .filter(|e| matches!(e, Owned::Str(_)))
            .collect();
        assert_eq!(got.len(), strings.len());
        for (g, s) in got.iter().zip(&strings) {
            assert_eq!(**g, Owned::Str(s.clone()));
        }
    }
}

/// Invalid UTF-8 inside a run of short strings is reported at the exact byte.
#[test]
fn invalid_utf8_in_a_string_array_has_its_offset() {
    let mut b = Bytes::new(3, 0, 1);
    b.key("k", ValueType::Array)
        .u32(ValueType::String.code())
        .u64(3);
    b.str(b"ok").str(b"ab\xffcd").str(b"fine");
    let bad = 24 + 8 + 1 + 4 + 4 + 8 + (8 + 2) + 8 + 2;
    assert_eq!(
        slice_events(&b.out).unwrap_err(),
        Error::InvalidUtf8 {
            field: Field::String,
            offset: bad as u64
        }
    );
    assert_eq!(
        push_events(&b.out, &[3], 64).unwrap_err(),
        slice_events(&b.out).unwrap_err()
    );
}

/// An array of `count` strings in which string `bad` has invalid UTF-8 (every `long_every`-th
/// string is 200 bytes, which ends a run of short strings); the file and the bad byte's offset.
fn string_array_with_a_bad_string(count: usize, bad: usize, long_every: usize) -> (Vec<u8>, u64) {
    let mut b = Bytes::new(3, 0, 1);
    b.key("tokenizer.ggml.tokens", ValueType::Array)
        .u32(ValueType::String.code());
    b.len(count as u64);
    let long = "L".repeat(200);
    let mut bad_at = 0;
    for i in 0..count {
        if i == bad {
            b.len(4);
            bad_at = b.out.len() + 2;
            b.out.extend_from_slice(b"ok\xffk");
        } else if i % long_every == long_every - 1 {
            b.str(long.as_bytes());
        } else {
            b.str(std::format!("t{i}").as_bytes());
        }
    }
    (b.out, bad_at as u64)
}

/// One invalid string among 262144 (at the start, the middle, the end) is found with a bounded
/// number of UTF-8 checks per input byte in every driver: the slice driver's failed run check is
/// remembered instead of being retried for every later string (which was quadratic).
#[test]
fn one_bad_string_among_many_costs_linear_utf8_work() {
    const COUNT: usize = 262_144;
    for (bad, long_every) in [
        (0, usize::MAX),
        (COUNT / 2, usize::MAX),
        (COUNT - 1, usize::MAX),
        (COUNT - 1, 1000),
        (COUNT / 2, 3),
    ] {
        let (data, bad_at) = string_array_with_a_bad_string(COUNT, bad, long_every);
        let expected = Error::InvalidUtf8 {
            field: Field::String,
            offset: bad_at,
        };
        let budget = 4 * data.len() as u64;
        machine::utf8_scans::take();
        assert_eq!(slice_events(&data).unwrap_err(), expected);
        let slice_scanned = machine::utf8_scans::take();
        assert_eq!(read_events(&data, 4096, 4096).unwrap_err(), expected);
        let read_scanned = machine::utf8_scans::take();
        assert_eq!(push_events(&data, &[1000], 256).unwrap_err(), expected);
        let push_scanned = machine::utf8_scans::take();
        for (driver, scanned) in [
            ("slice", slice_scanned),
            ("read", read_scanned),
            ("push", push_scanned),
        ] {
            assert!(
                scanned <= budget,
                "bad string {bad} (long every {long_every}), {driver} driver: {scanned} bytes \
                 scanned for a {} byte input",
                data.len()
            );
        }
    }
}

/// The push driver's natural loop (feed until every chunk is taken, pull events after each feed)
/// ends on a whole file, tensor data included, for every chunk size: after the header, `feed`
/// takes whole chunks (it took none before, forever). Also after an error (a 64-byte buffer is too
/// small for some of the file's keys).
#[test]
fn push_loop_over_a_whole_file_ends() {
    let file: &[u8] = include_bytes!("../../../examples/tiny.gguf");
    let expected = slice_events(file).unwrap();
    for buf_len in [64, 256, 4096] {
        for chunk_size in 1..=300 {
            let mut buf = std::vec![0u8; buf_len];
            let mut parser = PushParser::new(&mut buf, Limits::default()).unwrap();
            let mut events = Vec::new();
            let mut error = None;
            let mut feeds = 0usize;
            for mut chunk in file.chunks(chunk_size) {
                while !chunk.is_empty() {
                    feeds += 1;
                    assert!(
                        feeds <= 2 * file.len(),
                        "buffer {buf_len}, chunks of {chunk_size}: stuck"
                    );
                    let taken = parser.feed(chunk);
                    chunk = &chunk[taken..];
                    loop {
                        match parser.next_event() {
                            Ok(Some(e)) => push_event(&mut events, &e),
                            Ok(None) => break,
                            Err(e) => {
                                error = Some(e);
                                break;
                            }
                        }
                    }
                }
            }
            if let Some(e) = error {
                assert_eq!(buf_len, 64, "{e:?}");
                assert!(matches!(e, Error::BufferTooSmall { .. }), "{e:?}");
                continue;
            }
            parser.finish();
            while let Some(e) = parser.next_event().unwrap() {
                push_event(&mut events, &e);
            }
            assert!(parser.is_done());
            assert_eq!(events, expected, "buffer {buf_len}, chunks of {chunk_size}");
            let header_end = parser.parser().offset() as usize;
            let after = parser.buffered();
            assert_eq!(after, &file[header_end..header_end + after.len()]);
        }
    }
}
