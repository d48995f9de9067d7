//! The pull parser for C: an `mq_parser` in the caller's memory, fed from a byte range or a read
//! callback through a caller buffer, yielding one `mq_event` per call.

use core::ffi::{c_int, c_void};
use core::mem::{align_of, size_of};

use miniquant::gguf::{ByteOrder, Event, Limits, ReadParser, Scalar, SliceParser, ValueType};
use miniquant::Error;

use crate::error::{mq_error, Failure, MQ_DONE, MQ_OK};
use crate::ffi;

/// The parser's limits (see each field); `mq_limits_default()` gives the defaults.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mq_limits {
    /// Array nesting depth (at most 8 whatever is set here).
    pub max_depth: u32,
    /// Dimensions of one tensor (at most 4).
    pub max_dims: u32,
    /// Bytes of one string value.
    pub max_string_bytes: u64,
    /// Bytes of one key or tensor name.
    pub max_key_bytes: u64,
    /// Elements of one array.
    pub max_array_len: u64,
    /// Metadata key/value pairs.
    pub max_metadata: u64,
    /// Tensors.
    pub max_tensors: u64,
}

impl mq_limits {
    fn to_core(self) -> Limits {
        Limits {
            max_depth: self.max_depth,
            max_string_bytes: self.max_string_bytes,
            max_key_bytes: self.max_key_bytes,
            max_array_len: self.max_array_len,
            max_metadata: self.max_metadata,
            max_tensors: self.max_tensors,
            max_dims: self.max_dims,
        }
    }
}

/// The default limits: depth 8, strings and arrays up to 2^30, keys up to 65535 bytes, 2^20
/// metadata pairs and tensors, 4 dimensions. They accept every real file we know of.
#[no_mangle]
pub extern "C" fn mq_limits_default() -> mq_limits {
    let d = Limits::DEFAULT;
    mq_limits {
        max_depth: d.max_depth,
        max_dims: d.max_dims,
        max_string_bytes: d.max_string_bytes,
        max_key_bytes: d.max_key_bytes,
        max_array_len: d.max_array_len,
        max_metadata: d.max_metadata,
        max_tensors: d.max_tensors,
    }
}

/// Reads up to `len` bytes into `buf`; returns the number read (at most `len`), 0 at the end of
/// the stream, or a negative value on failure (the parse fails with `MQ_E_IO`).
pub type mq_read_fn =
    Option<unsafe extern "C" fn(ctx: *mut c_void, buf: *mut u8, len: usize) -> c_int>;

/// `mq_parser_init_read`'s `total_len` when the stream's length is not known.
pub const MQ_LEN_UNKNOWN: u64 = u64::MAX;

/// 64-bit words of an `mq_parser`.
pub const MQ_PARSER_WORDS: usize = 48;

/// A parser, in memory the caller owns (on its stack or in a static): its contents are private.
/// Initialise it with `mq_parser_init_slice` or `mq_parser_init_read`; it holds no resource, so it
/// needs no release. It may be moved (copied) between calls, but not while a call runs.
#[repr(C)]
pub struct mq_parser {
    /// Private.
    pub _opaque: [u64; MQ_PARSER_WORDS],
}

/// Marks an initialised parser (a random or zeroed `mq_parser` is refused).
const INITIALISED: u64 = 0x6d71_7061_7273_6572;

/// What an `mq_parser` holds once initialised.
#[repr(C)]
struct State {
    tag: u64,
    /// The error the parse ended with, returned again by later calls.
    failed: Option<Error>,
    driver: Driver,
}

enum Driver {
    /// Borrows the caller's bytes for as long as the parser is used (the C contract).
    Slice(SliceParser<'static>),
    /// Borrows the caller's buffer likewise.
    Read(ReadParser<'static, Callback>),
}

const _: () = assert!(size_of::<State>() <= size_of::<mq_parser>());
const _: () = assert!(align_of::<State>() <= align_of::<mq_parser>());

/// The C read callback as an `embedded_io::Read`.
struct Callback {
    read: unsafe extern "C" fn(*mut c_void, *mut u8, usize) -> c_int,
    ctx: *mut c_void,
}

impl embedded_io::ErrorType for Callback {
    type Error = embedded_io::ErrorKind;
}

impl embedded_io::Read for Callback {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, embedded_io::ErrorKind> {
        let len = buf.len().min(c_int::MAX as usize);
        // SAFETY: `buf` is valid for `len` bytes of writes for the duration of the call; what the
        // callback does with `ctx` is the caller's contract (`mq_parser_init_read`).
        let n = unsafe { (self.read)(self.ctx, buf.as_mut_ptr(), len) };
        match usize::try_from(n) {
            Ok(n) if n <= len => Ok(n),
            Ok(_) => Err(embedded_io::ErrorKind::InvalidData),
            Err(_) => Err(embedded_io::ErrorKind::Other),
        }
    }
}

/// Writes `state` into `p`.
///
/// # Safety
/// `p` must be valid for writes of an `mq_parser` (checked non-NULL and aligned here).
unsafe fn install(p: *mut mq_parser, driver: Driver) -> Result<(), Failure> {
    ffi::span(p.cast_const(), 1)?;
    let state = State {
        tag: INITIALISED,
        failed: None,
        driver,
    };
    // SAFETY: `p` is non-NULL and aligned for `mq_parser` (checked), whose size and alignment
    // hold a `State` (asserted at compile time); valid for writes by the caller's contract.
    unsafe { p.cast::<State>().write(state) };
    Ok(())
}

/// Starts parsing the `len` bytes at `data` (the whole file, or at least its header). `limits` NULL
/// means the defaults. The parser checks the header, not where tensor data lies: before reading a
/// tensor, check that `data_offset + offset + bytes` is within the file.
///
/// Ownership: `data` stays the caller's and must stay valid and unchanged while the parser is used;
/// events point into it. `p` is the caller's memory, overwritten.
///
/// Returns `MQ_OK`, or `MQ_E_NULL` (`p` NULL, or `data` NULL with `len > 0`),
/// `MQ_E_MISALIGNED_POINTER` or `MQ_E_TOO_LONG`; `err` (may be NULL) receives the details.
///
/// # Safety
/// `p` valid for writes of an `mq_parser`; `data` valid for `len` bytes as above; `limits` NULL or
/// valid; `err` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mq_parser_init_slice(
    p: *mut mq_parser,
    data: *const u8,
    len: usize,
    limits: *const mq_limits,
    err: *mut mq_error,
) -> i32 {
    let result = (|| {
        // SAFETY: the caller's contract on `limits`.
        let limits = unsafe { limits_or_default(limits) }?;
        // SAFETY: the caller's contract on `data`; the slice lives as long as the parser is used.
        let input: &'static [u8] = unsafe { ffi::slice(data, len) }?;
        // SAFETY: the caller's contract on `p`.
        unsafe { install(p, Driver::Slice(SliceParser::new(input, limits))) }
    })();
    // SAFETY: the caller's contract on `err`.
    unsafe { ffi::finish(err, result) }
}

/// Starts parsing a stream read through `read(ctx, ...)` into the caller's buffer `buf` of
/// `buf_len` bytes (at least 64; every key and tensor info must fit it, else
/// `MQ_E_BUFFER_TOO_SMALL`; strings longer than it arrive in pieces). `total_len` is the stream's
/// length if known (counts and lengths are then checked against the bytes that remain), else
/// `MQ_LEN_UNKNOWN`. `limits` NULL means the defaults.
///
/// Ownership: `buf` and `ctx` stay the caller's; `buf` must stay valid and untouched by the caller
/// while the parser is used (events point into it until the next call). The parser never seeks.
///
/// Returns `MQ_OK`, `MQ_E_NULL` (`p`, `read` or `buf` NULL), `MQ_E_BUFFER_TOO_SMALL` (`buf_len` <
/// 64), `MQ_E_MISALIGNED_POINTER` or `MQ_E_TOO_LONG`; `err` (may be NULL) receives the details.
///
/// # Safety
/// `p` valid for writes of an `mq_parser`; `buf` valid for `buf_len` bytes as above; `read` a
/// function that writes at most `len` bytes to its `buf`; `limits` NULL or valid; `err` NULL or
/// valid for writes.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn mq_parser_init_read(
    p: *mut mq_parser,
    read: mq_read_fn,
    ctx: *mut c_void,
    buf: *mut u8,
    buf_len: usize,
    total_len: u64,
    limits: *const mq_limits,
    err: *mut mq_error,
) -> i32 {
    let result = (|| {
        let read = read.ok_or(Failure::Null)?;
        if buf.is_null() {
            return Err(Failure::Null);
        }
        // SAFETY: the caller's contract on `limits`.
        let limits = unsafe { limits_or_default(limits) }?;
        // SAFETY: the caller's contract on `buf`: exclusive to the parser while it is used.
        let window: &'static mut [u8] = unsafe { ffi::slice_mut(buf, buf_len) }?;
        let mut parser = ReadParser::new(Callback { read, ctx }, window, limits)?;
        if total_len != MQ_LEN_UNKNOWN {
            parser = parser.with_total_len(total_len);
        }
        // SAFETY: the caller's contract on `p`.
        unsafe { install(p, Driver::Read(parser)) }
    })();
    // SAFETY: the caller's contract on `err`.
    unsafe { ffi::finish(err, result) }
}

/// # Safety
/// `limits` NULL or valid for reads.
unsafe fn limits_or_default(limits: *const mq_limits) -> Result<Limits, Failure> {
    if limits.is_null() {
        return Ok(Limits::DEFAULT);
    }
    // SAFETY: non-NULL; valid by the caller's contract; alignment checked by `slice`.
    let l = unsafe { ffi::slice(limits, 1) }?;
    Ok(l.first().map_or(Limits::DEFAULT, |l| l.to_core()))
}

/// `mq_event.kind`: the fixed header (`header`).
pub const MQ_EVENT_HEADER: i32 = 1;
/// A metadata key (`text`) and its value's type (`value_type`).
pub const MQ_EVENT_KEY: i32 = 2;
/// A scalar value of a key (`value_type`, `scalar`).
pub const MQ_EVENT_SCALAR: i32 = 3;
/// A run of `len` numeric or bool array elements of type `value_type`, `raw`/`raw_len` bytes in the
/// file's byte order (`header.big_endian`).
pub const MQ_EVENT_SCALARS: i32 = 4;
/// A string value or a piece of one: `text`/`text_len` (UTF-8, not NUL-terminated), at byte `at`
/// of the whole string of `len` bytes.
pub const MQ_EVENT_STRING: i32 = 5;
/// An array of `len` elements of type `value_type` starts.
pub const MQ_EVENT_ARRAY_START: i32 = 6;
/// The innermost open array ends.
pub const MQ_EVENT_ARRAY_END: i32 = 7;
/// A tensor info (`text`: its name; `tensor`).
pub const MQ_EVENT_TENSOR: i32 = 8;
/// The end of the header (`data`); `mq_parser_next` returns `MQ_DONE` after it.
pub const MQ_EVENT_END: i32 = 9;

/// The fixed header.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct mq_header {
    /// GGUF version: 1, 2 or 3.
    pub version: u32,
    /// 1 if the file is big-endian.
    pub big_endian: u32,
    /// Tensor infos that follow the metadata.
    pub tensor_count: u64,
    /// Metadata key/value pairs.
    pub metadata_count: u64,
}

/// A scalar metadata value.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct mq_scalar {
    /// The value's bits, zero-extended: integers and bools as stored (converted to the host's byte
    /// order), f32 and f64 as their IEEE bits.
    pub bits: u64,
    /// The value as a double (exact for every type but 64-bit integers beyond 2^53).
    pub as_f64: f64,
}

/// A tensor info.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct mq_tensor_info {
    /// ggml type code.
    pub ggml_type: u32,
    /// Number of dimensions (0..=4).
    pub n_dims: u32,
    /// Dimensions, fastest-varying first; unused ones are 1.
    pub ne: [u64; 4],
    /// Offset of its data relative to the data section.
    pub offset: u64,
    /// Elements.
    pub elements: u64,
    /// Bytes of data.
    pub bytes: u64,
}

/// The end of the header.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct mq_data_section {
    /// The alignment in effect.
    pub alignment: u32,
    /// Absolute offset where tensor data starts.
    pub data_offset: u64,
}

/// One event of the header, in file order. `kind` says which fields are set; the others are 0.
/// Pointers are valid until the next call on the parser (with a byte-range parser, as long as the
/// caller's bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mq_event {
    /// `MQ_EVENT_*`.
    pub kind: i32,
    /// The value type code (0..=12) of a key's value, a scalar, a run's or an array's elements;
    /// -1 otherwise.
    pub value_type: i32,
    /// Absolute byte offset where the event's bytes start.
    pub offset: u64,
    /// A key, string (piece) or tensor name; UTF-8, not NUL-terminated; NULL when `text_len` is 0.
    pub text: *const u8,
    /// Bytes at `text`.
    pub text_len: usize,
    /// Strings: the whole string's length; arrays: their element count; runs: elements in the run.
    pub len: u64,
    /// Strings: position of this piece in the whole string.
    pub at: u64,
    /// Runs: the elements' bytes as stored.
    pub raw: *const u8,
    /// Bytes at `raw`.
    pub raw_len: usize,
    /// `MQ_EVENT_SCALAR`.
    pub scalar: mq_scalar,
    /// `MQ_EVENT_HEADER`.
    pub header: mq_header,
    /// `MQ_EVENT_TENSOR`.
    pub tensor: mq_tensor_info,
    /// `MQ_EVENT_END`.
    pub data: mq_data_section,
}

impl mq_event {
    const EMPTY: mq_event = mq_event {
        kind: 0,
        value_type: -1,
        offset: 0,
        text: core::ptr::null(),
        text_len: 0,
        len: 0,
        at: 0,
        raw: core::ptr::null(),
        raw_len: 0,
        scalar: mq_scalar {
            bits: 0,
            as_f64: 0.0,
        },
        header: mq_header {
            version: 0,
            big_endian: 0,
            tensor_count: 0,
            metadata_count: 0,
        },
        tensor: mq_tensor_info {
            ggml_type: 0,
            n_dims: 0,
            ne: [0; 4],
            offset: 0,
            elements: 0,
            bytes: 0,
        },
        data: mq_data_section {
            alignment: 0,
            data_offset: 0,
        },
    };
}

/// A scalar as C sees it.
pub fn scalar_to_c(s: Scalar) -> mq_scalar {
    let (bits, as_f64) = match s {
        Scalar::U8(v) => (u64::from(v), f64::from(v)),
        Scalar::I8(v) => (u64::from(v as u8), f64::from(v)),
        Scalar::U16(v) => (u64::from(v), f64::from(v)),
        Scalar::I16(v) => (u64::from(v as u16), f64::from(v)),
        Scalar::U32(v) => (u64::from(v), f64::from(v)),
        Scalar::I32(v) => (u64::from(v as u32), f64::from(v)),
        Scalar::F32(v) => (u64::from(v.to_bits()), f64::from(v)),
        Scalar::Bool(v) => (u64::from(v), f64::from(u8::from(v))),
        Scalar::U64(v) => (v, v as f64),
        Scalar::I64(v) => (v as u64, v as f64),
        Scalar::F64(v) => (v.to_bits(), v),
    };
    mq_scalar { bits, as_f64 }
}

fn type_code(t: ValueType) -> i32 {
    t.code() as i32
}

fn event_to_c(event: &Event<'_>, offset: u64) -> mq_event {
    let mut c = mq_event {
        offset,
        ..mq_event::EMPTY
    };
    let text = |c: &mut mq_event, s: &str| {
        if !s.is_empty() {
            c.text = s.as_ptr();
            c.text_len = s.len();
        }
    };
    match *event {
        Event::Header(h) => {
            c.kind = MQ_EVENT_HEADER;
            c.header = mq_header {
                version: h.version,
                big_endian: u32::from(h.byte_order == ByteOrder::Big),
                tensor_count: h.tensor_count,
                metadata_count: h.metadata_count,
            };
        }
        Event::Key { key, value_type } => {
            c.kind = MQ_EVENT_KEY;
            c.value_type = type_code(value_type);
            text(&mut c, key);
        }
        Event::Scalar(s) => {
            c.kind = MQ_EVENT_SCALAR;
            c.value_type = type_code(s.value_type());
            c.scalar = scalar_to_c(s);
        }
        Event::Scalars(run) => {
            c.kind = MQ_EVENT_SCALARS;
            c.value_type = type_code(run.element_type());
            c.len = run.len() as u64;
            if !run.raw().is_empty() {
                c.raw = run.raw().as_ptr();
                c.raw_len = run.raw().len();
            }
        }
        Event::String(piece) => {
            c.kind = MQ_EVENT_STRING;
            c.value_type = type_code(ValueType::String);
            c.len = piece.len;
            c.at = piece.at;
            text(&mut c, piece.text);
        }
        Event::ArrayStart { element_type, len } => {
            c.kind = MQ_EVENT_ARRAY_START;
            c.value_type = type_code(element_type);
            c.len = len;
        }
        Event::ArrayEnd => c.kind = MQ_EVENT_ARRAY_END,
        Event::Tensor(t) => {
            c.kind = MQ_EVENT_TENSOR;
            text(&mut c, t.name);
            let mut ne = [1u64; 4];
            for (slot, d) in ne.iter_mut().zip(t.ne()) {
                *slot = *d;
            }
            c.tensor = mq_tensor_info {
                ggml_type: t.ggml_type.code(),
                n_dims: t.n_dims,
                ne,
                offset: t.offset,
                elements: t.elements,
                bytes: t.bytes,
            };
        }
        Event::End(d) => {
            c.kind = MQ_EVENT_END;
            c.data = mq_data_section {
                alignment: d.alignment,
                data_offset: d.data_offset,
            };
        }
    }
    c
}

/// The initialised state in `p`.
///
/// # Safety
/// `p` NULL or valid for reads and writes of an `mq_parser`, not used elsewhere during `'a`.
unsafe fn state<'a>(p: *mut mq_parser) -> Result<&'a mut State, Failure> {
    ffi::span(p.cast_const(), 1)?;
    // SAFETY: non-NULL and aligned (checked); any bit pattern is a valid u64, and the tag is the
    // first field of both `mq_parser`'s words and `State` (`repr(C)`).
    let tag = unsafe { p.cast::<u64>().read() };
    if tag != INITIALISED {
        return Err(Failure::NotInitialised);
    }
    // SAFETY: the tag says `mq_parser_init_*` wrote a `State` here (a caller that forged the tag
    // broke the contract); exclusive by the caller's contract.
    Ok(unsafe { &mut *p.cast::<State>() })
}

/// Pulls the next event into `*out`.
///
/// Returns `MQ_OK` (an event was written), `MQ_DONE` (the header ended with the previous event:
/// nothing written), or an error code: a parse error (`MQ_E_TRUNCATED`, `MQ_E_LIMIT_EXCEEDED`,
/// ...; `err` holds its offset and values, and every later call returns it again), `MQ_E_NULL`
/// (`p` or `out` NULL) or `MQ_E_NOT_INITIALISED`. `err` may be NULL.
///
/// # Safety
/// `p` an initialised parser whose input or buffer is still valid; `out` valid for writes of an
/// `mq_event`; `err` NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn mq_parser_next(
    p: *mut mq_parser,
    out: *mut mq_event,
    err: *mut mq_error,
) -> i32 {
    let result = (|| {
        ffi::span(out.cast_const(), 1)?;
        // SAFETY: the caller's contract on `p`.
        let state = unsafe { state(p) }?;
        if let Some(e) = state.failed {
            return Err(Failure::Core(e));
        }
        let next = match &mut state.driver {
            Driver::Slice(parser) => match parser.next_event() {
                Ok(Some(event)) => Ok(Some(event_to_c(&event, parser.event_offset()))),
                Ok(None) => Ok(None),
                Err(e) => Err(e),
            },
            Driver::Read(parser) => {
                let offset = parser.parser().offset();
                match parser.next_event() {
                    Ok(Some(event)) => Ok(Some(event_to_c(&event, offset))),
                    Ok(None) => Ok(None),
                    Err(e) => Err(e),
                }
            }
        };
        match next {
            Ok(Some(event)) => {
                // SAFETY: `out` non-NULL and aligned (checked), valid by the caller's contract.
                unsafe { out.write(event) };
                Ok(MQ_OK)
            }
            Ok(None) => Ok(MQ_DONE),
            Err(e) => {
                state.failed = Some(e);
                Err(Failure::Core(e))
            }
        }
    })();
    match result {
        Ok(code) => {
            // SAFETY: the caller's contract on `err`.
            unsafe { ffi::put(err, mq_error::NONE) };
            code
        }
        // SAFETY: the caller's contract on `err`.
        Err(f) => unsafe { ffi::fail(err, f) },
    }
}

/// Runs `p` to the end of the header, giving each event to `observe`.
///
/// # Safety
/// As `mq_parser_next`'s `p`.
pub(crate) unsafe fn drive(
    p: *mut mq_parser,
    mut observe: impl FnMut(&Event<'_>, u64),
) -> Result<(), Failure> {
    // SAFETY: the caller's contract on `p`.
    let state = unsafe { state(p) }?;
    if let Some(e) = state.failed {
        return Err(Failure::Core(e));
    }
    let result = match &mut state.driver {
        Driver::Slice(parser) => loop {
            match parser.next_event() {
                Ok(Some(event)) => observe(&event, parser.event_offset()),
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            }
        },
        Driver::Read(parser) => loop {
            let offset = parser.parser().offset();
            match parser.next_event() {
                Ok(Some(event)) => observe(&event, offset),
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            }
        },
    };
    result.map_err(|e| {
        state.failed = Some(e);
        Failure::Core(e)
    })
}
