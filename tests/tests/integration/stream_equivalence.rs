//! The three drivers (slice, `Read`, push) must yield the same events for the same bytes, however
//! the bytes arrive: `Read` buffers of 64, 100 and 4096 bytes over readers returning 1, 7 or random
//! byte counts per call, push chunks of 1, 7, random sizes or everything at once. Strings longer
//! than a buffer arrive in pieces; joined, they must be the exact string. Valid files come from a
//! generator whose expected events are computed from the file description (not by a parser);
//! invalid files (mutations of valid ones) must fail with the same error in every driver.

use miniquant::gguf::{ByteOrder, DataSection, Header, Limits, Scalar, ValueType};
use miniquant::{Error, GgmlType};
use miniquant_tests::cache::model_path;
use miniquant_tests::craft::{code, Endian, GgufFile, Tensor, Value};
use miniquant_tests::drive::{self, scalar_bits, Ev, Outcome};
use proptest::prelude::*;

const BUFFERS: [usize; 3] = [64, 100, 4096];
const LIMITS: Limits = Limits::DEFAULT;

// ----- the oracle: expected events from a file description ---------------------------------

/// (code, elements per block, bytes per block) of the tensor types the generator uses, from
/// ggml's type traits.
const TENSOR_TYPES: [(u32, u64, u64); 7] = [
    (0, 1, 4),
    (1, 1, 2),
    (2, 32, 18),
    (8, 32, 34),
    (12, 256, 144),
    (14, 256, 210),
    (39, 32, 17),
];

fn value_type(code: u32) -> ValueType {
    ValueType::from_code(code).expect("the generator writes valid codes")
}

fn push_value(events: &mut Vec<Ev>, value: &Value) {
    let scalar = match value {
        Value::String(s) => {
            return events.push(Ev::String(String::from_utf8(s.clone()).expect("UTF-8")))
        }
        Value::Array {
            element_type,
            items,
        } => {
            events.push(Ev::ArrayStart {
                element_type: value_type(*element_type),
                len: items.len() as u64,
            });
            for item in items {
                push_value(events, item);
            }
            return events.push(Ev::ArrayEnd);
        }
        Value::U8(v) => Scalar::U8(*v),
        Value::I8(v) => Scalar::I8(*v),
        Value::U16(v) => Scalar::U16(*v),
        Value::I16(v) => Scalar::I16(*v),
        Value::U32(v) => Scalar::U32(*v),
        Value::I32(v) => Scalar::I32(*v),
        Value::F32(v) => Scalar::F32(*v),
        Value::Bool(v) => Scalar::Bool(*v),
        Value::U64(v) => Scalar::U64(*v),
        Value::I64(v) => Scalar::I64(*v),
        Value::F64(v) => Scalar::F64(*v),
    };
    let (value_type, bits) = scalar_bits(scalar);
    events.push(Ev::Scalar { value_type, bits });
}

fn expected_events(file: &GgufFile) -> Vec<Ev> {
    let byte_order = match file.endian {
        Endian::Little => ByteOrder::Little,
        Endian::Big => ByteOrder::Big,
    };
    let mut events = vec![Ev::Header(Header {
        version: file.version,
        byte_order,
        tensor_count: file.tensors.len() as u64,
        metadata_count: file.metadata.len() as u64,
    })];
    for (key, value) in &file.metadata {
        let key = String::from_utf8(key.clone()).expect("UTF-8 key");
        events.push(Ev::Key {
            key,
            value_type: value_type(value.type_code()),
        });
        push_value(&mut events, value);
    }
    for t in &file.tensors {
        let &(_, block, block_bytes) = TENSOR_TYPES
            .iter()
            .find(|(c, ..)| *c == t.type_code)
            .expect("known");
        let elements: u64 = t.ne.iter().product();
        events.push(Ev::Tensor {
            name: String::from_utf8(t.name.clone()).expect("UTF-8 name"),
            ne: t.ne.clone(),
            ggml_type: GgmlType::from_code(t.type_code).expect("known"),
            offset: t.offset,
            elements,
            bytes: elements / block * block_bytes,
        });
    }
    events.push(Ev::End(DataSection {
        alignment: file.alignment as u32,
        data_offset: file.data_offset(),
    }));
    events
}

// ----- the generator -----------------------------------------------------------------------

fn scalar_of(code: u32) -> BoxedStrategy<Value> {
    match code {
        code::U8 => any::<u8>().prop_map(Value::U8).boxed(),
        code::I8 => any::<i8>().prop_map(Value::I8).boxed(),
        code::U16 => any::<u16>().prop_map(Value::U16).boxed(),
        code::I16 => any::<i16>().prop_map(Value::I16).boxed(),
        code::U32 => any::<u32>().prop_map(Value::U32).boxed(),
        code::I32 => any::<i32>().prop_map(Value::I32).boxed(),
        // Any bit pattern, NaNs included: compared by bits.
        code::F32 => any::<u32>()
            .prop_map(|b| Value::F32(f32::from_bits(b)))
            .boxed(),
        code::BOOL => any::<bool>().prop_map(Value::Bool).boxed(),
        code::U64 => any::<u64>().prop_map(Value::U64).boxed(),
        code::I64 => any::<i64>().prop_map(Value::I64).boxed(),
        code::F64 => any::<u64>()
            .prop_map(|b| Value::F64(f64::from_bits(b)))
            .boxed(),
        _ => unreachable!("not a scalar code"),
    }
}

/// Strings of any Unicode text up to 300 characters (up to 1200 bytes), so that buffers of 64 and
/// 100 bytes get many of them in pieces cut between multi-byte characters.
fn string() -> BoxedStrategy<Value> {
    prop_oneof![
        "\\PC{0,12}".prop_map(|s: String| Value::String(s.into_bytes())),
        "\\PC{0,300}".prop_map(|s: String| Value::String(s.into_bytes())),
        "[a-z\u{e9}\u{4e16}\u{1f600}]{60,300}".prop_map(|s: String| Value::String(s.into_bytes())),
    ]
    .boxed()
}

const SCALAR_CODES: [u32; 11] = [
    code::U8,
    code::I8,
    code::U16,
    code::I16,
    code::U32,
    code::I32,
    code::F32,
    code::BOOL,
    code::U64,
    code::I64,
    code::F64,
];

/// An array of 0..8 elements of one type; arrays of arrays down to `depth` more levels.
fn array(depth: u32) -> BoxedStrategy<Value> {
    let element = if depth == 0 {
        prop_oneof![9 => proptest::sample::select(SCALAR_CODES.to_vec()), 2 => Just(code::STRING)]
            .boxed()
    } else {
        prop_oneof![
            6 => proptest::sample::select(SCALAR_CODES.to_vec()),
            2 => Just(code::STRING),
            2 => Just(code::ARRAY)
        ]
        .boxed()
    };
    element
        .prop_flat_map(move |element_type| {
            let item = match element_type {
                code::STRING => string(),
                code::ARRAY => array(depth - 1),
                scalar => scalar_of(scalar),
            };
            proptest::collection::vec(item, 0..8).prop_map(move |items| Value::Array {
                element_type,
                items,
            })
        })
        .boxed()
}

fn value() -> BoxedStrategy<Value> {
    prop_oneof![
        4 => proptest::sample::select(SCALAR_CODES.to_vec()).prop_flat_map(scalar_of),
        3 => string(),
        3 => array(2),
        // A long scalar array: many events per key.
        1 => proptest::collection::vec(any::<u16>().prop_map(Value::U16), 100..400)
            .prop_map(|items| Value::Array { element_type: code::U16, items }),
    ]
    .boxed()
}

/// Keys of 1..=24 bytes: a key entry then needs at most 36 contiguous bytes, within any buffer.
fn key() -> impl Strategy<Value = Vec<u8>> {
    "[a-z][a-z0-9_.]{0,23}".prop_map(String::into_bytes)
}

/// Tensors with names of 1..=8 bytes and 0..=4 dimensions: a tensor info then needs at most 64
/// contiguous bytes. `ne0` is a whole number of blocks.
fn tensor_shapes() -> impl Strategy<Value = Vec<(Vec<u8>, u32, Vec<u64>)>> {
    let one = (
        "[a-z][a-z0-9.]{0,7}".prop_map(String::into_bytes),
        proptest::sample::select(TENSOR_TYPES.to_vec()),
        proptest::collection::vec(1u64..6, 0..=4),
    )
        .prop_map(|(name, (code, block, _), mut ne)| {
            if let Some(ne0) = ne.first_mut() {
                *ne0 *= block;
            } else if block > 1 {
                // A scalar of a block type is not whole blocks: give it one dimension.
                ne.push(block);
            }
            (name, code, ne)
        });
    proptest::collection::vec(one, 0..24)
}

fn gguf_file() -> impl Strategy<Value = GgufFile> {
    (
        proptest::sample::select(vec![1u32, 2, 3]),
        any::<bool>(),
        proptest::collection::vec((key(), value()), 0..8),
        tensor_shapes(),
        proptest::option::of((
            proptest::sample::select(vec![8u32, 16, 32, 64, 128]),
            any::<prop::sample::Index>(),
        )),
    )
        .prop_map(|(version, big, mut metadata, shapes, alignment)| {
            // The generated keys never spell general.alignment; it is added here, anywhere.
            metadata.retain(|(k, _)| k != b"general.alignment");
            let alignment = match alignment {
                Some((a, at)) => {
                    let at = at.index(metadata.len() + 1);
                    metadata.insert(at, (b"general.alignment".to_vec(), Value::U32(a)));
                    u64::from(a)
                }
                None => 32,
            };
            // Tensors laid out back to back, each padded to the alignment.
            let mut offset = 0;
            let tensors = shapes
                .into_iter()
                .map(|(name, type_code, ne)| {
                    let &(_, block, bytes) =
                        TENSOR_TYPES.iter().find(|(c, ..)| *c == type_code).unwrap();
                    let size = ne.iter().product::<u64>() / block * bytes;
                    let t = Tensor {
                        name,
                        ne,
                        type_code,
                        offset,
                    };
                    offset = (offset + size).next_multiple_of(alignment);
                    t
                })
                .collect();
            let endian = if big { Endian::Big } else { Endian::Little };
            GgufFile {
                version,
                endian,
                metadata,
                tensors,
                alignment,
                data: Vec::new(),
            }
        })
}

// ----- running every driver ----------------------------------------------------------------

/// Every way of delivering `bytes`, by name: slice; `Read` with each buffer and each reader, push
/// with each buffer and each chunking, each told the total length and not.
fn every_driver(bytes: &[u8], random: &[usize], buffers: &[usize]) -> Vec<(String, Outcome)> {
    let total = Some(bytes.len() as u64);
    let mut runs = vec![("slice".to_owned(), drive::slice(bytes, LIMITS))];
    let readers: [(&str, Vec<usize>); 3] =
        [("1", vec![1]), ("7", vec![7]), ("random", random.to_vec())];
    for &buffer in buffers {
        for (name, sizes) in &readers {
            for (told, total_len) in [("told length", total), ("untold", None)] {
                let outcome = drive::read_chunked(bytes, sizes.clone(), buffer, total_len, LIMITS);
                runs.push((
                    format!("read buf {buffer}, reads of {name}, {told}"),
                    outcome,
                ));
            }
        }
        let all = [bytes.len().max(1)];
        for (name, sizes) in [
            ("1", &[1][..]),
            ("7", &[7][..]),
            ("random", random),
            ("all", &all[..]),
        ] {
            for (told, total_len) in [("told length", total), ("untold", None)] {
                runs.push((
                    format!("push buf {buffer}, chunks of {name}, {told}"),
                    drive::push(bytes, sizes, buffer, total_len, LIMITS),
                ));
            }
        }
    }
    runs
}

fn longest_string(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len(),
        Value::Array { items, .. } => items.iter().map(longest_string).max().unwrap_or(0),
        _ => 0,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn every_driver_yields_the_expected_events(
        file in gguf_file(),
        random in proptest::collection::vec(1usize..300, 1..16),
    ) {
        let bytes = file.to_bytes();
        let expected = expected_events(&file);
        let longest = file.metadata.iter().map(|(_, v)| longest_string(v)).max().unwrap_or(0);
        for (driver, outcome) in every_driver(&bytes, &random, &BUFFERS) {
            prop_assert_eq!(outcome.error, None, "{}", driver);
            prop_assert_eq!(&outcome.events, &expected, "{}", driver);
            // A string that cannot fit a 64-byte buffer must have arrived in pieces.
            if driver.contains("buf 64,") && longest > 64 {
                prop_assert!(outcome.string_pieces > outcome.strings(), "{}: no string was split", driver);
            }
        }
    }
}

// ----- items larger than the buffer --------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// A key of 100..200 bytes cannot be delivered through a 64-byte buffer: the streaming drivers
    /// yield the events before it, then `BufferTooSmall` at the key's offset. A 4096-byte buffer
    /// delivers everything.
    #[test]
    fn a_key_longer_than_the_buffer_is_buffer_too_small(
        file in gguf_file(),
        long_key in "[a-z]{100,200}",
        at in any::<prop::sample::Index>(),
        random in proptest::collection::vec(1usize..300, 1..16),
    ) {
        let mut file = file;
        let at = at.index(file.metadata.len() + 1);
        file.metadata.insert(at, (long_key.clone().into_bytes(), Value::U8(1)));
        let before = GgufFile { metadata: file.metadata[..at].to_vec(), tensors: vec![], ..file.clone() };
        let key_offset = before.directory().position();
        let bytes = file.to_bytes();
        let expected = expected_events(&file);
        let key_index = expected.iter().position(|e| matches!(e, Ev::Key { key, .. } if *key == long_key)).unwrap();
        let width = if file.version == 1 { 4 } else { 8 };
        for (driver, outcome) in every_driver(&bytes, &random, &[64, 4096]) {
            if driver.contains("buf 64,") {
                prop_assert_eq!(
                    outcome.error,
                    Some(Error::BufferTooSmall { needed: width + long_key.len() as u64 + 4, capacity: 64, offset: key_offset }),
                    "{}", driver
                );
                prop_assert_eq!(&outcome.events[..], &expected[..key_index], "{}", driver);
            } else {
                prop_assert_eq!(outcome.error, None, "{}", driver);
                prop_assert_eq!(&outcome.events, &expected, "{}", driver);
            }
        }
    }
}

// ----- invalid files -----------------------------------------------------------------------

/// A change to a valid file.
#[derive(Debug, Clone)]
enum Mutation {
    /// Overwrite one byte.
    Byte { at: prop::sample::Index, value: u8 },
    /// Overwrite four bytes (a type code, a count in v1, `n_dims`...) with a little-endian u32.
    U32 { at: prop::sample::Index, value: u32 },
    /// Overwrite eight bytes (a length, a count, a dimension, an offset) with a little-endian u64.
    U64 { at: prop::sample::Index, value: u64 },
    /// Cut the file.
    Truncate { at: prop::sample::Index },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let u32s = prop_oneof![
        Just(0u32),
        Just(1),
        Just(5),
        Just(13),
        Just(43),
        Just(u32::MAX),
        any::<u32>()
    ];
    let u64s = prop_oneof![
        Just(0u64),
        Just(1),
        Just(300),
        Just(1 << 20),
        Just(1 << 40),
        Just(1 << 62),
        Just(u64::MAX),
        any::<u64>()
    ];
    prop_oneof![
        (any::<prop::sample::Index>(), any::<u8>())
            .prop_map(|(at, value)| Mutation::Byte { at, value }),
        (any::<prop::sample::Index>(), u32s).prop_map(|(at, value)| Mutation::U32 { at, value }),
        (any::<prop::sample::Index>(), u64s).prop_map(|(at, value)| Mutation::U64 { at, value }),
        any::<prop::sample::Index>().prop_map(|at| Mutation::Truncate { at }),
    ]
}

fn apply(bytes: &mut Vec<u8>, mutation: &Mutation) {
    let mut put = |at: &prop::sample::Index, new: &[u8]| {
        let at = at.index(bytes.len());
        let end = (at + new.len()).min(bytes.len());
        bytes[at..end].copy_from_slice(&new[..end - at]);
    };
    match mutation {
        Mutation::Byte { at, value } => put(at, &[*value]),
        Mutation::U32 { at, value } => put(at, &value.to_le_bytes()),
        Mutation::U64 { at, value } => put(at, &value.to_le_bytes()),
        Mutation::Truncate { at } => {
            let len = at.index(bytes.len());
            bytes.truncate(len);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The same (mutated) file gives the same outcome in every driver. Drivers that know the
    /// input's length (slice; `Read` and push told the total length) agree exactly. Drivers that
    /// do not (`Read` and push untold) agree exactly among themselves, and with the first group,
    /// except where the first group rejects a count or length as exceeding the input
    /// (`ExceedsInput`): the others cannot know that, so they read on and must fail later, after
    /// the same events. Buffers hold the whole file here, so no item is too large for them; a
    /// 100-byte buffer is also run, and must agree or stop early with `BufferTooSmall` after the
    /// same events.
    #[test]
    fn a_mutated_file_fails_the_same_way_in_every_driver(
        file in gguf_file(),
        mutation in mutation(),
        random in proptest::collection::vec(1usize..300, 1..16),
    ) {
        let mut bytes = file.to_bytes();
        apply(&mut bytes, &mutation);
        let total = Some(bytes.len() as u64);
        let big = bytes.len() + 64;
        let reference = drive::slice(&bytes, LIMITS);
        let readers: [(&str, Vec<usize>); 4] =
            [("whole", vec![big]), ("1", vec![1]), ("7", vec![7]), ("random", random.clone())];

        for (name, sizes) in &readers {
            let told = drive::read_chunked(&bytes, sizes.clone(), big, total, LIMITS);
            prop_assert_eq!(told.result(), reference.result(), "read told the length, reads of {}", name);
            let chunks = if *name == "whole" { vec![bytes.len().max(1)] } else { sizes.clone() };
            let push = drive::push(&bytes, &chunks, big, total, LIMITS);
            prop_assert_eq!(push.result(), reference.result(), "push told the length, chunks of {}", name);
        }

        let untold = drive::read_chunked(&bytes, vec![big], big, None, LIMITS);
        for (name, sizes) in &readers {
            let read = drive::read_chunked(&bytes, sizes.clone(), big, None, LIMITS);
            prop_assert_eq!(read.result(), untold.result(), "read untold, reads of {}", name);
            let chunks = if *name == "whole" { vec![bytes.len().max(1)] } else { sizes.clone() };
            let push = drive::push(&bytes, &chunks, big, None, LIMITS);
            prop_assert_eq!(push.result(), untold.result(), "push, chunks of {}", name);
        }

        match reference.error {
            Some(Error::ExceedsInput { offset, .. }) => {
                let later = untold.error.expect("an input too short for a count or length is an error");
                prop_assert!(later.offset().is_some_and(|o| o >= offset), "{:?} before {:?}", later, reference.error);
                prop_assert_eq!(&untold.events[..reference.events.len()], &reference.events[..]);
            }
            _ => prop_assert_eq!(untold.result(), reference.result(), "drivers that do not know the length"),
        }

        for (name, sizes) in &readers {
            let small = drive::read_chunked(&bytes, sizes.clone(), 100, total, LIMITS);
            if small.result() != reference.result() {
                prop_assert!(
                    matches!(small.error, Some(Error::BufferTooSmall { capacity: 100, .. })),
                    "read buffer 100, reads of {}: {:?} vs {:?}, {}",
                    name, small.error, reference.error, first_difference(&small.events, &reference.events)
                );
                prop_assert!(reference.events.starts_with(&small.events), "read buffer 100, reads of {}", name);
            }
        }
    }
}

/// Where two event lists part, for messages.
fn first_difference(a: &[Ev], b: &[Ev]) -> String {
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(i) => format!("event {i}: {:?} vs {:?}", a[i], b[i]),
        None => format!("{} vs {} events", a.len(), b.len()),
    }
}

// ----- the real SmolLM2 header -------------------------------------------------------------

/// A fixed pseudo-random sequence of read and chunk sizes in 1..=4096 (xorshift; the same every run).
fn pseudo_random_sizes(n: usize) -> Vec<usize> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 4096) as usize + 1
        })
        .collect()
}

#[test]
fn the_smollm2_header_is_the_same_in_every_driver() {
    let (header, _) = drive::real_header(&model_path("SmolLM2-135M-Instruct.Q4_1.gguf"));
    let reference = drive::slice(&header, LIMITS);
    assert!(reference.is_complete(), "{:?}", reference.error);
    let random = pseudo_random_sizes(64);
    let start = std::time::Instant::now();
    let mut runs = 0;
    let mut split = 0;
    for (driver, outcome) in every_driver(&header, &random, &[100, 4096]) {
        assert_eq!(outcome.error, None, "{driver}");
        assert!(
            outcome.events == reference.events,
            "{driver}: events differ"
        );
        if outcome.string_pieces > outcome.strings() {
            split += 1;
        }
        runs += 1;
    }
    // A 64-byte buffer is too small for this file's longer tensor infos: the drivers must say so
    // at the first such item, after the same events.
    for (driver, outcome) in every_driver(&header, &random, &[64]).into_iter().skip(1) {
        let Some(Error::BufferTooSmall {
            needed,
            capacity: 64,
            ..
        }) = outcome.error
        else {
            panic!("{driver}: {:?}", outcome.error)
        };
        assert!(needed > 64);
        assert!(reference.events.starts_with(&outcome.events), "{driver}");
        assert!(
            outcome
                .events
                .iter()
                .any(|e| matches!(e, Ev::Tensor { .. })),
            "{driver}: stops in the tensors"
        );
        runs += 1;
    }
    println!(
        "SmolLM2 header ({} bytes, {} events): {runs} driver runs agree ({split} with strings in pieces) in {:.2?}",
        header.len(),
        reference.events.len(),
        start.elapsed()
    );
}
