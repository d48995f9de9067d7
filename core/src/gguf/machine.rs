//! The sans-I/O GGUF state machine.
//!
//! The caller owns the bytes. It hands the parser the unconsumed input (starting at
//! [`Parser::offset`]) and a [`Feed`] saying whether more bytes can follow; the parser answers with
//! one event and how many bytes it consumed, or with how many bytes it needs. Array nesting lives in
//! a fixed-size stack, so there is no recursion and no allocation; every count and length is checked
//! against the [`Limits`] and, when the input length is known, against the bytes that can remain.

use super::event::{ByteOrder, DataSection, Event, Header, StrPiece, TensorInfo};
use super::limits::{Limits, DEFAULT_DEPTH_CAPACITY, MAX_DIMS_CAPACITY};
use super::value::{Scalar, ScalarRun, ValueType};
use crate::error::{AlignmentProblem, Error, Field, Limit, Result};
use crate::ggml_type::{GgmlType, TypeCodeError};

pub use super::format::DEFAULT_ALIGNMENT;
use super::format::{ALIGNMENT_KEY, GGUF_MAGIC};

/// Whether more input can follow the bytes handed to [`Parser::next`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Feed {
    /// More bytes may follow: the parser may answer [`Step::NeedMore`].
    More,
    /// The input cannot grow (the driver's buffer is full): long string values are delivered in
    /// pieces, and an item that does not fit is [`Error::BufferTooSmall`].
    Full,
    /// The input ends here: a short item is [`Error::Truncated`].
    End,
}

/// What one call to [`Parser::next`] (`E` = [`Event`]) or [`Parser::next_raw`] (`E` =
/// [`RawEvent`], see [`RawStep`]) produced.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Step<E> {
    /// An event; the caller drops `consumed` bytes from the front of its input.
    Event {
        /// The event.
        event: E,
        /// Bytes of input it consumed.
        consumed: usize,
    },
    /// The parser needs at least `needed` bytes of input (counted from the front) to go on.
    /// Never returned for [`Feed::Full`] or [`Feed::End`].
    NeedMore {
        /// Bytes needed from the front of the input.
        needed: usize,
    },
    /// The header is complete: [`Event::End`] was the last event.
    Done,
}

/// What [`Parser::next_raw`] produced: a [`Step`] whose event's strings are still byte ranges.
pub type RawStep = Step<RawEvent>;

/// A byte range of the input handed to [`Parser::next_raw`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
struct Span {
    start: usize,
    len: usize,
}

#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
enum RawKind {
    Header(Header),
    Key {
        key: Span,
        value_type: ValueType,
    },
    Scalar(Scalar),
    Scalars {
        raw: Span,
        element_type: ValueType,
    },
    Str {
        text: Span,
        at: u64,
        len: u64,
    },
    ArrayStart {
        element_type: ValueType,
        len: u64,
    },
    ArrayEnd,
    /// A checked tensor info. Its dimensions and data offset are not copied here: they lie in the
    /// input after the name and are read again by [`RawEvent::resolve`], which keeps every raw step
    /// (and so every driver's frame) small.
    Tensor {
        name: Span,
        n_dims: u32,
        ggml_type: GgmlType,
        bytes: u64,
    },
    End(DataSection),
}

/// An event whose strings are still byte ranges of the input, so that the input can be borrowed
/// again before it is turned into an [`Event`] (this is what lets a driver refill its buffer in a
/// loop). Produced by [`Parser::next_raw`], turned into an event by [`RawEvent::resolve`].
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RawEvent {
    kind: RawKind,
    /// Absolute offset of the event's first byte.
    offset: u64,
    /// Offset of the event's string within its bytes (after the length prefix).
    text_skip: u8,
    /// Byte order of the file, for scalar runs.
    order: ByteOrder,
}

impl RawEvent {
    /// Absolute offset in the file where the event's bytes start.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// For a string (piece): where its text lies in the input, as (start, length).
    pub(crate) fn string_span(&self) -> Option<(usize, usize)> {
        match self.kind {
            RawKind::Str { text, .. } => Some((text.start, text.len)),
            _ => None,
        }
    }

    /// For a string (piece): the event, with `text` already checked by the caller.
    pub(crate) fn string_event<'a>(&self, text: &'a str) -> Option<Event<'a>> {
        match self.kind {
            RawKind::Str { at, len, .. } => Some(Event::String(StrPiece { text, at, len })),
            _ => None,
        }
    }

    /// For the start of an array of strings: its length.
    pub(crate) fn string_array_len(&self) -> Option<u64> {
        match self.kind {
            RawKind::ArrayStart {
                element_type: ValueType::String,
                len,
            } => Some(len),
            _ => None,
        }
    }

    /// Turns the raw event into an [`Event`] borrowing from `input`, which must be the same input
    /// that [`Parser::next_raw`] was given. Strings are checked here: UTF-8, and for keys and tensor
    /// names no NUL byte. A tensor info's dimensions and data offset are read here from `input`
    /// too (the parser checked them but does not carry them, to keep raw steps small).
    #[inline(always)]
    pub fn resolve<'a>(&self, input: &'a [u8]) -> Result<Event<'a>> {
        self.resolve_into(input, |event| event)
    }

    /// [`resolve`](Self::resolve) into `Some(event)`, the drivers' answer, built where it is
    /// returned rather than re-wrapped by `.map(Some)` (a copy of the event on the driver's stack).
    #[inline(always)]
    pub(crate) fn resolve_some<'a>(&self, input: &'a [u8]) -> Result<Option<Event<'a>>> {
        self.resolve_into(input, Some)
    }

    /// [`resolve`](Self::resolve), with the event wrapped by `wrap` where it is built.
    #[inline(always)]
    fn resolve_into<'a, T>(
        &self,
        input: &'a [u8],
        wrap: impl FnOnce(Event<'a>) -> T + Copy,
    ) -> Result<T> {
        let text_offset = self.offset.saturating_add(u64::from(self.text_skip));
        Ok(wrap(match self.kind {
            RawKind::Header(h) => Event::Header(h),
            RawKind::Key { key, value_type } => Event::Key {
                key: name_text(input, key, Field::Key, text_offset)?,
                value_type,
            },
            RawKind::Scalar(s) => Event::Scalar(s),
            RawKind::Scalars { raw, element_type } => Event::Scalars(ScalarRun::new(
                element_type,
                self.order,
                raw.start
                    .checked_add(raw.len)
                    .and_then(|end| input.get(raw.start..end))
                    .unwrap_or(&[]),
            )),
            RawKind::Str { text, at, len } => Event::String(StrPiece {
                text: utf8(input, text, Field::String, text_offset)?,
                at,
                len,
            }),
            RawKind::ArrayStart { element_type, len } => Event::ArrayStart { element_type, len },
            RawKind::ArrayEnd => Event::ArrayEnd,
            RawKind::Tensor {
                name,
                n_dims,
                ggml_type,
                bytes,
            } => {
                let tensor = (name, n_dims, ggml_type, bytes);
                return self.tensor(input, tensor, text_offset, wrap);
            }
            RawKind::End(d) => Event::End(d),
        }))
    }

    /// The tensor event whose name lies at `name` in `input`, wrapped by `wrap`. The dimensions and
    /// the data offset are read again from `input`, where [`Parser::next_raw`] checked them: after
    /// the name, in the file's byte order, each dimension as wide as the name's length prefix
    /// (`text_skip`). Inlined: out of line, its result went through a temporary event in the driver
    /// loop's frame.
    #[inline(always)]
    fn tensor<'a, T>(
        &self,
        input: &'a [u8],
        (name, n_dims, ggml_type, bytes): (Span, u32, GgmlType, u64),
        text_offset: u64,
        wrap: impl FnOnce(Event<'a>) -> T,
    ) -> Result<T> {
        let text = name_text(input, name, Field::TensorName, text_offset)?;
        let width = usize::from(self.text_skip);
        // The dimension count (4 bytes) comes right after the name, the dimensions after it.
        let mut at = name.start.saturating_add(name.len).saturating_add(4);
        let mut ne = [0u64; MAX_DIMS_CAPACITY];
        let mut elements: u64 = 1;
        for d in ne.iter_mut().take(n_dims as usize) {
            *d = len_at(input, at, width, self.order);
            // The parser found that the product does not overflow: this never saturates.
            elements = elements.saturating_mul(*d);
            at = at.saturating_add(width);
        }
        // The type code (4 bytes) comes after the dimensions, the data offset after it.
        let offset = u64_at(input, at.saturating_add(4), self.order);
        Ok(wrap(Event::Tensor(TensorInfo {
            name: text,
            n_dims,
            ne,
            ggml_type,
            offset,
            elements,
            bytes,
        })))
    }
}

/// The `N` bytes at `at` in `input` (zeros if `input` is too short).
#[inline(always)]
fn bytes_at<const N: usize>(input: &[u8], at: usize) -> [u8; N] {
    input
        .get(at..at.saturating_add(N))
        .and_then(|s| s.try_into().ok())
        .unwrap_or([0; N])
}

/// The `u32` at `at` in `input` (0 if `input` is too short), in byte order `order`.
///
/// Out of line on riscv32, where loads must be aligned and each read is a byte load and shift per
/// byte, for either order: inlined at every call site, the readers alone put the parser over its
/// 16 KiB flash budget there (BENCHMARKS.md). Elsewhere a read is one or two loads.
#[cfg_attr(target_arch = "riscv32", inline(never))]
#[cfg_attr(not(target_arch = "riscv32"), inline(always))]
fn u32_at(input: &[u8], at: usize, order: ByteOrder) -> u32 {
    let bytes = bytes_at(input, at);
    match order {
        ByteOrder::Little => u32::from_le_bytes(bytes),
        ByteOrder::Big => u32::from_be_bytes(bytes),
    }
}

/// The `u64` at `at` in `input` (0 if `input` is too short), in byte order `order`; out of line
/// on riscv32 as [`u32_at`].
#[cfg_attr(target_arch = "riscv32", inline(never))]
#[cfg_attr(not(target_arch = "riscv32"), inline(always))]
fn u64_at(input: &[u8], at: usize, order: ByteOrder) -> u64 {
    let bytes = bytes_at(input, at);
    match order {
        ByteOrder::Little => u64::from_le_bytes(bytes),
        ByteOrder::Big => u64::from_be_bytes(bytes),
    }
}

/// A length or count `width` bytes wide (4 in version 1, 8 after) at `at` in `input`.
#[inline(always)]
fn len_at(input: &[u8], at: usize, width: usize, order: ByteOrder) -> u64 {
    if width == 4 {
        u64::from(u32_at(input, at, order))
    } else {
        u64_at(input, at, order)
    }
}

/// Counts the bytes that UTF-8 checks scan (on this thread, in the crate's unit tests), so that
/// tests can bound the parser's work by the input's size without timing anything.
#[cfg(test)]
pub(crate) mod utf8_scans {
    use core::cell::Cell;

    std::thread_local! {
        static SCANNED: Cell<u64> = const { Cell::new(0) };
    }

    pub(crate) fn add(bytes: usize) {
        SCANNED.with(|c| c.set(c.get().saturating_add(bytes as u64)));
    }

    /// The bytes scanned since the last call.
    pub(crate) fn take() -> u64 {
        SCANNED.with(|c| c.replace(0))
    }
}

/// Records `bytes` scanned by a UTF-8 check (a no-op outside the unit tests).
#[inline(always)]
pub(crate) fn note_utf8_scan(bytes: usize) {
    #[cfg(test)]
    utf8_scans::add(bytes);
    #[cfg(not(test))]
    let _ = bytes;
}

#[inline(always)]
fn utf8(input: &[u8], span: Span, field: Field, offset: u64) -> Result<&str> {
    let bytes = span
        .start
        .checked_add(span.len)
        .and_then(|end| input.get(span.start..end))
        .ok_or(Error::Truncated {
            field,
            offset,
            needed: span.len as u64,
            available: 0,
        })?;
    note_utf8_scan(bytes.len());
    core::str::from_utf8(bytes).map_err(|e| Error::InvalidUtf8 {
        field,
        offset: offset.saturating_add(e.valid_up_to() as u64),
    })
}

#[inline(always)]
fn name_text(input: &[u8], span: Span, field: Field, offset: u64) -> Result<&str> {
    let text = utf8(input, span, field, offset)?;
    match text.bytes().position(|b| b == 0) {
        Some(nul) => Err(Error::NulInName {
            field,
            offset: offset.saturating_add(nul as u64),
        }),
        None => Ok(text),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
enum Phase {
    Start,
    Metadata,
    Tensors,
    Done,
}

/// What must come next within the metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
enum Pending {
    /// A key, an array element or an array end, depending on the stack.
    Nothing,
    /// The value of the key just read.
    Value(ValueType),
    /// The rest of a string delivered in pieces.
    StrRest { at: u64, len: u64 },
}

/// The innermost open array: its element type and how many elements are still to come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Frame {
    element_type: ValueType,
    remaining: u64,
}

/// The GGUF pull parser: a state machine over bytes the caller provides.
///
/// `DEPTH` is the capacity of the nesting stack (8 bytes per level): arrays nest at most
/// `min(DEPTH, Limits::max_depth)` deep, and an input nested deeper is
/// [`Error::LimitExceeded`] naming [`Limit::Depth`], that maximum and the byte offset. The default,
/// [`DEFAULT_DEPTH_CAPACITY`], equals the default limit; [`Parser::new`] builds it, and
/// [`Parser::with_depth_capacity`] any other (`Parser::<32>::with_depth_capacity(limits)`).
///
/// ```
/// use miniquant::gguf::{Event, Feed, Parser, Step};
/// # let file = miniquant::gguf::example_header();
/// let mut parser = Parser::new(Default::default());
/// let mut rest: &[u8] = &file;
/// loop {
///     match parser.next(rest, Feed::End)? {
///         Step::Event { event, consumed } => {
///             if let Event::Key { key, .. } = event {
///                 println!("{key}");
///             }
///             rest = &rest[consumed..];
///         }
///         Step::NeedMore { .. } => unreachable!("Feed::End never asks for more"),
///         Step::Done => break,
///     }
/// }
/// # Ok::<(), miniquant::Error>(())
/// ```
#[derive(Debug, Clone)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Parser<const DEPTH: usize = DEFAULT_DEPTH_CAPACITY> {
    /// Absolute offset of the next unconsumed byte. Declared first: the compiler's layout then puts
    /// it, not the padding of `header`, before `limits`, which the M4F build otherwise copied in
    /// together with that padding through a 52-byte temporary in the driver loop's frame.
    pos: u64,
    limits: Limits,
    /// Total input length, if the driver knows it.
    total_len: Option<u64>,
    phase: Phase,
    header: Option<Header>,
    order: ByteOrder,
    /// Keys read in [`Phase::Metadata`], tensor infos read in [`Phase::Tensors`] (one counter: the
    /// phases follow each other, and every byte of the parser is on its driver's stack).
    items_read: u64,
    pending: Pending,
    /// Elements still to come in each open array, outermost first (`..depth` are live). Every
    /// array but the innermost is reading an array element, so only the innermost's element type
    /// is stored.
    remaining: [u64; DEPTH],
    innermost_type: ValueType,
    depth: usize,
    /// `general.alignment`, or 0 until it is read (0 itself is [`AlignmentProblem::Zero`]).
    alignment: u32,
    /// The value being read belongs to `general.alignment`.
    reading_alignment: bool,
}

impl Parser {
    /// A parser at the start of a file, with the default nesting capacity
    /// ([`DEFAULT_DEPTH_CAPACITY`]).
    pub fn new(limits: Limits) -> Self {
        Self::with_depth_capacity(limits)
    }
}

impl<const DEPTH: usize> Parser<DEPTH> {
    /// A parser at the start of a file whose nesting stack holds `DEPTH` levels.
    pub fn with_depth_capacity(limits: Limits) -> Self {
        Self {
            limits,
            total_len: None,
            pos: 0,
            phase: Phase::Start,
            header: None,
            order: ByteOrder::Little,
            items_read: 0,
            pending: Pending::Nothing,
            remaining: [0; DEPTH],
            innermost_type: ValueType::U8,
            depth: 0,
            alignment: 0,
            reading_alignment: false,
        }
    }

    /// Tells the parser the input's total length, so that counts and lengths are checked against
    /// the bytes that remain before anything is sized by them.
    pub fn with_total_len(mut self, total_len: u64) -> Self {
        self.total_len = Some(total_len);
        self
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The nesting depth in force: [`Limits::max_depth`], capped at the stack's capacity `DEPTH`.
    pub fn max_depth(&self) -> u64 {
        u64::from(self.limits.max_depth).min(DEPTH as u64)
    }

    /// Absolute offset of the next byte the parser expects.
    pub fn offset(&self) -> u64 {
        self.pos
    }

    /// The header, once read.
    pub fn header(&self) -> Option<Header> {
        self.header
    }

    /// Byte order of the file (little-endian until the header is read).
    pub fn byte_order(&self) -> ByteOrder {
        self.order
    }

    /// Current array nesting depth.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// Whether [`Event::End`] has been produced.
    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// Reads the next event from `input`, which must start at [`offset`](Self::offset).
    #[inline]
    pub fn next<'a>(&mut self, input: &'a [u8], feed: Feed) -> Result<Step<Event<'a>>> {
        Ok(match self.next_raw(input, feed)? {
            RawStep::Event { event, consumed } => Step::Event {
                event: event.resolve(input)?,
                consumed,
            },
            RawStep::NeedMore { needed } => Step::NeedMore { needed },
            RawStep::Done => Step::Done,
        })
    }

    /// Like [`next`](Self::next), but the event's strings stay byte ranges until
    /// [`RawEvent::resolve`]; drivers that refill a buffer in a loop use this.
    #[inline(always)]
    pub fn next_raw(&mut self, input: &[u8], feed: Feed) -> Result<RawStep> {
        if self.phase == Phase::Metadata {
            if !self.metadata_done() {
                return self.metadata_event(input, feed);
            }
            self.phase = Phase::Tensors;
            self.items_read = 0;
        }
        // One call site for the tensor step, which 32-bit targets inline: a second would double
        // its code.
        match self.phase {
            Phase::Start => self.header_event(input, feed),
            Phase::Metadata | Phase::Tensors => self.tensor_event(input, feed),
            Phase::Done => Ok(RawStep::Done),
        }
    }

    /// Every key has been read with its whole value: the tensor directory comes next.
    #[inline(always)]
    fn metadata_done(&self) -> bool {
        matches!(self.pending, Pending::Nothing)
            && self.depth == 0
            && self.items_read >= self.header.map_or(0, |h| h.metadata_count)
    }

    // ----- helpers -------------------------------------------------------------------------

    /// The data section's alignment: `general.alignment`, or [`DEFAULT_ALIGNMENT`].
    #[inline(always)]
    fn alignment(&self) -> u32 {
        if self.alignment == 0 {
            DEFAULT_ALIGNMENT
        } else {
            self.alignment
        }
    }

    #[inline(always)]
    fn remaining_after(&self, consumed: u64) -> Option<u64> {
        self.total_len
            .map(|t| t.saturating_sub(self.pos.saturating_add(consumed)))
    }

    /// `Ok(None)` when `input` holds `needed` bytes; `Ok(Some(needed))` when the caller is to answer
    /// [`Step::NeedMore`]; otherwise the error.
    #[inline(always)]
    fn lack(&self, input: &[u8], needed: u64, feed: Feed, field: Field) -> Result<Option<usize>> {
        if input.len() as u64 >= needed {
            return Ok(None);
        }
        match feed {
            Feed::More => Ok(Some(usize::try_from(needed).unwrap_or(usize::MAX))),
            Feed::End => Err(Error::Truncated {
                field,
                offset: self.pos,
                needed,
                available: input.len() as u64,
            }),
            Feed::Full => Err(Error::BufferTooSmall {
                needed,
                capacity: input.len() as u64,
                offset: self.pos,
            }),
        }
    }

    #[inline(always)]
    fn u32_at(&self, input: &[u8], at: usize) -> u32 {
        u32_at(input, at, self.order)
    }

    #[inline(always)]
    fn u64_at(&self, input: &[u8], at: usize) -> u64 {
        u64_at(input, at, self.order)
    }

    #[inline(always)]
    fn is_v1(&self) -> bool {
        matches!(self.header, Some(Header { version: 1, .. }))
    }

    /// Width of a length or count field: 4 bytes in version 1, 8 after.
    #[inline(always)]
    pub(crate) fn len_width(&self) -> usize {
        if self.is_v1() {
            4
        } else {
            8
        }
    }

    #[inline(always)]
    fn len_at(&self, input: &[u8], at: usize) -> u64 {
        len_at(input, at, self.len_width(), self.order)
    }

    #[inline(always)]
    fn emit(&mut self, kind: RawKind, consumed: usize, text_skip: usize) -> Result<RawStep> {
        let offset = self.pos;
        self.pos = self.pos.saturating_add(consumed as u64);
        Ok(RawStep::Event {
            event: RawEvent {
                kind,
                offset,
                text_skip: text_skip as u8,
                order: self.order,
            },
            consumed,
        })
    }

    /// Smallest encoding of one value of type `t`: used to bound counts by the remaining bytes.
    fn min_value_bytes(&self, t: ValueType) -> u64 {
        match t.scalar_size() {
            Some(n) => n as u64,
            None if t == ValueType::String => self.len_width() as u64,
            None => 4u64.saturating_add(self.len_width() as u64),
        }
    }

    #[inline(always)]
    fn check_fits(
        &self,
        field: Field,
        found: u64,
        per_item: u64,
        after: u64,
        offset: u64,
    ) -> Result<()> {
        if let Some(available) = self.remaining_after(after) {
            let needed = found.saturating_mul(per_item);
            if needed > available {
                return Err(Error::ExceedsInput {
                    field,
                    found,
                    needed,
                    available,
                    offset,
                });
            }
        }
        Ok(())
    }

    #[inline(always)]
    fn check_limit(limit: Limit, max: u64, found: u64, offset: u64) -> Result<()> {
        if found > max {
            return Err(Error::LimitExceeded {
                limit,
                max,
                found,
                offset,
            });
        }
        Ok(())
    }

    /// [`Self::lack`] for two consecutive fixed-size fields read in one step, the first one
    /// starting `base` bytes into `input` (whose first `base` bytes are known to be there): more
    /// input is asked for both at once, but a truncation names the field that is cut, with its own
    /// offset and size (a 3-byte file is cut inside the 4-byte magic, not inside "8 bytes"). Two
    /// fields passed by value, not a table: no array is built on the stack of the deepest steps.
    #[inline(always)]
    fn lack_pair(
        &self,
        input: &[u8],
        base: u64,
        (first, first_size): (Field, u64),
        (second, second_size): (Field, u64),
        feed: Feed,
    ) -> Result<Option<usize>> {
        let second_at = base.saturating_add(first_size);
        let total = second_at.saturating_add(second_size);
        let have = input.len() as u64;
        if have >= total || feed != Feed::End {
            return self.lack(input, total, feed, first);
        }
        let (field, start, needed) = if have < second_at {
            (first, base, first_size)
        } else {
            (second, second_at, second_size)
        };
        Err(Error::Truncated {
            field,
            offset: self.pos.saturating_add(start),
            needed,
            available: have.saturating_sub(start),
        })
    }

    // ----- header --------------------------------------------------------------------------

    #[inline(never)]
    fn header_event(&mut self, input: &[u8], feed: Feed) -> Result<RawStep> {
        // A wrong magic is named as such even when the version after it is cut.
        let magic: Option<[u8; 4]> = input.get(..4).and_then(|s| s.try_into().ok());
        if let Some(found) = magic.filter(|m| *m != GGUF_MAGIC) {
            return Err(Error::BadMagic { found });
        }
        if let Some(needed) =
            self.lack_pair(input, 0, (Field::Magic, 4), (Field::Version, 4), feed)?
        {
            return Ok(RawStep::NeedMore { needed });
        }
        // Little-endian whatever `self.order` says: this step runs again after `NeedMore`.
        let version_bytes = input
            .get(4..8)
            .and_then(|s| s.try_into().ok())
            .unwrap_or([0; 4]);
        let raw_version = u32::from_le_bytes(version_bytes);
        let (version, order) = if (1..=3).contains(&raw_version) {
            (raw_version, ByteOrder::Little)
        } else if (1..=3).contains(&raw_version.swap_bytes()) {
            (raw_version.swap_bytes(), ByteOrder::Big)
        } else {
            return Err(Error::UnsupportedVersion {
                version: raw_version,
            });
        };
        self.order = order;
        // Counts and lengths are 4 bytes in version 1, 8 after. The header is the magic, the
        // version and two counts. The smallest pair: length, a 1-byte key, type, a 1-byte value.
        // The smallest tensor info: length, an empty name, n_dims = 0, type, offset.
        let (width, size, min_kv, min_tensor): (usize, usize, u64, u64) = if version == 1 {
            (4, 8 + 2 * 4, 4 + 1 + 4 + 1, 4 + 4 + 4 + 8)
        } else {
            (8, 8 + 2 * 8, 8 + 1 + 4 + 1, 8 + 4 + 4 + 8)
        };
        // The magic and the version (8 bytes) are there: the step got past the check above.
        let counts = self.lack_pair(
            input,
            8,
            (Field::TensorCount, width as u64),
            (Field::MetadataCount, width as u64),
            feed,
        )?;
        if let Some(needed) = counts {
            return Ok(RawStep::NeedMore { needed });
        }
        let (tensor_count, metadata_count) = if version == 1 {
            (
                u64::from(self.u32_at(input, 8)),
                u64::from(self.u32_at(input, 12)),
            )
        } else {
            (self.u64_at(input, 8), self.u64_at(input, 16))
        };
        Self::check_limit(Limit::TensorCount, self.limits.max_tensors, tensor_count, 8)?;
        let kv_offset = (width as u64).saturating_add(8);
        Self::check_limit(
            Limit::MetadataCount,
            self.limits.max_metadata,
            metadata_count,
            kv_offset,
        )?;
        self.check_fits(Field::TensorCount, tensor_count, min_tensor, size as u64, 8)?;
        let kv_and_tensors = metadata_count
            .checked_mul(min_kv)
            .and_then(|kv| {
                tensor_count
                    .checked_mul(min_tensor)
                    .and_then(|t| t.checked_add(kv))
            })
            .unwrap_or(u64::MAX);
        self.check_fits(
            Field::MetadataCount,
            metadata_count,
            1,
            size as u64,
            kv_offset,
        )
        .and_then(|()| {
            self.check_fits(
                Field::MetadataCount,
                kv_and_tensors,
                1,
                size as u64,
                kv_offset,
            )
        })?;
        let header = Header {
            version,
            byte_order: order,
            tensor_count,
            metadata_count,
        };
        self.header = Some(header);
        self.phase = Phase::Metadata;
        self.emit(RawKind::Header(header), size, 0)
    }

    // ----- metadata ------------------------------------------------------------------------

    #[inline(always)]
    fn metadata_event(&mut self, input: &[u8], feed: Feed) -> Result<RawStep> {
        match self.pending {
            Pending::StrRest { at, len } => return self.string_rest(input, feed, at, len),
            Pending::Value(t) => return self.value(input, feed, t),
            Pending::Nothing => {}
        }
        if let Some(top) = self.innermost() {
            if top.remaining == 0 {
                self.depth = self.depth.saturating_sub(1);
                // The enclosing array, if any, was reading this one as an element.
                self.innermost_type = ValueType::Array;
                return self.emit(RawKind::ArrayEnd, 0, 0);
            }
            if let Some(size) = top.element_type.scalar_size() {
                return self.scalar_run(input, feed, top.element_type, size, top.remaining);
            }
            return self.value(input, feed, top.element_type);
        }
        // Not `metadata_done`: keys remain.
        self.key(input, feed)
    }

    #[inline(never)]
    fn key(&mut self, input: &[u8], feed: Feed) -> Result<RawStep> {
        let width = self.len_width();
        if let Some(needed) = self.lack(input, width as u64, feed, Field::Key)? {
            return Ok(RawStep::NeedMore { needed });
        }
        let len = self.len_at(input, 0);
        if len == 0 {
            return Err(Error::EmptyName {
                field: Field::Key,
                offset: self.pos,
            });
        }
        Self::check_limit(Limit::KeyBytes, self.limits.max_key_bytes, len, self.pos)?;
        self.check_fits(Field::Key, len, 1, width as u64, self.pos)?;
        // Saturating: with a key limit of u64::MAX and no known input length, `len` is anything.
        let key = (Field::Key, len.saturating_add(width as u64));
        if let Some(needed) = self.lack_pair(input, 0, key, (Field::ValueType, 4), feed)? {
            return Ok(RawStep::NeedMore { needed });
        }
        // Both fit in usize: the key and its type code are in `input`.
        let len = len as usize;
        let type_at = width.saturating_add(len);
        let code = self.u32_at(input, type_at);
        let type_offset = self.pos.saturating_add(type_at as u64);
        let value_type = ValueType::from_code(code).ok_or(Error::InvalidValueType {
            code,
            offset: type_offset,
        })?;
        let is_alignment = input.get(width..type_at) == Some(ALIGNMENT_KEY.as_bytes());
        if is_alignment {
            if self.alignment != 0 || self.reading_alignment {
                return Err(Error::BadAlignment {
                    problem: AlignmentProblem::Duplicate,
                    offset: self.pos,
                });
            }
            if value_type != ValueType::U32 {
                return Err(Error::BadAlignment {
                    problem: AlignmentProblem::NotU32(value_type),
                    offset: type_offset,
                });
            }
            self.reading_alignment = true;
        }
        self.items_read = self.items_read.saturating_add(1);
        self.pending = Pending::Value(value_type);
        let span = Span { start: width, len };
        self.emit(
            RawKind::Key {
                key: span,
                value_type,
            },
            type_at.saturating_add(4),
            width,
        )
    }

    /// One value of type `t`: a top-level value (`pending` is `Value`) or an array element.
    #[inline(always)]
    fn value(&mut self, input: &[u8], feed: Feed, t: ValueType) -> Result<RawStep> {
        match t {
            ValueType::String => self.string_start(input, feed),
            ValueType::Array => self.array_start(input, feed),
            _ => self.scalar(input, feed, t),
        }
    }

    /// Marks the start of one element of the innermost array (or of the pending top-level value).
    #[inline(always)]
    fn begin_value(&mut self) {
        if let Pending::Value(_) = self.pending {
            self.pending = Pending::Nothing;
        } else {
            self.take_elements(1);
        }
    }

    /// The innermost array being read.
    #[inline(always)]
    fn innermost(&self) -> Option<Frame> {
        let remaining = *self
            .depth
            .checked_sub(1)
            .and_then(|d| self.remaining.get(d))?;
        Some(Frame {
            element_type: self.innermost_type,
            remaining,
        })
    }

    /// Counts `n` elements of the innermost array as read.
    #[inline(always)]
    fn take_elements(&mut self, n: u64) {
        if let Some(remaining) = self
            .depth
            .checked_sub(1)
            .and_then(|d| self.remaining.get_mut(d))
        {
            *remaining = remaining.saturating_sub(n);
        }
    }

    #[inline(always)]
    fn scalar(&mut self, input: &[u8], feed: Feed, t: ValueType) -> Result<RawStep> {
        let size = t.scalar_size().unwrap_or(0);
        if let Some(needed) = self.lack(input, size as u64, feed, Field::Value)? {
            return Ok(RawStep::NeedMore { needed });
        }
        let bytes = input.get(..size).unwrap_or(&[]);
        let scalar = match Scalar::decode(t, bytes, self.order) {
            Some(Scalar::Bool(_)) | None if t == ValueType::Bool => {
                let value = bytes.first().copied().unwrap_or(0);
                if value > 1 {
                    return Err(Error::InvalidBool {
                        value,
                        offset: self.pos,
                    });
                }
                Scalar::Bool(value == 1)
            }
            Some(scalar) => scalar,
            None => {
                return Err(Error::InvalidValueType {
                    code: t.code(),
                    offset: self.pos,
                })
            }
        };
        if self.reading_alignment && self.pending == Pending::Value(ValueType::U32) {
            if let Scalar::U32(a) = scalar {
                let problem = match a {
                    0 => Some(AlignmentProblem::Zero),
                    a if !a.is_power_of_two() => Some(AlignmentProblem::NotPowerOfTwo(a)),
                    _ => None,
                };
                if let Some(problem) = problem {
                    return Err(Error::BadAlignment {
                        problem,
                        offset: self.pos,
                    });
                }
                self.alignment = a;
                self.reading_alignment = false;
            }
        }
        self.begin_value();
        self.emit(RawKind::Scalar(scalar), size, 0)
    }

    /// As many elements of the innermost (scalar) array as `input` holds, at least one: arrays of
    /// numbers come as a few runs of raw bytes instead of one event per element.
    #[inline(always)]
    fn scalar_run(
        &mut self,
        input: &[u8],
        feed: Feed,
        t: ValueType,
        size: usize,
        remaining: u64,
    ) -> Result<RawStep> {
        if let Some(needed) = self.lack(input, size as u64, feed, Field::Value)? {
            return Ok(RawStep::NeedMore { needed });
        }
        let mut count = remaining.min(input.len().checked_div(size).unwrap_or(0) as u64) as usize;
        if t == ValueType::Bool {
            let run = input.get(..count).unwrap_or(&[]);
            match run.iter().position(|&b| b > 1) {
                Some(0) => {
                    return Err(Error::InvalidBool {
                        value: run.first().copied().unwrap_or(0),
                        offset: self.pos,
                    })
                }
                // The valid elements before the bad one come first, as they would if the input
                // had been cut there: the events before the error do not depend on chunk sizes.
                Some(at) => count = at,
                None => {}
            }
        }
        // At most `input.len()`.
        let len = count.saturating_mul(size);
        self.take_elements(count as u64);
        let raw = Span { start: 0, len };
        self.emit(
            RawKind::Scalars {
                raw,
                element_type: t,
            },
            len,
            0,
        )
    }

    #[inline(always)]
    fn string_start(&mut self, input: &[u8], feed: Feed) -> Result<RawStep> {
        let width = self.len_width();
        if let Some(needed) = self.lack(input, width as u64, feed, Field::String)? {
            return Ok(RawStep::NeedMore { needed });
        }
        let len = self.len_at(input, 0);
        Self::check_limit(
            Limit::StringBytes,
            self.limits.max_string_bytes,
            len,
            self.pos,
        )?;
        self.check_fits(Field::String, len, 1, width as u64, self.pos)?;
        // Saturating: with a string limit of u64::MAX and no known input length, `len` is anything.
        let whole = len.saturating_add(width as u64);
        if input.len() as u64 >= whole || feed != Feed::Full {
            if let Some(needed) = self.lack(input, whole, feed, Field::String)? {
                return Ok(RawStep::NeedMore { needed });
            }
            self.begin_value();
            let text = Span {
                start: width,
                len: len as usize,
            };
            return self.emit(RawKind::Str { text, at: 0, len }, whole as usize, width);
        }
        // The buffer is full and cannot hold the string: deliver it in pieces.
        let text_offset = self.pos.saturating_add(width as u64);
        let piece = utf8_prefix(input.get(width..).unwrap_or(&[]))
            .map_err(|valid| invalid_string(text_offset, valid))?;
        self.begin_value();
        self.pending = Pending::StrRest {
            at: piece as u64,
            len,
        };
        let text = Span {
            start: width,
            len: piece,
        };
        self.emit(
            RawKind::Str { text, at: 0, len },
            width.saturating_add(piece),
            width,
        )
    }

    #[inline(never)]
    fn string_rest(&mut self, input: &[u8], feed: Feed, at: u64, len: u64) -> Result<RawStep> {
        let rest = len.saturating_sub(at);
        let piece = if input.len() as u64 >= rest {
            rest as usize
        } else {
            match feed {
                Feed::Full => {
                    utf8_prefix(input).map_err(|valid| invalid_string(self.pos, valid))?
                }
                _ => match self.lack(input, rest, feed, Field::String)? {
                    Some(needed) => return Ok(RawStep::NeedMore { needed }),
                    None => rest as usize,
                },
            }
        };
        let next = at.saturating_add(piece as u64);
        self.pending = if next == len {
            Pending::Nothing
        } else {
            Pending::StrRest { at: next, len }
        };
        self.emit(
            RawKind::Str {
                text: Span {
                    start: 0,
                    len: piece,
                },
                at,
                len,
            },
            piece,
            0,
        )
    }

    #[inline(never)]
    fn array_start(&mut self, input: &[u8], feed: Feed) -> Result<RawStep> {
        let width = self.len_width();
        let size = width.saturating_add(4);
        if let Some(needed) = self.lack(input, size as u64, feed, Field::ArrayHeader)? {
            return Ok(RawStep::NeedMore { needed });
        }
        let code = self.u32_at(input, 0);
        let element_type = ValueType::from_code(code).ok_or(Error::InvalidValueType {
            code,
            offset: self.pos,
        })?;
        let len = self.len_at(input, 4);
        let depth = (self.depth as u64).saturating_add(1);
        Self::check_limit(Limit::Depth, self.max_depth(), depth, self.pos)?;
        Self::check_limit(
            Limit::ArrayLen,
            self.limits.max_array_len,
            len,
            self.pos.saturating_add(4),
        )?;
        self.check_fits(
            Field::ArrayHeader,
            len,
            self.min_value_bytes(element_type),
            size as u64,
            self.pos,
        )?;
        self.begin_value();
        // `depth` is below the capacity: `max_depth()` is capped by it.
        if let Some(remaining) = self.remaining.get_mut(self.depth) {
            *remaining = len;
            self.innermost_type = element_type;
            self.depth = self.depth.saturating_add(1);
        }
        self.emit(RawKind::ArrayStart { element_type, len }, size, 0)
    }

    // ----- tensor directory ----------------------------------------------------------------

    /// One tensor info, or the end of the header after the last one. On 32-bit targets (the
    /// microcontrollers) it is inlined at its one call site (in `next_raw`): out of line, its
    /// 128-byte M4F frame was the deepest below a driver loop. On 64-bit targets it stays out of
    /// line: inlined, the host's `Read` driver loop ran slower (`header` bench, BENCHMARKS.md).
    #[cfg_attr(target_pointer_width = "32", inline(always))]
    #[cfg_attr(not(target_pointer_width = "32"), inline(never))]
    fn tensor_event(&mut self, input: &[u8], feed: Feed) -> Result<RawStep> {
        let tensor_count = self.header.map_or(0, |h| h.tensor_count);
        if self.items_read >= tensor_count {
            return self.end_event();
        }
        let width = self.len_width();
        if let Some(needed) = self.lack(input, width as u64, feed, Field::TensorName)? {
            return Ok(RawStep::NeedMore { needed });
        }
        let name_len = self.len_at(input, 0);
        Self::check_limit(
            Limit::KeyBytes,
            self.limits.max_key_bytes,
            name_len,
            self.pos,
        )?;
        self.check_fits(Field::TensorName, name_len, 1, width as u64, self.pos)?;
        // Saturating: with a name limit of u64::MAX and no known input length, `name_len` is
        // anything.
        let dims_at = name_len.saturating_add(width as u64);
        let dims_end = dims_at.saturating_add(4);
        if let Some(needed) = self.lack(input, dims_end, feed, Field::DimensionCount)? {
            return Ok(RawStep::NeedMore { needed });
        }
        // From here every offset is within the bytes `lack` found in `input`, or a few dozen
        // bytes past them: the sums below cannot overflow, and saturate if they did.
        let dims_at = dims_at as usize;
        let n_dims = self.u32_at(input, dims_at);
        Self::check_limit(
            Limit::Dims,
            u64::from(self.limits.dims()),
            u64::from(n_dims),
            self.pos.saturating_add(dims_at as u64),
        )?;
        let dim_width = width; // u32 dimensions in version 1, u64 after
        let first_dim_at = dims_end as usize;
        let type_at = (n_dims as usize)
            .saturating_mul(dim_width)
            .saturating_add(first_dim_at);
        let size = type_at.saturating_add(4 + 8);
        if let Some(needed) = self.lack(input, size as u64, feed, Field::Dimension)? {
            return Ok(RawStep::NeedMore { needed });
        }
        // The dimensions are checked here but not kept: `RawEvent::resolve` reads them again.
        let mut ne0: u64 = 1;
        let mut elements: u64 = 1;
        let mut at = first_dim_at;
        for d in 0..n_dims {
            let dim = self.len_at(input, at);
            if dim > i64::MAX as u64 {
                return Err(Error::DimensionTooLarge {
                    value: dim,
                    offset: self.pos.saturating_add(at as u64),
                });
            }
            if d == 0 {
                ne0 = dim;
            }
            at = at.saturating_add(dim_width);
            elements = elements
                .checked_mul(dim)
                .ok_or(Error::ShapeOverflow { offset: self.pos })?;
        }
        let code = self.u32_at(input, type_at);
        let type_offset = self.pos.saturating_add(type_at as u64);
        let ggml_type = GgmlType::from_code(code).map_err(|e| match e {
            TypeCodeError::Removed => Error::RemovedGgmlType {
                code,
                offset: type_offset,
            },
            TypeCodeError::Unknown => Error::UnknownGgmlType {
                code,
                offset: type_offset,
            },
        })?;
        if ne0.checked_rem(u64::from(ggml_type.block_size())) != Some(0) {
            return Err(Error::NotWholeBlocks {
                ggml_type,
                ne0,
                offset: self.pos,
            });
        }
        let bytes = ggml_type
            .bytes_for(elements)
            .ok_or(Error::ShapeOverflow { offset: self.pos })?;
        let offset_at = type_at.saturating_add(4);
        let offset = self.u64_at(input, offset_at);
        let alignment = self.alignment();
        if align_up(offset, alignment) != Some(offset) {
            return Err(Error::MisalignedTensor {
                tensor_offset: offset,
                alignment,
                offset: self.pos.saturating_add(offset_at as u64),
            });
        }
        // The data section holds each tensor padded to the alignment (ggml's GGML_PAD, which
        // wraps around for sizes near 2^64 and so let a second tensor alias the first).
        let padded_end = align_up(bytes, alignment).and_then(|padded| offset.checked_add(padded));
        if padded_end.is_none() {
            return Err(Error::ShapeOverflow { offset: self.pos });
        }
        self.items_read = self.items_read.saturating_add(1);
        let name = Span {
            start: width,
            len: name_len as usize,
        };
        self.emit(
            RawKind::Tensor {
                name,
                n_dims,
                ggml_type,
                bytes,
            },
            size,
            width,
        )
    }

    #[inline(never)]
    fn end_event(&mut self) -> Result<RawStep> {
        let alignment = self.alignment();
        let data_offset =
            align_up(self.pos, alignment).ok_or(Error::ShapeOverflow { offset: self.pos })?;
        self.phase = Phase::Done;
        self.emit(
            RawKind::End(DataSection {
                alignment,
                data_offset,
            }),
            0,
            0,
        )
    }
}

/// `value` rounded up to a multiple of `alignment`, a power of two (the parser accepts no other),
/// or `None` on overflow: `checked_next_multiple_of` without the 64-bit division that 32-bit
/// targets make a library call for.
#[inline(always)]
fn align_up(value: u64, alignment: u32) -> Option<u64> {
    let mask = u64::from(alignment).saturating_sub(1);
    value.checked_add(mask).map(|v| v & !mask)
}

/// Length of the longest prefix of `bytes` that is whole UTF-8 characters (at least one byte, as
/// the driver's buffer is never shorter than a character); an invalid sequence is `Err` with the
/// length of the valid bytes before it (a word, not an [`Error`], so that the string steps keep no
/// error-sized temporary on the stack).
fn utf8_prefix(bytes: &[u8]) -> core::result::Result<usize, usize> {
    note_utf8_scan(bytes.len());
    match core::str::from_utf8(bytes) {
        Ok(_) => Ok(bytes.len()),
        Err(e) if e.error_len().is_none() && e.valid_up_to() > 0 => Ok(e.valid_up_to()),
        Err(e) => Err(e.valid_up_to()),
    }
}

/// The error for a string value whose text starting at `offset` is invalid after `valid` bytes.
#[cold]
fn invalid_string(offset: u64, valid: usize) -> Error {
    Error::InvalidUtf8 {
        field: Field::String,
        offset: offset.saturating_add(valid as u64),
    }
}
