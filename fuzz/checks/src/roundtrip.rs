//! `roundtrip`: structured metadata and tensors, built from the fuzzer's bytes with `arbitrary`,
//! go through the core writer, then the parser: the events are the ones written, the tensor data
//! sits at its offsets, and the std adapter's checks accept the file. When the writer refuses the
//! content (a name or depth the parser would reject, a duplicate), the refusal must be one of
//! those errors, and nothing panics.

use arbitrary::{Result as ArbResult, Unstructured};
use miniquant::gguf::{
    ByteOrder, Event, GgufWriter, Limits, Scalar, TensorSpec, ValueType, WriteOptions,
    ALIGNMENT_KEY,
};
use miniquant::{Error, GgmlType};

use crate::drive::{Collector, Ev};

/// A metadata value.
#[derive(Debug, Clone)]
pub enum Val {
    /// A scalar.
    Scalar(Scalar),
    /// A string.
    Str(String),
    /// Element type and elements.
    Array(ValueType, Vec<Val>),
}

/// A tensor: name, type, dimensions, data.
#[derive(Debug, Clone)]
pub struct Tensor {
    /// Name.
    pub name: String,
    /// Type.
    pub ggml_type: GgmlType,
    /// `ne`.
    pub ne: Vec<u64>,
    /// Data (exactly the tensor's size).
    pub data: Vec<u8>,
}

/// A whole file's content.
#[derive(Debug, Clone)]
pub struct Content {
    /// Version and byte order.
    pub options: WriteOptions,
    /// `general.alignment`, if written (first).
    pub alignment: Option<u32>,
    /// Keys and values.
    pub metadata: Vec<(String, Val)>,
    /// Tensors.
    pub tensors: Vec<Tensor>,
}

const DEPTH_LIMIT: u32 = 9; // one above the default limit, so the writer's refusal is exercised

fn value_type(u: &mut Unstructured<'_>, depth: u32) -> ArbResult<ValueType> {
    let max = if depth < DEPTH_LIMIT { 12 } else { 11 };
    let code = u.int_in_range(0..=max)?;
    let t = ValueType::from_code(code).unwrap_or(ValueType::U8);
    Ok(if depth >= DEPTH_LIMIT && t == ValueType::Array {
        ValueType::U8
    } else {
        t
    })
}

fn scalar(u: &mut Unstructured<'_>, t: ValueType) -> ArbResult<Scalar> {
    Ok(match t {
        ValueType::U8 => Scalar::U8(u.arbitrary()?),
        ValueType::I8 => Scalar::I8(u.arbitrary()?),
        ValueType::U16 => Scalar::U16(u.arbitrary()?),
        ValueType::I16 => Scalar::I16(u.arbitrary()?),
        ValueType::U32 => Scalar::U32(u.arbitrary()?),
        ValueType::I32 => Scalar::I32(u.arbitrary()?),
        ValueType::F32 => Scalar::F32(f32::from_bits(u.arbitrary()?)),
        ValueType::Bool => Scalar::Bool(u.arbitrary()?),
        ValueType::U64 => Scalar::U64(u.arbitrary()?),
        ValueType::I64 => Scalar::I64(u.arbitrary()?),
        _ => Scalar::F64(f64::from_bits(u.arbitrary()?)),
    })
}

fn value(u: &mut Unstructured<'_>, t: ValueType, depth: u32) -> ArbResult<Val> {
    Ok(match t {
        ValueType::String => Val::Str(u.arbitrary()?),
        ValueType::Array => {
            let et = value_type(u, depth + 1)?;
            let len = u.int_in_range(0..=if depth > 2 { 3 } else { 40 })?;
            let mut items = Vec::with_capacity(len);
            for _ in 0..len {
                items.push(value(u, et, depth + 1)?);
            }
            Val::Array(et, items)
        }
        t => Val::Scalar(scalar(u, t)?),
    })
}

fn val_type(v: &Val) -> ValueType {
    match v {
        Val::Scalar(s) => s.value_type(),
        Val::Str(_) => ValueType::String,
        Val::Array(..) => ValueType::Array,
    }
}

impl Content {
    /// The content the fuzzer's bytes describe.
    pub fn from_bytes(data: &[u8]) -> ArbResult<Self> {
        let mut u = Unstructured::new(data);
        let version = if u.arbitrary()? { 3 } else { 2 };
        let byte_order = if version == 3 && u.arbitrary()? {
            ByteOrder::Big
        } else {
            ByteOrder::Little
        };
        let alignment = if u.arbitrary()? {
            Some(1u32 << u.int_in_range(0..=9)?)
        } else {
            None
        };
        let mut metadata = Vec::new();
        for _ in 0..u.int_in_range(0..=8)? {
            let key: String = u.arbitrary()?;
            let t = value_type(&mut u, 0)?;
            metadata.push((key, value(&mut u, t, 0)?));
        }
        const TYPES: [GgmlType; 10] = [
            GgmlType::F32,
            GgmlType::F16,
            GgmlType::BF16,
            GgmlType::Q4_0,
            GgmlType::Q8_0,
            GgmlType::Q4_K,
            GgmlType::Q6_K,
            GgmlType::IQ4_NL,
            GgmlType::I8,
            GgmlType::F64,
        ];
        let mut tensors = Vec::new();
        for _ in 0..u.int_in_range(0..=6)? {
            let name: String = u.arbitrary()?;
            let ggml_type = *u.choose(&TYPES)?;
            let n_dims = u.int_in_range(0..=4)?;
            let mut ne = Vec::with_capacity(n_dims);
            for i in 0..n_dims {
                let d: u64 = u.int_in_range(0..=3)?;
                ne.push(if i == 0 {
                    d * u64::from(ggml_type.block_size())
                } else {
                    d
                });
            }
            if ne.is_empty() && ggml_type.block_size() > 1 {
                ne.push(u64::from(ggml_type.block_size()));
            }
            let elements: u64 = ne.iter().product();
            let bytes = ggml_type.bytes_for(elements).unwrap_or(0) as usize;
            let mut data = vec![0u8; bytes];
            u.fill_buffer(&mut data)?;
            tensors.push(Tensor {
                name,
                ggml_type,
                ne,
                data,
            });
        }
        Ok(Self {
            options: WriteOptions {
                version,
                byte_order,
                ..WriteOptions::DEFAULT
            },
            alignment,
            metadata,
            tensors,
        })
    }

    /// Writes the file; returns the bytes and the events the parser must yield.
    pub fn write(&self) -> Result<(Vec<u8>, Vec<Ev>), Error> {
        let specs: Vec<TensorSpec<'_>> = self
            .tensors
            .iter()
            .map(|t| TensorSpec {
                name: &t.name,
                ggml_type: t.ggml_type,
                ne: &t.ne,
            })
            .collect();
        let count = self.metadata.len() as u64 + u64::from(self.alignment.is_some());
        let mut w = GgufWriter::new(Vec::new(), self.options, count, &specs)?;
        let mut expected = Collector::default();
        let header = miniquant::gguf::Header {
            version: self.options.version,
            byte_order: self.options.byte_order,
            tensor_count: specs.len() as u64,
            metadata_count: count,
        };
        expected.push(&Event::Header(header));
        if let Some(a) = self.alignment {
            w.key(ALIGNMENT_KEY, ValueType::U32)?;
            w.scalar(Scalar::U32(a))?;
            expected.push(&Event::Key {
                key: ALIGNMENT_KEY,
                value_type: ValueType::U32,
            });
            expected.push(&Event::Scalar(Scalar::U32(a)));
        }
        for (key, v) in &self.metadata {
            w.key(key, val_type(v))?;
            expected.push(&Event::Key {
                key,
                value_type: val_type(v),
            });
            write_value(&mut w, v, &mut expected)?;
        }
        let section = w.finish_header()?;
        let mut expected = expected.finish(None).events;
        let alignment = u64::from(section.alignment);
        let mut offset = 0u64;
        for t in &self.tensors {
            expected.push(Ev::Tensor {
                name: t.name.clone(),
                ne: t.ne.clone(),
                ggml_type: t.ggml_type,
                offset,
                elements: t.ne.iter().product(),
                bytes: t.data.len() as u64,
            });
            offset += (t.data.len() as u64).next_multiple_of(alignment);
        }
        expected.push(Ev::End(section));
        for t in &self.tensors {
            let (a, b) = t.data.split_at(t.data.len() / 2);
            w.tensor_data(a)?;
            w.tensor_data(b)?;
        }
        Ok((w.finish()?, expected))
    }
}

/// Writes `v` and records its events. Recursive: the generator bounds the depth.
fn write_value(
    w: &mut GgufWriter<'_, Vec<u8>>,
    v: &Val,
    expected: &mut Collector,
) -> Result<(), Error> {
    match v {
        Val::Scalar(s) => {
            w.scalar(*s)?;
            expected.push(&Event::Scalar(*s));
        }
        Val::Str(s) => {
            w.string(s)?;
            expected.push(&Event::String(miniquant::gguf::StrPiece {
                text: s,
                at: 0,
                len: s.len() as u64,
            }));
        }
        Val::Array(t, items) => {
            w.array_start(*t, items.len() as u64)?;
            expected.push(&Event::ArrayStart {
                element_type: *t,
                len: items.len() as u64,
            });
            for item in items {
                write_value(w, item, expected)?;
            }
            w.array_end()?;
            expected.push(&Event::ArrayEnd);
        }
    }
    Ok(())
}

/// Whether the writer's refusal is one the content explains.
fn is_expected_refusal(content: &Content, e: &Error) -> bool {
    match e {
        Error::EmptyName { .. } | Error::NulInName { .. } | Error::DuplicateKey { .. } => true,
        Error::BadAlignment { .. } => content.metadata.iter().any(|(k, _)| k == ALIGNMENT_KEY),
        Error::LimitExceeded {
            limit: miniquant::error::Limit::Depth,
            ..
        } => true,
        Error::WriterMisuse {
            problem: miniquant::gguf::Misuse::DuplicateTensor { .. },
            ..
        } => true,
        _ => false,
    }
}

/// The check.
pub fn check(data: &[u8]) {
    let Ok(content) = Content::from_bytes(data) else {
        return;
    };
    let (file, expected) = match content.write() {
        Ok(written) => written,
        Err(e) => {
            assert!(
                is_expected_refusal(&content, &e),
                "the writer refused valid content: {e:?}"
            );
            return;
        }
    };
    let parsed = crate::drive::slice(&file, Limits::DEFAULT);
    assert_eq!(parsed.error, None, "a written file does not parse");
    assert_eq!(
        parsed.events, expected,
        "parsed events differ from those written"
    );
    let small = crate::drive::push(&file, &[7], 4096, Some(file.len() as u64), Limits::DEFAULT);
    assert_eq!(small.result(), parsed.result(), "push driver");
    let Some(Ev::End(section)) = parsed.events.last() else {
        unreachable!("complete")
    };
    for (t, ev) in content.tensors.iter().zip(
        parsed
            .events
            .iter()
            .filter(|e| matches!(e, Ev::Tensor { .. })),
    ) {
        let Ev::Tensor { offset, .. } = ev else {
            unreachable!()
        };
        let start = (section.data_offset + offset) as usize;
        assert_eq!(
            &file[start..start + t.data.len()],
            &t.data[..],
            "{}",
            t.name
        );
    }
    let report = miniquant_std::validate::check_bytes(&file);
    assert!(
        report.is_valid(),
        "validate rejects a written file: {:?}",
        report.errors
    );
}
