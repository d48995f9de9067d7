//! The writer's tests: random files written and parsed back to the same events (property test),
//! and each misuse reported as an error before any bytes of it are written.

// Tests index and add freely: a panic here is a failed test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use super::*;
use crate::gguf::{PushParser, SliceParser};
use proptest::prelude::*;
use std::string::{String, ToString};
use std::vec;
use std::vec::Vec;

/// A growing byte sink (embedded-io implements `Write` for `Vec` only with its `alloc` feature).
#[derive(Debug, Default)]
struct Sink(Vec<u8>);

impl embedded_io::ErrorType for Sink {
    type Error = core::convert::Infallible;
}

impl embedded_io::Write for Sink {
    fn write(&mut self, buf: &[u8]) -> Result<usize, Self::Error> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// A metadata value tree for the property test.
#[derive(Debug, Clone)]
enum Val {
    Scalar(Scalar),
    Str(String),
    /// Element type and elements (all of that type).
    Array(ValueType, Vec<Val>),
}

/// An owned event, scalar runs split into single scalars and floats by their bits.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ev {
    Key(String, ValueType),
    Scalar(ValueType, u64),
    Str(String),
    ArrayStart(ValueType, u64),
    ArrayEnd,
    Tensor(String, GgmlType, Vec<u64>, u64),
    End(u32, u64),
}

fn bits(s: Scalar) -> (ValueType, u64) {
    let b = match s {
        Scalar::U8(v) => v.into(),
        Scalar::I8(v) => v as u8 as u64,
        Scalar::U16(v) => v.into(),
        Scalar::I16(v) => v as u16 as u64,
        Scalar::U32(v) => v.into(),
        Scalar::I32(v) => v as u32 as u64,
        Scalar::F32(v) => v.to_bits().into(),
        Scalar::Bool(v) => v.into(),
        Scalar::U64(v) => v,
        Scalar::I64(v) => v as u64,
        Scalar::F64(v) => v.to_bits(),
    };
    (s.value_type(), b)
}

fn scalar_of(t: ValueType) -> BoxedStrategy<Scalar> {
    match t {
        ValueType::U8 => any::<u8>().prop_map(Scalar::U8).boxed(),
        ValueType::I8 => any::<i8>().prop_map(Scalar::I8).boxed(),
        ValueType::U16 => any::<u16>().prop_map(Scalar::U16).boxed(),
        ValueType::I16 => any::<i16>().prop_map(Scalar::I16).boxed(),
        ValueType::U32 => any::<u32>().prop_map(Scalar::U32).boxed(),
        ValueType::I32 => any::<i32>().prop_map(Scalar::I32).boxed(),
        ValueType::F32 => any::<u32>()
            .prop_map(|b| Scalar::F32(f32::from_bits(b)))
            .boxed(),
        ValueType::Bool => any::<bool>().prop_map(Scalar::Bool).boxed(),
        ValueType::U64 => any::<u64>().prop_map(Scalar::U64).boxed(),
        ValueType::I64 => any::<i64>().prop_map(Scalar::I64).boxed(),
        _ => any::<u64>()
            .prop_map(|b| Scalar::F64(f64::from_bits(b)))
            .boxed(),
    }
}

const SCALAR_TYPES: [ValueType; 11] = [
    ValueType::U8,
    ValueType::I8,
    ValueType::U16,
    ValueType::I16,
    ValueType::U32,
    ValueType::I32,
    ValueType::F32,
    ValueType::Bool,
    ValueType::U64,
    ValueType::I64,
    ValueType::F64,
];

/// A value of type `t`; arrays nest up to `depth` more levels.
fn value_of(t: ValueType, depth: u32) -> BoxedStrategy<Val> {
    match t {
        ValueType::String => "\\PC{0,12}".prop_map(Val::Str).boxed(),
        ValueType::Array => {
            let inner = if depth == 0 { 0..11usize } else { 0..13usize };
            inner
                .prop_flat_map(move |i| {
                    let et = match i {
                        11 => ValueType::String,
                        12 => ValueType::Array,
                        i => SCALAR_TYPES[i],
                    };
                    proptest::collection::vec(value_of(et, depth.saturating_sub(1)), 0..6)
                        .prop_map(move |items| Val::Array(et, items))
                })
                .boxed()
        }
        t => scalar_of(t).prop_map(Val::Scalar).boxed(),
    }
}

fn any_value() -> BoxedStrategy<Val> {
    (0..13usize)
        .prop_flat_map(|i| {
            let t = match i {
                11 => ValueType::String,
                12 => ValueType::Array,
                i => SCALAR_TYPES[i],
            };
            value_of(t, 3)
        })
        .boxed()
}

fn val_type(v: &Val) -> ValueType {
    match v {
        Val::Scalar(s) => s.value_type(),
        Val::Str(_) => ValueType::String,
        Val::Array(..) => ValueType::Array,
    }
}

/// Writes `v` through the writer and appends the events a parser must yield for it. An explicit
/// stack keeps the test free of recursion like the code it tests.
fn write_value<W: embedded_io::Write>(w: &mut GgufWriter<'_, W>, v: &Val, ev: &mut Vec<Ev>) {
    let mut stack: Vec<core::slice::Iter<'_, Val>> = Vec::new();
    let mut next = Some(v);
    loop {
        if let Some(v) = next.take() {
            match v {
                Val::Scalar(s) => {
                    w.scalar(*s).unwrap();
                    let (t, b) = bits(*s);
                    ev.push(Ev::Scalar(t, b));
                }
                Val::Str(s) => {
                    w.string(s).unwrap();
                    ev.push(Ev::Str(s.clone()));
                }
                Val::Array(t, items) => {
                    w.array_start(*t, items.len() as u64).unwrap();
                    ev.push(Ev::ArrayStart(*t, items.len() as u64));
                    stack.push(items.iter());
                }
            }
        }
        let Some(top) = stack.last_mut() else { return };
        match top.next() {
            Some(item) => next = Some(item),
            None => {
                stack.pop();
                w.array_end().unwrap();
                ev.push(Ev::ArrayEnd);
            }
        }
    }
}

fn collect(event: Event<'_>, out: &mut Vec<Ev>) {
    match event {
        Event::Header(_) => {}
        Event::Key { key, value_type } => out.push(Ev::Key(key.to_string(), value_type)),
        Event::Scalar(s) => {
            let (t, b) = bits(s);
            out.push(Ev::Scalar(t, b));
        }
        Event::Scalars(run) => out.extend(run.iter().map(|s| {
            let (t, b) = bits(s);
            Ev::Scalar(t, b)
        })),
        Event::String(p) => {
            assert!(p.is_whole(), "the slice driver yields whole strings");
            out.push(Ev::Str(p.text.to_string()));
        }
        Event::ArrayStart { element_type, len } => out.push(Ev::ArrayStart(element_type, len)),
        Event::ArrayEnd => out.push(Ev::ArrayEnd),
        Event::Tensor(t) => out.push(Ev::Tensor(
            t.name.to_string(),
            t.ggml_type,
            t.ne().to_vec(),
            t.offset,
        )),
        Event::End(d) => out.push(Ev::End(d.alignment, d.data_offset)),
    }
}

#[derive(Debug, Clone)]
struct Tensor {
    name: String,
    ggml_type: GgmlType,
    ne: Vec<u64>,
}

fn any_tensor() -> impl Strategy<Value = Tensor> {
    let types = [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::Q4_0,
        GgmlType::Q8_0,
        GgmlType::Q4_K,
        GgmlType::I8,
    ];
    (
        "[a-z.]{1,10}",
        proptest::sample::select(types.to_vec()),
        proptest::collection::vec(1u64..4, 0..4),
        1u64..3,
    )
        .prop_map(|(name, ggml_type, mut ne, blocks)| {
            if let Some(first) = ne.first_mut() {
                *first = blocks * u64::from(ggml_type.block_size());
            } else if ggml_type.block_size() != 1 {
                ne.push(u64::from(ggml_type.block_size()));
            }
            Tensor {
                name,
                ggml_type,
                ne,
            }
        })
}

/// Writes a whole file; returns it and the events expected from parsing it.
fn write_file(
    options: WriteOptions,
    alignment: Option<u32>,
    metadata: &[(String, Val)],
    tensors: &[Tensor],
) -> (Vec<u8>, Vec<Ev>) {
    let specs: Vec<TensorSpec<'_>> = tensors
        .iter()
        .map(|t| TensorSpec {
            name: &t.name,
            ggml_type: t.ggml_type,
            ne: &t.ne,
        })
        .collect();
    let mut out = Sink::default();
    let count = metadata.len() as u64 + u64::from(alignment.is_some());
    let mut w = GgufWriter::new(&mut out, options, count, &specs).unwrap();
    let mut ev = Vec::new();
    if let Some(a) = alignment {
        w.key(ALIGNMENT_KEY, ValueType::U32).unwrap();
        w.scalar(Scalar::U32(a)).unwrap();
        ev.push(Ev::Key(ALIGNMENT_KEY.to_string(), ValueType::U32));
        ev.push(Ev::Scalar(ValueType::U32, a.into()));
    }
    for (key, v) in metadata {
        w.key(key, val_type(v)).unwrap();
        ev.push(Ev::Key(key.clone(), val_type(v)));
        write_value(&mut w, v, &mut ev);
    }
    let align = u64::from(alignment.unwrap_or(32));
    let mut offset = 0;
    for t in tensors {
        ev.push(Ev::Tensor(
            t.name.clone(),
            t.ggml_type,
            t.ne.clone(),
            offset,
        ));
        let bytes = t.ggml_type.bytes_for(t.ne.iter().product()).unwrap();
        offset += bytes.next_multiple_of(align);
    }
    let section = w.finish_header().unwrap();
    assert_eq!(section.data_offset % align, 0);
    ev.push(Ev::End(section.alignment, section.data_offset));
    for (i, t) in tensors.iter().enumerate() {
        let bytes = t.ggml_type.bytes_for(t.ne.iter().product()).unwrap() as usize;
        let data: Vec<u8> = (0..bytes).map(|b| (b + i) as u8).collect();
        // Two chunks, to exercise partial writes.
        let (a, b) = data.split_at(bytes / 3);
        w.tensor_data(a).unwrap();
        w.tensor_data(b).unwrap();
    }
    w.finish().unwrap();
    (out.0, ev)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Every file written parses back to the events written, through the slice driver and the
    /// push driver; copying it event by event through a second writer gives the same bytes; the
    /// data of each tensor sits at its offset.
    #[test]
    fn written_files_parse_back_to_the_same_events(
        metadata in proptest::collection::vec(("[a-z_.]{1,12}", any_value()), 0..6),
        tensors in proptest::collection::vec(any_tensor(), 0..5),
        version in 2u32..=3,
        big in any::<bool>(),
        alignment in proptest::option::of(proptest::sample::select(vec![1u32, 8, 32, 64, 256])),
    ) {
        let mut metadata = metadata;
        let mut seen = std::collections::HashSet::new();
        metadata.retain(|(k, _)| seen.insert(k.clone()) && k != ALIGNMENT_KEY);
        let mut tensors = tensors;
        let mut names = std::collections::HashSet::new();
        tensors.retain(|t| names.insert(t.name.clone()));
        let order = if big && version == 3 { ByteOrder::Big } else { ByteOrder::Little };
        let options = WriteOptions { version, byte_order: order, ..WriteOptions::DEFAULT };
        let (file, expected) = write_file(options, alignment, &metadata, &tensors);

        let mut parsed = Vec::new();
        let mut header = None;
        for e in SliceParser::new(&file, Limits::DEFAULT) {
            let e = e.unwrap();
            if let Event::Header(h) = e {
                header = Some(h);
            }
            collect(e, &mut parsed);
        }
        let header = header.unwrap();
        prop_assert_eq!(header.version, version);
        prop_assert_eq!(header.byte_order, order);
        prop_assert_eq!(&parsed, &expected);

        // The push driver with a small buffer agrees (strings may come in pieces: join them).
        let mut buf = [0u8; 64];
        let mut push = PushParser::new(&mut buf, Limits::DEFAULT).unwrap();
        let mut pushed = Vec::new();
        let mut open = String::new();
        let mut rest = &file[..];
        loop {
            let n = push.feed(rest);
            rest = &rest[n..];
            if rest.is_empty() {
                push.finish();
            }
            let mut any = false;
            while let Some(e) = push.next_event().unwrap() {
                any = true;
                match e {
                    Event::String(p) => {
                        open.push_str(p.text);
                        if p.is_last() {
                            pushed.push(Ev::Str(core::mem::take(&mut open)));
                        }
                    }
                    e => collect(e, &mut pushed),
                }
            }
            if push.is_done() || (rest.is_empty() && !any) {
                break;
            }
        }
        prop_assert_eq!(&pushed, &expected);

        // Copy event by event: the same bytes.
        let specs: Vec<TensorSpec<'_>> = tensors
            .iter()
            .map(|t| TensorSpec { name: &t.name, ggml_type: t.ggml_type, ne: &t.ne })
            .collect();
        let mut copy = Sink::default();
        let mut w = GgufWriter::new(&mut copy, options, header.metadata_count, &specs).unwrap();
        let mut data_offset = 0;
        for e in SliceParser::new(&file, Limits::DEFAULT) {
            let e = e.unwrap();
            if let Event::End(d) = e {
                data_offset = d.data_offset as usize;
            }
            w.event(&e).unwrap();
        }
        let mut at = data_offset;
        for t in &tensors {
            let bytes = t.ggml_type.bytes_for(t.ne.iter().product()).unwrap() as usize;
            w.tensor_data(&file[at..at + bytes]).unwrap();
            at = (at + bytes).next_multiple_of(alignment.unwrap_or(32) as usize);
        }
        w.finish().unwrap();
        prop_assert_eq!(&copy.0, &file);
        prop_assert_eq!(at, file.len());
    }
}

fn f32_dir() -> [TensorSpec<'static>; 2] {
    [
        TensorSpec {
            name: "a",
            ggml_type: GgmlType::F32,
            ne: &[2],
        },
        TensorSpec {
            name: "b",
            ggml_type: GgmlType::F32,
            ne: &[1],
        },
    ]
}

fn misuse_of(e: Error) -> Misuse {
    match e {
        Error::WriterMisuse { problem, .. } => problem,
        e => panic!("not a misuse: {e:?}"),
    }
}

#[test]
fn data_before_the_directory_is_an_error() {
    let dir = f32_dir();
    let mut out = Sink::default();
    let mut w = GgufWriter::new(&mut out, WriteOptions::DEFAULT, 1, &dir).unwrap();
    let e = w.tensor_data(&[0; 8]).unwrap_err();
    assert_eq!(
        misuse_of(e),
        Misuse::OutOfOrder {
            expected: Expected::Key
        }
    );
    // The writer refuses everything after an error.
    assert_eq!(
        misuse_of(w.key("k", ValueType::U8).unwrap_err()),
        Misuse::Failed
    );
}

#[test]
fn wrong_counts_are_errors() {
    let dir = f32_dir();
    let mut out = Sink::default();
    let mut w = GgufWriter::new(&mut out, WriteOptions::DEFAULT, 2, &dir).unwrap();
    w.key("k", ValueType::U8).unwrap();
    w.scalar(Scalar::U8(1)).unwrap();
    assert_eq!(
        misuse_of(w.finish_header().unwrap_err()),
        Misuse::MetadataCount {
            declared: 2,
            found: 1
        }
    );

    let mut out = Sink::default();
    let mut w = GgufWriter::new(&mut out, WriteOptions::DEFAULT, 1, &dir).unwrap();
    w.key("k", ValueType::U8).unwrap();
    w.scalar(Scalar::U8(1)).unwrap();
    let written = w.written();
    assert!(matches!(
        misuse_of(w.key("l", ValueType::U8).unwrap_err()),
        Misuse::MetadataCount {
            declared: 1,
            found: 2
        }
    ));
    assert_eq!(
        out.0.len() as u64,
        written,
        "nothing of the bad call is written"
    );

    let mut out = Sink::default();
    let mut w = GgufWriter::new(&mut out, WriteOptions::DEFAULT, 1, &dir).unwrap();
    w.key("k", ValueType::Array).unwrap();
    w.array_start(ValueType::U8, 2).unwrap();
    w.scalar(Scalar::U8(1)).unwrap();
    assert_eq!(
        misuse_of(w.array_end().unwrap_err()),
        Misuse::ArrayLen {
            declared: 2,
            found: 1
        }
    );
}

#[test]
fn wrong_value_types_are_errors() {
    let mut out = Sink::default();
    let mut w = GgufWriter::new(&mut out, WriteOptions::DEFAULT, 1, &[]).unwrap();
    w.key("k", ValueType::Array).unwrap();
    w.array_start(ValueType::U16, 1).unwrap();
    assert_eq!(
        misuse_of(w.scalar(Scalar::U32(1)).unwrap_err()),
        Misuse::WrongType {
            expected: ValueType::U16,
            found: ValueType::U32
        }
    );
}

#[test]
fn wrong_data_sizes_are_errors() {
    let dir = f32_dir();
    let mut out = Sink::default();
    let mut w = GgufWriter::new(&mut out, WriteOptions::DEFAULT, 0, &dir).unwrap();
    w.finish_header().unwrap();
    w.tensor_data(&[1; 4]).unwrap();
    assert_eq!(
        misuse_of(w.tensor_data(&[1; 8]).unwrap_err()),
        Misuse::DataSize {
            tensor: 0,
            expected: 4,
            found: 8
        }
    );

    let mut out = Sink::default();
    let mut w = GgufWriter::new(&mut out, WriteOptions::DEFAULT, 0, &dir).unwrap();
    w.finish_header().unwrap();
    w.tensor_data(&[1; 8]).unwrap();
    assert_eq!(
        misuse_of(w.finish().unwrap_err()),
        Misuse::DataSize {
            tensor: 1,
            expected: 4,
            found: 0
        }
    );
}

#[test]
fn duplicate_names_and_keys_are_errors() {
    let dir = [f32_dir()[0], f32_dir()[0]];
    let mut out = Sink::default();
    let e = GgufWriter::new(&mut out, WriteOptions::DEFAULT, 0, &dir).unwrap_err();
    assert_eq!(
        misuse_of(e),
        Misuse::DuplicateTensor {
            first: 0,
            second: 1
        }
    );
    assert!(out.0.is_empty());

    let mut out = Sink::default();
    let mut w = GgufWriter::new(&mut out, WriteOptions::DEFAULT, 2, &[]).unwrap();
    w.key("k", ValueType::U8).unwrap();
    w.scalar(Scalar::U8(1)).unwrap();
    assert!(matches!(
        w.key("k", ValueType::U8).unwrap_err(),
        Error::DuplicateKey { .. }
    ));
}

#[test]
fn names_and_alignment_the_parser_rejects_are_errors() {
    let mut out = Sink::default();
    let mut w = GgufWriter::new(&mut out, WriteOptions::DEFAULT, 1, &[]).unwrap();
    assert!(matches!(
        w.key("", ValueType::U8),
        Err(Error::EmptyName { .. })
    ));
    let mut w = GgufWriter::new(&mut out, WriteOptions::DEFAULT, 1, &[]).unwrap();
    assert!(matches!(
        w.key("a\0b", ValueType::U8),
        Err(Error::NulInName { .. })
    ));
    let mut w = GgufWriter::new(&mut out, WriteOptions::DEFAULT, 1, &[]).unwrap();
    w.key(ALIGNMENT_KEY, ValueType::U32).unwrap();
    assert!(matches!(
        w.scalar(Scalar::U32(24)),
        Err(Error::BadAlignment { .. })
    ));
    let bad = [TensorSpec {
        name: "q",
        ggml_type: GgmlType::Q4_0,
        ne: &[31],
    }];
    let mut w = GgufWriter::new(&mut out, WriteOptions::DEFAULT, 0, &bad).unwrap();
    assert!(matches!(
        w.finish_header(),
        Err(Error::NotWholeBlocks { .. })
    ));
}

#[test]
fn a_directory_event_must_match_the_directory() {
    let dir = f32_dir();
    let mut out = Sink::default();
    let mut w = GgufWriter::new(&mut out, WriteOptions::DEFAULT, 0, &dir).unwrap();
    let info = crate::gguf::TensorInfo {
        name: "b",
        n_dims: 1,
        ne: [1, 0, 0, 0],
        ggml_type: GgmlType::F32,
        offset: 0,
        elements: 1,
        bytes: 4,
    };
    assert_eq!(
        misuse_of(w.tensor_info(&info).unwrap_err()),
        Misuse::DirectoryMismatch { tensor: 0 }
    );
}

#[test]
fn a_failing_sink_is_an_io_error() {
    let mut buf = [0u8; 10];
    let e = GgufWriter::new(&mut buf[..], WriteOptions::DEFAULT, 0, &[]).unwrap_err();
    assert!(matches!(e, Error::WriteFailed { .. }), "{e:?}");
    assert!(e.to_string().starts_with("write failed"), "{e}");
}
