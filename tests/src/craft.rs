//! A byte-level GGUF writer for tests.
//!
//! [`Writer`] emits every field of a GGUF header one by one, with no validation at all, so a test
//! can write a wrong magic or version, counts and lengths that lie, any value or tensor type code,
//! nested arrays of any depth, tensors with arbitrary dimensions and offsets, version-1 (32-bit)
//! lengths and big-endian files. [`GgufFile`] builds a *valid* header from a plain description
//! (keys, values, tensors) on top of it.
//!
//! It is independent of the parser under test: it knows the format, not the parser's code, so the
//! files it writes (and the offsets it reports while writing) can serve as an oracle.

/// Metadata value type codes (`enum gguf_type`).
pub mod code {
    #![allow(missing_docs)]
    pub const U8: u32 = 0;
    pub const I8: u32 = 1;
    pub const U16: u32 = 2;
    pub const I16: u32 = 3;
    pub const U32: u32 = 4;
    pub const I32: u32 = 5;
    pub const F32: u32 = 6;
    pub const BOOL: u32 = 7;
    pub const STRING: u32 = 8;
    pub const ARRAY: u32 = 9;
    pub const U64: u32 = 10;
    pub const I64: u32 = 11;
    pub const F64: u32 = 12;
}

/// Byte order of every number the writer emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endian {
    /// Little-endian (what llama.cpp writes).
    Little,
    /// Big-endian (s390x conversions).
    Big,
}

/// Writes GGUF fields in order, without checking anything.
#[derive(Debug, Clone)]
pub struct Writer {
    bytes: Vec<u8>,
    endian: Endian,
    /// Lengths, counts and dimensions are u64 (versions 2 and 3) or u32 (version 1).
    wide: bool,
}

impl Default for Writer {
    fn default() -> Self {
        Self::new()
    }
}

macro_rules! put_number {
    ($($name:ident: $t:ty),*) => {$(
        #[doc = concat!("Appends a `", stringify!($t), "` in the writer's byte order.")]
        pub fn $name(&mut self, v: $t) -> &mut Self {
            match self.endian {
                Endian::Little => self.bytes.extend_from_slice(&v.to_le_bytes()),
                Endian::Big => self.bytes.extend_from_slice(&v.to_be_bytes()),
            }
            self
        }
    )*};
}

impl Writer {
    /// A little-endian writer with 64-bit lengths (versions 2 and 3).
    pub fn new() -> Self {
        Self {
            bytes: Vec::new(),
            endian: Endian::Little,
            wide: true,
        }
    }

    /// A writer with the given byte order and length width (`wide` = 64-bit lengths).
    pub fn with(endian: Endian, wide: bool) -> Self {
        Self {
            bytes: Vec::new(),
            endian,
            wide,
        }
    }

    /// A writer for a file of `version` (1 means 32-bit lengths) in byte order `endian`.
    pub fn for_version(version: u32, endian: Endian) -> Self {
        Self::with(endian, version != 1)
    }

    /// Bytes written so far: the offset the next field will have.
    pub fn position(&self) -> u64 {
        self.bytes.len() as u64
    }

    /// The bytes written.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Takes the bytes written.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// Appends raw bytes.
    pub fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.bytes.extend_from_slice(bytes);
        self
    }

    put_number!(u8: u8, i8: i8, u16: u16, i16: i16, u32: u32, i32: i32);
    put_number!(u64: u64, i64: i64, f32: f32, f64: f64);

    /// Appends a length, count or dimension in the file's width (u32 in version 1).
    ///
    /// # Panics
    /// In version 1, if `n` does not fit in a u32 (write the u32 directly to lie differently).
    pub fn len(&mut self, n: u64) -> &mut Self {
        if self.wide {
            self.u64(n)
        } else {
            self.u32(u32::try_from(n).expect("a version-1 length must fit in u32"))
        }
    }

    /// Appends the magic, the version and the two counts.
    pub fn header(&mut self, version: u32, tensor_count: u64, metadata_count: u64) -> &mut Self {
        self.raw(b"GGUF")
            .u32(version)
            .len(tensor_count)
            .len(metadata_count)
    }

    /// Appends a string: its length, then its bytes (any bytes: invalid UTF-8, NULs).
    pub fn string(&mut self, text: &[u8]) -> &mut Self {
        self.len(text.len() as u64).raw(text)
    }

    /// Appends a string whose length field claims `claimed` bytes, followed by `text`.
    pub fn lying_string(&mut self, claimed: u64, text: &[u8]) -> &mut Self {
        self.len(claimed).raw(text)
    }

    /// Appends a key and the value type code that follows it.
    pub fn key(&mut self, name: &[u8], type_code: u32) -> &mut Self {
        self.string(name).u32(type_code)
    }

    /// Appends an array header: element type code and element count.
    pub fn array_header(&mut self, element_type: u32, len: u64) -> &mut Self {
        self.u32(element_type).len(len)
    }

    /// Appends `depth` array headers, each declaring one element of type array, except the
    /// innermost, which declares `innermost_len` elements of `innermost_type`. Iterative, so any
    /// depth can be written.
    pub fn nested_arrays(
        &mut self,
        depth: usize,
        innermost_type: u32,
        innermost_len: u64,
    ) -> &mut Self {
        for _ in 1..depth {
            self.array_header(code::ARRAY, 1);
        }
        if depth > 0 {
            self.array_header(innermost_type, innermost_len);
        }
        self
    }

    /// Appends the encoding of a value (no type code: that belongs to the key or the array).
    pub fn value(&mut self, value: &Value) -> &mut Self {
        match value {
            Value::U8(v) => self.u8(*v),
            Value::I8(v) => self.i8(*v),
            Value::U16(v) => self.u16(*v),
            Value::I16(v) => self.i16(*v),
            Value::U32(v) => self.u32(*v),
            Value::I32(v) => self.i32(*v),
            Value::F32(v) => self.f32(*v),
            Value::Bool(v) => self.u8(u8::from(*v)),
            Value::String(s) => self.string(s),
            Value::U64(v) => self.u64(*v),
            Value::I64(v) => self.i64(*v),
            Value::F64(v) => self.f64(*v),
            Value::Array {
                element_type,
                items,
            } => {
                self.array_header(*element_type, items.len() as u64);
                for item in items {
                    self.value(item);
                }
                self
            }
        }
    }

    /// Appends a key, its value's type code and the value.
    pub fn kv(&mut self, key: &[u8], value: &Value) -> &mut Self {
        self.key(key, value.type_code()).value(value)
    }

    /// Appends a tensor info with `n_dims = ne.len()`.
    pub fn tensor_info(
        &mut self,
        name: &[u8],
        ne: &[u64],
        type_code: u32,
        offset: u64,
    ) -> &mut Self {
        self.tensor_info_claiming(name, ne.len() as u32, ne, type_code, offset)
    }

    /// Appends a tensor info whose `n_dims` field says `n_dims`, whatever `ne` holds.
    pub fn tensor_info_claiming(
        &mut self,
        name: &[u8],
        n_dims: u32,
        ne: &[u64],
        type_code: u32,
        offset: u64,
    ) -> &mut Self {
        self.string(name).u32(n_dims);
        for &d in ne {
            self.len(d);
        }
        self.u32(type_code).u64(offset)
    }

    /// Appends `fill` bytes up to the next multiple of `alignment`.
    pub fn pad_to(&mut self, alignment: u64, fill: u8) -> &mut Self {
        let end = self.position().next_multiple_of(alignment);
        self.bytes.resize(end as usize, fill);
        self
    }
}

/// A metadata value to write. Arrays carry their element type code explicitly, so a test can make
/// it disagree with the items.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// u8
    U8(u8),
    /// i8
    I8(i8),
    /// u16
    U16(u16),
    /// i16
    I16(i16),
    /// u32
    U32(u32),
    /// i32
    I32(i32),
    /// f32
    F32(f32),
    /// bool, written as 0 or 1
    Bool(bool),
    /// string (any bytes)
    String(Vec<u8>),
    /// u64
    U64(u64),
    /// i64
    I64(i64),
    /// f64
    F64(f64),
    /// An array: element type code and the items (written without type codes).
    Array {
        /// Element type code as written.
        element_type: u32,
        /// The elements.
        items: Vec<Value>,
    },
}

impl Value {
    /// A string value from text.
    pub fn str(text: &str) -> Self {
        Self::String(text.as_bytes().to_vec())
    }

    /// An array whose element type is taken from its first item (u8 when empty).
    pub fn array(items: Vec<Value>) -> Self {
        let element_type = items.first().map_or(code::U8, Value::type_code);
        Self::Array {
            element_type,
            items,
        }
    }

    /// The value's type code.
    pub fn type_code(&self) -> u32 {
        match self {
            Self::U8(_) => code::U8,
            Self::I8(_) => code::I8,
            Self::U16(_) => code::U16,
            Self::I16(_) => code::I16,
            Self::U32(_) => code::U32,
            Self::I32(_) => code::I32,
            Self::F32(_) => code::F32,
            Self::Bool(_) => code::BOOL,
            Self::String(_) => code::STRING,
            Self::Array { .. } => code::ARRAY,
            Self::U64(_) => code::U64,
            Self::I64(_) => code::I64,
            Self::F64(_) => code::F64,
        }
    }
}

/// A tensor info to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tensor {
    /// Name bytes.
    pub name: Vec<u8>,
    /// Dimensions, fastest-varying first (ggml's `ne`).
    pub ne: Vec<u64>,
    /// ggml type code.
    pub type_code: u32,
    /// Offset relative to the data section.
    pub offset: u64,
}

/// A whole GGUF header described as data; [`GgufFile::to_bytes`] writes it.
#[derive(Debug, Clone, PartialEq)]
pub struct GgufFile {
    /// Version field (1 writes 32-bit lengths).
    pub version: u32,
    /// Byte order.
    pub endian: Endian,
    /// Key/value pairs, in order.
    pub metadata: Vec<(Vec<u8>, Value)>,
    /// Tensor infos, in order.
    pub tensors: Vec<Tensor>,
    /// Alignment of the data section (the caller keeps it consistent with `general.alignment`).
    pub alignment: u64,
    /// Bytes written after the padding (tensor data, or nothing).
    pub data: Vec<u8>,
}

impl Default for GgufFile {
    fn default() -> Self {
        Self {
            version: 3,
            endian: Endian::Little,
            metadata: Vec::new(),
            tensors: Vec::new(),
            alignment: 32,
            data: Vec::new(),
        }
    }
}

impl GgufFile {
    /// Writes the header up to the end of the tensor directory (no padding).
    pub fn directory(&self) -> Writer {
        let mut w = Writer::for_version(self.version, self.endian);
        w.header(
            self.version,
            self.tensors.len() as u64,
            self.metadata.len() as u64,
        );
        for (key, value) in &self.metadata {
            w.kv(key, value);
        }
        for t in &self.tensors {
            w.tensor_info(&t.name, &t.ne, t.type_code, t.offset);
        }
        w
    }

    /// Offset of the data section: the end of the directory rounded up to the alignment.
    pub fn data_offset(&self) -> u64 {
        self.directory().position().next_multiple_of(self.alignment)
    }

    /// The whole file: directory, zero padding to the alignment, then `data`.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = self.directory();
        w.pad_to(self.alignment, 0).raw(&self.data);
        w.into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_the_documented_layout() {
        // Hand-written bytes of a v3 file with one u32 key and one F32 tensor [4] at offset 0.
        let mut expected = Vec::new();
        expected.extend_from_slice(b"GGUF");
        expected.extend_from_slice(&3u32.to_le_bytes());
        expected.extend_from_slice(&1u64.to_le_bytes());
        expected.extend_from_slice(&1u64.to_le_bytes());
        expected.extend_from_slice(&1u64.to_le_bytes());
        expected.extend_from_slice(b"k");
        expected.extend_from_slice(&4u32.to_le_bytes());
        expected.extend_from_slice(&7u32.to_le_bytes());
        expected.extend_from_slice(&1u64.to_le_bytes());
        expected.extend_from_slice(b"w");
        expected.extend_from_slice(&1u32.to_le_bytes());
        expected.extend_from_slice(&4u64.to_le_bytes());
        expected.extend_from_slice(&0u32.to_le_bytes());
        expected.extend_from_slice(&0u64.to_le_bytes());
        expected.resize(expected.len().next_multiple_of(32), 0);
        let file = GgufFile {
            metadata: vec![(b"k".to_vec(), Value::U32(7))],
            tensors: vec![Tensor {
                name: b"w".to_vec(),
                ne: vec![4],
                type_code: 0,
                offset: 0,
            }],
            ..GgufFile::default()
        };
        assert_eq!(file.to_bytes(), expected);
    }

    #[test]
    fn version_one_and_big_endian_change_widths_and_order() {
        let mut v1 = Writer::for_version(1, Endian::Little);
        v1.header(1, 2, 3);
        assert_eq!(v1.bytes(), b"GGUF\x01\0\0\0\x02\0\0\0\x03\0\0\0");
        let mut be = Writer::for_version(3, Endian::Big);
        be.header(3, 1, 0);
        assert_eq!(
            be.bytes(),
            b"GGUF\0\0\0\x03\0\0\0\0\0\0\0\x01\0\0\0\0\0\0\0\0"
        );
    }

    #[test]
    fn nested_arrays_write_one_header_per_level() {
        let mut w = Writer::new();
        w.nested_arrays(3, code::U8, 0);
        assert_eq!(w.position(), 36);
        assert_eq!(&w.bytes()[..4], &code::ARRAY.to_le_bytes());
        assert_eq!(&w.bytes()[24..28], &code::U8.to_le_bytes());
    }
}
