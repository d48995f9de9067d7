//! The checks, in order, each logged with defmt; any failure is logged and makes [`run`] return
//! `Err`, which the boards turn into a non-zero exit.

use defmt::{error, info};
use miniquant::gguf::{Catalog, Limits, ReadParser, SliceParser};
use miniquant::quant::activation::BlockQ8_0;
use miniquant::quant::k_quants::{BlockQ4K, BlockQ6K};
use miniquant::quant::legacy::BlockQ5_0;
use miniquant::quant::table::Kernels;
use miniquant::quant::typed;
use miniquant::{Error, GgmlType};

use crate::hostile::HOSTILE;
use crate::inputs::{tensor_names, MODEL, X, Y};
use crate::short_reads::ShortReads;
use crate::stack::{measure, WINDOW};
use crate::Board;

/// Keys the images look up.
const KEYS: [&str; 3] = [
    "general.architecture",
    "general.name",
    "tokenizer.ggml.tokens",
];

/// The `Read` driver's buffer.
pub const READ_BUFFER: usize = 256;

/// Largest tensor the images take: columns (x), rows (y), and the activation scratch.
const MAX_COLS: usize = 2048;
const MAX_ROWS: usize = 2048;
const MAX_SCRATCH: usize = MAX_COLS / 256 * 292;

type Found = Catalog<'static, 3, { crate::inputs::TENSORS }>;

/// A failed check (already logged).
pub struct Failed;

/// Runs every check; logs a summary line per step.
pub fn run<B: Board>(board: &B) -> Result<(), Failed> {
    info!(
        "{=str}: model extract {=usize} B in flash, tick {=u32} Hz, kernel level {=str}",
        B::NAME,
        MODEL.len(),
        B::TICK_HZ,
        miniquant::quant::level::current().name()
    );
    log_type_sizes();
    let names = tensor_names();

    // 1. The &[u8] driver.
    let mut by_slice = Found::of(&KEYS, &names);
    let ((events, ticks), stack) = measure(|| timed(board, || parse_slice(MODEL, &mut by_slice)));
    let slice_events = events.map_err(|e| fail_parse("slice driver", e))?;
    let slice_ticks = ticks;
    info!(
        "parse &[u8]: {=u32} events, {=u64} ticks, stack {=usize} B",
        slice_events, slice_ticks, stack
    );
    note_window(stack);
    log_header(&by_slice)?;

    // 2. The Read driver, 256-byte buffer, short reads.
    let mut by_reader = Found::of(&KEYS, &names);
    let ((events, ticks), stack) = measure(|| timed(board, || parse_reader(MODEL, &mut by_reader)));
    let (read_events, reads) = events.map_err(|e| fail_parse("Read driver", e))?;
    info!(
        "parse Read ({=usize} B buffer, {=usize} short reads): {=u32} events, {=u64} ticks ({=u64}.{=u64:02}x the slice driver), stack {=usize} B",
        READ_BUFFER,
        reads,
        read_events,
        ticks,
        ticks / slice_ticks.max(1),
        ticks * 100 / slice_ticks.max(1) % 100,
        stack
    );
    note_window(stack);
    // Event counts may differ (numeric arrays come in buffer-sized runs); what was found may not.
    if !same_catalog(&by_slice, &by_reader, &names) {
        error!("the Read driver found other keys or tensors than the slice driver");
        return Err(Failed);
    }

    // 3. One matvec per tensor, compared bit for bit with the host.
    let data_offset = by_slice.data_offset().ok_or_else(|| {
        error!("no data section");
        Failed
    })?;
    let mut mismatches = 0usize;
    for (i, name) in names.iter().enumerate() {
        mismatches += check_tensor(board, &by_slice, data_offset, i, name)?;
    }
    if mismatches > 0 {
        error!("{=usize} outputs differ from the host's", mismatches);
        return Err(Failed);
    }
    check_readme_snippet(&names)?;

    // 4. Hostile headers.
    for h in &HOSTILE {
        // Through the same parse function as the model (one copy of the inlined parse loop).
        match parse_slice(h.bytes, &mut Found::empty()).map(drop) {
            Err(e) if (h.expected)(&e) => info!("hostile header ({=str}): {}", h.name, e),
            Err(e) => {
                error!("hostile header ({=str}): unexpected error {}", h.name, e);
                return Err(Failed);
            }
            Ok(()) => {
                error!("hostile header ({=str}) was accepted", h.name);
                return Err(Failed);
            }
        }
    }
    info!("all checks passed");
    Ok(())
}

/// The sizes of the parser's types on this target: the drivers hold a `Parser`, and the event
/// loops move `Event`s, `Error`s and raw steps, so these bound the parse's stack.
fn log_type_sizes() {
    use core::mem::size_of;
    use miniquant::gguf::{Event, Parser, RawStep, Step};
    info!(
        "type sizes: Parser {=usize} B, SliceParser {=usize} B, ReadParser {=usize} B, Event {=usize} B, Error {=usize} B, Step<Event> {=usize} B, RawStep {=usize} B, Result<RawStep> {=usize} B",
        size_of::<Parser>(),
        size_of::<SliceParser<'_>>(),
        size_of::<ReadParser<'_, ShortReads<'_>>>(),
        size_of::<Event<'_>>(),
        size_of::<Error>(),
        size_of::<Step<Event<'_>>>(),
        size_of::<RawStep>(),
        size_of::<Result<RawStep, Error>>()
    );
}

fn timed<B: Board, R>(board: &B, f: impl FnOnce() -> R) -> (R, u64) {
    let start = board.ticks();
    let result = f();
    (result, board.ticks().wrapping_sub(start))
}

fn note_window(stack: usize) {
    if stack >= WINDOW {
        defmt::warn!(
            "stack figure is the whole painted window: at least {=usize} B",
            WINDOW
        );
    }
}

fn fail_parse(driver: &str, e: Error) -> Failed {
    error!("{=str}: {}", driver, e);
    Failed
}

/// Parses the whole header with the `&[u8]` driver; returns the event count.
#[inline(never)]
fn parse_slice(model: &[u8], found: &mut Found) -> Result<u32, Error> {
    let mut parser = SliceParser::new(model, Limits::DEFAULT);
    let mut events = 0u32;
    while let Some(event) = parser.next_event()? {
        found.observe(&event, parser.event_offset());
        events += 1;
    }
    Ok(events)
}

/// Parses the whole header through the `Read` driver (its buffer on this frame); returns the event
/// count and the number of reads.
#[inline(never)]
fn parse_reader(model: &[u8], found: &mut Found) -> Result<(u32, usize), Error> {
    let mut buf = [0u8; READ_BUFFER];
    let mut parser = ReadParser::new(ShortReads::new(model), &mut buf, Limits::DEFAULT)?
        .with_total_len(model.len() as u64);
    let mut events = 0u32;
    loop {
        // The event borrows the parser's buffer: take its offset (where it starts) first.
        let offset = parser.parser().offset();
        let Some(event) = parser.next_event()? else {
            break;
        };
        found.observe(&event, offset);
        events += 1;
    }
    Ok((events, parser.into_inner().reads()))
}

fn same_catalog(a: &Found, b: &Found, names: &[&str]) -> bool {
    KEYS.iter().all(|k| a.key(k) == b.key(k))
        && names.iter().all(|t| a.tensor(t) == b.tensor(t))
        && a.data_offset() == b.data_offset()
}

/// Logs the header summary; the string keys are read in place from flash.
fn log_header(found: &Found) -> Result<(), Failed> {
    let text = |key: &str| -> &'static str {
        found
            .key(key)
            .and_then(|k| {
                let start = usize::try_from(k.value_offset.checked_add(8)?).ok()?;
                let end = start.checked_add(usize::try_from(k.len).ok()?)?;
                core::str::from_utf8(MODEL.get(start..end)?).ok()
            })
            .unwrap_or("?")
    };
    let tokens = found.key("tokenizer.ggml.tokens").map_or(0, |k| k.len);
    info!(
        "header: architecture {=str}, name {=str}, {=u64} tokens (a slice of the vocabulary), data at {=u64}",
        text("general.architecture"),
        text("general.name"),
        tokens,
        found.data_offset().unwrap_or(0)
    );
    if found.key("general.architecture").is_none() {
        error!("general.architecture not found");
        return Err(Failed);
    }
    Ok(())
}

/// Runs tensor `i`'s matvec and compares it with the host's; returns the number of differing outputs.
fn check_tensor<B: Board>(
    board: &B,
    found: &Found,
    data_offset: u64,
    i: usize,
    name: &str,
) -> Result<usize, Failed> {
    let Some(t) = found.tensor(name) else {
        error!("tensor {=str} not found", name);
        return Err(Failed);
    };
    let (cols, rows) = (t.ne[0] as usize, t.ne[1] as usize);
    if t.n_dims != 2 || cols > MAX_COLS || rows > MAX_ROWS {
        error!(
            "tensor {=str}: {=u32}-D {=usize} x {=usize} does not fit this image",
            name, t.n_dims, rows, cols
        );
        return Err(Failed);
    }
    let weights = data_offset
        .checked_add(t.offset)
        .and_then(|start| Some((start, start.checked_add(t.bytes)?)))
        .and_then(|(s, e)| MODEL.get(usize::try_from(s).ok()?..usize::try_from(e).ok()?));
    let Some(weights) = weights else {
        error!("tensor {=str}: data outside the file", name);
        return Err(Failed);
    };
    let (x_bytes, y_bytes) = (X[i], Y[i]);
    if x_bytes.len() != cols * 4 || y_bytes.len() != rows * 4 {
        error!(
            "tensor {=str}: the host's x or y has the wrong length",
            name
        );
        return Err(Failed);
    }
    let mut x = [0f32; MAX_COLS];
    for (v, b) in x.iter_mut().zip(x_bytes.chunks_exact(4)) {
        *v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    }
    let mut scratch = [0u8; MAX_SCRATCH];
    let mut y = [0f32; MAX_ROWS];
    let ((result, ticks), stack) = measure(|| {
        timed(board, || {
            run_matvec(
                t.ggml_type,
                weights,
                rows,
                cols,
                &x[..cols],
                &mut scratch,
                &mut y[..rows],
            )
        })
    });
    if let Err(e) = result {
        error!("matvec {=str}: {}", name, e);
        return Err(Failed);
    }
    note_window(stack);
    let mut differ = 0usize;
    for (r, (got, want)) in y[..rows].iter().zip(y_bytes.chunks_exact(4)).enumerate() {
        let want = u32::from_le_bytes([want[0], want[1], want[2], want[3]]);
        if got.to_bits() != want {
            if differ == 0 {
                error!(
                    "{=str} row {=usize}: {=u32:#010x} here, {=u32:#010x} on the host",
                    name,
                    r,
                    got.to_bits(),
                    want
                );
            }
            differ += 1;
        }
    }
    info!(
        "matvec {=str} {} [{=usize} x {=usize}]: {=usize} of {=usize} outputs bit-identical to the host, y[0] = {=f32}, {=u64} ticks, stack {=usize} B",
        name,
        t.ggml_type,
        rows,
        cols,
        rows - differ,
        rows,
        y[0],
        ticks,
        stack
    );
    Ok(differ)
}

/// The README's snippet computes the same bits as the host for its tensor, when the extract has it.
fn check_readme_snippet(names: &[&str]) -> Result<(), Failed> {
    let Some(i) = names.iter().position(|&n| n == "blk.0.attn_output.weight") else {
        return Ok(());
    };
    let mut x = [0f32; MAX_COLS];
    let mut n = 0;
    for (v, b) in x.iter_mut().zip(X[i].chunks_exact(4)) {
        *v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        n += 1;
    }
    let rows = Y[i].len() / 4;
    let mut y = [0f32; MAX_ROWS];
    let y = y.get_mut(..rows).ok_or(Failed)?;
    if let Err(e) = crate::readme::attn_output(MODEL, &x[..n], y) {
        error!("README snippet: {}", e);
        return Err(Failed);
    }
    let same = y
        .iter()
        .zip(Y[i].chunks_exact(4))
        .all(|(v, b)| v.to_bits() == u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    if !same {
        error!("README snippet: outputs differ from the host's");
        return Err(Failed);
    }
    info!(
        "README snippet: {=usize} outputs bit-identical to the host",
        rows
    );
    Ok(())
}

/// `y = W x` with the activation scratch on the caller's frame, for the weight types of the extract
/// (Gemma 3 Q4_K_M stores Q8_0, Q5_0, Q4_K and Q6_K): each goes through the core's typed API, which
/// links only that type's kernels and its activation quantizer (the run-time `quant::matvec` would
/// link every type's).
#[inline(never)]
fn run_matvec(
    t: GgmlType,
    w: &[u8],
    rows: usize,
    cols: usize,
    x: &[f32],
    scratch: &mut [u8],
    y: &mut [f32],
) -> Result<(), Error> {
    match t {
        GgmlType::Q8_0 => typed_matvec::<BlockQ8_0>(w, rows, cols, x, scratch, y),
        GgmlType::Q4_K => typed_matvec::<BlockQ4K>(w, rows, cols, x, scratch, y),
        GgmlType::Q5_0 => typed_matvec::<BlockQ5_0>(w, rows, cols, x, scratch, y),
        GgmlType::Q6_K => typed_matvec::<BlockQ6K>(w, rows, cols, x, scratch, y),
        _ => Err(Error::Unsupported {
            ggml_type: t,
            op: miniquant::error::Op::VecDot,
        }),
    }
}

fn typed_matvec<B: Kernels>(
    w: &[u8],
    rows: usize,
    cols: usize,
    x: &[f32],
    scratch: &mut [u8],
    y: &mut [f32],
) -> Result<(), Error> {
    let need = typed::matvec_scratch_bytes::<B>(cols)?;
    let available = scratch.len() as u64;
    let scratch = scratch.get_mut(..need).ok_or(Error::LengthMismatch {
        expected: need as u64,
        found: available,
    })?;
    typed::matvec::<B>(w, rows, cols, x, scratch, y)
}
